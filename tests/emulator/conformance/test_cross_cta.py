"""CTAs run concurrently and synchronise through global memory: split-K / Stream-K fixups.

PTX ISA, "Memory Consistency Model": "Release and acquire patterns", "Synchronizes-with", "Causality
order" (release sequences: an atom / red continues the release sequence of its location), "Morally
strong operations", "Scope"; instruction pages ``ld`` (.acquire), ``st`` (.release), ``red`` (.release),
``fence``.  The contributing CTAs of a tile write partial sums to a fp32 workspace and signal; the owner
CTA (the last one, so that it waits only on CTAs dispatched before it) waits on the signal and adds the
partials.  Partials are small integers, so every fp32 sum is exact and the reference is numpy's integer
sum.  A CTA spinning on a flag parks until the flag changes (no instruction limit is reached)."""
import numpy as np
import pytest
from ptxkit import assert_assembles, kernel

from tvm_twill import emulator as E
from tvm_twill.emulator import findings as F

T = 64                          # threads per CTA (two warps: the signal is cumulative over a bar.sync)

# params: %rd1 in [P, T] f32, %rd2 workspace [P, T] f32, %rd3 flags [P] u32, %rd4 out [T] f32
FIXUP = """
    mov.u32 %r3, %nctaid.x;
    add.u32 %r4, %r3, -1;
    {owner}
    mad.lo.u32 %r5, %r2, {T}, %r1;
    mul.wide.u32 %rd5, %r5, 4;
    add.s64 %rd6, %rd1, %rd5;
    ld.global.f32 %f1, [%rd6];
    setp.eq.u32 %p1, %r2, %r10;
    @%p1 bra $OWNER;
    mov.u32 %r11, 0;
$WORK:
    add.u32 %r11, %r11, 1;
    setp.lt.u32 %p5, %r11, {work};
    @%p5 bra $WORK;
    add.s64 %rd7, %rd2, %rd5;
    {partial}
    bar.sync 0;
    setp.ne.u32 %p2, %r1, 0;
    @%p2 bra $DONE;
    mul.wide.u32 %rd8, %r2, 4;
    add.s64 %rd9, %rd3, %rd8;
    mov.u32 %r9, 1;
    {signal}
    bra.uni $DONE;
$OWNER:
    mov.u32 %r6, 0;
$NEXT:
    setp.ge.u32 %p3, %r6, %r3;
    @%p3 bra $STORE;
    setp.eq.u32 %p4, %r6, %r10;
    @%p4 bra $SKIP;
    setp.ne.u32 %p2, %r1, 0;
    @%p2 bra $WAITED;
    mul.wide.u32 %rd8, %r6, 4;
    add.s64 %rd9, %rd3, %rd8;
$SPIN:
    {wait}
    setp.eq.u32 %p2, %r7, 0;
    @%p2 bra $SPIN;
    {after_wait}
$WAITED:
    bar.sync 0;
    mad.lo.u32 %r8, %r6, {T}, %r1;
    mul.wide.u32 %rd10, %r8, 4;
    add.s64 %rd11, %rd2, %rd10;
    ld.global.f32 %f2, [%rd11];
    add.f32 %f1, %f1, %f2;
$SKIP:
    add.u32 %r6, %r6, 1;
    bra.uni $NEXT;
$STORE:
    mul.wide.u32 %rd12, %r1, 4;
    add.s64 %rd13, %rd4, %rd12;
    st.global.f32 [%rd13], %f1;
$DONE:"""

LAST = "mov.u32 %r10, %r4;"           # the owner is the last CTA: it waits on CTAs dispatched before it
FIRST = "mov.u32 %r10, 0;"            # the owner is CTA 0: it waits on CTAs dispatched after it
STORE = "st.global.f32 [%rd7], %f1;"
ACQUIRE = "ld.acquire.gpu.global.u32 %r7, [%rd9];"
RELEASE = "st.release.gpu.global.u32 [%rd9], %r9;"


def fixup(owner=LAST, partial=STORE, signal=RELEASE, wait=ACQUIRE, after_wait="", work=40):
    src = kernel(FIXUP.format(owner=owner, partial=partial, signal=signal, wait=wait, after_wait=after_wait,
                              work=work, T=T), nparams=4)
    assert_assembles(src)
    return src


def run(src, ctas=4, policy=None, cooperative=False, interleavings=3):
    x = (np.arange(ctas * T, dtype=np.int64) % 7 - 3).astype(np.float32).reshape(ctas, T)
    ws = np.zeros((ctas, T), np.float32)
    flags = np.zeros(ctas, np.uint32)
    out = np.zeros(T, np.float32)
    launch = E.Launch("k", (ctas, 1, 1), (T, 1, 1), 0, tuple(("buffer", i, 0) for i in range(4)),
                      cooperative=cooperative)
    report = E.run_ptx(src, [launch], x, ws, flags, out, interleavings=interleavings, policy=policy)
    expect = x.astype(np.int64).sum(0).astype(np.float32)        # exact: small integers
    return report, out, expect


def kinds(report):
    return {f.kind for f in report.findings}


@pytest.mark.parametrize("signal,wait,after_wait", [
    (RELEASE, ACQUIRE, ""),                                                      # st.release / ld.acquire
    (RELEASE, ACQUIRE + "\n    nanosleep.u32 64;", ""),                         # a polite poll
    ("red.release.gpu.global.add.u32 [%rd9], 1;", ACQUIRE, ""),                  # red.release
    ("fence.acq_rel.gpu;\n    st.relaxed.gpu.global.u32 [%rd9], %r9;",          # fence + relaxed, both sides
     "ld.relaxed.gpu.global.u32 %r7, [%rd9];", "fence.acq_rel.gpu;"),
    ("fence.acq_rel.gpu;\n    atom.relaxed.gpu.global.exch.b32 %r12, [%rd9], %r9;",
     "atom.relaxed.gpu.global.or.b32 %r7, [%rd9], 0;", "fence.acq_rel.gpu;"),  # fence + relaxed atomics
    ("membar.gl;\n    st.volatile.global.u32 [%rd9], %r9;",                     # __threadfence + volatile
     "ld.volatile.global.u32 %r7, [%rd9];", "membar.gl;"),
])
def test_a_stream_k_fixup_ordered_by_release_and_acquire_is_clean_with_exact_sums(signal, wait, after_wait):
    """Release pattern (st.release, red.release, fence + strong write) observed by an acquire pattern
    (ld.acquire, strong read + fence): the partials written before the signal happen before the owner's
    reads after the wait (PTX ISA, "Release and acquire patterns"; bar.sync carries them within the CTA)."""
    report, out, expect = run(fixup(signal=signal, wait=wait, after_wait=after_wait))
    assert report.ok, str(report)
    np.testing.assert_array_equal(out, expect)


def test_split_k_partials_accumulated_by_relaxed_atomics_and_a_release_counter_are_clean():
    """Every contributor adds its partial with red.relaxed.gpu.global.add.f32 into one workspace row, then
    increments a counter with red.release.gpu; the owner waits for the count with ld.acquire.gpu.  Each red
    on the counter continues its release sequence, so the acquire orders every contributor's adds (PTX ISA,
    "Release sequence" within "Causality order")."""
    partial = "mul.wide.u32 %rd14, %r1, 4;\n    add.s64 %rd15, %rd2, %rd14;\n    " \
        "red.relaxed.gpu.global.add.f32 [%rd15], %f1;"
    counter = "red.release.gpu.global.add.u32 [%rd3], 1;"
    body = FIXUP.replace("mul.wide.u32 %rd8, %r6, 4;\n    add.s64 %rd9, %rd3, %rd8;\n$SPIN:",
                         "mov.u64 %rd9, %rd3;\n$SPIN:")
    body = body.replace("setp.eq.u32 %p2, %r7, 0;", "setp.lt.u32 %p2, %r7, %r4;")
    body = body.replace("mad.lo.u32 %r8, %r6, {T}, %r1;", "mov.u32 %r8, %r1;")
    body = body.replace("    mov.u32 %r6, 0;\n$NEXT:", "    mov.u32 %r6, %r4;\n$NEXT:")   # one wait, one row
    body = body.replace("setp.eq.u32 %p4, %r6, %r10;\n    @%p4 bra $SKIP;", "")
    src = kernel(body.format(owner=LAST, partial=partial, signal=counter, wait=ACQUIRE, after_wait="",
                             work=40, T=T), nparams=4)
    assert_assembles(src)
    report, out, expect = run(src)
    assert report.ok, str(report)
    np.testing.assert_array_equal(out, expect)


@pytest.mark.parametrize("signal,wait", [
    ("st.global.u32 [%rd9], %r9;", ACQUIRE),                        # weak store of the flag
    ("st.relaxed.gpu.global.u32 [%rd9], %r9;", ACQUIRE),            # strong, but no release: no fence
    (RELEASE, "ld.relaxed.gpu.global.u32 %r7, [%rd9];"),            # no acquire: no fence after the read
])
def test_a_fixup_without_ordering_is_a_data_race(signal, wait):
    """Without a release pattern on the signal and an acquire pattern on the wait, the partials in the
    workspace and the owner's reads are conflicting and unordered (PTX ISA, "Data races"); a weak flag
    store also races with the owner's strong polling (not morally strong)."""
    report, _, _ = run(fixup(signal=signal, wait=wait))
    races = [f for f in report.findings if isinstance(f, F.DataRace)]
    assert races and not report.ok, str(report)
    assert any("of arg1" in f.message for f in races), str(report)      # the workspace itself


def test_waiting_on_a_cta_dispatched_later_is_a_deadlock_finding_even_when_all_are_resident():
    """CUDA guarantees no co-residency outside a cooperative launch; CTAs start in linear order, so a CTA
    may rely on CTAs before it having started, never on later ones.  CTA 0 spinning on flags that
    CTAs 1..3 set is reported as a Deadlock; the same kernel as a cooperative launch is clean."""
    src = fixup(owner=FIRST, work=200)
    report, out, expect = run(src)
    dead = [f for f in report.findings if isinstance(f, F.Deadlock)]
    assert dead and dead[0].where.cta == (0, 0, 0) and "dispatched after" in dead[0].message, str(report)
    np.testing.assert_array_equal(out, expect)             # with every CTA resident the values still come out
    report, out, _ = run(src, cooperative=True)
    assert report.ok, str(report)
    np.testing.assert_array_equal(out, expect)


def test_a_grid_that_does_not_fit_deadlocks_on_a_flag_only_a_waiting_cta_would_set():
    """One SM, one CTA at a time: CTA 0 spins on a flag CTA 1 sets, CTA 1 never starts.  The spin parks
    (it does not run into the instruction limit) and the stall is a Deadlock naming the spinning load."""
    pol = E.Policy(sm_count=1, ctas_per_sm=1, max_instructions=100_000)
    report, _, _ = run(fixup(owner=FIRST), policy=pol, interleavings=1)
    dead = [f for f in report.findings if isinstance(f, F.Deadlock)]
    assert dead and dead[0].where.cta == (0, 0, 0) and "not resident" in dead[0].message, str(report)
    assert "ld.acquire.gpu.global.u32" in dead[0].message


def test_the_strict_policy_reports_any_cross_cta_wait_outside_a_cooperative_launch():
    """Policy(strict_cross_cta=True): even a wait on an earlier CTA relies on unguaranteed scheduling
    (the CUDA Programming Guide promises co-residency only to cooperative launches)."""
    pol = E.Policy(strict_cross_cta=True)
    src = fixup(work=200)
    report, _, _ = run(src, policy=pol)
    assert "Deadlock" in kinds(report) and "cooperative" in str(report), str(report)
    report, out, expect = run(src, policy=pol, cooperative=True)
    assert report.ok, str(report)
    np.testing.assert_array_equal(out, expect)


def test_dispatch_order_and_resident_set_vary_and_stay_clean_for_a_legal_fixup():
    """A small resident set (two CTAs at once) and more CTAs than slots: the legal fixup still completes
    with exact sums, since the owner (last) waits only on CTAs that started before it."""
    report, out, expect = run(fixup(), ctas=6, policy=E.Policy(sm_count=1, ctas_per_sm=2), interleavings=4)
    assert report.ok, str(report)
    np.testing.assert_array_equal(out, expect)


def test_a_seeded_random_dispatch_order_reveals_the_fixup_relies_on_linear_dispatch():
    """Policy(dispatch='random'): each interleaving starts the CTAs in a seeded order of its own.  Nothing
    in CUDA fixes the order, so the owner may start before a contributor it waits on: that wait is reported
    (a CTA dispatched after it), while the values stay exact."""
    report, out, expect = run(fixup(work=200), policy=E.Policy(dispatch="random"), interleavings=4)
    dead = [f for f in report.findings if isinstance(f, F.Deadlock)]
    assert dead and all("dispatched after" in f.message for f in dead), str(report)
    np.testing.assert_array_equal(out, expect)
