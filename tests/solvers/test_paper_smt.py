"""The paper-faithful encoding (Figures 4-6) and Algorithm 1: checker-valid, and exact at (ii, L)."""
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bruteforce
from bruteforce import bounded
from strategies import graphs, machine
from tvm_twill.errors import InfeasibleError, InputError, SolverTimeoutError, SolverUnavailableError
from tvm_twill.model import Edge, Graph, Machine, Op, check, get_machine, make_schedule, rec_mii, res_mii
from tvm_twill.solvers import prepare
from tvm_twill.solvers.paper_smt import copies_and_horizon, paper_search, paper_smt_solve
from tvm_twill.solvers.smt import JointProblem

H100 = get_machine("h100")


def fixed(examples):
    """Deterministic hypothesis settings with ``examples`` examples."""
    return settings(max_examples=examples, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def figure1():
    return Graph("fa_fwd_fig1", (Op("S", 1, "TC", regs=64, warps=4), Op("P", 1, "SFU", regs=64, warps=4),
                                 Op("O", 1, "TC", regs=64, warps=4)),
                 (Edge("S", "P", 1, 0, True), Edge("P", "O", 1), Edge("O", "O", 1, 1)),
                 machine="h100", normalize=False)


def schedule(g, m, ii, times, warps):
    return make_schedule(g, m.name, ii, times, warps, {op.name: op.cycles for op in g.ops})


def test_figure1_gives_the_flash_attention_3_pipeline():
    g = figure1()
    s = paper_search(g, H100, time_limit=60)
    assert (s.ii, s.length) == (2, 4)
    assert s.stage("S") == 0 and s.stage("O") == 1
    assert check(s, g, H100) == []
    assert not s.optimal and s.lower_bound.ii == 2
    assert [(a.ii, a.length, a.result, a.solver) for a in s.attempts] == [(2, 4, "sat", "paper-smt")]


def test_figure1_p_may_take_either_stage():
    # Rules 1-6 leave P's stage open (the default solver's latest-times tie-break
    # puts it in stage 1); Algorithm 1 returns whichever z3 finds first.
    g = figure1()
    late = schedule(g, H100, 2, {"S": 0, "P": 2, "O": 3}, {"S": 0, "P": 1, "O": 1})
    early = schedule(g, H100, 2, {"S": 0, "P": 1, "O": 3}, {"S": 0, "P": 0, "O": 1})
    assert check(late, g, H100) == [] and check(early, g, H100) == []


def test_figure1_shorter_or_faster_is_unsat():
    g = figure1()
    assert paper_smt_solve(g, H100, 2, 3) is None  # O cannot share S's TC slot before cycle 3
    assert paper_smt_solve(g, H100, 1, 8) is None  # S and O both need the TC every iteration


@fixed(100)
@given(g=graphs(max_ops=5), warp_groups=st.integers(2, 3), extra_ii=st.integers(0, 2), extra_l=st.integers(0, 4))
def test_exactly_as_strict_as_the_checker(g, warp_groups, extra_ii, extra_l):
    """sat at (ii, L) iff a schedule of length <= L passes rules 1-6, decided
    independently by the default encoding; every answer passes the checker."""
    m = machine(warp_groups=warp_groups, regs=200)
    pg = prepare(g, m).graph
    ii = max(res_mii(pg, m), rec_mii(pg)) + extra_ii
    length = max(1, max(op.cycles for op in pg.ops) + extra_l)
    found = paper_smt_solve(pg, m, ii, length)
    reference = JointProblem(pg, m, ii).solve(max_length=length, time_limit=30)
    assert (found is not None) == (reference.status == "sat")
    if found is not None:
        s = schedule(pg, m, ii, *found)
        assert check(s, pg, m) == [] and s.length <= length


@fixed(30)
@given(graphs(max_ops=4, max_cycles=2, pressure=False))
def test_search_is_valid_and_its_skipped_ii_are_infeasible(g):
    m = machine(warp_groups=2)
    pg = prepare(g, m).graph
    lb = max(res_mii(pg, m), rec_mii(pg))
    try:
        s = paper_search(pg, m, time_limit=30, max_ii=lb + 4)
    except InfeasibleError:
        return  # Algorithm 1 is incomplete: no claim to test
    assert check(s, pg, m) == []
    assert bounded(bruteforce.feasible, pg, m, s.ii) is not None  # (the brute force agrees it is valid)
    # every ii it skipped as 'infeasible' really has no modulo schedule
    for a in s.attempts:
        if a.result == "infeasible":
            assert bounded(bruteforce.feasible, pg, m, a.ii) is None


def test_a_long_lifetime_counts_every_live_instance():
    # A's value is read 3 iterations later: with A and B in the same cycle, three
    # instances (300 registers) are live.  Q with the paper's ceil(L/ii) = 1 copy
    # would see one; with 1 + dmax copies it sees all three.
    m = Machine("m", {"ALU": 1, "SFU": 1}, warp_groups=2, regs_per_thread_max=255)
    g = Graph("lifetime", (Op("A", 1, "ALU", regs=100), Op("B", 1, "SFU")), (Edge("A", "B", 1, 3),))
    assert copies_and_horizon(g, 1, 1) == (4, 4)
    assert check(schedule(g, m, 1, {"A": 0, "B": 0}, {"A": 0, "B": 0}), g, m)[0].rule == 5
    assert paper_smt_solve(g, m, 1, 1) is None
    times, warps = paper_smt_solve(g, m, 1, 3)
    assert check(schedule(g, m, 1, times, warps), g, m) == []


def test_a_same_cycle_use_holds_nothing():
    # B reads A in A's own cycle (delay 0): A's 200 KB are live over an empty
    # interval, so they fit beside X's 100 KB (the literal DeadProp-1 would not).
    m = Machine("m", {"TC": 1, "SFU": 1, "ALU": 1}, warp_groups=2, smem_bytes=232448)
    g = Graph("same_cycle", (Op("A", 1, "TC", smem=200_000), Op("B", 1, "SFU"), Op("X", 1, "ALU", smem=100_000)),
              (Edge("A", "B", 0), Edge("X", "X", 1, 1)))
    times, warps = paper_smt_solve(g, m, 1, 1)
    assert times == {"A": 0, "B": 0, "X": 0}
    assert check(schedule(g, m, 1, times, warps), g, m) == []


def test_a_zero_cycle_op_may_end_the_schedule():
    g = Graph("streaming_tail", (Op("A", 1, "TC"), Op("Z", 0, "ALU")), (Edge("A", "Z", 1),))
    times, _ = paper_smt_solve(g, H100, 1, 1)
    assert times == {"A": 0, "Z": 1}


def test_register_pressure_splits_warps_and_variable_latency_gets_the_last_warp():
    g = Graph("split", (Op("L", 1, "TMA", variable_latency=True), Op("A", 1, "TC", regs=150),
                        Op("B", 1, "SFU", regs=150), Op("C", 1, "ALU")),
              (Edge("L", "A", 1), Edge("A", "C", 2), Edge("B", "C", 2)))
    s = paper_search(g, H100, time_limit=60)
    assert check(s, g, H100) == []
    assert s.ops["L"].warp == H100.warp_groups - 1
    assert s.ops["A"].warp != s.ops["B"].warp
    assert H100.warp_groups - 1 not in {s.ops[n].warp for n in "ABC"}


def test_algorithm1_misses_an_ii_that_needs_a_longer_schedule():
    # At ii = 2 the modulo ILP's length is 2 (A and B together), so Algorithm 1
    # tries only L = 2; B's blocking wait on A needs L = 3, and the search moves
    # on to ii = 3 although ii = 2 works.  Hence optimal = False.
    g = Graph("window", (Op("A", 1, "ALU"), Op("B", 2, "TC")), (Edge("A", "B", 0, 0, True),))
    s = paper_search(g, H100, time_limit=60)
    assert s.ii == 3 and not s.optimal
    assert [(a.ii, a.length, a.result) for a in s.attempts] == [(2, 2, "unsat"), (3, 2, "unsat"), (3, 3, "sat")]
    times, warps = paper_smt_solve(g, H100, 2, 3)
    assert check(schedule(g, H100, 2, times, warps), g, H100) == []


def test_search_reports_time_and_infeasibility():
    with pytest.raises(SolverTimeoutError, match="ran out of time .* in the modulo ILP at ii=2") as err:
        paper_search(figure1(), H100, time_limit=0)
    assert [(a.ii, a.result) for a in err.value.attempts] == [(2, "timeout")]
    heavy = Graph("heavy", (Op("A", 1, "TC", regs=300), Op("B", 1, "SFU")), (Edge("A", "B", 1),))
    with pytest.raises(InfeasibleError, match=r"no schedule for 'heavy' on 'h100' with ii in \[1, 3\]"):
        paper_search(heavy, H100, max_ii=3)


def test_errors_name_the_problem(monkeypatch):
    with pytest.raises(InputError, match="length must be an integer >= 1, got 0"):
        paper_smt_solve(figure1(), H100, 2, 0)
    with pytest.raises(SolverTimeoutError, match="ran out while building the Figure 4 constraints"):
        paper_smt_solve(figure1(), H100, 2, 4, time_limit=0)
    monkeypatch.setitem(sys.modules, "z3", None)
    with pytest.raises(SolverUnavailableError, match="pip install z3-solver"):
        paper_smt_solve(figure1(), H100, 2, 4)
