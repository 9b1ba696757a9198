"""Schedule -> TIR (TVM out): software-pipeline annotations for TVM's InjectSoftwarePipeline.

* ``annotate``  stage/order/async stages from a ``Schedule``, TVM's legality rules, buffer
                versions, the cp.async wait counts, writing the annotation on a schedule
* ``evaluate``  the initiation interval a fixed annotation achieves under the model
* ``refine``    order rewrites that cost no ii (program order, contiguous async copies)

The annotation modules are pure Python over the model: the functions act on
the ``tvm.s_tir.Schedule`` the caller passes in, so they are testable with
hand-written graphs.  ``warp_specialize`` (the driver of the ``ws_*`` passes) /
``ws_lowering`` (+ ``ws_compiled``, the protocol check of the final TIR) rewrite lowered TIR (TVM through ``frontend.ir``; shared helpers
in ``tir_util``) and are imported by name, not re-exported;
so is ``sass`` (pure text: the role dispatch of a compiled WS kernel in its SASS).
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
