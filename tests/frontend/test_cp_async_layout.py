"""A copy is cp.async-capable only when TVM lowers it to a correct cp.async (``frontend/cp_async.py``).

TVM's InjectPTXAsyncCopy copies ``lanes`` consecutive elements from the first element of a vectorized load,
whatever its stride.  The loop below has three vectorized global->shared copies of 4 floats (16 bytes):
``copy0`` transposes (it walks down a column of X0: stride 32), ``copy1`` reads a row (contiguous, aligned),
``copy2`` reads a row one element off a multiple of 4 (misaligned for a 16-byte cp.async).  Only copy1 may be
asynchronous; the plan says why the others stay synchronous, the CUDA has no cp.async reading X0 or X2, and the
planned loop computes what the loop computes on the CPU (llvm).
"""
import re

import pytest

tvm = pytest.importorskip("tvm")

import tvm_twill  # noqa: E402
from tvm_twill.api import auto_pipeline  # noqa: E402
from tvm_twill.frontend import extract_loop  # noqa: E402

SRC = """
@T.prim_func(s_tir=True)
def f(X0: T.Buffer((128, 32), "float32"), X1: T.Buffer((32, 128), "float32"),
      X2: T.Buffer((32, 132), "float32"), C: T.Buffer((32, 8, 16), "float32")):
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        for i in T.serial(8):
            with T.sblock("body"):
                S0 = T.sblock_alloc_buffer((32, 16), "float32", scope="shared")
                S1 = T.sblock_alloc_buffer((32, 16), "float32", scope="shared")
                S2 = T.sblock_alloc_buffer((32, 16), "float32", scope="shared")
                for k0 in range(4):
                    for v in T.vectorized(4):
                        with T.sblock("copy0"):
                            S0[tx, k0 * 4 + v] = X0[i * 16 + k0 * 4 + v, tx]
                for k0 in range(4):
                    for v in T.vectorized(4):
                        with T.sblock("copy1"):
                            S1[tx, k0 * 4 + v] = X1[tx, i * 16 + k0 * 4 + v]
                for k0 in range(4):
                    for v in T.vectorized(4):
                        with T.sblock("copy2"):
                            S2[tx, k0 * 4 + v] = X2[tx, i * 16 + k0 * 4 + v + 1]
                for k in range(16):
                    with T.sblock("use"):
                        C[tx, i, k] = (S0[tx, k] + S1[tx, k] + S2[tx, k]) * T.float32(2)
"""


def _sch():
    return tvm.s_tir.Schedule(tvm.script.from_source(SRC))


def test_transposing_and_misaligned_copies_are_not_cp_async_capable():
    ex = extract_loop(_sch(), "i", "sm_80")
    by = {s.name: s for s in ex.stmts}
    assert [by[f"copy{k}"].kind for k in range(3)] == ["copy"] * 3
    assert [by[f"copy{k}"].async_capable for k in range(3)] == [False, True, False]
    assert by["copy1"].not_async is None
    assert "global source X0 with a stride of 32 elements (not contiguous)" in by["copy0"].not_async
    assert "X2 may start off a multiple of 4 elements" in by["copy2"].not_async


def test_the_plan_says_why_and_the_cuda_has_no_wrong_cp_async():
    sch = _sch()
    plan = auto_pipeline(sch, "i", "sm_80")
    sync = dict(plan.sync_copies)
    assert "stride of 32 elements" in sync["copy0"] and "start off a multiple of 4" in sync["copy2"]
    assert "copy0" not in plan.async_copies and "copy2" not in plan.async_copies
    text = plan.explain()
    for name in ("copy0", "copy2"):
        assert f"{name} stays a synchronous copy: {sync[name]}" in text
    src = tvm_twill.build(sch.mod, "sm_80", plan).mod.imports[0].inspect_source()
    calls = re.findall(r"\bptx_cp_async\w*\(([^;]*)\);", src)
    assert not any(re.search(r"\bX[02]_ptr\b", c) for c in calls), calls
    assert bool(calls) == ("copy1" in plan.async_copies)
    check = plan.check_on_cpu()
    assert check.ok, check


TRANSPOSING_ONLY = """
@T.prim_func(s_tir=True)
def f(X0: T.Buffer((128, 32), "float32"), C: T.Buffer((32, 8, 16), "float32")):
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        for i in T.serial(8):
            with T.sblock("body"):
                S0 = T.sblock_alloc_buffer((32, 16), "float32", scope="shared")
                for k0 in range(4):
                    for v in T.vectorized(4):
                        with T.sblock("copy0"):
                            S0[tx, k0 * 4 + v] = X0[i * 16 + k0 * 4 + v, tx]
                for k in range(16):
                    with T.sblock("use"):
                        C[tx, i, k] = S0[tx, k] * T.float32(2)
"""


def test_a_transposing_copy_is_no_producer_copy_for_warp_specialization():
    sch = tvm.s_tir.Schedule(tvm.script.from_source(TRANSPOSING_ONLY))
    with pytest.raises(tvm_twill.UnsupportedLoopError,
                       match=r"none a producer warp's cp.async can run \('copy0': its 4-lane vectors read global "
                             r"source X0 with a stride of 32 elements"):
        auto_pipeline(sch, "i", "sm_80", warp_specialize=True)
