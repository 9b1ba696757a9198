"""Warp specialization of the SIMT attention kernel's KV loop (tvm_twill.kernels.attention).

The KV loop's K / V loads are zero-filling guarded copies (``if_then_else(row < n, K[..], 0)``: the
ragged tail), its extent is symbolic, and the consumer warps write the Q tile to shared memory before the
loop.  ``auto_pipeline(..., warp_specialize=True)`` gives a producer warp streaming K / V through
mbarrier rings (cp.async with src-size 0 where the row is past ``n``) and the block's warps as one
consumer group; the kernel compiles (rings in the source, 0 spills) and runs on the CPU PTX emulator
against numpy (fp32 softmax) with zero findings over two interleavings, on two CTAs (head dim 64;
slow: 128 too, and sm_90a).  With the staged epilogue (O normalised into a shared tile, then stored by
other threads) the consumers synchronise among themselves after the loop on a named barrier
(``transforms.ws.role_barriers``); without that barrier the emulator finds the race.
"""
import re

import numpy as np
import pytest

pytest.importorskip("tvm")
import tvm  # noqa: E402

import tvm_twill  # noqa: E402
from tvm_twill import emulator  # noqa: E402
from tvm_twill.api import auto_pipeline  # noqa: E402
from tvm_twill.frontend.target import parse_target  # noqa: E402
from tvm_twill.kernels import KV_LOOP, AttentionShape, attention_reference, fa_forward  # noqa: E402
from tvm_twill.compiler.sass import ptxas_report  # noqa: E402

BN = AttentionShape().block_n


def _ws_kernel(arch: str, causal: bool, d: int = 64, staged: bool = False):
    """(shape, plan, built module, CUDA source) of the warp-specialized kernel: one head, two query
    blocks (two CTAs), head dim ``d``; ``staged``: the epilogue through shared memory."""
    s = AttentionShape(head_dim=d, causal=causal, heads=1, q_len=128)
    sch = tvm.s_tir.Schedule(fa_forward(s, staged_store=staged))
    plan = auto_pipeline(sch, KV_LOOP, arch, warp_specialize=True, time_limit=60)
    f = tvm_twill.build(sch, arch, plan)
    return s, plan, f, f.mod.imports[0].inspect_source()


def _emulate(s: AttentionShape, f, arch: str, n: int, interleavings: int = 2, source: str | None = None):
    rng = np.random.default_rng(n)
    q = (rng.standard_normal((s.heads, s.q_len, s.head_dim)) / 8).astype("float16")
    k = rng.standard_normal((s.heads, n, s.head_dim)).astype("float16")
    v = rng.standard_normal((s.heads, n, s.head_dim)).astype("float16")
    o = np.full((s.heads, s.q_len, s.head_dim), np.float16(7))  # every element must be written
    report = emulator.run(f, q, k, v, o, seed=n, interleavings=interleavings, target=parse_target(arch)[1],
                          source=source)
    return report, np.abs(o.astype(np.float32) - attention_reference(q, k, v, s.causal)).max()


def _check_source(src: str, arch: str):
    assert "mbarrier" in src and "ws_full" in src and "ws_empty" in src          # the rings' barriers
    # the tail rows are zero-filled by the copy itself: cp.async with a src-size operand
    assert re.search(r"cp\.async\.cg\.shared\.global \[%\d\], \[%\d\], 16, %\d;", src)
    lines = ptxas_report(src, arch)
    if lines is None:
        pytest.skip("nvcc not installed: the CUDA source was generated, ptxas not run")
    spills = [ln for ln in lines if "spill" in ln]
    assert spills and all("0 bytes spill stores, 0 bytes spill loads" in ln for ln in spills)


@pytest.fixture(scope="module")
def sm80():
    return _ws_kernel("sm_80", causal=False)


def test_ws_attention_sm80_has_a_producer_warp_on_mbarrier_rings(sm80):
    s, plan, _, src = sm80
    ws = plan.warp_specialization
    assert plan.applied and ws.chosen and ws.protocol is not None
    assert ws.facts.copy == "cp.async" and ws.facts.producer_statements == 2        # K and V
    assert ws.facts.consumer_threads == s.block_m and ws.facts.producer_threads == 32
    assert all("zero-filled where" in p for p in ws.facts.copy_plans)
    _check_source(src, "sm_80")


@pytest.mark.parametrize("tiles", [0, 1, "ragged"])
def test_ws_attention_sm80_emulates_against_numpy(sm80, tiles):
    s, _, f, _ = sm80
    n = {0: 0, 1: 5, "ragged": 3 * BN + 5}[tiles]
    report, err = _emulate(s, f, "sm_80", n)
    assert report.findings == [] and report.ok
    assert err < 2e-2


@pytest.mark.slow
@pytest.mark.parametrize("arch,causal,d", [("sm_80", True, 64), ("sm_90a", False, 64), ("sm_90a", True, 64),
                                           ("sm_80", False, 128)])
def test_ws_attention_long_kv_emulates_against_numpy(arch, causal, d):
    """Trip count past twice the ring depth (every slot reused at both phases), ragged tail."""
    s, plan, f, src = _ws_kernel(arch, causal, d)
    _check_source(src, arch)
    depth = plan.warp_specialization.ring_depth
    n = 2 * depth * BN + 5                      # 2 * depth + 1 tiles
    report, err = _emulate(s, f, arch, n)
    assert report.findings == [] and report.ok
    assert err < 2e-2


NAMED_BAR = "tvm_builtin_ptx_bar_sync_count_sync((uint)15, (uint)64);"   # the consumers' (64 threads)


@pytest.fixture(scope="module")
def staged():
    return _ws_kernel("sm_80", causal=True, staged=True)


def test_ws_attention_staged_epilogue_syncs_the_consumers_on_a_named_barrier(staged):
    """The normalise -> store hazard after the loop: TVM's ThreadSync places the barrier inside the
    consumers' branch, retargeted to a named barrier of the 64 consumer threads; the one __syncthreads
    left is the one after the mbarrier init, outside the role branch."""
    _, plan, _, src = staged
    assert plan.applied and plan.warp_specialization.chosen
    assert src.count("__syncthreads()") == 1
    after_loop = src[src.rindex("ws_empty_ptr"):]          # past the consumers' last release
    store = after_loop.index("*(uint4*)(O_ptr")           # the cooperative 16-byte store of O
    assert NAMED_BAR in after_loop[:store]
    _check_source(src, "sm_80")


@pytest.mark.parametrize("n", [0, 3 * BN + 5])
def test_ws_attention_staged_epilogue_emulates_against_numpy(staged, n):
    s, _, f, _ = staged
    report, err = _emulate(s, f, "sm_80", n)
    assert report.findings == [] and report.ok
    assert err < 2e-2


def test_ws_attention_staged_epilogue_without_its_barrier_races(staged):
    s, _, f, src = staged
    bad = src.replace(NAMED_BAR, ";")
    assert bad != src
    report, _ = _emulate(s, f, "sm_80", 2 * BN, source=bad)
    assert not report.ok and any(type(x).__name__ == "DataRace" for x in report.findings), str(report)


def _copy_nest(cond_of):
    """for i: for v (vectorized 8): X[i*8+v] = if_then_else(cond_of(i, v), G[i*8+v], 0)."""
    from tvm.script import tirx as T

    from tvm_twill.frontend.ir import tirx
    g = tirx.decl_buffer((64,), "float16", name="G")
    x = tirx.decl_buffer((64,), "float16", name="X", scope="shared")
    i, v, n = tirx.Var("i", "int32"), tirx.Var("v", "int32"), tirx.Var("n", "int32")
    idx = i * 8 + v
    store = tirx.BufferStore(x, T.if_then_else(cond_of(i, v, n), tirx.BufferLoad(g, [idx]), T.float16(0)), [idx])
    nest = tirx.For(i, 0, 8, tirx.ForKind.SERIAL, tirx.For(v, 0, 8, tirx.ForKind.VECTORIZED, store))
    return nest, x, n, i


def test_zero_filling_copy_is_a_producer_copy_with_its_condition():
    from tvm_twill.transforms.ws.roles import parse_copy
    nest, x, n, i = _copy_nest(lambda i, v, n: tvm.tirx.floordiv(i * 8 + v, 8) < n)
    c = parse_copy(nest, [x])
    assert c.fill is not None and isinstance(c.store.value, tvm.ir.expr.TensorLoad)
    ana = tvm.sym.Analyzer()
    assert ana.can_prove_equal(tvm.tirx.Cast("int32", c.fill), tvm.tirx.Cast("int32", i < n))  # uniform per vector


def test_zero_filling_copy_varying_within_a_vector_is_refused():
    from tvm_twill.errors import UnsupportedLoopError
    from tvm_twill.transforms.ws.roles import parse_copy
    nest, x, _, _ = _copy_nest(lambda i, v, n: i * 8 + v < n)
    with pytest.raises(UnsupportedLoopError, match="condition that varies within a vector"):
        parse_copy(nest, [x])


def test_a_copys_own_proxy_fence_goes_with_it_and_nothing_else_does():
    """A kernel written for TVM's own pipeline fences after its stores into a wgmma operand, in the copy loop
    (kernels.attention_wgmma); the producer's copies replace the stores, so the fence is dropped with them.
    Any other statement beside the store still refuses the nest."""
    from tvm.script import tirx as T

    from tvm_twill.errors import UnsupportedLoopError
    from tvm_twill.frontend.ir import tirx
    from tvm_twill.transforms.proxy_fence import consumer_fence
    from tvm_twill.transforms.ws.roles import parse_copy
    g = tirx.decl_buffer((64,), "float16", name="G")
    x = tirx.decl_buffer((64,), "float16", name="X", scope="shared")
    i, v = tirx.Var("i", "int32"), tirx.Var("v", "int32")
    store = tirx.BufferStore(x, tirx.BufferLoad(g, [i * 8 + v]), [i * 8 + v])

    def nest(extra):
        body = tirx.SeqStmt([tirx.For(v, 0, 8, tirx.ForKind.VECTORIZED, store), extra])
        return tirx.For(i, 0, 8, tirx.ForKind.SERIAL, body)
    for fence in (consumer_fence(), tirx.IfThenElse(i == 7, consumer_fence(), None)):
        c = parse_copy(nest(fence), [x])
        assert c is not None and c.store.same_as(store) and [lv.name for lv, _, _ in c.loops] == ["i"]
    other = tirx.Evaluate(T.tvm_storage_sync("shared"))
    with pytest.raises(UnsupportedLoopError, match="not a plain copy nest"):
        parse_copy(nest(other), [x])
