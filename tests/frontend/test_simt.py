"""Loops that are not tensor-core GEMMs: a SIMT GEMM, a GEMM + bias + ReLU and an implicit-GEMM
convolution (tests/simt_loops.py).  Their statements are classed by what they do (FMA on the CUDA
cores, epilogue store), they get pipelined (ii with stages strictly below ii without), and the
pipelined loop computes on the CPU (llvm) exactly what the loop does."""
import numpy as np
import pytest

pytest.importorskip("tvm")
import tvm  # noqa: E402

import tir_gen  # noqa: E402
from simt_loops import conv_implicit_gemm, gemm_bias_relu, simt_gemm  # noqa: E402
from tvm_twill.api import auto_pipeline, evaluate_annotation  # noqa: E402
from tvm_twill.frontend import extract_loop  # noqa: E402
from tvm_twill.model.pipeline import PipelineAnnotation  # noqa: E402
from tvm_twill.transforms import apply_annotation  # noqa: E402

CASES = {
    "simt_gemm": (simt_gemm, "ko", ["copy", "copy", "fma"]),
    "gemm_bias_relu": (gemm_bias_relu, "jo", ["copy", "copy", "alu", "fma", "store"]),
    "conv_implicit_gemm": (conv_implicit_gemm, "r", ["copy", "copy", "fma"]),
}
SHAPES = {"simt_gemm": [(16, 64), (64, 16), (16, 16)], "gemm_bias_relu": [(16, 32), (32, 64), (64,), (16, 64)],
          "conv_implicit_gemm": [(34, 8), (3, 8, 16), (32, 16)]}


def _inputs(name):
    rng = np.random.default_rng(0)
    return [rng.integers(-4, 5, size=shape).astype("float32") for shape in SHAPES[name]]


def _reference(name, args):
    if name == "simt_gemm":
        return args[0] @ args[1]
    if name == "gemm_bias_relu":
        return np.maximum(args[0] @ args[1] + args[2], 0)
    X, Wt = args[0], args[1]
    return sum(X[r:r + 32] @ Wt[r] for r in range(3))


def _unpipelined_ii(func, loop, n):
    sch = tvm.s_tir.Schedule(func)
    apply_annotation(sch, sch.get_loops(sch.get_sblock("body"))[-1], PipelineAnnotation((0,) * n, tuple(range(n))))
    return evaluate_annotation(sch, loop, "sm_80").ii_cycles


@pytest.mark.parametrize("name", sorted(CASES))
def test_simt_loops_are_classed_by_what_they_do(name):
    func, loop, kinds = CASES[name]
    ex = extract_loop(tvm.s_tir.Schedule(func), loop, "sm_80")
    assert [s.kind for s in ex.stmts] == kinds
    fma = next(s for s in ex.stmts if s.kind == "fma")
    assert fma.description == "SIMT FMA on the CUDA cores" and "ldmatrix" not in fma.description
    assert fma.flops > 0 and fma.bounds["CUDA cores"] > 0


def test_simt_fma_cost_by_hand():
    ex = extract_loop(tvm.s_tir.Schedule(simt_gemm), "ko", "sm_80")
    fma = ex.stmts[2]
    # 16 x 16 x 8 = 2048 FMAs / 64 per clock = 32 cycles; each reads 2 fp32 from shared: 16384 B / 128 = 128
    assert fma.bounds == {"CUDA cores": 32.0, "shared memory": 128.0}
    assert fma.work == {"ALU": 128.0} and fma.flops == 4096.0

    # evaluate_annotation: the copies one stage ahead hide their latency, so [0, 0, 1] beats [0, 0, 0]
    def ii(stages):
        sch = tvm.s_tir.Schedule(simt_gemm)
        apply_annotation(sch, sch.get_loops(sch.get_sblock("body"))[-1], PipelineAnnotation(stages, (0, 1, 2)))
        return evaluate_annotation(sch, "ko", "sm_80").ii_cycles
    assert ii((0, 0, 1)) < ii((0, 0, 0))


@pytest.mark.parametrize("name", sorted(CASES))
def test_simt_loops_are_pipelined_and_compute_the_same(name):
    func, loop, _ = CASES[name]
    sch = tvm.s_tir.Schedule(func)
    plan = auto_pipeline(sch, loop, "sm_80")
    assert plan.applied and max(plan.annotation.stages) >= 1 and "SIMT FMA on the CUDA cores" in plan.explain()
    assert plan.ii_cycles < _unpipelined_ii(func, loop, len(plan.annotation.stages))
    args = _inputs(name)
    before = tir_gen.run_llvm(func, args)
    after = tir_gen.run_llvm(sch.mod, args)
    assert all(np.array_equal(a, b) for a, b in zip(after, before, strict=True))
    assert np.array_equal(after[-1], _reference(name, args))
