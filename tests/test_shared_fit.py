"""A software-pipelining plan fits the block's shared memory as TVM allocates it (stage distance + 1 versions
of each shared buffer), not only as the solver's live-value memory rule counts it (stages.fit_shared)."""
import dataclasses

import pytest

tvm = pytest.importorskip("tvm")

import tvm_twill  # noqa: E402
from tvm_twill.model.machine import get_machine  # noqa: E402
from tvm_twill.workloads import wgmma_gemm  # noqa: E402

FREE = 163840   # TVM's versions of the unconstrained plan of wgmma_gemm(512): A x6 + B x7 (its copies through
#                 L2 and DRAM, docs/machines.md)


def _plan(limit, **kw):
    sch, k0, _ = wgmma_gemm(512)
    m = dataclasses.replace(get_machine("h100"), smem_bytes=limit)
    return tvm_twill.auto_pipeline(sch, [k0], "sm_90a", machine=m, **kw)


@pytest.mark.parametrize("limit", [232448, FREE - 1, 90111, 65536, 49151])
def test_the_plan_fits_every_shared_memory_limit(limit):
    plan = _plan(limit)
    assert plan.smem_bytes <= limit
    text = plan.explain()
    if limit >= FREE:
        assert plan.applied and plan.smem_bytes == FREE and "shared memory: TVM's" not in text
    else:   # the first plan's versions overflowed: said, with what was chosen instead
        assert f"more than the {limit} B a block has; the best plan that fits has " \
               f"{plan.annotation.num_stages} stage(s) ({plan.smem_bytes} B" in text


def test_one_byte_short_costs_no_more_than_a_much_smaller_limit():
    # the re-solve with the memory rule tightened finds the 5-stage plan a 120000 B machine gets directly
    short, smaller = _plan(FREE - 1), _plan(120000)
    assert short.ii_cycles <= smaller.ii_cycles and short.smem_bytes <= FREE - 1
    assert "shared memory: TVM's" not in smaller.explain()


def test_an_explicit_max_stages_still_bounds_first():
    plan = _plan(232448, max_stages=3)
    assert plan.annotation.num_stages <= 3 and "shared memory: TVM's" not in plan.explain()
