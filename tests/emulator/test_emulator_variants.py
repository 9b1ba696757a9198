"""Every other kernel kind of the corpus (make_corpus.KERNELS), rebuilt and run on the emulator from what
``tvm.compile`` returned, against numpy with no finding over two interleavings (2 CTAs of each GEMM): the nested software
pipeline, sm_86, the ordered-consumer-group and sm_90a / sm_100a warp-specialized mma.sync GEMMs (named
barriers, TMA / bulk copies), and dlight's GEMV, row sum, RMSNorm, softmax and elementwise kernels."""
import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
if shutil.which("nvcc") is None:
    pytest.skip("nvcc not installed", allow_module_level=True)

from emulator.tvm_kernels import compile_module, gemm_inputs

from tvm_twill import emulator as E

HERE = Path(__file__).resolve().parent


def _kernels():
    spec = importlib.util.spec_from_file_location("make_corpus", HERE / "make_corpus.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.KERNELS


def _build(name):
    mod, arch, pipeline = _kernels()[name]()
    if pipeline == "tvm_twill_ws":
        from tvm_twill.transforms.pipelines import WS_PIPELINE, register
        register(WS_PIPELINE)
    return compile_module(mod, arch, pipeline, async_copy=True)


GEMMS = ["swp_sm80_hand_nested", "swp_sm86", "ws_sm80_ordered", "ws_sm90a", "ws_sm90a_ordered", "ws_sm100a"]


@pytest.mark.parametrize("name", GEMMS)
def test_gemm_variant_matches_numpy(name):
    f = _build(name)
    a, b, c = gemm_inputs(256)
    # the nested pipeline runs twice the instructions: one interleaving keeps it under a minute
    report = E.run(f, a, b, c, blocks=[(0, 0, 0), (0, 1, 0)], interleavings=1 if "nested" in name else 2)
    assert report.ok, str(report)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    done = c != 0
    assert done.sum() == 2 * 128 * 128
    np.testing.assert_allclose(c[done], ref[done], rtol=1e-4, atol=1e-4)


def _h(shape, rng):
    return rng.uniform(-1, 1, shape).astype(np.float16)


def _dlight_case(name, rng):
    if name == "dlight_gemv":
        w, x = _h((256, 512), rng), _h((512,), rng)
        y = np.zeros(256, np.float32)
        return (w, x, y), lambda: (y, w.astype(np.float32) @ x.astype(np.float32))
    if name == "dlight_row_sum":
        a = rng.uniform(-1, 1, (64, 256)).astype(np.float32)
        s = np.zeros(64, np.float32)
        return (a, s), lambda: (s, a.sum(1))
    if name == "dlight_rms_norm":
        x, g = _h((32, 256), rng), _h((256,), rng)
        y = np.zeros((32, 256), np.float16)
        x32 = x.astype(np.float32)
        want = x32 / np.sqrt((x32 * x32).sum(1, keepdims=True) / 256 + 1e-5) * g.astype(np.float32)
        return (x, g, y), lambda: (y.astype(np.float32), want.astype(np.float16).astype(np.float32))
    if name == "dlight_softmax":
        x = rng.uniform(-4, 4, (32, 256)).astype(np.float32)
        y = np.zeros_like(x)
        e = np.exp(x - x.max(1, keepdims=True))
        return (x, y), lambda: (y, e / e.sum(1, keepdims=True))
    a, b = _h((64, 256), rng), _h((64, 256), rng)
    c = np.zeros((64, 256), np.float16)
    want = np.maximum(a * b + a, np.float16(0))
    return (a, b, c), lambda: (c.astype(np.float32), want.astype(np.float32))


@pytest.mark.parametrize("name", ["dlight_gemv", "dlight_row_sum", "dlight_rms_norm", "dlight_softmax",
                                  "dlight_elementwise"])
def test_dlight_kernel_matches_numpy(name):
    f = _build(name)
    args, result = _dlight_case(name, np.random.default_rng(7))
    report = E.run(f, *args, interleavings=2)
    assert report.ok, str(report)
    got, want = result()
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)


def test_dlight_matmul_with_wmma_matches_numpy():
    f = _build("dlight_matmul")
    a, b, c = gemm_inputs(256)
    report = E.run(f, a, b, c, blocks=[(0, 0, 0), (1, 0, 0)])
    assert report.ok, str(report)
    done = c != 0
    assert done.sum() == 2 * 128 * 128
    ref = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c[done], ref[done], rtol=1e-4, atol=1e-4)


def test_dlight_matmul_pipelined_by_twill_matches_numpy():
    # A bug the emulator found: with AutoPipelined(dl.gpu.Matmul()) and tirx.use_async_copy, the plan put the
    # transposing copy of B (4 halves down a column of B into a row of the shared tile) in an async stage and
    # TVM turned it into one 8-byte cp.async of 4 *consecutive* halves of a row: wrong data, and for lanes
    # 16-31 a source 2 bytes off alignment.  The copy is no longer cp.async-capable: every CTA, no finding.
    f = _build("dlight_matmul_twill")
    src = f.mod.imports[0].inspect_source()
    assert not any("B_ptr" in ln for ln in src.splitlines() if "cp_async" in ln)
    a, b, c = gemm_inputs(256)
    report = E.run(f, a, b, c)
    assert report.ok, str(report)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-4, atol=1e-4)


def test_the_transposing_copy_made_async_is_caught():
    # the old plan, planted: the copies' stage made async again (what the planner wrote before), TVM lowers
    # B's copy to misaligned 8-byte cp.async; in the warps whose lanes 0-15 start 2 bytes off too, every
    # lane is reported
    import tvm.s_tir.dlight as dl

    from tvm_twill.integrations.dlight import AutoPipelined
    from tvm_twill.frontend import resolve_loop
    from tvm_twill.model.pipeline import ASYNC_STAGES
    from tvm_twill.workloads import dlight_gemm

    rule = AutoPipelined(dl.gpu.Matmul(), staging="direct")
    sch = tvm.s_tir.Schedule(dlight_gemm(256, 256, 256, arch="sm_80", rule=rule))
    (nest,) = rule.last
    b_stage = nest.plan.annotation.stages[nest.plan.extraction.names.index("B_reindex_shared.dyn")]
    sch.annotate(resolve_loop(sch, "ax3_0_0").rv, ASYNC_STAGES, [b_stage])
    f = compile_module(sch.mod, "sm_80", None, async_copy=True)
    a, b, c = gemm_inputs(256)
    report = E.run(f, a, b, c, blocks=[(0, 0, 0)])
    bad = [x for x in report.findings if x.kind == "BadAccess" and "misaligned 8-byte cp.async" in x.message]
    assert bad, str(report)
    assert bad[0].where.cuda_line and any(x.where.lanes == tuple(range(16, 32)) for x in bad)
