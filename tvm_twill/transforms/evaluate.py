"""What a fixed stage/order annotation achieves under the model: its initiation interval.

``annotation_ii`` is the measure ``evaluate_annotation`` reports for a hand
annotation and the test ``auto_pipeline`` uses before it trades the solver's
order for a friendlier one (``refine``).  Pure Python over the model.
"""
from __future__ import annotations

from ..errors import InfeasibleError
from ..model import Graph, Machine, check, make_schedule, rec_mii, res_mii
from ..model.families import Family
from ..model.pipeline import PipelineAnnotation

__all__ = ["annotation_ii"]


def annotation_ii(graph: Graph, machine: Machine, ann: PipelineAnnotation, *,
                  max_ii: int | None = None) -> tuple[int, dict, str]:
    """(ii, times, what binds) of a fixed stage/order assignment; see ``evaluate_annotation``.

    ``max_ii``: look no further (InfeasibleError when no ii up to it works), for
    callers that only ask whether the annotation reaches a given ii.
    """
    lo = max(res_mii(graph, machine), rec_mii(graph))
    hi = lo + sum(max([op.cycles] + [e.delay for e in graph.out_edges(op.name)]) for op in graph.ops) + 1
    last_fail = Family.DEPENDENCE
    top = 4 * hi if max_ii is None else min(4 * hi, max_ii)
    for ii in range(lo, top + 1):
        times, why = _times_at(graph, machine, ann, ii)
        if times is not None:
            if ii == lo:
                bound = "the lower bound max(ResMII, RecMII)"
            else:
                bound = f"{last_fail} at ii {ii - 1} with these stages and orders"
            return ii, times, bound
        last_fail = why
    raise InfeasibleError(f"graph '{graph.name}': the annotation has no valid II under the model ({last_fail})",
                          family=last_fail)


def _times_at(graph, machine, ann, ii):
    """Least issue times for the annotation at ``ii``, or (None, reason)."""
    names = graph.names
    idx = {n: i for i, n in enumerate(names)}
    n = len(names)
    src = n  # virtual source: offsets are measured from it
    cons = []  # (u, v, w): off[v] >= off[u] + w
    st = ann.stages
    for e in graph.edges:
        u, v = idx[e.src], idx[e.dst]
        cons.append((u, v, e.delay - (st[v] + e.distance - st[u]) * ii))
    seq = sorted(range(n), key=lambda i: ann.orders[i])
    cons += [(a, b, 0) for a, b in zip(seq, seq[1:])]
    for v in range(n):
        cons.append((src, v, 0))
        cons.append((v, src, -(ii - 1)))
    pos = {v: k for k, v in enumerate(seq)}
    for unit, cap in machine.units.items():
        if cap != 1:
            continue  # checked on the result below
        users = [(v, _span(graph.ops[v], unit)) for v in range(n)]
        users = [(v, c) for v, c in users if c > 0]
        for a, ca in users:
            for b, cb in users:
                if pos[a] < pos[b]:
                    cons.append((a, b, ca))        # b starts after a ends
                    cons.append((b, a, cb - ii))   # and ends before a's next instance
    dist = [0] * (n + 1)
    for _ in range(n + 2):
        changed = False
        for u, v, w in cons:
            if dist[u] + w > dist[v]:
                dist[v] = dist[u] + w
                changed = True
        if not changed:
            break
    else:
        return None, f"{Family.DEPENDENCE}/{Family.RESOURCES}"
    if dist[src] != 0:
        return None, f"{Family.DEPENDENCE}/{Family.RESOURCES}"
    times = {names[v]: st[v] * ii + dist[v] for v in range(n)}
    sched = make_schedule(graph, machine.name, ii, times, {nm: 0 for nm in names},
                          {op.name: op.cycles for op in graph.ops})
    bad = [v for v in check(sched, graph, machine) if v.rule in (1, 2, 5, 6)]
    if bad:
        return None, Family.BY_RULE[bad[0].rule]
    return times, ""


def _span(op, unit) -> int:
    """Cycles from the op's issue to the end of its last use of ``unit`` (0: unused)."""
    ends = [off + length for off, length, row in op.reservation_runs() if any(u == unit and k for u, k in row)]
    return max(ends, default=0)
