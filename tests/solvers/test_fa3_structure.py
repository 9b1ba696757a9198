"""FA3's structure on the Hopper model, from the attention loop the front-end extracts (tvm_twill.kernels).

The KV loop of the s_tir kernel (head dim 128), its two GEMM blocks marked for tensorizing (the SIMT
kernel's own FMA loops would run on the CUDA cores), is extracted for sm_90a with streaming copies (the
warp-specialized model) and solved as the warp-specialized kernel runs it (``model.groups``): the consumer
statements in program order, one iteration after the other.

* One consumer group cannot put its exponentials under its own GEMMs (in order, the tensor core waits while
  the group computes its softmax): the tensor core is busy half the time.
* Two consumer groups taking turns on the tensor core, one turn per GEMM (``with_turns``; what
  ``transforms.ws.consumer_order`` emits for a body that does not both start and end with a GEMM, the others
  taking one turn across the back edge, ``model.groups.rotate_turns``), each on a warp role of its own
  (``place_groups``): a smaller ii, and
  exponentials run while the tensor core works on the other group's GEMMs (never the group's own): FA3's
  ping-pong, which nothing in the graph asks for (no hand-off cost, no register limit): the solver finds it.
  Here each group's softmax chain is longer than the other group's GEMM, so only part of the exponentials
  find a GEMM to hide under (``tests/transforms/test_ws_attention_wgmma.py`` has the wgmma kernel, where
  both groups' do).

The tensor core's busy fraction in the steady state is stated beside the paper's FA3 schedule (the bundled
``fa_fwd_hopper`` graph) on the same machine model; that schedule also overlaps a warp group's own
exponentials with its next GEMM (FA3's intra-warpgroup pipelining), which a consumer running its body in
program order does not do, so it stays ahead.
"""
from dataclasses import replace

import pytest

pytest.importorskip("tvm")
import tvm  # noqa: E402

from tvm_twill.data import load_example  # noqa: E402
from tvm_twill.frontend import extract_loop  # noqa: E402
from tvm_twill.kernels import KV_LOOP, AttentionShape, fa_forward  # noqa: E402
from tvm_twill.model import check  # noqa: E402
from tvm_twill.model.groups import in_program_order, place_groups, split_consumers, turn_sections, with_turns  # noqa: E402,E501
from tvm_twill.solvers import prepare, solve  # noqa: E402
from steady_state import busy, busy_fraction  # noqa: E402


def tc_fraction(schedule, graph) -> float:
    return busy_fraction(schedule, graph, "TC")


@pytest.fixture(scope="module")
def extracted():
    sch = tvm.s_tir.Schedule(fa_forward(AttentionShape(head_dim=128)))
    for gemm in ("S", "O"):  # FA3 runs both GEMMs on the tensor cores: mark them as MetaSchedule's rule does
        sch.annotate(sch.get_sblock(gemm), "meta_schedule.auto_tensorize", "wgmma")
    ex = extract_loop(sch, KV_LOOP, "sm_90a", streaming_copies=True)
    loads = [s.name for s in ex.stmts if s.kind == "copy"]
    assert loads == ["K_load", "V_load"] and ex.machine.name == "h100"
    return ex, loads, in_program_order(ex.graph, loads)


def test_one_group_in_program_order_leaves_the_tensor_core_idle_under_its_softmax(extracted):
    ex, loads, ordered = extracted
    free = solve(ex.graph, replace(ex.machine, warp_groups=2), time_limit=60)
    one = solve(ordered, replace(ex.machine, warp_groups=2), time_limit=60)
    assert one.optimal and one.ii > free.ii       # the chain costs what overlapping iterations hid
    assert tc_fraction(free, ex.graph) == 1.0 and tc_fraction(one, ordered) == 0.5


def test_two_consumer_groups_ping_pong_as_fa3(extracted):
    ex, loads, ordered = extracted
    one = solve(ordered, replace(ex.machine, warp_groups=2), time_limit=60)
    sections = turn_sections(ordered, loads)
    assert sections == (("S",), ("O",))
    split = with_turns(split_consumers(ordered, loads, 2), sections, 2)
    machine = replace(ex.machine, warp_groups=3)  # one producer role, two consumer roles
    sched = solve(split, machine, time_limit=20)
    prep = prepare(split, machine)
    placed = place_groups(sched, split, loads, 2)
    assert check(placed, prep.graph, prep.machine) == []
    assert sched.ii < one.ii
    # two consumer groups, each on a role of its own
    roles = {g: {placed.ops[n].warp for n in split.names if n.endswith(f"@{g}")} for g in (0, 1)}
    assert all(len(r) == 1 for r in roles.values()) and roles[0] != roles[1]
    # exponentials run while the tensor core works on the other group's GEMMs, never on the group's own
    tc, sfu = busy(sched, split, "TC"), busy(sched, split, "SFU")
    under = 0
    for g, other in ((0, 1), (1, 0)):
        slots = [r for r, ops in sfu.items() if f"P@{g}" in ops]
        under += sum(1 for r in slots if tc[r] and all(n.endswith(f"@{other}") for n in tc[r]))
        assert not any(n.endswith(f"@{g}") for r in slots for n in tc[r]), (g, slots)
    assert under > 0
    # the tensor core's busy fraction in the steady state, beside the paper's FA3 schedule on h100
    ours = tc_fraction(sched, split)
    paper = load_example("fa_fwd_hopper")
    theirs = tc_fraction(solve(paper, time_limit=60), prepare(paper).graph)
    print(f"tensor-core busy fraction in the steady state: two groups {ours:.2f} (ii {sched.ii} units of "
          f"{ex.quantum} cycles), one group {tc_fraction(one, ordered):.2f} (ii {one.ii}); the paper's FA3 "
          f"schedule on the same model: {theirs:.2f}")
    assert tc_fraction(one, ordered) < ours <= theirs == 1.0
