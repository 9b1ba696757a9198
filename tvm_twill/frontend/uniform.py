"""Block uniformity: which values are the same in every thread of a thread block.

A barrier (``__syncthreads``) is correct under a condition only when every
thread of the block takes the same branch.  TVM's InjectSoftwarePipeline
guards each statement of the prologue, body and epilogue of a loop of
symbolic extent with its iteration's bound; the ``tvm_twill_swp`` TIR pipeline
(``transforms.swp_lowering.uniform_guard_loops``) lets TVM's ThreadSync place
barriers under such a guard when the guard is *uniform*, and the front-end
refuses to plan a loop with explicit barriers whose bound is not
(``opaque.barrier_refusal``).  Both use the rule here (``Uniformity``):

* varying variables: a thread index (``threadIdx.*``, as a ``thread_extent``
  attribute or a thread-bound loop that is not ``blockIdx.*``), and every
  let / loop / block variable computed from a varying one or from a
  non-uniform load (to a fixpoint);
* uniform buffers (a buffer stands for every view of its storage: a
  ``view``, a ``decl_buffer`` over its data, a block's match_buffer): a
  global buffer the function never stores to (read-only for the launch:
  every thread loading the same element reads the same value), and a
  thread-local buffer (``local`` scope) every store of which
  writes a uniform value at a uniform index under uniform control (no
  enclosing condition, loop bound or block predicate that is not uniform).
  This is a greatest fixpoint: local buffers start uniform and lose it when
  a store is not, until nothing changes; by induction over the stores, every
  thread then holds the same values in them (the kernel writes them before
  reading them, as TVM's own kernels do: a per-thread copy of an indptr
  difference, a tile counter).  A buffer passed to a call (its data or an
  address in it: an intrinsic may write it) is never uniform;
* an expression is uniform when it reads no varying variable, loads only
  uniform buffers, and calls nothing but pure integer arithmetic
  (``if_then_else``, ``likely``, min, max, floordiv, floormod, and
  ``tvm_thread_invariant``, whose argument is analyzed like any other).
  Parameters, shape variables and block indices are uniform.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .ir import children, s_tir, scope_of, tirx, tvm, tvm_ffi

__all__ = ["Uniformity", "alias_roots", "escaped_buffers", "is_uniform", "reads_varying", "uniformity", "varying_vars"]

_PURE = ("if_then_else", "likely", ".min", ".max", "floordiv", "floormod", "tvm_thread_invariant")


@dataclass
class Uniformity:
    """The varying variables of a function body and the data variables of its uniform buffers."""

    varying: set = field(default_factory=set)
    buffers: set = field(default_factory=set)

    def uniform(self, expr) -> bool:
        return not reads_varying(expr, self.varying, self.buffers)


def varying_vars(stmt, buffers=frozenset()) -> set:
    """The variables of ``stmt`` whose value may differ between the threads of a block (module docstring);
    ``buffers``: the data variables of the buffers whose loads count as uniform."""
    varying: set = set()
    defs: list = []

    def on_attr(attr):
        if attr.attr_key == "thread_extent" and str(attr.node.thread_tag).startswith("threadIdx"):
            varying.add(attr.node.var)

    def on_for(loop):
        if loop.kind == tirx.ForKind.THREAD_BINDING and (
                loop.thread_binding is None or not str(loop.thread_binding.thread_tag).startswith("blockIdx")):
            varying.add(loop.loop_var)
        defs.append((loop.loop_var, [loop.min, loop.extent]))

    def on_realize(realize):
        defs.extend((iv.var, [value]) for iv, value in zip(realize.block.iter_vars, realize.iter_values))

    tvm_ffi.structural_walk(stmt, [(tirx.AttrStmt, on_attr), (tirx.LetStmt, lambda s: defs.append((s.var, [s.value]))),
                                   (tirx.Bind, lambda s: defs.append((s.var, [s.value]))), (tirx.For, on_for),
                                   (s_tir.SBlockRealize, on_realize)])
    changed = True
    while changed:
        changed = False
        for var, exprs in defs:
            if var not in varying and any(reads_varying(e, varying, buffers) for e in exprs):
                varying.add(var)
                changed = True
    return varying


def reads_varying(expr, varying: set, buffers=frozenset()) -> bool:
    """Whether ``expr`` reads a ``varying`` variable, loads a buffer whose data variable is not in ``buffers``,
    or calls anything but pure integer arithmetic."""
    found = []

    def on_var(v):
        if v in varying:
            found.append(v)

    def on_load(load):
        if load.source not in buffers:
            found.append(load)

    def on_call(call):
        if not getattr(call.op, "name", "").endswith(_PURE):
            found.append(call)

    tvm_ffi.structural_walk(expr, [(tirx.Var, on_var), (tvm.ir.expr.TensorLoad, on_load),
                                   (tvm.ir.expr.Call, on_call)])
    return bool(found)


def uniformity(body) -> Uniformity:
    """The varying variables and the uniform buffers of a function body (module docstring)."""
    root = _alias_roots(body)
    stored, loaded = {}, {}

    def on_store(s):
        stored[root(s.buffer)] = s.buffer

    def on_load(ld):
        loaded[root(ld.source)] = ld.source

    tvm_ffi.structural_walk(body, [(tirx.BufferStore, on_store), (tvm.ir.expr.TensorLoad, on_load)])
    escaped = {root(b) for b in _escaped(body)}
    readonly = {r for r, b in loaded.items() if scope_of(b) == "global" and r not in stored}
    groups = (readonly | {r for r, b in stored.items() if scope_of(b) == "local"}) - escaped
    while True:
        buffers = _Members(groups, root)
        u = Uniformity(varying_vars(body, buffers), buffers)
        lost: set = set()
        _check_stores(body, False, u, lost)
        if not lost:
            return u
        groups = groups - {root(b) for b in lost}


class _Members:
    """The buffers of the alias groups ``groups`` (``in``: is this buffer one of them)."""

    def __init__(self, groups: set, root):
        self.groups, self.root = groups, root

    def __contains__(self, buf) -> bool:
        return self.root(buf) in self.groups


def _escaped(body) -> set:
    """The buffers an intrinsic call may read or write other than through a load or a store: a buffer (its
    data, an address in it) passed as an argument of a call, e.g. ``ldmatrix`` into a local buffer."""
    out: set = set()

    def on_var(v):
        if _is_buffer(v):
            out.add(v)

    def on_load(ld):  # a load in an argument reads its buffer: only its indices may pass one on
        for i in ld.indices:
            tvm_ffi.structural_walk(i, handlers, order="pre")
        return tvm_ffi.WalkResult.SKIP

    def on_call(call):
        if getattr(call.op, "name", "").endswith("address_of"):  # the address of an element: the buffer escapes
            tvm_ffi.structural_walk(call, [(tvm.ir.expr.TensorLoad, lambda ld: out.add(ld.source))])
        for a in call.args:
            tvm_ffi.structural_walk(a, handlers, order="pre")
        return tvm_ffi.WalkResult.SKIP

    handlers = [(tvm.ir.expr.Call, on_call), (tvm.ir.expr.TensorLoad, on_load), (tirx.Var, on_var)]

    tvm_ffi.structural_walk(body, [(tvm.ir.expr.Call, on_call)], order="pre")
    return out


def _is_buffer(v) -> bool:
    return isinstance(getattr(v, "ty", None), tirx.buffer.BufferType)


def _alias_roots(body):
    """``root(buffer)``: one buffer standing for every buffer that may share its storage (a view, a
    ``decl_buffer`` over its data, a block's match_buffer of it)."""
    parent: dict = {}

    def find(v):
        while v in parent:
            v = parent[v]
        return v

    def union(a, b):
        ra, rb = find(a), find(b)
        if not ra.same_as(rb):
            parent[ra] = rb

    def on_bind(s):
        if _is_buffer(s.var):
            used: list = []
            tvm_ffi.structural_walk(s.value, [(tirx.Var, used.append)])
            for v in used:
                if _is_buffer(v):
                    union(s.var, v)

    def on_block(blk):
        for mb in blk.match_buffers:
            union(mb.buffer, mb.source.source)

    tvm_ffi.structural_walk(body, [(tirx.Bind, on_bind), (tirx.LetStmt, on_bind), (s_tir.SBlock, on_block)])
    return find


def _check_stores(stmt, ctrl_varying: bool, u: Uniformity, lost: set) -> None:
    """Add to ``lost`` the uniform-so-far buffers with a store of a non-uniform value, index or control."""
    if isinstance(stmt, tirx.BufferStore):
        if stmt.buffer in u.buffers and (ctrl_varying or not all(map(u.uniform, [stmt.value, *stmt.indices]))):
            lost.add(stmt.buffer)
        return
    if isinstance(stmt, tirx.IfThenElse):
        c = ctrl_varying or not u.uniform(stmt.condition)
        for branch in (stmt.then_case, stmt.else_case):
            if branch is not None:
                _check_stores(branch, c, u, lost)
        return
    if isinstance(stmt, tirx.While):
        ctrl_varying = ctrl_varying or not u.uniform(stmt.condition)
    elif isinstance(stmt, tirx.For) and stmt.kind != tirx.ForKind.THREAD_BINDING:
        ctrl_varying = ctrl_varying or not (u.uniform(stmt.min) and u.uniform(stmt.extent))
    elif isinstance(stmt, s_tir.SBlockRealize):
        ctrl_varying = ctrl_varying or not u.uniform(stmt.predicate)
    for c in children(stmt):
        _check_stores(c, ctrl_varying, u, lost)


def is_uniform(exprs, func_body) -> bool:
    """Whether every expression of ``exprs`` has the same value in every thread of a block of ``func_body``."""
    u = uniformity(func_body)
    return all(u.uniform(e) for e in exprs)


#: Public names of the alias and escape rules (``frontend.invariant`` uses them too).
alias_roots = _alias_roots
escaped_buffers = _escaped
