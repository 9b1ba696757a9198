"""A wgmma kernel built the usual way (``tvm.compile`` with TVM's default pipeline) is as correct as one built
with ``tvm_twill.build``: the async proxy reads no shared byte an ordinary store wrote without a fence.

wgmma reads its shared operands through the async proxy; TVM's default pipeline copies tiles to shared
memory with ``st.shared`` (synchronous copies, the ``@!p st.shared`` zero fill) and places no
``fence.proxy.async``.  Before the fix, ``workloads.wgmma_gemm`` compiled that way gave 64
``ProxyFenceMissing`` per CTA on the emulator: unplanned, planned for the software pipeline (synchronous
copies), and planned warp-specialized (TVM's pipeline does not run the rewrite).  The wgmma intrinsic now
carries each thread's fence and a barrier ahead of the wgmma for such builds (``frontend.plain_fences``);
tvm_twill's pipelines drop them and place their own, so ``tvm_twill.build``'s kernel is unchanged.
"""
import shutil

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
if shutil.which("nvcc") is None:
    pytest.skip("nvcc not installed", allow_module_level=True)

from emulator.tvm_kernels import compile_module, gemm_inputs  # noqa: E402

import tvm_twill  # noqa: E402
from tvm_twill import emulator as E  # noqa: E402
from tvm_twill.frontend.plain_fences import drop_plain_fences_pass, has_plain_fences  # noqa: E402
from tvm_twill.workloads import wgmma_gemm  # noqa: E402

N = 256
FENCE = "fence.proxy.async"


@pytest.fixture(scope="module")
def planned():
    """kind -> (module, plan or None): the workload unplanned, planned one-role, planned warp-specialized."""
    out = {}
    for kind in ("unplanned", "swp", "ws"):
        sch, k0, _ = wgmma_gemm(N)
        plan = None if kind == "unplanned" else tvm_twill.auto_pipeline(sch, k0, "sm_90a",
                                                                         warp_specialize=kind == "ws")
        out[kind] = (sch.mod, plan)
    return out


def _emulate(f):
    a, b, c = gemm_inputs(N)
    report = E.run(f, a, b, c, blocks=[(0, 0, 0)], interleavings=2)
    ref = a.astype(np.float32) @ b.astype(np.float32).T
    return report, float(np.abs(c[:64, :128] - ref[:64, :128]).max())


@pytest.mark.parametrize("async_copy", [False, True], ids=["sync", "use_async_copy"])
@pytest.mark.parametrize("kind", ["unplanned", "swp", "ws"])
def test_the_default_build_of_a_wgmma_gemm_is_fenced_and_right(planned, kind, async_copy):
    mod, _ = planned[kind]
    f = compile_module(mod, "sm_90a", None, async_copy=async_copy)
    assert FENCE in f.mod.imports[0].inspect_source()
    report, err = _emulate(f)
    assert report.ok, str(report)
    assert err < 1e-3


def test_without_the_intrinsics_fences_the_default_build_races_across_proxies(planned):
    """The test's teeth: the same build with the fences dropped is what the default build used to be."""
    mod, _ = planned["unplanned"]
    assert has_plain_fences(mod["main"].body)
    f = compile_module(drop_plain_fences_pass(mod), "sm_90a", None)
    report, _ = _emulate(f)
    assert any(type(x).__name__ == "ProxyFenceMissing" for x in report.findings), str(report)


@pytest.mark.parametrize("kind", ["swp", "ws"])
def test_tvm_twills_build_drops_them_and_places_its_own(planned, kind):
    """``tvm_twill.build``: one barrier ahead of the wgmma group per iteration, not one per wgmma."""
    mod, plan = planned[kind]
    with_marks = tvm_twill.build(mod, "sm_90a", plan).mod.imports[0].inspect_source()
    without = tvm_twill.build(drop_plain_fences_pass(mod), "sm_90a", plan).mod.imports[0].inspect_source()
    assert with_marks == without
    report, err = _emulate(tvm_twill.build(mod, "sm_90a", plan))
    assert report.ok, str(report)
    assert err < 1e-3
