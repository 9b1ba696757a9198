"""Generated GEMMs through the project's software-pipelining path, run on the emulator against numpy.

Hypothesis draws the problem (M and N one or two 128-row block tiles, K a number of 32-wide k steps that
wraps a 3-deep pipeline at least twice plus one) and the schedule: ``auto_pipeline`` with a drawn
``max_stages`` bound, or TVM's own hand annotation of its pipeline test.  Each case is built with
``tvm_twill.build``, emulated (the first and the last CTA of the grid) over two interleavings with
different seeds, and checked against numpy with no finding.  Derandomized, a handful of examples, so the
default suite stays near a minute; every case prints its build and emulation times.
"""
import shutil
import time

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
if shutil.which("nvcc") is None:
    pytest.skip("nvcc not installed", allow_module_level=True)

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tvm_twill
from tvm_twill import emulator as E
from tvm_twill.emulator.launch import launches
from tvm_twill.workloads import (
    TENSORCORE_TILE,
    TVM_HAND_ANNOTATIONS,
    tensorcore_gemm_mnk,
)

EXAMPLES = 5
schedules = st.sampled_from([("auto", None), ("auto", 2), ("auto", 3), ("hand", "simple")])


def _build(m, n, k, schedule):
    sch, k0, k1 = tensorcore_gemm_mnk(m, n, k)
    kind, arg = schedule
    if kind == "hand":
        for key, loop in (("k0", k0), ("k1", k1)):
            for ann, value in TVM_HAND_ANNOTATIONS[arg].get(key, {}).items():
                sch.annotate(loop, ann, value)
        return tvm_twill.build(sch, "sm_80")
    plan = tvm_twill.auto_pipeline(sch, [k0, k1], "sm_80", max_stages=arg, quiet=True)
    assert plan.applied, plan.explain()
    return tvm_twill.build(sch, "sm_80", plan)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(tiles_m=st.integers(1, 2), tiles_n=st.integers(1, 2), trips=st.integers(7, 9), schedule=schedules,
       seed=st.integers(0, 2 ** 16))
def test_generated_swp_gemms_match_numpy_on_the_emulator(tiles_m, tiles_n, trips, schedule, seed):
    m, n, k = TENSORCORE_TILE * tiles_m, TENSORCORE_TILE * tiles_n, 32 * trips
    t0 = time.perf_counter()
    f = _build(m, n, k, schedule)
    src = f.mod.imports[0].inspect_source()
    assert "cp.async" in src or "cp_async" in src, "the pipelined copies are not asynchronous"
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float16)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float16)
    c = np.zeros((m, n), np.float32)
    (launch,) = launches(f, [a, b, c])[1]
    assert launch.grid[0] * launch.grid[1] == tiles_m * tiles_n
    blocks = sorted({(0, 0, 0), (launch.grid[0] - 1, launch.grid[1] - 1, 0)})
    t1 = time.perf_counter()
    report = E.run(f, a, b, c, seed=seed, interleavings=2, blocks=blocks)
    t2 = time.perf_counter()
    print(f"\nM N K = {m} {n} {k}, {schedule}: build {t1 - t0:.1f} s, emulate {t2 - t1:.1f} s, "
          f"{report.instructions} warp instructions")
    assert report.ok, str(report)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    done = c != 0
    assert done.sum() == len(blocks) * TENSORCORE_TILE ** 2, (done.sum(), blocks)
    np.testing.assert_allclose(c[done], ref[done], rtol=1e-4, atol=1e-4)
