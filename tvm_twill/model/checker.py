"""The independent schedule checker: rules 1-6 of docs/formats.md.

It shares no code with any solver.  Its cost does not depend on the
magnitudes of cycles, delays, distances or ii: every op's reservation and
every live value is an interval of cycles, and the instances of an interval
[start, start + length) issued every ii cycles cover each slot r (mod ii)
``length // ii`` times, plus once on the residue interval
[start mod ii, start mod ii + length mod ii) (wrapping around).  Per unit,
warp or memory the load over [0, ii) is therefore piecewise constant with
breakpoints only at interval ends, and is evaluated segment by segment.  So a
solver encoding bug shows up here as a Violation.
``check`` returns every violation (empty list = valid); ``verify`` raises.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

from .families import Family

#: A run of slots that break the same rule with the same total is reported
#: slot by slot up to this many slots, then as one range ``slots a..b``.
SLOTS_LISTED = 8

RULES = {0: "structure", **Family.BY_RULE}


@dataclass(frozen=True)
class Violation:
    rule: int
    message: str

    def __str__(self) -> str:
        return f"rule {self.rule} ({RULES[self.rule]}): {self.message}"


def live_intervals(graph, times: dict, ii: int) -> dict:
    """[start, end) of each op's value: end = latest time[c] + distance*ii of a consumer.

    An op without consumers holds nothing (no entry)."""
    out = {}
    for op in graph.ops:
        ends = [times[e.dst] + e.distance * ii for e in graph.out_edges(op.name)]
        if ends:
            out[op.name] = (times[op.name], max(ends))
    return out


def live_instances(start: int, end: int, ii: int, tau: int) -> int:
    """How many instances k (start + k*ii <= tau < end + k*ii) are live at time tau.

    k <= (tau - start) / ii and k > (tau - end) / ii: a difference of floors."""
    if end <= start:
        return 0
    return (tau - start) // ii - (tau - end) // ii


def register_peaks(schedule, graph) -> dict:
    """Peak registers per thread held by each warp role over the steady state (rule 5's measure): role -> registers.

    What the setmaxnreg budgets of a warp-specialized kernel are checked against (``warpspec``)."""
    times = {n: p.time for n, p in schedule.ops.items()}
    live = live_intervals(graph, times, schedule.ii)
    peaks = {w: 0 for w in schedule.warps_used()}
    # live_instances counts every instance k (negative ones too), so the
    # pressure is periodic in tau; it only rises where an interval starts,
    # so the interval starts modulo ii are the only points to evaluate.
    for tau in sorted({start % schedule.ii for start, _ in live.values()}):
        held = {}
        for name, (start, end) in live.items():
            w = schedule.ops[name].warp
            held[w] = held.get(w, 0) + live_instances(start, end, schedule.ii, tau) * graph.op(name).regs
        for w, r in held.items():
            peaks[w] = max(peaks[w], r)
    return peaks


def modulo_load(runs, ii: int) -> list[tuple[int, int, int]]:
    """The load on slots [0, ii) of intervals repeated every ii cycles.

    ``runs``: (start, length, weight), each instance k covering
    [start + k*ii, start + length + k*ii) with ``weight``.  Returns the
    piecewise-constant total as maximal segments (lo, hi, total), lo < hi,
    covering [0, ii) in order.  Cost O(n log n), whatever the magnitudes."""
    base = 0
    delta: dict[int, int] = {}
    for start, length, weight in runs:
        if length <= 0 or not weight:
            continue
        full, rem = divmod(length, ii)
        base += full * weight
        if not rem:
            continue
        s = start % ii
        e = s + rem
        delta[s] = delta.get(s, 0) + weight
        if e < ii:
            delta[e] = delta.get(e, 0) - weight
        elif e > ii:  # wraps: also covers [0, e - ii)
            base += weight
            delta[e - ii] = delta.get(e - ii, 0) - weight
    points = sorted(p for p in delta if p)
    out: list[tuple[int, int, int]] = []
    cur = base + delta.get(0, 0)
    lo = 0
    for p in points:
        nxt = cur + delta[p]
        if nxt != cur:
            out.append((lo, p, cur))
            lo, cur = p, nxt
    out.append((lo, ii, cur))
    return out


def _slots(lo: int, hi: int):
    """The slot phrases of a segment [lo, hi): one per slot when short, else one range."""
    if hi - lo <= SLOTS_LISTED:
        return [(r, f"slot {r}") for r in range(lo, hi)]
    return [(lo, f"slots {lo}..{hi - 1}")]


def check(schedule, graph, machine, *, cross_warp_sync: bool = False) -> list[Violation]:
    """Every violation of rules 1-6 (and of the schedule's own structure).

    ``cross_warp_sync``: also treat every edge whose ends are on different
    warps as blocking (the consumer waits on the shared-memory hand-off; the
    paper's elided constraint).  Off by default: rules 1-6 exactly.
    """
    v, fatal = _structure(schedule, graph, machine)
    if fatal:
        return v
    ii, P = schedule.ii, schedule.ops
    t = {n: P[n].time for n in graph.names}
    w = {n: P[n].warp for n in graph.names}
    v += _dependence(graph, machine, t, w, ii)
    v += _resources(graph, machine, t, ii)
    v += _variable_latency(graph, w)
    v += _blocking(graph, t, w, ii, cross_warp_sync)
    v += _capacities(graph, machine, t, w, ii)
    return v


def _structure(schedule, graph, machine) -> tuple[list[Violation], bool]:
    """Rule 0: the schedule's own structure; (violations, fatal: the rules cannot be checked at all)."""
    ii = schedule.ii
    if isinstance(ii, bool) or not isinstance(ii, int) or ii < 1:
        return [Violation(0, f"ii must be an integer >= 1, got {ii!r}")], True
    names = set(graph.names)
    if set(schedule.ops) != names:
        missing, extra = sorted(names - set(schedule.ops)), sorted(set(schedule.ops) - names)
        return [Violation(0, f"schedule ops do not match graph ops (missing {missing}, unknown {extra})")], True
    v: list[Violation] = []
    P = schedule.ops
    cyc = {op.name: op.cycles for op in graph.ops}
    for n in graph.names:
        p = P[n]
        if isinstance(p.time, bool) or not isinstance(p.time, int) or p.time < 0:
            v.append(Violation(0, f"op '{n}' time must be an integer >= 0, got {p.time!r}"))
            return v, True
        if p.stage != p.time // ii:
            v.append(Violation(0, f"op '{n}' stage is {p.stage} but time {p.time} // ii {ii} = {p.time // ii}"))
        if not (0 <= p.warp < machine.warp_groups):
            v.append(Violation(0, f"op '{n}' warp {p.warp} is outside [0, {machine.warp_groups})"))
        elif not machine.role_takes(p.warp, graph.op(n)):
            role = machine.roles[p.warp]
            v.append(Violation(0, f"op '{n}' is issued by {graph.op(n).warps} warp(s), role '{role.name}' has "
                                  f"{role.warps}" + ("" if role.in_loop else " and issues no op of the loop")))
        if schedule.cycles.get(n, cyc[n]) != cyc[n]:
            v.append(Violation(0, f"op '{n}' cycles {schedule.cycles.get(n)} differ from the graph's {cyc[n]}"))
    if sorted(p.order for p in P.values()) != list(range(len(names))):
        v.append(Violation(0, "orders must be a permutation of 0..n-1"))
    length = max(P[n].time + cyc[n] for n in names)
    if schedule.length != length:
        v.append(Violation(0, f"length is {schedule.length} but the last op ends at {length}"))
    return v, False


def _dependence(graph, machine, t: dict, w: dict, ii: int) -> list[Violation]:
    """Rule 1: every edge's delay (with the cross-warp spill cost) and distance."""
    v = []
    for e in graph.edges:
        s = machine.spill_of(graph.op(e.src)) if w[e.src] != w[e.dst] else 0
        if t[e.dst] + e.distance * ii < t[e.src] + e.delay + s:
            v.append(Violation(1, f"edge {e.src}->{e.dst}: time[{e.dst}] + {e.distance}*ii = "
                                  f"{t[e.dst] + e.distance * ii} < time[{e.src}] + delay {e.delay}"
                                  f" + spill {s} = {t[e.src] + e.delay + s}"))
    return v


def _resources(graph, machine, t: dict, ii: int) -> list[Violation]:
    """Rule 2: modulo resource capacity (run-length reservations, interval arithmetic)."""
    v = []
    runs_of = {op.name: op.reservation_runs() for op in graph.ops}
    for unit, cap in machine.units.items():
        runs = [(t[op.name] + off, length, k)
                for op in graph.ops for off, length, row in runs_of[op.name]
                for u, k in row if u == unit]
        for lo, hi, total in modulo_load(runs, ii):
            if total > cap:
                for _, where in _slots(lo, hi):
                    v.append(Violation(2, f"unit {unit} at {where} (mod ii {ii}) holds {total} > capacity {cap}"))
    return v


def _variable_latency(graph, w: dict) -> list[Violation]:
    """Rule 3: the variable-latency ops share one warp, and it runs nothing else."""
    v = []
    vl = [op.name for op in graph.ops if op.variable_latency]
    if vl:
        vl_warps = {w[n] for n in vl}
        if len(vl_warps) > 1:
            v.append(Violation(3, f"variable-latency ops {vl} are on warps {sorted(vl_warps)}, not one warp"))
        for op in graph.ops:
            if not op.variable_latency and w[op.name] in vl_warps:
                v.append(Violation(3, f"fixed-latency op '{op.name}' is on the variable-latency warp {w[op.name]}"))
    return v


def _blocking(graph, t: dict, w: dict, ii: int, cross_warp_sync: bool) -> list[Violation]:
    """Rule 4: a blocking wait never lands while another op of its warp executes."""
    v = []
    cyc = {op.name: op.cycles for op in graph.ops}
    blocking = [e for e in graph.edges if e.blocking or (cross_warp_sync and w[e.src] != w[e.dst])]
    running = _executing(graph, t, w, ii, {e.dst for e in blocking})
    for e in blocking:
        dst = e.dst
        for o in running[dst]:
            c = cyc[o]
            k = (t[dst] - t[o] - c) // ii + 1  # the first instance still executing at time[dst]
            start = t[o] + k * ii
            v.append(Violation(4, f"'{dst}' waits on {e.src} at {t[dst]} while '{o}' "
                                  f"(instance {k}) executes on the same warp {w[dst]} "
                                  f"during [{start}, {start + c})"))
    return v


def _capacities(graph, machine, t: dict, w: dict, ii: int) -> list[Violation]:
    """Rule 5, registers per warp, and rule 6, shared and tensor memory: live values are intervals.

    In slot order, then warps, smem, tmem."""
    live = live_intervals(graph, t, ii)
    regs: dict[int, list] = {}
    mem: dict[str, list] = {"smem": [], "tmem": []}
    for name, (s0, e0) in live.items():
        op = graph.op(name)
        if e0 <= s0:
            continue
        regs.setdefault(w[name], []).append((s0, e0 - s0, op.regs))
        mem["smem"].append((s0, e0 - s0, op.smem))
        mem["tmem"].append((s0, e0 - s0, op.tmem))
    found = []  # ((slot, kind, warp), violation)
    for warp, runs in sorted(regs.items()):
        cap = machine.role_regs(warp)  # a named role's budget (FA4's setmaxnreg split), else the maximum
        for lo, hi, total in modulo_load(runs, ii):
            if total > cap:
                for r, where in _slots(lo, hi):
                    found.append(((r, 0, warp), Violation(5, f"warp {warp} holds {total} registers per thread at "
                                                        f"{where} > {cap}")))
    for kind, what, cap in (("smem", "shared", machine.smem_bytes), ("tmem", "tensor", machine.tmem_bytes)):
        for lo, hi, total in modulo_load(mem[kind], ii):
            if total > cap:
                for r, where in _slots(lo, hi):
                    found.append(((r, 1 + (kind == "tmem"), 0), Violation(6, f"{total} bytes of {what} memory live at {where} > {cap}")))
    found.sort(key=lambda f: f[0])
    return [f[1] for f in found]


def _executing(graph, t: dict, w: dict, ii: int, dsts: set) -> dict:
    """For each op in ``dsts``: the other ops of its warp (cycles > 0) with an
    instance executing at its issue time, in graph order.

    A sweep over residues per warp: each op executes on the residue interval
    [time mod ii, time mod ii + cycles) (wrapping; every slot when cycles >= ii).
    Cost O((n + queries) log n + answers)."""
    out: dict = {d: [] for d in dsts}
    if not dsts:
        return out
    index = {op.name: i for i, op in enumerate(graph.ops)}
    by_warp: dict = {}
    for op in graph.ops:
        if op.cycles == 0:
            continue
        n, c = op.name, op.cycles
        ivs = by_warp.setdefault(w[n], [])
        if c >= ii:
            ivs.append((0, ii, n))
            continue
        s0 = t[n] % ii
        if s0 + c <= ii:
            ivs.append((s0, s0 + c, n))
        else:
            ivs.append((s0, ii, n))
            ivs.append((0, s0 + c - ii, n))
    queries: dict = {}
    for d in dsts:
        queries.setdefault(w[d], []).append((t[d] % ii, d))
    for warp, qs in queries.items():
        ivs = sorted(by_warp.get(warp, []))
        qs.sort()
        active: dict = {}  # (lo, hi, name) -> True, for intervals with lo <= p < hi
        ends: list = []
        i = 0
        for p, d in qs:
            while i < len(ivs) and ivs[i][0] <= p:
                active[ivs[i]] = True
                heapq.heappush(ends, (ivs[i][1], ivs[i]))
                i += 1
            while ends and ends[0][0] <= p:
                active.pop(heapq.heappop(ends)[1], None)
            names = {iv[2] for iv in active} - {d}
            out[d] = sorted(names, key=index.__getitem__)
    return out


def verify(schedule, graph, machine, **kw) -> None:
    """Raise AssertionError listing every violation (a solver bug, not a user error)."""
    bad = check(schedule, graph, machine, **kw)
    if bad:
        raise AssertionError("schedule failed the independent checker:\n  " + "\n  ".join(map(str, bad)))
