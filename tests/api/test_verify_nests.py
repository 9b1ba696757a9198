"""``check_on_cpu`` finds a loop whose blocks have no name (TVM's own pipeline tests write ``with T.sblock():``),
and on a nest applies only what ``auto_pipeline`` applied (an inner plan left alone stays unannotated)."""
import pytest

tvm = pytest.importorskip("tvm")
from tvm.script import tirx as T  # noqa: E402

import tvm_twill  # noqa: E402
from tvm_twill.frontend import read_annotation  # noqa: E402


@T.prim_func(s_tir=True)
def unnamed(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    for tx in T.thread_binding(0, 16, thread="threadIdx.x"):
        for i in T.serial(0, 16):
            with T.sblock():
                T.reads(A[tx, i])
                T.writes(C[tx, i])
                B = T.sblock_alloc_buffer((16, 1), dtype="float32", scope="shared")
                with T.sblock():
                    T.reads(A[tx, i])
                    T.writes(B[tx, 0])
                    B[tx, 0] = A[tx, i] * T.float32(2)
                with T.sblock():
                    T.reads(B[tx, 0])
                    T.writes(C[tx, i])
                    C[tx, i] = B[tx, 0] + T.float32(1)


@T.prim_func(s_tir=True)
def nest(A: T.Buffer((16, 32), "float32"), C: T.Buffer((16, 32), "float32")):
    """An outer loop whose shared tile a one-stage inner loop reads: the inner plan is left alone."""
    for tx in T.thread_binding(0, 16, thread="threadIdx.x"):
        for k in T.serial(0, 8):
            with T.sblock("outer"):
                S = T.sblock_alloc_buffer((16, 4), dtype="float32", scope="shared")
                for j in range(4):
                    with T.sblock("copy"):
                        S[tx, j] = A[tx, k * 4 + j]
                for j2 in T.serial(0, 4):
                    with T.sblock("inner"):
                        L = T.sblock_alloc_buffer((1,), dtype="float32", scope="local")
                        with T.sblock("scale"):
                            L[0] = S[tx, j2] * T.float32(2)
                        with T.sblock("store"):
                            C[tx, k * 4 + j2] = L[0] + T.float32(1)


def test_a_loop_of_unnamed_blocks_checks_on_the_cpu():
    sch = tvm.s_tir.Schedule(unnamed)
    (blk,) = sch.get_child_blocks(sch.get_sblock("root"))
    loop = sch.get_loops(blk)[1]
    plan = tvm_twill.auto_pipeline(sch, loop, "sm_80")
    assert plan.applied and plan.annotation.num_stages > 1
    result = plan.check_on_cpu()
    assert result.ok and result.loop == "i" and result.elements == 2 * 16 * 16, str(result)


def test_a_nest_whose_inner_plan_was_not_applied_checks_on_the_cpu():
    sch = tvm.s_tir.Schedule(nest)
    plan = tvm_twill.auto_pipeline(sch, ["k", "j2"], "sm_80")
    (inner,) = plan.inner
    assert plan.applied and not inner.applied and "one stage" in inner.outcome
    assert plan.extraction.names == ["copy", "j2"]  # the outer plan counts the inner loop as one statement
    assert read_annotation(sch.get(sch.get_loops(sch.get_sblock("inner"))[-1])) is None
    result = plan.check_on_cpu()
    assert result.ok and result.loop == "k", str(result)
