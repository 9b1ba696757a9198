"""``auto_pipeline`` and ``evaluate_annotation``: the user-facing TVM entry points.

``auto_pipeline`` replaces hand-written ``sch.annotate(loop, "software_pipeline_stage", ...)``::

    sch = ...                                   # a tvm.s_tir.Schedule
    k0 = sch.get_loops(sch.get_sblock("C_o_update"))[3]
    plan = tvm_twill.auto_pipeline(sch, k0, "sm_90a")
    print(plan.explain())                       # stages, orders, what limits the II
    # sch now carries software_pipeline_stage / _order / _async_stages on k0

It extracts the loop's dependence graph (``frontend``), finds the schedule
with the smallest initiation interval (``solvers.solve``), turns it into
annotations (``transforms``), checks them with TVM's own
InjectSoftwarePipeline, and returns a ``PipelinePlan``.

Nested pipelines (TVM's nested GEMM test: an outer k loop whose body holds
the shared-memory copies and an inner loop of register-level loads and mma):
pass both loops, ``auto_pipeline(sch, [k0, k1], target)``.  Loops are
pipelined innermost first, one at a time; when the outer loop is extracted,
the annotated inner loop counts as the three statements TVM turns it into
(prologue, body, epilogue), each costed from the inner annotation.  Calling
``auto_pipeline`` on each loop yourself, inner first, is equivalent.

The model: TVM's s_tir software pipeline has no warp specialization (every
thread runs every statement), so schedules are solved on the machine with a
single warp role (``warp_specialize`` solves the joint problem too, see
``tvm_twill.planner.warpspec``); the II is a throughput figure in the graph's time unit
(``plan.quantum`` cycles), legality only depends on stage and order.
"""
from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field, replace

from .planner.arguments import check_call, check_options, options_of, seconds
from .errors import InputError, TwillError, UnsupportedLoopError
from .frontend import (Extraction, extract_loop, inject_pipeline, loop_rv, machine_for, parse_target,
                       read_annotation, resolve_loop, scratch_schedule)
from .model import (Graph, Machine, Schedule, graph_to_dict, machine_to_dict)
from .model.pipeline import PipelineAnnotation
from .planner.plan_alternatives import plan_alternatives, schedules_wanted
from .report import normalization_warning
from .planner.roofline import plan_prediction, serialized_ii
from .transforms import (AsyncWait, annotation_from_schedule, annotation_ii, apply_annotation,
                         async_waits, legality_violations, refine, remove_annotation, restore_annotation,
                         wait_count_caveat)
from .compiler.ptxas import wgmma_serialized
from .planner.async_copies import all_copies_async, sync_copy_reasons
from .planner.plan_progress import PlanProgress
from .transforms.wgmma_overlap import has_wgmma
from .planner.stages import SharedFit, fit_shared, shared_memory, shared_summary
from .transforms.pipelines import SWP_PIPELINE, WAITS_PIPELINE, WS_PIPELINE, register
from .transforms.wait_counts import guard_loop_waits, guarded_annotations
from .report.explain import SYMBOLIC_NOTE, explain_plan, schedule_phrase
from .planner.warpspec import WarpSpecialization, apply_warp_specialization, plan_warp_specialization
from .planner.context import Candidate, PlanningContext
from .planner.ws_plan import WsTiming

__all__ = ["AnnotationEval", "AutoPipelineOptions", "PipelinePlan", "SYMBOLIC_NOTE", "auto_pipeline",
           "evaluate_annotation", "shared_memory", "swp_machine"]


def swp_machine(machine: Machine) -> Machine:
    """The machine as TVM's s_tir pipeline uses it: one warp role (no warp specialization)."""
    return replace(machine.generic_roles(), warp_groups=1)


@dataclass(frozen=True)
class AutoPipelineOptions:
    """Every option of ``auto_pipeline``, in one immutable object (the keyword API builds one).

    ``machine``: a Machine or built-in name (default: the model of the
    target's arch).  ``time_limit``: seconds for the whole solve of one loop (None: no limit, kept as
    ``math.inf``).  ``apply``: write the annotations on the schedule (otherwise only plan).
    ``quantum``: cycles per model time unit (default: the front-end's).
    ``verify``: run TVM's passes through InjectSoftwarePipeline on the
    annotated module and undo the annotation if TVM rejects it.
    ``max_stages``: the most pipeline stages a plan may use (None: the
    default of ``planner.depth``, min(8, trip count)); when the optimal
    schedule needs more, the loop is re-solved with the stages bounded (a
    larger ii) and ``explain()`` says so.  ``warp_specialize``: False (TVM's
    one-role software pipeline), True (a producer warp and mbarrier rings,
    ``tvm_twill.planner.warpspec``) or "auto" (specialize when the joint schedule on
    the full machine model has a smaller ii); applies to the outermost loop
    of the call, inner loops keep software pipelines.  ``cache``: a
    ``tvm_twill.planner.cache.PlanCache`` whose solves, extractions and TVM verdicts
    are reused for identical loops (None: every call starts afresh).  ``quiet``: no progress lines (by
    default a plan that runs over a second reports each step on stderr, ``tvm_twill.planner.plan_progress``).
    ``top_k``: also plan up to ``top_k - 1`` next best annotations (``plan.alternatives``, not written;
    ``tvm_twill.planner.plan_alternatives``), for tuning to measure.  A bad value: InputError (``arguments``).
    """

    machine: object = None
    time_limit: float = 10.0
    apply: bool = True
    quantum: int | None = None
    verify: bool = True
    max_stages: int | None = None
    warp_specialize: object = False
    cache: object = None
    quiet: bool = False
    top_k: int = 1

    def __post_init__(self):
        check_options(self)  # every field, one typed line for the first bad one (tvm_twill.planner.arguments)

    def replace(self, **changes) -> "AutoPipelineOptions":
        unknown = sorted(set(changes) - set(self.__dataclass_fields__))
        if unknown:
            raise InputError(f"auto_pipeline got unknown option(s) {unknown}: the options are "
                             f"{sorted(self.__dataclass_fields__)}")
        return replace(self, **changes)


# -- results -----------------------------------------------------------------
@dataclass(frozen=True)
class PipelinePlan:
    """What ``auto_pipeline`` decided for one loop.

    ``schedule`` (with ``.ii`` in time units of ``quantum`` cycles) and
    ``graph`` are the model's; ``annotation`` / ``annotations`` what is (or
    would be) written on the loop; ``applied`` whether it was written and
    ``outcome`` why or why not; ``waits`` the cp.async wait counts the
    pipelined loop needs (``transforms.async_waits``); ``inner`` the plans of
    nested loops pipelined first.  ``outcome`` is one line: applied, or
    why not (``Attempt.reason`` is a different thing: what rules an ii out).
    ``depth`` says why the plan has its number of stages; ``solved_graph``
    is the graph the schedule was solved on when a stage bound added
    constraints to the loop's graph (None: ``graph`` itself).
    """

    loop: str
    arch: str
    extraction: Extraction
    schedule: Schedule
    annotation: PipelineAnnotation
    applied: bool
    outcome: str
    machine: Machine
    waits: tuple[AsyncWait, ...] = ()
    inner: tuple["PipelinePlan", ...] = ()
    options: AutoPipelineOptions = AutoPipelineOptions()
    depth: str = ""
    solved_graph: Graph | None = None
    #: One line per caveat of the plan (cost normalization that distorts ratios by more than 10%).
    warnings: tuple[str, ...] = ()
    #: Why the plan has other stages than the optimum's: TVM's buffer versions of that did not fit shared
    #: memory (``stages.fit_shared``'s decision; None: the plan was not chosen for shared memory).
    shared_fit: SharedFit | None = None
    #: The warp-specialization decision (None when warp_specialize=False).
    warp_specialization: WarpSpecialization | None = None
    #: ``(statement, why)`` for each cp.async-capable copy that is not in an async stage (``async_copies``),
    #: and for each copy TVM would lower to a wrong cp.async (a transposing or misaligned vector).
    sync_copies: tuple[tuple[str, str], ...] = ()
    #: The module as ``auto_pipeline`` found it (``check_on_cpu`` runs it against the plan).
    source: object = field(default=None, compare=False, repr=False)
    #: The loop's function issues wgmma: it compiles with tvm_twill's pipeline (per-thread accumulators,
    #: the proxy fences before wgmma reads shared memory that generic stores or cp.async wrote).
    wgmma: bool = False
    #: What ptxas said of the compiled kernel (``compiler.ptxas.PtxasMessage``s; ``with_ptxas``,
    #: ``build_checked``); None: not asked.  ``ptxas_registers``: its registers per thread, when known.
    ptxas: tuple | None = None
    ptxas_registers: int | None = None
    #: ``top_k``: the next best annotations (``plan_alternatives.PlanAlternative``, ranks 2..K), not written.
    alternatives: tuple = ()
    #: TVM's cp.async wait counts against ``waits`` (``transforms.wait_counts.TvmWait``) when TVM's would be
    #: too large; the plan's TIR pipeline then compiles the smaller ones; (): TVM's counts are safe.
    tvm_waits: tuple = ()

    @property
    def tir_pipeline(self) -> str | None:
        """The TIR pipeline to compile with (``tvm.compile(mod, target, tir_pipeline=...)``): tvm_twill's
        when the loop was warp-specialized; ``tvm_twill_swp`` (constant cp.async wait counts, barriers allowed
        under the uniform prologue / epilogue guards: ``transforms.swp_lowering``) for a pipelined loop of
        symbolic extent, wgmma or not (it also has the per-thread accumulators and proxy fences a wgmma function
        needs); tvm_twill's for any other loop whose function issues wgmma; ``tvm_twill_waits`` when TVM's
        cp.async wait counts need lowering (``tvm_waits``); else None (TVM's default)."""
        ws = self.warp_specialization
        if ws is not None and self.applied and ws.tir_pipeline:
            return ws.tir_pipeline
        if self.applied and max(self.annotation.stages, default=0) > 0 and self.extraction.trip_count is None:
            return register(SWP_PIPELINE)
        if self.wgmma:
            return register(WS_PIPELINE)
        return register(WAITS_PIPELINE) if self.applied and self.tvm_waits else None

    def __repr__(self) -> str:  # one line (the dataclass repr runs to screens: extraction, graphs, schedules)
        ws = self.warp_specialization
        return (f"PipelinePlan(loop={self.loop!r}, arch={self.arch!r}, ii_cycles={self.ii_cycles}, "
                f"annotations={self.annotations}, applied={self.applied}, inner={len(self.inner)}"
                + (f", warp_specialized={ws.chosen}" if ws is not None else "") + f", outcome={self.outcome!r})")

    def pass_context(self):
        """The ``tvm.transform.PassContext`` this plan compiles under: ``tirx.use_async_copy`` when it has an
        async stage or a warp-specialized loop (without it TVM emits no cp.async).  ``tvm_twill.build(mod,
        target, plan)`` uses it with ``tir_pipeline``; by hand: ``with plan.pass_context(): tvm.compile(mod,
        target, tir_pipeline=plan.tir_pipeline or "default")``."""
        from .compiler import pass_context
        return pass_context(self)

    @property
    def async_copies(self) -> tuple[str, ...]:
        """The statements the annotation makes cp.async: those in an async stage (``sync_copies``: the
        cp.async-capable copies that are not, and why)."""
        ann = self.annotation
        return tuple(st.name for st in self.extraction.stmts if ann.stages[st.index] in ann.async_stages)

    @property
    def graph(self) -> Graph:
        return self.extraction.graph

    @property
    def quantum(self) -> int:
        """Cycles per time unit of ``graph`` and ``schedule``."""
        return self.extraction.quantum

    @property
    def ii_cycles(self) -> int:
        return self.schedule.ii * self.quantum

    @property
    def annotations(self) -> dict:
        """The loop annotations, ``{key: [int, ...]}``, as ``sch.annotate`` takes them (a warp-specialized
        loop: the ring depth and register budgets the tvm_twill_ws pipeline reads).  Where TVM 0.27 would
        count the cp.async waits too large (``tvm_waits``), the async stages are under
        ``tvm_twill_async_stages`` with the checked counts under ``tvm_twill_async_wait_counts``: TVM's default
        pipeline then compiles the copies synchronously, and ``tir_pipeline`` as cp.async with those counts."""
        ws = self.warp_specialization
        if ws is not None and ws.chosen and self.applied:
            return ws.annotations
        return guarded_annotations(self.annotation.to_dict(), self.tvm_waits if self.applied else ())

    def prediction(self, registers: int | None = None):
        """What a GPU would measure, by the throughput model (``tvm_twill.planner.roofline``,
        docs/machines.md): cycles per iteration, TFLOPS per SM and per chip for the problem, CTAs
        per SM and the bound.  ``registers``: registers per thread (default: ptxas's, ``ptxas_registers``,
        when known, else the model's estimate; ptxas's count is what a CTA is given at launch, setmaxnreg
        only moves registers between its warps, so it also decides a warp-specialized plan's CTAs per SM)."""
        ws = self.warp_specialization
        serial = bool(wgmma_serialized(self.ptxas or ()))  # ptxas undid wgmma's overlap: statements back to back
        registers = self.ptxas_registers if registers is None else registers
        if ws is not None and ws.chosen and self.applied:
            budgets = ws.registers if registers is None else None
            roles = [(128, budgets[0]), (self.extraction.threads or 128, budgets[1])] if budgets else None
            smem = ws.facts.shared_bytes if ws.facts is not None else self.smem_bytes
            ii = serialized_ii(self.extraction, ws.ii_ws_cycles) if serial else ws.ii_ws_cycles
            return plan_prediction(self.extraction, self.schedule, ii, smem_bytes=smem,
                                   registers=registers, roles=roles, producer=True)
        ii = serialized_ii(self.extraction, self.ii_cycles) if serial else self.ii_cycles
        return plan_prediction(self.extraction, self.schedule, ii, smem_bytes=self.smem_bytes, registers=registers)

    def with_ptxas(self, messages=None, *, source: str | None = None, registers: int | None = None
                   ) -> PipelinePlan:
        """This plan with what ptxas said of its kernel: ``messages`` (ptxas's output as text, or
        ``compiler.ptxas.PtxasMessage``s), or ``source``, the kernel's CUDA source, compiled here with
        ``nvcc -Xptxas -v`` for the plan's arch (ToolchainError without nvcc); ``registers``: ptxas's
        registers per thread (default: the count in ptxas's text when it names one kernel).  When ptxas
        serialized wgmma, ``prediction()`` runs the compute statements back to back; its occupancy uses
        ptxas's registers; ``explain()`` says both.  ``tvm_twill.build_checked`` does this on its own."""
        from .compiler import attach_ptxas
        return attach_ptxas(self, messages, source=source, registers=registers)

    @property
    def shared_memory(self) -> dict:
        """buffer -> (versions TVM allocates, bytes): the multi-buffering of this annotation."""
        return shared_memory(self.extraction, self.annotation)

    @property
    def smem_bytes(self) -> int:
        """Shared memory the pipelined loop's buffers take (all versions)."""
        return sum(b for _, b in self.shared_memory.values())

    def explain(self) -> str:
        """Why these stages, and what limits the II (plain text; times in machine cycles)."""
        return explain_plan(self)

    def check_on_cpu(self, *, seed: int = 0):
        """Run the function before and after this plan (every nested plan too) on the CPU (llvm) on the same
        small-integer inputs and compare every parameter; returns a ``verify.CpuCheck`` (``.ok``, ``str()``).
        Async stages and thread bindings are taken out first (they do not change what is computed); loops
        with GPU-only intrinsics are refused (``tvm_twill.check.verify``)."""
        from .check.verify import check_on_cpu
        return check_on_cpu(self, seed=seed)

    def verify(self, mod, *, seeds=3, interleavings: int = 2, blocks=None):
        """Emulate the kernel ``tvm_twill.build(mod, arch, plan)`` compiles (``mod``: the module this plan
        annotated) and the unpipelined original on the same random inputs per seed, on the CPU with no GPU
        (``tvm_twill.emulator``; needs nvcc); returns a ``gpu_check.GpuCheck`` (``.ok``, ``.findings``,
        ``.max_error``).  ``blocks``: only these CTAs (None: all)."""
        from .check.gpu_check import verify_on_emulator
        return verify_on_emulator(self, mod, seeds=seeds, interleavings=interleavings, blocks=blocks)

    def plot(self, path, kind: str = "schedule", registers: int | None = None):
        """Draw the plan to ``path`` (.png, .svg, .pdf); needs matplotlib.  ``kind="schedule"``: the
        reservation table, pipelined timeline and dependence graph (times in machine cycles), returns the
        path; a warp-specialized plan draws the joint schedule it runs, and a panel with the producer warp,
        the ring slots over time and the consumer groups (``tvm_twill.report.plot_ws``).  ``kind="roofline"``:
        ``prediction(registers)`` on the chip's roofline (tensor-core, SFU and CUDA-core ceilings, L2 and
        DRAM roofs, the kernel and its bound; ``plot_roofline``), returns the ``Roofline`` drawn."""
        if kind not in ("schedule", "roofline"):
            raise InputError(f"plot kind must be 'schedule' or 'roofline', got {kind!r}")
        if kind == "roofline":
            from .report.plot_roofline import plot_roofline  # matplotlib only when asked
            return plot_roofline(self.prediction(registers), self.machine.costs, path,
                                 title=f"loop '{self.loop}' for {self.arch} (machine {self.machine.name})")
        from .report.plot import plot_schedule, plot_ws_plan  # matplotlib only when asked
        ws = self.warp_specialization
        if ws is not None and ws.chosen and self.applied and ws.solved_graph is not None:
            return plot_ws_plan(self, ws, path)
        return plot_schedule(self.schedule, self.solved_graph or self.graph, self.machine, path,
                             cycles_per_unit=self.quantum,
                             title=f"auto_pipeline: loop '{self.loop}' for {self.arch} (machine "
                                   f"{self.machine.name}): II = {self.ii_cycles} cycles, stages "
                                   f"{list(self.annotation.stages)}")

    def graph_json(self) -> str:
        """The graph in ``tvm-twill-graph/1`` JSON, with the single-role machine inline."""
        doc = graph_to_dict(self.solved_graph or self.graph)
        doc["machine"] = machine_to_dict(self.machine)
        return json.dumps(doc, indent=2)

    def reproduce(self) -> str:
        """A Python snippet that re-solves this loop's graph without TVM."""
        return (f"# tvm_twill: loop '{self.loop}' for {self.arch} (1 time unit = {self.quantum} cycles)\n"
                "import json\n"
                "from tvm_twill.model import graph_from_dict\n"
                "from tvm_twill.solvers import solve\n\n"
                f"GRAPH = r'''{self.graph_json()}'''\n\n"
                "graph = graph_from_dict(json.loads(GRAPH))\n"
                f"schedule = solve(graph, graph.machine, time_limit={seconds(self.options.time_limit, code=True)})\n"
                f"print(schedule.ii)  # {self.schedule.ii}\n"
                "print({n: (p.stage, p.order) for n, p in schedule.ops.items()})\n")


@dataclass(frozen=True)
class AnnotationEval:
    """The II an existing annotation achieves under the model.

    ``ii`` is in time units of ``quantum`` cycles (the same units as
    ``PipelinePlan.schedule.ii`` for the same quantum); ``throughput`` is
    loop iterations per cycle (1 / ``ii_cycles``); ``times`` the issue times
    that realize it; ``bound`` names what stops a smaller II.
    """

    loop: str
    annotation: PipelineAnnotation
    ii: int
    quantum: int
    times: dict
    extraction: Extraction
    bound: str = ""

    @property
    def ii_cycles(self) -> int:
        return self.ii * self.quantum

    @property
    def throughput(self) -> float:
        return 1.0 / self.ii_cycles

    @property
    def graph(self) -> Graph:
        return self.extraction.graph

    @property
    def smem_bytes(self) -> int:
        return sum(b for _, b in shared_memory(self.extraction, self.annotation).values())


# -- auto_pipeline -------------------------------------------------------------
def auto_pipeline(sch, loop, target, options: AutoPipelineOptions | None = None, **option_kw) -> PipelinePlan:
    """Pipeline ``loop`` of ``sch`` optimally for ``target``; returns a PipelinePlan.

    ``loop``: a LoopRV or loop name, or a list of them (nested pipelines:
    pipelined innermost first; the plan of the outermost is returned, the
    others in ``plan.inner``).  ``target``: a ``tvm.target.Target`` or an arch
    string ("sm_80", "sm_90a").  Options (``AutoPipelineOptions``, or the
    same names as keywords: ``machine``, ``time_limit``, ``apply``,
    ``quantum``, ``verify``, ``max_stages``); with several loops and
    ``apply=False`` the inner ones are planned on a scratch copy.

    The plan is an explained no-op (``applied`` False, ``outcome`` says why)
    when the best schedule within the stage bound has one stage in the
    original order.  A trip count below the stage count is pipelined: TVM
    0.27 guards its prologue and epilogue (checked on the CPU by
    tests/frontend/test_differential.py), and the default stage bound is at most the
    trip count.
    A loop of symbolic extent is planned for every trip count (see
    ``SYMBOLIC_NOTE``; compile it with ``plan.tir_pipeline``).
    Raises InputError for a bad argument (a module for the Schedule, ``time_limit="5"``, ...),
    UnsupportedLoopError (control flow, non-constant step, single statement, ...),
    UnsupportedTargetError (non-CUDA, before sm_80), InfeasibleError / SolverTimeoutError from the solver.
    """
    check_call("auto_pipeline", sch, loop, target)
    opts = options_of(AutoPipelineOptions, options, option_kw, "auto_pipeline")
    source = sch.mod
    if isinstance(loop, (list, tuple)):
        return replace(_auto_nested(sch, list(loop), target, opts), source=source)
    return replace(_auto_one(sch, loop, target, opts), source=source)


def _auto_nested(sch, loops, target, opts: AutoPipelineOptions) -> PipelinePlan:
    if not loops:
        raise InputError("auto_pipeline got an empty list of loops: pass a loop or [outer, inner]")
    refs = [resolve_loop(sch, lp) for lp in loops]
    if any(r.node.same_as(o.node) for i, r in enumerate(refs) for o in refs[:i]):
        raise InputError(f"auto_pipeline got loop(s) twice: {[r.name for r in refs]}")
    # with apply=False the inner loops are annotated on a scratch schedule over the same IR; loops are
    # handled by reference (LoopRVs of ``work``), so loops that share a name stay apart
    work = sch if opts.apply else scratch_schedule(sch)
    handle = [r.rv if work is sch else loop_rv(work, r.node) for r in refs]
    order = sorted(range(len(refs)), key=lambda i: -len(refs[i].ancestors))  # innermost first, stable
    # annotations already on the nest (dlight's, MetaSchedule's) are re-planned together: dropped first,
    # since an inner loop is planned before its outer one; put back if the nest cannot be planned
    saved = [read_annotation(r.node) for r in refs]
    for rv, ann in zip(handle, saved):
        if ann is not None:
            remove_annotation(work, rv)
    plans = []
    try:
        for i in order:
            plans.append(_auto_one(work, handle[i], target, opts if i == order[-1] else
                                   opts.replace(apply=True, warp_specialize=False, top_k=1)))
    except TwillError:
        for rv, ann in zip(handle, saved):
            restore_annotation(work, rv, ann)
        raise
    return replace(plans[-1], inner=tuple(plans[:-1]))


def _auto_one(sch, loop, target, opts: AutoPipelineOptions) -> PipelinePlan:
    """frontend (extract) -> solvers (solve) -> transforms (annotate, refine, apply) for one loop."""
    progress = PlanProgress(str(loop) if isinstance(loop, str) else "?", opts.quiet)
    try:
        return _plan_one(sch, loop, target, opts, progress)
    finally:
        progress.close()  # no line about a step after the plan ended


def _plan_one(sch, loop, target, opts: AutoPipelineOptions, progress: PlanProgress) -> PipelinePlan:
    from .solvers import solve  # lazily: the solver pulls in z3

    arch, _ = parse_target(target)
    m = machine_for(arch, opts.machine)
    ref = resolve_loop(sch, loop)
    for a in ref.ancestors:
        if read_annotation(a) is not None:
            # the outer annotation counts this loop as one statement (or as its old pipeline)
            raise UnsupportedLoopError(
                f"loop '{ref.name}' is inside the pipelined loop '{a.loop_var.name}': pipeline inner loops "
                "first (auto_pipeline(sch, [outer, inner], ...)), then the outer loop")
    cache = opts.cache
    progress.loop = ref.name
    progress.begin("extracting the loop's statements")
    if cache is None:
        ex = extract_loop(sch, ref.rv, arch, machine=m, quantum=opts.quantum)
    else:  # the solver too: each distinct graph is solved once per cache
        ex = cache.extract(sch, ref, arch, m, opts.quantum)
        solve = cache.solve
    progress.step(f"extracted {len(ex.stmts)} statements")
    if ex.refusal is not None:  # no multi-stage pipeline of it compiles (frontend/opaque.py)
        raise UnsupportedLoopError(ex.refusal)
    ms = swp_machine(m)
    graph = ex.graph.replace(machine=ms)
    ex = replace(ex, graph=graph)
    progress.begin(f"solving the {len(ex.stmts)}-statement loop (time limit {seconds(opts.time_limit)})")
    sched, others = _solve_top(solve, graph, ms, opts)
    progress.step(f"solved: ii {sched.ii * ex.quantum} cycles ({'optimal' if sched.optimal else 'best found'})")
    asyncable = [s.async_capable for s in ex.stmts]
    ann = refine(annotation_from_schedule(sched, graph, asyncable, allow_async=True), graph, ms, sched.ii)
    progress.begin("fitting the stages to TVM's buffer versions and shared memory")
    ctx = PlanningContext(extraction=ex, machine=ms, full_machine=m, options=opts, solve=solve)
    fitted = fit_shared(ctx, Candidate(sched, ann))
    moved = all_copies_async(ctx, fitted.candidate)
    cand = moved.candidate
    sched, ann = cand.schedule, cand.annotation
    progress.step(f"stages fitted: {ann.num_stages} stage(s), ii {sched.ii * ex.quantum} cycles")
    bad = legality_violations(ann, graph)  # never apply what the dependences forbid
    if bad:  # pragma: no cover - annotation_from_schedule already guarantees it
        raise UnsupportedLoopError(f"loop '{ex.loop}': the planned annotation is illegal: {bad[0]}")
    caveats = tuple(c for c in (normalization_warning(sched), wait_count_caveat(ann, graph)) if c)
    for caveat in caveats:
        warnings.warn(f"auto_pipeline: loop '{ex.loop}': {caveat}", stacklevel=3)
    # a symbolic trip count (None): the waits tvm_twill.build compiles (the body's, 0 in the guarded parts)
    waits = async_waits(ann, graph, ex.trip_count) if ann.async_stages else ()
    plan = PipelinePlan(loop=ex.loop, arch=arch, extraction=ex, schedule=sched, annotation=ann, applied=False,
                        outcome="", machine=ms, waits=waits, options=opts, depth=cand.depth,
                        solved_graph=cand.solved_graph, shared_fit=fitted.shared_fit, warnings=caveats,
                        sync_copies=sync_copy_reasons(ex, ann, moved.why_not),
                        wgmma=has_wgmma([sch.mod[ref.func].body]), alternatives=plan_alternatives(ctx, cand, others))
    fallback = ""
    if opts.warp_specialize is not False:
        try:
            progress.begin("warp specialization: solving the loop with a producer warp")
            ws = plan_warp_specialization(sch, ref, ctx, cand, arch)
            plan = replace(plan, warp_specialization=ws)
            progress.step(f"warp specialization planned: {ws.reason}")
            if ws.chosen:
                if not opts.apply:
                    return replace(plan, outcome="not applied: apply=False (warp specialization planned)")
                progress.begin("warp specialization: emitting the kernel and model checking its mbarrier protocol")
                ws = apply_warp_specialization(sch, ref, ws, target, m.smem_bytes, time_limit=opts.time_limit,
                                               progress=progress)
                progress.step("warp-specialized kernel emitted, its mbarrier protocol model checked")
                return replace(plan, warp_specialization=ws, applied=True,
                               outcome=f"warp-specialized loop '{ex.loop}' (compile with tvm_twill.build(mod, "
                                       "target, plan), which uses plan.tir_pipeline)")
        except UnsupportedLoopError as err:
            if opts.warp_specialize is True:
                raise
            # "auto": the plain software pipeline, and why not specialized (the loop is as it was: the transform
            # restores it on failure)
            plan = replace(plan, warp_specialization=WarpSpecialization(False, f"not specialized: {err}",
                                                                        WsTiming(plan.ii_cycles)))
            fallback = f" (warp_specialize='auto' fell back to the software pipeline: {err})"
    plan = _plain_outcome(sch, ref, plan, opts, m, cache)
    return replace(plan, outcome=plan.outcome + fallback)


def _solve_top(solve, graph, ms, opts: AutoPipelineOptions):
    """(the best schedule, the next best ones): ``top_k`` > 1 asks the solver for more (``plan_alternatives``)."""
    if opts.top_k == 1:
        return solve(graph, ms, time_limit=opts.time_limit), ()
    from .solvers import SolveOptions
    sched = solve(graph, ms, options=SolveOptions(time_limit=opts.time_limit, top_k=schedules_wanted(opts.top_k)))
    return replace(sched, alternatives=()), sched.alternatives


def _plain_outcome(sch, ref, plan: PipelinePlan, opts: AutoPipelineOptions, m: Machine, cache) -> PipelinePlan:
    """The one-role software pipeline of ``plan``: written on the loop (and checked by TVM) or why not."""
    ex, ann, sched = plan.extraction, plan.annotation, plan.schedule
    if ann.num_stages == 1 and list(ann.orders) == sorted(ann.orders) and not ann.async_stages:
        if plan.shared_fit is not None:
            return replace(plan, outcome=(
                f"not applied: only one stage of '{ex.loop}' fits the block's shared memory "
                f"({shared_summary(ex, ann, m)}) "
                "(TVM's buffer versions of any pipelined plan need more), and one stage in program order is what "
                "the loop already does"))
        return replace(plan, outcome=(
            f"not applied: {schedule_phrase(sched, ex.quantum)} (II {sched.ii * ex.quantum} cycles) keeps every "
            f"statement of '{ex.loop}' in one stage in program order, which is what the loop already does; annotating "
            "would change nothing"))
    if not opts.apply:
        return replace(plan, outcome="not applied: apply=False (call transforms.apply_annotation to write it)")
    previous = read_annotation(ref.node)
    apply_annotation(sch, ref.rv, ann)
    if opts.verify:
        try:
            inject_pipeline(sch.mod) if cache is None else cache.verify(sch.mod)
        except UnsupportedLoopError:
            restore_annotation(sch, ref.rv, previous)  # leave the schedule as it was
            raise
    try:  # TVM's cp.async wait counts, checked; the ones too large are lowered when compiled (wait_counts)
        tvm_waits = guard_loop_waits(sch, ref.rv, ann, ex.graph, ex.trip_count)
    except UnsupportedLoopError:
        restore_annotation(sch, ref.rv, previous)
        raise
    return replace(plan, applied=True, outcome=f"applied to loop '{ex.loop}'", tvm_waits=tvm_waits)


# -- evaluate_annotation --------------------------------------------------------
def evaluate_annotation(sch, loop, target, *, machine=None, quantum: int | None = None) -> AnnotationEval:
    """The II (and throughput) that the annotation already on ``loop`` achieves under the model.

    Definition: the smallest ii for which there are issue offsets
    0 <= off[v] < ii, non-decreasing in the annotated order, such that the
    times ``stage[v] * ii + off[v]`` satisfy the model's dependence (1),
    resource (2), register (5) and memory (6) rules on the single-role
    machine.  The stage/order pair fixes everything but the offsets, so this
    is the best the annotation can do; an optimal ``auto_pipeline`` schedule
    of the same graph can only be as good or better.

    Offsets are found exactly for units of capacity 1 (all built-in units):
    with the order fixed, dependences, the [0, ii) window and non-overlap on
    a unit are all difference constraints, solved by Bellman-Ford (least
    offsets); registers and memory are then checked on those offsets.
    """
    check_call("evaluate_annotation", sch, loop, target, nested=False, machine=machine, quantum=quantum)
    arch, _ = parse_target(target)
    m = machine_for(arch, machine)
    ex = extract_loop(sch, loop, arch, machine=m, quantum=quantum)
    ann = ex.annotation
    if ann is None:
        raise UnsupportedLoopError(f"loop '{ex.loop}' has no software_pipeline_stage/order annotation: nothing to "
                                   "evaluate (auto_pipeline writes one)")
    if len(ann.stages) != len(ex.stmts):
        raise UnsupportedLoopError(
            f"loop '{ex.loop}' has {len(ex.stmts)} pipeline statements ({', '.join(ex.names)}) but its "
            f"annotation has {len(ann.stages)} entries: InjectSoftwarePipeline would reject it")
    bad = legality_violations(ann, ex.graph)
    if bad:
        raise InputError(f"the annotation of loop '{ex.loop}' is not a legal pipeline: {bad[0]}")
    ms = swp_machine(m)
    graph = ex.graph.replace(machine=ms)
    ex = replace(ex, graph=graph)
    ii, times, bound = annotation_ii(graph, ms, ann)
    return AnnotationEval(loop=ex.loop, annotation=ann, ii=ii, quantum=ex.quantum, times=times, extraction=ex,
                          bound=bound)
