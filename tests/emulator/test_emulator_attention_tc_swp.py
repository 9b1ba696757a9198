"""The software-pipelined tensor-core attention (tvm_twill.kernels.attention_tc, as auto_pipeline plans it).

``auto_pipeline(sch, KV_LOOP, arch)`` plans the KV loop of symbolic extent (the K and V loads in an earlier,
asynchronous stage than the two GEMMs), ``tvm_twill.build`` compiles the plan with the ``tvm_twill_swp`` TIR
pipeline under ``TC_PASS_CONFIG``, and ``tvm_twill.emulator.run`` executes the PTX nvcc writes for it:

* for sm_80 and sm_90a (mma.sync runs on both), head dim 64 and 128, causal and not: cp.async, its commit
  and the pipeline's waits are in the CUDA, every mma fragment is one thread's share (``O_w_ptr[head_dim]``,
  ``transforms.warp_memory``), ptxas reports no stack frame and no spills, and the kernel matches a float32 numpy
  reference for KV lengths giving 0, 1, 2 and the plan's stage count of KV tiles and a ragged length past
  it (the guarded prologue and epilogue, and the steady-state loop), two CTAs, two interleavings, no findings;
* the pipelined loop's body is the plan: its statements in the plan's order, each on iteration
  ``j + max_stage - stage`` (the loads of iteration ``j + s`` issued before the GEMMs of iteration ``j``);
* the checks can fail: without ``uniform_guard_loops`` the kernel does not compile (TVM's ThreadSync
  refuses a barrier under the prologue's guards), and with the pipeline's waits removed, or the barriers
  the rewrite places inside a guard dropped, the emulator reports findings.
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
from tvm_twill.compiler import pass_config
from tvm_twill.frontend.ir import s_tir, stock_s_tir_passes, tirx, tvm_ffi
from tvm_twill.kernels import KV_LOOP, AttentionShape, attention_reference
from tvm_twill.kernels.attention_tc import TC_PASS_CONFIG, fa_forward_tc
from tvm_twill.transforms import swp_lowering
from tvm_twill.compiler.sass import ptxas_report

SMALL = {"heads": 1, "q_len": 128, "block_m": 64, "block_n": 32}  # two CTAs of two warps
BN = SMALL["block_n"]
CASES = [(arch, d, causal) for arch in ("sm_80", "sm_90a") for d in (64, 128) for causal in (False, True)]


def _target(arch):
    return {"kind": "cuda", "arch": arch}


@functools.cache
def _planned(arch, d, causal):
    """(shape, schedule, plan, built module, CUDA) of the planned kernel; the schedule carries the plan."""
    shape = AttentionShape(head_dim=d, causal=causal, **SMALL)
    sch = tvm.s_tir.Schedule(fa_forward_tc(shape))
    plan = tvm_twill.auto_pipeline(sch, KV_LOOP, arch, time_limit=120, quiet=True)
    with tvm.transform.PassContext(config=TC_PASS_CONFIG):
        f = tvm_twill.build(sch.mod, arch, plan)
    return shape, sch, plan, f, f.mod.imports[0].inspect_source()


def _lengths(plan) -> dict:
    """KV lengths by what they exercise: 0, 1, 2 and the stage count of KV tiles, and a ragged length with
    more tiles than stages (the steady-state loop runs twice, its last tile 5 keys long)."""
    s = plan.annotation.num_stages
    return {"0 tiles": 0, "1 tile": BN - 7, "2 tiles": 2 * BN, f"{s} tiles (stages)": s * BN,
            f"{s + 1} tiles (ragged)": s * BN + 5}


def _inputs(shape, n, seed):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((shape.heads, shape.q_len, shape.head_dim)).astype("float16")
    k = rng.standard_normal((shape.heads, n, shape.head_dim)).astype("float16")
    v = rng.standard_normal((shape.heads, n, shape.head_dim)).astype("float16")
    return q, k, v, np.zeros_like(q)


def _emulate(arch, d, causal, n, source=None, seed=0):
    shape, _, _, f, _ = _planned(arch, d, causal)
    q, k, v, o = _inputs(shape, n, seed)
    report = E.run(f, q, k, v, o, interleavings=2, source=source, target=_target(arch))
    err = float(np.abs(o.astype(np.float32) - attention_reference(q, k, v, causal)).max()) if n else \
        float(np.abs(o.astype(np.float32)).max())  # no key: every row is zero
    return report, err


def _fragments(src) -> dict:
    """fragment -> elements each thread declares for it in the CUDA (``float O_w_ptr[64];`` -> O: 64)."""
    return {name: int(n) for name, n in re.findall(r"\b(\w)_w_ptr\[(\d+)\];", src)}


@pytest.mark.parametrize("arch,d,causal", CASES, ids=[f"{a}-d{d}{'-causal' if c else ''}" for a, d, c in CASES])
def test_planned_tensor_core_attention_compiles_and_matches_numpy(arch, d, causal):
    _, _, plan, _, src = _planned(arch, d, causal)
    ann = plan.annotation
    assert plan.applied and ann.async_stages and plan.tir_pipeline == 'tvm_twill_swp'
    assert max(ann.stages[:2]) in ann.async_stages and max(ann.stages[:2]) < min(ann.stages[2:])
    assert re.search(r"cp\.async\.cg\.shared\.global", src) and "cp.async.commit_group" in src
    assert re.search(r"cp\.async\.wait_group [1-9]", src) and "cp.async.wait_group 0" in src
    assert "mma.sync.aligned.m16n8k16" in src and "ldmatrix.sync.aligned" in src
    # every fragment one thread's registers (transforms.warp_memory): no stack frame, no spills
    assert _fragments(src) == {"S": BN, "O": d, "Q": 16, "K": BN // 2, "P": 16, "V": d // 2}
    spills = [ln for ln in ptxas_report(src, arch) if "spill" in ln]
    assert spills and all("0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in ln
                          for ln in spills), spills
    for what, n in _lengths(plan).items():
        report, err = _emulate(arch, d, causal, n, seed=n)
        assert report.ok and not report.findings, f"{what} (n={n}): {report}"
        assert err < 2e-2, f"{what} (n={n}): max error {err}"


def test_without_the_guard_rewrite_the_planned_kernel_does_not_compile(monkeypatch):
    _, sch, plan, _, _ = _planned("sm_80", 64, True)
    monkeypatch.setattr(swp_lowering, "uniform_guard_loops", lambda func: func)
    with tvm.transform.PassContext(config=TC_PASS_CONFIG), \
            pytest.raises(tvm.error.InternalError, match="Cannot insert syncs inside condition"):
        tvm_twill.build(sch.mod, "sm_80", plan)


def test_a_removed_pipeline_wait_is_caught():
    _, _, plan, _, src = _planned("sm_80", 64, True)
    broken = re.sub(r"cp\.async\.wait_group \d+;", "", src)
    assert broken != src
    report, _ = _emulate("sm_80", 64, True, plan.annotation.num_stages * BN + 5, source=broken)
    assert any(type(x).__name__ == "AsyncReadBeforeWait" for x in report.findings), str(report)


def test_a_barrier_dropped_from_a_guard_loop_is_caught():
    _, _, _, _, src = _planned("sm_80", 64, True)
    guards = [m.start() for m in re.finditer(r"for \(int guard\w* = 0;", src)]
    assert guards  # the prologue's and epilogue's guards became loops of 0 or 1 trips
    # the first barrier inside a guard loop (after the prologue's wait: the other warps' copies landed)
    at = src.index("__syncthreads();", guards[0])
    broken = src[:at] + src[at + len("__syncthreads();"):]
    report, _ = _emulate("sm_80", 64, True, 2 * BN, source=broken)
    kinds = {type(x).__name__ for x in report.findings}
    assert kinds & {"DataRace", "AsyncReadBeforeWait"}, str(report)  # warp 1 reads what warp 0's copies write


def _pipelined_tir(sch, plan, arch):
    """``sch.mod`` through TVM's s_tir passes up to InjectSoftwarePipeline (and the wait counts made constant)."""
    config = {**TC_PASS_CONFIG, **pass_config(plan)}
    with tvm.transform.PassContext(config=config):
        passes = stock_s_tir_passes()
        names = [p.info.name for p in passes]
        upto = passes[: names.index("s_tir.InjectSoftwarePipeline") + 1] + [swp_lowering.constant_async_waits_pass]
        mod = tirx.transform.BindTarget(tvm.target.Target(_target(arch)))(sch.mod)
        return tvm.ir.transform.Sequential(upto)(mod)["main"]


def _steady_state_body(func, names: dict):
    """[(op name, iteration offset)] of the pipelined loop's steady state (the one serial ``j`` loop), in the
    order it runs them: each statement is a block guarded by ``j + offset < trips`` that holds the blocks of one
    or more ops (the copies of one commit group share a statement); ``names`` maps block name -> op name."""
    loops = []
    tvm_ffi.structural_walk(func.body, [(tirx.For, lambda lp: loops.append(lp) if lp.loop_var.name == "j"
                                         and lp.kind == tirx.ForKind.SERIAL else None)])
    (loop,) = loops
    analyzer = tvm.sym.Analyzer()
    out = []
    for stmt in loop.body.seq:
        found: list = []

        def on_block(block, found=found):
            if block.name_hint in names:
                found.append(names[block.name_hint])

        tvm_ffi.structural_walk(stmt, [(s_tir.SBlock, on_block)])
        offset = int(analyzer.simplify(stmt.predicate.a - loop.loop_var))
        out += [(name, offset) for name in found]
    return out


@pytest.mark.parametrize("arch,d", [("sm_80", 64), ("sm_90a", 128)])
def test_the_pipelined_loop_runs_the_plans_stages_in_the_plans_order(arch, d):
    _, sch, plan, _, src = _planned(arch, d, True)
    ann, ops = plan.annotation, plan.extraction.graph.ops
    last = max(ann.stages)
    gemms = [ops[2].name, ops[-1].name]  # S = Q K^T, O += P V: ops named by their loop
    names = {op.name: op.name for op in ops} | {"S_step": gemms[0], "O_step": gemms[1]}
    body = _steady_state_body(_pipelined_tir(sch, plan, arch), names)
    want = [(ops[i].name, last - ann.stages[i]) for i in sorted(range(len(ops)), key=lambda i: ann.orders[i])]
    assert body == want
    # the overlap the schedule says: the loads of iteration j + s before the GEMMs of iteration j
    offset = dict(body)
    position = {name: i for i, (name, _) in enumerate(body)}
    for load in ("K_load", "V_load"):
        for gemm in gemms:
            assert position[load] < position[gemm] and offset[load] > offset[gemm]
    # the CUDA's steady-state loop issues its copies, commits, waits, then the tensor-core work
    start = src.index(f"for (int j = 0; j < (((n + {BN - 1}) >> 5) - {last}); ++j)")
    body_src = src[start:]
    first = {what: body_src.index(what) for what in ("ptx_cp_async", "commit_group", "wait_group",
                                                       "ldmatrix", "mma.sync")}
    assert first["ptx_cp_async"] < first["commit_group"] < first["wait_group"] < first["ldmatrix"] < \
        first["mma.sync"], first
