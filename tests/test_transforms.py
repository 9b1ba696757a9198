"""Schedule -> annotations (tvm_twill.transforms): legality, async stages, in-flight counts.

The pure parts are tested with hand-written schedules (no solver, no TVM);
the TVM parts in TVM's own before/expected style.
"""
import pytest

from tvm_twill.errors import InputError
from tvm_twill.model import Edge, Graph, Op, make_schedule
from tvm_twill.transforms import (ASYNC_STAGES, ORDER, STAGE, Dependence, PipelineAnnotation,
                                  annotation_from_schedule, async_waits, legality_violations,
                                  select_async_stages)

# A three-statement GEMM-like body: copy A, copy B (async-capable), compute (accumulates).
DEPS3 = (Dependence(0, 2), Dependence(1, 2), Dependence(2, 2, 1))
ASYNC3 = (True, True, False)


def _graph3():
    return Graph("g3", ops=(Op("A", 1, "TMA", smem=1024), Op("B", 1, "TMA", smem=1024), Op("C", 2, "TC")),
                 edges=(Edge("A", "C", 5), Edge("B", "C", 5), Edge("C", "C", 2, 1)), normalize=False)


# -- PipelineAnnotation ----------------------------------------------------------
def test_annotation_dict_round_trip():
    ann = PipelineAnnotation((0, 0, 3), (0, 1, 2), (0,))
    assert ann.to_dict() == {STAGE: [0, 0, 3], ORDER: [0, 1, 2], ASYNC_STAGES: [0]}
    assert PipelineAnnotation.from_dict(ann.to_dict()) == ann
    assert ann.num_stages == 4
    assert ASYNC_STAGES not in PipelineAnnotation((0, 1), (0, 1)).to_dict()


def test_annotation_rejects_duplicate_orders():
    with pytest.raises(InputError, match="not a permutation"):
        PipelineAnnotation((0, 0), (0, 0))


def test_annotation_rejects_length_mismatch():
    with pytest.raises(InputError, match="2 stages but 3 orders"):
        PipelineAnnotation((0, 1), (0, 1, 2))


def test_annotation_rejects_negative_stage():
    with pytest.raises(InputError, match="stages must be >= 0"):
        PipelineAnnotation((0, -1), (0, 1))


# -- legality ------------------------------------------------------------------------
def test_tvm_hand_annotation_is_legal():
    assert legality_violations(PipelineAnnotation((0, 0, 3), (0, 1, 2)), DEPS3) == []


def test_consumer_in_earlier_stage_is_illegal():
    bad = legality_violations(PipelineAnnotation((1, 0, 0), (0, 1, 2)), DEPS3)
    assert len(bad) == 1 and "statement 2" in bad[0] and "later stage" in bad[0]


def test_same_stage_needs_later_order():
    bad = legality_violations(PipelineAnnotation((0, 0, 0), (2, 0, 1)), DEPS3)
    assert bad and "same stage and a later order" in bad[0]


def test_loop_carried_dependence_is_checked():
    # 1 writes what 0 reads in the next iteration: one stage later, 1 must come first in the body
    deps = (Dependence(0, 1), Dependence(1, 0, 1))
    assert legality_violations(PipelineAnnotation((0, 1), (1, 0)), deps) == []
    for bad_ann in (PipelineAnnotation((0, 1), (0, 1)), PipelineAnnotation((0, 2), (1, 0))):
        bad = legality_violations(bad_ann, deps)
        assert len(bad) == 1 and "1 iteration(s) earlier" in bad[0]


# -- async stages --------------------------------------------------------------------
def test_async_stage_is_the_copy_stage():
    assert select_async_stages((0, 0, 3), DEPS3, ASYNC3) == (0,)


def test_stage_with_a_non_copy_is_not_async():
    assert select_async_stages((0, 0, 0), DEPS3, ASYNC3) == ()


def test_only_one_async_stage_is_chosen():
    # copies at stages 0 and 1 both qualify; cp.async has one queue: keep the earliest
    assert select_async_stages((0, 1, 2), DEPS3, ASYNC3) == (0,)


def test_unconsumed_copy_is_not_async():
    assert select_async_stages((0, 1), (), (True, False)) == ()


# -- from a hand-written schedule -------------------------------------------------------
def test_annotation_from_schedule_stage_and_order():
    g = _graph3()
    sched = make_schedule(g, "h100", 2, {"A": 0, "B": 1, "C": 6}, {"A": 0, "B": 0, "C": 0},
                          {"A": 1, "B": 1, "C": 2})
    ann = annotation_from_schedule(sched, ["A", "B", "C"], DEPS3, ASYNC3)
    # C issues at 6 = stage 3, slot 0: first in the steady-state body (tie at slot 0 broken by time)
    assert ann == PipelineAnnotation((0, 0, 3), (0, 2, 1), (0,))
    assert legality_violations(ann, DEPS3) == []


def test_annotation_from_schedule_shifts_stages_to_zero():
    g = _graph3()
    sched = make_schedule(g, "h100", 2, {"A": 4, "B": 5, "C": 10}, {"A": 0, "B": 0, "C": 0},
                          {"A": 1, "B": 1, "C": 2})
    ann = annotation_from_schedule(sched, ["A", "B", "C"], DEPS3, ASYNC3)
    assert ann.stages == (0, 0, 3)


def test_annotation_from_schedule_without_async():
    g = _graph3()
    sched = make_schedule(g, "h100", 2, {"A": 0, "B": 1, "C": 6}, {"A": 0, "B": 0, "C": 0},
                          {"A": 1, "B": 1, "C": 2})
    assert annotation_from_schedule(sched, ["A", "B", "C"], DEPS3, ASYNC3, allow_async=False).async_stages == ()


def test_unlinked_statement_is_clamped_into_the_stage_range():
    g = Graph("g", ops=(Op("A", 1, "TMA"), Op("C", 1, "TC"), Op("nop", 0)), edges=(Edge("A", "C", 3),),
              normalize=False)
    sched = make_schedule(g, "h100", 1, {"A": 0, "C": 3, "nop": 9}, {"A": 0, "C": 0, "nop": 0},
                          {"A": 1, "C": 1, "nop": 0})
    ann = annotation_from_schedule(sched, ["A", "C", "nop"], (Dependence(0, 1),), (True, False, False))
    assert ann.stages == (0, 3, 3)


# -- in-flight counts (the RFC's producer_head - consumer_head rule) ---------------------------
def _counts(waits, part):
    return [w.in_flight for w in waits if w.part == part]


def test_waits_simple_gemm_annotation():
    # TVM test_async_pipelined_mma_gemm_simple asserts body 3 and epilogue "2 - k_0_0"
    waits = async_waits(PipelineAnnotation((0, 0, 3), (0, 1, 2), (0,)), DEPS3, 128)
    assert _counts(waits, "prologue") == []
    assert _counts(waits, "body") == [3]
    assert _counts(waits, "epilogue") == [2, 1, 0]
    assert all(w.before == 2 for w in waits)


def test_waits_nested_ideal_annotation():
    # TVM test_async_nested_pipeline_mma_gemm_ideal_annotation: prologue 2, body 2, epilogue "1 - k"
    # (its third epilogue iteration needs no wait: the previous wait(0) drained the queue)
    deps = (Dependence(0, 2), Dependence(0, 3), Dependence(1, 2), Dependence(1, 3), Dependence(2, 3),
            Dependence(2, 4), Dependence(3, 4), Dependence(4, 3, 1))
    waits = async_waits(PipelineAnnotation((0, 0, 2, 3, 3), (0, 1, 3, 2, 4), (0,)), deps, 128)
    assert _counts(waits, "prologue") == [2]
    assert _counts(waits, "body") == [2]
    assert [w.before for w in waits if w.part == "body"] == [3]  # before the first consumer in order
    assert _counts(waits, "epilogue") == [1, 0]


def test_waits_interleaved_producers_rfc_example():
    # The RFC's interleaved example: stages [0, 0, 3], order [0, 2, 1].  In steady state two
    # commit groups per iteration allow 5 in flight (the RFC's count), but the prologue commits
    # both copies as one group, so the first body iteration may only leave 3 in flight.
    waits = async_waits(PipelineAnnotation((0, 0, 3), (0, 2, 1), (0,)), DEPS3, 16)
    assert _counts(waits, "body") == [3]


def test_waits_consumer_in_producer_stage_waits_for_all():
    waits = async_waits(PipelineAnnotation((0, 0, 0), (0, 1, 2), (0,)), DEPS3, 8)
    assert _counts(waits, "body") == [0]


def test_waits_short_loop():
    # trip count 2 < stage 3: the body is empty, everything is prologue/epilogue
    waits = async_waits(PipelineAnnotation((0, 0, 3), (0, 1, 2), (0,)), DEPS3, 2)
    assert _counts(waits, "body") == []
    assert [w.in_flight for w in waits] == [1, 0]


# -- TVM: before/expected and TVM's own wait counts -------------------------------------------
tvm = pytest.importorskip("tvm")
from tvm.script import tirx as T  # noqa: E402

from tvm_twill.frontend import extract_loop, inject_pipeline  # noqa: E402
from tvm_twill.transforms import apply_annotation, read_annotation  # noqa: E402


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
    assert ex.deps == (Dependence(0, 1),)
    tvm_counts = _tvm_wait_counts(inject_pipeline(sch.mod))
    ours = async_waits(ann, ex.deps, ex.trip_count)
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
    ours = [w.in_flight for w in async_waits(ann, ex.deps, ex.trip_count)]
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
    ours = async_waits(ann, ex.deps, ex.trip_count)
    tvm_counts = _tvm_wait_counts(inject_pipeline(sch.mod))
    assert _counts(ours, "body") == [3] and tvm_counts[0] == 5
    assert _counts(ours, "epilogue") == [4, 2, 0] and tvm_counts[1:] == [2, 1, 0]
