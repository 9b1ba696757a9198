"""The solve memo (``solvers.memo``): one solve per distinct graph, same answers, bounded, thread-safe.

Pure model tests (no TVM).  The MetaSchedule side (extractions and TVM
verdicts reused across candidates) is in tests/api/test_metaschedule.py.
"""
import threading
import time
from dataclasses import replace

import pytest

from tvm_twill.data import load_example
from tvm_twill.errors import InfeasibleError, InputError
from tvm_twill.model import Edge, Graph, Op, check, get_machine
from tvm_twill.solvers import SolveCache, SolveOptions, graph_key, prepare, solve
from tvm_twill.solvers.memo import LRU


def small(name="loop", prefix="", delay=3, cycles=2):
    """A copy -> mma chain with an accumulator recurrence, its ops prefixed."""
    ops = (Op(f"{prefix}load", cycles=cycles, unit="TMA", smem=1),
           Op(f"{prefix}mma", cycles=2, unit="TC"))
    edges = (Edge(f"{prefix}load", f"{prefix}mma", delay=delay, distance=0),
             Edge(f"{prefix}mma", f"{prefix}mma", delay=2, distance=1))
    return Graph(name=name, ops=ops, edges=edges, machine="h100", normalize=False)


def renamed(g: Graph, prefix: str, name: str) -> Graph:
    to = {op.name: prefix + op.name for op in g.ops}
    return g.replace(name=name, ops=tuple(replace(op, name=to[op.name]) for op in g.ops),
                     edges=tuple(replace(e, src=to[e.src], dst=to[e.dst]) for e in g.edges))


H100 = get_machine("h100")


def answer(s):
    """Everything a schedule says but how long it took."""
    return (s.graph, s.machine, s.ii, s.length, s.ops, s.cycles, s.optimal, s.lower_bound, s.normalization,
            s.streaming, [(a.ii, a.length, a.result, a.reason, a.solver) for a in s.attempts])


def test_second_solve_of_the_same_graph_is_a_hit_with_the_same_schedule():
    cache = SolveCache()
    g = load_example("fa_fwd_fig1")
    first = cache.solve(g, time_limit=60)
    again = cache.solve(g, time_limit=60)
    assert (cache.solves, cache.hits) == (1, 1)
    assert again == first
    assert answer(first) == answer(solve(g, time_limit=60))  # identical to a solve without the cache


def test_names_do_not_matter_positions_do():
    cache = SolveCache()
    g = load_example("fa_fwd_fig1")
    s1 = cache.solve(g, time_limit=60)
    g2 = renamed(g, "cand7_", "k_0_fused")
    s2 = cache.solve(g2, time_limit=60)
    assert (cache.solves, cache.hits) == (1, 1)
    assert s2.graph == "k_0_fused" and set(s2.ops) == set(g2.names)
    for op in g.ops:
        assert s2.ops["cand7_" + op.name] == s1.ops[op.name]
        assert s2.cycles["cand7_" + op.name] == s1.cycles[op.name]
    assert check(s2, prepare(g2, g2.machine).graph, get_machine(g2.machine)) == []
    # the answer a fresh solve of the renamed graph gives, but for which constraint families z3's
    # (name-sensitive) unsat-core minimization names for each refuted ii
    fresh = solve(g2, time_limit=60)
    assert answer(fresh)[:-1] == answer(s2)[:-1]
    assert [(a.ii, a.result) for a in fresh.attempts] == [(a.ii, a.result) for a in s2.attempts]


@pytest.mark.parametrize("change", [
    lambda g: g.replace(edges=tuple(replace(e, delay=e.delay + 1) if e.distance == 0 else e for e in g.edges)),
    lambda g: g.replace(ops=(replace(g.ops[0], cycles=g.ops[0].cycles + 1),) + g.ops[1:]),
    lambda g: g.replace(ops=(replace(g.ops[0], smem=2),) + g.ops[1:]),
    lambda g: g.replace(ops=tuple(reversed(g.ops))),                      # positions are part of the problem
    lambda g: g.replace(edges=g.edges[:1]),                               # no recurrence
])
def test_different_graphs_do_not_collide(change):
    g = small()
    other = change(g)
    assert graph_key(g, H100, SolveOptions()) != graph_key(other, H100, SolveOptions())
    cache = SolveCache()
    cache.solve(g, time_limit=30)
    got = cache.solve(other, time_limit=30)
    assert cache.solves == 2 and cache.hits == 0
    assert answer(got) == answer(solve(other, time_limit=30))


def test_machine_and_options_are_part_of_the_key():
    g = small()
    a100 = get_machine("a100")
    keys = {graph_key(g, H100, SolveOptions()), graph_key(g, a100, SolveOptions()),
            graph_key(g, replace(H100, smem_bytes=1000), SolveOptions()),
            graph_key(g, H100, SolveOptions(time_limit=5)), graph_key(g, H100, SolveOptions(cross_warp_sync=True))}
    assert len(keys) == 5
    # the graph's own name and the progress callback are not
    assert graph_key(g, H100, SolveOptions()) == graph_key(g.replace(name="x"), H100,
                                                          SolveOptions(progress=lambda p: None))
    cache = SolveCache()
    cache.solve(g, H100, time_limit=30)
    cache.solve(g, a100, time_limit=30)
    cache.solve(g, H100, time_limit=31)
    assert cache.solves == 3


def test_infeasible_graphs_are_cached_and_say_where_they_were_found():
    g = small(name="first").replace(ops=(replace(small().ops[0], smem=10**6),) + small().ops[1:])
    cache = SolveCache()
    with pytest.raises(InfeasibleError) as first:
        cache.solve(g, time_limit=30)
    with pytest.raises(InfeasibleError) as same:
        cache.solve(g, time_limit=30)
    assert str(same.value) == str(first.value) and same.value.family == first.value.family
    with pytest.raises(InfeasibleError, match=r"^graph 'second' has the dependence graph of 'first' \(ops by "
                                              r"position\), solved earlier: graph 'first' has no schedule") as other:
        cache.solve(renamed(g, "x_", "second"), time_limit=30)
    assert other.value.family == first.value.family
    assert (cache.solves, cache.hits) == (1, 2)


def test_bounded_least_recently_used():
    cache = SolveCache(maxsize=2)
    g1, g2, g3 = small(delay=3), small(delay=4), small(delay=5)
    cache.solve(g1, time_limit=30)
    cache.solve(g2, time_limit=30)
    cache.solve(g1, time_limit=30)          # g1 is now the most recently used
    cache.solve(g3, time_limit=30)          # evicts g2
    assert len(cache) == 2 and cache.solves == 3
    cache.solve(g1, time_limit=30)
    assert cache.solves == 3
    cache.solve(g2, time_limit=30)
    assert cache.solves == 4
    with pytest.raises(InputError, match="maxsize >= 1"):
        SolveCache(maxsize=0)


def test_threads_asking_for_the_same_graph_solve_it_once():
    table = LRU(8)
    calls = []

    def compute():
        calls.append(1)
        time.sleep(0.2)  # the other threads ask while this runs: they wait for it
        return "answer"

    results = []
    threads = [threading.Thread(target=lambda: results.append(table.get_or_compute("k", compute)))
               for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(calls) == 1
    assert sorted(results) == [("answer", False)] + [("answer", True)] * 5


def test_threads_share_one_cache_of_real_solves():
    cache = SolveCache()
    graphs = [small(delay=d) for d in (3, 4, 5)] * 4
    out = {}

    def work(i, g):
        out[i] = cache.solve(g, time_limit=30)

    threads = [threading.Thread(target=work, args=(i, g)) for i, g in enumerate(graphs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert cache.solves == 3 and cache.hits == 9
    for i, g in enumerate(graphs):
        assert out[i] == out[i % 3]


def test_bugs_are_not_cached():
    table = LRU(4)
    with pytest.raises(ZeroDivisionError):
        table.get_or_compute("k", lambda: 1 / 0)
    assert table.get_or_compute("k", lambda: 7) == (7, False)
