"""The search for the smallest ii (Algorithm 1 of the paper, made complete).

``solve(graph, machine)``:

1. ``prepare``: check the graph against the machine, normalize costs (the
   ZLP of section 5.2, unless the graph says ``"normalize": false``) and
   give streaming variable-latency ops zero latency (section 5.3).
2. Start at ``LB = max(ResMII, RecMII)``; no smaller ii can work.
3. For ii = LB, LB+1, ...: ask the joint z3 problem (``smt.JointProblem``)
   whether any schedule exists, first within Algorithm 1's length window
   (critical path + ii) and, if the unsat core shows that the window is what
   failed, without it.  The time bound of the model is proven loss-free, so
   ``unsat`` proves ii impossible, and the (minimized) unsat core names the
   constraint families that rule it out.
4. On the first ``sat``, the tie-breaks: the shortest length (galloping up
   from the critical path, then bisection), then the lowest per-warp
   register peak, then the latest issue times (largest sum: values are
   produced as late as their consumers allow), then z3's model (pinned z3
   version, seed 0).
5. Verify the schedule with the independent checker before returning it.

At scale (20-40 ops), three steps come first (see ``heuristic``,
``prune``, ``symmetry``):

* a refutation valid at every ii (values live in every cycle that cannot be
  packed into the warp roles or memories) ends an infeasible search at once;
* the incumbent heuristic (iterative modulo scheduling with the joint
  rules, checked by ``model.check``) gives a valid schedule at some ii_inc:
  z3 then only has to decide the ii in [LB, ii_inc), one by one, upwards
  (feasibility is not known to be monotone in ii under the joint rules:
  register limits, blocking waits and reservation patterns change with ii,
  so no ii is skipped by bisection and each keeps its own proof); when all
  are refuted the incumbent's ii is optimal without a z3 schedule, and the
  tie-breaks start from the incumbent;
* interchangeable copies (heads, sub-tiles) are ordered by time in the z3
  model (``symmetry.order_constraints``), which removes their k! symmetric
  schedules from every refutation.
* when the heuristic's incumbent is above the lower bound, ``incumbents``
  looks for better ones from the graph's structure (copies interleaved,
  the unit graph of a common factor); one replaces the
  heuristic's only at a strictly smaller ii, and at its ii the scan's own
  queries still run within ``CONFIRM_RLIMIT``, so that where z3 finds a
  schedule there the answer is the one the scan would have given without it.

Anytime answers.  When the deadline passes while an ii below the incumbent
is being decided, the search returns the incumbent with ``optimal`` false
and ``lower_bound.ii`` the first ii not proven impossible (every ii below it
is), instead of raising.  Without a heuristic schedule (none found, or
``heuristic=False``) the incumbent is the serial schedule, valid by
construction (``fallback``: one iteration at a time, one stage, one role
when the registers allow), so ``SolverTimeoutError`` is raised only when
that one is not valid either (its reason is in the message) and nothing
better was found in time.  When it passes during the tie-breaks, the best
schedule so far at the proven optimal ii is returned (still ``optimal``).
``progress`` (a callback, ``progress.Progress``) hears about each step.

Limits.  One ``limits.Deadline`` (``time_limit`` seconds, or the caller's)
covers all of it: normalization, building each model, every query, core
minimization, the tie-breaks and the final check.  When it passes, the
search returns the anytime answer above, or, with no valid schedule in
hand, raises ``SolverTimeoutError`` saying which ii it was deciding and
what was proven.  Core minimization and the tie-breaks are bounded by z3's deterministic resource
counter instead (``limits.CORE_RLIMIT``, ``LENGTH_RLIMIT``,
``TIE_BREAK_RLIMIT`` per query, ``TIE_BREAK_TOTAL_RLIMIT`` for all
tie-breaks of a solve): a tie-break query that exhausts its budget ends
that tie-break the same way on every machine.  So with a time limit that is
not reached, the schedule does not depend on machine speed; with one that
is, the answer is the anytime one (or SolverTimeoutError).  The length is
therefore the shortest z3 finds within the budget (the shortest in practice; a longer one is never
passed off as proven: ``Schedule.tie_breaks`` keeps the length and register peak with the bound each
was proven to, and the reports say which were proven minimal).

``optimal`` is true when every ii in [LB, ii) was proven impossible.  The
search stops at ``max_ii`` (default: the ii at which one iteration fits
alone, ops back to back with every delay and spill), so it always
terminates; a graph infeasible up to there is reported with the constraint
family that rules it out.
"""
from __future__ import annotations

import time as _time
from dataclasses import dataclass, field, replace
from typing import Callable

from ..errors import GraphError, InfeasibleError, InputError, SolverTimeoutError
from ..model import Attempt, Graph, LowerBound, check, get_machine, make_schedule, rec_mii, res_mii
from ..model.families import Bound, Family
from ..model.graph import MAX_INT
from .symmetry import canonical_named_roles
from .limits import CONFIRM_RLIMIT, TIE_BREAK_TOTAL_RLIMIT, Deadline
from .fallback import SERIAL, serial_schedule
from .heuristic import Incumbent, register_peak
from .heuristic import incumbent as find_incumbent
from .incumbents import COPIES, REDUCTION, improve
from .progress import Progress
from .prune import refute_every_ii
from .smt import SOLVER, JointProblem, SmtResult
from .symmetry import order_constraints
from .tiebreaks import critical_path, untried_tie_breaks
from .tiebreaks import shortest as _shortest
from .topk import check_top_k, more_schedules, top_list

#: ``Attempt.solver`` of the incumbent heuristic's schedule.
HEURISTIC = "heuristic"
#: Share of the time left that the incumbent heuristic may use.
HEURISTIC_SHARE = 0.3
#: ``Attempt.solver`` of the incumbents from the graph's structure (``incumbents``).
STRUCTURAL = (REDUCTION, COPIES)


@dataclass(frozen=True)
class SolveOptions:
    """Options of ``solve`` (fields, not PassContext keys).

    ``time_limit``: seconds for the whole solve (normalization, search,
    tie-breaks, check).  ``normalize_bound``: U of the normalization ZLP;
    ``normalize_objective``: ``"relative"`` (least relative ratio error, the
    default), ``"paper"`` (the paper's F) or ``"rounding"`` (the best scaled
    rounding, no ZLP: what a solve falls back to when the limit ends the ZLP).
    ``streaming_depth``: ring-buffer depth of a streaming load (its shared
    memory is charged that many times).
    ``cross_warp_sync``: a consumer that receives a value from another warp
    waits for it, like a blocking edge (the paper's elided constraint).
    ``max_ii``: stop the search there (None: one iteration alone).
    ``heuristic``: look for an incumbent schedule first (``heuristic``);
    ``fallback``: without one, take the serial schedule valid by construction
    (``fallback``: one iteration at a time) as the incumbent, and when the
    limit ends the normalization ZLP, normalize by the best scaled rounding;
    ``symmetry``: order interchangeable copies in the z3 model (``symmetry``).
    ``progress``: a callback taking ``progress.Progress`` reports (None: silent).
    ``top_k``: also find the next best schedules, distinct up to renaming, up to
    ``top_k`` in all (``topk``; the schedule's ``alternatives``).
    ``incumbents``: when the heuristic's incumbent is above the lower bound, look for
    better ones from the graph's structure (``incumbents``: copies interleaved, the unit
    graph of a common factor); needs ``heuristic``.
    """

    time_limit: float = 30.0
    normalize_bound: int = 300
    normalize_objective: str = "relative"
    streaming_depth: int = 2
    cross_warp_sync: bool = False
    max_ii: int | None = None
    heuristic: bool = True
    fallback: bool = True
    symmetry: bool = True
    progress: Callable | None = field(default=None, compare=False)
    top_k: int = 1
    incumbents: bool = True

    def __post_init__(self):
        check_top_k(self.top_k)
        _check_fields(self)


def _check_fields(o: SolveOptions) -> None:
    """InputError (one line, the field named) for a SolveOptions field of the wrong type or range."""
    from .normalize import OBJECTIVES

    def whole(v):
        return not isinstance(v, bool) and isinstance(v, int) and v >= 1
    t = o.time_limit
    checks = [("time_limit", t is None or not isinstance(t, bool) and isinstance(t, (int, float)) and t >= 0,
               "a number of seconds >= 0 or None (no limit)"),
              ("normalize_bound", whole(o.normalize_bound), "an integer >= 1"),
              ("normalize_objective", o.normalize_objective in OBJECTIVES, f"one of {list(OBJECTIVES)}"),
              ("streaming_depth", whole(o.streaming_depth), "an integer >= 1"),
              ("max_ii", o.max_ii is None or whole(o.max_ii), "an integer >= 1 or None"),
              ("progress", o.progress is None or callable(o.progress), "a callable or None")]
    checks += [(f, isinstance(getattr(o, f), bool), "True or False")
               for f in ("cross_warp_sync", "heuristic", "fallback", "symmetry", "incumbents")]
    for name, ok, want in checks:
        if not ok:
            raise InputError(f"SolveOptions: {name} must be {want}, got {getattr(o, name)!r}")


@dataclass(frozen=True)
class Prepared:
    """The graph the solver actually schedules, and how it was derived.

    ``deadline``: the one ``prepare`` started (or was given); ``solve_prepared``
    continues it, so prepare + solve_prepared share one time limit."""

    graph: object
    machine: object
    normalization: dict | None
    streaming: tuple
    deadline: Deadline | None = field(default=None, compare=False, repr=False)


def _resolve_machine(graph, machine):
    if machine is None:
        machine = graph.machine if graph.machine is not None else "h100"
    return get_machine(machine)


def prepare(graph, machine=None, options: SolveOptions = SolveOptions(), *,
            deadline: Deadline | None = None) -> Prepared:
    """Normalize costs and apply the streaming-op rule; validate against the machine.

    ``deadline``: the solve's Deadline (default: a new one of
    ``options.time_limit`` seconds, kept in the result for ``solve_prepared``)."""
    dl = Deadline.of(deadline, options.time_limit)
    m = _resolve_machine(graph, machine)
    graph.validate_for(m)
    report = None
    g = graph
    if graph.normalize:
        from .normalize import normalize_graph
        try:
            g, norm = normalize_graph(graph, m, U=options.normalize_bound, objective=options.normalize_objective,
                                      deadline=dl)
        except SolverTimeoutError:
            if not options.fallback:
                raise
            # No time for the ZLP's optimum: the best scaled rounding (deterministic, no CBC).
            g, norm = normalize_graph(graph, m, U=options.normalize_bound, objective="rounding")
        report = {"U": norm.U, "objective": norm.objective, "distortion": norm.distortion,
                  "max_ratio_error": round(norm.max_ratio_error, 6),
                  "mapping": {str(k): v for k, v in sorted(norm.mapping.items())}}
    streaming = tuple(op.name for op in g.ops if op.variable_latency and not g.in_edges(op.name))
    if streaming:
        # Section 5.3: a streaming load runs ahead on its own warp, so its
        # consumers see it with zero latency; its ring of `depth` buffers is
        # charged to shared memory.
        ops = tuple(replace(op, smem=_ring_bytes(op, options.streaming_depth, m)) if op.name in streaming else op
                    for op in g.ops)
        edges = tuple(replace(e, delay=0) if e.src in streaming else e for e in g.edges)
        g = g.replace(ops=ops, edges=edges, normalize=False)
    if not options.fallback:
        dl.check("while preparing the graph (normalization)")
    return Prepared(graph=g, machine=m, normalization=report, streaming=streaming, deadline=dl)


def _ring_bytes(op, depth: int, machine) -> int:
    """Shared memory of a streaming op's ring of ``depth`` buffers.  More bytes than the
    machine has count as ``smem_bytes + 1`` (rule 6 treats them alike), so the ring stays
    within the documented integer limit; only a machine of 2**31-1 bytes cannot say so."""
    ring = min(op.smem * depth, max(op.smem, machine.smem_bytes + 1))
    if ring > MAX_INT:
        raise GraphError(f"streaming op '{op.name}': its ring of {depth} x {op.smem} bytes is beyond what any "
                         f"GPU loop has (at most {MAX_INT}): give machine '{machine.name}' less shared memory")
    return ring


def default_max_ii(graph, machine) -> int:
    """An ii at which one iteration fits alone: every op back to back, with
    its largest outgoing delay and spill."""
    total = 0
    for op in graph.ops:
        sp = machine.spill_of(op)
        total += max([op.cycles] + [e.delay + sp for e in graph.out_edges(op.name)])
    return max(1, total)


def solve(graph, machine=None, *, time_limit: float | None = None, options: SolveOptions | None = None,
          deadline: Deadline | None = None, progress: Callable | None = None, top_k: int | None = None):
    """The schedule with the smallest ii (then length) for ``graph`` on ``machine``.

    ``top_k``: a list of up to ``top_k`` schedules instead, distinct up to
    renaming, in order of ii and then of the tie-break (``topk``); the first
    is the schedule ``solve`` returns without it.  The time limit covers them
    all: when it passes, the list holds those found so far (at least one).

    ``time_limit`` (default ``options.time_limit``) seconds cover the whole
    call; a caller with its own ``limits.Deadline`` passes ``deadline``
    instead.  Raises ``InfeasibleError`` (with ``.family``) when no ii up to
    ``max_ii`` works and ``SolverTimeoutError`` when time runs out before any
    valid schedule is found (after one is found: the anytime answer, with
    ``optimal`` false).  ``progress``: see ``SolveOptions``.
    """
    if not isinstance(graph, Graph):
        raise InputError(f"solve takes a tvm_twill.Graph, got {type(graph).__name__}: read a JSON graph with "
                         "tvm_twill.model.load_graph(path)")
    if options is not None and not isinstance(options, SolveOptions):
        raise InputError(f"options must be a tvm_twill.solvers.SolveOptions (or None), got {type(options).__name__}")
    opts = options or SolveOptions()
    if time_limit is not None:
        opts = replace(opts, time_limit=time_limit)
    if progress is not None:
        opts = replace(opts, progress=progress)
    if top_k is not None:
        opts = replace(opts, top_k=check_top_k(top_k))
    dl = Deadline.of(deadline, opts.time_limit)
    best = solve_prepared(prepare(graph, machine, opts, deadline=dl), opts, deadline=dl)
    return best if top_k is None else top_list(best)


def solve_prepared(prep: Prepared, options: SolveOptions | None = None, *, deadline: Deadline | None = None,
                   progress: Callable | None = None, tie_breaks: bool = True):
    """``solve`` on a graph that ``prepare`` already normalized (so a caller that
    also needs the prepared graph, like the CLI's report, prepares it once).
    ``tie_breaks`` False: the first schedule at the best ii, as found (an incumbent's sub-solve).

    The time limit: ``deadline`` if given, else the deadline ``prepare``
    started, unless ``options`` asks for a different ``time_limit`` than
    prepare had (then a new Deadline of that many seconds starts here).

    One concern, the search of Algorithm 1 with its scale measures, in one function on purpose
    (the one exemption from the 80-line rule, docs/architecture.md): its stages (refute every ii,
    the incumbent, the ii scan, the anytime answer, the tie-breaks) share the deadline, the
    attempts and the incumbent through closures; splitting it needs a search-state object."""
    opts = options or SolveOptions()
    report = progress or opts.progress
    dl = deadline
    if dl is None:
        dl = prep.deadline if prep.deadline is not None and prep.deadline.limit == opts.time_limit \
            else Deadline(opts.time_limit)
    g, m = prep.graph, prep.machine
    if opts.top_k > 1:  # the best one, then the next best (topk), under the same deadline
        best = solve_prepared(prep, replace(opts, top_k=1), deadline=dl, progress=progress)
        max_ii = max(best.ii, opts.max_ii or default_max_ii(g, m))
        return replace(best, alternatives=more_schedules(prep, best, opts.top_k, options=opts, deadline=dl,
                                                         max_ii=max_ii))
    res, rec = res_mii(g, m), rec_mii(g)
    window = critical_path(g)
    lb = max(res, rec)
    max_ii = max(lb, opts.max_ii or default_max_ii(g, m))
    attempts: list[Attempt] = []
    last_core: tuple = ()
    streaming = {"ops": list(prep.streaming), "depth": opts.streaming_depth} if prep.streaming else None

    def proven(ii: int) -> str:
        done = f"every ii in [{lb}, {ii}) proven impossible" if ii > lb else f"ii={lb} is the lower bound"
        return done + (f"; no fallback: {no_serial}" if no_serial else "")

    def emit(phase: str, bound: int, best, ii=None) -> None:
        """Report; ``best``: the incumbent, or the ii of the best schedule in hand (an int), or None."""
        if report is not None:
            best_ii = best if isinstance(best, int) or best is None else best.ii
            report(Progress(phase, dl.elapsed(), bound, best_ii, ii))

    def checked(sched):
        sched = canonical_named_roles(sched, g, m)  # identical named roles: first used, lowest (symmetry.py)
        bad = check(sched, g, m, cross_warp_sync=opts.cross_warp_sync)
        if bad:  # a solver bug: never hand out an unchecked schedule
            raise AssertionError("solver produced a schedule the checker rejects: " + "; ".join(map(str, bad)))
        return sched

    # (scale) Values live in every cycle that cannot be packed: no ii works.
    refutation = refute_every_ii(g, m, stop=dl.expired)
    if refutation is not None:
        raise InfeasibleError(f"graph '{g.name}' has no schedule on '{m.name}' for any ii: {refutation.message}",
                              family=refutation.family, attempts=attempts)

    # (scale) The incumbent: an upper bound on ii, and the anytime answer.
    inc, no_serial = _first_schedule(g, m, lb, max_ii, opts, dl, attempts)
    if opts.heuristic and opts.incumbents and (inc is None or inc.ii > lb):
        inc = improve(g, m, lb, inc, solve=_sub_solver(m, opts), deadline=dl, cross_warp_sync=opts.cross_warp_sync,
                      attempts=attempts)
    if opts.heuristic or inc is not None:
        emit("incumbent", lb, inc)

    def anytime(ii: int):
        """The incumbent, not proven optimal: every ii in [lb, ii) is proven impossible."""
        sched = make_schedule(
            g, m.name, inc.ii, inc.times, inc.warps, {op.name: op.cycles for op in g.ops},
            optimal=False, lower_bound=LowerBound(ii=ii, resource=res, recurrence=rec),
            solve_seconds=dl.elapsed(), proof_seconds=None, attempts=tuple(attempts),
            normalization=prep.normalization, streaming=streaming)
        emit("done", ii, inc)
        return checked(sched)

    def optimum(problem, first, ii: int, proof_seconds: float):
        """ii is proven optimal and ``first`` is a schedule there: tie-breaks, check."""
        emit("tie-breaks", ii, ii, ii)  # a schedule at the proven optimal ii is in hand
        times, warps, ties = (first.times, first.warps, untried_tie_breaks(g, ii, first.times, first.warps)) \
            if problem is None or not tie_breaks else \
            _shortest(problem, first, ii, g, attempts, dl.ending_earlier(_finish_reserve(dl, built[0])), proven(ii),
                      TIE_BREAK_TOTAL_RLIMIT)
        sched = make_schedule(
            g, m.name, ii, times, warps, {op.name: op.cycles for op in g.ops},
            optimal=True, lower_bound=LowerBound(ii=ii, resource=res, recurrence=rec),
            solve_seconds=dl.elapsed(), proof_seconds=proof_seconds, attempts=tuple(attempts),
            normalization=prep.normalization, streaming=streaming, tie_breaks=ties)
        emit("done", ii, ii)
        return checked(sched)

    order = tuple(order_constraints(g, m)) if opts.symmetry else ()
    top = inc.ii - 1 if inc is not None else max_ii
    # With an incumbent in hand, the proofs stop a little early, so that returning it (building
    # and checking the schedule) still ends within the limit.
    # Tearing a z3 model down takes about a tenth of its build time: ``built`` holds the last build's.
    built = [0.0]
    sdl = dl.ending_earlier(_finish_reserve(dl, 0.0)) if inc is not None else dl
    for ii in range(lb, top + 1):
        emit("proving", ii, inc, ii)
        if sdl.expired():  # one clock read: the answer and the error cannot disagree on the time
            if inc is not None:
                return anytime(ii)
            raise SolverTimeoutError(dl.message(f"before deciding ii={ii} ({proven(ii)})"), attempts)
        t0, b0 = _time.perf_counter(), dl.elapsed()
        try:
            problem = JointProblem(g, m, ii, cross_warp_sync=opts.cross_warp_sync, deadline=sdl, order=order)
            built[0] = dl.elapsed() - b0
            sdl = dl.ending_earlier(_finish_reserve(dl, built[0])) if inc is not None else dl
        except SolverTimeoutError:
            attempts.append(Attempt(ii, None, "timeout", _time.perf_counter() - t0, solver=SOLVER))
            if inc is not None:
                return anytime(ii)
            raise SolverTimeoutError(dl.message(f"while building the z3 model for ii={ii} ({proven(ii)})"),
                                     attempts) from None
        # Algorithm 1's window first (L <= critical path + ii): cheaper, and a short
        # first length.  If the core shows the window did not matter, ii is refuted;
        # otherwise decide ii without it (the time bound keeps that query complete).
        r = problem.solve(max_length=window + ii, deadline=sdl)
        seconds = _time.perf_counter() - t0  # the model build, the query and its core minimization
        if r.status == "sat":
            attempts.append(Attempt(ii, window + ii, "sat", seconds, solver=SOLVER))
        elif r.status == "unsat" and Bound.LENGTH in r.core:
            attempts.append(Attempt(ii, window + ii, "unsat", seconds, reason=" + ".join(r.core), solver=SOLVER))
            t0 = _time.perf_counter()
            r = problem.solve(deadline=sdl)
            seconds = _time.perf_counter() - t0
        if r.status == "timeout":
            attempts.append(Attempt(ii, None, "timeout", seconds, solver=SOLVER))
            if r.unsat_proven:  # ii is refuted; only naming its families ran out of time
                attempts[-1] = Attempt(ii, None, "unsat", seconds, reason=" + ".join(r.core) or None,
                                       solver=SOLVER)
                if inc is not None:
                    return anytime(ii + 1)
            elif inc is not None:
                return anytime(ii)
            doing = (f"while naming the constraint families that rule out ii={ii} (ii={ii} proven impossible; "
                     f"{proven(ii)})" if r.unsat_proven else f"while deciding ii={ii} ({proven(ii)})")
            raise SolverTimeoutError(dl.message(doing), attempts)
        if r.status == "unsat":
            last_core = r.core
            attempts.append(Attempt(ii, None, "unsat", seconds, reason=" + ".join(r.core) or None,
                                    solver=SOLVER))
            continue
        return optimum(problem, r, ii, dl.elapsed())  # every smaller ii refuted: ii is optimal
    if inc is not None:
        # Every ii in [lb, inc.ii) is proven impossible: the incumbent's ii is optimal.
        if tie_breaks and inc.seed in STRUCTURAL:  # z3's own schedule there, when it finds one within budget
            confirmed = _confirm(g, m, inc.ii, opts, sdl, window, order, attempts)
            if confirmed is not None:
                return optimum(*confirmed, inc.ii, dl.elapsed())
        # The tie-breaks start from the incumbent (z3 looks for shorter schedules).
        proof_seconds = dl.elapsed()
        first = SmtResult("sat", times=inc.times, warps=inc.warps, length=inc.length,
                          reg_peak=register_peak(g, inc.ii, inc.times, inc.warps))
        try:
            b0 = dl.elapsed()
            problem = JointProblem(g, m, inc.ii, cross_warp_sync=opts.cross_warp_sync, deadline=dl,
                                   order=order) if tie_breaks else None
            built[0] = dl.elapsed() - b0
        except SolverTimeoutError:
            problem = None  # out of time: the incumbent as it is (its ii is still optimal)
        return optimum(problem, first, inc.ii, proof_seconds)
    family = _family(last_core)
    raise InfeasibleError(
        f"graph '{g.name}' has no schedule on '{m.name}' for any ii in [{lb}, {max_ii}] "
        f"(at ii={max_ii} one iteration runs alone): ruled out by {' + '.join(last_core) or family}",
        family=family, attempts=attempts)


def _first_schedule(g, m, lb: int, max_ii: int, opts: SolveOptions, dl: Deadline, attempts: list):
    """(incumbent or None, why there is no fallback or None): the heuristic's schedule (within
    HEURISTIC_SHARE of the time left), else the serial schedule valid by construction
    (``fallback.serial_schedule``), so that no lack of time before a first schedule leaves
    the search empty-handed when that one is valid."""
    inc = None
    if opts.heuristic:
        t0 = _time.perf_counter()
        stop_at = dl.elapsed() + HEURISTIC_SHARE * dl.left()  # the deadline's own clock
        inc = find_incumbent(g, m, lb, max_ii, cross_warp_sync=opts.cross_warp_sync,
                             stop=lambda: dl.expired() or dl.elapsed() > stop_at)
        if inc is not None:
            attempts.append(Attempt(inc.ii, inc.length, "sat", _time.perf_counter() - t0, solver=HEURISTIC))
    if inc is not None or not opts.fallback:
        return inc, None
    t0 = _time.perf_counter()
    s = serial_schedule(g, m, lb=lb, cross_warp_sync=opts.cross_warp_sync)
    if s.ii is None:
        return None, s.reason
    seconds = _time.perf_counter() - t0
    length = max(s.times[o.name] + o.cycles for o in g.ops)
    attempts.append(Attempt(s.ii, length, "sat", seconds, solver=SERIAL))
    return Incumbent(s.ii, length, s.times, s.warps, SERIAL, seconds), None


def _sub_solver(m, opts: SolveOptions):
    """``solve(graph, deadline, machine=m)`` for ``incumbents.improve``: the whole search on a part of
    the prepared graph (a unit graph, one copy), no tie-breaks; None when it has no schedule."""
    def run(graph, deadline: Deadline, machine=None):
        prep = Prepared(graph=graph, machine=machine or m, normalization=None, streaming=())
        try:
            return solve_prepared(prep, replace(opts, progress=None, top_k=1, max_ii=None), deadline=deadline,
                                  tie_breaks=False)
        except (InfeasibleError, SolverTimeoutError):
            return None
    return run


def _confirm(g, m, ii: int, opts: SolveOptions, dl: Deadline, window: int, order: tuple, attempts: list):
    """(problem, z3's schedule) from the scan's own queries at ``ii`` (the window first, then without
    it), each within ``CONFIRM_RLIMIT``; None when z3 finds none within it (or in time)."""
    t0 = _time.perf_counter()
    try:
        problem = JointProblem(g, m, ii, cross_warp_sync=opts.cross_warp_sync, deadline=dl, order=order)
    except SolverTimeoutError:
        return None
    r = problem.solve(max_length=window + ii, deadline=dl, rlimit=CONFIRM_RLIMIT)
    if r.status == "sat":
        attempts.append(Attempt(ii, window + ii, "sat", _time.perf_counter() - t0, solver=SOLVER))
    elif r.status == "unsat" and Bound.LENGTH in r.core:
        attempts.append(Attempt(ii, window + ii, "unsat", _time.perf_counter() - t0, reason=" + ".join(r.core),
                                solver=SOLVER))
        r = problem.solve(deadline=dl, rlimit=CONFIRM_RLIMIT)
    return (problem, r) if r.status == "sat" else None


def _family(core: tuple) -> str:
    for f in Family.MOST_SPECIFIC_FIRST:
        if f in core:
            return f
    return Family.DEPENDENCE


def _finish_reserve(dl: Deadline, build_seconds: float) -> float:
    """Seconds the search leaves before the deadline to return its answer: building and checking
    the schedule (milliseconds) and tearing the z3 model down, which takes about a tenth of the
    model's build time (a 56-op graph: 3.1 s to build, 0.38 s to free; bench/solver_generated.py
    measures the wall times).  5% of the limit (at most a second) plus a fifth of the build."""
    return 0.0 if dl.limit is None else min(1.0, 0.05 * dl.limit) + 0.2 * build_seconds
