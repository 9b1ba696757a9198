"""FlashAttention forward on Hopper warp-group MMA (sm_90a wgmma), in s_tir: the KV loop tvm_twill pipelines.

``fa_forward_wgmma(shape)`` returns a PrimFunc ``(Q, K, V, O)`` with the layout and masks of
``attention.fa_forward`` and ``attention_tc.fa_forward_tc`` (``Q, O: (heads, q_len, head_dim)``,
``K, V: (heads, n, head_dim)`` fp16, ``n`` symbolic, unscaled scores, top-left causal mask, zeros for a row
that sees no key).  Each thread block computes ``block_m`` query rows of one head with ``G = block_m / 64``
warp groups of 128 threads (``threadIdx.x`` the thread of the warp group, ``threadIdx.y`` the group);
group ``w`` owns rows ``64 w .. 64 w + 63`` (block_m 128: two consumer warp groups, FA3's shape).  Both
GEMMs are ``wgmma.mma_async`` with both operands in shared memory, tensorized with the intrinsics of
``kernels.wgmma_intrinsics`` (one synchronous wgmma group per 16 of the reduction):

* S = Q K^T: m64n{block_n}k16 per 16 of the head dim (``wgmma_intrinsics(block_n)["mma"]``), A = the
  group's Q rows, staged once before the loop, B = the K tile; both K-major core-matrix tiles
  (``Q_s[w, c // 8, (r % 64) // 8, r % 8, c % 8]``, ``K_s[c // 8, key // 8, key % 8, c % 8]``).
* O += P V: m64n{head_dim}k16 per 16 keys (``wgmma_fragment_intrinsics(head_dim)["mma_mn_b"]``, imm-trans-b
  = 1), A = P, written by the softmax K-major (``P_s[w, key // 8, (r % 64) // 8, r % 8, key % 8]``), B = the
  V tile, which is MN-major for this GEMM (``V_s[key // 8, c // 8, key % 8, c % 8]``: d contiguous).

The K and V tiles are copied global -> ``shared.dyn`` by all threads of the block, ``vector`` fp16 at a
time (16 bytes), zero past ``n``, straight into those layouts: every vector is 8 consecutive head-dim
elements of one key, which both layouts keep contiguous, so the copies are cp.async-capable.  The
accumulators are ``(128, N / 2)`` ``local`` buffers indexed ``[thread, register]`` (``wgmma_fragment``); O
stays in them across the KV loop, rescaled in place by ``O_scale`` (each register by ``corr`` of its row:
``scale_rows``).  The softmax is SIMT fp32 through shared memory as in ``attention_tc``: one thread per row,
so threads 64..127 of a group skip the row statements (``tx < 64``: simple; FA3 instead reduces each row
over the 4 threads of its quad in the accumulator registers).  S is stored to shared memory in P's layout
(``S_s[w, key // 8, (r % 64) // 8, r % 8, key % 8]``, ``store_clear_shared``), so a thread reads S and
writes P at the same index: TVM's ThreadSync, which treats the dynamic pool as one buffer, then sees no
conflict between them (and puts no barrier inside P's column loop); ``WGMMA_PASS_CONFIG`` keeps that index
an expression (no CSE), and a block of one warp group binds no ``threadIdx.y`` (ThreadSync wants the index
to use the innermost thread index).

The KV loop ``KV_LOOP`` (``j``) has eleven statements, FlashAttention-2's inner loop as in ``attention_tc``:
``K_load``, ``V_load``, S (the wgmma nest), ``S_store`` (S -> shared fp32 and S = 0 for the next
iteration), ``m_new``, ``P``, ``corr``, ``l``, ``O_scale``, ``m_update``, O (the wgmma nest).  S = 0 and
O = 0 are set once before the loop, O is stored to shared after it and written as ``O / l`` (fp16), one
thread a row.

Proxies: wgmma reads its operands through the async proxy, the kernel writes Q, K, V and P with ordinary
stores (the generic proxy).  Each writer fences (``fence.proxy.async.shared::cta``) after its stores and
before the barrier TVM's ThreadSync places ahead of the wgmma that reads them (CUTLASS's
``fence_view_async_shared(); __syncthreads();``): the fence is in the last iteration of the copy loop of
``Q_load``, ``K_load``, ``V_load`` and of the column loop of ``P`` (inside the loop, so each statement stays
one loop: InjectSoftwarePipeline splits a statement that is a sequence).  So the kernel is correct under
TVM's own pipeline (``tvm.compile(mod, target)`` under ``WGMMA_PASS_CONFIG``).  Planned by ``auto_pipeline``
(symbolic trip count), it compiles with ``plan.tir_pipeline``, ``tvm_twill_swp``, whose
``transforms.proxy_fence`` adds the fences cp.async needs (after its wait: the kernel's own fence then
follows the copy's issue and orders nothing) and which shrinks the accumulators to the thread's registers
(``transforms.fragments``; under TVM's own pipeline each thread declares the group's whole array, indexed
``threadIdx.x * N / 2 + r``, which nvcc keeps in registers: ptxas reports no stack frame).

``fa_forward_wgmma(shape, tensorize=False)`` returns the loops before tensorization, in the final layouts.
"""
from __future__ import annotations

import textwrap

from .attention import NEG_INF, AttentionShape

__all__ = ["GROUP_ROWS", "GROUP_THREADS", "WGMMA_PASS_CONFIG", "fa_forward_wgmma", "wgmma_shape_check"]

#: Query rows per warp group (wgmma's M) and threads per warp group.
GROUP_ROWS, GROUP_THREADS = 64, 128
#: The PassContext config the kernel compiles under (``attention_tc.TC_PASS_CONFIG``'s): TVM's ThreadSync
#: sees no conflict between a thread's read of S and its write of P (two buffers of the one dynamic pool)
#: only when their indices are the same expression and use the thread index; common-subexpression
#: elimination binds the index to a variable, and ThreadSync then puts a barrier inside P's column loop.
#: ``with tvm.transform.PassContext(config=WGMMA_PASS_CONFIG): tvm_twill.build(mod, "sm_90a", plan)``.
WGMMA_PASS_CONFIG = {"tirx.disable_cse_tir": True}


def wgmma_shape_check(s: AttentionShape) -> None:
    """``InputError`` unless the shape tiles onto warp groups of 64 rows and wgmma tiles."""
    from ..errors import InputError

    s.check()
    if s.block_m not in (64, 128):
        raise InputError(f"fa_forward_wgmma: block_m {s.block_m} must be 64 or 128 (one or two warp groups "
                         "of 64 rows)")
    if s.block_n % 16 or not 16 <= s.block_n <= 256:
        raise InputError(f"fa_forward_wgmma: block_n {s.block_n} must be a multiple of 16 in [16, 256] (the "
                         "wgmma N of S and k16 steps of O)")
    if s.head_dim % 16 or not 16 <= s.head_dim <= 256:
        raise InputError(f"fa_forward_wgmma: head_dim {s.head_dim} must be a multiple of 16 in [16, 256] "
                         "(k16 steps of S and the wgmma N of O)")
    if 8 % s.vector:
        raise InputError(f"fa_forward_wgmma: vector {s.vector} must divide 8 (a copy vector stays in one "
                         "16-byte core-matrix row)")
    threads = GROUP_THREADS * (s.block_m // GROUP_ROWS)
    for what, elems in (("K/V tile", s.block_n * s.head_dim), ("Q tile", GROUP_ROWS * s.head_dim)):
        per = threads if what == "K/V tile" else GROUP_THREADS
        if elems % (per * s.vector):
            raise InputError(f"fa_forward_wgmma: a {what} of {elems} elements does not split into {per} "
                             f"threads x {s.vector}-element vectors; change block_n or vector")


_FENCE = "T.evaluate(T.ptx.fence.proxy.async_.shared__cta())"


def _copy(name: str, src: str, s: AttentionShape) -> str:
    """K or V tile -> shared: every thread of the block copies ``vector`` fp16 at a time, zero past ``n``; then
    the thread's proxy fence (the tile is a wgmma operand), in the last iteration of the copy loop, so that
    the statement stays one loop (InjectSoftwarePipeline splits a statement that is a sequence)."""
    bn, d, v = s.block_n, s.head_dim, s.vector
    threads = GROUP_THREADS * (s.block_m // GROUP_ROWS)
    per = bn * d // (threads * v)
    lin = f"(it * {threads * v} + w * {GROUP_THREADS * v} + tx * {v} + vv)"
    return f"""
                            for tx in T.thread_binding({GROUP_THREADS}, thread="threadIdx.x"):
                                for it in T.serial({per}):
                                    for vv in T.vectorized({v}):
                                        with T.sblock("{name}"):
                                            r = T.axis.spatial({bn}, {lin} // {d})
                                            c = T.axis.spatial({d}, {lin} % {d})
                                            jv = T.axis.spatial((n + {bn - 1}) // {bn}, j)
                                            {name}_s[r, c] = T.if_then_else(jv * {bn} + r < n, {src}[h, jv * {bn} + r, c], T.float16(0))
                                    if it == {per - 1}:
                                        {_FENCE}"""


def _gemm_s(s: AttentionShape) -> str:
    """S += Q K^T (a wgmma per 16 of the head dim), then S -> shared (fp32) and S = 0."""
    bn, d, gr = s.block_n, s.head_dim, GROUP_ROWS
    return f"""
                            for kt in T.serial({d // 16}):
                                for i, jj, kk in T.grid({gr}, {bn}, 16):
                                    with T.sblock("S_mma"):
                                        vi = T.axis.spatial({gr}, i)
                                        vj = T.axis.spatial({bn}, jj)
                                        vk = T.axis.reduce({d}, kt * 16 + kk)
                                        S_acc[vi, vj] = S_acc[vi, vj] + T.Cast("float32", Q_s[w * {gr} + vi, vk]) * T.Cast("float32", K_load_s[vj, vk])
                            for i, jj in T.grid({gr}, {bn}):
                                with T.sblock("S_store"):
                                    vi = T.axis.spatial({gr}, i)
                                    vj = T.axis.spatial({bn}, jj)
                                    S_s[w * {gr} + vi, vj] = S_acc[vi, vj]
                                    S_acc[vi, vj] = T.float32(0)"""


def _row(name: str, body: str, loop: str = "", fence: str = "") -> str:
    """A row statement: the group's 128 threads, the first 64 one row each (``r``), ``body`` in block ``name``
    (inside ``for loop``); ``fence``: the condition on the loop variable under which every thread fences
    after the block (its last iteration)."""
    body_lines = body.strip("\n").split("\n")
    axes = [ln for ln in body_lines if "T.axis." in ln]
    lines = [f'with T.sblock("{name}"):', f"    r = T.axis.spatial({GROUP_ROWS}, tx)"]
    lines += ["    " + ln for ln in axes] + [f"    T.where(tx < {GROUP_ROWS})"]
    lines += ["    " + ln for ln in body_lines if ln not in axes]
    if fence:
        lines += [f"if {fence}:", "    " + _FENCE]
    inner = ([f"for {loop}:"] + ["    " + ln for ln in lines]) if loop else lines
    thread = [f'for tx in T.thread_binding({GROUP_THREADS}, thread="threadIdx.x"):'] + ["    " + ln for ln in inner]
    return "\n" + "\n".join(" " * 28 + ln for ln in thread)


def _softmax(s: AttentionShape) -> str:
    """The new row max, P = exp(S - m_new) into shared (fp16, the A operand of O; then the proxy fence), the
    correction into shared, the row sum."""
    bn, bm = s.block_n, s.block_m
    row = f"w * {GROUP_ROWS} + r"
    mask = f"jv * {bn} + cc < n" + (f" and jv * {bn} + cc <= qb * {bm} + {row}" if s.causal else "")
    jv = f"jv = T.axis.spatial((n + {bn - 1}) // {bn}, j)"
    m_new = _row("m_new", f"""cc = T.axis.reduce({bn}, c)
{jv}
with T.init():
    m_new[{row}] = m[{row}]
m_new[{row}] = T.max(m_new[{row}], T.if_then_else({mask}, S_s[{row}, cc], T.float32({NEG_INF})))""",
                 f"c in T.serial({bn})")
    p = _row("P", f"""cc = T.axis.spatial({bn}, c)
{jv}
P_s[{row}, cc] = T.Cast("float16", T.if_then_else({mask}, T.exp(S_s[{row}, cc] - m_new[{row}]), T.float32(0)))""",
             f"c in T.serial({bn})", fence=f"c == {bn - 1}")
    corr = _row("corr", f"corr_s[{row}] = T.exp(m[{row}] - m_new[{row}])")
    ll = _row("l", f"""for c in T.serial({bn}):
    l[{row}] = T.if_then_else(c == 0, l[{row}] * corr_s[{row}], l[{row}]) + T.Cast("float32", P_s[{row}, c])""")
    return m_new + p + corr + ll


def _gemm_o(s: AttentionShape) -> str:
    """O *= corr on the accumulator, m = m_new, O += P V (a wgmma per 16 keys)."""
    bn, d, gr = s.block_n, s.head_dim, GROUP_ROWS
    return f"""
                            for i, cc in T.grid({gr}, {d}):
                                with T.sblock("O_scale"):
                                    vi = T.axis.spatial({gr}, i)
                                    vc = T.axis.spatial({d}, cc)
                                    O_acc[vi, vc] = O_acc[vi, vc] * corr_s[w * {gr} + vi]""" + \
        _row("m_update", f"m[w * {gr} + r] = m_new[w * {gr} + r]") + f"""
                            for kt in T.serial({bn // 16}):
                                for i, cc, kk in T.grid({gr}, {d}, 16):
                                    with T.sblock("O_mma"):
                                        vi = T.axis.spatial({gr}, i)
                                        vc = T.axis.spatial({d}, cc)
                                        vk = T.axis.reduce({bn}, kt * 16 + kk)
                                        O_acc[vi, vc] = O_acc[vi, vc] + T.Cast("float32", P_s[w * {gr} + vi, vk]) * T.Cast("float32", V_load_s[vk, vc])"""


def _prologue(s: AttentionShape) -> str:
    """Before the KV loop: the group's Q rows -> shared (16-byte vectors; then the proxy fence), m = -inf,
    l = 0, S = 0 and O = 0 (accumulators)."""
    bm, bn, d, v, gr = s.block_m, s.block_n, s.head_dim, s.vector, GROUP_ROWS
    lin = f"(it * {GROUP_THREADS * v} + tx * {v} + vv)"
    per = gr * d // (GROUP_THREADS * v)
    return f"""
                    for tx in T.thread_binding({GROUP_THREADS}, thread="threadIdx.x"):
                        for it in T.serial({per}):
                            for vv in T.vectorized({v}):
                                with T.sblock("Q_load"):
                                    r = T.axis.spatial({gr}, {lin} // {d})
                                    c = T.axis.spatial({d}, {lin} % {d})
                                    Q_s[w * {gr} + r, c] = Q[h, qb * {bm} + w * {gr} + r, c]
                            if it == {per - 1}:
                                {_FENCE}
                    for tx in T.thread_binding({GROUP_THREADS}, thread="threadIdx.x"):
                        with T.sblock("init_state"):
                            T.where(tx < {gr})
                            r = T.axis.spatial({gr}, tx)
                            m[w * {gr} + r] = T.float32({NEG_INF})
                            l[w * {gr} + r] = T.float32(0)
                    for i, jj in T.grid({gr}, {bn}):
                        with T.sblock("S_init"):
                            vi = T.axis.spatial({gr}, i)
                            vj = T.axis.spatial({bn}, jj)
                            S_acc[vi, vj] = T.float32(0)
                    for i, cc in T.grid({gr}, {d}):
                        with T.sblock("O_init"):
                            vi = T.axis.spatial({gr}, i)
                            vc = T.axis.spatial({d}, cc)
                            O_acc[vi, vc] = T.float32(0)"""


def _epilogue(s: AttentionShape) -> str:
    """After the KV loop: O -> shared (fp32), then O / l -> global fp16 (zeros where l = 0), one thread a row."""
    bm, d, gr = s.block_m, s.head_dim, GROUP_ROWS
    row = f"w * {gr} + r"
    return f"""
                    for i, cc in T.grid({gr}, {d}):
                        with T.sblock("O_store"):
                            vi = T.axis.spatial({gr}, i)
                            vc = T.axis.spatial({d}, cc)
                            O_f[w * {gr} + vi, vc] = O_acc[vi, vc]
                    for tx in T.thread_binding({GROUP_THREADS}, thread="threadIdx.x"):
                        for k in T.serial({d}):
                            with T.sblock("out"):
                                T.where(tx < {gr})
                                r = T.axis.spatial({gr}, tx)
                                c = T.axis.spatial({d}, k)
                                O[h, qb * {bm} + {row}, c] = T.Cast("float16", T.if_then_else(l[{row}] > T.float32(0), O_f[{row}, c] / l[{row}], T.float32(0)))"""


def _script(s: AttentionShape) -> str:
    bm, bn, d, gr = s.block_m, s.block_n, s.head_dim, GROUP_ROWS
    groups = bm // gr
    # one group: no threadIdx.y (TVM's ThreadSync reads the innermost thread index as the one a per-thread
    # access must depend on; a threadIdx.y of extent 1 would make every shared access a conflict)
    group_loop = f'T.thread_binding({groups}, thread="threadIdx.y")' if groups > 1 else "T.serial(1)"
    return f"""
@T.prim_func(s_tir=True)
def fa_forward_wgmma(q_h: T.handle, k_h: T.handle, v_h: T.handle, o_h: T.handle):
    T.func_attr({{"global_symbol": "fa_forward_wgmma", "tirx.noalias": True}})
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
                for ty in {group_loop}:
                    with T.sblock("group"):
                        w = T.axis.spatial({groups}, ty)
                        O_acc = T.sblock_alloc_buffer(({gr}, {d}), "float32", scope="local")
                        S_acc = T.sblock_alloc_buffer(({gr}, {bn}), "float32", scope="local")
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


def _layouts(sch, s: AttentionShape) -> None:
    """The shared operand tiles into wgmma's core-matrix layouts, the accumulators into the fragment layout."""
    from .wgmma_intrinsics import wgmma_fragment

    gr = GROUP_ROWS

    def k_major_rows(r, c):  # (row, k) of a group's A operand: (group, k // 8, row // 8, row % 8, k % 8)
        return r // gr, c // 8, (r % gr) // 8, r % 8, c % 8

    for block, buf, index_map in (
            ("Q_load", ("write", 0), k_major_rows),
            ("P", ("write", 0), k_major_rows),
            ("S_store", ("write", 0), k_major_rows),   # as P: the softmax reads S where it writes P
            ("K_load", ("write", 0), lambda key, c: (c // 8, key // 8, key % 8, c % 8)),   # K-major B of S
            ("V_load", ("write", 0), lambda key, c: (key // 8, c // 8, key % 8, c % 8)),   # MN-major B of O
            ("S_init", ("write", 0), wgmma_fragment),
            ("O_init", ("write", 0), wgmma_fragment)):
        sch.transform_layout(sch.get_sblock(block), buf, index_map)


def _tensorize(sch, s: AttentionShape) -> None:
    """Every 64 x N (x 16) tile nest onto its wgmma intrinsic."""
    from .wgmma_intrinsics import wgmma_fragment_intrinsics, wgmma_intrinsics

    s_names, o_names = wgmma_intrinsics(s.block_n), wgmma_intrinsics(s.head_dim)
    s_frag, o_frag = wgmma_fragment_intrinsics(s.block_n), wgmma_fragment_intrinsics(s.head_dim)
    plan = [("S_init", 2, s_names["fill"]), ("O_init", 2, o_names["fill"]), ("S_mma", 3, s_names["mma"]),
            ("S_store", 2, s_frag["store_clear_shared"]), ("O_scale", 2, o_frag["scale_rows"]),
            ("O_mma", 3, o_frag["mma_mn_b"]), ("O_store", 2, o_frag["store_shared"])]
    for block, depth, intrin in plan:
        sch.tensorize(sch.get_loops(sch.get_sblock(block))[-depth], intrin)


def fa_forward_wgmma(shape: AttentionShape | None = None, *, tensorize: bool = True, **kw):
    """The wgmma attention forward of ``shape`` (or ``AttentionShape(**kw)``) as an IRModule (tensorized
    unless ``tensorize=False``); see the module docstring.  ``InputError`` for a shape that does not tile."""
    from ..frontend.ir import tvm
    from ..frontend.plain_fences import drop_plain_fences

    s = shape if shape is not None else AttentionShape(**kw)
    wgmma_shape_check(s)
    func = tvm.script.from_source(_script(s))
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": func}))
    _layouts(sch, s)
    if tensorize:
        _tensorize(sch, s)
        # the script places its own proxy fences, for every build: the intrinsics' plain-build ones are not needed
        return tvm.IRModule({"main": drop_plain_fences(sch.mod["main"])})
    return sch.mod
