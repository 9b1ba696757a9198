"""The MetaSchedule postprocessor: re-plans annotated pipelines, keeps what it cannot plan."""
import pytest

tvm = pytest.importorskip("tvm")

import tvm_twill  # noqa: E402
from tvm_twill.metaschedule import TwillPipeline, replan_pipelines  # noqa: E402
from tvm_twill.frontend import read_annotation  # noqa: E402
from tir_loops import with_control_flow  # noqa: E402


def test_replan_matches_auto_pipeline_on_tvms_nested_gemm(mma_gemm):
    sch, k0, k1 = mma_gemm("nested")
    plans = replan_pipelines(sch, "sm_90a")
    fresh, f0, f1 = mma_gemm()
    tvm_twill.auto_pipeline(fresh, [f0, f1], "sm_90a")
    assert len(plans) == 1 and plans[0].applied and len(plans[0].inner) == 1
    assert read_annotation(sch.get(k0)) == read_annotation(fresh.get(f0))
    assert read_annotation(sch.get(k1)) == read_annotation(fresh.get(f1))
    hand, h0, _ = mma_gemm("nested")
    assert plans[0].ii_cycles <= tvm_twill.evaluate_annotation(hand, h0, "sm_90a").ii_cycles


def test_postproc_in_a_tune_context_uses_the_tuning_target(mma_gemm):
    pytest.importorskip("psutil")  # MetaSchedule's TuneContext needs it
    ms = tvm.s_tir.meta_schedule
    sch, k0, _ = mma_gemm("simple")
    ctx = ms.TuneContext(mod=sch.mod, target=tvm.target.Target({"kind": "cuda", "arch": "sm_80"}),
                         space_generator=ms.space_generator.PostOrderApply(
                             sch_rules=[], postprocs=[TwillPipeline()], mutator_probs={}))
    post = ctx.space_generator.postprocs[0]
    assert post.apply(sch) is True
    expected, e0, _ = mma_gemm()
    tvm_twill.auto_pipeline(expected, e0, "sm_80")
    assert read_annotation(sch.get(k0)) == read_annotation(expected.get(e0))
    assert read_annotation(sch.get(k0)).stages != (0, 0, 3)  # TVM's fixed pattern was replaced


def test_a_loop_it_cannot_plan_keeps_its_annotation():
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": with_control_flow}))
    (loop,) = [lp for lp in sch.get_loops(sch.get_sblock("compute")) if sch.get(lp).loop_var.name == "i"]
    sch.annotate(loop, "software_pipeline_stage", [0, 1])
    sch.annotate(loop, "software_pipeline_order", [0, 1])
    assert replan_pipelines(sch, "sm_90a") == []
    ann = read_annotation(sch.get(loop))
    assert ann.stages == (0, 1) and ann.orders == (0, 1)


def test_postproc_without_a_context_says_what_to_do(mma_gemm):
    sch, _, _ = mma_gemm("simple")
    # TVM's FFI re-raises errors from Python postprocessors as RuntimeError
    with pytest.raises(RuntimeError, match="TwillPipeline has no target: use it inside a TuneContext"):
        TwillPipeline().apply(sch)
