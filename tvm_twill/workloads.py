"""Reference workloads: TVM's own tensor-core GEMM schedule and its hand-written pipeline annotations.

Used by the tests, the tutorial and the benchmarks as the loops to pipeline
and the hand annotations to beat.  Not part of the pipelining path: this is
the only module that imports ``tvm.testing`` (TVM's test helpers).
"""
from __future__ import annotations

from .model.pipeline import ASYNC_STAGES, ORDER, STAGE

#: TVM's own hand annotations of the tensor-core GEMM below, from apache/tvm's
#: tests/python/s_tir/transform/test_s_tir_transform_inject_software_pipeline.py
#: (the simple and the nested "ideal annotation" tests), per loop: k0 is the
#: outer k_0_0 loop (copies + inner loop), k1 the inner k_0_1 loop (ldmatrix + mma).
TVM_HAND_ANNOTATIONS = {
    "simple": {"k0": {STAGE: [0, 0, 3], ORDER: [0, 1, 2],
                      ASYNC_STAGES: [0]}},
    "nested": {"k0": {STAGE: [0, 0, 2, 3, 3], ORDER: [0, 1, 3, 2, 4],
                      ASYNC_STAGES: [0]},
               "k1": {STAGE: [0, 0, 1], ORDER: [0, 1, 2]}},
}


def tensorcore_gemm(n: int = 4096, hand: str | None = None):
    """TVM's tensor-core GEMM schedule, the kernel of TVM's pipeline tests.

    ``tvm.testing.tir.mma_schedule`` on an n^3 fp16 -> fp32 matmul, tensorized
    with ldmatrix + mma.sync m16n8k16, 128x256 block tiles.  Returns
    ``(sch, k0, k1)``: the outer loop k_0_0 (A/B global->shared copies and
    the inner loop) and the inner loop k_0_1 (ldmatrix + mma).  ``hand``
    (``"simple"`` or ``"nested"``) applies TVM's hand annotation of that test.
    """
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
    k0, k1 = loops[3], loops[4]
    if hand is not None:
        for key, loop in (("k0", k0), ("k1", k1)):
            for ann, value in TVM_HAND_ANNOTATIONS[hand].get(key, {}).items():
                sch.annotate(loop, ann, value)
    return sch, k0, k1


