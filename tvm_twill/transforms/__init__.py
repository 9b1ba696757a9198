"""Schedule -> TIR: software-pipeline annotations for TVM's InjectSoftwarePipeline.

Pure Python (no TVM import): the functions act on the ``tvm.s_tir.Schedule``
object the caller passes in, so they are testable with a hand-written
Schedule and no solver.
"""
from .annotate import (ANNOTATION_KEYS, ASYNC_COPY_CONFIG, ASYNC_STAGES, ORDER, STAGE, AsyncWait,
                       Dependence, PipelineAnnotation, annotation_from_schedule, apply_annotation,
                       async_waits, buffer_versions, legality_violations, read_annotation, select_async_stages)

__all__ = ["ANNOTATION_KEYS", "ASYNC_COPY_CONFIG", "ASYNC_STAGES", "ORDER", "STAGE", "AsyncWait", "Dependence",
           "PipelineAnnotation", "annotation_from_schedule", "apply_annotation", "async_waits", "buffer_versions",
           "legality_violations", "read_annotation", "select_async_stages"]
