"""Every cp.async-capable copy in the async stage, or the reason it stays synchronous.

TVM makes at most one pipeline stage asynchronous per plan here
(``transforms.select_async_stages``: a consumer may wait on one async stage
only, and cp.async has one hardware queue).  When the optimal schedule puts
the loop's copies in different stages (copy A in stage 1, copy B in stage 0),
only one of them would become cp.async while the plan's timing assumes every
copy overlaps.  ``all_copies_async`` moves the copies into one stage when the
model says that costs nothing: the annotation stays legal, still reaches the
schedule's ii (``annotation_ii``, every rule of the model), keeps its async
copies contiguous and its buffer versions inside the block's shared memory.
``sync_copy_reasons`` says, for each capable copy still outside an async
stage, why; and for each copy that is not capable because TVM would lower
it to a wrong cp.async (a transposing or misaligned vector), that.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import InfeasibleError
from ..model import Placement, check
from ..model.pipeline import PipelineAnnotation
from .context import Candidate, PlanningContext
from .stages import shared_memory
from ..transforms import (annotation_ii, async_copies_first, async_copies_lead, async_stages_contiguous,
                         legality_violations, refine, select_async_stages, statement_deps)

__all__ = ["AsyncResult", "all_copies_async", "sync_copy_reasons"]


def _capable(ex) -> list[int]:
    return [s.index for s in ex.stmts if s.async_capable]


def _n_async(ann: PipelineAnnotation, cap) -> int:
    return sum(ann.stages[i] in ann.async_stages for i in cap)


def _reaches(g, ms, ann, ii) -> bool:
    try:
        annotation_ii(g, ms, ann, max_ii=ii)
        return True
    except InfeasibleError:
        return False


def _grouped_in_order(ann: PipelineAnnotation) -> PipelineAnnotation:
    """``ann`` with the async statements next to each other where the first of them was, keeping their order
    (``refine`` groups them in program order, which can cost ii when a long copy must issue first)."""
    seq = sorted(range(len(ann.orders)), key=lambda i: ann.orders[i])
    grouped = [i for i in seq if ann.stages[i] in ann.async_stages]
    if not grouped:
        return ann
    rest = [i for i in seq if i not in grouped]
    at = seq.index(grouped[0])
    new = rest[:at] + grouped + rest[at:]
    orders = [0] * len(new)
    for pos, i in enumerate(new):
        orders[i] = pos
    return replace(ann, orders=tuple(orders))


def _candidate(ctx: PlanningContext, plan: Candidate, t: int):
    """(annotation, times, ii) with every capable copy of ``plan`` in stage ``t``, or a string saying why not."""
    ex, ms, m, sched, ann, solved = (ctx.extraction, ctx.machine, ctx.full_machine, plan.schedule, plan.annotation,
                                     plan.solved_graph)
    cap = _capable(ex)
    stages = list(ann.stages)
    for i in cap:
        stages[i] = t
    asyncable = [s.async_capable for s in ex.stmts]
    cand = PipelineAnnotation(tuple(stages), ann.orders, select_async_stages(stages, ex.graph, asyncable))
    bad = legality_violations(cand, ex.graph)
    if bad:
        return f"it would break a dependence ({bad[0]})"
    g = solved or ex.graph
    if not _reaches(g, ms, cand, sched.ii):
        return (f"the model reaches no II up to {sched.ii * ex.quantum} cycles that way (latencies, units, registers, "
                "shared memory)")
    cand = refine(cand, ex.graph, ms, sched.ii, solved=solved)
    if not async_stages_contiguous(cand) or not async_copies_lead(cand, ex.graph):
        cand = _grouped_in_order(cand)
        if not async_copies_lead(cand, ex.graph):  # before the statements that read them (TVM's wait count)
            cand = async_copies_first(cand)
        if legality_violations(cand, ex.graph) or not _reaches(g, ms, cand, sched.ii):
            return "its copies could not be grouped next to each other at this II (TVM commits them as one group)"
    need = sum(b for _, b in shared_memory(ex, cand).values())
    if need > m.smem_bytes:
        return f"TVM's buffer versions would need {need} B of the {m.smem_bytes} B a block has"
    if _n_async(cand, cap) <= _n_async(ann, cap):
        return "no more of its copies would be asynchronous"
    ii, times, _ = annotation_ii(g, ms, cand, max_ii=sched.ii)
    return cand, times, ii


@dataclass(frozen=True)
class AsyncResult:
    """``all_copies_async``'s answer: the plan, and ``why_not``: stage -> why the capable copies could not all
    move there (``sync_copy_reasons`` says it per copy)."""

    candidate: Candidate
    why_not: dict[int, str]


def all_copies_async(ctx: PlanningContext, cand: Candidate) -> AsyncResult:
    """``cand`` with the capable copies in one async stage where the model allows it at the same II (its depth
    note saying so); ``cand`` unchanged otherwise, with the reasons.  ``ctx.machine``: the single-role machine
    the schedule was solved on; ``ctx.full_machine``: the target's (shared memory)."""
    ex, sched, ann = ctx.extraction, cand.schedule, cand.annotation
    cap = _capable(ex)
    missing = [i for i in cap if ann.stages[i] not in ann.async_stages]
    if not missing or ann.num_stages == 1:
        return AsyncResult(cand, {})
    why_not, best = {}, None
    for t in sorted({ann.stages[i] for i in cap}):
        found = _candidate(ctx, cand, t)
        if isinstance(found, str):
            why_not[t] = found
            continue
        key = (-_n_async(found[0], cap), sum(b for _, b in shared_memory(ex, found[0]).values()), t)
        if best is None or key < best[0]:
            best = (key, found)
    if best is None:
        return AsyncResult(cand, why_not)
    moved_ann, times, ii = best[1]
    g = cand.solved_graph or ex.graph
    ops = {op.name: Placement(time=times[op.name], stage=moved_ann.stages[i], order=moved_ann.orders[i], warp=0)
           for i, op in enumerate(g.ops)}
    s2 = replace(sched, ii=ii, ops=ops, length=max(times[n] + c for n, c in sched.cycles.items()), tie_breaks=())
    if check(s2, g, ctx.machine):  # pragma: no cover - annotation_ii's times satisfy the model's rules
        return AsyncResult(cand, why_not)
    moved = [ex.names[i] for i in cap if moved_ann.stages[i] != ann.stages[i]]
    note = (f"{cand.depth}; {', '.join(moved)} moved to stage {moved_ann.stages[cap[0]]} beside the other copies, "
            f"so that every cp.async-capable copy runs asynchronously (same II under the model)")
    return AsyncResult(replace(cand, schedule=s2, annotation=moved_ann, depth=note), why_not)


def _own_reason(i, ann, deps, ordered) -> str | None:
    """Why copy ``i`` cannot be asynchronous whatever stage it is in (None: it could be)."""
    if i in ordered:
        return ("a later statement overwrites its source or target, or a later iteration reads its result: "
                "asynchronous, it would race with them")
    if not any(a == i and b != i and dist == 0 and ann.stages[b] >= ann.stages[i] for a, b, dist in deps):
        return "no statement of the same iteration reads it at its stage or later, so TVM would not wait for it"
    return None


def sync_copy_reasons(ex, ann: PipelineAnnotation, why_not: dict | None = None) -> tuple[tuple[str, str], ...]:
    """``(copy, reason)`` for each cp.async-capable statement outside every async stage of ``ann``, and for
    each plain copy whose vectors cp.async cannot move as TVM lowers them (``StmtInfo.not_async``).
    ``why_not``: stage -> why the copies could not all move there (``AsyncResult.why_not``)."""
    why_not = why_not or {}
    deps = statement_deps(ex.graph, data_only=True)
    ordered = {ex.graph.index(e.src) for e in ex.graph.edges if e.kind == "order" or e.distance > 0}
    own = {i: _own_reason(i, ann, deps, ordered) for i in _capable(ex)}
    out = []
    for st in ex.stmts:
        i, s = st.index, ann.stages[st.index]
        if not st.async_capable:
            if st.not_async:  # a copy cp.async would get wrong (frontend/cp_async.py)
                out.append((ex.names[i], f"TVM would lower it to a wrong cp.async: {st.not_async}"))
            continue
        if s in ann.async_stages:
            continue
        mates = [j for j, sj in enumerate(ann.stages) if sj == s and j != i and own.get(j, "not a copy")]
        if ann.num_stages == 1:
            why = "the plan has one stage: nothing overlaps the copy, so it stays a plain copy"
        elif own[i]:
            why = own[i]
        elif mates:
            why = (f"stage {s} also runs {', '.join(ex.names[j] for j in mates)}, which cannot be asynchronous "
                   "(TVM makes every statement of an async stage asynchronous)")
        else:
            moves = "; ".join(f"to stage {t}: {w}" for t, w in sorted(why_not.items())) or "not tried"
            why = (f"TVM lets a statement wait on one async stage only ({list(ann.async_stages) or 'none'} here) and "
                   f"the copies could not share one: {moves}")
        out.append((ex.names[i], why))
    return tuple(out)
