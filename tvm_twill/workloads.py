"""Reference workloads: TVM's own tensor-core GEMM schedule and its hand-written pipeline annotations,
and an fp16 GEMM as dlight's ``gpu.Matmul`` rule schedules it.

Used by the tests, the tutorials and the benchmarks as the loops to pipeline
and the hand annotations to beat.  Not part of the pipelining path: this is
the only module that imports ``tvm.testing`` (TVM's test helpers).
"""
from __future__ import annotations

from .errors import InputError
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




def fp16_gemm(m: int | str = 256, n: int = 256, k: int = 256):
    """The GEMM ``C[m, n] = A[m, k] @ B[k, n]`` (fp16 inputs, fp32 accumulation) as a PrimFunc.

    ``m``: an extent, or the name of a symbolic int64 extent (a dynamic
    batch size, which dlight pads to its tile).
    """
    from tvm import te, tirx

    dt = "int64" if isinstance(m, str) else "int32"
    rows = tirx.Var(m, dt) if isinstance(m, str) else tirx.IntImm(dt, m)
    cols, depth = tirx.IntImm(dt, n), tirx.IntImm(dt, k)
    a = te.placeholder((rows, depth), "float16", name="A")
    b = te.placeholder((depth, cols), "float16", name="B")
    r = te.reduce_axis((tirx.IntImm(dt, 0), depth), name="k")
    c = te.compute((rows, cols), lambda i, j: te.sum(a[i, r].astype("float32") * b[r, j].astype("float32"), axis=r),
                   name="C")
    return te.create_prim_func([a, b, c])


def dlight_gemm(m: int | str = 256, n: int = 256, k: int = 256, arch: str = "sm_80", rule=None):
    """``fp16_gemm`` scheduled by dlight for ``arch``: the IRModule ``ApplyDefaultSchedule(rule)`` returns.

    ``rule`` defaults to ``dl.gpu.Matmul()``, which hands fp16 GEMMs to
    ``MatmulTensorization`` (wmma, a nested software pipeline, copies staged
    through registers).  The outer k loop is ``ax3_0_0``, the inner ``ax3_0_1``.
    """
    import tvm
    import tvm.s_tir.dlight as dl

    mod = tvm.IRModule({"main": fp16_gemm(m, n, k)})
    with tvm.target.Target({"kind": "cuda", "arch": arch}):
        return dl.ApplyDefaultSchedule(rule if rule is not None else dl.gpu.Matmul())(mod)


#: TVM target tags (with the limits MetaSchedule checks) for the archs the MetaSchedule workloads use.
TARGET_TAGS = {"sm_80": "nvidia/nvidia-a100", "sm_90a": "nvidia/nvidia-h100"}


def tensorcore_tune_context(n: int = 512, target="sm_80", *, intrinsics: str = "mma", postprocs=None,
                            seed: int = 0):
    """A MetaSchedule ``TuneContext`` over an n^3 fp16 -> fp32 GEMM whose design space software-pipelines.

    The schedule rule is MetaSchedule's ``MultiLevelTilingTensorCore`` with
    ``use_software_pipeline=True``, as TVM 0.27 configures it: ``intrinsics``
    ``"mma"`` is the mma.sync rule of TVM's "cuda-tensorcore" defaults (m16n8k8,
    cp.async copies; outer k loop [0, 0, 1, 2, 2] / [0, 1, 3, 2, 4], inner
    [0, 0, 1]); ``"wmma"`` the wmma rule with software pipelining of TVM's
    tests (copies split into global->local->shared by
    ManifestSharedMemoryLocalStage; outer [0, 0, 0, 0, 0, 1, 1]).  The
    defaults list the wmma rule first, which takes every fp16 GEMM without a
    pipeline, so the pipelining rule is given alone here.  ``target``: an arch
    (``TARGET_TAGS``) or a ``tvm.target.Target`` with MetaSchedule's limits;
    ``postprocs``: the postprocessors (default: "cuda-tensorcore"'s);
    ``seed``: MetaSchedule's random state.  The search strategy is
    ``ReplayTrace`` (random decisions, no cost model, no GPU): see
    ``sample_candidates``.
    """
    import tvm
    import tvm.s_tir.tensor_intrin.cuda  # noqa: F401 - registers the tensor intrinsics
    from tvm import te
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.testing import te_workload
    from tvm.s_tir.tensor_intrin.cuda import get_wmma_intrin_group

    if intrinsics == "mma":
        groups = [{"init": "mma_init_m16n8k8_f32", "load_a": "mma_load_m16n8k8_f16_A_shared_dyn",
                   "load_b": "mma_load_m16n8k8_f16_B_shared_dyn", "compute": "mma_sync_m16n8k8_f16f16f32",
                   "store": "mma_store_m16n8k8_f32_global"}]
        write_reuse = "no"
    elif intrinsics == "wmma":
        groups = [get_wmma_intrin_group("shared.dyn", "shared.dyn", "float16", "float32", True)]
        write_reuse = "must"
    else:
        raise InputError(f"intrinsics must be 'mma' or 'wmma', got {intrinsics!r}")
    rule = ms.schedule_rule.MultiLevelTilingTensorCore(
        intrin_groups=groups, structure="SSSRRSRS", tile_binds=["blockIdx.y", "blockIdx.x", "threadIdx.y"],
        max_innermost_factor=4, vector_load_lens=[1, 2, 3, 4, 8, 16],
        reuse_read=ms.schedule_rule.ReuseType(req="must", levels=[4], scope="shared.dyn"),
        reuse_write=ms.schedule_rule.ReuseType(req=write_reuse, levels=[2], scope="shared.dyn"),
        use_software_pipeline=True)
    tgt = tvm.target.Target(TARGET_TAGS.get(target, target)) if isinstance(target, str) else target
    func = te.create_prim_func(te_workload.matmul(n, n, n, in_dtype="float16", out_dtype="float32"))
    if postprocs is None:
        postprocs = ms.postproc.Postproc.create("cuda-tensorcore")
    return ms.TuneContext(
        mod=tvm.IRModule({"main": func}), target=tgt,
        space_generator=ms.space_generator.PostOrderApply(sch_rules=[rule], postprocs=list(postprocs),
                                                          mutator_probs={}),
        search_strategy=ms.search_strategy.ReplayTrace(), task_name=f"gemm{n}_{intrinsics}", rand_state=seed,
        num_threads=1)


def sample_candidates(context, count: int) -> list:
    """``count`` candidates of the context's design space, as MetaSchedule's search produces them.

    ``ReplayTrace`` re-samples every decision of a design-space trace at
    random and runs the context's postprocessors on the result (a candidate
    a postprocessor rejects is replaced by another); returns their Schedules.
    No cost model, builder or runner: no GPU.
    """
    spaces = context.generate_design_space()
    context.pre_tuning(max_trials=count, num_trials_per_iter=count, design_spaces=spaces)
    try:
        return [c.sch for c in context.generate_measure_candidates() or []]
    finally:
        context.post_tuning()
