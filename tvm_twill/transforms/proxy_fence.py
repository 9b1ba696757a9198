"""``fence.proxy.async.shared::cta`` where generic-proxy writes to shared memory are read by the async proxy.

The PTX memory model has two paths ("proxies") to shared memory.  Ordinary stores (``st.shared``) and
``cp.async`` (the non-bulk copy: its section of the PTX ISA calls it a weak memory operation performed in
the generic proxy) go through the generic proxy; ``wgmma.mma_async`` reads its shared operands through
matrix descriptors in the async proxy, as TMA (``cp.async.bulk``) copies do.  A write in one proxy is
visible to a read in the other only across a proxy fence (PTX ISA, memory consistency model, "Proxies";
``fence.proxy.async`` in the ``membar/fence`` section): CUTLASS's pattern is each writing thread's
``fence_view_async_shared()`` after its stores, then ``__syncthreads()``, then the wgmma.

``proxy_fence_pass`` (in the ``tvm_twill_ws`` pipeline, after ThreadSync placed the barriers and the
async copies were lowered) does exactly that on a kernel with wgmma and generic writes to shared memory
(stores or ``cp.async``): before each ``__syncthreads`` from which a wgmma is reached without crossing
another barrier (straight on, into loops, around a loop's back edge and out of it), every thread fences.
Inside TVM's ``async_wait_queue_scope`` the barrier follows the ``cp.async.wait_group``, so the fence
comes after this thread's copies have completed.  A warp-specialized kernel's consumers take no
``__syncthreads``: ``warp_specialize`` puts ``consumer_fence()`` after their full-slot wait when the ring
is filled by ``cp.async`` (the copy's writer never waits for it, so the reader fences after the acquire).
TMA-filled rings need none: both sides are async proxy.  Kernels without wgmma are left alone.
"""
from __future__ import annotations

from ..errors import UnsupportedLoopError
from ..frontend.ir import T, children, tirx, tvm, tvm_ffi
from .tir_util import op_name
from .wgmma_overlap import has_wgmma

__all__ = ["add_proxy_fences", "consumer_fence", "is_proxy_fence", "proxy_fence_pass"]

_SYNC = "tirx.tvm_storage_sync"
_FENCE = "tirx.ptx.fence_proxy"
_CP_ASYNC = ("tirx.s_tir.cp_async_raw", "tirx.ptx_cp_async", "tirx.ptx.cp_async")
#: ring kernels: their barriers are mbarriers, and ``warp_specialize`` places their fences
_MBARRIER = "tirx.ptx.mbarrier"
FOUND, BLOCKED, CLEAR = "found", "blocked", "clear"


def consumer_fence():
    """The statement ``fence.proxy.async.shared::cta``."""
    return tirx.Evaluate(T.ptx.fence.proxy.async_.shared__cta())


def is_proxy_fence(stmt) -> bool:
    return isinstance(stmt, tirx.Evaluate) and op_name(stmt.value) == _FENCE


def _is_sync(stmt) -> bool:
    return (isinstance(stmt, tirx.Evaluate) and op_name(stmt.value) == _SYNC
            and str(stmt.value.args[0]).strip('"').startswith("shared"))


def _scan(stmts) -> str:
    """FOUND: a wgmma is reached (in program order) before any barrier; BLOCKED: a barrier first; CLEAR:
    neither (the statements may be passed through)."""
    for s in stmts:
        r = _scan_one(s)
        if r != CLEAR:
            return r
    return CLEAR


def _scan_one(s) -> str:
    if _is_sync(s):
        return BLOCKED
    if isinstance(s, tirx.Evaluate):
        return FOUND if has_wgmma([s]) else CLEAR
    if isinstance(s, tirx.IfThenElse):
        both = (_scan([s.then_case]), _scan([s.else_case] if s.else_case is not None else []))
        return FOUND if FOUND in both else (BLOCKED if both == (BLOCKED, BLOCKED) else CLEAR)
    return _scan(children(s))


def _writes_shared(func) -> bool:
    """Does the kernel write shared memory through the generic proxy (a store or a ``cp.async``)?"""
    hit = []

    def on_store(st):
        if st.buffer.scope().startswith("shared"):
            hit.append(1)

    tvm_ffi.structural_walk(func.body, [(tirx.BufferStore, on_store),
                                        (tvm.ir.expr.Call, lambda c: hit.append(1) if op_name(c) in _CP_ASYNC else None)])
    return bool(hit)


def _has_mbarrier(func) -> bool:
    hit = []
    tvm_ffi.structural_walk(func.body, [(tvm.ir.expr.Call,
                                         lambda c: hit.append(1) if op_name(c).startswith(_MBARRIER) else None)])
    return bool(hit)


def _place(stmt, after):
    """``stmt`` with a fence before every barrier from which a wgmma is reached; ``after()`` tells whether
    one is reached from the end of ``stmt`` (the rest of the program, loops included)."""
    if isinstance(stmt, tirx.SeqStmt):
        items = list(stmt.seq)
        out = []
        for i, s in enumerate(items):
            def rest(i=i):
                r = _scan(items[i + 1:])
                return r == FOUND or (r == CLEAR and after())
            if _is_sync(s):
                out += [consumer_fence(), s] if rest() else [s]
            else:
                out.append(_place(s, rest))
        return tirx.SeqStmt(out)
    if _is_sync(stmt):
        return tirx.SeqStmt([consumer_fence(), stmt]) if after() else stmt
    if isinstance(stmt, tirx.For):   # the end of the body goes on to the body's start or out of the loop
        body = _place(stmt.body, lambda: _scan([stmt.body]) == FOUND or after())
        return tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, body, stmt.thread_binding,
                        stmt.annotations)
    if isinstance(stmt, tirx.IfThenElse):
        return tirx.IfThenElse(stmt.condition, _place(stmt.then_case, after),
                               None if stmt.else_case is None else _place(stmt.else_case, after))
    if isinstance(stmt, tirx.AttrStmt):
        return tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, _place(stmt.body, after))
    if isinstance(getattr(stmt, "body", None), tirx.Stmt) and _scan([stmt.body]) != CLEAR:  # pragma: no cover
        raise UnsupportedLoopError(f"proxy fences: a barrier or wgmma under a {type(stmt).__name__}, which this "
                                   "pass does not rebuild")
    return stmt


def add_proxy_fences(func):
    """``func`` with the fences (see the module doc); unchanged without wgmma, without generic writes to
    shared memory, or with mbarrier rings (``warp_specialize`` fences those)."""
    if not has_wgmma([func.body]) or not _writes_shared(func) or _has_mbarrier(func):
        return func
    return func.with_body(_place(func.body, lambda: False))


@tirx.transform.prim_func_pass(opt_level=0, name="TwillProxyFence")
def proxy_fence_pass(func, mod, ctx):
    return add_proxy_fences(func)
