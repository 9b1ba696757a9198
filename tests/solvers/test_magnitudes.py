"""Cost independent of magnitudes: the model layer and the solver never loop per cycle,
unit of delay, distance, slot of ii or warp group, the interval checker agrees with the
per-slot one, and a solve at the documented limits keeps its deadline (an injected
clock, never a timed assertion)."""
import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import checker_oracle
from tvm_twill.errors import (FormatError, GraphError, InfeasibleError, InputError, MachineError, SolverTimeoutError,
                              TwillError)
from tvm_twill.model import (Edge, Graph, Machine, Op, Placement, Schedule, check, graph_from_dict, rec_mii,
                             res_mii, schedule_from_dict, topological_order)
from tvm_twill.model.checker import live_instances, modulo_load
from tvm_twill.solvers import SolveOptions, prepare, solve
from tvm_twill.solvers.fallback import serial_schedule
from tvm_twill.solvers.limits import Deadline

BIG = 2**31 - 1
M = Machine(name="m", units={"TC": 1, "SFU": 2, "ALU": 1}, warp_groups=3, regs_per_thread_max=255,
            smem_bytes=40000, tmem_bytes=100)


@st.composite
def cases(draw, max_ii=12, max_time=30, max_cycles=14):
    n = draw(st.integers(1, 5))
    ops = []
    for i in range(n):
        cycles = draw(st.integers(0, max_cycles))
        rrt = None
        if cycles and draw(st.booleans()) and cycles <= 8:
            rrt = tuple({u: draw(st.integers(0, 2)) for u in draw(st.sets(st.sampled_from(["TC", "SFU", "ALU"])))}
                        for _ in range(cycles))
        ops.append(Op(name=f"v{i}", cycles=cycles, unit=draw(st.sampled_from(["TC", "SFU", "ALU"])), rrt=rrt,
                      regs=draw(st.sampled_from([0, 64, 128, 200])), smem=draw(st.sampled_from([0, 16384])),
                      tmem=draw(st.sampled_from([0, 60])), variable_latency=draw(st.booleans()) and draw(st.booleans()),
                      spill_cost=draw(st.integers(0, 2))))
    edges = []
    for a, b in draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=2 * n)):
        distance = draw(st.integers(1, 3)) if a >= b else draw(st.integers(0, 2))
        edges.append(Edge(f"v{a}", f"v{b}", delay=draw(st.integers(0, 10)), distance=distance,
                          blocking=draw(st.booleans())))
    g = Graph(name="g", ops=tuple(ops), edges=tuple(edges), normalize=False)
    ii = draw(st.integers(1, max_ii))
    times = {op.name: draw(st.integers(0, max_time)) for op in ops}
    place = {op.name: Placement(time=times[op.name], stage=times[op.name] // ii, order=i,
                                warp=draw(st.integers(0, 2))) for i, op in enumerate(ops)}
    length = max(times[op.name] + op.cycles for op in ops)
    return Schedule(graph="g", machine="m", ii=ii, length=length, ops=place,
                    cycles={op.name: op.cycles for op in ops}), g, draw(st.booleans())


def _expand(violations):
    """Per-slot messages: a range 'slots a..b' becomes one message per slot."""
    out = []
    for v in violations:
        text = str(v)
        m = re.search(r"slots (\d+)\.\.(\d+)", text)
        if m:
            out += [text.replace(m.group(0), f"slot {r}") for r in range(int(m.group(1)), int(m.group(2)) + 1)]
        else:
            out.append(text)
    return out


@settings(derandomize=True, deadline=None, max_examples=300)
@given(cases())
def test_interval_checker_agrees_with_the_per_slot_oracle(case):
    schedule, g, cws = case
    new = check(schedule, g, M, cross_warp_sync=cws)
    old = checker_oracle.check(schedule, g, M, cross_warp_sync=cws)
    if schedule.ii <= 8:  # every segment fits in SLOTS_LISTED: the very same list
        assert [str(v) for v in new] == [str(v) for v in old]
    else:
        assert sorted(_expand(new)) == sorted(str(v) for v in old)


@pytest.mark.slow
@settings(derandomize=True, deadline=None, max_examples=3000)
@given(cases(max_ii=40, max_time=120, max_cycles=60))
def test_interval_checker_agrees_with_the_oracle_many(case):
    schedule, g, cws = case
    new = check(schedule, g, M, cross_warp_sync=cws)
    old = checker_oracle.check(schedule, g, M, cross_warp_sync=cws)
    assert sorted(_expand(new)) == sorted(str(v) for v in old)


@given(st.integers(0, 50), st.integers(0, 50), st.integers(1, 9), st.integers(-60, 120))
@settings(derandomize=True, deadline=None, max_examples=200)
def test_live_instances_closed_form(start, length, ii, tau):
    end = start + length
    expected = sum(1 for k in range(-200, 200) if start + k * ii <= tau < end + k * ii)
    assert live_instances(start, end, ii, tau) == expected


def test_modulo_load_segments():
    assert modulo_load([], 5) == [(0, 5, 0)]
    assert modulo_load([(3, 4, 1)], 5) == [(0, 2, 1), (2, 3, 0), (3, 5, 1)]
    assert modulo_load([(0, 12, 2)], 5) == [(0, 2, 6), (2, 5, 4)]


def _huge_graph(cycles, delay, distance):
    return Graph(name="huge", ops=(Op("A", cycles, unit="TC", regs=10), Op("B", cycles, unit="TC", regs=10)),
                 edges=(Edge("A", "B", delay, 0, True), Edge("B", "A", delay, distance)), normalize=False)


def test_the_checker_and_bounds_ignore_magnitudes():
    # cycles, delays, distances and ii near 2**31: answered arithmetically
    c = BIG // 4
    g = _huge_graph(c, c, 1)
    m = Machine(name="m", units={"TC": 1}, warp_groups=2)
    assert res_mii(g, m) == 2 * c and rec_mii(g) == 2 * c
    assert g.ops[0].usage("TC") == c and g.ops[0].units() == {"TC"}
    ii = 2 * c
    s = Schedule(graph="huge", machine="m", ii=ii, length=2 * c, ops={
        "A": Placement(0, 0, 0, 0), "B": Placement(c, 0, 1, 0)}, cycles={"A": c, "B": c})
    assert check(s, g, m) == []
    bad = Schedule(graph="huge", machine="m", ii=ii - 1, length=2 * c, ops={
        "A": Placement(0, 0, 0, 0), "B": Placement(c, 1, 1, 0)}, cycles={"A": c, "B": c})
    out = [str(v) for v in check(bad, g, m)]
    assert any("rule 2 (resources): unit TC at slot 0 (mod ii" in v for v in out)
    # a 1e12-ish ii with huge times in a Python-built schedule (not from JSON): still arithmetic
    s = Schedule(graph="huge", machine="m", ii=10**12, length=10**15 + c, ops={
        "A": Placement(10**15, 1000, 0, 0), "B": Placement(10**15 + c + 5, 1000, 1, 1)},
        cycles={"A": c, "B": c})
    assert all(v.rule != 2 for v in check(s, g, m))


@pytest.mark.parametrize("field, value", [("cycles", 2**31), ("regs", 10**18), ("smem", 2**40)])
def test_integers_beyond_2_31_are_refused(field, value):
    op = {"name": "A", "cycles": 1, field: value}
    with pytest.raises(FormatError, match="beyond what any GPU loop has"):
        graph_from_dict({"format": "tvm-twill-graph/1", "name": "g", "ops": [op]})
    with pytest.raises(GraphError, match="beyond what any GPU loop has"):
        Graph(name="g", ops=(Op(**{"name": "A", "cycles": 1, field: value}),))


def test_edge_and_machine_and_schedule_integers_beyond_2_31_are_refused():
    with pytest.raises(FormatError, match="beyond"):
        graph_from_dict({"format": "tvm-twill-graph/1", "name": "g", "ops": [{"name": "A", "cycles": 1}],
                         "edges": [{"src": "A", "dst": "A", "distance": 10**18}]})
    with pytest.raises(GraphError, match="beyond"):
        Graph(name="g", ops=(Op("A", 1),), edges=(Edge("A", "A", 10**18, 1),))
    with pytest.raises(MachineError, match="beyond"):
        Machine(name="m", units={"TC": 2**31})
    with pytest.raises(FormatError, match="beyond"):
        schedule_from_dict({"format": "tvm-twill-schedule/1", "graph": "g", "machine": "h100",
                            "ii": 2**53 + 1, "length": 1, "ops": {}})


def test_topological_order_is_linear_on_a_long_chain():
    n = 60000
    ops = tuple(Op(f"v{i}", 1) for i in range(n))
    # edges listed backwards, so a quadratic scan would be slow; a chain of distance-0 edges
    edges = tuple(Edge(f"v{i}", f"v{i + 1}", 1) for i in reversed(range(n - 1)))
    g = Graph(name="chain", ops=ops, edges=edges, normalize=False)
    order = topological_order(g)
    assert order[0] == "v0" and order[-1] == f"v{n - 1}" and len(order) == n
    assert len(g.out_edges("v5")) == 1 and len(g.in_edges("v5")) == 1
    assert rec_mii(g) == 1


# -- the solve at the documented limits: always answered or refused, the deadline held ------------
LIMIT_READS = 300
#: Clock reads a solve may still make once its deadline has passed: returning the answer in
#: hand (anytime schedule, its check, the last progress report) reads the clock a few times.
AFTER_DEADLINE_READS = 12
_MAG = st.one_of(st.integers(0, 6), st.integers(0, BIG), st.just(BIG))


@st.composite
def machines_at_limits(draw):
    caps = st.sampled_from([1, 1, 2, BIG])
    return Machine(name="mag", units={u: draw(caps) for u in ("TC", "SFU", "ALU", "TMA")},
                   warp_groups=draw(st.sampled_from([1, 2, 4, BIG])),
                   warps_per_group=draw(st.sampled_from([4, BIG])),
                   regs_per_thread_max=draw(st.sampled_from([255, BIG])),
                   smem_bytes=draw(st.sampled_from([0, 1 << 17, BIG])), spill_cost=draw(_MAG))


@st.composite
def graphs_at_limits(draw):
    """Graphs whose every integer may be anything up to 2**31-1 (small ones too)."""
    n = draw(st.integers(1, 6))
    ops = []
    for i in range(n):
        vl = draw(st.booleans()) and draw(st.booleans())
        cycles = draw(_MAG)
        rrt = None
        if 0 < cycles <= 4 and draw(st.booleans()):
            rrt = tuple({u: draw(st.sampled_from([0, 1, 2, BIG]))
                         for u in draw(st.sets(st.sampled_from(["TC", "SFU", "ALU"])))} for _ in range(cycles))
        ops.append(Op(f"v{i}", cycles, unit="TMA" if vl else draw(st.sampled_from(["TC", "SFU", "ALU"])), rrt=rrt,
                      regs=draw(st.sampled_from([0, 0, 32, 64, 128, 128, 255, BIG])),
                      smem=draw(st.sampled_from([0, 0, 0, 1024, 1024, BIG])), variable_latency=vl,
                      spill_cost=draw(st.one_of(st.none(), _MAG))))
    edges = []
    for a, b in draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=2 * n)):
        distance = draw(st.one_of(st.integers(1, 3), st.just(BIG))) if a >= b else draw(st.integers(0, 2))
        edges.append(Edge(f"v{a}", f"v{b}", delay=draw(_MAG), distance=distance, blocking=draw(st.booleans())))
    return Graph("mag", tuple(ops), tuple(edges), normalize=False)


#: Seconds the injected clock advances per read: the limit is LIMIT_READS reads, and z3 (which
#: keeps its own wall clock) is never given more than LIMIT_READS * TICK real seconds per query.
TICK = 0.01


def _ticking():
    reads = [0]

    def clock():
        reads[0] += 1
        return reads[0] * TICK
    return clock


def _solve_at_limits(g, m, cws):
    """(outcome, detail): 0 and the schedule, or the CLI's exit status of the typed error."""
    dl = Deadline(LIMIT_READS * TICK, clock=_ticking())
    try:
        s = solve(g, m, deadline=dl, options=SolveOptions(cross_warp_sync=cws))
        outcome = (0, s)
    except TwillError as e:
        assert "\n" not in str(e) and str(e), e
        outcome = (e.exit_code, e)
    assert dl.reads <= LIMIT_READS + AFTER_DEADLINE_READS, f"{dl.reads} clock reads for {LIMIT_READS}"
    return outcome


@settings(derandomize=True, deadline=None, max_examples=60, suppress_health_check=list(HealthCheck))
@given(graphs_at_limits(), machines_at_limits(), st.booleans())
def test_graphs_at_the_limits_are_answered_or_refused_within_the_deadline(g, m, cws):
    """Every magnitude up to 2**31-1 (cycles, delays, distances, spill costs, capacities, warp
    groups): the solve ends within its deadline, counted in reads of an injected clock that
    advances at each read, with a schedule the independent checker accepts, or with the
    documented refusal (2: the graph does not fit the machine; 3: no schedule, and then not
    even the serial one is valid)."""
    code, detail = _solve_at_limits(g, m, cws)
    if code == 2:
        assert isinstance(detail, InputError)
        return
    prep = prepare(g, m)
    serial = serial_schedule(prep.graph, prep.machine, cross_warp_sync=cws)
    if code == 0:
        assert check(detail, prep.graph, prep.machine, cross_warp_sync=cws) == []
        assert detail.lower_bound.ii <= detail.ii
    else:
        assert code == 3 and isinstance(detail, (InfeasibleError, SolverTimeoutError))
        assert serial.ii is None, "no schedule although the serial one is valid"


@pytest.mark.slow
@settings(derandomize=True, deadline=None, max_examples=1000, suppress_health_check=list(HealthCheck))
@given(graphs_at_limits(), machines_at_limits(), st.booleans())
def test_graphs_at_the_limits_many(g, m, cws):
    test_graphs_at_the_limits_are_answered_or_refused_within_the_deadline.hypothesis.inner_test(g, m, cws)


# -- the heuristic's interval reservation table against a per-slot one ---------------------------
@st.composite
def tables(draw):
    ii = draw(st.integers(1, 12))
    cap = {"TC": 1, "SFU": draw(st.integers(1, 3))}
    unit_k = st.one_of(st.just(("TC", 1)), st.tuples(st.just("SFU"), st.integers(1, 2)))
    runs = st.lists(st.tuples(st.integers(0, 4), st.integers(1, 2 * ii + 1), unit_k), min_size=1, max_size=3)
    placed = draw(st.lists(st.tuples(st.integers(0, 40), runs), max_size=4))
    own = draw(runs)
    arcs = draw(st.lists(st.tuples(st.integers(0, ii - 1), st.integers(1, ii)), max_size=2))
    est = draw(st.integers(0, 30))
    return ii, cap, placed, [(o, n, u, k) for o, n, (u, k) in own], arcs, est, est + draw(st.integers(0, ii - 1))


def _slot_loads(ii, placed, own=None, at=None):
    load = {}
    for time, runs in placed + ([(at, own)] if own is not None else []):
        for off, length, u, k in runs:
            for c in range(length):
                load[u, (time + off + c) % ii] = load.get((u, (time + off + c) % ii), 0) + k
    return load


@settings(derandomize=True, deadline=None, max_examples=400)
@given(tables())
def test_interval_table_first_fit_and_evictions_match_a_per_slot_table(case):
    """``ModuloTable.first_fit`` is the earliest time in [est, lst] where the op fits every slot and
    misses every forbidden arc; ``conflicts`` names exactly the placed ops on an overloaded slot."""
    from tvm_twill.solvers.mrt import ModuloTable
    ii, cap, placed, own, arcs, est, lst = case
    table = ModuloTable(ii, cap)
    runs_of = [[(off, n, u, k) for off, n, (u, k) in runs] for _, runs in placed]
    placed = [(time, r) for (time, _), r in zip(placed, runs_of)]
    for i, (time, runs) in enumerate(placed):
        table.place(f"p{i}", time, runs)

    def fits(t):
        load = _slot_loads(ii, placed, own, t)
        return all(v <= cap[u] for (u, _), v in load.items()) and \
            not any((t - a) % ii < n for a, n in arcs)

    assume(all(v <= cap[u] for (u, _), v in _slot_loads(ii, placed).items()))  # what the scheduler keeps
    assert table.first_fit(own, est, lst, arcs) == next((t for t in range(est, lst + 1) if fits(t)), None)
    bad = {key for key, v in _slot_loads(ii, placed, own, est).items() if v > cap[key[0]]}
    assert table.conflicts(own, est) == {
        f"p{i}" for i, (time, runs) in enumerate(placed)
        if any((u, (time + off + c) % ii) in bad for off, n, u, _ in runs for c in range(n))}


def test_time_indexed_encodings_refuse_past_their_stated_bound():
    """The modulo ILP (a variable per op and slot of ii) and the paper's encoding (a boolean per op,
    copy and cycle) refuse in one line instead of building a model of 2**31 variables."""
    from tvm_twill.solvers.modulo_ilp import MAX_SLOT_VARIABLES, modulo_schedule_ilp
    from tvm_twill.solvers.paper_smt import MAX_CELLS, paper_smt_solve
    g = Graph("wide", (Op("A", BIG, "TC"),), normalize=False)
    with pytest.raises(InputError, match=rf"^the modulo ILP of 'wide' at ii={BIG} would have {BIG} slot variables "
                                         rf"and 0 resource terms \(at most {MAX_SLOT_VARIABLES} and"):
        modulo_schedule_ilp(g, "h100", BIG)
    with pytest.raises(InputError, match=rf"^the paper encoding of 'wide' at ii={BIG}, L={BIG} needs \d+ booleans "
                                         rf"\(one per op, copy and cycle; at most {MAX_CELLS}\)"):
        paper_smt_solve(g, "h100", BIG, BIG)
    small = Graph("small", (Op("A", 3, "TC"),), normalize=False)  # far below: still answered
    assert modulo_schedule_ilp(small, "h100", 3) == {"A": 0}


def test_roles_are_bounded_by_the_ops_not_the_machine():
    """A machine of 2**31-1 warp groups: the z3 model has one role per op (plus the
    variable-latency role, the machine's last), and the solve is valid on that machine."""
    from tvm_twill.solvers.smt import JointProblem
    m = Machine("wide", units={"TC": 1, "ALU": 1, "TMA": 1}, warp_groups=BIG)
    g = Graph("g", (Op("L", 1, "TMA", variable_latency=True), Op("A", 2, "TC", regs=200),
                    Op("B", 1, "ALU", regs=200)),
              (Edge("L", "A", 1), Edge("A", "B", 2), Edge("A", "A", 2, distance=1), Edge("B", "B", 1, distance=1)),
              normalize=False)
    problem = JointProblem(g, m, 3)
    assert problem.roles == [0, 1, BIG - 1] and all(len(v) == 3 for v in problem.on.values())
    s = solve(g, m, time_limit=60)
    assert check(s, prepare(g, m).graph, m) == [] and s.optimal
    assert s.ops["L"].warp == BIG - 1 and s.ops["A"].warp != s.ops["B"].warp  # both live always: two roles


def test_reading_costs_are_bounded_by_the_file_and_table_limits(tmp_path):
    """A reservation table is one row per cycle, so its rows are capped (4096): past that an op of
    many cycles is unit + cycles, which costs the same at any magnitude.  Files are capped at 32 MiB,
    which bounds the memory of parsing any of them (a 256 MiB list of empty objects took ~7 GB)."""
    from tvm_twill.model import load_graph
    from tvm_twill.model.io import MAX_FILE_BYTES, MAX_RRT_ROWS

    def doc(rows):
        return {"format": "tvm-twill-graph/1", "name": "g", "normalize": False,
                "ops": [{"name": "A", "cycles": rows, "rrt": [{"TC": 1}] * rows}]}
    assert graph_from_dict(doc(MAX_RRT_ROWS)).ops[0].usage("TC") == MAX_RRT_ROWS == 4096
    with pytest.raises(FormatError, match=r"op 'A' rrt has 4097 rows, more than 4096: a table lists one row per "
                                          r"cycle; describe a longer op by unit and cycles"):
        graph_from_dict(doc(MAX_RRT_ROWS + 1))
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (MAX_FILE_BYTES + 1))
    with pytest.raises(FormatError, match=r"larger than 32 MiB, far beyond any loop body"):
        load_graph(big)
