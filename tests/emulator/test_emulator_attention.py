"""The software-pipelined attention kernel (tvm_twill.kernels.attention) run on the emulator.

``auto_pipeline(sch, "j", "sm_80")`` plans the KV loop, ``tvm_twill.build`` compiles the plan (cp.async for
its async stage, constant wait counts), and ``tvm_twill.emulator.run`` executes the PTX nvcc writes for it
against a float32 numpy reference: head dim 64 and 128, causal and not, a KV length that is not a multiple of
the KV tile (three tiles, the last one partial, fewer tiles than the plan's stages, so the prologue and the
epilogue are guarded), two CTAs, two interleavings, no findings.  nvcc's ptxas reports no spills.

The shape is small (one head, 64 query rows in two CTAs of 32, KV tiles of 16): each case emulates in
seconds.  A planted bug (the plan's cp.async waits removed from the CUDA) is caught.
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
from tvm_twill.emulator.ptx import parse
from tvm_twill.kernels import KV_LOOP, AttentionShape, attention_reference, fa_forward
from tvm_twill.compiler.sass import ptxas_report

SMALL = {"heads": 1, "q_len": 64, "block_m": 32, "block_n": 16}
N = 2 * SMALL["block_n"] + 5  # three KV tiles, the last one 5 keys long


@functools.cache
def _build(d, causal):
    shape = AttentionShape(head_dim=d, causal=causal, **SMALL)
    sch = tvm.s_tir.Schedule(fa_forward(shape))
    # S and O marked for tensorizing: planned as tensor-core GEMMs, the loads go to an earlier async stage
    # (the cp.async pipeline emulated here); as SIMT FMA loops the loop is ALU-bound and the model keeps
    # them synchronous.  TVM's lowering ignores the mark: the kernel compiled is the SIMT one.
    for gemm in ("S", "O"):
        sch.annotate(sch.get_sblock(gemm), "meta_schedule.auto_tensorize", "mma")
    plan = tvm_twill.auto_pipeline(sch, KV_LOOP, "sm_80", time_limit=120)
    f = tvm_twill.build(sch.mod, "sm_80", plan)
    _MODULES[(d, causal)] = sch.mod
    return shape, plan, f, f.mod.imports[0].inspect_source()


_MODULES: dict = {}  # (d, causal) -> the planned module, as auto_pipeline left it


def _inputs(shape, n, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((shape.heads, shape.q_len, shape.head_dim)).astype("float16")
    k = rng.standard_normal((shape.heads, n, shape.head_dim)).astype("float16")
    v = rng.standard_normal((shape.heads, n, shape.head_dim)).astype("float16")
    return q, k, v, np.zeros_like(q)


@pytest.fixture(params=[(64, False), (64, True), (128, False), (128, True)],
                ids=["d64", "d64-causal", "d128", "d128-causal"])
def built(request):
    return _build(*request.param)


def test_pipelined_attention_runs_on_the_emulator_against_numpy(built):
    shape, plan, f, src = built
    assert plan.applied and plan.annotation.async_stages
    assert plan.annotation.num_stages > -(-N // shape.block_n)  # more stages than tiles: guarded prologue
    assert re.search(r"cp\.async\.(ca|cg)\.shared\.global", src) and "cp.async.wait_group" in src
    q, k, v, o = _inputs(shape, N)
    report = E.run(f, q, k, v, o, interleavings=2)
    assert report.ok, str(report)
    assert report.launches == 1 and report.instructions > 0
    want = attention_reference(q, k, v, shape.causal)
    assert np.abs(o.astype(np.float32) - want).max() < 2e-2
    assert np.count_nonzero(o) > o.size // 2  # both CTAs wrote their rows


def test_a_plain_tvm_compile_of_the_plan_is_refused_or_right(built):
    """What a user who skips tvm_twill.build gets: TVM's default pipeline under ``tirx.use_async_copy``.
    Where TVM would miscount (or leave symbolic) the waits, the plan keeps its async stages out of TVM's key
    (``transforms.wait_counts``), so the default build has synchronous copies and computes the same; else TVM
    refuses the module.  Never a kernel with a wrong wait."""
    shape, plan, _, _ = built
    mod = _MODULES[(shape.head_dim, shape.causal)]
    try:
        with tvm.transform.PassContext(config={"tirx.use_async_copy": 1}):
            f = tvm.compile(mod, target=tvm.target.Target({"kind": "cuda", "arch": "sm_80"}))
    except (ValueError, RuntimeError) as err:  # TVM refuses it: loud, not wrong
        assert not plan.tvm_waits, err
        return
    src = f.mod.imports[0].inspect_source()
    assert plan.tvm_waits and "cp.async" not in src  # the guarded copies stay synchronous
    q, k, v, o = _inputs(shape, N)
    report = E.run(f, q, k, v, o, interleavings=2)
    assert report.ok, str(report)
    assert np.abs(o.astype(np.float32) - attention_reference(q, k, v, shape.causal)).max() < 2e-2


def test_pipelined_attention_has_no_spills(built):
    _, _, _, src = built
    lines = ptxas_report(src, "sm_80")
    assert lines is not None
    spills = [ln for ln in lines if "spill" in ln]
    assert spills and all("0 bytes spill stores, 0 bytes spill loads" in ln for ln in spills), lines


def test_a_missing_async_wait_is_caught():
    shape, _, f, src = _build(64, False)
    broken = re.sub(r"cp\.async\.wait_group \d+;", "", src)
    assert broken != src
    q, k, v, o = _inputs(shape, N)
    report = E.run(f, q, k, v, o, source=broken)
    assert not report.ok
    assert any(type(x).__name__ == "AsyncReadBeforeWait" for x in report.findings), str(report)


def test_ptx_local_depot_is_a_local_variable():
    # the SIMT kernel keeps arrays in local memory: nvcc declares `.local ... __local_depot0[...]`, which the
    # PTX parser once skipped as a `.loc` line (then `mov.u64 %SPL, __local_depot0` failed to load)
    ptx = """
.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 p)
{
\t.local .align 16 .b8 \t__local_depot0[64];
\t.reg .b64 %SPL;
\t.loc 1 3 0
\tmov.u64 %SPL, __local_depot0;
\tret;
}
"""
    kernel = parse(ptx).kernels["k"]
    assert [(v.name, v.space, v.size, v.align) for v in kernel.variables] == [("__local_depot0", "local", 64, 16)]
    assert [i.opcode for i in kernel.instructions] == ["mov.u64", "ret"]
    assert E.load_ptx(ptx) == ["k"]
