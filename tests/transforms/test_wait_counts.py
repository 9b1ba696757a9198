"""The cp.async wait-count guard (``transforms.wait_counts``) against TVM 0.27's InjectSoftwarePipeline.

Loops: ``tir_gen.copy_loop_specs`` (two or three global->shared copies, one consumer), annotated with random
legal stages, orders and async stages.  For each, TVM's counts are paired with ``async_waits``'s
(``guard_loop_waits``) and the loop is compiled with the guarded pipeline: every ``cp.async.wait_group`` of
the CUDA is at most the count ``async_waits`` computes for it (a larger one lets the consumer read a copy
still in flight), or the guard refuses the loop with WaitCountError (the waits do not pair up, or
``async_queue`` finds a read of a copy in flight in TVM's code).  Without the guard, TVM's counts are too
large for a consumer ordered before two or more copies of its async stage (docs/tvm-wait-counts.md).
"""
import re
from dataclasses import replace

import pytest

pytest.importorskip("tvm")
import tvm  # noqa: E402
from hypothesis import HealthCheck, assume, event, example, given, settings  # noqa: E402

import tir_gen  # noqa: E402
from tvm_twill import build  # noqa: E402
from tvm_twill.api import auto_pipeline  # noqa: E402
from tvm_twill.errors import InputError, WaitCountError  # noqa: E402
from tvm_twill.frontend import compile_cuda, extract_loop, resolve_loop  # noqa: E402
from tvm_twill.model.pipeline import PipelineAnnotation  # noqa: E402
from tvm_twill.transforms import apply_annotation, async_waits, legality_violations  # noqa: E402
from tvm_twill.transforms.wait_counts import TvmWait, guard_loop_waits  # noqa: E402
from tvm_twill.transforms.pipelines import WAITS_PIPELINE, register  # noqa: E402

_WAIT = re.compile(r"cp_async_wait_group\w*?_(\d+)\(\);")


def emitted_waits(src: str) -> list[int]:
    """The wait_group counts of the kernel, in program order."""
    return [int(n) for n in _WAIT.findall(src[src.index('extern "C" __global__'):])]


def _loop(spec, ann):
    sch = tvm.s_tir.Schedule(tvm.script.from_source(tir_gen.build_copy_loop(spec)))
    rv = resolve_loop(sch, "i").rv
    apply_annotation(sch, rv, ann)
    return sch, rv


M3_LIKE = (tir_gen.CopyLoopSpec(trip=8, widths=(16, 64)), PipelineAnnotation((0, 0, 3), (1, 2, 0), (0,)))


@settings(derandomize=True, deadline=None, max_examples=60,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(case=tir_gen.annotated_copy_loops())
@example(case=M3_LIKE)
def test_compiled_waits_never_exceed_the_computed_counts(case):
    spec, ann = case
    sch, rv = _loop(spec, ann)
    ex = extract_loop(sch, rv, "sm_80")
    assume(not legality_violations(ann, ex.graph))
    try:
        pairs = guard_loop_waits(sch, rv, ann, ex.graph, ex.trip_count)
    except WaitCountError as err:
        # refused: TVM's waits do not pair up with the computed ones, or its pipelined code lets a read see a
        # copy in flight (transforms.async_queue)
        assert re.match(r"loop 'i': (TVM emitted \d+ cp.async waits where tvm_twill computed \d+|in the pipelined "
                        r"code TVM emits, )", str(err)), str(err)
        event("refused: " + ("unpaired" if "TVM emitted" in str(err) else "a read of a copy in flight"))
        return
    except Exception as err:  # noqa: BLE001 - TVM refuses the annotation (two async stages for one consumer...)
        event(f"TVM refuses: {str(err).splitlines()[-1][:60]}")
        assume(False)
    expected = [w.in_flight for w in async_waits(ann, ex.graph, ex.trip_count, keep_redundant=True)]
    _, src = compile_cuda(sch, "sm_80", tir_pipeline=register(WAITS_PIPELINE))
    got = emitted_waits(src)
    event("TVM's counts too large: lowered" if pairs else "TVM's counts safe" if expected else "no waits")
    assert len(got) == len(expected), (got, expected)
    assert all(g <= e for g, e in zip(got, expected)), (got, expected, pairs)
    if tvm_counts_safe(ann, ex.graph):  # docs/tvm-wait-counts.md: where TVM's own counts are never too large
        assert not pairs, pairs


def tvm_counts_safe(ann, graph) -> bool:
    """The documented condition for TVM's counts to be safe as emitted: the async stage's statements
    consecutive in the order and no statement reading them before the first, or a single async statement."""
    copies = sorted(ann.orders[i] for i, s in enumerate(ann.stages) if s in ann.async_stages)
    reads = {e.dst for e in graph.edges if e.kind == "data" and e.distance == 0
             and ann.stages[graph.index(e.src)] in ann.async_stages}
    first_read = min((ann.orders[graph.index(n)] for n in reads), default=len(ann.orders))
    return len(copies) == 1 or (copies == list(range(copies[0], copies[0] + len(copies)))
                                and first_read > copies[0])


def test_m3_like_loop_is_one_tvm_miscounts_and_the_guard_lowers():
    spec, ann = M3_LIKE
    sch, rv = _loop(spec, ann)
    ex = extract_loop(sch, rv, "sm_80")
    expected = [w.in_flight for w in async_waits(ann, ex.graph, ex.trip_count)]
    _, plain = compile_cuda(sch, "sm_80")
    assert emitted_waits(plain)[0] > expected[0]  # TVM: the consumer first, two copies counted as two groups
    pairs = guard_loop_waits(sch, rv, ann, ex.graph, ex.trip_count)
    assert [p.emitted for p in pairs] == emitted_waits(plain) and [p.expected for p in pairs] == expected
    _, guarded = compile_cuda(sch, "sm_80", tir_pipeline=WAITS_PIPELINE)
    assert emitted_waits(guarded) == expected


def test_a_loop_tvm_counts_right_keeps_tvms_pipeline():
    spec = tir_gen.CopyLoopSpec(trip=8, widths=(16, 64))
    ann = PipelineAnnotation((0, 0, 3), (0, 1, 2), (0,))
    sch, rv = _loop(spec, ann)
    ex = extract_loop(sch, rv, "sm_80")
    assert guard_loop_waits(sch, rv, ann, ex.graph, ex.trip_count) == ()
    assert "tvm_twill_async_wait_counts" not in sch.get(rv).annotations


def test_build_refuses_a_module_without_the_counts_its_plan_needs():
    sch = tvm.s_tir.Schedule(tvm.script.from_source(tir_gen.build_copy_loop(tir_gen.CopyLoopSpec(8, (16, 64)))))
    plan = auto_pipeline(sch, "i", "sm_80")
    assert plan.applied and plan.annotation.async_stages and plan.tvm_waits == ()
    needs = replace(plan, tvm_waits=(TvmWait(emitted=3, expected=2),))  # as if TVM over-counted this loop
    assert needs.tir_pipeline == WAITS_PIPELINE
    with pytest.raises(InputError, match="does not carry the plan of loop 'i'.*tvm_twill_async_wait_counts"):
        build(sch.mod, "sm_80", needs)
