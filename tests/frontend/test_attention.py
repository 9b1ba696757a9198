"""The attention-forward kernel (tvm_twill.kernels.attention) through the front-end and auto_pipeline.

* its KV loop extracts to the graph of the paper's Figure 1 shape (a hand-written expected graph: ops,
  units, edges with distances);
* the KV loop has a symbolic extent: it is planned, and the pipelined kernel computes exactly what the
  original does on the CPU (llvm) for KV lengths giving 0, 1, 2 and the stage count of tiles, and a length
  that is not a multiple of the tile;
* auto_pipeline puts the loads in an earlier async stage, the result matches numpy (causal and not, head
  dim 64 and 128) and compiles for CUDA sm_80 with cp.async.
"""
import re

import numpy as np
import pytest

pytest.importorskip("tvm")
import tvm  # noqa: E402
import tvm_ffi  # noqa: E402

import tir_gen  # noqa: E402
from tvm_twill.api import SYMBOLIC_NOTE, auto_pipeline  # noqa: E402
from tvm_twill.frontend import extract_loop  # noqa: E402
from tvm_twill.frontend.lowering import compile_cuda  # noqa: E402
from tvm_twill.kernels import KV_LOOP, AttentionShape, attention_reference, fa_forward  # noqa: E402
from tvm_twill.transforms import apply_annotation  # noqa: E402
from tvm_twill.compiler.sass import ptxas_report  # noqa: E402
from tvm_twill.transforms.pipelines import SWP_PIPELINE  # noqa: E402
from tvm_twill.transforms.swp_lowering import constant_async_waits  # noqa: E402

BN = AttentionShape().block_n

#: The KV loop as the paper's Figure 1 draws it, op by op: (name, unit); and edges (src, dst, distance).
#: S and O are SIMT FMA loops here (fp16 in, fp32 FMAs, never tensorized): CUDA cores (ALU), not TC.
EXPECTED_OPS = [("K_load", "TMA"), ("V_load", "TMA"), ("S", "ALU"), ("m_new", "ALU"), ("P", "SFU"),
                ("corr", "SFU"), ("l", "ALU"), ("O_scale", "ALU"), ("m_update", "ALU"), ("O", "ALU")]
EXPECTED_EDGES = {
    ("K_load", "S", 0), ("V_load", "O", 0),                         # the loads feed the two GEMMs
    ("S", "m_new", 0), ("S", "P", 0), ("m_new", "P", 0),            # S -> row max -> exp
    ("m_new", "corr", 0), ("m_new", "m_update", 0), ("corr", "m_update", 0),
    ("P", "l", 0), ("P", "O", 0), ("corr", "l", 0), ("corr", "O_scale", 0), ("O_scale", "O", 0),
    # loop-carried softmax state and accumulator (recurrences)
    ("l", "l", 1), ("m_update", "m_new", 1), ("m_update", "corr", 1),
    ("O_scale", "O_scale", 1), ("O", "O_scale", 1), ("O", "O", 1),
}


def _kv_schedule(gpu=True, **kw):
    return tvm.s_tir.Schedule(fa_forward(AttentionShape(**kw), gpu=gpu))


def test_kv_loop_extracts_to_the_figure_1_graph():
    ex = extract_loop(_kv_schedule(), KV_LOOP, "sm_80")
    g = ex.graph
    assert [(op.name, op.unit) for op in g.ops] == EXPECTED_OPS
    assert {(e.src, e.dst, e.distance) for e in g.edges} == EXPECTED_EDGES
    assert ex.trip_count is None and ex.extent == f"(n + {BN - 1}) // {BN}"
    # registers per thread of the tiles handed on: S is 32 fp32 per thread (each element once, not per
    # step of the reduction over the head dim), the new row max one
    regs = {op.name: op.regs for op in g.ops}
    assert regs["S"] == BN and regs["m_new"] == 1 and regs["P"] == BN // 2
    # contracted to the paper's three ops: S (TC) -> P (SFU) -> O (TC), O carried to the next iteration
    paper = tvm_twill_fig1()
    assert [(o.name, o.unit) for o in paper.ops] == [("S", "TC"), ("P", "SFU"), ("O", "TC")]
    for e in paper.edges:
        assert (e.src, e.dst, e.distance) in EXPECTED_EDGES


def tvm_twill_fig1():
    from tvm_twill.data import load_example
    return load_example("fa_fwd_fig1")


def _inputs(n, d=64, seed=0):
    s = AttentionShape(head_dim=d)
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((s.heads, s.q_len, d)).astype("float16")
    k = rng.standard_normal((s.heads, n, d)).astype("float16")
    v = rng.standard_normal((s.heads, n, d)).astype("float16")
    return [q, k, v, np.zeros((s.heads, s.q_len, d), "float16")]


def _run(mod, args):
    return tir_gen.run_llvm(mod, args)[3]


def _plan(causal, d, apply=True):
    """auto_pipeline planned on the GPU kernel, its annotation written on the CPU kernel (same statements).
    The S and O blocks are marked for tensorizing, so the plan is the one for GEMMs on the tensor cores (the
    loads in an earlier async stage: the pipeline these tests exercise); as SIMT FMA loops the loop is
    ALU-bound and its loads need no earlier stage.  TVM's lowering ignores the mark."""
    sch = _kv_schedule(head_dim=d, causal=causal)
    for gemm in ("S", "O"):
        sch.annotate(sch.get_sblock(gemm), "meta_schedule.auto_tensorize", "mma")
    plan = auto_pipeline(sch, KV_LOOP, "sm_80", time_limit=120, apply=apply)
    cpu = _kv_schedule(gpu=False, head_dim=d, causal=causal)
    assert extract_loop(cpu, KV_LOOP, "sm_80").names == plan.extraction.names  # the same statements
    apply_annotation(cpu, cpu.get_loops(cpu.get_sblock("kv"))[-1], plan.annotation)
    return sch, plan, cpu


@pytest.fixture(scope="module")
def plan64():
    return _plan(False, 64)


def test_symbolic_trip_count_is_planned_with_loads_in_an_earlier_async_stage(plan64):
    _, plan, _ = plan64
    ann = plan.annotation
    assert plan.applied
    load = max(ann.stages[0], ann.stages[1])
    assert load < min(ann.stages[2], ann.stages[9]) and load in ann.async_stages
    assert SYMBOLIC_NOTE in plan.explain()


@pytest.mark.parametrize("tiles", [0, 1, 2, "stages", "ragged"])
def test_short_and_ragged_kv_lengths_compute_the_same(plan64, tiles):
    _, plan, cpu = plan64
    stages = plan.annotation.num_stages
    n = {"stages": stages * BN, "ragged": 2 * BN + 7}.get(tiles, tiles * BN if isinstance(tiles, int) else 0)
    args = _inputs(n)
    ref = _run(fa_forward(AttentionShape(), gpu=False), args)
    assert np.array_equal(_run(cpu.mod, args), ref)
    want = attention_reference(*args[:3], causal=False)
    assert np.abs(ref.astype(np.float32) - want).max() < 2e-2


@pytest.mark.parametrize("causal,d", [(False, 128), (True, 64), (True, 128)])
def test_pipelined_attention_matches_numpy(causal, d):
    _, _, cpu = _plan(causal, d)
    args = _inputs(3 * BN + 5, d=d, seed=1)
    got = _run(cpu.mod, args).astype(np.float32)
    want = attention_reference(*args[:3], causal=causal)
    assert np.abs(got - want).max() < 2e-2


def test_pipelined_attention_compiles_for_sm80_with_cp_async(plan64):
    sch, plan, _ = plan64
    # TVM's own pipeline would leave the guarded prologue's wait counts symbolic (CUDA codegen refuses them),
    # so the plan keeps the async stage out of TVM's key (transforms.wait_counts): a plain tvm.compile gets
    # synchronous copies, and the plan's pipeline cp.async with constant counts
    assert any(w.emitted is None for w in plan.tvm_waits)
    _, plain = compile_cuda(sch, "sm_80")
    assert "cp.async" not in plain
    assert plan.tir_pipeline == SWP_PIPELINE
    _, src = compile_cuda(sch, "sm_80", tir_pipeline=plan.tir_pipeline)
    assert "cp.async.cg.shared.global" in src or "cp.async.ca.shared.global" in src
    waits = set(re.findall(r"cp\.async\.wait_group (\S+);", src))
    assert waits and all(w.isdigit() for w in waits)
    lines = ptxas_report(src, "sm_80")  # nvcc accepts the kernel, without spills
    if lines is None:
        pytest.skip("nvcc not installed: the CUDA source was generated, ptxas not run")
    spills = [ln for ln in lines if "spill" in ln]
    assert spills and all("0 bytes spill stores, 0 bytes spill loads" in ln for ln in spills)


def test_constant_async_waits_takes_the_smallest_count():
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def waits(A: T.Buffer((8,), "float32"), n: T.int32):
        for j in T.unroll(3):
            with T.attr(0, "async_wait_queue_scope", 0):
                with T.attr(0, "async_wait_inflight_count", T.if_then_else(j < n, 3, 1)):
                    A[j] = T.float32(1)
        for j in range(4):
            with T.attr(0, "async_wait_queue_scope", 0):
                with T.attr(0, "async_wait_inflight_count", 2):
                    A[j] = T.float32(2)

    counts = []
    tvm_ffi.structural_walk(constant_async_waits(waits).body, [
        (tvm.tirx.AttrStmt, lambda a: counts.append(a.value) if a.attr_key == "async_wait_inflight_count" else None)])
    assert [int(c.value) for c in counts] == [1, 2]
