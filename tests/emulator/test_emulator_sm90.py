"""The warp-specialized sm_90a GEMM (TMA copies into a 128-byte-swizzled mbarrier ring, wgmma from shared
descriptors, elect.sync, setmaxnreg) on the emulator, from what ``tvm.compile`` returned: against numpy with
no finding, and planted bugs in its CUDA source caught.

workloads.wgmma_gemm(1024): a 6-deep ring and 16 trips of the k loop (at least twice the depth plus one),
two CTAs of the launch's grid emulated.
"""
import re
import shutil

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
if shutil.which("nvcc") is None:
    pytest.skip("nvcc not installed", allow_module_level=True)

from emulator.tvm_kernels import compile_module, gemm_inputs

import tvm_twill
from tvm_twill import emulator as E

N = 1024
CTAS = [(0, 0, 0), (1, 0, 0)]


@pytest.fixture(scope="module")
def ws90():
    from tvm_twill.workloads import wgmma_gemm
    sch, k0, _ = wgmma_gemm(N)
    plan = tvm_twill.auto_pipeline(sch, k0, "sm_90a", warp_specialize=True)
    f = compile_module(sch.mod, "sm_90a", plan.tir_pipeline, async_copy=True)
    return f, f.mod.imports[0].inspect_source()


def _emulate(f, src=None, interleavings=1):
    a, b, c = gemm_inputs(N)
    report = E.run(f, a, b, c, blocks=CTAS, interleavings=interleavings, source=src)
    ref = a.astype(np.float32) @ b.astype(np.float32).T
    done = c != 0
    ok = done.sum() == len(CTAS) * 64 * 128 and float(np.abs(c - ref)[done].max()) < 1e-3
    return report, ok


def test_ws_sm90a_gemm_matches_numpy_with_no_findings(ws90):
    f, src = ws90
    assert "cp_async_bulk_tensor" in src and "wgmma" in src and "ws_p < 16" in src
    report, ok = _emulate(f, interleavings=2)
    assert report.ok, str(report)
    assert ok


FAULTS = {
    "expect_tx shrunk": lambda s: s.replace("(uint)24576);", "(uint)16384);"),
    # the consumers' wait on full[slot]: its parity expression (whatever the ring depth makes of it) xor 1
    "full parity flipped": lambda s: re.sub(r"(tvm_builtin_cuda_mbarrier_wait\(\(&\(ws_full_ptr\[[^\]]*\]\)\), )(.*?)\);",
                                            r"\1(\2) ^ 1);", s, count=1),
    "wgmma wait removed": lambda s: re.sub(r"\n\s*tvm_builtin_ptx_wgmma_wait_group_wait_group_sync_aligned_4\(\);",
                                           "", s, count=1),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_planted_ws_sm90a_bug_is_caught(ws90, fault):
    f, src = ws90
    bad = FAULTS[fault](src)
    assert bad != src, fault
    report, ok = _emulate(f, bad)
    assert not report.ok or not ok, f"{fault} not caught: {report}"
