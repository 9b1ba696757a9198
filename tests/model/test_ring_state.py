"""The ring checker's state machine (tvm_twill.model.ring_state): one transition function per event, checked alone.

Pure Python, no TVM.  ``check_ring``'s tests (test_protocol.py) check whole
explorations; these check single steps from hand-made states.
"""
import dataclasses

import pytest

from tvm_twill.model import ring_state as rs
from tvm_twill.model.protocol import RingProtocol


def _ring(**kw):
    return rs.Ring.build(RingProtocol(**{"depth": 2, "consumers": 1, **kw}), 4)


def test_state_is_a_frozen_record_with_named_fields():
    st = _ring().start()
    assert [f.name for f in dataclasses.fields(st)] == ["producer_i", "producer_pc", "consumers", "full", "empty",
                                                       "slots", "named"]
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign"):
        st.producer_i = 1
    assert st.full[0] == rs.Mbarrier(parity=0, pending=1, tx=0)
    assert st.slots == (rs.Slot(-1, rs.EMPTY),) * 2


def test_from_the_start_only_the_producer_moves():
    ring = _ring()
    st = ring.start()
    (label, nxt), = rs.successors(ring, st)
    assert label == "producer acquires slot 0 for iteration 0"
    assert (nxt.producer_i, nxt.producer_pc) == (0, rs.ISSUE)


def test_tma_issue_expects_bytes_and_landing_completes_the_phase():
    ring = _ring()
    st = ring.start().producer_at(0, rs.ISSUE)
    (_, issued), = rs.producer_issue(ring, st)
    assert issued.full[0] == rs.Mbarrier(0, 0, 1)          # arrived with one transaction pending
    assert issued.slots[0] == rs.Slot(0, rs.INFLIGHT)
    (_, landed), = rs.copies_land(ring, issued)
    assert landed.full[0] == rs.Mbarrier(1, 1, 0)          # the phase completed: parity flipped, count reset
    assert landed.slots[0] == rs.Slot(0, rs.READY)


def test_issue_into_an_unread_slot_is_an_overwrite():
    ring = _ring()
    st = dataclasses.replace(ring.start().producer_at(2, rs.ISSUE), slots=(rs.Slot(0, rs.READY), rs.Slot(-1, rs.EMPTY)))
    (v,) = rs.producer_issue(ring, st)
    assert isinstance(v, rs.ProtocolViolation) and v.kind == "overwrite"
    assert "iteration 0" in v.message


def test_consumer_read_of_a_copy_in_flight_is_refused():
    ring = _ring()
    st = dataclasses.replace(ring.start(), consumers=(rs.Warp(0, rs.READ, 0),), slots=(rs.Slot(0, rs.INFLIGHT),
                                                                                       rs.Slot(-1, rs.EMPTY)))
    v = rs.consumer_read(ring, st, 0, st.consumers[0], list(st.consumers))
    assert v.kind == "read-before-commit" and "still in flight" in v.message


def test_release_arrives_on_the_empty_barrier():
    ring = _ring()
    st = dataclasses.replace(ring.start(), consumers=(rs.Warp(0, rs.RELEASE, 0),))
    cons = list(st.consumers)
    label, empty, _, _ = rs.consumer_release(ring, st, 0, st.consumers[0], cons)
    assert label == "consumer releases slot 0 (iteration 0)"
    assert empty[0] == rs.Mbarrier(1, 1, 0) and cons[0] == rs.Warp(1, rs.WAIT, 0)
