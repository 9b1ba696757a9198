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

Properties checked, in every reachable state:

* **no overwrite**: the producer never issues into a slot whose previous
  content some consumer has not read yet;
* **no read before commit**: a consumer reads a slot only when it holds the
  landed data of the iteration the consumer is at;
* **no deadlock**: every state in which some agent has work left has an
  enabled transition;
* **producer tail complete**: when the producer exits, every issued tile
  was read by every consumer and no copy is in flight.

Consumer groups run the same program, so states equal up to a permutation
of the consumer groups are merged (symmetry reduction); the explored state
count is reported.  The ``RingProtocol`` fields other than ``depth``,
``consumers`` and ``tma`` describe what code generation emits; the seeded
bugs of the tests are one-field changes of them (a missing phase flip, a
wrong arrival count, a release before the last read, no producer tail; with
``release_lag`` 1: a release before the ``wait_group``, a wait leaving too
many groups pending, no final release, one slot).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ..errors import InputError

__all__ = ["ProtocolReport", "ProtocolViolation", "RingProtocol", "check_ring"]

# Local program counters.
_ACQUIRE, _ISSUE, _TAIL, _DONE = 0, 1, 2, 3          # producer
_WAIT, _READ, _RELEASE, _FINISHED = 0, 1, 2, 3       # consumer
_WAITGROUP, _FINAL_WAIT, _FINAL_RELEASE = 4, 5, 6     # consumer, release_lag 1 (_READ issues the async reads)
_EMPTY, _INFLIGHT, _READY, _PARTIAL = 0, 1, 2, 3      # slot contents (_PARTIAL: some lanes' copies landed)


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
        for name in ("full_count", "empty_count"):
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


@dataclass(frozen=True)
class ProtocolViolation:
    """``kind``: overwrite, read-before-commit, deadlock or producer-tail; ``trace``: the steps to it."""

    kind: str
    message: str
    trace: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


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


def _phase(i: int, depth: int, flips: bool) -> int:
    return (i // depth) % 2 if flips else 0


def _has_read(cons: tuple, j: int, proto: RingProtocol) -> bool:
    """Has a consumer at local state ``cons`` = (i, pc, pending) read iteration ``j``?"""
    i, pc, pending = cons
    if proto.release_lag:
        # asynchronous reads: the groups issued so far minus those still pending have completed, in order
        issued = proto.groups * (i + (pc in (_WAITGROUP, _RELEASE)))
        return issued - pending >= proto.groups * (j + 1)
    if i != j:
        return i > j
    # at iteration j it has read once past _READ, which only the read-then-release order has
    return proto.release_after_read and pc == _RELEASE


def check_ring(proto: RingProtocol, iterations: int | None = None, *, max_states: int = 2_000_000) -> ProtocolReport:
    """Explore every interleaving of ``proto`` for ``iterations`` loop trips (default depth + 2).

    Breadth-first, so the trace of a violation is a shortest one.  Raises
    InputError when the state space exceeds ``max_states`` (give fewer
    iterations).
    """
    D, C = proto.depth, proto.consumers
    N = proto.depth + 2 if iterations is None else int(iterations)
    if N < 1:
        raise InputError(f"iterations must be >= 1, got {iterations!r}")
    G, lag = proto.groups, proto.release_lag
    if lag:
        # consumer program: WAIT -> READ (issue) -> WAITGROUP/RELEASE (in this order when release_after_read)
        order = (_WAITGROUP, _RELEASE) if proto.release_after_read else (_RELEASE, _WAITGROUP)
        next_pc = {_WAIT: _READ, _READ: order[0], order[0]: order[1]}
    else:
        order = (_READ, _RELEASE) if proto.release_after_read else (_RELEASE, _READ)
        # consumer program: WAIT -> order[0] -> order[1] -> next iteration
        next_pc = {_WAIT: order[0], order[0]: order[1]}

    def advance(i):
        if i + 1 < N:
            return (i + 1, _WAIT)
        return (i + 1, _FINAL_WAIT if lag else _FINISHED)

    # state: (producer (i, pc), consumers (sorted tuple of (i, pc)), full, empty, slots)
    #   full/empty: tuple of (parity, pending, tx) per slot; slots: tuple of (iteration, status)
    bar_full = tuple((0, proto.full_init, 0) for _ in range(D))
    bar_empty = tuple((0, proto.empty_init, 0) for _ in range(D))
    start = ((0, _ACQUIRE if N else _TAIL), tuple((0, _WAIT, 0) for _ in range(C)), bar_full, bar_empty,
             tuple((-1, _EMPTY) for _ in range(D)))

    def settle(bar, s, init):
        parity, pending, tx = bar[s]
        if pending <= 0 and tx == 0:
            # arrivals beyond the pending count fall into the next phase (what the hardware does
            # with a wrong init count: that phase then completes early)
            bar = bar[:s] + ((parity ^ 1, init + pending, 0),) + bar[s + 1:]
        return bar

    def arrive(bar, s, init, tx=0, n=1):
        parity, pending, t = bar[s]
        bar = bar[:s] + ((parity, pending - n, t + tx),) + bar[s + 1:]
        return settle(bar, s, init)

    def complete_tx(bar, s, init, tx):
        parity, pending, t = bar[s]
        bar = bar[:s] + ((parity, pending, t - tx),) + bar[s + 1:]
        return settle(bar, s, init)

    def successors(state):
        """(label, next state) pairs, or a ProtocolViolation for a step that breaks a property."""
        (pi, ppc), cons, full, empty, slots = state
        out = []
        # producer
        if ppc == _ACQUIRE or ppc == _TAIL:
            s = pi % D
            ph = _phase(pi, D, proto.producer_flips_phase)
            if empty[s][0] != ph ^ 1:
                if ppc == _ACQUIRE:
                    out.append((f"producer acquires slot {s} for iteration {pi}", ((pi, _ISSUE), cons, full, empty,
                                                                                  slots)))
                else:
                    last = pi + 1 == N + D
                    nxt = (pi + 1, _DONE if last else _TAIL)
                    label = f"producer tail acquires slot {s}"
                    if last:
                        pending = [g for g in range(C) if not _has_read(cons[g], N - 1, proto)]
                        if pending or any(st in (_INFLIGHT, _PARTIAL) for _, st in slots):
                            out.append(ProtocolViolation(
                                "producer-tail", "the producer exits while tiles are unread or copies in flight",
                                (label,)))
                            return out
                    out.append((label, (nxt, cons, full, empty, slots)))
        elif ppc == _ISSUE:
            s = pi % D
            prev = slots[s][0]
            if prev >= 0:
                unread = [g for g in range(C) if not _has_read(cons[g], prev, proto)]
                if unread:
                    out.append(ProtocolViolation(
                        "overwrite", f"the producer writes iteration {pi} into slot {s} while a consumer group has "
                        f"not read iteration {prev} there", (f"producer issues iteration {pi} into slot {s}",)))
                    return out
            nfull = arrive(full, s, proto.full_init, tx=1) if proto.tma else full
            nslots = slots[:s] + ((pi, _INFLIGHT),) + slots[s + 1:]
            if pi + 1 < N:
                nxt = (pi + 1, _ACQUIRE)
            else:
                nxt = (pi + 1, _TAIL) if proto.producer_tail else (pi + 1, _DONE)
            if nxt[1] == _DONE:
                pending = [g for g in range(C) if not _has_read(cons[g], N - 1, proto)]
                if pending:
                    out.append(ProtocolViolation(
                        "producer-tail", "the producer exits (no tail) while tiles are unread or copies in flight",
                        (f"producer issues iteration {pi} and exits",)))
                    return out
            out.append((f"producer issues iteration {pi} into slot {s}", (nxt, cons, nfull, empty, nslots)))
        # copy engine
        for s, (it, st) in enumerate(slots):
            if st == _INFLIGHT and not proto.tma and proto.lanes > 1:
                # all lanes but one have landed: their arrivals are in, the tile is not complete
                nslots = slots[:s] + ((it, _PARTIAL),) + slots[s + 1:]
                nfull = arrive(full, s, proto.full_init, n=proto.lanes - 1)
                out.append((f"copies of iteration {it} land in slot {s} but for one lane's",
                            ((pi, ppc), cons, nfull, empty, nslots)))
            elif st == _PARTIAL:
                nslots = slots[:s] + ((it, _READY),) + slots[s + 1:]
                nfull = arrive(full, s, proto.full_init)
                out.append((f"the last lane's copy of iteration {it} lands in slot {s}",
                            ((pi, ppc), cons, nfull, empty, nslots)))
            elif st == _INFLIGHT:
                nslots = slots[:s] + ((it, _READY),) + slots[s + 1:]
                nfull = complete_tx(full, s, proto.full_init, 1) if proto.tma else arrive(full, s, proto.full_init,
                                                                                         n=proto.lanes)
                out.append((f"copy of iteration {it} lands in slot {s}", ((pi, ppc), cons, nfull, empty, nslots)))
        # consumers (identical programs: one representative per distinct local state)
        seen = set()
        for g, (ci, cpc, cpend) in enumerate(cons):
            if cons[g] in seen or cpc == _FINISHED:
                continue
            seen.add(cons[g])
            s = ci % D
            ph = _phase(ci, D, proto.consumer_flips_phase)
            ncons = list(cons)
            nfull, nempty = full, empty
            if cpc == _WAIT:
                if full[s][0] == ph:
                    continue
                ncons[g] = (ci, next_pc[_WAIT], cpend)
                label = f"consumer waits slot {s} (iteration {ci})"
            elif cpc == _READ:
                it, st = slots[s]
                if it != ci or st != _READY:
                    what = "nothing" if it < 0 else f"iteration {it}" + (" still in flight" if st in (_INFLIGHT, _PARTIAL) else "")
                    out.append(ProtocolViolation(
                        "read-before-commit", f"a consumer group reads slot {s} for iteration {ci} but it holds {what}",
                        (f"consumer reads slot {s} (iteration {ci})",)))
                    return out
                if lag:
                    label = f"consumer issues {G} wgmma group(s) reading slot {s} (iteration {ci})"
                    cpend += G
                else:
                    label = f"consumer reads slot {s} (iteration {ci})"
                ncons[g] = (ci, next_pc[_READ], cpend) if _READ in next_pc else (*advance(ci), cpend)
            elif cpc == _WAITGROUP:
                # the reads complete as late as the wait allows: the worst case for the slots they read
                label = f"consumer wgmma.wait_group {proto.wait_n} (iteration {ci})"
                cpend = min(cpend, proto.wait_n)
                ncons[g] = (ci, next_pc[_WAITGROUP], cpend) if _WAITGROUP in next_pc else (*advance(ci), cpend)
            elif cpc == _RELEASE:
                if lag and ci == 0:
                    label = "consumer releases nothing (iteration 0)"
                else:
                    rs = (ci - lag) % D
                    label = f"consumer releases slot {rs} (iteration {ci - lag})"
                    nempty = arrive(empty, rs, proto.empty_init)
                ncons[g] = (ci, next_pc[_RELEASE], cpend) if _RELEASE in next_pc else (*advance(ci), cpend)
            elif cpc == _FINAL_WAIT:
                label = "consumer wgmma.wait_group 0 after the loop"
                ncons[g] = (ci, _FINAL_RELEASE if proto.final_release else _FINISHED, 0)
            else:  # _FINAL_RELEASE
                rs = (N - 1) % D
                label = f"consumer releases slot {rs} (iteration {N - 1}) after the loop"
                nempty = arrive(empty, rs, proto.empty_init)
                ncons[g] = (ci, _FINISHED, cpend)
            out.append((label, ((pi, ppc), tuple(sorted(ncons)), nfull, nempty, slots)))
        return out

    start = (start[0], tuple(sorted(start[1])), *start[2:])
    parent: dict = {start: None}
    queue = deque([start])
    violations: list[ProtocolViolation] = []

    def trace(state, extra=()):
        steps = []
        while parent[state] is not None:
            state, label = parent[state]
            steps.append(label)
        return tuple(reversed(steps)) + tuple(extra)

    while queue and not violations:
        state = queue.popleft()
        succ = successors(state)
        finished = state[0][1] == _DONE and all(pc == _FINISHED for _, pc, _ in state[1])
        if not succ and not finished:
            (pi, ppc), cons = state[0], state[1]
            stuck = [f"producer at iteration {pi}" if ppc != _DONE else None] + \
                [f"a consumer group at iteration {ci}" for ci, pc, _ in cons if pc != _FINISHED]
            violations.append(ProtocolViolation("deadlock", "no agent can move: " + ", ".join(
                s for s in stuck if s), trace(state)))
            break
        for item in succ:
            if isinstance(item, ProtocolViolation):
                violations.append(ProtocolViolation(item.kind, item.message, trace(state, item.trace)))
                break
            label, nxt = item
            if nxt not in parent:
                parent[nxt] = (state, label)
                if len(parent) > max_states:
                    raise InputError(f"ring protocol check explored more than {max_states} states "
                                     f"(depth {D}, {C} consumer groups, {N} iterations): give fewer iterations")
                queue.append(nxt)
    return ProtocolReport(protocol=proto, iterations=N, states=len(parent), violations=tuple(violations))

