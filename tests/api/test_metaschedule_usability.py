"""MetaSchedule on one's own module: the history takes slices, candidates and plans print in one line, a
kept nest's reason is the whole message, ``tune_context`` builds the space for any module and target, and
tuning plans quietly."""
import pytest

tvm = pytest.importorskip("tvm")

from tvm_twill.errors import InputError, UnsupportedTargetError  # noqa: E402
from tvm_twill.frontend import read_annotation, resolve_loop  # noqa: E402
from tvm_twill.integrations.metaschedule import (TwillPipeline, replan_pipelines, sample_candidates,  # noqa: E402
                                    tune_context)


def test_history_takes_slices():
    history = TwillPipeline(cache=None).history
    for i in range(5):
        history.append(i)
    assert history[-2:] == [3, 4] and history[0] == 0 and history[-1] == 4 and len(history[::2]) == 3


def test_reprs_are_one_line_and_reasons_whole(mma_gemm):
    sch, k0, k1 = mma_gemm("nested")
    out = replan_pipelines(sch, "sm_90a")
    (nest,) = out.nests
    assert not nest.kept
    for r in (repr(nest.plan), repr(nest), repr(out)):
        assert "\n" not in r and len(r) < 600, r[:300]
    assert repr(nest.plan).startswith(f"PipelinePlan(loop='k_0_0', arch='sm_90a', ii_cycles={nest.plan.ii_cycles}, ")
    sch, k0, k1 = mma_gemm("nested")
    out = replan_pipelines(sch, "sm_90a", check=lambda s: "first line of the verifier\nsecond line, the cause")
    assert out.nests[0].reason.startswith(
        "UnsupportedLoopError: first line of the verifier / second line, the cause")
    assert "kept: UnsupportedLoopError: first line" in repr(out)


def _linear(tokens=256, d_in=1024, d_out=1024):
    """A user's module (not one of tvm_twill's workloads): Y = X W, fp16 -> fp32, W stored [in, out]."""
    from tvm import te
    x = te.placeholder((tokens, d_in), "float16", name="X")
    w = te.placeholder((d_in, d_out), "float16", name="W")
    k = te.reduce_axis((0, d_in), name="k")
    y = te.compute((tokens, d_out), lambda m, n: te.sum(x[m, k].astype("float32") * w[k, n].astype("float32"),
                                                        axis=k), name="Y")
    return te.create_prim_func([x, w, y])


def test_tune_context_takes_any_module_and_runs_twill_last():
    twill = TwillPipeline()
    ctx = tune_context(_linear(), "sm_80", twill=twill, seed=1)
    assert ctx.target.attrs["arch"] == "sm_80" and int(ctx.target.attrs["max_shared_memory_per_block"]) > 0
    post = [type(p).__name__ for p in ctx.space_generator.postprocs]
    assert post[-1] != "VerifyGPUCode" and "RewriteTensorize" in post and len(post) >= 7
    candidates = sample_candidates(ctx, 4)
    assert candidates and len(twill.history) >= len(candidates)  # TwillPipeline ran on every candidate
    planned = 0
    for cand in candidates:
        replan = next(r for r in twill.history if r.mod.same_as(cand.mod))
        # the pipelining tensor-core rule annotated each candidate's k loops; tvm_twill re-planned or said why
        assert replan.nests and all(n.before and all(a is not None for a in n.before) for n in replan.nests)
        assert all(n.plan is not None or n.reason for n in replan.nests)
        assert "\n" not in repr(replan)
        for nest in replan.nests:
            if nest.plan is not None:  # what the candidate carries is the plan, for the tuning target
                planned += 1
                assert nest.plan.arch == "sm_80"
                assert read_annotation(resolve_loop(cand, nest.loops[0]).node) == nest.plan.annotation
    assert planned  # seed 1: MetaSchedule draws candidates tvm_twill plans (others fail TVM's own passes)


def test_tune_context_refuses_what_it_cannot_tune():
    with pytest.raises(InputError, match="tune_context takes an IRModule or a PrimFunc, got int"):
        tune_context(42, "sm_80")
    with pytest.raises(UnsupportedTargetError, match="predates sm_80"):
        tune_context(_linear(), "sm_75")
    with pytest.raises(InputError, match="rules must be 'cuda-tensorcore-pipelined'"):
        tune_context(_linear(), "sm_80", rules="tensorcore")
    with pytest.raises(InputError, match="twill must be a tvm_twill.integrations.metaschedule.TwillPipeline"):
        tune_context(_linear(), "sm_80", twill=object())


def test_tuning_plans_quietly(mma_gemm, capfd, monkeypatch):
    from tvm_twill.planner import plan_progress
    monkeypatch.setattr(plan_progress, "AFTER", 0.0)  # any plan would report its steps, unless quiet
    sch, _, _ = mma_gemm("nested")
    out = replan_pipelines(sch, "sm_80")
    assert out.plans
    assert "tvm_twill: loop" not in capfd.readouterr().err
