"""The tensor-core attention forward (tvm_twill.kernels.attention_tc): both GEMMs on mma.sync.

* its KV loop extracts to the paper's Figure 1 shape: the two GEMMs on the tensor cores, exp on the SFU,
  the accumulator O and the softmax state (m, l) carried to the next iteration;
* auto_pipeline plans it (symbolic KV length) with the K and V loads in an earlier, asynchronous stage;
* the tensorized kernel compiles for sm_80 (ldmatrix and mma.sync in the CUDA, no spills) and, run on the
  emulator, matches a float32 numpy reference: head dim 64 and 128, causal and not, a ragged KV length, two
  CTAs, two interleavings, no findings (llvm cannot run tensor-core intrinsics: the emulator is the check);
* ``tvm_twill.build`` keeps the caller's PassContext: the kernel's lane-wise accumulator rescale needs
  ``tirx.disable_cse_tir`` (TVM's CSE hides the lane index from LowerWarpMemory).
"""
import functools
import re
import shutil

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

import tvm_twill
from tvm_twill.errors import InputError
from tvm_twill.frontend import extract_loop
from tvm_twill.kernels import KV_LOOP, AttentionShape, attention_reference
from tvm_twill.kernels.attention_tc import TC_PASS_CONFIG, fa_forward_tc

SMALL = {"heads": 1, "q_len": 128, "block_m": 64, "block_n": 32}
N = 2 * SMALL["block_n"] + 5
TC, SFU = "TC", "SFU"


@functools.cache
def _sch(d=64, causal=False):
    return tvm.s_tir.Schedule(fa_forward_tc(AttentionShape(head_dim=d, causal=causal, **SMALL)))


def test_kv_loop_extracts_to_the_figure_1_shape():
    ex = extract_loop(_sch(), KV_LOOP, "sm_80")
    units = {op.name: op.unit for op in ex.graph.ops}
    edges = {(e.src, e.dst, e.distance) for e in ex.graph.edges}
    names = [op.name for op in ex.graph.ops]
    s_gemm, o_gemm = names[2], names[-1]  # the two tensorized GEMM nests (ldmatrix + mma.sync per 16)
    assert [units[n] for n in names] == ["TMA", "TMA", TC, "ALU", "ALU", SFU, SFU, "ALU", "ALU", "ALU", TC]
    assert ex.trip_count is None and ex.extent == f"(n + {SMALL['block_n'] - 1}) // {SMALL['block_n']}"
    # S (TC) -> ... -> P (SFU) -> O (TC), the loads feeding the GEMMs
    assert {("K_load", s_gemm, 0), ("V_load", o_gemm, 0), ("P", o_gemm, 0), ("m_new", "P", 0)} <= edges
    # loop-carried: the accumulator O (through its rescale), the running max and sum
    assert {(o_gemm, o_gemm, 1), (o_gemm, "O_scale_o", 1), ("l", "l", 1), ("m_update", "m_new", 1)} <= edges


def test_planned_with_the_loads_in_an_earlier_async_stage():
    sch = tvm.s_tir.Schedule(_sch().mod)
    plan = tvm_twill.auto_pipeline(sch, KV_LOOP, "sm_80", time_limit=120, quiet=True)
    ann = plan.annotation
    assert plan.applied and ann.async_stages
    load = max(ann.stages[0], ann.stages[1])
    assert load in ann.async_stages and load < min(ann.stages[2], ann.stages[-1])
    assert set(plan.async_copies) == {"K_load", "V_load"}


@functools.cache
def _built(d, causal):
    with tvm.transform.PassContext(config=TC_PASS_CONFIG):
        f = tvm_twill.build(_sch(d, causal).mod, "sm_80")
    return f, f.mod.imports[0].inspect_source()


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("d,causal", [(64, False), (64, True), (128, False), (128, True)])
def test_tensor_core_attention_on_the_emulator_matches_numpy(d, causal):
    from tvm_twill import emulator

    f, src = _built(d, causal)
    assert "mma.sync.aligned.m16n8k16" in src and "ldmatrix.sync.aligned" in src
    rng = np.random.default_rng(d + causal)
    q = rng.standard_normal((1, SMALL["q_len"], d)).astype("float16")
    k = rng.standard_normal((1, N, d)).astype("float16")
    v = rng.standard_normal((1, N, d)).astype("float16")
    o = np.zeros_like(q)
    report = emulator.run(f, q, k, v, o, interleavings=2)
    assert report.ok, str(report)
    assert np.abs(o.astype(np.float32) - attention_reference(q, k, v, causal)).max() < 2e-2


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_tensor_core_attention_has_no_spills_and_no_stack_frame():
    from tvm_twill.compiler.sass import ptxas_report

    for d in (64, 128):
        lines = ptxas_report(_built(d, False)[1], "sm_80")
        spills = [ln for ln in lines if "spill" in ln]
        assert spills and all("0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in ln
                              for ln in spills), lines


def test_build_keeps_the_callers_pass_config():
    mod = _sch().mod
    with pytest.raises(Exception, match="LowerWarpMemory"):  # TVM's CSE on: the lane index is hidden
        tvm_twill.build(mod, "sm_80")
    with tvm.transform.PassContext(config=TC_PASS_CONFIG):
        src = tvm_twill.build(mod, "sm_80").mod.imports[0].inspect_source()
    assert re.search(r"mma\.sync", src)


def test_a_shape_that_does_not_tile_is_refused():
    with pytest.raises(InputError, match="block_m 48 is not a multiple of 32"):
        fa_forward_tc(AttentionShape(block_m=48, q_len=96, block_n=48, head_dim=64))
    with pytest.raises(InputError, match="must be multiples of 16"):
        fa_forward_tc(AttentionShape(block_n=24, head_dim=64, block_m=64, vector=8, q_len=64))
