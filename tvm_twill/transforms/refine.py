"""Refinements of a solved annotation that cost no initiation interval.

The solver's statement order is one of many equally good ones; these
rewrite it towards what TVM and nvcc handle best, keeping a candidate only
when it is legal and ``annotation_ii`` shows it still reaches the optimal ii.
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import InfeasibleError
from ..model.pipeline import PipelineAnnotation
from .annotate import legality_violations, statement_deps
from .evaluate import annotation_ii

__all__ = ["async_copies_lead", "async_copies_first", "wait_count_caveat", "async_stages_contiguous", "group_async_copies",
           "grouped_async_order", "prefer_program_order", "refine"]


def refine(ann: PipelineAnnotation, graph, machine, ii: int, *, solved=None) -> PipelineAnnotation:
    """``prefer_program_order`` then ``group_async_copies``: what ``auto_pipeline`` writes.

    ``graph``: the loop's dependences (legality); ``solved``: the graph the
    schedule was solved on when it carries extra constraints (a stage bound,
    ``planner.depth``), on which ``ii`` must still be reached.
    """
    kw = {"solved": solved}
    return group_async_copies(prefer_program_order(ann, graph, machine, ii, **kw), graph, machine, ii, **kw)


def _achieves(cand: PipelineAnnotation, graph, machine, ii: int, solved=None) -> bool:
    """Is ``cand`` legal for TVM and does it still reach ``ii`` under the model?"""
    if legality_violations(cand, graph):
        return False
    try:
        annotation_ii(solved or graph, machine, cand, max_ii=ii)  # the smallest ii it reaches is <= ii
        return True
    except InfeasibleError:
        return False


def prefer_program_order(ann: PipelineAnnotation, graph, machine, ii: int, *, solved=None) -> PipelineAnnotation:
    """Keep the statements in their program order when that costs no II.

    The solver's order is one of many equally good ones (it follows issue
    slots); the program order is what TVM's own annotations use and what nvcc
    handles best: on TVM's nested GEMM for sm_90a, the inner order
    ldmatrix A, mma, ldmatrix B (same stages, same model II) makes nvcc keep
    the warp fragments in a 2 KB local-memory stack frame, program order none.
    """
    cand = replace(ann, orders=tuple(range(len(ann.orders))))
    if cand == ann or not _achieves(cand, graph, machine, ii, solved):
        return ann
    return cand


def group_async_copies(ann: PipelineAnnotation, graph, machine, ii: int, *, solved=None) -> PipelineAnnotation:
    """Put the statements of the async stage next to each other, in program order, when that costs nothing.

    TVM commits one cp.async group per contiguous run of async statements;
    keeping the copies contiguous gives one group per iteration (the simplest
    wait counts, and it avoids TVM's wrong body count for interleaved copies,
    see ``transforms.async_waits``).  The new order is kept only if it is
    legal and still achieves ``ii`` (``annotation_ii``); otherwise the
    schedule's order stays.
    """
    cand = grouped_async_order(ann)
    if not async_copies_lead(cand, graph):
        cand = async_copies_first(cand)
    return cand if cand != ann and _achieves(cand, graph, machine, ii, solved) else ann


def async_stages_contiguous(ann: PipelineAnnotation) -> bool:
    """Whether the statements of each async stage are next to each other in the order (as TVM needs)."""
    for st in ann.async_stages:
        run = sorted(o for o, s in zip(ann.orders, ann.stages) if s == st)
        if run and run != list(range(run[0], run[0] + len(run))):
            return False
    return True


def async_copies_lead(ann: PipelineAnnotation, graph) -> bool:
    """Whether every statement that reads an async copy's data (a data dependence at distance 0) comes after
    that copy in the order.  TVM 0.27 counts the body's ``cp.async.wait_group`` as if it did: with the
    consumer first it waits for too few groups (TVM's nested GEMM, stages [0, 0, 3, 3, 3]: order [0, 1, 2,
    3, 4] gets 3, the count ``transforms.async_waits`` simulates; order [1, 2, 0, 3, 4] gets 4 where only 2
    groups are newer than the one the consumer reads, so it reads a copy still in flight)."""
    asyncs = set(ann.async_stages)
    return not any(dist == 0 and ann.stages[a] in asyncs and ann.orders[b] < ann.orders[a]
                   for a, b, dist in statement_deps(graph, data_only=True))


def wait_count_caveat(ann: PipelineAnnotation, graph) -> str | None:
    """A warning when ``ann`` orders a statement that reads an async copy before the copy: TVM 0.27 then
    emits a ``cp.async.wait_group`` count larger than ``transforms.async_waits`` simulates (what
    ``PipelinePlan.waits`` says), which ``transforms.wait_counts`` lowers when the plan compiles.  None
    otherwise."""
    if async_copies_lead(ann, graph):
        return None
    return (f"the order {list(ann.orders)} puts a statement that reads the cp.async copies of stage "
            f"{list(ann.async_stages)} before them, and no order with the copies first fits: TVM 0.27 counts that "
            "wait too high; the plan's pipeline lowers it to plan.waits (the wait guard: plan.tvm_waits), and "
            "TVM's default pipeline compiles these copies synchronously")


def async_copies_first(ann: PipelineAnnotation) -> PipelineAnnotation:
    """``ann`` with the statements of each async stage first in the order (in program order), the others
    after them in their order; legality is the caller's to check."""
    seq = sorted(range(len(ann.orders)), key=lambda i: ann.orders[i])
    copies = sorted(i for i in seq if ann.stages[i] in ann.async_stages)
    orders = [0] * len(seq)
    for pos, i in enumerate(copies + [i for i in seq if i not in copies]):
        orders[i] = pos
    return replace(ann, orders=tuple(orders))


def grouped_async_order(ann: PipelineAnnotation, at: str = "first") -> PipelineAnnotation:
    """``ann`` with the statements of each async stage next to each other, in program order, where the
    first of them was (``at="first"``) or where the last of them was (``at="last"``: the statements between
    them move before the group); ``ann`` itself when they already are; legality is the caller's to check."""
    for st in ann.async_stages:
        seq = sorted(range(len(ann.orders)), key=lambda i: ann.orders[i])
        copies = sorted(i for i in seq if ann.stages[i] == st)  # in program order, as a person writes them
        if at == "first":
            first = min(seq.index(c) for c in copies)
            new_seq = seq[:first] + copies + [i for i in seq[first:] if i not in copies]
        else:
            last = max(seq.index(c) for c in copies)
            new_seq = [i for i in seq[:last + 1] if i not in copies] + copies + seq[last + 1:]
        orders = [0] * len(seq)
        for pos, i in enumerate(new_seq):
            orders[i] = pos
        ann = replace(ann, orders=tuple(orders))
    return ann
