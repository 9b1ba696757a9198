"""Shared test setup.

Layers: every test module that needs TVM says so with ``pytest.importorskip("tvm")``
(at module level, or in a fixture), so without TVM the suite still runs every
model, solver, CLI and annotation test.  Markers (declared in pyproject.toml):

* ``slow``: deselected unless ``--slow`` is given (or ``TVM_TWILL_SLOW=1``): the
  large randomized runs (thousands of differential / fuzz cases);
* ``gpu``: skipped unless an NVIDIA GPU answers ``nvidia-smi -L``.
"""
import os
import shutil
import subprocess
import sys

import pytest

# The tests import their helpers (bruteforce, strategies) as top-level modules.
sys.path.insert(0, os.path.dirname(__file__))


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run tests marked slow (large randomized runs)")


def _have_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def pytest_collection_modifyitems(config, items):
    run_slow = config.getoption("--slow") or os.environ.get("TVM_TWILL_SLOW") == "1"
    gpu = None
    for item in items:
        if "slow" in item.keywords and not run_slow:
            item.add_marker(pytest.mark.skip(reason="slow: run with --slow (or TVM_TWILL_SLOW=1)"))
        if "gpu" in item.keywords:
            gpu = _have_gpu() if gpu is None else gpu
            if not gpu:
                item.add_marker(pytest.mark.skip(reason="gpu: no NVIDIA GPU here (nvidia-smi -L fails)"))


# --- TVM's tensor-core GEMM loops, for the front-end and API tests ------------
# TVM is imported lazily so that the pure-model tests run without it.


@pytest.fixture(scope="session")
def mma_gemm():
    """Factory: ``mma_gemm()`` -> a fresh (sch, k0, k1); ``mma_gemm("simple"|"nested")`` also
    applies TVM's hand annotation of that test."""
    pytest.importorskip("tvm")

    from tvm_twill.workloads import tensorcore_gemm

    def make(hand: str | None = None):
        return tensorcore_gemm(4096, hand=hand)

    return make
