"""``plan_module``: plan every software-pipelined loop nest of an IRModule, solving loops in parallel.

A model lowered by relax and scheduled by dlight is an IRModule of tens to
hundreds of PrimFuncs; the tensor-core kernels carry software-pipeline
annotations (``software_pipeline_*``) on one nest of k loops each.
``plan_module(mod, target)`` re-plans every such nest as
``auto_pipeline(sch, nest, target)`` would (and, like
``dlight.AutoPipelined``, with dlight's register-staged copies and with
direct cp.async copies, keeping the smaller model ii), and returns the
planned module with a report (``ModulePlan``).

What crosses a process boundary.  TVM IR stays in the parent: extraction
runs TVM's passes, and plans are written on the parent's schedules.  Only
solves run elsewhere: a worker gets the dependence graph, the machine and
the solve options (pure-Python dataclasses of ``tvm_twill.model`` and
``tvm_twill.solvers``, which pickle) and returns the ``Schedule`` or the
``TwillError`` (``tvm_twill.integrations.workers.solve_job``, a module without TVM).
Planning therefore runs in rounds: every nest not yet planned is planned in
the parent on a scratch schedule; a solve the parent has no answer for stops
that attempt and is collected; the distinct solves of the round go to the
executor together, and the next round replays the attempts with the answers.
A nest needs as many rounds as it has solves one after another (inner loop,
outer loop, a stage bound, a shared-memory fit); extraction and TVM's
verdicts are reused from the ``PlanCache`` between rounds.

The executor is any ``concurrent.futures.Executor`` (Dask's
``client.get_executor()`` spreads the solves over a cluster); by default a
local ``ProcessPoolExecutor`` of ``min(4, cpu count)`` spawned processes, or
none with ``max_workers=1`` (the solves run in the parent, one by one).
Identical loops are solved once: solves go through the cache's
``SolveCache`` (keyed by the graph with ops by position, the machine and the
options), and each round sends a graph at most once.  The result does not
depend on the executor: the solver is deterministic for a time limit it does
not reach, and answers are used in the same order whatever finishes first.
A solve the time limit cuts short (on a loaded machine, parallel solves run
slower) is the exception: its nest is flagged ``time_limited`` in the report.
"""
from __future__ import annotations

import copy
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace

from ..api import AutoPipelineOptions, PipelinePlan, auto_pipeline, evaluate_annotation
from ..planner.arguments import options_of
from ..planner.cache import PlanCache
from .dlight import STAGING
from ..errors import InputError, SolverTimeoutError, TwillError
from ..frontend import local_stage_blocks, parse_target, pipeline_nests, read_annotation
from ..frontend.ir import s_tir, tirx, tvm, walk_stmts
from ..model import get_machine
from .common import drop_staging
from .module_report import LoopOutcome, ModulePlan, reason_of
from ..solvers import SolveOptions, graph_key
from ..transforms import apply_annotation, remove_annotation
from ..transforms.wait_counts import annotate_expected_waits
from .workers import solve_job

__all__ = ["LoopOutcome", "ModulePlan", "plan_module"]

#: Default worker count of the local process pool (at most; fewer on a smaller machine).
DEFAULT_WORKERS = 4


class _Missing(Exception):
    """A solve the parent has no answer for yet (not a TwillError: it must reach the round driver)."""

    def __init__(self, key, graph, machine, options):
        super().__init__(key)
        self.key, self.graph, self.machine, self.options = key, graph, machine, options


class _Relay(PlanCache):
    """``auto_pipeline``'s cache during a round: the base cache's tables; a solve the base cache has not
    seen is answered from the workers' answers, or stops the attempt with ``_Missing``."""

    def __init__(self, base: PlanCache, answers: dict):  # shares base's tables, makes none of its own
        self.solves, self.extractions, self.verdicts = base.solves, base.extractions, base.verdicts
        self.answers = answers
        self.keys: list[str] = []
        self.limited = 0  # answers the time limit cut short (a schedule not proven optimal, or none in time)

    def solve(self, graph, machine, *, time_limit=None, options=None):
        opts = options or SolveOptions()
        if time_limit is not None:
            opts = replace(opts, time_limit=time_limit)
        m = get_machine(machine if machine is not None else (graph.machine or "h100"))
        self.keys.append(graph_key(graph, m, opts))
        try:
            schedule = self.solves.solve(graph, m, options=opts, solver=self._answer)
        except SolverTimeoutError:
            self.limited += 1
            raise
        self.limited += not schedule.optimal
        return schedule

    def _answer(self, graph, machine, *, options):
        key = graph_key(graph, machine, options)
        if key not in self.answers:
            raise _Missing(key, graph, machine, options)
        kind, value, names, _ = self.answers[key]
        if kind == "error":
            raise copy.copy(value)
        return _renamed(value, graph, names)


def _renamed(schedule, graph, names: tuple):
    """A schedule solved for a graph whose ops were ``names``, for ``graph`` (the same ops by position)."""
    if tuple(graph.names) == names:
        return schedule if schedule.graph == graph.name else replace(schedule, graph=graph.name)
    to = dict(zip(names, graph.names))
    s = schedule
    streaming = None if s.streaming is None else {**s.streaming, "ops": [to[n] for n in s.streaming["ops"]]}
    return replace(s, graph=graph.name, ops={to[n]: p for n, p in s.ops.items()},
                   cycles={to[n]: c for n, c in s.cycles.items()}, streaming=streaming)


@dataclass
class _Job:
    """One variant of one nest: planned on a scratch schedule of its function, round after round."""

    func: str
    nest: int
    loops: tuple[str, ...]
    variant: str  # "none" (no staged copies), "registers" (dlight's staging) or "direct"
    plan: PipelinePlan | None = None
    error: str = ""
    keys: tuple[str, ...] = ()
    limited: int = 0


@dataclass
class _Nest:
    func: str
    index: int
    loops: tuple[str, ...]
    jobs: list = field(default_factory=list)
    before: int | None = None
    trips: int | None = None
    note: str = ""


# -- the public entry point ------------------------------------------------------
def plan_module(mod, target, options: AutoPipelineOptions | None = None, *, executor=None,
                max_workers: int | None = None, cache: PlanCache | None = None, staging: str = "best",
                **option_kw) -> ModulePlan:
    """Re-plan every software-pipeline nest of every PrimFunc of ``mod`` for ``target``; a ``ModulePlan``.

    ``options`` / keywords: ``auto_pipeline``'s (``time_limit`` per solve, ``machine``, ``max_stages``,
    ...; ``warp_specialize`` must stay False).  ``executor``: any ``concurrent.futures.Executor`` the
    solves are submitted to (not shut down here); without one, a local process pool of ``max_workers``
    (default ``min(4, cpu count)``; 1: no pool, solves in this process).  ``cache``: a ``PlanCache``
    whose solves, extractions and verdicts are reused and filled (default: a new one).  ``staging``:
    as ``dlight.AutoPipelined``.  A nest is kept as it was (with the reason) when it cannot be planned,
    or when its annotation already has a smaller model ii than the best plan.  ``mod`` is not changed.
    """
    start = time.perf_counter()
    opts = _check(mod, target, options, executor, max_workers, staging, cache, option_kw)
    base = cache if cache is not None else PlanCache()
    funcs = {gv.name_hint: (gv, func) for gv, func in sorted(mod.functions_items(), key=lambda kv: kv[0].name_hint)
             if isinstance(func, tirx.PrimFunc)}
    nests, unlisted = _discover(funcs, staging)
    for nest in nests:
        _evaluate_before(nest, funcs[nest.func][1], target, opts)
    phases = {"evaluate": time.perf_counter() - start}
    with _Solver(executor, max_workers) as solver:
        rounds = _run_rounds([j for n in nests for j in n.jobs], funcs, target, opts, base, solver)
    phases["plan"] = time.perf_counter() - start - phases["evaluate"]
    out, loops = _write(mod, funcs, nests, base, solver.seconds)
    wall = time.perf_counter() - start
    phases["write"] = wall - phases["evaluate"] - phases["plan"]
    return ModulePlan(mod=out, arch=parse_target(target)[0], kernels=len(funcs), loops=tuple(unlisted + loops),
                      workers=solver.workers, rounds=rounds, solves=len(solver.seconds),
                      solve_s=sum(solver.seconds.values()), wall_s=wall, cache=base.stats(), phases=phases)


def _check(mod, target, options, executor, max_workers, staging, cache, option_kw) -> AutoPipelineOptions:
    if not isinstance(mod, tvm.IRModule):
        raise InputError(f"plan_module takes a tvm.IRModule, got {type(mod).__name__}: wrap a PrimFunc as "
                         "tvm.IRModule({'main': func})")
    parse_target(target)  # an unsupported target is refused before any work
    if staging not in STAGING:
        raise InputError(f"staging must be one of {list(STAGING)}, got {staging!r}")
    if max_workers is not None and (isinstance(max_workers, bool) or not isinstance(max_workers, int)
                                    or max_workers < 1):
        raise InputError(f"max_workers must be an int >= 1, got {max_workers!r}")
    if executor is not None and max_workers is not None:
        raise InputError("plan_module got both executor and max_workers: size the executor yourself, or pass "
                         "max_workers alone for a local process pool")
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise InputError(f"executor must be a concurrent.futures.Executor (with submit), got "
                         f"{type(executor).__name__}")
    if cache is not None and not isinstance(cache, PlanCache):
        raise InputError(f"cache must be a tvm_twill.planner.cache.PlanCache (None: a new one), got {type(cache).__name__}")
    opts = options_of(AutoPipelineOptions, options, option_kw, "plan_module")
    if opts.warp_specialize is not False:
        raise InputError("plan_module writes software pipelines only: pass warp_specialize=False (warp-"
                         "specialize a kernel with auto_pipeline(..., warp_specialize=True))")
    if not opts.apply:
        raise InputError("plan_module returns a planned module: apply=False is not an option here "
                         "(the input module is never changed)")
    return opts


# -- discovery ---------------------------------------------------------------------------
def _schedule(func):
    return s_tir.Schedule(tvm.IRModule({"main": func}))


def _discover(funcs: dict, staging: str) -> tuple[list, list]:
    """The pipeline nests of every function with their variants; functions whose nests cannot be
    listed become one kept outcome each (their annotated loops, the reason)."""
    nests, unlisted = [], []
    for name, (_, func) in funcs.items():
        try:
            sch = _schedule(func)
            found = pipeline_nests(sch)
            staged = [bool(local_stage_blocks(sch, nest[0])) for nest in found]
        except Exception as err:  # noqa: BLE001 - one odd kernel must not stop a model
            loops = tuple(n.loop_var.name for n in walk_stmts(func.body)
                          if isinstance(n, tirx.For) and read_annotation(n) is not None)
            if loops:
                unlisted.append(LoopOutcome(func=name, loops=loops, status="kept",
                                            reason=f"its pipeline nests cannot be listed: {reason_of(err)}"))
            continue
        for i, (nest, st) in enumerate(zip(found, staged)):
            n = _Nest(func=name, index=i, loops=tuple(r.name for r in nest))
            variants = ("none",) if not st else (("registers", "direct") if staging == "best" else (staging,))
            n.jobs = [_Job(func=name, nest=i, loops=n.loops, variant=v) for v in variants]
            nests.append(n)
    return nests, unlisted


def _evaluate_before(nest: _Nest, func, target, opts) -> None:
    """The model ii (cycles) and trip count of the nest's annotation as written (outermost loop)."""
    try:
        sch = _schedule(func)
        ev = evaluate_annotation(sch, pipeline_nests(sch)[nest.index][0].rv, target, machine=opts.machine,
                                 quantum=opts.quantum)
    except Exception as err:  # noqa: BLE001 - the comparison is then unknown, said in the report
        nest.note = f"its annotation's model ii is unknown: {reason_of(err)}"
        return
    nest.before, nest.trips = ev.ii_cycles, ev.extraction.trip_count


# -- rounds ---------------------------------------------------------------------------------
class _Solver:
    """Runs a round's solves: on the caller's executor, a local process pool, or here (one worker)."""

    def __init__(self, executor, max_workers):
        self.executor, self.own = executor, None
        n = max_workers if max_workers is not None else min(DEFAULT_WORKERS, os.cpu_count() or 1)
        self.workers = n if executor is None else type(executor).__name__
        self.seconds: dict[str, float] = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.own is not None:
            self.own.shutdown(wait=True, cancel_futures=True)

    def _pool(self):
        if self.executor is not None:
            return self.executor
        if self.workers == 1:
            return None
        if self.own is None:  # spawned: the parent holds TVM's threads, which a fork would copy mid-state
            self.own = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
        return self.own

    def run(self, missing: list) -> dict:
        """key -> (kind, Schedule or TwillError, op names of the graph solved, seconds), in request order."""
        pool = self._pool()
        if pool is None:
            results = [solve_job(m.graph, m.machine, m.options) for m in missing]
        else:
            futures = [pool.submit(solve_job, m.graph, m.machine, m.options) for m in missing]
            results = [f.result() for f in futures]
        out = {}
        for m, (kind, value, seconds) in zip(missing, results):
            out[m.key] = (kind, value, tuple(m.graph.names), seconds)
            self.seconds[m.key] = seconds
        return out


def _run_rounds(jobs: list, funcs: dict, target, opts, base: PlanCache, solver: _Solver) -> int:
    """Attempt every job until each is planned or refused; returns the number of rounds."""
    answers: dict = {}
    pending, rounds = list(jobs), 0
    while pending:
        rounds += 1
        missing: dict = {}
        waiting = []
        for job in pending:
            relay = _Relay(base, answers)
            try:
                job.plan = _attempt(job, funcs[job.func][1], target, opts.replace(cache=relay))
            except _Missing as m:
                missing.setdefault(m.key, m)
                waiting.append(job)
                continue
            except Exception as err:  # noqa: BLE001 - TwillError or TVM's: the nest keeps its annotation
                job.error = reason_of(err)
            job.keys, job.limited = tuple(relay.keys), relay.limited
        if missing:
            answers.update(solver.run(list(missing.values())))
        pending = waiting
    return rounds


def _attempt(job: _Job, func, target, opts) -> PipelinePlan:
    trial = _schedule(func)
    nest = pipeline_nests(trial)[job.nest]
    if job.variant == "direct":
        drop_staging(trial, nest[0])
    return auto_pipeline(trial, [r.rv for r in nest], target, opts)


# -- choosing and writing -----------------------------------------------------------------
def _choose(nest: _Nest) -> tuple[_Job | None, str]:
    """The variant to write (the smaller model ii; on a tie direct copies), or None and why not."""
    tried = [j for j in nest.jobs if j.plan is not None]
    if not tried:
        if len({j.error for j in nest.jobs}) == 1:  # every variant refused for the same reason: said once
            return None, nest.jobs[0].error
        return None, "; ".join(f"{j.variant}: {j.error}" for j in nest.jobs)
    best = min(tried, key=lambda j: (j.plan.ii_cycles, j.variant == "registers"))
    if nest.before is not None and nest.before < best.plan.ii_cycles:
        return None, (f"its annotation's model ii ({nest.before} cycles) is smaller than the best plan's "
                      f"({best.plan.ii_cycles} cycles)")
    return best, ""


def _write(mod, funcs: dict, nests: list, base: PlanCache, seconds: dict) -> tuple:
    """The module with every chosen plan written, and one outcome per nest."""
    owners: dict = {}  # a solve run in this call belongs to the first job (in job order) that asked for it
    for job in (j for n in nests for j in n.jobs):
        for k in job.keys:
            if k in seconds:
                owners.setdefault(k, id(job))
    out = mod.clone()
    outcomes = []
    by_func: dict = {}
    for nest in nests:
        by_func.setdefault(nest.func, []).append(nest)
    for name, group in by_func.items():
        gv, func = funcs[name]
        chosen = [(n, *_choose(n)) for n in group]
        new, failure = _write_function(func, chosen, base)
        if new is not None:
            out.update_func(gv, new)
        for nest, job, why in chosen:
            outcomes.append(_outcome(nest, job if failure is None else None, failure or why, owners, seconds))
    return out, outcomes


def _write_function(func, chosen: list, base: PlanCache):
    """(the function with the chosen plans written and verified by TVM, None) or (None, why not)."""
    if not any(job is not None for _, job, _ in chosen):
        return None, None
    sch = _schedule(func)
    found = pipeline_nests(sch)  # LoopRVs of sch stay valid while annotations change
    for nest, job, _ in chosen:
        if job is None:
            continue
        refs = found[nest.index]
        if job.variant == "direct":
            drop_staging(sch, refs[0])
        inner_first = sorted(range(len(refs)), key=lambda i: -len(refs[i].ancestors))  # auto_pipeline's order
        for i, p in zip(inner_first, (*job.plan.inner, job.plan)):
            if p.applied:
                apply_annotation(sch, refs[i].rv, p.annotation)
                annotate_expected_waits(sch, refs[i].rv, p.tvm_waits)
            else:  # the plan is the loop without a pipeline
                remove_annotation(sch, refs[i].rv)
    try:
        base.verify(sch.mod)  # each nest was verified alone; this is the function with all of them
    except TwillError as err:
        return None, f"TVM rejects the function with every plan written: {reason_of(err)}"
    return sch.mod["main"], None


def _outcome(nest: _Nest, job: _Job | None, why: str, owners: dict, seconds: dict) -> LoopOutcome:
    asked = [k for j in nest.jobs for k in j.keys]
    own = sorted({k for j in nest.jobs for k in j.keys if owners.get(k) == id(j)})
    plan = job.plan if job is not None else None
    return LoopOutcome(
        func=nest.func, loops=nest.loops, status="planned" if plan is not None else "kept",
        reason="" if plan is not None else (why or nest.note), staging=job.variant if plan is not None else "",
        ii_before=nest.before, ii_after=plan.ii_cycles if plan is not None else nest.before,
        trip_count=nest.trips if nest.trips is not None or plan is None else plan.extraction.trip_count,
        alternatives=tuple((j.variant, j.plan.ii_cycles) for j in nest.jobs if j.plan is not None),
        solves=len(own), reused=len(asked) - sum(1 for k in asked if k in own), solve_s=sum(seconds[k] for k in own),
        time_limited=any(j.limited for j in nest.jobs))
