"""What a modulo schedule keeps busy in its steady state (test helpers)."""


def busy(schedule, graph, unit):
    """slot -> the ops occupying ``unit`` in that slot of the steady state (every row of each op's reservation
    table, at its issue time plus the row, modulo ii)."""
    out = {r: [] for r in range(schedule.ii)}
    for op in graph.ops:
        for j, row in enumerate(op.reservation()):
            if any(u == unit for u, _ in row):
                out[(schedule.ops[op.name].time + j) % schedule.ii].append(op.name)
    return out


def busy_fraction(schedule, graph, unit="TC") -> float:
    """The share of the steady state's slots in which ``unit`` is busy."""
    return sum(1 for ops in busy(schedule, graph, unit).values() if ops) / schedule.ii
