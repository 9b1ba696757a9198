"""The GPU suite's attention part without a GPU: ``bench/attention_gpu.export`` (what ``gpu_suite.py prepare``
writes for the attention kernels) and ``gpu_suite.py emulate`` on it.

A small folder is prepared (one head, 128 queries: two CTAs) with the software-pipelined SIMT kernel, the
pipelined tensor-core kernel (causal) and, as a planted bug, the tensor-core kernel with its cp.async
waits removed (the SIMT kernel is ALU-bound on the model: its plan keeps the loads synchronous).  The manifest records the kernel parameters in PTX order with the KV length as ``"n"``, the
unpipelined baseline and the model's prediction; the emulator runs both CTAs of each at a ragged KV length
against numpy: the two kernels are right with no finding, the planted bug is caught.
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

from tvm_twill.model.throughput import BOUNDS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = ("simt_swp_d64", "tc_swp_d64_causal")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    sys.path.insert(0, str(ROOT / "bench"))
    import attention_gpu
    root = tmp_path_factory.mktemp("kernels")
    kdir = root / "sm_80" / "attention"
    assert attention_gpu.export(kdir, "sm_80", 30, heads=1, q_len=128, only=set(VARIANTS)) == 0
    man = json.loads((kdir / "manifest.json").read_text())
    good = next(v for v in man["variants"] if v["name"] == "tc_swp_d64_causal")
    src = (kdir / good["cu"]).read_text()
    broken = re.sub(r"cp\.async\.wait_group \d+;", "", src)
    assert broken != src
    (kdir / "broken.cu").write_text(broken)
    man["variants"].append({**good, "name": "tc_swp_d64_causal_wait_removed", "cu": "broken.cu"})
    (kdir / "manifest.json").write_text(json.dumps(man))
    return root, man


def test_the_manifest_carries_n_the_baseline_and_the_prediction(prepared):
    _, man = prepared
    assert man["kind"] == "attention" and man["arch"] == "sm_80" and man["heads"] == 1 and man["q_len"] == 128
    assert [c["n"] for c in man["cases"]] == [2048, 2021, 5, 0]
    assert any(c["n"] % 32 for c in man["cases"] if c["timed"])  # a ragged timed length
    for v in man["variants"][:2]:
        assert v["grid"] == [2, 1, 1] and v["block_n"] == 32 and v["block_m"] == 64
        bufs = [p["arg"] for p in v["params"] if p["kind"] == "buffer"]
        scalars = [p for p in v["params"] if p["kind"] == "scalar"]
        assert sorted(bufs) == ["K", "O", "Q", "V"] and scalars == [{"kind": "scalar", "type": "s32", "value": "n"}]
        assert v["baseline"] == v["name"].replace("_swp_", "_plain_")
        p = v["prediction"]
        # (two CTAs of the SIMT kernel on the CUDA cores: under 0.05 TFLOPS, recorded rounded as 0.0)
        assert p["machine"] == "a100" and p["bound"] in BOUNDS and 0 <= p["tflops"] <= p["peak_tflops"]
        assert p["flops_per_iteration"] > 0 and p["ii_cycles"] > 0 and p["registers"] > 0
        assert v["annotation"]  # the plan's stages, as applied
    simt, tc = man["variants"][:2]
    assert tc["family"] == "tc" and tc["causal"] and simt["family"] == "simt" and not simt["causal"]
    assert tc["block"] == [32, 2, 1] and simt["block"] == [64, 1, 1]
    # the SIMT kernel runs its FLOP on the CUDA cores: their peak (2 x 64 FMA x 108 SMs x 1.41 GHz) is recorded
    assert simt["prediction"]["cuda_core_peak_tflops"] == 19.5 and "cuda_core_peak_tflops" not in tc["prediction"]
    # and its prediction stays under that peak: its FMA loops are costed on the CUDA cores (no note)
    assert simt["prediction"]["tflops"] <= 19.5 and "note" not in simt["prediction"]
    assert tc["prediction"]["tflops"] > 0


def test_emulate_runs_the_attention_kernels_and_catches_the_planted_bug(prepared, tmp_path):
    root, _ = prepared
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_suite.py"), "emulate", str(root), "--blocks",
                        "0,0,0", "1,0,0", "--kv-len", "37", "0", "--save", "--results", str(tmp_path)],
                       check=False, capture_output=True, text=True, cwd=ROOT, timeout=900)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("sm_80 ")]
    assert len(lines) == 6 and all("predicted" in ln for ln in lines), r.stdout + r.stderr
    assert r.returncode == 1
    doc = json.loads((tmp_path / "emulated_attention_sm_80.json").read_text())
    res = {(x["variant"], x["n"]): x for x in doc["results"]}
    assert {k: x["status"] for k, x in res.items() if k[1] == 37} == {
        ("simt_swp_d64", 37): "ok", ("tc_swp_d64_causal", 37): "ok", ("tc_swp_d64_causal_wait_removed", 37): "wrong"}
    for name in VARIANTS:
        for n in (37, 0):  # n = 0: no KV tile, every row written as zeros
            assert res[name, n]["status"] == "ok" and res[name, n]["findings"] == []
            assert res[name, n]["max_abs_err"] < 2e-2 and res[name, n]["blocks"] == [[0, 0, 0], [1, 0, 0]]
            assert res[name, n]["prediction"]["tflops"] >= 0 and res[name, n]["prediction"]["ii_cycles"] > 0
    bad = res["tc_swp_d64_causal_wait_removed", 37]
    assert bad["findings"] and any("AsyncReadBeforeWait" in f or "wait" in f.lower() for f in bad["findings"])


def test_the_sm90a_suite_prepares_and_emulates_the_warp_specialized_wgmma_attention(tmp_path):
    """sm_90a's wgmma variants: FA3's two consumer warp groups with the look-ahead turn (its plan recorded),
    timed against the unpipelined wgmma kernel, and right on the emulator (one CTA of 128 query rows) at a
    ragged KV length and at none."""
    sys.path.insert(0, str(ROOT / "bench"))
    import attention_gpu
    names = {s["name"] for s in attention_gpu.variant_specs("sm_90a")}
    assert {"wgmma_plain_d128_causal", "wgmma_ws_d128_causal", "wgmma_ws_d64"} <= names
    assert not any(n.startswith("wgmma_") for n in (s["name"] for s in attention_gpu.variant_specs("sm_80")))
    root = tmp_path / "kernels"
    kdir = root / "sm_90a" / "attention"
    assert attention_gpu.export(kdir, "sm_90a", 30, heads=1, q_len=128, only={"wgmma_ws_d64"}) == 0
    (v,) = json.loads((kdir / "manifest.json").read_text())["variants"]
    assert v["baseline"] == "wgmma_plain_d64" and v["block_m"] == 128 and v["block_n"] == 32
    assert v["grid"] == [1, 1, 1] and v["prediction"]["machine"] == "h100"
    src = (kdir / v["cu"]).read_text()
    assert "if (1 <= ws_k)" in src and "wgmma" in src and "ws_full" in src      # the look-ahead turn
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_suite.py"), "emulate", str(root), "--blocks",
                        "0,0,0", "--kv-len", "37", "0", "--save", "--results", str(tmp_path)],
                       check=False, capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads((tmp_path / "emulated_attention_sm_90a.json").read_text())
    for x in doc["results"]:
        assert x["status"] == "ok" and x["findings"] == [] and x["max_abs_err"] < 2e-2, x
    assert sorted(x["n"] for x in doc["results"]) == [0, 37]
