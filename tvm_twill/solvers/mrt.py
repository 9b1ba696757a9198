"""The heuristic's modulo reservation table, as intervals: nothing per cycle or per slot.

An op's reservation is a few runs ``(offset, length, unit, k)`` (k instances
of ``unit`` for ``length`` cycles from ``offset``; ``Op.reservation_runs``).
Placed at time t and repeated every ii cycles, a run covers each slot
``length // ii`` times plus once on the arc ``[(t + offset) mod ii, + length
mod ii)``.  So every question the scheduler asks is answered with arithmetic
on arcs of the circle of ii slots, at a cost that depends on the number of
runs, never on ii, the cycles or the delays:

* ``fits`` / ``conflicts``: the load of a unit over [0, ii) is piecewise
  constant with breakpoints at the arcs' ends (``model.checker.modulo_load``);
* ``first_fit``: the earliest time in [est, lst] where an op fits.  On a
  unit of capacity 1 used one instance at a time, an op at t collides with a
  placed run exactly on an arc of t (``forbidden``); the earliest time outside
  every arc is one sweep.  On other units the answer can only change where a
  breakpoint of the op meets a breakpoint of the placed load, t = b_placed -
  b_own (mod ii), so only those times are tried.

``Arc``: ``(start, length)`` on the circle of ii slots, ``0 <= start < ii``;
an arc of length >= ii is the whole circle.
"""
from __future__ import annotations

from ..model.checker import modulo_load


def op_runs(op) -> tuple:
    """``((offset, length, unit, k), ...)``: ``op``'s reservation, one entry per run and unit."""
    return tuple((off, length, u, k) for off, length, row in op.reservation_runs() for u, k in row if k)


def _overlap(a: int, la: int, b: int, lb: int, ii: int) -> bool:
    """Do the arcs [a, a + la) and [b, b + lb) of the circle of ii slots share a slot?"""
    if la <= 0 or lb <= 0:
        return False
    if la >= ii or lb >= ii:
        return True
    return (b - a) % ii < la or (a - b) % ii < lb


def _uncovered(arcs: list, cur: int, lst: int, ii: int) -> int:
    """The earliest time >= cur (and <= lst + 1) outside every arc (each t covered when t mod ii is
    in the arc).  ``lst - cur < ii``, so each arc covers at most two intervals of the window."""
    spans = []
    for a, length in arcs:
        lo = cur - (cur - a) % ii  # the occurrence of the arc that starts at or before cur
        for s in (lo, lo + ii):
            if s <= lst and s + length - 1 >= cur:
                spans.append((s, s + length - 1))
    spans.sort()
    for lo, hi in spans:
        if lo > cur:
            break
        cur = max(cur, hi + 1)
    return cur


class ModuloTable:
    """Placed reservation runs per unit, modulo ``ii`` (module docstring)."""

    def __init__(self, ii: int, cap: dict):
        self.ii = ii
        self.cap = dict(cap)
        self.placed: dict = {}  # op -> (time, runs)

    def _unit_runs(self, unit: str, skip=None) -> list:
        """(start, length, k, op) of every placed run on ``unit``."""
        return [(t + off, length, k, o) for o, (t, runs) in self.placed.items() if o != skip
                for off, length, u, k in runs if u == unit]

    def place(self, name: str, time: int, runs) -> None:
        self.placed[name] = (time, tuple(runs))

    def remove(self, name: str) -> None:
        del self.placed[name]

    def _loads(self, unit: str, runs, time: int) -> list:
        own = [(time + off, length, k) for off, length, u, k in runs if u == unit]
        return modulo_load([r[:3] for r in self._unit_runs(unit)] + own, self.ii)

    def fits(self, runs, time: int) -> bool:
        """Does an op with ``runs`` fit at ``time`` (every slot of every unit within capacity)?"""
        return all(total <= self.cap.get(u, 0)
                   for u in {r[2] for r in runs} for _, _, total in self._loads(u, runs, time))

    def conflicts(self, runs, time: int) -> set:
        """The placed ops holding a slot that the op at ``time`` overloads (to evict)."""
        out = set()
        for u in {r[2] for r in runs}:
            bad = [(lo, hi - lo) for lo, hi, total in self._loads(u, runs, time) if total > self.cap.get(u, 0)]
            for s, length, _, o in self._unit_runs(u):
                if any(_overlap(s % self.ii, length, lo, n, self.ii) for lo, n in bad):
                    out.add(o)
        return out

    def _split(self, runs):
        """(arcs forbidden by capacity-1 units, general units); None when no time can fit."""
        ii, arcs, general = self.ii, [], []
        for u in sorted({r[2] for r in runs}):
            own = [(off, length, k) for off, length, uu, k in runs if uu == u]
            placed = self._unit_runs(u)
            if self.cap.get(u, 0) != 1 or any(k != 1 for *_, k in own) or any(r[2] != 1 for r in placed):
                general.append(u)
                continue
            for i, (oa, la, _) in enumerate(own):  # the op against itself: the same at every time
                if any(_overlap(oa % ii, la, ob % ii, lb, ii) for ob, lb, _ in own[i + 1:]) or la > ii:
                    return None
            for off, length, _ in own:
                for s, ln, _, _ in placed:
                    width = length + ln - 1  # t + off in (s - length, s + ln): a collision
                    if width >= ii:
                        return None
                    arcs.append(((s - off - length + 1) % ii, width))
        return arcs, general

    def _candidates(self, runs, general, est: int, lst: int) -> list:
        """Times in (est, lst] where the fit on a general unit can change (module docstring)."""
        ii, res = self.ii, set()
        for u in general:
            own = {0} | {x % ii for off, length, uu, _ in runs if uu == u for x in (off, off + length)}
            placed = {0} | {x % ii for s, length, _, _ in self._unit_runs(u) for x in (s, s + length)}
            res |= {(p - o) % ii for p in placed for o in own}
        times = sorted(est + (r - est) % ii for r in res)
        return [t for t in times if est < t <= lst]

    def first_fit(self, runs, est: int, lst: int, arcs=()) -> int | None:
        """The earliest time in [est, lst] (``lst - est < ii``) where ``runs`` fit and that lies
        outside every arc of ``arcs`` (other forbidden times: blocking waits); None if none."""
        split = self._split(runs)
        if split is None or any(length >= self.ii for _, length in arcs):
            return None
        forbidden, general = split
        forbidden += list(arcs)
        later = self._candidates(runs, general, est, lst) if general else []
        cur, i = est, 0
        while cur <= lst:
            cur = _uncovered(forbidden, cur, lst, self.ii)
            if cur > lst:
                return None
            if not general or all(total <= self.cap.get(u, 0) for u in general
                                  for _, _, total in self._loads(u, runs, cur)):
                return cur
            while i < len(later) and later[i] <= cur:
                i += 1
            if i == len(later):
                return None
            cur = later[i]
        return None
