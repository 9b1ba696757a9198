"""Which global->shared copies cp.async can run, as TVM 0.27 lowers them.

TVM's InjectPTXAsyncCopy turns a store of an async stage into one
``cp.async`` per vector: it takes the *first* element of the vectorized
source and destination indices and copies ``lanes * dtype`` consecutive
bytes from there, whatever the indices' stride.  A vectorized copy that walks
down a column (a transposing copy: dlight's Matmul reads B[k, j] into a
[j, k] tile, the k loop vectorized) would become a copy of consecutive
elements of a row: wrong data, and a source off the vector's alignment.  So
a copy is cp.async-capable only when, along its vectorized loop, both the
global source and the shared destination are contiguous (stride 1 in the
flattened buffer) and start on a multiple of the vector's lanes for every
thread and iteration (cp.async needs its 4/8/16-byte addresses aligned).
"""
from __future__ import annotations

import math

from .ir import auto_copy_bytes, const_int, dtype_bytes, substitute, tirx, tvm, tvm_ffi

__all__ = ["CP_ASYNC_BYTES", "GUARDED_COPY", "bound_store", "guarded_copy", "is_zero_guarded_load", "plain_copy",
           "vector_layout_reason"]

#: Why a copy written as if/else stores stays synchronous (``guarded_copy``).
GUARDED_COPY = ("a guarded copy (if/else stores): TVM's cp.async injection takes a single store; write it as "
                "T.if_then_else(cond, load, 0) to make it async-capable")
CP_ASYNC_BYTES = (4, 8, 16)  #: bytes one cp.async (``cp.async.ca/cg.shared.global``) moves per thread


def plain_copy(block) -> tuple[bool, float]:
    """(is a plain load->store copy, bytes per vector) for cp.async eligibility.

    A copy guarded as ``if_then_else(cond, load, 0)`` (dlight pads dynamic
    shapes this way) counts: TVM's InjectPTXAsyncCopy makes it a predicated
    cp.async, which fills zeros where ``cond`` is false.  So does MetaSchedule's
    cooperative copy (``ir.auto_copy_bytes``), vectorized to its ``vector_bytes``.
    """
    body, vector = block.body, auto_copy_bytes(block)
    while vector is not None and isinstance(body, tirx.For):  # a cooperative copy: loops around one store
        body = body.body
    if not isinstance(body, tirx.BufferStore):
        return False, 0.0
    value = body.value
    if is_zero_guarded_load(value):
        value = value.args[1]
    if not isinstance(value, tvm.ir.expr.TensorLoad):  # a cast or arithmetic is not a cp.async
        return False, 0.0
    return True, vector or dtype_bytes(body.buffer.dtype)


def guarded_copy(block) -> float:
    """Bytes per element of a copy written as a guard around two stores (TVM's LLM kernels load the ragged
    tail this way): ``[let ...] if cond: X[idx] = src[...] else: X[idx] = 0``; 0.0 when the block is not one.
    It moves the data of a copy, but TVM's InjectPTXAsyncCopy matches only a single store, so it is never
    run by cp.async."""
    body = block.body
    if isinstance(body, tirx.SeqStmt):  # a Bind has no body in TVM 0.27: the lets precede the guard
        rest = [s for s in body.seq if not isinstance(s, tirx.Bind)]
        body = rest[0] if len(rest) == 1 else None
    if not isinstance(body, tirx.IfThenElse) or body.else_case is None:
        return 0.0
    then, other = body.then_case, body.else_case
    if not (isinstance(then, tirx.BufferStore) and isinstance(other, tirx.BufferStore)
            and then.buffer.same_as(other.buffer) and isinstance(then.value, tvm.ir.expr.TensorLoad)
            and isinstance(other.value, tvm.ir.prim.expr.FloatImm) and float(other.value.value) == 0.0):
        return 0.0
    return dtype_bytes(then.buffer.dtype)


def is_zero_guarded_load(value) -> bool:
    """``if_then_else(cond, load, 0.0)``, the form TVM turns into a predicated cp.async."""
    if not (isinstance(value, tvm.ir.expr.Call) and value.op.name.endswith("if_then_else")
            and len(value.args) == 3 and isinstance(value.args[1], tvm.ir.expr.TensorLoad)):
        return False
    other = value.args[2]
    return isinstance(other, tvm.ir.prim.expr.FloatImm) and float(other.value) == 0.0


def _strides(buf, aligns) -> list:
    """Element strides of ``buf``: its own, or row-major with the padding ``storage_align`` will add
    (``aligns``: [(axis, factor, offset)]); a stride past a symbolic dimension is an expression."""
    if len(buf.strides):
        return list(buf.strides)
    pad = {axis: (factor, offset) for axis, factor, offset in aligns}
    out, stride = [0] * len(buf.shape), 1
    for axis in range(len(buf.shape) - 1, -1, -1):
        if axis in pad and axis < len(buf.shape) - 1 and isinstance(stride, int):
            factor, offset = pad[axis]
            while stride % factor != offset % factor:
                stride += 1
        out[axis] = stride
        dim = const_int(buf.shape[axis])
        stride = stride * dim if isinstance(stride, int) and dim is not None else stride * buf.shape[axis]
    return out


def _within_vector(expr, var, lanes: int, an):
    """``expr`` with each ``(x + a*var) // c`` and ``% c`` whose ``lanes`` values of ``var`` cannot cross a
    multiple of ``c`` (``x`` known, by its residues, to sit far enough below one) split: ``x // c`` and
    ``x % c + a*var``.  The loops TVM fuses and splits index a vector this way; TVM's own passes simplify
    it the same before they vectorize."""

    def split(node):
        lin = tvm.sym.detect_linear_equation(node.a, [var])
        a, c = (const_int(lin[0]) if len(lin) == 2 else None), const_int(node.b)
        if not a or not c or a < 0 or c <= 0:
            return node
        x, at = lin[1], an.modular_set(lin[1])
        g = math.gcd(int(at.coeff), c) or c
        if int(at.base) % g + a * (lanes - 1) >= g:  # some x lets the vector cross a multiple of c
            return node
        return tirx.floordiv(x, c) if isinstance(node, tirx.FloorDiv) else tirx.floormod(x, c) + a * var

    return tvm_ffi.structural_map(expr, [(tirx.FloorDiv, split), (tirx.FloorMod, split)])


def _access_reason(role, buf, indices, var, lanes, aligns, an) -> str | None:
    """Why a ``lanes``-wide vector of ``buf[indices]`` along ``var`` is no cp.async operand (None: it is).
    ``an``: an Analyzer that knows the loops' ranges (to see through the fused loops' ``//`` and ``%``)."""
    strides = _strides(buf, aligns)
    flat = buf.elem_offset + sum((i * s for i, s in zip(indices, strides)), tirx.IntImm("int32", 0))
    flat = an.simplify(_within_vector(an.simplify(flat), var, lanes, an))
    lin = tvm.sym.detect_linear_equation(flat, [var])
    step = const_int(lin[0]) if len(lin) == 2 else None
    if step != 1:
        what = f"a stride of {step} elements" if step is not None else "a non-linear index"
        return (f"its {lanes}-lane vectors read {role} {buf.name} with {what} (not contiguous): TVM's cp.async "
                "would copy consecutive elements from the first one")
    at = an.modular_set(lin[1])
    if at.coeff % lanes or at.base % lanes:
        return (f"its {lanes}-lane vectors of {role} {buf.name} may start off a multiple of {lanes} elements "
                "(cp.async needs its address aligned to the vector's bytes)")
    return None


def vector_layout_reason(store, loops, aligns: dict) -> str | None:
    """Why the copy ``store`` (a BufferStore of a load) is no cp.async as TVM lowers it, None when it is one.

    ``loops``: the For nodes around it, outermost first (the pipelined loop and its ancestors included, for
    their ranges); its innermost vectorized loop makes the vector (none: one element per cp.async, contiguous
    and aligned by itself); ``aligns``: buffer name -> [(axis, factor, offset)] of ``storage_align``."""
    vec = next((lp for lp in reversed(loops) if lp.kind == tirx.ForKind.VECTORIZED), None)
    if vec is None:
        return None
    var, lanes = vec.loop_var, const_int(vec.extent) or 1
    an = tvm.sym.Analyzer()
    for lp in loops:
        lo, ext = const_int(lp.min), const_int(lp.extent)
        if lo is not None and ext is not None and ext > 0:
            an.bind(lp.loop_var, tvm.ir.Range.from_min_extent(lo, ext))
    value = store.value.args[1] if is_zero_guarded_load(store.value) else store.value
    for role, buf, indices in (("global source", value.source, value.indices),
                               ("shared destination", store.buffer, store.indices)):
        why = _access_reason(role, buf, indices, var, lanes, aligns.get(buf.name, ()), an)
        if why:
            return why
    return None


def bindings(realize) -> list:
    """(iter var, bound value) pairs of a block realize, to read its indices in terms of the loops."""
    return [(iv.var, v) for iv, v in zip(realize.block.iter_vars, realize.iter_values)]


def bound_store(realize):
    """The block's store with its iter vars replaced by the loop expressions they are bound to."""
    vmap = bindings(realize)
    return substitute(realize.block.body, vmap) if vmap else realize.block.body

