"""The K best schedules: distinct up to renaming, in order of ii and then of the tie-break.

``more_schedules(prep, best, k, ...)`` extends the schedule ``search.solve``
found (``best``) with up to k - 1 others, each in a different class of
``model.canonical`` (uniform time shifts, warp-role permutations, graph
automorphisms: the same executed kernel up to names).

Order.  Classes are ranked by ``rank_key``: ii, then the length from the
first issue, then the largest per-warp register peak, then the largest sum
of issue times from the first issue (as late as possible), then the
canonical form (lexicographically).  ``best`` is always first (among the
classes that tie with it on the four measures it comes first, whatever its
canonical form: it is the schedule a plain ``solve`` returns); the others
follow in rank order.

Search.  For ii = best.ii, best.ii + 1, ... (up to ``max_ii``) one z3
model (``smt.JointProblem``) holds a blocking clause per class found (one
per automorphic image: the differences of issue times to the first op and
the first-fit roles, which z3's model already numbers that way).  Each
round finds the least length among the classes not yet blocked (bisection),
then the least register peak at that length, then the largest time sum, and
then every class with exactly those measures (at most ``TIE_GROUP_MAX``),
sorted by canonical form.  The queries run under deterministic budgets
(``FIND_RLIMIT`` for any next class, the tie-break budgets of ``limits``)
and the solve's deadline: when it passes, the classes found so far are
returned (at least ``best``).  Times are bounded by ``smt.time_bound(ii)``,
so the classes ranked are those whose span fits it; every schedule is
checked by ``model.check``.

At scale (tens of ops) z3 may not find the next class within its budget;
then the search at that ii ends with what z3 found and the best (by rank)
of the valid schedules one move away from the known classes (an op one
cycle or one stage earlier or later, or on another role; ``_neighbours``),
and no larger ii is tried.  Those are valid and distinct and come in rank
order, but are not proven to be the K best: the exact K best are what the
tests compare with brute force, on small graphs.
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import InputError, SolverTimeoutError
from ..model import check, make_schedule
from ..model.canonical import MAX_TOP_K, automorphisms, canonical_form, canonical_roles, images
from .heuristic import register_peak
from .limits import LENGTH_RLIMIT, TIE_BREAK_RLIMIT, Deadline
from .progress import Progress
from .smt import JointProblem, time_bound

#: Classes with one set of measures enumerated at most per round (then the first found, sorted).
TIE_GROUP_MAX = 64
#: rlimit of the query for any next class (past it: the neighbours of the known classes, ``_neighbours``).
FIND_RLIMIT = 5_000_000
#: Valid neighbours collected per schedule wanted before the best are kept.
NEIGHBOURS_PER_SCHEDULE = 4


def check_top_k(k) -> int:
    """``k`` as a count of schedules, or InputError."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_TOP_K:
        raise InputError(f"top_k must be an integer from 1 to {MAX_TOP_K} (how many schedules to return), "
                         f"got {k!r}")
    return k


def rank_key(graph, ii: int, times: dict, warps: dict, form: tuple) -> tuple:
    """(ii, length, register peak, -time sum, canonical form): the order of the K best."""
    t0 = min(times.values())
    length = max(times[op.name] + op.cycles for op in graph.ops) - t0
    return (ii, length, register_peak(graph, ii, times, warps), -sum(t - t0 for t in times.values()), form)


class _Ranker:
    """Canonical forms and keys of one graph on one machine."""

    def __init__(self, graph, machine):
        self.graph, self.machine = graph, machine
        self.maps, self.complete = automorphisms(graph, machine)

    def form(self, times, warps) -> tuple:
        return canonical_form(self.graph, times, warps, self.machine.warp_groups, self.maps, self.machine.roles)

    def key(self, ii, times, warps) -> tuple:
        return rank_key(self.graph, ii, times, warps, self.form(times, warps))


def more_schedules(prep, best, k: int, *, options, deadline: Deadline, max_ii: int) -> tuple:
    """Up to ``k - 1`` schedules after ``best`` (module docstring), as ``Schedule`` objects."""
    g, m = prep.graph, prep.machine
    rk = _Ranker(g, m)
    first_key = rk.key(best.ii, {n: p.time for n, p in best.ops.items()}, {n: p.warp for n, p in best.ops.items()})
    found = {(best.ii, first_key[-1]): first_key}  # (ii, canonical form) -> key
    picked: list = []  # (key, times, warps)
    ii = best.ii
    while len(picked) < k - 1 and ii <= max_ii and not deadline.expired():
        if options.progress is not None:
            lb = best.lower_bound.ii if best.lower_bound is not None else best.ii
            options.progress(Progress("top-k", deadline.elapsed(), lb, best.ii, ii))
        try:
            if not _at_ii(g, m, ii, rk, found, k - 1, picked, options, deadline):
                break  # z3's budget ran out at this ii: no ranking of larger ii after it
        except SolverTimeoutError:
            break
        ii += 1
    picked.sort(key=lambda x: x[0])
    out = []
    for key, times, warps in picked[:k - 1]:
        t0 = min(times.values())
        times = {n: t - t0 for n, t in times.items()}
        warps = canonical_roles(g, warps, m.warp_groups, m.roles)
        s = make_schedule(g, m.name, key[0], times, warps, {op.name: op.cycles for op in g.ops},
                          optimal=best.optimal and key[0] == best.ii, lower_bound=best.lower_bound,
                          solve_seconds=deadline.elapsed(), normalization=best.normalization,
                          streaming=best.streaming)
        bad = check(s, g, m, cross_warp_sync=options.cross_warp_sync)
        if bad:  # a solver bug: never hand out an unchecked schedule
            raise AssertionError("top-k produced a schedule the checker rejects: " + "; ".join(map(str, bad)))
        out.append(s)
    return tuple(out)


def _block(problem, rk: _Ranker, times: dict, warps: dict) -> None:
    """Exclude the class of (times, warps) from ``problem``: every automorphic image, any shift."""
    z3, g = problem.z3, rk.graph
    names = g.names
    v0 = names[0]
    for t, w in images(g, times, warps, rk.maps):
        roles = canonical_roles(g, w, rk.machine.warp_groups, rk.machine.roles)
        differ = [problem.t[n] - problem.t[v0] != t[n] - t[v0] for n in names[1:]]
        if any(roles[n] not in problem.roles for n in names):
            continue  # a role numbering z3's model cannot take: nothing to exclude
        differ += [z3.Not(problem.on[n][problem.roles.index(roles[n])]) for n in names]
        problem.solver.add(z3.Or(differ))


def _at_ii(g, m, ii, rk: _Ranker, found: dict, need: int, out: list, options, dl: Deadline) -> bool:
    """Append to ``out`` the classes at ``ii`` in rank order until it holds ``need`` (or there are no
    more); each as soon as it is found, so that a deadline passing keeps them (module docstring).
    False when z3's budget cut the search (the neighbours of the known classes filled in)."""
    from .symmetry import order_constraints
    order = tuple(order_constraints(g, m)) if options.symmetry and rk.complete else ()
    problem = JointProblem(g, m, ii, cross_warp_sync=options.cross_warp_sync, deadline=dl, order=order)
    for (at, form), key in list(found.items()):
        if at == ii:
            _block(problem, rk, *_unform(g, form))
    while len(out) < need:
        r = _query(problem, dl, FIND_RLIMIT)
        if r is not None and r.status != "sat":
            return True  # every class at ii is found
        cut = r is None
        if not cut:
            (L, R, S), r, cut = _least(problem, r, g, ii, dl)
            _add(problem, rk, ii, r, found, out)  # the best left, as far as the budgets could tell
        for _ in range(TIE_GROUP_MAX if not cut else 0):  # then every class with the same measures
            r = _query(problem, dl, TIE_BREAK_RLIMIT, max_length=L, max_regs=R, min_time_sum=S)
            if r is None:
                cut = True
            if r is None or r.status != "sat":
                break
            _add(problem, rk, ii, r, found, out)
        if cut:  # z3's budget ran out: the order is no longer proven; fill in from the neighbours
            _neighbours(g, ii, rk, found, need, out, options, dl)
            return False
    return True


def _add(problem, rk: _Ranker, ii: int, r, found: dict, out: list) -> None:
    """Block the class of z3's schedule ``r``; keep it when it is new."""
    key = rk.key(ii, r.times, r.warps)
    _block(problem, rk, r.times, r.warps)
    if (ii, key[-1]) not in found:
        found[(ii, key[-1])] = key
        out.append((key, r.times, r.warps))


def _unform(g, form: tuple) -> tuple[dict, dict]:
    """(times, warps) of a canonical form: a member of its class."""
    return {n: t for n, (t, _) in zip(g.names, form)}, {n: w for n, (_, w) in zip(g.names, form)}


def _neighbours(g, ii, rk: _Ranker, found: dict, need: int, out: list, options, dl: Deadline) -> None:
    """When z3 cannot find the next class within its budget (graphs of tens of ops): the valid schedules
    one move away from the classes known at ``ii`` (an op one cycle or one stage earlier or later, or on
    another role), breadth first, checked by ``model.check``; the best ``need`` by rank are added."""
    from ..model import check as valid
    bound = time_bound(g, rk.machine, ii)
    frontier = [_unform(g, form) for (at, form) in found if at == ii]
    fresh: list = []
    while frontier and len(fresh) < NEIGHBOURS_PER_SCHEDULE * need and not dl.expired():
        times, warps = frontier.pop(0)
        roles = sorted(set(warps.values()))
        for n in g.names:
            moves = [({**times, n: times[n] + d}, warps) for d in (-ii, -1, 1, ii) if times[n] + d >= 0]
            moves += [(times, {**warps, n: w}) for w in roles + [max(roles) + 1] if w != warps[n]]
            for t, w in moves:
                t0 = min(t.values())
                if max(t.values()) - t0 > bound or max(w.values()) >= rk.machine.warp_groups:
                    continue
                s = make_schedule(g, rk.machine.name, ii, t, w, {op.name: op.cycles for op in g.ops})
                if valid(s, g, rk.machine, cross_warp_sync=options.cross_warp_sync):
                    continue
                key = rk.key(ii, t, w)
                if (ii, key[-1]) not in found:
                    found[(ii, key[-1])] = key
                    fresh.append((key, t, w))
                    frontier.append((t, w))
    fresh.sort(key=lambda x: x[0])
    out += fresh[:need - len(out)]


def _query(problem, dl: Deadline, rlimit: int, **bounds):
    """One query; None past the deadline or its budget (the caller stops there)."""
    r = problem.solve(deadline=dl, rlimit=rlimit, minimize_core=False, **bounds)
    if r.status == "timeout":
        raise SolverTimeoutError(dl.message("while looking for the next best schedule"))
    return None if r.status == "budget" else r


def _least(problem, r, g, ii, dl):
    """((length, register peak, time sum), the schedule that has them, whether a budget cut the bisection)
    of the best remaining class: bisection on each measure in turn."""
    def length(q):
        return max(q.times[op.name] + op.cycles for op in g.ops)

    cur, cut = r, False

    def bisect(lo, hi, run, measure):
        nonlocal cur, cut
        while lo < hi:
            mid = (lo + hi) // 2
            q = run(mid)
            if q is None:
                cut = True
                break
            if q.status == "sat":
                cur, hi = q, measure(q)
            else:
                lo = mid + 1
        return hi

    L = bisect(max(op.cycles for op in g.ops), length(r),
               lambda mid: _query(problem, dl, LENGTH_RLIMIT, max_length=mid), length)
    R = bisect(0, register_peak(g, ii, cur.times, cur.warps),
               lambda mid: _query(problem, dl, TIE_BREAK_RLIMIT, max_length=L, max_regs=mid),
               lambda q: register_peak(g, ii, q.times, q.warps))
    # as late as possible: the largest time sum, by bisection on its negation
    negS = bisect(-sum(L - op.cycles for op in g.ops), -sum(cur.times.values()),
                  lambda mid: _query(problem, dl, TIE_BREAK_RLIMIT, max_length=L, max_regs=R, min_time_sum=-mid),
                  lambda q: -sum(q.times.values()))
    return (L, R, -negS), cur, cut


def top_list(best) -> list:
    """``[best, *alternatives]``: what ``solve(..., top_k=K)`` returns."""
    return [replace(best, alternatives=()), *best.alternatives]
