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
different groups must not meet.  It returns None when proven, else the reason (the first buffer not proven
private).  An address with an unbounded variable is not proven.
"""
from __future__ import annotations

from ..frontend.ir import const_int, tirx, tvm, tvm_ffi
from .tir_util import op_name

__all__ = ["group_domains", "private_scratch"]

_ACCESS_PTR = "tirx.tvm_access_ptr"


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
    """(buffer var, first address, last address, is write, loop ranges) of every shared access under ``stmt``."""
    out = []

    def expr_accesses(e, loops):
        def on_load(ld):
            if ld.source.scope().startswith("shared"):
                out.append((ld.source, ld.indices[0], ld.indices[0], False, loops))

        calls = []
        tvm_ffi.structural_walk(e, [(tvm.ir.expr.TensorLoad, on_load), (tvm.ir.expr.Call, calls.append)])
        rows = [c for c in calls if "ldmatrix" in op_name(c) and op_name(c.args[5]) == _ACCESS_PTR]
        for c in rows:                                      # one 16-byte row per lane, not the tile's region
            p = c.args[5]
            first = p.args[2] + c.args[6]
            elems = 16 // (tvm_ffi.dtype(str(_buffer_of(p.args[1]).dtype)).bits // 8)
            out.append((p.args[1], first, first + elems - 1, False, loops))
        for c in calls:
            if op_name(c) == _ACCESS_PTR and not any(c.same_as(r.args[5]) for r in rows):
                out.append((c.args[1], c.args[2], c.args[2] + c.args[3] - 1, const_int(c.args[4]) != 1, loops))

    def visit(s, loops):
        if isinstance(s, tirx.SeqStmt):
            for x in s.seq:
                visit(x, loops)
        elif isinstance(s, tirx.For):
            visit(s.body, (*loops, (s.loop_var, tvm.ir.Range.from_min_extent(s.min, s.extent))))
        elif isinstance(s, tirx.BufferStore):
            if s.buffer.scope().startswith("shared"):
                out.append((s.buffer, s.indices[0], s.indices[0], True, loops))
            expr_accesses(s.value, loops)
            for i in s.indices:
                expr_accesses(i, loops)
        elif isinstance(s, tirx.IfThenElse):
            expr_accesses(s.condition, loops)
            visit(s.then_case, loops)
            if s.else_case is not None:
                visit(s.else_case, loops)
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
    for w in written:
        spans = []
        for c in range(groups):
            dom = group_domains(ext, tvars, per, c)
            if dom is None:
                return f"the block's threads {ext} do not split into {groups} boxes of {per} threads"
            lo, hi = None, None
            for b, first, last, _, loops in acc:
                if not _buffer_of(b).same_as(w):
                    continue
                ana = tvm.sym.Analyzer()
                for v, r in [*dom.items(), *loops]:
                    ana.bind(v, r)
                a, z = ana.const_int_bound(first), ana.const_int_bound(last)
                if a.min_value <= -(1 << 31) or z.max_value >= (1 << 31) - 1:   # the analyzer found no bound
                    return f"an address of '{w.name}' is not bounded per group"
                lo = a.min_value if lo is None else min(lo, a.min_value)
                hi = z.max_value if hi is None else max(hi, z.max_value)
            spans.append((lo, hi))
        spans.sort()
        if any(spans[i][1] >= spans[i + 1][0] for i in range(len(spans) - 1)):
            return f"the groups' addresses in '{w.name}' overlap ({spans})"
    return None
