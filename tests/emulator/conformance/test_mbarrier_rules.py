"""mbarrier rules, by the PTX ISA ("Parallel Synchronization and Communication Instructions: mbarrier":
mbarrier.init, mbarrier.arrive / arrive_drop, mbarrier.test_wait / try_wait; "Memory Consistency Model";
"fence.mbarrier_init", "fence.proxy.async").  Each case: a legal kernel, clean with numpy-checked values,
and broken variants with the named finding.  Every kernel is assembled by ptxas first."""
from __future__ import annotations

import numpy as np
from synckit import inputs, kernel, kinds, run

from tvm_twill import emulator as E

WORD = """
    mov.u32 %r20, sbuf;
    shl.b32 %r21, %r1, 2;
    add.s32 %r22, %r20, %r21;
    mov.u32 %r30, mbar;
"""
INIT_HB = WORD + """
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $I;
    mbarrier.init.shared.b64 [%r30], 64;
$I:
    bar.sync 0;
    st.shared.u32 [%r22], %r2;
    mbarrier.arrive.shared.b64 %rd10, [%r30];
$W:
    mbarrier.test_wait.parity.shared.b64 %p2, [%r30], 0;
    @!%p2 bra $W;
    xor.b32 %r23, %r21, 128;
    add.s32 %r24, %r20, %r23;
    ld.shared.u32 %r3, [%r24];
    st.global.u32 [%rd5], %r3;"""


def test_an_init_is_visible_by_happens_before_not_by_the_interleaving():
    """The init writes the object; an arrive or wait by another thread accesses it: without a bar.sync (or other
    synchronization) between them they race ("Memory Consistency Model"), whatever order they happened to run in.
    Every single interleaving of the broken kernel reports it."""
    x, out = inputs(64)
    rep = run(kernel(INIT_HB), 64, x, out, interleavings=3)
    assert rep.ok, str(rep)
    np.testing.assert_array_equal(out, x[np.arange(64) ^ 32])
    broken = kernel(INIT_HB.replace("    bar.sync 0;\n", ""))
    for seed in range(4):
        launch = E.Launch("k", (1, 1, 1), (64, 1, 1), 0, tuple(("buffer", i, 0) for i in range(4)))
        bad = E.run_ptx(broken, [launch], *inputs(64), np.zeros(4, np.uint32), np.zeros(4, np.uint32), seed=seed)
        assert "MbarrierMisuse" in kinds(bad), str(bad)


TMA_INIT = WORD + """
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $I;
    mbarrier.init.shared.b64 [%r30], 1;
    fence.mbarrier_init.release.cluster;
$I:
    bar.sync 0;
    @%p1 bra $W;
    mbarrier.arrive.expect_tx.shared.b64 _, [%r30], 128;
    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r20], [%rd1], 128, [%r30];
$W:
    mbarrier.try_wait.parity.shared.b64 %p2, [%r30], 0;
    @!%p2 bra $W;
    xor.b32 %r23, %r21, 124;
    add.s32 %r24, %r20, %r23;
    ld.shared.u32 %r3, [%r24];
    st.global.u32 [%rd5], %r3;"""


def test_a_bulk_copy_on_an_unpublished_init_is_flagged_under_the_strict_policy():
    """A bulk copy performs complete-tx on its mbarrier; the CUDA Programming Guide's TMA example fences the init
    "to make the initialized barrier visible in the async proxy" (fence.mbarrier_init.release.cluster or
    fence.proxy.async).  The PTX ISA does not say which proxy complete-tx uses; within one CTA Triton publishes
    the init with bar.sync alone.  So the default accepts a CTA barrier, and
    ``Policy(strict_mbarrier_init_fence=True)`` asks for the fence."""
    strict = E.Policy(strict_mbarrier_init_fence=True)
    for fence in ("fence.mbarrier_init.release.cluster;", "fence.proxy.async.shared::cta;"):
        x, out = inputs(32)
        rep = run(kernel(TMA_INIT.replace("fence.mbarrier_init.release.cluster;", fence), target="sm_90a"), 32, x,
                  out, policy=strict)
        assert rep.ok, (fence, str(rep))
        np.testing.assert_array_equal(out, x[31 - np.arange(32)])
    unfenced = kernel(TMA_INIT.replace("    fence.mbarrier_init.release.cluster;\n", ""), target="sm_90a")
    assert "ProxyFenceMissing" in kinds(run(unfenced, 32, *inputs(32), policy=strict))
    x, out = inputs(32)
    rep = run(unfenced, 32, x, out)
    assert rep.ok, str(rep)
    np.testing.assert_array_equal(out, x[31 - np.arange(32)])


PUBLISH = WORD + """
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $I;
    mbarrier.init.shared.b64 [%r30], 32;
$I:
    bar.sync 0;
    setp.ge.u32 %p1, %r1, 32;
    @%p1 bra $C;
    st.shared.u32 [%r22], %r2;
    mbarrier.arrive.release.cta.shared::cta.b64 %rd10, [%r30];
    bra.uni $E;
$C:
    mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 %p2, [%r30], 0;
    @!%p2 bra $C;
    sub.s32 %r24, %r22, 128;
    ld.shared.u32 %r3, [%r24];
    st.global.u32 [%rd5], %r3;
$E:"""


def test_relaxed_arrive_and_wait_order_nothing():
    """"mbarrier.arrive": .release (the default) makes the thread's earlier accesses visible to a successful
    .acquire wait of that phase; .relaxed arrive / try_wait carry no such order, so the consumer's read of data
    published that way races with the producer's write."""
    x, out = inputs(64)
    rep = run(kernel(PUBLISH, target="sm_90"), 64, x, out, interleavings=3)
    assert rep.ok, str(rep)
    np.testing.assert_array_equal(out[32:], x[:32])
    for old, new in (("arrive.release", "arrive.relaxed"), ("parity.acquire", "parity.relaxed")):
        bad = run(kernel(PUBLISH.replace(old, new), target="sm_90"), 64, *inputs(64), interleavings=3)
        assert "DataRace" in kinds(bad), (new, str(bad))


DROP = WORD + """
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $E;
    mbarrier.init.shared.b64 [%r30], 4;
    mov.u32 %r31, 2;
    mbarrier.arrive.shared.b64 %rd10, [%r30], %r31;
    mbarrier.test_wait.parity.shared.b64 %p2, [%r30], 0;
    mbarrier.arrive_drop.shared.b64 %rd11, [%r30], %r31;
    mbarrier.test_wait.parity.shared.b64 %p3, [%r30], 0;
    mbarrier.arrive.shared.b64 %rd12, [%r30], %r31;
    mbarrier.test_wait.parity.shared.b64 %p4, [%r30], 1;
    mbarrier.arrive.shared.b64 %rd13, [%r30];
    mbarrier.test_wait.parity.shared.b64 %p5, [%r30], 0;
    selp.u32 %r3, 1, 0, %p2;
    selp.u32 %r4, 2, 0, %p3;
    selp.u32 %r5, 4, 0, %p4;
    selp.u32 %r6, 8, 0, %p5;
    or.b32 %r3, %r3, %r4;
    or.b32 %r3, %r3, %r5;
    or.b32 %r3, %r3, %r6;
    st.global.u32 [%rd5], %r3;
$E:"""


def test_arrive_with_a_count_and_arrive_drop():
    """"mbarrier.arrive": an arrive-on with count lowers the pending count by count; "mbarrier.arrive_drop" also
    lowers the expected count of the following phases by count.  init 4; arrive 2 (phase 0 open); arrive_drop 2
    (phase 0 completes, the phases after expect 2); arrive 2 (phase 1 completes); arrive 1 (phase 2 open):
    the waits see 0, 1, 1, 0.  An arrive beyond the pending count is an over-arrival."""
    x, out = inputs(32)
    rep = run(kernel(DROP, target="sm_90"), 32, x, out)
    assert rep.ok, str(rep)
    assert out[0] == 0b0110 and (out[1:] == 0).all(), out[:4]
    x, out = inputs(32)
    plain = run(kernel(DROP.replace("arrive_drop", "arrive"), target="sm_90"), 32, x, out)
    assert plain.ok and out[0] == 0b1010, out[:4]           # the expected count stays 4: phase 1 stays open
    over = run(kernel(DROP.replace("mov.u32 %r31, 2;", "mov.u32 %r31, 5;"), target="sm_90"), 32, *inputs(32))
    assert "MbarrierMisuse" in kinds(over), str(over)


POLL2 = WORD + """
    add.s32 %r31, %r30, 8;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $I;
    mbarrier.init.shared.b64 [%r30], 1;
    mbarrier.init.shared.b64 [%r31], 1;
$I:
    bar.sync 0;
    setp.lt.u32 %p1, %r1, 32;
    @%p1 bra $POLL;
    setp.eq.u32 %p3, %r1, 32;
    @%p3 mbarrier.arrive.shared.b64 %rd10, [%r31];
    bra.uni $END;
$POLL:
    mbarrier.try_wait.parity.shared.b64 %p2, [%r30], 0;
    mov.u32 %r3, 1;
    @%p2 bra $GOT;
    mbarrier.try_wait.parity.shared.b64 %p2, [%r31], 0;
    mov.u32 %r3, 2;
    @%p2 bra $GOT;
    bra.uni $POLL;
$GOT:
    st.global.u32 [%rd5], %r3;
$END:"""


def test_a_warp_polling_two_barriers_that_never_complete_is_a_deadlock():
    """try_wait returning false does not block; a warp that polls two barriers in turn, neither of which can
    complete, spins forever: the emulator reports a Deadlock (not an instruction-limit error)."""
    x, out = inputs(64)
    rep = run(kernel(POLL2, target="sm_90"), 64, x, out, interleavings=3)
    assert rep.ok, str(rep)
    np.testing.assert_array_equal(out, np.r_[np.full(32, 2), np.zeros(32)])
    bad = run(kernel(POLL2.replace("    @%p3 mbarrier.arrive.shared.b64 %rd10, [%r31];\n", ""), target="sm_90"), 64,
              *inputs(64), policy=E.Policy(max_instructions=200_000))
    assert "Deadlock" in kinds(bad), str(bad)
