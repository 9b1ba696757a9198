"""model.groups: the loop of a kernel whose consumer warps run as data-parallel groups, and their order.

Pure: the graph split, the order read off a schedule, and (with the solver) the FA-style loop where two
ordered consumer groups beat one: the ping-pong the joint solver recovers.
"""
import pytest
from hypothesis import given, settings

from tvm_twill.errors import InputError
from tvm_twill.model import Edge, Graph, Op, get_machine
from tvm_twill.model.groups import group_name, group_order, split_consumers
from tvm_twill.model.schedule import Placement, Schedule

from small_graphs import fa_loop as _fa_loop
from strategies import graphs


def test_split_divides_the_work_and_copies_the_edges():
    g = _fa_loop()
    s = split_consumers(g, {"load_K", "load_V"}, 2)
    assert s.names == ["load_K", "load_V", "S@0", "S@1", "P@0", "P@1", "O@0", "O@1"]
    assert [s.op(f"O@{k}").cycles for k in (0, 1)] == [8, 8]
    assert s.op("O@1").regs == 128  # a thread keeps its own fragment
    assert s.op("load_K") == g.op("load_K")
    got = {(e.src, e.dst, e.delay, e.distance) for e in s.edges}
    assert ("load_K", "S@0", 4, 0) in got and ("load_K", "S@1", 4, 0) in got
    assert ("S@1", "P@1", 8, 0) in got and ("S@0", "P@1", 8, 0) not in got  # inside a group only
    assert ("O@0", "O@0", 8, 1) in got                                       # a latency, kept
    assert len(s.edges) == 2 * len(g.edges)


def test_split_shrinks_reservation_runs_and_occupancy_delays():
    rrt = tuple([{"ALU": 1, "TC": 1}] * 16 + [{"ALU": 1}] * 4)
    g = Graph("gemm", (Op("copy", 4, "TMA", variable_latency=True), Op("mma", 20, "ALU", rrt=rrt)),
              (Edge("copy", "mma", 69), Edge("mma", "mma", 20, 1)), machine="h100")
    s = split_consumers(g, {"copy"}, 2)
    op = s.op("mma@0")
    assert op.cycles == 10 and op.usage("TC") == 8 and op.usage("ALU") == 10
    assert {(e.src, e.dst, e.delay) for e in s.edges if e.distance} == {("mma@0", "mma@0", 10),
                                                                           ("mma@1", "mma@1", 10)}
    assert split_consumers(g, {"copy"}, 1) is g


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_bad_group_counts_are_refused(bad):
    with pytest.raises(InputError, match="consumer groups"):
        split_consumers(_fa_loop(), {"load_K"}, bad)


def test_unknown_producers_are_refused():
    with pytest.raises(InputError, match="not in graph"):
        split_consumers(_fa_loop(), {"load_Q"}, 2)


@settings(max_examples=40, deadline=None)
@given(graphs(max_ops=6))
def test_split_of_any_graph_is_a_valid_graph_doing_the_same_work(g):
    producers = {op.name for op in g.ops[:1]}
    for k in (2, 3):
        s = split_consumers(g, producers, k)
        assert len(s.ops) == len(producers) + k * (len(g.ops) - len(producers))
        for op in g.ops:
            if op.name in producers:
                continue
            for unit in op.units():
                parts = [s.op(group_name(op.name, j)).usage(unit) for j in range(k)]
                # each group does 1/k of the work, rounded up per run of the reservation table
                slack = k * sum(dict(row).get(unit, 0) for _, _, row in op.reservation_runs())
                assert op.usage(unit) <= sum(parts) <= op.usage(unit) + slack


def _sched(graph, placement, ii=4):
    ops = {n: Placement(t, t // ii, i, w) for i, (n, (t, w)) in enumerate(placement.items())}
    return Schedule(graph.name, "h100", ii, max(t for t, _ in placement.values()) + 1, ops,
                    {n: graph.op(n).cycles for n in placement})


def test_group_order_reads_the_token_order_and_refuses_what_no_kernel_runs():
    s = split_consumers(_fa_loop(), {"load_K", "load_V"}, 2)
    prod = {"load_K": (0, 2), "load_V": (1, 2)}
    second_first = {**prod, "S@0": (4, 0), "P@0": (5, 0), "O@0": (6, 0), "S@1": (2, 1), "P@1": (3, 1),
                    "O@1": (4, 1)}
    assert group_order(_sched(s, second_first), s, {"load_K", "load_V"}, 2) == (1, 0)
    spread = {**second_first, "P@1": (3, 0)}
    assert group_order(_sched(s, spread), s, {"load_K", "load_V"}, 2) is None      # a group on two roles
    shared = {**second_first, "S@1": (2, 0), "P@1": (3, 0), "O@1": (4, 0)}
    assert group_order(_sched(s, shared), s, {"load_K", "load_V"}, 2) is None      # two groups on one role
    with_producer = {**second_first, "S@1": (2, 2), "P@1": (3, 2), "O@1": (4, 2)}
    assert group_order(_sched(s, with_producer), s, {"load_K", "load_V"}, 2) is None


def test_two_ordered_groups_beat_one_on_the_fa_loop():
    """The joint solver, given the two-group split, skews the groups (one's exp under the other's MMAs): a
    smaller ii than one consumer group, each group on a role of its own, the first group issuing first."""
    from dataclasses import replace

    from tvm_twill.solvers import SolveOptions, solve
    g, producers = _fa_loop(), {"load_K", "load_V"}
    m = get_machine("h100")
    one = solve(g, replace(m, warp_groups=2), options=SolveOptions(time_limit=60))
    s = split_consumers(g, producers, 2)
    two = solve(s, replace(m, warp_groups=3), options=SolveOptions(time_limit=60))
    assert two.optimal and one.optimal
    assert two.ii < one.ii
    order = group_order(two, s, producers, 2)
    assert order is not None and sorted(order) == [0, 1]
    first = min((p.time, n) for n, p in two.ops.items() if "@" in n)[1]
    assert first.endswith(f"@{order[0]}")


# ---------------------------------------------------------------------------- what the WS kernel runs
from dataclasses import replace  # noqa: E402

from tvm_twill.model import check  # noqa: E402
from tvm_twill.model.groups import in_program_order, place_groups, turn_sections, with_turns  # noqa: E402

PRODUCERS = {"load_K", "load_V"}


def _solve(graph, roles):
    from tvm_twill.solvers import SolveOptions, prepare, solve
    m = replace(get_machine("h100"), warp_groups=roles)
    sched = solve(graph, m, options=SolveOptions(time_limit=60))
    prep = prepare(graph, m)
    assert check(sched, prep.graph, prep.machine) == []
    return sched, prep


def _runs_in_order(sched, graph, names) -> bool:
    """Each op starts once the one before it finished; the next iteration's first once the last finished."""
    t = {n: sched.ops[n].time for n in names}
    c = {n: graph.op(n).cycles for n in names}
    return all(t[b] >= t[a] + c[a] for a, b in zip(names, names[1:])) and \
        t[names[0]] + sched.ii >= t[names[-1]] + c[names[-1]]


def test_in_program_order_chains_the_consumers_and_the_solver_keeps_the_chain():
    g = _fa_loop()
    ordered = in_program_order(g, PRODUCERS)
    added = {(e.src, e.dst, e.delay, e.distance, e.kind) for e in ordered.edges} - \
        {(e.src, e.dst, e.delay, e.distance, e.kind) for e in g.edges}
    assert added == {("S", "P", 16, 0, "order"), ("P", "O", 16, 0, "order"), ("O", "S", 16, 1, "order")}
    free, _ = _solve(g, 2)
    assert not _runs_in_order(free, g, ["S", "P", "O"])   # the modulo schedule overlaps iterations on one role
    chained, _ = _solve(ordered, 2)
    assert _runs_in_order(chained, g, ["S", "P", "O"]) and chained.ii == 48 > free.ii
    assert in_program_order(g, set(g.names)) is g         # no consumer: nothing to chain


def test_turn_sections_are_the_runs_of_tensor_core_ops():
    assert turn_sections(_fa_loop(), PRODUCERS) == (("S",), ("O",))
    ops = (Op("c", 1, "TMA"), Op("a", 2, "TC"), Op("b", 2, rrt=({"TC": 1, "ALU": 1}, {"ALU": 1})),
           Op("x", 1, "SFU"), Op("y", 3, "TC"))
    g = Graph("runs", ops, (), machine="h100", normalize=False)
    assert turn_sections(g, {"c"}) == (("a", "b"), ("y",))
    assert turn_sections(g, {"c", "a", "b", "y"}) == ()


def test_with_turns_is_a_round_robin_of_sections():
    s = split_consumers(in_program_order(_fa_loop(), PRODUCERS), PRODUCERS, 2)
    t = with_turns(s, (("S",), ("O",)), 2)
    turns = {(e.src, e.dst, e.delay, e.distance) for e in t.edges} - {(e.src, e.dst, e.delay, e.distance)
                                                                       for e in s.edges}
    assert turns == {("S@0", "S@1", 8, 0), ("S@1", "O@0", 8, 0), ("O@0", "O@1", 8, 0), ("O@1", "S@0", 8, 1)}
    assert with_turns(s, (), 2) is s


def _free_hand_offs(g):
    """The consumers' values handed between roles at no cost, as the TVM front-end's graphs have them."""
    return g.replace(ops=tuple(op if op.name in PRODUCERS else replace(op, spill_cost=0) for op in g.ops))


def test_two_groups_taking_turns_beat_one_in_order_group_with_fa3s_structure():
    """One consumer group in program order cannot put its exponentials under its own GEMMs; two groups taking
    turns on the tensor core put each group's exponentials under the other's GEMMs (FA3's ping-pong)."""
    loop = in_program_order(_free_hand_offs(_fa_loop()), PRODUCERS)
    one, _ = _solve(loop, 2)
    split = with_turns(split_consumers(loop, PRODUCERS, 2), (("S",), ("O",)), 2)
    two, prep = _solve(split, 3)
    assert two.optimal and two.ii < one.ii
    placed = place_groups(two, split, PRODUCERS, 2)
    assert check(placed, prep.graph, prep.machine) == []
    roles = {g: {placed.ops[f"{n}@{g}"].warp for n in "SPO"} for g in (0, 1)}
    prod = {placed.ops[n].warp for n in PRODUCERS}
    assert all(len(r) == 1 for r in roles.values()) and roles[0] != roles[1] and not prod & (roles[0] | roles[1])
    assert {n: placed.ops[n].time for n in placed.ops} == {n: two.ops[n].time for n in two.ops}

    def busy(name):
        t, c = two.ops[name].time, split.op(name).cycles
        return {(t + j) % two.ii for j in range(c)}
    for g, other in ((0, 1), (1, 0)):
        gemms = busy(f"S@{other}") | busy(f"O@{other}")
        assert busy(f"P@{g}") <= gemms, g        # every slot of one group's exp is under the other's GEMMs


def test_place_groups_gives_each_group_the_lowest_free_role():
    split = split_consumers(_free_hand_offs(_fa_loop()), PRODUCERS, 2)
    two, prep = _solve(split, 3)
    placed = place_groups(two, split, PRODUCERS, 2)
    prod = two.ops["load_K"].warp
    free = [w for w in range(3) if w != prod]
    assert {placed.ops[f"{n}@{g}"].warp for n in "SPO" for g in (0, 1)} == set(free)
    assert all(placed.ops[f"S@{g}"].warp == free[g] for g in (0, 1)) and placed.ops["load_V"].warp == prod
    assert check(placed, prep.graph, replace(prep.machine, warp_groups=2))   # a role too many for 2 roles
    with pytest.raises(InputError, match="not a consumer-group copy"):
        place_groups(two, split, PRODUCERS - {"load_V"}, 2)


def test_placing_groups_apart_is_checked_where_hand_offs_cost():
    """With the machine's spill cost on the consumers' edges, the solver may keep both groups on one role to
    save the turns' hand-offs; placed apart, the schedule pays them, and the checker says so (the planner then
    keeps one group)."""
    loop = in_program_order(_fa_loop(), PRODUCERS)
    split = with_turns(split_consumers(loop, PRODUCERS, 2), (("S",), ("O",)), 2)
    two, prep = _solve(split, 3)
    placed = place_groups(two, split, PRODUCERS, 2)
    bad = check(placed, prep.graph, prep.machine)
    assert bad and all(v.rule == 1 and "spill" in v.message for v in bad)


# ---------------------------------------------------------------------------- the turn across the back edge
from tvm_twill.model.groups import retime, rotate_turns  # noqa: E402


def test_retime_counts_ops_one_iteration_later():
    g = in_program_order(_fa_loop(), PRODUCERS)        # chain S -> P -> O, O -> S (distance 1)
    r = retime(g, {"O"})
    old = {(e.src, e.dst, e.kind): e.distance for e in g.edges}
    new = {(e.src, e.dst, e.kind): e.distance for e in r.edges}
    assert new[("P", "O", "data")] == old[("P", "O", "data")] + 1 == 1       # into O: one more
    assert new[("load_V", "O", "data")] == 1
    assert new[("O", "S", "order")] == old[("O", "S", "order")] - 1 == 0      # out of O: one less
    assert new[("O", "O", "data")] == old[("O", "O", "data")] == 1           # O to O: the same
    assert {k: v for k, v in new.items() if "O" not in k[:2]} == {k: v for k, v in old.items() if "O" not in k[:2]}
    with pytest.raises(InputError, match="distance 0 out of them"):
        retime(g, {"S"})                                # S -> P has distance 0: S cannot go later alone
    with pytest.raises(InputError, match="not in graph"):
        retime(g, {"nope"})


def test_rotate_turns_merges_the_last_run_with_the_first():
    g = in_program_order(_fa_loop(), PRODUCERS)
    r, sections = rotate_turns(g, PRODUCERS)
    assert sections == (("O", "S"),) and r.edges == retime(g, {"O"}).edges
    # a body that does not end with a tensor-core run keeps its turns
    ops = (Op("c", 1, "TMA"), Op("a", 2, "TC"), Op("x", 1, "SFU"), Op("y", 3, "TC"), Op("z", 1, "ALU"))
    h = in_program_order(Graph("runs", ops, (), machine="h100", normalize=False), {"c"})
    assert rotate_turns(h, {"c"}) == (h, (("a",), ("y",)))
    one = in_program_order(Graph("one", ops[:2], (), machine="h100", normalize=False), {"c"})
    assert rotate_turns(one, {"c"}) == (one, (("a",),))


def test_the_turn_across_the_back_edge_is_fa3s_ping_pong_and_not_slower():
    """Two groups, one turn per iteration (O of iteration k, S of k + 1): the solved schedule keeps each
    group's program order in the rotated body, the turns alternate with no other group's GEMM inside one,
    and its ii is no larger than with a turn per GEMM."""
    loop = in_program_order(_free_hand_offs(_fa_loop()), PRODUCERS)
    per_gemm, _ = _solve(with_turns(split_consumers(loop, PRODUCERS, 2), (("S",), ("O",)), 2), 3)
    rotated, sections = rotate_turns(loop, PRODUCERS)
    split = with_turns(split_consumers(rotated, PRODUCERS, 2), sections, 2)
    two, prep = _solve(split, 3)
    assert two.optimal and two.ii <= per_gemm.ii
    for g in (0, 1):   # the rotated body O, S, P in order, one iteration after the other
        assert _runs_in_order(two, split, [f"O@{g}", f"S@{g}", f"P@{g}"])
    t = {n: two.ops[n].time for n in two.ops}
    c = {n: split.op(n).cycles for n in split.names}
    # turns in the order group 0, group 1, group 0 (next iteration): each starts after the other's ends
    assert t["O@1"] >= t["S@0"] + c["S@0"] and t["O@0"] + two.ii >= t["S@1"] + c["S@1"]


# ---------------------------------------------------------------------------- the look-ahead turn
from tvm_twill.model.groups import look_ahead  # noqa: E402


def _fa_split():
    ops = (Op("K", 4, "TMA"), Op("S", 8, "TC"), Op("St", 2, "ALU"), Op("P", 8, "SFU"), Op("O", 8, "TC"))
    edges = (Edge("K", "S", 0), Edge("S", "St", 8), Edge("St", "P", 2), Edge("P", "O", 8), Edge("O", "O", 8, 1))
    loop = in_program_order(Graph("fa", ops, edges, machine="h100", normalize=False), {"K"})
    rotated, sections = rotate_turns(loop, {"K"})
    return with_turns(split_consumers(rotated, {"K"}, 2), sections, 2), sections


def test_the_look_ahead_graph_flips_the_turn_and_defers_os_wait():
    """Edges read off by hand for FA's loop: per group S before O (S's cycles), the softmax's first statement
    once O is issued (1), P (which overwrites what O reads) once O is done; the turn O of group 0 -> S of
    group 1 -> S of group 0 in the next iteration; the turn across the back edge's O -> S and S -> St edges
    gone."""
    split, sections = _fa_split()
    ahead = look_ahead(split, sections, 2)
    order = {(e.src, e.dst, e.delay, e.distance) for e in ahead.edges if e.kind == "order"}
    c = 4                                                                   # each group's half of 8 cycles
    for g in (0, 1):
        assert (f"S@{g}", f"O@{g}", c, 0) in order and (f"O@{g}", f"St@{g}", 1, 0) in order
        assert (f"O@{g}", f"P@{g}", c, 0) in order                         # P_k overwrites what O_(k-1) read
        assert not any(e[:2] in {(f"O@{g}", f"S@{g}"), (f"S@{g}", f"St@{g}")} for e in order)
    assert ("O@0", "S@1", c, 0) in order and ("O@1", "S@0", c, 1) in order
    assert not any(e[:2] in {("S@0", "O@1"), ("S@1", "O@0")} for e in order)
    assert [e for e in ahead.edges if e.kind == "data"] == [e for e in split.edges if e.kind == "data"]


def test_the_look_ahead_graph_needs_one_turn_across_the_back_edge():
    split, sections = _fa_split()
    assert look_ahead(split, (), 2) is None
    assert look_ahead(split, (("S",), ("O",)), 2) is None                  # a turn per GEMM
    assert look_ahead(split, (("S", "O"),), 2) is None                     # not the last run, then the first


def test_the_look_ahead_turn_overlaps_a_groups_softmax_with_its_own_gemm():
    """A softmax longer than the GEMMs (St 16, P 16 cycles against S, O 8): the turn across the back edge
    leaves the tensor core idle (ii 24 > 16 cycles of GEMMs), the look-ahead turn puts a group's St under its
    own in-flight O and reaches ii 17; in its schedule St overlaps that O in some group, and P (which
    overwrites what O reads) still starts only after O ends, and O after S."""
    ops = (Op("K", 4, "TMA"), Op("S", 8, "TC"), Op("St", 16, "ALU"), Op("P", 16, "SFU"), Op("O", 8, "TC"))
    edges = (Edge("K", "S", 0), Edge("S", "St", 8), Edge("St", "P", 16), Edge("P", "O", 16), Edge("O", "O", 8, 1))
    loop = in_program_order(Graph("fa", ops, edges, machine="h100", normalize=False), {"K"})
    rotated, sections = rotate_turns(loop, {"K"})
    split = with_turns(split_consumers(rotated, {"K"}, 2), sections, 2)
    plain, _ = _solve(split, 3)
    ahead = look_ahead(split, sections, 2)
    sched, _ = _solve(ahead, 3)
    assert (plain.ii, sched.ii) == (24, 17)
    t, c = {n: sched.ops[n].time for n in sched.ops}, {n: ahead.op(n).cycles for n in ahead.names}
    for g in (0, 1):
        assert t[f"O@{g}"] >= t[f"S@{g}"] + c[f"S@{g}"] and t[f"P@{g}"] >= t[f"O@{g}"] + c[f"O@{g}"]
    assert any(t[f"St@{g}"] < t[f"O@{g}"] + c[f"O@{g}"] for g in (0, 1))
