"""The guard against TVM 0.27's too-large ``cp.async.wait_group`` counts.

``cp.async.wait_group N`` completes every committed group but the ``N``
newest, so a count larger than the number of groups committed after the one
a statement reads lets it read a copy still in flight.  TVM 0.27's
InjectSoftwarePipeline computes its counts from a per-iteration model of its
own commit groups that does not always match the groups it emits
(docs/tvm-wait-counts.md: the rule and the annotations it miscounts), while
``annotate.async_waits`` computes the largest safe count by simulating the
emitted queue.  This module makes the compiled count the smaller of the two:

* the plan writes the counts ``async_waits`` computes (``keep_redundant``: one
  per wait TVM emits, in program order) on its loop as the annotation
  ``WAITS_KEY``, only when a dry run of TVM's pass shows a count too large
  (``tvm_wait_counts``);
* ``mark_expected_waits`` (right before InjectSoftwarePipeline) moves that
  annotation into an ``AttrStmt`` around the loop, which TVM's pass keeps
  around the prologue, body and epilogue it emits;
* ``exact_async_waits`` (right after it) lists the waits inside each mark
  as they will run (an unrolled prologue / epilogue iteration each, the body
  once), pairs them with the expected counts, replaces each count by the
  smaller one (``min``: a smaller count only waits for more copies, so the
  rewrite is safe even for a stale annotation), and drops the mark.  When
  the waits do not pair up (another number of waits than expected) it
  raises WaitCountError rather than compile counts nobody checked.

Both passes are part of the ``tvm_twill_waits`` pipeline (TVM's default plus
the guard, what a plan that needs the guard and no other pipeline compiles
with) and of the ``tvm_twill_swp`` and ``tvm_twill_ws`` pipelines
(``pipelines.WAIT_GUARD``); a loop without the annotation is left alone.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import WaitCountError
from ..frontend.ir import children, const_int, s_tir, splice_passes, substitute, tirx, tvm, tvm_ffi
from ..frontend.lowering import ASYNC_COPY_CONFIG, pipeline_prefix_passes
from ..model.pipeline import ASYNC_STAGES
from .annotate import GUARDED_ASYNC_KEY, WAITS_KEY, async_waits
from .async_queue import enclosing_ranges, trip_envs, violations

__all__ = ["GUARDED_ASYNC_KEY", "WAITS_KEY", "TvmWait", "annotate_expected_waits", "exact_async_waits",
           "exact_async_waits_pass", "expected_waits_value", "guard_loop_waits", "guarded_annotations",
           "lowered_counts", "mark_expected_waits", "mark_expected_waits_pass", "queue_violations", "tvm_counts_safe",
           "tvm_wait_counts"]

_MARK = "tvm_twill_expected_async_waits"
_COUNT = "async_wait_inflight_count"
_INJECT = "s_tir.InjectSoftwarePipeline"


@dataclass(frozen=True)
class TvmWait:
    """One wait of a pipelined loop as it runs: TVM's count (None: not a constant) and the expected one."""

    emitted: int | None
    expected: int

    @property
    def too_large(self) -> bool:
        return self.emitted is None or self.emitted > self.expected


# -- before InjectSoftwarePipeline: the loop annotation becomes a mark around the loop -----------------------
def mark_expected_waits(func):
    """``func`` with each loop annotated ``WAITS_KEY`` wrapped in a mark carrying those counts (and the
    annotation removed from the loop, so nothing after the guard sees it); the loop's guarded async stages
    (``GUARDED_ASYNC_KEY``) become its ``software_pipeline_async_stages`` again, for InjectSoftwarePipeline."""
    def fix(loop):
        if WAITS_KEY not in (loop.annotations or {}):
            return loop
        counts = str(loop.annotations[WAITS_KEY])
        keep = {k: v for k, v in loop.annotations.items() if k not in (WAITS_KEY, GUARDED_ASYNC_KEY)}
        if GUARDED_ASYNC_KEY in loop.annotations:
            keep[ASYNC_STAGES] = loop.annotations[GUARDED_ASYNC_KEY]
        new = tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, loop.thread_binding, keep,
                       getattr(loop, "step", None))
        return tirx.AttrStmt(f"{loop.loop_var.name}:{counts}", _MARK, tirx.const(0, "int32"), new)

    return func.with_body(tvm_ffi.structural_map(func.body, [(tirx.For, fix)]))


@tirx.transform.prim_func_pass(opt_level=0, name="TwillMarkExpectedAsyncWaits")
def mark_expected_waits_pass(func, mod, ctx):
    return mark_expected_waits(func)


# -- after it: the waits inside each mark, as they run, against the expected counts -------------------------
def _waits_as_run(stmt, env: tuple, out: list) -> None:
    """Append ``(wait AttrStmt, env, count)`` for each wait under ``stmt`` in the order they run: an unrolled
    loop of constant extent once per iteration (``env``: its variables' values), any other loop once; a
    block whose predicate is false under ``env`` is skipped; ``count`` is the count under ``env`` (an int, or
    None when it does not fold to one)."""
    if isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.UNROLLED:
        lo, ext = const_int(stmt.min), const_int(stmt.extent)
        if lo is not None and ext is not None:
            for k in range(lo, lo + ext):
                _waits_as_run(stmt.body, env + ((stmt.loop_var, k),), out)
            return
    if isinstance(stmt, s_tir.SBlockRealize):
        cond = _fold(stmt.predicate, env)
        if cond is not None and cond == 0:
            return
    if isinstance(stmt, tirx.AttrStmt) and stmt.attr_key == _COUNT:
        out.append((stmt, env, _fold(stmt.value, env)))
    for c in children(stmt):
        _waits_as_run(c, env, out)


def _fold(expr, env: tuple) -> int | None:
    """``expr`` with the unrolled loop variables of ``env`` replaced by their values, as an int (or None)."""
    if env:
        expr = substitute(expr, [(v, tirx.const(k, str(v.ty))) for v, k in env])
    return const_int(tvm.sym.Analyzer().simplify(expr))


def _marked_waits(mark) -> tuple[str, list, list[int]]:
    """(loop name, its waits as run, the expected counts) of one mark."""
    name, _, counts = str(mark.node).rpartition(":")
    expected = [int(c) for c in counts.split(",") if c]
    runs: list = []
    _waits_as_run(mark.body, (), runs)
    if len(runs) != len(expected):
        raise WaitCountError(
            f"loop '{name}': TVM emitted {len(runs)} cp.async waits where tvm_twill computed {len(expected)} "
            f"({expected}), so their counts cannot be checked: re-plan the loop (auto_pipeline) or compile it "
            "without async stages")
    return name, runs, expected


def _select(env_counts: list) -> object:
    """The count as an expression of the unrolled loop variables: ``[(env, count)]`` -> nested selects."""
    value = tirx.const(env_counts[-1][1], "int32")
    for env, count in reversed(env_counts[:-1]):
        cond = None
        for v, k in env:
            eq = tirx.EQ(v, tirx.const(k, str(v.ty)))
            cond = eq if cond is None else tirx.And(cond, eq)
        value = value if cond is None else tirx.Select(cond, tirx.const(count, "int32"), value)
    return value


def lowered_counts(mark):
    """The body of one mark with its waits' counts lowered to the expected ones where TVM's are larger
    (module docstring).  Raises WaitCountError when the waits do not pair up."""
    _, runs, expected = _marked_waits(mark)
    per_wait: list = []  # [(wait AttrStmt, [(env, safe count)])], in order of first run
    for (attr, env, emitted), want in zip(runs, expected):
        safe = want if emitted is None else min(emitted, want)
        entry = next((e for e in per_wait if e[0].same_as(attr)), None)
        if entry is None:
            per_wait.append((attr, []))
            entry = per_wait[-1]
        entry[1].append((env, safe))

    def rewrite(attr):
        if attr.attr_key != _COUNT:
            return attr
        entry = next((e for e in per_wait if e[0].body.same_as(attr.body)), None)
        if entry is None or all(_fold(attr.value, env) == c for env, c in entry[1]):
            return attr
        value = tirx.Min(attr.value, _select(entry[1]))
        return tirx.AttrStmt(attr.node, attr.attr_key, value, attr.body)

    return tvm_ffi.structural_map(mark.body, [(tirx.AttrStmt, rewrite)])


def exact_async_waits(func):
    """``func`` with each marked loop's wait counts lowered to the expected ones where TVM's are larger, and
    the marks removed (module docstring).  Raises WaitCountError when the waits do not pair up."""
    def fix(mark):
        return lowered_counts(mark) if mark.attr_key == _MARK else mark

    return func.with_body(tvm_ffi.structural_map(func.body, [(tirx.AttrStmt, fix)]))


@tirx.transform.prim_func_pass(opt_level=0, name="TwillExactAsyncWaits")
def exact_async_waits_pass(func, mod, ctx):
    return exact_async_waits(func)


# -- plan time: TVM's counts for a loop, against the expected ones ------------------------------------------
def _marks(mod, prefix_passes: list, loop: str | None) -> list:
    """``[(func, mark)]``: ``mod`` through ``prefix_passes`` (TVM's s_tir passes through
    InjectSoftwarePipeline) with the marks, and each mark (of loop ``loop`` only, when given)."""
    passes = splice_passes(list(prefix_passes), _INJECT, [mark_expected_waits_pass], before=True)
    lowered = tvm.transform.Sequential(passes)(mod)
    marks: list = []
    for _, func in lowered.functions_items():
        if isinstance(func, tirx.PrimFunc):
            tvm_ffi.structural_walk(func.body, [(tirx.AttrStmt, lambda attr, f=func: marks.append((f, attr)) if (
                attr.attr_key == _MARK and (loop is None or str(attr.node).rpartition(":")[0] == loop)) else None)])
    return marks


def _pairs(marks: list) -> list[TvmWait]:
    found: list[TvmWait] = []
    for _, attr in marks:  # outside the walk: a WaitCountError reaches the caller as itself
        _, runs, expected = _marked_waits(attr)
        found.extend(TvmWait(emitted, want) for (_, _, emitted), want in zip(runs, expected))
    return found


def tvm_wait_counts(mod, prefix_passes: list, loop: str | None = None) -> list[TvmWait]:
    """The waits of the loops of ``mod`` annotated ``WAITS_KEY`` as TVM 0.27 emits them, each paired with its
    expected count: ``prefix_passes`` (TVM's s_tir passes through InjectSoftwarePipeline) run with the
    mark, then the waits of each mark (of loop ``loop`` only, when given) are listed as ``exact_async_waits``
    sees them (nothing is rewritten).
    Raises WaitCountError when they do not pair up; TVM's own errors propagate."""
    return _pairs(_marks(mod, prefix_passes, loop))


def queue_violations(marks: list, envs, loop: str, lowered: bool) -> list[str]:
    """What ``async_queue`` finds in the marked code (``lowered``: with the guard's counts, else TVM's own),
    run for every trip count of ``envs`` (``async_queue.trip_envs``; None: a trip count it cannot realise)."""
    if envs is None:
        return [f"the cp.async queue of loop '{loop}' cannot be checked: its trip count is not a function of one "
                "integer variable"]
    found: list[str] = []
    for func, mark in marks:
        around = enclosing_ranges(func, mark)
        region = lowered_counts(mark) if lowered else mark.body
        for label, env in envs:
            for v in violations(region, loop, {**around, **env}, label):
                if v not in found:
                    found.append(v)
    return found


def tvm_counts_safe(ann, graph) -> bool:
    """Where TVM 0.27's own counts are never too large (docs/tvm-wait-counts.md): the async stage's statements
    consecutive in the order with no statement reading them before the first, or a single async statement."""
    copies = sorted(ann.orders[i] for i, s in enumerate(ann.stages) if s in ann.async_stages)
    if len(copies) <= 1:
        return True
    reads = {e.dst for e in graph.edges if e.kind == "data" and e.distance == 0
             and ann.stages[graph.index(e.src)] in ann.async_stages}
    first_read = min((ann.orders[graph.index(n)] for n in reads), default=len(ann.orders))
    return copies == list(range(copies[0], copies[0] + len(copies))) and first_read > copies[0]


def guard_loop_waits(sch, loop_rv, ann, graph, trip_count: int | None) -> tuple[TvmWait, ...]:
    """Check TVM's wait counts for the pipelined loop ``loop_rv`` of ``sch`` (annotated ``ann``; ``graph`` its
    statements' dependences) and write what the guard needs.

    Computes the counts the loop needs (``async_waits`` with ``keep_redundant``; a symbolic ``trip_count``
    (None): a loop long enough to reach the steady state), writes them as ``WAITS_KEY`` and dry-runs TVM's
    passes (``tvm_wait_counts``).  When some count of TVM's is too large the annotation stays (the plan's
    pipeline then lowers those counts) and the pairs are returned; otherwise it is removed again and ()
    returned.  Either way the code each build compiles (TVM's counts for ``tvm.compile``, the lowered ones
    for the guarded pipelines) is then run by ``async_queue`` for every trip count up to past the steady
    state: a read of a copy that may still be in flight (a wait TVM does not emit, a count too large that no
    pairing lowers) raises WaitCountError with the annotation removed.  When TVM's waits do not pair up with
    the computed ones, its own code stands if that run finds nothing (() is returned), else WaitCountError."""
    if not ann.async_stages:
        return ()
    trips = trip_count if trip_count is not None else 2 * ann.num_stages + 1
    expected = [w.in_flight for w in async_waits(ann, graph, trips, keep_redundant=True)]
    loop = sch.get(loop_rv)
    name, envs = loop.loop_var.name, trip_envs(loop, ann.num_stages)
    sch.annotate(loop_rv, WAITS_KEY, ",".join(str(c) for c in expected))
    with tvm.transform.PassContext(config={ASYNC_COPY_CONFIG: 1}):
        marks = _marks(sch.mod, pipeline_prefix_passes(), name)
    try:
        pairs = _pairs(marks)
    except WaitCountError as err:
        unpaired = str(err)
        pairs = None
    guarded = pairs is not None and any(p.too_large for p in pairs)
    found = queue_violations(marks, envs, name, lowered=guarded)
    if found or pairs is None or not guarded:
        sch.unannotate(loop_rv, WAITS_KEY)
    if found:
        head = (unpaired.partition(", so their counts")[0] + ", and in its pipelined code" if pairs is None else
                f"loop '{name}': in the pipelined code TVM emits")
        raise WaitCountError(f"{head}, {found[0]}: re-plan the loop (auto_pipeline) or compile it without async "
                             "stages")
    if guarded:
        _hide_async_stages(sch, loop_rv)
        return tuple(pairs)
    return ()


def expected_waits_value(tvm_waits) -> str:
    """The ``WAITS_KEY`` annotation value of a plan's ``tvm_waits`` (the expected counts, comma-separated)."""
    return ",".join(str(w.expected) for w in tvm_waits)


def _hide_async_stages(sch, loop_rv) -> None:
    """Move the loop's ``software_pipeline_async_stages`` to ``GUARDED_ASYNC_KEY``: compiled by TVM's default
    pipeline (a plain ``tvm.compile``, MetaSchedule's builder) the loop's copies are then synchronous, since
    TVM would count their waits too large; the guard's pipelines put them back and lower the counts."""
    ann = sch.get(loop_rv).annotations
    if ASYNC_STAGES in ann:
        stages = [int(v) for v in ann[ASYNC_STAGES]]
        sch.unannotate(loop_rv, ASYNC_STAGES)
        sch.annotate(loop_rv, GUARDED_ASYNC_KEY, stages)


def guarded_annotations(annotations: dict, tvm_waits) -> dict:
    """The loop annotations a plan writes (``annotations``: ``{key: value}`` as ``sch.annotate`` takes them)
    with its wait guard: unchanged when TVM's counts are safe (``tvm_waits`` empty), else the async stages
    under ``GUARDED_ASYNC_KEY`` and the expected counts under ``WAITS_KEY``."""
    if not tvm_waits:
        return dict(annotations)
    out = {k: v for k, v in annotations.items() if k != ASYNC_STAGES}
    if ASYNC_STAGES in annotations:
        out[GUARDED_ASYNC_KEY] = list(annotations[ASYNC_STAGES])
    out[WAITS_KEY] = expected_waits_value(tvm_waits)
    return out


def annotate_expected_waits(sch, loop_rv, tvm_waits) -> None:
    """Write a plan's wait guard on its loop (after its pipeline annotation: ``apply_annotation`` removes it)
    when the plan has one (``tvm_waits``): the expected counts, and the async stages moved out of TVM's key
    (``guarded_annotations``); a plan without leaves the loop as it is."""
    if tvm_waits:
        sch.annotate(loop_rv, WAITS_KEY, expected_waits_value(tvm_waits))
        _hide_async_stages(sch, loop_rv)
