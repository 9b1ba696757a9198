"""The public paths that moved with the layout (docs/architecture.md) still import, as the same module objects
(so ``monkeypatch`` and private names work through them too), and what the README calls is there."""
import importlib

import pytest

#: old public path -> where the module lives now
MOVED = {"tvm_twill.dlight": "tvm_twill.integrations.dlight",
         "tvm_twill.metaschedule": "tvm_twill.integrations.metaschedule",
         "tvm_twill.cache": "tvm_twill.planner.cache"}


@pytest.mark.parametrize("old", list(MOVED))
def test_an_old_public_path_is_the_moved_module(old):
    if old != "tvm_twill.cache":
        pytest.importorskip("tvm")
    assert importlib.import_module(old) is importlib.import_module(MOVED[old])


def test_the_names_the_readme_uses_are_there():
    pytest.importorskip("tvm")
    import tvm_twill
    from tvm_twill.cache import SHARED, PlanCache  # noqa: F401
    from tvm_twill.dlight import AutoPipelined  # noqa: F401
    from tvm_twill.metaschedule import TwillPipeline, sample_candidates, tune_context  # noqa: F401
    from tvm_twill.workloads import tensorcore_gemm, wgmma_gemm  # noqa: F401
    for name in ("auto_pipeline", "build", "build_checked", "evaluate_annotation", "plan_module", "solve",
                 "AutoPipelineOptions"):
        assert callable(getattr(tvm_twill, name))
    assert tvm_twill.dlight is importlib.import_module("tvm_twill.integrations.dlight")
