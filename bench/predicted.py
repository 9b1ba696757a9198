"""The model's prediction of a GPU-suite kernel, as ``gpu_suite.py prepare`` writes it into a manifest.

``record(plan)`` is ``plan.prediction()`` (cycles per iteration, TFLOPS for the problem, the bound; see
``tvm_twill.planner.roofline``) with the machine model it is for and the flops per iteration the runners need to
count measured TFLOPS the same way.  A kernel that is not planned by ``auto_pipeline`` is evaluated as
compiled: ``serial(sch, loop, arch)`` for an unpipelined loop (every statement in stage 0, the original
order), ``annotated(sch, loop, arch)`` for a loop carrying its own (hand) annotation, both through
``tvm_twill.evaluate_annotation``.  ``registers``: ptxas's count per thread when nvcc is here (the model's
estimate otherwise; the evaluated kernels then assume the machine's per-thread maximum).
"""
from __future__ import annotations

import re

__all__ = ["annotated", "ptxas_registers", "record", "serial"]


def record(obj, registers: int | None = None, *, tensor_cores: bool = True) -> dict:
    """The manifest's ``prediction`` of a PipelinePlan or of an ``evaluate_annotation`` result.
    ``tensor_cores=False``: the kernel has no tensor-core instruction, so its FLOP run on the CUDA cores:
    the record adds their peak (``cuda_core_peak_tflops``) and a ``note`` when the prediction is above it."""
    from tvm_twill.planner.roofline import plan_prediction

    machine = obj.extraction.machine
    if hasattr(obj, "prediction"):
        p = obj.prediction(registers=registers)
        ws = obj.warp_specialization
        ii = ws.ii_ws_cycles if ws is not None and ws.chosen and obj.applied else obj.ii_cycles
    else:
        p = plan_prediction(obj.extraction, None, obj.ii_cycles, smem_bytes=obj.smem_bytes,
                            registers=registers or machine.regs_per_thread_max)
        ii = obj.ii_cycles
    out = {**p.to_dict(), "flops_per_iteration": p.flops_per_iteration, "ii_cycles": ii,
           "machine": machine.name, "registers": registers, "peak_tflops": round(p.peak_tflops, 1)}
    if not tensor_cores:
        c = machine.costs
        out["cuda_core_peak_tflops"] = peak = round(2 * c.fma_per_clock * c.sms * c.clock_ghz / 1e3, 1)
        if p.tflops > peak:
            out["note"] = (f"predicted {p.tflops:.0f} TFLOPS is above the {peak:.0f} TFLOPS of the CUDA cores this "
                           f"kernel runs on: the model costs its FMA loops as tensor-core GEMMs")
    return out


def annotated(sch, loop, arch: str):
    """``evaluate_annotation`` of the annotation already on ``loop``."""
    import tvm_twill

    return tvm_twill.evaluate_annotation(sch, loop, arch)


def serial(sch, loop, arch: str):
    """``evaluate_annotation`` of ``loop`` (a LoopRV of ``sch``) run unpipelined, on a copy of ``sch`` (``sch`` is left as it is)."""
    import tvm

    import tvm_twill
    from tvm_twill.frontend import extract_loop
    from tvm_twill.frontend.loops import loop_rv

    n = len(extract_loop(sch, loop, arch).stmts)
    copy = tvm.s_tir.Schedule(sch.mod)
    rv = loop_rv(copy, sch.get(loop))
    copy.annotate(rv, "software_pipeline_stage", [0] * n)
    copy.annotate(rv, "software_pipeline_order", list(range(n)))
    return tvm_twill.evaluate_annotation(copy, rv, arch)


def ptxas_registers(src: str, arch: str) -> int | None:
    """Registers per thread ptxas gives the kernel (the largest, if several; None without nvcc)."""
    from tvm_twill.compiler.sass import ptxas_report

    lines = ptxas_report(src, arch)
    found = [int(m[1]) for ln in lines or () for m in [re.search(r"Used (\d+) registers", ln)] if m]
    return max(found) if found else None
