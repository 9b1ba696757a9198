"""Properties of the default solver: validity, lower bounds, brute-force optimality."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bruteforce
from bruteforce import bounded
from strategies import graphs, machine
from tvm_twill.errors import InfeasibleError
from tvm_twill.model import Edge, Graph, Machine, Op, check, get_machine, rec_mii, res_mii
from tvm_twill.solvers import SolveOptions, prepare, solve
from tvm_twill.solvers.smt import JointProblem, time_bound

# Brute-force oracles reject examples over their search bound (bruteforce.MAX_NODES),
# so a few rejections are expected: they keep the suite's time bounded.
SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@SETTINGS
@given(g=graphs(), warp_groups=st.integers(2, 3))
def test_random_schedules_pass_checker_and_bounds(g, warp_groups):
    m = machine(warp_groups=warp_groups, regs=200)
    try:
        s = solve(g, m, time_limit=60)
    except InfeasibleError as e:
        assert e.family in {"registers", "memory", "variable latency", "blocking sync", "resources", "dependence"}
        return
    # streaming loads are scheduled with zero latency: check against the prepared graph
    pg = prepare(g, m).graph
    assert check(s, pg, m) == []
    assert s.ii >= max(res_mii(pg, m), rec_mii(pg))
    assert s.optimal and s.lower_bound.ii == s.ii
    assert s.length == max(s.ops[n].time + s.cycles[n] for n in g.names)
    # every smaller ii that the search tried was proven impossible
    assert all(a.result == "unsat" for a in s.attempts if a.ii < s.ii)


@SETTINGS
@given(graphs(max_ops=6, max_cycles=2, pressure=False))
def test_ii_equals_brute_force_optimum(g):
    m = machine(warp_groups=2)
    pg = prepare(g, m).graph  # the brute force schedules the same prepared graph
    try:
        s = solve(g, m, time_limit=60)
    except InfeasibleError:
        assert bounded(bruteforce.min_ii, pg, m, 12) is None
        return
    # brute force: every smaller ii is impossible, and ii itself is possible
    for ii in range(1, s.ii):
        assert bounded(bruteforce.feasible, pg, m, ii) is None, f"brute force found a schedule at ii={ii} < {s.ii}"
    assert bounded(bruteforce.feasible, pg, m, s.ii) is not None


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.filter_too_much])
@given(graphs(max_ops=5, max_cycles=2, pressure=False))
def test_cross_warp_sync_brute_force(g):
    m = machine(warp_groups=2)
    opts = SolveOptions(cross_warp_sync=True)
    try:
        s = solve(g, m, options=opts)
    except InfeasibleError:
        assert bounded(bruteforce.min_ii, prepare(g, m).graph, m, 12, cross_warp_sync=True) is None
        return
    pg = prepare(g, m).graph
    assert check(s, pg, m, cross_warp_sync=True) == []
    for ii in range(1, s.ii):
        assert bounded(bruteforce.feasible, pg, m, ii, cross_warp_sync=True) is None


def fig1():
    return Graph("fig1", (Op("S", 1, "TC", regs=64, warps=4), Op("P", 1, "SFU", regs=64, warps=4),
                          Op("O", 1, "TC", regs=64, warps=4)),
                 (Edge("S", "P", 1, blocking=True), Edge("P", "O", 1), Edge("O", "O", 1, distance=1)),
                 machine="h100", normalize=False)


def test_figure1_paper_schedule():
    s = solve(fig1())
    assert (s.ii, s.length, s.optimal) == (2, 4, True)
    assert (s.ops["S"].stage, s.ops["P"].stage, s.ops["O"].stage) == (0, 1, 1)
    # the blocking wait of P cannot share a warp with the next S issuing at the same slot
    assert s.ops["P"].warp != s.ops["S"].warp


def test_register_limit_forces_larger_ii_and_names_the_family():
    # A's 200-register value lives 3 cycles: at ii < 3 two instances overlap (400 > 255).
    m = Machine("one", units={"TC": 1, "ALU": 1}, warp_groups=1, regs_per_thread_max=255)
    g = Graph("regs", (Op("A", 1, "TC", regs=200), Op("B", 1, "ALU")), (Edge("A", "B", 3),),
              normalize=False)
    s = solve(g, m)
    assert max(res_mii(g, m), rec_mii(g)) == 1 and s.ii == 3
    assert check(s, g, m) == []
    unsat = [a for a in s.attempts if a.result == "unsat" and a.length is None]
    assert [a.ii for a in unsat] == [1, 2] and all("registers" in a.reason for a in unsat)


def test_infeasible_for_every_ii_terminates_with_reason():
    # The only non-producer warp must hold X and Y together: 2 x 200 > 255.
    m = Machine("two", units={"TC": 1, "TMA": 1}, warp_groups=2, regs_per_thread_max=255)
    g = Graph("never", (Op("L", 1, "TMA", variable_latency=True), Op("X", 1, "TC", regs=200),
                        Op("Y", 1, "TC", regs=200), Op("Z", 1, "TC")),
              (Edge("L", "X", 1), Edge("X", "Y", 1), Edge("X", "Z", 1), Edge("Y", "Z", 1)),
              normalize=False)
    with pytest.raises(InfeasibleError, match=r"no schedule .* for any ii .*registers") as ei:
        solve(g, m)
    assert ei.value.family == "registers"


def test_time_bound_loses_no_schedule_on_chain():
    # A long loop-carried chain: the bound must admit the stretched schedule.
    g = Graph("chain", (Op("a", 3, "TC"), Op("b", 3, "SFU"), Op("c", 3, "ALU")),
              (Edge("a", "b", 3), Edge("b", "c", 3), Edge("c", "a", 3, distance=3)), normalize=False)
    m = get_machine("h100")
    s = solve(g, m)
    assert s.ii == max(res_mii(g, m), rec_mii(g)) == 3
    assert max(p.time for p in s.ops.values()) <= time_bound(g, m, s.ii)


def test_unsat_core_for_resources():
    g = Graph("tc2", (Op("a", 2, "TC"), Op("b", 2, "TC")), (), normalize=False)
    r = JointProblem(g, get_machine("h100"), 3).solve()
    assert r.status == "unsat" and r.core == ("resources",)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(graphs(max_ops=6, max_cycles=3, pressure=False, vl=False, blocking=False, spill=False))
def test_ilp_and_smt_agree_on_ii_when_no_warp_or_memory_constraint_binds(g):
    from tvm_twill.solvers.modulo_ilp import modulo_schedule_ilp
    m = machine(warp_groups=2)
    s = solve(g, m)
    assert modulo_schedule_ilp(g, m, s.ii) is not None
    for ii in range(1, s.ii):
        assert modulo_schedule_ilp(g, m, ii) is None


def test_solve_is_deterministic_across_calls_and_time_limits():
    from tvm_twill.data import load_example
    g = load_example("fa_fwd_blackwell")
    runs = [solve(g, time_limit=t) for t in (30, 30, 120)]
    placements = [{n: (p.time, p.warp, p.order) for n, p in s.ops.items()} for s in runs]
    assert placements[0] == placements[1] == placements[2]


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.filter_too_much])
@given(graphs(min_ops=2, max_ops=4, max_cycles=2, pressure=True))
def test_ii_equals_brute_force_optimum_under_register_pressure(g):
    m = machine(warp_groups=2, regs=200)  # two 128-register values cannot share a warp
    pg = prepare(g, m).graph
    try:
        s = solve(g, m, time_limit=60)
    except InfeasibleError:
        assert all(bounded(bruteforce.feasible_with_pressure, pg, m, ii) is None for ii in range(1, 7))
        return
    for ii in range(1, s.ii):
        assert bounded(bruteforce.feasible_with_pressure, pg, m, ii) is None, f"brute force: ii={ii} < {s.ii} works"
    assert bounded(bruteforce.feasible_with_pressure, pg, m, s.ii) is not None
