"""Shared scratch private to each ordered consumer group: the proof that lets the groups keep it.

Ordered consumer groups (``consumer_order``) take turns through named barriers.  A body that exchanges
values between its threads through shared memory (the tensor-core attention kernel's S, P and correction
tiles) needs barriers between those threads too; TVM's ThreadSync places them, and a barrier of all the
consumer threads inside one group's turn would deadlock (the other group waits for its turn).  When each
group reads and writes every shared buffer the body writes only in addresses no other group touches, the
barriers order threads of one group only, and ``role_barriers`` gives each group a named barrier of its own.

``private_scratch(stmts, ext, tvars, groups)`` is that proof: group ``c`` is the threads with linear index in
``[c T, (c + 1) T)`` (``T`` threads per group), each thread variable is bounded to what group ``c`` takes, each
loop variable to its range, and TVM's analyzer bounds every address of every access (a store, a load, the
16 bytes one lane's ldmatrix row address reads, the region of any other ``tvm_access_ptr``); the ranges of
different groups must not meet.  Where the analyzer's interval is wider than the addresses (a sum of
terms that move together, as a wgmma accumulator's fragment layout has them) and the thread and loop
domain is small (``ENUMERATE_POINTS``), the addresses are computed exactly instead, point by point
(integer arithmetic, floor division and modulo as TIR defines them), and the groups' address *sets* must
not meet.  It returns None when proven, else the reason (the first buffer not proven private).  An
address with an unbounded variable, or an expression the evaluator does not know, is not proven.
"""
from __future__ import annotations

import itertools

import numpy as np

from ...frontend.ir import const_int, tirx, tvm, tvm_ffi
from ..tir_util import op_name

__all__ = ["ENUMERATE_POINTS", "group_domains", "private_scratch"]

_ACCESS_PTR = "tirx.tvm_access_ptr"
#: The most (thread, loop) points of one access whose addresses are computed exactly, per group.
ENUMERATE_POINTS = 1 << 16


def group_domains(ext: dict, tvars: dict, per_group: int, c: int) -> dict | None:
    """{thread var: Range} of group ``c`` (``per_group`` consecutive linear threads); None when the block's
    shape does not make that a box (then nothing is proven)."""
    x, y, z = (ext.get(t, 1) for t in ("threadIdx.x", "threadIdx.y", "threadIdx.z"))
    lo = c * per_group
    dom = {}
    if per_group % x == 0 and (z == 1 or per_group % (x * y) == 0):      # whole rows of x
        dom["threadIdx.x"] = (0, x)
        if z == 1:
            dom["threadIdx.y"] = (lo // x, per_group // x)
        else:
            dom["threadIdx.y"] = (0, y)
            dom["threadIdx.z"] = (lo // (x * y), per_group // (x * y))
    elif x % per_group == 0:                                              # part of one row of x
        dom = {"threadIdx.x": (lo % x, per_group), "threadIdx.y": ((lo // x) % y, 1),
               "threadIdx.z": (lo // (x * y), 1)}
    else:
        return None
    return {tvars[t]: tvm.ir.Range.from_min_extent(m, e) for t, (m, e) in dom.items() if t in tvars}


def _accesses(stmt, loops=()):
    """(buffer var, first address, last address, is write, loop ranges, guards) of every shared access under
    ``stmt``; ``guards``: the conditions of the ``if``s around it (an exact count of addresses skips the points
    where one fails; the analyzer's interval ignores them)."""
    out = []
    guards: list = []

    def expr_accesses(e, loops):
        def on_load(ld):
            if ld.source.scope().startswith("shared"):
                out.append((ld.source, ld.indices[0], ld.indices[0], False, loops, tuple(guards)))

        calls = []
        tvm_ffi.structural_walk(e, [(tvm.ir.expr.TensorLoad, on_load), (tvm.ir.expr.Call, calls.append)])
        rows = [c for c in calls if "ldmatrix" in op_name(c) and op_name(c.args[5]) == _ACCESS_PTR]
        for c in rows:                                      # one 16-byte row per lane, not the tile's region
            p = c.args[5]
            first = p.args[2] + c.args[6]
            elems = 16 // (tvm_ffi.dtype(str(_buffer_of(p.args[1]).dtype)).bits // 8)
            out.append((p.args[1], first, first + elems - 1, False, loops, tuple(guards)))
        for c in calls:
            if op_name(c) == _ACCESS_PTR and not any(c.same_as(r.args[5]) for r in rows):
                out.append((c.args[1], c.args[2], c.args[2] + c.args[3] - 1, const_int(c.args[4]) != 1, loops,
                            tuple(guards)))

    def visit(s, loops):
        if isinstance(s, tirx.SeqStmt):
            for x in s.seq:
                visit(x, loops)
        elif isinstance(s, tirx.For):
            visit(s.body, (*loops, (s.loop_var, tvm.ir.Range.from_min_extent(s.min, s.extent))))
        elif isinstance(s, tirx.BufferStore):
            if s.buffer.scope().startswith("shared"):
                out.append((s.buffer, s.indices[0], s.indices[0], True, loops, tuple(guards)))
            expr_accesses(s.value, loops)
            for i in s.indices:
                expr_accesses(i, loops)
        elif isinstance(s, tirx.IfThenElse):
            expr_accesses(s.condition, loops)
            guards.append(s.condition)
            visit(s.then_case, loops)
            guards[-1] = tirx.Not(s.condition)
            if s.else_case is not None:
                visit(s.else_case, loops)
            guards.pop()
        elif isinstance(s, tirx.Evaluate):
            expr_accesses(s.value, loops)
        elif isinstance(s, (tirx.AllocBuffer,)):
            pass
        else:   # anything else: its expressions unbounded by loops we do not follow
            expr_accesses(s, loops)
    visit(stmt, loops)
    return out


def _buffer_of(b):
    """The buffer an access names: a flat buffer, or ``buf.data`` (a ``buffer_data`` call)."""
    return b.args[0] if isinstance(b, tvm.ir.expr.Call) and op_name(b) == "tirx.buffer_data" else b


def _eval(e, env: dict):
    """``e`` (an integer TIR expression) over numpy arrays of its variables' values ``env`` (var -> array), or
    None for a node this evaluator does not know.  Floor division and modulo round towards minus infinity, as
    TIR's FloorDiv / FloorMod (numpy's // and % do the same)."""
    if isinstance(e, tirx.IntImm):
        return np.int64(e.value)
    if isinstance(e, tirx.Var):
        return next((v for k, v in env.items() if k.same_as(e)), None)
    if isinstance(e, tirx.Cast) and str(e.dtype).startswith(("int", "uint")):
        return _eval(e.value, env)
    if isinstance(e, tirx.Not):
        a = _eval(e.a, env)
        return None if a is None else np.logical_not(a)
    ops = {tirx.Add: np.add, tirx.Sub: np.subtract, tirx.Mul: np.multiply, tirx.FloorDiv: np.floor_divide,
           tirx.FloorMod: np.mod, tirx.Min: np.minimum, tirx.Max: np.maximum, tirx.LT: np.less,
           tirx.LE: np.less_equal, tirx.GT: np.greater, tirx.GE: np.greater_equal, tirx.EQ: np.equal,
           tirx.NE: np.not_equal, tirx.And: np.logical_and, tirx.Or: np.logical_or}
    for cls, fn in ops.items():
        if isinstance(e, cls):
            a, b = _eval(e.a, env), _eval(e.b, env)
            if a is None or b is None or (cls in (tirx.FloorDiv, tirx.FloorMod) and np.any(b == 0)):
                return None
            return fn(a, b)
    return None


def _exact(first, last, dom: dict, loops, guards=()) -> set | None:
    """Every address ``first .. last`` takes over the thread ranges ``dom`` and the loop ranges ``loops`` where
    every one of ``guards`` holds, or None when the domain is larger than ``ENUMERATE_POINTS`` or not constant,
    or an expression is not evaluable."""
    ranges = [*dom.items(), *loops]
    lo_ext = [(const_int(r.min), const_int(r.extent)) for _, r in ranges]
    if any(a is None or b is None for a, b in lo_ext) or int(np.prod([b for _, b in lo_ext] or [1])) > \
            ENUMERATE_POINTS:
        return None
    grid = np.meshgrid(*[np.arange(a, a + b, dtype=np.int64) for a, b in lo_ext], indexing="ij") if ranges else []
    env = {v: g.reshape(-1) for (v, _), g in zip(ranges, grid)}
    size = int(np.prod([b for _, b in lo_ext] or [1]))
    a, z = _eval(first, env), _eval(last, env)
    keep = np.ones(size, dtype=bool)
    for g in guards:
        m = _eval(g, env)
        if m is None:
            return None
        keep &= np.broadcast_to(m, (size,)).astype(bool)
    if a is None or z is None:
        return None
    a, z = np.broadcast_to(a, (size,))[keep], np.broadcast_to(z, (size,))[keep]
    return {int(x) for lo, hi in zip(a.tolist(), z.tolist()) for x in range(lo, hi + 1)}


def _interval(first, last, dom: dict, loops):
    """The analyzer's bound of ``first .. last`` (None: unbounded)."""
    ana = tvm.sym.Analyzer()
    for v, r in [*dom.items(), *loops]:
        ana.bind(v, r)
    a, z = ana.const_int_bound(first), ana.const_int_bound(last)
    if a.min_value <= -(1 << 31) or z.max_value >= (1 << 31) - 1:   # the analyzer found no bound
        return None
    return a.min_value, z.max_value


def _spans(w, acc, doms) -> list | str:
    """Per group, the (lo, hi) interval of every access to ``w``, or the reason it is unbounded."""
    spans = []
    for dom in doms:
        lo, hi = None, None
        for b, first, last, _, loops, _guards in acc:
            if not _buffer_of(b).same_as(w):
                continue
            got = _interval(first, last, dom, loops)
            if got is None:
                return f"an address of '{w.name}' is not bounded per group"
            lo, hi = got[0] if lo is None else min(lo, got[0]), got[1] if hi is None else max(hi, got[1])
        spans.append((lo, hi))
    return spans


def _exact_sets(w, acc, doms) -> list | None:
    """Per group, the exact set of addresses of ``w`` its accesses touch (None when one is not enumerable)."""
    sets = []
    for dom in doms:
        got: set = set()
        for b, first, last, _, loops, guards in acc:
            if _buffer_of(b).same_as(w):
                one = _exact(first, last, dom, loops, guards)
                if one is None:
                    return None
                got |= one
        sets.append(got)
    return sets


def private_scratch(stmts, ext: dict, tvars: dict, groups: int) -> str | None:
    """None when every shared buffer ``stmts`` write is accessed by each of ``groups`` groups in addresses no
    other group touches; else the reason (module docstring)."""
    acc = [a for s in stmts for a in _accesses(s)]
    written = []
    for b, *_rest in acc:
        b = _buffer_of(b)
        if _rest[2] and not any(b.same_as(w) for w in written):
            written.append(b)
    n = 1
    for v in ext.values():
        n *= v
    per = n // groups
    doms = [group_domains(ext, tvars, per, c) for c in range(groups)]
    if any(d is None for d in doms):
        return f"the block's threads {ext} do not split into {groups} boxes of {per} threads"
    for w in written:
        spans = _spans(w, acc, doms)
        if isinstance(spans, str):
            return spans
        ordered = sorted(spans)
        if not any(ordered[i][1] >= ordered[i + 1][0] for i in range(len(ordered) - 1)):
            continue
        sets = _exact_sets(w, acc, doms)      # the intervals meet: the exact addresses may not
        if sets is None or any(a & b for a, b in itertools.combinations(sets, 2)):
            return f"the groups' addresses in '{w.name}' overlap ({spans})"
    return None
