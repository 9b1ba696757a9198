"""The proxy fence a wgmma carries for builds that run none of tvm_twill's passes.

wgmma reads its shared operands through the async proxy; a tile written there by ordinary stores
(``st.shared``, TVM's zero-filling ``@!p st.shared``) is visible to it only across each writer's
``fence.proxy.async`` followed by a barrier (PTX ISA, memory consistency model, "Proxies").  tvm_twill's
pipelines place those fences where the barriers are (``transforms.proxy_fence``); TVM's default pipeline
places none.  So the wgmma tensor intrinsics (``kernels.wgmma_intrinsics``) put, ahead of each wgmma,
every thread's fence and a block barrier under an ``AttrStmt`` keyed ``PLAIN_FENCE``: a kernel compiled
the usual way (``tvm.compile``, MetaSchedule's builder) is correct, paying a barrier per wgmma.
``drop_plain_fences`` (the first pass of ``tvm_twill_swp`` and ``tvm_twill_ws``, and of the front-end's
view of a loop) removes them where tvm_twill places its own.
"""
from __future__ import annotations

from .ir import tirx, tvm_ffi

__all__ = ["PLAIN_FENCE", "drop_plain_fences", "drop_plain_fences_pass", "has_plain_fences"]

#: ``AttrStmt`` key of the plain-build fence and barrier ahead of a wgmma.
PLAIN_FENCE = "tvm_twill_plain_build_proxy_fence"


def _is_mark(stmt) -> bool:
    return isinstance(stmt, tirx.AttrStmt) and stmt.attr_key == PLAIN_FENCE


def has_plain_fences(stmt) -> bool:
    found = []
    tvm_ffi.structural_walk(stmt, [(tirx.AttrStmt, lambda a: found.append(a) if _is_mark(a) else None)])
    return bool(found)


def drop_plain_fences(func):
    """``func`` without its plain-build fences (unchanged when it has none)."""
    if not has_plain_fences(func.body):
        return func

    def fix(attr):
        return tirx.Evaluate(0) if _is_mark(attr) else attr

    return func.with_body(tvm_ffi.structural_map(func.body, [(tirx.AttrStmt, fix)]))


@tirx.transform.prim_func_pass(opt_level=0, name="TwillDropPlainFences")
def drop_plain_fences_pass(func, mod, ctx):
    return drop_plain_fences(func)
