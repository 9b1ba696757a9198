"""A modulo schedule with warp assignment (``tvm-twill-schedule/1``)."""
from __future__ import annotations

from dataclasses import dataclass, field

SCHEDULE_FORMAT = "tvm-twill-schedule/1"


@dataclass(frozen=True)
class Placement:
    """Where one op goes: issue cycle ``time`` within an iteration, its
    ``stage`` = time // ii, its ``order`` in the emitted body, its ``warp`` role."""

    time: int
    stage: int
    order: int
    warp: int


@dataclass(frozen=True)
class LowerBound:
    """Certificate that no ii below ``ii`` can work: max(ResMII, RecMII), raised
    to the first ii the search did not prove infeasible."""

    ii: int
    resource: int
    recurrence: int


@dataclass(frozen=True)
class Attempt:
    """One (ii, length) the search tried.  ``result`` is ``sat``, ``unsat``
    (proved impossible), ``timeout`` or ``skipped``; ``reason`` names the
    constraint family that rules an unsat ii out."""

    ii: int
    length: int | None
    result: str
    seconds: float
    reason: str | None = None
    solver: str | None = None


@dataclass(frozen=True)
class TieBreak:
    """A secondary objective of the solve at the schedule's ii (``length``, ``register peak``): the schedule's
    ``value`` and the ``bound`` proven below it (no schedule at that ii does better; None: not sought, e.g.
    the paper's encoding has no register objective, or the time limit came first)."""

    objective: str
    value: int
    bound: int | None = None

    @property
    def proven(self) -> bool:
        """Is ``value`` proven the least?"""
        return self.bound is not None and self.bound >= self.value

    def describe(self) -> str:
        """One phrase: "length 4 proven minimal", "length 12 not proven minimal (at least 9, gap 25.0%)"."""
        if self.proven:
            return f"{self.objective} {self.value} proven minimal"
        if self.bound is None:
            return f"{self.objective} {self.value} not minimized"
        if self.bound <= 0:  # only the trivial bound
            return f"{self.objective} {self.value} not proven minimal"
        gap = (self.value - self.bound) / self.value if self.value else 0.0
        return f"{self.objective} {self.value} not proven minimal (at least {self.bound}, gap {100 * gap:.1f}%)"


@dataclass(frozen=True)
class Schedule:
    graph: str
    machine: str
    ii: int
    length: int
    ops: dict
    cycles: dict
    optimal: bool = False
    lower_bound: LowerBound | None = None
    solve_seconds: float = 0.0
    attempts: tuple = ()
    #: Seconds until the optimal ii was proven (the rest of solve_seconds is tie-breaks).
    #: In memory only: not part of the JSON format.
    proof_seconds: float | None = field(default=None, compare=False)
    #: Optional extension (documented in docs/formats.md): cost normalization report.
    normalization: dict | None = field(default=None, compare=False)
    #: Optional extension: streaming loads given zero latency (section 5.3) and their ring depth.
    streaming: dict | None = field(default=None, compare=False)
    #: Optional extension: the next best schedules, distinct up to renaming (``solve(..., top_k=K)``,
    #: ``tvm-twill solve --top K``; docs/formats.md, "The K best schedules"), in rank order.
    alternatives: tuple = field(default=(), compare=False)
    #: The secondary objectives at the ii (``TieBreak``s: the length, the register peak), each with what was
    #: proven of it; () when unknown (an anytime answer, a schedule read back from JSON).  In memory only.
    tie_breaks: tuple = field(default=(), compare=False)

    def __post_init__(self):
        object.__setattr__(self, "ops", dict(self.ops))
        object.__setattr__(self, "alternatives", tuple(self.alternatives))
        object.__setattr__(self, "tie_breaks", tuple(self.tie_breaks))
        object.__setattr__(self, "cycles", dict(self.cycles))
        object.__setattr__(self, "attempts", tuple(self.attempts))

    @property
    def ii_optimal(self) -> bool:
        """Is the ii proven optimal?  ``optimal`` (the solve finished, tie-breaks included), or an ii no
        larger than the solve's lower bound (a search cut short there only left its tie-breaks)."""
        return self.optimal or (self.lower_bound is not None and self.lower_bound.ii >= self.ii)

    @property
    def ii_gap(self) -> float | None:
        """(ii - proven lower bound) / ii: 0.0 when the ii is proven optimal, None without a lower bound."""
        if self.ii_optimal:
            return 0.0
        return None if self.lower_bound is None else max(0.0, (self.ii - self.lower_bound.ii) / self.ii)

    @property
    def num_stages(self) -> int:
        return 1 + max(p.stage for p in self.ops.values())

    def stage(self, name: str) -> int:
        return self.ops[name].stage

    def warps_used(self) -> list[int]:
        return sorted({p.warp for p in self.ops.values()})

    def in_order(self) -> list[str]:
        """Op names in emitted-body order."""
        return sorted(self.ops, key=lambda n: self.ops[n].order)


def body_order(times: dict, ii: int, topo: list[str]) -> dict:
    """The emitted-body order of a modulo schedule: by issue slot (time mod ii),
    then time, then topological position (stated tie-break, deterministic).

    Ordering by slot reproduces the steady-state kernel's issue sequence, and
    for a same-stage dependence u -> v (time[u] <= time[v]) keeps u before v.
    """
    pos = {n: i for i, n in enumerate(topo)}
    ranked = sorted(times, key=lambda n: (times[n] % ii, times[n], pos[n]))
    return {n: i for i, n in enumerate(ranked)}


def busy_share(schedule, graph, unit: str) -> float:
    """The share of the steady state's ``ii`` slots in which ``unit`` is busy: some op's reservation row that
    uses ``unit`` lies in that slot (its issue time plus the row, modulo ii).  ``graph`` is the graph the
    schedule was solved on (its ops' reservation tables)."""
    ii, slots = schedule.ii, set()
    for op in graph.ops:
        t = schedule.ops[op.name].time
        for off, n, row in op.reservation_runs():
            if any(u == unit for u, _ in row):
                slots.update((t + off + j) % ii for j in range(min(n, ii)))
    return len(slots) / ii


def make_schedule(graph, machine_name: str, ii: int, times: dict, warps: dict, cycles: dict,
                  **extra) -> Schedule:
    """Build a Schedule from times and warps: stage, order and length derived."""
    topo = topological_order(graph)
    order = body_order(times, ii, topo)
    ops = {n: Placement(time=times[n], stage=times[n] // ii, order=order[n], warp=warps[n])
           for n in graph.names}
    length = max(times[n] + cycles[n] for n in graph.names)
    return Schedule(graph=graph.name, machine=machine_name, ii=ii, length=length, ops=ops,
                    cycles=cycles, **extra)


def topological_order(graph) -> list[str]:
    """Ops sorted along distance-0 edges; ties by position in the graph.

    Kahn's algorithm with a heap keyed by graph position: O((V + E) log V)."""
    import heapq

    names = graph.names
    indeg = dict.fromkeys(names, 0)
    succ: dict = {n: [] for n in names}
    for e in graph.edges:
        if e.distance == 0:
            indeg[e.dst] += 1
            succ[e.src].append(e.dst)
    ready = [i for i, n in enumerate(names) if indeg[n] == 0]  # already a heap: sorted
    out: list[str] = []
    while ready:
        n = names[heapq.heappop(ready)]
        out.append(n)
        for d in succ[n]:
            indeg[d] -= 1
            if indeg[d] == 0:
                heapq.heappush(ready, graph.index(d))
    return out
