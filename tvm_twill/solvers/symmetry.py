"""Symmetry breaking between interchangeable sub-graphs (copies of a sub-tile or a head).

A graph made of k identical copies (two heads per CTA, k sub-tiles of a
tile, an unrolled loop) has k! equivalent schedules for every schedule: swap
the times and roles of two copies and every rule still holds.  An exact
search that refutes an ii explores all of them.  ``order_constraints``
finds such copies and returns pairs (a, b) meaning ``time[a] <= time[b]``,
which keep exactly one schedule of each equivalence class.

Blocks.  The blocks are the connected components of the graph (copies side
by side), or, when that finds no two interchangeable components, the
components of the graph without its variable-latency ops (sub-tiles that
share one load: the loads stay fixed).  Two blocks B, B' are
interchangeable when a bijection phi: B -> B' preserves every op attribute
but the name, every edge inside the block (delay, distance, blocking) and
every edge to a fixed op (same fixed op, same attributes, same direction).
Then swapping B and B' (phi one way, its inverse back, the identity
elsewhere) is an automorphism of the graph, and every rule 1-6, the
first-op-in-stage-0 normalization, the time bound and the tie-break
measures (length, register peak, time sum) are invariant under it.

Soundness.  The candidate phi is built by colour refinement (ops that are
indistinguishable by attributes and neighbourhood get one colour; blocks are
matched by sorted colour, ties by op order) and then *verified* edge by
edge; a block whose phi does not verify is left out.  For a group of m
interchangeable blocks B_1..B_m (in op order) and one representative op a
of B_1, the constraints are t(phi_1(a)) <= t(phi_2(a)) <= ... <= t(phi_m(a)):
any schedule can be brought to this form by permuting the blocks (all m!
permutations are automorphisms), which does not change a time-free
property.  The first-fit role order of ``smt`` constrains roles only and is
re-established afterwards by renaming roles, which does not change times,
so the two symmetry breakings combine soundly.  The representative is the
op of B_1 with the most cycles on a unit of capacity 1 (two copies cannot
then issue it in one cycle, so the order is strict in every schedule).
"""
from __future__ import annotations


def role_ids(graph, machine) -> list[int]:
    """The warp roles a search needs: at most one per fixed-latency op, then the
    variable-latency role ``warp_groups - 1`` when the graph has such ops (rule 3).

    Roles of fixed-latency ops are interchangeable, and n ops use at most n of
    them, so roles past the number of ops never help: a machine of 2**31 warp
    groups costs what one of n does.  Without room for a variable-latency role
    (one warp group) the list is ``[0]`` and rule 3 leaves no schedule."""
    W = machine.warp_groups
    if machine.roles:  # named roles are not interchangeable: every one (the last streams)
        return list(range(W))
    vl = any(o.variable_latency for o in graph.ops)
    n_fixed = sum(1 for o in graph.ops if not o.variable_latency)
    if vl and W < 2:
        return [0]
    k = min(W - 1 if vl else W, max(1, n_fixed))
    return list(range(k)) + ([W - 1] if vl else [])


def components(names, edges, fixed=()) -> list[list[str]]:
    """Undirected connected components of ``names`` (less ``fixed``) under ``edges``, in first-op order."""
    parent = {n: n for n in names if n not in fixed}
    pos = {n: i for i, n in enumerate(names)}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for e in edges:
        if e.src in parent and e.dst in parent:
            a, b = find(e.src), find(e.dst)
            if a != b:
                lo, hi = sorted((a, b), key=pos.__getitem__)
                parent[hi] = lo
    groups: dict = {}
    for n in names:
        if n in parent:
            groups.setdefault(find(n), []).append(n)
    return sorted(groups.values(), key=lambda g: pos[g[0]])


def _op_key(op, machine):
    sp = None if machine is None else machine.spill_of(op)
    return (op.unit if op.rrt is None else None, op.rrt, op.cycles, op.regs, op.smem, op.tmem,
            op.variable_latency, op.warps, sp)


def _colours(graph, machine, fixed) -> dict:
    """Colour refinement: op -> small int; fixed ops keep their own colour."""
    col = {}
    table: dict = {}
    for op in graph.ops:
        key = ("fixed", op.name) if op.name in fixed else ("op", _op_key(op, machine))
        col[op.name] = table.setdefault(key, len(table))
    for _ in range(len(graph.ops)):
        table = {}
        new = {}
        for n in graph.names:
            key = (col[n],
                   tuple(sorted((e.delay, e.distance, e.blocking, col[e.dst], e.dst == n) for e in graph.out_edges(n))),
                   tuple(sorted((e.delay, e.distance, e.blocking, col[e.src], e.src == n) for e in graph.in_edges(n))))
            new[n] = table.setdefault(key, len(table))
        stable = len(set(new.values())) == len(set(col.values()))
        col = new
        if stable:
            break
    return col


def _edge_set(graph, block, image, fixed):
    """Edges touching ``block``, renamed by ``image`` (fixed ops keep their names)."""
    inside = set(block)
    out = []
    for e in graph.edges:
        if e.src in inside or e.dst in inside:
            src = image[e.src] if e.src in inside else e.src
            dst = image[e.dst] if e.dst in inside else e.dst
            if (e.src not in inside and e.src not in fixed) or (e.dst not in inside and e.dst not in fixed):
                return None  # the block touches another block: not a clean swap
            out.append((src, dst, e.delay, e.distance, e.blocking))
    return sorted(out)


def _groups(graph, machine, fixed) -> list[list[list[str]]]:
    """Groups of interchangeable blocks when the blocks are the components of graph - fixed."""
    names = graph.names
    blocks = components(names, graph.edges, fixed)
    col = _colours(graph, machine, fixed)
    pos = {n: i for i, n in enumerate(names)}
    by_sig: dict = {}
    for b in blocks:
        ordered = sorted(b, key=lambda n: (col[n], pos[n]))
        by_sig.setdefault(tuple(col[n] for n in ordered), []).append(ordered)
    groups = []
    for members in sorted(by_sig.values(), key=lambda m: pos[m[0][0]]):
        if len(members) < 2:
            continue
        first = members[0]
        ref = _edge_set(graph, first, {n: n for n in first}, fixed)
        if ref is None:
            continue
        good = [first]
        for b in members[1:]:
            if _edge_set(graph, b, dict(zip(b, first)), fixed) == ref:  # phi^-1: B_j -> B_1, verified
                good.append(b)
        if len(good) >= 2:
            groups.append(good)
    return groups


def _rep(graph, machine, block) -> int:
    caps = dict(machine.units) if machine is not None else {}

    def weight(i):
        op = graph.op(block[i])
        single = op.rrt is None and caps.get(op.unit, 0) == 1 and op.cycles > 0
        return (single, op.cycles, -graph.index(block[i]))

    return max(range(len(block)), key=weight)


def _chains(graph, machine, groups) -> list[tuple[str, str]]:
    pairs = []
    for group in groups:
        i = _rep(graph, machine, group[0])
        reps = [b[i] for b in group]
        pairs += list(zip(reps, reps[1:]))
    return pairs


def interchangeable_groups(graph, machine=None) -> list[list[list[str]]]:
    """Groups of interchangeable blocks; each block lists its ops in the order that
    matches the group's first block: components of the graph, else components
    of the graph without its variable-latency ops (see the module docstring)."""
    vl = frozenset(o.name for o in graph.ops if o.variable_latency)
    groups = _groups(graph, machine, frozenset())
    if not groups and vl and len(vl) < len(graph.ops):
        groups = _groups(graph, machine, vl)
    return groups


def order_constraints(graph, machine=None) -> list[tuple[str, str]]:
    """Pairs (a, b): some optimal schedule has time[a] <= time[b] for all of them at once.

    Copies side by side (components) are ordered by a representative; inside
    each copy, its own interchangeable sub-blocks (heads sharing the copy's
    loads) are ordered too, by the same pairs in every copy (mapped through
    the verified bijections), so a permutation of the copies keeps them."""
    groups = _groups(graph, machine, frozenset())
    if not groups:
        vl = frozenset(o.name for o in graph.ops if o.variable_latency)
        if not vl or len(vl) == len(graph.ops):
            return []
        return _chains(graph, machine, _groups(graph, machine, vl))
    pairs = _chains(graph, machine, groups)
    for group in groups:
        first = group[0]
        sub = graph.replace(ops=tuple(graph.op(n) for n in first),
                            edges=tuple(e for e in graph.edges if e.src in set(first)))
        vl = frozenset(n for n in first if graph.op(n).variable_latency)
        if not vl or len(vl) == len(first):
            continue
        inner = _chains(sub, machine, _groups(sub, machine, vl))
        for b in group:
            phi = dict(zip(first, b))
            pairs += [(phi[a], phi[c]) for a, c in inner]
    return pairs


def canonical_named_roles(schedule, graph, machine):
    """``schedule`` with the ops of each class of identical named roles (same warps, budget, streaming) on
    the class's lowest roles, in order of first use in graph order: a renaming of interchangeable roles, so
    times, units and live ranges are unchanged (FA4's two softmax groups: sub-tile a's on ``softmax0``)."""
    roles = machine.roles
    if not roles:
        return schedule
    to: dict = {}
    for n in graph.names:
        w = schedule.ops[n].warp
        if w in to:
            continue
        same = [k for k, r in enumerate(roles) if r.kind == roles[w].kind]
        to[w] = next(k for k in same if k not in to.values())
    from dataclasses import replace
    return replace(schedule, ops={n: replace(p, warp=to[p.warp]) for n, p in schedule.ops.items()})
