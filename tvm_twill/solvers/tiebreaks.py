"""The tie-breaks at the proven optimal ii: the shortest length, then the lowest per-warp register
peak, then the latest issue times (``search`` module docstring, step 4), and the length bounds they
start from.  Every query is bounded by z3's deterministic ``rlimit`` (``limits``)."""
from __future__ import annotations

import time as _time

from ..errors import SolverTimeoutError
from ..model import Attempt, TieBreak
from .heuristic import register_peak
from .limits import LENGTH_RLIMIT, TIE_BREAK_RLIMIT, TIE_BREAK_TOTAL_RLIMIT, Deadline
from .smt import SOLVER, SmtResult


def length_floor(graph) -> int:
    """No schedule of ``graph`` is shorter: its critical path, and its longest op."""
    return max(critical_path(graph), max(op.cycles for op in graph.ops))


def untried_tie_breaks(graph, ii: int, times: dict, warps: dict) -> tuple:
    """The tie-breaks of a schedule whose length and registers were not minimized: the length against
    ``length_floor``, the register peak without a bound."""
    length = max(times[op.name] + op.cycles for op in graph.ops)
    return (TieBreak("length", length, length_floor(graph)),
            TieBreak("register peak", register_peak(graph, ii, times, warps)))


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


def shortest(problem, first, ii, g, attempts, dl: Deadline, proven: str, total: int = TIE_BREAK_TOTAL_RLIMIT):
    """Tie-breaks at the optimal ii (``search`` module docstring, step 4): shortest length,
    then lowest per-warp register peak, then latest issue times.  Returns (times,
    warps, the length's and register peak's ``TieBreak``s: what was proven of each).

    Every query is bounded by its rlimit and all of them together by
    ``total`` (TIE_BREAK_TOTAL_RLIMIT; deterministic); a query that exhausts its budget
    ends its tie-break.  The deadline passing ends them all (anytime: ii is
    proven optimal, the best schedule so far is kept)."""
    def length(times):
        return max(times[op.name] + op.cycles for op in g.ops)

    best = first
    spent = 0
    stopped = False

    def query(what: str, cap: int, **kw):
        """The query's result, or None when the total budget is spent (deterministic)
        or the deadline passed (then every later query is None too)."""
        nonlocal spent, stopped
        budget = min(cap, total - spent)
        if budget <= 0 or stopped:
            return None
        t0 = _time.perf_counter()
        try:
            r = problem.solve(deadline=dl, rlimit=budget, minimize_core=False, **kw)
        except SolverTimeoutError:
            r = SmtResult("timeout")
        spent += r.rlimit_used
        if r.status == "timeout":
            # (scale) anytime: keep the best schedule at the proven optimal ii
            attempts.append(Attempt(ii, kw.get("max_length"), "timeout", _time.perf_counter() - t0, solver=SOLVER))
            stopped = True
            return None
        return None if r.status == "budget" else r

    # Shortest length: gallop up from the critical path (answers near the bound
    # are cheap), then bisect between the last unsat and the best sat length.
    lo, hi = length_floor(g), length(first.times)
    step = 1
    while lo < hi:
        mid = min(hi - 1, lo + step - 1) if step < hi - lo else (lo + hi) // 2
        r = query("shortest length", LENGTH_RLIMIT, max_length=mid)
        if r is None:
            break
        attempts.append(Attempt(ii, mid, r.status, r.seconds, reason=" + ".join(r.core) or None, solver=SOLVER))
        if r.status == "sat":
            best, hi = r, length(r.times)
        else:
            lo, step = mid + 1, step * 2
    L, length_lo = hi, lo

    def bisect(lo, hi, what, run, measure):
        nonlocal best
        while lo < hi:
            r = run(what, (lo + hi) // 2)
            if r is None:
                break
            if r.status == "sat":
                best, hi = r, measure(r)
            else:
                lo = (lo + hi) // 2 + 1
        return lo, hi

    regs_lo, R = bisect(0, best.reg_peak, "lowest register peak",
               lambda what, mid: query(what, TIE_BREAK_RLIMIT, max_length=L, max_regs=mid),
               lambda r: r.reg_peak)
    # As late as possible: the largest sum of issue times (bisection on its negation).
    latest = sum(L - op.cycles for op in g.ops)
    bisect(-latest, -sum(best.times.values()), "latest issue times",
           lambda what, mid: query(what, TIE_BREAK_RLIMIT, max_length=L, max_regs=R, min_time_sum=-mid),
           lambda r: -sum(r.times.values()))
    return best.times, best.warps, (TieBreak("length", length(best.times), length_lo),
                                    TieBreak("register peak", register_peak(g, ii, best.times, best.warps), regs_lo))
