"""The K best annotations of a loop: ``auto_pipeline(..., top_k=K)``.

A one-role software pipeline is written as each statement's stage and order
(plus the async stages): two schedules with the same annotation are the same
kernel.  So the alternatives of a plan are the next best schedules of the
solve (``solve(..., top_k=...)``, distinct up to renaming, in order of ii
and the tie-break; docs/formats.md, "The K best schedules") turned into
annotations as the plan's own is, keeping each distinct annotation that TVM
can run as it is: legal for the dependences, async copies next to each
other, within the stage bound and the block's shared memory, at an ii no
smaller than the plan's (when fitting the stages or shared memory made the
plan's ii grow, a faster schedule that breaks those limits is left out).  They are not
written on the loop; ``TwillPipeline(top_k=K)`` (``metaschedule``) samples
one of them, or the plan's, for each tuning candidate.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..model import Schedule
from ..model.canonical import MAX_TOP_K
from ..model.pipeline import PipelineAnnotation
from .stages import shared_overflow
from ..transforms import (
    annotation_from_schedule,
    async_copies_lead,
    async_stages_contiguous,
    legality_violations,
    refine,
)
from .context import Candidate, PlanningContext
from .depth import DEFAULT_MAX_STAGES, default_max_stages

#: Schedules asked of the solver per annotation wanted (many schedules share an annotation).
SCHEDULES_PER_ANNOTATION = 4


@dataclass(frozen=True)
class PlanAlternative:
    """The ``rank``-th best annotation (the plan's own is the 1st): its schedule and how it differs."""

    rank: int
    schedule: Schedule
    annotation: PipelineAnnotation
    ii_cycles: int
    difference: str

    @property
    def annotations(self) -> dict:
        """The loop annotations, ``{key: [int, ...]}``, as ``sch.annotate`` takes them."""
        return self.annotation.to_dict()


def schedules_wanted(top_k: int) -> int:
    """How many schedules to ask the solver for, for ``top_k`` annotations."""
    return min(MAX_TOP_K, SCHEDULES_PER_ANNOTATION * top_k) if top_k > 1 else 1


def _key(ann: PipelineAnnotation) -> tuple:
    return (tuple(ann.stages), tuple(ann.orders), tuple(ann.async_stages))


def plan_alternatives(ctx: PlanningContext, plan: Candidate,
                      schedules: Sequence[Schedule]) -> tuple[PlanAlternative, ...]:
    """Up to ``ctx.options.top_k - 1`` alternatives to ``plan``'s annotation from ``schedules`` (in rank order;
    module docstring), within ``ctx.options.max_stages`` (or the default bound) and the shared memory of
    ``ctx.full_machine``; ``ctx.machine``: the single-role machine they were solved on."""
    ex, ms, m, top_k, max_stages = ctx.extraction, ctx.machine, ctx.full_machine, ctx.options.top_k, \
        ctx.options.max_stages
    best, best_ann = plan.schedule, plan.annotation
    graph = ex.graph
    cap = max_stages if max_stages is not None else \
        default_max_stages(DEFAULT_MAX_STAGES if ex.trip_count is None else ex.trip_count)
    asyncable = [s.async_capable for s in ex.stmts]
    seen = {_key(best_ann)}
    out: list[PlanAlternative] = []
    for s in schedules:
        if len(out) >= top_k - 1:
            break
        if s.ii < best.ii:  # the plan's own ii grew to fit (stages, shared memory): keep the order by ii
            continue
        ann = refine(annotation_from_schedule(s, graph, asyncable, allow_async=True), graph, ms, s.ii)
        if _key(ann) in seen or ann.num_stages > cap or legality_violations(ann, graph) \
                or not async_stages_contiguous(ann) or not async_copies_lead(ann, graph) \
                or shared_overflow(ex, ann, m) > 0:
            continue
        seen.add(_key(ann))
        out.append(PlanAlternative(rank=len(out) + 2, schedule=s, annotation=ann, ii_cycles=s.ii * ex.quantum,
                                   difference=difference(ex, best.ii * ex.quantum, best_ann, s.ii * ex.quantum, ann)))
    return tuple(out)


def difference(ex, ii_a: int, a: PipelineAnnotation, ii_b: int, b: PipelineAnnotation) -> str:
    """How annotation ``b`` (at ``ii_b`` cycles) differs from ``a``: ii, stages, order, async stages."""
    names = [st.name for st in ex.stmts]
    parts = ["ii same" if ii_a == ii_b else f"ii {ii_a}\u2192{ii_b} cycles"]
    parts += [f"stage of {n} {x}\u2192{y}" for n, x, y in zip(names, a.stages, b.stages) if x != y]

    def order(ann):
        return [n for _, n in sorted(zip(ann.orders, names))]
    if order(a) != order(b):
        parts.append(f"order {', '.join(order(a))} \u2192 {', '.join(order(b))}")
    if tuple(a.async_stages) != tuple(b.async_stages):
        parts.append(f"async stages {list(a.async_stages)}\u2192{list(b.async_stages)}")
    return ", ".join(parts)
