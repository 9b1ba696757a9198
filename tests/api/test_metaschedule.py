"""The MetaSchedule postprocessor: re-plans annotated pipelines, keeps (and says why) what it cannot plan.

The design-space tests run MetaSchedule itself without a GPU: its
tensor-core rule with software pipelining (``tvm_twill.metaschedule.tensorcore_tune_context``)
on a 512^3 fp16 GEMM, candidates sampled by ``ReplayTrace`` through the
default "cuda-tensorcore" postprocessors and ``TwillPipeline``, for sm_80
and sm_90a; every candidate is then checked against TVM (InjectSoftwarePipeline,
``tvm.compile`` to CUDA source).
"""
import logging

import pytest

tvm = pytest.importorskip("tvm")
tvm_ffi = pytest.importorskip("tvm_ffi")
pytest.importorskip("psutil")  # MetaSchedule's TuneContext needs it

import tvm_twill  # noqa: E402
from tvm_twill.planner.cache import PlanCache  # noqa: E402
from tvm_twill.errors import UnsupportedLoopError  # noqa: E402
from tvm_twill.frontend import compile_cuda, inject_pipeline, read_annotation, resolve_loop  # noqa: E402
from tvm_twill.integrations.metaschedule import TwillPipeline, replan_pipelines, target_machine  # noqa: E402
from tvm_twill.transforms import remove_annotation, restore_annotation  # noqa: E402
from tvm_twill.metaschedule import sample_candidates, tensorcore_tune_context  # noqa: E402
from tir_loops import with_control_flow  # noqa: E402

ms = tvm.s_tir.meta_schedule
CANDIDATES = 6
LOG = "tvm_twill.metaschedule"


class Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture(scope="module", params=["sm_80", "sm_90a"])
def tuned(request):
    """(arch, context, TwillPipeline, its cache, candidates, log records) of one sampled design space."""
    cache = PlanCache()
    twill = TwillPipeline(cache=cache)
    ctx = tensorcore_tune_context(512, request.param, intrinsics="mma", seed=1,
                                  postprocs=[*ms.postproc.Postproc.create("cuda-tensorcore"), twill])
    logger = logging.getLogger(LOG)
    handler, level = Records(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        candidates = sample_candidates(ctx, CANDIDATES)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return request.param, ctx, twill, cache, candidates, handler.records


def replan_of(twill, cand):
    """The Replan TwillPipeline recorded for this candidate (the very module MetaSchedule keeps)."""
    found = [r for r in twill.history if r.mod.same_as(cand.mod)]
    assert len(found) == 1, "every candidate went through TwillPipeline exactly once"
    return found[0]


def rule_schedule(replan):
    """The candidate as MetaSchedule's rule annotated it (before TwillPipeline)."""
    sch = tvm.s_tir.Schedule(replan.mod)
    for nest in replan.nests:
        for name, ann in zip(nest.loops, nest.before):
            restore_annotation(sch, resolve_loop(sch, name).rv, ann)
    return sch


def planned_annotations(plan):
    """loop -> the annotation the plan leaves on it (None: TVM's plain loop)."""
    return {p.loop: p.annotation if p.applied else None for p in (*plan.inner, plan)}


def test_every_candidate_of_the_tensor_core_design_space_is_planned_or_says_why(tuned):
    arch, ctx, twill, _, candidates, records = tuned
    assert len(candidates) == CANDIDATES
    machine = target_machine(ctx.target)
    planned = 0
    for cand in candidates:
        replan = replan_of(twill, cand)
        assert replan.nests, "the rule software-pipelines every candidate"
        for nest in replan.nests:
            if nest.kept:
                assert nest.reason and nest.loops
                for name, ann in zip(nest.loops, nest.before):  # the rule's annotation, untouched
                    assert read_annotation(resolve_loop(cand, name).node) == ann
                assert any(r.levelno == logging.INFO and nest.reason.split(": ", 1)[1] in r.getMessage()
                           and str(list(nest.loops)) in r.getMessage() for r in records), nest.reason
                continue
            planned += 1
            plan = nest.plan
            for p in (*plan.inner, plan):  # TVM needs the copies of an async stage next to each other
                st = p.annotation.async_stages
                run = sorted(p.annotation.orders[i] for i, s in enumerate(p.annotation.stages) if s in st)
                assert run == list(range(run[0], run[0] + len(run))) if run else True
            for loop, ann in planned_annotations(plan).items():
                assert read_annotation(resolve_loop(cand, loop).node) == ann
                if ann is not None:  # legal, and it reaches the plan's II under the model
                    ev = tvm_twill.evaluate_annotation(cand, loop, arch, machine=machine)
                    solved = plan if loop == plan.loop else next(p for p in plan.inner if p.loop == loop)
                    assert ev.ii <= solved.schedule.ii
            # the inner loop alone: the same graph under the rule's annotation never does better
            rule = rule_schedule(replan)
            inner, outer = nest.loops[-1], nest.loops[0]
            remove_annotation(rule, resolve_loop(rule, outer).rv)
            inner_plan = plan if len(nest.loops) == 1 else next(p for p in plan.inner if p.loop == inner)
            assert inner_plan.schedule.ii <= tvm_twill.evaluate_annotation(rule, inner, arch, machine=machine).ii
        try:
            inject_pipeline(rule_schedule(replan).mod)
        except UnsupportedLoopError:
            # TVM cannot build what the rule made (MetaSchedule's builder drops it): nothing was re-planned
            assert all(n.kept for n in replan.nests)
            continue
        inject_pipeline(cand.mod)
        _, src = compile_cuda(cand, ctx.target)
        assert "mma.sync.aligned.m16n8k8" in src
        if any(n.plan is not None and n.plan.annotation.async_stages for n in replan.nests):
            assert "cp.async" in src
    assert planned >= 1, "no candidate was re-planned: the test would not exercise tvm_twill"


def test_the_wmma_pipelining_rule_is_accounted_for_too():
    """MetaSchedule's wmma rule with software pipelining stages each copy through registers
    (ManifestSharedMemoryLocalStage: 7 statements in the outer loop, as the front end counts them).
    TVM 0.27 cannot build these candidates even as the rule annotated them; every nest says so."""
    twill = TwillPipeline(cache=PlanCache())
    ctx = tensorcore_tune_context(512, "sm_80", intrinsics="wmma", seed=1,
                                  postprocs=[*ms.postproc.Postproc.create("cuda-tensorcore"), twill])
    for cand in sample_candidates(ctx, 3):
        replan = replan_of(twill, cand)
        assert [len(a.stages) for a in replan.nests[0].before] == [7, 3]
        with pytest.raises(Exception):  # noqa: B017 - TVM's own lowering fails (InternalError, ValueError)
            compile_cuda(rule_schedule(replan), ctx.target)
        for nest in replan.nests:
            assert nest.kept and "annotation has" not in nest.reason  # statement counts agree with TVM's
            assert "TVM cannot lower this candidate" in nest.reason or "rejects" in nest.reason, nest.reason


def annotations(sch, replan):
    return [read_annotation(resolve_loop(sch, name).node) for nest in replan.nests for name in nest.loops]


def test_a_tuning_run_solves_each_loop_once_with_the_same_plans(tuned):
    _, ctx, twill, cache, candidates, _ = tuned
    after_run = cache.stats()
    assert after_run["solves"]["misses"] >= 1
    for cand in candidates:  # the candidates again, as the rule made them: everything is reused
        replan = replan_of(twill, cand)
        for c in (cache, None):  # with the run's cache, and without a cache: the same plans
            sch = rule_schedule(replan)
            again = replan_pipelines(sch, ctx.target, cache=c)
            assert [(n.loops, n.reason) for n in again.nests] == [(n.loops, n.reason) for n in replan.nests]
            assert annotations(sch, replan) == annotations(cand, replan)
    stats = cache.stats()
    assert stats["solves"]["misses"] == after_run["solves"]["misses"], "a loop was solved twice"
    assert stats["extractions"]["misses"] == after_run["extractions"]["misses"]
    assert stats["solves"]["hits"] > after_run["solves"]["hits"]


def test_tune_tir_without_a_gpu_runs_twill_in_its_tuning_threads(tmp_path):
    """``ms.tune_tir`` end to end with TVM's dummy builder and runner (no GPU, made-up timings): the
    search calls the postprocessors from two threads; every tuning record is a candidate TwillPipeline
    produced, and no loop is solved twice."""
    from tvm.s_tir.meta_schedule.testing.dummy_object import DummyBuilder, DummyRunner

    cache = PlanCache()
    twill = TwillPipeline(cache=cache)
    ctx = tensorcore_tune_context(512, "sm_80", seed=2,
                                  postprocs=[*ms.postproc.Postproc.create("cuda-tensorcore"), twill])
    database = ms.tune_tir(ctx.mod, ctx.target, str(tmp_path), max_trials_global=4, num_trials_per_iter=4,
                           builder=DummyBuilder(), runner=DummyRunner(), database="json", cost_model="random",
                           strategy="replay-trace", space=ctx.space_generator, num_tuning_cores=2, seed=2,
                           measure_callbacks=[ms.measure_callback.AddToDatabase(),
                                              ms.measure_callback.UpdateCostModel()])
    records = database.get_all_tuning_records()
    assert len(records) == 4 and len(twill.history) >= 4
    for record in records:  # the trace replays TwillPipeline's edits: the module it produced
        sch = tvm.s_tir.Schedule(record.workload.mod)
        record.trace.apply_to_schedule(sch, remove_postproc=False)
        assert sum(tvm_ffi.structural_equal(r.mod, sch.mod) for r in twill.history) >= 1
    stats = cache.stats()
    # every solver call (miss) added a distinct entry: two threads never solved the same graph twice
    assert stats["solves"]["misses"] == stats["solves"]["size"] >= 1
    assert stats["extractions"]["misses"] == stats["extractions"]["size"]


def test_target_limits_cap_the_machine():
    a100 = tvm.target.Target("nvidia/nvidia-a100")
    assert target_machine(a100).smem_bytes == int(a100.attrs["max_shared_memory_per_block"]) == 49152
    assert target_machine("sm_80").smem_bytes == tvm_twill.model.get_machine("a100").smem_bytes > 49152


def test_a_rejected_plan_gives_the_rule_annotation_back_and_says_why(mma_gemm, caplog):
    sch, k0, k1 = mma_gemm("nested")
    before = (read_annotation(sch.get(k0)), read_annotation(sch.get(k1)))

    def over_limits(s):  # rejects tvm_twill's plan, accepts the hand annotation
        return "" if read_annotation(s.get(k0)) == before[0] else "over the target's limits (test)"

    with caplog.at_level(logging.INFO, logger=LOG):
        out = replan_pipelines(sch, "sm_90a", check=over_limits)
    (nest,) = out.nests
    assert nest.kept and nest.reason == "UnsupportedLoopError: over the target's limits (test)"
    assert (read_annotation(sch.get(k0)), read_annotation(sch.get(k1))) == before
    assert any("keeps MetaSchedule's annotation" in r.getMessage() and "over the target's limits (test)"
               in r.getMessage() for r in caplog.records)
    # a check that the candidate fails as the rule made it too: said so
    out = replan_pipelines(sch, "sm_90a", check=lambda s: "no build (test)")
    assert out.nests[0].reason == ("UnsupportedLoopError: no build (test); so does the rule's annotation (TVM "
                                   "cannot lower this candidate as it is)")
    assert (read_annotation(sch.get(k0)), read_annotation(sch.get(k1))) == before


def test_replan_matches_auto_pipeline_on_tvms_nested_gemm(mma_gemm):
    sch, k0, k1 = mma_gemm("nested")
    plans = replan_pipelines(sch, "sm_90a").plans
    fresh, f0, f1 = mma_gemm()
    tvm_twill.auto_pipeline(fresh, [f0, f1], "sm_90a")
    assert len(plans) == 1 and plans[0].applied and len(plans[0].inner) == 1
    assert read_annotation(sch.get(k0)) == read_annotation(fresh.get(f0))
    assert read_annotation(sch.get(k1)) == read_annotation(fresh.get(f1))
    hand, h0, _ = mma_gemm("nested")
    assert plans[0].ii_cycles <= tvm_twill.evaluate_annotation(hand, h0, "sm_90a").ii_cycles


def test_postproc_in_a_tune_context_uses_the_tuning_target(mma_gemm):
    sch, k0, _ = mma_gemm("simple")
    twill = TwillPipeline(cache=None)
    ctx = ms.TuneContext(mod=sch.mod, target=tvm.target.Target({"kind": "cuda", "arch": "sm_80"}),
                         space_generator=ms.space_generator.PostOrderApply(
                             sch_rules=[], postprocs=[twill], mutator_probs={}))
    post = ctx.space_generator.postprocs[0]
    assert post.apply(sch) is True
    expected, e0, _ = mma_gemm()
    tvm_twill.auto_pipeline(expected, e0, "sm_80")
    assert read_annotation(sch.get(k0)) == read_annotation(expected.get(e0))
    assert read_annotation(sch.get(k0)).stages != (0, 0, 3)  # TVM's fixed pattern was replaced
    (replan,) = twill.history
    assert replan.mod.same_as(sch.mod) and not replan.kept


def test_a_loop_it_cannot_plan_keeps_its_annotation(caplog):
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": with_control_flow}))
    (loop,) = [lp for lp in sch.get_loops(sch.get_sblock("compute")) if sch.get(lp).loop_var.name == "i"]
    sch.annotate(loop, "software_pipeline_stage", [0, 1])
    sch.annotate(loop, "software_pipeline_order", [0, 1])
    with caplog.at_level(logging.INFO, logger=LOG):
        out = replan_pipelines(sch, "sm_90a")
    assert out.plans == [] and len(out.kept) == 1
    assert out.kept[0].reason.startswith("UnsupportedLoopError: loop 'i'") and "control flow" in out.kept[0].reason
    assert any("['i'] keeps MetaSchedule's annotation" in r.getMessage() for r in caplog.records)
    ann = read_annotation(sch.get(loop))
    assert ann.stages == (0, 1) and ann.orders == (0, 1)


def test_postproc_without_a_context_says_what_to_do(mma_gemm):
    sch, _, _ = mma_gemm("simple")
    # TVM's FFI re-raises errors from Python postprocessors as RuntimeError
    with pytest.raises(RuntimeError, match="TwillPipeline has no target: use it inside a TuneContext"):
        TwillPipeline().apply(sch)
