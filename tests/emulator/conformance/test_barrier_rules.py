"""Named barriers and the .sync warp primitives, by the PTX ISA ("Parallel Synchronization and Communication
Instructions": bar / barrier, bar.red, bar.warp.sync, shfl.sync, vote.sync, elect.sync; "Control Flow
Instructions": exit).  Each case: a legal kernel that runs clean with numpy-checked values, and broken
variants that yield the named finding.  Every kernel is assembled by ptxas first."""
from __future__ import annotations

import numpy as np
import pytest
from synckit import inputs, kernel, kinds, run

from tvm_twill import emulator as E

# %r22 = &sbuf[tid] (a word per thread)
WORD = """
    mov.u32 %r20, sbuf;
    shl.b32 %r21, %r1, 2;
    add.s32 %r22, %r20, %r21;
"""


def _exchange(barrier: str, count: str = "") -> str:
    """Each thread stores x[tid], crosses the barrier, and loads the word of thread tid ^ 32 (the other warp)."""
    return WORD + f"""
    st.shared.u32 [%r22], %r2;
    mov.u32 %r30, 64;
    {barrier} 1{count};
    xor.b32 %r23, %r21, 128;
    add.s32 %r24, %r20, %r23;
    ld.shared.u32 %r3, [%r24];
    st.global.u32 [%rd5], %r3;"""


def test_thread_count_a_multiple_of_the_warp_size_and_at_most_the_cta():
    """"bar, barrier": "When specifying a thread count, the value must be a multiple of the warp size"; the
    participating threads are the CTA's.  A count given in a register reaches ptxas unchecked."""
    x, out = inputs(64)
    ok = run(kernel(_exchange("bar.sync", ", %r30")), 64, x, out)
    assert ok.ok, str(ok)
    np.testing.assert_array_equal(out, x[np.arange(64) ^ 32])
    for bad in ("mov.u32 %r30, 48;", "mov.u32 %r30, 96;", "mov.u32 %r30, 0;"):
        ptx = kernel(_exchange("bar.sync", ", %r30")).replace("mov.u32 %r30, 64;", bad)
        assert "BarrierMismatch" in kinds(run(ptx, 64, *inputs(64))), bad


DIVERGENT = WORD + """
    st.shared.u32 [%r22], %r2;
    and.b32 %r5, %r1, 31;
    setp.lt.u32 %p1, %r5, 16;
    @%p1 bra $A;
    barrier.sync 0;
    bra.uni $J;
$A:
    barrier.sync 0;
$J:
    xor.b32 %r23, %r21, 128;
    add.s32 %r24, %r20, %r23;
    ld.shared.u32 %r3, [%r24];
    st.global.u32 [%rd5], %r3;"""


def test_non_aligned_barrier_in_divergent_code_is_legal_aligned_is_not():
    """"bar, barrier": a non-.aligned barrier may be executed in divergent code (the thread waits for the
    non-exited threads of its warp); .aligned requires every thread of the warp to execute the same one."""
    x, out = inputs(64)
    rep = run(kernel(DIVERGENT), 64, x, out, interleavings=3)
    assert rep.ok, str(rep)
    np.testing.assert_array_equal(out, x[np.arange(64) ^ 32])
    bad = run(kernel(DIVERGENT.replace("barrier.sync 0;", "barrier.sync.aligned 0;")), 64, *inputs(64))
    assert "BarrierMismatch" in kinds(bad), str(bad)
    bad = run(kernel(DIVERGENT.replace("barrier.sync 0;", "bar.sync 0;")), 64, *inputs(64))
    assert "BarrierMismatch" in kinds(bad), str(bad)


EXITS = WORD + """
    setp.ge.u32 %p1, %r1, 40;
    @%p1 bra $OUT;
    st.shared.u32 [%r22], %r2;
    bar.sync 0;
    add.s32 %r25, %r1, 16;
    rem.u32 %r25, %r25, 40;
    shl.b32 %r26, %r25, 2;
    add.s32 %r24, %r20, %r26;
    ld.shared.u32 %r3, [%r24];
    st.global.u32 [%rd5], %r3;
$OUT:"""


def test_a_cta_wide_barrier_waits_only_for_threads_that_have_not_exited():
    """"exit": "As threads exit, barriers waiting on all threads are checked to see if the exiting threads are
    the only threads that have not yet made it to a barrier ... for all threads in the CTA ... the barrier is
    released."  nvcc's ``if (t >= n) return; ... __syncthreads();`` with n = 40 of 96 threads: warp 1 partly and
    warp 2 wholly exited.  A barrier with an explicit thread count is not released by exits: a deadlock."""
    x, out = inputs(96)
    rep = run(kernel(EXITS), 96, x, out, interleavings=3)
    assert rep.ok, str(rep)
    t = np.arange(40)
    np.testing.assert_array_equal(out[:40], x[(t + 16) % 40])
    assert (out[40:] == 0).all()
    bad = run(kernel(EXITS.replace("bar.sync 0;", "bar.sync 0, 96;")), 96, *inputs(96))
    assert "Deadlock" in kinds(bad), str(bad)


def _masked(op: str) -> str:
    return kernel(WORD + f"""
    and.b32 %r5, %r1, 31;
    setp.lt.u32 %p1, %r5, 16;
    mov.u32 %r40, 0x0000ffff;
    @!%p1 bra $J;
    {op}
$J:
    st.global.u32 [%rd5], %r3;""", target="sm_90")


MASKED = {
    "shfl.sync": ("shfl.sync.idx.b32 %r3, %r2, 3, 31, %r40;", lambda x: np.where(np.arange(32) < 16, x[3], 0)),
    "vote.sync.ballot": ("setp.ne.u32 %p2, %r5, 7;\n    vote.sync.ballot.b32 %r3, %p2, %r40;",
                         lambda x: np.where(np.arange(32) < 16, 0xFFFF & ~(1 << 7), 0)),
    "elect.sync": ("elect.sync %r3|%p3, %r40;", lambda x: np.where(np.arange(32) < 16, 0, 0)),
    "bar.warp.sync": ("bar.warp.sync %r40;\n    mov.u32 %r3, %r5;", lambda x: np.where(np.arange(32) < 16,
                                                                                      np.arange(32), 0)),
}


@pytest.mark.parametrize("name", list(MASKED))
def test_membermask_names_exactly_the_executing_lanes(name):
    """shfl.sync / vote.sync / elect.sync / bar.warp.sync: "The behavior ... is undefined if the executing thread
    is not in the membermask", and the instruction waits for every non-exited thread of membermask to execute
    it.  Lanes 0..15 execute it: membermask 0xffff is legal; 0xff leaves executing lanes out, 0xffffffff names
    lanes that never execute it."""
    op, want = MASKED[name]
    x, out = inputs(32)
    rep = run(_masked(op), 32, x, out)
    assert rep.ok, str(rep)
    np.testing.assert_array_equal(out, np.asarray(want(x), np.uint64).astype(np.uint32))
    for mask in ("0x000000ff", "0xffffffff"):
        bad = run(_masked(op).replace("0x0000ffff", mask), 32, *inputs(32))
        assert "BarrierMismatch" in kinds(bad), (mask, str(bad))


ELECT = """
    and.b32 %r5, %r1, 31;
    elect.sync %r6|%p1, -1;
    elect.sync %r7|%p2, -1;
    mov.u32 %r20, sbuf;
    @%p1 st.shared.u32 [%r20], %r2;
    bar.warp.sync -1;
    ld.shared.u32 %r3, [%r20];
    setp.eq.u32 %p3, %r6, %r7;
    selp.u32 %r8, 1, 0, %p3;
    shfl.sync.idx.b32 %r9, %r2, %r6, 31, -1;
    st.global.u32 [%rd5], %r3;
    add.s64 %rd8, %rd3, %rd6;
    st.global.u32 [%rd8], %r8;
    add.s64 %rd9, %rd4, %rd6;
    st.global.u32 [%rd9], %r9;"""


def test_elect_sync_elects_the_same_leader_for_the_same_mask_and_a_policy_moves_it():
    """"elect.sync": "the same leader thread is elected for the same membermask every time"; which lane is
    left open.  The leader stores its x; code reading the leader's lane from elect's result is right under any
    choice (%r9), code assuming lane 0 (x[0]) is wrong once ``Policy(elect="highest")`` elects lane 31."""
    for policy, leader in ((None, 0), (E.Policy(elect="highest"), 31)):
        x, out = inputs(32)
        same, via = np.zeros(32, np.uint32), np.zeros(32, np.uint32)
        rep = run(kernel(ELECT, target="sm_90"), 32, x, out, same, via, policy=policy)
        assert rep.ok, str(rep)
        assert (same == 1).all()                                 # the same leader both times
        np.testing.assert_array_equal(out, np.full(32, x[leader]))
        np.testing.assert_array_equal(via, np.full(32, x[leader]))
    assert x[31] != x[0]        # so an "assume lane 0" kernel reads the wrong value under the strict policy


RED = """
    and.b32 %r5, %r2, 1;
    setp.eq.u32 %p1, %r5, 1;
    setp.lt.u32 %p2, %r1, 40;
    bar.red.popc.u32 %r3, 2, %p1;
    bar.red.and.pred %p3, 3, %p2;
    bar.red.or.pred %p4, 4, %p2;
    bar.red.and.pred %p5, 5, !%p2;
    bar.red.or.pred %p6, 6, !%p2;
    mov.u32 %r30, 64;
    bar.red.popc.u32 %r7, 7, %r30, !%p1;
    selp.u32 %r8, 1, 0, %p3;
    selp.u32 %r9, 2, 0, %p4;
    selp.u32 %r10, 4, 0, %p5;
    selp.u32 %r11, 8, 0, %p6;
    or.b32 %r8, %r8, %r9;
    or.b32 %r8, %r8, %r10;
    or.b32 %r8, %r8, %r11;
    st.global.u32 [%rd5], %r3;
    add.s64 %rd8, %rd3, %rd6;
    st.global.u32 [%rd8], %r8;
    add.s64 %rd9, %rd4, %rd6;
    st.global.u32 [%rd9], %r7;"""


def test_bar_red_popc_and_or_deliver_the_reduction_to_every_thread():
    """"bar.red": popc counts the threads whose predicate is true; and / or reduce it over every thread of the
    participating warps; the result reaches every thread.  Mixing bar.red with bar.sync on one barrier is a
    BarrierMismatch."""
    x, out = inputs(64)
    flags, popc2 = np.zeros(64, np.uint32), np.zeros(64, np.uint32)
    rep = run(kernel(RED), 64, x, out, flags, popc2)
    assert rep.ok, str(rep)
    odd = int((x & 1).sum())
    np.testing.assert_array_equal(out, np.full(64, odd))
    np.testing.assert_array_equal(popc2, np.full(64, 64 - odd))
    np.testing.assert_array_equal(flags, np.full(64, 0 | 2 | 0 | 8))     # some < 40, some >= 40
    mixed = RED.replace("setp.lt.u32 %p2, %r1, 40;", "setp.lt.u32 %p2, %r1, 40;\n    setp.ge.u32 %p7, %r1, 32;\n"
                        "    @%p7 bra $S;").replace("    bar.red.and.pred %p3, 3, %p2;",
                                                    "$S:\n    bar.sync 2;\n    bar.red.and.pred %p3, 3, %p2;")
    bad = run(kernel(mixed), 64, *inputs(64), np.zeros(64, np.uint32), np.zeros(64, np.uint32))
    assert "BarrierMismatch" in kinds(bad), str(bad)
