"""Ordered consumer groups (named-barrier turns, FA3's ping-pong) in the warp-specialized kernels.

No GPU: the kernels are compiled with ``tvm.compile`` (and ``nvcc -cubin`` when installed); the tests read
the CUDA source and the emitted facts, and the protocol (rings + named barriers) is model checked.
"""
import re
import shutil
import subprocess

import pytest

tvm = pytest.importorskip("tvm")

import tvm_twill  # noqa: E402
import tvm_twill.planner.warpspec as warpspec  # noqa: E402
from tvm_twill.errors import UnsupportedLoopError  # noqa: E402
from tvm_twill.model.pipeline import WS_CONSUMER_ORDER  # noqa: E402
from tvm_twill.model.protocol import check_ring  # noqa: E402
from tvm_twill.transforms.pipelines import emit_and_check  # noqa: E402
from tvm_twill.workloads import tensorcore_gemm, wgmma_gemm  # noqa: E402

from small_graphs import fa_loop as _fa_loop  # noqa: E402

N = 1024


def _source(sch, arch, plan):
    with tvm.transform.PassContext(config={"tirx.use_async_copy": 1}):
        f = tvm.compile(sch.mod, target=tvm.target.Target({"kind": "cuda", "arch": arch}),
                        tir_pipeline=plan.tir_pipeline)
    return f.mod.imports[0].inspect_source()


@pytest.fixture(scope="module")
def ordered():
    """TVM's mma GEMM (4 consumer warps), warp-specialized, then given two ordered groups (1 first)."""
    out = {}
    for arch in ("sm_90a", "sm_80"):
        sch, k0, k1 = tensorcore_gemm(N)
        plan = tvm_twill.auto_pipeline(sch, [k0, k1], arch, warp_specialize=True)
        if WS_CONSUMER_ORDER in sch.get(k0).annotations:  # sch.annotate keeps a key's first value
            sch.unannotate(k0, WS_CONSUMER_ORDER)
        sch.annotate(k0, WS_CONSUMER_ORDER, [1, 0])
        facts, report = emit_and_check(sch.mod, arch)
        out[arch] = (sch, k0, plan, facts, report, _source(sch, arch, plan))
    return out


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_groups_take_turns_through_named_barriers(ordered, arch):
    sch, k0, plan, facts, report, src = ordered[arch]
    assert facts.order == (1, 0) and facts.order_threads == 128  # 2 groups of 2 warps, both sides of a turn
    assert facts.order_prologue and facts.pass_after_read and facts.skip_last_pass
    consumer = src[src.index("for (int ws_k"):]
    sync = re.search(r"bar_sync_count_sync\(\(\(uint\)\(\(ws_warp >> 1\) \+ 1\)\), \(uint\)128\)", consumer)
    arrive = re.search(r"bar_arrive_arrive\(\(\(uint\)\(\(\(ws_warp >> 1\) == 0\) \? 2 : 1\)\), \(uint\)128\)",
                       consumer)
    wait = re.search(r"mbarrier_(test_)?wait", consumer).start()  # sm_90a try_wait, sm_80 a test_wait loop
    assert sync and arrive and wait < sync.start() < arrive.start()
    # the MMAs sit between the turn and the pass; the slot is released after the pass
    assert "mma" in consumer[sync.end():arrive.start()]
    assert arrive.start() < consumer.index("mbarrier_arrive", arrive.end())
    # the prologue: group 0, the last in the order, gives group 1 (barrier 2) its first turn
    before = src[:src.index("for (int ws_k")]
    assert re.search(r"if \(\(ws_warp >> 1\) == 0\) \{\s*tvm_builtin_ptx_bar_arrive_arrive\(\(uint\)2, \(uint\)128\)",
                     before)
    assert "__syncthreads" not in consumer


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_the_emitted_turns_pass_the_model_check(ordered, arch):
    facts, report = ordered[arch][3:5]
    proto = facts.ring_protocol()
    assert proto.order == (1, 0) and proto.bar_count == 4 and proto.consumers == 4
    assert report.ok and report.states > 100
    # the same kernel with the pass before the MMAs, or without the prologue, fails
    bad = check_ring(type(proto)(**{**proto.__dict__, "pass_after_read": False}))
    assert not bad.ok and bad.violations[0].kind == "order"
    bad = check_ring(type(proto)(**{**proto.__dict__, "prologue_arrive": False}))
    assert not bad.ok and bad.violations[0].kind == "deadlock"


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_ordered_kernels_fit_registers_without_spills(ordered, arch, tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    cu = tmp_path / "k.cu"
    cu.write_text(ordered[arch][5])
    r = subprocess.run(["nvcc", f"-arch={arch}", "-cubin", "-Xptxas", "-v", "-o", str(tmp_path / "k.cubin"),
                        str(cu)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout + r.stderr
    assert "0 bytes spill stores" in out and "C7508" not in out


def test_order_annotation_must_be_a_permutation():
    sch, k0, k1 = tensorcore_gemm(N)
    tvm_twill.auto_pipeline(sch, [k0, k1], "sm_80", warp_specialize=True)
    for bad in ([0, 0], [1], [0, 2], [0, "x"]):
        sch.annotate(k0, WS_CONSUMER_ORDER, bad)
        with pytest.raises(UnsupportedLoopError, match=re.escape(f"must be a permutation of 0 .. G-1 with "
                                                                 f"2 <= G <= 7, got {bad}")):
            emit_and_check(sch.mod, "sm_80")
        sch.unannotate(k0, WS_CONSUMER_ORDER)
    sch.annotate(k0, WS_CONSUMER_ORDER, [0, 1, 2])
    with pytest.raises(UnsupportedLoopError, match="4 consumer warps do not divide into 3"):
        emit_and_check(sch.mod, "sm_80")


def test_wgmma_groups_must_be_whole_warp_groups():
    sch, k0, _ = wgmma_gemm(256)
    tvm_twill.auto_pipeline(sch, k0, "sm_90a", warp_specialize=True)
    sch.annotate(k0, WS_CONSUMER_ORDER, [0, 1])
    with pytest.raises(UnsupportedLoopError, match="split a warp group"):
        emit_and_check(sch.mod, "sm_90a")


def test_the_planner_keeps_one_group_where_the_split_gains_nothing(mma_gemm):
    sch, k0, k1 = mma_gemm()
    plan = tvm_twill.auto_pipeline(sch, [k0, k1], "sm_90a", warp_specialize=True)
    ws = plan.warp_specialization
    assert ws.consumer_order is None and ws.facts.order == ()
    assert ws.groups_ii_cycles is not None and ws.groups_ii_cycles >= ws.ii_ws_cycles
    assert ws.groups_note.startswith("one group") and "consumer groups: one group" in plan.explain()
    sch, k0, _ = wgmma_gemm(256)
    ws = tvm_twill.auto_pipeline(sch, k0, "sm_90a", warp_specialize=True).warp_specialization
    assert ws.consumer_order is None and "whole warp groups" in ws.groups_note


def test_the_planner_orders_groups_where_the_joint_schedule_does(mma_gemm):
    """The decision on the FA-style loop as the kernel runs it (consumers in program order, values handed
    between roles at no cost as in the front-end's graphs): two groups taking one turn per iteration have the
    smaller ii, so the order is taken, and the note says what the turns are."""
    from dataclasses import replace

    from tvm_twill.model import get_machine
    from tvm_twill.model.groups import in_program_order
    from tvm_twill.solvers import SolveOptions, solve
    sch, k0, k1 = mma_gemm()
    func = next(f for _, f in sch.mod.functions_items())
    producers = {"load_K", "load_V"}
    g = in_program_order(_fa_loop(), producers)
    g = g.replace(ops=tuple(op if op.name in producers else replace(op, spill_cost=0) for op in g.ops))
    one = solve(g, replace(get_machine("h100"), warp_groups=2), options=SolveOptions(time_limit=60))
    decided = warpspec.order_consumer_groups(
        func, g, producers, get_machine("h100"), SolveOptions(time_limit=60), solve, one.ii, 1)
    grouped = decided.solved.schedule
    assert decided.no_lookahead is None        # mma.sync, not wgmma: nothing to leave in flight, no look-ahead
    # the body starts with S and ends with O: one turn per iteration, O of iteration k then S of k + 1 (FA3)
    assert decided.order == (0, 1) and grouped.ii < one.ii and decided.sections == (("O", "S"),)
    assert decided.note == (f"2 groups of 2 warps taking turns on the tensor core (1 turn(s) per iteration: O, S "
                            f"(spanning the back edge: from O of iteration k to S of k + 1); the rest of each group's "
                            f"work runs under the other group's turns): ii {grouped.ii} cycles vs {one.ii} with one "
                            "group")
    # each group on a role of its own, none the producer's
    roles = {gr: {grouped.ops[f"{n}@{gr}"].warp for n in "SPO"} for gr in (0, 1)}
    assert all(len(r) == 1 for r in roles.values()) and roles[0] != roles[1]
    assert grouped.ops["load_K"].warp not in roles[0] | roles[1]


def _force_order(func, graph, names, machine, opts, solve, one_ii, q):
    """order_consumer_groups as if the split had won: the two-group schedule with its turns, order (0, 1)."""
    from dataclasses import replace

    from tvm_twill.model.groups import place_groups, split_consumers, turn_sections, with_turns
    from tvm_twill.planner.ws_plan import GroupsDecision, JointSolve
    sections = turn_sections(graph, names)
    split = with_turns(split_consumers(graph, names, 2), sections, 2)
    on = replace(machine, warp_groups=3)
    return GroupsDecision((0, 1), JointSolve(place_groups(solve(split, on, options=opts), split, names, 2), split, on),
                          "forced by the test", sections)


def test_a_chosen_order_is_emitted_checked_and_explained(mma_gemm, monkeypatch):
    monkeypatch.setattr(warpspec, "order_consumer_groups", _force_order)
    sch, k0, k1 = mma_gemm()
    plan = tvm_twill.auto_pipeline(sch, [k0, k1], "sm_90a", warp_specialize=True)
    ws = plan.warp_specialization
    assert ws.consumer_order is not None and ws.facts.order == ws.consumer_order and ws.protocol.ok
    assert sch.get(k0).annotations[WS_CONSUMER_ORDER] is not None
    assert set(ws.roles) == {"producer warp", "consumer group 0", "consumer group 1"}
    assert "take turns (named barriers 1, 2, 128 threads each)" in plan.explain()
    assert ws.ii_ws_cycles == ws.groups_ii_cycles


def test_an_order_the_transform_refuses_falls_back_to_one_group_and_says_why(monkeypatch):
    monkeypatch.setattr(warpspec, "order_consumer_groups", _force_order)
    sch, k0, _ = wgmma_gemm(256)   # one warp group of consumers: wgmma cannot be split in two
    plan = tvm_twill.auto_pipeline(sch, k0, "sm_90a", warp_specialize=True)
    ws = plan.warp_specialization
    assert plan.applied and ws.consumer_order is None and ws.facts.order == ()
    assert WS_CONSUMER_ORDER not in sch.get(k0).annotations
    assert ws.groups_note.startswith("one group: the transform refused the ordered groups")
    assert "split a warp group" in plan.explain()


def test_a_protocol_too_large_to_check_is_no_kernel(monkeypatch):
    """No verdict, no kernel: the state budget becomes an UnsupportedLoopError (an ordered plan then falls back
    to one group, as above)."""
    import tvm_twill.transforms.ws.lowering as L
    from tvm_twill.errors import InputError

    def over_budget(proto):
        raise InputError("ring protocol check explored more than 2000000 states")
    monkeypatch.setattr(L, "check_ring", over_budget)
    sch, k0, k1 = tensorcore_gemm(N)
    with pytest.raises(UnsupportedLoopError, match="could not be model checked .ring protocol check explored"):
        tvm_twill.auto_pipeline(sch, [k0, k1], "sm_80", warp_specialize=True)
    assert WS_CONSUMER_ORDER not in sch.get(k0).annotations


@pytest.mark.parametrize("below,says", [(0, "(optimal: no ii below it; the time limit cut the tie-breaks short)"),
                                        (1, "(not proven optimal: no ii below {lb} cycles)")])
def test_the_note_says_whether_the_groups_ii_is_proven(mma_gemm, below, says):
    """A solve cut short at its lower bound has an optimal ii (only its tie-breaks are unfinished); one above
    it does not: the note says which."""
    from dataclasses import replace

    from tvm_twill.model import get_machine
    from tvm_twill.model.groups import in_program_order
    from tvm_twill.solvers import SolveOptions, solve
    sch, _, _ = mma_gemm()
    func = next(f for _, f in sch.mod.functions_items())
    producers = {"load_K", "load_V"}
    g = in_program_order(_fa_loop(), producers)
    g = g.replace(ops=tuple(op if op.name in producers else replace(op, spill_cost=0) for op in g.ops))

    def cut_short(graph, machine, options):
        s = solve(graph, machine, options=options)
        return replace(s, optimal=False, lower_bound=replace(s.lower_bound, ii=s.ii - below))
    decided = warpspec.order_consumer_groups(
        func, g, producers, get_machine("h100"), SolveOptions(time_limit=60), cut_short, 10 ** 6, 1)
    assert decided.order == (0, 1) and says.format(lb=decided.solved.schedule.ii - below) in decided.note
