"""A schedule valid by construction: one iteration at a time, in program order.

When neither the heuristic nor z3 has a schedule in hand before the
deadline, the search still owes an answer if one exists that needs no
search.  This is it:

* Times.  The ops in topological order (distance-0 edges; ties by graph
  position), each as early as its distance-0 producers allow *with* their
  spill costs (so the times hold for any assignment of roles), and never
  before the previous op is done: op k starts at or after
  ``t[k-1] + max(1, cycles[k-1])``.  The ops' spans are disjoint, so no two
  ops share a unit at once (rule 2, when no single row asks for more
  instances than a unit has) and no blocking wait meets an executing op of
  its role (rule 4, with or without ``cross_warp_sync``).
* ii.  At least the end of the last span, so the whole iteration is done
  before the next one starts (one stage: every time < ii) and the spans stay
  disjoint modulo ii; at least ``ceil((t_src + delay + spill - t_dst) /
  distance)`` for every loop-carried edge (rule 1); at least the lower bound.
* Roles.  Variable-latency ops on the last warp group (rule 3); every other
  op on role 0 (on a machine with named roles, the first role of its width).  If that breaks the register limit (rule 5), the values are
  packed onto the fixed-latency roles, largest peak first, each on the first
  role whose steady-state pressure (``model.checker.modulo_load``) stays
  within the limit.

The result is run through ``model.check``; ``serial_schedule`` returns it
only if it passes (else the reason it does not: registers, memory, or a
reservation row no unit can hold).  Cost: O((ops + edges) log ops), never
anything per cycle.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..model import check, make_schedule, topological_order
from ..model.checker import live_intervals, modulo_load
from .symmetry import role_ids

#: ``Attempt.solver`` and ``Incumbent.seed`` of the fallback schedule.
SERIAL = "serial"


@dataclass(frozen=True)
class Serial:
    """The fallback: ``ii``, ``times``, ``warps`` when valid; else ``reason`` (one line)."""

    ii: int | None = None
    times: dict | None = None
    warps: dict | None = None
    reason: str | None = None


def serial_times(graph, machine, lb: int = 1) -> tuple[int, dict]:
    """(ii, times) of the serial order (module docstring)."""
    sp = {o.name: machine.spill_of(o) for o in graph.ops}
    t: dict = {}
    cur = 0
    for n in topological_order(graph):
        est = max([cur] + [t[e.src] + e.delay + sp[e.src] for e in graph.in_edges(n) if e.distance == 0])
        t[n] = est
        cur = est + max(1, graph.op(n).cycles)
    ii = max(lb, cur)
    for e in graph.edges:
        if e.distance:
            need = t[e.src] + e.delay + sp[e.src] - t[e.dst]
            ii = max(ii, -(-need // e.distance))
    return ii, t


def _pack(graph, machine, ii: int, times: dict, fixed_roles: list) -> dict | None:
    """Fixed-latency ops -> roles with every role's register pressure within the limit, or None."""
    live = live_intervals(graph, times, ii)
    runs = {n: (s, e - s, graph.op(n).regs) for n, (s, e) in live.items()
            if e > s and graph.op(n).regs and not graph.op(n).variable_latency}

    def peak(rs):
        return max(total for _, _, total in modulo_load(rs, ii))

    load: dict = {k: [] for k in fixed_roles}
    warps = {}
    index = {n: i for i, n in enumerate(graph.names)}
    for n in sorted(runs, key=lambda n: (-peak([runs[n]]), index[n])):
        k = next((k for k in fixed_roles if machine.role_takes(k, graph.op(n))
                  and peak(load[k] + [runs[n]]) <= machine.role_regs(k)), None)
        if k is None:
            return None
        load[k].append(runs[n])
        warps[n] = k
    return warps


def serial_schedule(graph, machine, *, lb: int = 1, cross_warp_sync: bool = False) -> Serial:
    """The serial schedule, checked (module docstring); ``Serial.reason`` when it is not valid."""
    roles = role_ids(graph, machine)
    vl = {o.name for o in graph.ops if o.variable_latency}
    if vl and machine.warp_groups < 2:
        return Serial(reason="variable-latency ops need a warp role of their own and the machine has one")
    for op in graph.ops:
        for _, _, row in op.reservation_runs():
            for u, k in row:
                if k > machine.units.get(u, 0):
                    return Serial(reason=f"op '{op.name}' holds {k} instances of unit {u} at once, "
                                         f"which has {machine.units.get(u, 0)}")
    ii, times = serial_times(graph, machine, lb)
    fixed_roles = roles[:-1] if vl else roles
    # each fixed-latency op on the first role that takes it (any role; a named role: ops of its width)
    warps = {o.name: roles[-1] if o.name in vl else next((k for k in fixed_roles if machine.role_takes(k, o)), None)
             for o in graph.ops}
    homeless = [n for n, w in warps.items() if w is None]
    if homeless:
        return Serial(reason=f"no warp role of '{machine.name}' issues op '{homeless[0]}' "
                             f"({graph.op(homeless[0]).warps} warps)")
    cyc = {o.name: o.cycles for o in graph.ops}
    bad = check(make_schedule(graph, machine.name, ii, times, warps, cyc), graph, machine,
                cross_warp_sync=cross_warp_sync)
    if bad and all(v.rule == 5 for v in bad) and len(fixed_roles) > 1:
        packed = _pack(graph, machine, ii, times, fixed_roles)
        if packed is not None:
            warps.update(packed)
            bad = check(make_schedule(graph, machine.name, ii, times, warps, cyc), graph, machine,
                        cross_warp_sync=cross_warp_sync)
    if bad:
        return Serial(reason=f"the serial schedule at ii={ii} breaks {bad[0]}")
    return Serial(ii=ii, times=times, warps=warps)
