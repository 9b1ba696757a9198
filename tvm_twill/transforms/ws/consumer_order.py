"""Ordered consumer groups: the consumer warps of a warp-specialized loop take turns through named barriers.

With the loop annotation ``tvm_twill.ws_consumer_order = [g0, g1, ...]`` (a
permutation of ``0 .. G-1``, written by ``auto_pipeline`` when the joint
schedule orders consumer groups, ``model.groups``), ``transforms.ws.rewrite``
splits its ``W`` consumer warps into ``G`` groups of ``W / G`` consecutive
warps (group ``c = warp // (W / G)``, from the shfl-broadcast warp index, so
warp-uniform) and makes the groups run their sections in the token order
``g0, g1, ..., g0`` (FA3's ping-pong, CUTLASS's ``OrderedSequenceBarrier``).
Group ``c`` owns hardware barrier ``1 + c`` (barrier 0 is ``__syncthreads``),
``2 * 32 * W / G`` threads per phase: the group's own warps ``bar.sync`` on
it, the warps of the group before it in the order ``bar.arrive`` on it::

    before the loop:  if c == g_last: bar.arrive 1 + g0          # g0's first turn
    for k in range(trip):
        wait full[k mod depth]
        bar.sync 1 + c                                          # my turn
        <the consumer statements (wgmma: the issue of this iteration's groups)>
        if not (c == g_last and k == trip - 1):
            bar.arrive 1 + next(c)                              # the next group's turn
        <release, or wait_group + release of slot k-1>

A synchronous body (no wgmma group left in flight) whose statements use
the tensor core takes turns per *section* instead, FA3's ping-pong: each
maximal run of consecutive statements that issue tensor-core MMAs
(``frontend.classify.uses_tensor_core``, the statements the front-end costs
on the tensor core, so the plan's ``model.groups.turn_sections`` are these)
is a turn, and the work between runs (the softmax) is outside every turn,
so it overlaps the other group's MMAs::

    for k in range(trip):
        wait full[k mod depth]
        <statements before the first run>
        bar.sync 1 + c;  <run 0>;  bar.arrive 1 + next(c)
        <statements between>
        bar.sync 1 + c;  <run 1>;  if not (c == g_last and k == trip - 1): bar.arrive 1 + next(c)
        <statements after the last run>
        <release of slot k>

The token goes round once per run: run 0 of every group in the order, then
run 1, ...; ``model.protocol`` checks it with ``sections`` = the number of
runs (the slot counts as read only after the last run, so every read of a
ring slot must lie between the first turn and the last pass).

When the body starts and ends with a run (buffer declarations and proxy
fences aside; attention: ``S = Q K^T`` first, ``O += P V`` last), the last
run of iteration ``k`` and the first of iteration ``k + 1`` are one turn
(FA3's ping-pong; the plan's ``model.groups.rotate_turns``): the first run
takes its turn only in iteration 0, the last run passes only in the last
iteration, and the release of slot ``k`` and the wait on ``full[k + 1]``
happen inside the turn (``model.protocol``'s ``wrap``)::

    for k in range(trip):
        wait full[k mod depth]
        if k == 0: bar.sync 1 + c;  <run 0>;  bar.arrive 1 + next(c)
        <statements between>
        bar.sync 1 + c;  <run 1>;  if k == trip - 1 and c != g_last: bar.arrive 1 + next(c)
        <release of slot k>

Every barrier gets as many arrivals as syncs, so none is left half full at
exit; the protocol (with the ring) is model checked with these rows
(``model.protocol``).  The order only restricts interleavings: it cannot
change values, only deadlock, which the check rules out.  It would interact
with other block-level barriers in the consumer code, so a body with a
barrier of its own is refused, as is a wgmma body whose groups are not whole
warp groups.  A body that stores to shared memory (which ThreadSync later
guards with barriers) is kept only where ``group_scratch`` proves each
group's shared scratch its own: ``role_barriers`` then gives each group a
barrier of its own (``8 + c``), which cannot deadlock against the turns.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...frontend.classify import uses_tensor_core
from ...frontend.ir import T, const_int, substitute, tirx, tvm, tvm_ffi
from ...model.pipeline import WS_CONSUMER_ORDER
from .group_scratch import private_scratch
from .role_barriers import GROUP_BARRIER
from ..tir_util import op_name, ws_fail

__all__ = ["FIRST_BARRIER", "Ordering", "neutral", "read_order", "tensor_core_runs"]

#: Named barrier of group c: FIRST_BARRIER + c (0 is __syncthreads); the hardware has 16.
FIRST_BARRIER = 1
_MAX_GROUPS = GROUP_BARRIER - FIRST_BARRIER  # 8 + c: group c's own barriers, 15: all consumers' (role_barriers)
_SYNC, _ARRIVE = "tirx.ptx.bar_sync_count", "tirx.ptx.bar_arrive"
_FENCE = "tirx.ptx.fence_proxy"
_BARRIERS = ("tirx.tvm_storage_sync", "tirx.cuda.cta_sync", "tirx.cuda.syncthreads_and", "tirx.cuda.syncthreads_or",
             "tirx.ptx.bar_sync", "tirx.ptx.barrier_sync", "tirx.ptx.barrier_sync_count", "tirx.ptx.barrier_arrive",
             "tirx.cuda.warpgroup_sync", _SYNC, _ARRIVE)


def read_order(loop) -> tuple[int, ...] | None:
    """The loop's ``tvm_twill.ws_consumer_order`` as a tuple, None when absent (UnsupportedLoopError when it
    is not a permutation of 0 .. G-1 with 2 <= G <= 15)."""
    raw = (loop.annotations or {}).get(WS_CONSUMER_ORDER)
    if raw is None:
        return None
    order = tuple(v if isinstance(v, int) else const_int(v) for v in raw)
    if not 2 <= len(order) <= _MAX_GROUPS or None in order or sorted(order) != list(range(len(order))):
        ws_fail(f"{WS_CONSUMER_ORDER} must be a permutation of 0 .. G-1 with 2 <= G <= {_MAX_GROUPS}, got "
              f"{[v if v is not None else str(r) for v, r in zip(order, raw)]}")
    return order


def _check_body(stmts, wgmma: bool, warps_per_group: int, groups: int, threads) -> None:
    calls, shared = [], []

    def on_store(s):
        if s.buffer.scope().startswith("shared"):
            shared.append(s.buffer.name)
    for s in stmts:
        tvm_ffi.structural_walk(s, [(tvm.ir.expr.Call, lambda c: calls.append(op_name(c)) if op_name(c) in _BARRIERS
                                     else None), (tirx.BufferStore, on_store)])
    if calls:
        ws_fail(f"ordered consumer groups: the consumer code already synchronises ({calls[0]}); named-barrier "
              "turns could deadlock against it")
    if shared and threads is None:
        ws_fail(f"ordered consumer groups: the consumer writes shared memory ('{shared[0]}'), which needs "
              "block-wide barriers the turns could deadlock against")
    why = private_scratch(stmts, *threads, groups) if shared else None
    if why is not None:
        ws_fail(f"ordered consumer groups: the consumer writes shared memory ('{shared[0]}') and {why}: its "
                "barriers would span the groups, which the turns could deadlock against")
    if wgmma and warps_per_group % 4:
        ws_fail(f"ordered consumer groups of {warps_per_group} warps split a warp group, and wgmma needs whole "
              "warp groups")


@dataclass(frozen=True)
class Ordering:
    """The emitted statements of ordered consumer groups (module docstring) for ``warp`` (the broadcast
    warp index) of ``consumer_warps`` consumer warps."""

    order: tuple[int, ...]
    warp: object
    consumer_warps: int

    @classmethod
    def build(cls, order, warp, consumer_warps: int, stmts, wgmma: bool, threads=None) -> "Ordering":
        """``threads``: (extent, variable) per thread tag of the consumers' block, for the proof that shared
        scratch of the body is private to each group (``group_scratch``); None refuses any shared store."""
        g = len(order)
        if consumer_warps % g:
            ws_fail(f"{consumer_warps} consumer warps do not divide into {g} ordered groups")
        _check_body(stmts, wgmma, consumer_warps // g, g, threads)
        return cls(tuple(order), warp, consumer_warps)

    @property
    def groups(self) -> int:
        return len(self.order)

    @property
    def threads(self) -> int:
        """Threads per phase of each named barrier: the group's and its predecessor's."""
        return 2 * 32 * (self.consumer_warps // self.groups)

    def group(self):
        return tirx.floordiv(self.warp, tirx.const(self.consumer_warps // self.groups, "int32"))

    def _next(self, c):
        """1 + the group after ``c`` in the order, as an expression (a Select chain over the groups)."""
        nxt = {a: self.order[(i + 1) % self.groups] for i, a in enumerate(self.order)}
        expr = tirx.const(FIRST_BARRIER + nxt[self.groups - 1], "int32")
        for a in range(self.groups - 2, -1, -1):
            expr = tirx.Select(c == a, tirx.const(FIRST_BARRIER + nxt[a], "int32"), expr)
        return expr

    def _bar(self, kind, bar_id):
        fn = T.ptx.bar.sync if kind == "sync" else T.ptx.bar.arrive
        return tirx.Evaluate(fn(tirx.Cast("uint32", bar_id), tirx.const(self.threads, "uint32")))

    def prologue(self):
        """Before the loop: the last group of the order gives the first its first turn."""
        return tirx.IfThenElse(self.group() == self.order[-1],
                               self._bar("arrive", tirx.const(FIRST_BARRIER + self.order[0], "int32")), None)

    def turn(self):
        """Wait for this group's turn."""
        return self._bar("sync", self.group() + FIRST_BARRIER)

    def pass_on(self, k, trip, last: bool = True):
        """Give the next group its turn (in the last section of an iteration, not the last group in the last
        iteration: arrivals balance; an earlier section always passes)."""
        c = self.group()
        arrive = self._bar("arrive", self._next(c))
        if not last:
            return arrive
        final = tirx.And(c == self.order[-1], k == trip - 1)
        return tirx.IfThenElse(tirx.Not(final), arrive, None)

    def take_turns(self, stmts, k, trip, whole: bool) -> list:
        """``stmts`` with the turns (module docstring): around all of them when ``whole`` (the issue of
        wgmma groups left in flight) or when none uses the tensor core, else around each run of tensor-core
        statements."""
        runs = [] if whole else tensor_core_runs(stmts)
        if not runs:
            return [self.turn(), *stmts, self.pass_on(k, trip)]
        wrap = len(runs) > 1 and all(neutral(st) for st in (*stmts[:runs[0][0]], *stmts[runs[-1][1]:]))
        out, at = [], 0
        for n, (a, b) in enumerate(runs):
            turn, last = self.turn(), n == len(runs) - 1
            if wrap and n == 0:      # later iterations' first run: inside the turn the last run took
                turn = tirx.IfThenElse(k == 0, turn, None)
            if wrap and last:        # the turn goes on into the next iteration's first run
                c = self.group()
                done = tirx.IfThenElse(tirx.And(k == trip - 1, c != self.order[-1]),
                                       self._bar("arrive", self._next(c)), None)
            else:
                done = self.pass_on(k, trip, last=last)
            out += [*stmts[at:a], turn, *stmts[a:b], done]
            at = b
        return out + list(stmts[at:])

    @staticmethod
    def is_turn(stmt) -> bool:
        if isinstance(stmt, tirx.IfThenElse) and stmt.else_case is None:
            stmt = stmt.then_case
        return isinstance(stmt, tirx.Evaluate) and op_name(stmt.value) == _SYNC

    @staticmethod
    def is_pass(stmt) -> bool:
        if isinstance(stmt, tirx.IfThenElse):
            stmt = stmt.then_case
        return isinstance(stmt, tirx.Evaluate) and op_name(stmt.value) == _ARRIVE

    def facts(self, seq, reads, k, trip, placed, after=None) -> dict:
        """The ``WsKernelFacts`` order fields, read off the emitted loop body ``seq`` (flat statements;
        ``reads``: indices of those reading a ring slot), ``placed`` (the prologue and the loop) and, with the
        look-ahead turn (``look_ahead``), ``after``: the statement after the loop (its turn)."""
        turns = [i for i, st in enumerate(seq) if self.is_turn(st)]
        passes = [i for i, st in enumerate(seq) if self.is_pass(st)]
        prologue = isinstance(placed, tirx.SeqStmt) and self.is_pass(placed.seq[0])
        wpg = self.consumer_warps // self.groups
        last = tirx.const(self.order[-1] * wpg, "int32")

        def skipped(st):   # a pass the last group does not give (in the last iteration)
            cond = substitute(st.condition, [(self.warp, last), (k, trip - 1)])
            return isinstance(st, tirx.IfThenElse) and const_int(tvm.sym.Analyzer().simplify(cond)) == 0
        skip = bool(passes) and isinstance(seq[passes[-1]], tirx.IfThenElse) and skipped(seq[passes[-1]])
        if after is not None:   # the look-ahead turn after the loop: its pass is the one the last group skips
            tail = after.then_case if isinstance(after, tirx.IfThenElse) and not self.is_pass(after) else after
            ends = [st for st in (tail.seq if isinstance(tail, tirx.SeqStmt) else [tail]) if self.is_pass(st)]
            skip = not any(isinstance(seq[p], tirx.IfThenElse) for p in passes) and \
                len(ends) == 1 and isinstance(ends[0], tirx.IfThenElse) and skipped(ends[0])
        # each turn passed on after its section and before the next turn, every read of a ring slot before the
        # last pass (the protocol counts the slot as read after the last section; a read before a turn follows
        # the wait on full[s] all the same)
        paired = len(passes) == len(turns) and all(t < p for t, p in zip(turns, passes)) and \
            all(p < t for p, t in zip(passes, turns[1:]))
        inside = bool(passes) and max(passes) > max(reads, default=-1)
        wrap = len(turns) > 1 and isinstance(seq[turns[0]], tirx.IfThenElse)   # the first run's turn: k == 0 only
        return dict(order=self.order if turns else (), order_threads=self.threads, order_prologue=prologue,
                    pass_after_read=paired and inside, skip_last_pass=skip,
                    order_sections=max(1, len(turns) - wrap), order_wrap=wrap, order_lookahead=after is not None)


def neutral(stmt) -> bool:
    """A buffer declaration (no code runs there) or a proxy fence (it orders the group's own accesses, and
    is no statement of the plan's graph): either may sit inside a turn, so it does not keep the body from
    starting or ending with a run."""
    if isinstance(stmt, (tirx.AllocBuffer, tirx.DeclBuffer)):
        return True
    return isinstance(stmt, tirx.Evaluate) and op_name(stmt.value) == _FENCE


def tensor_core_runs(stmts) -> list[tuple[int, int]]:
    """[start, end) of each maximal run of consecutive statements that issue tensor-core MMAs."""
    runs: list = []
    for i, st in enumerate(stmts):
        if not uses_tensor_core(st):
            continue
        if runs and runs[-1][1] == i:
            runs[-1][1] = i + 1
        else:
            runs.append([i, i + 1])
    return [tuple(r) for r in runs]
