"""One deadline per solve, deterministic tie-breaks, Ctrl-C, and sizes independent of magnitudes.

No test here times anything: wall-clock measurements live in
``bench/time_limits.py``.  Clocks are replaced instead (``limits._clock``), so
a "slow machine" or "time runs out at step k" is exact and reproducible.
"""
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bruteforce
from bruteforce import bounded
from strategies import UNITS
from tvm_twill.data import load_example
from tvm_twill.errors import InfeasibleError, InputError, SolverTimeoutError, SolverUnavailableError
from tvm_twill.model import Edge, Graph, Machine, Op, check
from tvm_twill.solvers import SolveOptions, limits, prepare, solve
from tvm_twill.solvers.backends import load_pulp, load_z3
from tvm_twill.model.families import Bound, Family
from tvm_twill.solvers.limits import Deadline, z3_unknown
from tvm_twill.solvers.smt import JointProblem, segments

REPO = Path(__file__).resolve().parents[2]


def placements(s):
    return s.ii, s.length, {n: (p.time, p.warp, p.order) for n, p in s.ops.items()}


def doubled(graph):
    ops = tuple(graph.ops) + tuple(replace(o, name=o.name + "_2") for o in graph.ops)
    edges = tuple(graph.edges) + tuple(replace(e, src=e.src + "_2", dst=e.dst + "_2") for e in graph.edges)
    return graph.replace(name=graph.name + "_x2", ops=ops, edges=edges)


# -- the Deadline ----------------------------------------------------------------
def test_deadline_counts_down_and_raises_one_line(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(limits, "_clock", lambda: now[0])
    d = Deadline(5)
    assert (d.left(), d.expired(), d.z3_ms()) == (5.0, False, 5000)
    now[0] = 104.5
    assert d.left() == pytest.approx(0.5) and d.elapsed() == pytest.approx(4.5)
    d.check("anything")  # not yet
    now[0] = 105.0
    with pytest.raises(SolverTimeoutError, match=r"^time limit 5 s reached while deciding ii=7: raise the time "
                                                 r"limit \(--time-limit\)$") as e:
        d.check("while deciding ii=7", attempts=("a",))
    assert e.value.attempts == ("a",) and "\n" not in str(e.value)
    assert Deadline(None).left() == float("inf") and Deadline(None).z3_ms() == 0
    assert Deadline.of(d, 99) is d
    with pytest.raises(InputError, match="time limit must be a number of seconds >= 0, got -1"):
        Deadline(-1)


def test_z3_unknown_tells_ctrl_c_from_time_and_budget():
    with pytest.raises(KeyboardInterrupt):
        z3_unknown("interrupted from keyboard")
    with pytest.raises(KeyboardInterrupt):  # canceled, but neither limit was reached
        z3_unknown("canceled", rlimit=1000, rlimit_used=10, seconds=0.1, allowed=10)
    assert z3_unknown("timeout", seconds=1.0, allowed=1.0) == "timeout"
    assert z3_unknown("canceled", seconds=2.0, allowed=2.0) == "timeout"
    assert z3_unknown("canceled", rlimit=1000, rlimit_used=1000, seconds=0.1, allowed=10) == "budget"


# -- one deadline for the whole solve ---------------------------------------------
def test_time_runs_out_at_every_step_gives_the_same_schedule_or_an_anytime_one(monkeypatch):
    """Time advances one second per clock read: whichever step the deadline cuts
    (normalization, the incumbent heuristic, building, a query, core
    minimization, a tie-break, the check), the answer is the very schedule of
    an unlimited run, or an anytime answer: a valid schedule (of the graph as
    normalized: by the ZLP, or by the rounding when the cut came inside it)
    whose proven lower bound is at most the optimum (and, when it claims
    optimality, at the optimal ii: only the tie-breaks were cut).  Never
    SolverTimeoutError: the serial schedule is valid here."""
    g = load_example("fa_fwd_hopper_measured")
    ref = solve(g, time_limit=600)
    reference = placements(ref)
    prepared = {o: prepare(g, options=SolveOptions(normalize_objective=o)) for o in ("relative", "rounding")}
    reads = [0]

    def ticking():
        reads[0] += 1
        return float(reads[0])

    monkeypatch.setattr(limits, "_clock", ticking)
    placements(solve(g, time_limit=10 ** 6))
    total = reads[0]
    outcomes = set()
    for k in sorted({1, 2, 3, total // 2, total - 2, total - 1, total, total + 1} | set(range(5, total, 13))):
        reads[0] = 0
        s = solve(g, time_limit=k)
        assert reads[0] <= k + 12, f"deadline after {k} clock reads: {reads[0]} reads"
        if placements(s) == reference:
            outcomes.add("schedule")
            continue
        pg = prepared[s.normalization["objective"]]
        assert check(s, pg.graph, pg.machine) == []
        if s.normalization["objective"] == "relative":
            assert s.lower_bound.ii <= ref.ii <= s.ii, f"deadline after {k} clock reads: unsound bound"
            assert s.optimal == (s.ii == ref.ii == s.lower_bound.ii)
        outcomes.add("anytime " + s.normalization["objective"])
    assert {"schedule", "anytime relative", "anytime rounding"} <= outcomes


def test_same_schedule_on_a_slow_machine_and_under_any_sufficient_limit(monkeypatch):
    """A clock running 20x fast is a machine 20x slower: the tie-breaks are cut
    by z3's rlimit, not by time, so the schedule stays the same."""
    g = load_example("fa_fwd_hopper_measured")
    runs = [placements(solve(g, time_limit=t)) for t in (60, 600)]
    real = time.monotonic
    t0 = real()
    monkeypatch.setattr(limits, "_clock", lambda: t0 + 20 * (real() - t0))
    runs.append(placements(solve(g, time_limit=600)))
    assert runs[0] == runs[1] == runs[2]


def sub_tiles(graph, k):
    """k copies with 1/k of the registers each (sub-tiles): feasible, and without the
    incumbent heuristic a long search for z3.  (``doubled`` at full registers puts four
    128-register accumulators on three roles: no schedule at all, which the search now
    says at once.)"""
    ops = tuple(replace(o, name=f"{o.name}_{c}", regs=o.regs // k) for c in range(k) for o in graph.ops)
    edges = tuple(replace(e, src=f"{e.src}_{c}", dst=f"{e.dst}_{c}") for c in range(k) for e in graph.edges)
    return graph.replace(name=f"{graph.name}_sub{k}", ops=ops, edges=edges)


def test_timeout_says_which_ii_and_what_was_proven():
    from tvm_twill.solvers import SolveOptions
    g = sub_tiles(load_example("fa_fwd_hopper_measured"), 3)  # 30 ops: z3 alone needs long
    with pytest.raises(SolverTimeoutError, match=r"^time limit 2 s reached .*ii=\d+ .*proven|lower bound") as e:
        solve(g, time_limit=2, options=SolveOptions(heuristic=False, fallback=False))
    assert "\n" not in str(e.value)
    assert e.value.attempts and e.value.attempts[-1].result == "timeout"


def test_no_first_schedule_in_time_gives_the_serial_schedule(monkeypatch):
    """The same search without the heuristic, cut by the deadline before z3 finds a schedule:
    the serial schedule (one iteration at a time, valid by construction) comes back, not
    optimal, with every ii z3 refuted as its lower bound, instead of SolverTimeoutError."""
    from tvm_twill.solvers import SolveOptions
    from tvm_twill.solvers.fallback import SERIAL
    g = sub_tiles(load_example("fa_fwd_hopper_measured"), 3)
    reads = [0]

    def ticking():
        reads[0] += 1
        return float(reads[0])

    s = solve(g, deadline=Deadline(60, clock=ticking), options=SolveOptions(heuristic=False))
    pg = prepare(g)
    assert check(s, pg.graph, pg.machine) == []
    assert not s.optimal and s.lower_bound.ii < s.ii and s.num_stages == 1
    assert s.attempts[0].solver == SERIAL and s.attempts[0].ii == s.ii


def test_attempts_record_their_time_within_the_solve():
    s = solve(load_example("fa_fwd_hopper_measured"), time_limit=60)
    assert all(a.seconds > 0 for a in s.attempts)
    assert sum(a.seconds for a in s.attempts) <= s.solve_seconds


# -- Ctrl-C ---------------------------------------------------------------------
CTRL_C = textwrap.dedent("""
    import sys
    from dataclasses import replace
    from tvm_twill.data import load_example
    from tvm_twill.solvers import prepare, solve
    from tvm_twill.solvers.smt import JointProblem
    g = load_example("fa_fwd_hopper_measured")
    g = g.replace(ops=tuple(g.ops) + tuple(replace(o, name=o.name + "_2") for o in g.ops),
                  edges=tuple(g.edges) + tuple(replace(e, src=e.src + "_2", dst=e.dst + "_2") for e in g.edges))
    # the whole solve: the graph twice more at a quarter of the registers, z3 alone (the
    # incumbent heuristic would end it at once)
    h = g.replace(ops=tuple(g.ops) + tuple(replace(o, name=o.name + "_3") for o in g.ops),
                  edges=tuple(g.edges) + tuple(replace(e, src=e.src + "_3", dst=e.dst + "_3") for e in g.edges))
    h = h.replace(ops=tuple(replace(o, regs=o.regs // 4) for o in h.ops))
    try:
        if sys.argv[1] == "query":
            # one query that runs for long: the 40-op graph at its lower bound (z3 alone; the
            # 20-op one at ii=417 is now refuted within a second)
            from tvm_twill.model import rec_mii, res_mii
            p = prepare(h)
            problem = JointProblem(p.graph, p.machine, max(res_mii(p.graph, p.machine), rec_mii(p.graph)))
            print("ready", flush=True)
            while True:  # a query may finish before the signal comes: ask again (most time is in z3)
                problem.solve(time_limit=120)
        else:
            from tvm_twill.solvers import SolveOptions
            print("ready", flush=True)
            solve(h, time_limit=120, options=SolveOptions(heuristic=False))
        print("returned", flush=True)
    except BaseException as e:
        print(type(e).__name__, flush=True)
""")


@pytest.mark.parametrize("where", ["query", "solve"])
def test_ctrl_c_raises_keyboard_interrupt(where):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.Popen([sys.executable, "-c", CTRL_C, where], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env, cwd=REPO)
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(1.5)  # inside z3's search (the query runs for seconds)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert out.strip().splitlines()[-1] == "KeyboardInterrupt", (out, err)


# -- sizes do not depend on magnitudes ----------------------------------------------
def _magnitude_graph(scale):
    """The six-op graph of ``bench/time_limits.py`` (one definition: the benchmark's)."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "bench" / "time_limits.py"
    spec = importlib.util.spec_from_file_location("bench_time_limits", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench.magnitude_graph(scale)


def test_model_size_does_not_grow_with_cycle_counts():
    m = Machine("m", units={"TC": 1, "SFU": 1, "ALU": 2, "TMA": 1}, warp_groups=3, regs_per_thread_max=255)
    sizes = []
    for scale in (1, 10 ** 6):
        g = _magnitude_graph(scale)
        problem = JointProblem(g, m, 9 * scale + 7)
        sizes.append((len(problem.solver.assertions()), sum(len(str(a)) > 0 for a in problem.solver.assertions())))
    assert sizes[0] == sizes[1]
    assert segments(_magnitude_graph(10 ** 6).op("A"), "TC") == [(0, 5 * 10 ** 6, 1)]
    assert segments(_magnitude_graph(1).op("R"), "ALU") == [(0, 1, 1), (1, 2, 2)]


def test_scaled_cycles_give_the_scaled_schedule():
    # (At 10**6 cycles the model is as small, but the model layer's validation and
    # checker walk every cycle; bench/time_limits.py's notes measure that.)
    m = Machine("m", units={"TC": 1, "SFU": 1, "ALU": 2, "TMA": 1}, warp_groups=3, regs_per_thread_max=255)
    small, big = solve(_magnitude_graph(1), m, time_limit=120), solve(_magnitude_graph(1000), m, time_limit=120)
    assert check(big, prepare(_magnitude_graph(1000), m).graph, m) == []
    assert small.ii >= 7 and big.ii >= 7 * 1000


# -- multi-instance units and reservation tables against the brute force -------------
@st.composite
def rrt_graphs(draw):
    n = draw(st.integers(2, 4))
    ops = []
    for i in range(n):
        if draw(st.booleans()):
            rows = draw(st.lists(st.dictionaries(st.sampled_from(UNITS[:3]), st.integers(1, 2), max_size=2),
                                 min_size=1, max_size=3))
            ops.append(Op(f"v{i}", len(rows), rrt=tuple(rows)))
        else:
            ops.append(Op(f"v{i}", draw(st.integers(1, 3)), draw(st.sampled_from(UNITS[:3]))))
    edges = []
    for a, b in draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=n)):
        edges.append(Edge(f"v{a}", f"v{b}", delay=draw(st.integers(0, 2)),
                          distance=draw(st.integers(1, 2)) if a >= b else draw(st.integers(0, 1))))
    return Graph("rrt", tuple(ops), tuple(edges), normalize=False)


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(rrt_graphs(), st.integers(1, 2))
def test_capacity_and_reservation_tables_match_brute_force(g, cap):
    m = Machine("caps", units={"TC": cap, "SFU": 1, "ALU": 2, "TMA": 1}, warp_groups=2, regs_per_thread_max=255)
    try:
        s = solve(g, m, time_limit=60)  # solve checks its schedule with the independent checker
    except InfeasibleError:
        assert bounded(bruteforce.min_ii, g, m, 8) is None
        return
    for ii in range(1, s.ii):
        assert bounded(bruteforce.feasible, g, m, ii) is None, f"brute force: ii={ii} < {s.ii} works"
    assert bounded(bruteforce.feasible, g, m, s.ii) is not None


# -- house-keeping ---------------------------------------------------------------
def test_one_fix_it_message_per_missing_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "z3", None)
    monkeypatch.setitem(sys.modules, "pulp", None)
    with pytest.raises(SolverUnavailableError, match=r"^the default solver needs the Python package z3-solver, "
                                                     r"which is not installed: pip install z3-solver==5\.4\.0\.0$"):
        load_z3()
    with pytest.raises(SolverUnavailableError, match=r"^cost normalization needs the Python package pulp, which "
                                                     r"is not installed: pip install pulp==3\.3\.2$"):
        load_pulp()
    with pytest.raises(SolverUnavailableError, match="z3-solver"):
        JointProblem(load_example("fa_fwd_fig1"), "h100", 2)


def test_family_names_are_the_constants():
    m = Machine("one", units={"TC": 1, "ALU": 1}, warp_groups=1, regs_per_thread_max=255)
    g = Graph("regs", (Op("A", 1, "TC", regs=300), Op("B", 1, "ALU")), (Edge("A", "B", 1),), normalize=False)
    with pytest.raises(InfeasibleError) as e:
        solve(g, m)
    assert e.value.family == Family.REGISTERS
    assert set(Family.ALL) == set(Family.MOST_SPECIFIC_FIRST) and len(Family.ALL) == 6
    assert not set(Bound.ALL) & set(Family.ALL)
    assert all(a.reason is None or set(a.reason.split(" + ")) <= set(Family.ALL) | set(Bound.ALL)
               for a in e.value.attempts)


def test_normalization_reports_the_objective_it_was_given():
    from tvm_twill.solvers.normalize import normalize_costs
    assert normalize_costs([0], objective="paper").objective == "paper"
    assert normalize_costs([3, 6], objective="paper").objective == "paper"
    assert normalize_costs([3, 6]).objective == "relative"


def test_prepare_and_solve_prepared_share_one_deadline(monkeypatch):
    from tvm_twill.solvers import SolveOptions, solve_prepared
    now = [0.0]
    monkeypatch.setattr(limits, "_clock", lambda: now[0])
    opts = SolveOptions(time_limit=5)
    prep = prepare(load_example("fa_fwd_fig1"), None, opts)
    now[0] = 6.0  # the normalization "took" 6 s
    with pytest.raises(SolverTimeoutError, match="time limit 5 s reached before deciding ii=2"):
        solve_prepared(prep, replace(opts, fallback=False))
    late = solve_prepared(prep, opts)  # no time for a search: the serial schedule, not proven optimal
    assert (late.optimal, late.lower_bound.ii, [a.solver for a in late.attempts]) == (False, 2, ["serial"])
    assert check(late, prep.graph, prep.machine) == []
    assert solve_prepared(prep, SolveOptions(time_limit=50)).ii == 2  # a different limit starts afresh


def test_every_cut_of_a_30_op_solve_answers_within_its_deadline():
    """30 ops (three sub-tiles of the Hopper forward), the clock advancing one second per read
    and the deadline at read k, for k through the whole solve: a schedule the checker accepts
    comes back every time (the heuristic's, z3's, or the serial fallback's when the cut comes
    first), never SolverTimeoutError, and at most a few reads after the deadline."""
    from tvm_twill.solvers import solve_prepared
    prep = prepare(sub_tiles(load_example("fa_fwd_hopper_measured"), 3))
    full = Deadline(10 ** 6, clock=_reads())
    ref = solve_prepared(prep, deadline=full)
    seen = set()
    for k in sorted({1, 2, 3, 5, 8} | set(range(13, full.reads, max(1, full.reads // 12)))):
        dl = Deadline(k, clock=_reads())
        s = solve_prepared(prep, deadline=dl)
        assert check(s, prep.graph, prep.machine) == []
        assert dl.reads <= k + 12, f"cut at read {k}: {dl.reads} reads"
        assert s.lower_bound.ii <= ref.ii <= s.ii
        seen.add(s.attempts[0].solver if s.ii != ref.ii else "best")
    assert {"serial", "best"} <= seen


def _reads():
    n = [0]

    def clock():
        n[0] += 1
        return float(n[0])
    return clock


def test_a_limit_shorter_than_the_normalization_still_gets_a_checked_schedule(tmp_path):
    """The deadline passes inside the normalization ZLP (the clock advances 1 s per read, the
    limit is 3 reads): the best scaled rounding (no CBC) normalizes instead, the serial schedule
    answers, and ``tvm-twill check`` re-derives the very same costs from the file."""
    from tvm_twill import cli
    from tvm_twill.model import dump, schedule_to_dict
    from tvm_twill.solvers.normalize import normalize_costs
    g = load_example("fa_fwd_hopper_measured")
    dl = Deadline(3, clock=_reads())
    s = solve(g, deadline=dl)
    assert s.normalization["objective"] == "rounding" and not s.optimal
    assert dl.reads <= 3 + 12
    prep = prepare(g, options=SolveOptions(normalize_objective="rounding"))
    assert check(s, prep.graph, prep.machine) == []
    values = [o.cycles for o in g.ops] + [e.delay for e in g.edges] + [prep.machine.spill_of(o) for o in g.ops]
    expected = normalize_costs(values, objective="rounding").mapping
    assert {int(k): v for k, v in s.normalization["mapping"].items()} == expected
    dump(schedule_to_dict(s), tmp_path / "s.json")
    assert cli.main(["check", str(REPO / "tvm_twill/data/graphs/fa_fwd_hopper_measured.json"),
                     str(tmp_path / "s.json")]) == 0
    with pytest.raises(SolverTimeoutError, match="time limit 3 s reached"):
        solve(g, deadline=Deadline(3, clock=_reads()), options=SolveOptions(fallback=False))
