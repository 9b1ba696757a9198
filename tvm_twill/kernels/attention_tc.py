"""FlashAttention forward on tensor cores (sm_80 mma.sync), in s_tir: the KV loop tvm_twill pipelines.

``fa_forward_tc(shape)`` returns a PrimFunc ``(Q, K, V, O)`` with the layout and masks of
``attention.fa_forward`` (``Q, O: (heads, q_len, head_dim)``, ``K, V: (heads, n, head_dim)`` fp16, ``n``
symbolic, unscaled scores, top-left causal mask, zeros for a row that sees no key).  Each thread block
computes ``block_m`` query rows of one head with ``block_m / 32`` warps (``threadIdx.y``); warp ``w`` owns
rows ``32 w .. 32 w + 31``.  Both GEMMs run on tensor cores, tensorized with TVM's sm_80 intrinsics
(``tvm.s_tir.tensor_intrin.cuda``: ldmatrix from ``shared.dyn``, ``mma.sync`` m16n8k16 fp16 -> fp32, the
fill and the store of the accumulator); the softmax is SIMT in fp32, one thread per row.  The output
accumulator ``O`` stays in the mma fragments across the KV loop, rescaled in place each iteration by
``O_scale`` (an intrinsic registered here, ``SCALE_ROWS_INTRIN``: row ``r`` of a 16x16 accumulator tile
times ``corr[r]``).

The KV loop ``KV_LOOP`` (``j``) has twelve statements, FlashAttention-2's inner loop:

====  ============  ==========================================================================
 #    name          what it does
====  ============  ==========================================================================
 0    ``K_load``    K tile -> shared (zero past ``n``), all warps, 16-byte vectors (cp.async)
 1    ``V_load``    V tile -> shared (same)
 2    ``S_init``    S = 0 in the warp's accumulator fragments (``mma_fill``)
 3    ``S``         S += Q K^T: per 16 of the head dim, ldmatrix Q and K^T, mma.sync
 4    ``S_store``   S fragments -> shared (fp32), for the row-wise softmax
 5    ``m_new``     row max of the masked S, with the running max ``m``
 6    ``P``         P = exp(S - m_new), 0 where masked, fp16 into shared (the A operand of O)
 7    ``corr``      the correction exp(m - m_new), into shared (read by every lane of a row's tile)
 8    ``l``         running row sum: l = l * corr + sum(P)
 9    ``O_scale``   O *= corr, on the accumulator fragments
10    ``m_update``  m = m_new
11    ``O``         O += P V: per 16 keys, ldmatrix P and V, mma.sync
====  ============  ==========================================================================

Compile it under ``TC_PASS_CONFIG``.  Tensor-core intrinsics run only on a GPU (or ``tvm_twill.emulator``):
llvm cannot compile this kernel, so it is checked on the emulator.  The kernel as ``auto_pipeline`` plans it
compiles too (``tvm_twill.build(sch.mod, arch, plan)``, sm_80 and sm_90a): the plan's TIR pipeline
(``tvm_twill_swp``) turns the guards TVM puts around the prologue and epilogue of the symbolic trip count into
loops of 0 or 1 trips, so the barriers ThreadSync places there are not under an ``if``
(``transforms.swp_lowering.uniform_guard_loops``).  So does the warp-specialized kernel
(``auto_pipeline(..., warp_specialize=True)`` under ``TC_PASS_CONFIG``: a producer warp on mbarrier rings, the
mma warps as consumers, their exchanges through the shared tiles ordered by named barriers).  Both
pipelines make every mma fragment one thread's registers (``transforms.warp_memory``: ``O_w`` is ``head_dim``
floats per thread, ``Q_w`` 16 halves, ...; TVM's own pass lowers only the first): ptxas reports no stack frame.
``fa_forward_tc(shape, tensorize=False)`` returns the loops before tensorization (what ``tensorize`` rewrites;
the fragments are ``warp``-scope buffers in logical layout).
"""
from __future__ import annotations

import textwrap

from .attention import NEG_INF, AttentionShape

__all__ = ["FILL_INTRIN", "SCALE_ROWS_INTRIN", "STORE_CLEAR_INTRIN", "TC_PASS_CONFIG", "fa_forward_tc", "tc_shape_check"]

#: The PassContext config the kernel compiles under: the rescale indexes the accumulator lane by lane, and
#: TVM's common-subexpression elimination would hide the lane index from LowerWarpMemory.
#: ``with tvm.transform.PassContext(config=TC_PASS_CONFIG): tvm_twill.build(mod, "sm_80", plan)``.
TC_PASS_CONFIG = {"tirx.disable_cse_tir": True}

#: Name of the tensor intrinsic ``O_scale`` is tensorized with (registered on first use).
SCALE_ROWS_INTRIN = "tvm_twill_mma_scale_rows_16x16_f32"
#: An fp32 accumulator fill written lane by lane (TVM lowers a ``warp`` buffer to per-lane registers only
#: when some statement indexes it by lane; TVM's own fill is a pointer call).
FILL_INTRIN = "tvm_twill_mma_fill_16x16_f32"
#: Accumulator tile -> shared fp32, then the tile cleared for the next GEMM (S = 0 without a statement of its own).
STORE_CLEAR_INTRIN = "tvm_twill_mma_store_clear_16x16_f32"
WARP_ROWS = 32  # query rows per warp: two m16 tiles


def tc_shape_check(s: AttentionShape) -> None:
    """``InputError`` unless the shape tiles onto warps of 32 rows and 16x16 mma tiles."""
    from ..errors import InputError

    s.check()
    if s.block_m % WARP_ROWS:
        raise InputError(f"fa_forward_tc: block_m {s.block_m} is not a multiple of {WARP_ROWS} (rows per warp)")
    if s.block_n % 16 or s.head_dim % 16:
        raise InputError(f"fa_forward_tc: block_n {s.block_n} and head_dim {s.head_dim} must be multiples of 16 "
                         "(the mma tile)")


def _copy(name: str, src: str, s: AttentionShape) -> str:
    """K or V tile -> shared: every thread of the block copies ``vector`` fp16 at a time, zero past ``n``."""
    bm, bn, d, v = s.block_m, s.block_n, s.head_dim, s.vector
    lin = f"(it * {bm * v} + w * {WARP_ROWS * v} + tx * {v} + vv)"
    return f"""
                            for tx in T.thread_binding(32, thread="threadIdx.x"):
                                for it in T.serial({bn * d // (bm * v)}):
                                    for vv in T.vectorized({v}):
                                        with T.sblock("{name}"):
                                            r = T.axis.spatial({bn}, {lin} // {d})
                                            c = T.axis.spatial({d}, {lin} % {d})
                                            jv = T.axis.spatial((n + {bn - 1}) // {bn}, j)
                                            {name}_s[r, c] = T.if_then_else(jv * {bn} + r < n, {src}[h, jv * {bn} + r, c], T.float16(0))"""


def _gemm_s(s: AttentionShape) -> str:
    """Statements 2-4: S = 0, S += Q K^T (fragments per 16 of the head dim), S -> shared."""
    bn, d, wr = s.block_n, s.head_dim, WARP_ROWS
    return f"""
                            for kt in T.serial({d // 16}):
                                with T.sblock("S_step"):
                                    ks = T.axis.reduce({d // 16}, kt)
                                    for it, ii, kk in T.grid({wr // 16}, 16, 16):
                                        with T.sblock("Q_frag"):
                                            vi = T.axis.spatial({wr}, it * 16 + ii)
                                            vk = T.axis.spatial(16, kk)
                                            Q_w[vi, vk] = Q_s[w * {wr} + vi, ks * 16 + vk]
                                    for jt, jj, kk in T.grid({bn // 16}, 16, 16):
                                        with T.sblock("K_frag"):
                                            vj = T.axis.spatial({bn}, jt * 16 + jj)
                                            vk = T.axis.spatial(16, kk)
                                            K_w[vj, vk] = K_load_s[vj, ks * 16 + vk]
                                    for it, jt, ii, jj, kk in T.grid({wr // 16}, {bn // 16}, 16, 16, 16):
                                        with T.sblock("S_mma"):
                                            vi = T.axis.spatial({wr}, it * 16 + ii)
                                            vj = T.axis.spatial({bn}, jt * 16 + jj)
                                            vk = T.axis.reduce(16, kk)
                                            S_w[vi, vj] = S_w[vi, vj] + T.Cast("float32", Q_w[vi, vk]) * T.Cast("float32", K_w[vj, vk])
                            for it, jt, ii, jj in T.grid({wr // 16}, {bn // 16}, 16, 16):
                                with T.sblock("S_store"):
                                    vi = T.axis.spatial({wr}, it * 16 + ii)
                                    vj = T.axis.spatial({bn}, jt * 16 + jj)
                                    S_s[w * {wr} + vi, vj] = S_w[vi, vj]
                                    S_w[vi, vj] = T.float32(0)"""


def _softmax(s: AttentionShape) -> str:
    """Statements 5-8: the new row max, P = exp(S - m_new) into shared, corr into shared, the row sum."""
    bm, bn, wr = s.block_m, s.block_n, WARP_ROWS
    row = f"w * {wr} + r"
    mask = f"jv * {bn} + cc < n" + (f" and jv * {bn} + cc <= qb * {bm} + {row}" if s.causal else "")
    jv = f"jv = T.axis.spatial((n + {bn - 1}) // {bn}, j)"
    r = f"r = T.axis.spatial({wr}, tx)"
    return f"""
                            for tx in T.thread_binding(32, thread="threadIdx.x"):
                                for c in T.serial({bn}):
                                    with T.sblock("m_new"):
                                        {r}
                                        cc = T.axis.reduce({bn}, c)
                                        {jv}
                                        with T.init():
                                            m_new[{row}] = m[{row}]
                                        m_new[{row}] = T.max(m_new[{row}], T.if_then_else({mask}, S_s[{row}, cc], T.float32({NEG_INF})))
                            for tx in T.thread_binding(32, thread="threadIdx.x"):
                                for c in T.serial({bn}):
                                    with T.sblock("P"):
                                        {r}
                                        cc = T.axis.spatial({bn}, c)
                                        {jv}
                                        P_s[{row}, cc] = T.Cast("float16", T.if_then_else({mask}, T.exp(S_s[{row}, cc] - m_new[{row}]), T.float32(0)))
                            for tx in T.thread_binding(32, thread="threadIdx.x"):
                                with T.sblock("corr"):
                                    {r}
                                    corr_s[{row}] = T.exp(m[{row}] - m_new[{row}])
                            for tx in T.thread_binding(32, thread="threadIdx.x"):
                                with T.sblock("l"):
                                    {r}
                                    for c in T.serial({bn}):
                                        l[{row}] = T.if_then_else(c == 0, l[{row}] * corr_s[{row}], l[{row}]) + T.Cast("float32", P_s[{row}, c])"""


def _gemm_o(s: AttentionShape) -> str:
    """Statements 9-11: O *= corr on the fragments, m = m_new, O += P V (fragments per 16 keys)."""
    bn, d, wr = s.block_n, s.head_dim, WARP_ROWS
    return f"""
                            for it, ct, ii, cc in T.grid({wr // 16}, {d // 16}, 16, 16):
                                with T.sblock("O_scale"):
                                    vi = T.axis.spatial({wr}, it * 16 + ii)
                                    vc = T.axis.spatial({d}, ct * 16 + cc)
                                    O_w[vi, vc] = O_w[vi, vc] * corr_s[w * {wr} + vi]
                            for tx in T.thread_binding(32, thread="threadIdx.x"):
                                with T.sblock("m_update"):
                                    r = T.axis.spatial({wr}, tx)
                                    m[w * {wr} + r] = m_new[w * {wr} + r]
                            for kt in T.serial({bn // 16}):
                                with T.sblock("O_step"):
                                    ks = T.axis.reduce({bn // 16}, kt)
                                    for it, ii, kk in T.grid({wr // 16}, 16, 16):
                                        with T.sblock("P_frag"):
                                            vi = T.axis.spatial({wr}, it * 16 + ii)
                                            vk = T.axis.spatial(16, kk)
                                            P_w[vi, vk] = P_s[w * {wr} + vi, ks * 16 + vk]
                                    for ct, kk, cc in T.grid({d // 16}, 16, 16):
                                        with T.sblock("V_frag"):
                                            vk = T.axis.spatial(16, kk)
                                            vc = T.axis.spatial({d}, ct * 16 + cc)
                                            V_w[vk, vc] = V_load_s[ks * 16 + vk, vc]
                                    for it, ct, ii, cc, kk in T.grid({wr // 16}, {d // 16}, 16, 16, 16):
                                        with T.sblock("O_mma"):
                                            vi = T.axis.spatial({wr}, it * 16 + ii)
                                            vc = T.axis.spatial({d}, ct * 16 + cc)
                                            vk = T.axis.reduce(16, kk)
                                            O_w[vi, vc] = O_w[vi, vc] + T.Cast("float32", P_w[vi, vk]) * T.Cast("float32", V_w[vk, vc])"""


def _prologue(s: AttentionShape) -> str:
    """Before the KV loop: the warp's Q rows -> shared, m = -inf, l = 0, O = 0 (fragments)."""
    bm, d, wr = s.block_m, s.head_dim, WARP_ROWS
    return f"""
                    for tx in T.thread_binding(32, thread="threadIdx.x"):
                        for k in T.serial({d}):
                            with T.sblock("Q_load"):
                                r = T.axis.spatial({wr}, tx)
                                c = T.axis.spatial({d}, k)
                                Q_s[w * {wr} + r, c] = Q[h, qb * {bm} + w * {wr} + r, c]
                        with T.sblock("init_state"):
                            r = T.axis.spatial({wr}, tx)
                            m[w * {wr} + r] = T.float32({NEG_INF})
                            l[w * {wr} + r] = T.float32(0)
                    for it, jt, ii, jj in T.grid({wr // 16}, {s.block_n // 16}, 16, 16):
                        with T.sblock("S_init"):
                            vi = T.axis.spatial({wr}, it * 16 + ii)
                            vj = T.axis.spatial({s.block_n}, jt * 16 + jj)
                            S_w[vi, vj] = T.float32(0)
                    for it, ct, ii, cc in T.grid({wr // 16}, {d // 16}, 16, 16):
                        with T.sblock("O_init"):
                            vi = T.axis.spatial({wr}, it * 16 + ii)
                            vc = T.axis.spatial({d}, ct * 16 + cc)
                            O_w[vi, vc] = T.float32(0)"""


def _epilogue(s: AttentionShape) -> str:
    """After the KV loop: O fragments -> shared (fp32), then O / l -> global fp16 (zeros where l = 0)."""
    bm, d, wr = s.block_m, s.head_dim, WARP_ROWS
    row = f"w * {wr} + r"
    return f"""
                    for it, ct, ii, cc in T.grid({wr // 16}, {d // 16}, 16, 16):
                        with T.sblock("O_store"):
                            vi = T.axis.spatial({wr}, it * 16 + ii)
                            vc = T.axis.spatial({d}, ct * 16 + cc)
                            O_f[w * {wr} + vi, vc] = O_w[vi, vc]
                    for tx in T.thread_binding(32, thread="threadIdx.x"):
                        for k in T.serial({d}):
                            with T.sblock("out"):
                                r = T.axis.spatial({wr}, tx)
                                c = T.axis.spatial({d}, k)
                                O[h, qb * {bm} + {row}, c] = T.Cast("float16", T.if_then_else(l[{row}] > T.float32(0), O_f[{row}, c] / l[{row}], T.float32(0)))"""


def _script(s: AttentionShape) -> str:
    bm, bn, d, wr = s.block_m, s.block_n, s.head_dim, WARP_ROWS
    return f"""
@T.prim_func(s_tir=True)
def fa_forward_tc(q_h: T.handle, k_h: T.handle, v_h: T.handle, o_h: T.handle):
    T.func_attr({{"global_symbol": "fa_forward_tc", "tirx.noalias": True}})
    n = T.int32()
    Q = T.match_buffer(q_h, ({s.heads}, {s.q_len}, {d}), "float16")
    K = T.match_buffer(k_h, ({s.heads}, n, {d}), "float16")
    V = T.match_buffer(v_h, ({s.heads}, n, {d}), "float16")
    O = T.match_buffer(o_h, ({s.heads}, {s.q_len}, {d}), "float16")
    for h_l in T.thread_binding({s.heads}, thread="blockIdx.y"):
        for qb_l in T.thread_binding({s.q_len // bm}, thread="blockIdx.x"):
            with T.sblock("attn"):
                h = T.axis.spatial({s.heads}, h_l)
                qb = T.axis.spatial({s.q_len // bm}, qb_l)
                Q_s = T.sblock_alloc_buffer(({bm}, {d}), "float16", scope="shared.dyn")
                O_f = T.sblock_alloc_buffer(({bm}, {d}), "float32", scope="shared.dyn")
                m = T.sblock_alloc_buffer(({bm},), "float32", scope="local")
                l = T.sblock_alloc_buffer(({bm},), "float32", scope="local")
                for ty in T.thread_binding({bm // wr}, thread="threadIdx.y"):
                    with T.sblock("warp"):
                        w = T.axis.spatial({bm // wr}, ty)
                        O_w = T.sblock_alloc_buffer(({wr}, {d}), "float32", scope="warp")
                        S_w = T.sblock_alloc_buffer(({wr}, {bn}), "float32", scope="warp")
                        Q_w = T.sblock_alloc_buffer(({wr}, 16), "float16", scope="warp")
                        K_w = T.sblock_alloc_buffer(({bn}, 16), "float16", scope="warp")
                        P_w = T.sblock_alloc_buffer(({wr}, 16), "float16", scope="warp")
                        V_w = T.sblock_alloc_buffer((16, {d}), "float16", scope="warp")
{_indent(_prologue(s))}
                        for j in T.serial((n + {bn - 1}) // {bn}):
                            with T.sblock("kv"):
                                K_load_s = T.sblock_alloc_buffer(({bn}, {d}), "float16", scope="shared.dyn")
                                V_load_s = T.sblock_alloc_buffer(({bn}, {d}), "float16", scope="shared.dyn")
                                S_s = T.sblock_alloc_buffer(({bm}, {bn}), "float32", scope="shared.dyn")
                                P_s = T.sblock_alloc_buffer(({bm}, {bn}), "float16", scope="shared.dyn")
                                corr_s = T.sblock_alloc_buffer(({bm},), "float32", scope="shared.dyn")
                                m_new = T.sblock_alloc_buffer(({bm},), "float32", scope="local")
{_indent(_copy("K_load", "K", s))}
{_indent(_copy("V_load", "V", s))}
{_indent(_gemm_s(s))}
{_indent(_softmax(s))}
{_indent(_gemm_o(s))}
{_indent(_epilogue(s))}
"""


def _indent(text: str) -> str:
    return textwrap.indent(text, "    ")


def _layouts():
    from ..frontend.ir import T, cuda_tensor_intrinsics
    tc = cuda_tensor_intrinsics()
    return T, tc.ldmatrix_32x8_to_shared_16x16_layout, tc.shared_16x16_to_ldmatrix_32x8_layout


def _scale_rows_pair():
    """``SCALE_ROWS_INTRIN``: C[i, j] *= F[i] on a 16x16 fp32 mma accumulator tile (the ldmatrix 32x8 layout of
    ``tvm.s_tir.tensor_intrin.cuda``), F 16 row factors in shared memory; each lane scales its 8 values."""
    T, ldmatrix_32x8_to_shared_16x16_layout, shared_16x16_to_ldmatrix_32x8_layout = _layouts()

    @T.prim_func(s_tir=True)
    def desc(c: T.handle, f: T.handle) -> None:
        C = T.match_buffer(c, (32, 8), "float32", align=64, offset_factor=16, scope="warp")
        F = T.match_buffer(f, (16,), "float32", offset_factor=1, scope="shared.dyn")
        with T.sblock("root"):
            T.reads(C[0:32, 0:8], F[0:16])
            T.writes(C[0:32, 0:8])
            for i0, i1 in T.grid(16, 16):
                with T.sblock("C"):
                    i, j = T.axis.remap("SS", [i0, i1])
                    tid, lid = T.meta_var(shared_16x16_to_ldmatrix_32x8_layout(i, j))
                    T.reads(C[tid, lid], F[i])
                    T.writes(C[tid, lid])
                    C[tid, lid] = C[tid, lid] * F[i]

    @T.prim_func(s_tir=True)
    def impl(c: T.handle, f: T.handle) -> None:
        C = T.match_buffer(c, (32, 8), "float32", align=64, offset_factor=16, scope="warp")
        F = T.match_buffer(f, (16,), "float32", offset_factor=1, scope="shared.dyn")
        with T.sblock("root"):
            T.reads(C[0:32, 0:8], F[0:16])
            T.writes(C[0:32, 0:8])
            for tx in T.thread_binding(0, 32, "threadIdx.x"):
                for lid in T.serial(8):  # read and write at one index: TVM's warp ThreadSync sees no conflict
                    row, _ = T.meta_var(ldmatrix_32x8_to_shared_16x16_layout(tx, lid))
                    C[tx, lid] = C[tx, lid] * F[row]
    return desc, impl


def _fill_pair():
    """``FILL_INTRIN``: a 16x16 fp32 accumulator tile set to zero, lane by lane."""
    T, _, shared_16x16_to_ldmatrix_32x8_layout = _layouts()

    @T.prim_func(s_tir=True)
    def fill_desc(c: T.handle) -> None:
        C = T.match_buffer(c, (32, 8), "float32", scope="warp")
        with T.sblock("root"):
            T.reads()
            T.writes(C[0:32, 0:8])
            for i0, i1 in T.grid(16, 16):
                with T.sblock("C"):
                    i, j = T.axis.remap("SS", [i0, i1])
                    tid, lid = T.meta_var(shared_16x16_to_ldmatrix_32x8_layout(i, j))
                    T.reads()
                    T.writes(C[tid, lid])
                    C[tid, lid] = T.float32(0)

    @T.prim_func(s_tir=True)
    def fill_impl(c: T.handle) -> None:
        C = T.match_buffer(c, (32, 8), "float32", scope="warp", offset_factor=1)
        with T.sblock("root"):
            T.reads()
            T.writes(C[0:32, 0:8])
            for tx in T.thread_binding(0, 32, "threadIdx.x"):
                for lid in T.serial(8):
                    C[tx, lid] = T.float32(0)
    return fill_desc, fill_impl


def _store_clear_pair():
    """``STORE_CLEAR_INTRIN``: a 16x16 fp32 accumulator tile stored to shared memory and cleared."""
    T, ldmatrix_32x8_to_shared_16x16_layout, shared_16x16_to_ldmatrix_32x8_layout = _layouts()

    @T.prim_func(s_tir=True)
    def store_desc(a: T.handle, c: T.handle) -> None:
        C_warp = T.match_buffer(a, (32, 8), "float32", scope="warp")
        C = T.match_buffer(c, (16, 16), "float32", scope="shared.dyn")
        with T.sblock("root"):
            T.reads(C_warp[0:32, 0:8])
            T.writes(C[0:16, 0:16], C_warp[0:32, 0:8])
            for i0, i1 in T.grid(16, 16):
                with T.sblock("C"):
                    i, j = T.axis.remap("SS", [i0, i1])
                    tid, lid = T.meta_var(shared_16x16_to_ldmatrix_32x8_layout(i, j))
                    T.reads(C_warp[tid, lid])
                    T.writes(C[i, j], C_warp[tid, lid])
                    C[i, j] = C_warp[tid, lid]
                    C_warp[tid, lid] = T.float32(0)

    @T.prim_func(s_tir=True)
    def store_impl(a: T.handle, c: T.handle) -> None:
        s0 = T.int32()
        s1 = T.int32()
        C_warp = T.match_buffer(a, (32, 8), "float32", scope="warp", offset_factor=1)
        C = T.match_buffer(c, (16, 16), "float32", scope="shared.dyn", offset_factor=1, strides=[s0, s1])
        with T.sblock("root"):
            T.reads(C_warp[0:32, 0:8])
            T.writes(C[0:16, 0:16], C_warp[0:32, 0:8])
            for tx in T.thread_binding(0, 32, "threadIdx.x"):
                for lid in T.serial(8):  # one loop: TVM's warp ThreadSync sees no conflict between lanes
                    row, col = T.meta_var(ldmatrix_32x8_to_shared_16x16_layout(tx, lid))
                    C[row, col] = C_warp[tx, lid]
                    C_warp[tx, lid] = T.float32(0)
    return store_desc, store_impl


def _register_scale_rows() -> None:
    """Register the kernel's three lane-wise intrinsics (scale rows, fill, store and clear) once."""
    from ..frontend.ir import s_tir
    TensorIntrin = s_tir.TensorIntrin
    for name, pair in ((SCALE_ROWS_INTRIN, _scale_rows_pair()), (FILL_INTRIN, _fill_pair()),
                       (STORE_CLEAR_INTRIN, _store_clear_pair())):
        try:
            TensorIntrin.get(name)
        except ValueError:  # not registered yet
            TensorIntrin.register(name, *pair)


def _tensorize(sch) -> None:
    """Fragments into the mma layout, then every 16x16(x16) tile loop onto its intrinsic."""
    from ..frontend.ir import cuda_tensor_intrinsics

    tc = cuda_tensor_intrinsics()

    def index_map(i, j):
        return (i // 16, j // 16, *tc.shared_16x16_to_ldmatrix_32x8_layout(i % 16, j % 16))

    for block in ("O_init", "S_init", "Q_frag", "K_frag", "P_frag", "V_frag"):
        sch.transform_layout(sch.get_sblock(block), ("write", 0), index_map)
    plan = [("O_init", 2, FILL_INTRIN), ("S_init", 2, FILL_INTRIN),
            ("Q_frag", 2, tc.LDMATRIX_f16_A_DYN_INTRIN), ("K_frag", 2, tc.LDMATRIX_f16_B_TRANS_DYN_INTRIN),
            ("S_mma", 3, tc.MMA_f16f16f32_TRANS_B_INTRIN), ("S_store", 2, STORE_CLEAR_INTRIN),
            ("O_scale", 2, SCALE_ROWS_INTRIN), ("P_frag", 2, tc.LDMATRIX_f16_A_DYN_INTRIN),
            ("V_frag", 2, tc.LDMATRIX_f16_B_DYN_INTRIN), ("O_mma", 3, tc.MMA_f16f16f32_INTRIN),
            ("O_store", 2, tc.MMA_store_16x16_f32_shared_dyn_INTRIN_SIMPLE)]
    for block, depth, intrin in plan:
        sch.tensorize(sch.get_loops(sch.get_sblock(block))[-depth], intrin)


def fa_forward_tc(shape: AttentionShape | None = None, *, tensorize: bool = True, **kw):
    """The tensor-core attention forward of ``shape`` (or ``AttentionShape(**kw)``) as an IRModule (tensorized
    unless ``tensorize=False``); see the module docstring.  ``InputError`` for a shape that does not tile."""
    from ..frontend.ir import tvm

    s = shape if shape is not None else AttentionShape(**kw)
    tc_shape_check(s)
    func = tvm.script.from_source(_script(s))
    if not tensorize:
        return tvm.IRModule({"main": func})
    _register_scale_rows()
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": func}))
    _tensorize(sch)
    return sch.mod
