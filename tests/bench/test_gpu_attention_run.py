"""The GPU half of the attention checks (bench/gpu_attention_run.py, bench/cuda_driver.py) without a GPU.

What runs without one: the kernel-parameter array ``cuLaunchKernel`` gets (read back byte for byte), the
reference's conventions (SDPA called as the runner calls it, on a numpy stand-in with torch's documented
semantics, against ``tvm_twill.kernels.attention_reference``), the FLOP counts and the predicted-vs-measured
error, the speedup over the unpipelined kernel, and the time budget and "not run" verdicts of real processes.
"""
from __future__ import annotations

import ctypes
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from tvm_twill.kernels import attention_reference

ROOT = Path(__file__).resolve().parents[2]


def _load(name):
    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class NumpySDPA:
    """``torch.nn.functional.scaled_dot_product_attention`` as torch documents it, in numpy: default scale
    1/sqrt(d), ``is_causal`` the mask ``ones(L, S).tril(0)``."""

    @staticmethod
    def scaled_dot_product_attention(q, k, v, is_causal=False, scale=None):
        scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
        s = q @ np.swapaxes(k, -1, -2) * scale
        if is_causal:
            s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        return (p / p.sum(axis=-1, keepdims=True)) @ v


def test_parameters_are_packed_in_order_with_n_and_offsets():
    drv = _load("cuda_driver")
    params = [{"kind": "buffer", "arg": "K", "offset": 0}, {"kind": "buffer", "arg": "O", "offset": 64},
              {"kind": "buffer", "arg": "Q"}, {"kind": "scalar", "type": "s32", "value": "n"},
              {"kind": "scalar", "type": "u64", "value": 7}, {"kind": "scalar", "type": "f32", "value": 0.5}]
    packed = drv.pack_params(params, {"Q": 0x1000, "K": 0x2000, "O": 0x3000}, 2021)
    arr = packed.array
    assert len(arr) == 6
    ptr = [ctypes.cast(arr[i], ctypes.POINTER(ctypes.c_uint64)).contents.value for i in range(3)]
    assert ptr == [0x2000, 0x3000 + 64, 0x1000]
    assert ctypes.cast(arr[3], ctypes.POINTER(ctypes.c_int32)).contents.value == 2021
    assert ctypes.cast(arr[4], ctypes.POINTER(ctypes.c_uint64)).contents.value == 7
    assert ctypes.cast(arr[5], ctypes.POINTER(ctypes.c_float)).contents.value == 0.5


def test_packing_refuses_a_buffer_without_pointer_and_an_unknown_scalar_type():
    drv = _load("cuda_driver")
    with pytest.raises(KeyError, match="no device pointer for kernel argument 'V'"):
        drv.pack_params([{"kind": "buffer", "arg": "V"}], {"Q": 1}, 0)
    with pytest.raises(KeyError, match="scalar parameter type 'b8'"):
        drv.pack_params([{"kind": "scalar", "type": "b8", "value": 1}], {}, 0)


@pytest.mark.parametrize("q_len,n", [(8, 8), (8, 5), (5, 8), (8, 1), (8, 0)])
@pytest.mark.parametrize("causal", [False, True])
def test_reference_follows_the_kernels_conventions(q_len, n, causal):
    """Unscaled scores, top-left causal mask, zeros where a row sees no key: as attention_reference."""
    run = _load("gpu_attention_run")
    rng = np.random.default_rng(q_len * 10 + n)
    q = rng.standard_normal((2, q_len, 16)).astype(np.float32)
    k = rng.standard_normal((2, n, 16)).astype(np.float32)
    v = rng.standard_normal((2, n, 16)).astype(np.float32)
    got = run.reference(NumpySDPA, q, k, v, causal)
    assert got.shape == (2, q_len, 16)
    np.testing.assert_allclose(got, attention_reference(q, k, v, causal), atol=1e-5)


def test_flop_counts_and_predicted_against_measured():
    run = _load("gpu_attention_run")
    assert run.useful_flops(2, 4, 3, 8, False) == 4 * 2 * 12 * 8
    assert run.useful_flops(2, 4, 3, 8, True) == 4 * 2 * (1 + 2 + 3 + 3) * 8  # row r sees min(r + 1, n) keys
    v = {"grid": [4, 2, 1], "block_n": 32, "prediction": {"flops_per_iteration": 1000.0, "tflops": 30.0,
                                                          "bound": "L2"}}
    assert run.executed_flops(v, {}, 65) == 1000.0 * 3 * 8  # three KV tiles on each of 8 CTAs
    c = run.compare(v["prediction"], 20.0)
    assert c["error"] == pytest.approx(0.5) and c["bound"] == "L2" and c["predicted_tflops"] == 30.0
    assert run.compare(None, 20.0)["error"] is None


def test_speedup_over_the_unpipelined_kernel_is_per_kv_length():
    run = _load("gpu_attention_run")
    rows = [{"variant": "simt_plain_d64", "status": "ok", "baseline": None,
             "cases": [{"n": 2048, "ms": 6.0}, {"n": 5}]},
            {"variant": "simt_swp_d64", "status": "ok", "baseline": "simt_plain_d64",
             "cases": [{"n": 2048, "ms": 2.0}, {"n": 5}]},
            {"variant": "simt_ws_d64", "status": "wrong", "baseline": "simt_plain_d64",
             "cases": [{"n": 2048, "ms": 1.0}]}]
    run.relate(rows)
    assert rows[1]["cases"][0]["speedup_vs_unpipelined"] == pytest.approx(3.0)
    assert "speedup_vs_unpipelined" not in rows[1]["cases"][1]  # not timed
    assert "speedup_vs_unpipelined" not in rows[2]["cases"][0]  # a wrong kernel's time is no speedup


def _manifest(tmp_path):
    man = {"arch": "sm_80", "heads": 1, "q_len": 64, "cases": [{"n": 64, "timed": True}], "commit": "abc",
           "variants": [{"name": f"simt_{p}_d64", "cu": "k.cu", "kernel": "fa_forward_kernel", "grid": [1, 1, 1],
                         "block": [64, 1, 1], "dyn_smem": 0, "head_dim": 64, "causal": False, "block_n": 32,
                         "params": [{"kind": "buffer", "arg": "Q"}], "baseline": None}
                        for p in ("plain", "swp")]}
    (tmp_path / "manifest.json").write_text(json.dumps(man))
    return man


def test_without_a_gpu_every_variant_is_not_run(tmp_path):
    """Real processes, here: no torch with CUDA, so nothing runs and nothing is wrong (exit 2)."""
    run = _load("gpu_attention_run")
    _manifest(tmp_path)
    out = tmp_path / "res.json"
    try:
        import torch
        if torch.cuda.is_available():
            pytest.skip("a GPU is visible: the variants would run")
    except ImportError:
        pass
    assert run.main([str(tmp_path), "--out", str(out), "--timeout", "120"]) == 2
    doc = json.loads(out.read_text())
    assert [r["status"] for r in doc["results"]] == ["not run", "not run"]
    assert doc["command"].startswith("python bench/gpu_attention_run.py") and doc["commit"] == "abc"


def test_past_the_deadline_nothing_starts(tmp_path):
    run = _load("gpu_attention_run")
    _manifest(tmp_path)
    out = tmp_path / "res.json"
    assert run.main([str(tmp_path), "--out", str(out), "--deadline", "1"]) == 2  # 1970: long past
    doc = json.loads(out.read_text())
    assert {r["error"] for r in doc["results"]} == {"the suite's time budget is spent"}


@pytest.mark.parametrize("script", ["gpu_attention_run.py", "gpu_gemm_run.py", "cuda_driver.py", "common.py"])
def test_gpu_side_code_imports_neither_tvm_nor_tvm_twill(script):
    """What runs on the GPU machine (torch, nvcc, the driver; no TVM wheel) imports no TVM, at any depth."""
    import ast

    tree = ast.parse((ROOT / "bench" / script).read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert names and not [m for m in names if m.split(".")[0] in ("tvm", "tvm_twill", "tvm_ffi")]
    local = {m for m in names if (ROOT / "bench" / f"{m}.py").is_file()}
    assert local <= {"gpu_gemm_run", "cuda_driver", "common"}  # bench modules it loads: these files, checked too


def test_the_suite_runs_each_prepared_part_and_nothing_past_its_budget(tmp_path, capsys):
    suite = _load("gpu_suite")
    k = tmp_path / "k"
    for arch in suite.ARCHS:
        (k / arch / "attention").mkdir(parents=True)
        (k / arch / "manifest.json").write_text("{}")
        (k / arch / "attention" / "manifest.json").write_text("{}")
    steps = [(script, out.name) for script, _, out in suite._steps(k, tmp_path / "r")]
    assert steps == [("gpu_gemm_run.py", "gpu_gemm_sm_90a.json"), ("gpu_attention_run.py", "gpu_attention_sm_90a.json"),
                     ("gpu_gemm_run.py", "gpu_gemm_sm_80.json"), ("gpu_attention_run.py", "gpu_attention_sm_80.json")]
    assert suite.BUDGET_S < 20 * 60
    assert suite.run(k, tmp_path / "r", budget_s=0) == 0
    assert not (tmp_path / "r").exists()
    assert capsys.readouterr().err.count("budget is spent") == 4
