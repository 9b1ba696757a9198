"""``PipelinePlan.with_ptxas``: a wgmma serialization ptxas reports reaches the prediction and explain()."""
import shutil

import pytest

pytest.importorskip("tvm")

import tvm

from tvm_twill.api import auto_pipeline
from tvm_twill.errors import InputError, ToolchainError
from tvm_twill.kernels import KV_LOOP, AttentionShape, fa_forward
from tvm_twill.compiler.ptxas import parse_ptxas

SERIALIZED = ("ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized "
              "due to non wgmma instructions reading accumulator registers of  a wgmma between start and end of "
              "the pipeline stage in the function 'k'\n")
INJECTED = ("ptxas info    : (C7517) warpgroup.wait is injected in around line 87 by compiler to allow use of "
            "registers defined by GMMA in function 'k'\n")


@pytest.fixture(scope="module")
def plan():
    """The attention KV loop on sm_90a: GEMMs (TC), exp (SFU) and the softmax bookkeeping (ALU), which the
    schedule overlaps (the two GEMM blocks marked for tensorizing, as MetaSchedule's rule marks them)."""
    sch = tvm.s_tir.Schedule(fa_forward(AttentionShape()))
    for gemm in ("S", "O"):
        sch.annotate(sch.get_sblock(gemm), "meta_schedule.auto_tensorize", "wgmma")
    return auto_pipeline(sch, KV_LOOP, "sm_90a")


def test_serialized_wgmma_runs_the_compute_back_to_back(plan):
    ex, q = plan.extraction, plan.quantum
    # by hand: every statement that is not an async copy (TMA), one after another
    serial = sum(ex.graph.ops[st.index].cycles * q for st in ex.stmts if "TMA" not in st.units)
    assert serial > plan.ii_cycles  # the schedule overlaps them; otherwise this test shows nothing
    before = plan.prediction()
    after = plan.with_ptxas(SERIALIZED).prediction()
    assert before.terms["latency"] == plan.ii_cycles and after.terms["latency"] == serial
    assert after.cycles_per_iteration >= before.cycles_per_iteration
    text = plan.with_ptxas(parse_ptxas(INJECTED + SERIALIZED)).explain()
    assert "\nptxas C7514: wgmma serialized in 'k' due to non wgmma instructions reading" in text
    assert f"{plan.ii_cycles} -> {serial} cycles per iteration" in text and "Not re-solved" in text
    assert "\nptxas C7517: wait injected near PTX line 87 in 'k'\n" in text
    assert "ptxas" not in plan.explain()  # nothing said before ptxas spoke


def test_without_serialization_nothing_changes(plan):
    p = plan.with_ptxas(INJECTED)
    assert p.prediction() == plan.prediction()
    assert "ptxas: no wgmma serialization reported" in p.explain()


def test_with_ptxas_takes_one_input(plan):
    with pytest.raises(InputError, match="takes ptxas's messages or the kernel's CUDA source"):
        plan.with_ptxas()
    with pytest.raises(InputError, match="takes ptxas's messages or the kernel's CUDA source"):
        plan.with_ptxas(SERIALIZED, source="...")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (CUDA toolkit)")
def test_with_ptxas_compiles_a_source(plan):
    with pytest.raises(ToolchainError, match="nvcc -arch=sm_90a failed on the kernel"):
        plan.with_ptxas(source="not CUDA")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (CUDA toolkit)")
@pytest.mark.parametrize("ws", [True, False])
def test_the_wgmma_gemm_ptxas_keeps_overlapped(ws):
    """The project's own wgmma kernels, as tvm_twill.build compiles them: ptxas serializes none of them (nvcc 13.0),
    so the plan keeps its prediction and says it asked."""
    import tvm_twill
    from tvm_twill.workloads import wgmma_gemm
    sch, k0, _ = wgmma_gemm(1024)
    plan = auto_pipeline(sch, [k0], "sm_90a", warp_specialize=ws)
    src = tvm_twill.build(sch.mod, "sm_90a", plan).mod.imports[0].inspect_source()
    checked = plan.with_ptxas(source=src)
    assert "wgmma.mma_async" in src and checked.ptxas is not None
    assert [m.text for m in checked.ptxas if m.kind == "wgmma serialized"] == []
    # the schedule's overlap stands (same latency term); only the registers are ptxas's now
    assert checked.prediction().terms["latency"] == plan.prediction().terms["latency"]
    assert checked.prediction(registers=64) == plan.prediction(registers=64)
    assert "ptxas: no wgmma serialization reported" in checked.explain()


# -- ptxas's registers set the occupancy; build_checked asks ptxas on its own --------------------------
from tvm_twill.model.throughput import occupancy  # noqa: E402
from tvm_twill.compiler.ptxas import kernel_registers, ptxas_output  # noqa: E402


def _used(registers: int) -> str:
    return (f"ptxas info    : Compiling entry function 'main_kernel' for 'sm_90a'\n"
            f"ptxas info    : Used {registers} registers, used 1 barriers\n")


def test_ptxas_registers_set_the_ctas_per_sm(plan):
    chip, threads = plan.machine.costs.chip, plan.extraction.threads or 32
    for regs in (64, 255):
        p = plan.with_ptxas(_used(regs))
        want = occupancy(chip, threads=threads, regs_per_thread=regs, smem_bytes=plan.smem_bytes)
        assert p.ptxas_registers == regs and p.prediction().ctas_per_sm == want.ctas
        assert p.prediction() == plan.prediction(registers=regs)
        assert f"ptxas: {regs} registers per thread; the prediction's CTAs per SM use ptxas's figure" in p.explain()
    assert plan.with_ptxas(SERIALIZED).ptxas_registers is None  # no entry function named: the model's estimate
    assert "no register count for this loop's kernel" in plan.with_ptxas(SERIALIZED).explain()
    with pytest.raises(InputError, match="registers must be ptxas's registers per thread, an integer from 1 to 255"):
        plan.with_ptxas(SERIALIZED, registers=300)


@pytest.fixture(scope="module")
def ws_gemm():
    from tvm_twill.workloads import wgmma_gemm
    sch, k0, _ = wgmma_gemm(1024)
    return sch, auto_pipeline(sch, [k0], "sm_90a", warp_specialize=True)


def test_build_checked_without_nvcc_is_build(ws_gemm, monkeypatch):
    import tvm_twill
    import tvm_twill.compiler as C
    sch, plan = ws_gemm
    monkeypatch.setattr(C, "find_nvcc", lambda: None)
    lib, same = tvm_twill.build_checked(sch.mod, "sm_90a", plan)
    assert same is plan and same.ptxas is None and same.ptxas_registers is None
    assert (lib.mod.imports[0].inspect_source()
            == tvm_twill.build(sch.mod, "sm_90a", plan).mod.imports[0].inspect_source())


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (CUDA toolkit)")
def test_build_checked_reprices_the_plan_with_ptxas(ws_gemm):
    import tvm_twill
    sch, plan = ws_gemm
    lib, (checked,) = tvm_twill.build_checked(sch.mod, "sm_90a", [plan])
    regs = kernel_registers(ptxas_output(lib.mod.imports[0].inspect_source(), "sm_90a"))["main_kernel"]
    assert checked is not plan and plan.ptxas is None  # the given plan is left as it was
    assert checked.ptxas is not None and checked.ptxas_registers == regs
    # a warp-specialized CTA (a producer warp group + the consumers) is given ptxas's count per thread at
    # launch; setmaxnreg only moves registers between its warps
    threads = plan.extraction.threads + 128
    want = occupancy(plan.machine.costs.chip, threads=threads, regs_per_thread=regs,
                     smem_bytes=plan.warp_specialization.facts.shared_bytes)
    assert checked.prediction().ctas_per_sm == want.ctas
    assert f"ptxas: {regs} registers per thread; the prediction's CTAs per SM use ptxas's figure" in checked.explain()
