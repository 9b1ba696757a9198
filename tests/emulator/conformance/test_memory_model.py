"""The PTX memory consistency model on global memory: qualifiers, morally strong accesses, mixed-size
races, weak / atomic races, benign same-value races, release / acquire between warps, fences, and the
read-only (``ld.global.nc``) rule.

PTX ISA sections: "Memory Consistency Model" ("Operation types", "Scope", "Morally strong operations",
"Conflict and Data-races", "Mixed-size data-races", "Release and acquire patterns", "Fence-SC order",
"Causality order"); instruction pages ``ld``, ``st``, ``atom``, ``red``, ``membar`` / ``fence``.  The
read-only rule: CUDA Programming Guide, "Read-Only Data Cache Load Function" (``__ldg``)."""
import numpy as np
import pytest
from ptxkit import assert_assembles, kernel, ptxas_accepts

from tvm_twill import emulator as E
from tvm_twill.emulator import findings as F
from tvm_twill.errors import EmulationError

ONLY_LANE0 = "    setp.ne.u32 %p1, %r1, 0;\n    @%p1 bra $END;\n"


def run(body, ctas=2, threads=32, policy=None, x=None, interleavings=4, arch="sm_80"):
    src = kernel(body + "\n$END:", arch=arch)
    assert_assembles(src, arch)
    x = np.arange(64, dtype=np.uint32) if x is None else x
    out = np.zeros(64, np.uint32)
    launch = E.Launch("k", (ctas, 1, 1), (threads, 1, 1), 0, (("buffer", 0, 0), ("buffer", 1, 0)))
    return E.run_ptx(src, [launch], x, out, interleavings=interleavings, policy=policy), out


def of(report, cls):
    return [f for f in report.findings if type(f) is cls]


# ---------------------------------------------------------------- 1. qualifiers
ILLEGAL = [
    "ld.release.gpu.global.u32 %r3, [%rd1];",          # ld has no release
    "ld.acq_rel.gpu.global.u32 %r3, [%rd1];",
    "st.acquire.gpu.global.u32 [%rd1], %r3;",          # st has no acquire
    "red.acquire.gpu.global.add.u32 [%rd1], 1;",       # red: relaxed / release only
    "red.acq_rel.gpu.global.add.u32 [%rd1], 1;",
    "ld.acquire.global.u32 %r3, [%rd1];",              # ld / st .relaxed / .acquire / .release need a scope
    "ld.relaxed.global.u32 %r3, [%rd1];",
    "st.release.global.u32 [%rd1], %r3;",
    "ld.volatile.gpu.global.u32 %r3, [%rd1];",         # .volatile takes no scope
    "ld.weak.gpu.global.u32 %r3, [%rd1];",
    "ld.acquire.gpu.global.nc.u32 %r3, [%rd1];",       # .nc loads are weak
    "atom.volatile.global.add.u32 %r3, [%rd1], 1;",
    "atom.sc.gpu.global.add.u32 %r3, [%rd1], 1;",
    "ld.relaxed.gpu.local.u32 %r3, [%rd1];",            # no strong access to .local
    "membar.gpu;",
    "fence.sc;",                                        # fence needs a scope
]
LEGAL = [
    "ld.relaxed.gpu.global.u32 %r3, [%rd1];", "ld.acquire.cta.global.u32 %r3, [%rd1];",
    "ld.acquire.sys.u32 %r3, [%rd1];", "ld.volatile.global.u32 %r3, [%rd1];",
    "ld.weak.global.u32 %r3, [%rd1];", "ld.global.nc.u32 %r3, [%rd1];",
    "st.release.gpu.global.u32 [%rd2], %r3;", "st.relaxed.sys.global.u32 [%rd2], %r3;",
    "st.volatile.global.u32 [%rd2], %r3;", "atom.acquire.global.add.u32 %r3, [%rd2], 1;",
    "atom.acq_rel.gpu.global.add.u32 %r3, [%rd2], 1;", "atom.release.cluster.global.add.u32 %r3, [%rd2], 1;",
    "red.release.gpu.global.add.u32 [%rd2], 1;", "red.relaxed.cta.global.add.u32 [%rd2], 1;",
    "fence.sc.gpu;", "fence.acq_rel.cta;", "fence.gpu;", "membar.cta;", "membar.gl;", "membar.sys;",
]


@pytest.mark.parametrize("line", ILLEGAL)
def test_a_sem_or_scope_the_isa_does_not_allow_is_refused_at_load_as_ptxas_refuses_it(line):
    """PTX ISA, ld / st / atom / red / membar syntax: the semantics each instruction takes and the scope
    they need.  The emulator refuses the form when the kernel is loaded, in one line naming it."""
    src = kernel("    mov.u32 %r3, 0;\n    " + line, arch="sm_90a")
    with pytest.raises(EmulationError, match=r"PTX line \d+"):
        E.load_ptx(src)
    assert ptxas_accepts(src, "sm_90a") in (None, False)


@pytest.mark.parametrize("line", LEGAL)
def test_every_legal_sem_and_scope_loads_and_assembles(line):
    src = kernel("    mov.u32 %r3, 0;\n    " + line, arch="sm_90a")
    assert E.load_ptx(src) == ["k"]
    assert ptxas_accepts(src, "sm_90a") in (None, True)


# ---------------------------------------------------------------- 2. races
STORE_CTA = "    st.{q}global.u32 [%rd2], %r2;\n"
LOAD_1 = "    ld.{q}global.u32 %r3, [%rd2+4];\n"


@pytest.mark.parametrize("q,clean", [("relaxed.gpu.", True), ("relaxed.sys.", True), ("volatile.", True),
                                     ("relaxed.cta.", False), ("relaxed.cluster.", False), ("", False)])
def test_strong_stores_of_two_ctas_to_one_word_are_morally_strong_only_at_gpu_scope(q, clean):
    """"Morally strong operations": both strong, each one's scope includes the other thread (.cta and, in
    a launch without clusters, .cluster include only threads of their own CTA), overlapping completely."""
    report, out = run(ONLY_LANE0 + STORE_CTA.format(q=q), interleavings=1, arch="sm_90a")   # .cluster: sm_90
    assert out[0] in (0, 1)
    assert report.ok == clean, str(report)
    if not clean:
        assert of(report, F.DataRace), str(report)


def test_strong_accesses_overlapping_in_part_are_a_mixed_size_race():
    """"Mixed-size data-races": strong accesses that overlap but not completely are not morally strong."""
    body = ONLY_LANE0 + """    setp.eq.u32 %p2, %r2, 0;
    @%p2 st.relaxed.gpu.global.u32 [%rd2], %r2;
    cvt.u64.u32 %rd3, %r2;
    @!%p2 st.relaxed.gpu.global.u64 [%rd2], %rd3;
"""
    report, _ = run(body)
    mixed = of(report, E.MixedSizeRace)
    assert mixed and isinstance(mixed[0], F.DataRace) and "in part" in mixed[0].message, str(report)
    report, _ = run(body.replace(".u32 [%rd2], %r2", ".u64 [%rd2], %rd3"), interleavings=1)   # same extent
    assert report.ok, str(report)


def test_a_weak_store_and_an_atomic_of_another_cta_race_and_two_atomics_do_not():
    """"Conflict and Data-races": an atomic is strong, a plain store weak: not morally strong, unordered ->
    a data race (whichever comes first).  Atomics of two CTAs at .gpu scope are morally strong."""
    body = ONLY_LANE0 + """    setp.eq.u32 %p2, %r2, 0;
    @%p2 st.global.u32 [%rd2], %r2;
    @!%p2 atom.global.add.u32 %r3, [%rd2], 5;
"""
    report, _ = run(body)
    assert of(report, F.DataRace), str(report)
    report, out = run(ONLY_LANE0 + "    atom.global.add.u32 %r3, [%rd2], 5;\n", ctas=3)
    assert report.ok and out[0] == 15, str(report)
    report, _ = run(ONLY_LANE0 + "    atom.cta.global.add.u32 %r3, [%rd2], 5;\n")    # .cta: not across CTAs
    assert of(report, F.DataRace), str(report)


MP = """    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $END;
    setp.ne.u32 %p2, %r2, 0;
    @%p2 bra $CONSUMER;
    mov.u32 %r4, 77;
    st.global.u32 [%rd2+8], %r4;
    {release}
    mov.u32 %r5, 1;
    {signal}
    bra.uni $END;
$CONSUMER:
$SPIN:
    {wait}
    setp.eq.u32 %p3, %r6, 0;
    @%p3 bra $SPIN;
    {acquire}
    ld.global.u32 %r7, [%rd2+8];
    st.global.u32 [%rd2+12], %r7;
"""


@pytest.mark.parametrize("release,signal,wait,acquire", [
    ("", "st.release.gpu.global.u32 [%rd2+4], %r5;", "ld.acquire.gpu.global.u32 %r6, [%rd2+4];", ""),
    ("membar.gl;", "st.volatile.global.u32 [%rd2+4], %r5;", "ld.volatile.global.u32 %r6, [%rd2+4];",
     "membar.gl;"),
    ("fence.sc.gpu;", "st.relaxed.gpu.global.u32 [%rd2+4], %r5;", "ld.relaxed.gpu.global.u32 %r6, [%rd2+4];",
     "fence.sc.gpu;"),
    ("", "atom.release.gpu.global.exch.b32 %r9, [%rd2+4], %r5;",
     "atom.acquire.gpu.global.or.b32 %r6, [%rd2+4], 0;", ""),
])
def test_message_passing_between_ctas_is_ordered_by_release_and_acquire_patterns(release, signal, wait, acquire):
    """"Release and acquire patterns": CTA 0 writes data, then releases a flag; CTA 1 acquires the flag, then
    reads the data: ordered, and it reads 77.  Without the acquire half the data read races."""
    report, out = run(MP.format(release=release, signal=signal, wait=wait, acquire=acquire))
    assert report.ok and out[3] == 77, str(report)
    weak_wait = wait.replace("acquire", "relaxed")
    report, _ = run(MP.format(release=release, signal=signal, wait=weak_wait, acquire=""))
    assert [f for f in of(report, F.DataRace) if "byte 8 " in f.message], str(report)


def test_release_and_acquire_order_warps_of_one_cta_through_global_memory():
    """The same patterns between two warps of one CTA (no bar.sync): the acquire joins the releaser's
    clock into the reader's."""
    body = MP.replace("setp.ne.u32 %p1, %r1, 0;\n    @%p1 bra $END;\n    setp.ne.u32 %p2, %r2, 0;",
                      "and.b32 %r8, %r1, 31;\n    setp.ne.u32 %p1, %r8, 0;\n    @%p1 bra $END;\n"
                      "    setp.ne.u32 %p2, %r1, 0;")
    sig, wait = "st.release.cta.global.u32 [%rd2+4], %r5;", "ld.acquire.cta.global.u32 %r6, [%rd2+4];"
    report, out = run(body.format(release="", signal=sig, wait=wait, acquire=""), ctas=1, threads=64)
    assert report.ok and out[3] == 77, str(report)
    report, _ = run(body.format(release="", signal=sig, wait=wait.replace("acquire", "relaxed"), acquire=""),
                    ctas=1, threads=64)
    assert of(report, F.DataRace), str(report)


# ---------------------------------------------------------------- 3. ld.global.nc
def test_writing_memory_that_ld_global_nc_reads_in_the_same_kernel_is_a_finding():
    """CUDA Programming Guide, read-only data cache: the data ``ld.global.nc`` reads must not be written
    while the kernel runs (by any thread, ordered or not)."""
    body = "    mul.wide.u32 %rd3, %r1, 4;\n    add.s64 %rd4, {buf}, %rd3;\n    ld.global.nc.u32 %r3, [%rd4];\n" \
        "    add.u32 %r3, %r3, 1;\n    bar.sync 0;\n    st.global.u32 [%rd4], %r3;\n"
    report, out = run(body.format(buf="%rd2"), ctas=1)
    assert of(report, E.ReadOnlyViolation) and not report.ok, str(report)
    report, out = run(body.format(buf="%rd1").replace("st.global.u32 [%rd4]", "add.s64 %rd5, %rd2, %rd3;\n"
                                                      "    st.global.u32 [%rd5]"), ctas=1)
    assert report.ok and (out[:32] == np.arange(32) + 1).all(), str(report)


# ---------------------------------------------------------------- 6. benign races (issue #34 item 8)
def test_unordered_stores_of_the_same_value_width_and_address_are_a_benign_race_not_counted_by_default():
    """"Conflict and Data-races": two weak stores of 7 to one word race; every read ordered after both sees
    7 whichever comes last (same bytes, same width: no tearing), so the class is ``BenignRace``, kept out
    of ``Report.ok`` unless ``Policy(strict_benign_races=True)``.  In CUDA C++ the same race is undefined
    behaviour."""
    same = ONLY_LANE0 + "    mov.u32 %r3, 7;\n    st.global.u32 [%rd2], %r3;\n"
    report, out = run(same)
    assert report.ok and of(report, E.BenignRace) and out[0] == 7, str(report)
    assert not of(report, F.DataRace)
    report, _ = run(same, policy=E.Policy(strict_benign_races=True))
    assert not report.ok and of(report, E.BenignRace)
    report, _ = run(same.replace("%r3, 7;", "%r3, %r2;"))              # different values: a data race
    assert of(report, F.DataRace), str(report)
    width = same + "    cvt.u16.u32 %h1, %r3;\n    st.global.u16 [%rd2+4], %h1;\n"      # u16 stores of 7: benign
    mixed = ONLY_LANE0 + """    mov.u32 %r3, 0;
    setp.eq.u32 %p2, %r2, 0;
    @%p2 st.global.u32 [%rd2], %r3;
    mov.u16 %h1, 0;
    @!%p2 st.global.u16 [%rd2], %h1;
"""
    report, _ = run(mixed)                                             # same value, different widths
    assert of(report, F.DataRace), str(report)
    report, _ = run(width)
    assert report.ok, str(report)


def test_an_unordered_read_of_benignly_raced_bytes_still_races():
    body = ONLY_LANE0 + """    mov.u32 %r3, 7;
    st.global.u32 [%rd2], %r3;
    setp.ne.u32 %p2, %r2, 1;
    @%p2 bra $END;
    ld.global.u32 %r4, [%rd2];
    st.global.u32 [%rd2+64], %r4;
"""
    report, _ = run(body, ctas=3)
    assert [f for f in of(report, F.DataRace) if "read" in f.message], str(report)


# ---------------------------------------------------------------- shared memory
SHARED_MP = """    .shared .align 4 .b8 buf[64];
    mov.u32 %r20, buf;
    and.b32 %r8, %r1, 31;
    setp.ne.u32 %p1, %r8, 0;
    @%p1 bra $END;
    setp.ne.u32 %p2, %r1, 0;
    @%p2 bra $CONSUMER;
    mov.u32 %r4, 77;
    st.shared.u32 [%r20+8], %r4;
    {release}
    mov.u32 %r5, 1;
    {signal}
    bra.uni $END;
$CONSUMER:
$SPIN:
    {wait}
    setp.eq.u32 %p3, %r6, 0;
    @%p3 bra $SPIN;
    {acquire}
    ld.shared.u32 %r7, [%r20+8];
    st.global.u32 [%rd2+12], %r7;
"""


@pytest.mark.parametrize("release,signal,wait,acquire", [
    ("", "st.release.cta.shared.u32 [%r20+4], %r5;", "ld.acquire.cta.shared.u32 %r6, [%r20+4];", ""),
    ("fence.acq_rel.cta;", "st.volatile.shared.u32 [%r20+4], %r5;", "ld.volatile.shared.u32 %r6, [%r20+4];",
     "fence.acq_rel.cta;"),
])
def test_a_flag_in_shared_memory_orders_two_warps_by_release_and_acquire(release, signal, wait, acquire):
    """The same patterns on shared memory between two warps of a CTA: the strong flag accesses are morally
    strong (every scope includes the CTA), the data is ordered; the poll parks until the flag changes.  A
    weak flag store races with the strong poll, and without the acquire half the data read races."""
    init = "    mov.u32 %r9, 0;\n    setp.eq.u32 %p6, %r1, 0;\n    @%p6 st.shared.u32 [%r20+4], %r9;\n    bar.sync 0;\n"
    body = SHARED_MP.replace("    and.b32 %r8", init + "    and.b32 %r8")
    report, out = run(body.format(release=release, signal=signal, wait=wait, acquire=acquire), ctas=1, threads=64)
    assert report.ok and out[3] == 77, str(report)
    weak_signal = "st.shared.u32 [%r20+4], %r5;"
    report, _ = run(body.format(release="", signal=weak_signal, wait=wait, acquire=acquire), ctas=1, threads=64)
    assert [f for f in of(report, F.DataRace) if "shared byte 4" in f.message], str(report)
    report, _ = run(body.format(release=release, signal=signal, wait=wait.replace("acquire", "relaxed"),
                                acquire=""), ctas=1, threads=64)
    assert [f for f in of(report, F.DataRace) if "shared byte 8" in f.message], str(report)
