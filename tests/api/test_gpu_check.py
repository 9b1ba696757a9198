"""``plan.verify(mod)``: the planned kernel against the unpipelined original on the emulator (no GPU).

tensorcore_gemm(256) on sm_80 (TVM's mma.sync schedule, a k loop of 8 trips: every 3-deep ring wraps), the
software-pipelined plan and the warp-specialized one (producer warp, cp.async + mbarrier ring), two CTAs of the
launch, two seeds.
"""
import shutil

import pytest

tvm = pytest.importorskip("tvm")
if shutil.which("nvcc") is None:
    pytest.skip("nvcc not installed", allow_module_level=True)

import tvm_twill
from tvm_twill.errors import InputError
from tvm_twill.check.gpu_check import TOLERANCE

N = 256
CTAS = [(0, 0, 0), (0, 1, 0)]


def _planned(ws):
    from tvm_twill.workloads import tensorcore_gemm
    sch, k0, k1 = tensorcore_gemm(N)
    plan = tvm_twill.auto_pipeline(sch, [k0, k1], "sm_80", warp_specialize=ws)
    return plan, sch.mod


@pytest.fixture(scope="module")
def swp():
    return _planned(False)


@pytest.fixture(scope="module")
def ws():
    return _planned(True)


def test_verify_swp_gemm_matches_the_original(swp):
    plan, mod = swp
    assert plan.applied and plan.tir_pipeline is None
    check = plan.verify(mod, seeds=2, blocks=CTAS)
    assert check.ok, str(check)
    assert check.seeds == (0, 1) and check.instructions > 0
    assert check.max_error <= TOLERANCE["float32"]
    assert "ok" in str(check).splitlines()[0]


def test_verify_ws_gemm_matches_the_original(ws):
    plan, mod = ws
    assert plan.warp_specialization.chosen and plan.tir_pipeline == "tvm_twill_ws"
    check = plan.verify(mod, seeds=2, blocks=CTAS)
    assert check.ok, str(check)
    assert check.max_error <= TOLERANCE["float32"]


def test_verify_reports_the_findings_of_both_kernels():
    # TVM's 4096-sized tile factors at 256 (what tensorcore_gemm built before it sized its grid to n): a 16 x 64
    # grid whose C stores are not guarded, so CTA (0, 4) stores outside C in the original and in the planned
    # kernel alike: both are reported, and the check fails
    from tvm import te
    from tvm.s_tir.meta_schedule.testing import te_workload

    from tvm_twill.workloads import _mma_schedule
    workload = te.create_prim_func(te_workload.matmul(N, N, N, in_dtype="float16", out_dtype="float32"))
    sch = _mma_schedule(workload, [1, 32, 1, 4, 2], [16, 2, 4, 1, 2], [128, 2, 1])
    loops = sch.get_loops(sch.get_sblock("C_o_update"))
    plan = tvm_twill.auto_pipeline(sch, [loops[3], loops[4]], "sm_80", quiet=True)
    check = plan.verify(sch.mod, seeds=1, interleavings=1, blocks=[(0, 4, 0)])
    assert not check.ok
    kinds = {(kernel, f.kind) for kernel, _, f in check.findings}
    assert {("original", "BadAccess"), ("planned", "BadAccess")} <= kinds, str(check)
    assert "FAILED" in str(check)


def test_verify_refuses_no_seeds(swp):
    plan, mod = swp
    with pytest.raises(InputError, match="at least one seed"):
        plan.verify(mod, seeds=0)


def test_verify_needs_the_planned_module(swp):
    plan, _ = swp
    with pytest.raises(InputError, match="does not carry the plan"):
        plan.verify(plan.source)


def test_compare_names_the_parameters_past_their_tolerance():
    import numpy as np

    from tvm_twill.check.gpu_check import _compare
    params = [("C", (4,), "float32"), ("D", (4,), "float16"), ("E", (2,), "int32")]
    ref = [np.array([1, 2, 3, 4], np.float32), np.array([1, -8, 2, 0], np.float16), np.array([3, 4], np.int32)]
    got = [ref[0] + np.float32(0.02) * np.array([0, 0, 0, 1], np.float32),  # 0.02 / 4: past 1e-3
           ref[1] + np.float16(0.03125),                                     # 0.03125 / 8: within 1e-2
           ref[2].copy()]
    err, wrong = _compare(params, ref, got)
    assert wrong == ["C"]
    assert err == pytest.approx(0.02 / 4, rel=1e-3)
    got[2][1] = 5
    assert _compare(params, ref, got)[1] == ["C", "E"]
