"""TIR front-end: s_tir loops -> tvm_twill dependence graphs (TVM in).

One module per concern, each importing TVM's namespaces only through ``ir``:

* ``ir``        the TVM 0.27 namespaces and small IR views (the one place a rename lands)
* ``target``    target and machine-model selection
* ``loops``     finding loops and pipeline nests, existing annotations, register-staged copies
* ``costs``     classification and cost of each statement (units, cycles, latency, footprints)
* ``stmt_info`` what was found in one statement (``StmtInfo``) and its copies' traffic
* ``extract``   ``extract_loop``: the statements InjectSoftwarePipeline sees -> ``Graph``
* ``opaque``    opaque blocks, explicit barriers and let-bindings (TVM's LLM kernels)
* ``lowering``  TVM's passes (the loop as InjectSoftwarePipeline sees it) and ``tvm.compile``

and the analyses ``extract`` and ``opaque`` use (``classify``, ``cp_async``, ``hazards``, ``views``,
``invariant``, ``uniform``): docs/frontend.md.
"""
from .costs import DEFAULT_QUANTUM, DRAM_LATENCY_CYCLES, StmtInfo
from .extract import Extraction, extract_loop
from .loops import (LoopRef, annotated_pipeline_loops, local_stage_blocks, loop_rv, pipeline_nests, read_annotation,
                    resolve_loop, schedule_loops, scratch_schedule)
from .lowering import (ASYNC_COPY_CONFIG, KernelInfo, compile_cuda, inject_pipeline, kernel_info, lower_to_pipeline,
                       pipeline_prefix_passes)
from .target import dlight_arch, dlight_target, machine_for, parse_target

__all__ = ["ASYNC_COPY_CONFIG", "DEFAULT_QUANTUM", "DRAM_LATENCY_CYCLES", "Extraction", "KernelInfo", "LoopRef",
           "StmtInfo", "annotated_pipeline_loops", "compile_cuda", "dlight_arch", "dlight_target", "extract_loop",
           "inject_pipeline", "kernel_info",
           "local_stage_blocks", "loop_rv", "lower_to_pipeline", "machine_for", "parse_target", "pipeline_nests",
           "pipeline_prefix_passes", "read_annotation", "resolve_loop", "schedule_loops", "scratch_schedule"]
