"""bench/predicted.record: the prediction ``gpu_suite.py prepare`` writes into a manifest (no TVM needed here:
a stand-in plan with a real ``Prediction`` and a built-in machine model)."""
import importlib.util
import sys
import types
from pathlib import Path

import pytest

from tvm_twill.model import get_machine
from tvm_twill.model.prediction import Prediction

ROOT = Path(__file__).resolve().parents[2]


def _record():
    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("predicted", ROOT / "bench" / "predicted.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.record


def _plan(tflops, ws=False):
    pred = Prediction(cycles_per_iteration=1000.0, ctas_per_sm=2, occupancy_limiter="registers",
                      flops_per_iteration=2.0e6, tflops_per_sm=tflops / 132, tflops=tflops, bound="L2",
                      peak_tflops=989.0)
    seen = {}

    def prediction(registers=None):
        seen["registers"] = registers
        return pred
    wsp = types.SimpleNamespace(chosen=True, ii_ws_cycles=640) if ws else None
    plan = types.SimpleNamespace(prediction=prediction, warp_specialization=wsp, applied=True, ii_cycles=512,
                                 extraction=types.SimpleNamespace(machine=get_machine("h100")))
    return plan, seen


def test_record_carries_the_prediction_the_machine_and_the_plans_ii():
    plan, seen = _plan(300.0, ws=True)
    r = _record()(plan, 168)
    assert seen == {"registers": 168}  # ptxas's count reaches the occupancy term
    assert (r["tflops"], r["bound"], r["machine"], r["registers"]) == (300.0, "L2", "h100", 168)
    assert r["ii_cycles"] == 640 and r["flops_per_iteration"] == 2.0e6  # a WS plan: the specialized ii
    assert "cuda_core_peak_tflops" not in r and "note" not in r


@pytest.mark.parametrize("tflops,noted", [(300.0, True), (40.0, False)])
def test_a_simt_kernel_predicted_above_the_cuda_cores_is_noted(tflops, noted):
    plan, _ = _plan(tflops)
    r = _record()(plan, None, tensor_cores=False)
    assert r["cuda_core_peak_tflops"] == 61.8  # 2 x 128 FMA x 132 SMs x 1.83 GHz
    assert r["ii_cycles"] == 512
    assert ("note" in r) is noted
    if noted:
        assert "above the 62 TFLOPS of the CUDA cores" in r["note"]
