"""A low-precision multiply-accumulate is a tensor-core GEMM only when it will be tensorized.

* the SIMT attention kernel (``kernels.fa_forward``: fp16 inputs in shared, fp32 accumulation, one thread
  per row, never tensorized) has its S = Q K^T and O += P V statements classed ``fma`` on the CUDA cores,
  and its predicted throughput is at most the chip's CUDA-core peak (2 x FMA per clock x SMs x clock);
* the same fp16 GEMM block is ``mma`` once something says it will be tensorized: MetaSchedule's
  ``meta_schedule.auto_tensorize`` annotation, or an operand in a tensor-core fragment scope.
"""
import pytest

pytest.importorskip("tvm")
import tvm  # noqa: E402

from tvm_twill.api import auto_pipeline  # noqa: E402
from tvm_twill.frontend import extract_loop  # noqa: E402
from tvm_twill.frontend.classify import classify, leaf_work  # noqa: E402
from tvm_twill.kernels import KV_LOOP, AttentionShape, fa_forward  # noqa: E402
from tvm_twill.workloads import fp16_gemm  # noqa: E402

#: CUDA-core peaks by hand (docs/machines.md: fp32 FMA results per clock per SM x SMs x clock, 2 FLOP each)
CUDA_PEAK = {"sm_80": 2 * 64 * 108 * 1.41e9 / 1e12,     # A100: 19.49 TFLOPS
             "sm_90a": 2 * 128 * 132 * 1.83e9 / 1e12}   # H100 SXM: 61.84 TFLOPS


def _attention(**kw):
    return tvm.s_tir.Schedule(fa_forward(AttentionShape(**kw)))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_simt_attention_gemms_are_fma_on_the_cuda_cores(arch):
    ex = extract_loop(_attention(), KV_LOOP, arch)
    kinds = {s.name: s.kind for s in ex.stmts}
    units = {op.name: op.unit for op in ex.graph.ops}
    assert (kinds["S"], kinds["O"]) == ("fma", "fma")
    assert (units["S"], units["O"]) == ("ALU", "ALU")
    assert "TC" not in units.values()  # nothing in this kernel runs on the tensor cores


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_simt_attention_prediction_is_within_the_cuda_core_peak(arch):
    # 16 heads x 2048 queries: 512 CTAs of 64 rows, enough to fill every SM of either chip
    plan = auto_pipeline(_attention(heads=16, q_len=2048), KV_LOOP, arch, time_limit=60, apply=False)
    p = plan.prediction()
    assert 0 < p.tflops <= CUDA_PEAK[arch]
    assert p.bound != "tensor core"


def _gemm_block():
    sch = tvm.s_tir.Schedule(fp16_gemm(64, 64, 64))
    return sch, sch.get_sblock("C")


def _kind(block, reads=("global",), writes=("global",)):
    return classify(block, leaf_work(block), set(reads), set(writes), plain=False)


def test_fp16_gemm_block_is_mma_only_when_marked_for_tensorization():
    sch, rv = _gemm_block()
    assert _kind(sch.get(rv)) == "fma"
    assert _kind(sch.get(rv), ("shared", "local"), ("local",)) == "fma"  # shared / local: no fragment scope
    sch.annotate(rv, "meta_schedule.auto_tensorize", "mma_sync_m16n8k8_f16f16f32")
    assert _kind(sch.get(rv)) == "mma"
    plain, prv = _gemm_block()
    for reads, writes in ((("wmma.matrix_a", "wmma.matrix_b"), ("wmma.accumulator",)),
                          (("m16n8k8.matrixA", "m16n8k8.matrixB"), ("m16n8k8.matrixC",)),
                          (("warp",), ("warp",))):
        assert _kind(plain.get(prv), reads, writes) == "mma", reads
