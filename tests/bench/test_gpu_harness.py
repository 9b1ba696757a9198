"""The GPU half of the GEMM benchmark (bench/gpu_gemm_run.py) without a GPU: its tensor-map launcher against
a fake driver, and its process isolation, incremental results and "not run" verdicts.

No GPU here: ``cuda.bindings.driver`` is replaced by a recorder, so the test
checks what the launcher would ask the driver for: one ``cuTensorMapEncodeTiled``
per tensor map with the manifest's dimensions, strides and box on the right
tensor, and one ``cuLaunchKernel`` whose parameters are the encoded maps and
the pointers, in the kernel's parameter order.
"""
from __future__ import annotations

import ctypes
import enum
import importlib.util
import json
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load_runner():
    spec = importlib.util.spec_from_file_location("gpu_gemm_run", ROOT / "bench" / "gpu_gemm_run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fake_driver(calls):
    d = types.SimpleNamespace()
    d.CUresult = enum.IntEnum("CUresult", {"CUDA_SUCCESS": 0, "CUDA_ERROR": 1}, start=0)
    d.CUtensorMapDataType = enum.IntEnum("T", {"CU_TENSOR_MAP_DATA_TYPE_FLOAT16": 6,
                                               "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16": 9,
                                               "CU_TENSOR_MAP_DATA_TYPE_FLOAT32": 7})
    d.CUtensorMapInterleave = enum.IntEnum("I", {"CU_TENSOR_MAP_INTERLEAVE_NONE": 0}, start=0)
    d.CUtensorMapSwizzle = enum.IntEnum("S", {"NONE": 0, "B32": 1, "B64": 2, "B128": 3}, start=0)
    d.CUtensorMapL2promotion = enum.IntEnum("L", {"CU_TENSOR_MAP_L2_PROMOTION_NONE": 0}, start=0)
    d.CUtensorMapFloatOOBfill = enum.IntEnum("O", {"CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE": 0}, start=0)
    d.CUfunction_attribute = enum.IntEnum("F", {"CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES": 8})
    d.cuuint64_t = d.cuuint32_t = int
    d.CUstream = lambda h: ("stream", h)
    ok = d.CUresult.CUDA_SUCCESS

    def record(name, result):
        def fn(*args):
            calls.append((name, args))
            return (ok, result) if result is not None else (ok,)
        return fn

    d.cuModuleLoadData = record("load", "module")
    d.cuModuleGetFunction = record("function", "fn")
    d.cuFuncSetAttribute = record("attribute", None)
    encoded = iter(range(100))
    d.cuTensorMapEncodeTiled = lambda *a: (calls.append(("encode", a)) or (ok, f"tmap{next(encoded)}"))
    d.cuLaunchKernel = record("launch", None)
    return d


class _Tensor:
    def __init__(self, ptr):
        self.ptr = ptr

    def data_ptr(self):
        return self.ptr


def test_tensor_map_kernel_is_encoded_and_launched_in_parameter_order(tmp_path, monkeypatch):
    calls = []
    drv = _fake_driver(calls)
    cuda = types.ModuleType("cuda")
    bindings = types.ModuleType("cuda.bindings")
    bindings.driver = drv
    cuda.bindings = bindings
    monkeypatch.setitem(sys.modules, "cuda", cuda)
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", drv)
    torch = types.SimpleNamespace(cuda=types.SimpleNamespace(
        current_stream=lambda: types.SimpleNamespace(cuda_stream=42)))
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(b"cubin")
    maps = [{"param": "A_tmap0", "buffer": "A", "dtype": "float16", "rank": 3, "global_dims": [8, 4096, 512],
             "global_strides": [8192, 16], "box": [8, 64, 8], "element_strides": [1, 1, 1], "swizzle": 0},
            {"param": "B_tmap1", "buffer": "B", "dtype": "float16", "rank": 3, "global_dims": [8, 4096, 512],
             "global_strides": [8192, 16], "box": [8, 128, 8], "element_strides": [1, 1, 1], "swizzle": 0}]
    v = {"name": "wgmma_ws", "kernel": "main_kernel", "args": ["A_tmap0", "B_tmap1", "C"], "grid": [32, 64, 1],
         "block": [256, 1, 1], "dyn_smem": 147456, "tensor_maps": maps}
    bufs = {"A": _Tensor(1000), "B": _Tensor(2000), "C": _Tensor(3000)}
    launch = _load_runner().driver_launcher(cubin, v, bufs, torch)
    launch()
    encodes = [a for n, a in calls if n == "encode"]
    assert [e[2] for e in encodes] == [1000, 2000]  # A's map on A, B's on B
    assert encodes[0][1] == 3 and encodes[0][3] == [8, 4096, 512] and encodes[0][4] == [8192, 16]
    assert encodes[1][5] == [8, 128, 8] and encodes[1][6] == [1, 1, 1] and int(encodes[1][8]) == 0
    assert ("attribute", ("fn", drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                          147456)) in calls
    (_, launch_args), = [c for c in calls if c[0] == "launch"]
    fn, gx, gy, gz, bx, by, bz, smem, stream, (values, kinds), extra = launch_args
    assert (gx, gy, gz, bx, by, bz, smem) == (32, 64, 1, 256, 1, 1, 147456) and stream == ("stream", 42)
    assert values == ("tmap0", "tmap1", 3000) and kinds[:2] == (None, None) and kinds[2] is not None


# --- process isolation, results as they come, "not run" ---------------------------------------------------

_CHILD = r"""
import json, os, sys, time
name, out, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
if name == "hang":
    time.sleep(120)
if name == "crash":
    os.abort()
seen = [r["status"] for r in json.load(open(out))["results"]] if os.path.exists(out) else []
print("some output first")
print(prefix + json.dumps({"variant": name, "status": "ok", "ms": 1.0, "tflops": 2.0, "device": "FakeGPU",
                           "arch": "sm_90a", "seen": seen}))
"""


def _manifest(tmp_path, names, tensor_maps=()):
    kdir = tmp_path / "kernels"
    kdir.mkdir()
    man = {"M": 64, "N": 64, "K": 64, "commit": "abc", "variants": [
        {"name": n, "cu": f"{n}.cu", "kernel": "main_kernel", "args": ["A", "B", "C"], "grid": [1, 1, 1],
         "block": [128, 1, 1], "dyn_smem": 0, "tensor_maps": list(tensor_maps) if n == "tma" else []}
        for n in names]}
    (kdir / "manifest.json").write_text(json.dumps(man))
    return kdir, man


def test_each_variant_runs_in_its_own_process_with_a_timeout_and_results_are_written_as_they_come(tmp_path,
                                                                                                  monkeypatch):
    runner = _load_runner()
    kdir, _ = _manifest(tmp_path, ["good", "hang", "crash", "after"])
    out = tmp_path / "res.json"
    monkeypatch.setattr(runner, "child_command",
                        lambda kdir, name, args: [sys.executable, "-c", _CHILD, name, str(out), runner.RESULT])
    rc = runner.main([str(kdir), "--out", str(out), "--timeout", "5"])
    doc = json.loads(out.read_text())
    res = {r["variant"]: r for r in doc["results"]}
    assert [r["variant"] for r in doc["results"]] == ["good", "hang", "crash", "after", runner.BASELINE]
    assert res["good"]["status"] == "ok" and res["after"]["status"] == "ok"
    assert res["hang"]["status"] == "timeout" and "within 5 s" in res["hang"]["error"]
    assert res["crash"]["status"] == "crashed" and "exit status" in res["crash"]["error"]
    assert res["after"]["seen"] == ["ok", "timeout", "crashed"]  # the file held the earlier results already
    assert doc["device"] == "FakeGPU" and rc == 1  # a timeout and a crash fail the run; the others still ran


def test_a_missing_module_is_reported_as_not_run_not_wrong(tmp_path, monkeypatch):
    runner = _load_runner()
    kdir, man = _manifest(tmp_path, ["plain", "tma"], tensor_maps=[{"param": "A_tmap0"}])
    fake_torch = types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: True))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", None)
    assert "cupy" not in runner._modules(man["variants"][0])  # optional: plain kernels launch by ctypes then
    tma = runner.run_variant(kdir, man, "tma", 1, 1)  # tensor maps need the driver bindings, not CuPy
    assert tma["status"] == "not run" and tma["error"] == ("missing module cuda.bindings.driver "
                                                           "(pip install cuda-python)")
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=types.SimpleNamespace(
        is_available=lambda: False)))
    assert runner.run_variant(kdir, man, "plain", 1, 1)["status"] == "not run"  # no GPU: not a verdict either


def test_without_gpu_packages_every_variant_is_not_run(tmp_path):
    """Real processes: here (no GPU, and torch/CuPy at most without CUDA) nothing runs and nothing is wrong."""
    runner = _load_runner()
    kdir, _ = _manifest(tmp_path, ["plain"])
    out = tmp_path / "res.json"
    assert runner.main([str(kdir), "--out", str(out), "--timeout", "120"]) == 2
    doc = json.loads(out.read_text())
    assert [r["status"] for r in doc["results"]] == ["not run", "not run"]
    assert all("correct" not in r for r in doc["results"])


def test_without_cupy_a_plain_kernel_launches_through_the_driver_by_ctypes(tmp_path, monkeypatch):
    """The GPU machine may lack CuPy: the launcher then loads the cubin with bench/cuda_driver.py and passes
    the buffers' pointers in the kernel's argument order."""
    runner = _load_runner()
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import cuda_driver
    made = []

    class FakeLauncher:
        def __init__(self, cubin, kernel, grid, block, smem):
            made.append((cubin, kernel, grid, block, smem))

        def __call__(self, packed, stream=0):
            made.append(([ctypes.cast(packed.array[i], ctypes.POINTER(ctypes.c_uint64)).contents.value
                          for i in range(len(packed.array))], stream))

    monkeypatch.setattr(cuda_driver, "Launcher", FakeLauncher)
    torch = types.SimpleNamespace(cuda=types.SimpleNamespace(
        current_stream=lambda: types.SimpleNamespace(cuda_stream=42)))
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(b"cubin")
    v = {"name": "auto_nested", "kernel": "main_kernel", "args": ["B", "A", "C"], "grid": [16, 64, 1],
         "block": [32, 4, 1], "dyn_smem": 65536}
    launch = runner.launcher(cubin, v, {"A": _Tensor(1000), "B": _Tensor(2000), "C": _Tensor(3000)}, torch, None)
    launch()
    assert made == [(b"cubin", "main_kernel", [16, 64, 1], [32, 4, 1], 65536), ([2000, 1000, 3000], 42)]
