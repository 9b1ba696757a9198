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

Magnitudes.  The reservation table is ``mrt.ModuloTable``: placed runs as
arcs modulo ii, the earliest fitting cycle found by a sweep over forbidden
arcs (blocking waits too), never a loop over cycles or slots; roles are
``symmetry.role_ids`` (at most one per op), never one per warp group of the
machine.  So an op of 2**31-1 cycles, a delay of 2**31-1 or a machine of
2**31-1 warp groups costs what small ones do.  ``stop`` (the deadline) is
polled between attempts and every ``STOP_EVERY`` placements.

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
from .mrt import ModuloTable, op_runs
from .symmetry import components, role_ids

#: IMS placement budget per op (Rau's BudgetRatio).
BUDGET_RATIO = 6
#: Seeded restarts (jittered priorities, shuffled role order) after the fixed seeds.
RESTARTS = 6
#: Register-repair rounds per warp seed.
REPAIR_ROUNDS = 4
#: ``modulo_schedule`` polls its ``stop`` callable once per this many placements.
STOP_EVERY = 32


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
    if vl and W < 2:
        return []
    K = len(role_ids(graph, machine)) - (1 if vl else 0)  # roles past the number of ops never help
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
        fits = all(machine.role_takes(w[n], graph.op(n)) for n in fixed)  # named roles: widths must match
        if fits and all(w != s[1] for s in seeds):
            seeds.append((name, w, None, False))

    dyn = {n: tuple(k for k in range(K) if machine.role_takes(k, graph.op(n))) for n in fixed}
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
                    perturb: int | None = None, stop=None):
    """(times, warps) meeting rules 1-4 at ``ii``, or None (IMS, see the module doc).

    ``warps`` fixes ops' roles; an op in ``choices`` (op -> candidate roles)
    gets, when it is placed, the candidate role with the earliest fitting
    cycle (ties: fewest spills from scheduled producers, then candidate
    order); with ``reg_budget`` a role whose ops' registers would sum above
    the limit is taken only when no other fits.  The reservation table is
    ``mrt.ModuloTable`` (intervals), so the cost does not depend on ii or on
    the cycle counts.  ``stop``: a callable polled every ``STOP_EVERY``
    placements (the first one included); when it returns true the attempt
    ends with None."""
    ii = int(ii)
    cap = dict(machine.units)
    names = graph.names
    runs = {o.name: op_runs(o) for o in graph.ops}
    if any(k > cap.get(u, 0) for r in runs.values() for _, _, u, k in r):
        return None
    h = _heights(graph, machine, ii, warps)
    if h is None:
        return None
    rank, choices = _ranks(names, h, ii, choices or {}, perturb)
    state = _Placer(graph, machine, ii, dict(warps), runs, cross_warp_sync)
    budget = total = BUDGET_RATIO * len(names) + len(names)
    unscheduled = set(names)
    while unscheduled:
        if budget <= 0 or (stop is not None and (total - budget) % STOP_EVERY == 0 and stop()):
            return None
        budget -= 1
        n = min(unscheduled, key=rank.__getitem__)
        k, chosen = state.choose(n, choices.get(n, (state.w.get(n),)), reg_budget, spill_first)
        unscheduled |= state.place(n, k, chosen)
        unscheduled.discard(n)
    t = state.t
    base = min(t.values()) // ii * ii
    return {n: t[n] - base for n in names}, state.w


def _ranks(names, h, ii, choices, perturb):
    """Placement priority (height, then graph order) and the candidate roles; a seeded restart
    jitters heights by up to ii/4 and shuffles each op's candidate roles."""
    idx = {n: i for i, n in enumerate(names)}
    if perturb is None:
        return {n: i for i, n in enumerate(sorted(names, key=lambda n: (-h[n], idx[n])))}, choices
    rnd = random.Random(perturb)
    jitter = {n: rnd.randrange(max(1, ii // 4)) for n in names}
    rank = {n: i for i, n in enumerate(sorted(names, key=lambda n: (-h[n] - jitter[n], idx[n])))}
    return rank, {n: tuple(rnd.sample(c, len(c))) for n, c in choices.items()}


class _Placer:
    """The partial schedule of one IMS attempt: times, roles, the reservation table."""

    def __init__(self, graph, machine, ii, warps, runs, cross_warp_sync):
        self.g, self.ii, self.w, self.runs, self.cws = graph, ii, warps, runs, cross_warp_sync
        self.table = ModuloTable(ii, machine.units)
        self.cyc = {o.name: o.cycles for o in graph.ops}
        self.regs = {o.name: o.regs for o in graph.ops}
        self.sp = {o.name: machine.spill_of(o) for o in graph.ops}
        self.ins = {n: graph.in_edges(n) for n in graph.names}
        self.outs = {n: graph.out_edges(n) for n in graph.names}
        self.idx = {n: i for i, n in enumerate(graph.names)}
        self.limits = machine.role_regs  # a named role's own budget (FA4's split), else the maximum
        self.t: dict = {}
        self.last: dict = {}

    def is_bdst(self, x, wx) -> bool:
        t, w = self.t, self.w
        return any(e.blocking or (self.cws and e.src in t and e.src != x and w[e.src] != wx) for e in self.ins[x])

    def blocking_arcs(self, n, k) -> list:
        """Arcs of issue times of ``n`` on role ``k`` that break rule 4 against a placed op."""
        arcs, ii, cyc = [], self.ii, self.cyc
        n_b = self.is_bdst(n, k)
        for o, to in self.t.items():
            if o == n or self.w[o] != k:
                continue
            if n_b and cyc[o]:  # n waits while an instance of o executes: (t - t_o) mod ii < c_o
                arcs.append((to % ii, cyc[o]))
            if cyc[n] and self.is_bdst(o, k):  # o waits while n executes: (t_o - t) mod ii < c_n
                arcs.append(((to - cyc[n] + 1) % ii, cyc[n]))
        return arcs

    def blocking_conflicts(self, n, k, time) -> list:
        ii, cyc = self.ii, self.cyc
        n_b = self.is_bdst(n, k)
        return [o for o, to in self.t.items() if o != n and self.w[o] == k and
                ((n_b and cyc[o] and (time - to) % ii < cyc[o]) or
                 (cyc[n] and (to - time) % ii < cyc[n] and self.is_bdst(o, k)))]

    def bounds(self, n, k):
        t, w, sp = self.t, self.w, self.sp
        est = max([0] + [t[e.src] + _latency(e, sp[e.src], w[e.src], k, self.ii)
                         for e in self.ins[n] if e.src in t and e.src != n])
        lst = min([est + self.ii - 1] + [t[e.dst] - _latency(e, sp[n], k, w[e.dst], self.ii)
                                         for e in self.outs[n] if e.dst in t and e.dst != n])
        return est, lst

    def choose(self, n, cands, reg_budget, spill_first):
        """(role, time) for ``n``: the best fitting candidate, else forced (time None)."""
        best = None
        for pos, k in enumerate(cands):
            est, lst = self.bounds(n, k)
            time = self.table.first_fit(self.runs[n], est, lst, self.blocking_arcs(n, k)) if est <= lst else None
            if time is None:
                continue
            over = reg_budget and self.regs[n] and \
                sum(self.regs[o] for o in self.t if self.w[o] == k) + self.regs[n] > self.limits(k)
            spills = sum(1 for e in self.ins[n] if e.src in self.t and self.w[e.src] != k)
            key = (bool(over), spills, time, pos) if spill_first else (bool(over), time, spills, pos)
            if best is None or key < best[0]:
                best = (key, k, time)
        if best is not None:
            return best[1], best[2]
        k = self.w.get(n)
        return (cands[0] if k is None else k), None  # forced: keep the role it had, else the first candidate

    def place(self, n, k, chosen) -> set:
        """Place ``n`` on role ``k`` at ``chosen`` (None: forced, evicting what it conflicts with);
        return the evicted ops."""
        evict = set()
        if chosen is None:
            est, _ = self.bounds(n, k)
            chosen = est if n not in self.last or self.last[n] < est else self.last[n] + 1
            evict = set(self.blocking_conflicts(n, k, chosen)) | self.table.conflicts(self.runs[n], chosen)
            for e in self.outs[n]:
                if e.dst in self.t and e.dst != n and \
                        self.t[e.dst] < chosen + _latency(e, self.sp[n], k, self.w[e.dst], self.ii):
                    evict.add(e.dst)
            evict.discard(n)
            for o in sorted(evict, key=self.idx.__getitem__):
                del self.t[o]
                self.table.remove(o)
        self.w[n] = k
        self.t[n] = chosen
        self.table.place(n, chosen, self.runs[n])
        self.last[n] = chosen
        return evict


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
        for r in sorted({live[n][0] % ii for n in ops}):  # pressure rises only where an interval starts
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


def try_ii(graph, machine, ii: int, *, cross_warp_sync: bool = False, seeds=None, stop=None):
    """A checked (times, warps, seed name) at ``ii``, or None (also when ``stop()`` turns true)."""
    vl = any(o.variable_latency for o in graph.ops)
    K = len(role_ids(graph, machine)) - (1 if vl else 0)
    cyc = {o.name: o.cycles for o in graph.ops}
    for name, warps, choices, reg_budget in (seeds if seeds is not None else warp_candidates(graph, machine)):
        warps = dict(warps)
        for round_ in range(REPAIR_ROUNDS + 1):
            restart = reg_budget[1] if isinstance(reg_budget, tuple) else None
            r = modulo_schedule(graph, machine, ii, warps, cross_warp_sync=cross_warp_sync,
                                choices=choices if round_ == 0 else None, reg_budget=reg_budget is True,
                                spill_first=reg_budget == "spills",
                                perturb=None if restart is None else ii * 7919 + restart, stop=stop)
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
        r = try_ii(graph, machine, ii, cross_warp_sync=cross_warp_sync, seeds=seeds, stop=stop)
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
        r = try_ii(graph, machine, mid, cross_warp_sync=cross_warp_sync, seeds=seeds, stop=stop)
        if r is not None:
            found, hi = (mid, r), mid
        else:
            lo = mid + 1
    ii, (times, warps, seed) = found
    length = max(times[o.name] + o.cycles for o in graph.ops)
    return Incumbent(ii, length, times, warps, seed, _time.perf_counter() - start)
