"""How deep a software pipeline is: the stage bound, the async copies grouped as TVM needs, and the fit in
shared memory as TVM allocates it (stage distance + 1 versions of each shared buffer).

``auto_pipeline`` (``api``) solves a loop, turns the schedule into an annotation, then calls ``fit_shared``:
``bound_depth`` re-solves with every pair of dependent statements within ``max_stages`` stages when the
optimum needs more (``planner.depth``); ``contiguous_async`` puts each async stage's copies next to each
other (TVM commits them as one cp.async group); and when TVM's buffer versions of the result exceed the
block's shared memory (the solver's memory rule counts live values, which the versions can exceed), the
plans that fit are sought by re-solving with the memory rule tightened and with every smaller stage bound,
the smallest ii winning.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import InfeasibleError, UnsupportedLoopError
from ..frontend import Extraction
from ..model import Machine, Placement, check
from ..model.pipeline import PipelineAnnotation
from ..transforms import (annotation_from_schedule, annotation_ii, async_copies_first, async_copies_lead,
                         async_stages_contiguous, buffer_versions, grouped_async_order, legality_violations, refine)
from .context import Candidate, PlanningContext
from .depth import DEFAULT_MAX_STAGES, bound_stages, default_max_stages

__all__ = ["DYNAMIC", "FIT_ROUNDS", "FitResult", "STATIC", "STATIC_SMEM_BYTES", "SharedFit", "bound_depth",
           "contiguous_async", "fit_shared", "other_shared", "shared_by_scope", "shared_limits", "shared_memory", "shared_overflow",
           "shared_summary"]

#: Re-solves with a tightened shared-memory rule when TVM's buffer versions overflow (``fit_shared``).
FIT_ROUNDS = 6
#: What ``fit_shared`` adds to the depth explanation when it chose a plan for shared memory (prose only: the
#: decision itself is the ``FitResult.shared_fit`` it returns).
_FIT_NOTE = "; shared memory: TVM's "
#: Static shared memory (``__shared__`` arrays, TVM scope "shared") a kernel may declare on every arch
#: from sm_70 on: ptxas refuses more ("uses too much shared data ... 0xc000 max").  Only the dynamic pool
#: ("shared.dyn", sized at launch) may go up to the arch's opt-in maximum, the machine model's
#: ``smem_bytes``.
STATIC_SMEM_BYTES = 48 * 1024
#: The two kinds of shared memory TVM emits: "shared" (static arrays), "shared.dyn" (the dynamic pool).
STATIC, DYNAMIC = "shared", "shared.dyn"


@dataclass(frozen=True)
class SharedFit:
    """``fit_shared``'s decision when TVM's buffer versions of the first plan exceed a shared-memory limit.

    ``stages`` / ``needed``: that plan's stage count and the bytes its buffer versions need.
    ``fitted_stages``: the stage count of the plan chosen in its place (the smallest ii that fits); None
    when the kernel's other shared buffers alone exceed the limit, so that nothing this loop does fits and
    the first plan is kept.
    """

    stages: int
    needed: int
    fitted_stages: int | None


def _scope(ex: Extraction, buf: str) -> str:
    """STATIC or DYNAMIC: where TVM puts ``buf`` (a scope tag such as "shared.dyn" counts as dynamic)."""
    scope = next((st.smem_scopes[buf] for st in ex.stmts if buf in st.smem_scopes), STATIC)
    return DYNAMIC if scope.startswith(DYNAMIC) else STATIC


def shared_memory(ex: Extraction, ann: PipelineAnnotation) -> dict:
    """buffer -> (versions, bytes) for the shared buffers written in the loop (TVM's versioning)."""
    versions = buffer_versions(ann, [s.writes for s in ex.stmts], [s.reads for s in ex.stmts], ex.double_buffered,
                               ex.versioned)
    per_iter: dict = {}
    for st in ex.stmts:
        for buf, nbytes in st.smem_writes.items():
            per_iter[buf] = max(per_iter.get(buf, 0), nbytes)
    return {buf: (versions.get(buf, 1), versions.get(buf, 1) * n) for buf, n in per_iter.items()}


def other_shared(ex: Extraction, ann: PipelineAnnotation) -> dict:
    """buffer -> (STATIC or DYNAMIC, bytes): the kernel's shared buffers the loop does not write (one copy
    each: TVM does not version them), such as a tile loaded once before the loop.  Every static one (each
    is a ``__shared__`` array of its own); a dynamic one only when the loop reads it: TVM's
    MergeSharedMemoryAllocations lets dynamic buffers whose lifetimes do not meet share bytes (an epilogue's
    staging tile reuses the loop's tiles)."""
    mine, read = shared_memory(ex, ann), {b for st in ex.stmts for b in st.reads}
    out = {}
    for name, scope, nbytes in ex.kernel_smem:
        kind = DYNAMIC if scope.startswith(DYNAMIC) else STATIC
        if name not in mine and (kind == STATIC or name in read):
            out[name] = (kind, nbytes)
    return out


def shared_by_scope(ex: Extraction, ann: PipelineAnnotation) -> dict:
    """{STATIC: bytes, DYNAMIC: bytes}: the kernel's shared memory by where it lives: the loop's shared
    buffers (all TVM's versions) and the kernel's other shared buffers (``other_shared``)."""
    out = {STATIC: 0, DYNAMIC: 0}
    for buf, (_, nbytes) in shared_memory(ex, ann).items():
        out[_scope(ex, buf)] += nbytes
    for scope, nbytes in other_shared(ex, ann).values():
        out[scope] += nbytes
    return out


def shared_limits(m) -> dict:
    """{STATIC: static limit, DYNAMIC: the block's total}: static arrays are capped at ``STATIC_SMEM_BYTES``
    (or less on a machine with less), static and dynamic together at the machine's ``smem_bytes``."""
    return {STATIC: min(STATIC_SMEM_BYTES, m.smem_bytes), DYNAMIC: m.smem_bytes}


def shared_overflow(ex: Extraction, ann: PipelineAnnotation, m) -> int:
    """Bytes by which the loop's buffers exceed a limit (static over ``STATIC_SMEM_BYTES``, or static +
    dynamic over the block's ``smem_bytes``); 0 or less when they fit."""
    used, cap = shared_by_scope(ex, ann), shared_limits(m)
    return max(used[STATIC] - cap[STATIC], used[STATIC] + used[DYNAMIC] - cap[DYNAMIC])


def _over(ex: Extraction, ann: PipelineAnnotation, m) -> str:
    """Which limit ``ann``'s buffers exceed, in words."""
    used, cap = shared_by_scope(ex, ann), shared_limits(m)
    if used[STATIC] > cap[STATIC]:
        return (f"more than the {cap[STATIC]} B of static shared memory (__shared__ arrays, scope 'shared', "
                f"{used[STATIC]} B here) a kernel may declare")
    return f"more than the {cap[DYNAMIC]} B a block has"


def shared_summary(ex: Extraction, ann: PipelineAnnotation, m) -> str:
    """One phrase per kind of shared memory the loop uses, with its limit (``explain`` and ``fit_shared``)."""
    used, cap = shared_by_scope(ex, ann), shared_limits(m)
    parts = []
    if used[STATIC]:
        parts.append(f"static (__shared__) {used[STATIC]} B of the {cap[STATIC]} B a kernel may declare")
    if used[DYNAMIC] or not parts:
        parts.append(f"dynamic {used[DYNAMIC]} B" + (f" + static {used[STATIC]} B" if used[STATIC] else "")
                     + f" of the {cap[DYNAMIC]} B a block has")
    return "; ".join(parts)


def contiguous_async(ctx: PlanningContext, cand: Candidate) -> Candidate:
    """``cand`` with the copies of each async stage next to each other in the order.

    TVM commits an async stage's copies as one cp.async group: interleaved with other statements it
    miscounts the waits (``transforms.async_waits``) or, in a nested pipeline, rejects the loop
    ("Predicates in the same stage are expected to be identical"); it also miscounts the body's wait when a
    statement that reads the copies comes before them in the order (``transforms.async_copies_lead``), so
    an order with the group before its readers is preferred when one fits (else ``wait_count_caveat`` warns).  ``refine`` groups them when that
    costs no ii; otherwise they are grouped here at the ii the grouped order reaches (no longer optimal;
    beyond twice the optimum the loop is refused).  ``ctx.machine``: the machine ``cand`` was solved on.
    """
    ex, ms, sched, ann = ctx.extraction, ctx.machine, cand.schedule, cand.annotation
    if async_stages_contiguous(ann) and async_copies_lead(ann, ex.graph):
        return cand
    g = cand.solved_graph or ex.graph
    best, bad, family = None, None, None
    # the group where its first member was, where its last was, or first of all.  Candidates whose copies come
    # before the statements that read them win (TVM miscounts the other's wait: async_copies_lead), then the
    # smaller ii
    for grouped in (grouped_async_order(ann, "first"), grouped_async_order(ann, "last"), async_copies_first(ann)):
        violations = legality_violations(grouped, ex.graph)
        if violations:
            bad = bad or violations[0]
            continue
        try:  # at most twice the optimum: beyond that the grouped order is not worth planning
            ii, times, _ = annotation_ii(g, ms, grouped, max_ii=2 * sched.ii)
        except InfeasibleError as err:
            family = err.family
            continue
        key = (not async_copies_lead(grouped, ex.graph), ii)
        if best is None or key < best[0]:
            best = (key, times, grouped)
    if best is not None and best[2] == ann:  # already one group, and no order with the copies first fits
        return cand
    if best is None and family is None:
        raise UnsupportedLoopError(f"loop '{ex.loop}': the copies of async stage {list(ann.async_stages)} cannot "
                                   f"run next to each other (as TVM needs) without breaking a dependence: {bad}")
    if best is None:
        raise UnsupportedLoopError(
            f"loop '{ex.loop}': the optimum interleaves the copies of async stage {list(ann.async_stages)} with "
            f"other statements, which TVM cannot lower, and grouped they fit no II up to twice the optimum "
            f"{sched.ii * ex.quantum} cycles under the model ({family})")
    (_, ii), times, grouped = best
    ops = {op.name: Placement(time=times[op.name], stage=grouped.stages[i], order=grouped.orders[i], warp=0)
           for i, op in enumerate(g.ops)}
    s2 = replace(sched, ii=ii, ops=ops, length=max(times[n] + c for n, c in sched.cycles.items()), optimal=False,
                 tie_breaks=())
    bad = check(s2, g, ms)
    if bad:  # pragma: no cover - annotation_ii's times satisfy the model's rules
        raise UnsupportedLoopError(f"loop '{ex.loop}': grouping the async copies breaks the model: {bad[0]}")
    return replace(cand, schedule=s2, annotation=grouped, depth=(
        f"{cand.depth}; the copies of async stage {list(ann.async_stages)} are grouped next to each other "
        f"as TVM needs, at II {ii * ex.quantum} cycles (the optimum {sched.ii * ex.quantum} interleaves them)"))


@dataclass(frozen=True)
class FitResult:
    """``fit_shared``'s answer: the plan, and ``shared_fit`` the decision when TVM's buffer versions of the first
    plan exceeded a shared-memory limit (None: the plan was not chosen for shared memory)."""

    candidate: Candidate
    shared_fit: SharedFit | None = None


@dataclass(frozen=True)
class _Try:
    """One plan ``fit_shared`` weighs: its ii, the bytes of its buffer versions, by how much they overflow."""

    ii: int
    need: int
    overflow: int
    candidate: Candidate


def _annotate(ctx: PlanningContext, cand: Candidate, cap: int | None) -> Candidate:
    """``bound_depth`` (within ``cap`` stages, or the options' bound) then ``contiguous_async``."""
    if cap is not None:
        ctx = replace(ctx, options=ctx.options.replace(max_stages=cap))
    bounded = bound_depth(ctx, cand, why=None if cap is None else "the block's shared memory")
    return contiguous_async(ctx, bounded)


def _need(ex: Extraction, ann: PipelineAnnotation) -> int:
    return sum(b for _, b in shared_memory(ex, ann).values())


def fit_shared(ctx: PlanningContext, cand: Candidate) -> FitResult:
    """``bound_depth`` then ``contiguous_async``.  When TVM's buffer versions of that annotation (stage distance
    + 1 of each shared buffer) exceed a shared-memory limit (``shared_overflow``: static arrays over
    ``STATIC_SMEM_BYTES``, or everything over the block's; the solver's memory rule counts live values,
    which TVM's versioning can exceed), candidates that fit are sought two ways: re-solves with the model's
    shared memory lowered by the overflow (up to ``FIT_ROUNDS`` times), and every smaller stage bound; of
    those that fit, the smallest ii wins (ties: less shared memory).  When none fits, the first plan is
    returned, its depth note saying so (``api`` then keeps the loop as it is).  ``ctx.machine``: the machine
    ``cand`` was solved on; ``ctx.full_machine``: the target's (the limits)."""
    ex, ms, m, opts = ctx.extraction, ctx.machine, ctx.full_machine, ctx.options

    def weigh(c: Candidate, machine: Machine, cap: int | None) -> _Try:
        found = _annotate(replace(ctx, machine=machine), c, cap)
        a3 = found.annotation
        ii = annotation_ii(ex.graph, ms, a3)[0] if a3.num_stages == 1 else found.schedule.ii  # one stage: the loop
        return _Try(ii, _need(ex, a3), shared_overflow(ex, a3, m), found)

    found = _annotate(ctx, cand, None)
    first, stages, over = _need(ex, found.annotation), found.annotation.num_stages, \
        shared_overflow(ex, found.annotation, m)
    if over <= 0 or stages == 1:
        return FitResult(found)
    tries: list[_Try] = []
    budget = ms.smem_bytes
    step = min((n // v for v, n in shared_memory(ex, found.annotation).values() if v), default=16)  # one version
    for _ in range(FIT_ROUNDS):   # the solver's memory rule, tightened by what TVM's versions overflowed
        budget -= max(over, step)
        if budget <= 0:
            break
        tight = replace(ms, smem_bytes=budget)
        try:
            s0 = ctx.solve(ex.graph.replace(machine=tight), tight, time_limit=opts.time_limit)
            a0 = refine(annotation_from_schedule(s0, ex.graph, [s.async_capable for s in ex.stmts],
                                                 allow_async=True), ex.graph, tight, s0.ii)
            tries.append(weigh(Candidate(s0, a0), tight, None))
        except (UnsupportedLoopError, InfeasibleError):
            break
        over = tries[-1].overflow
        if over <= 0:
            break
    for cap in range(stages - 1, 0, -1):
        try:
            tries.append(weigh(cand, ms, cap))
        except (UnsupportedLoopError, InfeasibleError):
            continue
    fits = [t for t in tries if t.overflow <= 0]
    if not fits and first == 0:  # the kernel's other buffers overflow, whatever this loop does
        note = (f"{found.depth}{_FIT_NOTE}the kernel's other shared buffers alone are "
                f"{_over(ex, found.annotation, m)}: this loop's plan cannot change that")
        return FitResult(replace(found, depth=note), SharedFit(stages, first, None))
    if not fits:  # not even one version of each buffer fits: the loop as written does not either
        raise UnsupportedLoopError(
            f"loop '{ex.loop}': its buffers exceed the shared memory limits even unpipelined (one version "
            f"each; the {stages}-stage plan needs {first} B, {_over(ex, found.annotation, m)}): use smaller tiles"
            + (" or the dynamic pool (cache_read/cache_write scope 'shared.dyn')"
               if shared_by_scope(ex, found.annotation)[STATIC] else ""))
    best = min(fits, key=lambda t: (t.ii, t.need))
    fitted = best.candidate.annotation.num_stages
    note = (f"{best.candidate.depth}{_FIT_NOTE}buffer versions of the {stages}-stage plan need {first} B, "
            f"{_over(ex, found.annotation, m)}; the best plan that fits has {fitted} "
            f"stage(s) ({best.need} B, II {best.ii * ex.quantum} cycles)")
    return FitResult(replace(best.candidate, depth=note), SharedFit(stages, first, fitted))


def bound_depth(ctx: PlanningContext, cand: Candidate, why: str | None = None) -> Candidate:
    """``cand`` within the stage bound (``planner.depth``: ``ctx.options.max_stages``, or the default), its
    ``depth`` saying why it has its stages; ``why``: the bound in words (default: where it comes from)."""
    ex, ms, opts, sched, ann = ctx.extraction, ctx.machine, ctx.options, cand.schedule, cand.annotation
    cap = opts.max_stages
    why = why or ("max_stages" if cap is not None else
                  f"the default bound min({DEFAULT_MAX_STAGES}, trip count {ex.trips})")
    if cap is None:  # a symbolic trip count does not bound the stages
        cap = default_max_stages(DEFAULT_MAX_STAGES if ex.trip_count is None else ex.trip_count)
    n = ann.num_stages
    ii_text = f"{'optimal ' if sched.ii_optimal else ''}II {sched.ii * ex.quantum} cycles"
    best = "the optimal schedule" if sched.ii_optimal else "the schedule found (not proven optimal)"
    if n <= cap:
        shortest = any(t.objective == "length" and t.proven for t in sched.tie_breaks)
        return Candidate(sched, ann, None, (f"{n} stage(s): what the latencies need at the {ii_text} "
                                            f"({'the shortest schedule' if shortest else 'the schedule found'} at "
                                            f"that II), within {why} = {cap}"))
    if cap == 1:
        flat = PipelineAnnotation((0,) * len(ann.stages), tuple(range(len(ann.stages))))
        return Candidate(sched, flat, None, (f"{best} needs {n} stages at II {sched.ii * ex.quantum} cycles; "
                                             f"{why} = 1 keeps the loop unpipelined"))
    graph = ex.graph
    linked = {e.src for e in graph.edges} | {e.dst for e in graph.edges}
    bounded = bound_stages(graph, cap, linked)
    s2 = ctx.solve(bounded, ms, time_limit=opts.time_limit)
    a2 = annotation_from_schedule(s2, graph, [s.async_capable for s in ex.stmts], allow_async=True)
    a2 = refine(a2, graph, ms, s2.ii, solved=bounded)
    if a2.num_stages > cap:  # pragma: no cover - the added edges make it impossible
        raise UnsupportedLoopError(f"loop '{ex.loop}': could not bound the pipeline to {cap} stages")
    return Candidate(s2, a2, bounded, (
        f"{best} needs {n} stages at II {sched.ii * ex.quantum} cycles; bounded to "
        f"{cap} by {why}: re-solved with every pair of dependent statements within {cap} stages "
        f"(planner.depth), {a2.num_stages} stage(s) at II {s2.ii * ex.quantum} cycles"))
