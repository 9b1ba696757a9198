"""A MetaSchedule postprocessor that makes every software pipeline optimal.

MetaSchedule's tensor-core rule (``MultiLevelTilingTensorCore`` with
``use_software_pipeline=True``, in TVM's "cuda-tensorcore" rules) writes
fixed patterns such as stage [0, 0, 1, 2, 2], order [0, 1, 3, 2, 4] on the
outer k loop and [0, 0, 1] on the inner one.  ``TwillPipeline()``, placed
last among the postprocessors, re-plans each annotated loop nest with
``auto_pipeline`` for the tuning target::

    from tvm.s_tir import meta_schedule as ms
    postprocs = [*ms.postproc.Postproc.create("cuda-tensorcore"), tvm_twill.integrations.metaschedule.TwillPipeline()]
    space = ms.space_generator.PostOrderApply(sch_rules=rules, postprocs=postprocs, mutator_probs=probs)
    ms.tune_tir(mod, target, work_dir, max_trials_global, space=space, ...)

(TVM 0.27's ``tune_tir`` takes the postprocessors through its ``space``.)
``tune_context(mod, target)`` builds such a space for any module and CUDA
target: MetaSchedule's "cuda-tensorcore" rules with its tensor-core rule
replaced by the one that software-pipelines (``PIPELINED_RULES``; TVM's own
defaults give fp16 GEMMs to a wmma rule that writes no pipeline), its
postprocessors, ``TwillPipeline`` last; ``sample_candidates(ctx, n)`` draws
candidates from it without a GPU (``tutorials/tune_any_module.py``).

A loop nest that tvm_twill cannot plan (a loop the front-end refuses, a
function TVM's passes reject, an infeasible or timed-out solve, a plan over
the target's limits) keeps the annotation it had, so the postprocessor never
rejects a candidate that MetaSchedule would have kept.  Every such nest is
logged with its reason (logger ``tvm_twill.integrations.metaschedule``, level INFO;
re-planned nests at DEBUG) and recorded: ``replan_pipelines`` returns a
``Replan`` with one ``NestOutcome`` per nest, and ``TwillPipeline.history``
keeps the latest ``Replan`` of each candidate.

Within a tuning context the plans respect the target: the machine's shared
memory is capped at the target's ``max_shared_memory_per_block``, and a
candidate whose re-planned pipeline fails MetaSchedule's own VerifyGPUCode
check (threads, shared memory, registers) gets the rule's annotation back.
Solves, extractions and TVM's verdicts are reused across candidates through
a ``tvm_twill.planner.cache.PlanCache`` (the process-wide ``SHARED`` one by
default), so a tuning run solves each distinct loop once.
"""
from __future__ import annotations

import collections
import logging
import random
from dataclasses import dataclass, replace

from ..api import AutoPipelineOptions, auto_pipeline
from ..planner.cache import SHARED
from ..errors import InputError, TwillError, UnsupportedLoopError, UnsupportedTargetError
from ..frontend import inject_pipeline, machine_for, parse_target, pipeline_nests, read_annotation, scratch_schedule
from ..frontend.ir import (cuda_tensor_intrinsics, fingerprint, meta_schedule, meta_schedule_postproc_base,
                           meta_schedule_te_workloads, meta_schedule_verify_gpu_code, tvm)
from ..transforms import apply_annotation, async_waits, remove_annotation, restore_annotation
from ..transforms.wait_counts import annotate_expected_waits, guard_loop_waits
from ..planner.stages import STATIC_SMEM_BYTES
from .common import reason_of

__all__ = ["PIPELINED_RULES", "TARGET_TAGS", "NestOutcome", "Replan", "TwillPipeline", "pipelined_tensorcore_rule",
           "replan_pipelines", "sample_candidates", "target_machine", "tensorcore_tune_context", "tune_context",
           "tuning_limits"]

log = logging.getLogger("tvm_twill.metaschedule")  # the public name (the module moved, the log did not)

_PyPostproc, _derived_object = meta_schedule_postproc_base()

#: How many candidates' outcomes ``TwillPipeline.history`` keeps.
HISTORY = 4096
#: The target attributes MetaSchedule's VerifyGPUCode checks against (TVM 0.27).
VERIFY_GPU_CODE_ATTRS = ("max_shared_memory_per_block", "max_threads_per_block", "thread_warp_size")


class History(collections.deque):
    """``TwillPipeline.history``: a bounded deque of ``Replan``s that also takes slices (``history[-3:]``, a
    list), which a plain deque refuses with TypeError."""

    def __getitem__(self, index):
        if isinstance(index, slice):
            return list(self)[index]
        return super().__getitem__(index)


@dataclass(frozen=True)
class NestOutcome:
    """One annotated loop nest of a candidate: re-planned (``plan``) or kept as it was (``reason``).

    ``loops`` are the nest's annotated loops, outermost first; ``before``
    their annotations as the candidate had them (the rule's).
    """

    loops: tuple[str, ...]
    before: tuple
    plan: object = None
    reason: str = ""

    @property
    def kept(self) -> bool:
        """True when the nest keeps the annotation it had (``reason`` says why)."""
        return self.plan is None

    def __repr__(self) -> str:  # one line: the plan's own repr, or the full reason
        what = f"kept: {self.reason}" if self.kept else f"re-planned: {self.plan!r}"
        return f"NestOutcome(loops={list(self.loops)}, {what})"


@dataclass(frozen=True)
class Replan:
    """What ``replan_pipelines`` did to one schedule: one outcome per annotated loop nest.

    ``mod`` is the schedule's module afterwards (the candidate as MetaSchedule keeps it).
    """

    nests: tuple[NestOutcome, ...]
    mod: object = None

    @property
    def plans(self) -> list:
        """The PipelinePlans of the re-planned nests (outermost loop's plan, inner ones in ``.inner``)."""
        return [n.plan for n in self.nests if n.plan is not None]

    @property
    def kept(self) -> list[NestOutcome]:
        return [n for n in self.nests if n.kept]

    def __repr__(self) -> str:  # without the module (a screen of TVMScript)
        return f"Replan({len(self.nests)} nest(s): {', '.join(map(repr, self.nests))})"


def target_machine(target, machine=None):
    """The machine model for ``target``, its shared memory capped at the target's
    ``max_shared_memory_per_block`` when the target states one (MetaSchedule checks that limit)."""
    arch, tgt = parse_target(target)
    m = machine_for(arch, machine)
    limit = tgt.attrs.get("max_shared_memory_per_block") if hasattr(tgt.attrs, "get") else None
    if limit is not None and 0 < int(limit) < m.smem_bytes:
        m = replace(m, smem_bytes=int(limit))
    return m


def replan_pipelines(sch, target, *, machine=None, time_limit: float = 10.0, cache=None, check=None,
                     top_k: int = 1, rng=None) -> Replan:
    """Replace every software-pipeline annotation of ``sch`` by auto_pipeline's; returns a ``Replan``.

    Loops nested in one another are planned together, innermost first; loops
    are found and handled by reference (LoopRVs), never by name, so loops
    that share a name are told apart.  A nest that cannot be planned keeps
    its annotations; its ``NestOutcome`` says why (and the reason is logged).
    Nothing the schedule holds makes this raise: a failure to even find the
    nests is one ``NestOutcome`` with no loops.  ``machine``: a Machine or
    name (default: ``target_machine(target)``).  ``cache``: a
    ``tvm_twill.planner.cache.PlanCache`` (None: none).  ``check``: a callable
    ``check(sch) -> str`` run after a nest is re-planned; a non-empty answer
    rejects the plan (the nest gets its annotations back, the answer is the
    reason).  ``top_k`` > 1 with ``rng`` (a ``random.Random``): each nest gets one of its ``top_k`` best
    annotations (``PipelinePlan.alternatives``), drawn uniformly by ``rng``; one TVM rejects gives way
    to the best.
    """
    opts = AutoPipelineOptions(machine=target_machine(target, machine), time_limit=time_limit, cache=cache,
                               top_k=top_k, quiet=True)  # no progress lines from inside a tuning run
    try:
        nests = pipeline_nests(sch)
    except Exception as err:  # noqa: BLE001 - a schedule TVM or tvm_twill cannot walk: every nest kept
        reason = reason_of(err, whole=True)
        log.info("the candidate keeps its pipeline annotations: %s", reason)
        return Replan(nests=(NestOutcome(loops=(), before=(), reason=reason),), mod=sch.mod)
    outcomes = [_replan_nest(sch, nest, target, opts, check, rng) for nest in nests]
    return Replan(nests=tuple(outcomes), mod=sch.mod)


def _replan_nest(sch, nest, target, opts, check, rng=None) -> NestOutcome:
    """Re-plan one nest (LoopRefs, outermost first); on any failure its annotations go back, reason kept."""
    loops = tuple(r.name for r in nest)
    rvs = [r.rv for r in nest]
    before = tuple(read_annotation(r.node) for r in nest)
    rejected = ""
    try:
        for rv in rvs:
            remove_annotation(sch, rv)
        plan = auto_pipeline(sch, rvs if len(rvs) > 1 else rvs[0], target, opts)
        if rng is not None and plan.alternatives:
            plan = _sample(sch, rvs[0], plan, rng, opts.cache)
        rejected = check(sch) if check is not None and _changed(plan) else ""
        if rejected:
            raise UnsupportedLoopError(rejected)
    except Exception as err:  # noqa: BLE001 - a postprocessor never rejects a candidate the rule would keep
        reason = reason_of(err, whole=True)
        try:
            for rv, ann in zip(rvs, before):  # a partly applied nest goes back to what it was
                restore_annotation(sch, rv, ann)
            if rejected and check(sch):  # not the plan's fault: the candidate fails as the rule made it
                reason += "; so does the rule's annotation (TVM cannot lower this candidate as it is)"
        except Exception as again:  # noqa: BLE001 - said, not raised
            reason += f"; restoring the annotations failed too ({reason_of(again, whole=True)})"
        log.info("loop nest %s keeps MetaSchedule's annotation %s: %s", list(loops),
                 [a.to_dict() for a in before if a is not None], reason)
        return NestOutcome(loops=loops, before=before, reason=reason)
    log.debug("loop nest %s re-planned: II %d cycles, %s", list(loops), plan.ii_cycles, plan.outcome)
    return NestOutcome(loops=loops, before=before, plan=plan)


def _sample(sch, rv, plan, rng: random.Random, cache):
    """One of the plan's annotation and its alternatives, drawn by ``rng``, written on the loop ``rv``."""
    pick = rng.randrange(1 + len(plan.alternatives))
    if pick == 0:
        return plan
    alt = plan.alternatives[pick - 1]
    apply_annotation(sch, rv, alt.annotation)
    ann, trips = alt.annotation, plan.extraction.trip_count
    try:
        inject_pipeline(sch.mod) if cache is None else cache.verify(sch.mod)
        tvm_waits = guard_loop_waits(sch, rv, ann, plan.graph, trips)  # TVM's wait counts, checked
    except UnsupportedLoopError as err:  # TVM refuses it: the best one, as auto_pipeline wrote it
        apply_annotation(sch, rv, plan.annotation)
        annotate_expected_waits(sch, rv, plan.tvm_waits)
        log.info("loop %s keeps its best annotation: TVM refuses the sampled one ranked %d (%s)", plan.loop,
                 alt.rank, reason_of(err, whole=True))
        return plan
    waits = async_waits(ann, plan.graph, trips) if ann.async_stages else ()  # trips None: as compiled
    return replace(plan, schedule=alt.schedule, annotation=ann, waits=waits, applied=True, tvm_waits=tvm_waits,
                   outcome=f"applied the annotation ranked {alt.rank} of {1 + len(plan.alternatives)} (sampled, "
                           f"top_k={plan.options.top_k}) to loop '{plan.loop}'")


def _changed(plan) -> bool:
    """Whether the plan (or a nested one) left the loops different from unannotated."""
    return plan.applied or any(p.applied for p in plan.inner)


@_derived_object
class TwillPipeline(_PyPostproc):
    """MetaSchedule postprocessor: optimal software_pipeline annotations for the tuning target.

    ``time_limit``: seconds per loop solve.  ``machine``: a Machine or name
    (default: the target's, shared memory capped at the target's limit).
    ``cache``: the ``PlanCache`` shared by every clone (default the
    process-wide ``tvm_twill.planner.cache.SHARED``; None: no reuse).  ``history``:
    the ``Replan`` of the latest candidates (at most ``HISTORY``), shared by
    every clone; ``verify_gpu_code``: check re-planned candidates with
    MetaSchedule's VerifyGPUCode for the target (as the default postprocessors
    do before this one).  ``top_k`` > 1: each candidate's nests get one of
    their ``top_k`` best annotations (``auto_pipeline(..., top_k=...)``),
    drawn uniformly, so that measuring on the GPU picks the fastest; drawn
    with MetaSchedule's random state (``sch.fork_seed()``), or with ``seed``
    and the candidate's module (the same candidate, the same draw).
    """

    def __init__(self, time_limit: float = 10.0, machine=None, cache=SHARED, verify_gpu_code: bool = True,
                 history=None, top_k: int = 1, seed: int | None = None):
        super().__init__()
        AutoPipelineOptions(top_k=top_k)  # a bad count is refused here, not per candidate
        self.top_k = top_k
        self.seed = seed
        self.time_limit = time_limit
        self.machine = machine
        self.cache = cache
        self.verify_gpu_code = verify_gpu_code
        self.history = History(maxlen=HISTORY) if history is None else history
        self.target = None
        self._verifier = None

    def _initialize_with_tune_context(self, context) -> None:
        self.target = context.target
        # VerifyGPUCode reads these limits; a target without them has none to check
        if self.verify_gpu_code and all(a in self.target.attrs for a in VERIFY_GPU_CODE_ATTRS):
            self._verifier = meta_schedule_verify_gpu_code()()
            self._verifier._initialize_with_tune_context(context)

    def _check(self, sch) -> str:
        """MetaSchedule's VerifyGPUCode verdict on the re-planned candidate ('' when it passes)."""
        def verify(mod):  # on a fresh schedule over the same module: ``sch`` is not touched
            if not self._verifier.apply(scratch_schedule(sch)):
                raise UnsupportedLoopError(
                    "the re-planned pipeline fails MetaSchedule's VerifyGPUCode for the target (threads, shared "
                    "memory or registers over its limits)")

        try:
            if self.cache is None:
                verify(sch.mod)
            else:
                self.cache.verdict(f"verify_gpu_code for {self.target}", sch.mod, verify)
        except UnsupportedLoopError as err:
            return str(err)
        return ""

    def apply(self, sch) -> bool:
        """Re-plan ``sch``'s pipelines in place; always True: whatever fails, the candidate keeps the rule's
        annotations and ``history`` says why (only a postprocessor used outside a TuneContext raises)."""
        if self.target is None:
            raise TwillError("TwillPipeline has no target: use it inside a TuneContext (or call "
                             "tvm_twill.integrations.metaschedule.replan_pipelines(sch, target))")
        try:
            replan = replan_pipelines(sch, self.target, machine=self.machine, time_limit=self.time_limit,
                                      cache=self.cache, check=self._check if self._verifier is not None else None,
                                      top_k=self.top_k, rng=self._rng(sch))
        except Exception as err:  # noqa: BLE001 - e.g. a target without a model: the candidate as the rule made it
            reason = reason_of(err, whole=True)
            log.info("the candidate keeps its pipeline annotations: %s", reason)
            replan = Replan(nests=(NestOutcome(loops=(), before=(), reason=reason),), mod=sch.mod)
        self.history.append(replan)
        return True

    def _rng(self, sch):
        """The draw among the K best of this candidate (None: K = 1, nothing to draw)."""
        if self.top_k == 1:
            return None
        if self.seed is None:
            return random.Random(sch.fork_seed())  # MetaSchedule's random state (its seed, per candidate)
        return random.Random(f"{self.seed}:{fingerprint(sch.mod)}")

    def clone(self):
        twin = TwillPipeline(time_limit=self.time_limit, machine=self.machine, cache=self.cache,
                             verify_gpu_code=self.verify_gpu_code, history=self.history, top_k=self.top_k,
                             seed=self.seed)
        twin.target, twin._verifier = self.target, self._verifier  # the same tuning context
        return twin



#: ``tune_context``'s default schedule rules: MetaSchedule's "cuda-tensorcore" with its tensor-core rule
#: replaced by the mma.sync rule that software-pipelines (``pipelined_tensorcore_rule``).
PIPELINED_RULES = "cuda-tensorcore-pipelined"
_MS_KINDS = ("cuda", "cuda-tensorcore")


def tuning_limits(arch: str) -> dict:
    """The per-block limits MetaSchedule checks a candidate against, for ``arch``, from its machine model
    (``model/chip.py``): threads per block (1024, within the SM's warps), the warp, 32-bit registers per block
    (64 Ki: the register file of every modelled SM), static shared memory per block (48 KiB, what ptxas allows
    a static ``__shared__`` array, as TVM's A100 / H100 tags say; ``shared.dyn`` may use the model's
    ``smem_bytes``) and the L2 size.  For sm_80 and sm_90a these are the limits of TVM's tags."""
    m = machine_for(arch)
    chip = m.costs.chip if m.costs is not None else None
    if chip is None:  # pragma: no cover - every built-in machine has its chip's figures
        raise UnsupportedTargetError(f"the model of arch '{arch}' has no chip figures: pass a tvm.target.Target "
                                     "with max_threads_per_block, max_shared_memory_per_block, registers_per_block")
    threads = min(1024, chip.max_warps_per_sm * 32)
    return {"max_num_threads": threads, "max_threads_per_block": threads, "thread_warp_size": 32,
            "registers_per_block": min(65536, chip.regs_per_sm),
            "max_shared_memory_per_block": min(STATIC_SMEM_BYTES, m.smem_bytes), "l2_cache_size_bytes": chip.l2_bytes}


def _tuning_target(target):
    """The Target to tune for: a Target or tag with the limits it states, the ones it lacks (all of them for an
    arch string) from ``tuning_limits`` (TVM's MetaSchedule refuses a CUDA target without them)."""
    arch, tgt = parse_target(target)  # refuses what tvm_twill cannot plan for, in one line
    missing = {k: v for k, v in tuning_limits(arch).items() if k not in tgt.attrs}
    return tvm.target.Target({**dict(tgt.export()), **missing}) if missing else tgt


def _rules_and_kind(rules, intrinsics, ms):
    """(schedule rules for PostOrderApply, the MetaSchedule kind of the default postprocessors and mutators)."""
    if rules == PIPELINED_RULES:
        tc, out = ms.schedule_rule.MultiLevelTilingTensorCore, []
        for r in ms.schedule_rule.ScheduleRule.create("cuda-tensorcore"):  # the first tensor-core rule replaced
            if not isinstance(r, tc):
                out.append(r)
            elif not any(isinstance(o, tc) for o in out):
                out.append(pipelined_tensorcore_rule(intrinsics))
        return out, "cuda-tensorcore"
    if rules in _MS_KINDS:
        return ms.schedule_rule.ScheduleRule.create(rules), rules
    if isinstance(rules, (list, tuple)) and rules:
        tc = ms.schedule_rule.MultiLevelTilingTensorCore
        return list(rules), "cuda-tensorcore" if any(isinstance(r, tc) for r in rules) else "cuda"
    raise InputError(f"rules must be {PIPELINED_RULES!r}, one of {list(_MS_KINDS)} or a non-empty list of "
                     f"MetaSchedule schedule rules, got {rules!r}")


def tune_context(mod, target, *, rules=PIPELINED_RULES, intrinsics: str = "mma", postprocs=None, twill=None,
                 mutator_probs=None, seed: int = 0, task_name: str = "main"):
    """A MetaSchedule ``TuneContext`` over any module and CUDA target, ``TwillPipeline`` last among its
    postprocessors.

    ``mod``: an IRModule or a PrimFunc.  ``target``: a ``tvm.target.Target``, a TVM tag, or any modelled arch
    ("sm_80", "sm_86", "sm_90a", "sm_100a", "sm_120", ...); the limits MetaSchedule checks that the target does
    not state come from the arch's machine model (``tuning_limits``).  ``rules``:
    ``PIPELINED_RULES`` (default), "cuda", "cuda-tensorcore" or a list of schedule rules.  ``intrinsics``: the
    pipelining tensor-core rule's, "mma" (mma.sync, cp.async copies; its output goes straight to global
    memory, so an epilogue cannot be fused: TVM's VerifyGPUCode refuses every such candidate) or "wmma"
    (wmma through a shared output tile, which takes a fused epilogue such as bias + ReLU).  ``postprocs``:
    the postprocessors before tvm_twill's (default: MetaSchedule's for the rules).  ``twill``: the
    ``TwillPipeline`` (default a new one; its ``history`` keeps what happened to each candidate).
    ``mutator_probs``: for ``ms.tune_tir``'s evolutionary search (default: MetaSchedule's for the rules).
    The context's own search strategy is ``ReplayTrace`` (no cost model, no GPU): ``sample_candidates(ctx,
    n)`` draws candidates; ``ms.tune_tir(ctx.mod, ctx.target, work_dir, max_trials_global,
    space=ctx.space_generator)`` tunes the same space, measuring on a GPU.
    """
    ms = meta_schedule()
    if isinstance(mod, tvm.tirx.PrimFunc):
        mod = tvm.IRModule({"main": mod})
    if not isinstance(mod, tvm.IRModule):
        raise InputError(f"tune_context takes an IRModule or a PrimFunc, got {type(mod).__name__}")
    tgt = _tuning_target(target)
    sch_rules, kind = _rules_and_kind(rules, intrinsics, ms)
    if twill is None:
        twill = TwillPipeline()
    if not isinstance(twill, TwillPipeline):
        raise InputError(f"twill must be a tvm_twill.integrations.metaschedule.TwillPipeline, got {type(twill).__name__}")
    before = list(ms.postproc.Postproc.create(kind) if postprocs is None else postprocs)
    space = ms.space_generator.PostOrderApply(sch_rules=sch_rules, postprocs=[*before, twill],
                                              mutator_probs=kind if mutator_probs is None else mutator_probs)
    return ms.TuneContext(mod=mod, target=tgt, space_generator=space, search_strategy=ms.search_strategy.ReplayTrace(),
                          task_name=task_name, rand_state=seed, num_threads=1)


# ---------------------------------------------------------------------------- the pipelining rule alone
#: TVM target tags (with the limits MetaSchedule checks) for the archs the MetaSchedule workloads use.
TARGET_TAGS = {"sm_80": "nvidia/nvidia-a100", "sm_90a": "nvidia/nvidia-h100"}


def pipelined_tensorcore_rule(intrinsics: str = "mma"):
    """MetaSchedule's ``MultiLevelTilingTensorCore`` with ``use_software_pipeline=True``, as TVM 0.27 configures
    it: ``"mma"``, the mma.sync rule of TVM's "cuda-tensorcore" defaults (m16n8k8, fp16 -> fp32, cp.async
    copies), or ``"wmma"``, the wmma rule with software pipelining of TVM's tests."""
    ms = meta_schedule()
    get_wmma_intrin_group = cuda_tensor_intrinsics().get_wmma_intrin_group

    if intrinsics == "mma":
        groups = [{"init": "mma_init_m16n8k8_f32", "load_a": "mma_load_m16n8k8_f16_A_shared_dyn",
                   "load_b": "mma_load_m16n8k8_f16_B_shared_dyn", "compute": "mma_sync_m16n8k8_f16f16f32",
                   "store": "mma_store_m16n8k8_f32_global"}]
        write_reuse = "no"
    elif intrinsics == "wmma":
        groups = [get_wmma_intrin_group("shared.dyn", "shared.dyn", "float16", "float32", True)]
        write_reuse = "must"
    else:
        raise InputError(f"intrinsics must be 'mma' or 'wmma', got {intrinsics!r}")
    return ms.schedule_rule.MultiLevelTilingTensorCore(
        intrin_groups=groups, structure="SSSRRSRS", tile_binds=["blockIdx.y", "blockIdx.x", "threadIdx.y"],
        max_innermost_factor=4, vector_load_lens=[1, 2, 3, 4, 8, 16],
        reuse_read=ms.schedule_rule.ReuseType(req="must", levels=[4], scope="shared.dyn"),
        reuse_write=ms.schedule_rule.ReuseType(req=write_reuse, levels=[2], scope="shared.dyn"),
        use_software_pipeline=True)


def tensorcore_tune_context(n: int = 512, target="sm_80", *, intrinsics: str = "mma", postprocs=None,
                            seed: int = 0):
    """A MetaSchedule ``TuneContext`` over an n^3 fp16 -> fp32 GEMM whose design space software-pipelines.

    The schedule rule is MetaSchedule's ``MultiLevelTilingTensorCore`` with
    ``use_software_pipeline=True``, as TVM 0.27 configures it: ``intrinsics``
    ``"mma"`` is the mma.sync rule of TVM's "cuda-tensorcore" defaults (m16n8k8,
    cp.async copies; outer k loop [0, 0, 1, 2, 2] / [0, 1, 3, 2, 4], inner
    [0, 0, 1]); ``"wmma"`` the wmma rule with software pipelining of TVM's
    tests (copies split into global->local->shared by
    ManifestSharedMemoryLocalStage; outer [0, 0, 0, 0, 0, 1, 1]).  The
    defaults list the wmma rule first, which takes every fp16 GEMM without a
    pipeline, so the pipelining rule is given alone here.  ``target``: an arch
    (``TARGET_TAGS``) or a ``tvm.target.Target`` with MetaSchedule's limits;
    ``postprocs``: the postprocessors (default: "cuda-tensorcore"'s);
    ``seed``: MetaSchedule's random state.  The search strategy is
    ``ReplayTrace`` (random decisions, no cost model, no GPU): see
    ``sample_candidates``.
    """
    ms, te_workload = meta_schedule(), meta_schedule_te_workloads()
    rule = pipelined_tensorcore_rule(intrinsics)
    tgt = tvm.target.Target(TARGET_TAGS.get(target, target)) if isinstance(target, str) else target
    func = tvm.te.create_prim_func(te_workload.matmul(n, n, n, in_dtype="float16", out_dtype="float32"))
    if postprocs is None:
        postprocs = ms.postproc.Postproc.create("cuda-tensorcore")
    return ms.TuneContext(
        mod=tvm.IRModule({"main": func}), target=tgt,
        space_generator=ms.space_generator.PostOrderApply(sch_rules=[rule], postprocs=list(postprocs),
                                                          mutator_probs={}),
        search_strategy=ms.search_strategy.ReplayTrace(), task_name=f"gemm{n}_{intrinsics}", rand_state=seed,
        num_threads=1)


def sample_candidates(context, count: int) -> list:
    """``count`` candidates of the context's design space, as MetaSchedule's search produces them.

    ``ReplayTrace`` re-samples every decision of a design-space trace at
    random and runs the context's postprocessors on the result (a candidate
    a postprocessor rejects is replaced by another); returns their Schedules.
    No cost model, builder or runner: no GPU.
    """
    spaces = context.generate_design_space()
    context.pre_tuning(max_trials=count, num_trials_per_iter=count, design_spaces=spaces)
    try:
        return [c.sch for c in context.generate_measure_candidates() or []]
    finally:
        context.post_tuning()
