"""Refutations that hold at every ii: values that stay live across iterations.

A value whose op has a self edge of distance d (an accumulator: ``O -> O``,
distance 1) is live from ``t_v`` to at least ``t_v + d*ii``: in the steady
state at least d instances of it are live at every cycle, whatever ii and
the times are.  So its ``d * regs`` registers are held on its role all the
time, its ``d * smem`` / ``d * tmem`` bytes always.  If these *persistent*
demands cannot be packed into the roles (registers per role, rule 5) or do
not fit the memories (rule 6), no ii has a schedule, and the search can say
so at once instead of refuting ii after ii up to ``max_ii`` (four heads of
128-register accumulators on the three non-producer roles of an H100: two
share a role, 256 > 255).

Besides, a value with a consumer edge of delay or distance >= 1 is live at
some cycle, and then together with every persistent value: on its role the
persistent registers plus the largest such value must fit (memories: all
persistent bytes plus the largest such value).

Roles: variable-latency ops all on one role of their own (rule 3), the
others on the remaining roles.  The packing is decided exactly by a small
depth-first bin packing (largest first, one branch per distinct role load);
it gives up (no claim) after ``NODE_LIMIT`` nodes.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..model.families import Family

NODE_LIMIT = 200_000
#: The packing polls the caller's ``stop`` once per this many nodes.
STOP_EVERY = 4096


@dataclass(frozen=True)
class Refutation:
    """Why no ii works: the constraint family and a one-line explanation."""

    family: str
    message: str


def persistent_instances(graph, name: str) -> int:
    """Instances of ``name``'s value live at every cycle of any schedule (its largest self-edge distance)."""
    return max((e.distance for e in graph.out_edges(name) if e.dst == name), default=0)


def _packs(items: list[tuple[int, int]], bins: int, cap: int, stop=None) -> bool | None:
    """Can ``items`` (always, sometimes) go into ``bins`` bins with, per bin, the sum of the
    ``always`` parts plus the largest ``sometimes`` part at most ``cap``?  None: gave up
    (after NODE_LIMIT nodes, or when ``stop()``, polled every STOP_EVERY nodes, is true)."""
    items = sorted((it for it in items if it[0] or it[1]), key=lambda it: (-(it[0] + it[1]), -it[0]))
    if not items:
        return True
    if bins <= 0 or any(a + b > cap for a, b in items):
        return False
    if sum(a for a, _ in items) > bins * cap:
        return False
    bins = min(bins, len(items))  # more bins than items: some stay empty (never one per warp group)
    loads = [(0, 0)] * bins
    nodes = 0

    def dfs(i) -> bool | None:
        nonlocal nodes
        nodes += 1
        if nodes > NODE_LIMIT or (stop is not None and nodes % STOP_EVERY == 0 and stop()):
            return None
        if i == len(items):
            return True
        a, b = items[i]
        seen = set()
        for k in range(bins):
            s, m = loads[k]
            new = (s + a, max(m, b))
            if loads[k] in seen or new[0] + new[1] > cap:
                continue
            seen.add(loads[k])
            loads[k] = new
            r = dfs(i + 1)
            loads[k] = (s, m)
            if r is not False:
                return r
        return False

    return dfs(0)


def _demand(graph, op, hold: int, field: str) -> tuple[int, int]:
    """(held in every cycle, extra held at some cycle) of ``field`` for ``op``'s value.

    A value with a consumer edge of delay >= 1 or distance >= 1 is live for at
    least one cycle (rule 1), and at that cycle every value held in every cycle
    is live too."""
    amount = getattr(op, field)
    live_once = any(e.delay >= 1 or e.distance >= 1 for e in graph.out_edges(op.name))
    return hold * amount, (amount if live_once and not hold else 0)


def refute_every_ii(graph, machine, stop=None) -> Refutation | None:
    """A Refutation when the demands cannot fit (see the module doc), else None (also when
    ``stop()`` turns true during the packing: no claim)."""
    hold = {o.name: persistent_instances(graph, o.name) for o in graph.ops}
    for field, cap, what in (("smem", machine.smem_bytes, "shared memory"),
                             ("tmem", machine.tmem_bytes, "tensor memory")):
        items = [_demand(graph, o, hold[o.name], field) for o in graph.ops]
        need = sum(a for a, _ in items) + max((b for _, b in items), default=0)
        if need > cap:
            ops = ", ".join(o.name for o, (a, b) in zip(graph.ops, items) if a or b)
            return Refutation(Family.MEMORY, f"values that stay live across iterations ({ops}) need {need} bytes "
                                        f"of {what} at some cycle > {cap}, at every ii")
    W = machine.warp_groups
    vl = [o for o in graph.ops if o.variable_latency]
    fixed = [o for o in graph.ops if not o.variable_latency]
    if vl and W < 2:
        names = ", ".join(o.name for o in vl)
        return Refutation(Family.VARIABLE_LATENCY, f"variable-latency ops ({names}) need a warp role of their own "
                                                   f"(rule 3) but machine '{machine.name}' has one warp group: give "
                                                   "it warp_groups >= 2")
    limit = machine.regs_per_thread_max
    groups = [(fixed, W - 1 if vl else W)]
    if vl:
        groups.append((vl, 1))
    for ops, bins in groups:
        items = [(o.name, _demand(graph, o, hold[o.name], "regs")) for o in ops]
        items = [(n, d) for n, d in items if d[0]]  + [(n, d) for n, d in items if not d[0] and d[1]]
        if not any(d[0] for _, d in items):
            continue  # nothing is live in every cycle: no claim
        if _packs([d for _, d in items], bins, limit, stop) is False:
            listed = ", ".join(f"{n} {a or b}" for n, (a, b) in items if a)
            return Refutation(Family.REGISTERS, f"values live in every cycle ({listed} registers) and the other values "
                                           f"cannot share {bins} warp role(s) of {limit} registers at any ii")
    return None
