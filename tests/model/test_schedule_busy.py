"""model.busy_share: the share of a modulo schedule's steady state in which a unit is busy (and Schedule.ii_optimal).

Checked against the tests' own helper (``steady_state.busy_fraction``, one row at a time, written apart from
the model) on solved schedules and on hand-placed ones whose share is known: an op longer than the ii fills
every slot, two ops on the same slots count once, a reservation table counts only its rows that use the unit.
"""
import pytest

from tvm_twill.data import load_example
from tvm_twill.model import Edge, Graph, Op, Placement, Schedule, busy_share, get_machine
from tvm_twill.solvers import solve
from steady_state import busy_fraction


def _sched(graph, ii, times):
    return Schedule(graph=graph.name, machine="h100", ii=ii, length=ii * 4,
                    ops={n: Placement(time=t, stage=t // ii, order=i, warp=0)
                         for i, (n, t) in enumerate(times.items())},
                    cycles={op.name: op.cycles for op in graph.ops})


@pytest.mark.parametrize("example", ["fa_fwd_fig1", "fa_fwd_hopper"])
def test_busy_share_agrees_with_the_row_by_row_count_on_solved_schedules(example):
    g = load_example(example)
    s = solve(g, get_machine(g.machine), time_limit=30)
    for unit in {u for op in g.ops for u in op.units()}:
        assert busy_share(s, g, unit) == pytest.approx(busy_fraction(s, g, unit)), unit


def test_busy_share_on_hand_placed_schedules():
    g = Graph("h", (Op("a", 3, "TC"), Op("b", 2, "TC"), Op("c", 9, "TC"),
                    Op("m", 3, rrt=({"TC": 1}, {"ALU": 1}, {"TC": 1, "ALU": 1}))),
              (Edge("a", "b", 3),), machine="h100", normalize=False)
    two = g.replace(ops=g.ops[:2], edges=())
    assert busy_share(_sched(two, 8, {"a": 0, "b": 3}), two, "TC") == 5 / 8
    assert busy_share(_sched(two, 8, {"a": 0, "b": 1}), two, "TC") == 3 / 8      # overlapping slots count once
    assert busy_share(_sched(two, 4, {"a": 2, "b": 0}), two, "TC") == 1.0        # wraps around the ii
    long = g.replace(ops=(g.ops[2],), edges=())
    assert busy_share(_sched(long, 4, {"c": 1}), long, "TC") == 1.0              # longer than the ii
    mixed = g.replace(ops=(g.ops[3],), edges=())
    s = _sched(mixed, 5, {"m": 1})
    assert busy_share(s, mixed, "TC") == 2 / 5 and busy_share(s, mixed, "ALU") == 2 / 5
    assert busy_share(s, mixed, "SFU") == 0
    for sched, graph in ((s, mixed), (_sched(two, 8, {"a": 0, "b": 1}), two)):
        for unit in ("TC", "ALU"):
            assert busy_share(sched, graph, unit) == pytest.approx(busy_fraction(sched, graph, unit))


def test_ii_optimal_is_optimal_or_at_the_lower_bound():
    from dataclasses import replace

    from tvm_twill.model import LowerBound
    g = load_example("fa_fwd_fig1")
    s = solve(g, get_machine(g.machine), time_limit=30)
    assert s.optimal and s.ii_optimal
    cut = replace(s, optimal=False)
    assert cut.ii_optimal == (s.lower_bound is not None and s.lower_bound.ii >= s.ii)
    assert replace(s, optimal=False, lower_bound=LowerBound(ii=s.ii, resource=1, recurrence=1)).ii_optimal
    assert not replace(s, optimal=False, lower_bound=LowerBound(ii=s.ii - 1, resource=1, recurrence=1)).ii_optimal
    assert not replace(s, optimal=False, lower_bound=None).ii_optimal
