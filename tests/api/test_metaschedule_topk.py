"""``TwillPipeline(top_k=K)``: MetaSchedule candidates sample among the K best annotations of a loop."""
import random

import pytest

tvm = pytest.importorskip("tvm")
pytest.importorskip("psutil")  # MetaSchedule's TuneContext needs it

import tvm_twill  # noqa: E402
from tvm_twill.planner.cache import PlanCache  # noqa: E402
from tvm_twill.errors import InputError  # noqa: E402
from tvm_twill.frontend import inject_pipeline, read_annotation  # noqa: E402
from tvm_twill.integrations.metaschedule import TwillPipeline, replan_pipelines  # noqa: E402
from tvm_twill.transforms import legality_violations  # noqa: E402

ms = tvm.s_tir.meta_schedule


def test_auto_pipeline_top_k_plans_distinct_runnable_annotations(mma_gemm):
    sch, k0, _ = mma_gemm()
    plan = tvm_twill.auto_pipeline(sch, k0, "sm_80", top_k=4, quiet=True)
    assert plan.applied and 1 <= len(plan.alternatives) <= 3
    keys = [(a.stages, a.orders, a.async_stages) for a in [plan.annotation, *(x.annotation for x in plan.alternatives)]]
    assert len(set(keys)) == len(keys)
    assert [a.rank for a in plan.alternatives] == list(range(2, 2 + len(plan.alternatives)))
    assert all(a.ii_cycles >= plan.ii_cycles for a in plan.alternatives)
    for alt in plan.alternatives:  # each one TVM lowers as it is
        assert legality_violations(alt.annotation, plan.graph) == []
        other, o0, _ = mma_gemm()
        tvm_twill.transforms.apply_annotation(other, o0, alt.annotation)
        inject_pipeline(other.mod)
    text = plan.explain()
    assert f"the {1 + len(plan.alternatives)} best annotations (top_k=4;" in text
    assert f"  2nd: {plan.alternatives[0].difference}" in text
    with pytest.raises(InputError, match="top_k must be an integer from 1 to 64"):
        tvm_twill.auto_pipeline(sch, k0, "sm_80", top_k=0)


def test_samples_differ_are_valid_and_reuse_the_cache(mma_gemm):
    ref_sch, r0, _ = mma_gemm()
    ref = tvm_twill.auto_pipeline(ref_sch, r0, "sm_80", top_k=4, quiet=True)
    best = [ref.annotation, *(a.annotation for a in ref.alternatives)]
    cache = PlanCache()
    seen = {}
    for seed in range(8):
        sch, k0, _ = mma_gemm("simple")  # TVM's fixed [0, 0, 3] pattern, as MetaSchedule's rule writes it
        replan = replan_pipelines(sch, "sm_80", cache=cache, top_k=4, rng=random.Random(seed))
        (plan,) = replan.plans
        ann = read_annotation(sch.get(k0))
        assert ann == plan.annotation  # what was written is what the plan says
        assert ann in best  # one of the K best
        inject_pipeline(sch.mod)  # TVM lowers every sample
        seen.setdefault((ann.stages, ann.orders, ann.async_stages), seed)
    assert len(seen) >= 2  # different draws, different annotations
    assert cache.solves.solves == 1 and cache.solves.hits == 7  # one solve for all candidates of the loop


def test_the_postprocessor_draws_with_a_fixed_seed_or_metaschedules_state(mma_gemm):
    def run(post, seed=None):
        sch, k0, _ = mma_gemm("simple")
        if seed is not None:
            sch.seed(seed)
        ctx = ms.TuneContext(mod=sch.mod, target=tvm.target.Target({"kind": "cuda", "arch": "sm_80"}),
                             space_generator=ms.space_generator.PostOrderApply(
                                 sch_rules=[], postprocs=[post], mutator_probs={}))
        assert ctx.space_generator.postprocs[0].apply(sch) is True
        return read_annotation(sch.get(k0))

    fixed = [run(TwillPipeline(top_k=4, seed=s, cache=None)) for s in range(6)]
    assert fixed == [run(TwillPipeline(top_k=4, seed=s, cache=None)) for s in range(6)]  # reproducible
    assert len({(a.stages, a.orders) for a in fixed}) >= 2
    by_state = [run(TwillPipeline(top_k=4, cache=None), seed=s) for s in range(6)]
    assert by_state == [run(TwillPipeline(top_k=4, cache=None), seed=s) for s in range(6)]
    assert len({(a.stages, a.orders) for a in by_state}) >= 2
    with pytest.raises(InputError, match="top_k must be an integer from 1 to 64"):
        TwillPipeline(top_k=65)
