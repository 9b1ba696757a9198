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

Roles: variable-latency ops all on one role of their own (rule 3), the
others on the remaining roles.  The packing is decided exactly by a small
depth-first bin packing (largest first, one branch per distinct role load);
it gives up (no claim) after ``NODE_LIMIT`` nodes.
"""
from __future__ import annotations

from dataclasses import dataclass

NODE_LIMIT = 200_000


@dataclass(frozen=True)
class Refutation:
    """Why no ii works: the constraint family and a one-line explanation."""

    family: str
    message: str


def persistent_instances(graph, name: str) -> int:
    """Instances of ``name``'s value live at every cycle of any schedule (its largest self-edge distance)."""
    return max((e.distance for e in graph.out_edges(name) if e.dst == name), default=0)


def _packs(items: list[int], bins: int, cap: int) -> bool | None:
    """Can ``items`` go into ``bins`` bins of capacity ``cap``?  None: gave up."""
    items = sorted(items, reverse=True)
    if not items:
        return True
    if bins <= 0 or items[0] > cap:
        return False
    if sum(items) > bins * cap:
        return False
    loads = [0] * bins
    nodes = 0

    def dfs(i) -> bool | None:
        nonlocal nodes
        nodes += 1
        if nodes > NODE_LIMIT:
            return None
        if i == len(items):
            return True
        seen = set()
        for b in range(bins):
            if loads[b] in seen or loads[b] + items[i] > cap:
                continue
            seen.add(loads[b])
            loads[b] += items[i]
            r = dfs(i + 1)
            loads[b] -= items[i]
            if r is not False:
                return r
        return False

    return dfs(0)


def refute_every_ii(graph, machine) -> Refutation | None:
    """A Refutation when the persistent demands cannot fit (see the module doc), else None."""
    hold = {o.name: persistent_instances(graph, o.name) for o in graph.ops}
    for field, cap, what in (("smem", machine.smem_bytes, "shared memory"), ("tmem", machine.tmem_bytes, "tensor memory")):
        need = sum(hold[o.name] * getattr(o, field) for o in graph.ops)
        if need > cap:
            ops = ", ".join(o.name for o in graph.ops if hold[o.name] and getattr(o, field))
            return Refutation("memory", f"values live in every cycle ({ops}) hold {need} bytes of {what} "
                                        f"> {cap} at every ii")
    W = machine.warp_groups
    vl = [o for o in graph.ops if o.variable_latency]
    fixed = [o for o in graph.ops if not o.variable_latency]
    limit = machine.regs_per_thread_max
    groups = [(fixed, W - 1 if vl else W)]
    if vl:
        groups.append((vl, 1))
    for ops, bins in groups:
        items = [(o.name, hold[o.name] * o.regs) for o in ops if hold[o.name] * o.regs]
        if _packs([r for _, r in items], bins, limit) is False:
            listed = ", ".join(f"{n} {r}" for n, r in items)
            return Refutation("registers", f"values live in every cycle ({listed} registers) cannot be "
                                           f"packed into {bins} warp role(s) of {limit} registers at any ii")
    return None
