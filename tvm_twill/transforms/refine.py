"""Refinements of a solved annotation that cost no initiation interval.

The solver's statement order is one of many equally good ones; these
rewrite it towards what TVM and nvcc handle best, keeping a candidate only
when it is legal and ``annotation_ii`` shows it still reaches the optimal ii.
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import InfeasibleError
from ..model.pipeline import PipelineAnnotation
from .annotate import legality_violations
from .evaluate import annotation_ii

__all__ = ["async_stages_contiguous", "group_async_copies", "grouped_async_order", "prefer_program_order",
           "refine"]


def refine(ann: PipelineAnnotation, graph, machine, ii: int, *, solved=None) -> PipelineAnnotation:
    """``prefer_program_order`` then ``group_async_copies``: what ``auto_pipeline`` writes.

    ``graph``: the loop's dependences (legality); ``solved``: the graph the
    schedule was solved on when it carries extra constraints (a stage bound,
    ``transforms.depth``), on which ``ii`` must still be reached.
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
    return cand if cand != ann and _achieves(cand, graph, machine, ii, solved) else ann


def async_stages_contiguous(ann: PipelineAnnotation) -> bool:
    """Whether the statements of each async stage are next to each other in the order (as TVM needs)."""
    for st in ann.async_stages:
        run = sorted(o for o, s in zip(ann.orders, ann.stages) if s == st)
        if run and run != list(range(run[0], run[0] + len(run))):
            return False
    return True


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
