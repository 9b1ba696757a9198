"""FlashAttention forward in s_tir: the KV loop tvm_twill pipelines.

``fa_forward(shape)`` returns a PrimFunc ``(Q, K, V, O)`` with
``Q, O: (heads, q_len, head_dim)`` and ``K, V: (heads, n, head_dim)`` fp16,
``n`` the symbolic KV length.  One thread block computes ``block_m`` query
rows of one head (one thread per row: a SIMT kernel, no tensor-core
intrinsics) and runs the KV loop ``KV_LOOP`` (``j``, its body the block
``kv``) over ``ceildiv(n, block_n)`` tiles.
Each iteration is ten statements, in the order of FlashAttention-2's inner
loop; each is one thread loop over the rows with one leaf block (TVM's
passes before InjectSoftwarePipeline would split a statement of several):

====  ============  ==================================================
 #    name          what it does
====  ============  ==================================================
 0    ``K_load``    K tile -> shared (zero past ``n``: predicated copy)
 1    ``V_load``    V tile -> shared (same)
 2    ``S``         S = Q K^T (fp16 inputs, fp32 accumulation)
 3    ``m_new``     row max of the masked S, with the running max ``m``
 4    ``P``         P = exp(S - m_new), 0 where masked, stored fp16
 5    ``corr``      the correction exp(m - m_new)
 6    ``l``         running row sum: l = l * corr + sum(P)
 7    ``O_scale``   O *= corr
 8    ``m_update``  m = m_new
 9    ``O``         O += P V (fp16 inputs, fp32 accumulation)
====  ============  ==================================================

Scores are not scaled: fold 1/sqrt(head_dim) into Q.
The softmax state ``m``, ``l`` and the accumulator ``O_acc`` (fp32) live
across iterations (allocated outside the loop: loop-carried).  Masks: key
``c`` is seen by query ``r`` when ``c < n`` and, if ``causal``, ``c <= r``
(top-left aligned).  A row that sees no key (``n == 0``) writes zeros.

``gpu=False`` gives the same kernel with every thread binding a serial loop
(and shared memory in ``global`` scope), which llvm compiles: each statement
keeps its own thread loop, so serializing the threads does not change what
any statement computes (the CPU differential tests rely on that).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError

__all__ = ["KV_LOOP", "AttentionShape", "attention_reference", "fa_forward"]

#: Name of the KV loop (``auto_pipeline(sch, KV_LOOP, target)``).
KV_LOOP = "j"
#: Finite "minus infinity" of the running max (exp of a difference of two of them stays finite).
NEG_INF = -1.0e30


@dataclass(frozen=True)
class AttentionShape:
    """Sizes of one attention-forward kernel; ``n`` (the KV length) stays symbolic."""

    head_dim: int = 64
    causal: bool = False
    heads: int = 2
    q_len: int = 64
    block_m: int = 64
    block_n: int = 32
    vector: int = 8  # fp16 elements per copy instruction (16 bytes: cp.async's widest)

    def check(self) -> None:
        for name in ("head_dim", "heads", "q_len", "block_m", "block_n", "vector"):
            if getattr(self, name) < 1:
                raise InputError(f"AttentionShape.{name} must be >= 1, got {getattr(self, name)}")
        if self.q_len % self.block_m:
            raise InputError(f"AttentionShape: q_len {self.q_len} is not a multiple of block_m {self.block_m}")
        if (self.block_n * self.head_dim) % (self.block_m * self.vector):
            raise InputError(f"AttentionShape: a {self.block_n}x{self.head_dim} tile does not split into "
                             f"{self.block_m} threads x {self.vector}-element vectors; change block_n or vector")


def _thread(var: str, extent: int, tag: str, gpu: bool) -> str:
    return f'T.thread_binding({extent}, thread="{tag}")' if gpu else f"T.serial({extent})"


def _load(name: str, src: str, s: AttentionShape, gpu: bool) -> str:
    bm, bn, d, v = s.block_m, s.block_n, s.head_dim, s.vector
    per = bn * d // (bm * v)
    return f"""
                        with T.sblock("{name}"):
                            for tx in {_thread("tx", bm, "threadIdx.x", gpu)}:
                                for it in T.serial({per}):
                                    for vv in T.vectorized({v}):
                                        with T.sblock("{name}_c"):
                                            r = T.axis.spatial({bn}, (it * {bm * v} + tx * {v} + vv) // {d})
                                            c = T.axis.spatial({d}, (it * {bm * v} + tx * {v} + vv) % {d})
                                            jv = T.axis.spatial((n + {bn - 1}) // {bn}, j)
                                            {name}_s[r, c] = T.if_then_else(jv * {bn} + r < n, {src}[h, jv * {bn} + r, c], T.float16(0))"""


def _scores(s: AttentionShape, gpu: bool) -> str:
    """Statements 2-5: S = Q K^T, the new row max, P = exp(S - m_new) and the correction exp(m - m_new)."""
    bm, bn, d = s.block_m, s.block_n, s.head_dim
    th = _thread("tx", bm, "threadIdx.x", gpu)
    mask = f"jv * {bn} + cc < n" + (f" and jv * {bn} + cc <= qb * {bm} + r" if s.causal else "")
    jv = f"jv = T.axis.spatial((n + {bn - 1}) // {bn}, j)"
    return f"""                        for tx in {th}:
                            for c, k in T.grid({bn}, {d}):
                                with T.sblock("S"):
                                    r = T.axis.spatial({bm}, tx)
                                    cc = T.axis.spatial({bn}, c)
                                    kk = T.axis.reduce({d}, k)
                                    with T.init():
                                        S[r, cc] = T.float32(0)
                                    S[r, cc] = S[r, cc] + T.Cast("float32", Q_s[r, kk]) * T.Cast("float32", K_load_s[cc, kk])
                        for tx in {th}:
                            for c in T.serial({bn}):
                                with T.sblock("m_new"):
                                    r = T.axis.spatial({bm}, tx)
                                    cc = T.axis.reduce({bn}, c)
                                    {jv}
                                    with T.init():
                                        m_new[r] = m[r]
                                    m_new[r] = T.max(m_new[r], T.if_then_else({mask}, S[r, cc], T.float32({NEG_INF})))
                        for tx in {th}:
                            for c in T.serial({bn}):
                                with T.sblock("P"):
                                    r = T.axis.spatial({bm}, tx)
                                    cc = T.axis.spatial({bn}, c)
                                    {jv}
                                    P[r, cc] = T.Cast("float16", T.if_then_else({mask}, T.exp(S[r, cc] - m_new[r]), T.float32(0)))
                        for tx in {th}:
                            with T.sblock("corr"):
                                r = T.axis.spatial({bm}, tx)
                                corr[r] = T.exp(m[r] - m_new[r])"""


def _updates(s: AttentionShape, gpu: bool) -> str:
    """Statements 6-9: the running sum, O *= corr, m = m_new and O += P V."""
    bm, bn, d = s.block_m, s.block_n, s.head_dim
    th = _thread("tx", bm, "threadIdx.x", gpu)
    return f"""                        for tx in {th}:
                            with T.sblock("l"):
                                r = T.axis.spatial({bm}, tx)
                                for c in T.serial({bn}):
                                    l[r] = T.if_then_else(c == 0, l[r] * corr[r], l[r]) + T.Cast("float32", P[r, c])
                        for tx in {th}:
                            for k in T.serial({d}):
                                with T.sblock("O_scale"):
                                    r = T.axis.spatial({bm}, tx)
                                    c = T.axis.spatial({d}, k)
                                    O_acc[r, c] = O_acc[r, c] * corr[r]
                        for tx in {th}:
                            with T.sblock("m_update"):
                                r = T.axis.spatial({bm}, tx)
                                m[r] = m_new[r]
                        for tx in {th}:
                            for k, c in T.grid({d}, {bn}):
                                with T.sblock("O"):
                                    r = T.axis.spatial({bm}, tx)
                                    kk = T.axis.spatial({d}, k)
                                    cc = T.axis.reduce({bn}, c)
                                    O_acc[r, kk] = O_acc[r, kk] + T.Cast("float32", P[r, cc]) * T.Cast("float32", V_load_s[cc, kk])"""


def _script(s: AttentionShape, gpu: bool, staged: bool = False) -> str:
    bm, bn, d = s.block_m, s.block_n, s.head_dim
    sh = "shared.dyn" if gpu else "global"
    th = _thread("tx", bm, "threadIdx.x", gpu)
    staged_alloc = (f'                O_s = T.sblock_alloc_buffer(({bm}, {d}), "float16", scope="{sh}")'
                    if staged else "")
    return f"""
@T.prim_func(s_tir=True)
def fa_forward(q_h: T.handle, k_h: T.handle, v_h: T.handle, o_h: T.handle):
    T.func_attr({{"global_symbol": "fa_forward", "tirx.noalias": True}})
    n = T.int32()
    Q = T.match_buffer(q_h, ({s.heads}, {s.q_len}, {d}), "float16")
    K = T.match_buffer(k_h, ({s.heads}, n, {d}), "float16")
    V = T.match_buffer(v_h, ({s.heads}, n, {d}), "float16")
    O = T.match_buffer(o_h, ({s.heads}, {s.q_len}, {d}), "float16")
    for h_l in {_thread("h", s.heads, "blockIdx.y", gpu)}:
        for qb_l in {_thread("qb", s.q_len // bm, "blockIdx.x", gpu)}:
            with T.sblock("attn"):
                h = T.axis.spatial({s.heads}, h_l)
                qb = T.axis.spatial({s.q_len // bm}, qb_l)
                Q_s = T.sblock_alloc_buffer(({bm}, {d}), "float16", scope="{sh}")
                O_acc = T.sblock_alloc_buffer(({bm}, {d}), "float32", scope="local")
                m = T.sblock_alloc_buffer(({bm},), "float32", scope="local")
                l = T.sblock_alloc_buffer(({bm},), "float32", scope="local")
{staged_alloc}
                for tx in {th}:
                    for k in T.serial({d}):
                        with T.sblock("init"):
                            r = T.axis.spatial({bm}, tx)
                            c = T.axis.spatial({d}, k)
                            Q_s[r, c] = Q[h, qb * {bm} + r, c]
                            O_acc[r, c] = T.float32(0)
                    with T.sblock("init_state"):
                        r = T.axis.spatial({bm}, tx)
                        m[r] = T.float32({NEG_INF})
                        l[r] = T.float32(0)
                for j in T.serial((n + {bn - 1}) // {bn}):
                    with T.sblock("kv"):
                        K_load_s = T.sblock_alloc_buffer(({bn}, {d}), "float16", scope="{sh}")
                        V_load_s = T.sblock_alloc_buffer(({bn}, {d}), "float16", scope="{sh}")
                        S = T.sblock_alloc_buffer(({bm}, {bn}), "float32", scope="local")
                        P = T.sblock_alloc_buffer(({bm}, {bn}), "float16", scope="local")
                        m_new = T.sblock_alloc_buffer(({bm},), "float32", scope="local")
                        corr = T.sblock_alloc_buffer(({bm},), "float32", scope="local")
{_load("K_load", "K", s, gpu)}
{_load("V_load", "V", s, gpu)}
{_scores(s, gpu)}
{_updates(s, gpu)}
{_epilogue(s, gpu, staged)}
"""


def _epilogue(s: AttentionShape, gpu: bool, staged: bool) -> str:
    """After the KV loop: O / l (zeros where l = 0) to ``O``, one thread per row; ``staged``: into a shared
    fp16 tile first, then stored by every thread ``vector`` elements at a time along the rows (coalesced),
    which needs a barrier between the two (a thread stores what other threads normalised)."""
    bm, d, v = s.block_m, s.head_dim, s.vector
    th = _thread("tx", bm, "threadIdx.x", gpu)
    val = "T.Cast(\"float16\", T.if_then_else(l[r] > T.float32(0), O_acc[r, c] / l[r], T.float32(0)))"
    if not staged:
        return f"""                for tx in {th}:
                    for k in T.serial({d}):
                        with T.sblock("store"):
                            r = T.axis.spatial({bm}, tx)
                            c = T.axis.spatial({d}, k)
                            O[h, qb * {bm} + r, c] = {val}"""
    lin = f"(it * {bm * v} + tx * {v} + vv)"
    return f"""                for tx in {th}:
                    for k in T.serial({d}):
                        with T.sblock("normalize"):
                            r = T.axis.spatial({bm}, tx)
                            c = T.axis.spatial({d}, k)
                            O_s[r, c] = {val}
                for tx in {th}:
                    for it in T.serial({d // v}):
                        for vv in T.vectorized({v}):
                            with T.sblock("store"):
                                r = T.axis.spatial({bm}, {lin} // {d})
                                c = T.axis.spatial({d}, {lin} % {d})
                                O[h, qb * {bm} + r, c] = O_s[r, c]"""


def fa_forward(shape: AttentionShape | None = None, *, gpu: bool = True, staged_store: bool = False, **kw):
    """The attention-forward PrimFunc of ``shape`` (or ``AttentionShape(**kw)``); see the module docstring.
    ``staged_store``: the epilogue normalises O into a shared tile, then every thread stores ``vector``
    elements of it at a time along the rows (a CTA barrier between the two)."""
    from ..frontend.ir import tvm  # TVM through the front-end's one import point

    s = shape if shape is not None else AttentionShape(**kw)
    s.check()
    if staged_store and s.head_dim % s.vector:
        raise InputError(f"fa_forward: staged_store needs head_dim {s.head_dim} a multiple of vector {s.vector}")
    return tvm.script.from_source(_script(s, gpu, staged_store))


def attention_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    """numpy softmax(Q K^T) V in float32 (no scaling, as the kernel), top-left causal mask; zeros where a
    row sees no key."""
    s = np.einsum("hqd,hkd->hqk", q.astype(np.float32), k.astype(np.float32))
    seen = np.ones(s.shape[1:], dtype=bool)
    if causal:
        seen = np.arange(s.shape[2])[None, :] <= np.arange(s.shape[1])[:, None]
    s = np.where(seen[None], s, -np.inf)
    mx = s.max(axis=2, keepdims=True) if s.shape[2] else np.zeros(s.shape[:2] + (1,), np.float32)
    p = np.where(seen[None], np.exp(s - np.where(np.isfinite(mx), mx, 0)), 0.0)
    den = p.sum(axis=2, keepdims=True)
    o = np.einsum("hqk,hkd->hqd", p, v.astype(np.float32))
    return np.where(den > 0, o / np.where(den > 0, den, 1), 0).astype(np.float32)
