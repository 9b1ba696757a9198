"""The incumbents from the graph's structure (``solvers/incumbents.py``): the unit graph of a common
factor scaled back, copies interleaved, and how the search uses them (proofs at the bound, the
scan below a reduction's incumbent, the previous search's schedule kept where z3 finds it)."""
import math
from dataclasses import replace

import pytest

from tvm_twill.data import load_example
from tvm_twill.model import Edge, Graph, Op, check, get_machine, res_mii
from tvm_twill.solvers import SolveOptions, prepare, solve, solve_prepared
from tvm_twill.solvers import incumbents, search
from tvm_twill.solvers.limits import Deadline


def scaled(graph, f: int, machine, spills: bool = True):
    """Every cycle count, delay and (``spills``) spill cost of ``graph`` times ``f`` (spills made explicit)."""
    ops = tuple(replace(o, cycles=o.cycles * f, spill_cost=f * machine.spill_of(o) if spills else o.spill_cost)
                for o in graph.ops)
    edges = tuple(replace(e, delay=e.delay * f) for e in graph.edges)
    return graph.replace(name=f"{graph.name}_x{f}", ops=ops, edges=edges, normalize=False)


def heads(graph, k: int, r: float = 1.0):
    """k copies of ``graph`` side by side (heads sharing one loop), each holding r / k of its registers."""
    ops = tuple(replace(o, name=f"{o.name}_{c}", regs=math.ceil(o.regs * r / k)) for c in range(k) for o in graph.ops)
    edges = tuple(replace(e, src=f"{e.src}_{c}", dst=f"{e.dst}_{c}") for c in range(k) for e in graph.edges)
    return graph.replace(name=f"{graph.name}_h{k}", ops=ops, edges=edges)


def in_units(graph, q: int):
    """A raw graph rounded to units of ``q`` cycles (nonzero op cycles stay >= 1)."""
    ops = tuple(replace(o, cycles=max(1, round(o.cycles / q)),
                        spill_cost=None if o.spill_cost is None else round(o.spill_cost / q)) for o in graph.ops)
    new = {o.name: o for o in ops}
    edges = tuple(replace(e, delay=new[e.src].cycles) for e in graph.edges)
    return graph.replace(ops=ops, edges=edges, normalize=False)


def sub_solver(machine):
    return search._sub_solver(machine, SolveOptions())


def no_heuristic(monkeypatch, ops: int | None = None):
    """The heuristic finds nothing (on graphs of ``ops`` ops; None: on every graph, sub-solves
    included): the structural incumbents' path, whatever the heuristic would have done."""
    real = search.find_incumbent
    monkeypatch.setattr(search, "find_incumbent",
                        lambda g, *a, **kw: None if ops in (None, len(g.ops)) else real(g, *a, **kw))


def test_common_factor_counts_every_cost_an_edge_can_pay():
    h100 = get_machine("h100")
    g = scaled(load_example("fa_fwd_hopper"), 10, h100)
    assert incumbents.common_factor(g, h100) == 10
    unit = incumbents.unit_graph(g, h100, 10)
    assert [o.cycles for o in unit.ops] == [o.cycles for o in load_example("fa_fwd_hopper").ops]
    # a spill cost of the machine's default (1 cycle) divides nothing
    assert incumbents.common_factor(g.replace(ops=tuple(replace(o, spill_cost=None) for o in g.ops)), h100) == 1
    odd = g.replace(edges=g.edges[:-1] + (replace(g.edges[-1], delay=15),))
    assert incumbents.common_factor(odd, h100) == 5


@pytest.mark.parametrize("name,f", [("fa_fwd_hopper", 10), ("fa_bwd_hopper", 7), ("gemm_tma", 64),
                                    ("fa_fwd_blackwell", 10)])
def test_the_unit_schedule_scaled_is_valid_and_bounds_the_search(name, f):
    """The unit graph's schedule times f passes the checker on the scaled graph, at f times the unit
    ii, and the search's answer is never above it."""
    base = load_example(name)
    m = get_machine(base.machine)
    g = prepare(scaled(base, f, m)).graph
    inc = incumbents.reduced(g, m, solve=sub_solver(m), deadline=Deadline(60))
    unit = solve(incumbents.unit_graph(g, m, f), time_limit=60)
    assert inc is not None and inc.seed == incumbents.REDUCTION
    assert inc.ii == f * unit.ii
    cyc = {o.name: o.cycles for o in g.ops}
    from tvm_twill.model import make_schedule
    assert check(make_schedule(g, m.name, inc.ii, inc.times, inc.warps, cyc), g, m) == []
    assert solve(g, time_limit=60).ii <= inc.ii


def test_a_reduction_is_not_always_optimal_and_the_search_goes_below_it(monkeypatch):
    """A recurrence of 3 units over 2 iterations: the unit graph needs ii 2 (integers), so the
    reduction's incumbent is 20 at a factor of 10, but 30 cycles over 2 iterations allow 15; the
    search decides every ii from the lower bound 15 up to the incumbent and finds it."""
    no_heuristic(monkeypatch)
    g = Graph("recurrence", (Op("A", 10, "ALU", spill_cost=10), Op("B", 10, "SFU", spill_cost=10)),
              (Edge("A", "B", 10), Edge("B", "A", 20, distance=2)), machine="h100", normalize=False)
    s = solve(g, options=SolveOptions(time_limit=60, fallback=False))
    found = [(a.ii, a.solver) for a in s.attempts if a.result == "sat"]
    assert (20, incumbents.REDUCTION) in found
    assert s.ii == 15 and s.optimal and s.lower_bound.ii == 15
    assert check(s, g, get_machine("h100")) == []


def test_three_heads_reach_resmii_from_one_copy_and_are_proven_at_once(monkeypatch):
    """30 ops (three heads of the measured Hopper forward, 1024 cycles a unit, every cost times 10):
    one head's schedule interleaved at offsets of its ii reaches ResMII, so the answer is proven
    optimal with no ii to refute.  The heuristic is off on the 30-op graph only (the copy's
    sub-solve keeps it)."""
    no_heuristic(monkeypatch, ops=30)
    m = get_machine("h100")
    g = scaled(heads(in_units(load_example("fa_fwd_hopper_measured"), 1024), 3), 10, m)
    assert len(g.ops) == 30
    s = solve(g, time_limit=60)
    assert (s.ii, s.optimal) == (res_mii(g, m), True) == (120, True)
    assert (120, incumbents.COPIES) in [(a.ii, a.solver) for a in s.attempts if a.result == "sat"]
    assert not [a for a in s.attempts if a.result == "unsat" and a.ii < 120]
    assert check(s, prepare(g).graph, m) == []


def test_copies_whose_accumulators_do_not_fit_one_role_get_roles_of_their_own():
    """Five heads of the Hopper backward (cycles times 10, spills of 1 cycle), each holding 2/5 of
    its registers: five dK and five dV accumulators cannot share one copy's roles (rule 5), so the
    packing renames the roles of some copies; the interleaved schedule reaches ResMII and passes
    the checker."""
    m = get_machine("h100")
    g = prepare(scaled(heads(load_example("fa_bwd_hopper"), 5, r=2.0), 10, m, spills=False)).graph
    shared = [(o.name, o.regs) for o in g.ops if o.name.startswith(("dK_", "dV_"))]
    assert sum(r for _, r in shared) > 2 * m.regs_per_thread_max  # more than two roles can hold
    inc = incumbents.interleaved(g, m, solve=sub_solver(m), deadline=Deadline(60))
    assert inc is not None and inc.ii == res_mii(g, m)
    roles_of = [tuple(inc.warps[f"{n}_{c}"] for n in ("dK", "dV")) for c in range(5)]
    assert len(set(roles_of)) > 1
    from tvm_twill.model import make_schedule
    s = make_schedule(g, m.name, inc.ii, inc.times, inc.warps, {o.name: o.cycles for o in g.ops})
    assert check(s, g, m) == []


def test_where_z3_finds_the_incumbents_ii_the_previous_schedule_is_kept():
    """The raw FA backward in cycles (no normalization): the heuristic stops above the bound, the
    reduction reaches it, and z3 finds a schedule there within the confirmation budget, so the
    answer is the very schedule the previous search returns."""
    prep = prepare(load_example("fa_bwd_raw").replace(normalize=False))
    new = solve_prepared(prep, SolveOptions(time_limit=60))
    old = solve_prepared(prep, SolveOptions(time_limit=60, incumbents=False))
    assert (new.ii, new.length, new.ops, new.optimal) == (old.ii, old.length, old.ops, old.optimal)
    assert incumbents.REDUCTION in [a.solver for a in new.attempts]
    assert incumbents.REDUCTION not in [a.solver for a in old.attempts]


def test_the_option_is_checked():
    from tvm_twill.errors import InputError
    with pytest.raises(InputError, match="incumbents"):
        SolveOptions(incumbents=1)


def test_a_shared_op_fed_by_every_copy_is_placed_after_all_of_them():
    """Three sub-tiles of the Hopper backward sharing the Q/dO loads and the dQ reduction (cycles
    times 10): the reduction, fed by every sub-tile's dQ store within the iteration, is moved
    after the last one and re-solved with z3 while the copies stay fixed; the schedule reaches
    ResMII and passes the checker."""
    m = get_machine("h100")
    shared = ("load_Q", "load_dO", "dQ_reduce")
    base = load_example("fa_bwd_hopper")
    names = [o.name for o in base.ops if o.name not in shared]
    ops = tuple(o for o in base.ops if o.name in shared) + tuple(
        replace(o, name=f"{o.name}_{c}", regs=math.ceil(o.regs / 3)) for c in range(3) for o in base.ops
        if o.name in names)

    def nm(n, c):
        return n if n in shared else f"{n}_{c}"
    edges = tuple(dict.fromkeys(replace(e, src=nm(e.src, c), dst=nm(e.dst, c)) for c in range(3) for e in base.edges))
    g = prepare(scaled(base.replace(name="fa_bwd_hopper_sub3", ops=ops, edges=edges), 10, m, spills=False)).graph
    inc = incumbents.interleaved(g, m, solve=sub_solver(m), deadline=Deadline(60))
    assert inc is not None and inc.ii == res_mii(g, m) == 150
    stores = [e for e in g.edges if e.dst == "dQ_reduce"]
    assert len(stores) == 3
    assert all(inc.times["dQ_reduce"] + e.distance * inc.ii >= inc.times[e.src] + e.delay for e in stores)
    from tvm_twill.model import make_schedule
    s = make_schedule(g, m.name, inc.ii, inc.times, inc.warps, {o.name: o.cycles for o in g.ops})
    assert check(s, g, m) == []
