"""The emulator's state types (``emulator/state.py``): ``MBarrier`` transitions, the ``AsyncOp`` protocol
every async op class implements, and ``CTA.complete`` driving an op and the cp.async arrive waiting on it.

Hand-built states on a one-warp CTA of a trivial kernel; the PTX ISA's mbarrier rules ("Parallel
Synchronization and Communication Instructions: mbarrier") are the expected values.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tvm_twill.emulator import Launch, findings as F
from tvm_twill.emulator.asyncops import CopyOp
from tvm_twill.emulator.bulk import BulkOp
from tvm_twill.emulator.bulkstore import StoreOp
from tvm_twill.emulator.loader import Prepared
from tvm_twill.emulator.memory import GlobalMemory
from tvm_twill.emulator.ptx import parse
from tvm_twill.emulator.state import CTA, AsyncArrive, AsyncOp, MBarrier, Policy
from tvm_twill.emulator.wgmma import WgmmaOp

PTX = """.version 8.7
.target sm_80
.address_size 64
.visible .entry k()
{
    .shared .align 8 .b8 smem[64];
    ret;
}
"""


def _cta(nthreads=64):
    module = parse(PTX)
    prep = Prepared(module, Launch("k", (1, 1, 1), (nthreads, 1, 1), 0, ()), GlobalMemory(), {})
    found = []
    cta = CTA(prep, (0, 0, 0), np.random.default_rng(0), Policy(), found.append)
    prep.cta = cta
    return cta, found


def test_warps_start_with_their_live_lanes():
    cta, _ = _cta(nthreads=40)
    w0, w1 = cta.warps
    assert w0.live.all() and w0.mask_all and w0.full and not w0.done and w0.pc == 0
    assert w1.live.sum() == 8 and w1.live[:8].all() and not w1.mask_all
    assert w0.bulk_groups == [] and w0.bulk_groups is not w1.bulk_groups  # fields, not shared defaults
    with pytest.raises(AttributeError):
        w0.not_a_field = 1  # slots: a misspelt attribute fails loudly


def test_a_phase_completes_on_the_last_arrival_and_publishes_the_released_clocks():
    cta, found = _cta()
    w = cta.warps[0]
    mb = MBarrier.init(0, 2, cta.nwarps)
    mb.release(np.array([3, 0]))
    mb.arrive(cta, w, None, 1)
    assert (mb.phase, mb.pending) == (0, 1)
    mb.release(np.array([1, 5]))
    mb.arrive(cta, w, None, 1)
    assert (mb.phase, mb.pending) == (1, 2)
    assert mb.vc_done.tolist() == [3, 5] and mb.vc_cur.tolist() == [0, 0]
    mb.acquire(cta, cta.warps[1])
    assert cta.vc[1].tolist() == [3, 5]  # the waiter joins the completed phase's clocks (its own was 2)
    assert not found


def test_the_tx_count_holds_the_phase_until_complete_tx_and_an_underflow_is_reported_once():
    cta, found = _cta()
    w = cta.warps[0]
    mb = MBarrier.init(8, 1, cta.nwarps)
    mb.arrive(cta, w, None, 1, tx=64)          # arrive.expect_tx: pending reaches 0, 64 bytes outstanding
    assert (mb.phase, mb.tx) == (0, 64)
    mb.complete_tx(cta, w, None, 48)
    assert mb.phase == 0
    mb.complete_tx(cta, w, None, 16)
    assert (mb.phase, mb.pending, mb.tx) == (1, 1, 0)
    mb.expect_tx(cta, w, None, 16)
    mb.arrive(cta, w, None, 1)
    mb.complete_tx(cta, w, None, 32)           # 16 more bytes than expected
    mb.complete_tx(cta, w, None, 8)
    assert mb.phase == 1 and mb.tx == -24
    assert [type(f) for f in found] == [F.MbarrierMisuse] and "tx-count underflow (-16)" in found[0].message


def test_over_arrival_is_reported_and_arrive_drop_shrinks_the_next_phases():
    cta, found = _cta()
    w = cta.warps[0]
    mb = MBarrier.init(16, 2, cta.nwarps)
    mb.arrive(cta, w, None, 3)
    assert "over-arrival" in found[0].message and "3 arrivals with 2 pending in phase 0" in found[0].message
    assert (mb.phase, mb.pending) == (1, 1)    # the extra arrival counts against the next phase
    mb.drop(1)
    mb.arrive(cta, w, None, 1)
    assert (mb.phase, mb.pending) == (2, 1)
    mb.add_pending(2)                          # cp.async.mbarrier.arrive without .noinc
    mb.arrive(cta, w, None, 1)
    assert (mb.phase, mb.pending) == (2, 2)


def test_test_wait_by_parity_and_by_phase():
    mb = MBarrier.init(0, 1, 1)
    mb.phase = 3
    assert mb.passed(np.array([0, 1, 2, 3], np.uint32), parity=True).tolist() == [True, False, True, False]
    assert mb.passed(np.array([0, 2, 3, 4], np.uint64), parity=False).tolist() == [True, True, False, False]


def test_every_async_op_class_implements_the_protocol():
    for cls in (CopyOp, BulkOp, StoreOp, WgmmaOp, AsyncArrive):
        assert issubclass(cls, AsyncOp) and "perform" in vars(cls), cls
        names = {f.name for f in dataclasses.fields(cls)}
        assert {"id", "warp", "done"} <= names, cls
    with pytest.raises(TypeError):
        AsyncOp()

    class NoPerform(AsyncOp):
        pass

    with pytest.raises(TypeError):
        NoPerform()


@dataclasses.dataclass(eq=False)
class _Op(AsyncOp):
    id: int
    warp: int
    done: bool = False
    performed: int = 0
    observed: list = dataclasses.field(default_factory=list)

    def perform(self, cta):
        self.performed += 1
        self.done = True

    def observe(self, cta, clock):
        self.observed.append(clock)


def test_complete_performs_an_op_once_and_fires_the_arrive_waiting_for_it():
    cta, found = _cta()
    a, b = _Op(1, 0), _Op(2, 0)
    cta.ops = {1: a, 2: b}
    cta.mbars[0] = mb = MBarrier.init(0, 1, cta.nwarps)
    arrive = AsyncArrive(0, 0, 1, (1, 2), np.array([7, 0]), 7, None)
    cta.async_arrives.append(arrive)
    cta.complete(a)
    cta.complete(a)
    assert a.performed == 1 and cta.async_arrives == [arrive] and mb.phase == 0   # b still in flight
    cta.complete(b)
    assert cta.async_arrives == [] and arrive.done
    assert a.observed == b.observed == [7]      # the copies' bytes count as written at the arrive's clock
    assert mb.phase == 1 and mb.vc_done.tolist() == [7, 0]
    assert not found


@pytest.mark.parametrize("bad", [dict(dispatch="foo"), dict(elect="middle"), dict(completion="soon"),
                                 dict(sm_count=0), dict(ctas_per_sm=-1), dict(slice=0), dict(sm_count=True),
                                 dict(spurious=1.5)])
def test_a_bad_policy_value_is_refused_in_one_line(bad):
    from tvm_twill.emulator import Policy
    from tvm_twill.errors import InputError
    with pytest.raises(InputError, match=rf"^Policy\({next(iter(bad))}=") as e:
        Policy(**bad)
    assert "\n" not in str(e.value)
