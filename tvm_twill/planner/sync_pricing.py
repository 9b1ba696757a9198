"""A plan priced as its kernel runs: a copy the plan leaves synchronous is solved as one.

The schedule is solved with every cp.async-capable copy priced as cp.async (issued, then overlapped by its
latency).  Which copies TVM really makes asynchronous depends on the stages the solve picks (a stage is
asynchronous only when every statement of it can be: ``async_copies``).  A capable copy the plan leaves
out of every async stage runs as a plain copy: each thread loads into registers and stores to shared
memory right away, so its warps wait at the store for the load and issue nothing else meanwhile.
``solve_and_fit`` then re-solves with those copies priced as such (``frontend.with_sync_copies``), until
every copy the plan prices as asynchronous is in an async stage.  Each round takes at least one copy out of
the capable set, so there are at most as many rounds as capable copies.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..frontend import Extraction, with_sync_copies
from ..model import Machine, Schedule
from ..model.schedule import LowerBound
from ..transforms import annotation_from_schedule, refine
from .async_copies import AsyncResult, all_copies_async, leading_copies, sync_copy_reasons
from .context import Candidate, PlanningContext
from .depth import DEFAULT_MAX_STAGES, default_max_stages
from .plan_alternatives import schedules_wanted
from .stages import FitResult, fit_shared

__all__ = ["Solved", "solve_and_fit", "solve_top"]


@dataclass(frozen=True)
class Solved:
    """``solve_and_fit``'s answer: the context (its extraction the one the plan was solved on), the best
    schedule's fit to shared memory and its async copies, the solver's next-best schedules (``top_k``), the
    copies re-priced as synchronous (name -> why the plan keeps them so), and ``priced_async``: the extraction
    as the first round solved it, every capable copy capable (what a warp-specialized plan starts from: its
    producer issues every such copy asynchronously)."""

    ctx: PlanningContext
    fitted: FitResult
    moved: AsyncResult
    others: tuple[Schedule, ...]
    repriced: dict
    priced_async: Extraction


def solve_top(solve, graph, ms: Machine, opts):
    """(the best schedule, the next best ones): ``top_k`` > 1 asks the solver for more (``plan_alternatives``)."""
    if opts.top_k == 1:
        return solve(graph, ms, time_limit=opts.time_limit), ()
    from ..solvers import SolveOptions
    sched = solve(graph, ms, options=SolveOptions(time_limit=opts.time_limit, top_k=schedules_wanted(opts.top_k)))
    return replace(sched, alternatives=()), sched.alternatives


def _left_sync(ex: Extraction, res: AsyncResult) -> dict:
    """The capable copies ``res``'s plan keeps out of every async stage: name -> why."""
    ann = res.candidate.annotation
    capable = {s.name for s in ex.stmts if s.async_capable}
    return {name: why for name, why in sync_copy_reasons(ex, ann, res.why_not) if name in capable}


def _certified(final: Schedule, first: Schedule) -> Schedule:
    """``final`` (solved with some capable copies priced as plain copies) with the certificates of ``first`` (the
    solve with every capable copy priced as cp.async).  That model is a relaxation of every plan of the loop
    (a copy priced as cp.async is never slower than it runs), so its lower bound and its refuted IIs hold for
    all of them; the bound and refutations of ``final``'s solve hold only while those copies stay plain.
    ``final`` is optimal when it reaches ``first``'s bound."""
    bound = first.ii if first.ii_optimal else (first.lower_bound.ii if first.lower_bound is not None else 0)
    lb = first.lower_bound
    lower = LowerBound(ii=bound, resource=lb.resource if lb else 0, recurrence=lb.recurrence if lb else 0)
    return replace(final, optimal=final.ii <= bound, lower_bound=lower, attempts=first.attempts)


def solve_and_fit(ex: Extraction, ms: Machine, m: Machine, opts, solve, progress) -> Solved:
    """Solve ``ex`` on the single-role machine ``ms``, fit the stages to shared memory (``fit_shared``) and
    gather the capable copies into an async stage (``all_copies_async``); while the plan leaves a capable copy
    synchronous, solve again with it priced as synchronous.  ``m``: the target's machine.  The final schedule
    carries the first solve's certificates (``_certified``); a shared-memory fit of an earlier round is kept
    when a later one needs none (it is why the copies stayed plain)."""
    repriced: dict = {}
    first = replace(ex, graph=ex.graph.replace(machine=ms))
    first_sched, shared_fit, lead = None, None, None
    for _ in range(sum(s.async_capable for s in ex.stmts) + 1):   # each round prices one more copy or ends
        graph = ex.graph.replace(machine=ms)
        ex = replace(ex, graph=graph)
        sched, others = solve_top(solve, graph, ms, opts)
        sched = _certified(sched, first_sched) if first_sched else sched   # what is proven of every plan
        first_sched = first_sched or sched
        progress.step(f"solved: ii {sched.ii * ex.quantum} cycles ({'optimal' if sched.optimal else 'best found'})")
        asyncable = [s.async_capable for s in ex.stmts]
        ann = refine(annotation_from_schedule(sched, graph, asyncable, allow_async=True), graph, ms, sched.ii)
        progress.begin("fitting the stages to TVM's buffer versions and shared memory")
        ctx = PlanningContext(extraction=ex, machine=ms, full_machine=m, options=opts, solve=solve)
        fitted = fit_shared(ctx, Candidate(sched, ann))
        shared_fit = fitted.shared_fit or shared_fit
        moved = all_copies_async(ctx, fitted.candidate)
        left = _left_sync(ex, moved)
        if not left:
            break
        if lead is None:   # the other way to price them honestly: make them all asynchronous
            lead = (ctx, fitted, leading_copies(ctx, moved.candidate, _stage_cap(ex, opts)))
        why = {n: f"{w} (priced as a synchronous copy: its warps wait at the shared store for the load)"
               for n, w in left.items()}
        repriced.update(why)
        progress.begin(f"solving again with {', '.join(left)} priced as synchronous copies (the plan keeps "
                       f"{'it' if len(left) == 1 else 'them'} out of every async stage)")
        ex = with_sync_copies(ex, why)
    if repriced and lead[2] is not None and lead[2].schedule.ii <= moved.candidate.schedule.ii:
        ctx, fitted, cand = lead   # every capable copy asynchronous, in a stage of its own: no copy re-priced
        moved, repriced, others = AsyncResult(cand, {}), {}, ()
        moved = replace(moved, candidate=replace(cand, schedule=_certified(cand.schedule, first_sched)))
    elif repriced:
        cand = moved.candidate
        moved = replace(moved, candidate=replace(cand, schedule=_certified(cand.schedule, first_sched)))
        fitted = replace(fitted, shared_fit=shared_fit)
    return Solved(ctx, fitted, moved, others, repriced, first)


def _stage_cap(ex: Extraction, opts) -> int:
    """The stage bound a plan keeps to: ``max_stages``, or the default (``planner.depth``)."""
    if opts.max_stages is not None:
        return opts.max_stages
    return default_max_stages(DEFAULT_MAX_STAGES if ex.trip_count is None else ex.trip_count)
