"""The look-ahead turn of ordered wgmma consumer groups: FA3's ping-pong with a group's O GEMM left in flight.

With the loop annotation ``tvm_twill.ws_lookahead = 1`` (written by
``auto_pipeline`` when the plan chose it, ``model.groups.look_ahead``) on a
loop with ordered consumer groups (``consumer_order``) whose synchronous wgmma
body starts with one run of tensor-core statements and ends with another
(attention: ``S = Q K^T`` first, ``O += P V`` last), each group's turn issues
the first run of iteration ``k`` and then the last run of iteration ``k - 1``,
whose ``wgmma.wait_group 0`` statements are dropped: that GEMM stays in
flight while the group starts the work between the runs (the softmax), and
is waited for just before the first statement that depends on it (writes
what it reads, P; or touches what it writes, the O accumulator).  The ring slot of iteration ``k - 1``
(V) is released after that wait; the last run of the last iteration takes one
more turn after the loop::

    before the loop:  if c == g_last: bar.arrive 1 + g0
    for k in range(trip):
        wait full[k mod depth]
        <declarations and fences before the first run>
        bar.sync 1 + c
        <first run, iteration k>                      # S_k, synchronous
        if k >= 1: <last run, iteration k - 1, no wait_group>   # O_{k-1}, in flight
        bar.arrive 1 + next(c)
        <statements between, up to the first that depends on the last run>
        wgmma.wait_group 0
        if k >= 1: release slot (k - 1) mod depth
        <the rest of the statements between>
    if trip >= 1:
        bar.sync 1 + c
        <last run, iteration trip - 1>                 # synchronous
        if c != g_last: bar.arrive 1 + next(c)
        release slot (trip - 1) mod depth

The body's declarations of buffers the last run uses (P's scratch) move
before the loop: what it reads lives across one iteration, and into the turn
after the loop.  Moving the last run of ``k - 1`` after the first run of ``k`` is legal only
when neither writes a buffer the other touches (declarations aside), and
the statements between may run under it only up to the first that writes a
buffer it touches or touches one it writes: both are checked here, on the
data pointers each statement mentions and those it may write (stores, and
every buffer an intrinsic is handed: an MMA's accumulator registers, the
shared tiles a descriptor addresses), the same dependences the plan's
``model.groups.look_ahead`` defers the wait to.  The protocol is ``model.protocol``'s ``release_lag`` 1 with an
``epilogue_turn``.  A body this does not fit is refused in one line, and the
planner falls back to the turn across the back edge.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...frontend.ir import T, const_int, substitute, tirx, tvm, tvm_ffi
from ...model.pipeline import WS_LOOKAHEAD
from .. import wgmma_overlap as _ov
from .consumer_order import neutral, tensor_core_runs
from ..tir_util import op_name, ws_fail

__all__ = ["LookAheadBody", "emit", "read_flag", "split"]


@dataclass(frozen=True)
class LookAheadBody:
    """A consumer body split for the look-ahead turn (module docstring)."""

    pre: tuple        # declarations and fences before the first run
    first: tuple      # the first run of tensor-core statements (S)
    between: tuple    # the statements between the two runs
    last: tuple       # the last run and the declarations / fences after it (O)
    wait_at: int      # index into ``between`` of the first statement that depends on ``last``
    groups: int       # wgmma commit groups one execution of ``last`` issues
    hoisted: tuple = ()   # the body's declarations of buffers ``last`` uses, placed before the loop


def read_flag(loop) -> bool:
    """The loop's ``tvm_twill.ws_lookahead`` (absent: 0); anything but 0 / 1 is refused in one line."""
    v = (loop.annotations or {}).get(WS_LOOKAHEAD, 0)
    if const_int(v) not in (0, 1):
        ws_fail(f"the loop annotation {WS_LOOKAHEAD} must be 0 or 1, got {v!r}")
    return bool(const_int(v))


def _pointers(stmts) -> list:
    """The data pointers (handle variables: buffers) ``stmts`` mention, declarations skipped."""
    out: list = []

    def on_var(v):
        if not isinstance(v.ty, tvm.ir.PrimType) and not any(v.same_as(x) for x in out):
            out.append(v)
    for s in stmts:
        if not isinstance(s, (tirx.AllocBuffer, tirx.DeclBuffer)):
            tvm_ffi.structural_walk(s, [(tirx.Var, on_var)])
    return out


def _written(stmts) -> list:
    """The data pointers ``stmts`` may write: stores, and the buffers an intrinsic (``ptx`` / ``cuda``) is
    handed as an operand or an address (an MMA's accumulator registers, a descriptor it encodes)."""
    out: list = []

    def add(var):
        if not any(var.same_as(x) for x in out):
            out.append(var)

    def on_call(c):
        if ".ptx." in op_name(c) or ".cuda." in op_name(c):
            for a in c.args:
                tvm_ffi.structural_walk(a, [(tvm.ir.expr.TensorLoad, lambda ld: add(ld.source))])
    for s in stmts:
        tvm_ffi.structural_walk(s, [(tirx.BufferStore, lambda st: add(st.buffer)), (tvm.ir.expr.Call, on_call)])
    return out


def _declared(stmts) -> list:
    """The data pointers the declarations among ``stmts`` (the body's own, not those inside a statement)
    introduce."""
    out: list = []
    for s in stmts:
        if isinstance(s, (tirx.AllocBuffer, tirx.DeclBuffer)):
            tvm_ffi.structural_walk(s, [(tirx.Var, lambda v: out.append(v) if not isinstance(v.ty, tvm.ir.PrimType)
                                         else None)])
    return out


def _shares(a: list, b: list) -> str | None:
    hit = next((v for v in a if any(v.same_as(x) for x in b)), None)
    return None if hit is None else hit.name


def split(stmts) -> LookAheadBody:
    """``stmts`` (one consumer iteration) split for the look-ahead turn; UnsupportedLoopError when it does not
    fit (module docstring)."""
    stmts = list(stmts)
    runs = tensor_core_runs(stmts)
    if len(runs) != 2:
        ws_fail(f"look-ahead turn: the consumer body has {len(runs)} run(s) of tensor-core statements, not two")
    (a, b), (c, d) = runs
    if not all(neutral(s) for s in (*stmts[:a], *stmts[d:])):
        ws_fail("look-ahead turn: the consumer body does not start and end with its tensor-core runs")
    pre, first, between, last = stmts[:a], stmts[a:b], stmts[b:c], stmts[c:]
    if not _ov.has_wgmma(last):
        ws_fail("look-ahead turn: the last tensor-core run issues no wgmma to leave in flight")
    waits = [w for s in last for w in _ov.wait_calls(s)]
    if any(const_int(w.args[0]) != 0 for w in waits):
        ws_fail("look-ahead turn: the last tensor-core run waits with a wgmma.wait_group other than 0")
    groups = sum(_ov.commits(s) or 0 for s in last)
    if any(_ov.commits(s) is None for s in last) or groups < 1:
        ws_fail("look-ahead turn: the last tensor-core run's wgmma commit groups are not a static count")
    mine, writes = _pointers(last), _written(last)
    # what the last run uses lives across iterations (and into the turn after the loop): its declarations in
    # the body move before the loop
    hoisted = [s for s in (*pre, *between) if _shares(_declared([s]), mine) is not None]
    pre = [s for s in pre if not any(s.same_as(h) for h in hoisted)]
    between = [s for s in between if not any(s.same_as(h) for h in hoisted)]

    def clash(stmts):   # a buffer one side writes and the other touches
        return _shares(_written(stmts), mine) or _shares(writes, _pointers(stmts))
    hit = clash([*pre, *first])
    if hit is not None:
        ws_fail(f"look-ahead turn: the first and the last tensor-core runs both touch '{hit}', one writing it, so "
                "the last cannot follow the next iteration's first")
    at = next((i for i, s in enumerate(between) if clash([s]) is not None), len(between))
    return LookAheadBody(tuple(pre), tuple(first), tuple(between), tuple(last), at, groups, tuple(hoisted))


def _guard(cond, stmts):
    return tirx.IfThenElse(cond, stmts[0] if len(stmts) == 1 else tirx.SeqStmt(list(stmts)), None)


def emit(od, body: LookAheadBody, k, trip, head: list, release_of, slot_of):
    """(the consumer loop, the statement after it) of ``body`` with the look-ahead turns of ``od``
    (``consumer_order.Ordering``; module docstring); ``body.hoisted`` goes before both."""
    zero, one = tirx.const(0, "int32"), tirx.const(1, "int32")
    prev = [_ov.drop_waits(substitute(s, [(k, k - one)])) for s in body.last]
    c = od.group()
    at = body.wait_at
    loop = tirx.For(k, zero, trip, tirx.ForKind.SERIAL, tirx.SeqStmt([
        *head, *body.pre, od.turn(), *body.first, _guard(k >= one, prev), od.pass_on(k, trip, last=False),
        *body.between[:at], tirx.Evaluate(T.ptx.wgmma.wait_group.sync.aligned(0)),
        tirx.IfThenElse(k >= one, release_of(slot_of(k - one)), None), *body.between[at:]]))
    final = [substitute(s, [(k, trip - one)]) for s in body.last]
    tail = [od.turn(), *final, tirx.IfThenElse(c != od.order[-1], od.pass_on(k, trip, last=False), None),
            release_of(slot_of(trip - one))]
    n = const_int(trip)
    after = _guard(trip >= one, tail) if n is None else tirx.SeqStmt(tail) if n >= 1 else None
    return loop, after
