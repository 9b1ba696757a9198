"""Lower bounds on the initiation interval: ResMII and RecMII."""
from __future__ import annotations

from math import ceil


def res_mii(graph, machine) -> int:
    """max over units f of ceil(reserved unit-cycles of f / capacity(f)), at least 1.

    Every instance of every op reserves its table once per ii cycles, so the
    ii cycles x cap(f) slots of f must hold all of it."""
    best = 1
    for unit, cap in machine.units.items():
        total = sum(op.usage(unit) for op in graph.ops)
        best = max(best, ceil(total / cap))
    return best


def rec_mii(graph) -> int:
    """Smallest ii >= 1 with no dependence cycle C where sum(delay) > ii * sum(distance).

    Spill costs are not counted: producer and consumer may share a warp."""
    if not graph.edges:
        return 1
    hi = sum(e.delay for e in graph.edges) + 1
    if _has_positive_cycle(graph, hi):  # only a zero-distance cycle could do this
        raise AssertionError("zero-distance cycles are rejected by Graph.validate")
    lo = 1
    while lo < hi:
        mid = (lo + hi) // 2
        if _has_positive_cycle(graph, mid):
            lo = mid + 1
        else:
            hi = mid
    return lo


def _has_positive_cycle(graph, ii: int) -> bool:
    """Bellman-Ford on weights delay - ii*distance (longest paths)."""
    dist = {n: 0 for n in graph.names}
    for _ in range(len(dist)):
        changed = False
        for e in graph.edges:
            w = dist[e.src] + e.delay - ii * e.distance
            if w > dist[e.dst]:
                dist[e.dst] = w
                changed = True
        if not changed:
            return False
    return True
