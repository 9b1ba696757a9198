import os
import sys

import pytest

# The tests import their helpers (bruteforce, strategies) as top-level modules.
sys.path.insert(0, os.path.dirname(__file__))


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
