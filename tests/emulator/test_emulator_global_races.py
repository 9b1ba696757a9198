"""Data races on global memory: warps of a CTA not ordered by a barrier, and CTAs of one launch.

Tiny PTX kernels pin the rule (what races, what does not: distinct bytes, read-only inputs, atomics,
accesses ordered by bar.sync, accesses of one warp, separate launches); planted bugs in the CUDA source
of a TVM-built elementwise kernel (``run(..., source=...)``, compiled by nvcc) must be reported naming the
kernel, the CTA, the warp, the lanes, the PTX line and the CUDA line of the planted statement, while the
unmodified kernel and a correctly synchronised variant report nothing."""
import re
import shutil

import numpy as np
import pytest

from tvm_twill import emulator as E
from tvm_twill.emulator import findings as F

HEAD = ".version 8.7\n.target sm_80\n.address_size 64\n"


def kernel(body, nparams=2):
    params = ",\n".join(f"    .param .u64 k_param_{i}" for i in range(nparams))
    return (f"{HEAD}.visible .entry k(\n{params}\n)\n{{\n    .reg .pred %p<8>;\n    .reg .b32 %r<40>;\n"
            f"    .reg .b64 %rd<16>;\n    ld.param.u64 %rd1, [k_param_0];\n    ld.param.u64 %rd2, [k_param_1];\n"
            f"    mov.u32 %r1, %tid.x;\n    mov.u32 %r2, %ctaid.x;\n{body}\n    ret;\n}}\n")


def run(body, threads=64, ctas=1, launches=1, interleavings=4):
    launch = E.Launch("k", (ctas, 1, 1), (threads, 1, 1), 0, (("buffer", 0, 0), ("buffer", 1, 0)))
    x = np.arange(256, dtype=np.uint32)
    out = np.zeros(256, np.uint32)
    return E.run_ptx(kernel(body), [launch] * launches, x, out, interleavings=interleavings), out


def races(report):
    return [f for f in report.findings if isinstance(f, F.DataRace)]


# %r5 = lane-independent word index chosen by the body, %rd4 = &out[%r5]
AT = "    mul.wide.u32 %rd3, {i}, 4;\n    add.s64 %rd4, %rd2, %rd3;\n"


def test_two_warps_storing_the_same_word_race_and_the_finding_names_both():
    report, _ = run(AT.format(i="%r2") + "    st.global.u32 [%rd4], %r1;")
    found = races(report)
    assert found and not report.ok, str(report)
    f = found[0]
    assert f.where.kernel == "k" and f.where.cta == (0, 0, 0) and f.where.warp in (0, 1)
    assert f.where.lanes == tuple(range(32)) and f.where.ptx_line > 0
    assert f.other[0] == 1 - f.where.warp and f.other[1] == f.where.ptx_line and f.other[3] == "write"
    assert "global byte 0 of arg1" in f.message and f.address > 0


def test_a_store_read_by_another_warp_races_without_bar_sync_and_not_with_it():
    body = AT.format(i="%r1") + """
    st.global.u32 [%rd4], %r1;
    {sync}
    xor.b32 %r6, %r1, 32;
    mul.wide.u32 %rd5, %r6, 4;
    add.s64 %rd6, %rd2, %rd5;
    ld.global.u32 %r7, [%rd6];
    add.s64 %rd7, %rd1, %rd3;
    st.global.u32 [%rd7], %r7;"""
    report, _ = run(body.format(sync=""))
    kinds = {f.other[3] for f in races(report)}
    assert kinds and kinds <= {"write", "read"}, str(report)
    report, _ = run(body.format(sync="bar.sync 0;"))
    assert report.ok, str(report)


def test_distinct_words_read_only_inputs_one_warp_atomics_and_separate_launches_do_not_race():
    own = AT.format(i="%r1") + "    ld.global.u32 %r3, [%rd1];\n    st.global.u32 [%rd4], %r3;"
    report, out = run(own, ctas=1, launches=2)                  # distinct words; every warp reads x[0]
    assert report.ok, str(report)
    one_warp = AT.format(i="%r2") + "    st.global.u32 [%rd4], %r1;\n    ld.global.u32 %r3, [%rd4];\n" \
        "    st.global.u32 [%rd4], %r3;"
    report, _ = run(one_warp, threads=32)                       # lanes of one warp: ordered
    assert report.ok, str(report)
    atomics = "    red.global.add.u32 [%rd2], %r1;\n    atom.global.max.u32 %r3, [%rd2+4], %r1;"
    report, out = run(atomics, ctas=3)
    assert report.ok and out[0] == 3 * sum(range(64)) and out[1] == 63, str(report)


def test_ctas_of_a_launch_are_not_ordered():
    body = AT.format(i="0") + "    setp.ne.u32 %p1, %r1, 0;\n    @%p1 bra $END;\n    st.global.u32 [%rd4], %r2;\n$END:"
    report, _ = run(body, ctas=2)
    found = races(report)
    assert found and found[0].where.cta == (1, 0, 0) and found[0].where.lanes == (0,), str(report)
    assert "CTA (0, 0, 0) warp 0" in found[0].message and "not ordered" in found[0].message
    read_back = AT.format(i="%r2") + "    st.global.u32 [%rd4], %r1;\n    ld.global.u32 %r3, [%rd2];"
    report, _ = run(read_back, threads=32, ctas=2)              # CTA 1 reads the word CTA 0 wrote
    assert any(f.where.cta == (1, 0, 0) for f in races(report)), str(report)
    report, _ = run(body, ctas=1, launches=2)                   # two launches of one CTA: ordered
    assert report.ok, str(report)


# ---------------------------------------------------------------- planted bugs in TVM-built CUDA
N, THREADS = 512, 128
IDX = "((((int)blockIdx.x) * 128) + ((int)threadIdx.x))"


@pytest.fixture(scope="module")
def elementwise():
    pytest.importorskip("tvm")  # the kernel is TVM-built; the PTX-only tests above run without TVM
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH: the planted CUDA source is compiled with nvcc")
    import tvm_kernels as K
    _, f = K.elementwise(n=N, threads=THREADS)
    src = f.mod.imports[0].inspect_source()
    store = re.search(r"\n(\s*B_ptr\[[^\n]*;)\n", src)
    assert store, "the elementwise kernel's store to B was not found"
    return f, src, store.group(1)


def _inputs():
    a = np.random.default_rng(0).uniform(-1, 1, N).astype(np.float32)
    return a, np.zeros(N, np.float32)


def _planted(src, store, extra):
    new = src.replace(store, store + "\n  " + extra)
    line = new.splitlines().index("  " + extra) + 1
    return new, line


def test_the_unmodified_elementwise_kernel_has_no_finding(elementwise):
    f, _, _ = elementwise
    a, b = _inputs()
    report = E.run(f, a, b, interleavings=2)
    assert report.ok, str(report)
    np.testing.assert_allclose(b, np.exp(a) * 0.5 + a, rtol=1e-6, atol=1e-6)


def test_planted_store_by_a_second_warp_is_a_race_naming_the_cuda_line(elementwise):
    f, src, store = elementwise
    bad, line = _planted(src, store, "if (((int)threadIdx.x) == 32) { B_ptr[((int)blockIdx.x) * 128] = 1.0f; }")
    a, b = _inputs()
    report = E.run(f, a, b, source=bad)
    found = races(report)
    assert found, str(report)
    assert {fd.where.cta for fd in found} == {(k, 0, 0) for k in range(N // THREADS)}
    f0 = found[0]
    assert line in (f0.where.cuda_line, f0.other[2]) and {f0.where.warp, f0.other[0]} == {0, 1}, str(f0)
    assert f0.where.kernel == "main_kernel" and f0.where.ptx_line > 0


def test_planted_read_of_another_warps_output_races_unless_synchronised(elementwise):
    f, src, store = elementwise
    read = f"A_ptr[{IDX}] = B_ptr[({IDX} ^ 32)];"
    bad, line = _planted(src, store, read)
    a, b = _inputs()
    report = E.run(f, a, b, source=bad, interleavings=2)
    found = races(report)
    assert found and any(line in (fd.where.cuda_line, fd.other[2]) for fd in found), str(report)
    good, _ = _planted(src, store, "__syncthreads(); " + read)
    a, b = _inputs()
    a0 = a.copy()
    report = E.run(f, a, b, source=good, interleavings=2)
    assert report.ok, str(report)
    want = np.exp(a0) * 0.5 + a0
    np.testing.assert_allclose(a, want[np.arange(N) ^ 32], rtol=1e-6, atol=1e-6)


def test_planted_store_into_the_next_ctas_tile_is_a_race_between_ctas(elementwise):
    f, src, store = elementwise
    bad, line = _planted(src, store, "if (((int)threadIdx.x) == 0) { B_ptr[((((int)blockIdx.x) + 1) % 4) * 128] = "
                                     "0.0f; }")
    a, b = _inputs()
    report = E.run(f, a, b, source=bad)
    found = [fd for fd in races(report) if "CTAs of a launch are not ordered" in fd.message]
    assert found and any(line in (fd.where.cuda_line, fd.other[2]) for fd in found), str(report)


def test_strided_accesses_spanning_shadow_chunks_race_only_on_shared_words():
    # lane l of each warp stores to word 512 * l + (warp offset): 32 lanes span 64 KiB (several shadow chunks)
    body = """
    and.b32 %r3, %r1, 31;
    mul.lo.s32 %r4, %r3, 512;
    shr.u32 %r5, %r1, 5;
    mul.lo.s32 %r5, %r5, {off};
    add.s32 %r4, %r4, %r5;
    mul.wide.u32 %rd3, %r4, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r1;"""
    launch = E.Launch("k", (1, 1, 1), (64, 1, 1), 0, (("buffer", 0, 0), ("buffer", 1, 0)))
    for off, racy in ((0, True), (1, False)):
        out = np.zeros(512 * 32, np.uint32)
        report = E.run_ptx(kernel(body.format(off=off)), [launch], np.zeros(4, np.uint32), out, interleavings=2)
        assert bool(races(report)) == racy, str(report)
        if racy:
            assert races(report)[0].where.lanes == tuple(range(32))
        else:
            lane = np.arange(32)
            assert (out[512 * lane + 1] == lane + 32).all() and (out[512 * lane] == lane).all()
