"""wgmma on the emulator: workloads.wgmma_gemm through the WS lowering with no specialization (the
``wgmma_plain`` kernel: ordinary st.shared, bar.sync, wgmma from shared descriptors) on sm_90a.

The kernel as TVM emits it has no fence.proxy.async between the generic stores and the async-proxy wgmma
reads: the emulator reports ProxyFenceMissing (the issue's finding).  With the fence added before each
bar.sync (applied to the PTX) it computes C = A B^T like numpy with no finding; removing the fence again, or a
wgmma wait, is caught.
"""
import re
import shutil

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
if shutil.which("nvcc") is None:
    pytest.skip("nvcc not installed", allow_module_level=True)

from emulator.tvm_kernels import compile_cuda, gemm_inputs, launch_for, ptx_of

from tvm_twill import emulator as E
from tvm_twill.emulator import findings as F

N = 256
CTAS = [(0, 0, 0), (1, 0, 0)]


@pytest.fixture(scope="module")
def plain():
    from tvm_twill.transforms.ws_lowering import WS_PIPELINE, register_pipeline
    from tvm_twill.workloads import wgmma_gemm
    register_pipeline()
    sch, _, _ = wgmma_gemm(N)
    ptx = ptx_of(compile_cuda(sch.mod, arch="sm_90a", pipeline=WS_PIPELINE, async_copy=True), "sm_90a")
    return launch_for(sch.mod, 3, ptx=ptx), ptx


def _run(launch, ptx):
    a, b, c = gemm_inputs(N)
    report = E.run_ptx(ptx, [launch], a, b, c, blocks=CTAS, interleavings=2)
    ref = a.astype(np.float32) @ b.astype(np.float32).T
    done = c != 0
    ok = done.sum() == len(CTAS) * 64 * 128 and float(np.abs(c - ref)[done].max()) < 1e-3
    return report, ok


def _fenced(ptx):
    return re.sub(r"(\n\s*bar\.sync\s+0;)", r"\n\tfence.proxy.async.shared::cta;\1", ptx)


def test_plain_wgmma_kernel_lacks_the_proxy_fence(plain):
    launch, ptx = plain
    assert "wgmma.mma_async" in ptx and "fence.proxy.async" not in ptx
    report, ok = _run(launch, ptx)
    kinds = {f.kind for f in report.findings}
    assert kinds == {"ProxyFenceMissing"}, str(report)
    assert ok        # the values are right on the CPU; the missing fence is an ordering bug, found anyway
    f = next(f for f in report.findings if isinstance(f, F.ProxyFenceMissing))
    assert f.where.cuda_line and f.where.ptx_line


def test_fenced_wgmma_kernel_matches_numpy_with_no_findings(plain):
    launch, ptx = plain
    report, ok = _run(launch, _fenced(ptx))
    assert report.ok, str(report)
    assert ok


def test_planted_wgmma_wait_removed_is_caught(plain):
    # the last wait of a k step (the first three only separate wgmmas chained on one accumulator, which
    # needs no wait): the next step's stores then overwrite operands the last wgmma still reads
    launch, ptx = plain
    fenced = _fenced(ptx)
    last = list(re.finditer(r"wgmma\.wait_group\.sync\.aligned\s+0;", fenced))[-1]
    bad = fenced[:last.start()] + fenced[last.end():]
    report, ok = _run(launch, bad)
    assert not report.ok or not ok
    assert any(f.kind in ("InFlightOverwrite", "PoisonUse") for f in report.findings), str(report)
