"""The s_tir tensor intrinsics of a Hopper wgmma ``m64nNk16`` (f16 x f16 -> f32), and their accumulator layout.

``wgmma_intrinsics(bn)`` registers (once) the tensor intrinsics that ``workloads.wgmma_gemm`` tensorizes
with: the wgmma itself, the accumulator's fill and its store.  The accumulator they describe is a
``(128, bn / 2)`` ``local`` buffer indexed ``[thread, register]`` (``wgmma_fragment`` /
``wgmma_element``), which ``transforms.fragments`` shrinks to per-thread registers; the synchronous
wgmma group each call emits is what ``transforms.wgmma_overlap`` keeps in flight, and the operand
layout is what ``transforms.wgmma_swizzle`` re-lays.  TVM through ``frontend.ir`` only.
"""
from __future__ import annotations

from ..errors import InputError
from ..frontend.ir import T, s_tir

__all__ = ["WGMMA_BK", "WGMMA_BM", "WGMMA_K", "wgmma_element", "wgmma_fragment", "wgmma_intrinsics"]

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
    try:
        s_tir.TensorIntrin.get(names["mma"])
        return names
    except Exception:  # noqa: BLE001 - not registered yet
        pass
    s_tir.TensorIntrin.register(names["mma"], *_mma(bn), override=True)
    s_tir.TensorIntrin.register(names["fill"], *_fill(bn), override=True)
    s_tir.TensorIntrin.register(names["store"], *_store(bn), override=True)
    return names


def _mma(bn: int) -> tuple:
    """(description, implementation) of ``C[64, bn] += A[64, 16] @ B[bn, 16]^T``: one synchronous wgmma group."""
    bm, kk, nr = WGMMA_BM, WGMMA_K, bn // 2
    frag = wgmma_fragment
    shape = f"m64n{bn}k16"

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
                    T.reads(C[frag(vi, vj)], A[vk // 8, vi // 8, vi % 8, vk % 8],
                            B[vk // 8, vj // 8, vj % 8, vk % 8])
                    T.writes(C[frag(vi, vj)])
                    C[frag(vi, vj)] = C[frag(vi, vj)] + T.Cast("float32", A[vk // 8, vi // 8, vi % 8, vk % 8]) \
                        * T.Cast("float32", B[vk // 8, vj // 8, vj % 8, vk % 8])

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
                T.cuda.wgmma.encode_matrix_descriptor(T.address_of(desc_a[0]), A.access_ptr("r"), bm, 8, 0)
                T.cuda.wgmma.encode_matrix_descriptor(T.address_of(desc_b[0]), B.access_ptr("r"), bn, 8, 0)
                T.ptx.wgmma.fence.sync.aligned()
                T.ptx[f"wgmma.mma_async.sync.aligned.{shape}.f32.f16.f16"](
                    *[C[tx, r] for r in range(nr)], desc_a[0], desc_b[0], T.bool(True), 1, 1, 0, 0)
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


def _store(bn: int) -> tuple:
    """(description, implementation) of the accumulator stored to a 64 x bn tile of a global f32 buffer."""
    bm, nr = WGMMA_BM, bn // 2
    frag = wgmma_fragment

    @T.prim_func(s_tir=True)
    def store_desc(c: T.handle, d: T.handle) -> None:
        C = T.match_buffer(c, (128, nr), "float32", align=64, offset_factor=1, scope="local")
        D = T.match_buffer(d, (bm, bn), "float32", align=64, offset_factor=1, scope="global")
        with T.sblock("root"):
            T.reads(C[0:128, 0:nr])
            T.writes(D[0:bm, 0:bn])
            for i, j in T.grid(bm, bn):
                with T.sblock("store"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    T.reads(C[frag(vi, vj)])
                    T.writes(D[vi, vj])
                    D[vi, vj] = C[frag(vi, vj)]

    @T.prim_func(s_tir=True)
    def store_impl(c: T.handle, d: T.handle) -> None:
        s0 = T.int32()
        s1 = T.int32()
        C = T.match_buffer(c, (128, nr), "float32", align=64, offset_factor=1, scope="local")
        D = T.match_buffer(d, (bm, bn), "float32", align=64, offset_factor=1, scope="global", strides=[s0, s1])
        with T.sblock("root"):
            T.reads(C[0:128, 0:nr])
            T.writes(D[0:bm, 0:bn])
            for tx in T.thread_binding(0, 128, "threadIdx.x"):
                for r in T.unroll(nr):
                    D[wgmma_element(tx, r)] = C[tx, r]

    return store_desc, store_impl
