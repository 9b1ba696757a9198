import os
import sys

# The tests import their helpers (bruteforce, strategies) as top-level modules.
sys.path.insert(0, os.path.dirname(__file__))


# --- TVM's tensor-core GEMM loops, for the front-end and API tests ------------
# TVM is imported lazily so that the pure-model tests run without it.
import pytest  # noqa: E402


def _build_mma_gemm_schedule(n: int = 4096):
    """The schedule of TVM's own pipeline tests (apache/tvm tests/python/s_tir/transform/
    test_s_tir_transform_inject_software_pipeline.py, get_mma_schedule): a 4096^3
    fp16 -> fp32 GEMM tensorized with ldmatrix + mma.sync m16n8k16.  Its loop
    k_0_0 holds the A and B global->shared copies and the k_0_1 loop of
    ldmatrix + mma; returns (sch, k0, k1)."""
    from tvm import te
    from tvm.s_tir.meta_schedule.testing import te_workload
    from tvm.s_tir.tensor_intrin.cuda import (LDMATRIX_f16_A_DYN_INTRIN, LDMATRIX_f16_B_DYN_INTRIN,
                                              MMA_f16f16f32_INTRIN, MMA_fill_16x16_f32_INTRIN,
                                              MMA_store_16x16_f32_global_INTRIN,
                                              shared_16x16_to_ldmatrix_32x8_layout)
    from tvm.testing.tir import mma_schedule

    def index_map(i, j):
        return (i // 16, j // 16, *shared_16x16_to_ldmatrix_32x8_layout(i % 16, j % 16))

    workload = te.create_prim_func(te_workload.matmul(n, n, n, in_dtype="float16", out_dtype="float32"))
    sch = mma_schedule(workload, 16, "float16", False, [1, 32, 1, 4, 2], [16, 2, 4, 1, 2], [128, 2, 1],
                       index_map, index_map, index_map, LDMATRIX_f16_A_DYN_INTRIN, LDMATRIX_f16_B_DYN_INTRIN,
                       MMA_f16f16f32_INTRIN, MMA_fill_16x16_f32_INTRIN, MMA_store_16x16_f32_global_INTRIN,
                       "shared.dyn")
    loops = sch.get_loops(sch.get_sblock("C_o_update"))
    return sch, loops[3], loops[4]


def _annotate_tvm_hand(sch, k0, k1, variant: str):
    """TVM's hand annotations: test_async_pipelined_mma_gemm_simple / ..._nested_..._ideal_annotation."""
    if variant == "simple":
        sch.annotate(k0, "software_pipeline_stage", [0, 0, 3])
        sch.annotate(k0, "software_pipeline_order", [0, 1, 2])
        sch.annotate(k0, "software_pipeline_async_stages", [0])
    else:
        sch.annotate(k0, "software_pipeline_stage", [0, 0, 2, 3, 3])
        sch.annotate(k0, "software_pipeline_order", [0, 1, 3, 2, 4])
        sch.annotate(k0, "software_pipeline_async_stages", [0])
        sch.annotate(k1, "software_pipeline_stage", [0, 0, 1])
        sch.annotate(k1, "software_pipeline_order", [0, 1, 2])
    return sch


@pytest.fixture(scope="session")
def mma_gemm():
    """Factory: ``mma_gemm()`` -> a fresh (sch, k0, k1); ``mma_gemm("simple"|"nested")`` also
    applies TVM's hand annotation of that test."""
    pytest.importorskip("tvm")

    def make(hand: str | None = None):
        sch, k0, k1 = _build_mma_gemm_schedule()
        if hand is not None:
            _annotate_tvm_hand(sch, k0, k1, hand)
        return sch, k0, k1

    return make
