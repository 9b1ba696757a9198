"""Loops whose step is not 1: trip counts, hazard distances in iterations, the reasons of assumed overlaps.

``for i in T.serial(0, 40, step=2)`` runs 20 iterations, and an access
``SG[i + 4]`` meets ``SG[i]`` 2 iterations later, not 4: TVM numbers the
pipeline's iterations ``k`` with ``i = min + step * k``.  Planning with the
loop variable's values instead gave a wrong program (144 wrong outputs on the
CPU).  These tests run on the CPU (llvm); ``test_differential.py`` draws
thousands of such loops.
"""
import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

import tir_gen  # noqa: E402
from tir_loops import strided_nest, strided_shared  # noqa: E402
from tvm_twill.api import auto_pipeline  # noqa: E402
from tvm_twill.errors import UnsupportedLoopError  # noqa: E402
from tvm_twill.frontend import extract_loop, read_annotation, resolve_loop  # noqa: E402
from tvm_twill.model.pipeline import ORDER, STAGE, PipelineAnnotation  # noqa: E402
from tvm_twill.transforms import buffer_versions, legality_violations, statement_deps  # noqa: E402


def _args():
    rng = np.random.default_rng(3)
    return [rng.integers(-4, 5, size=(48, 8)).astype("float32"), np.zeros((48, 8), "float32"),
            np.zeros(48, "float32")]


def _wrong(func, mod) -> int:
    args = _args()
    return sum(int((o != r).sum()) for o, r in zip(tir_gen.run_llvm(mod, args), tir_gen.run_llvm(func, args)))


def test_the_strided_loop_of_the_issue_computes_the_same():
    sch = tvm.s_tir.Schedule(strided_shared)
    plan = auto_pipeline(sch, "i", "sm_80")
    assert plan.applied and plan.annotation.num_stages > 1  # really pipelined
    assert _wrong(strided_shared, sch.mod) == 0
    (h,) = [h for h in plan.extraction.hazards if h.buffer == "SG"]
    assert (h.src, h.dst, h.kind, h.distance, h.reason) == (0, 1, "war", 2, "")
    text = plan.explain()
    assert "loop 'i' (20 iterations)" in text and "use -> write (war on 'SG', distance 2)" in text


def test_a_buffer_tvm_keeps_one_copy_of_is_listed_with_one_version():
    """SG is allocated outside the loop and read after it: whatever the stages, TVM keeps one SG."""
    sch = tvm.s_tir.Schedule(strided_shared)
    plan = auto_pipeline(sch, "i", "sm_80")
    assert "SG" not in plan.extraction.versioned
    assert plan.annotation.stages[0] != plan.annotation.stages[1]  # a stage distance that versioning would count
    assert plan.shared_memory["SG"][0] == 1 and "SG x1 = " in plan.explain()
    # TVM's rule (use - def + 1) would give it 2 versions if TVM owned it
    writes, reads = [["C"], ["SG"]], [["SG", "A"], ["A"]]
    assert buffer_versions(plan.annotation, writes, reads)["SG"] == 2
    assert buffer_versions(plan.annotation, writes, reads, versioned=plan.extraction.versioned)["SG"] == 1


@pytest.mark.parametrize("start, extent, step", [(0, 40, 2), (3, 41, 4), (5, 7, 3), (1, 9, 1), (0, 3, 4)])
def test_the_trip_count_is_the_number_of_iterations(start, extent, step):
    text = (f'@T.prim_func(s_tir=True)\ndef main(A: T.Buffer((64,), "float32"), C: T.Buffer((64,), "float32")):\n'
            f'    for i in T.serial({start}, {start + extent}, step={step}):\n        with T.sblock("body"):\n'
            '            with T.sblock("x"):\n                C[i] = A[i]\n'
            '            with T.sblock("y"):\n                C[i + 1] = C[i] + T.float32(1)\n')
    ex = extract_loop(tvm.s_tir.Schedule(tir_gen.parse(text)), "i", "sm_80")
    assert ex.trip_count == len(range(start, start + extent, step)) and ex.step == step
    assert f"trip count {ex.trip_count}," in ex.describe()


def test_symbolic_min_and_a_multi_dimensional_buffer():
    """i = o + n + 3k: the offset difference of G[o, i + 6] and G[o, i] is 6 whatever o and n are, 2 iterations."""
    ex = extract_loop(tvm.s_tir.Schedule(strided_nest), "i", "sm_80")
    assert ex.trip_count == 10
    g = [h for h in ex.hazards if h.buffer == "G"]
    assert [(h.src, h.dst, h.kind, h.distance, h.reason) for h in g] == [(0, 1, "war", 2, "")]
    assert (0, 1, 2) in statement_deps(ex.graph) or (0, 1, 0) in statement_deps(ex.graph)


def _loop(read: str, write: str, extent: int = 20, extra: str = "") -> str:
    return (f'@T.prim_func(s_tir=True)\ndef main(A: T.Buffer((256,), "float32"), IDX: T.Buffer((64,), "int32"), '
            f'C: T.Buffer((64,), "float32"){extra}):\n'
            f'    for i in T.serial(0, {extent}):\n        with T.sblock("body"):\n'
            f'            with T.sblock("rd"):\n                C[i] = A[{read}]\n'
            f'            with T.sblock("wr"):\n                A[{write}] = C[i] + T.float32(1)\n')


@pytest.mark.parametrize("read, write, distance, what", [
    ("IDX[i]", "i", 0, "may overlap in one iteration"),  # an index through memory
    ("i + 40", "2 * i", 1, "distance not proven"),  # strides 1 and 2: disjoint inside an iteration only
])
def test_a_distance_that_cannot_be_proven_keeps_the_order_and_says_so(read, write, distance, what):
    ex = extract_loop(tvm.s_tir.Schedule(tir_gen.parse(_loop(read, write))), "i", "sm_80")
    (h,) = [h for h in ex.hazards if h.buffer == "A" and h.src == 0]
    assert (h.kind, h.distance) == ("war", distance)  # the smallest distance of what may overlap
    assert h.reason == f"{what}, order kept: 'A'[{write}] vs 'A'[{read}]: not one constant stride in 'i'"
    sch = tvm.s_tir.Schedule(tir_gen.parse(_loop(read, write)))
    plan = auto_pipeline(sch, "i", "sm_80", apply=False)
    assert f"rd -> wr (war on 'A', distance {distance}; {h.reason})" in plan.explain()


def test_strides_that_differ_are_still_proven_disjoint_when_their_ranges_are():
    """A[2 * i] (i < 20: 0..38) never meets A[i + 100]: no hazard on A, whatever the stages."""
    ex = extract_loop(tvm.s_tir.Schedule(tir_gen.parse(_loop("i + 100", "2 * i"))), "i", "sm_80")
    assert [h for h in ex.hazards if h.buffer == "A"] == []


def test_an_offset_without_a_bound_is_assumed_to_overlap_and_says_so():
    """A[i + n] against A[i], n a parameter: TVM bounds n only by its type, so the pair is kept in order."""
    ex = extract_loop(tvm.s_tir.Schedule(tir_gen.parse(_loop("i", "i + n", extra=", n: T.int32"))), "i", "sm_80")
    (h,) = [h for h in ex.hazards if h.buffer == "A" and h.src == 0]
    assert h.distance == 0 and "offset n is not constant" in h.reason and h.reason.startswith(
        "may overlap in one iteration, order kept: ")


def test_a_step_that_is_not_a_constant_is_refused():
    text = ('@T.prim_func(s_tir=True)\ndef main(A: T.Buffer((64,), "float32"), C: T.Buffer((64,), "float32"), '
            's: T.int32):\n    for i in T.serial(0, 40, step=s):\n        with T.sblock("body"):\n'
            '            with T.sblock("x"):\n                C[i] = A[i]\n'
            '            with T.sblock("y"):\n                A[i] = C[i] + T.float32(1)\n')
    with pytest.raises(UnsupportedLoopError, match="loop 'i' has step s: only a constant step >= 1"):
        extract_loop(tvm.s_tir.Schedule(tir_gen.parse(text)), "i", "sm_80")


def test_the_metaschedule_postprocessor_replans_the_strided_loop_correctly():
    """A legal hand annotation on the strided loop, re-planned as ``TwillPipeline.apply`` does it
    (``replan_pipelines``; a TuneContext only adds the target and 30 s of start-up)."""
    from tvm_twill.integrations.metaschedule import replan_pipelines

    sch = tvm.s_tir.Schedule(strided_shared)
    loop = resolve_loop(sch, "i").rv
    sch.annotate(loop, STAGE, [0, 1])
    sch.annotate(loop, ORDER, [0, 1])
    assert _wrong(strided_shared, sch.mod) == 0  # the hand annotation is correct
    replan = replan_pipelines(sch, tvm.target.Target({"kind": "cuda", "arch": "sm_80"}))
    (plan,) = replan.plans  # re-planned, not kept
    ann = read_annotation(resolve_loop(sch, "i").node)
    assert ann == plan.annotation and ann != PipelineAnnotation((0, 1), (0, 1))
    assert legality_violations(ann, extract_loop(tvm.s_tir.Schedule(strided_shared), "i", "sm_80").graph) == []
    assert any(h.buffer == "SG" and h.distance == 2 for h in plan.extraction.hazards)
    assert _wrong(strided_shared, sch.mod) == 0
