"""An exhaustive reference scheduler for small graphs, independent of the solvers.

For graphs whose ops hold no registers or memory, validity depends only on
each op's slot (time mod ii), its warp, and whether the stage offsets can meet
the dependences.  We enumerate slots and warps depth-first (pruning resource,
blocking and variable-latency conflicts among the ops placed so far) and
decide the stages exactly with Bellman-Ford on the difference constraints
``q_dst - q_src >= ceil((r_src + d + s - r_dst) / ii) - distance``.  Every
candidate is confirmed by the independent checker.

Every oracle is bounded: it visits at most ``max_nodes`` partial assignments
(default ``MAX_NODES``) and raises ``SearchTooLarge`` past that, so a test
rejects the example (``hypothesis.reject``) instead of running for minutes
when a change of the generated graphs (hypothesis derandomizes from the test
source) produces a larger search.  Use ``bounded`` for that.
"""
from __future__ import annotations

from tvm_twill.model import check, make_schedule

#: Partial assignments one oracle call may visit (about a second of work at most).
MAX_NODES = 20_000
#: The largest node count seen by a call (for calibrating MAX_NODES).
stats = {"max_nodes": 0}


class SearchTooLarge(Exception):
    """The exhaustive search would visit more than its bound of partial assignments."""


class _Budget:
    def __init__(self, max_nodes):
        self.left = MAX_NODES if max_nodes is None else max_nodes
        self.used = 0

    def spend(self):
        self.used += 1
        stats["max_nodes"] = max(stats["max_nodes"], self.used)
        if self.used > self.left:
            raise SearchTooLarge(f"brute force over {self.left} partial assignments")


def bounded(fn, *args, **kw):
    """``fn(*args, **kw)``, or hypothesis.reject() when its search is over the bound."""
    from hypothesis import reject
    try:
        return fn(*args, **kw)
    except SearchTooLarge:
        reject()


def _spill(op, machine):
    return machine.spill_cost if op.spill_cost is None else op.spill_cost


def _stages(graph, machine, ii, r, w):
    """Least stage offsets meeting every dependence, or None (positive cycle)."""
    q = {n: 0 for n in graph.names}
    for _ in range(len(q) + 1):
        changed = False
        for e in graph.edges:
            s = _spill(graph.op(e.src), machine) if w[e.src] != w[e.dst] else 0
            need = -((r[e.dst] - r[e.src] - e.delay - s) // ii) - e.distance  # ceil(.)/ii - delta
            if q[e.dst] < q[e.src] + need:
                q[e.dst] = q[e.src] + need
                changed = True
        if not changed:
            return q
    return None


def feasible(graph, machine, ii, *, cross_warp_sync=False, max_nodes=None):
    """A valid schedule at ii, or None.  Graph ops must hold no regs/smem/tmem.
    SearchTooLarge past ``max_nodes`` partial assignments (module docstring)."""
    assert all(not (op.regs or op.smem or op.tmem) for op in graph.ops)
    budget = _Budget(max_nodes)
    ops = list(graph.ops)
    W = machine.warp_groups
    r, w = {}, {}

    def conflicts(k):
        # resources: unit usage per slot among placed ops
        for unit, cap in machine.units.items():
            use = [0] * ii
            for o in ops[:k + 1]:
                for j, row in enumerate(o.reservation()):
                    use[(r[o.name] + j) % ii] += dict(row).get(unit, 0)
            if max(use) > cap:
                return True
        vl = [o.name for o in ops[:k + 1] if o.variable_latency]
        if vl and (len({w[x] for x in vl}) > 1 or
                   any(w[o.name] == w[vl[0]] for o in ops[:k + 1] if not o.variable_latency)):
            return True
        placed = {o.name for o in ops[:k + 1]}
        for e in graph.edges:
            if e.dst not in placed or e.src not in placed:
                continue
            if not (e.blocking or (cross_warp_sync and w[e.src] != w[e.dst])):
                continue
            for o in ops[:k + 1]:
                if o.name != e.dst and o.cycles and w[o.name] == w[e.dst] and \
                        (r[e.dst] - r[o.name]) % ii < o.cycles:
                    return True
        return False

    def dfs(k, used):
        if k == len(ops):
            q = _stages(graph, machine, ii, r, w)
            if q is None:
                return None
            base = min(q.values())
            times = {n: ii * (q[n] - base) + r[n] for n in graph.names}
            s = make_schedule(graph, machine.name, ii, times, dict(w), {o.name: o.cycles for o in ops})
            assert check(s, graph, machine, cross_warp_sync=cross_warp_sync) == [], "brute force bug"
            return s
        n = ops[k].name
        for slot in range(ii):
            for warp in range(min(W, used + 1)):  # first-fit: roles are interchangeable
                r[n], w[n] = slot, warp
                budget.spend()
                if not conflicts(k):
                    found = dfs(k + 1, max(used, warp + 1))
                    if found is not None:
                        return found
        r.pop(n, None)
        w.pop(n, None)
        return None

    return dfs(0, 0)


def min_ii(graph, machine, ii_max, **kw):
    """The smallest ii <= ii_max with a schedule (each ii bounded as in ``feasible``), or None."""
    for ii in range(1, ii_max + 1):
        if feasible(graph, machine, ii, **kw) is not None:
            return ii
    return None


def feasible_with_pressure(graph, machine, ii, *, max_nodes=None):
    """A valid schedule at ii or None, for graphs whose ops may hold registers/memory.

    Exhaustive over slots, warps (first-fit) and stage offsets q_v in
    [0, Q] with Q = T(ii) // ii, T(ii) = ii + (n-1) * max(dmax*ii, D + ii - 1)
    the span within which any valid schedule can be compressed (see
    tvm_twill.solvers.smt); the checker decides every complete candidate.
    Meant for graphs of a few ops only; SearchTooLarge past ``max_nodes``
    partial assignments (module docstring).
    """
    budget = _Budget(max_nodes)
    ops = list(graph.ops)
    n = len(ops)
    dmax = max((e.distance for e in graph.edges), default=0)
    dd = max((e.delay + _spill(graph.op(e.src), machine) for e in graph.edges), default=0)
    qmax = (ii + (n - 1) * max(dmax * ii, dd + ii - 1)) // ii
    W = machine.warp_groups
    cyc = {o.name: o.cycles for o in ops}
    t, w = {}, {}

    def deps_ok(k):
        placed = {o.name for o in ops[:k + 1]}
        for e in graph.edges:
            if e.src in placed and e.dst in placed:
                s = _spill(graph.op(e.src), machine) if w[e.src] != w[e.dst] else 0
                if t[e.dst] + e.distance * ii < t[e.src] + e.delay + s:
                    return False
        return True

    def dfs(k, used):
        if k == n:
            if min(t.values()) >= ii:  # shift symmetry: some op starts in stage 0
                return None
            s = make_schedule(graph, machine.name, ii, dict(t), dict(w), cyc)
            return s if not check(s, graph, machine) else None
        name = ops[k].name
        for warp in range(min(W, used + 1)):
            for time in range((qmax + 1) * ii):
                t[name], w[name] = time, warp
                budget.spend()
                if deps_ok(k):
                    found = dfs(k + 1, max(used, warp + 1))
                    if found is not None:
                        return found
        t.pop(name, None)
        w.pop(name, None)
        return None

    return dfs(0, 0)


# -- the K best classes (independent of tvm_twill.model.canonical and solvers.topk) --------------------
def _graph_automorphisms(graph, machine):
    """Every permutation of ops that keeps op attributes (but names) and edges: all n! tried."""
    import itertools

    def sig(op):
        return (op.unit if op.rrt is None else None, op.rrt, op.cycles, op.regs, op.smem, op.tmem,
                op.variable_latency, op.warps, _spill(op, machine), op.flops)

    names = graph.names
    edges = sorted((e.src, e.dst, e.delay, e.distance, e.blocking) for e in graph.edges)
    out = []
    for perm in itertools.permutations(names):
        g = dict(zip(names, perm))
        if all(sig(graph.op(n)) == sig(graph.op(g[n])) for n in names) and \
                sorted((g[a], g[b], d, k, bl) for a, b, d, k, bl in edges) == edges:
            out.append(g)
    return out


def _form(graph, machine, times, warps, autos):
    """min over automorphisms of ((time - t0, role) in graph order), roles renumbered first-fit over
    fixed-latency ops, the variable-latency role as warp_groups - 1."""
    best = None
    for g in autos:
        t = {g[n]: times[n] for n in times}
        w = {g[n]: warps[n] for n in warps}
        t0 = min(t.values())
        seen, rep = [], []
        for op in graph.ops:
            if op.variable_latency:
                role = machine.warp_groups - 1
            else:
                if w[op.name] not in seen:
                    seen.append(w[op.name])
                role = seen.index(w[op.name])
            rep.append((t[op.name] - t0, role))
        rep = tuple(rep)
        best = rep if best is None or rep < best else best
    return best


def _reg_peak(graph, ii, times, warps):
    """Largest per-warp register sum over the cycles of one steady-state period, counted instance by instance."""
    peak = 0
    horizon = max(times.values()) + max((e.distance for e in graph.edges), default=0) * ii + 2 * ii
    for tau in range(horizon, horizon + ii):
        per = {}
        for op in graph.ops:
            ends = [times[e.dst] + e.distance * ii for e in graph.out_edges(op.name)]
            if not ends or not op.regs:
                continue
            s, e = times[op.name], max(ends)
            live = sum(1 for k in range(tau // ii + 2) if s + k * ii <= tau < e + k * ii)
            per[warps[op.name]] = per.get(warps[op.name], 0) + live * op.regs
        peak = max([peak, *per.values()])
    return peak


def time_span(graph, machine, ii):
    """The span T(ii) = ii + (n-1) * max(dmax*ii, D + ii - 1) every schedule can be compressed into."""
    n = len(graph.ops)
    dmax = max((e.distance for e in graph.edges), default=0)
    dd = max((e.delay + _spill(graph.op(e.src), machine) for e in graph.edges), default=0)
    return ii + (n - 1) * max(dmax * ii, dd + ii - 1)


def classes_at(graph, machine, ii, *, cross_warp_sync=False, max_nodes=None):
    """{canonical form: (ii, length, reg peak, -time sum)} of every valid schedule at ii whose times
    lie in [0, T(ii)] with the first at 0, found by enumerating times and first-fit warps."""
    budget = _Budget(max_nodes)
    ops = list(graph.ops)
    T = time_span(graph, machine, ii)
    autos = _graph_automorphisms(graph, machine)
    cyc = {o.name: o.cycles for o in ops}
    t, w, out = {}, {}, {}

    def deps_ok(k):
        placed = {o.name for o in ops[:k + 1]}
        for e in graph.edges:
            if e.src in placed and e.dst in placed:
                s = _spill(graph.op(e.src), machine) if w[e.src] != w[e.dst] else 0
                if t[e.dst] + e.distance * ii < t[e.src] + e.delay + s:
                    return False
        return True

    def dfs(k, used):
        if k == len(ops):
            if min(t.values()) != 0:
                return
            s = make_schedule(graph, machine.name, ii, dict(t), dict(w), cyc)
            if check(s, graph, machine, cross_warp_sync=cross_warp_sync):
                return
            form = _form(graph, machine, t, w, autos)
            out[form] = (ii, s.length, _reg_peak(graph, ii, t, w), -sum(t.values()))
            return
        name = ops[k].name
        for warp in range(min(machine.warp_groups, used + 1)):
            for time in range(T + 1):
                t[name], w[name] = time, warp
                budget.spend()
                if deps_ok(k):
                    dfs(k + 1, max(used, warp + 1))
        t.pop(name, None)
        w.pop(name, None)

    dfs(0, 0)
    return out


def k_best(graph, machine, k, ii_max, *, first=None, **kw):
    """The k best classes as (key, form), ii by ii up to ii_max: ordered by (ii, length, reg peak,
    -time sum), then ``first`` ((ii, form): the solver's own first choice) before the others, then form."""
    out = []
    for ii in range(1, ii_max + 1):
        found = classes_at(graph, machine, ii, **kw)
        out += sorted(((key, form) for form, key in found.items()),
                      key=lambda x: (x[0], (x[0][0], x[1]) != first, x[1]))
        if len(out) >= k:
            break
    return out[:k]
