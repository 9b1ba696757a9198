"""A MetaSchedule postprocessor that makes every software pipeline optimal.

MetaSchedule's tensor-core rule (``MultiLevelTilingTensorCore`` with
``use_software_pipeline=True``) writes fixed patterns such as stage
[0, 0, 3], order [0, 1, 2].  ``TwillPipeline()`` re-plans each annotated
loop nest with ``auto_pipeline`` for the tuning target::

    postprocs = [*ms.postproc.Postproc.create("cuda-tensorcore"), tvm_twill.metaschedule.TwillPipeline()]
    ms.tune_tir(mod, target, work_dir, max_trials_global, postprocs=postprocs, ...)

A loop nest that tvm_twill cannot plan (an unsupported loop, an infeasible
or timed-out solve) keeps the annotation it had, so the postprocessor never
rejects a candidate that MetaSchedule would have kept.
"""
from __future__ import annotations

from .api import auto_pipeline
from .errors import TwillError
from .frontend import annotated_pipeline_loops, read_annotation, resolve_loop
from .frontend.ir import meta_schedule_postproc_base
from .transforms import remove_annotation, restore_annotation

_PyPostproc, _derived_object = meta_schedule_postproc_base()


def replan_pipelines(sch, target, *, machine=None, time_limit: float = 10.0) -> list:
    """Replace every software-pipeline annotation of ``sch`` by auto_pipeline's.

    Loops nested in one another are planned together, innermost first.
    Returns the plans (a nest that could not be planned keeps its annotation
    and contributes no plan)."""
    refs = annotated_pipeline_loops(sch)
    nests: list[list] = []
    for ref in refs:  # outermost first: a loop joins the nest of its annotated ancestor
        nest = next((n for n in nests if any(a.same_as(n[0].node) for a in ref.ancestors)), None)
        if nest is None:
            nests.append([ref])
        else:
            nest.append(ref)
    plans = []
    for nest in nests:
        saved = [(r.name, read_annotation(r.node)) for r in nest]
        for r in nest:
            remove_annotation(sch, r.rv)
        try:
            loops = [r.name for r in nest]
            plans.append(auto_pipeline(sch, loops if len(loops) > 1 else loops[0], target, machine=machine,
                                       time_limit=time_limit))
        except TwillError:
            for name, ann in saved:  # a partly applied nest goes back to what it was
                restore_annotation(sch, resolve_loop(sch, name).rv, ann)
    return plans


@_derived_object
class TwillPipeline(_PyPostproc):
    """MetaSchedule postprocessor: optimal software_pipeline annotations for the tuning target."""

    def __init__(self, time_limit: float = 10.0, machine=None):
        super().__init__()
        self.time_limit = time_limit
        self.machine = machine
        self.target = None

    def _initialize_with_tune_context(self, context) -> None:
        self.target = context.target

    def apply(self, sch) -> bool:
        if self.target is None:
            raise TwillError("TwillPipeline has no target: use it inside a TuneContext (or call "
                             "tvm_twill.metaschedule.replan_pipelines(sch, target))")
        replan_pipelines(sch, self.target, machine=self.machine, time_limit=self.time_limit)
        return True

    def clone(self):
        return TwillPipeline(time_limit=self.time_limit, machine=self.machine)
