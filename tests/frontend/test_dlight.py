"""dlight's tensor-core GEMM schedules: the statements InjectSoftwarePipeline sees, evaluated and re-planned.

dlight's ``gpu.Matmul`` (fp16 -> ``MatmulTensorization``, wmma) writes a nested
pipeline (outer ``ax3_0_0`` stages [0, 0, 0, 0, 0, 1, 1], inner ``ax3_0_1``
[0, 0, 1]) and stages its global->shared copies through registers
(``tirx.manifest_shared_memory_local_stage``): TVM splits each copy into two
statements before InjectSoftwarePipeline counts them.  GEMMs are 256^3 with a
static or a symbolic M (dlight pads it), for sm_80 and sm_86.
"""
import functools
import re
import shutil
import subprocess

import pytest

tvm = pytest.importorskip("tvm")
tvm_ffi = pytest.importorskip("tvm_ffi")

import tvm_twill  # noqa: E402
from tvm_twill.errors import UnsupportedLoopError  # noqa: E402
from tvm_twill.frontend import (compile_cuda, extract_loop, inject_pipeline, lower_to_pipeline,  # noqa: E402
                                pipeline_prefix_passes, read_annotation, resolve_loop)
from tvm_twill.frontend.loops import pipeline_children  # noqa: E402
from tvm_twill.model.pipeline import PipelineAnnotation  # noqa: E402
from tvm_twill.transforms import apply_annotation, statement_deps  # noqa: E402
from tvm_twill.workloads import dlight_gemm  # noqa: E402

OUTER, INNER = "ax3_0_0", "ax3_0_1"
DLIGHT_OUTER = PipelineAnnotation((0, 0, 0, 0, 0, 1, 1), (0, 3, 1, 4, 5, 2, 6))
SIZES = {"static": 256, "symbolic": "m"}


@functools.lru_cache(maxsize=None)
def _dlight_mod(m, arch):
    return dlight_gemm(m, arch=arch)


def dlight_sch(size="static", arch="sm_80"):
    """A fresh schedule over dlight's module (annotating it leaves the cached module alone)."""
    return tvm.s_tir.Schedule(_dlight_mod(SIZES[size], arch))


@pytest.mark.parametrize("size", ["static", "symbolic"])
def test_statement_count_is_what_inject_software_pipeline_sees(size):
    sch = dlight_sch(size)
    ex = extract_loop(sch, OUTER, "sm_80")
    assert read_annotation(resolve_loop(sch, OUTER).node) == DLIGHT_OUTER
    # 2 copies as written; 4 statements after ManifestSharedMemoryLocalStage, + the inner pipeline's 3
    ref = resolve_loop(sch, OUTER)
    assert len(pipeline_children(ref.node, OUTER)) == 3
    _, low = lower_to_pipeline(sch.mod[ref.func], ref)
    assert len(pipeline_children(low.node, OUTER)) == 5
    assert len(ex.stmts) == len(DLIGHT_OUTER.stages) == 7
    a = "A_reindex_pad_shared.dyn" if size == "symbolic" else "A_reindex_shared.dyn"
    assert ex.names == [f"{a}_local", a, "B_reindex_shared.dyn_local", "B_reindex_shared.dyn",
                        f"{INNER}.prologue", f"{INNER}.body", f"{INNER}.epilogue"]
    # TVM agrees: its own annotation (7 entries) lowers, the count before the split (5) does not
    inject_pipeline(sch.mod)
    short = tvm.s_tir.Schedule(sch.mod)
    apply_annotation(short, resolve_loop(short, OUTER).rv, PipelineAnnotation((0, 0, 0, 0, 1), (0, 1, 2, 3, 4)))
    with pytest.raises(UnsupportedLoopError, match="different size"):
        inject_pipeline(short.mod)


def test_split_copies_are_a_register_load_and_a_shared_store():
    ex = extract_loop(dlight_sch(), OUTER, "sm_80")
    load, store = ex.stmts[0], ex.stmts[1]
    assert load.reads == ("A",) and load.writes == ("A_reindex_shared.dyn_local",)
    assert load.latency > 500 and load.reg_writes == {"A_reindex_shared.dyn_local": 8}  # 128x64 fp16 / 512 threads
    assert "A_reindex_shared.dyn_local" in store.reads and store.writes == ("A_reindex_shared.dyn",)
    assert store.smem_writes == {"A_reindex_shared.dyn": 128 * 72 * 2}  # the tile with storage_align padding
    assert not load.async_capable and not store.async_capable  # a staged copy is no cp.async
    deps = statement_deps(ex.graph)
    assert (0, 1, 0) in deps  # the store reads what the load wrote
    # TVM does not see that read (the store's block keeps the copy's old read region), so it keeps one
    # version of the register buffer: the next load must wait for this store
    assert (1, 0, 1) in deps
    assert any(h.buffer == "A_reindex_shared.dyn_local" and h.kind == "war" and h.distance == 1 for h in ex.hazards)


def test_tvm_keeps_one_version_of_the_register_buffer():
    """What the write-after-read edge above models: with the load a stage ahead of the store, TVM still
    allocates the register buffer once (and the shared tile twice)."""
    sch = dlight_sch()
    apply_annotation(sch, resolve_loop(sch, OUTER).rv,
                     PipelineAnnotation((0, 1, 0, 1, 1, 2, 2), (0, 3, 1, 4, 5, 2, 6)))
    text = tvm.transform.Sequential(pipeline_prefix_passes())(sch.mod).script()
    assert re.search(r'A_reindex_shared_dyn_local = T\.sblock_alloc_buffer\(\(4, 4\), "float16"', text)
    assert re.search(r'A_reindex_shared_dyn = T\.sblock_alloc_buffer\(\(2, 1, 128, 64\)', text)


@pytest.mark.parametrize("arch", ["sm_80", "sm_86"])
@pytest.mark.parametrize("size", ["static", "symbolic"])
def test_evaluate_annotation_on_dlights_annotation(size, arch):
    sch = dlight_sch(size, arch)
    ev = tvm_twill.evaluate_annotation(sch, OUTER, arch)
    assert ev.annotation == DLIGHT_OUTER and ev.ii_cycles > 0
    inner = tvm_twill.evaluate_annotation(sch, INNER, arch)
    assert inner.annotation.stages == (0, 0, 1) and inner.ii_cycles > 0
    # dlight's copies are double-buffered (double_buffer_scope) even where the rule gives one version
    assert ev.extraction.double_buffered == (ev.extraction.names[1], ev.extraction.names[3])


@pytest.mark.parametrize("size", ["static", "symbolic"])
def test_auto_pipeline_replans_dlights_nest(size):
    sch = dlight_sch(size)
    dlight_ii = tvm_twill.evaluate_annotation(sch, OUTER, "sm_80").ii_cycles
    plan = tvm_twill.auto_pipeline(sch, [OUTER, INNER], "sm_80")
    assert plan.applied and [p.loop for p in plan.inner] == [INNER]
    assert len(plan.annotation.stages) == 7 and read_annotation(resolve_loop(sch, OUTER).node) == plan.annotation
    assert plan.ii_cycles <= dlight_ii
    assert tvm_twill.evaluate_annotation(sch, OUTER, "sm_80").ii_cycles == plan.ii_cycles
    inject_pipeline(sch.mod)  # TVM takes the 7 entries written on the schedule's loop


def test_a_nest_that_cannot_be_planned_keeps_its_annotations():
    sch = dlight_sch()
    before = {n: read_annotation(resolve_loop(sch, n).node) for n in (OUTER, INNER)}
    with pytest.raises(tvm_twill.InfeasibleError, match="shared memory"):
        tvm_twill.auto_pipeline(sch, [OUTER, INNER], "sm_80", machine=_tiny_smem_machine())
    assert {n: read_annotation(resolve_loop(sch, n).node) for n in (OUTER, INNER)} == before


def _tiny_smem_machine():
    import dataclasses
    return dataclasses.replace(tvm_twill.get_machine("a100"), smem_bytes=4096)


# -- tvm_twill.integrations.dlight.AutoPipelined: dlight's rule, then every pipeline re-planned -------------------
dl = pytest.importorskip("tvm.s_tir.dlight")
from tvm_twill.integrations.dlight import AutoPipelined  # noqa: E402
from tvm_twill.frontend import annotated_pipeline_loops, local_stage_blocks  # noqa: E402


@functools.lru_cache(maxsize=None)
def _replanned(size, arch):
    rule = AutoPipelined(dl.gpu.Matmul())
    mod = dlight_gemm(SIZES[size], arch=arch, rule=rule)
    return mod, tuple(rule.last)


@pytest.mark.parametrize("arch", ["sm_80", "sm_86"])
@pytest.mark.parametrize("size", ["static", "symbolic"])
def test_autopipelined_matmul(size, arch, tmp_path):
    mod, nests = _replanned(size, arch)
    (nest,) = nests
    assert nest.loops == (OUTER, INNER) and nest.plan is not None and not nest.reason
    sch = tvm.s_tir.Schedule(mod)
    # both variants were planned; the direct copies won: dlight's register staging is gone
    assert [v for v, _ in nest.alternatives] == ["registers", "direct"] and nest.staging == "direct"
    assert nest.plan.ii_cycles == min(ii for _, ii in nest.alternatives)
    assert not local_stage_blocks(sch, resolve_loop(sch, OUTER))
    ann = read_annotation(resolve_loop(sch, OUTER).node)
    assert ann == nest.plan.annotation and len(ann.stages) == len(nest.plan.extraction.stmts)
    # the copy of B transposes (B[k, j] into a [j, k] tile, k vectorized): TVM would make it a cp.async of a
    # row's consecutive halves, so it stays synchronous and the plan says why; A's copy reads rows
    copies = {s.name: s for s in nest.plan.extraction.stmts if s.kind == "copy"}
    assert copies["B_reindex_shared.dyn"].async_capable is False
    assert "not contiguous" in dict(nest.plan.sync_copies)["B_reindex_shared.dyn"]
    a_copy = next(n for n in copies if n.startswith("A_reindex"))
    assert copies[a_copy].async_capable
    (inner,) = nest.plan.inner  # written, or (an explained no-op: one stage, program order) removed
    assert read_annotation(resolve_loop(sch, INNER).node) == (inner.annotation if inner.applied else None)
    assert len(ann.stages) == (5 if inner.applied else 3)  # copies + the inner pipeline's 3, or the loop
    # the model ii: no worse than dlight's own annotation, and what evaluate_annotation measures
    assert nest.plan.ii_cycles <= tvm_twill.evaluate_annotation(dlight_sch(size, arch), OUTER, arch).ii_cycles
    assert tvm_twill.evaluate_annotation(sch, OUTER, arch).ii_cycles == nest.plan.ii_cycles
    _, src = compile_cuda(mod, arch)
    assert ("cp.async.ca.shared.global" in src) == bool(ann.async_stages) == bool(nest.plan.async_copies)
    assert not any("B_ptr" in ln for ln in src.splitlines() if "cp_async" in ln)
    waits = [int(w) for w in re.findall(r"cp\.async\.wait_group (\d+);", src)]
    assert sorted(set(waits)) == sorted({w.in_flight for w in nest.plan.waits})
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed: the register/spill check needs it")
    cu = tmp_path / "gemm.cu"
    cu.write_text(src)
    r = subprocess.run(["nvcc", f"-arch={arch}", "-cubin", "-o", str(tmp_path / "gemm.cubin"), str(cu),
                        "-Xptxas", "-v"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", r.stdout + r.stderr)
    assert spills and all(s == ("0", "0") for s in spills), r.stderr


def test_matmul_tensorization_rule_is_replanned_the_same():
    from tvm.s_tir.dlight.gpu.matmul import MatmulTensorization
    rule = AutoPipelined(MatmulTensorization())
    sch = tvm.s_tir.Schedule(dlight_gemm(256, arch="sm_80", rule=rule))
    (nest,) = rule.last
    via_matmul = tvm.s_tir.Schedule(_replanned("static", "sm_80")[0])
    for loop in (OUTER, INNER):
        assert read_annotation(resolve_loop(sch, loop).node) == read_annotation(resolve_loop(via_matmul, loop).node)
    assert nest.staging == "direct"


def test_a_nest_it_cannot_plan_keeps_dlights_schedule(caplog):
    rule = AutoPipelined(dl.gpu.Matmul(), machine=_tiny_smem_machine())
    with caplog.at_level("WARNING", logger="tvm_twill.dlight"):
        mod = dlight_gemm(256, arch="sm_80", rule=rule)
    (nest,) = rule.last
    assert nest.plan is None and "shared memory" in nest.reason and nest.staging == "registers"
    assert tvm_ffi.structural_equal(mod, _dlight_mod(256, "sm_80"))
    assert "keeps dlight's annotation" in caplog.text and "ax3_0_0" in caplog.text


def test_a_target_without_a_model_keeps_dlights_schedule(caplog):
    rule = AutoPipelined(dl.gpu.Matmul())
    with caplog.at_level("INFO", logger="tvm_twill.dlight"):
        mod = dlight_gemm(256, arch="sm_75", rule=rule)  # dlight tensorizes from sm_70; no cp.async before sm_80
    assert rule.last == []
    assert tvm_ffi.structural_equal(mod, dlight_gemm(256, arch="sm_75"))
    assert "kept as dlight wrote it" in caplog.text and "predates sm_80" in caplog.text


def test_autopipelined_is_a_dlight_schedule_rule():
    rule = AutoPipelined(dl.gpu.Matmul(), time_limit=5.0)
    assert isinstance(rule, dl.ScheduleRule)
    assert rule.is_target_available(tvm.target.Target({"kind": "cuda", "arch": "sm_80"}))
    assert not rule.is_target_available(tvm.target.Target("llvm"))
    with pytest.raises(tvm_twill.InputError, match="wraps a dlight ScheduleRule"):
        AutoPipelined(lambda func, target, tunable: None)
    # a function the rule does not schedule: None, as from the rule itself
    elementwise = tvm.te.compute((64,), lambda i: tvm.te.placeholder((64,), name="X")[i] * 2, name="Y")
    func = tvm.te.create_prim_func([elementwise.op.input_tensors[0], elementwise])
    assert rule.apply(func, tvm.target.Target({"kind": "cuda", "arch": "sm_80"}), False) is None


def test_keeping_dlights_register_staging(tmp_path):
    rule = AutoPipelined(dl.gpu.Matmul(), staging="registers")
    mod = dlight_gemm(256, arch="sm_80", rule=rule)
    (nest,) = rule.last
    assert nest.staging == "registers" and [v for v, _ in nest.alternatives] == ["registers"]
    assert nest.alternatives[0][1] == dict(_replanned("static", "sm_80")[1][0].alternatives)["registers"]
    sch = tvm.s_tir.Schedule(mod)
    assert len(local_stage_blocks(sch, resolve_loop(sch, OUTER))) == 2
    ann = read_annotation(resolve_loop(sch, OUTER).node)
    assert len(ann.stages) == 7 and not ann.async_stages  # a staged copy is no cp.async
    assert nest.plan.ii_cycles <= tvm_twill.evaluate_annotation(dlight_sch(), OUTER, "sm_80").ii_cycles
    _, src = compile_cuda(mod, "sm_80")
    assert "cp.async" not in src
    with pytest.raises(tvm_twill.InputError, match="staging must be one of"):
        AutoPipelined(dl.gpu.Matmul(), staging="shared")


# -- sm_90a: dlight cannot read the arch (check_sm_version("sm_90a") == -1) --------------------------
def test_on_sm90a_dlight_schedules_for_sm90_and_the_pipelines_are_planned_for_sm90a(caplog, capfd, monkeypatch):
    from tvm_twill.planner import plan_progress
    monkeypatch.setattr(plan_progress, "AFTER", 0.0)  # any plan would report its steps, unless quiet
    plain = tvm.s_tir.Schedule(dlight_gemm(256, arch="sm_90a"))  # dlight alone: no tensor cores, no pipeline
    assert annotated_pipeline_loops(plain) == []
    rule = AutoPipelined(dl.gpu.Matmul())
    with caplog.at_level("INFO", logger="tvm_twill.dlight"):
        mod = dlight_gemm(256, arch="sm_90a", rule=rule)
    (nest,) = rule.last
    assert nest.loops == (OUTER, INNER) and nest.plan is not None and nest.plan.arch == "sm_90a"
    assert nest.plan.machine.name == "h100"
    sch = tvm.s_tir.Schedule(mod)
    assert read_annotation(resolve_loop(sch, OUTER).node) == nest.plan.annotation
    assert "cannot read arch 'sm_90a'" in caplog.text and "schedules for 'sm_90'" in caplog.text
    assert "planned for 'sm_90a'" in caplog.text and "re-planned" in caplog.text
    assert "tvm_twill: loop" not in capfd.readouterr().err  # planned with quiet=True


def test_a_rule_that_writes_no_pipeline_says_so(caplog):
    rule = AutoPipelined(dl.gpu.Matmul())
    with caplog.at_level("INFO", logger="tvm_twill.dlight"):
        mod = dlight_gemm(64, 64, 64, arch="sm_80", rule=rule)  # at most 64: dlight does not tensorize
    assert rule.last == []
    assert tvm_ffi.structural_equal(mod, dlight_gemm(64, 64, 64, arch="sm_80"))
    assert "Matmul wrote no software pipeline for 'sm_80'" in caplog.text and "nothing to re-plan" in caplog.text
