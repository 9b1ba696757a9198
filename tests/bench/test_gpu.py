"""GPU checks (marker ``gpu``: skipped unless an NVIDIA GPU answers ``nvidia-smi -L``).

The same command a GPU session runs first, ``bench/gpu_suite.py``, on a
machine that has TVM and a GPU: every kernel compiled here must match torch
and numpy on the device.
"""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.gpu
@pytest.mark.slow
def test_gpu_suite_numerics(tmp_path):
    pytest.importorskip("tvm")
    pytest.importorskip("torch")
    suite = [sys.executable, str(ROOT / "bench" / "gpu_suite.py")]
    assert subprocess.run(suite + ["prepare", str(tmp_path / "k")]).returncode == 0
    assert subprocess.run(suite + ["run", str(tmp_path / "k"), "--results", str(tmp_path / "r")]).returncode == 0
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["gpu_attention_sm_80.json", "gpu_attention_sm_90a.json",
                                                                 "gpu_gemm_sm_80.json", "gpu_gemm_sm_90a.json"]
