"""Small questions and builders on lowered TIR that several transforms share (one home for each).

* ``op_name``     the operator name of a call (``""`` for anything else)
* ``is_data_of``  is an expression ``buf.data`` (a ``tirx.buffer_data`` call in TVM 0.27)
* ``uses_var``    does a node mention a variable (a flat buffer is a ``Var`` after FlattenBuffer)
* ``stores``, ``flatten_seq``, ``path_to``: walking statements
* ``u32``, ``i32``: typed constants
* ``ws_fail``     the warp-specialization transform's refusal (``UnsupportedLoopError``)
"""
from __future__ import annotations

from ..errors import UnsupportedLoopError
from ..frontend.ir import tirx, tvm, tvm_ffi

__all__ = ["flatten_seq", "i32", "is_data_of", "op_name", "path_to", "stores", "u32", "uses_var", "ws_fail"]


def op_name(node) -> str:
    """The operator name of a call (``"tirx.ptx.wgmma_commit_group"``); ``""`` for anything but a call."""
    return getattr(getattr(node, "op", None), "name", "") if isinstance(node, tvm.ir.expr.Call) else ""


def is_data_of(expr, buf) -> bool:
    """``expr`` is ``buf.data`` (in TVM 0.27 a ``tirx.buffer_data`` call on the buffer)."""
    return (isinstance(expr, tvm.ir.expr.Call) and getattr(expr.op, "name", "") == "tirx.buffer_data"
            and expr.args[0].same_as(buf))


def uses_var(node, var) -> bool:
    """Does ``node`` mention ``var`` anywhere?"""
    hit = []
    tvm_ffi.structural_walk(node, [(tirx.Var, lambda v: hit.append(1) if v.same_as(var) else None)])
    return bool(hit)


def stores(stmt) -> list:
    """Every ``BufferStore`` under ``stmt``, in walk order."""
    out = []
    tvm_ffi.structural_walk(stmt, [(tirx.BufferStore, lambda s: out.append(s))])
    return out


def flatten_seq(stmt) -> list:
    """The statements of nested ``SeqStmt`` s, in order (a non-sequence is a one-element list)."""
    if isinstance(stmt, tirx.SeqStmt):
        out = []
        for s in stmt.seq:
            out += flatten_seq(s)
        return out
    return [stmt]


def path_to(stmt, pred, path=()):
    """Ancestors (outermost first) + the first node satisfying ``pred``, or None."""
    path = path + (stmt,)
    if pred(stmt):
        return path
    if isinstance(stmt, tirx.SeqStmt):
        kids = list(stmt.seq)
    elif isinstance(stmt, tirx.IfThenElse):
        kids = [s for s in (stmt.then_case, stmt.else_case) if s is not None]
    else:
        body = getattr(stmt, "body", None)
        kids = [body] if isinstance(body, tirx.Stmt) else []
    for k in kids:
        found = path_to(k, pred, path)
        if found:
            return found
    return None


def u32(x):
    return tirx.const(x, "uint32")


def i32(x):
    return tirx.const(x, "int32")


def ws_fail(msg: str):
    """Refuse a warp specialization in one line."""
    raise UnsupportedLoopError(f"warp specialization: {msg}")
