"""Reads TVM's pipelined TIR back and checks that no read sees a ``cp.async`` copy still in flight.

``annotate.async_waits`` computes the waits a plan needs from the plan (its stages and orders).  This
module shares nothing with it: it takes the loop as InjectSoftwarePipeline emitted it (prologue, body and
epilogue; ``wait_counts`` marks it) and executes it statement by statement for concrete trip counts,
keeping the one ``cp.async`` queue of a thread as the code drives it:

* a store under ``async_scope`` is a copy in flight, uncommitted until the ``async_commit_queue_scope``
  around it ends (then one group);
* ``async_wait_inflight_count N`` completes every committed group but the ``N`` newest;
* a load (``BufferLoad``, ``tvm_access_ptr`` with its read bit, ``address_of``) or a plain store of a
  buffer a copy in flight writes, at an index that may overlap it, is a **violation**: the reader may see
  the old data.

Indices are evaluated with intervals: the pipelined loop's variable and the trip count's variable have
exact values, every other loop and thread variable its range.  Two accesses overlap unless some dimension
has disjoint intervals.  An access through a pointer (``tvm_access_ptr``, ``address_of``) is attributed to
the outermost index of its first element only (the version of a multi-versioned buffer: an access of the
original buffer lies within one version, whatever extent TVM states for the pointer).  Where the order of
the queue cannot be known (a wait or a commit under a condition that does not fold, a count that does not
fold) the check is conservative: the guarded wait or commit is treated as not run, an unknown count as
completing nothing.

``violations(region, loop, env)`` runs one trip count; ``trip_envs`` gives the trip counts to run for a
loop of symbolic extent (every count up to past the steady state, realised through the extent's one
variable).  ``wait_counts.guard_loop_waits`` refuses a plan whose code has a violation, on the path each
build takes (TVM's own counts for ``tvm.compile``, the lowered counts for the guarded pipelines).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..frontend.ir import children, s_tir, tirx, tvm, tvm_ffi

__all__ = ["QueueViolation", "trip_envs", "violations"]

_COMMIT = "async_commit_queue_scope"
_ASYNC = "async_scope"
_COUNT = "async_wait_inflight_count"
_BIG = 1 << 40


@dataclass(frozen=True)
class QueueViolation:
    """A read (or plain store) of shared memory that a cp.async copy may still be writing."""

    buffer: str
    iteration: int | None  # the pipelined loop's value where it happens (None: outside it)
    trip: str  # the trip count's variable values, "" for a constant trip count
    access: str  # "read" | "store" | "copy"
    part: str = ""  # "prologue" | "body" | "epilogue" (the loops InjectSoftwarePipeline emits, in order)

    def __str__(self) -> str:
        where = (f"{self.part + ' ' if self.part else ''}iteration {self.iteration}" if self.iteration is not None
                 else "outside the loop")
        trip = f" (trip count given by {self.trip})" if self.trip else ""
        verb = {"read": "reads", "store": "stores to", "copy": "copies into"}[self.access]
        return f"{where}{trip} {verb} '{self.buffer}' while a cp.async copy into it may still be in flight"


# -- intervals ---------------------------------------------------------------------------------------------
def _iv(expr, env: dict) -> tuple[int, int] | None:
    """[lo, hi] of an integer expression; ``env`` maps Var -> (lo, hi); None where unknown."""
    if isinstance(expr, int):
        return (expr, expr)
    if isinstance(expr, tirx.IntImm):
        return (int(expr.value), int(expr.value))
    if isinstance(expr, tirx.Var):
        return env.get(expr)
    if isinstance(expr, tirx.Cast):
        return _iv(expr.value, env) if "int" in str(expr.dtype) or str(expr.dtype) == "bool" else None
    if isinstance(expr, (tirx.Add, tirx.Sub, tirx.Mul, tirx.Min, tirx.Max)):
        a, b = _iv(expr.a, env), _iv(expr.b, env)
        if a is None or b is None:
            return None
        if isinstance(expr, tirx.Add):
            return (a[0] + b[0], a[1] + b[1])
        if isinstance(expr, tirx.Sub):
            return (a[0] - b[1], a[1] - b[0])
        if isinstance(expr, tirx.Min):
            return (min(a[0], b[0]), min(a[1], b[1]))
        if isinstance(expr, tirx.Max):
            return (max(a[0], b[0]), max(a[1], b[1]))
        corners = [x * y for x in a for y in b]
        return (min(corners), max(corners))
    if isinstance(expr, (tirx.FloorDiv, tirx.FloorMod, tirx.Div, tirx.Mod)):
        return _divmod(expr, env)
    if isinstance(expr, _BITS) and not _is_bool(expr):
        return _bits(expr, env)
    if isinstance(expr, tirx.Select):
        return _choice(_truth(expr.condition, env), expr.true_value, expr.false_value, env)
    if isinstance(expr, _Call) and _op(expr) == "if_then_else":
        return _choice(_truth(expr.args[0], env), expr.args[1], expr.args[2], env)
    if _is_bool(expr):
        t = _truth(expr, env)
        return (0, 1) if t is None else (int(t), int(t))
    return None


def _divmod(expr, env) -> tuple[int, int] | None:
    a, b = _iv(expr.a, env), _iv(expr.b, env)
    if a is None or b is None or b[0] != b[1] or b[0] <= 0:
        return None
    d = b[0]
    if isinstance(expr, (tirx.Div, tirx.Mod)) and a[0] < 0:  # truncating: only where it equals flooring
        return None
    if isinstance(expr, (tirx.FloorDiv, tirx.Div)):
        return (a[0] // d, a[1] // d)
    if a[0] // d == a[1] // d:
        return (a[0] % d, a[1] % d)
    return (0, d - 1)


def _bits(expr, env) -> tuple[int, int] | None:
    """Bitwise operations of non-negative intervals (swizzled shared-memory offsets): ``&`` is at most the
    smaller operand, ``|`` and ``^`` below the next power of two; shifts by a constant scale."""
    a, b = _iv(expr.a, env), _iv(expr.b, env)
    if a is None or b is None or a[0] < 0 or b[0] < 0:
        return None
    if isinstance(expr, _BitAnd):
        return (0, min(a[1], b[1]))
    if isinstance(expr, (_BitOr, _BitXor)):
        return (0, (1 << max(a[1], b[1]).bit_length()) - 1)
    if b[0] != b[1] or b[0] > 62:
        return None
    return (a[0] << b[0], a[1] << b[0]) if isinstance(expr, _Shl) else (a[0] >> b[0], a[1] >> b[0])


def _choice(cond, then, other, env):
    if cond is True:
        return _iv(then, env)
    if cond is False:
        return _iv(other, env)
    a, b = _iv(then, env), _iv(other, env)
    return None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))


_Call = tvm.ir.expr.Call
_BitAnd, _BitOr, _BitXor = tvm.ir.prim.expr.BitwiseAnd, tvm.ir.prim.expr.BitwiseOr, tvm.ir.prim.expr.BitwiseXor
_Shl, _Shr = tvm.ir.prim.expr.LShift, tvm.ir.prim.expr.RShift
_BITS = (_BitAnd, _BitOr, _BitXor, _Shl, _Shr)
_Load = tvm.ir.expr.TensorLoad  # TVM 0.27's BufferLoad (``tirx.BufferLoad`` is its constructor)
_CMP = (tirx.LT, tirx.LE, tirx.GT, tirx.GE, tirx.EQ, tirx.NE)


def _is_bool(expr) -> bool:
    return isinstance(expr, _CMP + (tirx.And, tirx.Or, tirx.Not)) or (
        isinstance(expr, (_BitAnd, _BitOr)) and _is_bool(expr.a) and _is_bool(expr.b))


def _truth(expr, env) -> bool | None:
    """True / False when ``expr`` folds to it over the intervals, else None."""
    if isinstance(expr, tirx.IntImm):
        return bool(expr.value)
    if isinstance(expr, tirx.And):
        a, b = _truth(expr.a, env), _truth(expr.b, env)
        return False if False in (a, b) else (True if a is True and b is True else None)
    if isinstance(expr, tirx.Or):
        a, b = _truth(expr.a, env), _truth(expr.b, env)
        return True if True in (a, b) else (False if a is False and b is False else None)
    if isinstance(expr, tirx.Not):
        a = _truth(expr.a, env)
        return None if a is None else not a
    if isinstance(expr, _CMP):
        a, b = _iv(expr.a, env), _iv(expr.b, env)
        return None if a is None or b is None else _compare(type(expr), a, b)
    if isinstance(expr, (_BitAnd, _BitOr)) and _is_bool(expr.a) and _is_bool(expr.b):  # `&` / `|` of conditions
        a, b = _truth(expr.a, env), _truth(expr.b, env)
        if isinstance(expr, _BitAnd):
            return False if False in (a, b) else (True if a is True and b is True else None)
        return True if True in (a, b) else (False if a is False and b is False else None)
    v = _iv(expr, env) if not _is_bool(expr) else None
    return None if v is None or v[0] != v[1] else bool(v[0])


def _compare(kind, a, b) -> bool | None:
    if kind is tirx.LT:
        return True if a[1] < b[0] else (False if a[0] >= b[1] else None)
    if kind is tirx.LE:
        return True if a[1] <= b[0] else (False if a[0] > b[1] else None)
    if kind is tirx.GT:
        return _compare(tirx.LT, b, a)
    if kind is tirx.GE:
        return _compare(tirx.LE, b, a)
    if a[0] == a[1] == b[0] == b[1]:
        return kind is tirx.EQ
    disjoint = a[1] < b[0] or b[1] < a[0]
    return (kind is tirx.NE) if disjoint else None


def _op(call) -> str:
    """A call's operator name without its namespace (TVM 0.27 has ``prim.if_then_else``, ``tirx.address_of``)."""
    op = getattr(call, "op", None)
    return str(getattr(op, "name", "")).rpartition(".")[2] if op is not None else ""


# -- the queue ---------------------------------------------------------------------------------------------
@dataclass
class _Access:
    buf: object  # the buffer (TVM 0.27: a Var)
    name: str
    dims: tuple  # per-dimension (lo, hi) | None; a pointer access: its outermost dimension only


def _overlap(a: _Access, b: _Access) -> bool:
    for x, y in zip(a.dims, b.dims):
        if x is not None and y is not None and (x[1] < y[0] or y[1] < x[0]):
            return False
    return True


@dataclass
class _Queue:
    loop: str
    trip: str
    env: dict
    groups: list = field(default_factory=list)  # committed groups in flight, oldest first: [[_Access]]
    pending: list = field(default_factory=list)  # copies issued, not yet committed
    found: list = field(default_factory=list)
    iteration: int | None = None
    in_async: int = 0
    aliases: list = field(default_factory=list)  # [(match buffer data Var, source _Access)]
    buffers: list = field(default_factory=list)  # the buffers declared on the way (strides of pointer reads)
    read: list = field(default_factory=list)  # the buffers the region reads
    parts: list = field(default_factory=list)  # the pipelined loop's parts (For nodes), in program order
    part: str = ""
    cache: dict = field(default_factory=dict)

    def in_flight(self):
        for g in self.groups:
            yield from g
        yield from self.pending

    def touch(self, acc: _Access, kind: str) -> None:
        if kind == "read" and not any(b.same_as(acc.buf) for b in self.read):
            self.read.append(acc.buf)
        if any(w.buf.same_as(acc.buf) and _overlap(w, acc) for w in self.in_flight()):
            v = QueueViolation(acc.name, self.iteration, self.trip, kind, self.part)
            if v not in self.found:
                self.found.append((v, acc.buf))

    def violations(self) -> list[QueueViolation]:
        """What was found; two copies in flight to one place only where the region reads that buffer (a
        buffer nothing reads may end either way)."""
        return [v for v, buf in self.found if v.access != "copy" or any(b.same_as(buf) for b in self.read)]

    def wait(self, count) -> None:
        """``cp.async.wait_group``: every committed group but the newest ``count`` complete (an unknown count:
        its largest value; none at all: nothing completes)."""
        iv = _iv(count, self.env)
        keep = _BIG if iv is None else iv[1]
        if keep <= 0:
            self.groups = []
        elif keep < len(self.groups):
            self.groups = self.groups[-keep:]


def _access(q: _Queue, buf, indices, pointer: bool = False) -> _Access:
    for alias, src in q.aliases:
        if alias.same_as(buf):
            return src
    dims = tuple(_index_iv(i, q.env) for i in indices)
    return _Access(buf, buf.name, dims[:1] if pointer else dims)


def _index_iv(index, env):
    if isinstance(index, tirx.Ramp):
        base, stride = _iv(index.base, env), _iv(index.stride, env)
        lanes = index.lanes if isinstance(index.lanes, int) else getattr(index.lanes, "value", None)
        if base is None or stride is None or lanes is None:
            return None
        ends = (stride[0] * (int(lanes) - 1), stride[1] * (int(lanes) - 1))
        return (base[0] + min(0, *ends), base[1] + max(0, *ends))
    return _iv(index, env)


def _pointer(q: _Queue, data, offset) -> _Access | None:
    """A ``tvm_access_ptr`` of ``data`` (``buffer.data``) at element ``offset``: the outermost index of its
    first element (None: not a buffer's data)."""
    if not (isinstance(data, _Call) and _op(data) == "buffer_data"):
        return None
    buf = data.args[0]
    for alias, src in q.aliases:
        if alias.same_as(buf):
            return src
    stride, off = _outer_stride(buf), _iv(offset, q.env)
    if stride is None or off is None:
        return _Access(buf, buf.name, (None,))
    return _Access(buf, buf.name, ((off[0] // stride, off[1] // stride),))


def _outer_stride(buf) -> int | None:
    strides = [_iv(s, {}) for s in buf.strides]
    if strides and strides[0] is not None and strides[0][0] == strides[0][1] and strides[0][0] > 0:
        return strides[0][0]
    size = 1
    for d in list(buf.shape)[1:]:
        v = _iv(d, {})
        if v is None or v[0] != v[1]:
            return None
        size *= v[0]
    return size if len(buf.shape) > 1 and size > 0 else None


def _loads(q: _Queue, node) -> list:
    """The loads and pointer calls under ``node`` (a leaf statement or an expression of the region, alive as
    long as the region is: cached by node)."""
    key = ("loads", node.__hash__())
    if key not in q.cache:
        found: list = []
        stmt = node if isinstance(node, tirx.Stmt) else tirx.Evaluate(node)
        tvm_ffi.structural_walk(stmt, [(_Load, found.append), (_Call, found.append)])
        q.cache[key] = (node, found)  # the node kept alive with its entry
    return q.cache[key][1]


def _reads(q: _Queue, node) -> None:
    """Check every load under ``node`` (a leaf statement or an expression of the region)."""
    found = _loads(q, node)
    pointed = {c.args[0].__hash__() for c in found if isinstance(c, _Call) and _op(c) == "address_of"}
    ptrs = {c.args[1].__hash__() for c in found if isinstance(c, _Call) and _op(c) == "tvm_access_ptr"}
    for n in found:
        if isinstance(n, _Load):
            q.touch(_access(q, n.source, n.indices, pointer=n.__hash__() in pointed), "read")
        elif _op(n) == "tvm_access_ptr":
            rw = _iv(n.args[4], q.env)
            acc = _pointer(q, n.args[1], n.args[2])
            if acc is not None and (rw is None or rw[0] != rw[1] or rw[0] & 1):
                q.touch(acc, "read")
        elif _op(n) == "buffer_data" and n.__hash__() not in ptrs:  # a raw pointer: the whole buffer
            q.touch(_Access(n.args[0], n.args[0].name, (None,)), "read")


# -- the walk ------------------------------------------------------------------------------------------------
class _Unorderable(Exception):
    """The queue's order depends on something the check cannot fold."""


def _has_queue_ops(q: _Queue, stmt) -> bool:
    key = ("ops", stmt.__hash__())
    if key not in q.cache:
        hit: list = []
        tvm_ffi.structural_walk(stmt, [(tirx.AttrStmt, lambda n: hit.append(1) if str(n.attr_key) in (
            _COMMIT, _ASYNC, _COUNT) else None)])
        q.cache[key] = (stmt, bool(hit))
    return q.cache[key][1]


def _guarded(q: _Queue, cond, stmt, then, other=None) -> None:
    """Run ``then`` or ``other`` as ``cond`` folds; where it does not, both for their reads (a wait or a
    commit under it makes the queue's order unknown)."""
    _reads(q, cond)
    t = _truth(cond, q.env)
    if t is True or t is False:
        chosen = then if t else other
        if chosen is not None:
            _run(q, chosen)
        return
    if _has_queue_ops(q, stmt):
        raise _Unorderable(f"a cp.async wait or commit under a condition that does not fold ({cond})")
    for branch in (then, other):
        if branch is not None:
            _run(q, branch)


def _run_for(q: _Queue, loop) -> None:
    lo, ext = _iv(loop.min, q.env), _iv(loop.extent, q.env)
    mine = loop.loop_var.name == q.loop
    if mine or (_has_queue_ops(q, loop) and ext is not None and ext[1] <= 64):
        if lo is None or ext is None or lo[0] != lo[1] or ext[0] != ext[1]:
            raise _Unorderable(f"loop '{loop.loop_var.name}' has an extent that does not fold ({loop.extent})")
        outer = (q.iteration, q.part)
        if mine:
            q.part = _part_name(q, loop)
        for v in range(lo[0], lo[0] + ext[0]):
            q.env[loop.loop_var] = (v, v)
            if mine:
                q.iteration = v
            _run(q, loop.body)
        q.iteration, q.part = outer
        return
    if _has_queue_ops(q, loop):
        raise _Unorderable(f"a cp.async wait or commit in loop '{loop.loop_var.name}' of unknown extent")
    if ext is not None and ext[1] <= 0:
        return
    if lo is not None and ext is not None:
        q.env[loop.loop_var] = (lo[0], lo[1] + ext[1] - 1)
    else:
        q.env.pop(loop.loop_var, None)
    _run(q, loop.body)


def _part_name(q: _Queue, loop) -> str:
    k = next((i for i, p in enumerate(q.parts) if p.same_as(loop)), None)
    if k is None or len(q.parts) not in (2, 3):
        return ""
    return (("prologue", "body", "epilogue") if len(q.parts) == 3 else ("prologue", "body"))[k]


def _run_block(q: _Queue, realize) -> None:
    block = realize.block
    for b in block.alloc_buffers:
        q.buffers.append(b)
    for m in block.match_buffers:
        src = m.source
        dims = tuple(None if _iv(r.min, q.env) is None or _iv(r.extent, q.env) is None else
                     (_iv(r.min, q.env)[0], _iv(r.min, q.env)[1] + _iv(r.extent, q.env)[1] - 1)
                     for r in src.region)
        q.aliases.append((m.buffer, _Access(src.buffer, src.buffer.name, dims)))
    body = block.body if block.init is None else tirx.SeqStmt([block.init, block.body])
    _guarded(q, realize.predicate, realize, body)


def _run_attr(q: _Queue, attr) -> None:
    key = str(attr.attr_key)
    if key == _COMMIT:
        _run(q, attr.body)
        q.groups.append(q.pending)
        q.pending = []
    elif key == _ASYNC:
        q.in_async += 1
        _run(q, attr.body)
        q.in_async -= 1
    else:
        if key == _COUNT:
            q.wait(attr.value)
        _run(q, attr.body)


def _store(q: _Queue, st) -> None:
    _reads(q, st)  # its value's and indices' loads
    acc = _access(q, st.buffer, st.indices)
    q.touch(acc, "copy" if q.in_async else "store")
    if q.in_async:
        q.pending.append(acc)


def _run(q: _Queue, stmt) -> None:
    if isinstance(stmt, tirx.SeqStmt):
        for s in stmt.seq:
            _run(q, s)
    elif isinstance(stmt, tirx.For):
        _run_for(q, stmt)
    elif isinstance(stmt, s_tir.SBlockRealize):
        _run_block(q, stmt)
    elif isinstance(stmt, tirx.AttrStmt):
        _run_attr(q, stmt)
    elif isinstance(stmt, tirx.IfThenElse):
        _guarded(q, stmt.condition, stmt, stmt.then_case, stmt.else_case)
    elif isinstance(stmt, tirx.BufferStore):
        _store(q, stmt)
    elif isinstance(stmt, tirx.Evaluate):
        _reads(q, stmt)
    elif isinstance(stmt, tirx.LetStmt):
        q.env[stmt.var] = _iv(stmt.value, q.env)
        if q.env[stmt.var] is None:
            del q.env[stmt.var]
        _run(q, stmt.body)
    else:
        buf = getattr(stmt, "buffer", None)
        if buf is not None:
            q.buffers.append(buf)
        body = getattr(stmt, "body", None)
        if isinstance(body, tirx.Stmt):
            _run(q, body)


def violations(region, loop: str, env: dict, trip: str = "") -> list:
    """The violations of one run of ``region`` (the pipelined loop ``loop`` as InjectSoftwarePipeline
    emitted it), ``env`` mapping the variables around it (threads, outer loops, the trip count's variable)
    to their (lo, hi) intervals.  A run whose queue order cannot be known gives one violation saying so."""
    q = _Queue(loop, trip, dict(env))
    tvm_ffi.structural_walk(region, [(tirx.For, lambda f: q.parts.append(f) if f.loop_var.name == loop else None)])
    try:
        _run(q, region)
    except _Unorderable as why:
        return [f"the cp.async queue of loop '{loop}'{' at ' + trip if trip else ''} cannot be checked: {why}"]
    return [str(v) for v in q.violations()]


def enclosing_ranges(func, region) -> dict:
    """The (lo, hi) of every loop and thread variable around ``region`` in ``func`` (the loops on the way)."""
    out: dict = {}

    def down(stmt, env) -> bool:
        if stmt.same_as(region):
            out.update(env)
            return True
        if isinstance(stmt, tirx.For):
            lo, ext = _iv(stmt.min, env), _iv(stmt.extent, env)
            env = dict(env)
            if lo is not None and ext is not None and ext[1] > 0:
                env[stmt.loop_var] = (lo[0], lo[1] + ext[1] - 1)
        if isinstance(stmt, tirx.AttrStmt) and str(stmt.attr_key) == "thread_extent":
            ext = _iv(stmt.value, env)
            if ext is not None:
                env = dict(env)
                env[stmt.node.var] = (0, ext[1] - 1)
        kids = [stmt.then_case, stmt.else_case] if isinstance(stmt, tirx.IfThenElse) else children(stmt)
        return any(down(c, env) for c in kids if c is not None)

    down(func.body, {})
    return out


def trip_envs(loop, num_stages: int) -> list[tuple[str, dict]] | None:
    """The trip counts to run for the pipelined ``loop`` (the For before InjectSoftwarePipeline), as
    ``(label, env)``: a constant trip count once (``("", {})``); a symbolic one through the one variable of
    its extent, for every trip count from 0 to past the steady state (``3 * num_stages + 6``: the prologue,
    two turns of every buffer version count up to ``num_stages + 3`` and the epilogue), each realised by
    the smallest value of the variable that gives it.  None where the extent has another form (more than
    one variable, a load): the caller cannot check the loop."""
    ext = _iv(loop.extent, {})
    if ext is not None and ext[0] == ext[1]:
        return [("", {})]
    atoms: list = []
    tvm_ffi.structural_walk(tirx.Evaluate(loop.extent), [(tirx.Var, atoms.append), (_Load, atoms.append)])
    free = [a for a in atoms if isinstance(a, _Load) or not any(a.same_as(b) for b in atoms[:atoms.index(a)])]
    if len(free) != 1 or isinstance(free[0], _Load) or "int" not in str(free[0].ty if hasattr(free[0], "ty")
                                                                            else free[0].dtype):
        return None
    var = free[0]
    out: list = []
    for trips in range(0, 3 * num_stages + 7):
        value = _smallest_giving(loop.extent, var, trips)
        if value is not None:
            out.append((f"{var.name}={value}", {var: (value, value)}))
    return out


def _smallest_giving(extent, var, trips: int) -> int | None:
    """The smallest value v in [0, 2^31) of ``var`` with ``extent`` = ``trips`` (extent non-decreasing in v)."""
    def at(v):
        iv = _iv(extent, {var: (v, v)})
        return None if iv is None else iv[0]

    lo, hi = 0, (1 << 31) - 1
    if at(hi) is None or at(hi) < trips:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if at(mid) >= trips:
            hi = mid
        else:
            lo = mid + 1
    return lo if at(lo) == trips else None
