"""Warp specialization of the Hopper wgmma attention kernel (tvm_twill.kernels.attention_wgmma), FA3's shape.

``auto_pipeline(..., warp_specialize=True)`` on the kernel with two consumer warp groups (block_m 128) solves
the KV loop as the warp-specialized kernel runs it (``model.groups``: each group's statements in program
order) and finds FA3's ping-pong by itself: one group cannot overlap its softmax with its own GEMMs, two
groups taking turns on the tensor core can, so the plan has two consumer warp groups (named barriers 1 and
2) and a producer warp streaming K and V through a cp.async mbarrier ring as deep as the copies' latency
needs.  Its turn is FA3's look-ahead (``transforms.ws.look_ahead``): a group's turn issues its Q K^T wgmma of
iteration k and then its P V wgmma of k - 1, left in flight until the softmax writes P, so a group's softmax
runs under its own P V GEMM as well as under the other group's turn; the last P V takes one more turn after
the loop.  On the Hopper model the tensor core is busy the whole steady state.

Checked: the plan's structure (two groups, each on a role of its own; exponentials of one group under the
other group's GEMMs, never under its own; the tensor core's busy fraction above one group's and the turn
across the back edge's), the look-ahead protocol passes the model check and is read back off the compiled
kernel, the CUDA has the turns, the in-flight GEMM and the rings, ptxas spills nothing, the emulator matches
numpy (fp32 softmax) for no key, part of a tile and a ragged length that wraps the ring at both phases over
two interleavings with no findings; without the pass after the GEMMs the other group never gets its turn,
and without the wait on the in-flight GEMM the softmax overwrites what it reads: the emulator reports both;
a pass after ours that lets the last group pass after the loop gets no kernel; where the transform refuses
the look-ahead, the plan falls back to the turn across the back edge and says why.
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
WAIT = "tvm_builtin_ptx_wgmma_wait_group_wait_group_sync_aligned_0();"


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


def test_the_plan_has_two_consumer_warp_groups_taking_a_look_ahead_turn():
    """FA3's ping-pong with its look-ahead: a group's turn issues its Q K^T GEMM of iteration k and its P V GEMM
    of k - 1, which stays in flight; the tensor core is busy the whole steady state on the Hopper model."""
    s, plan, _, _ = _ws()
    ws = plan.warp_specialization
    assert plan.applied and ws.chosen and ws.consumer_order == (0, 1) and ws.lookahead
    gemms = [op.name for op in plan.graph.ops if op.unit == "TC"]
    assert ws.turn_sections == ((gemms[1], gemms[0]),) and len(gemms) == 2
    plain = ws.no_lookahead                         # the turn across the back edge, the fallback
    assert plain is not None and not plain.lookahead and plain.consumer_order == (0, 1)
    assert ws.ii_ws_cycles < plain.ii_ws_cycles < ws.one_group.ii_ws_cycles
    facts = ws.facts
    assert facts.order == (0, 1) and facts.order_sections == 1 and facts.order_lookahead and not facts.order_wrap
    assert facts.release_lag == 1 and facts.wgmma_groups == BN // 16 and facts.consumer_threads == 256
    proto = ws.protocol.protocol
    assert ws.protocol.ok and proto.epilogue_turn and proto.release_lag == 1 and proto.sections == 1
    assert facts.copy == "cp.async" and facts.producer_statements == 2              # K and V
    assert 2 <= ws.ring_depth <= 4
    text = plan.explain()
    assert (f"2 groups of 4 warps taking turns on the tensor core with a look-ahead (1 turn per iteration: "
            f"{gemms[0]} of iteration k, then {gemms[1]} of k - 1 left in flight") in text
    assert f"vs {plain.ii_ws_cycles} with the turn across the back edge" in text
    assert "consumer look-ahead: each turn issues the first wgmma run of iteration k" in text
    assert "consumer groups 0, 1 take turns (named barriers 1, 2, 256 threads each)" in text
    busy = re.search(r"tensor core busy (\d+)% of the steady state \(ii (\d+) cycles, as the kernel runs\)", text)
    assert busy and int(busy.group(2)) == ws.ii_ws_cycles and int(busy.group(1)) == 100


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
    one, plain = ws.one_group, ws.no_lookahead
    ours, alone = busy_fraction(sched, graph), busy_fraction(one.schedule, one.solved_graph)
    wrapped = busy_fraction(plain.schedule, plain.solved_graph)
    print(f"tensor core busy in the steady state: {ours:.2f} with the look-ahead turn (ii {ws.ii_ws_cycles} "
          f"cycles), {wrapped:.2f} with the turn across the back edge (ii {plain.ii_ws_cycles}), {alone:.2f} with "
          f"one group (ii {one.ii_ws_cycles})")
    assert alone < wrapped < ours <= 1.0


def test_the_kernel_takes_its_turns_and_spills_nothing():
    from tvm_twill.compiler.sass import ptxas_report

    _, _, _, src = _ws()
    body = src[src.index("for (int ws_k"):]
    assert body.count(TURN) == 2 and body.count(PASS) == 2
    # in the loop: my turn, Q K^T of k (waited), P V of k - 1 (not waited), the pass, the softmax's max, the
    # wait on P V before the exponentials overwrite P, then the release of slot k - 1
    turn = body.index(TURN)
    ahead = re.search(r"if \(1 <= ws_k\) \{\s*for \(int kt_1", body)
    assert ahead and turn < body.index("mma_async", turn) < ahead.start() < body.index(PASS)
    wait = body.index("\n      " + WAIT)                          # the loop's own wait (its statements' are deeper)
    assert body.index(PASS) < body.index("max(") < wait < body.index("ws_empty", wait) < body.index("expf(", wait)
    assert "wait_group" not in body[ahead.start():body.index(PASS)].replace("wait_group_wait_group", "")
    # after the loop: the last P V in one more turn, passed on by every group but the last
    after = body[body.index(TURN, turn + 1) - 200:]
    assert re.search(r"if \(1 <= n\) \{\s*" + re.escape(TURN), after)
    assert re.search(r"if \(ws_warp < 4\) \{\s*" + re.escape(PASS), after)
    assert "cp_async_mbarrier_arrive" in src and "ws_full" in src and "ws_empty" in src
    lines = ptxas_report(src, ARCH)
    spills = [ln for ln in lines if "spill" in ln]
    assert spills and all("0 bytes spill stores, 0 bytes spill loads" in ln for ln in spills), lines
    assert not any("serialized" in ln for ln in lines), lines


def test_the_kernel_matches_numpy_on_the_emulator():
    s, plan, f, _ = _ws()
    depth = plan.warp_specialization.ring_depth
    for n in (0, 25, 2 * depth * BN + 5):        # no key, part of a tile, every slot at both phases + ragged
        report, err = _emulate(s, f, n)
        assert report.findings == [] and report.ok, f"n={n}: {report}"
        assert err < 2e-2, f"n={n}: max error {err}"


def test_a_missing_pass_is_caught():
    s, _, f, src = _ws()
    bad = src.replace(PASS + "\n", "\n", 1)      # the loop's pass (the one after the loop is guarded)
    assert bad != src and bad.count(PASS) == src.count(PASS) - 1
    report, _ = _emulate(s, f, 3 * BN + 5, source=bad)
    assert not report.ok and report.findings, str(report)


def test_a_missing_wait_on_the_in_flight_gemm_is_caught():
    """Without the loop's wait, the exponentials write P while the previous P V GEMM still reads it (and the
    rescale reads its accumulators): the emulator's in-flight read window reports it."""
    s, _, f, src = _ws()
    bad = src.replace("\n      " + WAIT + "\n", "\n", 1)
    assert bad != src and bad.count(WAIT) == src.count(WAIT) - 1
    report, _ = _emulate(s, f, 3 * BN + 5, source=bad)
    assert not report.ok and report.findings, str(report)


def _ungate_the_last_pass():
    """A pass after ours letting every group pass after the loop (the guard of the last arrive dropped)."""
    from tvm_twill.transforms.tir_util import op_name

    def gated(s):
        return isinstance(s, tvm.tirx.IfThenElse) and s.else_case is None and \
            isinstance(s.then_case, tvm.tirx.Evaluate) and op_name(s.then_case.value) == "tirx.ptx.bar_arrive"

    @tvm.tirx.transform.prim_func_pass(opt_level=0, name="UngateTheLastPass")
    def ungate(func, _mod, _ctx):
        found = []
        tvm_ffi.structural_walk(func.body, [(tvm.tirx.IfThenElse, lambda s: found.append(s) if gated(s) else None)])
        if not found:
            return func
        last = found[-1]
        return func.with_body(tvm_ffi.structural_map(
            func.body, [(tvm.tirx.IfThenElse, lambda s: s.then_case if s.same_as(last) else s)], order="post"))
    return ungate


def _release_first():
    """A pass after ours moving the release of the last slot, in the turn after the loop, before its wgmma."""
    from tvm_twill.transforms.tir_util import op_name

    def calls(node, name):
        out = []
        tvm_ffi.structural_walk(node, [(tvm.ir.expr.Call, lambda c: out.append(c) if op_name(c) == name else None)])
        return out

    def move(s):
        seq = s.then_case
        if s.else_case is not None or not isinstance(seq, tvm.tirx.SeqStmt) or not calls(seq.seq[0],
                                                                                         "tirx.ptx.bar_sync_count"):
            return s
        at = [i for i, x in enumerate(seq.seq) if calls(x, "tirx.ptx.mbarrier_arrive_nocount")]
        if not at or not calls(seq, "tirx.ptx.wgmma_commit_group"):
            return s
        rest = [x for i, x in enumerate(seq.seq) if i != at[-1]]
        return tvm.tirx.IfThenElse(s.condition, tvm.tirx.SeqStmt([rest[0], seq.seq[at[-1]], *rest[1:]]), None)

    @tvm.tirx.transform.prim_func_pass(opt_level=0, name="ReleaseFirst")
    def early(func, _mod, _ctx):
        return func.with_body(tvm_ffi.structural_map(func.body, [(tvm.tirx.IfThenElse, move)], order="post"))
    return early


def test_the_compiled_protocol_has_the_look_ahead_turn():
    """Read off the final TIR (``ws_compiled``): the protocol the rewrite emitted, the turn after the loop
    included; a pass after ours that lets the last group pass after the loop, or that releases the last slot
    before the wgmma reading it, gets no kernel."""
    from tvm_twill.transforms.ws.compiled import read_protocol
    from tvm_twill.transforms.pipelines import ws_passes

    s, plan, _, _ = _ws()
    mod = tvm.tirx.transform.BindTarget(tvm.target.Target({"kind": "cuda", "arch": ARCH}).with_host(
        tvm.target.Target("llvm")))(_MODS[128, True])
    with tvm.transform.PassContext(config={**WGMMA_PASS_CONFIG, "tirx.use_async_copy": 1}):
        passes = ws_passes().all()
        final = tvm.transform.Sequential(passes)(mod)
        (proto,) = [read_protocol(f) for _, f in final.functions_items() if isinstance(f, tvm.tirx.PrimFunc)
                    and read_protocol(f) is not None]
        assert proto == plan.warp_specialization.facts.ring_protocol()
        assert proto.epilogue_turn and proto.skip_last_pass and proto.release_lag == 1 and proto.groups == 2
        with pytest.raises(RuntimeError, match="barrier-leftover"):
            tvm.transform.Sequential(passes[:-2] + [_ungate_the_last_pass()] + passes[-2:])(mod)
        with pytest.raises(RuntimeError, match="then issue and wait for its wgmma, then release the last slot"):
            tvm.transform.Sequential(passes[:-2] + [_release_first()] + passes[-2:])(mod)


def test_head_dim_64_not_causal_emulates_against_numpy():
    """This body has the kernel's own proxy fences before its first GEMM: they stay before the turn
    (consumer_order.neutral), so the kernel keeps the plan's look-ahead turn."""
    s, plan, f, src = _ws(64, False)
    ws = plan.warp_specialization
    assert ws.consumer_order == (0, 1) and ws.facts.order_lookahead and ws.facts.order_sections == 1, ws.groups_note
    assert ws.facts.wgmma_groups == BN // 16                                   # P V: block_n / 16 k-steps
    for n in (0, 3 * BN + 5):
        report, err = _emulate(s, f, n)
        assert report.findings == [] and report.ok, f"n={n}: {report}"
        assert err < 2e-2
    assert re.search(r"wgmma", src)


def test_a_refused_look_ahead_falls_back_to_the_turn_across_the_back_edge(monkeypatch):
    """Where the transform refuses the look-ahead turn, the plan applies the turn across the back edge (its
    own schedule and protocol) and says why."""
    from tvm_twill.transforms.ws import look_ahead
    from tvm_twill.transforms.tir_util import ws_fail

    def refuse(stmts):
        ws_fail("look-ahead turn: refused by the test")
    monkeypatch.setattr(look_ahead, "split", refuse)
    s = AttentionShape(head_dim=64, causal=False, heads=1, q_len=128, block_m=128, block_n=BN)
    sch = tvm.s_tir.Schedule(fa_forward_wgmma(s))
    with tvm.transform.PassContext(config=WGMMA_PASS_CONFIG):
        plan = tvm_twill.auto_pipeline(sch, KV_LOOP, ARCH, warp_specialize=True, time_limit=60, quiet=True)
    ws = plan.warp_specialization
    assert plan.applied and ws.consumer_order == (0, 1) and not ws.lookahead
    assert ws.facts.order_wrap and not ws.facts.order_lookahead and ws.protocol.protocol.wrap
    assert "the transform refused the look-ahead turn (look-ahead turn: refused by the test)" in ws.groups_note
    assert "tvm_twill.ws_lookahead" not in str(plan.annotations)


def _planned_loop():
    """A schedule of the planned d 128 causal module and its KV loop (annotated by the plan)."""
    from tvm_twill.frontend.loops import resolve_loop
    _ws()
    sch = tvm.s_tir.Schedule(_MODS[128, True])
    return sch, resolve_loop(sch, KV_LOOP).rv


def _consumer_statements():
    """The KV loop's consumer statements as the warp-specialization pass sees them."""
    from tvm_twill.transforms.pipelines import ws_passes
    from tvm_twill.transforms.ws.roles import find_ws_loop

    mod = tvm.tirx.transform.BindTarget(tvm.target.Target({"kind": "cuda", "arch": ARCH}).with_host(
        tvm.target.Target("llvm")))(_planned_loop()[0].mod)
    with tvm.transform.PassContext(config={**WGMMA_PASS_CONFIG, "tirx.use_async_copy": 1}):
        pre = tvm.transform.Sequential(ws_passes().to_rewrite)(mod)
    (ws,) = [find_ws_loop(f, ARCH) for _, f in pre.functions_items() if isinstance(f, tvm.tirx.PrimFunc)
             and find_ws_loop(f, ARCH) is not None]
    return list(ws.consumer)


def test_the_look_ahead_waits_where_the_softmax_first_depends_on_the_in_flight_gemm():
    """The split: S first, O last, between them the softmax; the wait goes before the exponentials (they write
    P, which O reads), after the max; bodies the turn cannot take are refused in one line."""
    from tvm_twill.errors import UnsupportedLoopError
    from tvm_twill.transforms.ws import look_ahead

    stmts = _consumer_statements()
    body = look_ahead.split(stmts)
    assert len(body.first) == 1 and len(body.last) == 1 and body.groups == BN // 16       # the k-steps of P V
    assert [v.name for v in look_ahead._written([body.between[body.wait_at]])] == ["P_s"]
    assert all("P_s" not in [v.name for v in look_ahead._written([s])] for s in body.between[:body.wait_at])
    assert body.wait_at >= 2                                                      # the stores of S, the max
    refusals = {"1 run(s) of tensor-core statements": stmts[:-1],
                "3 run(s) of tensor-core statements": [*stmts, body.between[0], *body.last],
                "does not start and end with its tensor-core runs": [body.between[0], *stmts],
                "runs both touch '": [*stmts, *body.first]}          # S .. O S: the last run O, S writes S's buffers
    # P V reads P across one iteration and in the turn after the loop: P's declaration moves before the loop
    assert [v.name for v in look_ahead._declared(body.hoisted)] == ["P_s"]
    assert not any(look_ahead._shares(look_ahead._declared([s]), look_ahead._pointers(body.last))
                   for s in (*body.pre, *body.between))
    for why, bad in refusals.items():
        with pytest.raises(UnsupportedLoopError, match=re.escape(why)):
            look_ahead.split(bad)


def test_a_look_ahead_annotation_the_transform_cannot_take_is_refused():
    from tvm_twill.errors import UnsupportedLoopError
    from tvm_twill.model.pipeline import WS_CONSUMER_ORDER, WS_LOOKAHEAD
    from tvm_twill.transforms.pipelines import emit_and_check

    sch, rv = _planned_loop()
    sch.unannotate(rv, WS_LOOKAHEAD)
    sch.annotate(rv, WS_LOOKAHEAD, 2)
    with pytest.raises(UnsupportedLoopError, match="tvm_twill.ws_lookahead must be 0 or 1, got 2"):
        emit_and_check(sch.mod, ARCH)
    sch.unannotate(rv, WS_LOOKAHEAD)
    sch.unannotate(rv, WS_CONSUMER_ORDER)
    sch.annotate(rv, WS_LOOKAHEAD, 1)
    with pytest.raises(UnsupportedLoopError, match="needs ordered consumer groups"):
        emit_and_check(sch.mod, ARCH)
