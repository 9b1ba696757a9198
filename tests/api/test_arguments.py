"""Bad arguments to the TVM entry points (``auto_pipeline``, ``evaluate_annotation``, ``plan_module``, ``build``)
are one typed line (InputError) naming what is wrong and what to pass, raised before any work; ``time_limit=None``
means no limit (``tvm_twill.planner.arguments``)."""
import math

import pytest

tvm = pytest.importorskip("tvm")

import tvm_twill  # noqa: E402
from tvm_twill import AutoPipelineOptions, InputError  # noqa: E402
from tir_loops import param_scratch  # noqa: E402


def _sch():
    return tvm.s_tir.Schedule(param_scratch)


def _module():
    return tvm.IRModule({"main": param_scratch})


BAD = [  # (call, what the one line must say)
    (lambda: tvm_twill.auto_pipeline(_sch(), "i", "sm_80", time_limit="5"), r"time_limit must be a number of seconds"),
    (lambda: tvm_twill.auto_pipeline(_sch(), "i", "sm_80", time_limit=float("nan")), r"time_limit must be a number"),
    (lambda: tvm_twill.auto_pipeline(_sch(), "i", "sm_80", cache=3), r"cache must be a tvm_twill.planner.cache.PlanCache"),
    (lambda: tvm_twill.auto_pipeline(_sch(), "i", "sm_80", apply="yes"), r"apply must be True or False, got 'yes'"),
    (lambda: tvm_twill.auto_pipeline(_sch(), "i", "sm_80", verify=None), r"verify must be True or False"),
    (lambda: tvm_twill.auto_pipeline(_sch(), "i", "sm_80", quiet=1), r"quiet must be True or False"),
    (lambda: tvm_twill.auto_pipeline(_sch(), "i", "sm_80", quantum="4"), r"quantum must be an integer >= 1"),
    (lambda: tvm_twill.auto_pipeline(_sch(), "i", "sm_80", machine=3), r"machine must be a tvm_twill.Machine or a "
                                                                         r"built-in machine name"),
    (lambda: tvm_twill.auto_pipeline(_sch(), "i", "sm_80", {"time_limit": 5}),
     r"options must be a tvm_twill.AutoPipelineOptions \(or None\), got dict: pass the options as keywords"),
    (lambda: tvm_twill.auto_pipeline(_module(), "i", "sm_80"),
     r"auto_pipeline takes a tvm.s_tir.Schedule, got IRModule \(wrap it: tvm.s_tir.Schedule\(mod\)\)"),
    (lambda: tvm_twill.auto_pipeline(param_scratch, "i", "sm_80"), r"takes a tvm.s_tir.Schedule, got PrimFunc"),
    (lambda: tvm_twill.auto_pipeline(_sch(), 3, "sm_80"), r"loop must be a LoopRV .* or a loop name, or a list"),
    (lambda: tvm_twill.auto_pipeline(_sch(), ["i", None], "sm_80"), r"loop must be a LoopRV .*got NoneType"),
    (lambda: tvm_twill.auto_pipeline(_sch(), "i", None), r"target must be a tvm.target.Target or an arch string"),
    (lambda: tvm_twill.evaluate_annotation(param_scratch, "i", "sm_80"), r"evaluate_annotation takes a tvm.s_tir"),
    (lambda: tvm_twill.evaluate_annotation(_sch(), ["i"], "sm_80"), r"loop must be a LoopRV \(sch.get_loops"),
    (lambda: tvm_twill.evaluate_annotation(_sch(), "i", "sm_80", quantum="4"), r"quantum must be an integer >= 1"),
    (lambda: tvm_twill.evaluate_annotation(_sch(), "i", "sm_80", machine=2.5), r"machine must be a tvm_twill.Machine"),
    (lambda: tvm_twill.plan_module(_module(), "sm_80", time_limit="5", max_workers=1), r"time_limit must be a number"),
    (lambda: tvm_twill.plan_module(_module(), "sm_80", cache=3, max_workers=1), r"cache must be a tvm_twill.planner.cache"),
    (lambda: tvm_twill.plan_module(_module(), "sm_80", 3, max_workers=1), r"options must be a tvm_twill.AutoPipeline"),
    (lambda: tvm_twill.build(_module(), "sm_80", 3), r"build takes a PipelinePlan or a list of them"),
    (lambda: AutoPipelineOptions(warp_specialize="yes"), r"warp_specialize must be False, True or 'auto'"),
]


@pytest.mark.parametrize("call, message", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_a_bad_argument_is_one_typed_line(call, message):
    with pytest.raises(InputError, match=message) as err:
        call()
    assert "\n" not in str(err.value)


def test_the_schedule_is_untouched_when_an_option_is_refused():
    sch = _sch()
    before = sch.mod
    with pytest.raises(InputError):
        tvm_twill.auto_pipeline(sch, "i", "sm_80", cache=3)
    assert sch.mod.same_as(before)


def test_time_limit_none_is_no_limit():
    plan = tvm_twill.auto_pipeline(_sch(), "i", "sm_80", time_limit=None, apply=False, quiet=True)
    assert plan.options.time_limit == math.inf and AutoPipelineOptions(time_limit=None).time_limit == math.inf
    assert plan.schedule.optimal
    assert plan.schedule.ii == tvm_twill.auto_pipeline(_sch(), "i", "sm_80", apply=False, quiet=True).schedule.ii
    snippet = plan.reproduce()
    assert "time_limit=float('inf')" in snippet
    scope = {}
    exec(snippet.replace("print(", "(lambda *a: None)("), scope)  # noqa: S102 - our own snippet
    assert scope["schedule"].ii == plan.schedule.ii
