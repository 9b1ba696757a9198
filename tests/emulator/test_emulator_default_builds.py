"""A loop TVM 0.27 miscounts is safe through every entry point, built the way its users build it.

The loop: two 256 B copies and their reader, 4 trips, DRAM latency 16 (``test_async_claims``): the plan is
stages [0, 0, 3] with the reader first (order [1, 2, 0]), and TVM 0.27's InjectSoftwarePipeline would emit
``cp.async.wait_group 4`` in the body where only 2 groups are newer than the one the reader needs.  Before the
fix the plan wrote ``software_pipeline_async_stages`` on the loop and only tvm_twill's own pipelines lowered
the count: ``tvm.compile`` with TVM's default pipeline under ``tirx.use_async_copy`` gave a kernel whose reader
reads shared memory a cp.async is still writing (96 findings, wrong values on the emulator).

Now the loop carries its async stages under ``tvm_twill_async_stages`` (``transforms.wait_counts``): TVM's
default pipeline compiles the copies synchronously, tvm_twill's pipeline as cp.async with the checked counts.
Each entry point's module is compiled as its users compile it and emulated against numpy:

* ``auto_pipeline``: ``tvm.compile(sch.mod)`` under ``use_async_copy``, and ``tvm_twill.build``;
* ``plan_module``: ``tvm.compile(plan.mod)``;
* the dlight wrapper (``dlight.AutoPipelined`` in ``ApplyDefaultSchedule``): ``tvm.compile`` of its module;
* MetaSchedule's ``TwillPipeline`` on a candidate: MetaSchedule's builder function (``default_build``) with
  and without ``use_async_copy``, and ``LocalBuilder`` itself building the candidate.
"""
import re
import shutil

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
if shutil.which("nvcc") is None:
    pytest.skip("nvcc not installed", allow_module_level=True)

import tir_gen  # noqa: E402
import tvm_twill  # noqa: E402
from tvm_twill import emulator as E  # noqa: E402
from tvm_twill.frontend import costs as fe_costs  # noqa: E402
from tvm_twill.frontend import resolve_loop  # noqa: E402
from tvm_twill.model.pipeline import ASYNC_STAGES, PipelineAnnotation  # noqa: E402
from tvm_twill.transforms import apply_annotation  # noqa: E402
from tvm_twill.transforms.annotate import GUARDED_ASYNC_KEY, WAITS_KEY  # noqa: E402

SPEC = tir_gen.CopyLoopSpec(trip=4, widths=(64, 64), threads=4, reads=())
TARGET = {"kind": "cuda", "arch": "sm_80"}
ASYNC = {"tirx.use_async_copy": 1}
_WAIT = re.compile(r"cp_async_wait_group\w*?_(\d+)\(\);")


@pytest.fixture
def latency16(monkeypatch):
    monkeypatch.setattr(fe_costs, "DRAM_LATENCY_CYCLES", 16)


def _func():
    return tvm.script.from_source(tir_gen.build_copy_loop(SPEC))


def _compile(mod, config=ASYNC):
    with tvm.transform.PassContext(config=config):
        return tvm.compile(mod, target=tvm.target.Target(TARGET))


def _emulate(lib):
    """(the emulator's report over 4 interleavings, whether C is what numpy computes)."""
    rng = np.random.default_rng(0)
    xs = [rng.integers(-4, 4, (SPEC.threads, SPEC.trip, w)).astype(np.float32) for w in SPEC.widths]
    w = min(SPEC.widths)
    c = np.zeros((SPEC.threads, SPEC.trip, w), np.float32)
    report = E.run(lib, *xs, c, seed=0, interleavings=4)
    return report, bool(np.array_equal(c, sum(x[:, :, :w] for x in xs) * 2))


def _assert_safe(lib):
    report, right = _emulate(lib)
    assert report.ok, str(report)
    assert right
    return getattr(lib, "mod", lib).imports[0].inspect_source()  # tvm.compile's Executable, or a runtime module


def _guarded_loop(mod):
    """The annotations of loop ``i`` of the module's only function."""
    sch = tvm.s_tir.Schedule(mod)
    return dict(sch.get(resolve_loop(sch, "i").rv).annotations)


def test_auto_pipeline_default_compile_is_safe_and_build_keeps_the_cp_async(latency16):
    sch = tvm.s_tir.Schedule(_func())
    with pytest.warns(UserWarning, match="TVM 0.27 counts that wait too high"):
        plan = tvm_twill.auto_pipeline(sch, "i", "sm_80")
    assert plan.applied and plan.tvm_waits and plan.tvm_waits[0].emitted > plan.tvm_waits[0].expected
    have = _guarded_loop(sch.mod)
    assert ASYNC_STAGES not in have and [int(v) for v in have[GUARDED_ASYNC_KEY]] == [0]
    assert plan.annotations[GUARDED_ASYNC_KEY] == [0] and WAITS_KEY in plan.annotations
    assert "compiles these copies synchronously" in plan.explain()
    # the ordinary build: TVM's default pipeline, async copies on; the copies are synchronous, no wait at all
    src = _assert_safe(_compile(sch.mod))
    assert "cp_async" not in src and not _WAIT.findall(src)
    # tvm_twill.build: cp.async with the checked counts
    src = _assert_safe(tvm_twill.build(sch.mod, "sm_80", plan))
    kernel = src[src.index('extern "C" __global__'):]
    assert "cp_async" in kernel and [int(n) for n in _WAIT.findall(kernel)] == [w.in_flight for w in plan.waits]


def test_plan_module_default_compile_is_safe(latency16):
    sch = tvm.s_tir.Schedule(_func())
    apply_annotation(sch, resolve_loop(sch, "i").rv, PipelineAnnotation((0, 0, 1), (0, 1, 2), ()))
    mplan = tvm_twill.plan_module(sch.mod, "sm_80", max_workers=1, quiet=True)
    assert [o.status for o in mplan.loops] == ["planned"]
    assert GUARDED_ASYNC_KEY in _guarded_loop(mplan.mod)
    _assert_safe(_compile(mplan.mod))


def test_dlight_wrapper_default_compile_is_safe(latency16):
    from tvm.s_tir import dlight as dl

    from tvm_twill.integrations.dlight import AutoPipelined

    class Annotated(dl.ScheduleRule):  # a rule that writes a pipeline on the copy loop, as dlight's rules do
        def apply(self, func, target, tunable):
            sch = tvm.s_tir.Schedule(func)
            apply_annotation(sch, resolve_loop(sch, "i").rv, PipelineAnnotation((0, 0, 1), (0, 1, 2), ()))
            return sch

        def is_target_available(self, target):
            return True

    wrapper = AutoPipelined(Annotated())
    with tvm.target.Target(TARGET):
        mod = dl.ApplyDefaultSchedule(wrapper)(tvm.IRModule({"main": _func()}))
    assert [r.plan is not None for r in wrapper.last] == [True]
    assert GUARDED_ASYNC_KEY in _guarded_loop(mod)
    _assert_safe(_compile(mod))


def test_metaschedule_candidate_built_by_metaschedules_builder_is_safe(latency16):
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.builder.local_builder import default_build

    from tvm_twill.integrations.metaschedule import TwillPipeline

    sch = tvm.s_tir.Schedule(_func())
    apply_annotation(sch, resolve_loop(sch, "i").rv, PipelineAnnotation((0, 0, 1), (0, 1, 2), (0,)))
    twill = TwillPipeline(cache=None)
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_80", "max_threads_per_block": 1024,
                                "max_shared_memory_per_block": 49152, "thread_warp_size": 32})
    ctx = ms.TuneContext(mod=sch.mod, target=target, space_generator=ms.space_generator.PostOrderApply(
        sch_rules=[], postprocs=[twill], mutator_probs={}))
    assert ctx.space_generator.postprocs[0].apply(sch) is True
    (replan,) = twill.history
    assert replan.nests[0].plan is not None and replan.nests[0].plan.tvm_waits
    assert GUARDED_ASYNC_KEY in _guarded_loop(sch.mod)
    for config in ({}, ASYNC):  # MetaSchedule's build function, as its LocalBuilder runs it
        with tvm.transform.PassContext(config=config):
            _assert_safe(default_build(sch.mod, target, None))
    (result,) = ms.builder.LocalBuilder(max_workers=1, timeout_sec=600).build([ms.builder.BuilderInput(sch.mod, target)])
    assert result.error_msg is None and result.artifact_path
