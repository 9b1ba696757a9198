"""The bundled example graphs (tvm_twill/data/graphs): each loads, solves to a
proven optimum that passes the independent checker, and has the shape the
Twill paper reports (tvm_twill/data/graphs/README.md).

The assertions are the properties every optimal schedule must have (so they
hold whichever optimum z3 returns), each with the rule that forces it.
"""
import functools

import pytest

from tvm_twill import report
from tvm_twill.data import example_names, load_example
from tvm_twill.model import check, rec_mii, res_mii
from tvm_twill.solvers import prepare, solve
from steady_state import busy

EXAMPLES = ["fa_bwd_hopper", "fa_bwd_raw", "fa_fwd_blackwell", "fa_fwd_blackwell_fa4", "fa_fwd_blackwell_raw",
            "fa_fwd_fig1",
            "fa_fwd_hopper", "fa_fwd_hopper_measured", "fa_fwd_hopper_raw", "gemm_tma"]

#: Generous: every example solves in seconds; the limit only guards a slow CI.
TIME_LIMIT = 300


@functools.cache
def solved(name):
    """(schedule, prepared graph, machine) of a bundled example, solved once per session."""
    graph = load_example(name)
    schedule = solve(graph, time_limit=TIME_LIMIT)
    prep = prepare(graph)
    return schedule, prep.graph, prep.machine


def warp_of(schedule, *names):
    return {schedule.ops[n].warp for n in names}


def vl_warp_ops(schedule, graph):
    """The ops on the variable-latency warp(s)."""
    vl = {schedule.ops[op.name].warp for op in graph.ops if op.variable_latency}
    return {n for n, p in schedule.ops.items() if p.warp in vl}


def test_bundled_examples_are_packaged():
    assert example_names() == EXAMPLES


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_is_optimal_and_valid(name):
    schedule, graph, machine = solved(name)
    assert check(schedule, graph, machine) == []
    assert schedule.optimal is True
    lb = schedule.lower_bound
    assert (lb.resource, lb.recurrence) == (res_mii(graph, machine), rec_mii(graph))
    # Every example reaches its lower bound: the paper's schedules keep the
    # bottleneck unit busy in every cycle.
    assert schedule.ii == lb.ii == max(lb.resource, lb.recurrence)
    assert all(a.result == "unsat" for a in schedule.attempts if a.ii < schedule.ii)
    # Variable-latency ops (TMA) share one warp that issues nothing else (rule 3).
    assert vl_warp_ops(schedule, graph) == {op.name for op in graph.ops if op.variable_latency}


def test_fig1_is_the_paper_schedule():
    """Figure 1(d): I = 2, L = 4, S in stage 0, P and O in stage 1."""
    schedule, graph, machine = solved("fa_fwd_fig1")
    assert (schedule.ii, schedule.length) == (2, 4)
    assert {n: p.stage for n, p in schedule.ops.items()} == {"S": 0, "P": 1, "O": 1}
    # The blocking wait of P and the spill on cross-warp edges leave one
    # assignment: P and O share a warp, S is on another (rules 1 and 4).
    assert warp_of(schedule, "P") == warp_of(schedule, "O") != warp_of(schedule, "S")


def test_fig1_listing_is_figure_1e():
    """Prologue S; steady state S, P, O; epilogue P, O (Figure 1(e)-(f))."""
    schedule, graph, machine = solved("fa_fwd_fig1")
    rows = report.pipeline(schedule, graph, machine).splitlines()[2:]
    units = [row.split()[1:4] for row in rows]
    assert units == [["prologue", "S@0", "-"], ["prologue", "-", "-"],
                     ["steady", "S@1", "P@0"], ["steady", "O@0", "-"],
                     ["epilogue", "-", "P@1"], ["epilogue", "O@1", "-"]]


@pytest.mark.parametrize("name", ["fa_fwd_hopper", "fa_fwd_hopper_raw"])
def test_hopper_forward_ping_pong(name):
    """FA3 on Hopper: the two sub-tiles interleave so the tensor core never
    idles, and each sub-tile's exponential runs under the other's GEMMs."""
    schedule, graph, machine = solved(name)
    tc = busy(schedule, graph, "TC")
    assert schedule.ii == sum(op.usage("TC") for op in graph.ops)  # ii = TC ResMII
    assert all(tc.values()), "the tensor core idles in some slot"
    sfu = busy(schedule, graph, "SFU")
    for mine, other in (("_a", "_b"), ("_b", "_a")):
        exp_slots = [r for r, ops in sfu.items() if "P" + mine in ops]
        assert exp_slots and all(tc[r][0].endswith(other) for r in exp_slots), \
            f"exp P{mine} overlaps a GEMM of its own sub-tile"
    # Two 128x128 fp32 accumulators are 256 registers: they cannot share a warp (rule 5).
    assert warp_of(schedule, "O_a") != warp_of(schedule, "O_b")


@pytest.mark.parametrize("name", ["fa_fwd_blackwell", "fa_fwd_blackwell_raw"])
def test_blackwell_forward_specializes_warps(name):
    """FA4 on Blackwell: GEMM:EXP is 1:2, so with two sub-tiles both the tensor
    core and the MUFU are saturated; blocking TMEM loads force the work apart."""
    schedule, graph, machine = solved(name)
    for unit in ("TC", "SFU"):
        assert schedule.ii == sum(op.usage(unit) for op in graph.ops)
        assert all(busy(schedule, graph, unit).values()), f"{unit} idles in some slot"
    # A softmax waits on TMEM (blocking) while the saturated tensor core always
    # runs something: the MMAs cannot all share one warp with it, so at least
    # two compute warps besides the load warp are needed (rule 4).
    assert len(schedule.warps_used()) >= 3
    # The two exps together keep the MUFU busy in every slot, so a correction
    # (a blocking TMEM load of the accumulator) cannot sit on a warp issuing both.
    for c in ("C_a", "C_b"):
        assert warp_of(schedule, c) != warp_of(schedule, "P_a") or \
            warp_of(schedule, c) != warp_of(schedule, "P_b")


def test_blackwell_forward_gets_fa4_roles():
    """FA4's split on the b200 roles: with the S row the softmax holds in registers (128 per thread), each
    sub-tile's softmax on a softmax warp group of its own, both corrections on the correction warp group,
    every MMA on the single MMA warp, the loads on the load warp; the epilogue warp idles in the loop."""
    schedule, graph, machine = solved("fa_fwd_blackwell_fa4")
    role = {n: machine.roles[p.warp].name for n, p in schedule.ops.items()}
    assert role == {"load_K": "load", "load_V": "load", "S_a": "mma", "O_a": "mma", "S_b": "mma", "O_b": "mma",
                    "R_a": "softmax0", "P_a": "softmax0", "R_b": "softmax1", "P_b": "softmax1",
                    "C_a": "correction", "C_b": "correction"}
    for unit in ("TC", "SFU"):  # both saturated, as in fa_fwd_blackwell
        assert schedule.ii == sum(op.usage(unit) for op in graph.ops)
    # why: two S rows (2 x 128 registers) exceed a softmax group's 192, and the correction's 80 holds none
    assert [r.regs for r in machine.roles] == [192, 192, 80, 48, 48, 48]
    assert sum(r.warps for r in machine.roles) == 15  # FA4's 16 warps less its idle one


@pytest.mark.parametrize("name", ["fa_bwd_hopper", "fa_bwd_raw"])
def test_backward_is_tensor_core_bound_and_register_split(name):
    """FA backward (five GEMMs, one exp): ii is the tensor-core time, and the
    dK and dV accumulators (128 registers each) live on different warps."""
    schedule, graph, machine = solved(name)
    assert schedule.ii == sum(op.usage("TC") for op in graph.ops)
    assert all(busy(schedule, graph, "TC").values())
    assert warp_of(schedule, "dK") != warp_of(schedule, "dV")
    assert "dQ_reduce" in vl_warp_ops(schedule, graph)


def test_gemm_streams_loads_under_the_mma():
    """GEMM main loop: the loads run on their own warp with zero latency, the
    MMA is issued back to back (ii = MMA cycles = TMA cycles)."""
    schedule, graph, machine = solved("gemm_tma")
    assert schedule.ii == 2 and schedule.streaming["ops"] == ["load_A", "load_B"]
    assert warp_of(schedule, "mma") != warp_of(schedule, "load_A", "load_B")
