"""wgmma on the emulator: workloads.wgmma_gemm through the WS lowering with no specialization (the
``wgmma_plain`` kernel: ordinary st.shared, bar.sync, wgmma from shared descriptors) on sm_90a.

The lowering puts a ``fence.proxy.async`` between the generic stores and the async-proxy wgmma reads
(``transforms/proxy_fence.py``): the kernel as TVM builds it computes C = A B^T like numpy with no finding over
several seeds.  Planted bugs applied to its CUDA source (``run(..., source=...)``): the fence removed again is
a ``ProxyFenceMissing``; a wgmma wait removed is caught too.
"""
import re
import shutil

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
if shutil.which("nvcc") is None:
    pytest.skip("nvcc not installed", allow_module_level=True)

from emulator.tvm_kernels import compile_module, gemm_inputs

from tvm_twill import emulator as E
from tvm_twill.emulator import findings as F

N = 256
CTAS = [(0, 0, 0), (1, 0, 0)]
#: the fence as the lowering emits it in the CUDA source (one inline-asm statement per line)
FENCE_LINE = re.compile(r"\n[^\n]*fence\.proxy\.async[^\n]*")


@pytest.fixture(scope="module")
def plain():
    from tvm_twill.transforms.pipelines import WS_PIPELINE, register
    from tvm_twill.workloads import wgmma_gemm
    register(WS_PIPELINE)
    sch, _, _ = wgmma_gemm(N)
    f = compile_module(sch.mod, "sm_90a", WS_PIPELINE, async_copy=True)
    return f, f.mod.imports[0].inspect_source()


def _run(f, src, seed=0):
    a, b, c = gemm_inputs(N, seed=seed)
    report = E.run(f, a, b, c, source=src, blocks=CTAS, interleavings=2, seed=seed)
    ref = a.astype(np.float32) @ b.astype(np.float32).T
    done = c != 0
    ok = done.sum() == len(CTAS) * 64 * 128 and float(np.abs(c - ref)[done].max()) < 1e-3
    return report, ok


def _unfenced(src):
    bad = FENCE_LINE.sub("", src)
    assert "fence.proxy.async" not in bad and bad != src
    return bad


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_plain_wgmma_kernel_as_lowered_matches_numpy_with_no_findings(plain, seed):
    f, src = plain
    assert "wgmma.mma_async" in src and "fence.proxy.async" in src
    report, ok = _run(f, src, seed)
    assert report.ok, str(report)
    assert ok


def test_planted_proxy_fence_removed_is_caught(plain):
    f, src = plain
    report, ok = _run(f, _unfenced(src))
    assert {x.kind for x in report.findings} == {"ProxyFenceMissing"}, str(report)
    assert ok        # the values are right on the CPU; the missing fence is an ordering bug, found anyway
    found = next(x for x in report.findings if isinstance(x, F.ProxyFenceMissing))
    assert found.where.cuda_line and found.where.ptx_line


def test_planted_wgmma_wait_removed_is_caught(plain):
    # the last wait of a k step (the first three only separate wgmmas chained on one accumulator, which
    # needs no wait): the next step's stores then overwrite operands the last wgmma still reads
    f, src = plain
    waits = list(re.finditer(r"\n[^\n]*wgmma_wait_group[^\n]*\(\);", src))
    assert waits, "no wgmma wait in the source"
    last = waits[-1]
    bad = src[:last.start()] + src[last.end():]
    report, ok = _run(f, bad)
    assert not report.ok or not ok
    assert any(x.kind in ("InFlightOverwrite", "PoisonUse") for x in report.findings), str(report)
