"""The mbarrier ring protocol checker (tvm_twill.model.protocol): correct rings pass, seeded bugs are caught.

Pure Python, no TVM.  The default run covers ring depths 1-8 with 1-2
consumer groups and depths 1-5 with 3-4 (both copy engines); ``--slow`` runs
the whole grid of depths 1-8 x 1-4 consumer groups.
"""
import pytest

from tvm_twill.errors import InputError
from tvm_twill.model.protocol import CheckIncomplete, RingProtocol, check_limits, check_ring

DEFAULT_GRID = [(d, c) for d in range(1, 9) for c in (1, 2)] + [(d, c) for d in range(1, 6) for c in (3, 4)]
FULL_GRID = [(d, c) for d in range(1, 9) for c in range(1, 5)]


@pytest.mark.parametrize("tma", [True, False], ids=["tma", "cp_async"])
@pytest.mark.parametrize("depth,consumers", DEFAULT_GRID)
def test_correct_ring_has_no_violation(depth, consumers, tma):
    report = check_ring(RingProtocol(depth, consumers, tma=tma))
    assert report.ok, report.violations
    assert report.iterations == depth + 2 and report.states > depth


@pytest.mark.slow
@pytest.mark.parametrize("depth,consumers", FULL_GRID)
def test_correct_ring_has_no_violation_full_grid(depth, consumers):
    for tma in (True, False):
        assert check_ring(RingProtocol(depth, consumers, tma=tma)).ok


# Each seeded bug is a one-field change of what code generation emits, with the property it must break.
BUGS = {
    "missing producer phase flip": (dict(producer_flips_phase=False), "overwrite"),
    "missing consumer phase flip": (dict(consumer_flips_phase=False), "read-before-commit"),
    "full barrier expects two arrivals": (dict(full_count=2), "deadlock"),
    "release before the last read": (dict(release_after_read=False), "overwrite"),
    "no producer tail": (dict(producer_tail=False), "producer-tail"),
}


@pytest.mark.parametrize("tma", [True, False], ids=["tma", "cp_async"])
@pytest.mark.parametrize("bug", sorted(BUGS))
@pytest.mark.parametrize("depth,consumers", [(1, 1), (2, 1), (2, 2), (3, 2), (4, 3)])
def test_seeded_bug_is_caught(bug, depth, consumers, tma):
    fields, kind = BUGS[bug]
    if depth == 1 and "phase flip" in bug:
        pytest.skip("with one slot every iteration wraps; covered by depth >= 2")
    report = check_ring(RingProtocol(depth, consumers, tma=tma, **fields))
    assert not report.ok, f"{bug} not caught"
    assert report.violations[0].kind == kind, report.violations[0]
    assert report.violations[0].trace, "a violation comes with the steps that reach it"


@pytest.mark.parametrize("depth,consumers", [(2, 2), (3, 3), (4, 4)])
def test_empty_barrier_arrival_count_off_by_one(depth, consumers):
    too_few = check_ring(RingProtocol(depth, consumers, empty_count=consumers - 1))
    assert [v.kind for v in too_few.violations] == ["overwrite"]
    too_many = check_ring(RingProtocol(depth, consumers, empty_count=consumers + 1))
    assert [v.kind for v in too_many.violations] == ["deadlock"]


def test_traces_are_shortest():
    """Breadth-first: the missing producer flip shows up in the second round, after one round of releases
    is still pending, which takes exactly these steps."""
    report = check_ring(RingProtocol(2, 1, producer_flips_phase=False))
    assert report.violations[0].trace == (
        "producer acquires slot 0 for iteration 0", "producer issues iteration 0 into slot 0",
        "producer acquires slot 1 for iteration 1", "producer issues iteration 1 into slot 1",
        "producer acquires slot 0 for iteration 2", "producer issues iteration 2 into slot 0")


def test_more_iterations_explore_more_states():
    small = check_ring(RingProtocol(2, 2), iterations=2)
    large = check_ring(RingProtocol(2, 2), iterations=6)
    assert small.ok and large.ok and large.states > small.states


@pytest.mark.parametrize("kw", [dict(depth=0, consumers=1), dict(depth=2, consumers=0), dict(depth=True, consumers=1),
                                dict(depth=2, consumers=1, empty_count=0), dict(depth=65, consumers=1)])
def test_bad_ring_parameters_are_refused(kw):
    with pytest.raises(InputError):
        RingProtocol(**kw)


def test_state_budget_is_enforced():
    with pytest.raises(InputError, match=r"explored more than 100 states .*: no verdict$") as err:
        check_ring(RingProtocol(4, 4), max_states=100)
    assert isinstance(err.value, CheckIncomplete) and err.value.reason == "states" and err.value.limit == 100


def test_a_check_past_its_deadline_gives_no_verdict(monkeypatch):
    """The deadline is read before the first state and every ``CLOCK_EVERY`` states after: a check with no
    time left stops at once; one cut short is not kept (a later check with time finishes it)."""
    from tvm_twill.model import protocol
    monkeypatch.setattr(protocol, "_REPORTS", {})
    ring = RingProtocol(5, 8, tma=False, lanes=32)   # millions of states: minutes without a deadline
    with pytest.raises(CheckIncomplete, match=r"stopped after 0s .*: no verdict$") as err:
        check_ring(ring, seconds=0)
    assert err.value.reason == "deadline" and err.value.states == 1 and not protocol._REPORTS
    with pytest.raises(CheckIncomplete) as err:
        check_ring(ring, seconds=0.2)
    assert err.value.reason == "deadline" and 1 < err.value.states < protocol.MAX_STATES
    small = RingProtocol(2, 3)
    assert check_ring(small, seconds=60).ok and check_ring(small, seconds=0).ok   # the second: the first's report


def test_check_limits_apply_within_the_block_and_a_smaller_budget_refuses_a_kept_report(monkeypatch):
    from tvm_twill.model import protocol
    monkeypatch.setattr(protocol, "_REPORTS", {})
    seen = []
    with check_limits(max_states=100):
        with pytest.raises(CheckIncomplete, match="explored more than 100 states"):
            check_ring(RingProtocol(4, 4))
        with check_limits(progress=seen.append):   # the outer budget still holds
            with pytest.raises(CheckIncomplete, match="explored more than 100 states"):
                check_ring(RingProtocol(3, 4))
    assert seen == [1]   # read once, before the budget ran out
    first = check_ring(RingProtocol(3, 4), progress=seen.append)
    assert first.ok and seen[1:] and seen[1:] == sorted(seen[1:]) and seen[-1] < first.states
    with pytest.raises(CheckIncomplete, match=f"explored more than {first.states - 1} states"):
        check_ring(RingProtocol(3, 4), max_states=first.states - 1)   # as the check itself would have
    assert check_ring(RingProtocol(3, 4), max_states=first.states) is first


@pytest.mark.parametrize("depth,consumers", [(1, 1), (2, 4), (3, 4)])
def test_cp_async_lanes_full_count(depth, consumers):
    """cp.async rings: each of the producer warp's 32 lanes arrives (.noinc) when its copies land, so the
    full barrier counts 32; one short completes the phase before the last lane's data is in."""
    ok = RingProtocol(depth=depth, consumers=consumers, tma=False, lanes=32)
    assert ok.full_init == 32 and check_ring(ok).ok
    short = check_ring(RingProtocol(depth=depth, consumers=consumers, tma=False, lanes=32, full_count=31))
    assert not short.ok and short.violations[0].kind == "read-before-commit"
    extra = check_ring(RingProtocol(depth=depth, consumers=consumers, tma=False, lanes=32, full_count=33))
    assert not extra.ok and extra.violations[0].kind == "deadlock"


@pytest.mark.parametrize("lanes", [0, True, 2000])
def test_bad_lanes_are_refused(lanes):
    with pytest.raises(InputError, match="ring lanes must be an integer"):
        RingProtocol(depth=2, consumers=1, lanes=lanes)


# ---------------------------------------------------------------------------- wgmma groups in flight (lag 1)
def _emitted(depth, consumers, groups=4, **kw):
    """What transforms.wgmma_overlap emits: one iteration's groups in flight, except on a one-slot ring."""
    if depth < 2:
        return RingProtocol(depth, consumers, **kw)
    return RingProtocol(depth, consumers, release_lag=1, groups=groups, wait_pending=groups, **kw)


@pytest.mark.parametrize("groups", [1, 4])
@pytest.mark.parametrize("depth,consumers", DEFAULT_GRID)
def test_overlapped_wgmma_ring_has_no_violation(depth, consumers, groups):
    report = check_ring(_emitted(depth, consumers, groups))
    assert report.ok, report.violations


@pytest.mark.slow
@pytest.mark.parametrize("depth,consumers", FULL_GRID)
def test_overlapped_wgmma_ring_has_no_violation_full_grid(depth, consumers):
    assert check_ring(_emitted(depth, consumers, 4)).ok


def test_fewer_pending_groups_are_still_correct():
    assert check_ring(RingProtocol(3, 2, release_lag=1, groups=4, wait_pending=0)).ok


LAG_BUGS = {
    "release of slot k-1 before the wait_group": (dict(release_after_read=False), "overwrite"),
    "wait_group leaves G+1 groups pending": (dict(wait_pending=5), "overwrite"),
    "no release of the last slot after the loop": (dict(final_release=False), "deadlock"),
}


@pytest.mark.parametrize("bug", sorted(LAG_BUGS))
@pytest.mark.parametrize("depth,consumers", [(2, 1), (2, 2), (3, 2), (4, 3)])
def test_seeded_lag_bug_is_caught(bug, depth, consumers):
    fields, kind = LAG_BUGS[bug]
    report = check_ring(RingProtocol(depth, consumers, release_lag=1, groups=4, **fields))
    assert not report.ok, f"{bug} not caught"
    assert report.violations[0].kind == kind, report.violations[0]
    assert report.violations[0].trace


def test_wait_too_large_by_one_with_one_group_per_iteration():
    report = check_ring(RingProtocol(3, 1, release_lag=1, groups=1, wait_pending=2))
    assert [v.kind for v in report.violations] == ["overwrite"]
    assert "has not read iteration 0" in report.violations[0].message


def test_missing_final_release_without_tail_is_a_tail_violation():
    report = check_ring(RingProtocol(3, 1, release_lag=1, groups=4, final_release=False, producer_tail=False))
    assert [v.kind for v in report.violations] == ["producer-tail"]


@pytest.mark.parametrize("consumers", [1, 2])
def test_one_slot_with_lag_deadlocks(consumers):
    """The producer refills slot 0 for iteration 1 only after the consumers release iteration 0, which they do
    only after iteration 1's wait on slot 0: the transform keeps lag 0 on a one-slot ring."""
    report = check_ring(RingProtocol(1, consumers, release_lag=1, groups=4))
    assert [v.kind for v in report.violations] == ["deadlock"]
    assert "producer at iteration 1" in report.violations[0].message
    assert check_ring(_emitted(1, consumers)).ok


@pytest.mark.parametrize("kw", [dict(release_lag=2), dict(release_lag=True), dict(groups=0), dict(groups=65),
                                dict(wait_pending=-1), dict(wait_pending=True)])
def test_bad_lag_parameters_are_refused(kw):
    with pytest.raises(InputError):
        RingProtocol(depth=2, consumers=1, **kw)


# ---------------------------------------------------------------------------- ordered consumer groups (ping-pong)
# (consumers, order): consumer warps in len(order) groups whose sections take turns through named barriers
ORDERS = [(2, (0, 1)), (2, (1, 0)), (4, (0, 1)), (4, (1, 0)), (4, (0, 1, 2, 3)), (4, (3, 2, 1, 0))]


def _rotated(g):
    """A token order that is neither the identity nor its reverse (for G >= 3)."""
    return tuple((k + 1) % g for k in range(g))


def test_unordered_state_counts_are_unchanged():
    """No order: the sorted tuple of every consumer's state, as before named barriers were modelled."""
    assert check_ring(RingProtocol(3, 2)).states == 557
    assert check_ring(RingProtocol(3, 2, release_lag=1, groups=4)).states == 541
    assert check_ring(RingProtocol(4, 3)).states == 4917


# the four-group reversed order at depth 4 (1 s) is left to the slow grid
@pytest.mark.parametrize("depth,consumers,order", [(d, c, o) for d in range(1, 5) for c, o in ORDERS
                                                   if (d, o) != (4, (3, 2, 1, 0))])
def test_ordered_ring_has_no_violation(depth, consumers, order):
    report = check_ring(RingProtocol(depth, consumers, order=order))
    assert report.ok, report.violations
    assert report.states > 0 and report.protocol.bar_init == 2 * consumers // len(order)


# one wgmma group per iteration at depth 4 with four consumer warps (the states of two groups) is left to --slow
@pytest.mark.parametrize("depth,consumers,order,groups", [(d, c, o, g) for d in range(2, 5) for c, o in ORDERS[:5]
                                                          for g in (1, 2) if (d, c, g) != (4, 4, 1)])
def test_ordered_overlapped_wgmma_ring_has_no_violation(depth, consumers, order, groups):
    report = check_ring(RingProtocol(depth, consumers, order=order, release_lag=1, groups=groups))
    assert report.ok, report.violations
    assert report.states > 0


# depth x G x consumers (G, and 2G where the state space allows it at the default depth + 2 iterations)
SLOW_ORDERED = [(d, g, g) for d in range(1, 9) for g in (2, 3, 4)] + \
    [(d, 2 * g, g) for g, top in ((2, 8), (3, 4), (4, 2)) for d in range(1, top + 1)]


@pytest.mark.slow
@pytest.mark.parametrize("lag", [0, 1])
@pytest.mark.parametrize("depth,consumers,ngroups", SLOW_ORDERED)
def test_ordered_ring_has_no_violation_full_grid(depth, consumers, ngroups, lag):
    if lag and depth == 1:
        pytest.skip("one slot with lag deadlocks without an order too (test_one_slot_with_lag_deadlocks)")
    order = _rotated(ngroups) if ngroups > 2 else (1, 0)
    report = check_ring(RingProtocol(depth, consumers, order=order, release_lag=lag, groups=4 if lag else 1))
    assert report.ok, report.violations


ORDER_BUGS = {
    "no prologue arrive": (dict(prologue_arrive=False), "deadlock"),
    "pass before the read": (dict(pass_after_read=False), "order"),
    "last group passes in the last iteration": (dict(skip_last_pass=False), "barrier-leftover"),
}


@pytest.mark.parametrize("lag", [0, 1])
@pytest.mark.parametrize("bug", sorted(ORDER_BUGS))
@pytest.mark.parametrize("depth,consumers,order", [(1, 2, (0, 1)), (2, 2, (1, 0)), (3, 4, (0, 1)),
                                                   (2, 3, (2, 0, 1)), (2, 4, (3, 2, 1, 0))])
def test_seeded_order_bug_is_caught(bug, depth, consumers, order, lag):
    if lag and depth == 1:
        pytest.skip("one slot with lag deadlocks anyway")
    fields, kind = ORDER_BUGS[bug]
    report = check_ring(RingProtocol(depth, consumers, order=order, release_lag=lag, groups=4 if lag else 1,
                                     **fields))
    assert not report.ok, f"{bug} not caught"
    assert report.violations[0].kind == kind, report.violations[0]
    assert report.violations[0].trace, "a violation comes with the steps that reach it"


@pytest.mark.parametrize("lag", [0, 1])
@pytest.mark.parametrize("depth,consumers,order", [(2, 2, (0, 1)), (3, 4, (1, 0)), (2, 4, (0, 1, 2, 3)),
                                                   (2, 6, (2, 0, 1))])
def test_named_barrier_count_of_one_group_is_caught(depth, consumers, order, lag):
    """bar_count = one group's warps: the predecessor's arrivals (or the group's own syncs) alone complete a
    generation, so a section can start out of turn."""
    groups = dict(release_lag=lag, groups=4 if lag else 1)
    report = check_ring(RingProtocol(depth, consumers, order=order, bar_count=consumers // len(order), **groups))
    assert not report.ok
    assert report.violations[0].kind in ("order", "deadlock", "barrier-leftover")
    assert report.violations[0].trace
    too_many = check_ring(RingProtocol(depth, consumers, order=order, bar_count=2 * consumers // len(order) + 1,
                                       **groups))
    assert [v.kind for v in too_many.violations] == ["deadlock"]


def test_order_violation_names_the_groups():
    report = check_ring(RingProtocol(2, 4, order=(1, 0), pass_after_read=False))
    assert [v.kind for v in report.violations] == ["order"]
    assert report.violations[0].message == ("a consumer warp of group 0 starts its section of iteration 0 before "
                                            "every warp of group 1 has done its section of iteration 0")


def test_barrier_leftover_names_the_barrier():
    report = check_ring(RingProtocol(2, 4, order=(1, 0), skip_last_pass=False))
    assert [v.kind for v in report.violations] == ["barrier-leftover"]
    assert "b1 holds 2 of 4 arrival(s)" in report.violations[0].message


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_missing_prologue_deadlock_trace_is_shortest(order):
    """Breadth-first: the first tile lands and both warps reach their bar.sync, which nothing completes."""
    report = check_ring(RingProtocol(1, 2, order=order, prologue_arrive=False))
    (v,) = report.violations
    assert v.kind == "deadlock"
    assert v.message == ("no agent can move: producer at iteration 1, a consumer warp of group 0 at bar.sync "
                         "(iteration 0), a consumer warp of group 1 at bar.sync (iteration 0)")
    assert v.trace == (
        "producer acquires slot 0 for iteration 0", "producer issues iteration 0 into slot 0",
        "copy of iteration 0 lands in slot 0",
        "consumer warp of group 0 waits slot 0 (iteration 0)", "consumer warp of group 0 bar.sync b0 (iteration 0)",
        "consumer warp of group 1 waits slot 0 (iteration 0)", "consumer warp of group 1 bar.sync b1 (iteration 0)")


def test_deadlock_counts_the_warps_of_a_group():
    report = check_ring(RingProtocol(3, 4, order=(0, 1), prologue_arrive=False))
    assert [v.kind for v in report.violations] == ["deadlock"]
    assert "2 consumer warps of group 0 at bar.sync (iteration 0)" in report.violations[0].message


@pytest.mark.parametrize("kw,match", [
    (dict(order=(0, 0)), "ring order must be"), (dict(order=(1, 2)), "ring order must be"),
    (dict(order=[0, 1]), "ring order must be"), (dict(order=(0,)), "ring order must be"),
    (dict(order=(True, False)), "ring order must be"), (dict(order=(0, "1")), "ring order must be"),
    (dict(consumers=3, order=(0, 1)), "multiple of the 2 ordered groups"),
    (dict(order=(0, 1), bar_count=0), "ring bar_count must be"),
    (dict(order=(0, 1), bar_count=True), "ring bar_count must be")])
def test_bad_order_parameters_are_refused(kw, match):
    with pytest.raises(InputError, match=match):
        RingProtocol(**{"depth": 2, "consumers": 4, **kw})


# ---------------------------------------------------------------------------- several turns per iteration
# FA3's ping-pong of tensor-core runs: each iteration's body takes `sections` turns (one per GEMM)
@pytest.mark.parametrize("sections", [2, 3])
@pytest.mark.parametrize("depth,consumers,order", [(1, 2, (0, 1)), (2, 2, (1, 0)), (3, 4, (0, 1)),
                                                   (2, 3, (2, 0, 1)), (2, 4, (3, 2, 1, 0))])
def test_ring_with_several_sections_per_iteration_has_no_violation(depth, consumers, order, sections):
    report = check_ring(RingProtocol(depth, consumers, order=order, sections=sections))
    assert report.ok, report.violations
    # more states than one section: the token goes round `sections` times per iteration
    assert report.states > check_ring(RingProtocol(depth, consumers, order=order)).states


@pytest.mark.parametrize("bug", sorted(ORDER_BUGS))
@pytest.mark.parametrize("depth,consumers,order", [(1, 2, (0, 1)), (2, 4, (1, 0)), (2, 3, (2, 0, 1))])
def test_seeded_order_bug_with_sections_is_caught(bug, depth, consumers, order):
    fields, kind = ORDER_BUGS[bug]
    report = check_ring(RingProtocol(depth, consumers, order=order, sections=2, **fields))
    assert not report.ok and report.violations[0].kind == kind, report.violations[:1]
    assert report.violations[0].trace


def test_a_section_out_of_turn_names_its_section():
    report = check_ring(RingProtocol(2, 2, order=(0, 1), sections=2, pass_after_read=False))
    assert "section 0 of iteration 0" in report.violations[0].message
    wide = check_ring(RingProtocol(2, 4, order=(0, 1), sections=2, bar_count=2))
    assert not wide.ok and wide.violations[0].kind in ("order", "deadlock", "barrier-leftover")


def test_a_release_before_the_last_section_is_caught():
    report = check_ring(RingProtocol(2, 2, order=(0, 1), sections=2, release_after_read=False))
    assert not report.ok and report.violations[0].kind == "overwrite"


@pytest.mark.parametrize("kw,match", [
    (dict(sections=0), "ring sections must be"), (dict(sections=9), "ring sections must be"),
    (dict(sections=True), "ring sections must be"), (dict(sections=2), "need an order"),
    (dict(sections=2, order=(0, 1), release_lag=1, groups=2), "need an order and release_lag 0")])
def test_bad_sections_are_refused(kw, match):
    with pytest.raises(InputError, match=match):
        RingProtocol(**{"depth": 2, "consumers": 4, **kw})


# ---------------------------------------------------------------------------- a turn across the back edge
# The last section of iteration i and the first of i + 1 are one turn (FA3's ping-pong of O_i and S_{i+1})
@pytest.mark.parametrize("sections", [2, 3])
@pytest.mark.parametrize("depth,consumers,order", [(2, 2, (0, 1)), (2, 2, (1, 0)), (3, 4, (0, 1)),
                                                   (2, 3, (2, 0, 1)), (3, 8, (0, 1))])
def test_a_wrapped_turn_has_no_violation(depth, consumers, order, sections):
    for n in (1, 2, depth + 2):
        report = check_ring(RingProtocol(depth, consumers, order=order, sections=sections, wrap=True), n)
        assert report.ok, (n, report.violations)


@pytest.mark.parametrize("consumers,order", [(2, (0, 1)), (3, (1, 2, 0))])
def test_a_wrapped_turn_with_one_slot_deadlocks(consumers, order):
    """The turn holds the token across the ring's release and the wait on the next slot: with one slot the
    group holding it waits for a tile the producer can only load once the next group has read the last."""
    report = check_ring(RingProtocol(1, consumers, order=order, sections=2, wrap=True), 3)
    assert [v.kind for v in report.violations] == ["deadlock"]
    assert check_ring(RingProtocol(1, consumers, order=order, sections=2), 3).ok   # a turn per section does not


@pytest.mark.parametrize("bug", sorted(ORDER_BUGS))
@pytest.mark.parametrize("depth,consumers,order", [(2, 2, (0, 1)), (2, 4, (1, 0)), (2, 3, (2, 0, 1))])
def test_seeded_order_bug_with_a_wrapped_turn_is_caught(bug, depth, consumers, order):
    fields, kind = ORDER_BUGS[bug]
    report = check_ring(RingProtocol(depth, consumers, order=order, sections=2, wrap=True, **fields))
    assert not report.ok and report.violations[0].kind == kind, report.violations[:1]


def test_a_wrapped_turn_counts_fewer_turns():
    """One generation of each named barrier per iteration instead of two: fewer states than a turn per
    section, and the release inside the turn still follows the last read."""
    wrapped = check_ring(RingProtocol(3, 4, order=(0, 1), sections=2, wrap=True))
    apart = check_ring(RingProtocol(3, 4, order=(0, 1), sections=2))
    assert wrapped.ok and apart.ok and wrapped.states < apart.states
    early = check_ring(RingProtocol(2, 2, order=(0, 1), sections=2, wrap=True, release_after_read=False))
    assert not early.ok and early.violations[0].kind == "overwrite"


@pytest.mark.parametrize("kw", [dict(wrap=True), dict(wrap=1, sections=2, order=(0, 1)),
                                dict(wrap=True, sections=1, order=(0, 1))])
def test_bad_wrap_is_refused(kw):
    with pytest.raises(InputError, match="ring wrap must be a bool"):
        RingProtocol(**{"depth": 2, "consumers": 4, **kw})


# ---------------------------------------------------------------------------- the look-ahead turn
# Iteration i's turn issues S_i (slot i) and O_{i-1} (slot i - 1, left in flight to the wait): release lag 1,
# one more turn after the loop around the last O (epilogue_turn), the last group's epilogue pass skipped.
def _ahead(depth, consumers, order, **kw):
    return RingProtocol(depth, consumers, order=order, **{"release_lag": 1, "groups": 2, "epilogue_turn": True, **kw})


@pytest.mark.parametrize("depth,consumers,order", [(2, 2, (0, 1)), (2, 2, (1, 0)), (3, 4, (0, 1)),
                                                   (2, 3, (2, 0, 1)), (2, 8, (0, 1))])
def test_a_look_ahead_turn_has_no_violation(depth, consumers, order):
    for n in (1, 2, depth + 2):
        report = check_ring(_ahead(depth, consumers, order), n)
        assert report.ok, (n, report.violations)


LOOKAHEAD_BUGS = {
    **ORDER_BUGS,
    "release before the wait": (dict(release_after_read=False), "overwrite"),
    "a wait leaving the previous O in flight": (dict(wait_pending=3), "overwrite"),
    "every group passes after the loop": (dict(skip_last_pass=False), "barrier-leftover"),
    "no final release": (dict(final_release=False), "deadlock"),
}


@pytest.mark.parametrize("bug", sorted(LOOKAHEAD_BUGS))
@pytest.mark.parametrize("depth,consumers,order", [(2, 2, (0, 1)), (2, 4, (1, 0)), (2, 3, (2, 0, 1))])
def test_seeded_bug_of_the_look_ahead_turn_is_caught(bug, depth, consumers, order):
    fields, kind = LOOKAHEAD_BUGS[bug]
    report = check_ring(_ahead(depth, consumers, order, **fields))
    assert not report.ok and report.violations[0].kind == kind, (bug, report.violations[:1])


def test_the_epilogue_turn_is_taken_in_order():
    """The last group's epilogue turn waits for the first group's: out of turn it is an order violation; the
    states of the turn after the loop are explored (more than without it)."""
    with_turn = check_ring(_ahead(2, 2, (0, 1)), 3)
    without = check_ring(RingProtocol(2, 2, order=(0, 1), release_lag=1, groups=2), 3)
    assert with_turn.ok and without.ok and with_turn.states > without.states
    early = check_ring(_ahead(2, 2, (0, 1), pass_after_read=False), 3)
    assert not early.ok and early.violations[0].kind == "order"


@pytest.mark.parametrize("kw", [dict(epilogue_turn=True), dict(epilogue_turn=True, order=(0, 1)),
                                dict(epilogue_turn=1, order=(0, 1), release_lag=1),
                                dict(epilogue_turn=True, release_lag=1)])
def test_bad_epilogue_turn_is_refused(kw):
    with pytest.raises(InputError, match="ring epilogue_turn must be a bool"):
        RingProtocol(**{"depth": 2, "consumers": 4, **kw})


def test_a_repeated_check_is_answered_from_the_first_and_the_answers_kept_are_bounded():
    """The transform checks the protocol it emitted and the same protocol read off the compiled kernel: the
    second check returns the first's report; other iterations are checked anew; at most 64 kept."""
    from tvm_twill.model import protocol

    first = check_ring(RingProtocol(2, 3))
    assert check_ring(RingProtocol(2, 3)) is first
    assert check_ring(RingProtocol(2, 3), 3) is not first and check_ring(RingProtocol(2, 3), 3).iterations == 3
    for depth in range(1, 9):
        for consumers in range(1, 10):
            check_ring(RingProtocol(depth, consumers), 1)
    assert len(protocol._REPORTS) <= 64
    assert check_ring(RingProtocol(2, 3)).states == first.states and check_ring(RingProtocol(2, 3)).ok
