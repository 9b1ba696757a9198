"""A plan never claims what its annotation does not do: every cp.async-capable copy is in an async stage,
or the plan says why not (``PipelinePlan.sync_copies``), and the CUDA agrees.

Loops: ``tir_gen.copy_loop_specs`` (two or three global->shared copies of different widths, one consumer),
with the front-end's DRAM latency drawn so the solver spreads the copies over stages.  Before
``async_copies.all_copies_async`` such plans had stages [1, 0, 5] with async stage [0]: copy0 stayed a plain
copy while the schedule counted on it overlapping.
"""
import re

import pytest

pytest.importorskip("tvm")
import tvm  # noqa: E402
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

import tir_gen  # noqa: E402
import tvm_twill  # noqa: E402
from tvm_twill.api import auto_pipeline  # noqa: E402
from tvm_twill.frontend import costs as fe_costs  # noqa: E402

CP_ASYNC_CALL = re.compile(r"\bptx_cp_async\w*\((?P<args>[^;]*)\);")


def plan_for(spec, latency, monkeypatch, **kw):
    monkeypatch.setattr(fe_costs, "DRAM_LATENCY_CYCLES", latency)
    sch = tvm.s_tir.Schedule(tvm.script.from_source(tir_gen.build_copy_loop(spec)))
    return sch, auto_pipeline(sch, "i", "sm_80", **kw)


def copy_sources(kernel: str) -> set[str]:
    """The global buffers (X0, X1, ...) some cp.async of the kernel reads."""
    return {m for call in CP_ASYNC_CALL.finditer(kernel) for m in re.findall(r"\b(X\d+)_ptr\b", call.group("args"))}


def check_claims(plan):
    ann = plan.annotation
    capable = {s.name for s in plan.extraction.stmts if s.async_capable}
    sync = dict(plan.sync_copies)
    assert set(plan.async_copies) | set(sync) == capable and not set(plan.async_copies) & set(sync)
    for st_ in plan.extraction.stmts:
        if st_.name in plan.async_copies:
            assert ann.stages[st_.index] in ann.async_stages
    text = plan.explain()
    for name, why in sync.items():
        assert why and f"{name} stays a synchronous copy: {why}" in text
    if plan.async_copies:
        assert f"{', '.join(plan.async_copies)} become cp.async" in text


@settings(derandomize=True, deadline=None, max_examples=25,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(spec=tir_gen.copy_loop_specs(), latency=st.sampled_from([16, 48, 96, 160, 400]))
def test_claims_match_the_annotation_and_the_cuda(spec, latency, monkeypatch):
    sch, plan = plan_for(spec, latency, monkeypatch)
    check_claims(plan)
    if not plan.applied:
        return
    kernel = tvm_twill.build(sch.mod, "sm_80", plan).mod.imports[0].inspect_source()
    names = {s.name: f"X{s.name.removeprefix('copy')}" for s in plan.extraction.stmts if s.async_capable}
    assert copy_sources(kernel) == {names[n] for n in plan.async_copies}


def test_copies_of_different_stages_share_the_async_stage(monkeypatch):
    """The issue's case: copy0 in stage 1, copy1 in stage 0, async [0] (copy0 plain); now both async, same ii."""
    spec = tir_gen.CopyLoopSpec(trip=8, widths=(16, 256))
    _, plan = plan_for(spec, 160, monkeypatch, apply=False)
    assert plan.async_copies == ("copy0", "copy1") and plan.sync_copies == ()
    assert plan.annotation.stages[0] == plan.annotation.stages[1] and plan.schedule.optimal
    assert "copy0 moved to stage" in plan.explain() or "copy1 moved to stage" in plan.explain()


def test_a_copy_nothing_reads_says_why_it_stays_synchronous(monkeypatch):
    spec = tir_gen.CopyLoopSpec(trip=8, widths=(16, 64), reads=(1,))
    _, plan = plan_for(spec, 160, monkeypatch, apply=False)
    check_claims(plan)
    assert dict(plan.sync_copies)["copy0"].startswith("no statement of the same iteration reads it")


def test_the_issues_wgmma_gemm_compiles_both_copies_as_cp_async():
    """wgmma_gemm(512) on sm_90a was planned [1, 0, 5] with async [0]: A_shared.dyn stayed a plain copy."""
    from tvm_twill.workloads import wgmma_gemm
    sch, k0, _ = wgmma_gemm(512)
    plan = auto_pipeline(sch, [k0], "sm_90a")
    check_claims(plan)
    assert plan.annotation.stages[:2] == (0, 0) and plan.async_copies == ("A_shared.dyn", "B_shared.dyn")
    kernel = tvm_twill.build(sch.mod, "sm_90a", plan).mod.imports[0].inspect_source()
    read = {m for call in CP_ASYNC_CALL.finditer(kernel) for m in re.findall(r"\b([AB])_ptr\b", call.group("args"))}
    assert read == {"A", "B"}


def test_a_reader_before_its_copies_is_warned(monkeypatch):
    """Two 256 B copies and their reader, 4 trips, DRAM latency 16: the plan is stages [0, 0, 3] with the
    reader first (order [1, 2, 0]) and no order with the copies first fits.  TVM 0.27 would compile it with
    cp.async.wait_group 4 in the body where the simulation (plan.waits) says 2: the plan warns, and the wait
    guard (plan.tvm_waits, transforms.wait_counts) compiles 2."""
    spec = tir_gen.CopyLoopSpec(trip=4, widths=(64, 64), threads=4, reads=())
    with pytest.warns(UserWarning, match="TVM 0.27 counts that wait too high"):
        sch, plan = plan_for(spec, 16, monkeypatch)
    assert plan.annotation.orders == (1, 2, 0) and [w.in_flight for w in plan.waits if w.part == "body"] == [2]
    assert any("TVM 0.27 counts that wait too high" in w for w in plan.warnings)
    src = tvm_twill.build(sch.mod, "sm_80", plan).mod.imports[0].inspect_source()
    kernel = src[src.index('extern "C" __global__'):]
    assert [(w.emitted, w.expected) for w in plan.tvm_waits][0] == (4, 2)  # TVM's count, and the safe one
    assert re.findall(r"wait_group_(\d+)", kernel) == [str(w.in_flight) for w in plan.waits] == ["2", "2", "1", "0"]
