"""TIR front-end: s_tir loops -> tvm_twill dependence graphs.

This subpackage is the only place that imports TVM's moving namespaces
(``tvm.s_tir``, ``tvm.tirx``); everything TVM-version specific lives in
``tir.py``.
"""
from .tir import (DEFAULT_QUANTUM, DRAM_LATENCY_CYCLES, Extraction, KernelInfo, LoopRef, StmtInfo,
                  compile_cuda, extract_loop, inject_pipeline, kernel_info, machine_for, parse_target,
                  pipeline_prefix_passes, resolve_loop, scratch_schedule, TVM_HAND_ANNOTATIONS, tensorcore_gemm)

__all__ = ["DEFAULT_QUANTUM", "DRAM_LATENCY_CYCLES", "Extraction", "KernelInfo", "LoopRef", "StmtInfo",
           "compile_cuda", "extract_loop", "inject_pipeline", "kernel_info", "machine_for", "parse_target",
           "pipeline_prefix_passes", "resolve_loop", "scratch_schedule", "TVM_HAND_ANNOTATIONS", "tensorcore_gemm"]
