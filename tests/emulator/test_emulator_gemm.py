"""The emulator runs the project's sm_80 GEMMs (software-pipelined, and warp-specialized with a cp.async +
mbarrier ring) as TVM and nvcc build them, against numpy over several interleavings, and catches planted bugs
applied to the generated CUDA source (``run(..., source=...)``).

Shape: 256^3 on TVM's tensor-core schedule (128 x 128 block tiles), a k loop of 8 trips of 32: at least twice
the 3-deep pipeline / ring plus one, so every ring wraps; two CTAs emulated (of the launch's grid).
"""
import re
import shutil

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
if shutil.which("nvcc") is None:
    pytest.skip("nvcc not installed", allow_module_level=True)

from emulator.tvm_kernels import compile_module, gemm_inputs

import tvm_twill
from tvm_twill import emulator as E

N = 256
CTAS = [(0, 0, 0), (0, 1, 0)]


def _build(ws, arch="sm_80"):
    from tvm_twill.workloads import tensorcore_gemm
    sch, k0, k1 = tensorcore_gemm(N)
    plan = tvm_twill.auto_pipeline(sch, [k0, k1], arch, warp_specialize=ws, quiet=True)
    f = compile_module(sch.mod, arch, plan.tir_pipeline, async_copy=True)
    return f, plan, f.mod.imports[0].inspect_source()


@pytest.fixture(scope="module")
def swp():
    return _build(False)


@pytest.fixture(scope="module")
def ws():
    return _build(True)


def _emulate(f, src, interleavings=1, seed=0):
    a, b, c = gemm_inputs(N)
    report = E.run(f, a, b, c, seed=seed, interleavings=interleavings, blocks=CTAS, source=src)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    done = c != 0
    err = float(np.abs(c - ref)[done].max()) if done.any() else float("inf")
    return report, int(done.sum()), err


def _correct(done, err):
    return done == len(CTAS) * 128 * 128 and err < 1e-3


def test_swp_gemm_matches_numpy_with_no_findings(swp):
    f, plan, src = swp
    assert plan.applied
    assert "cp.async.wait_group" in src
    report, done, err = _emulate(f, src, interleavings=3)
    assert report.ok, str(report)
    assert _correct(done, err), (done, err)
    assert report.instructions > 0


def test_ws_gemm_matches_numpy_with_no_findings(ws):
    f, plan, src = ws
    assert plan.warp_specialization.chosen
    assert "mbarrier.test_wait" in src and "cp.async.mbarrier.arrive" in src
    report, done, err = _emulate(f, src, interleavings=3, seed=1)
    assert report.ok, str(report)
    assert _correct(done, err), (done, err)


def test_ws_gemm_with_two_ordered_groups_matches_numpy_with_no_findings():
    """On sm_90a the planner gives the mma GEMM two consumer groups of two warps: in program order one group
    cannot overlap its inner pipeline's ldmatrix prologue with its MMAs, two groups taking turns on the tensor
    core can (model ii 320 against 448).  The kernel it emits (one turn per iteration around the MMA loop and
    its epilogue, the prologue outside) runs clean and right; without the pass the other group waits for ever."""
    f, plan, src = _build(True, "sm_90a")
    ws = plan.warp_specialization
    assert ws.consumer_order == (0, 1) and ws.facts.order_sections == 1 and ws.protocol.ok
    assert ws.ii_ws_cycles < ws.one_group.ii_ws_cycles
    report, done, err = _emulate(f, src, interleavings=2, seed=2)
    assert report.ok, str(report)
    assert _correct(done, err), (done, err)
    passes = re.findall(r"\n(\s*tvm_builtin_ptx_bar_arrive_arrive\(\(\(uint\)\(\(\(ws_warp >> 1\) == 0\) \? 2 : 1\)\), "
                        r"\(uint\)128\);)", src)
    assert len(passes) == 1
    caught, report = _caught(f, src.replace(passes[0], ";"))
    assert caught, report


def test_swp_gemm_every_cta_stays_inside_c(swp):
    # tensorcore_gemm(256) used to keep the 4096 tiling (a 16 x 64 grid of 128 x 128 tiles: loads guarded,
    # C stores not): every CTA past the 2 x 2 that cover C stored outside it.  Now the grid is sized to N.
    f, _, src = swp
    a, b, c = gemm_inputs(N)
    from tvm_twill.emulator.launch import launches
    assert [tuple(ln.grid) for ln in launches(f, (a, b, c), source=src)[1]] == [(1, 4, 1)]
    report = E.run(f, a, b, c, source=src)
    assert report.ok, str(report)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3, atol=1e-3)


def _caught(f, src):
    report, done, err = _emulate(f, src)
    return (not report.ok) or not _correct(done, err), report


def _mutate(src, old, new, count=1):
    assert src.count(old) >= count, old
    return src.replace(old, new)


SWP_FAULTS = {
    "wait count raised": lambda s: _mutate(s, 'asm volatile("cp.async.wait_group 2;"',
                                           'asm volatile("cp.async.wait_group 3;"'),
    # the steady-state wait (the epilogue's waits cover groups the guarded tail leaves empty)
    "wait removed": lambda s: _mutate(s, 'asm volatile("cp.async.wait_group 2;" :  :  : "memory");', ";"),
    "syncthreads after wait removed": lambda s: re.sub(r"(wait_group_2\(\);\n\s*)__syncthreads\(\);", r"\1", s,
                                                       count=1),
}


@pytest.mark.parametrize("fault", sorted(SWP_FAULTS))
def test_planted_swp_bug_is_caught(swp, fault):
    f, _, src = swp
    bad = SWP_FAULTS[fault](src)
    assert bad != src
    caught, report = _caught(f, bad)
    assert caught, f"{fault} not caught: {report}"


WS_FAULTS = {
    "full parity flipped": lambda s: _mutate(s, "((uint)((ws_k % 6) / 3))", "((uint)(((ws_k % 6) / 3) ^ 1))"),
    "release arrive dropped": lambda s: re.sub(
        r"tvm_builtin_ptx_mbarrier_arrive_nocount_arrive_shared_b64\(tvm_builtin_cuda_cvta_generic_to_shared"
        r"\(\(&\(ws_empty_ptr\[\(ws_k % 3\)\]\)\)\)\);", ";", s),
    "init count changed": lambda s: _mutate(s, "(&(ws_full_ptr[0]))), (uint)32)", "(&(ws_full_ptr[0]))), (uint)16)"),
}


@pytest.mark.parametrize("fault", sorted(WS_FAULTS))
def test_planted_ws_bug_is_caught(ws, fault):
    f, _, src = ws
    bad = WS_FAULTS[fault](src)
    assert bad != src
    caught, report = _caught(f, bad)
    assert caught, f"{fault} not caught: {report}"


def test_ctas_outside_the_output_are_reported_out_of_bounds():
    # what tensorcore_gemm(256) built before it sized its grid: TVM's 4096 factors at 256 (a 16 x 64 grid
    # whose loads are guarded but whose C stores are not), so a CTA past the output writes outside C
    from tvm import te
    from tvm.s_tir.meta_schedule.testing import te_workload

    from tvm_twill.workloads import _mma_schedule
    workload = te.create_prim_func(te_workload.matmul(N, N, N, in_dtype="float16", out_dtype="float32"))
    sch = _mma_schedule(workload, [1, 32, 1, 4, 2], [16, 2, 4, 1, 2], [128, 2, 1])
    f = compile_module(sch.mod, "sm_80")
    a, b, c = gemm_inputs(N)
    report = E.run(f, a, b, c, blocks=[(0, 4, 0)])
    bad = [x for x in report.findings if x.kind == "BadAccess"]
    assert bad and "global" in bad[0].message and bad[0].where.cta == (0, 4, 0)
    assert not c.any()      # nothing landed inside C
