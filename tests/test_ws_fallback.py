"""``warp_specialize="auto"`` falls back to the plain software pipeline, with the reason in ``plan.outcome``,
where the loop cannot be specialized; ``True`` refuses in one line."""
import pytest

pytest.importorskip("tvm")
import tvm  # noqa: E402

import tir_gen  # noqa: E402
import tvm_twill  # noqa: E402
from tvm_twill.compiler import _loop_annotations  # noqa: E402
from tvm_twill.errors import UnsupportedLoopError  # noqa: E402
from tvm_twill.frontend import costs as fe_costs  # noqa: E402

#: two copies and a consumer, without any thread binding (a loop as a CPU-first user writes it)
NO_THREADS = tir_gen.build_copy_loop(tir_gen.CopyLoopSpec(trip=8, widths=(16, 256))).replace(
    "    for tx in T.thread_binding(4, thread='threadIdx.x'):\n", "    for tx in T.serial(4):\n")


def schedule():
    return tvm.s_tir.Schedule(tvm.script.from_source(NO_THREADS))


def test_auto_falls_back_to_the_software_pipeline_and_says_why(monkeypatch):
    monkeypatch.setattr(fe_costs, "DRAM_LATENCY_CYCLES", 160)
    sch = schedule()
    plan = tvm_twill.auto_pipeline(sch, "i", "sm_80", warp_specialize="auto")
    plain = tvm_twill.auto_pipeline(schedule(), "i", "sm_80")
    assert plan.applied and plan.annotations == plain.annotations and plan.tir_pipeline is None
    assert plan.outcome == ("applied to loop 'i' (warp_specialize='auto' fell back to the software pipeline: "
                            "warp specialization: the loop is not inside a threadIdx binding (the producer warp is "
                            "carved out of the block's threads): bind threadIdx around it, or plan without "
                            "warp_specialize)")
    assert not plan.warp_specialization.chosen and "threadIdx binding" in plan.warp_specialization.reason
    (loop,) = _loop_annotations(sch.mod)["i"]
    assert {k: v for k, v in loop.items() if k.startswith(("software_pipeline", "tvm_twill"))} == plan.annotations
    assert f"result: {plan.outcome}" in plan.explain()


def test_true_refuses_in_one_line(monkeypatch):
    monkeypatch.setattr(fe_costs, "DRAM_LATENCY_CYCLES", 160)
    sch = schedule()
    before = sch.mod
    with pytest.raises(UnsupportedLoopError, match=r"^warp specialization: the loop is not inside a threadIdx "
                                                    r"binding .*plan without warp_specialize$") as err:
        tvm_twill.auto_pipeline(sch, "i", "sm_80", warp_specialize=True)
    assert "\n" not in str(err.value)
    tvm.ir.assert_structural_equal(sch.mod, before)  # the schedule is left as it was
