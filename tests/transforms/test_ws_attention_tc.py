"""Warp specialization of the tensor-core attention kernel (tvm_twill.kernels.attention_tc).

``auto_pipeline(..., warp_specialize=True)`` under ``TC_PASS_CONFIG`` gives a producer warp streaming the K
and V tiles through cp.async mbarrier rings and the mma warps as consumers.  Two general gaps had to close:
the loop body's shared scratch tiles written by compute (S, P, the correction) stay with the consumers
(``ws_roles.split_roles`` made every shared write a producer copy), and the barriers TVM's ThreadSync places
between the consumer threads' exchanges through them become named barriers of the consumer threads
(``role_barriers``), which the compiled-protocol reader tells apart from ordered groups' turns.
Checked: the CUDA has the rings, ldmatrix / mma.sync and the named barriers, every mma fragment is one
thread's registers (``transforms.warp_memory``) and ptxas reports no stack frame and no spills, and
the emulator matches numpy (fp32 softmax) on two CTAs over two interleavings with no findings, n = 0 and a
ragged KV length; without a consumer's full-barrier wait or its release, the emulator has a finding.
"""
import functools
import re
import shutil

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

import tvm_twill
from tvm_twill import emulator
from tvm_twill.api import auto_pipeline
from tvm_twill.frontend.target import parse_target
from tvm_twill.kernels import KV_LOOP, AttentionShape, attention_reference
from tvm_twill.kernels.attention_tc import TC_PASS_CONFIG, fa_forward_tc

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed (the emulator runs PTX)")
BN = 32


@functools.cache
def _ws(arch: str, d: int, causal: bool, block_m: int = 64):
    """(shape, plan, built module, CUDA) of the warp-specialized kernel: one head, two CTAs."""
    s = AttentionShape(head_dim=d, causal=causal, heads=1, q_len=2 * block_m, block_m=block_m, block_n=BN)
    sch = tvm.s_tir.Schedule(fa_forward_tc(s))
    with tvm.transform.PassContext(config=TC_PASS_CONFIG):
        plan = auto_pipeline(sch, KV_LOOP, arch, warp_specialize=True, time_limit=60, quiet=True)
        f = tvm_twill.build(sch, arch, plan)
    return s, plan, f, f.mod.imports[0].inspect_source()


def _emulate(s, f, arch, n, source=None):
    rng = np.random.default_rng(n)
    q = (rng.standard_normal((s.heads, s.q_len, s.head_dim)) / 8).astype("float16")
    k = rng.standard_normal((s.heads, n, s.head_dim)).astype("float16")
    v = rng.standard_normal((s.heads, n, s.head_dim)).astype("float16")
    o = np.full((s.heads, s.q_len, s.head_dim), np.float16(7))  # every element must be written
    report = emulator.run(f, q, k, v, o, seed=n, interleavings=2, target=parse_target(arch)[1], source=source)
    return report, np.abs(o.astype(np.float32) - attention_reference(q, k, v, s.causal)).max()


def _check(s, plan, src, arch):
    ws = plan.warp_specialization
    assert plan.applied and ws.chosen and ws.protocol is not None and ws.protocol.ok
    assert ws.facts.copy == "cp.async" and ws.facts.producer_statements == 2        # K and V
    assert ws.facts.consumer_threads == s.block_m and ws.facts.producer_threads == 32
    assert "ws_full" in src and "ws_empty" in src and "mbarrier" in src          # the rings
    assert "mma.sync.aligned.m16n8k16" in src and "ldmatrix.sync.aligned" in src
    # the consumers' exchanges through shared memory: a named barrier of the consumer threads, and the
    # one __syncthreads is the one after the mbarrier init
    assert f"bar_sync_count_sync((uint)15, (uint){s.block_m})" in src and src.count("__syncthreads()") == 1
    _no_stack_frame(s, src, arch)


def _no_stack_frame(s, src, arch):
    """Every mma fragment is one thread's share in the CUDA (``transforms.warp_memory``; TVM's LowerWarpMemory
    alone left all but the first a whole warp's buffer: an 8 KB stack frame at head dim 64) and ptxas reports
    no stack frame and no spills."""
    from tvm_twill.compiler.sass import ptxas_report

    fragments = {name: int(n) for name, n in re.findall(r"\b(\w)_w_ptr\[(\d+)\];", src)}
    d, bn = s.head_dim, s.block_n
    assert fragments == {"S": bn, "O": d, "Q": 16, "K": bn // 2, "P": 16, "V": d // 2}, fragments
    lines = ptxas_report(src, arch)
    spills = [ln for ln in lines if "spill" in ln]
    assert spills and all("0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in ln
                          for ln in spills), lines


@pytest.mark.parametrize("n", [0, 3 * BN + 5])
def test_ws_tc_attention_sm80_emulates_against_numpy(n):
    s, plan, f, src = _ws("sm_80", 64, False)
    _check(s, plan, src, "sm_80")
    report, err = _emulate(s, f, "sm_80", n)
    assert report.findings == [] and report.ok, str(report)
    assert err < 2e-2


@pytest.mark.slow
@pytest.mark.parametrize("arch,d,causal", [("sm_80", 128, True), ("sm_90a", 64, True), ("sm_90a", 128, False)])
def test_ws_tc_attention_emulates_against_numpy(arch, d, causal):
    s, plan, f, src = _ws(arch, d, causal)
    _check(s, plan, src, arch)
    depth = plan.warp_specialization.ring_depth
    for n in (0, 2 * depth * BN + 5):                # every slot reused at both phases, ragged tail
        report, err = _emulate(s, f, arch, n)
        assert report.findings == [] and report.ok, str(report)
        assert err < 2e-2


FAULTS = {
    # the consumers' wait on full[s]: the spin loop on test_wait.parity (sm_80)
    "full wait removed": lambda s: re.sub(
        r"while \(1\) \{\n\s*if \(!\(\(ws_ready_ptr\[0\] == \(uint\)0\)\)\) \{ break; \}\n\s*"
        r"tvm_builtin_ptx_mbarrier_test_wait_parity\w*\(ws_ready_ptr\[0\], \w+\(\(&\(ws_full_ptr[^\n]*\n\s*\}",
        "", s, count=1),
    "release arrive removed": lambda s: re.sub(
        r"tvm_builtin_ptx_mbarrier_arrive_nocount_arrive_shared_b64\(\w+\(\(&\(ws_empty_ptr\[\(ws_k [%&] \d+\)\]\)\)\)\);",
        ";", s, count=1),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_ws_tc_attention_without_a_wait_or_arrive_has_a_finding(fault):
    s, _, f, src = _ws("sm_80", 64, False)
    bad = FAULTS[fault](src)
    assert bad != src
    report, err = _emulate(s, f, "sm_80", 3 * BN + 5, source=bad)
    assert report.findings and not report.ok, f"{fault} not caught (max error {err}): {report}"


@functools.cache
def _two_groups(arch: str = "sm_80", d: int = 64):
    """block_m 128 (four mma warps) warp-specialized: the planner splits the consumers into two ordered groups
    of two warps taking turns on the tensor core (FA3's ping-pong): one turn per iteration, the O GEMM of
    iteration k then the S GEMM of k + 1 (the body starts and ends with a GEMM), the softmax outside the turns,
    so one group's softmax runs under the other's mma.sync."""
    s = AttentionShape(head_dim=d, causal=True, heads=1, q_len=256, block_m=128, block_n=BN)
    sch = tvm.s_tir.Schedule(fa_forward_tc(s))
    with tvm.transform.PassContext(config=TC_PASS_CONFIG):
        plan = auto_pipeline(sch, KV_LOOP, arch, warp_specialize=True, time_limit=60, quiet=True)
        f = tvm_twill.build(sch, arch, plan)
    ws = plan.warp_specialization
    assert ws.consumer_order == (0, 1) and ws.turn_sections == (("kt#2", "kt"),), ws.groups_note
    return s, ws.facts, ws.protocol, f, f.mod.imports[0].inspect_source()


GROUP_BAR = "tvm_builtin_ptx_bar_sync_count_sync((((uint)((ws_warp >> 1) + 1)) + (uint)7), (uint)64);"
PASS = "tvm_builtin_ptx_bar_arrive_arrive(((uint)(((ws_warp >> 1) == 0) ? 2 : 1)), (uint)128);"


def test_two_ordered_groups_take_turns_across_the_back_edge_and_keep_their_shared_scratch_on_their_barriers():
    """The planner's two groups take one turn per iteration (the O GEMM's mma.sync loop of iteration k, then
    the S GEMM's of k + 1: the first turn is taken in iteration 0 only), the softmax outside the turns; each
    group's S / P / correction rows are its own (proved by group_scratch), so the barriers of the softmax are
    the group's (8 + c, 64 threads), not the consumers' 128, and the groups are not held in lock step; the
    protocol passes the model check; numpy agrees; without the pass after the S GEMM the other group never
    gets its turn: the emulator finds it."""
    s, facts, report, f, src = _two_groups()
    assert facts.order == (0, 1) and facts.order_sections == 1 and facts.order_wrap and report.ok
    assert report.protocol.sections == 2 and report.protocol.wrap
    turn = "tvm_builtin_ptx_bar_sync_count_sync(((uint)((ws_warp >> 1) + 1)), (uint)128);"
    assert src.count(turn) == 2                                                        # the turns
    assert GROUP_BAR in src and "bar_sync_count_sync((uint)15, (uint)128)" in src      # in / after the loop
    body = src[src.index("for (int ws_k"):]
    first, second = body.index(turn), body.index(turn, body.index(turn) + 1)
    assert body.index("mma.sync", first) < body.index(PASS, first) < body.index(GROUP_BAR, first) < second
    _no_stack_frame(s, src, "sm_80")
    for n in (0, 3 * BN + 5):
        rep, err = _emulate(s, f, "sm_80", n)
        assert rep.findings == [] and rep.ok, str(rep)
        assert err < 2e-2
    bad = src.replace(PASS + "\n", "\n", 1)             # the first GEMM's pass (the last one is guarded)
    assert bad != src
    rep, _ = _emulate(s, f, "sm_80", 3 * BN + 5, source=bad)
    assert not rep.ok and rep.findings, str(rep)


def test_scratch_shared_between_groups_is_not_private():
    from tvm.script import tirx as T

    from tvm_twill.frontend.ir import tirx
    from tvm_twill.transforms.ws.group_scratch import private_scratch
    tx = tirx.Var("tx", "int32")
    sh = tirx.decl_buffer((64,), "float32", name="X", scope="shared")
    out = tirx.decl_buffer((64,), "float32", name="Y")
    own = [tirx.BufferStore(sh, T.float32(1), [tx]), tirx.BufferStore(out, tirx.BufferLoad(sh, [tx // 2 * 2 + (1 - tx % 2)]), [tx])]
    swap = [own[0], tirx.BufferStore(out, tirx.BufferLoad(sh, [63 - tx]), [tx])]
    assert private_scratch(own, {"threadIdx.x": 64}, {"threadIdx.x": tx}, 2) is None
    assert "overlap" in private_scratch(swap, {"threadIdx.x": 64}, {"threadIdx.x": tx}, 2)
    unbounded = [own[0], tirx.BufferStore(out, tirx.BufferLoad(sh, [tx ^ 1]), [tx])]   # no bound on tx ^ 1
    assert "not bounded" in private_scratch(unbounded, {"threadIdx.x": 64}, {"threadIdx.x": tx}, 2)


@pytest.mark.slow
def test_two_ordered_groups_on_sm90a():
    s, facts, report, f, src = _two_groups("sm_90a", 64)
    assert facts.order == (0, 1) and report.ok and GROUP_BAR in src
    _no_stack_frame(s, src, "sm_90a")
    for n in (0, 3 * BN + 5):
        rep, err = _emulate(s, f, "sm_90a", n)
        assert rep.findings == [] and rep.ok, str(rep)
        assert err < 2e-2


def test_scratch_proved_private_exactly_where_the_interval_is_too_wide():
    """Group g owns rows 64 g .. 64 g + 63 of X, written through a fragment-like index whose terms move
    together (r // 4 and r % 4 of one loop variable: the analyzer's interval overshoots into the next group's
    rows) and read by half of each group's threads (``tx < 64``: the interval ignores the guard).  The exact
    addresses, guards included, are disjoint; a read that really crosses into the other group is not."""
    from tvm.script import tirx as T

    from tvm_twill.frontend.ir import tirx
    from tvm_twill.transforms.ws.group_scratch import private_scratch
    tx, ty, r, c = (tirx.Var(n, "int32") for n in ("tx", "ty", "r", "c"))
    x = tirx.decl_buffer((256,), "float32", name="X", scope="shared")
    out = tirx.decl_buffer((256,), "float32", name="Y")
    # r - r // 4 * 4 is r % 4 (0 .. 3); term by term the analyzer bounds it by 7: rows up to 131
    write = tirx.For(r, 0, 8, tirx.ForKind.SERIAL, tirx.BufferStore(
        x, T.float32(1), [ty * 128 + (tx % 32) * 4 + (r - r // 4 * 4)]))

    def read(row):
        return tirx.IfThenElse(tx < 16, tirx.For(c, 0, 8, tirx.ForKind.SERIAL, tirx.BufferStore(
            out, tirx.BufferLoad(x, [row + c]), [tx])), None)
    ext, tvars = {"threadIdx.x": 64, "threadIdx.y": 2}, {"threadIdx.x": tx, "threadIdx.y": ty}
    assert private_scratch([write], ext, tvars, 2) is None
    from tvm_twill.transforms.ws import group_scratch
    assert group_scratch._spans(x, group_scratch._accesses(write), [
        group_scratch.group_domains(ext, tvars, 64, g) for g in (0, 1)])[0][1] >= 128   # the interval overshoots
    assert private_scratch([write, read(ty * 128 + tx * 8)], ext, tvars, 2) is None
    assert "overlap" in private_scratch([write, read(ty * 128 + tx * 8 + 8)], ext, tvars, 2)
