"""Incumbents from the graph's structure, so that the exact search starts below the heuristic's.

The heuristic (``heuristic``) places ops one at a time and knows nothing of how the graph was
built.  Replicated and scaled graphs have schedules it may miss; each of these is valid by
construction and passes ``model.check`` before it is used.  They are upper bounds only: the
search still decides every ii between the lower bound and the best of them, and an incumbent at
the lower bound (ResMII / RecMII) is optimal with no query at all.

* Reduction.  When a factor f > 1 divides every op's cycles, every delay and every spill cost an
  edge can pay (no op has a reservation table), the unit graph, all of them divided by f, is
  solved, and its schedule times f is valid at f * ii_unit: every rule is a linear inequality in
  times, delays and spills (dependences) or compares slot distances with cycle counts (units,
  blocking waits, live values), and all of them scale by f.  It is not always optimal: a
  recurrence, or a schedule that packs the units tighter, can admit an ii that is not a multiple
  of f.
* Copies.  When the graph holds k >= 2 interchangeable blocks (``symmetry.interchangeable_groups``:
  heads side by side, sub-tiles sharing their loads), one copy with the ops outside the blocks
  (``rest``) is solved at some ii_1; copy c is placed at the copy's times + c * ii_1 under
  ii = k * ii_1.  The instances of the k copies then repeat the copy's pattern modulo ii_1 on
  every unit, and on every role the copies share, in its blocking waits; dependences inside a
  copy only get slack (d * k * ii_1 >= d * ii_1).  Registers differ: a value consumed d
  iterations later lives d * k * ii_1, so k accumulators are live where the copy holds one.
  The roles are therefore packed (``_pack_roles``): each copy takes the copy's roles renamed,
  the identity first, each choice checked; copies on roles of their own meet the register rule
  whenever the copy does.  When no packing fits, the copy is solved again (``_ways``): on fewer
  roles with a share of the registers, so that the copies spread over all roles, then with every
  distance times k, which at ii_1 keeps its values live exactly as long as in the k-copy
  schedule, so that the copies can share its roles.  An op of ``rest`` that a later copy feeds
  within the iteration is moved after it, and when that breaks a rule the ops of ``rest`` are
  re-solved with z3 while every copy stays fixed (a window).

A repair of the best incumbent at a smaller ii (the joint z3 model with every role, or every
stage, fixed to the incumbent's) was measured and left out: on the five replicated graphs where
a gap remained, z3 exhausted 2 million rlimit units (about a second) at every ii tried.

Sub-solves (the unit graph, the copy) are whole searches (``search.solve_prepared``, passed in as
``solve``, without tie-breaks), and all of this uses at most ``SHARE`` of the time left.  Ties: a
candidate replaces the incumbent only at a strictly smaller ii, tried in the order copies (the
smaller sub-solve), then reduction; so a graph the heuristic already schedules at its best
ii keeps the heuristic's schedule.
"""
from __future__ import annotations

import time as _time
from dataclasses import replace
from itertools import permutations
from math import gcd

from ..errors import SolverTimeoutError
from ..model import Attempt, check, make_schedule, topological_order
from .heuristic import Incumbent
from .limits import WINDOW_RLIMIT, Deadline
from .smt import JointProblem
from .symmetry import interchangeable_groups

#: ``Attempt.solver`` / ``Incumbent.seed`` of the incumbents found here.
REDUCTION, COPIES = "reduction", "copies"
#: Share of the time left that all of them together may use, and the least time left worth it.
SHARE, MIN_SECONDS = 0.5, 0.5
#: Checks the role packing of the copies may spend (``_pack_roles``; about a millisecond each at 50 ops).
PACK_CHECKS = 2000


def common_factor(graph, machine) -> int:
    """The largest f dividing every op's cycles, every edge's delay and the spill cost of every
    edge's source; 1 when there is none, or when an op has a reservation table."""
    if any(op.rrt is not None for op in graph.ops):
        return 1
    f = 0
    values = [op.cycles for op in graph.ops] + [e.delay for e in graph.edges]
    values += [machine.spill_of(graph.op(e.src)) for e in graph.edges]
    for v in values:
        f = gcd(f, v)
        if f == 1:
            return 1
    return max(1, f)


def unit_graph(graph, machine, f: int):
    """``graph`` with every cycle count, delay and (explicit) spill cost divided by ``f``."""
    ops = tuple(replace(op, cycles=op.cycles // f, spill_cost=machine.spill_of(op) // f) for op in graph.ops)
    edges = tuple(replace(e, delay=e.delay // f) for e in graph.edges)
    return graph.replace(name=f"{graph.name}_unit{f}", ops=ops, edges=edges, normalize=False)


def replicas(graph, machine):
    """(rest, blocks) of the group of interchangeable blocks covering the most ops (ties: the
    first in graph order), or None; each block lists its ops in the first block's order."""
    groups = interchangeable_groups(graph, machine)
    if not groups:
        return None
    group = max(groups, key=lambda gr: (len(gr) * len(gr[0]), -graph.index(gr[0][0])))
    inside = {n for b in group for n in b}
    return [n for n in graph.names if n not in inside], group


def checked(graph, machine, ii: int, times: dict, warps: dict, seed: str, seconds: float,
            cross_warp_sync: bool = False) -> Incumbent | None:
    """An ``Incumbent`` of these times (shifted so that some op starts in stage 0) if
    ``model.check`` accepts them, else None."""
    base = min(times.values()) // ii * ii
    times = {n: times[n] - base for n in graph.names}
    cyc = {op.name: op.cycles for op in graph.ops}
    if check(make_schedule(graph, machine.name, ii, times, warps, cyc), graph, machine,
             cross_warp_sync=cross_warp_sync):
        return None
    length = max(times[n] + cyc[n] for n in graph.names)
    return Incumbent(ii, length, times, dict(warps), seed, seconds)


def improve(graph, machine, lb: int, inc: Incumbent | None, *, solve, deadline: Deadline,
            cross_warp_sync: bool = False, attempts: list | None = None) -> Incumbent | None:
    """The best of ``inc`` and the incumbents above (see the module docstring); every one that
    improves on the incumbent is appended to ``attempts``.  ``solve(graph, deadline)``: a
    schedule of ``graph`` within ``deadline``, or None."""
    left = deadline.left()
    if left < MIN_SECONDS:
        return inc
    phase = deadline if deadline.limit is None else deadline.ending_earlier(left * (1 - SHARE))
    best = inc
    steps = ((interleaved, 0.5), (reduced, 1.0))  # the small sub-solve first
    for step, share in steps:
        if (best is not None and best.ii <= lb) or phase.expired():
            break
        t0 = _time.perf_counter()
        sub = phase if phase.limit is None else Deadline(share * phase.left(), clock=phase.clock)
        cand = step(graph, machine, solve=solve, deadline=sub, cross_warp_sync=cross_warp_sync)
        if cand is not None and (best is None or cand.ii < best.ii):
            best = replace(cand, seconds=_time.perf_counter() - t0)
            if attempts is not None:
                attempts.append(Attempt(best.ii, best.length, "sat", best.seconds, solver=best.seed))
    return best


def reduced(graph, machine, *, solve, deadline: Deadline, cross_warp_sync: bool = False) -> Incumbent | None:
    """The unit graph's schedule times the common factor, checked on ``graph`` (None: no factor > 1,
    no unit schedule in time, or, never expected, a schedule the checker rejects)."""
    f = common_factor(graph, machine)
    if f <= 1:
        return None
    s = solve(unit_graph(graph, machine, f), deadline)
    if s is None:
        return None
    times = {n: p.time * f for n, p in s.ops.items()}
    warps = {n: p.warp for n, p in s.ops.items()}
    return checked(graph, machine, s.ii * f, times, warps, REDUCTION, 0.0, cross_warp_sync)


def interleaved(graph, machine, *, solve, deadline: Deadline, cross_warp_sync: bool = False) -> Incumbent | None:
    """The copies of one copy's schedule interleaved (see the module docstring), checked; None when
    the graph has no interchangeable copies or none of the ways fits."""
    found = replicas(graph, machine)
    if found is None:
        return None
    rest, blocks = found
    keep = set(rest) | set(blocks[0])
    single = graph.replace(name=f"{graph.name}_copy", ops=tuple(o for o in graph.ops if o.name in keep),
                           edges=tuple(e for e in graph.edges if e.src in keep and e.dst in keep))
    ways = _ways(graph, machine, single, len(blocks))
    for i, (copy, on, back) in enumerate(ways):
        if deadline.expired():
            return None
        share = deadline if deadline.limit is None else \
            Deadline(deadline.left() / (2 if i == 0 else len(ways) - i), clock=deadline.clock)
        s = solve(copy, share, on)
        if s is None:
            continue
        warps = {n: back.get(p.warp, p.warp) for n, p in s.ops.items()}
        cand = _interleave(graph, machine, rest, blocks, s.ii, {n: p.time for n, p in s.ops.items()}, warps,
                           deadline, cross_warp_sync)
        if cand is not None:
            return cand
    return None


def _ways(graph, machine, single, k: int) -> list:
    """(copy graph, machine, role renaming back to ``machine``) to solve one copy on, in order: the
    copy as it is; on a machine of interchangeable roles, the copy on u = 1, 2, ... of the R
    fixed-latency roles with 1 / ceil(k * u / R) of the registers, so that the packing can spread
    the copies over all R roles (each role then holds about k * u / R copies' values); and the
    copy with every distance times k, whose values at ii_1 live as long as in the k-copy schedule
    at k * ii_1 (an accumulator for k iterations of the copy), so that the copies can share its
    roles."""
    ways = [(single, machine, {})]
    vl = any(o.variable_latency for o in graph.ops)
    R = machine.warp_groups - (1 if vl else 0)
    if not machine.roles:
        for u in range(1, R):
            narrow = replace(machine, warp_groups=u + (1 if vl else 0),
                             regs_per_thread_max=machine.regs_per_thread_max // -(-k * u // R))
            ways.append((single, narrow, {u: machine.warp_groups - 1} if vl else {}))
    if any(e.distance for e in single.edges):
        ways.append((single.replace(edges=tuple(replace(e, distance=e.distance * k) for e in single.edges)),
                     machine, {}))
    return ways


def _interleave(graph, machine, rest, blocks, p: int, t1: dict, w1: dict, deadline, cross_warp_sync):
    """The k copies of the copy's schedule (times ``t1``, roles ``w1`` at ii ``p``) at offsets of
    ``p`` under k * ``p``, their roles packed (``_pack_roles``); the ops of ``rest`` a later copy
    feeds are moved after it, and re-solved with z3 (everything else fixed) when that breaks a rule."""
    ii = len(blocks) * p
    times = {n: t1[n] for n in rest}
    for c, b in enumerate(blocks):
        times.update({x: t1[a] + c * p for a, x in zip(blocks[0], b)})
    warps = _pack_roles(graph, machine, rest, blocks, ii, times, w1, cross_warp_sync)
    if warps is None:
        return None
    moved = _after_copies(graph, machine, rest, times, warps, ii)
    cand = checked(graph, machine, ii, moved, warps, COPIES, 0.0, cross_warp_sync)
    if cand is None and moved != times and not deadline.expired():
        free = {n for n in rest if moved[n] != times[n]}
        cand = _window(graph, machine, ii, moved, warps, free, deadline, cross_warp_sync)
    return cand


def _pack_roles(graph, machine, rest, blocks, ii, times, w1: dict, cross_warp_sync) -> dict | None:
    """Roles for the copies at fixed ``times``: each copy takes the copy's roles renamed by an
    injective map onto roles of the same kind (the identity first, then in lexicographic order),
    chosen copy by copy, depth first, each choice checked (``model.check``) on ``rest`` and the
    copies placed so far; at most ``PACK_CHECKS`` checks.  Edges from a later copy into ``rest``
    are left out of these checks (``_after_copies`` moves their ends)."""
    vl = machine.warp_groups - 1 if any(o.variable_latency for o in graph.ops) else None
    used = sorted({w1[a] for a in blocks[0] if w1[a] != vl})
    kinds = [r.kind for r in machine.roles] if machine.roles else None
    pool = [r for r in range(machine.warp_groups) if r != vl]
    maps = [dict(zip(used, perm)) for perm in permutations(pool, len(used))
            if kinds is None or all(kinds[w] == kinds[to] for w, to in zip(used, perm))]
    maps.sort(key=lambda mp: (any(mp[w] != w for w in used), [mp[w] for w in used]))
    later = {x for b in blocks[1:] for x in b}
    budget = [PACK_CHECKS]
    warps = {n: w1[n] for n in rest}
    cyc = {op.name: op.cycles for op in graph.ops}

    def fits(c: int) -> bool:
        names = set(rest) | {x for b in blocks[:c + 1] for x in b}
        sub = graph.replace(ops=tuple(o for o in graph.ops if o.name in names),
                            edges=tuple(e for e in graph.edges if e.src in names and e.dst in names
                                        and not (e.src in later and e.dst not in later)))
        budget[0] -= 1
        sched = make_schedule(sub, machine.name, ii, {n: times[n] for n in names}, warps, cyc)
        return not check(sched, sub, machine, cross_warp_sync=cross_warp_sync)

    def place(c: int) -> bool:
        if c == len(blocks):
            return True
        for mp in maps:
            if budget[0] <= 0:
                break
            warps.update({x: mp.get(w1[a], w1[a]) for a, x in zip(blocks[0], blocks[c])})
            if fits(c) and place(c + 1):
                return True
        for x in blocks[c]:
            warps.pop(x, None)
        return False

    return dict(warps) if place(0) else None


def _after_copies(graph, machine, rest, times, warps, ii) -> dict:
    """``times`` with each op of ``rest`` moved, in dependence order, after every producer within
    the iteration (a later copy feeds it later than the first copy did)."""
    t = dict(times)
    inside = set(rest)
    for n in topological_order(graph):
        if n not in inside:
            continue
        need = [t[e.src] + e.delay - e.distance * ii
                + (machine.spill_of(graph.op(e.src)) if warps[e.src] != warps[n] else 0)
                for e in graph.in_edges(n) if e.src != n]
        t[n] = max([t[n]] + need)
    return t


def first_fit_roles(graph, machine, warps: dict) -> dict | None:
    """``warps`` renamed so that the fixed-latency ops take roles in first-fit order (the order the
    z3 model's symmetry breaking keeps: ``smt.JointProblem._warps``); None on a machine of named
    roles, whose roles are not interchangeable."""
    if machine.roles:
        return None
    vl = machine.warp_groups - 1 if any(o.variable_latency for o in graph.ops) else None
    to: dict = {}
    out = {}
    for n in graph.names:
        w = warps[n]
        if graph.op(n).variable_latency:
            out[n] = vl
            continue
        to.setdefault(w, len(to))
        out[n] = to[w]
    return out


def _fixed_model(graph, machine, ii, deadline, cross_warp_sync):
    try:
        return JointProblem(graph, machine, ii, cross_warp_sync=cross_warp_sync, deadline=deadline)
    except SolverTimeoutError:  # out of time while building: no candidate
        return None


def _pin(problem, roles: dict, times: dict) -> None:
    """Fix the role of each op in ``roles`` and the time of each op in ``times``."""
    for n, w in roles.items():
        problem.solver.add(problem.on[n][problem.roles.index(w)])
    for n, t in times.items():
        problem.solver.add(problem.t[n] == t)


def _window(graph, machine, ii, times, warps, free, deadline, cross_warp_sync):
    """Re-solve the ops of ``free`` exactly (times and roles) with every other op's time and role fixed."""
    roles = first_fit_roles(graph, machine, warps)
    problem = _fixed_model(graph, machine, ii, deadline, cross_warp_sync)
    if problem is None:
        return None
    base = min(times.values()) // ii * ii
    fixed = [n for n in graph.names if n not in free]
    _pin(problem, {} if roles is None else {n: roles[n] for n in fixed}, {n: times[n] - base for n in fixed})
    r = problem.solve(deadline=deadline, rlimit=WINDOW_RLIMIT, minimize_core=False)
    if r.status != "sat":
        return None
    return checked(graph, machine, ii, r.times, r.warps, COPIES, 0.0, cross_warp_sync)
