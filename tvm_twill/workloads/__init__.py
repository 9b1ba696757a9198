"""Reference workloads: TVM's own tensor-core GEMM schedule and its hand-written pipeline annotations,
an fp16 GEMM as dlight's ``gpu.Matmul`` rule schedules it, a Hopper wgmma GEMM, GEMVs with shared tiles;
``llama``: a small whole model.  MetaSchedule's pipelining tensor-core design space is
``tvm_twill.metaschedule.tensorcore_tune_context``.  docs/kernels.md.

Used by the tests, the tutorials and the benchmarks as the loops to pipeline
and the hand annotations to beat.  Not part of the pipelining path.  Nothing
here imports ``tvm.testing`` (it needs pytest, which a user's install does not
have): the one schedule taken from it, ``mma_schedule``, is inlined below.
"""
from __future__ import annotations

from ..errors import InputError
from ..model.pipeline import ASYNC_STAGES, ORDER, STAGE

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

    ``tvm.testing.tir.mma_schedule`` (inlined: ``_mma_schedule``) on an n^3
    fp16 -> fp32 matmul, tensorized with ldmatrix + mma.sync m16n8k16,
    128x128 block tiles, an (n/128)^2 grid (``tensorcore_gemm_factors``;
    ``n`` must be a multiple of 128: ``InputError`` otherwise).  Returns ``(sch, k0, k1)``: the outer loop k_0_0
    (A/B global->shared copies and the inner loop) and the inner loop k_0_1
    (ldmatrix + mma).  ``hand`` (``"simple"`` or ``"nested"``) applies TVM's
    hand annotation of that test.
    """
    from tvm import te
    from tvm.s_tir.meta_schedule.testing import te_workload

    i_factors, j_factors, k_factors = tensorcore_gemm_factors(n)
    workload = te.create_prim_func(te_workload.matmul(n, n, n, in_dtype="float16", out_dtype="float32"))
    sch = _mma_schedule(workload, i_factors, j_factors, k_factors)
    loops = sch.get_loops(sch.get_sblock("C_o_update"))
    k0, k1 = loops[3], loops[4]
    if hand is not None:
        for key, loop in (("k0", k0), ("k1", k1)):
            for ann, value in TVM_HAND_ANNOTATIONS[hand].get(key, {}).items():
                sch.annotate(loop, ann, value)
    return sch, k0, k1


#: The tile of ``tensorcore_gemm``: 128 x 128 outputs per block (8 x 8 mma tiles of 16), k in steps of 32.
TENSORCORE_TILE = 128


def tensorcore_gemm_mnk(m: int, n: int, k: int):
    """``tensorcore_gemm``'s schedule on a rectangular problem: ``C[m, n] = A[m, k] @ B[k, n]`` (fp16 in, fp32
    out) with ``m`` and ``n`` multiples of the 128 x 128 block tile and ``k`` a multiple of 32 (the k step),
    an (m/128) x (n/128) grid.  Returns ``(sch, k0, k1)`` as ``tensorcore_gemm`` does."""
    from tvm import te
    from tvm.s_tir.meta_schedule.testing import te_workload

    for name, v, step in (("m", m, TENSORCORE_TILE), ("n", n, TENSORCORE_TILE), ("k", k, 32)):
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0 or v % step:
            raise InputError(f"tensorcore_gemm_mnk: {name}={v!r} is not a positive multiple of {step}")
    tm, tn = m // TENSORCORE_TILE, n // TENSORCORE_TILE
    j1 = 2 if tn % 2 == 0 else 1
    workload = te.create_prim_func(te_workload.matmul(m, n, k, in_dtype="float16", out_dtype="float32"))
    sch = _mma_schedule(workload, [1, tm, 1, 4, 2], [tn // j1, j1, 4, 1, 2], [k // 32, 2, 1])
    loops = sch.get_loops(sch.get_sblock("C_o_update"))
    return sch, loops[3], loops[4]


def tensorcore_gemm_factors(n: int) -> tuple[list[int], list[int], list[int]]:
    """The split factors of ``tensorcore_gemm(n)``: TVM's test factors ``[1, 32, 1, 4, 2]``,
    ``[16, 2, 4, 1, 2]``, ``[128, 2, 1]`` (n = 4096) with the outer factors derived from ``n``, so that the
    grid covers exactly the n x n output with 128 x 128 block tiles (TVM guards the loads of a tile past the
    output but not the C stores, so the factors must divide n exactly).  j's two outer factors keep TVM's
    2 tiles on ``blockIdx.y`` where the tile count is even, 1 otherwise."""
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0 or n % TENSORCORE_TILE:
        raise InputError(f"tensorcore_gemm: n={n!r} is not a positive multiple of its {TENSORCORE_TILE}x"
                         f"{TENSORCORE_TILE} block tile; pass n = {TENSORCORE_TILE} * k (e.g. 256, 1024, 4096)")
    tiles = n // TENSORCORE_TILE
    j1 = 2 if tiles % 2 == 0 else 1
    return [1, tiles, 1, 4, 2], [tiles // j1, j1, 4, 1, 2], [n // 32, 2, 1]


def _mma_schedule(workload, i_factors, j_factors, k_factors):
    """``tvm.testing.tir.mma_schedule`` of TVM 0.27 (Apache-2.0) for fp16 inputs, B not transposed, k_inner 16,
    ldmatrix from "shared.dyn": the same primitives in the same order, so the loops and blocks have the same
    names (``tvm.testing`` itself imports pytest)."""
    import tvm
    from tvm.s_tir.tensor_intrin.cuda import (LDMATRIX_f16_A_DYN_INTRIN, LDMATRIX_f16_B_DYN_INTRIN,
                                              MMA_f16f16f32_INTRIN, MMA_fill_16x16_f32_INTRIN,
                                              MMA_store_16x16_f32_global_INTRIN,
                                              shared_16x16_to_ldmatrix_32x8_layout)

    def index_map(i, j):
        return (i // 16, j // 16, *shared_16x16_to_ldmatrix_32x8_layout(i % 16, j % 16))

    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": workload}))
    block = sch.get_sblock("C")
    i, j, k = sch.get_loops(block)
    i, i_tc = sch.split(i, factors=[None, 16])
    j, j_tc = sch.split(j, factors=[None, 16])
    k, k_tc = sch.split(k, factors=[None, 16])
    sch.reorder(i, j, k, i_tc, j_tc, k_tc)
    block_outer, block_inner = sch.blockize(i_tc), block
    num_ty = i_factors[2] * j_factors[2]
    i0, i1, i2, i3, i4 = sch.split(i, factors=i_factors)
    j0, j1, j2, j3, j4 = sch.split(j, factors=j_factors)
    k0, k1, k2 = sch.split(k, k_factors)
    sch.reorder(i0, j0, i1, j1, j2, i2, k0, k1, i3, j3, k2, i4, j4)
    sch.bind(sch.fuse(i0, j0), "blockIdx.x")
    sch.bind(sch.fuse(i1, j1), "blockIdx.y")
    thread_idy = sch.fuse(j2, i2)
    sch.bind(thread_idy, "threadIdx.y")
    for idx in (0, 1):  # fetch_to_shared: 16-byte vectors, 32 threads x num_ty warps
        block_read = sch.cache_read(block_outer, idx, "shared.dyn")
        sch.compute_at(block_read, k0)
        fused = sch.fuse(*sch.get_loops(block_read)[-2:])
        _, f_1, f_2, f_3 = sch.split(fused, factors=[None, num_ty, 32, 8])
        sch.bind(f_2, "threadIdx.x")
        sch.bind(f_1, "threadIdx.y")
        sch.vectorize(f_3)
        sch.storage_align(block_read, 0, axis=-2, factor=32, offset=8)
    a_warp = sch.cache_read(block_outer, 0, "warp")
    b_warp = sch.cache_read(block_outer, 1, "warp")
    sch.compute_at(a_warp, k1)
    sch.compute_at(b_warp, k1)
    c_warp = sch.cache_write(block_outer, 0, "warp")
    sch.reverse_compute_at(c_warp, thread_idy)
    ii, jj = sch.get_loops(c_warp)[-2:]
    io, ii = sch.split(ii, factors=[None, 16])
    jo, ji = sch.split(jj, factors=[None, 16])
    sch.reorder(io, jo, ii, ji)
    sch.decompose_reduction(block_outer, sch.get_loops(block_outer)[3])
    block_init_c = sch.get_sblock("C_init")

    def tile_fragment(block_read, height, width):
        i, j = sch.get_loops(block_read)[-2:]
        i0, i1 = sch.split(i, factors=[None, height])
        j0, j1 = sch.split(j, factors=[None, width])
        sch.reorder(i0, j0, i1, j1)
        return i1

    loop_a, loop_b = tile_fragment(a_warp, 16, 16), tile_fragment(b_warp, 16, 16)
    sch.transform_layout(a_warp, ("write", 0), index_map)
    sch.transform_layout(b_warp, ("write", 0), index_map)
    sch.transform_layout(c_warp, ("read", 0), index_map)
    sch.tensorize(loop_a, LDMATRIX_f16_A_DYN_INTRIN)
    sch.tensorize(loop_b, LDMATRIX_f16_B_DYN_INTRIN)
    sch.tensorize(sch.get_loops(block_inner)[-3], MMA_f16f16f32_INTRIN)
    sch.tensorize(sch.get_loops(block_init_c)[-2], MMA_fill_16x16_f32_INTRIN)
    sch.tensorize(sch.get_loops(c_warp)[-2], MMA_store_16x16_f32_global_INTRIN)
    return sch


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


# ---------------------------------------------------------------------------- Hopper wgmma GEMM
def wgmma_gemm(n: int = 1024, bn: int = 128, tensorize: bool = True, vector: int = 8):
    """An fp16 "TN" GEMM ``C[i, j] = sum_k A[i, k] * B[j, k]`` (fp32 accumulation, A and B K-major) for
    one Hopper warp group per block on wgmma (sm_90a).  Returns ``(sch, k0, k1)``.

    Block tile 64 x ``bn`` (blockIdx.y, blockIdx.x), 128 threads; the outer loop k0 steps K by 64: copies
    of a 64 x 64 tile of A and a ``bn`` x 64 tile of B into ``shared.dyn`` (16-byte vectors, 8 consecutive k)
    in the core-matrix layout of ``kernels.wgmma_intrinsics`` and the inner loop k1 of 4 ``m64n{bn}k16`` wgmmas
    (each operand slice starts 2 core-matrix columns further on).  The accumulator is a ``local``
    (128, bn / 2) fragment per block, zeroed before k0 and stored after it.  ``tensorize=False`` leaves
    the three blocks as plain TIR with the same loops and layouts (the reference the tensorize check
    compares against, and runnable on a CPU with ``thread_bindings=False`` applied by the caller).
    ``vector``: fp16 elements per copy vector (8: 16 bytes, what TMA needs; 4: 8-byte ``cp.async`` copies).
    """
    from tvm import s_tir, te

    from ..kernels.wgmma_intrinsics import WGMMA_BK, WGMMA_BM, WGMMA_K, wgmma_fragment, wgmma_intrinsics

    if n % WGMMA_BM or n % bn or n % WGMMA_BK:
        raise InputError(f"n = {n} must be a multiple of 64 and of bn = {bn}")
    names = wgmma_intrinsics(bn)
    bm, bk = WGMMA_BM, WGMMA_BK
    a = te.placeholder((n, n), "float16", name="A")
    b = te.placeholder((n, n), "float16", name="B")
    r = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, r].astype("float32") * b[j, r].astype("float32"), axis=r),
                   name="C")
    sch = s_tir.Schedule(te.create_prim_func([a, b, c]))
    blk = sch.get_sblock("C")
    i, j, k = sch.get_loops(blk)
    i0, i1 = sch.split(i, [None, bm])
    j0, j1 = sch.split(j, [None, bn])
    k0, k1, k2 = sch.split(k, [None, bk // WGMMA_K, WGMMA_K])
    sch.reorder(i0, j0, k0, k1, i1, j1, k2)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    acc = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_at(acc, j0)
    for idx in (0, 1):
        tile = sch.cache_read(blk, idx, "shared.dyn")
        sch.compute_at(tile, k0)
        _, tx, vec = sch.split(sch.fuse(*sch.get_loops(tile)[-2:]), [None, 128, vector])
        sch.bind(tx, "threadIdx.x")
        sch.vectorize(vec)
    def core_matrices(rows):  # (row, k) -> (row tile, k tile, k // 8, row // 8, row % 8, k % 8)
        return lambda x, y: (x // rows, y // bk, (y % bk) // 8, (x % rows) // 8, x % 8, y % 8)

    sch.transform_layout(blk, ("read", 0), core_matrices(bm))
    sch.transform_layout(blk, ("read", 1), core_matrices(bn))
    sch.transform_layout(blk, ("write", 0), lambda x, y: (x // bm, y // bn, *wgmma_fragment(x % bm, y % bn)))
    init = sch.decompose_reduction(blk, k0)
    if tensorize:
        sch.tensorize(sch.get_loops(blk)[-3], names["mma"])
        sch.tensorize(sch.get_loops(init)[-2], names["fill"])
        sch.tensorize(sch.get_loops(acc)[-2], names["store"])
    return sch, k0, k1


def gemv(m: int = 4096, k: int = 4096, *, bm: int = 32, bk: int = 256, scope: str = "shared",
         vector: int | None = 8, dtype: str = "float16", outputs: int = 1, x_once: bool = False):
    """``outputs`` GEMVs ``Y_o[i] = sum_k A_o[i, k] * X_o[k]`` (fp32 accumulation) in one function, each with
    the same schedule; returns ``(sch, [k0 of each])``.

    Per GEMV: ``bm`` rows per block (blockIdx.x), one row per thread (``bm`` threads); the k loop split
    by ``bk``; at each step of the outer k0 a ``bm x bk`` tile of A and ``bk`` elements of X are copied
    into ``scope`` ("shared": static ``__shared__`` arrays, "shared.dyn": the dynamic pool) by the block's
    threads, ``vector`` elements per thread and copy (None: one); ``x_once``: all of X is copied once per
    block, before the k loop (a shared buffer the loop does not write).  With ``outputs`` > 1 every GEMV has
    loops of the same names (``k_0`` ...): the loops are told apart only by reference.
    """
    from tvm import s_tir, te

    if m % bm or k % bk or (vector and bk % (bm * vector)):
        raise InputError(f"gemv: m = {m} must be a multiple of bm = {bm}, k = {k} of bk = {bk}, and bk of "
                         f"bm * vector = {bm * (vector or 1)}")
    ins, outs = [], []

    def product(a, x):
        r = te.reduce_axis((0, k), name="k")
        return te.compute((m,), lambda i: te.sum(a[i, r].astype("float32") * x[r].astype("float32"), axis=r),
                          name=f"Y{len(outs)}")

    for o in range(outputs):
        ins += [te.placeholder((m, k), dtype, name=f"A{o}"), te.placeholder((k,), dtype, name=f"X{o}")]
        outs.append(product(*ins[-2:]))
    sch = s_tir.Schedule(te.create_prim_func([*ins, *outs]))
    k0s = []
    for o in range(outputs):
        blk = sch.get_sblock(f"Y{o}")
        i, kk = sch.get_loops(blk)
        i0, i1 = sch.split(i, [None, bm])
        k0, _ = sch.split(kk, [None, bk])
        sch.bind(i0, "blockIdx.x")
        sch.bind(i1, "threadIdx.x")
        for idx in (0, 1):
            tile = sch.cache_read(blk, idx, scope)
            sch.compute_at(tile, i0 if idx == 1 and x_once else k0)
            loops = sch.get_loops(tile)[-2:] if idx == 0 else sch.get_loops(tile)[-1:]
            fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
            parts = sch.split(fused, [None, bm, vector] if vector else [None, bm])
            sch.bind(parts[1], "threadIdx.x")
            if vector:
                sch.vectorize(parts[2])
        k0s.append(k0)
    return sch, k0s
