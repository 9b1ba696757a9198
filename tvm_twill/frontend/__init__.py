"""TIR front-end: s_tir loops -> tvm_twill dependence graphs (TVM in).

One module per concern, each importing TVM's namespaces only through ``ir``:

* ``ir``        the TVM 0.27 namespaces and small IR views (the one place a rename lands)
* ``target``    target and machine-model selection
* ``loops``     finding loops, the statements InjectSoftwarePipeline sees, existing annotations
* ``costs``     classification and cost of each statement (units, cycles, latency, footprints)
* ``extract``   ``extract_loop``: statements -> ``Graph`` (ops and dependence edges)
* ``lowering``  TVM's passes and ``tvm.compile`` (checks, tests, benchmarks)
"""
from .costs import DEFAULT_QUANTUM, DRAM_LATENCY_CYCLES, StmtInfo
from .extract import Extraction, extract_loop
from .loops import LoopRef, annotated_pipeline_loops, read_annotation, resolve_loop, scratch_schedule
from .lowering import (ASYNC_COPY_CONFIG, KernelInfo, compile_cuda, inject_pipeline, kernel_info,
                       pipeline_prefix_passes)
from .target import machine_for, parse_target

__all__ = ["ASYNC_COPY_CONFIG", "DEFAULT_QUANTUM", "DRAM_LATENCY_CYCLES", "Extraction", "KernelInfo", "LoopRef",
           "StmtInfo", "annotated_pipeline_loops", "compile_cuda", "extract_loop", "inject_pipeline", "kernel_info",
           "machine_for", "parse_target", "pipeline_prefix_passes", "read_annotation", "resolve_loop",
           "scratch_schedule"]
