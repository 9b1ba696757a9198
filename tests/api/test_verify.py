"""``PipelinePlan.check_on_cpu``: the original and the planned loop, run through llvm, compared."""
import dataclasses

import pytest

pytest.importorskip("tvm")
import tvm  # noqa: E402
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

import tir_gen  # noqa: E402
import tvm_twill  # noqa: E402
from tir_loops import param_scratch  # noqa: E402
from tvm_twill.errors import UnsupportedLoopError  # noqa: E402
from tvm_twill.frontend import costs as fe_costs  # noqa: E402
from tvm_twill.model.pipeline import PipelineAnnotation  # noqa: E402


@settings(derandomize=True, deadline=None, max_examples=12,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(spec=tir_gen.copy_loop_specs(), latency=st.sampled_from([16, 96, 400]))
def test_plans_of_thread_bound_copy_loops_check_on_the_cpu(spec, latency, monkeypatch):
    monkeypatch.setattr(fe_costs, "DRAM_LATENCY_CYCLES", latency)
    sch = tvm.s_tir.Schedule(tvm.script.from_source(tir_gen.build_copy_loop(spec)))
    plan = tvm_twill.auto_pipeline(sch, "i", "sm_80")
    result = plan.check_on_cpu()
    assert result.ok, str(result)
    assert result.parameters[-1] == "C" and result.elements == sum(
        spec.threads * spec.trip * w for w in spec.widths) + spec.threads * spec.trip * min(spec.widths)
    assert str(result).startswith(f"check_on_cpu: loop 'i' planned and original agree on all {result.elements}")


def test_a_wrong_annotation_is_caught():
    """TVM does not version the parameter S: running the load a stage ahead of its use overwrites it too early."""
    sch = tvm.s_tir.Schedule(param_scratch)
    plan = tvm_twill.auto_pipeline(sch, "i", "sm_80", apply=False)
    assert plan.check_on_cpu().ok
    broken = dataclasses.replace(plan, annotation=PipelineAnnotation((0, 1), (0, 1)))
    result = broken.check_on_cpu()
    assert not result.ok and set(result.mismatches) == {"C"} and "DIFFER" in str(result)


def test_nested_and_gpu_only_loops_are_refused_in_one_line():
    from tvm_twill.workloads import tensorcore_gemm
    sch, k0, k1 = tensorcore_gemm(256)
    plan = tvm_twill.auto_pipeline(sch, [k0, k1], "sm_80")
    with pytest.raises(UnsupportedLoopError, match=r"^check_on_cpu: the original function uses (T\.\w+|scope=\"\w+\"), which runs "
                                                    r"only on a GPU: check a CPU-runnable instance"):
        plan.check_on_cpu()


def test_the_readme_documents_it():
    import pathlib
    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "plan.check_on_cpu()" in readme
