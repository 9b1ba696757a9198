"""Warp-group register fragments: a ``local`` buffer indexed ``[threadIdx.x, register]`` -> per-thread registers.

The wgmma tensor intrinsics of ``kernels.wgmma_intrinsics`` describe the accumulator as a
``(128, N / 2)`` ``local`` buffer indexed by (thread of the warp group, register), the way TVM's mma
intrinsics describe theirs as a ``(32, 8)`` ``warp`` buffer.  TVM's LowerWarpMemory shrinks a ``warp``
buffer to one thread's share, but only when ``threadIdx.x`` spans at most one warp (32 lanes); a warp
group spans 128.  And CompactBufferAllocation keeps the whole (128, N / 2) region of a ``local`` buffer,
because the tensorized blocks reach it through ``match_buffer`` regions: every thread declares
128 * N / 2 floats and indexes them ``threadIdx.x * N / 2 + r``.  (NVVM happens to scalarize that
array -- ptxas reports no stack frame -- but nothing guarantees it.)

``shrink_thread_fragments`` runs after FlattenBuffer (in the ``tvm_twill_ws`` pipeline): a ``local``
buffer of ``X * R`` elements, X the ``threadIdx.x`` extent, whose every access is ``threadIdx.x * R + e``
with ``e`` free of thread indices and provably in ``[0, R)`` becomes a buffer of R elements indexed
``e``: each thread keeps only its own registers, which is what the program meant (a thread never reads
another thread's part).  A buffer used any other way (its address taken, another index form) is left as
it is.
"""
from __future__ import annotations

from ..frontend.ir import const_int, tirx, tvm, tvm_ffi
from .tir_util import uses_var

__all__ = ["shrink_thread_fragments", "shrink_thread_fragments_pass"]


def _thread_x(func) -> tuple[list, int | None]:
    """The vars bound to threadIdx.x and their common constant extent (None when none or they differ)."""
    found = []

    def on_attr(a):
        if a.attr_key == "thread_extent" and a.node.thread_tag == "threadIdx.x":
            found.append((a.node.var, const_int(a.value)))
    tvm_ffi.structural_walk(func.body, [(tirx.AttrStmt, on_attr)])
    extents = {e for _, e in found}
    return [v for v, _ in found], (extents.pop() if len(extents) == 1 and None not in extents else None)


def shrink_thread_fragments(func):
    """Rewrite every local ``[threadIdx.x, register]`` buffer of a flattened PrimFunc to one thread's registers.

    Returns ``(new func, names of the buffers rewritten)``."""
    txs, x = _thread_x(func)
    if not txs or not x:
        return func, []
    ana = tvm.sym.Analyzer()

    def on_for(f):
        ana.bind(f.loop_var, tvm.ir.Range.from_min_extent(f.min, f.extent))
    tvm_ffi.structural_walk(func.body, [(tirx.For, on_for)])
    for v in txs:
        ana.bind(v, tvm.ir.Range.from_min_extent(0, x))

    allocs = []
    tvm_ffi.structural_walk(func.body, [(tirx.AllocBuffer, lambda a: allocs.append(a))])
    done, body = [], func.body
    for a in allocs:
        buf = a.buffer
        size = const_int(buf.shape[0]) if len(buf.shape) == 1 else None
        if buf.scope() != "local" or size is None or size % x or size == x:
            continue
        regs = size // x
        accesses = []
        tvm_ffi.structural_walk(body, [(tirx.BufferStore, lambda s: accesses.append(s.indices) if s.buffer.same_as(buf)
                                        else None),
                                       (tvm.ir.expr.TensorLoad, lambda ld: accesses.append(ld.indices)
                                        if ld.source.same_as(buf) else None)])
        def own(idx, regs=regs):
            """The register index of a ``threadIdx.x * regs + e`` access, or None."""
            tx = next((v for v in txs if uses_var(idx, v)), None)
            rest = ana.simplify(idx - tx * regs) if tx is not None else None
            if rest is None or any(uses_var(rest, v) for v in txs) or not (
                    ana.can_prove(rest >= 0) and ana.can_prove(rest < regs)):
                return None
            return rest

        if not accesses or any(len(i) != 1 or own(i[0]) is None for i in accesses):
            continue
        new = tirx.decl_buffer((regs,), buf.dtype, name=buf.name, scope="local")

        def on_store(s, buf=buf, new=new, own=own):
            if not s.buffer.same_as(buf):
                return s
            return tirx.BufferStore(new, s.value, [own(s.indices[0])])

        def on_load(ld, buf=buf, new=new, own=own):
            if not ld.source.same_as(buf):
                return ld
            return tirx.BufferLoad(new, [own(ld.indices[0])])

        def on_alloc(al, buf=buf, new=new):
            return tirx.AllocBuffer(new, al.annotations) if al.buffer.same_as(buf) else al

        prev = body
        body = tvm_ffi.structural_map(body, [(tirx.BufferStore, on_store), (tvm.ir.expr.TensorLoad, on_load),
                                             (tirx.AllocBuffer, on_alloc)], order="post")
        if uses_var(body, buf):  # used some other way: keep the original
            body = prev
            continue
        done.append(str(buf.name))
    return (func.with_body(body), done) if done else (func, [])


@tirx.transform.prim_func_pass(opt_level=0, name="TwillShrinkThreadFragments")
def shrink_thread_fragments_pass(func, mod, ctx):
    return shrink_thread_fragments(func)[0]
