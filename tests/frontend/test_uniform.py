"""frontend.uniform: which values are the same in every thread of a block (what a barrier's guard needs).

Uniform: parameters, block indices, a global buffer the kernel never writes, a local buffer every thread
stores the same values to (a value computed from uniform ones, at a uniform index, under uniform control; a
fixpoint over such buffers).  Not uniform: a thread index and what is computed from it, a global buffer the
kernel writes, a local buffer stored under a thread-dependent condition, and a buffer passed to a call (an
intrinsic may write it).  Checked on the guard rewrite that relies on it (``uniform_guard_loops``: a uniform
guard around shared memory becomes a 0-or-1-trip loop, any other stays an ``if``) and on the front-end's
refusal (a barrier loop whose trip count is read per thread from memory is refused: a plan of it
written anyway, its barriers stay under ``if``s no analysis shows uniform; the same loop with a uniform count
is planned and its guards become loops).
"""
import re

import pytest

tvm = pytest.importorskip("tvm")

from tvm.script import tirx as T  # noqa: E402

from tvm_twill.errors import UnsupportedLoopError  # noqa: E402
from tvm_twill.api import auto_pipeline  # noqa: E402
from tvm_twill.frontend import extract_loop  # noqa: E402
from tvm_twill.frontend.ir import tirx, tvm_ffi  # noqa: E402
from tvm_twill.frontend.loops import resolve_loop  # noqa: E402
from tvm_twill.frontend.lowering import compile_cuda  # noqa: E402
from tvm_twill.model.pipeline import PipelineAnnotation  # noqa: E402
from tvm_twill.transforms import apply_annotation  # noqa: E402
from tvm_twill.transforms.pipelines import SWP_PIPELINE, register  # noqa: E402
from tvm_twill.transforms.swp_lowering import uniform_guard_loops  # noqa: E402

register(SWP_PIPELINE)


def _guard_loops(func) -> int:
    out = []
    tvm_ffi.structural_walk(uniform_guard_loops(func).body,
                            [(tirx.For, lambda lp: out.append(lp) if lp.loop_var.name == "guard" else None)])
    return len(out)


def _kernel(kind: str):
    @T.prim_func
    def f(a: T.handle, b: T.handle, n: T.int32):
        A = T.match_buffer(a, (128,), "float32")
        B = T.match_buffer(b, (4,), "int32")
        bx = T.launch_thread("blockIdx.x", 2)
        tx = T.launch_thread("threadIdx.x", 32)
        S = T.alloc_buffer((32,), "float32", scope="shared")
        L = T.alloc_buffer((1,), "int32", scope="local")
        M = T.alloc_buffer((1,), "int32", scope="local")
        if kind == "block":
            L[0] = bx * 32 + n
        elif kind == "readonly":
            L[0] = B[bx]
        elif kind == "written_global":
            L[0] = T.Cast("int32", A[bx])
        elif kind == "thread_value":
            L[0] = tx
        elif kind == "thread_control":
            L[0] = n
            if tx == 0:
                L[0] = n + 1
        elif kind == "escaped":
            L[0] = n
            T.evaluate(T.call_extern("int32", "touch", T.address_of(L[0])))
        elif kind == "fixpoint":
            L[0] = B[0]
            M[0] = 0
            for k in range(4):
                M[0] = M[0] + L[0]
            L[0] = M[0]
        elif kind == "fixpoint_varying":
            M[0] = tx
            L[0] = B[0]
            for k in range(4):
                L[0] = L[0] + M[0]
        for j in range(4):
            if j * 32 < L[0]:
                S[tx] = A[j * 32 + tx]
            A[j * 32 + tx] = S[(tx + 1) % 32]
    return f


@pytest.mark.parametrize("kind,loops", [("block", 1), ("readonly", 1), ("fixpoint", 1), ("written_global", 0),
                                        ("thread_value", 0), ("thread_control", 0), ("escaped", 0),
                                        ("fixpoint_varying", 0)])
def test_a_guard_read_from_a_local_buffer_is_uniform_only_when_every_thread_stores_the_same(kind, loops):
    assert _guard_loops(_kernel(kind)) == loops


def _trips_kernel(per_thread: bool):
    @T.prim_func(s_tir=True)
    def f(a: T.handle, c: T.handle, lens: T.handle):
        A = T.match_buffer(a, (128,), "float32")
        C = T.match_buffer(c, (32,), "float32")
        L = T.match_buffer(lens, (32,), "int32")
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            with T.sblock("kernel"):
                vtx = T.axis.remap("S", [tx])
                T.reads()
                T.writes()
                S = T.sblock_alloc_buffer((32,), "float32", scope="shared")
                n = T.sblock_alloc_buffer((1,), "int32", scope="local")
                acc = T.sblock_alloc_buffer((1,), "float32", scope="local")
                if per_thread:
                    n[0] = L[vtx]
                else:
                    n[0] = L[0]
                acc[0] = T.float32(0)
                for i in range(n[0]):
                    with T.sblock("ld"):
                        S[vtx] = A[i * 32 + vtx]
                    T.tvm_storage_sync("shared")
                    with T.sblock("use"):
                        acc[0] = acc[0] + S[(vtx + 1) % 32]
                    T.tvm_storage_sync("shared")
                C[vtx] = acc[0]
    return f


def _forced(func):
    """The loop with a legal two-stage plan (the load a stage ahead) written on it."""
    sch = tvm.s_tir.Schedule(func)
    apply_annotation(sch, resolve_loop(sch, "i").rv, PipelineAnnotation((0, 1, 1, 1), (0, 1, 2, 3), ()))
    return sch


def _guards(sch):
    """(guard loops, ifs around a barrier) in the CUDA of ``sch`` compiled with tvm_twill_swp."""
    _, src = compile_cuda(sch, "sm_80", tir_pipeline=SWP_PIPELINE)
    return src.count("for (int guard"), len(re.findall(r"if \([^\n]*\) \{\s*__syncthreads\(\);", src))


def test_a_barrier_loop_whose_trip_count_is_not_shown_uniform_is_refused():
    func = _trips_kernel(True)
    ex = extract_loop(tvm.s_tir.Schedule(func), "i", "sm_80")
    assert ex.refusal.startswith("loop 'i': statement 1 is an explicit barrier (tvm_storage_sync) and the trip "
                                 "count 'n[0]' reads memory or a thread index")
    with pytest.raises(UnsupportedLoopError, match="cannot be shown the same in every thread of the block"):
        auto_pipeline(tvm.s_tir.Schedule(func), "i", "sm_80", time_limit=30)
    # a plan written anyway leaves each pipelined barrier under an if no analysis shows every thread takes alike
    loops, ifs = _guards(_forced(func))
    assert loops == 0 and ifs >= 1
    # the same loop with a count every thread reads alike: planned; the guards become 0-or-1-trip loops
    uniform = _trips_kernel(False)
    assert extract_loop(tvm.s_tir.Schedule(uniform), "i", "sm_80").refusal is None
    loops, _ = _guards(_forced(uniform))
    assert loops >= 1
