"""``bench/gpu_suite.py emulate DIR``: the GPU suite's numerics on the CPU emulator, from a prepared folder
(manifest.json + CUDA sources, as ``gpu_suite.py prepare`` writes them), with no GPU.

A small folder is prepared here (256^3 instead of the suite's 4096^3): the software-pipelined sm_80 GEMM,
the same kernel with its steady-state cp.async wait removed (a planted bug), and on sm_90a the
warp-specialized wgmma GEMM (TMA into swizzled rings: the tensor maps come from the manifest).
"""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

tvm = pytest.importorskip("tvm")
if shutil.which("nvcc") is None:
    pytest.skip("nvcc not installed", allow_module_level=True)

import tvm_twill

ROOT = Path(__file__).resolve().parents[2]
N = 256


def _variant(d: Path, name, sch, arch, pipeline, maps=(), src=None, b_transposed=False):
    from tvm_twill.frontend import compile_cuda, kernel_info
    _, built = compile_cuda(sch, arch, tir_pipeline=pipeline)
    src = src(built) if src else built
    info = kernel_info(sch, arch, tir_pipeline=pipeline)
    sig = re.search(r'extern "C" __global__ void (?:__launch_bounds__\([\d, ]+\) )?(\w+)\(([^)]*)\)', src)
    (d / f"{name}.cu").write_text(src)
    return {"name": name, "cu": f"{name}.cu", "kernel": sig.group(1), "grid": list(info.grid),
            "block": list(info.block), "dyn_smem": info.dyn_smem,
            "args": [p.split()[-1].removesuffix("_ptr") for p in sig.group(2).split(",")],
            "b_transposed": b_transposed, "tensor_maps": list(maps)}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    from tvm_twill.workloads import tensorcore_gemm, wgmma_gemm
    root = tmp_path_factory.mktemp("kernels")
    sch, k0, k1 = tensorcore_gemm(N)
    plan = tvm_twill.auto_pipeline(sch, [k0, k1], "sm_80")
    d80 = root / "sm_80"
    d80.mkdir()
    dropped = '  asm volatile("cp.async.wait_group 2;" :  :  : "memory");\n'
    good = _variant(d80, "auto_nested", sch, "sm_80", None)
    bad = _variant(d80, "auto_nested_wait_removed", sch, "sm_80", None,
                   src=lambda s: s.replace(dropped, "", 1) if dropped in s else pytest.fail("no wait to drop"))
    (d80 / "manifest.json").write_text(json.dumps({"M": N, "N": N, "K": N, "arch": "sm_80",
                                                  "variants": [good, bad]}))
    sch, k0, _ = wgmma_gemm(N)
    plan = tvm_twill.auto_pipeline(sch, k0, "sm_90a", warp_specialize=True)
    maps = [m.to_json() for m in plan.warp_specialization.facts.tensor_maps]
    assert maps
    d90 = root / "sm_90a"
    d90.mkdir()
    ws = _variant(d90, "wgmma_ws", sch, "sm_90a", plan.tir_pipeline, maps, b_transposed=True)
    (d90 / "manifest.json").write_text(json.dumps({"M": N, "N": N, "K": N, "arch": "sm_90a", "variants": [ws]}))
    return root


def _suite(*args):
    return subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_suite.py"), "emulate", *map(str, args)],
                          check=False, capture_output=True, text=True, cwd=ROOT, timeout=600)


def test_emulate_runs_the_prepared_kernels_against_numpy(prepared, tmp_path):
    r = _suite(prepared, "--blocks", "0,0,0", "0,1,0", "--save", "--results", tmp_path)
    rows = {line.split()[1]: line.split()[2] for line in r.stdout.splitlines() if line.startswith("sm_")}
    assert rows == {"auto_nested": "ok", "auto_nested_wait_removed": "wrong", "wgmma_ws": "ok"}, r.stdout + r.stderr
    assert r.returncode == 1            # a kernel is wrong
    doc = json.loads((tmp_path / "emulated_gemm_sm_80.json").read_text())
    good, bad = doc["results"]
    assert good["correct"] and not good["findings"] and good["max_rel_err"] < 1e-3
    assert good["elements_written"] == 2 * 128 * 128
    assert bad["findings"] or not bad["correct"]
    ws = json.loads((tmp_path / "emulated_gemm_sm_90a.json").read_text())["results"][0]
    assert ws["correct"] and not ws["findings"] and ws["elements_written"] > 0


def test_emulate_writes_results_only_when_asked(prepared, tmp_path):
    r = _suite(prepared, "--variant", "auto_nested", "--results", tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "sm_80 auto_nested" in r.stdout and not list(tmp_path.iterdir())


def test_emulate_without_a_prepared_folder_says_what_to_do(tmp_path):
    r = _suite(tmp_path)
    assert r.returncode == 2 and "run `gpu_suite.py prepare" in r.stderr
