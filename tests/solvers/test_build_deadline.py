"""Building the z3 model reads the deadline (issue #38, item 8): a 1000-op graph, within the documented limits,
whose model at the lower-bound ii takes minutes to build, gets the best schedule in hand (the heuristic's or the
serial one, not proven optimal) about when its time limit passes.  No timings: the second test runs the solve on
a clock that advances with the constraints added to z3 (work, not wall time), so where it stops is exact."""
import os
import sys

import pytest

pytest.importorskip("z3")

from tvm_twill.model import check  # noqa: E402
from tvm_twill.solvers import SolveOptions, prepare, search, smt, solve_prepared  # noqa: E402
from tvm_twill.solvers.limits import Deadline  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from scale_graphs import tight_graph  # noqa: E402


@pytest.fixture(scope="module")
def big():
    """1000 ops (1299 edges) on a two-role H100: lower bound 5226, its model ~400,000 constraints."""
    return tight_graph(1000, 0)


def _solve(g, dl: Deadline, **options):
    """``solve(g, ...)`` as it runs it (prepare, then the search, under one deadline), and the prepared graph the
    schedule is checked on."""
    opts = SolveOptions(time_limit=dl.limit, **options)
    prep = prepare(g, options=opts, deadline=dl)
    return solve_prepared(prep, opts, deadline=dl), prep


def _valid_and_not_passed_off_as_optimal(s, prep):
    assert check(s, prep.graph, prep.machine) == []
    assert s.lower_bound.ii <= s.ii and s.optimal == (s.lower_bound.ii == s.ii)


def test_a_1000_op_graph_with_a_one_second_limit_gets_a_valid_schedule(big):
    s, prep = _solve(big, Deadline(1.0))
    _valid_and_not_passed_off_as_optimal(s, prep)
    assert not s.optimal and s.ii > s.lower_bound.ii == 5226   # the exact search had no time to prove more


def test_building_the_model_stops_at_the_deadline(big, monkeypatch):
    """A clock of work: each z3 term added and each clock read is 1e-4 s, so the 1 s deadline passes after
    10,000 steps, nearly all of them in the model at ii=5226 (~400,000 terms, the first model built; without the
    heuristic, whose time is not z3's, the incumbent is the serial schedule).  The solve stops building within a
    tick of the deadline (at most TICK_EVERY steps of a family's loop, or one op's pairs on a unit) and returns
    the incumbent; before the fix it built on to the end of the resource family (~30 s of this clock)."""
    z3 = pytest.importorskip("z3")
    work = [0]
    add = z3.Solver.add

    def counted(self, *args):
        work[0] += len(args)
        return add(self, *args)

    def clock():
        work[0] += 1
        return work[0] * 1e-4
    monkeypatch.setattr(z3.Solver, "add", counted)
    builds = []
    joint = search.JointProblem

    def recorded(*a, **kw):
        builds.append(a[2])
        return joint(*a, **kw)
    monkeypatch.setattr(search, "JointProblem", recorded)
    s, prep = _solve(big, Deadline(1.0, clock=clock), heuristic=False)
    _valid_and_not_passed_off_as_optimal(s, prep)
    assert builds == [5226] and not s.optimal and s.lower_bound.ii == 5226
    assert [(a.result, a.solver) for a in s.attempts] == [("sat", "serial"), ("timeout", "smt")]
    assert s.attempts[-1].ii == 5226
    most_per_tick = 2 * len(big.ops) + 8 * smt.TICK_EVERY + 100   # one op's pairs on a unit, or TICK_EVERY steps
    assert 1.0 - 0.1 <= work[0] * 1e-4 <= 1.0 + most_per_tick * 1e-4   # of a loop; the answer's few reads
