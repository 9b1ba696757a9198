"""Test-only oracle: the per-slot checker of rules 1-6 as it was before interval arithmetic.

It shares no code with any solver: it enumerates instances and residues
directly, so a solver encoding bug shows up here as a Violation.
``check`` returns every violation (empty list = valid); ``verify`` raises.
"""
from __future__ import annotations

from dataclasses import dataclass

RULES = {0: "structure", 1: "dependence", 2: "resources", 3: "variable latency",
         4: "blocking sync", 5: "registers", 6: "memory"}


@dataclass(frozen=True)
class Violation:
    rule: int
    message: str

    def __str__(self) -> str:
        return f"rule {self.rule} ({RULES[self.rule]}): {self.message}"


def spill_cost(op, machine) -> int:
    return machine.spill_cost if op.spill_cost is None else op.spill_cost


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
    """How many instances k (start + k*ii <= tau < end + k*ii) are live at time tau."""
    if end <= start:
        return 0
    lo = (tau - end) // ii - 1
    hi = (tau - start) // ii + 1
    return sum(1 for k in range(lo, hi + 1) if start + k * ii <= tau < end + k * ii)


def check(schedule, graph, machine, *, cross_warp_sync: bool = False) -> list[Violation]:
    """Every violation of rules 1-6 (and of the schedule's own structure).

    ``cross_warp_sync``: also treat every edge whose ends are on different
    warps as blocking (the consumer waits on the shared-memory hand-off; the
    paper's elided constraint).  Off by default: rules 1-6 exactly.
    """
    v: list[Violation] = []
    ii = schedule.ii
    if isinstance(ii, bool) or not isinstance(ii, int) or ii < 1:
        return [Violation(0, f"ii must be an integer >= 1, got {ii!r}")]
    names = set(graph.names)
    if set(schedule.ops) != names:
        missing, extra = sorted(names - set(schedule.ops)), sorted(set(schedule.ops) - names)
        return [Violation(0, f"schedule ops do not match graph ops (missing {missing}, unknown {extra})")]
    P = schedule.ops
    t = {n: P[n].time for n in names}
    cyc = {op.name: op.cycles for op in graph.ops}
    w = {n: P[n].warp for n in names}
    for n in graph.names:
        p = P[n]
        if isinstance(p.time, bool) or not isinstance(p.time, int) or p.time < 0:
            v.append(Violation(0, f"op '{n}' time must be an integer >= 0, got {p.time!r}"))
            return v
        if p.stage != p.time // ii:
            v.append(Violation(0, f"op '{n}' stage is {p.stage} but time {p.time} // ii {ii} = {p.time // ii}"))
        if not (0 <= p.warp < machine.warp_groups):
            v.append(Violation(0, f"op '{n}' warp {p.warp} is outside [0, {machine.warp_groups})"))
        if schedule.cycles.get(n, cyc[n]) != cyc[n]:
            v.append(Violation(0, f"op '{n}' cycles {schedule.cycles.get(n)} differ from the graph's {cyc[n]}"))
    if sorted(p.order for p in P.values()) != list(range(len(names))):
        v.append(Violation(0, "orders must be a permutation of 0..n-1"))
    length = max(t[n] + cyc[n] for n in names)
    if schedule.length != length:
        v.append(Violation(0, f"length is {schedule.length} but the last op ends at {length}"))

    # 1. dependence (with the cross-warp spill cost)
    for e in graph.edges:
        s = spill_cost(graph.op(e.src), machine) if w[e.src] != w[e.dst] else 0
        if t[e.dst] + e.distance * ii < t[e.src] + e.delay + s:
            v.append(Violation(1, f"edge {e.src}->{e.dst}: time[{e.dst}] + {e.distance}*ii = "
                                  f"{t[e.dst] + e.distance * ii} < time[{e.src}] + delay {e.delay}"
                                  f" + spill {s} = {t[e.src] + e.delay + s}"))

    # 2. modulo resource capacity
    for unit, cap in machine.units.items():
        use = [0] * ii
        for op in graph.ops:
            for j, row in enumerate(op.reservation()):
                for u, k in row:
                    if u == unit:
                        use[(t[op.name] + j) % ii] += k
        for r, total in enumerate(use):
            if total > cap:
                v.append(Violation(2, f"unit {unit} at slot {r} (mod ii {ii}) holds {total} > capacity {cap}"))

    # 3. the variable-latency warp
    vl = [op.name for op in graph.ops if op.variable_latency]
    if vl:
        vl_warps = {w[n] for n in vl}
        if len(vl_warps) > 1:
            v.append(Violation(3, f"variable-latency ops {vl} are on warps {sorted(vl_warps)}, not one warp"))
        for op in graph.ops:
            if not op.variable_latency and w[op.name] in vl_warps:
                v.append(Violation(3, f"fixed-latency op '{op.name}' is on the variable-latency warp {w[op.name]}"))

    # 4. blocking synchronization
    blocking = [e for e in graph.edges if e.blocking or (cross_warp_sync and w[e.src] != w[e.dst])]
    for e in blocking:
        dst = e.dst
        for o in graph.ops:
            if o.name == dst or w[o.name] != w[dst] or o.cycles == 0:
                continue
            # is some instance k of o executing at time[dst]?
            lo = (t[dst] - t[o.name] - o.cycles) // ii - 1
            hi = (t[dst] - t[o.name]) // ii + 1
            for k in range(lo, hi + 1):
                start = t[o.name] + k * ii
                if start <= t[dst] < start + o.cycles:
                    v.append(Violation(4, f"'{dst}' waits on {e.src} at {t[dst]} while '{o.name}' "
                                          f"(instance {k}) executes on the same warp {w[dst]} "
                                          f"during [{start}, {start + o.cycles})"))
                    break

    # 5. registers per warp, 6. shared and tensor memory
    live = live_intervals(graph, t, ii)
    base = max(t.values()) + max(cyc.values()) + 1  # a steady-state window: every k is counted
    for r in range(ii):
        tau = base * ii + r  # any tau = r (mod ii) sees the same steady state
        regs = {}
        mem = {"smem": 0, "tmem": 0}
        for name, (s0, e0) in live.items():
            op = graph.op(name)
            n_live = live_instances(s0, e0, ii, tau)
            if not n_live:
                continue
            regs[w[name]] = regs.get(w[name], 0) + n_live * op.regs
            mem["smem"] += n_live * op.smem
            mem["tmem"] += n_live * op.tmem
        for warp, total in sorted(regs.items()):
            if total > machine.regs_per_thread_max:
                v.append(Violation(5, f"warp {warp} holds {total} registers per thread at slot {r} "
                                      f"> {machine.regs_per_thread_max}"))
        if mem["smem"] > machine.smem_bytes:
            v.append(Violation(6, f"{mem['smem']} bytes of shared memory live at slot {r} > {machine.smem_bytes}"))
        if mem["tmem"] > machine.tmem_bytes:
            v.append(Violation(6, f"{mem['tmem']} bytes of tensor memory live at slot {r} > {machine.tmem_bytes}"))
    return v


def verify(schedule, graph, machine, **kw) -> None:
    """Raise AssertionError listing every violation (a solver bug, not a user error)."""
    bad = check(schedule, graph, machine, **kw)
    if bad:
        raise AssertionError("schedule failed the independent checker:\n  " + "\n  ".join(map(str, bad)))
