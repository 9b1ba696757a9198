"""Small kernels TVM builds (an elementwise kernel, a cross-thread row reduction) run on the emulator against
numpy, over several interleavings, with no findings."""
import shutil

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
if shutil.which("nvcc") is None:
    pytest.skip("nvcc not installed", allow_module_level=True)

from emulator.tvm_kernels import elementwise, row_sum

from tvm_twill import emulator as E


def test_elementwise_matches_numpy():
    _, f = elementwise(1024)
    a = np.linspace(-4, 4, 1024).astype(np.float32)
    b = np.zeros_like(a)
    report = E.run(f, a, b, interleavings=2)
    assert report.ok, str(report)
    np.testing.assert_allclose(b, np.exp(a.astype(np.float64)) * 0.5 + a, rtol=2e-6, atol=1e-7)


def test_row_sum_reduction_matches_numpy():
    _, f = row_sum(4, 512)
    src = f.mod.imports[0].inspect_source()
    assert "__shfl" in src and "__syncthreads" in src
    a = np.random.default_rng(3).uniform(-1, 1, (4, 512)).astype(np.float32)
    c = np.zeros(4, np.float32)
    report = E.run(f, a, c, interleavings=3)
    assert report.ok, str(report)
    np.testing.assert_allclose(c, a.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
