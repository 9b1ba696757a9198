"""Schedule -> annotations on real TVM loops, in TVM's own before/expected style (needs TVM)."""
import pytest

tvm = pytest.importorskip("tvm")
from tvm.script import tirx as T  # noqa: E402

from tvm_twill.frontend import extract_loop, inject_pipeline  # noqa: E402
from tvm_twill.frontend import read_annotation  # noqa: E402
from tvm_twill.errors import InputError  # noqa: E402
from tvm_twill.model.pipeline import STAGE, PipelineAnnotation  # noqa: E402
from tvm_twill.transforms import apply_annotation, async_waits, statement_deps  # noqa: E402


@T.prim_func(s_tir=True)
def three_stage_before(A: T.Buffer((16, 16), "float32"), D: T.Buffer((16, 16), "float32")):
    for tx in T.thread_binding(0, 16, thread="threadIdx.x"):
        for i in T.serial(0, 16):
            with T.sblock("compute"):
                T.reads(A[tx, i])
                T.writes(D[tx, i])
                B = T.sblock_alloc_buffer((16, 1), dtype="float32", scope="shared")
                C = T.sblock_alloc_buffer((16, 1), dtype="float32", scope="shared")
                with T.sblock():
                    T.reads(A[tx, i])
                    T.writes(B[tx, 0])
                    B[tx, 0] = A[tx, i] * T.float32(2)
                with T.sblock():
                    T.reads(B[tx, 0])
                    T.writes(C[tx, 0])
                    C[tx, 0] = B[tx, 0] + T.float32(2)
                with T.sblock():
                    T.reads(C[tx, 0])
                    T.writes(D[tx, i])
                    D[tx, i] = C[tx, 0] + T.float32(1)


@T.prim_func(s_tir=True)
def three_stage_expected(A: T.Buffer((16, 16), "float32"), D: T.Buffer((16, 16), "float32")):
    for tx in T.thread_binding(0, 16, thread="threadIdx.x"):
        for i in T.serial(0, 16, annotations={"software_pipeline_stage": [0, 1, 2],
                                              "software_pipeline_order": [0, 2, 1]}):
            with T.sblock("compute"):
                T.reads(A[tx, i])
                T.writes(D[tx, i])
                B = T.sblock_alloc_buffer((16, 1), dtype="float32", scope="shared")
                C = T.sblock_alloc_buffer((16, 1), dtype="float32", scope="shared")
                with T.sblock():
                    T.reads(A[tx, i])
                    T.writes(B[tx, 0])
                    B[tx, 0] = A[tx, i] * T.float32(2)
                with T.sblock():
                    T.reads(B[tx, 0])
                    T.writes(C[tx, 0])
                    C[tx, 0] = B[tx, 0] + T.float32(2)
                with T.sblock():
                    T.reads(C[tx, 0])
                    T.writes(D[tx, i])
                    D[tx, i] = C[tx, 0] + T.float32(1)


def _assert_same(actual, expected):
    tvm.ir.assert_structural_equal(actual.without_attr("global_symbol"), expected.without_attr("global_symbol"))


def _loop_i(sch):
    return sch.get_loops(sch.get_sblock("compute"))[1]


def test_apply_annotation_before_expected():
    sch = tvm.s_tir.Schedule(three_stage_before)
    apply_annotation(sch, _loop_i(sch), PipelineAnnotation((0, 1, 2), (0, 2, 1)))
    _assert_same(sch.mod["main"], three_stage_expected)


def test_apply_annotation_replaces_and_drops_async_key():
    sch = tvm.s_tir.Schedule(three_stage_before)
    apply_annotation(sch, _loop_i(sch), PipelineAnnotation((0, 0, 1), (0, 1, 2), (0,)))
    assert read_annotation(sch.get(_loop_i(sch))).async_stages == (0,)
    apply_annotation(sch, _loop_i(sch), PipelineAnnotation((0, 1, 2), (0, 2, 1)))
    _assert_same(sch.mod["main"], three_stage_expected)


def test_read_annotation():
    assert read_annotation(three_stage_expected.body.block.body.body) == PipelineAnnotation((0, 1, 2), (0, 2, 1))
    sch = tvm.s_tir.Schedule(three_stage_before)
    assert read_annotation(sch.get(_loop_i(sch))) is None


def test_read_annotation_needs_both_keys():
    sch = tvm.s_tir.Schedule(three_stage_before)
    sch.annotate(_loop_i(sch), STAGE, [0, 1, 2])
    with pytest.raises(InputError, match="add 'software_pipeline_order'"):
        read_annotation(sch.get(_loop_i(sch)))


@T.prim_func(s_tir=True)
def async_copy_loop(A: T.Buffer((16, 64), "float32"), C: T.Buffer((16, 64), "float32")):
    for tx in T.thread_binding(0, 16, thread="threadIdx.x"):
        for i in T.serial(0, 64):
            with T.sblock("compute"):
                T.reads(A[tx, i])
                T.writes(C[tx, i])
                B = T.sblock_alloc_buffer((16, 1), dtype="float32", scope="shared")
                with T.sblock("copy"):
                    T.reads(A[tx, i])
                    T.writes(B[tx, 0])
                    B[tx, 0] = A[tx, i]
                with T.sblock("use"):
                    T.reads(B[tx, 0])
                    T.writes(C[tx, i])
                    C[tx, i] = B[tx, 0] + T.float32(1)


def _counts(waits, part):
    return [w.in_flight for w in waits if w.part == part]


def _tvm_wait_counts(mod):
    """async_wait_inflight_count values in TVM's pipelined IR, in program order, with the
    unrolled prologue/epilogue loops expanded (their counts are affine in the loop var,
    e.g. ``2 - i``); negative counts (waits TVM drops later) are left out."""
    out = []

    def visit(stmt, env):
        if isinstance(stmt, tvm.tirx.For) and stmt.kind == tvm.tirx.ForKind.UNROLLED:
            for k in range(int(stmt.extent)):
                visit(stmt.body, {**env, stmt.loop_var.name: k})
            return
        if isinstance(stmt, tvm.tirx.AttrStmt) and stmt.attr_key == "async_wait_inflight_count":
            out.append(int(eval(str(stmt.value), {}, dict(env))))  # an affine integer expression
        for c in _children(stmt):
            visit(c, env)

    visit(mod["main"].body, {})
    return [c for c in out if c >= 0]


def _children(stmt):
    if isinstance(stmt, tvm.tirx.SeqStmt):
        return list(stmt.seq)
    if isinstance(stmt, tvm.s_tir.SBlockRealize):
        return [stmt.block]
    body = getattr(stmt, "body", None)
    return [body] if isinstance(body, tvm.tirx.Stmt) else []


def test_tvm_wait_counts_match_independent_simulation():
    sch = tvm.s_tir.Schedule(async_copy_loop)
    ann = PipelineAnnotation((0, 2), (0, 1), (0,))
    apply_annotation(sch, _loop_i(sch), ann)
    ex = extract_loop(sch, _loop_i(sch), "sm_80")
    assert statement_deps(ex.graph) == [(0, 1, 0)]
    tvm_counts = _tvm_wait_counts(inject_pipeline(sch.mod))
    ours = async_waits(ann, ex.graph, ex.trip_count)
    assert [w.in_flight for w in ours] == [2, 1, 0]
    assert tvm_counts == [w.in_flight for w in ours]


@T.prim_func(s_tir=True)
def two_copy_loop(A: T.Buffer((16, 64), "float32"), B: T.Buffer((16, 64), "float32"),
                  C: T.Buffer((16, 64), "float32")):
    for tx in T.thread_binding(0, 16, thread="threadIdx.x"):
        for i in T.serial(0, 64):
            with T.sblock("compute"):
                T.reads(A[tx, i], B[tx, i])
                T.writes(C[tx, i])
                AS = T.sblock_alloc_buffer((16, 1), dtype="float32", scope="shared")
                BS = T.sblock_alloc_buffer((16, 1), dtype="float32", scope="shared")
                with T.sblock("copy_a"):
                    T.reads(A[tx, i])
                    T.writes(AS[tx, 0])
                    AS[tx, 0] = A[tx, i]
                with T.sblock("copy_b"):
                    T.reads(B[tx, i])
                    T.writes(BS[tx, 0])
                    BS[tx, 0] = B[tx, i]
                with T.sblock("use"):
                    T.reads(AS[tx, 0], BS[tx, 0])
                    T.writes(C[tx, i])
                    C[tx, i] = AS[tx, 0] + BS[tx, 0]


def test_contiguous_copies_match_tvm():
    sch = tvm.s_tir.Schedule(two_copy_loop)
    ann = PipelineAnnotation((0, 0, 3), (0, 1, 2), (0,))
    apply_annotation(sch, _loop_i(sch), ann)
    ex = extract_loop(sch, _loop_i(sch), "sm_80")
    ours = [w.in_flight for w in async_waits(ann, ex.graph, ex.trip_count)]
    assert ours == [3, 2, 1, 0]
    assert _tvm_wait_counts(inject_pipeline(sch.mod)) == ours


def test_interleaved_copies_expose_tvm_body_count():
    """TVM 0.27 limitation: with the copies interleaved around their consumer (the RFC example),
    the prologue commits both copies as one group but the body count assumes two groups per
    iteration: TVM emits wait_group 5 where only 3 is safe in the first body iteration (and
    over-waits in the epilogue).  auto_pipeline never emits this order (copies stay contiguous)."""
    sch = tvm.s_tir.Schedule(two_copy_loop)
    ann = PipelineAnnotation((0, 0, 3), (0, 2, 1), (0,))
    apply_annotation(sch, _loop_i(sch), ann)
    ex = extract_loop(sch, _loop_i(sch), "sm_80")
    ours = async_waits(ann, ex.graph, ex.trip_count)
    tvm_counts = _tvm_wait_counts(inject_pipeline(sch.mod))
    assert _counts(ours, "body") == [3] and tvm_counts[0] == 5
    assert _counts(ours, "epilogue") == [4, 2, 0] and tvm_counts[1:] == [2, 1, 0]
