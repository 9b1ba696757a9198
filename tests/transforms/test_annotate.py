"""Schedule -> annotations (tvm_twill.transforms), the pure parts: legality, async stages, in-flight counts.

Hand-written graphs and schedules; no solver, no TVM (the TVM side is test_transforms_tvm.py).
"""
import pytest

from tvm_twill.errors import InputError
from tvm_twill.model import Edge, Graph, Op, make_schedule
from tvm_twill.model.pipeline import ASYNC_STAGES, ORDER, STAGE, PipelineAnnotation
from tvm_twill.transforms import (annotation_from_schedule, async_copies_first, async_copies_lead,
                                  async_stages_contiguous, async_waits, grouped_async_order, legality_violations,
                                  select_async_stages, wait_count_caveat)


def stmt_graph(n, deps):
    """A graph of n statements s0..s{n-1} with edges (src, dst, distance): the statement-level dependences."""
    return Graph("stmts", ops=tuple(Op(f"s{i}", 1) for i in range(n)),
                 edges=tuple(Edge(f"s{a}", f"s{b}", 1, d) for a, b, d in deps), normalize=False)


# A three-statement GEMM-like body: copy A, copy B (async-capable), compute (accumulates).
DEPS3 = stmt_graph(3, [(0, 2, 0), (1, 2, 0), (2, 2, 1)])
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
    deps = stmt_graph(2, [(0, 1, 0), (1, 0, 1)])
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
    assert select_async_stages((0, 1), stmt_graph(2, []), (True, False)) == ()


# -- from a hand-written schedule -------------------------------------------------------
def test_annotation_from_schedule_stage_and_order():
    g = _graph3()
    sched = make_schedule(g, "h100", 2, {"A": 0, "B": 1, "C": 6}, {"A": 0, "B": 0, "C": 0},
                          {"A": 1, "B": 1, "C": 2})
    ann = annotation_from_schedule(sched, g, ASYNC3)
    # C issues at 6 = stage 3, slot 0: first in the steady-state body (tie at slot 0 broken by time)
    assert ann == PipelineAnnotation((0, 0, 3), (0, 2, 1), (0,))
    assert legality_violations(ann, DEPS3) == []


def test_annotation_from_schedule_shifts_stages_to_zero():
    g = _graph3()
    sched = make_schedule(g, "h100", 2, {"A": 4, "B": 5, "C": 10}, {"A": 0, "B": 0, "C": 0},
                          {"A": 1, "B": 1, "C": 2})
    ann = annotation_from_schedule(sched, g, ASYNC3)
    assert ann.stages == (0, 0, 3)


def test_annotation_from_schedule_without_async():
    g = _graph3()
    sched = make_schedule(g, "h100", 2, {"A": 0, "B": 1, "C": 6}, {"A": 0, "B": 0, "C": 0},
                          {"A": 1, "B": 1, "C": 2})
    assert annotation_from_schedule(sched, g, ASYNC3, allow_async=False).async_stages == ()


def test_unlinked_statement_is_clamped_into_the_stage_range():
    g = Graph("g", ops=(Op("A", 1, "TMA"), Op("C", 1, "TC"), Op("nop", 0)), edges=(Edge("A", "C", 3),),
              normalize=False)
    sched = make_schedule(g, "h100", 1, {"A": 0, "C": 3, "nop": 9}, {"A": 0, "C": 0, "nop": 0},
                          {"A": 1, "C": 1, "nop": 0})
    ann = annotation_from_schedule(sched, g, (True, False, False))
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
    deps = stmt_graph(5, [(0, 2, 0), (0, 3, 0), (1, 2, 0), (1, 3, 0), (2, 3, 0), (2, 4, 0), (3, 4, 0), (4, 3, 1)])
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


def test_grouped_async_order_puts_each_async_stage_in_one_run():
    # MetaSchedule's outer k loop (copy A, copy B, inner prologue, body, epilogue) as the optimum ordered it:
    # B, epilogue, A, prologue, body -- the copies of async stage 0 interleaved with the epilogue
    ann = PipelineAnnotation((0, 0, 2, 2, 3), (2, 0, 3, 4, 1), (0,))
    grouped = grouped_async_order(ann)
    assert grouped == PipelineAnnotation((0, 0, 2, 2, 3), (0, 1, 3, 4, 2), (0,))
    assert not async_stages_contiguous(ann) and async_stages_contiguous(grouped)
    # one run already: its copies in program order (what refine does when it costs nothing)
    run = PipelineAnnotation((0, 0, 1), (1, 0, 2), (0,))
    assert async_stages_contiguous(run) and grouped_async_order(run) == PipelineAnnotation((0, 0, 1), (0, 1, 2), (0,))
    plain = PipelineAnnotation((1, 0, 2), (2, 0, 1))  # no async stage: unchanged
    assert async_stages_contiguous(plain) and grouped_async_order(plain) == plain
    # at="last": the group where its last copy was (B, epilogue, A -> epilogue, A, B ...): the epilogue moves
    # before the group
    last = grouped_async_order(ann, "last")
    assert last == PipelineAnnotation((0, 0, 2, 2, 3), (1, 2, 3, 4, 0), (0,)) and async_stages_contiguous(last)


def test_async_copies_go_before_the_statements_that_read_them():
    # TVM's nested GEMM body (copy A, copy B, inner prologue, body, epilogue; the deps of TVM's nested test)
    # at stages [0, 0, 3, 3, 3]: order [1, 2, 0, 3, 4] has the inner prologue, which reads both copies, first.
    # TVM 0.27 compiles it with cp.async.wait_group 4 before that prologue where only 2 groups are newer than
    # the one it reads (the simulation's 2); order [0, 1, 2, 3, 4] gets 3 from TVM and the simulation alike
    # (both compiled with TVM and compared when this was written).
    deps = stmt_graph(5, [(0, 2, 0), (0, 3, 0), (1, 2, 0), (1, 3, 0), (2, 3, 0), (2, 4, 0), (3, 4, 0), (4, 3, 1)])
    reader_first = PipelineAnnotation((0, 0, 3, 3, 3), (1, 2, 0, 3, 4), (0,))
    assert async_stages_contiguous(reader_first) and not async_copies_lead(reader_first, deps)
    fixed = async_copies_first(reader_first)
    assert fixed == PipelineAnnotation((0, 0, 3, 3, 3), (0, 1, 2, 3, 4), (0,)) and async_copies_lead(fixed, deps)
    assert [w.in_flight for w in async_waits(reader_first, deps, 128)] == [2, 2, 1, 0]
    assert [w.in_flight for w in async_waits(fixed, deps, 128)] == [3, 2, 1, 0]
    # TVM's own annotations lead already; no async stage: nothing to lead
    assert async_copies_lead(PipelineAnnotation((0, 0, 2, 3, 3), (0, 1, 3, 2, 4), (0,)), deps)
    assert async_copies_lead(PipelineAnnotation((0, 0, 3, 3, 3), (1, 2, 0, 3, 4)), deps)
    # a plan left reader-first says so
    assert "TVM 0.27 counts that wait too high" in wait_count_caveat(reader_first, deps)
    assert wait_count_caveat(fixed, deps) is None
