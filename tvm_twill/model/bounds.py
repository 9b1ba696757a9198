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
    if not any(e.distance for e in graph.edges):
        return 1  # no loop-carried edge: no recurrence (zero-distance cycles are rejected)
    hi = sum(e.delay for e in graph.edges) + 1
    # Relax edges along the distance-0 order: one Bellman-Ford pass then
    # carries a value down a whole chain, so passes ~ loop-carried edges on a path.
    from .schedule import topological_order
    pos = {n: i for i, n in enumerate(topological_order(graph))}
    edges = sorted(graph.edges, key=lambda e: (e.distance > 0, pos[e.src]))
    if _has_positive_cycle(graph, hi, edges):  # only a zero-distance cycle could do this
        raise AssertionError("zero-distance cycles are rejected by Graph.validate")
    lo = 1
    while lo < hi:
        mid = (lo + hi) // 2
        if _has_positive_cycle(graph, mid, edges):
            lo = mid + 1
        else:
            hi = mid
    return lo


def _has_positive_cycle(graph, ii: int, edges=None) -> bool:
    """Bellman-Ford on weights delay - ii*distance (longest paths)."""
    dist = {n: 0 for n in graph.names}
    for _ in range(len(dist)):
        changed = False
        for e in graph.edges if edges is None else edges:
            w = dist[e.src] + e.delay - ii * e.distance
            if w > dist[e.dst]:
                dist[e.dst] = w
                changed = True
        if not changed:
            return False
    return True


def resource_bottleneck(graph, machine) -> tuple[str, int, int]:
    """(unit, reserved unit-cycles, capacity) of the unit that sets ResMII."""
    best = None
    for unit, cap in sorted(machine.units.items()):
        total = sum(op.usage(unit) for op in graph.ops)
        key = ceil(total / cap)
        if best is None or key > best[0]:
            best = (key, unit, total, cap)
    return best[1], best[2], best[3]


def critical_recurrence(graph) -> list | None:
    """A dependence cycle that sets RecMII (its ops in order), or None when RecMII is 1
    without any recurrence forcing it."""
    ii = rec_mii(graph)
    if ii <= 1 and not any(e.delay > e.distance for e in graph.edges):
        return None
    # At ii - 1 some cycle has positive weight: find it from Bellman-Ford predecessors.
    dist = {n: 0 for n in graph.names}
    pred = {}
    last = None
    for _ in range(len(dist)):
        last = None
        for e in graph.edges:
            w = dist[e.src] + e.delay - (ii - 1) * e.distance
            if w > dist[e.dst]:
                dist[e.dst], pred[e.dst], last = w, e.src, e.dst
        if last is None:
            return None
    for _ in range(len(dist)):  # walk back into the cycle
        last = pred[last]
    cycle, node = [last], pred[last]
    while node != last:
        cycle.append(node)
        node = pred[node]
    return list(reversed(cycle))


def explain_lower_bound(graph, machine) -> list[str]:
    """One line per bound: why no ii below max(ResMII, RecMII) can work."""
    unit, total, cap = resource_bottleneck(graph, machine)
    lines = [f"ResMII = {res_mii(graph, machine)}: unit {unit} is reserved {total} cycles per iteration "
             f"and has capacity {cap}"]
    rec = rec_mii(graph)
    cyc = critical_recurrence(graph)
    if cyc:
        # between consecutive ops, the parallel edge that binds hardest at ii = RecMII - 1
        edges = [max((e for e in graph.edges if e.src == a and e.dst == b),
                     key=lambda e: e.delay - (rec - 1) * e.distance)
                 for a, b in zip(cyc, cyc[1:] + cyc[:1])]
        delay = sum(e.delay for e in edges)
        dist = sum(e.distance for e in edges)
        lines.append(f"RecMII = {rec}: recurrence {' -> '.join(cyc + cyc[:1])} needs {delay} cycles "
                     f"every {dist} iteration(s)")
    else:
        lines.append(f"RecMII = {rec}: no recurrence limits ii")
    return lines
