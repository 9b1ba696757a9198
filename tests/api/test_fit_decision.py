"""Fitting shared memory is a planner decision (``stages.SharedFit`` on ``PipelinePlan.shared_fit``), read as a
typed value: no message is searched for a phrase to tell why a plan has the stages it has."""
import dataclasses

import pytest

tvm = pytest.importorskip("tvm")

from tvm.script import tirx as T  # noqa: E402

from tvm_twill import auto_pipeline  # noqa: E402
from tvm_twill.model.machine import get_machine  # noqa: E402


@T.prim_func(s_tir=True)
def deep_copy(A: T.Buffer((64, 8), "float32"), C: T.Buffer((64, 8), "float32")):
    # a 500-cycle DRAM latency over a one-unit body: the optimum wants many stages of the 32-byte tile S
    for i in T.serial(64):
        with T.sblock("body"):
            S = T.sblock_alloc_buffer((8,), "float32", scope="shared")
            for j in range(8):
                with T.sblock("load"):
                    S[j] = A[i, j]
            for j in range(8):
                with T.sblock("use"):
                    C[i, j] = S[j] * T.float32(2) + T.float32(1)


def _plan(**kw):
    return auto_pipeline(tvm.s_tir.Schedule(deep_copy), "i", "sm_80", **kw)


def test_a_block_with_room_for_one_tile_gets_the_one_stage_plan_that_fits():
    # 40 B: one 32-byte version of S fits, two do not
    plan = _plan(machine=dataclasses.replace(get_machine("a100"), smem_bytes=40))
    fit = plan.shared_fit
    assert fit is not None and fit.fitted_stages == 1 and fit.stages > 1 and fit.needed > 40
    assert plan.annotation.num_stages == 1 and not plan.applied
    assert plan.outcome.startswith("not applied: only one stage of 'i' fits the block's shared memory")


def test_a_plan_not_fitted_for_shared_memory_has_no_fit_decision():
    one = _plan(max_stages=1)              # one stage because of the bound, not of shared memory
    assert one.shared_fit is None and one.annotation.num_stages == 1
    assert "fits the block's shared memory" not in one.outcome
    assert _plan().shared_fit is None      # a100's shared memory holds the optimum's versions
