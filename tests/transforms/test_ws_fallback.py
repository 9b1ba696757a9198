"""``warp_specialize="auto"`` falls back to the plain software pipeline, with the reason in ``plan.outcome``,
where the loop cannot be specialized; ``True`` refuses in one line."""
import pytest

pytest.importorskip("tvm")
import tvm  # noqa: E402

import tir_gen  # noqa: E402
import tvm_twill  # noqa: E402
from tvm_twill.planner import warpspec  # noqa: E402
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
    # "auto" takes the producer variant (as if the model predicted it faster), so the transform is what refuses
    monkeypatch.setattr(warpspec, "_by_throughput", lambda *a, **kw: (True, "predicted faster (forced by the test)"))
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


def test_a_warp_specialized_plan_explains_its_roles_and_ring_first():
    from tvm_twill.workloads import wgmma_gemm
    sch, k0, _ = wgmma_gemm(512)
    plan = tvm_twill.auto_pipeline(sch, [k0], "sm_90a", warp_specialize=True)
    ws = plan.warp_specialization
    first, second = plan.explain().splitlines()[:2]
    assert first.startswith(f"auto_pipeline: loop 'k_0' (8 iterations) for sm_90a: warp-specialized, ii "
                            f"{ws.ii_ws_cycles} cycles (one role: {ws.ii_swp_cycles}); producer warp: "
                            "A_shared.dyn, B_shared.dyn; consumer warps: ")
    assert first.endswith(f"; a ring of {ws.ring_depth} slots (mbarriers ws_full / ws_empty) between them")
    assert second == "the one-role software pipeline it was compared with:"
