"""Explicit-state model checking of mbarrier producer/consumer rings (pure Python).

A warp-specialized loop hands tiles from one producer (an elected lane that
issues TMA copies, or cp.async on sm_80) to ``consumers`` consumer warp
groups through a ring of ``depth`` shared-memory slots.  Each slot has two
mbarriers, ``full`` (data landed) and ``empty`` (every consumer is done with
it), and every agent keeps a pipeline state (index, phase) that advances by
one slot per iteration and flips its phase bit when the index wraps: the
CUTLASS ``PipelineTmaAsync`` protocol.  ``check_ring`` explores *every*
interleaving of the agents and of the asynchronous copy completions for a
few iterations and reports the first violation with the shortest trace.

The mbarrier, as modelled (PTX ISA semantics, abstracted to what the ring
uses): a barrier holds the parity of its current phase, the arrivals still
pending in it and the transaction count still pending.  ``arrive`` takes one
pending arrival; ``arrive.expect_tx(b)`` takes one and adds ``b`` to the
transaction count; the copy engine's ``complete_tx(b)`` subtracts ``b``.
When both reach zero the phase completes: the parity flips and the pending
arrivals are reset to the barrier's initial count.  ``try_wait.parity(p)``
passes exactly when the barrier's parity differs from ``p`` (the phase with
parity ``p`` has completed); a fresh barrier has parity 0, so waiting for
parity 1 passes at once, which is how the producer's first round finds
every slot empty.

State-transition table (iteration ``i`` uses slot ``s = i mod depth`` with
phase ``ph = (i div depth) mod 2``):

==============  =====================================  ===========================================
agent           guard                                  effect
==============  =====================================  ===========================================
producer        ``empty[s].parity != ph ^ 1``          acquire: slot ``s`` may be written
  acquire
producer        slot acquired                          TMA: ``full[s].arrive.expect_tx(bytes)``,
  issue                                                copy in flight; cp.async: copy in flight
copy engine     a copy of slot ``s`` in flight         data of iteration ``i`` lands in ``s``; TMA:
  complete                                             ``full[s].complete_tx(bytes)``; cp.async:
                                                       ``full[s].arrive`` (``.mbarrier.arrive.noinc``)
consumer g      ``full[s].parity != ph``               wait: the data of iteration ``i`` is visible
  wait
consumer g      waited                                 read the slot (checked: it holds iteration ``i``)
  read
consumer g      read                                   release: ``empty[s].arrive``; advance (i += 1)
  release
producer tail   after the last iteration, for ``depth``  ``empty[s].parity != ph ^ 1`` for each slot:
                more acquires                          every slot was released before the producer exits
==============  =====================================  ===========================================

With ``release_lag`` 1 (the wgmma consumer of ``transforms.wgmma_overlap``:
the reads of a slot are asynchronous wgmma groups, left in flight across one
iteration) the consumer rows are, for a consumer with ``pending`` groups
not yet complete (initially 0):

==============  =====================================  ===========================================
agent           guard                                  effect
==============  =====================================  ===========================================
consumer g      ``full[s].parity != ph``               wait: the data of iteration ``i`` is visible
  wait
consumer g      waited                                 issue ``groups`` commit groups reading slot
  issue                                                ``s`` (checked: it holds iteration ``i``);
                                                       ``pending += groups``
consumer g      issued                                 ``wgmma.wait_group N``: ``pending = min(pending,
  wait_group                                           N)``, the oldest groups complete (in order)
consumer g      waited for the groups                  ``i >= 1``: ``empty[(i - 1) mod depth].arrive``
  release                                              (slot of iteration ``i - 1``); advance
consumer g      after the last iteration               ``wait_group 0``: ``pending = 0``
  final wait
consumer g      final wait                             ``empty[(N - 1) mod depth].arrive``
  final release
==============  =====================================  ===========================================

A read of iteration ``j`` is complete once the consumer's completed groups
(issued minus pending) cover iteration ``j``'s; the overwrite and tail
checks use that.  Groups complete as late as the waits allow, the worst
case for the slots they read (completing earlier never blocks an agent: a
``wait_group`` waits for nothing outside the consumer).  With one slot
this protocol deadlocks (the producer refills slot 0 for iteration 1 only
after the consumer's release of iteration 0, which follows iteration 1's
wait on that slot), so code generation keeps ``release_lag`` 0 there.

Barrier initial counts: ``full`` 1 (the producer's one arrival), ``empty``
``consumers`` (one arrival per consumer group).

With ``order`` (FA3-style ping-pong) the ``consumers`` consumer warps form
``G = len(order)`` contiguous groups of ``k = consumers / G`` (warp ``w`` is
in group ``w div k``), whose ordered sections (the read; with
``release_lag`` 1 the issue) take turns: ``order[0]`` first in every
iteration, then ``order[1]``, ..., ``order[-1]``, then ``order[0]`` of the
next iteration.  Group ``g`` has a named barrier ``b_g`` (``bar.sync`` /
``bar.arrive id, count``, counted in warps) holding the arrivals of its
current generation; the arrival that brings them to ``bar_count`` (correct:
``2 k``, the group's own warps sync and the preceding group's arrive)
completes it: the count resets to 0 and every warp blocked in ``bar.sync``
on it goes on (later arrivals belong to the next generation).  With
``sections`` S > 1 (FA3's ping-pong of tensor-core statements: each
iteration's consumer body has S runs of tensor-core statements, each taken
in turn, with the work between them outside the turns) the token goes
round S times per iteration: section 0 of ``order[0]``, ..., of
``order[-1]``, section 1 of ``order[0]``, ..., section S-1 of
``order[-1]``, section 0 of the next iteration; the slot counts as read once
the last section's read is done (a release must come after it).  With
``wrap`` the last section of iteration ``i`` and section 0 of iteration
``i + 1`` are one turn: section 0's turn is taken only in iteration 0 and
the last section's pass only in the last iteration (the token order counts
turns, ``i (S - 1) + section``, the wrapped pair sharing one).  With
``epilogue_turn`` (``release_lag`` 1: the look-ahead consumer, whose
iteration ``i`` issues the reads of slot ``i``'s second GEMM only in
iteration ``i + 1``) each group takes one more turn after the loop, around
its final wait; every group passes in the loop's last iteration and
``skip_last_pass`` skips the last group's epilogue pass.  Rows added
to either table, turn, read and pass taking the read's place in the
program, once per section (``succ(g)``: the group after ``g`` in ``order``, cyclic):

==============  =====================================  ===========================================
agent           guard                                  effect
==============  =====================================  ===========================================
warp of group   before iteration 0, ``g = order[-1]``  prologue: ``bar.arrive b_order[0]`` (the
  g prologue                                           first turn of ``order[0]``)
warp of group   waited (``full[s]``)                   turn: ``bar.sync b_g``: arrive on ``b_g``, then
  g turn                                               block until that generation completes
warp of group   released by ``b_g``                    read (issue): the ordered section, as above
  g read
warp of group   read (issued); skipped when            pass: ``bar.arrive b_succ(g)``; then release
  g pass        ``g = order[-1]`` and ``i = N - 1``    (wait_group, release) as above
==============  =====================================  ===========================================

Properties checked, in every reachable state:

* **no overwrite**: the producer never issues into a slot whose previous
  content some consumer has not read yet;
* **no read before commit**: a consumer reads a slot only when it holds the
  landed data of the iteration the consumer is at;
* **no deadlock**: every state in which some agent has work left has an
  enabled transition;
* **producer tail complete**: when the producer exits, every issued tile
  was read by every consumer and no copy is in flight;
* **order** (with ``order``): a warp starts its section of iteration ``i``
  only while no warp of another group is in its section (read, not yet
  passed; with no pass after the read, until its next step), and once every
  warp of the preceding group has read iteration ``i`` (``order[0]``: every
  warp of ``order[-1]`` has read iteration ``i - 1``; none for ``i = 0``;
  with sections, the preceding token is the previous group's same section,
  or ``order[-1]``'s previous section);
* **no barrier leftover** (with ``order``): when every agent has finished,
  no named barrier holds the arrivals of an incomplete generation.

Consumer groups run the same program, so states equal up to a permutation
of the consumer groups are merged (symmetry reduction; with ``order``, of
the warps within each ordered group); the explored state count is
reported.  The ``RingProtocol`` fields other than ``depth``, ``consumers``
and ``tma`` describe what code generation emits; the seeded bugs of the
tests are one-field changes of them (a missing phase flip, a wrong arrival
count, a release before the last read, no producer tail; with
``release_lag`` 1: a release before the ``wait_group``, a wait leaving too
many groups pending, no final release, one slot; with ``order``: no
prologue arrive, the pass before the read, the last group passing in the
last iteration, a wrong ``bar_count``).
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from ..errors import InputError
from .ring_state import CheckIncomplete, ProtocolViolation, Ring, explore

__all__ = ["MAX_STATES", "CheckIncomplete", "ProtocolReport", "ProtocolViolation", "RingProtocol", "check_limits",
           "check_ring"]

#: The state budget of a check (``check_ring``'s default ``max_states``): one to two minutes of exploring here.
MAX_STATES = 2_000_000


@dataclass(frozen=True)
class RingProtocol:
    """One producer/consumer ring as emitted: sizes, and the protocol's parameters.

    ``depth``: ring slots.  ``consumers``: consumer warp groups.  ``tma``: the
    full barrier completes by transaction bytes (TMA, sm_90+) rather than by
    the copy's own arrival (cp.async ``.mbarrier.arrive.noinc``, sm_80).
    ``full_count`` / ``empty_count``: initial arrival counts of the barriers
    (None: 1 and ``consumers``, the correct values).  ``producer_flips_phase``
    / ``consumer_flips_phase``: the pipeline state flips its phase bit when
    the index wraps.  ``release_after_read``: a consumer arrives on the empty
    barrier after its last read of the slot (False: before it).
    ``producer_tail``: the producer acquires every slot once more before it
    exits.  ``lanes``: producer lanes that arrive on the full barrier per slot
    (cp.async: each lane's ``.noinc`` arrival when its copies land, modelled
    as one step; TMA: the one elected lane's ``arrive.expect_tx``); the
    correct ``full_count`` is then ``lanes``.

    ``release_lag`` 1: the consumer's reads are asynchronous (wgmma groups
    left in flight, ``transforms.wgmma_overlap``): iteration ``i`` issues
    ``groups`` commit groups reading its slot, then ``wgmma.wait_group
    wait_pending`` (None: ``groups``, the correct value) and releases the
    slot of iteration ``i - 1``; after the loop ``wait_group 0`` and, when
    ``final_release``, the release of the last iteration's slot.
    ``release_after_read`` False then means the release of ``i - 1`` comes
    before the ``wait_group``.

    ``order`` (None: unordered): the token order of ``G = len(order)`` consumer
    groups of ``consumers / G`` warps each (``consumers`` then counts warps),
    whose sections take turns through named barriers (module docstring);
    ``bar_count``: the arrivals completing a named barrier's generation
    (None: ``2 * consumers / G``, the correct value).  ``prologue_arrive``:
    the last group's warps arrive once on the first group's barrier before
    the loop.  ``pass_after_read``: a warp passes the turn after its section
    (False: before it).  ``skip_last_pass``: the last group does not pass in
    the last iteration.  ``sections``: ordered sections per iteration (each a
    turn, a read and a pass; the slot counts as read once the last section's
    read is done), ``release_lag`` 0 only.  ``wrap`` (``sections`` >= 2): the
    last section of iteration ``i`` and the first of iteration ``i + 1`` are
    one turn (FA3's ping-pong, ``model.groups.rotate_turns``): section 0
    takes a turn only in iteration 0, the last section passes only in the
    last iteration, and the ring's release and next wait lie inside the turn.
    ``epilogue_turn`` (``order``, ``release_lag`` 1, one section): the look-ahead
    consumer (``transforms.ws.consumer_order``): the turn goes round once more
    after the loop, each group's turn holding its last in-flight reads' issue
    and wait (the final wait); the pass every group gives in the loop's last
    iteration, and only the last group's epilogue pass is skipped
    (``skip_last_pass``).
    """

    depth: int
    consumers: int
    tma: bool = True
    full_count: int | None = None
    empty_count: int | None = None
    producer_flips_phase: bool = True
    consumer_flips_phase: bool = True
    release_after_read: bool = True
    producer_tail: bool = True
    lanes: int = 1
    release_lag: int = 0
    groups: int = 1
    wait_pending: int | None = None
    final_release: bool = True
    order: tuple[int, ...] | None = None
    bar_count: int | None = None
    prologue_arrive: bool = True
    pass_after_read: bool = True
    skip_last_pass: bool = True
    sections: int = 1
    wrap: bool = False
    epilogue_turn: bool = False

    def __post_init__(self):
        for name in ("depth", "consumers"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 64:
                raise InputError(f"ring {name} must be an integer in [1, 64], got {v!r}")
        if isinstance(self.lanes, bool) or not isinstance(self.lanes, int) or not 1 <= self.lanes <= 1024:
            raise InputError(f"ring lanes must be an integer in [1, 1024], got {self.lanes!r}")
        if self.release_lag not in (0, 1) or isinstance(self.release_lag, bool):
            raise InputError(f"ring release_lag must be 0 or 1, got {self.release_lag!r}")
        if isinstance(self.groups, bool) or not isinstance(self.groups, int) or not 1 <= self.groups <= 64:
            raise InputError(f"ring groups must be an integer in [1, 64], got {self.groups!r}")
        w = self.wait_pending
        if w is not None and (isinstance(w, bool) or not isinstance(w, int) or w < 0):
            raise InputError(f"ring wait_pending must be an integer >= 0 or None, got {w!r}")
        o = self.order
        if o is not None:
            if not isinstance(o, tuple) or any(isinstance(g, bool) or not isinstance(g, int) for g in o) \
                    or len(o) < 2 or sorted(o) != list(range(len(o))):
                raise InputError(f"ring order must be None or a tuple permuting range(G), G >= 2, got {o!r}")
            if self.consumers % len(o):
                raise InputError(f"ring consumers ({self.consumers}) must be a multiple of the {len(o)} ordered "
                                 "groups")
        sec = self.sections
        if isinstance(sec, bool) or not isinstance(sec, int) or not 1 <= sec <= 8:
            raise InputError(f"ring sections must be an integer in [1, 8], got {sec!r}")
        if sec > 1 and (o is None or self.release_lag):
            raise InputError(f"ring sections {sec}: several ordered sections per iteration need an order and "
                             "release_lag 0")
        if not isinstance(self.wrap, bool) or (self.wrap and sec < 2):
            raise InputError(f"ring wrap must be a bool, True only with sections >= 2, got {self.wrap!r} with "
                             f"{sec} section(s)")
        if not isinstance(self.epilogue_turn, bool) or (self.epilogue_turn and (
                o is None or self.release_lag != 1 or sec != 1)):
            raise InputError(f"ring epilogue_turn must be a bool, True only with an order, release_lag 1 and one "
                             f"section, got {self.epilogue_turn!r}")
        for name in ("full_count", "empty_count", "bar_count"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise InputError(f"ring {name} must be an integer >= 1 or None, got {v!r}")

    @property
    def full_init(self) -> int:
        return (1 if self.tma else self.lanes) if self.full_count is None else self.full_count

    @property
    def empty_init(self) -> int:
        return self.consumers if self.empty_count is None else self.empty_count

    @property
    def wait_n(self) -> int:
        return self.groups if self.wait_pending is None else self.wait_pending

    @property
    def bar_init(self) -> int:
        return 2 * self.consumers // len(self.order or (1,)) if self.bar_count is None else self.bar_count


@dataclass(frozen=True)
class ProtocolReport:
    """The outcome of ``check_ring``: ``ok`` when no violation is reachable."""

    protocol: RingProtocol
    iterations: int
    states: int
    violations: tuple[ProtocolViolation, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.violations


def check_ring(proto: RingProtocol, iterations: int | None = None, *, max_states: int | None = None,
               seconds: float | None = None, progress=None) -> ProtocolReport:
    """Explore every interleaving of ``proto`` for ``iterations`` loop trips (default depth + 2).

    Breadth-first, so the trace of a violation is a shortest one.  Raises
    CheckIncomplete (an InputError; no verdict) when the state space exceeds
    ``max_states`` (default ``MAX_STATES``) or the check runs past
    ``seconds``; ``progress(states)`` hears of it about every thousand
    states.  Unset, ``max_states``, ``seconds`` and ``progress`` are those of
    the enclosing ``check_limits`` block, if any.  The states and
    transitions are ``model.ring_state``'s.
    """
    n = proto.depth + 2 if iterations is None else int(iterations)
    if n < 1:
        raise InputError(f"iterations must be >= 1, got {iterations!r}")
    limits = _LIMITS.get()
    max_states = limits.get("max_states", MAX_STATES) if max_states is None else max_states
    seconds = limits.get("seconds") if seconds is None else seconds
    progress = limits.get("progress") if progress is None else progress
    key = (proto, n)
    report = _REPORTS.get(key)
    if report is None:   # the same protocol is checked as emitted and as read off the compiled kernel
        states, violation = explore(Ring.build(proto, n), max_states, seconds, progress)
        if len(_REPORTS) >= _CACHED:
            _REPORTS.pop(next(iter(_REPORTS)))
        report = _REPORTS[key] = ProtocolReport(protocol=proto, iterations=n, states=states,
                                                violations=(violation,) if violation else ())
    elif report.states > max_states:   # a finished check is kept; a smaller budget refuses it as it would have
        raise CheckIncomplete(proto, n, "states", report.states, max_states)
    return report


@contextmanager
def check_limits(*, seconds: float | None = None, max_states: int | None = None, progress=None):
    """Within the block, every ``check_ring`` (the transform's, inside ``tvm.compile``'s passes too) gets
    these limits: each check ``seconds`` at most, ``max_states`` states, ``progress`` reports (None: as
    outside the block)."""
    outer = _LIMITS.get()
    inner = {**outer, **{k: v for k, v in (("seconds", seconds), ("max_states", max_states),
                                           ("progress", progress)) if v is not None}}
    token = _LIMITS.set(inner)
    try:
        yield
    finally:
        _LIMITS.reset(token)


_LIMITS: ContextVar = ContextVar("tvm_twill_check_limits", default={})
#: Reports of the protocols checked last (a check is a pure function of the protocol and the iterations; only
#: finished checks are kept), oldest first.
_REPORTS: dict = {}
_CACHED = 64
