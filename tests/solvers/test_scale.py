"""The search at scale: incumbent heuristic, symmetry breaking, every-ii refutation,
anytime answers and progress reports.  No timings: bench/solver.py --scale measures."""
import os
import sys
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bruteforce
from strategies import graphs, machine
from tvm_twill.data import load_example
from tvm_twill.errors import InfeasibleError, SolverTimeoutError
from tvm_twill.model import Edge, Graph, Machine, Op, check, rec_mii, res_mii
from tvm_twill.solvers import SolveOptions, prepare, search, solve
from tvm_twill.solvers.heuristic import incumbent, modulo_schedule, register_peak, try_ii, warp_candidates
from tvm_twill.solvers.progress import Progress, StderrProgress, gap
from tvm_twill.solvers.prune import refute_every_ii
from tvm_twill.solvers.smt import JointProblem, SmtResult
from tvm_twill.solvers.symmetry import interchangeable_groups, order_constraints

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from scale_graphs import copies, random_graph, scale_suite, subtiled  # noqa: E402

bounded = getattr(bruteforce, "bounded", lambda fn, *a, **kw: fn(*a, **kw))
SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def _lb(g, m):
    return max(res_mii(g, m), rec_mii(g))


# -- the incumbent heuristic ------------------------------------------------------------
@SETTINGS
@given(g=graphs(max_ops=7, max_cycles=3), warp_groups=st.integers(2, 3), cross=st.booleans())
def test_heuristic_schedules_pass_the_checker(g, warp_groups, cross):
    m = machine(warp_groups=warp_groups, regs=200)
    pg = prepare(g, m).graph
    lb = _lb(pg, m)
    inc = incumbent(pg, m, lb, lb + 12, cross_warp_sync=cross)
    if inc is None:
        return
    from tvm_twill.model import make_schedule
    s = make_schedule(pg, m.name, inc.ii, inc.times, inc.warps, {o.name: o.cycles for o in pg.ops})
    assert check(s, pg, m, cross_warp_sync=cross) == []
    assert inc.ii >= lb and inc.length == s.length
    assert register_peak(pg, inc.ii, inc.times, inc.warps) <= m.regs_per_thread_max


def test_heuristic_is_deterministic_and_reaches_the_bound_on_fa_graphs():
    for name in ("fa_fwd_hopper_measured", "fa_bwd_raw", "fa_fwd_blackwell_raw"):
        p = prepare(load_example(name))
        g, m = p.graph, p.machine
        a = incumbent(g, m, _lb(g, m), 10 * _lb(g, m))
        b = incumbent(g, m, _lb(g, m), 10 * _lb(g, m))
        assert (a.ii, a.times, a.warps, a.seed) == (b.ii, b.times, b.warps, b.seed)
        assert a.ii == _lb(g, m)  # these graphs are resource-bound; the heuristic finds it


def test_heuristic_respects_variable_latency_role():
    p = prepare(load_example("fa_bwd_raw"))
    g, m = p.graph, p.machine
    for name, warps, choices, _ in warp_candidates(g, m):
        for o in g.ops:
            if o.variable_latency:
                assert warps[o.name] == m.warp_groups - 1, name
            elif choices is None:
                assert warps[o.name] != m.warp_groups - 1, name


def test_modulo_schedule_refuses_a_recurrence_that_cannot_close():
    g = Graph("rec", (Op("a", 2, "TC"), Op("b", 2, "ALU")),
              (Edge("a", "b", 2), Edge("b", "a", 2, distance=1)), normalize=False)
    m = machine(warp_groups=2)
    assert modulo_schedule(g, m, 3, {"a": 0, "b": 0}) is None  # the cycle needs 4 cycles
    assert try_ii(g, m, 4) is not None


# -- symmetry ---------------------------------------------------------------------------
def test_symmetry_finds_copies_and_heads():
    g = load_example("fa_fwd_hopper_measured")
    assert order_constraints(g) == [("P_a", "P_b")]  # heads a, b share the loads
    two = copies(g, 2)
    pairs = order_constraints(two)
    assert ("P_a_0", "P_a_1") in pairs and ("P_a_0", "P_b_0") in pairs and ("P_a_1", "P_b_1") in pairs
    groups = interchangeable_groups(subtiled(load_example("fa_bwd_raw"), 3, ("load_Q", "load_dO", "dQ_reduce")))
    assert len(groups) == 1 and len(groups[0]) == 3


def test_symmetry_ignores_near_copies():
    g = load_example("fa_fwd_hopper_measured")
    two = copies(g, 2)
    ops = tuple(replace(o, regs=o.regs + 1) if o.name == "O_b_1" else o for o in two.ops)
    pairs = order_constraints(two.replace(ops=ops))
    assert ("P_a_0", "P_a_1") not in pairs  # the copies differ: no ordering between them
    assert ("P_a_0", "P_b_0") in pairs  # the heads of copy 0 still are interchangeable


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(graphs(min_ops=1, max_ops=3, max_cycles=2, pressure=False))
def test_symmetry_breaking_keeps_the_optimum(g):
    # two copies of a small graph: with and without the ordering, the same optimal ii,
    # and the exact search alone (no incumbent) agrees with the brute force
    m = machine(warp_groups=3)
    two = copies(g, 2)
    base = SolveOptions(heuristic=False, symmetry=False)
    try:
        plain = solve(two, m, options=base).ii
    except InfeasibleError:
        with pytest.raises(InfeasibleError):
            solve(two, m, options=replace(base, symmetry=True))
        return
    s = solve(two, m, options=replace(base, symmetry=True))
    assert s.ii == plain and s.optimal
    pg = prepare(two, m).graph
    assert check(s, pg, m) == []
    for ii in range(1, s.ii):
        assert bounded(bruteforce.feasible, pg, m, ii) is None


# -- refutation at every ii -------------------------------------------------------------
def test_four_accumulators_on_three_roles_are_refuted_at_once():
    # two copies of the two-head graph at full registers: four 128-register accumulators,
    # three roles besides the producer; no ii works (the search timed out before)
    g = copies(load_example("fa_fwd_hopper_measured"), 2)
    g = g.replace(ops=tuple(replace(o, regs=o.regs * 2) for o in g.ops))
    with pytest.raises(InfeasibleError, match=r"for any ii: .*registers") as ei:
        solve(g, time_limit=300)
    assert ei.value.family == "registers"


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(graphs(min_ops=2, max_ops=4, max_cycles=2, pressure=True))
def test_every_ii_refutation_is_sound(g):
    m = machine(warp_groups=2, regs=200)
    pg = prepare(g, m).graph
    if refute_every_ii(pg, m) is None:
        return
    for ii in range(1, 7):
        assert bounded(bruteforce.feasible_with_pressure, pg, m, ii) is None


# -- anytime answers --------------------------------------------------------------------
class _Clock:
    """A JointProblem whose queries 'run out of time' from the n-th decision on (deterministic)."""

    def __init__(self, n):
        self.n, self.calls = n, 0

    def __call__(self, *args, **kw):
        clock = self
        problem = JointProblem(*args, **kw)
        solve_ = problem.solve

        def solve(**q):
            if q.get("rlimit"):  # the tie-breaks: leave them alone
                return solve_(**q)
            clock.calls += 1
            if clock.calls > clock.n:
                return SmtResult("timeout")
            return solve_(**q)

        problem.solve = solve
        return problem


@SETTINGS
@given(g=graphs(max_ops=6, max_cycles=2, pressure=False), n=st.integers(0, 3))
def test_anytime_answer_is_valid_and_its_bound_sound(g, n):
    m = machine(warp_groups=2)
    pg = prepare(g, m).graph
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(search, "JointProblem", _Clock(n))
        try:
            s = solve(g, m, time_limit=60)
        except (InfeasibleError, SolverTimeoutError):
            return  # no schedule in hand: nothing to check
    assert check(s, pg, m) == []
    lb = s.lower_bound.ii
    assert _lb(pg, m) <= lb <= s.ii
    assert s.optimal == (lb == s.ii)
    for ii in range(1, lb):  # every ii below the bound is really impossible
        assert bounded(bruteforce.feasible, pg, m, ii) is None
    if not s.optimal:
        assert any(a.solver == search.HEURISTIC for a in s.attempts)
        assert any(a.result == "timeout" and a.ii == lb for a in s.attempts)


def _gap_graph():
    # one role, a recurrence and two 128-register values: lb = 4, the heuristic finds 5 = the optimum
    g = Graph("gap", (Op("a", 2, "TC", regs=128), Op("b", 1, "ALU", regs=128), Op("c", 2, "TC")),
              (Edge("a", "b", 2), Edge("b", "c", 1), Edge("c", "a", 1, distance=1)), normalize=False)
    return g, Machine("one", units={"TC": 1, "ALU": 1}, warp_groups=1, regs_per_thread_max=255)


def test_anytime_answer_when_the_exact_search_is_out_of_time(monkeypatch):
    g, m = _gap_graph()
    exact = solve(g, m, options=SolveOptions(heuristic=False))
    assert (exact.ii, exact.optimal, _lb(g, m)) == (5, True, 4)
    monkeypatch.setattr(search, "JointProblem", _Clock(0))
    s = solve(g, m)
    assert check(s, g, m) == []
    assert (s.ii, s.optimal, s.lower_bound.ii) == (5, False, 4)
    assert [a.result for a in s.attempts] == ["sat", "timeout"]
    monkeypatch.setattr(search, "JointProblem", _Clock(1))  # ii=4 refuted, then out of time
    s = solve(g, m)
    assert (s.ii, s.optimal, s.lower_bound.ii) == (5, True, 5)


def test_cli_prints_the_gap_and_exits_0(monkeypatch, tmp_path, capsys):
    from tvm_twill import cli
    from tvm_twill.model import dump, graph_to_dict, load_schedule
    g, m = _gap_graph()
    dump(graph_to_dict(g.replace(machine=m)), tmp_path / "g.json")
    monkeypatch.setattr(search, "JointProblem", _Clock(0))
    code = cli.main(["solve", str(tmp_path / "g.json"), "--quiet", "--json", str(tmp_path / "s.json")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert err.count("\n") == 1 and "not proven optimal: gap 20.0%" in err
    s = load_schedule(tmp_path / "s.json")
    assert (s.ii, s.optimal, s.lower_bound.ii) == (5, False, 4)
    monkeypatch.undo()
    assert cli.main(["check", str(tmp_path / "g.json"), str(tmp_path / "s.json")]) == 0


def test_no_incumbent_and_no_time_is_a_timeout(monkeypatch):
    g = load_example("gemm_tma")
    monkeypatch.setattr(search, "JointProblem", _Clock(0))
    with pytest.raises(SolverTimeoutError):
        solve(g, options=SolveOptions(heuristic=False, fallback=False))


# -- progress ----------------------------------------------------------------------------
def test_progress_reports_each_step():
    seen = []
    s = solve(load_example("fa_fwd_hopper_measured"), progress=seen.append)
    assert [p.phase for p in seen][0] == "incumbent" and seen[-1].phase == "done"
    assert all(isinstance(p, Progress) for p in seen)
    assert seen[0].incumbent == s.ii and seen[0].gap == 0.0
    opts_seen = []
    solve(load_example("gemm_tma"), options=SolveOptions(progress=opts_seen.append))
    assert opts_seen and opts_seen[-1].phase == "done"


def test_progress_printer_is_silent_for_short_solves(capsys):
    printer = StderrProgress(after=1.0)
    printer(Progress("proving", 0.5, 10, 12, 10))
    printer(Progress("proving", 1.5, 10, 12, 10))
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "proving ii=10" in err and "gap 16.7%" in err
    assert gap(12, 10) == pytest.approx(1 / 6) and gap(10, 10) == 0.0


# -- scale -------------------------------------------------------------------------------
def test_scale_suite_graphs_are_valid_and_deterministic():
    a = scale_suite((10, 20))
    b = scale_suite((10, 20))
    assert [(n, g) for n, _, g in a] == [(n, g) for n, _, g in b]
    assert random_graph(20, 3) == random_graph(20, 3)
    for name, _, g in a:
        g.validate()
        assert 8 <= len(g.ops) <= 22, name


def test_twenty_op_copies_solve_to_a_proven_optimum_deterministically():
    g = copies(load_example("fa_fwd_hopper_measured"), 2)
    runs = [solve(g, time_limit=300) for _ in range(2)]
    p = prepare(g)
    for s in runs:
        assert s.optimal and s.ii == _lb(p.graph, p.machine)
        assert check(s, p.graph, p.machine) == []
    assert {n: (q.time, q.warp) for n, q in runs[0].ops.items()} == \
        {n: (q.time, q.warp) for n, q in runs[1].ops.items()}
