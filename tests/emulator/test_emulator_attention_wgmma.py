"""The Hopper FlashAttention forward on wgmma (tvm_twill.kernels.attention_wgmma), run on the emulator.

* unpipelined, compiled by TVM's own pipeline for sm_90a under ``WGMMA_PASS_CONFIG``: head dim 64 and 128,
  causal and not, one and two warp groups (block_m 64 and 128), KV lengths of 0 tiles, 1 tile and a ragged
  2 tiles + 5: no findings in two interleavings, and the float32 numpy reference within 2e-2;
* its CUDA issues ``wgmma.mma_async`` (an MN-major B for O += P V) and no ``mma.sync``; ptxas: no spills;
* its KV loop extracts to FlashAttention's loop: the two GEMMs on the tensor cores, P on the SFU, the K and
  V loads cp.async-capable copies;
* as ``auto_pipeline`` plans it (loads in an async stage), ``tvm_twill.build`` compiles it (cp.async, the
  plan's tvm_twill_swp pipeline) and it runs correctly for 0, 1, 2, the stage count and a ragged number of
  tiles past it;
* the checks can fail: the kernel's proxy fences removed from the CUDA (after K's and V's stores, after P's,
  or all of them) are a ``ProxyFenceMissing`` the emulator reports, and a shape that does not tile is refused.
"""
import functools
import re
import shutil

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
if shutil.which("nvcc") is None:
    pytest.skip("nvcc not installed", allow_module_level=True)

import tvm_twill
from tvm_twill import emulator as E
from tvm_twill.emulator import findings as F
from tvm_twill.errors import InputError
from tvm_twill.frontend import extract_loop
from tvm_twill.kernels import KV_LOOP, AttentionShape, attention_reference, fa_forward_wgmma
from tvm_twill.kernels.attention_wgmma import WGMMA_PASS_CONFIG
from tvm_twill.compiler.sass import ptxas_report

ARCH = "sm_90a"
TARGET = {"kind": "cuda", "arch": ARCH}
BLOCK_N = {64: 64, 128: 32}  # per head dim: the tiles of two warp groups fit shared memory with room to pipeline
CASES = [(d, causal, bm) for d in (64, 128) for causal in (False, True) for bm in (64, 128)]
IDS = [f"d{d}{'-causal' if c else ''}-bm{bm}" for d, c, bm in CASES]
FENCE = "tvm_builtin_ptx_fence_proxy_proxy_async_shared__cta();"


def _shape(d, causal, bm):
    return AttentionShape(heads=1, q_len=128, block_m=bm, block_n=BLOCK_N[d], head_dim=d, causal=causal)


@functools.cache
def _plain(d, causal, bm):
    """(compiled module, CUDA) of the unpipelined kernel, TVM's own pipeline."""
    with tvm.transform.PassContext(config=WGMMA_PASS_CONFIG):
        f = tvm.compile(fa_forward_wgmma(_shape(d, causal, bm)), target=tvm.target.Target(TARGET))
    return f, f.mod.imports[0].inspect_source()


@functools.cache
def _planned(d, causal, bm):
    """(plan, compiled module, CUDA) of the kernel as auto_pipeline plans it."""
    sch = tvm.s_tir.Schedule(fa_forward_wgmma(_shape(d, causal, bm)))
    plan = tvm_twill.auto_pipeline(sch, KV_LOOP, ARCH, time_limit=120, quiet=True)
    with tvm.transform.PassContext(config=WGMMA_PASS_CONFIG):
        f = tvm_twill.build(sch.mod, ARCH, plan)
    return plan, f, f.mod.imports[0].inspect_source()


def _emulate(f, shape, n, seed=0, source=None):
    """(report, max |O - reference|) for KV length ``n``."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((shape.heads, shape.q_len, shape.head_dim)).astype("float16")
    k = rng.standard_normal((shape.heads, n, shape.head_dim)).astype("float16")
    v = rng.standard_normal((shape.heads, n, shape.head_dim)).astype("float16")
    o = np.full_like(q, np.nan)  # every element must be written
    report = E.run(f, q, k, v, o, interleavings=2, source=source, target=TARGET)
    want = attention_reference(q, k, v, shape.causal) if n else np.zeros(q.shape, np.float32)  # no key: zeros
    return report, float(np.abs(o.astype(np.float32) - want).max())


@pytest.mark.parametrize("d,causal,bm", CASES, ids=IDS)
def test_unpipelined_wgmma_attention_matches_numpy_with_no_findings(d, causal, bm):
    f, _ = _plain(d, causal, bm)
    shape, bn = _shape(d, causal, bm), BLOCK_N[d]
    for what, n in {"0 tiles": 0, "1 tile": bn, "ragged": 2 * bn + 5}.items():
        report, err = _emulate(f, shape, n, seed=n + d)
        assert report.ok and not report.findings, f"{what} (n={n}): {report}"
        assert err < 2e-2, f"{what} (n={n}): max error {err}"


@pytest.mark.parametrize("d,causal,bm", CASES, ids=IDS)
def test_cuda_issues_wgmma_only_and_ptxas_spills_nothing(d, causal, bm):
    _, src = _plain(d, causal, bm)
    bn = BLOCK_N[d]
    assert f"wgmma_f16_ss_mma_async_sync_aligned_m64n{bn}k16_f32_f16_f16_1_1_0_0(" in src   # S = Q K^T
    assert f"wgmma_f16_ss_mma_async_sync_aligned_m64n{d}k16_f32_f16_f16_1_1_0_1(" in src    # O += P V, B MN-major
    assert "mma.sync" not in src and "ldmatrix" not in src
    assert src.count(FENCE) == 4  # after Q's, K's, V's and P's stores
    lines = ptxas_report(src, ARCH)
    spills = [ln for ln in lines if "spill" in ln]
    assert spills and all("0 bytes spill stores, 0 bytes spill loads" in ln for ln in spills), lines


def test_kv_loop_extracts_to_flash_attentions_loop():
    ex = extract_loop(tvm.s_tir.Schedule(fa_forward_wgmma(_shape(64, True, 128))), KV_LOOP, ARCH)
    ops = ex.graph.ops
    names = [op.name for op in ops]
    s_gemm, o_gemm = names[2], names[-1]  # the two tensorized wgmma nests
    units = {op.name: op.unit for op in ops}
    assert len(ops) == 11 and names[:2] == ["K_load", "V_load"] and "P" in names
    assert units[s_gemm] == units[o_gemm] == "TC" and units["P"] == "SFU"
    kinds = {st.name: st for st in ex.stmts}
    for load in ("K_load", "V_load"):
        assert kinds[load].kind == "copy" and kinds[load].async_capable, kinds[load]
    assert kinds[s_gemm].kind == kinds[o_gemm].kind == "mma"
    assert ex.trip_count is None  # the KV length is symbolic
    edges = {(e.src, e.dst, e.distance) for e in ex.graph.edges}
    assert {("K_load", s_gemm, 0), ("V_load", o_gemm, 0), ("P", o_gemm, 0), ("m_new", "P", 0)} <= edges
    assert {(o_gemm, o_gemm, 1), ("l", "l", 1), ("m_update", "m_new", 1)} <= edges  # loop-carried O, l, m


PLANNED = [(64, True, 64), (128, True, 128), (64, False, 128), (128, False, 64)]


@pytest.mark.parametrize("d,causal,bm", PLANNED, ids=[f"d{d}{'-causal' if c else ''}-bm{bm}" for d, c, bm in PLANNED])
def test_planned_wgmma_attention_compiles_and_matches_numpy(d, causal, bm):
    plan, f, src = _planned(d, causal, bm)
    ann, bn = plan.annotation, BLOCK_N[d]
    assert plan.applied and plan.wgmma and plan.tir_pipeline == 'tvm_twill_swp'
    # the loads run ahead of the GEMMs, K's as cp.async; V's too unless the plan says why not (at d 64, block_n
    # 64 and one group the model finds no II with both in one async stage: TVM waits on one stage a statement)
    assert "K_load" in plan.async_copies and set(plan.async_copies) | {c for c, _ in plan.sync_copies} == \
        {"K_load", "V_load"}
    # each load a stage ahead of the GEMM that reads it (K of S = Q K^T, V of O += P V), K's in an async stage
    assert ann.stages[0] in ann.async_stages and ann.stages[0] < ann.stages[2] and ann.stages[1] < ann.stages[-1]
    assert re.search(r"cp\.async\.cg\.shared\.global", src) and "cp.async.commit_group" in src
    assert re.search(r"cp\.async\.wait_group [1-9]", src)  # the steady state keeps copies in flight
    assert f"float O_acc_ptr[{d // 2}];" in src  # the thread's own accumulator registers
    assert "mma.sync" not in src and "wgmma.mma_async" in src
    spills = [ln for ln in ptxas_report(src, ARCH) if "spill" in ln]
    assert spills and all("0 bytes spill stores, 0 bytes spill loads" in ln for ln in spills), spills
    s = ann.num_stages
    shape = _shape(d, causal, bm)
    for what, n in {"0 tiles": 0, "1 tile": bn - 7, "2 tiles": 2 * bn, f"{s} tiles (stages)": s * bn,
                    f"{s + 1} tiles (ragged)": s * bn + 5}.items():
        report, err = _emulate(f, shape, n, seed=n)
        assert report.ok and not report.findings, f"{what} (n={n}): {report}"
        assert err < 2e-2, f"{what} (n={n}): max error {err}"


def _fences(src):
    """Positions of the kernel's proxy fences: (Q's, K's and V's, P's)."""
    body = src.index("for (int j = 0;")
    at = [m.start() for m in re.finditer(re.escape(FENCE), src) if m.start() > src.index("_kernel(")]
    q = [a for a in at if a < body]
    kv = [a for a in at if body < a < src.index("mma_async", body)]
    p = [a for a in at if a > src.index("expf(", body)][:1]
    return q, kv, p


@pytest.mark.parametrize("which", ["K and V", "P", "all"])
def test_a_removed_proxy_fence_is_reported(which):
    """Q's fence alone is not missed: each thread's K and V fences come after its Q stores and before the
    barrier ahead of the first wgmma, and a fence orders all of the thread's earlier stores."""
    f, src = _plain(64, True, 128)
    q, kv, p = _fences(src)
    assert len(q) == 1 and len(kv) == 2 and len(p) == 1
    cut = {"K and V": kv, "P": p, "all": q + kv + p}[which]
    broken = src
    for at in sorted(cut, reverse=True):
        broken = broken[:at] + broken[at + len(FENCE):]
    report, _ = _emulate(f, _shape(64, True, 128), 2 * BLOCK_N[64] + 5, source=broken)
    missing = [x for x in report.findings if isinstance(x, F.ProxyFenceMissing)]
    assert missing and "wgmma (async proxy) reads shared byte" in missing[0].message, str(report)
    report, _ = _emulate(f, _shape(64, True, 128), 2 * BLOCK_N[64] + 5, source=src)
    assert report.ok and not report.findings  # the same harness on the kernel as built


def test_a_shape_that_does_not_tile_is_refused():
    with pytest.raises(InputError, match="block_m 256 must be 64 or 128"):
        fa_forward_wgmma(AttentionShape(block_m=256, q_len=256, block_n=64, head_dim=64))
    with pytest.raises(InputError, match="block_n 24 must be a multiple of 16"):
        fa_forward_wgmma(AttentionShape(block_m=64, q_len=64, block_n=24, head_dim=64, vector=4))
    with pytest.raises(InputError, match="head_dim 40 must be a multiple of 16"):
        fa_forward_wgmma(AttentionShape(block_m=64, q_len=64, block_n=64, head_dim=40, vector=4))
    with pytest.raises(InputError, match="a K/V tile of 1024 elements does not split into 256 threads"):
        fa_forward_wgmma(AttentionShape(block_m=128, q_len=128, block_n=16, head_dim=64))
