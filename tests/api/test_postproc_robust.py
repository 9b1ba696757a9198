"""The MetaSchedule postprocessor and the dlight wrapper never raise on a user's schedule: loops are found by
reference (never by name), and every nest they cannot plan keeps its annotation with the reason kept and logged.

Schedules unlike the tests' GEMMs: two GEMVs in one function (every loop name used twice), a row reduction
whose annotated loop has one statement, an elementwise op with no pipeline, and a nest of annotated loops.
"""
import logging

import pytest

tvm = pytest.importorskip("tvm")
pytest.importorskip("psutil")  # MetaSchedule's TuneContext needs it

import tvm_twill  # noqa: E402
from tvm_twill.integrations.dlight import AutoPipelined  # noqa: E402
from tvm_twill.frontend import read_annotation  # noqa: E402
from tvm_twill.integrations.metaschedule import TwillPipeline, replan_pipelines  # noqa: E402
from tvm_twill.transforms import apply_annotation  # noqa: E402
from tvm_twill.model.pipeline import PipelineAnnotation  # noqa: E402
from tvm_twill.workloads import gemv  # noqa: E402

ms = tvm.s_tir.meta_schedule
dl = tvm.s_tir.dlight
SM80 = {"kind": "cuda", "arch": "sm_80"}
RULE = PipelineAnnotation((0, 0, 1), (0, 1, 2), (0,))   # what a rule might have written on a GEMV's k0


def twin_gemvs():
    """Two GEMVs in one function, both k0 loops annotated: every loop name occurs twice."""
    sch, k0s = gemv(1024, 1024, bk=256, scope="shared.dyn", outputs=2)
    for k0 in k0s:
        apply_annotation(sch, k0, RULE)
    return sch, k0s


def row_sum():
    """A row reduction whose annotated loop has a single statement (nothing to overlap)."""
    a = tvm.te.placeholder((64, 128), "float32", name="A")
    r = tvm.te.reduce_axis((0, 128), name="k")
    s = tvm.te.compute((64,), lambda i: tvm.te.sum(a[i, r], axis=r), name="S")
    sch = tvm.s_tir.Schedule(tvm.te.create_prim_func([a, s]))
    i, k = sch.get_loops(sch.get_sblock("S"))
    sch.bind(i, "threadIdx.x")
    apply_annotation(sch, k, PipelineAnnotation((0,), (0,)))
    return sch, k


def elementwise():
    a = tvm.te.placeholder((256,), "float32", name="A")
    b = tvm.te.compute((256,), lambda i: a[i] * 2.0, name="B")
    sch = tvm.s_tir.Schedule(tvm.te.create_prim_func([a, b]))
    (i,) = sch.get_loops(sch.get_sblock("B"))
    sch.bind(i, "threadIdx.x")
    return sch


def postproc():
    """A TwillPipeline inside a TuneContext for sm_80 (as MetaSchedule sets it up)."""
    twill = TwillPipeline(cache=None, time_limit=5.0)
    ctx = ms.TuneContext(mod=elementwise().mod, target=tvm.target.Target(SM80),
                         space_generator=ms.space_generator.PostOrderApply(
                             sch_rules=[], postprocs=[twill], mutator_probs={}))
    return ctx.space_generator.postprocs[0], twill


def test_loops_that_share_a_name_are_each_replanned_by_the_postprocessor(caplog):
    sch, k0s = twin_gemvs()
    post, twill = postproc()
    with caplog.at_level(logging.DEBUG, logger="tvm_twill.metaschedule"):
        assert post.apply(sch) is True   # was: RuntimeError "2 loops are named 'k_0'"
    (replan,) = twill.history
    assert [n.loops for n in replan.nests] == [("k_0",), ("k_0",)]
    assert all(not n.kept for n in replan.nests), [n.reason for n in replan.nests]
    for k0, nest in zip(k0s, replan.nests):   # each loop got its own nest's plan, by reference
        assert nest.before == (RULE,)
        assert read_annotation(sch.get(k0)) == (nest.plan.annotation if nest.plan.applied else None)
    fresh, (f0, _) = twin_gemvs()
    assert tvm_twill.auto_pipeline(fresh, f0, "sm_80").annotation == replan.nests[0].plan.annotation
    with pytest.raises(tvm_twill.UnsupportedLoopError, match="2 loops are named 'k_0': pass the LoopRV"):
        tvm_twill.auto_pipeline(fresh, "k_0", "sm_80")   # a name is ambiguous here; the LoopRVs are not


def test_one_postprocessor_over_candidates_unlike_the_gemms(mma_gemm, caplog):
    """As in a tuning run: one TwillPipeline sees a single-statement reduction, an elementwise op with no
    pipeline, TVM's nested GEMM pipeline and two GEMVs whose loops share names; it never raises, and
    ``history`` holds one Replan per candidate with a reason for every kept nest."""
    post, twill = postproc()
    (red, k), ew, (gemm, k0, k1), (twins, _) = row_sum(), elementwise(), mma_gemm("nested"), twin_gemvs()
    before_ew = ew.mod
    with caplog.at_level(logging.INFO, logger="tvm_twill.metaschedule"):
        assert all(post.apply(s) is True for s in (red, ew, gemm, twins))
    h_red, h_ew, h_gemm, h_twins = twill.history
    (nest,) = h_red.nests   # the reduction: kept, said why, annotation untouched
    assert nest.kept and nest.loops == ("k",) and "single statement" in nest.reason
    assert read_annotation(red.get(k)) == PipelineAnnotation((0,), (0,))
    assert any("keeps MetaSchedule's annotation" in r.getMessage() and "single statement" in r.getMessage()
               for r in caplog.records)
    assert h_ew.nests == () and ew.mod.same_as(before_ew)   # nothing annotated: nothing done
    (nest,) = h_gemm.nests  # the nest is planned together, each plan on its own loop
    assert nest.loops == (gemm.get(k0).loop_var.name, gemm.get(k1).loop_var.name) and not nest.kept
    for rv, p in ((k0, nest.plan), (k1, nest.plan.inner[0])):
        assert read_annotation(gemm.get(rv)) == (p.annotation if p.applied else None)
    assert [n.loops for n in h_twins.nests] == [("k_0",), ("k_0",)] and not h_twins.kept


def test_a_failure_outside_tvm_twill_is_kept_per_nest_not_raised(monkeypatch):
    sch, k0s = twin_gemvs()
    calls = []

    def boom(*args, **kw):  # the first nest's solve breaks as no TwillError would
        calls.append(1)
        if len(calls) == 1:
            raise ZeroDivisionError("planted")
        return real(*args, **kw)

    import tvm_twill.integrations.metaschedule as msmod
    real = msmod.auto_pipeline
    monkeypatch.setattr(msmod, "auto_pipeline", boom)
    out = replan_pipelines(sch, "sm_80", time_limit=5.0)
    first, second = out.nests
    assert first.kept and first.reason == "unexpected ZeroDivisionError: planted"
    assert read_annotation(sch.get(k0s[0])) == RULE          # given back
    assert not second.kept and second.plan is not None       # the other nest is still planned


class _Fixed(dl.ScheduleRule):
    """A dlight rule that returns a prepared schedule (what a user's rule might write)."""

    def __init__(self, make):
        self.make = make

    def apply(self, func, target, tunable):
        return self.make()

    def is_target_available(self, target):
        return True


def test_dlight_wrapper_replans_loops_that_share_a_name_and_keeps_what_it_cannot():
    made = {}

    def make():
        made["sch"], made["loops"] = twin_gemvs()
        return made["sch"]

    rule = AutoPipelined(_Fixed(make), time_limit=5.0)
    rule.apply(None, tvm.target.Target(SM80), False)   # was: UnsupportedLoopError "2 loops are named 'k_0'"
    assert [n.loops for n in rule.last] == [("k_0",), ("k_0",)] and all(n.plan for n in rule.last)
    for k0, nest in zip(made["loops"], rule.last):
        assert read_annotation(made["sch"].get(k0)) == (nest.plan.annotation if nest.plan.applied else None)
    rule = AutoPipelined(_Fixed(lambda: row_sum()[0]), time_limit=5.0)
    out = rule.apply(None, tvm.target.Target(SM80), False)
    (nest,) = rule.last
    assert nest.plan is None and "single statement" in nest.reason
    assert read_annotation(out.get(out.get_loops(out.get_sblock("S"))[1])) == PipelineAnnotation((0,), (0,))
