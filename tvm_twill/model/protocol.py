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
on it goes on (later arrivals belong to the next generation).  Rows added
to either table, turn, read and pass taking the read's place in the
program (``succ(g)``: the group after ``g`` in ``order``, cyclic):

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
  warp of ``order[-1]`` has read iteration ``i - 1``; none for ``i = 0``);
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

from collections import deque
from dataclasses import dataclass, field

from ..errors import InputError

__all__ = ["ProtocolReport", "ProtocolViolation", "RingProtocol", "check_ring"]

# Local program counters.
_ACQUIRE, _ISSUE, _TAIL, _DONE = 0, 1, 2, 3          # producer
_WAIT, _READ, _RELEASE, _FINISHED = 0, 1, 2, 3       # consumer
_WAITGROUP, _FINAL_WAIT, _FINAL_RELEASE = 4, 5, 6     # consumer, release_lag 1 (_READ issues the async reads)
_TURN, _SYNC, _PASS, _PROLOGUE = 7, 8, 9, 10          # consumer warp with order (_SYNC: blocked in bar.sync)
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

    ``order`` (None: unordered): the token order of ``G = len(order)`` consumer
    groups of ``consumers / G`` warps each (``consumers`` then counts warps),
    whose sections take turns through named barriers (module docstring);
    ``bar_count``: the arrivals completing a named barrier's generation
    (None: ``2 * consumers / G``, the correct value).  ``prologue_arrive``:
    the last group's warps arrive once on the first group's barrier before
    the loop.  ``pass_after_read``: a warp passes the turn after its section
    (False: before it).  ``skip_last_pass``: the last group does not pass in
    the last iteration.
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
class ProtocolViolation:
    """``kind``: overwrite, read-before-commit, deadlock, producer-tail, order, barrier-leftover; ``trace``: steps."""

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
    order = proto.order or (0,)
    ordered, NG = proto.order is not None, len(order)
    K = C // NG                                        # warps per ordered group: warp w is in group w // K
    pos = {g: p for p, g in enumerate(order)}
    last, first = order[-1], order[0]

    def program(g, i):
        """The consumer pcs of iteration ``i`` of a warp of group ``g``."""
        if lag:   # WAIT -> READ (issue) -> WAITGROUP/RELEASE (in this order when release_after_read)
            body = [_READ, _WAITGROUP, _RELEASE] if proto.release_after_read else [_READ, _RELEASE, _WAITGROUP]
        else:
            body = [_READ, _RELEASE] if proto.release_after_read else [_RELEASE, _READ]
        if ordered:   # the read becomes TURN -> READ -> PASS (or TURN -> PASS -> READ)
            r = body.index(_READ)
            if proto.skip_last_pass and g == last and i == N - 1:
                body[r:r + 1] = [_TURN, _READ]
            else:
                body[r:r + 1] = [_TURN, _READ, _PASS] if proto.pass_after_read else [_TURN, _PASS, _READ]
        return [_WAIT, *body]

    # per (group, iteration): the pc after each pc (None: the next iteration), the pcs past the read and the
    # pcs in the ordered section (read, not passed; with no pass after the read, until the next step)
    NEXT, PAST, SECT = {}, {}, {}
    for g in range(NG):
        for i in range(N):
            p = program(g, i)
            r = p.index(_READ)
            NEXT[g, i] = dict(zip(p, p[1:] + [None]))
            PAST[g, i] = frozenset(p[r + 1:])
            SECT[g, i] = frozenset(p[r + 1:p.index(_PASS) + 1] if _PASS in p[r:] else p[r + 1:r + 2])

    def past_read(w, c, j):
        """Has warp ``w`` at local state ``c`` = (i, pc, pending) done its read (issue) of iteration ``j``?"""
        i, pc, _ = c
        return i > j or (i == j and pc in PAST[w // K, i])

    def has_read(w, c, j):
        """Has warp ``w`` at local state ``c`` finished reading iteration ``j``?"""
        i, pc, pending = c
        if lag:
            # asynchronous reads: the groups issued so far minus those still pending have completed, in order
            issued = G * (i + (i < N and pc in PAST[w // K, i]))
            return issued - pending >= G * (j + 1)
        return past_read(w, c, j)

    def step(w, c):
        """Warp ``w``'s local state after the step at ``c``."""
        i, pc, pending = c
        nxt = NEXT[w // K, i][pc]
        if nxt is not None:
            return (i, nxt, pending)
        if i + 1 < N:
            return (i + 1, _WAIT, pending)
        return (i + 1, _FINAL_WAIT if lag else _FINISHED, pending)

    def canon(cons, moved=range(NG)):
        """Symmetry: the warps of a group (all, without ``order``) are interchangeable; sort the groups ``moved``."""
        if NG == 1:
            return tuple(sorted(cons))
        for g in moved if K > 1 else ():
            cons[g * K:(g + 1) * K] = sorted(cons[g * K:(g + 1) * K])
        return tuple(cons)

    def bar_arrive(bars, ncons, g):
        """One warp arrives on ``b_g``; completing the generation lets its warps blocked in bar.sync go on."""
        n = bars[g] + 1
        if n >= proto.bar_init:
            n = 0
            for w in range(g * K, (g + 1) * K):
                if ncons[w][1] == _SYNC:
                    ncons[w] = step(w, (ncons[w][0], _TURN, ncons[w][2]))
        return bars[:g] + (n,) + bars[g + 1:], " (completes it)" if n == 0 else ""

    def out_of_order(cons, w, i):
        g = w // K
        for v, (vi, vpc, _) in enumerate(cons):
            if v // K != g and vi < N and vpc in SECT[v // K, vi]:
                return (f"a consumer warp of group {g} starts its section of iteration {i} while a warp of group "
                        f"{v // K} is in its section of iteration {vi}")
        h, j = order[pos[g] - 1], i - (g == first)
        if j >= 0 and not all(past_read(v, cons[v], j) for v in range(h * K, (h + 1) * K)):
            return (f"a consumer warp of group {g} starts its section of iteration {i} before every warp of group "
                    f"{h} has done its section of iteration {j}")
        return None

    # state: (producer (i, pc), consumers (canonical tuple of (i, pc, pending)), full, empty, slots, named barriers)
    #   full/empty: tuple of (parity, pending, tx) per slot; slots: tuple of (iteration, status);
    #   named barriers: the arrivals of the current generation per group (() without order)
    bar_full = tuple((0, proto.full_init, 0) for _ in range(D))
    bar_empty = tuple((0, proto.empty_init, 0) for _ in range(D))
    cons0 = [(0, _PROLOGUE if ordered and proto.prologue_arrive and w // K == last else _WAIT, 0) for w in range(C)]
    start = ((0, _ACQUIRE), canon(cons0), bar_full, bar_empty, tuple((-1, _EMPTY) for _ in range(D)),
             (0,) * NG if ordered else ())

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
        (pi, ppc), cons, full, empty, slots, bars = state
        out = []
        # producer
        if ppc == _ACQUIRE or ppc == _TAIL:
            s = pi % D
            ph = _phase(pi, D, proto.producer_flips_phase)
            if empty[s][0] != ph ^ 1:
                if ppc == _ACQUIRE:
                    out.append((f"producer acquires slot {s} for iteration {pi}", ((pi, _ISSUE), cons, full, empty,
                                                                                  slots, bars)))
                else:
                    end = pi + 1 == N + D
                    nxt = (pi + 1, _DONE if end else _TAIL)
                    label = f"producer tail acquires slot {s}"
                    if end:
                        pending = [w for w in range(C) if not has_read(w, cons[w], N - 1)]
                        if pending or any(st in (_INFLIGHT, _PARTIAL) for _, st in slots):
                            out.append(ProtocolViolation(
                                "producer-tail", "the producer exits while tiles are unread or copies in flight",
                                (label,)))
                            return out
                    out.append((label, (nxt, cons, full, empty, slots, bars)))
        elif ppc == _ISSUE:
            s = pi % D
            prev = slots[s][0]
            if prev >= 0:
                unread = [w for w in range(C) if not has_read(w, cons[w], prev)]
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
                pending = [w for w in range(C) if not has_read(w, cons[w], N - 1)]
                if pending:
                    out.append(ProtocolViolation(
                        "producer-tail", "the producer exits (no tail) while tiles are unread or copies in flight",
                        (f"producer issues iteration {pi} and exits",)))
                    return out
            out.append((f"producer issues iteration {pi} into slot {s}", (nxt, cons, nfull, empty, nslots, bars)))
        # copy engine
        for s, (it, st) in enumerate(slots):
            if st == _INFLIGHT and not proto.tma and proto.lanes > 1:
                # all lanes but one have landed: their arrivals are in, the tile is not complete
                nslots = slots[:s] + ((it, _PARTIAL),) + slots[s + 1:]
                nfull = arrive(full, s, proto.full_init, n=proto.lanes - 1)
                out.append((f"copies of iteration {it} land in slot {s} but for one lane's",
                            ((pi, ppc), cons, nfull, empty, nslots, bars)))
            elif st == _PARTIAL:
                nslots = slots[:s] + ((it, _READY),) + slots[s + 1:]
                nfull = arrive(full, s, proto.full_init)
                out.append((f"the last lane's copy of iteration {it} lands in slot {s}",
                            ((pi, ppc), cons, nfull, empty, nslots, bars)))
            elif st == _INFLIGHT:
                nslots = slots[:s] + ((it, _READY),) + slots[s + 1:]
                nfull = complete_tx(full, s, proto.full_init, 1) if proto.tma else arrive(full, s, proto.full_init,
                                                                                         n=proto.lanes)
                out.append((f"copy of iteration {it} lands in slot {s}",
                            ((pi, ppc), cons, nfull, empty, nslots, bars)))
        # consumers (identical programs within a group: one representative per distinct local state)
        seen = set()
        for w, c in enumerate(cons):
            ci, cpc, cpend = c
            g = w // K
            if (g, c) in seen or cpc in (_FINISHED, _SYNC):
                continue
            seen.add((g, c))
            who = f"consumer warp of group {g}" if ordered else "consumer"
            s = ci % D
            ncons = list(cons)
            nfull, nempty, nbars, moved = full, empty, bars, (g,)
            if cpc == _WAIT:
                if full[s][0] == _phase(ci, D, proto.consumer_flips_phase):
                    continue
                ncons[w] = step(w, c)
                label = f"{who} waits slot {s} (iteration {ci})"
            elif cpc == _READ:
                it, st = slots[s]
                if it != ci or st != _READY:
                    what = "nothing" if it < 0 else f"iteration {it}" + (" still in flight" if st in (_INFLIGHT, _PARTIAL) else "")
                    out.append(ProtocolViolation(
                        "read-before-commit", f"a consumer group reads slot {s} for iteration {ci} but it holds {what}",
                        (f"{who} reads slot {s} (iteration {ci})",)))
                    return out
                if lag:
                    label = f"{who} issues {G} wgmma group(s) reading slot {s} (iteration {ci})"
                    cpend += G
                else:
                    label = f"{who} reads slot {s} (iteration {ci})"
                bad = ordered and out_of_order(cons, w, ci)
                if bad:
                    out.append(ProtocolViolation("order", bad, (label,)))
                    return out
                ncons[w] = step(w, (ci, cpc, cpend))
            elif cpc == _WAITGROUP:
                # the reads complete as late as the wait allows: the worst case for the slots they read
                label = f"{who} wgmma.wait_group {proto.wait_n} (iteration {ci})"
                ncons[w] = step(w, (ci, cpc, min(cpend, proto.wait_n)))
            elif cpc == _RELEASE:
                if lag and ci == 0:
                    label = f"{who} releases nothing (iteration 0)"
                else:
                    rs = (ci - lag) % D
                    label = f"{who} releases slot {rs} (iteration {ci - lag})"
                    nempty = arrive(empty, rs, proto.empty_init)
                ncons[w] = step(w, c)
            elif cpc == _FINAL_WAIT:
                label = f"{who} wgmma.wait_group 0 after the loop"
                ncons[w] = (ci, _FINAL_RELEASE if proto.final_release else _FINISHED, 0)
            elif cpc == _FINAL_RELEASE:
                rs = (N - 1) % D
                label = f"{who} releases slot {rs} (iteration {N - 1}) after the loop"
                nempty = arrive(empty, rs, proto.empty_init)
                ncons[w] = (ci, _FINISHED, cpend)
            elif cpc == _PROLOGUE:
                ncons[w] = (ci, _WAIT, cpend)
                nbars, done = bar_arrive(bars, ncons, first)
                moved = (g, first)
                label = f"{who} bar.arrive b{first} before the loop{done}"
            elif cpc == _TURN:
                ncons[w] = (ci, _SYNC, cpend)
                nbars, done = bar_arrive(bars, ncons, g)
                label = f"{who} bar.sync b{g} (iteration {ci}){done}"
            else:  # _PASS
                h = order[(pos[g] + 1) % NG]
                ncons[w] = step(w, c)
                nbars, done = bar_arrive(bars, ncons, h)
                moved = (g, h)
                label = f"{who} bar.arrive b{h} (iteration {ci}){done}"
            out.append((label, ((pi, ppc), canon(ncons, moved), nfull, nempty, slots, nbars)))
        return out

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
        if finished and any(state[5]):
            left = ", ".join(f"b{g} holds {n}" for g, n in enumerate(state[5]) if n)
            violations.append(ProtocolViolation(
                "barrier-leftover", f"every agent has finished but a named barrier has a partial generation: "
                f"{left} of {proto.bar_init} arrival(s)", trace(state)))
            break
        if not succ and not finished:
            (pi, ppc), cons = state[0], state[1]
            stuck = [f"producer at iteration {pi}"] if ppc != _DONE else []
            if not ordered:
                stuck += [f"a consumer group at iteration {ci}" for ci, pc, _ in cons if pc != _FINISHED]
            else:   # warps of one group at one place: counted
                where = [(w // K, " at bar.sync" if pc == _SYNC else "", ci) for w, (ci, pc, _) in enumerate(cons)
                         if pc != _FINISHED]
                stuck += [f"{'a consumer warp' if n == 1 else f'{n} consumer warps'} of group {g}{at} (iteration {ci})"
                          for (g, at, ci), n in sorted({x: where.count(x) for x in where}.items())]
            violations.append(ProtocolViolation("deadlock", "no agent can move: " + ", ".join(stuck), trace(state)))
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
