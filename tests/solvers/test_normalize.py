"""Cost normalization (paper section 5.2): exact ratios, optimal distortion, graph rewriting."""
import itertools
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvm_twill.errors import GraphError, InputError, SolverUnavailableError
from tvm_twill.model import Edge, Graph, Op, get_machine
from tvm_twill.solvers.normalize import Normalization, normalize_costs, normalize_graph


def brute_force(costs, U):
    """(F, sum C') of the lexicographic optimum, by enumerating every C'."""
    n = len(costs)
    best = None
    for c in itertools.product(range(1, U + 1), repeat=n):
        if sum(c) > U:
            continue
        f = max((abs(costs[i] * c[j] - costs[j] * c[i]) for i in range(n) for j in range(i + 1, n)), default=0)
        best = min(best or (f, sum(c)), (f, sum(c)))
    return best


def test_exact_ratios_have_no_distortion():
    n = normalize_costs([1024, 1024, 512])
    assert n == Normalization(mapping={512: 1, 1024: 2}, distortion=0, max_ratio_error=0.0, U=300)
    assert normalize_costs([1024, 1024, 512], objective="paper").mapping == n.mapping


def test_small_coprime_costs_stay_as_they_are():
    # identity has F = 0 and, with gcd 1, the least sum among F = 0 solutions
    assert normalize_costs([1, 3, 7]).mapping == {1: 1, 3: 3, 7: 7}


def test_zero_stays_zero_and_common_factor_is_divided_out():
    n = normalize_costs([6, 0, 9, 6])
    assert n.mapping == {0: 0, 6: 2, 9: 3}
    assert n.distortion == 0


def test_awkward_costs_report_their_distortion():
    n = normalize_costs([1000, 1, 333, 977], U=300)
    assert n.distortion > 0 and n.max_ratio_error > 0
    assert all(v >= 1 for v in n.mapping.values())
    assert sum(n.mapping.values()) <= 300
    # the report is what the mapping does to the worst pair
    c = sorted(n.mapping)
    worst = max(abs(1 - (n.mapping[a] * b) / (n.mapping[b] * a)) for a in c for b in c if a != b)
    assert n.max_ratio_error == pytest.approx(worst)


def test_max_ratio_error_of_near_equal_costs_is_small():
    n = normalize_costs([997, 919])
    assert n.mapping == {919: 106, 997: 115}
    assert n.max_ratio_error < 1e-4


@settings(max_examples=25, deadline=None, derandomize=True)
@given(costs=st.lists(st.integers(1, 60), min_size=1, max_size=3, unique=True), U=st.integers(3, 14))
def test_paper_objective_is_optimal_against_brute_force(costs, U):
    n = normalize_costs(costs, U=U, objective="paper")
    got = (n.distortion, sum(n.mapping[c] for c in costs))
    assert got == brute_force(sorted(costs), U)


def relative_error(costs, c):
    n = len(costs)
    return max((abs(1 - (c[i] * costs[j]) / (c[j] * costs[i])) for i in range(n) for j in range(n) if i != j),
               default=0.0)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(costs=st.lists(st.integers(1, 60), min_size=2, max_size=3, unique=True), U=st.integers(3, 30))
def test_relative_objective_is_optimal_against_brute_force(costs, U):
    costs = sorted(costs)
    n = normalize_costs(costs, U=U)
    best = min(relative_error(costs, c) for c in itertools.product(range(1, U + 1), repeat=len(costs))
               if sum(c) <= U)
    # bisection stops at a relative width of 1e-3
    assert n.max_ratio_error <= best * (1 + 2e-3) + 1e-9
    assert n.max_ratio_error == pytest.approx(relative_error(costs, [n.mapping[c] for c in costs]))


def test_relative_objective_resolves_measured_costs_the_paper_objective_merges():
    costs = [137, 262, 533, 541, 1029, 1037, 1049, 1090]   # fa_fwd_hopper_measured
    paper, rel = normalize_costs(costs, objective="paper"), normalize_costs(costs)
    assert paper.max_ratio_error > 0.15 and rel.max_ratio_error < 0.035
    assert rel.distortion >= paper.distortion            # the paper's F is what the paper objective minimizes
    assert sum(rel.mapping[c] for c in costs) <= 300 and rel.objective == "relative"


@settings(max_examples=15, deadline=None, derandomize=True)
@given(costs=st.lists(st.integers(1, 200), min_size=1, max_size=5, unique=True), k=st.integers(2, 9))
def test_scaling_every_cost_changes_nothing(costs, k):
    a = normalize_costs(costs)
    b = normalize_costs([k * c for c in costs])
    assert [a.mapping[c] for c in costs] == [b.mapping[k * c] for c in costs]
    assert b.distortion == k * a.distortion


def test_bad_inputs_are_input_errors():
    with pytest.raises(InputError, match="U must be at least 3"):
        normalize_costs([1, 2, 3], U=2)
    with pytest.raises(InputError, match="integers >= 0, got -4"):
        normalize_costs([1, -4])
    with pytest.raises(InputError, match="U must be an integer >= 1, got 0"):
        normalize_costs([1], U=0)
    with pytest.raises(InputError, match="objective must be one of relative, paper, rounding, got 'best'"):
        normalize_costs([1, 2], objective="best")


def test_missing_pulp_names_the_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "pulp", None)
    with pytest.raises(SolverUnavailableError, match="pip install pulp"):
        normalize_costs([2, 3])


def _raw_graph(spill=None):
    return Graph("raw", (Op("S", 1024, "TC", regs=64, spill_cost=spill), Op("P", 512, "SFU", regs=32, spill_cost=256),
                         Op("O", 1024, "TC", smem=4096, spill_cost=spill)),
                 (Edge("S", "P", 1024, 0, True), Edge("P", "O", 512), Edge("O", "O", 1024, 1)))


def test_normalize_graph_maps_cycles_delays_and_spills():
    g, n = normalize_graph(_raw_graph(spill=256), get_machine("h100"))
    assert n.mapping == {256: 1, 512: 2, 1024: 4}
    assert not g.normalize
    assert [(op.name, op.cycles, op.spill_cost, op.regs, op.smem) for op in g.ops] == [
        ("S", 4, 1, 64, 0), ("P", 2, 1, 32, 0), ("O", 4, 1, 0, 4096)]
    assert [(e.src, e.dst, e.delay, e.distance, e.blocking) for e in g.edges] == [
        ("S", "P", 4, 0, True), ("P", "O", 2, 0, False), ("O", "O", 4, 1, False)]


def test_normalize_graph_writes_the_machine_spill_cost_explicitly():
    # S and O have no spill_cost: the machine's (1 cycle) joins the values and is written on them
    g, n = normalize_graph(_raw_graph(), get_machine("h100"))
    assert 1 in n.mapping
    assert g.op("S").spill_cost == n.mapping[1] and g.op("O").spill_cost == n.mapping[1]
    assert g.op("P").spill_cost == n.mapping[256]


def test_explicit_rrt_cannot_be_normalized():
    g = Graph("rrt", (Op("A", 2, rrt=({"TC": 1}, {"TC": 1, "SFU": 1})),))
    with pytest.raises(GraphError, match="op 'A' has an explicit rrt, which cannot be rescaled"):
        normalize_graph(g, "h100")
