"""Warp specialization of the Hopper wgmma attention kernel (tvm_twill.kernels.attention_wgmma), FA3's shape.

``auto_pipeline(..., warp_specialize=True)`` on the kernel with two consumer warp groups (block_m 128) solves
the KV loop as the warp-specialized kernel runs it (``model.groups``: each group's statements in program
order) and finds FA3's ping-pong by itself: one group cannot overlap its softmax with its own GEMMs, two
groups taking turns on the tensor core can, so the plan has two consumer warp groups (named
barriers 1 and 2; one turn per iteration around a group's P V wgmma of iteration k and its Q K^T wgmma of
k + 1, as in FA3, the softmax outside the turns) and a producer warp
streaming K and V through a cp.async mbarrier ring as deep as the copies' latency needs.

Checked: the plan's structure (two groups, each on a role of its own; exponentials of one group under the
other group's GEMMs, never under its own; the tensor core's busy fraction above one group's), the protocol
with the turn across the back edge passes the model check, the CUDA has the turns and the rings, ptxas spills
nothing, the emulator matches numpy (fp32 softmax) for no key, part of a tile and a ragged length that wraps
the ring at both phases over two interleavings with no findings; without the pass after the first GEMM
the other group never gets its turn, and with the first turn taken in every iteration a group waits for a
turn never passed: the emulator reports both.
"""
import functools
import re
import shutil

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
tvm_ffi = pytest.importorskip("tvm_ffi")

import tvm_twill  # noqa: E402
from tvm_twill import emulator  # noqa: E402
from tvm_twill.kernels import KV_LOOP, AttentionShape, attention_reference, fa_forward_wgmma  # noqa: E402
from tvm_twill.kernels.attention_wgmma import WGMMA_PASS_CONFIG  # noqa: E402
from steady_state import busy, busy_fraction  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed (the emulator runs PTX)")
ARCH = "sm_90a"
BN = 32
TURN = "tvm_builtin_ptx_bar_sync_count_sync(((uint)((ws_warp >> 2) + 1)), (uint)256);"
PASS = "tvm_builtin_ptx_bar_arrive_arrive(((uint)(((ws_warp >> 2) == 0) ? 2 : 1)), (uint)256);"


@functools.cache
def _ws(d: int = 128, causal: bool = True):
    """(shape, plan, built module, CUDA) of the warp-specialized kernel: one head, one CTA of two groups."""
    s = AttentionShape(head_dim=d, causal=causal, heads=1, q_len=128, block_m=128, block_n=BN)
    sch = tvm.s_tir.Schedule(fa_forward_wgmma(s))
    with tvm.transform.PassContext(config=WGMMA_PASS_CONFIG):
        plan = tvm_twill.auto_pipeline(sch, KV_LOOP, ARCH, warp_specialize=True, time_limit=60, quiet=True)
        f = tvm_twill.build(sch, ARCH, plan)
    _MODS[d, causal] = sch.mod
    return s, plan, f, f.mod.imports[0].inspect_source()


_MODS: dict = {}   # (d, causal) -> the planned module _ws built


def _emulate(s, f, n, source=None):
    rng = np.random.default_rng(n)
    q = rng.standard_normal((s.heads, s.q_len, s.head_dim)).astype("float16")
    k = rng.standard_normal((s.heads, n, s.head_dim)).astype("float16")
    v = rng.standard_normal((s.heads, n, s.head_dim)).astype("float16")
    o = np.full_like(q, np.nan)  # every element must be written
    report = emulator.run(f, q, k, v, o, seed=n, interleavings=2, target={"kind": "cuda", "arch": ARCH},
                          source=source)
    want = attention_reference(q, k, v, s.causal) if n else np.zeros(q.shape, np.float32)
    return report, float(np.abs(o.astype(np.float32) - want).max())


def test_the_plan_has_two_consumer_warp_groups_taking_one_turn_per_iteration():
    """FA3's ping-pong: a group's turn issues its P V GEMM of iteration k and its Q K^T GEMM of k + 1."""
    s, plan, _, _ = _ws()
    ws = plan.warp_specialization
    assert plan.applied and ws.chosen and ws.consumer_order == (0, 1)
    gemms = [op.name for op in plan.graph.ops if op.unit == "TC"]
    assert ws.turn_sections == ((gemms[1], gemms[0]),) and len(gemms) == 2
    assert ws.ii_ws_cycles < ws.one_group.ii_ws_cycles                 # two groups beat one in program order
    assert ws.facts.order == (0, 1) and ws.facts.order_sections == 1 and ws.facts.order_wrap
    assert ws.facts.consumer_threads == 256
    assert ws.protocol.ok and ws.protocol.protocol.sections == 2 and ws.protocol.protocol.wrap
    assert ws.facts.copy == "cp.async" and ws.facts.producer_statements == 2              # K and V
    assert 2 <= ws.ring_depth < 5 and "latency" in ws.depth_note                # not the pipeline's 5 versions
    text = plan.explain()
    assert "2 groups of 4 warps taking turns on the tensor core (1 turn(s) per iteration" in text
    assert f"(spanning the back edge: from {gemms[1]} of iteration k to {gemms[0]} of k + 1)" in text
    assert "consumer groups 0, 1 take turns (named barriers 1, 2, 256 threads each)" in text
    busy = re.search(r"tensor core busy (\d+)% of the steady state \(ii (\d+) cycles, as the kernel runs\)", text)
    assert busy and int(busy.group(2)) == ws.ii_ws_cycles and 50 < int(busy.group(1)) < 100


def test_the_exponentials_of_one_group_run_under_the_other_groups_gemms():
    """FA3's ping-pong, read off the plan's own schedule (the graph it was solved on)."""
    _, plan, _, _ = _ws()
    ws = plan.warp_specialization
    sched, graph = ws.schedule, ws.solved_graph
    roles = {g: {sched.ops[n].warp for n in graph.names if n.endswith(f"@{g}")} for g in (0, 1)}
    assert all(len(r) == 1 for r in roles.values()) and roles[0] != roles[1]
    tc, sfu = busy(sched, graph, "TC"), busy(sched, graph, "SFU")
    for g, other in ((0, 1), (1, 0)):
        exps = [r for r, ops in sfu.items() if f"P@{g}" in ops]
        assert any(tc[r] and all(n.endswith(f"@{other}") for n in tc[r]) for r in exps), (g, exps)
        assert not any(n.endswith(f"@{g}") for r in exps for n in tc[r]), (g, exps)
    one = ws.one_group
    ours, alone = busy_fraction(sched, graph), busy_fraction(one.schedule, one.solved_graph)
    print(f"tensor core busy in the steady state: {ours:.2f} with two groups (ii {ws.ii_ws_cycles} cycles), "
          f"{alone:.2f} with one (ii {one.ii_ws_cycles} cycles)")
    assert alone < ours < 1.0


def test_the_kernel_takes_its_turns_and_spills_nothing():
    from tvm_twill.transforms.sass import ptxas_report

    _, _, _, src = _ws()
    body = src[src.index("for (int ws_k"):]
    assert body.count(TURN) == 2 and body.count(PASS) == 2
    first, second = body.index(TURN), body.index(TURN, body.index(TURN) + 1)
    assert first < body.index("wgmma", first) < body.index(PASS) < body.index("m_new", first) < second
    # the first turn only in the first iteration, the last pass only in the last (not by the last group)
    assert re.search(r"if \(ws_k == 0\) \{\s*" + re.escape(TURN), body)
    last = body.index(PASS, second)
    assert re.search(r"if \(\(ws_k == \(\(\(n \+ 31\) >> 5\) - 1\)\) && \(ws_warp < 4\)\) \{\s*$",
                     body[:last])
    assert "cp_async_mbarrier_arrive" in src and "ws_full" in src and "ws_empty" in src
    lines = ptxas_report(src, ARCH)
    spills = [ln for ln in lines if "spill" in ln]
    assert spills and all("0 bytes spill stores, 0 bytes spill loads" in ln for ln in spills), lines


def test_the_kernel_matches_numpy_on_the_emulator():
    s, plan, f, _ = _ws()
    depth = plan.warp_specialization.ring_depth
    for n in (0, 25, 2 * depth * BN + 5):        # no key, part of a tile, every slot at both phases + ragged
        report, err = _emulate(s, f, n)
        assert report.findings == [] and report.ok, f"n={n}: {report}"
        assert err < 2e-2, f"n={n}: max error {err}"


def test_a_missing_pass_is_caught():
    s, _, f, src = _ws()
    bad = src.replace(PASS + "\n", "\n", 1)      # the first GEMM's pass (the second is guarded)
    assert bad != src and bad.count(PASS) == src.count(PASS) - 1
    report, _ = _emulate(s, f, 3 * BN + 5, source=bad)
    assert not report.ok and report.findings, str(report)


def _unguard_first_turn():
    """A pass after ours taking the consumers' first turn in every iteration (the guard k == 0 dropped)."""
    from tvm_twill.transforms.tir_util import op_name

    def drop(s):
        then = s.then_case
        if s.else_case is None and isinstance(then, tvm.tirx.Evaluate) and \
                op_name(then.value) == "tirx.ptx.bar_sync_count":
            return then
        return s

    @tvm.tirx.transform.prim_func_pass(opt_level=0, name="UnguardTheTurn")
    def unguard(func, _mod, _ctx):
        return func.with_body(tvm_ffi.structural_map(func.body, [(tvm.tirx.IfThenElse, drop)], order="post"))
    return unguard


def test_the_compiled_protocol_has_the_turn_across_the_back_edge():
    """Read off the final TIR (``ws_compiled``): the protocol the rewrite emitted, wrap included; a pass after
    ours that takes the first turn in every iteration gets no kernel."""
    from tvm_twill.transforms.ws_compiled import read_protocol
    from tvm_twill.transforms.ws_lowering import ws_passes

    s, plan, _, _ = _ws()
    mod = tvm.tirx.transform.BindTarget(tvm.target.Target({"kind": "cuda", "arch": ARCH}).with_host(
        tvm.target.Target("llvm")))(_MODS[128, True])
    with tvm.transform.PassContext(config={**WGMMA_PASS_CONFIG, "tirx.use_async_copy": 1}):
        passes = ws_passes()
        final = tvm.transform.Sequential(passes)(mod)
        (proto,) = [read_protocol(f) for _, f in final.functions_items() if isinstance(f, tvm.tirx.PrimFunc)
                    and read_protocol(f) is not None]
        assert proto == plan.warp_specialization.facts.ring_protocol() and proto.wrap and proto.sections == 2
        with pytest.raises(RuntimeError, match="last pass is skipped before the last iteration"):
            tvm.transform.Sequential(passes[:-2] + [_unguard_first_turn()] + passes[-2:])(mod)


def test_a_first_turn_taken_in_every_iteration_is_caught():
    """Without the guard, each group waits for a turn the other group never passes it (two syncs per pass)."""
    s, _, f, src = _ws()
    bad = re.sub(r"if \(ws_k == 0\) \{\s*(" + re.escape(TURN) + r")\s*\}", r"\1", src, count=1)
    assert bad != src and bad.count(TURN) == src.count(TURN)
    report, _ = _emulate(s, f, 2 * BN + 5, source=bad)
    assert not report.ok and report.findings, str(report)


def test_head_dim_64_not_causal_emulates_against_numpy():
    """This body has the kernel's own proxy fences before its first GEMM: they sit inside the turn across the
    back edge (consumer_order._neutral), so the kernel keeps the plan's one turn per iteration."""
    s, plan, f, src = _ws(64, False)
    ws = plan.warp_specialization
    assert ws.consumer_order == (0, 1) and ws.facts.order_wrap and ws.facts.order_sections == 1, ws.groups_note
    for n in (0, 3 * BN + 5):
        report, err = _emulate(s, f, n)
        assert report.findings == [] and report.ok, f"n={n}: {report}"
        assert err < 2e-2
    assert re.search(r"wgmma", src)
