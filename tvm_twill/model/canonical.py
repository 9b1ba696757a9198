"""When two schedules are the same up to renaming, and the one form of each class.

Two modulo schedules of one graph on one machine are **equivalent** when one
becomes the other by any combination of

* a uniform shift of every issue time by a constant c (a multiple of ii:
  the same iterations, numbered from another one; any other c: the slots
  rotate, ``(time + c) mod ii``, and the loop body starts at another point
  of the same steady-state stream);
* a permutation of warp roles (the roles are interchangeable, or on a machine with named roles
  those of one kind: rule 3 only
  asks that the variable-latency ops share one role and no other op uses it);
* an automorphism of the graph: a renaming of ops onto ops with every
  attribute but the name equal (cycles, unit or reservation table,
  registers, memory, variable latency, warps, spill cost, flops) that maps
  the edges onto the edges with equal delay, distance and blocking (two heads
  or sub-tiles of one loop swapped).

Each of these keeps every rule of the checker (rules 1-6 are invariant under
them) and the executed steady state, up to names; so does every measure the
solver ranks schedules by (length from the first issue, register peak, sum
of issue times from the first issue).

The **canonical form** of a schedule (``canonical_form``) is the least,
over the graph's automorphisms g, of the tuple ``((time - t0, role), ...)``
over the ops in graph order after renaming by g, where t0 is the earliest
time and ``role`` renumbers the roles: the variable-latency ops' role is
``warp_groups - 1``, the other roles are numbered 0, 1, ... in the order in
which their first op appears in the graph (first fit).  Two schedules are
equivalent exactly when their canonical forms are equal.

The automorphisms are found by backtracking over ops of equal attributes,
checked edge by edge (``automorphisms``).  Graphs with more than
``MAX_AUTOMORPHISMS`` of them (say six interchangeable heads, 720) use the
first ``MAX_AUTOMORPHISMS`` found: classes may then be split (two equivalent
schedules can have two forms), never merged.
"""
from __future__ import annotations

#: The most schedules a top-k solve returns (``tvm-twill solve --top K``; a schedule file's
#: ``alternatives`` hold at most one less).
MAX_TOP_K = 64
#: Automorphisms enumerated at most (see the module docstring).
MAX_AUTOMORPHISMS = 720
#: Partial assignments the automorphism search may visit.
MAX_NODES = 200_000


def _op_signature(op, machine) -> tuple:
    spill = op.spill_cost if machine is None else machine.spill_of(op)
    return (op.unit if op.rrt is None else None, op.rrt, op.cycles, op.regs, op.smem, op.tmem,
            op.variable_latency, op.warps, spill, op.flops)


def _edge_table(graph) -> dict:
    table: dict = {}
    for e in graph.edges:
        table.setdefault((e.src, e.dst), []).append((e.delay, e.distance, e.blocking))
    return {k: tuple(sorted(v)) for k, v in table.items()}


def _colours(graph, machine) -> dict:
    """Colour refinement: ops that no automorphism can swap get different colours."""
    names = graph.names
    table: dict = {}
    col = {op.name: table.setdefault(_op_signature(op, machine), len(table)) for op in graph.ops}
    for _ in range(len(names)):
        table = {}
        new = {}
        for n in names:
            key = (col[n],
                   tuple(sorted((e.delay, e.distance, e.blocking, col[e.dst], e.dst == n)
                                for e in graph.out_edges(n))),
                   tuple(sorted((e.delay, e.distance, e.blocking, col[e.src], e.src == n)
                                for e in graph.in_edges(n))))
            new[n] = table.setdefault(key, len(table))
        stable = len(set(new.values())) == len(set(col.values()))
        col = new
        if stable:
            break
    return col


def automorphisms(graph, machine=None, *, limit: int = MAX_AUTOMORPHISMS) -> tuple[tuple[dict, ...], bool]:
    """``(maps, complete)``: the graph's automorphisms as dicts op -> op (the identity first), and
    whether that is all of them (False: the search stopped at ``limit`` maps or ``MAX_NODES`` steps)."""
    names = graph.names
    col = _colours(graph, machine)
    edges = _edge_table(graph)
    # ops in an order where each has an edge to an earlier one when possible (edges prune early)
    order, seen = [], set()
    for n in sorted(names, key=lambda x: (sum(1 for m in names if col[m] == col[x]), graph.index(x))):
        stack = [n]
        while stack:
            x = stack.pop()
            if x in seen:
                continue
            seen.add(x)
            order.append(x)
            nbrs = [e.dst for e in graph.out_edges(x)] + [e.src for e in graph.in_edges(x)]
            stack.extend(sorted(set(nbrs) - seen, key=graph.index, reverse=True))
    by_colour: dict = {}
    for n in names:
        by_colour.setdefault(col[n], []).append(n)
    found: list[dict] = []
    image: dict = {}
    used: set = set()
    steps = [0]
    complete = [True]

    def fits(x, y) -> bool:
        for z, gz in image.items():
            if edges.get((x, z)) != edges.get((y, gz)) or edges.get((z, x)) != edges.get((gz, y)):
                return False
        return edges.get((x, x)) == edges.get((y, y))

    def dfs(k: int) -> bool:
        if k == len(order):
            found.append(dict(image))
            return len(found) < limit
        x = order[k]
        for y in by_colour[col[x]]:
            if y in used:
                continue
            steps[0] += 1
            if steps[0] > MAX_NODES:
                complete[0] = False
                return False
            if fits(x, y):
                image[x] = y
                used.add(y)
                go_on = dfs(k + 1)
                del image[x]
                used.discard(y)
                if not go_on:
                    return False
        return True

    if not dfs(0):
        complete[0] = False
    identity = {n: n for n in names}
    maps = [identity] + [m for m in found if m != identity]
    return tuple(maps), complete[0] and len(found) < limit


def canonical_roles(graph, warps: dict, warp_groups: int, roles: tuple = ()) -> dict:
    """Roles renumbered: variable-latency ops on ``warp_groups - 1``, the others 0, 1, ... by first op.

    ``roles``: a machine's named roles (``Machine.roles``, FA4's split on ``b200``), which are not
    interchangeable: then only roles of one kind (same warps, budget, streaming) swap, each role used
    going to the lowest role of its kind not yet taken, in order of first use in graph order."""
    if roles:
        to: dict = {}
        for n in graph.names:
            w = warps[n]
            if w not in to:
                same = [k for k, r in enumerate(roles) if r.kind == roles[w].kind]
                to[w] = next(k for k in same if k not in to.values())
        return {n: to[warps[n]] for n in graph.names}
    new: dict = {}
    out = {}
    for op in graph.ops:
        if op.variable_latency:
            out[op.name] = warp_groups - 1
        else:
            out[op.name] = new.setdefault(warps[op.name], len(new))
    return out


def representative(graph, times: dict, warps: dict, warp_groups: int, roles: tuple = ()) -> tuple:
    """``((time - t0, role), ...)`` in graph order: the form of the identity renaming."""
    t0 = min(times.values())
    roles = canonical_roles(graph, warps, warp_groups, roles)
    return tuple((times[n] - t0, roles[n]) for n in graph.names)


def images(graph, times: dict, warps: dict, maps) -> list[tuple[dict, dict]]:
    """``(times, warps)`` of the schedule renamed by each map (op v's placement goes to map[v])."""
    return [({g[n]: times[n] for n in times}, {g[n]: warps[n] for n in warps}) for g in maps]


def canonical_form(graph, times: dict, warps: dict, warp_groups: int, maps=None, roles: tuple = ()) -> tuple:
    """The canonical form (module docstring); ``maps``: ``automorphisms(graph)[0]`` (computed if None)."""
    if maps is None:
        maps = automorphisms(graph)[0]
    return min(representative(graph, t, w, warp_groups, roles) for t, w in images(graph, times, warps, maps))
