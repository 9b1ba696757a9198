"""Tile schedulers by execution: a tile-scheduled, pipelined tensor-core GEMM run on the emulator, every CTA.

TVM's tensor-core GEMM (128 x 128 block tiles) on a 384 x 256 x 64 problem: 3 x 2 = 6 tiles.  ``tile_schedule``
rewrites its ``blockIdx`` loops (``persistent``: 2 SMs x 2 CTAs per SM, so 4 CTAs, two of them running two
tiles: the ragged end), then ``auto_pipeline`` plans the K loops inside, found again by name, with cp.async
stages.  The kernel built by ``tvm_twill.build`` runs on the emulator against numpy: 0 findings, every tile
written (C starts as NaN), the same result on a second call; the data-parallel control too.  The larger
sweep (both dispatch orders, more interleavings) runs behind ``--slow``.
"""
import shutil

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
if shutil.which("nvcc") is None:
    pytest.skip("nvcc not installed", allow_module_level=True)

import tvm_twill  # noqa: E402
from tvm_twill import emulator as E  # noqa: E402
from tvm_twill.workloads import tensorcore_gemm_mnk  # noqa: E402

M, N, K = 384, 256, 64


def scheduled(kind: str):
    sch, _, _ = tensorcore_gemm_mnk(M, N, K)
    tiles = tvm_twill.tile_schedule(sch, "sm_80", kind=kind, sm_count=2, ctas_per_sm=2)
    plan = tvm_twill.auto_pipeline(sch, ["k_0_0", "k_0_1"], "sm_80", quiet=True)
    return tiles, plan, tvm_twill.build(sch.mod, "sm_80", plan)


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    return a, b, np.full((M, N), np.nan, np.float32)


def run_twice(f, interleavings, policy=None):
    a, b, c = inputs()
    ref = a.astype(np.float32) @ b.astype(np.float32)
    reports = []
    for _ in range(2):  # a second call starts from the first call's C, poisoned again
        c[...] = np.nan
        reports.append(E.run(f, a, b, c, interleavings=interleavings, policy=policy))
        assert not np.isnan(c).any(), "a tile was never written"
        assert float(np.abs(c - ref).max()) < 1e-2
    return reports


@pytest.mark.parametrize("kind, ctas", [("persistent", 4), pytest.param("data_parallel", 6, marks=pytest.mark.slow)])
def test_a_tile_scheduled_pipelined_gemm_runs_clean_on_every_cta(kind, ctas):
    tiles, plan, f = scheduled(kind)
    assert tiles.kind == kind and tiles.ctas == ctas and tiles.tiles == 6
    assert plan.applied and plan.annotation.async_stages, plan.outcome
    for report in run_twice(f, interleavings=2):
        assert report.ok, str(report)


@pytest.mark.slow
@pytest.mark.parametrize("dispatch", ["linear", "random"])
def test_persistent_tiles_under_both_dispatch_orders(dispatch):
    _, _, f = scheduled("persistent")
    for report in run_twice(f, interleavings=3, policy=E.Policy(dispatch=dispatch, sm_count=2, ctas_per_sm=1)):
        assert report.ok, str(report)
