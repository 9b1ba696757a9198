"""The K best schedules (``solve(..., top_k=K)``, ``solvers.topk``) and their equivalence (``model.canonical``)."""
import bruteforce
import pytest
from bruteforce import bounded
from hypothesis import HealthCheck, given, settings
from strategies import graphs, machine

from tvm_twill.errors import InfeasibleError, InputError
from tvm_twill.model import Edge, Graph, Op, check
from tvm_twill.model.canonical import automorphisms, canonical_form
from tvm_twill.solvers import Deadline, SolveOptions, prepare, solve

K = 4


def _form(s, g, m):
    return canonical_form(g, {n: p.time for n, p in s.ops.items()}, {n: p.warp for n, p in s.ops.items()},
                          m.warp_groups, automorphisms(g, m)[0])


def _measures(s, g, m):
    """(ii, length, register peak, -time sum), by the brute force's own arithmetic."""
    t = {n: p.time for n, p in s.ops.items()}
    t0 = min(t.values())
    return (s.ii, max(t[o.name] + o.cycles for o in g.ops) - t0,
            bruteforce._reg_peak(g, s.ii, t, {n: p.warp for n, p in s.ops.items()}),
            -sum(x - t0 for x in t.values()))


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(graphs(min_ops=2, max_ops=3, max_cycles=2))
def test_k_best_equal_brute_force(g):
    m = machine(warp_groups=2, regs=200)
    pg = prepare(g, m).graph
    ii_max = 6
    try:
        got = solve(g, m, time_limit=120, top_k=K, options=SolveOptions(max_ii=ii_max))
    except InfeasibleError:
        return
    for s in got:
        assert check(s, pg, m) == []
    first = (got[0].ii, _form(got[0], pg, m))
    want = bounded(bruteforce.k_best, pg, m, K, max(ii_max, got[0].ii), first=first, max_nodes=400_000)
    assert [(_measures(s, pg, m), _form(s, pg, m)) for s in got] == [(key, form) for key, form in want]


def _copies():
    """Two interchangeable ops (automorphic: swapping them renames the schedule) feeding a third."""
    ops = (Op("A0", 1, "ALU", regs=32), Op("A1", 1, "ALU", regs=32), Op("B", 2, "SFU", regs=64))
    edges = (Edge("A0", "B", 1), Edge("A1", "B", 1), Edge("A0", "A0", 1, 1), Edge("A1", "A1", 1, 1),
             Edge("B", "B", 2, 1))
    return Graph("copies", ops, edges, normalize=False)


@pytest.mark.parametrize("k", [1, 3, 6])
def test_k_best_equal_brute_force_with_interchangeable_ops(k):
    g, m = _copies(), machine(warp_groups=2, regs=200)
    assert len(automorphisms(g, m)[0]) == 2
    got = solve(g, m, time_limit=120, top_k=k, options=SolveOptions(max_ii=5))
    want = bruteforce.k_best(g, m, k, 5, first=(got[0].ii, _form(got[0], g, m)), max_nodes=400_000)
    assert [(_measures(s, g, m), _form(s, g, m)) for s in got] == [(key, form) for key, form in want]


def _two_heads():
    ops, edges = [], []
    for h in (0, 1):
        ops += [Op(f"S{h}", 1, "TC", regs=32), Op(f"P{h}", 1, "SFU", regs=32)]
        edges += [Edge(f"S{h}", f"P{h}", 1), Edge(f"P{h}", f"S{h}", 1, 1)]
    return Graph("heads", tuple(ops), tuple(edges), normalize=False)


def test_swapped_heads_rotated_slots_and_renamed_roles_are_one_class():
    g, m = _two_heads(), machine(warp_groups=3)
    maps, complete = automorphisms(g, m)
    assert complete and len(maps) == 2  # the identity and the swap of the heads
    t = {"S0": 0, "P0": 1, "S1": 1, "P1": 3}
    w = {"S0": 0, "P0": 1, "S1": 1, "P1": 2}
    swapped = ({"S1": 0, "P1": 1, "S0": 1, "P0": 3}, {"S1": 0, "P1": 1, "S0": 1, "P0": 2})
    shifted = ({n: x + 5 for n, x in t.items()}, {n: (x + 1) % 3 for n, x in w.items()})
    forms = {canonical_form(g, a, b, 3, maps) for a, b in [(t, w), swapped, shifted]}
    assert len(forms) == 1
    assert canonical_form(g, {**t, "P1": 4}, w, 3, maps) not in forms


def test_k_best_are_distinct_and_ordered():
    g, m = _two_heads(), machine(warp_groups=3)
    got = solve(g, m, time_limit=60, top_k=8)
    assert len(got) == 8
    forms = [_form(s, g, m) for s in got]
    assert len(set(forms)) == 8
    keys = [_measures(s, g, m) for s in got]
    assert keys == sorted(keys)
    plain = solve(g, m, time_limit=60)  # the first is the plain solve's schedule
    assert (got[0].ii, got[0].length, got[0].ops) == (plain.ii, plain.length, plain.ops)


def test_top_k_refuses_a_bad_count():
    g = _two_heads()
    with pytest.raises(InputError, match="top_k must be an integer from 1 to 64"):
        solve(g, machine(), top_k=0)
    with pytest.raises(InputError, match="top_k must be an integer from 1 to 64"):
        SolveOptions(top_k=True)


class _Clock:
    """A clock that advances one second at every read."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        self.now += 1.0
        return self.now


def _reads(g, m, **kw):
    clock = _Clock()
    got = solve(g, m, deadline=Deadline(1e9, clock=clock), **kw)
    return clock.now, got


def test_top_k_obeys_the_deadline_by_an_injected_clock():
    g, m = _two_heads(), machine(warp_groups=3)
    plain, _ = _reads(g, m)
    full, every = _reads(g, m, top_k=8)
    assert len(every) == 8 and full > plain + 20
    # time runs out during the search for the next best: fewer schedules, each valid, the first
    # unchanged, no error, and the search stops right after the limit
    counts = []
    for limit in (plain + 5, (plain + full) // 2, full - 20):
        clock = _Clock()
        got = solve(g, m, top_k=8, deadline=Deadline(limit, clock=clock))
        counts.append(len(got))
        assert 1 <= len(got) < 8
        assert got[0].ops == every[0].ops
        assert all(check(s, g, m) == [] for s in got)
        assert clock.now <= limit + 10
    assert counts == sorted(counts) and counts[0] < counts[-1]  # more time, more schedules


def test_twenty_op_graph_gets_k_distinct_valid_schedules():
    """Two copies of the Hopper forward graph (20 ops): z3 cannot find the next class within its budget,
    so the neighbours of the best fill in; still distinct, valid, in rank order, the first the plain one."""
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
    from scale_graphs import copies
    from tvm_twill.data import load_example

    g = copies(load_example("fa_fwd_hopper"), 2)
    prep = prepare(g)
    pg, m = prep.graph, prep.machine
    got = solve(g, time_limit=120, top_k=4)
    assert len(got) == 4
    assert all(check(s, pg, m) == [] for s in got)
    assert len({_form(s, pg, m) for s in got}) == 4
    keys = [_measures(s, pg, m) for s in got]
    assert keys[1:] == sorted(keys[1:]) and keys[0][0] == min(k[0] for k in keys)
    assert got[0].ops == solve(g, time_limit=120).ops


def test_the_solve_cache_keys_top_k_and_renames_the_alternatives():
    from tvm_twill.solvers import SolveCache
    g, m = _two_heads(), machine(warp_groups=3)
    renamed = Graph("heads2", tuple(Op(op.name + "_x", op.cycles, op.unit, regs=op.regs) for op in g.ops),
                    tuple(Edge(e.src + "_x", e.dst + "_x", e.delay, e.distance) for e in g.edges), normalize=False)
    cache = SolveCache()
    one = cache.solve(g, m, options=SolveOptions(top_k=1))
    three = cache.solve(g, m, options=SolveOptions(top_k=3))  # another key: solved again
    assert cache.solves == 2 and not one.alternatives and len(three.alternatives) == 2
    again = cache.solve(renamed, m, options=SolveOptions(top_k=3))  # the same graph by position: reused
    assert cache.solves == 2 and cache.hits == 1
    for s, r in zip([three, *three.alternatives], [again, *again.alternatives]):
        assert r.graph == "heads2" and set(r.ops) == {n + "_x" for n in s.ops}
        assert all(r.ops[n + "_x"] == p for n, p in s.ops.items())
        assert check(r, renamed, m) == []


def test_progress_reports_the_search_for_the_next_best():
    g, m = _two_heads(), machine(warp_groups=3)
    seen = []
    solve(g, m, time_limit=60, top_k=3, progress=seen.append)
    phases = [p.phase for p in seen]
    assert phases.index("top-k") > phases.index("done")
    (top,) = [p for p in seen if p.phase == "top-k"]
    assert "the next best schedules at ii=2" in top.line()


@pytest.mark.parametrize("name", ["fa_fwd_blackwell", "fa_fwd_blackwell_fa4"])
def test_named_roles_are_renamed_only_within_their_kind(name):
    """b200's FA4 roles are not interchangeable (warps and budgets differ): the K best keep every op on a
    role of its width and budget (the checker accepts each), and two schedules that differ by a swap of
    unlike roles are different classes."""
    from tvm_twill.data import load_example
    from tvm_twill.model.canonical import canonical_roles
    g = load_example(name)
    best = solve(g, time_limit=60, top_k=3)
    prep = prepare(g)
    m = prep.machine
    assert m.roles and len({r.kind for r in m.roles}) > 1
    for s in best:
        assert check(s, prep.graph, m) == []
        w = {n: p.warp for n, p in s.ops.items()}
        assert canonical_roles(prep.graph, w, m.warp_groups, m.roles) == w  # already in canonical numbering
        assert all(m.role_takes(w[o.name], o) for o in prep.graph.ops)
    forms = [_form_named(s, prep.graph, m) for s in best]
    assert len(set(forms)) == len(forms)


def _form_named(s, g, m):
    return canonical_form(g, {n: p.time for n, p in s.ops.items()}, {n: p.warp for n, p in s.ops.items()},
                          m.warp_groups, automorphisms(g, m)[0], m.roles)
