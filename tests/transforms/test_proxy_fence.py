"""``fence.proxy.async.shared::cta`` where generic-proxy writes to shared memory feed wgmma (async proxy).

For every kernel kind the project compiles, the generated CUDA is read statement by statement (the kernel's
body in source order): a fence stands after the last generic write to shared memory (a store, or the
``cp.async.wait_group`` that completes this thread's copies) and right before the barrier that precedes a
wgmma; a warp-specialized ring filled by ``cp.async`` is fenced by its consumers after the full-slot wait,
before the wgmma.  Kernels whose shared memory only TMA writes, and kernels without wgmma, have none.
nvcc compiles each, and ptxas's figures are those of the same kernel without the fences.
"""
import re
import shutil

import pytest

tvm = pytest.importorskip("tvm")

import tvm_twill  # noqa: E402
from tvm_twill.frontend import compile_cuda  # noqa: E402
from tvm_twill.frontend.ir import T, tirx  # noqa: E402
from tvm_twill.transforms.proxy_fence import add_proxy_fences, is_proxy_fence  # noqa: E402
from tvm_twill.compiler.sass import ptxas_report  # noqa: E402
from tvm_twill.transforms.pipelines import WS_PIPELINE, register  # noqa: E402
from tvm_twill.workloads import tensorcore_gemm, wgmma_gemm  # noqa: E402

N = 512
FENCE = "tvm_builtin_ptx_fence_proxy_proxy_async_shared__cta();"
SYNC = "__syncthreads();"
WGMMA = re.compile(r"tvm_builtin_ptx_wgmma_f16_ss_mma_async")
STORE = re.compile(r"^\*\(uint\d?\*\)\(\(\(half\*\)buf_dyn_shmem_ptr\)")   # a generic 16-byte store to shared
CP_WAIT = re.compile(r"tvm_builtin_ptx_cp_async_wait_group")
FULL_WAIT = re.compile(r"mbarrier_(try_)?wait\(\(&\(ws_full_ptr")


def _body(src):
    """The kernel's statements in source order (one per line, stripped), from its opening brace on."""
    start = src.index("{", src.index('extern "C" __global__ void', src.index('extern "C" __global__ void') + 1))
    return [ln.strip() for ln in src[start:].splitlines() if ln.strip()]


def _without_fences(src):
    return "\n".join(ln for ln in src.splitlines() if ln.strip() != FENCE)


def _ptxas(src):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    return [ln for ln in ptxas_report(src, "sm_90a") if "registers" in ln]


def _fenced_barriers(lines):
    """For each barrier: (is it followed by a wgmma before the next barrier, is it right after a fence)."""
    out = []
    for i, ln in enumerate(lines):
        if ln == SYNC:
            nxt = next((j for j in range(i + 1, len(lines)) if lines[j] == SYNC), len(lines))
            out.append((any(WGMMA.search(x) for x in lines[i + 1:nxt]), lines[i - 1] == FENCE))
    return out


def _swp_source():
    sch, k0, _ = wgmma_gemm(N)
    plan = tvm_twill.auto_pipeline(sch, k0, "sm_90a")
    assert plan.applied and plan.annotation.async_stages and plan.tir_pipeline == WS_PIPELINE
    return compile_cuda(sch, "sm_90a", tir_pipeline=plan.tir_pipeline)[1]


def test_plain_wgmma_kernel_fences_its_stores_before_the_barrier_before_the_wgmma():
    # bench/gemm_gpu.py's wgmma_plain: st.shared of both tiles, __syncthreads, wgmma from descriptors
    sch, _, _ = wgmma_gemm(N)
    src = compile_cuda(sch, "sm_90a", tir_pipeline=register(WS_PIPELINE))[1]
    lines = _body(src)
    (f,) = [i for i, ln in enumerate(lines) if ln == FENCE]   # one, in the k loop
    last_store = max(i for i, ln in enumerate(lines[:f]) if STORE.match(ln))
    first_wgmma = next(i for i, ln in enumerate(lines) if WGMMA.search(ln))
    assert last_store < f and lines[f + 1] == SYNC and f + 1 < first_wgmma
    assert not any(STORE.match(ln) for ln in lines[f:first_wgmma])   # nothing written after the fence
    assert _fenced_barriers(lines) == [(False, False), (True, True)]   # the loop head's barrier needs none
    assert _ptxas(src) == _ptxas(_without_fences(src))


def test_software_pipelined_wgmma_kernel_fences_after_each_cp_async_wait():
    src = _swp_source()
    lines = _body(src)
    barriers = _fenced_barriers(lines)
    assert barriers and all(before_wgmma == fenced for before_wgmma, fenced in barriers)
    fences = [i for i, ln in enumerate(lines) if ln == FENCE]
    waits = [i for i, ln in enumerate(lines) if CP_WAIT.search(ln)]   # the loop's and each epilogue stage's
    assert len(fences) == sum(w for w, _ in barriers) == len(waits) > 1
    for f in fences:   # this thread's copies completed, then the fence, then the barrier
        assert CP_WAIT.search(lines[f - 1]) and lines[f + 1] == SYNC
    assert _ptxas(src) == _ptxas(_without_fences(src))
    for arch in ("sm_80", "sm_90a"):   # mma.sync reads shared memory with ldmatrix, generic proxy: no fence
        sch, k0, k1 = tensorcore_gemm(1024)
        plan = tvm_twill.auto_pipeline(sch, [k0, k1], arch)
        assert plan.tir_pipeline is None and FENCE not in compile_cuda(sch, arch, tir_pipeline=WS_PIPELINE)[1]


def test_warp_specialized_cp_async_ring_is_fenced_by_its_consumers():
    sch, k0, _ = wgmma_gemm(N, vector=4)   # 8-byte vectors: the sm_90a producer falls back to cp.async
    plan = tvm_twill.auto_pipeline(sch, k0, "sm_90a", warp_specialize=True)
    assert plan.warp_specialization.facts.copy == "cp.async"
    src = compile_cuda(sch, "sm_90a", tir_pipeline=plan.tir_pipeline)[1]
    lines = _body(src)
    (f,) = [i for i, ln in enumerate(lines) if ln == FENCE]
    assert FULL_WAIT.search(lines[f - 1])
    first_wgmma = next(i for i, ln in enumerate(lines) if WGMMA.search(ln))
    assert f < first_wgmma and SYNC not in lines[f:first_wgmma]
    assert _ptxas(src) == _ptxas(_without_fences(src))
    sch, k0, _ = wgmma_gemm(N)   # 16-byte vectors: TMA fills the rings, async proxy on both sides: no fence
    plan = tvm_twill.auto_pipeline(sch, k0, "sm_90a", warp_specialize=True)
    assert plan.warp_specialization.facts.copy == "bulk"
    assert FENCE not in compile_cuda(sch, "sm_90a", tir_pipeline=plan.tir_pipeline)[1]


def _fences_in(stmt, out):
    if is_proxy_fence(stmt):
        out.append(stmt)
    for c in getattr(stmt, "seq", None) or [getattr(stmt, n, None) for n in ("body", "then_case", "else_case")]:
        if isinstance(c, tirx.Stmt):
            _fences_in(c, out)
    return out


def test_a_barrier_whose_wgmma_comes_round_the_loop_is_fenced():
    """Placement on hand-built TIR: the wgmma at the top of the loop body reads what the stores before the
    barrier at its end wrote, one iteration later (the back edge); a barrier followed by another barrier
    first is not fenced."""
    smem = tirx.decl_buffer((64,), "float16", name="S", scope="shared.dyn")
    i = tirx.Var("i", "int32")
    mma = tirx.Evaluate(tvm.tirx.call_intrin("handle", "tirx.ptx.wgmma_f16_ss", 0))
    sync = tirx.Evaluate(T.tvm_storage_sync("shared"))
    store = tirx.BufferStore(smem, tvm.tirx.const(1.0, "float16"), [i])
    loop = tirx.For(i, 0, 4, tirx.ForKind.SERIAL, tirx.SeqStmt([mma, store, sync]))
    body = tirx.SeqStmt([tirx.AllocBuffer(smem), sync, store, sync, loop])
    out = add_proxy_fences(tirx.PrimFunc([], body)).body
    seq = list(out.seq)
    assert [is_proxy_fence(s) for s in seq[:5]] == [False, False, False, True, False]   # only the 2nd barrier
    assert [is_proxy_fence(s) for s in seq[5].body.seq] == [False, False, True, False]  # round the back edge
    assert len(_fences_in(out, [])) == 2
    no_mma = tirx.SeqStmt([tirx.AllocBuffer(smem), sync, tirx.For(i, 0, 4, tirx.ForKind.SERIAL,
                                                                  tirx.SeqStmt([store, sync]))])
    assert add_proxy_fences(tirx.PrimFunc([], no_mma)).body.same_as(no_mma)   # no wgmma: untouched
