"""The s_tir tensor intrinsics of a Hopper wgmma ``m64nNk16`` (f16 x f16 -> f32), and their accumulator layout.

``wgmma_intrinsics(bn)`` registers (once) the tensor intrinsics that ``workloads.wgmma_gemm`` tensorizes
with: the wgmma itself, the accumulator's fill and its store.  The accumulator they describe is a
``(128, bn / 2)`` ``local`` buffer indexed ``[thread, register]`` (``wgmma_fragment`` /
``wgmma_element``), which ``transforms.fragments`` shrinks to per-thread registers; the synchronous
wgmma group each call emits is what ``transforms.wgmma_overlap`` keeps in flight, and the operand
layout is what ``transforms.ws.wgmma_swizzle`` re-lays.  ``wgmma_fragment_intrinsics(n)`` registers what
``kernels.attention_wgmma`` needs besides: the wgmma with an MN-major B operand (imm-trans-b = 1: V in
O += P V), the accumulator rescaled by a factor per row, and its stores to shared memory.  TVM through
``frontend.ir`` only.
"""
from __future__ import annotations

from ..errors import InputError
from ..frontend.ir import T, s_tir
from ..frontend.plain_fences import PLAIN_FENCE

__all__ = ["WGMMA_BK", "WGMMA_BM", "WGMMA_K", "mn_major_lbo_sbo", "mn_major_offset", "wgmma_element",
           "wgmma_fragment", "wgmma_fragment_intrinsics", "wgmma_intrinsics"]

#: The wgmma workload's tile: one warp group (128 threads) computes a BM x bn block of C, K in steps of BK
#: (a shared tile of A and of B per step) and WGMMA_K (one wgmma.mma_async per step of the inner loop).
WGMMA_BM, WGMMA_BK, WGMMA_K = 64, 64, 16


def wgmma_fragment(i, j):
    """(thread, register) of element (i, j) of a m64nN f32 wgmma accumulator (PTX ISA 9.7.15.5.1.1, figure
    "WGMMA .m64nNk16 register fragment layout for accumulator matrix D").

    Warp ``w = t // 32`` of the warp group owns rows 16w .. 16w+15; inside a warp the layout is mma.sync's
    m16n8 C fragment repeated every 8 columns: lane ``l`` holds rows ``l // 4`` and ``l // 4 + 8`` and
    columns ``2 * (l % 4) + {0, 1}`` of every 8-column slice ``s``, in registers ``4s + {0, 1}`` (the upper
    row) and ``4s + {2, 3}`` (the row 8 below).  So thread t, register r holds
    ``(16 * (t // 32) + (t % 32) // 4 + 8 * ((r % 4) // 2), 8 * (r // 4) + 2 * (t % 4) + r % 2)``
    (``wgmma_element``), TVM's test_codegen_hopper store loop read backwards.
    """
    return 32 * (i // 16) + 4 * (i % 8) + (j % 8) // 2, 4 * (j // 8) + 2 * ((i % 16) // 8) + j % 2


def wgmma_element(t, r):
    """(row, column) of register r of thread t of the accumulator: the inverse of ``wgmma_fragment``."""
    return 16 * (t // 32) + (t % 32) // 4 + 8 * ((r % 4) // 2), 8 * (r // 4) + 2 * (t % 4) + r % 2


def wgmma_intrinsics(bn: int = 128) -> dict:
    """Register (once) the s_tir tensor intrinsics of a m64n{bn}k16 f16 x f16 -> f32 wgmma; returns their names.

    ``"mma"``: ``C[64, bn] += A[64, 16] @ B[bn, 16]^T`` with A and B K-major in shared memory in the
    no-swizzle ("interleave") core-matrix layout and C the accumulator fragment (a ``(128, bn / 2)``
    ``local`` buffer indexed ``[thread, register]`` by ``wgmma_fragment``).  A shared operand tile of R rows
    by 16 k is the buffer ``X[k // 8, r // 8, r % 8, k % 8]`` of shape (2, R / 8, 8, 8): element (r, k) at
    fp16 offset ``(k // 8) * 8R + (r // 8) * 64 + (r % 8) * 8 + k % 8``, so each 8x8 core matrix (8 rows
    of 8 consecutive k, 16 bytes a row) is 128 contiguous bytes, core matrices adjacent in r (M or N) are
    128 bytes apart (the stride byte offset, SBO = 128 B, encoded 128 >> 4 = 8) and adjacent in k are
    ``8R * 2 = 16R`` bytes apart (the leading byte offset, LBO, encoded R: 64 for A, bn for B); this is
    CUTLASS's K-major INTERLEAVE canonical layout ``((8, m), (8, 2)) : ((8, SBO), (1, LBO))`` in
    elements.  The descriptors carry the tile's start address >> 4, LBO >> 4, SBO >> 4 and layout 0 (no
    swizzle), both operands untransposed (imm-trans-a = imm-trans-b = 0: K-major).  The impl is one
    synchronous wgmma group per call: ``wgmma.fence``; ``mma_async`` with scale-d = 1 (D = A B + D);
    ``commit_group``; ``wait_group 0``.
    ``"fill"``: the accumulator set to 0; ``"store"``: the accumulator to a 64 x bn tile of a global f32
    buffer (each thread its N/2 registers at ``wgmma_element``).
    """
    if bn % 8 or not 8 <= bn <= 256:
        raise InputError(f"wgmma N must be a multiple of 8 in [8, 256], got {bn}")
    names = {"mma": f"tvm_twill_wgmma_m64n{bn}k16_f16f16f32", "fill": f"tvm_twill_wgmma_fill_m64n{bn}_f32",
             "store": f"tvm_twill_wgmma_store_m64n{bn}_f32_global"}
    _register(names, {"mma": lambda: _mma(bn), "fill": lambda: _fill(bn), "store": lambda: _store(bn)})
    return names


def _register(names: dict, pairs: dict) -> None:
    """Register ``pairs[key]()`` under ``names[key]`` for each name not registered yet."""
    for key, make in pairs.items():
        try:
            s_tir.TensorIntrin.get(names[key])
            continue
        except Exception:  # noqa: BLE001 - not registered yet
            pass
        s_tir.TensorIntrin.register(names[key], *make(), override=True)


def mn_major_offset(n, k, bn: int):
    """fp16 offset of element (n, k) of a ``bn`` x 16 wgmma operand tile in the MN-major no-swizzle
    core-matrix layout of ``wgmma_fragment_intrinsics(bn)["mma_mn_b"]``: the buffer ``X[k // 8, n // 8, k % 8,
    n % 8]`` of shape (2, bn / 8, 8, 8)."""
    return (k // 8) * 8 * bn + (n // 8) * 64 + (k % 8) * 8 + n % 8


def mn_major_lbo_sbo(bn: int) -> tuple[int, int]:
    """(LBO, SBO) in bytes of the MN-major tile of ``mn_major_offset``: core matrices adjacent in k are
    ``16 bn`` bytes apart (LBO), adjacent in n 128 bytes apart (SBO)."""
    return 16 * bn, 128


def wgmma_fragment_intrinsics(bn: int) -> dict:
    """Register (once) the intrinsics a FlashAttention kernel needs beyond ``wgmma_intrinsics``, for an
    accumulator of ``bn`` columns (a ``(128, bn / 2)`` ``local`` buffer indexed by ``wgmma_fragment``);
    returns their names.

    ``"mma_mn_b"``: ``C[64, bn] += A[64, 16] @ B[16, bn]`` with A K-major (as ``wgmma_intrinsics``'s
    ``"mma"``) and B **MN-major** (its N dimension contiguous: ``imm-trans-b = 1``), both no swizzle.  The B
    tile (16 k by bn n) is the buffer ``B[k // 8, n // 8, k % 8, n % 8]`` of shape (2, bn / 8, 8, 8): each
    8x8 core matrix is 8 rows of k, each row 8 consecutive n (16 bytes), 128 contiguous bytes; element
    (n, k) at byte ``(n % 8) * 2 + (n // 8) * SBO + (k % 8) * 16 + (k // 8) * LBO`` with SBO = 128 B
    (core matrices adjacent in n, encoded 8) and LBO = ``16 bn`` B (adjacent in k, encoded bn): CUTLASS's
    MN-major INTERLEAVE canonical layout ``((T, 1, m), (8, k)) : ((1, T, SBO), (T, LBO))`` in elements
    (T = 8 fp16 per 16 bytes), which is ``tile_to_shape(Layout_MN_INTER_Atom<half_t>, (bn, 16))``: for an
    MN-major INTERLEAVE descriptor make_gmma_desc takes SBO from the n mode and LBO from the k mode.  A
    row-major ``[key, d]`` tile of V is this layout with n = d, k = key.  One synchronous wgmma group per
    call, as ``"mma"``.
    ``"scale_rows"``: ``C[i, j] *= F[i]`` (F: 64 fp32 row factors in shared memory), each thread its bn / 2
    registers.  ``"store_shared"``: the accumulator to a row-major 64 x bn fp32 tile in ``shared.dyn``;
    ``"store_clear_shared"``: the accumulator to a 64 x bn fp32 tile in ``shared.dyn`` laid out as the K-major
    core-matrix A operand (``D[j // 8, i // 8, i % 8, j % 8]``, shape (bn / 8, 8, 8, 8): the layout of P, the
    operand written from S, so that a thread's read of S and write of P have the same index, which TVM's
    ThreadSync needs to see no conflict between them in the dynamic pool), then the accumulator set to 0
    (the next GEMM's C = 0).
    """
    if bn % 8 or not 8 <= bn <= 256:
        raise InputError(f"wgmma N must be a multiple of 8 in [8, 256], got {bn}")
    names = {"mma_mn_b": f"tvm_twill_wgmma_m64n{bn}k16_f16f16f32_mn_b",
             "scale_rows": f"tvm_twill_wgmma_scale_rows_m64n{bn}_f32",
             "store_shared": f"tvm_twill_wgmma_store_m64n{bn}_f32_shared",
             "store_clear_shared": f"tvm_twill_wgmma_store_clear_m64n{bn}_f32_shared"}
    _register(names, {"mma_mn_b": lambda: _mma(bn, mn_major_b=True), "scale_rows": lambda: _scale_rows(bn),
                      "store_shared": lambda: _store(bn, "shared.dyn"),
                      "store_clear_shared": lambda: _store(bn, "shared.dyn", clear=True, k_major=True)})
    return names


def _mma(bn: int, mn_major_b: bool = False) -> tuple:
    """(description, implementation) of ``C[64, bn] += A[64, 16] @ B^T``: one synchronous wgmma group.  B is
    K-major ``B[k // 8, n // 8, n % 8, k % 8]`` or, with ``mn_major_b``, MN-major ``B[k // 8, n // 8, k % 8,
    n % 8]`` (imm-trans-b = 1); both have LBO = 16 bn bytes and SBO = 128 bytes."""
    bm, kk, nr = WGMMA_BM, WGMMA_K, bn // 2
    frag = wgmma_fragment
    shape = f"m64n{bn}k16"
    trans_b = 1 if mn_major_b else 0

    def b_at(k, n):
        return (k // 8, n // 8, k % 8, n % 8) if mn_major_b else (k // 8, n // 8, n % 8, k % 8)

    @T.prim_func(s_tir=True)
    def mma_desc(a: T.handle, b: T.handle, c: T.handle) -> None:
        A = T.match_buffer(a, (2, bm // 8, 8, 8), "float16", align=64, offset_factor=1, scope="shared.dyn")
        B = T.match_buffer(b, (2, bn // 8, 8, 8), "float16", align=64, offset_factor=1, scope="shared.dyn")
        C = T.match_buffer(c, (128, nr), "float32", align=64, offset_factor=1, scope="local")
        with T.sblock("root"):
            T.reads(C[0:128, 0:nr], A[0:2, 0:bm // 8, 0:8, 0:8], B[0:2, 0:bn // 8, 0:8, 0:8])
            T.writes(C[0:128, 0:nr])
            for i, j, k in T.grid(bm, bn, kk):
                with T.sblock("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    T.reads(C[frag(vi, vj)], A[vk // 8, vi // 8, vi % 8, vk % 8], B[b_at(vk, vj)])
                    T.writes(C[frag(vi, vj)])
                    C[frag(vi, vj)] = C[frag(vi, vj)] + T.Cast("float32", A[vk // 8, vi // 8, vi % 8, vk % 8]) \
                        * T.Cast("float32", B[b_at(vk, vj)])

    @T.prim_func(s_tir=True)
    def mma_impl(a: T.handle, b: T.handle, c: T.handle) -> None:
        A = T.match_buffer(a, (2, bm // 8, 8, 8), "float16", align=64, offset_factor=1, scope="shared.dyn")
        B = T.match_buffer(b, (2, bn // 8, 8, 8), "float16", align=64, offset_factor=1, scope="shared.dyn")
        C = T.match_buffer(c, (128, nr), "float32", align=64, offset_factor=1, scope="local")
        with T.sblock("root"):
            T.reads(C[0:128, 0:nr], A[0:2, 0:bm // 8, 0:8, 0:8], B[0:2, 0:bn // 8, 0:8, 0:8])
            T.writes(C[0:128, 0:nr])
            desc_a = T.alloc_buffer((1,), "uint64", scope="local")
            desc_b = T.alloc_buffer((1,), "uint64", scope="local")
            for tx in T.thread_binding(0, 128, "threadIdx.x"):
                with T.attr(0, PLAIN_FENCE, 1):  # for builds without tvm_twill's pipelines (frontend.plain_fences)
                    T.ptx.fence.proxy.async_.shared__cta()
                    T.tvm_storage_sync("shared")
                T.cuda.wgmma.encode_matrix_descriptor(T.address_of(desc_a[0]), A.access_ptr("r"), bm, 8, 0)
                T.cuda.wgmma.encode_matrix_descriptor(T.address_of(desc_b[0]), B.access_ptr("r"), bn, 8, 0)
                T.ptx.wgmma.fence.sync.aligned()
                T.ptx[f"wgmma.mma_async.sync.aligned.{shape}.f32.f16.f16"](
                    *[C[tx, r] for r in range(nr)], desc_a[0], desc_b[0], T.bool(True), 1, 1, 0, trans_b)
                T.ptx.wgmma.commit_group.sync.aligned()
                T.ptx.wgmma.wait_group.sync.aligned(0)

    return mma_desc, mma_impl


def _fill(bn: int) -> tuple:
    """(description, implementation) of the accumulator set to 0."""
    bm, nr = WGMMA_BM, bn // 2
    frag = wgmma_fragment

    @T.prim_func(s_tir=True)
    def fill_desc(c: T.handle) -> None:
        C = T.match_buffer(c, (128, nr), "float32", align=64, offset_factor=1, scope="local")
        with T.sblock("root"):
            T.reads()
            T.writes(C[0:128, 0:nr])
            for i, j in T.grid(bm, bn):
                with T.sblock("C_init"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    T.reads()
                    T.writes(C[frag(vi, vj)])
                    C[frag(vi, vj)] = T.float32(0)

    @T.prim_func(s_tir=True)
    def fill_impl(c: T.handle) -> None:
        C = T.match_buffer(c, (128, nr), "float32", align=64, offset_factor=1, scope="local")
        with T.sblock("root"):
            T.reads()
            T.writes(C[0:128, 0:nr])
            for tx in T.thread_binding(0, 128, "threadIdx.x"):
                for r in T.unroll(nr):
                    C[tx, r] = T.float32(0)

    return fill_desc, fill_impl


def _store(bn: int, scope: str = "global", clear: bool = False, k_major: bool = False) -> tuple:
    """(description, implementation) of the accumulator stored to a 64 x bn f32 tile in ``scope``, row-major
    (``D[i, j]``) or, with ``k_major``, in the K-major core-matrix layout ``D[j // 8, i // 8, i % 8, j % 8]``;
    with ``clear`` the accumulator is set to 0 after."""
    bm, nr = WGMMA_BM, bn // 2
    frag = wgmma_fragment
    shape = (bn // 8, bm // 8, 8, 8) if k_major else (bm, bn)
    full = tuple(slice(0, e) for e in shape)

    def at(i, j):
        return (j // 8, i // 8, i % 8, j % 8) if k_major else (i, j)

    @T.prim_func(s_tir=True)
    def store_desc(c: T.handle, d: T.handle) -> None:
        C = T.match_buffer(c, (128, nr), "float32", align=64, offset_factor=1, scope="local")
        D = T.match_buffer(d, shape, "float32", align=64, offset_factor=1, scope=scope)
        with T.sblock("root"):
            T.reads(C[0:128, 0:nr])
            T.writes(D[full])
            for i, j in T.grid(bm, bn):
                with T.sblock("store"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    T.reads(C[frag(vi, vj)])
                    T.writes(D[at(vi, vj)])
                    D[at(vi, vj)] = C[frag(vi, vj)]

    @T.prim_func(s_tir=True)
    def store_clear_desc(c: T.handle, d: T.handle) -> None:
        C = T.match_buffer(c, (128, nr), "float32", align=64, offset_factor=1, scope="local")
        D = T.match_buffer(d, shape, "float32", align=64, offset_factor=1, scope=scope)
        with T.sblock("root"):
            T.reads(C[0:128, 0:nr])
            T.writes(D[full], C[0:128, 0:nr])
            for i, j in T.grid(bm, bn):
                with T.sblock("store"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    T.reads(C[frag(vi, vj)])
                    T.writes(D[at(vi, vj)], C[frag(vi, vj)])
                    D[at(vi, vj)] = C[frag(vi, vj)]
                    C[frag(vi, vj)] = T.float32(0)

    strides = [T.int32() for _ in shape]

    @T.prim_func(s_tir=True)
    def store_impl(c: T.handle, d: T.handle) -> None:
        C = T.match_buffer(c, (128, nr), "float32", align=64, offset_factor=1, scope="local")
        D = T.match_buffer(d, shape, "float32", align=64, offset_factor=1, scope=scope, strides=strides)
        with T.sblock("root"):
            T.reads(C[0:128, 0:nr])
            T.writes(D[full])
            for tx in T.thread_binding(0, 128, "threadIdx.x"):
                for r in T.unroll(nr):
                    D[at(*wgmma_element(tx, r))] = C[tx, r]

    @T.prim_func(s_tir=True)
    def store_clear_impl(c: T.handle, d: T.handle) -> None:
        C = T.match_buffer(c, (128, nr), "float32", align=64, offset_factor=1, scope="local")
        D = T.match_buffer(d, shape, "float32", align=64, offset_factor=1, scope=scope, strides=strides)
        with T.sblock("root"):
            T.reads(C[0:128, 0:nr])
            T.writes(D[full], C[0:128, 0:nr])
            for tx in T.thread_binding(0, 128, "threadIdx.x"):
                for r in T.unroll(nr):
                    D[at(*wgmma_element(tx, r))] = C[tx, r]
                    C[tx, r] = T.float32(0)

    return (store_clear_desc, store_clear_impl) if clear else (store_desc, store_impl)


def _scale_rows(bn: int) -> tuple:
    """(description, implementation) of ``C[i, j] *= F[i]``: each thread scales its registers by the
    factor of their row (``wgmma_element``)."""
    bm, nr = WGMMA_BM, bn // 2
    frag = wgmma_fragment

    @T.prim_func(s_tir=True)
    def scale_desc(c: T.handle, f: T.handle) -> None:
        C = T.match_buffer(c, (128, nr), "float32", align=64, offset_factor=1, scope="local")
        F = T.match_buffer(f, (bm,), "float32", offset_factor=1, scope="shared.dyn")
        with T.sblock("root"):
            T.reads(C[0:128, 0:nr], F[0:bm])
            T.writes(C[0:128, 0:nr])
            for i, j in T.grid(bm, bn):
                with T.sblock("C"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    T.reads(C[frag(vi, vj)], F[vi])
                    T.writes(C[frag(vi, vj)])
                    C[frag(vi, vj)] = C[frag(vi, vj)] * F[vi]

    @T.prim_func(s_tir=True)
    def scale_impl(c: T.handle, f: T.handle) -> None:
        C = T.match_buffer(c, (128, nr), "float32", align=64, offset_factor=1, scope="local")
        F = T.match_buffer(f, (bm,), "float32", offset_factor=1, scope="shared.dyn")
        with T.sblock("root"):
            T.reads(C[0:128, 0:nr], F[0:bm])
            T.writes(C[0:128, 0:nr])
            for tx in T.thread_binding(0, 128, "threadIdx.x"):
                for r in T.unroll(nr):
                    C[tx, r] = C[tx, r] * F[wgmma_element(tx, r)[0]]

    return scale_desc, scale_impl
