"""The modulo-scheduling ILP: against a brute force over issue times, and its edge cases."""
import itertools
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvm_twill.errors import GraphError, InputError, SolverTimeoutError, SolverUnavailableError
from tvm_twill.model import Edge, Graph, Op, check, get_machine, make_schedule, rec_mii, res_mii
from tvm_twill.solvers.modulo_ilp import default_max_time, modulo_schedule_ilp

H100 = get_machine("h100")
UNITS = ("TC", "SFU", "ALU")


def valid(graph, machine, ii, times):
    """Rules 1 (spill 0) and 2 of formats.md, written out again."""
    if any(times[e.dst] + e.distance * ii < times[e.src] + e.delay for e in graph.edges):
        return False
    use = {}
    for op in graph.ops:
        for j, row in enumerate(op.reservation()):
            for unit, n in row:
                key = (unit, (times[op.name] + j) % ii)
                use[key] = use.get(key, 0) + n
    return all(n <= machine.capacity(unit) for (unit, _), n in use.items())


def brute_force_length(graph, machine, ii):
    """Minimum length over every assignment of times in [0, horizon), or None."""
    horizon = (sum(e.delay for e in graph.edges) + sum(op.cycles for op in graph.ops)
               + (len(graph.edges) + 1) * ii)
    best = None
    for ts in itertools.product(range(horizon), repeat=len(graph.ops)):
        times = dict(zip(graph.names, ts))
        length = max(times[op.name] + op.cycles for op in graph.ops)
        if (best is None or length < best) and valid(graph, machine, ii, times):
            best = length
    return best


@st.composite
def tiny_graphs(draw, max_ops=3):
    n = draw(st.integers(1, max_ops))
    ops = tuple(Op(f"v{i}", draw(st.integers(1, 2)), draw(st.sampled_from(UNITS))) for i in range(n))
    edges = []
    for a, b in draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3)):
        distance = draw(st.integers(1, 2)) if a >= b else draw(st.integers(0, 1))
        edges.append(Edge(f"v{a}", f"v{b}", draw(st.integers(0, 2)), distance))
    return Graph("tiny", ops, tuple(edges), normalize=False)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(tiny_graphs())
def test_minimal_ii_and_length_match_brute_force(g):
    top = max(res_mii(g, H100), rec_mii(g)) + 2
    lengths = {ii: brute_force_length(g, H100, ii) for ii in range(1, top + 1)}
    feasible = [ii for ii, length in lengths.items() if length is not None]
    assert feasible, "two cycles above the lower bound every tiny graph fits"
    best = feasible[0]
    for ii in range(1, best):
        assert modulo_schedule_ilp(g, H100, ii) is None
    for ii in feasible:
        times = modulo_schedule_ilp(g, H100, ii)
        assert valid(g, H100, ii, times)
        assert max(times[op.name] + op.cycles for op in g.ops) == lengths[ii]


@settings(max_examples=20, deadline=None, derandomize=True)
@given(tiny_graphs(max_ops=5), st.integers(0, 3))
def test_default_horizon_cuts_off_no_optimum(g, extra):
    ii = max(res_mii(g, H100), rec_mii(g)) + extra
    bounded = modulo_schedule_ilp(g, H100, ii)
    loose = modulo_schedule_ilp(g, H100, ii, max_time=4 * default_max_time(g, ii) + 10)
    assert bounded is not None and loose is not None
    length = lambda t: max(t[op.name] + op.cycles for op in g.ops)  # noqa: E731
    assert (length(bounded), sum(bounded.values())) == (length(loose), sum(loose.values()))


def test_result_passes_the_checker_on_one_warp():
    g = Graph("chain", (Op("a", 2, "TC"), Op("b", 1, "SFU"), Op("c", 2, "TC")),
              (Edge("a", "b", 2), Edge("b", "c", 1), Edge("c", "a", 1, 1)))
    # ii = max(ResMII, RecMII) = 4 is infeasible: c can take neither of a's TC slots nor start by 4
    assert max(res_mii(g, H100), rec_mii(g)) == 4 and modulo_schedule_ilp(g, H100, 4) is None
    ii = 5
    times = modulo_schedule_ilp(g, H100, ii)
    s = make_schedule(g, "h100", ii, times, {n: 0 for n in g.names}, {op.name: op.cycles for op in g.ops})
    assert check(s, g, H100) == []


def test_none_below_res_mii():
    g = Graph("three_gemms", tuple(Op(n, 1, "TC") for n in "abc"))
    assert res_mii(g, H100) == 3
    assert modulo_schedule_ilp(g, H100, 2) is None
    assert sorted(modulo_schedule_ilp(g, H100, 3).values()) == [0, 1, 2]


def test_none_below_rec_mii():
    g = Graph("recurrence", (Op("a", 1, "TC"), Op("b", 1, "SFU")),
              (Edge("a", "b", 3), Edge("b", "a", 2, 1)))
    assert rec_mii(g) == 5
    assert modulo_schedule_ilp(g, H100, 4) is None
    assert modulo_schedule_ilp(g, H100, 5) == {"a": 0, "b": 3}


def test_reservation_rows_wrap_around_ii():
    # A holds TC in its rows 0 and 2; at ii = 3 B (one TC cycle) must take slot 1 of A's slots
    g = Graph("rrt", (Op("A", 3, rrt=({"TC": 1}, {"SFU": 1}, {"TC": 1})), Op("B", 1, "TC")))
    times = modulo_schedule_ilp(g, H100, 3)
    assert (times["B"] - times["A"]) % 3 == 1
    assert modulo_schedule_ilp(g, H100, 2) is None


def test_figure1_schedule_and_tie_break():
    # TC holds S and O; O may not share S's slot, so O waits a cycle (Figure 1(d))
    g = Graph("fig1", (Op("S", 1, "TC"), Op("P", 1, "SFU"), Op("O", 1, "TC")),
              (Edge("S", "P", 1, 0, True), Edge("P", "O", 1), Edge("O", "O", 1, 1)))
    assert modulo_schedule_ilp(g, H100, 1) is None
    assert modulo_schedule_ilp(g, H100, 2) == {"S": 0, "P": 1, "O": 3}
    assert modulo_schedule_ilp(g, H100, 3) == {"S": 0, "P": 1, "O": 2}


def test_small_max_time_makes_it_infeasible():
    g = Graph("chain", (Op("a", 1, "TC"), Op("b", 1, "TC")), (Edge("a", "b", 5),))
    assert modulo_schedule_ilp(g, H100, 2) == {"a": 0, "b": 5}
    assert modulo_schedule_ilp(g, H100, 2, max_time=4) is None


def test_errors_name_the_problem(monkeypatch):
    g = Graph("one", (Op("a", 1, "TC"),))
    with pytest.raises(InputError, match="ii must be an integer >= 1, got 0"):
        modulo_schedule_ilp(g, H100, 0)
    with pytest.raises(InputError, match="max_time must be an integer >= 0"):
        modulo_schedule_ilp(g, H100, 1, max_time=-1)
    with pytest.raises(GraphError, match="uses unit 'XU', which machine 'h100' does not have"):
        modulo_schedule_ilp(Graph("x", (Op("a", 1, "XU"),)), H100, 1)
    with pytest.raises(SolverTimeoutError, match="no time left"):
        modulo_schedule_ilp(g, H100, 1, time_limit=0)
    monkeypatch.setitem(sys.modules, "pulp", None)
    with pytest.raises(SolverUnavailableError, match="solver 'ilp' needs the Python package pulp, which is not installed: pip install pulp=="):
        modulo_schedule_ilp(g, H100, 1)
