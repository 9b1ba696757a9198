"""auto_pipeline / evaluate_annotation on the real loops of TVM's pipeline tests.

For TVM's tensor-core GEMM (mma_schedule; the simple and the nested loop of
test_s_tir_transform_inject_software_pipeline.py) on sm_80 and sm_90a:
auto_pipeline's annotations are legal (TVM's InjectSoftwarePipeline accepts
them), their model II is at most that of TVM's hand annotations, the module
compiles with cp.async commit/wait groups whose wait counts match the
independent in-flight computation, and ptxas reports no spills.  Each module
is built and compiled once (module-scoped cache).
"""
import json
import re
import shutil
import subprocess

import pytest

tvm = pytest.importorskip("tvm")
from tvm.script import tirx as T  # noqa: E402

import tvm_twill  # noqa: E402
from tvm_twill import evaluate_annotation  # noqa: E402
from tvm_twill.api import PipelinePlan, auto_pipeline  # noqa: E402
from tvm_twill.errors import InputError, UnsupportedLoopError, UnsupportedTargetError  # noqa: E402
from tvm_twill.frontend import compile_cuda, extract_loop  # noqa: E402
from tvm_twill.model.pipeline import ASYNC_STAGES, ORDER, STAGE  # noqa: E402
from tvm_twill.transforms import async_waits, legality_violations  # noqa: E402
from tir_loops import dynamic_compute, short_loop, with_control_flow  # noqa: E402

CASES = [(arch, variant) for arch in ("sm_80", "sm_90a") for variant in ("simple", "nested")]
_WAIT = re.compile(r"tvm_builtin_ptx_cp_async_wait_group_async_wait_group_(\d+)\(\);")


def _kernel(src: str) -> str:
    return src[src.index('extern "C" __global__'):]


@pytest.fixture(scope="module")
def built(mma_gemm):
    """(arch, variant) -> everything the tests look at, computed once."""
    cache = {}

    def get(arch, variant):
        if (arch, variant) not in cache:
            sch, k0, k1 = mma_gemm()
            plan = auto_pipeline(sch, k0 if variant == "simple" else [k0, k1], arch)
            hand, hk0, _ = mma_gemm(variant)
            _, src = compile_cuda(sch, arch, tir_pipeline=plan.tir_pipeline)  # as tvm_twill.build compiles it
            _, hand_src = compile_cuda(hand, arch)
            cache[arch, variant] = {
                "plan": plan, "sch": sch, "k0": k0, "hand": hand, "hk0": hk0, "src": src, "hand_src": hand_src,
                "auto_eval": evaluate_annotation(sch, "k_0_0", arch),
                "hand_eval": evaluate_annotation(hand, hk0, arch)}
        return cache[arch, variant]

    return get


@pytest.mark.parametrize("arch, variant", CASES)
def test_auto_annotation_is_legal_and_applied(built, arch, variant):
    b = built(arch, variant)
    plan = b["plan"]
    assert isinstance(plan, PipelinePlan) and plan.applied, plan.outcome
    ex = plan.extraction
    assert len(plan.annotation.stages) == len(ex.stmts)
    assert legality_violations(plan.annotation, ex.graph) == []
    ann = b["sch"].get(b["k0"]).annotations
    assert [int(s) for s in ann[STAGE]] == plan.annotations[STAGE]
    assert [int(o) for o in ann[ORDER]] == plan.annotations[ORDER]
    assert [int(s) for s in ann[ASYNC_STAGES]] == [0]


@pytest.mark.parametrize("arch, variant", CASES)
def test_auto_ii_at_most_hand_ii(built, arch, variant):
    b = built(arch, variant)
    plan, auto_eval, hand_eval = b["plan"], b["auto_eval"], b["hand_eval"]
    assert plan.quantum == auto_eval.quantum == hand_eval.quantum
    assert auto_eval.ii == plan.schedule.ii  # the annotation realizes the solver's II
    assert plan.schedule.ii <= hand_eval.ii
    assert plan.schedule.optimal


def test_model_iis_of_tvm_loops(built):
    """The numbers reported in the docs: auto vs TVM's hand annotation, in cycles."""
    iis = {case: (built(*case)["plan"].ii_cycles, built(*case)["hand_eval"].ii_cycles) for case in CASES}
    # sm_90a: the two 8 KiB copies through each CTA's share of L2 (23 units of 16 cycles each) bound
    # both plans and TVM's hand annotations alike (docs/machines.md, "Throughput model")
    assert iis == {("sm_80", "simple"): (512, 512), ("sm_80", "nested"): (512, 512),
                   ("sm_90a", "simple"): (736, 736), ("sm_90a", "nested"): (736, 736)}


@pytest.mark.parametrize("arch, variant", CASES)
def test_cuda_has_cp_async_groups(built, arch, variant):
    k = _kernel(built(arch, variant)["src"])
    assert "ptx_cp_async" in k
    assert "cp_async_commit_group" in k and "cp_async_wait_group" in k


@pytest.mark.parametrize("arch, variant", CASES)
def test_wait_counts_match_independent_computation(built, arch, variant):
    b = built(arch, variant)
    emitted = [int(n) for n in _WAIT.findall(_kernel(b["src"]))]
    assert emitted == [w.in_flight for w in b["plan"].waits]
    # TVM's own hand annotation, checked the same way
    hand_ex = extract_loop(b["hand"], b["hk0"], arch)
    expected = async_waits(hand_ex.annotation, hand_ex.graph, hand_ex.trip_count)
    assert [int(n) for n in _WAIT.findall(_kernel(b["hand_src"]))] == [w.in_flight for w in expected]


def test_hand_wait_counts_are_tvms_test_values(built):
    # TVM's tests assert body 3 / epilogue "2 - k" (simple) and prologue 2, body 2, "1 - k" (nested)
    assert [int(n) for n in _WAIT.findall(_kernel(built("sm_80", "simple")["hand_src"]))] == [3, 2, 1, 0]
    assert [int(n) for n in _WAIT.findall(_kernel(built("sm_80", "nested")["hand_src"]))] == [2, 2, 1, 0]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("arch, variant", CASES)
def test_nvcc_reports_no_spills(built, arch, variant, tmp_path):
    cu = tmp_path / "k.cu"
    cu.write_text(built(arch, variant)["src"])
    r = subprocess.run(["nvcc", f"-arch={arch}", "-cubin", "-o", str(tmp_path / "k.cubin"), str(cu),
                        "-Xptxas", "-v"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", r.stderr + r.stdout)
    assert spills and all(s == ("0", "0") for s in spills), r.stderr
    # no local-memory stack frame either: an order that makes nvcc index the warp
    # fragments dynamically costs local memory without counting as a spill
    frames = re.findall(r"(\d+) bytes stack frame", r.stderr + r.stdout)
    assert frames and all(f == "0" for f in frames), r.stderr


def test_nested_plans_inner_loop_first(built):
    a100, h100 = built("sm_80", "nested")["plan"], built("sm_90a", "nested")["plan"]
    for plan in (a100, h100):
        assert [p.loop for p in plan.inner] == ["k_0_1"]
    # A100: the inner loop's optimum is one stage in program order, so it is left alone and the
    # outer loop sees it as one statement; H100: it is pipelined and the outer loop sees 3 pieces.
    assert not a100.inner[0].applied and "one stage" in a100.inner[0].outcome
    assert a100.extraction.names == ["A_shared.dyn", "B_shared.dyn", "k_0_1"]
    assert h100.inner[0].applied
    assert h100.extraction.names[2:] == ["k_0_1.prologue", "k_0_1.body", "k_0_1.epilogue"]
    assert h100.annotations[STAGE] == [0, 0, 2, 2, 2] and h100.annotations[ORDER] == [0, 1, 2, 3, 4]


def test_explain_and_reproduce(built):
    plan = built("sm_90a", "nested")["plan"]
    text = plan.explain()
    # the one-role pipeline's copies are cp.async on sm_90a too (only the warp-specialized kernel issues TMA)
    assert "what limits the II: resources - unit async copy (cp.async) is busy 736 of every 736 cycles" in text
    assert "k_0_1.prologue runs 2 stage(s) after A_shared.dyn" in text
    assert "L2-bound on async copy (cp.async)" in text and "prediction: predicted" in text
    assert "predicted cp.async.wait_group counts" in text and "nested loop 'k_0_1'" in text
    doc = json.loads(plan.graph_json())
    assert doc["format"] == "tvm-twill-graph/1" and doc["machine"]["warp_groups"] == 1
    scope = {}
    exec(plan.reproduce().replace("print(", "(lambda *a: None)("), scope)  # noqa: S102 - our own snippet
    assert scope["schedule"].ii == plan.schedule.ii


def test_evaluate_annotation_fields(built):
    ev = built("sm_80", "simple")["hand_eval"]
    assert ev.annotation.stages == (0, 0, 3) and ev.ii_cycles == ev.ii * ev.quantum
    assert ev.throughput == pytest.approx(1 / ev.ii_cycles)
    assert set(ev.times) == {"A_shared.dyn", "B_shared.dyn", "k_0_1"}


def test_target_object_and_top_level_name(mma_gemm):
    sch, k0, _ = mma_gemm()
    plan = tvm_twill.auto_pipeline(sch, k0, tvm.target.Target({"kind": "cuda", "arch": "sm_80"}), apply=False)
    assert plan.arch == "sm_80" and not plan.applied and "apply=False" in plan.outcome
    assert "software_pipeline_stage" not in sch.get(k0).annotations


def test_apply_false_with_nested_loops_leaves_schedule_alone(mma_gemm):
    sch, k0, k1 = mma_gemm()
    before = sch.mod["main"]
    plan = auto_pipeline(sch, [k0, k1], "sm_90a", apply=False)
    assert not plan.applied and plan.inner[0].applied  # the inner one went to a scratch schedule
    tvm.ir.assert_structural_equal(sch.mod["main"], before)


def test_loop_inside_pipelined_loop_is_refused(mma_gemm):
    sch, k0, k1 = mma_gemm("simple")
    with pytest.raises(UnsupportedLoopError, match="inside the pipelined loop 'k_0_0': pipeline inner loops first"):
        auto_pipeline(sch, k1, "sm_90a")


def test_unsupported_target(mma_gemm):
    sch, k0, _ = mma_gemm()
    with pytest.raises(UnsupportedTargetError, match="predates sm_80"):
        auto_pipeline(sch, k0, "sm_70")


def test_evaluate_requires_an_annotation(mma_gemm):
    sch, k0, _ = mma_gemm()
    with pytest.raises(UnsupportedLoopError, match="has no software_pipeline_stage/order annotation"):
        evaluate_annotation(sch, k0, "sm_80")


def test_evaluate_rejects_wrong_length(mma_gemm):
    sch, k0, _ = mma_gemm()
    sch.annotate(k0, STAGE, [0, 0, 2, 3, 3])
    sch.annotate(k0, ORDER, [0, 1, 3, 2, 4])
    with pytest.raises(UnsupportedLoopError, match="has 3 pipeline statements .* but its annotation has 5"):
        evaluate_annotation(sch, k0, "sm_80")


def test_evaluate_rejects_illegal_annotation(mma_gemm):
    sch, k0, _ = mma_gemm()
    sch.annotate(k0, STAGE, [1, 0, 0])
    sch.annotate(k0, ORDER, [0, 1, 2])
    with pytest.raises(InputError, match="not a legal pipeline: statement 2"):
        evaluate_annotation(sch, k0, "sm_80")


# -- no-ops and refusals on small loops -------------------------------------------------------
@T.prim_func(s_tir=True)
def on_chip_loop(S: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    for tx in T.thread_binding(0, 16, thread="threadIdx.x"):
        with T.sblock("outer"):
            SS = T.sblock_alloc_buffer((16, 16), dtype="float32", scope="shared")
            for i in T.serial(0, 16):
                with T.sblock("compute"):
                    L = T.sblock_alloc_buffer((1,), dtype="float32", scope="local")
                    with T.sblock("scale"):
                        L[0] = SS[tx, i] * T.float32(2)
                    with T.sblock("store"):
                        SS[tx, i] = L[0] + T.float32(1)


def test_trip_count_bounds_the_stage_count():
    # the optimum needs more stages than the loop has iterations; the default bound is the trip count (2):
    # with the 4-statement chain in at most 2 stages the best II keeps all in one stage, an explained no-op
    sch = tvm.s_tir.Schedule(short_loop)
    plan = auto_pipeline(sch, "i", "sm_80")
    assert not plan.applied and plan.annotation.num_stages == 1
    assert re.search(r"needs \d+ stages at II \d+ .*bounded to 2 by the default bound min\(8, trip count 2\)",
                     plan.explain())
    assert "software_pipeline_stage" not in sch.get(sch.get_loops(sch.get_sblock("compute"))[0]).annotations
    assert "result: not applied" in plan.explain()


def test_single_stage_optimum_is_an_explained_noop():
    plan = auto_pipeline(tvm.s_tir.Schedule(on_chip_loop), "i", "sm_90a")
    assert not plan.applied and plan.annotation.num_stages == 1
    assert "one stage in program order" in plan.outcome


@pytest.mark.parametrize("func, message", [
    (with_control_flow, "statement 1 is control flow \\(IfThenElse\\)"),
])
def test_unpipelinable_loops_raise(func, message):
    with pytest.raises(UnsupportedLoopError, match=message):
        auto_pipeline(tvm.s_tir.Schedule(func), "i", "sm_80")


def test_dynamic_extent_is_planned_and_says_what_it_assumes():
    plan = auto_pipeline(tvm.s_tir.Schedule(dynamic_compute), "i", "sm_80")
    assert plan.extraction.trip_count is None
    assert "symbolic trip count: the plan is the same for every trip count" in plan.explain()


@pytest.mark.parametrize("arch, variant", CASES)
def test_predicted_shared_memory_is_what_tvm_allocates(built, arch, variant):
    from tvm_twill.frontend import kernel_info

    b = built(arch, variant)
    assert b["plan"].smem_bytes == kernel_info(b["sch"], arch).dyn_smem
    assert b["hand_eval"].smem_bytes == kernel_info(b["hand"], arch).dyn_smem


# -- the tutorial and the benchmark's export mode run here (no GPU) ---------------------------
def _load(path):
    import importlib.util
    from pathlib import Path

    p = Path(__file__).resolve().parents[2] / path
    spec = importlib.util.spec_from_file_location(p.stem, p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_tutorial_runs(capsys):
    assert _load("tutorials/auto_pipeline_gemm.py").main(["--arch", "sm_80"]) == 0
    out = capsys.readouterr().out
    assert "what limits the II" in out and "cp.async.wait_group counts in the kernel: ['2', '1', '0']" in out
    assert "predicted: [2, 1, 0]" in out


def test_bench_export_writes_a_manifest(tmp_path, capsys):
    assert _load("bench/gemm_gpu.py").main(["--export", str(tmp_path), "--arch", "sm_80"]) == 0
    man = json.loads((tmp_path / "manifest.json").read_text())
    assert [v["name"] for v in man["variants"]] == ["auto_simple", "hand_simple", "auto_nested", "hand_nested",
                                                    "auto_nested_ws", "auto_nested_ws_ordered"]
    for v in man["variants"]:
        ws = "_ws" in v["name"]  # one producer warp more: 4 consumer warps + 1
        assert (tmp_path / v["cu"]).exists() and v["grid"] == [16, 64, 1] and v["block"] == [32, 5 if ws else 4, 1]
        assert v["args"] == ["A", "B", "C"] and v["dyn_smem"] > 0 and v["b_transposed"] is False
        p = v["prediction"]  # plan.prediction() of the kernel as compiled, on the arch's machine model
        assert p["machine"] == "a100" and 0 < p["tflops"] <= p["peak_tflops"] and p["ii_cycles"] == v["model_ii_cycles"]


def test_a_plan_cache_reuses_extraction_solve_and_tvm_verdict(mma_gemm):
    from tvm_twill.planner.cache import PlanCache

    cache = PlanCache()
    plans = []
    for _ in range(2):
        sch, k0, k1 = mma_gemm()
        plans.append(auto_pipeline(sch, [k0, k1], "sm_90a", cache=cache))
    stats = cache.stats()
    # two loops, each extracted, solved and checked by TVM once, reused the second time
    assert {k: (v["misses"], v["hits"]) for k, v in stats.items()} == \
        {"solves": (2, 2), "extractions": (2, 2), "verdicts": (2, 2)}
    sch, k0, k1 = mma_gemm()
    plain = auto_pipeline(sch, [k0, k1], "sm_90a")  # no cache
    for p in plans:
        assert p.annotations == plain.annotations and p.inner[0].annotations == plain.inner[0].annotations
        assert (p.schedule.ii, p.schedule.ops) == (plain.schedule.ii, plain.schedule.ops)
        assert p.applied and p.outcome == plain.outcome
