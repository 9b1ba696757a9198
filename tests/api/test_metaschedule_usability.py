"""MetaSchedule on one's own module: the history takes slices, candidates and plans print in one line, and a
kept nest's reason is the whole message."""
import pytest

pytest.importorskip("tvm")

from tvm_twill.metaschedule import TwillPipeline, replan_pipelines  # noqa: E402


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
