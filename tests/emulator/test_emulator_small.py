"""Small kernels TVM builds (an elementwise kernel, a cross-thread row reduction) run on the emulator against
numpy, over several interleavings, with no findings."""
import shutil

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
if shutil.which("nvcc") is None:
    pytest.skip("nvcc not installed", allow_module_level=True)

from emulator.tvm_kernels import elementwise, launch_for, ptx_of, row_sum

from tvm_twill import emulator as E


def test_elementwise_matches_numpy():
    mod, src = elementwise(1024)
    ptx = ptx_of(src, "sm_80")
    a = np.linspace(-4, 4, 1024).astype(np.float32)
    b = np.zeros_like(a)
    report = E.run_ptx(ptx, [launch_for(mod, 2, dyn_smem=0)], a, b, interleavings=2)
    assert report.ok, str(report)
    np.testing.assert_allclose(b, np.exp(a.astype(np.float64)) * 0.5 + a, rtol=2e-6, atol=1e-7)


def test_row_sum_reduction_matches_numpy():
    mod, src = row_sum(4, 512)
    ptx = ptx_of(src, "sm_80")
    assert "shfl.sync" in ptx and "bar.sync" in ptx
    a = np.random.default_rng(3).uniform(-1, 1, (4, 512)).astype(np.float32)
    c = np.zeros(4, np.float32)
    report = E.run_ptx(ptx, [launch_for(mod, 2, dyn_smem=0)], a, c, interleavings=3)
    assert report.ok, str(report)
    np.testing.assert_allclose(c, a.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
