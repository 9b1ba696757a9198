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

What the warp-specialized kernel runs, stated as edges (kind ``"order"``,
so every solver and the independent checker see them as dependences):

* ``in_program_order``: a consumer group runs its statements one after
  another, in program order, one iteration after the other (the
  warp-specialization transform does not software-pipeline the consumer
  body): each consumer op starts once the one before it has finished
  (delay: its cycles), and the first of iteration ``i + 1`` once the last
  of iteration ``i`` has (distance 1).  Without these edges a modulo
  schedule may start iteration ``i + 1``'s GEMM before iteration ``i``'s
  exponentials, which no consumer of that kernel does.
* ``turn_sections`` / ``with_turns``: ordered groups take turns on the
  tensor core (FA3's ping-pong): each maximal run of consecutive
  tensor-core ops of the body is a section, taken in the round-robin order
  section 0 of group 0, of group 1, ..., section 1 of group 0, ...; the
  work between sections (the softmax) is outside the turns, so one group's
  exponentials run while the other's GEMMs hold the tensor core.
  ``place_groups`` then puts each group on a warp role of its own.
* ``rotate_turns``: when the body both starts and ends with a tensor-core
  run (attention: ``S = Q K^T`` first, ``O += P V`` last), the last run of
  iteration ``i`` and the first of iteration ``i + 1`` are one turn, as in
  FA3's ping-pong (a warp group's turn issues its ``P V`` GEMM of iteration
  ``i`` and its ``Q K^T`` GEMM of iteration ``i + 1``): nothing but the
  ring's release and wait lies between them.  The graph is retimed so that
  the turn lies in one iteration (``retime``: the last run's ops counted one
  iteration later, which changes no dependence), and the kernel's first
  and last turns are that turn's halves (``transforms.ws.consumer_order``).
* ``look_ahead``: the same turn with its GEMMs in the other order, as FA3
  issues them (``transforms.ws.look_ahead``): a group's turn issues the first
  run of iteration ``i + 1`` (S) and then the last run of ``i`` (O), which
  stays in flight: the group's next statement starts once O is issued, and
  a statement waits for O only where it depends on it (it overwrites what O
  reads, or uses what O writes), so the group's softmax runs under its own
  O GEMM as well as under the other group's turn.
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import InputError
from .graph import Edge, Graph, Op

__all__ = ["group_name", "group_order", "in_program_order", "look_ahead", "place_groups", "retime", "rotate_turns",
           "split_consumers", "turn_sections", "with_turns"]

#: The unit whose sections ordered consumer groups take turns on.
TURN_UNIT = "TC"


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


def _consumers(graph: Graph, producers) -> list[Op]:
    producers = set(producers)
    return [op for op in graph.ops if op.name not in producers]


def in_program_order(graph: Graph, producers) -> Graph:
    """``graph`` with its consumer ops (every op not in ``producers``, in graph order = program order) chained
    as one consumer runs them: ``a -> b`` for consecutive ops with delay ``a.cycles``, and ``last -> first``
    with distance 1 and delay ``last.cycles`` (module docstring).  A graph with fewer than one consumer op is
    returned as it is."""
    cons = _consumers(graph, producers)
    if not cons:
        return graph
    chain = [Edge(a.name, b.name, delay=a.cycles, distance=0, kind="order") for a, b in zip(cons, cons[1:])]
    chain.append(Edge(cons[-1].name, cons[0].name, delay=cons[-1].cycles, distance=1, kind="order"))
    return graph.replace(edges=graph.edges + tuple(chain))


def turn_sections(graph: Graph, producers) -> tuple[tuple[str, ...], ...]:
    """The maximal runs of consecutive consumer ops (program order) that use the tensor core: the sections
    ordered consumer groups take turns on (module docstring)."""
    out: list[list[str]] = []
    prev = False
    for op in _consumers(graph, producers):
        tc = TURN_UNIT in op.units()
        if tc and prev:
            out[-1].append(op.name)
        elif tc:
            out.append([op.name])
        prev = tc
    return tuple(tuple(run) for run in out)


def retime(graph: Graph, later) -> Graph:
    """``graph`` with the ops ``later`` counted one iteration later (op ``x`` of iteration ``i`` is called
    ``x`` of iteration ``i + 1``): an edge's distance grows by one into such an op and shrinks by one out of
    one.  The loop is the same loop; a schedule of the result is one of ``graph`` with those ops' times
    moved by one ii.  InputError when an edge out of ``later`` to another op has distance 0 (it would need
    a negative distance)."""
    later = set(later)
    missing = later - set(graph.names)
    if missing:
        raise InputError(f"ops {sorted(missing)} to retime are not in graph '{graph.name}'")
    edges = []
    for e in graph.edges:
        d = e.distance + (e.dst in later) - (e.src in later)
        if d < 0:
            raise InputError(f"cannot count {sorted(later)} one iteration later: edge {e.src}->{e.dst} has "
                             "distance 0 out of them")
        edges.append(replace(e, distance=d))
    return graph.replace(edges=tuple(edges))


def rotate_turns(graph: Graph, producers) -> tuple[Graph, tuple[tuple[str, ...], ...]]:
    """``(graph, sections)``: ``graph`` itself and its ``turn_sections`` when the consumer body does not
    both start and end with a tensor-core run (or has one run); else the turn that wraps the loop's back edge
    (module docstring): ``graph`` retimed with the last run one iteration later, and the sections of the
    retimed body in turn order (the last run followed by the first, then the runs between)."""
    sections = turn_sections(graph, producers)
    cons = _consumers(graph, producers)
    if len(sections) < 2 or cons[0].name != sections[0][0] or cons[-1].name != sections[-1][-1]:
        return graph, sections
    return retime(graph, sections[-1]), (sections[-1] + sections[0], *sections[1:-1])


def with_turns(split: Graph, sections, groups: int) -> Graph:
    """``split`` (``split_consumers``' graph of ``groups`` groups) with the round-robin turns of ``sections``
    (``turn_sections`` of the unsplit graph, base names): the last op of section ``k`` of group ``g`` precedes
    the first op of the same section of group ``g + 1`` (delay: the last op's cycles in the split), and group
    ``G - 1``'s section ``k`` precedes group 0's section ``k + 1`` (section 0 of the next iteration: distance
    1).  No sections: ``split`` unchanged."""
    if not sections:
        return split
    tokens = [(sec, g) for sec in range(len(sections)) for g in range(groups)]
    edges = []
    for n, (sec, g) in enumerate(tokens):
        nsec, ng = tokens[(n + 1) % len(tokens)]
        last = group_name(sections[sec][-1], g)
        edges.append(Edge(last, group_name(sections[nsec][0], ng), delay=split.op(last).cycles,
                          distance=int(n + 1 == len(tokens)), kind="order"))
    return split.replace(edges=split.edges + tuple(edges))


def place_groups(schedule, split: Graph, producers, groups: int):
    """``schedule`` (of ``split``) with every op of consumer group ``g`` on the ``g``-th lowest warp role that
    holds no producer op, producer ops where they were.  Roles only name who issues what: the times (which
    carry the program order and the turns) are kept, and the caller checks the result with ``model.check``
    (the machine's roles, registers per role, spill costs of hand-offs between roles)."""
    producers = set(producers)
    prod_roles = {schedule.ops[n].warp for n in producers if n in schedule.ops}
    free = [w for w in range(len(prod_roles) + groups) if w not in prod_roles]
    ops = {}
    for name, p in schedule.ops.items():
        if name in producers:
            ops[name] = p
            continue
        base, _, g = name.rpartition("@")
        if not base or not g.isdigit() or int(g) >= groups:
            raise InputError(f"op '{name}' is not a consumer-group copy (name@g, g < {groups})")
        ops[name] = replace(p, warp=free[int(g)])
    return replace(schedule, ops=ops)


def _group_of(name: str) -> str | None:
    return name.rpartition("@")[2] if "@" in name else None


def look_ahead(split: Graph, sections, groups: int) -> Graph | None:
    """``split`` (``with_turns``' graph of ``groups`` groups over a ``rotate_turns`` graph whose one turn
    ``sections[0]`` is the last run of iteration i followed by the first run of i + 1) with the turn's order
    flipped (module docstring): in each group the first run's last op precedes the last run's first op (delay:
    its cycles), the last run's last op ``O`` precedes the group's statement after the first run with delay
    1 (issued, not finished), and for each dependence ``x -> O`` of distance ``d >= 1`` inside the group,
    ``O -> x`` of distance ``d - 1`` with O's cycles (x, one iteration on, waits for O); the program-order
    edges these replace (``O -> first`` and ``first -> after``) and the turns between groups are dropped
    and the turns re-made as ``O`` of group g before the first run of group g + 1 (of the next iteration
    after the last group).  None when the turn does not span the back edge this way (one section whose ops
    are the body's first ops followed by its last ones) or nothing follows the first run."""
    order = list(dict.fromkeys(n.rpartition("@")[0] for n in split.names if "@" in n))   # program order
    if len(sections) != 1:
        return None
    turn = sections[0]
    first = []
    for n in order:
        if n not in turn:
            break
        first.append(n)
    last = [n for n in turn if n not in first]
    if not first or not last or len(order) <= len(first) or order[-len(last):] != last or \
            list(turn) != last + first:
        return None
    after = order[len(first)]
    drop = set()
    for g in range(groups):
        drop |= {(group_name(last[-1], g), group_name(first[0], g)), (group_name(first[-1], g), group_name(after, g))}
    keep = [e for e in split.edges if not (e.kind == "order" and ((e.src, e.dst) in drop or
                                                                 _group_of(e.src) != _group_of(e.dst)))]
    add = []
    for g in range(groups):
        o = group_name(last[-1], g)
        add += [Edge(group_name(first[-1], g), group_name(last[0], g), delay=split.op(group_name(first[-1], g)).cycles,
                     kind="order"),
                Edge(o, group_name(after, g), delay=1, kind="order")]
        lasts = {group_name(n, g) for n in last}
        add += [Edge(o, e.src, delay=split.op(o).cycles, distance=e.distance - 1, kind="order")
                for e in split.edges if e.kind == "data" and e.dst in lasts and e.distance >= 1
                and _group_of(e.src) == str(g) and e.src != e.dst]
        nxt = (g + 1) % groups
        add.append(Edge(o, group_name(first[0], nxt), delay=split.op(o).cycles, distance=int(nxt == 0), kind="order"))
    return split.replace(edges=tuple(keep + add))
