"""A fast, deterministic incumbent: iterative modulo scheduling with the joint constraints.

The exact search (``smt.JointProblem``) has to *find* a schedule at the
optimal ii and *prove* every smaller ii impossible.  Finding is what grows
fastest with the graph (20 ops: seconds, 30 ops: minutes), and on
FlashAttention-class graphs the optimum is usually the resource bound.  So
the search first asks this heuristic for a schedule: when it reaches the
lower bound, optimality is proven without a single z3 query; otherwise z3
only has to refute the ii below the incumbent, and when time runs out the
incumbent is the anytime answer.

For one ii and one warp assignment, ``modulo_schedule`` is Rau's iterative
modulo scheduling (IMS, MICRO 1994) extended to the joint rules: ops in
order of height (longest latency path to a sink, spills included), each at
the first cycle of ``[Estart, Estart + ii)`` where its reservation fits the
modulo reservation table (rule 2), no blocking wait on its warp collides
with an executing op (rule 4) and no scheduled successor is violated (rule
1); when no cycle fits, it is forced and the ops it conflicts with are
evicted, within a budget of placements.  Registers and memory (rules 5, 6)
are left to the independent checker, which decides every candidate.

Warp assignments (``warp_candidates``): variable-latency ops on the last
role (rule 3); the other ops by a few deterministic seeds (one role per
connected component, per unit, per component and unit, all on one role).
A candidate whose schedule breaks the register limit is repaired: the
largest value on the overloaded role moves to the role with the least
pressure, and the ii is scheduled again (a few rounds).

``incumbent`` walks ii up from the lower bound (lb, lb+1, lb+2, then
doubling steps), then bisects back between the last failure and the first
success.  Deterministic: no randomness, no clock in any decision except the
deadline, which only cuts the walk short.  Feasibility is not monotone in ii
(reservation patterns and blocking waits), so nothing here is a proof: the
incumbent is an upper bound only.
"""
from __future__ import annotations

import random
import time as _time
from dataclasses import dataclass

from ..model import check, make_schedule
from .symmetry import components

#: IMS placement budget per op (Rau's BudgetRatio).
BUDGET_RATIO = 6
#: Seeded restarts (jittered priorities, shuffled role order) after the fixed seeds.
RESTARTS = 6
#: Register-repair rounds per warp seed.
REPAIR_ROUNDS = 4


@dataclass(frozen=True)
class Incumbent:
    """A checked schedule from the heuristic: its ii, times, warps and how it was found."""

    ii: int
    length: int
    times: dict
    warps: dict
    seed: str
    seconds: float


def warp_candidates(graph, machine) -> list[tuple[str, dict]]:
    """Deterministic warp-assignment seeds with rule 3 applied: (name, op -> warp, op -> candidate
    roles or None, register budget); the first two choose roles while scheduling."""
    W = machine.warp_groups
    vl = [o.name for o in graph.ops if o.variable_latency]
    fixed = [o.name for o in graph.ops if not o.variable_latency]
    K = W - 1 if vl else W
    if K < 1 or (vl and W < 2):
        return []
    base = {n: W - 1 for n in vl}
    comps = components(fixed, graph.edges)
    comp_of = {n: i for i, c in enumerate(comps) for n in c}
    usage: dict = {}
    for n in fixed:
        op = graph.op(n)
        usage[op.unit] = usage.get(op.unit, 0) + op.cycles
    units = sorted(usage, key=lambda u: (-usage[u], u))
    seeds = []

    def add(name, key):
        keys = []
        for n in fixed:
            k = key(n)
            if k not in keys:
                keys.append(k)
        w = dict(base)
        w.update({n: keys.index(key(n)) % K for n in fixed})
        if all(w != s[1] for s in seeds):
            seeds.append((name, w, None, False))

    dyn = {n: tuple(range(K)) for n in fixed}
    seeds.append(("greedy roles", dict(base), dyn, False))
    seeds.append(("greedy roles, register budget", dict(base), dyn, True))
    seeds.append(("greedy roles, fewest spills", dict(base), dyn, "spills"))
    for i in range(RESTARTS):
        seeds.append((f"greedy roles, restart {i}", dict(base), dyn, ("restart", i)))
    add("components", lambda n: comp_of[n])
    add("units", lambda n: units.index(graph.op(n).unit))
    add("component x unit", lambda n: (comp_of[n], graph.op(n).unit))
    add("one role", lambda n: 0)
    return seeds


def _latency(e, spill, w_src, w_dst, ii) -> int:
    """t_dst - t_src >= this (rule 1), the spill only across warps."""
    return e.delay + (spill if w_src != w_dst else 0) - e.distance * ii


def _heights(graph, machine, ii, warps) -> dict | None:
    """Longest latency path from each op to the end (its cycles at a sink), spills counted where
    both warps are fixed; None on a positive cycle (a recurrence that cannot close at ii)."""
    h = {o.name: o.cycles for o in graph.ops}
    lat = []
    for e in graph.edges:
        ws, wd = warps.get(e.src), warps.get(e.dst)
        cross = ws is not None and wd is not None and ws != wd
        lat.append((e.src, e.dst, _latency(e, machine.spill_of(graph.op(e.src)), 0, int(cross), ii)))
    for _ in range(len(h) + 1):
        changed = False
        for s, d, delay in lat:
            if h[d] + delay > h[s]:
                h[s] = h[d] + delay
                changed = True
        if not changed:
            return h
    return None


def modulo_schedule(graph, machine, ii: int, warps: dict, *, cross_warp_sync: bool = False,
                    choices: dict | None = None, reg_budget: bool = False, spill_first: bool = False,
                    perturb: int | None = None):
    """(times, warps) meeting rules 1-4 at ``ii``, or None (IMS, see the module doc).

    ``warps`` fixes ops' roles; an op in ``choices`` (op -> candidate roles)
    gets, when it is placed, the candidate role with the earliest fitting
    cycle (ties: fewest spills from scheduled producers, then candidate
    order); with ``reg_budget`` a role whose ops' registers would sum above
    the limit is taken only when no other fits."""
    choices = choices or {}
    ii = int(ii)
    cap = dict(machine.units)
    names = graph.names
    cyc = {o.name: o.cycles for o in graph.ops}
    regs = {o.name: o.regs for o in graph.ops}
    res = {o.name: [(j, u, k) for j, row in enumerate(o.reservation()) for u, k in row] for o in graph.ops}
    for r in res.values():
        if any(k > cap.get(u, 0) for _, u, k in r):
            return None
    simple = {n: len({u for _, u, _ in r}) == 1 and all(k == 1 for _, _, k in r) and
              [j for j, _, _ in r] == list(range(len(r))) for n, r in res.items()}
    sp = {o.name: machine.spill_of(o) for o in graph.ops}
    ins = {n: [e for e in graph.in_edges(n)] for n in names}
    outs = {n: [e for e in graph.out_edges(n)] for n in names}
    h = _heights(graph, machine, ii, warps)
    if h is None:
        return None
    idx = {n: i for i, n in enumerate(names)}
    if perturb is None:
        rank = {n: i for i, n in enumerate(sorted(names, key=lambda n: (-h[n], idx[n])))}
    else:  # a seeded restart: heights jittered by up to ii/4, candidate roles shuffled
        rnd = random.Random(perturb)
        jitter = {n: rnd.randrange(max(1, ii // 4)) for n in names}
        rank = {n: i for i, n in enumerate(sorted(names, key=lambda n: (-h[n] - jitter[n], idx[n])))}
        choices = {n: tuple(rnd.sample(c, len(c))) for n, c in choices.items()}
    mrt = {u: [0] * ii for u in cap}
    occupant = {u: [[] for _ in range(ii)] for u in cap}
    t: dict = {}
    w: dict = dict(warps)
    last: dict = {}

    def is_bdst(x, wx):
        return any(e.blocking or (cross_warp_sync and e.src in t and e.src != x and w[e.src] != wx)
                   for e in ins[x])

    def blocking_conflicts(n, k, time):
        out = []
        n_b = is_bdst(n, k)
        for o in t:
            if o == n or w[o] != k:
                continue
            if n_b and cyc[o] and (time - t[o]) % ii < cyc[o]:
                out.append(o)
            elif cyc[n] and (t[o] - time) % ii < cyc[n] and is_bdst(o, k):
                out.append(o)
        return out

    def first_fit(n, k, est, lst):
        time = est
        while time <= lst:
            jump = None
            for j, u, q in res[n]:
                if mrt[u][(time + j) % ii] + q > cap[u]:
                    jump = time + j + 1 if simple[n] else time + 1
                    break
            if jump is not None:
                time = jump
                continue
            if not blocking_conflicts(n, k, time):
                return time
            time += 1
        return None

    def bounds(n, k):
        est = max([0] + [t[e.src] + _latency(e, sp[e.src], w[e.src], k, ii)
                         for e in ins[n] if e.src in t and e.src != n])
        lst = min([est + ii - 1] + [t[e.dst] - _latency(e, sp[n], k, w[e.dst], ii)
                                    for e in outs[n] if e.dst in t and e.dst != n])
        return est, lst

    limit = machine.regs_per_thread_max
    budget = BUDGET_RATIO * len(names) + len(names)
    unscheduled = set(names)
    while unscheduled:
        if budget <= 0:
            return None
        budget -= 1
        n = min(unscheduled, key=rank.__getitem__)
        cands = choices.get(n, (w.get(n),))
        best = None
        for pos, k in enumerate(cands):
            est, lst = bounds(n, k)
            time = first_fit(n, k, est, lst)
            if time is None:
                continue
            over = reg_budget and regs[n] and sum(regs[o] for o in t if w[o] == k) + regs[n] > limit
            spills = sum(1 for e in ins[n] if e.src in t and w[e.src] != k)
            key = (bool(over), spills, time, pos) if spill_first else (bool(over), time, spills, pos)
            if best is None or key < best[0]:
                best = (key, k, time)
        if best is not None:
            _, k, chosen = best
        else:
            k = w.get(n)
            if k is None:  # forced: keep the role it had, else the first candidate
                k = cands[0]
            est, _ = bounds(n, k)
            chosen = est if n not in last or last[n] < est else last[n] + 1
            evict = set(blocking_conflicts(n, k, chosen))
            for j, u, q in res[n]:
                r = (chosen + j) % ii
                if mrt[u][r] + q > cap[u]:
                    evict.update(occupant[u][r])
            for e in outs[n]:
                if e.dst in t and e.dst != n and t[e.dst] < chosen + _latency(e, sp[n], k, w[e.dst], ii):
                    evict.add(e.dst)
            evict.discard(n)
            for o in sorted(evict, key=idx.__getitem__):
                time = t.pop(o)
                for j, u, q in res[o]:
                    mrt[u][(time + j) % ii] -= q
                    occupant[u][(time + j) % ii].remove(o)
                unscheduled.add(o)
        w[n] = k
        t[n] = chosen
        for j, u, q in res[n]:
            mrt[u][(chosen + j) % ii] += q
            occupant[u][(chosen + j) % ii].append(n)
        last[n] = chosen
        unscheduled.discard(n)
    base = min(t.values()) // ii * ii
    return {n: t[n] - base for n in names}, w


def _warp_pressure(graph, machine, ii, times, warps):
    """(warp, peak registers, the ops live at the peak slot) of the most loaded warp over the limit, or None."""
    live = {}
    for o in graph.ops:
        ends = [times[e.dst] + e.distance * ii for e in graph.out_edges(o.name)]
        if ends and o.regs and max(ends) > times[o.name]:
            live[o.name] = (times[o.name], max(ends))
    worst = None
    for w in sorted(set(warps.values())):
        ops = [n for n in live if warps[n] == w]
        for r in range(ii):  # pressure changes only where an interval starts; check those slots
            if not any(live[n][0] % ii == r for n in ops):
                continue
            tot, at = 0, []
            for n in ops:
                s, e = live[n]
                # live instances at any tau = r (mod ii) in the steady state
                cnt = (e - s) // ii + (1 if (r - s) % ii < (e - s) % ii else 0)
                if cnt:
                    tot += cnt * graph.op(n).regs
                    at.append(n)
            if tot > machine.regs_per_thread_max and (worst is None or tot > worst[1]):
                worst = (w, tot, at)
    return worst


def register_peak(graph, ii: int, times: dict, warps: dict) -> int:
    """The largest per-warp register pressure of a schedule over the steady state (rule 5's measure)."""
    live = {}
    for o in graph.ops:
        ends = [times[e.dst] + e.distance * ii for e in graph.out_edges(o.name)]
        if ends and o.regs and max(ends) > times[o.name]:
            live[o.name] = (times[o.name], max(ends))
    peak = 0
    for r in sorted({s % ii for s, _ in live.values()}):
        per: dict = {}
        for n, (s, e) in live.items():
            cnt = (e - s) // ii + (1 if (r - s) % ii < (e - s) % ii else 0)
            per[warps[n]] = per.get(warps[n], 0) + cnt * graph.op(n).regs
        peak = max([peak] + list(per.values()))
    return peak


def try_ii(graph, machine, ii: int, *, cross_warp_sync: bool = False, seeds=None):
    """A checked (times, warps, seed name) at ``ii``, or None."""
    W = machine.warp_groups
    vl = any(o.variable_latency for o in graph.ops)
    K = W - 1 if vl else W
    cyc = {o.name: o.cycles for o in graph.ops}
    for name, warps, choices, reg_budget in (seeds if seeds is not None else warp_candidates(graph, machine)):
        warps = dict(warps)
        for round_ in range(REPAIR_ROUNDS + 1):
            restart = reg_budget[1] if isinstance(reg_budget, tuple) else None
            r = modulo_schedule(graph, machine, ii, warps, cross_warp_sync=cross_warp_sync,
                                choices=choices if round_ == 0 else None, reg_budget=reg_budget is True,
                                spill_first=reg_budget == "spills",
                                perturb=None if restart is None else ii * 7919 + restart)
            if r is None:
                break
            times, warps = r
            s = make_schedule(graph, machine.name, ii, times, warps, cyc)
            bad = check(s, graph, machine, cross_warp_sync=cross_warp_sync)
            if not bad:
                return times, warps, name + (f" + {round_} repair(s)" if round_ else "")
            if any(v.rule != 5 for v in bad) or round_ == REPAIR_ROUNDS:
                break
            worst = _warp_pressure(graph, machine, ii, times, warps)
            if worst is None:
                break
            w, _, at = worst
            # move the largest value off the overloaded role, to the role holding the fewest registers
            mover = max(at, key=lambda n: (graph.op(n).regs, -graph.index(n)))
            load = {k: sum(graph.op(n).regs for n in warps if warps[n] == k and not graph.op(n).variable_latency)
                    for k in range(K)}
            target = min((k for k in range(K) if k != w), key=lambda k: (load[k], k), default=None)
            if target is None:
                break
            warps[mover] = target
    return None


def incumbent(graph, machine, lb: int, max_ii: int, *, stop=None,
              cross_warp_sync: bool = False) -> Incumbent | None:
    """The heuristic's best schedule with ii in [lb, max_ii], or None (see the module doc).

    ``stop``: a callable; when it returns true the walk ends with what it has."""
    start = _time.perf_counter()
    seeds = warp_candidates(graph, machine)
    if not seeds:
        return None

    def out_of_time():
        return stop is not None and stop()

    found = None
    failed = lb - 1
    step, ii = 1, lb
    while ii <= max_ii and not out_of_time():
        r = try_ii(graph, machine, ii, cross_warp_sync=cross_warp_sync, seeds=seeds)
        if r is not None:
            found = (ii, r)
            break
        failed = ii
        ii = min(max_ii, ii + step) if ii < max_ii else max_ii + 1
        if ii - lb >= 2:
            step *= 2
    if found is None:
        return None
    # bisect back between the last failure and the success (a heuristic: no claim in between)
    lo, hi = failed + 1, found[0]
    while lo < hi and not out_of_time():
        mid = (lo + hi) // 2
        r = try_ii(graph, machine, mid, cross_warp_sync=cross_warp_sync, seeds=seeds)
        if r is not None:
            found, hi = (mid, r), mid
        else:
            lo = mid + 1
    ii, (times, warps, seed) = found
    length = max(times[o.name] + o.cycles for o in graph.ops)
    return Incumbent(ii, length, times, warps, seed, _time.perf_counter() - start)
