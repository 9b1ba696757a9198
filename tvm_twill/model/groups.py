"""Consumer groups of a warp-specialized loop: the data-parallel split and the order the schedule gives it.

A warp-specialized kernel's consumer warps can be divided into ``G`` groups
that each run the whole consumer body on their own share of the tile (the
warps of a GEMM already own disjoint parts of C; a wgmma group needs whole
warp groups).  Nothing in the values changes; what changes is *when* each
group uses the functional units.  The FA3 "ping-pong" is the case where one
group's tensor-core work overlaps another group's other work and named
barriers keep the groups in that order.

``split_consumers`` builds the loop graph of that kernel: every consumer op
``x`` becomes ``x@0 .. x@{G-1}``, each with ``1/G`` of the work (every run of
its reservation table shortened to ``ceil(length / G)``, shared memory
divided, registers per thread unchanged: a thread keeps its own fragment),
edges between consumers copied inside each group, edges from or to a
producer (streaming) op copied to every group.  The joint solver places the
copies on warp roles; ``group_order`` reads the order off its schedule when
it is one the kernel can run: every group on a role of its own (no
producer op there), its sections ordered by the issue time of each group's
first op (tie: the lower group), which is the token order the named
barriers enforce.
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import InputError
from .graph import Edge, Graph, Op

__all__ = ["group_name", "group_order", "split_consumers"]


def group_name(name: str, g: int) -> str:
    return f"{name}@{g}"


def _split_op(op: Op, groups: int, g: int) -> Op:
    def part(n: int) -> int:
        return -(-n // groups)

    rrt = None
    cycles = part(op.cycles)
    if op.rrt is not None:  # every run of equal rows (empty ones too) shortened to ceil(length / groups)
        runs: list = []
        for row in op.rrt:
            if runs and runs[-1][0] == row:
                runs[-1][1] += 1
            else:
                runs.append([row, 1])
        rrt = tuple(dict(row) for row, n in runs for _ in range(part(n)))
        cycles = len(rrt)
    return replace(op, name=group_name(op.name, g), cycles=cycles, rrt=rrt, smem=part(op.smem))


def split_consumers(graph: Graph, producers, groups: int) -> Graph:
    """``graph`` with its consumer ops (every op not in ``producers``) split over ``groups`` data-parallel
    consumer groups (module docstring).  Edge delays that equal the source op's cycles (an op's own
    occupancy) shrink with it; other delays (latencies) are kept."""
    producers = set(producers)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise InputError(f"consumer groups must be an integer >= 1, got {groups!r}")
    missing = producers - set(graph.names)
    if missing:
        raise InputError(f"producer ops {sorted(missing)} are not in graph '{graph.name}'")
    if groups == 1:
        return graph
    ops: list[Op] = []
    split: dict[str, list[Op]] = {}
    for op in graph.ops:
        if op.name in producers:
            ops.append(op)
        else:
            split[op.name] = [_split_op(op, groups, g) for g in range(groups)]
            ops += split[op.name]

    def delay(e: Edge, src_cycles: int) -> int:
        old = graph.op(e.src).cycles
        return src_cycles if e.delay == old and e.src not in producers else e.delay

    edges = []
    for e in graph.edges:
        if e.src in producers and e.dst in producers:
            edges.append(e)
        elif e.src in producers:
            edges += [replace(e, dst=split[e.dst][g].name) for g in range(groups)]
        elif e.dst in producers:
            edges += [replace(e, src=split[e.src][g].name, delay=delay(e, split[e.src][g].cycles))
                      for g in range(groups)]
        else:
            edges += [replace(e, src=split[e.src][g].name, dst=split[e.dst][g].name,
                              delay=delay(e, split[e.src][g].cycles)) for g in range(groups)]
    return graph.replace(name=f"{graph.name}@{groups}", ops=tuple(ops), edges=tuple(edges))


def group_order(schedule, graph: Graph, producers, groups: int) -> tuple[int, ...] | None:
    """The token order of the consumer groups in ``schedule`` (of ``split_consumers(graph0, producers,
    groups)`` = ``graph``), or None when the schedule is not one a kernel of ``groups`` consumer groups
    runs (a group spread over roles, two groups or a group and a producer on one role)."""
    producers = set(producers)
    roles: dict[int, set] = {g: set() for g in range(groups)}
    first: dict[int, int] = {}
    for name in graph.names:
        if name in producers:
            continue
        base, _, g = name.rpartition("@")
        if not base or not g.isdigit() or int(g) >= groups:
            raise InputError(f"op '{name}' is not a consumer-group copy (name@g, g < {groups})")
        p = schedule.ops[name]
        roles[int(g)].add(p.warp)
        first[int(g)] = min(first.get(int(g), p.time), p.time)
    producer_roles = {schedule.ops[n].warp for n in producers if n in schedule.ops}
    if any(len(r) != 1 for r in roles.values()):
        return None
    used = [next(iter(r)) for r in roles.values()]
    if len(set(used)) != groups or set(used) & producer_roles:
        return None
    return tuple(sorted(range(groups), key=lambda g: (first[g], g)))
