"""The search for the smallest ii (Algorithm 1 of the paper, made complete).

``solve(graph, machine)``:

1. ``prepare``: check the graph against the machine, normalize costs (the
   ZLP of section 5.2, unless the graph says ``"normalize": false``) and
   give streaming variable-latency ops zero latency (section 5.3).
2. Start at ``LB = max(ResMII, RecMII)``; no smaller ii can work.
3. For ii = LB, LB+1, ...: ask the joint z3 problem (``smt.JointProblem``)
   whether any schedule exists (first within Algorithm 1's length window,
   critical path + ii, then, if the window was what failed, without it).  Its time bound is proven loss-free, so
   ``unsat`` proves ii impossible, and the unsat core names the constraint
   families that rule it out.  On ``sat``, shrink the length: first the
   model's first length down: galloping up from the critical path, then
   bisection (the minimum length, which Algorithm 1's inner loop finds one
   length at a time).
4. Verify the schedule with the independent checker before returning it.

Tie-breaks, in order: smallest ii, then smallest length, then the lowest
per-warp register peak, then the latest issue times (largest sum: values are
produced as late as their consumers allow), then z3's model (pinned z3
version, seed 0).  The last two are searched within a deterministic z3
resource budget, so they are best effort but reproducible.  ``optimal`` is true when every ii in
[LB, ii) was proven impossible.  The search stops at ``max_ii`` (default:
the ii at which one iteration fits alone, ops back to back with every delay
and spill), so it always terminates; a graph infeasible up to there is
reported with the constraint family that rules it out.
"""
from __future__ import annotations

import time as _time
from dataclasses import dataclass, replace

from ..errors import InfeasibleError, SolverTimeoutError
from ..model import Attempt, LowerBound, check, get_machine, make_schedule, rec_mii, res_mii
from .smt import JointProblem


#: z3 resource budget of one register tie-break query (deterministic, unlike time).
TIE_BREAK_RLIMIT = 300_000


@dataclass(frozen=True)
class SolveOptions:
    """Options of ``solve`` (fields, not PassContext keys).

    ``time_limit``: seconds for the whole search.  ``normalize_bound``: U of
    the normalization ZLP; ``normalize_objective``: ``"relative"`` (least
    relative ratio error, the default) or ``"paper"`` (the paper's F).  ``streaming_depth``: ring-buffer depth of a
    streaming load (its shared memory is charged that many times).
    ``cross_warp_sync``: a consumer that receives a value from another warp
    waits for it, like a blocking edge (the paper's elided constraint).
    ``max_ii``: stop the search there (None: one iteration alone).
    """

    time_limit: float = 30.0
    normalize_bound: int = 300
    normalize_objective: str = "relative"
    streaming_depth: int = 2
    cross_warp_sync: bool = False
    max_ii: int | None = None


@dataclass(frozen=True)
class Prepared:
    """The graph the solver actually schedules, and how it was derived."""

    graph: object
    machine: object
    normalization: dict | None
    streaming: tuple


def _resolve_machine(graph, machine):
    if machine is None:
        machine = graph.machine if graph.machine is not None else "h100"
    return get_machine(machine)


def prepare(graph, machine=None, options: SolveOptions = SolveOptions()) -> Prepared:
    """Normalize costs and apply the streaming-op rule; validate against the machine."""
    m = _resolve_machine(graph, machine)
    graph.validate_for(m)
    report = None
    g = graph
    if graph.normalize:
        from .normalize import normalize_graph
        g, norm = normalize_graph(graph, m, U=options.normalize_bound,
                                  time_limit=min(10.0, options.time_limit), objective=options.normalize_objective)
        report = {"U": norm.U, "objective": norm.objective, "distortion": norm.distortion,
                  "max_ratio_error": round(norm.max_ratio_error, 6),
                  "mapping": {str(k): v for k, v in sorted(norm.mapping.items())}}
    streaming = tuple(op.name for op in g.ops if op.variable_latency and not g.in_edges(op.name))
    if streaming:
        # Section 5.3: a streaming load runs ahead on its own warp, so its
        # consumers see it with zero latency; its ring of `depth` buffers is
        # charged to shared memory.
        ops = tuple(replace(op, smem=op.smem * options.streaming_depth) if op.name in streaming else op
                    for op in g.ops)
        edges = tuple(replace(e, delay=0) if e.src in streaming else e for e in g.edges)
        g = g.replace(ops=ops, edges=edges, normalize=False)
    return Prepared(graph=g, machine=m, normalization=report, streaming=streaming)


def default_max_ii(graph, machine) -> int:
    """An ii at which one iteration fits alone: every op back to back, with
    its largest outgoing delay and spill."""
    total = 0
    for op in graph.ops:
        sp = machine.spill_cost if op.spill_cost is None else op.spill_cost
        total += max([op.cycles] + [e.delay + sp for e in graph.out_edges(op.name)])
    return max(1, total)


def solve(graph, machine=None, *, time_limit: float | None = None, options: SolveOptions | None = None):
    """The schedule with the smallest ii (then length) for ``graph`` on ``machine``.

    Raises ``InfeasibleError`` (with ``.family``) when no ii up to ``max_ii``
    works and ``SolverTimeoutError`` when time runs out first.
    """
    opts = options or SolveOptions()
    if time_limit is not None:
        opts = replace(opts, time_limit=time_limit)
    start = _time.perf_counter()
    return solve_prepared(prepare(graph, machine, opts), opts, start=start)


def solve_prepared(prep: Prepared, options: SolveOptions | None = None, *, start: float | None = None):
    """``solve`` on a graph that ``prepare`` already normalized (so a caller that
    also needs the prepared graph, like the CLI's report, prepares it once)."""
    opts = options or SolveOptions()
    start = _time.perf_counter() if start is None else start
    deadline = start + opts.time_limit
    g, m = prep.graph, prep.machine
    graph = g
    res, rec = res_mii(g, m), rec_mii(g)
    window = critical_path(g)
    lb = max(res, rec)
    max_ii = max(lb, opts.max_ii or default_max_ii(g, m))
    attempts: list[Attempt] = []
    last_core: tuple = ()
    for ii in range(lb, max_ii + 1):
        left = deadline - _time.perf_counter()
        if left <= 0:
            raise SolverTimeoutError(
                f"time limit {opts.time_limit:g}s reached at ii={ii} (every ii in [{lb}, {ii}) proven "
                f"impossible): raise --time-limit", attempts)
        problem = JointProblem(g, m, ii, cross_warp_sync=opts.cross_warp_sync)
        # Algorithm 1's window first (L <= critical path + ii): cheaper, and a short
        # first length.  If the core shows the window did not matter, ii is refuted;
        # otherwise decide ii without it (the time bound keeps that query complete).
        r = problem.solve(max_length=window + ii, timeout=left)
        if r.status == "sat":
            attempts.append(Attempt(ii, window + ii, "sat", r.seconds, solver="smt"))
        elif r.status == "unsat" and "length" in r.core:
            attempts.append(Attempt(ii, window + ii, "unsat", r.seconds, reason=" + ".join(r.core), solver="smt"))
            r = problem.solve(timeout=max(0.001, deadline - _time.perf_counter()))
        if r.status == "timeout":
            attempts.append(Attempt(ii, None, "timeout", r.seconds, solver="smt"))
            raise SolverTimeoutError(f"time limit {opts.time_limit:g}s reached while deciding ii={ii}: "
                                     "raise --time-limit", attempts)
        if r.status == "unsat":
            last_core = r.core
            attempts.append(Attempt(ii, None, "unsat", r.seconds, reason=" + ".join(r.core) or None,
                                    solver="smt"))
            continue
        proof_seconds = _time.perf_counter() - start
        times, warps = _shortest(problem, r, ii, g, attempts, deadline)
        sched = make_schedule(
            g, m.name, ii, times, warps, {op.name: op.cycles for op in g.ops},
            optimal=True, lower_bound=LowerBound(ii=ii, resource=res, recurrence=rec),
            solve_seconds=_time.perf_counter() - start, proof_seconds=proof_seconds, attempts=tuple(attempts),
            normalization=prep.normalization,
            streaming={"ops": list(prep.streaming), "depth": opts.streaming_depth} if prep.streaming else None)
        bad = check(sched, g, m, cross_warp_sync=opts.cross_warp_sync)
        if bad:  # a solver bug: never hand out an unchecked schedule
            raise AssertionError("solver produced a schedule the checker rejects: " + "; ".join(map(str, bad)))
        return sched
    family = _family(last_core)
    raise InfeasibleError(
        f"graph '{graph.name}' has no schedule on '{m.name}' for any ii in [{lb}, {max_ii}] "
        f"(at ii={max_ii} one iteration runs alone): ruled out by {' + '.join(last_core) or family}",
        family=family, attempts=attempts)


def _family(core: tuple) -> str:
    for f in ("registers", "memory", "variable latency", "blocking sync", "resources", "dependence"):
        if f in core:
            return f
    return "dependence"


def critical_path(graph) -> int:
    """A lower bound on the length: the longest distance-0 dependence chain,
    ending with its last op's cycles (times are >= 0, spills only add)."""
    from ..model import topological_order
    asap = {n: 0 for n in graph.names}
    for n in topological_order(graph):
        for e in graph.out_edges(n):
            if e.distance == 0:
                asap[e.dst] = max(asap[e.dst], asap[n] + e.delay)
    return max(asap[op.name] + op.cycles for op in graph.ops)


def _shortest(problem, first, ii, g, attempts, deadline):
    """Tie-breaks at the optimal ii (see the module docstring): shortest length,
    then lowest per-warp register peak, then latest issue times."""
    def length(times):
        return max(times[op.name] + op.cycles for op in g.ops)

    best = first

    def query(**kw):
        left = deadline - _time.perf_counter()
        if left <= 0:
            return None  # keep the valid schedule in hand: these are tie-breaks only
        return problem.solve(timeout=left, **kw)

    # Shortest length: gallop up from the critical path (answers near the bound
    # are cheap), then bisect between the last unsat and the best sat length.
    lo, hi = max(critical_path(g), max(op.cycles for op in g.ops)), length(first.times)
    step = 1
    while lo < hi:
        mid = min(hi - 1, lo + step - 1) if step < hi - lo else (lo + hi) // 2
        r = query(max_length=mid)
        if r is None or r.status == "timeout":
            break
        attempts.append(Attempt(ii, mid, r.status, r.seconds, reason=" + ".join(r.core) or None, solver="smt"))
        if r.status == "sat":
            best, hi = r, length(r.times)
        else:
            lo, step = mid + 1, step * 2
    L = hi

    def bisect(lo, hi, run, measure):
        nonlocal best
        while lo < hi:
            r = run((lo + hi) // 2)
            if r is None or r.status == "timeout":
                break
            if r.status == "sat":
                best, hi = r, measure(r)
            else:
                lo = (lo + hi) // 2 + 1
        return hi

    # The later tie-breaks are best effort within a deterministic z3 budget.
    R = bisect(0, best.reg_peak, lambda mid: query(max_length=L, max_regs=mid, rlimit=TIE_BREAK_RLIMIT),
               lambda r: r.reg_peak)
    # As late as possible: the largest sum of issue times (bisection on its negation).
    latest = sum(L - op.cycles for op in g.ops)
    bisect(-latest, -sum(best.times.values()),
           lambda mid: query(max_length=L, max_regs=R, min_time_sum=-mid, rlimit=TIE_BREAK_RLIMIT),
           lambda r: -sum(r.times.values()))
    return best.times, best.warps
