"""Turn a modulo schedule into TVM ``software_pipeline_*`` loop annotations.

TVM's ``InjectSoftwarePipeline`` (src/s_tir/transform/inject_software_pipeline.cc)
rewrites a loop whose body is a sequence of statements S_0 .. S_{n-1} into a
prologue, a steady-state body and an epilogue.  Its contract, which everything
here is written against:

* one ``software_pipeline_stage`` and one ``software_pipeline_order`` entry per
  statement, in statement order; orders are a permutation of 0..n-1;
* for every read-after-write dependence S_a -> S_b (a < b, same iteration):
  ``stage[a] <= stage[b]``, and ``order[a] < order[b]`` when the stages are
  equal (TVM checks exactly this, and only read-after-write: buffers that are
  overwritten while still read are multi-versioned, ``use - def + 1``
  versions);
* ``software_pipeline_async_stages`` lists stages whose statements run
  asynchronously (cp.async); every statement of such a stage is wrapped in
  ``async_scope``, and a consumer may read the results of at most one async
  producer stage ("A dependency on multiple async stages is not supported").

What TVM then generates (``max_stage = S``, trip count ``N``)::

    prologue  for i in unroll(S):      statements with stage s run iteration i - s
    body      for i in range(N - S):   every statement, iteration i + S - stage
    epilogue  for i in unroll(S):      the drained rest
    async:    async_commit_queue(stage) around each contiguous run of async
              statements, async_wait_queue(stage, in_flight) before the first
              consumer, in_flight = producer_head - consumer_head (the RFC rule)

``async_waits`` recomputes those in-flight counts independently, by simulating
the commit-group queue of the emitted program (see its docstring), so tests
can check the ``cp.async.wait_group N`` that TVM emits.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Sequence

from ..errors import InputError
from ..model import Graph
from ..model.pipeline import ANNOTATION_KEYS, PipelineAnnotation


def statement_deps(graph: Graph, *, data_only: bool = False) -> list[tuple[int, int, int]]:
    """The graph's edges as ``(src, dst, distance)`` statement indices (``graph.ops[i]`` is statement i).

    The graph is the one dependence relation: the front-end extracts it, the
    solver schedules it, and annotation legality is checked against it.
    ``data_only``: only the edges along which a value flows (``Edge.kind``
    ``"data"``), not the write-after-read / write-after-write ``order`` edges.
    """
    return [(graph.index(e.src), graph.index(e.dst), e.distance) for e in graph.edges
            if not data_only or e.kind == "data"]

def legality_violations(ann: PipelineAnnotation, graph: Graph) -> list[str]:
    """Every way ``ann`` breaks a dependence, as one-line messages (empty: legal).

    Distance-0 dependences are TVM's own check.  A loop-carried dependence
    (distance d) is also checked, because TVM does not: instance j of ``src``
    runs in kernel iteration j + stage[src] at position order[src], instance
    j + d of ``dst`` in kernel iteration j + d + stage[dst]; the first must
    come first.
    """
    out = []
    for e in graph.edges:
        a, b, dist = graph.index(e.src), graph.index(e.dst), e.distance
        sa, sb = ann.stages[a], ann.stages[b] + dist
        if sa > sb or (sa == sb and ann.orders[a] >= ann.orders[b]):
            if e.kind == "order":
                out.append(f"statement {b} (stage {ann.stages[b]}, order {ann.orders[b]}) overwrites a buffer that "
                           f"statement {a} (stage {ann.stages[a]}, order {ann.orders[a]}) uses {dist} iteration(s) "
                           "earlier, and TVM does not multi-version it: their order must be kept")
            elif dist == 0:
                out.append(f"statement {b} (stage {ann.stages[b]}, order {ann.orders[b]}) reads what "
                           f"statement {a} (stage {ann.stages[a]}, order {ann.orders[a]}) writes: it needs "
                           "a later stage, or the same stage and a later order")
            else:
                out.append(f"statement {b} reads what statement {a} wrote {dist} iteration(s) "
                           f"earlier, but (stage {ann.stages[a]}, order {ann.orders[a]}) of {a} does not "
                           f"run before (stage {ann.stages[b]}+{dist}, order {ann.orders[b]}) of {b}")
    return out


def select_async_stages(stages: Sequence[int], graph: Graph,
                        async_capable: Sequence[bool]) -> tuple[int, ...]:
    """Stages that may be made asynchronous under TVM's rules: at most one.

    A stage qualifies when it holds at least one statement and every
    statement in it is an async-capable copy (TVM wraps *every* statement of
    an async stage in ``async_scope``) that some statement of the same or a
    later stage consumes, and whose every outgoing edge is a same-iteration
    data edge (nothing else would wait for the copy).  Of the qualifying stages only the earliest is
    chosen: cp.async has a single hardware queue while TVM counts commit
    groups per stage, so its wait counts are exact only with one async stage;
    one async producer stage also satisfies TVM's rule that a consumer reads
    from at most one async stage.  The earliest producers are the ones whose
    latency the pipeline is built to hide.
    """
    deps = [(a, b) for a, b, dist in statement_deps(graph, data_only=True) if dist == 0]
    consumed = {a for a, b in deps if a != b and stages[a] <= stages[b]}
    # TVM waits for an async copy only before a reader of its result in the same iteration: a copy whose
    # source or target a later statement overwrites (an order edge out of it), or whose result a later
    # iteration reads (a loop-carried edge out of it), would race with that statement
    ordered = {graph.index(e.src) for e in graph.edges if e.kind == "order" or e.distance > 0}
    cand = sorted(s for s in set(stages)
                  if all(async_capable[i] and i in consumed and i not in ordered
                         for i, st in enumerate(stages) if st == s))
    return tuple(cand[:1])


def annotation_from_schedule(schedule, graph: Graph,
                             async_capable: Sequence[bool], *, allow_async: bool = True) -> PipelineAnnotation:
    """The annotation that realizes ``schedule`` for the statements of ``graph`` (its ops, in statement order).

    * stage = the schedule's stage, shifted so the smallest is 0 (TVM's
      prologue length is the max stage, so an all-late schedule is shifted);
    * statements without any dependence (empty pieces of a nested pipeline)
      are clamped into the stage range of the others: they do not affect the
      result but would lengthen TVM's prologue;
    * order = rank of (time mod ii, time, statement index): the steady-state
      issue sequence of the modulo schedule, which keeps every same-stage
      dependence in order;
    * async stages: ``select_async_stages`` when ``allow_async`` (sm_80+).

    Raises AssertionError if the result is not legal (a schedule that passed
    the model checker always yields a legal annotation).
    """
    names = graph.names
    ii = schedule.ii
    times = [schedule.ops[n].time for n in names]
    stages = [t // ii for t in times]
    deps = statement_deps(graph)
    linked = {a for a, _, _ in deps} | {b for _, b, _ in deps}
    if linked:
        lo = min(stages[i] for i in linked)
        hi = max(stages[i] for i in linked)
        stages = [s - lo if i in linked else min(max(s - lo, 0), hi - lo) for i, s in enumerate(stages)]
    else:
        stages = [0] * len(stages)
    ranked = sorted(range(len(names)), key=lambda i: (times[i] % ii, times[i], i))
    orders = [0] * len(names)
    for pos, i in enumerate(ranked):
        orders[i] = pos
    asyncs = select_async_stages(stages, graph, async_capable) if allow_async else ()
    ann = PipelineAnnotation(tuple(stages), tuple(orders), asyncs)
    bad = legality_violations(ann, graph)
    if bad:  # the schedule obeys every dependence, so this is a bug here
        raise AssertionError("annotation derived from a checked schedule is illegal: " + "; ".join(bad))
    return ann


def buffer_versions(ann: PipelineAnnotation, writes: Sequence[Iterable[str]],
                    reads: Sequence[Iterable[str]], double_buffered: Iterable[str] = (),
                    versioned: Iterable[str] | None = None) -> dict[str, int]:
    """How many versions TVM allocates for each buffer written in the pipeline.

    TVM's rule (``ComputeBufferVersions``): ``use - def + 1`` with ``def`` the
    smallest stage of a writer and ``use`` the largest stage of a reader; two
    versions shrink to one unless some reader comes after a writer in the
    order *and* in a later stage (regions are assumed to overlap here).
    ``writes[i]`` / ``reads[i]``: buffer names of statement i.
    ``double_buffered``: buffers a block marks ``double_buffer_scope`` (dlight's
    copies): TVM gives them two versions where the rule gives one.
    ``versioned``: the buffers TVM multi-versions at all (those allocated in
    the loop body, ``Extraction.versioned``); every other buffer (a parameter,
    a buffer used after the loop) keeps one copy.  None: every written buffer.
    """
    double_buffered = set(double_buffered)
    owned = None if versioned is None else set(versioned)
    writes = [set(w) for w in writes]
    reads = [set(r) for r in reads]
    out = {}
    for buf in sorted(set().union(*writes)) if writes else []:
        wr = [i for i, w in enumerate(writes) if buf in w]
        rd = [i for i, r in enumerate(reads) if buf in r]
        d = min(ann.stages[i] for i in wr)
        u = max([ann.stages[i] for i in rd], default=d)
        n = max(1, u - d + 1)
        if n == 2 and not any(ann.orders[w] < ann.orders[r] and ann.stages[w] < ann.stages[r]
                              for w in wr for r in rd):
            n = 1
        if n == 1 and buf in double_buffered:
            n = 2
        out[buf] = n if owned is None or buf in owned else 1
    return out


# -- the in-flight computation ------------------------------------------------
@dataclass(frozen=True)
class AsyncWait:
    """One ``async_wait_queue(stage, in_flight)`` of the emitted program.

    ``part`` is ``prologue``, ``body`` or ``epilogue``; ``iteration`` the
    unrolled iteration of the prologue/epilogue (None in the body: the count
    is the same every iteration); ``before`` the statement the wait precedes.
    """

    part: str
    iteration: int | None
    before: int
    stage: int
    in_flight: int


def async_waits(ann: PipelineAnnotation, graph: Graph, trip_count: int | None, *,
                keep_redundant: bool = False) -> tuple[AsyncWait, ...]:
    """The waits the pipelined loop needs, in program order, by queue simulation.

    Independent of TVM's implementation: it executes the prologue, body and
    epilogue (see the module docstring) statement by statement, keeps the list
    of committed groups (a group = a contiguous run of async statements of one
    stage in one kernel iteration, as TVM groups them), and at each consumer
    of async data needs the group holding the producer instance of the same
    loop iteration.  Waiting with ``cp.async.wait_group N`` completes all but
    the N newest groups, so the largest safe N there is the number of groups
    committed after the needed one: producer_head - consumer_head in the RFC's
    words.  Consumers of one stage in one kernel iteration share one wait,
    placed before the first of them, with the smallest N (TVM coalesces the
    same way).  A wait whose groups a previous wait already completed is not
    emitted in the unrolled prologue/epilogue.  The body has one wait that
    runs every iteration with one constant count, so its count is the
    smallest safe count over all body iterations.  cp.async has a single
    hardware queue, which is what is simulated.

    With the copies of one stage interleaved with their consumer (the RFC's
    "interleaved async producers" example, stages [0, 0, 3], order [0, 2, 1])
    this gives 3 for the body where TVM 0.27 emits 5: TVM's prologue, which
    has no consumer between the copies, commits both copies as one group,
    while its body count assumes two groups per iteration, so its first body
    iterations may read copies that are still in flight.  ``transforms.wait_counts``
    guards every compiled plan against such counts (docs/tvm-wait-counts.md).

    ``keep_redundant``: also list the waits of the unrolled parts whose groups
    an earlier wait already completed (any count is safe there; the one given
    is the number of groups committed after the newest group read): TVM emits
    a wait before every consumer it places, so this list lines up with TVM's.

    ``trip_count`` None: a symbolic trip count, the waits ``tvm_twill.build`` compiles.  The loop simulated
    is one long enough to reach the steady state (2 x stages + 1 iterations), the body's counts as above;
    every prologue and epilogue wait waits for every copy (0): TVM guards those iterations with the trip
    count, emits the epilogue's counts as 0 and the prologue's as expressions of the trip count, which the
    plan's pipeline lowers to their lower bound, 0 (``swp_lowering.constant_async_waits``).  Safe, and the
    overlap it costs is in the prologue and epilogue only (once per kernel).
    """
    S = ann.num_stages - 1
    guarded = trip_count is None
    trip_count = 2 * ann.num_stages + 1 if guarded else trip_count
    q = _AsyncQueue(ann, graph, trip_count, keep_redundant, guarded)
    for k in range(S):
        q.run("prologue", k, k)
    for i in range(S, trip_count):
        q.run("body", i, None)
    for k, i in enumerate(range(max(trip_count, S), trip_count + S)):
        q.run("epilogue", i, k)
    return q.waits()


class _AsyncQueue:
    """The single cp.async queue as ``async_waits`` simulates it: the groups committed, the waits emitted."""

    def __init__(self, ann: PipelineAnnotation, graph: Graph, trip_count: int, keep_redundant: bool = False,
                 guarded: bool = False):
        deps = [(a, b) for a, b, dist in statement_deps(graph, data_only=True) if dist == 0]
        n = len(ann.stages)
        asyncs = set(ann.async_stages)
        self.ann, self.trip_count, self.keep_redundant = ann, trip_count, keep_redundant
        self.guarded = guarded  # a symbolic trip count: the unrolled parts wait for every copy
        self.is_async = [ann.stages[i] in asyncs for i in range(n)]
        self.seq = sorted(range(n), key=lambda i: ann.orders[i])
        self.producers = {b: sorted({a for a, d in deps if d == b and self.is_async[a] and a != b
                                     and ann.stages[a] <= ann.stages[b]}) for b in range(n)}
        self.groups: list[set] = []      # committed groups: sets of (statement, loop iteration)
        self.group_of: dict = {}         # (statement, loop iteration) -> index of its group
        self.done = 0                    # groups [0, done) are known complete
        self.out: list[AsyncWait] = []
        self.body_counts: dict[int, list] = {}   # producer stage -> counts over body iterations

    def run(self, part: str, i: int, k: int | None) -> None:
        """Kernel iteration ``i`` (``k``: its index in the unrolled prologue / epilogue), statement by statement."""
        ann = self.ann
        open_group: set | None = None
        open_stage = None
        # producer stage -> [statement the wait precedes, groups committed there, smallest N]
        pending: dict[int, list] = {}
        for c in self.seq:
            j = i - ann.stages[c]
            if not 0 <= j < self.trip_count:
                continue
            self._consume(part, c, j, pending)
            if self.is_async[c]:
                if open_group is None or open_stage != ann.stages[c]:
                    open_group, open_stage = set(), ann.stages[c]
                    self.groups.append(open_group)
                open_group.add((c, j))
                self.group_of[c, j] = len(self.groups) - 1
            else:
                open_group = None
        self._emit(part, k, pending)

    def _consume(self, part: str, c: int, j: int, pending: dict) -> None:
        """Statement ``c`` of loop iteration ``j`` needs its producers' groups: the wait before it, and its N."""
        for p in self.producers[c]:
            g = self.group_of.get((p, j))
            if g is None:
                raise InputError(f"statement {c} reads async data of statement {p} (iteration {j}) "
                                 "before it is committed: reorder the statements")
            if g < self.done and part != "body" and not self.keep_redundant:
                continue  # an earlier wait already completed it (unrolled parts only)
            st = self.ann.stages[p]
            if st not in pending:
                pending[st] = [c, len(self.groups), None]
            at = pending[st][1]
            if g >= at:
                raise InputError(f"statement {c} needs the async copy of statement {p} that is "
                                 "committed after the wait before the first consumer: reorder them")
            need = at - g - 1
            pending[st][2] = need if pending[st][2] is None else min(pending[st][2], need)

    def _emit(self, part: str, k: int | None, pending: dict) -> None:
        """The waits of one kernel iteration, in program order (the body's: once, its counts collected)."""
        for st, (before, at, need) in sorted(pending.items(), key=lambda kv: self.ann.orders[kv[1][0]]):
            need = 0 if self.guarded and part != "body" else need
            self.done = max(self.done, at - need)
            if part == "body":
                self.body_counts.setdefault(st, []).append(need)
                if not any(w.part == "body" and w.stage == st for w in self.out):
                    self.out.append(AsyncWait(part, None, before, st, need))
            else:
                self.out.append(AsyncWait(part, k, before, st, need))

    def waits(self) -> tuple[AsyncWait, ...]:
        """The waits emitted; the body's with the smallest count over all body iterations."""
        return tuple(replace(w, in_flight=min(self.body_counts[w.stage])) if w.part == "body" else w
                     for w in self.out)


# -- writing the annotations on a tvm.s_tir.Schedule ---------------------------
#: Loop annotation: the cp.async in-flight counts the pipelined loop needs, one per wait TVM emits, in order,
#: as a comma-separated string (written by ``wait_counts.guard_loop_waits`` where TVM's counts are too large;
#: read by its passes).
WAITS_KEY = "tvm_twill_async_wait_counts"
#: Loop annotation: the async stages of a loop whose wait counts TVM 0.27 would compute too large, kept out of
#: ``software_pipeline_async_stages`` so that TVM's default pipeline compiles those copies synchronously
#: (correct, slower); the wait guard's first pass (``wait_counts.mark_expected_waits``) puts them back.
GUARDED_ASYNC_KEY = "tvm_twill_async_stages"


def remove_annotation(sch, loop_rv) -> None:
    """Remove every software-pipeline annotation from the loop (no-op when it has none), and the expected
    wait counts (``WAITS_KEY``) and guarded async stages (``GUARDED_ASYNC_KEY``) that belong to it."""
    node = sch.get(loop_rv)
    for key in (*ANNOTATION_KEYS, WAITS_KEY, GUARDED_ASYNC_KEY):
        if key in node.annotations:
            sch.unannotate(loop_rv, key)


def restore_annotation(sch, loop_rv, previous: PipelineAnnotation | None) -> None:
    """Put back what the loop had: ``previous``, or no annotation at all."""
    if previous is None:
        remove_annotation(sch, loop_rv)
    else:
        apply_annotation(sch, loop_rv, previous)


def apply_annotation(sch, loop_rv, ann: PipelineAnnotation) -> None:
    """Write ``ann`` on the loop (replacing any earlier pipeline annotation).

    Generates (for stages [0, 0, 3], orders [0, 1, 2], async stages [0])::

        for k in range(n, annotations={"software_pipeline_stage": [0, 0, 3],
                                       "software_pipeline_order": [0, 1, 2],
                                       "software_pipeline_async_stages": [0]}):
    """
    remove_annotation(sch, loop_rv)
    for key, value in ann.to_dict().items():
        sch.annotate(loop_rv, key, [int(v) for v in value])
