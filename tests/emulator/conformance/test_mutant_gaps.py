"""Two emulator gaps the mutation benchmark (bench/emulator_mutants.py) exposed, each with a legal kernel that
must stay clean and, for the missed bug, a broken one that must be caught (all assembled by ptxas).

* "mbarrier.expect_tx" / "Completion mechanisms for asynchronous copy operations": a phase completes when its
  pending arrivals and its tx-count reach zero.  An expect_tx below the bytes its copies bring completes the
  phase after the first copy; the second is still in flight when the waiters read its bytes.  The emulator used
  to complete every copy a blocked waiter needed at once, so it never let the early phase through.
* "cp.async.mbarrier.arrive": the arrive tracks all prior cp.async operations of the thread.  A copy that had
  already completed (``Policy(completion='random')``) when the arrive executed was left out, and its bytes were
  never made visible: a false ``AsyncReadBeforeWait`` in the consumer (seen on the project's WS sm_80 GEMM).
"""
from __future__ import annotations

import numpy as np
from synckit import inputs, kernel, kinds, run

from tvm_twill import emulator as E

TWO_COPIES = """
    mov.u32 %r20, sbuf;
    mov.u32 %r30, mbar;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $I;
    mbarrier.init.shared.b64 [%r30], 1;
    fence.mbarrier_init.release.cluster;
$I:
    bar.sync 0;
    @%p1 bra $W;
    mbarrier.arrive.expect_tx.shared.b64 _, [%r30], TX;
    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r20], [%rd1], 64, [%r30];
    add.s32 %r25, %r20, 64;
    add.s64 %rd8, %rd1, 64;
    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r25], [%rd8], 64, [%r30];
$W:
    mbarrier.try_wait.parity.shared.b64 %p2, [%r30], 0;
    @!%p2 bra $W;
    shl.b32 %r21, %r1, 2;
    xor.b32 %r23, %r21, 124;
    add.s32 %r24, %r20, %r23;
    ld.shared.u32 %r3, [%r24];
    st.global.u32 [%rd5], %r3;"""


def test_an_expect_tx_below_the_copies_bytes_lets_the_waiters_read_a_copy_in_flight():
    x, out = inputs(32)
    rep = run(kernel(TWO_COPIES.replace("TX", "128"), target="sm_90a"), 32, x, out, interleavings=3)
    assert rep.ok, str(rep)
    np.testing.assert_array_equal(out, x[31 - np.arange(32)])
    short = kernel(TWO_COPIES.replace("TX", "64"), target="sm_90a")
    for seed in range(3):
        launch = E.Launch("k", (1, 1, 1), (32, 1, 1), 0, tuple(("buffer", i, 0) for i in range(4)))
        bad = E.run_ptx(short, [launch], *inputs(32), np.zeros(4, np.uint32), np.zeros(4, np.uint32), seed=seed)
        assert kinds(bad) & {"AsyncReadBeforeWait", "PoisonUse", "DataRace"}, str(bad)


ARRIVE = """
    mov.u32 %r20, sbuf;
    mov.u32 %r30, mbar;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $I;
    mbarrier.init.shared.b64 [%r30], 32;
$I:
    bar.sync 0;
    and.b32 %r4, %r1, 31;
    shl.b32 %r21, %r4, 2;
    add.s32 %r22, %r20, %r21;
    setp.ge.u32 %p3, %r1, 32;
    @%p3 bra $C;
    cp.async.ca.shared.global [%r22], [%rd7], 4;
    cp.async.mbarrier.arrive.noinc.shared.b64 [%r30];
    bra.uni $E;
$C:
    mbarrier.test_wait.parity.shared.b64 %p2, [%r30], 0;
    @!%p2 bra $C;
    ld.shared.u32 %r3, [%r22];
    st.global.u32 [%rd5], %r3;
$E:"""


def test_a_cp_async_that_completed_before_its_mbarrier_arrive_is_published_by_it():
    """Copies complete at random moments (one instruction per slice, so often between the copy and the arrive);
    the consumer warp reads what the producer warp's copies brought: clean, x[tid - 32]."""
    ptx = kernel(ARRIVE)
    policy = E.Policy(completion="random", slice=1)
    for seed in range(6):
        x, out = inputs(64)
        launch = E.Launch("k", (1, 1, 1), (64, 1, 1), 0, tuple(("buffer", i, 0) for i in range(4)))
        rep = E.run_ptx(ptx, [launch], x, out, np.zeros(4, np.uint32), np.zeros(4, np.uint32), seed=seed,
                        policy=policy)
        assert rep.ok, (seed, str(rep))
        np.testing.assert_array_equal(out[32:], x[:32])
    x, out = inputs(64)
    assert run(ptx, 64, x, out).ok                  # and assembled by ptxas
