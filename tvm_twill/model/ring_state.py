"""The state machine behind ``model.protocol.check_ring``: the ring's state, one function per transition, the explorer.

``RingState`` is one global state of a ring (the producer's program counter,
every consumer's local state, both mbarriers of every slot, what every slot
holds, the named barriers' arrivals); ``Ring`` is what does not change while
exploring (the protocol, the iteration count and every consumer's program).
Each transition function takes a ``Ring`` and a ``RingState`` and yields the
labelled successor states of one kind of event (the tables of
``model.protocol``'s docstring, row by row), or a ``ProtocolViolation`` when
the event breaks a property; ``successors`` collects them in a fixed order
(producer, copy engine, consumers by position) and ``explore`` searches the
states breadth first, so a violation's trace is a shortest one.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, replace
from typing import NamedTuple

from ..errors import InputError

# ``RingProtocol`` in the annotations below is ``model.protocol.RingProtocol``; it is not imported, not even for
# type checking, since ``protocol`` imports this module (the package has no import circle, file to file).

__all__ = ["CheckIncomplete", "Mbarrier", "ProtocolViolation", "Ring", "RingState", "Slot", "Warp", "explore",
           "successors"]

# Program counters.
ACQUIRE, ISSUE, TAIL, DONE = 0, 1, 2, 3             # producer
WAIT, READ, RELEASE, FINISHED = 0, 1, 2, 3          # consumer
WAITGROUP, FINAL_WAIT, FINAL_RELEASE = 4, 5, 6      # consumer, release_lag 1 (READ issues the async reads)
TURN, SYNC, PASS, PROLOGUE = 7, 8, 9, 10            # consumer warp with order (SYNC: blocked in bar.sync)
#: With several ordered sections per iteration, section ``k``'s TURN / SYNC / READ / PASS are the pcs above plus
#: ``SECTION_PC * k`` (section 0 keeps them); ``kind(pc)`` is the row a pc belongs to.
SECTION_PC = 16


def kind(pc: int) -> int:
    """The transition row of a consumer pc (TURN, SYNC, READ or PASS of any section, or the pc itself)."""
    return pc % SECTION_PC


def section_of(pc: int) -> int:
    return pc // SECTION_PC
# Slot contents (PARTIAL: some lanes' copies landed).
EMPTY, INFLIGHT, READY, PARTIAL = 0, 1, 2, 3


@dataclass(frozen=True)
class ProtocolViolation:
    """``kind``: overwrite, read-before-commit, deadlock, producer-tail, order, barrier-leftover; ``trace``: steps."""

    kind: str
    message: str
    trace: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


class Mbarrier(NamedTuple):
    """One mbarrier: the parity of its current phase, the arrivals and the transaction count still pending."""

    parity: int
    pending: int
    tx: int


class Slot(NamedTuple):
    """What one ring slot holds: the iteration written into it (-1: none yet) and its status (EMPTY ... PARTIAL)."""

    iteration: int
    status: int


class Warp(NamedTuple):
    """One consumer's local state (a consumer group; with ``order``, one warp): iteration, pc, wgmma groups pending."""

    i: int
    pc: int
    pending: int


@dataclass(frozen=True, slots=True)
class RingState:
    """One global state of the ring.

    ``consumers`` in canonical order (symmetry reduction); ``full`` / ``empty``: each slot's two mbarriers;
    ``named``: the arrivals of the current generation of each ordered group's named barrier (() unordered).
    """

    producer_i: int
    producer_pc: int
    consumers: tuple[Warp, ...]
    full: tuple[Mbarrier, ...]
    empty: tuple[Mbarrier, ...]
    slots: tuple[Slot, ...]
    named: tuple[int, ...]

    def producer_at(self, i: int, pc: int) -> RingState:
        """This state with the producer at iteration ``i``, pc ``pc``."""
        return RingState(i, pc, self.consumers, self.full, self.empty, self.slots, self.named)


def _phase(i: int, depth: int, flips: bool) -> int:
    return (i // depth) % 2 if flips else 0


def _put(t: tuple, i: int, v) -> tuple:
    return t[:i] + (v,) + t[i + 1:]


def _settle(b: Mbarrier, init: int) -> Mbarrier:
    """Complete the phase when no arrival and no transaction is pending; arrivals beyond the pending count fall
    into the next phase (what the hardware does with a wrong init count: that phase then completes early)."""
    if b.pending <= 0 and b.tx == 0:
        return Mbarrier(b.parity ^ 1, init + b.pending, 0)
    return b


def arrive(bars: tuple, s: int, init: int, tx: int = 0, n: int = 1) -> tuple:
    """``n`` arrivals on barrier ``s`` (with ``tx`` expected transaction bytes, ``arrive.expect_tx``)."""
    b = bars[s]
    return _put(bars, s, _settle(Mbarrier(b.parity, b.pending - n, b.tx + tx), init))


def complete_tx(bars: tuple, s: int, init: int, tx: int) -> tuple:
    """The copy engine's ``complete_tx(tx)`` on barrier ``s``."""
    b = bars[s]
    return _put(bars, s, _settle(Mbarrier(b.parity, b.pending, b.tx - tx), init))


@dataclass(frozen=True, eq=False, slots=True)
class Ring:
    """What stays fixed while exploring: the protocol, ``n`` iterations and the consumers' programs.

    ``next_pc[g, i]``: a warp of group ``g`` in iteration ``i``, pc -> the next pc (None: the next iteration);
    ``past[g, i]``: the pcs past its read (issue; with several sections, past the last section's read);
    ``done[g, i, s]``: the pcs past the read of ordered section ``s``; ``section[g, i]``: pc -> the ordered
    section it is in (read, not passed; with no pass after the read, until the next step).  Warp ``w`` is in
    group ``w // k``.
    """

    proto: RingProtocol
    n: int
    k: int
    order: tuple[int, ...]
    next_pc: dict
    past: dict
    done: dict
    section: dict

    @classmethod
    def build(cls, proto: RingProtocol, n: int) -> Ring:
        order = proto.order or (0,)
        k = proto.consumers // len(order)
        next_pc, past, done, section = {}, {}, {}, {}
        for g in order:
            for i in range(n):
                p = _program(proto, order, n, g, i)
                next_pc[g, i] = dict(zip(p, p[1:] + [None]))
                inside: dict = {}
                for sec in range(proto.sections):
                    read, pas = READ + SECTION_PC * sec, PASS + SECTION_PC * sec
                    r = p.index(read)
                    done[g, i, sec] = _with_syncs(p[r + 1:])
                    if proto.wrap and sec == proto.sections - 1 and pas not in p[r:]:
                        inside.update(dict.fromkeys(p[r + 1:], sec))        # the turn goes on into iteration i + 1
                    else:
                        inside.update(dict.fromkeys(p[r + 1:p.index(pas) + 1] if pas in p[r:] else p[r + 1:r + 2],
                                                    sec))
                    if proto.wrap and sec == 0 and i > 0 and pas in p:        # ... to its first section's pass
                        inside.update(dict.fromkeys(p[:p.index(pas) + 1], sec))
                past[g, i] = done[g, i, proto.sections - 1]
                section[g, i] = inside
            p = _epilogue(proto, order, g)
            next_pc[g, n] = dict(zip(p, p[1:] + [None]))
            if proto.epilogue_turn:   # the turn after the loop: its read is the final wait
                r = p.index(FINAL_WAIT)
                done[g, n, 0] = _with_syncs([*p[r + 1:], FINISHED])
                section[g, n] = dict.fromkeys(p[r + 1:p.index(PASS) + 1] if PASS in p[r:] else p[r + 1:r + 2], 0)
        return cls(proto, n, k, order, next_pc, past, done, section)

    @property
    def ordered(self) -> bool:
        return self.proto.order is not None

    def start(self) -> RingState:
        p, d, last = self.proto, self.proto.depth, self.order[-1]
        prologue = self.ordered and p.prologue_arrive
        cons = [Warp(0, PROLOGUE if prologue and w // self.k == last else WAIT, 0) for w in range(p.consumers)]
        return RingState(0, ACQUIRE, self.canon(cons), (Mbarrier(0, p.full_init, 0),) * d,
                         (Mbarrier(0, p.empty_init, 0),) * d, (Slot(-1, EMPTY),) * d,
                         (0,) * len(self.order) if self.ordered else ())

    def who(self, g: int) -> str:
        return f"consumer warp of group {g}" if self.ordered else "consumer"

    def past_read(self, w: int, c: Warp, j: int) -> bool:
        """Has warp ``w`` at local state ``c`` done its read (issue) of iteration ``j``?"""
        return c.i > j or (c.i == j and c.pc in self.past[w // self.k, c.i])

    def has_read(self, w: int, c: Warp, j: int) -> bool:
        """Has warp ``w`` at local state ``c`` finished reading iteration ``j``?"""
        if self.proto.release_lag:
            # asynchronous reads: the groups issued so far minus those still pending have completed, in order
            issued = self.proto.groups * (c.i + (c.i < self.n and c.pc in self.past[w // self.k, c.i]))
            return issued - c.pending >= self.proto.groups * (j + 1)
        return self.past_read(w, c, j)

    def unread(self, cons: tuple, j: int) -> list[int]:
        """The consumers that have not finished reading iteration ``j``."""
        return [w for w in range(len(cons)) if not self.has_read(w, cons[w], j)]

    def step(self, w: int, c: Warp) -> Warp:
        """Warp ``w``'s local state after the step at ``c``."""
        nxt = self.next_pc[w // self.k, c.i][c.pc]
        if nxt is not None:
            return Warp(c.i, nxt, c.pending)
        if c.i + 1 < self.n:
            return Warp(c.i + 1, WAIT, c.pending)
        if c.i < self.n and self.proto.release_lag:   # after the loop: the final wait (and turn), release
            return Warp(self.n, _epilogue(self.proto, self.order, w // self.k)[0], c.pending)
        return Warp(self.n, FINISHED, c.pending)

    def canon(self, cons: list, moved=None) -> tuple:
        """Symmetry: the warps of a group (all, without ``order``) are interchangeable; sort the groups ``moved``."""
        if len(self.order) == 1:
            return tuple(sorted(cons))
        k = self.k
        for g in (range(len(self.order)) if moved is None else moved) if k > 1 else ():
            cons[g * k:(g + 1) * k] = sorted(cons[g * k:(g + 1) * k])
        return tuple(cons)

    def bar_arrive(self, bars: tuple, ncons: list, g: int) -> tuple[tuple, str]:
        """One warp arrives on ``b_g``; completing the generation lets its warps blocked in bar.sync go on."""
        n = bars[g] + 1
        if n >= self.proto.bar_init:
            n = 0
            for w in range(g * self.k, (g + 1) * self.k):
                pc = ncons[w].pc
                if kind(pc) == SYNC:
                    ncons[w] = self.step(w, Warp(ncons[w].i, pc - SYNC + TURN, ncons[w].pending))
        return _put(bars, g, n), " (completes it)" if n == 0 else ""

    def _before(self, g: int, i: int, sec: int) -> tuple[int, int, int]:
        """The (group, iteration, section) whose turn comes right before group ``g``'s section ``sec`` of
        iteration ``i``: the previous group's same section, or the last group's previous section."""
        order, last = self.order, self.proto.sections - 1
        if self.proto.wrap:   # turn t = i * last + sec; turn j * last covers (j - 1, last) and (j, 0)
            t = i * last + sec
            h, t = (order[order.index(g) - 1], t) if g != order[0] else (order[-1], t - 1)
            j, hs = divmod(t, last)
            return (h, self.n - 1, last) if j >= self.n else (h, j, hs)
        if g != order[0]:
            return order[order.index(g) - 1], i, sec
        return (order[-1], i, sec - 1) if sec else (order[-1], i - 1, last)

    def out_of_order(self, cons: tuple, w: int, i: int, sec: int = 0) -> str | None:
        """Why warp ``w`` may not start its ordered section ``sec`` of iteration ``i`` now (None: it may)."""
        k = self.k
        g = w // k
        what = f"section {sec} of iteration {i}" if self.proto.sections > 1 else f"section of iteration {i}"
        for v, c in enumerate(cons):
            if v // k != g and c.pc in self.section.get((v // k, c.i), ()):
                return (f"a consumer warp of group {g} starts its {what} while a warp of group {v // k} is in its "
                        f"section of iteration {c.i}")
        h, j, hs = self._before(g, i, sec)
        if j >= 0 and not all(cons[v].i > j or (cons[v].i == j and cons[v].pc in self.done[h, j, hs])
                              for v in range(h * k, (h + 1) * k)):
            prev = f"section {hs} of iteration {j}" if self.proto.sections > 1 else f"section of iteration {j}"
            return f"a consumer warp of group {g} starts its {what} before every warp of group {h} has done its {prev}"
        return None


def _with_syncs(pcs) -> frozenset:
    """``pcs`` and the SYNC pc of each TURN among them (a warp blocked in that turn's bar.sync)."""
    return frozenset([*pcs, *(pc - TURN + SYNC for pc in pcs if kind(pc) == TURN)])


def _program(proto: RingProtocol, order: tuple, n: int, g: int, i: int) -> list[int]:
    """The consumer pcs of iteration ``i`` of a warp of group ``g``."""
    if proto.release_lag:   # WAIT -> READ (issue) -> WAITGROUP/RELEASE (in this order when release_after_read)
        body = [READ, WAITGROUP, RELEASE] if proto.release_after_read else [READ, RELEASE, WAITGROUP]
    else:
        body = [READ, RELEASE] if proto.release_after_read else [RELEASE, READ]
    if proto.order is not None:   # the read becomes TURN -> READ -> PASS (or TURN -> PASS -> READ), per section
        r = body.index(READ)
        turns = []
        last = proto.sections - 1
        for sec in range(proto.sections):
            t, rd, ps = (x + SECTION_PC * sec for x in (TURN, READ, PASS))
            head = [] if proto.wrap and sec == 0 and i > 0 else [t]     # wrap: the turn began in iteration i - 1
            if (proto.skip_last_pass and not proto.epilogue_turn and g == order[-1] and i == n - 1 and sec == last) or \
                    (proto.wrap and sec == last and i < n - 1):          # wrap: the turn goes on into i + 1
                turns += [*head, rd]
            else:
                turns += [*head, rd, ps] if proto.pass_after_read else [*head, ps, rd]
        body[r:r + 1] = turns
    return [WAIT, *body]


def _epilogue(proto: RingProtocol, order: tuple, g: int) -> list[int]:
    """The consumer pcs after the loop of a warp of group ``g`` (``release_lag`` 1; none otherwise): the final
    wait and release, with ``epilogue_turn`` inside one more turn (the last group's pass skipped with
    ``skip_last_pass``)."""
    if not proto.release_lag:
        return [FINISHED]
    tail = [FINAL_WAIT, FINAL_RELEASE] if proto.final_release else [FINAL_WAIT]
    if not proto.epilogue_turn:
        return tail
    body = [FINAL_WAIT] if proto.skip_last_pass and g == order[-1] else \
        [FINAL_WAIT, PASS] if proto.pass_after_read else [PASS, FINAL_WAIT]
    return [TURN, *body, *tail[1:]]


# ---- producer and copy engine ----------------------------------------------------------------------------------

def producer_acquire(ring: Ring, st: RingState) -> list:
    """Acquire (or, in the tail, acquire once more) the slot of the producer's iteration once it is empty."""
    p, pi = ring.proto, st.producer_i
    s = pi % p.depth
    if st.empty[s].parity == _phase(pi, p.depth, p.producer_flips_phase) ^ 1:
        return []
    if st.producer_pc == ACQUIRE:
        return [(f"producer acquires slot {s} for iteration {pi}", st.producer_at(pi, ISSUE))]
    end = pi + 1 == ring.n + p.depth
    label = f"producer tail acquires slot {s}"
    if end and (ring.unread(st.consumers, ring.n - 1) or any(x.status in (INFLIGHT, PARTIAL) for x in st.slots)):
        return [ProtocolViolation("producer-tail", "the producer exits while tiles are unread or copies in flight",
                                  (label,))]
    return [(label, st.producer_at(pi + 1, DONE if end else TAIL))]


def producer_issue(ring: Ring, st: RingState) -> list:
    """Issue the copy of the producer's iteration into its slot (TMA: ``arrive.expect_tx`` on the full barrier)."""
    p, pi = ring.proto, st.producer_i
    s = pi % p.depth
    prev = st.slots[s].iteration
    label = f"producer issues iteration {pi} into slot {s}"
    if prev >= 0 and ring.unread(st.consumers, prev):
        return [ProtocolViolation("overwrite", f"the producer writes iteration {pi} into slot {s} while a consumer "
                                  f"group has not read iteration {prev} there", (label,))]
    full = arrive(st.full, s, p.full_init, tx=1) if p.tma else st.full
    pc = ACQUIRE if pi + 1 < ring.n else TAIL if p.producer_tail else DONE
    if pc == DONE and ring.unread(st.consumers, ring.n - 1):
        return [ProtocolViolation("producer-tail", "the producer exits (no tail) while tiles are unread or copies "
                                  "in flight", (f"producer issues iteration {pi} and exits",))]
    return [(label, RingState(pi + 1, pc, st.consumers, full, st.empty, _put(st.slots, s, Slot(pi, INFLIGHT)),
                            st.named))]


def copies_land(ring: Ring, st: RingState) -> list:
    """Each slot's copy in flight lands (cp.async with several lanes: all lanes but one first, then the last)."""
    p, out = ring.proto, []
    for s, (it, status) in enumerate(st.slots):
        if status == INFLIGHT and not p.tma and p.lanes > 1:
            # all lanes but one have landed: their arrivals are in, the tile is not complete
            label, new, full = (f"copies of iteration {it} land in slot {s} but for one lane's", PARTIAL,
                                arrive(st.full, s, p.full_init, n=p.lanes - 1))
        elif status == PARTIAL:
            label, new, full = (f"the last lane's copy of iteration {it} lands in slot {s}", READY,
                                arrive(st.full, s, p.full_init))
        elif status == INFLIGHT:
            full = complete_tx(st.full, s, p.full_init, 1) if p.tma else arrive(st.full, s, p.full_init, n=p.lanes)
            label, new = f"copy of iteration {it} lands in slot {s}", READY
        else:
            continue
        out.append((label, RingState(st.producer_i, st.producer_pc, st.consumers, full, st.empty,
                             _put(st.slots, s, Slot(it, new)), st.named)))
    return out


# ---- consumers: each returns (label, empty, named barriers, groups to re-sort), None (disabled) or a violation,
# ---- and writes the warp's next local state (and those a completed named barrier releases) into ``cons``

def consumer_wait(ring, st, w, c, cons):
    s = c.i % ring.proto.depth
    if st.full[s].parity == _phase(c.i, ring.proto.depth, ring.proto.consumer_flips_phase):
        return None
    cons[w] = ring.step(w, c)
    return f"{ring.who(w // ring.k)} waits slot {s} (iteration {c.i})", st.empty, st.named, (w // ring.k,)


def consumer_read(ring, st, w, c, cons):
    """The read (with ``release_lag`` 1: the issue of the wgmma groups reading the slot), checked."""
    s, who, groups = c.i % ring.proto.depth, ring.who(w // ring.k), ring.proto.groups
    it, status = st.slots[s]
    if it != c.i or status != READY:
        what = "nothing" if it < 0 else f"iteration {it}" + (" still in flight" if status in (INFLIGHT, PARTIAL)
                                                             else "")
        return ProtocolViolation("read-before-commit", f"a consumer group reads slot {s} for iteration {c.i} but it "
                                 f"holds {what}", (f"{who} reads slot {s} (iteration {c.i})",))
    pending = c.pending
    if ring.proto.release_lag:
        label = f"{who} issues {groups} wgmma group(s) reading slot {s} (iteration {c.i})"
        pending += groups
    else:
        label = f"{who} reads slot {s} (iteration {c.i})"
    bad = ring.ordered and ring.out_of_order(st.consumers, w, c.i, section_of(c.pc))
    if bad:
        return ProtocolViolation("order", bad, (label,))
    cons[w] = ring.step(w, Warp(c.i, c.pc, pending))
    return label, st.empty, st.named, (w // ring.k,)


def consumer_wait_group(ring, st, w, c, cons):
    # the reads complete as late as the wait allows: the worst case for the slots they read
    cons[w] = ring.step(w, Warp(c.i, c.pc, min(c.pending, ring.proto.wait_n)))
    return (f"{ring.who(w // ring.k)} wgmma.wait_group {ring.proto.wait_n} (iteration {c.i})", st.empty, st.named,
            (w // ring.k,))


def consumer_release(ring, st, w, c, cons):
    """Arrive on the empty barrier of the slot read in this iteration (``release_lag`` 1: the previous one)."""
    lag, who, empty = ring.proto.release_lag, ring.who(w // ring.k), st.empty
    if lag and c.i == 0:
        label = f"{who} releases nothing (iteration 0)"
    else:
        rs = (c.i - lag) % ring.proto.depth
        label = f"{who} releases slot {rs} (iteration {c.i - lag})"
        empty = arrive(empty, rs, ring.proto.empty_init)
    cons[w] = ring.step(w, c)
    return label, empty, st.named, (w // ring.k,)


def consumer_final_wait(ring, st, w, c, cons):
    """``wait_group 0`` after the loop (with ``epilogue_turn``: the issue and wait of the turn after the loop)."""
    label = f"{ring.who(w // ring.k)} wgmma.wait_group 0 after the loop"
    bad = ring.proto.epilogue_turn and ring.out_of_order(st.consumers, w, c.i)
    if bad:
        return ProtocolViolation("order", bad, (label,))
    cons[w] = ring.step(w, Warp(c.i, c.pc, 0))
    return label, st.empty, st.named, (w // ring.k,)


def consumer_final_release(ring, st, w, c, cons):
    rs = (ring.n - 1) % ring.proto.depth
    cons[w] = ring.step(w, c)
    return (f"{ring.who(w // ring.k)} releases slot {rs} (iteration {ring.n - 1}) after the loop",
            arrive(st.empty, rs, ring.proto.empty_init), st.named, (w // ring.k,))


def consumer_prologue(ring, st, w, c, cons):
    """The last group's ``bar.arrive`` on the first group's barrier before the loop."""
    g, first = w // ring.k, ring.order[0]
    cons[w] = Warp(c.i, WAIT, c.pending)
    named, done = ring.bar_arrive(st.named, cons, first)
    return f"{ring.who(g)} bar.arrive b{first} before the loop{done}", st.empty, named, (g, first)


def consumer_turn(ring, st, w, c, cons):
    """``bar.sync b_g``: arrive on the group's barrier, then block until that generation completes."""
    g = w // ring.k
    cons[w] = Warp(c.i, c.pc - TURN + SYNC, c.pending)
    named, done = ring.bar_arrive(st.named, cons, g)
    return f"{ring.who(g)} bar.sync b{g} (iteration {c.i}){done}", st.empty, named, (g,)


def consumer_pass(ring, st, w, c, cons):
    """``bar.arrive`` on the next group's barrier: pass the turn."""
    g = w // ring.k
    h = ring.order[(ring.order.index(g) + 1) % len(ring.order)]
    cons[w] = ring.step(w, c)
    named, done = ring.bar_arrive(st.named, cons, h)
    return f"{ring.who(g)} bar.arrive b{h} (iteration {c.i}){done}", st.empty, named, (g, h)


CONSUMER_STEPS = {WAIT: consumer_wait, READ: consumer_read, WAITGROUP: consumer_wait_group, RELEASE: consumer_release,
                  FINAL_WAIT: consumer_final_wait, FINAL_RELEASE: consumer_final_release,
                  PROLOGUE: consumer_prologue, TURN: consumer_turn, PASS: consumer_pass}


def consumers_step(ring: Ring, st: RingState) -> list:
    """Every consumer's next step (identical programs within a group: one representative per distinct state)."""
    out, seen = [], set()
    for w, c in enumerate(st.consumers):
        g = w // ring.k
        if (g, c) in seen or c.pc == FINISHED or kind(c.pc) == SYNC:
            continue
        seen.add((g, c))
        cons = list(st.consumers)
        moved = CONSUMER_STEPS[kind(c.pc)](ring, st, w, c, cons)
        if moved is None:
            continue
        if isinstance(moved, ProtocolViolation):
            out.append(moved)
            return out
        label, empty, named, groups = moved
        out.append((label, RingState(st.producer_i, st.producer_pc, ring.canon(cons, groups), st.full, empty,
                                        st.slots, named)))
    return out


# ---- the explorer ----------------------------------------------------------------------------------------------

def successors(ring: Ring, st: RingState) -> list:
    """(label, next state) pairs in a fixed order, ending at the first step that breaks a property (a violation)."""
    producer = (producer_acquire if st.producer_pc in (ACQUIRE, TAIL) else
                producer_issue if st.producer_pc == ISSUE else None)
    out = []
    for moves in (producer, copies_land, consumers_step):
        for item in moves(ring, st) if moves else ():
            out.append(item)
            if isinstance(item, ProtocolViolation):
                return out
    return out


def _stuck(ring: Ring, st: RingState) -> str:
    """Who cannot move in a deadlocked state (warps of one group at one place counted)."""
    stuck = [f"producer at iteration {st.producer_i}"] if st.producer_pc != DONE else []
    if not ring.ordered:
        stuck += [f"a consumer group at iteration {c.i}" for c in st.consumers if c.pc != FINISHED]
    else:
        where = [(w // ring.k, " at bar.sync" if kind(c.pc) == SYNC else "", c.i) for w, c in enumerate(st.consumers)
                 if c.pc != FINISHED]
        stuck += [f"{'a consumer warp' if n == 1 else f'{n} consumer warps'} of group {g}{at} (iteration {i})"
                  for (g, at, i), n in sorted({x: where.count(x) for x in where}.items())]
    return "no agent can move: " + ", ".join(stuck)


def _final_violation(ring: Ring, st: RingState, succ: list) -> ProtocolViolation | None:
    """A barrier left with a partial generation when everything finished, or a deadlock (no step, work left)."""
    finished = st.producer_pc == DONE and all(c.pc == FINISHED for c in st.consumers)
    if finished and any(st.named):
        left = ", ".join(f"b{g} holds {n}" for g, n in enumerate(st.named) if n)
        return ProtocolViolation("barrier-leftover", f"every agent has finished but a named barrier has a partial "
                                 f"generation: {left} of {ring.proto.bar_init} arrival(s)")
    if not succ and not finished:
        return ProtocolViolation("deadlock", _stuck(ring, st))
    return None


def _trace(parent: dict, st: RingState, extra: tuple = ()) -> tuple[str, ...]:
    steps = []
    while parent[st] is not None:
        st, label = parent[st]
        steps.append(label)
    return tuple(reversed(steps)) + tuple(extra)


class CheckIncomplete(InputError):
    """A check cut short without a verdict: ``reason`` "states" (more than ``limit`` states reached) or "deadline"
    (it ran ``limit`` seconds); ``states``: how many were reached.  Nothing about the protocol follows from it."""

    def __init__(self, proto, n: int, reason: str, states: int, limit: float):
        why = f"explored more than {limit} states" if reason == "states" else f"stopped after {limit:g}s"
        super().__init__(f"ring protocol check {why} (depth {proto.depth}, {proto.consumers} consumer groups, {n} "
                         f"iterations, {states} states): no verdict")
        self.reason, self.states, self.limit = reason, states, limit


#: The explorer reads the clock (and reports progress) once per this many states taken from the queue.
CLOCK_EVERY = 1024


def explore(ring: Ring, max_states: int, seconds: float | None = None,
            progress=None) -> tuple[int, ProtocolViolation | None]:
    """Breadth-first search of the states reachable from ``ring.start()``: (states seen, first violation or None).

    Raises CheckIncomplete (an InputError) when more than ``max_states`` states are reached, or once the search
    has run ``seconds`` (the clock read every ``CLOCK_EVERY`` states, the first time before any is explored);
    ``progress(states)`` is called at each reading.
    """
    deadline = None if seconds is None else time.monotonic() + seconds
    start = ring.start()
    parent: dict = {start: None}
    queue = deque([start])
    popped = 0
    while queue:
        if not popped % CLOCK_EVERY and (deadline is not None or progress is not None):
            if progress is not None:
                progress(len(parent))
            if deadline is not None and time.monotonic() >= deadline:
                raise CheckIncomplete(ring.proto, ring.n, "deadline", len(parent), seconds)
        popped += 1
        st = queue.popleft()
        succ = successors(ring, st)
        bad = _final_violation(ring, st, succ)
        if bad:
            return len(parent), replace(bad, trace=_trace(parent, st))
        for item in succ:
            if isinstance(item, ProtocolViolation):
                return len(parent), replace(item, trace=_trace(parent, st, item.trace))
            label, nxt = item
            if nxt not in parent:
                parent[nxt] = (st, label)
                if len(parent) > max_states:
                    raise CheckIncomplete(ring.proto, ring.n, "states", len(parent), max_states)
                queue.append(nxt)
    return len(parent), None
