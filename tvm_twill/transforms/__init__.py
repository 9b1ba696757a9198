"""Schedule -> TIR (TVM out): software-pipeline annotations, and the TIR passes tvm_twill adds to TVM's pipelines.

``annotate``, ``evaluate`` and ``refine`` (re-exported here) are pure Python over the model: the annotation
of a ``Schedule``, the ii a fixed annotation achieves, order rewrites that cost no ii.  ``pipelines`` defines
every tvm_twill TIR pipeline as TVM's pass list with our passes at named anchors; the passes live in their
own modules (``swp_lowering``, ``wait_counts``, ``proxy_fence``, ...) and ``ws/`` (the warp-specialization
rewrite), which are imported by name.  docs/transforms.md, docs/ws-rewrite.md.
"""
from .annotate import (AsyncWait, annotation_from_schedule, apply_annotation, async_waits, buffer_versions,
                       legality_violations, remove_annotation, restore_annotation, select_async_stages,
                       statement_deps)
from .evaluate import annotation_ii
from .refine import (async_copies_first, async_copies_lead, async_stages_contiguous, group_async_copies,
                     grouped_async_order, prefer_program_order, refine, wait_count_caveat)

__all__ = ["AsyncWait", "annotation_from_schedule", "annotation_ii", "apply_annotation", "async_copies_first",
           "async_copies_lead", "async_stages_contiguous",
           "async_waits", "buffer_versions", "group_async_copies", "grouped_async_order", "legality_violations",
           "prefer_program_order", "refine", "remove_annotation", "restore_annotation", "select_async_stages",
           "statement_deps", "wait_count_caveat"]
