"""Extraction: an s_tir loop -> the dependence graph the solvers schedule.

What a graph op is
------------------
One op per statement that ``InjectSoftwarePipeline`` will see, in the same
order: the direct children of the loop body (the body may be wrapped in an
``SBlockRealize`` that carries allocations).  Two cases mirror what TVM does
when it builds the pipeline:

* a child ``SBlockRealize`` without predicate whose block body is a
  ``SeqStmt`` is flattened into its statements;
* a child loop that itself carries ``software_pipeline_stage`` (a nested
  pipeline, pipelined first because TVM rewrites inner loops first) becomes
  three statements, its prologue, body and epilogue, whose work is counted
  from the inner annotation (``<loop>.prologue`` ...).

The statements are counted where ``InjectSoftwarePipeline`` counts them:
after TVM's passes that precede it (``lowering.lower_to_pipeline``).  Of
those, ``ManifestSharedMemoryLocalStage`` changes the statements: a copy
whose block carries ``tirx.manifest_shared_memory_local_stage`` (dlight's
tensor-core rules) becomes a global->local load and a local->shared store,
two statements (``pipeline_statements``).  Every other statement is costed as
written; the two halves of a split copy are costed on the lowered loop.  The
store's block keeps the read region of the original copy there, so TVM does
not see that it reads the local buffer: TVM keeps one version of that buffer
whatever the stages, and the front-end treats it as a buffer TVM does not
version (its write-after-read order is kept across iterations).

Edges come from the statement-level read/write regions that TVM itself
computes (``get_sblock_read_write_region`` of the statement wrapped in a
block, as ``MakeSBlock`` does): a read of buffer X by a later statement of
what an earlier one writes is a same-iteration RAW edge (distance 0); a read
that is *exposed* (no earlier leaf of the same statement wrote X, e.g. an
accumulator read-modify-write) of what the same or a later statement writes
is a loop-carried RAW edge (distance 1).  Then ``hazards`` adds what TVM's
versioning does not remove: TVM gives ``use - def + 1`` versions only to the
buffers allocated inside the pipelined loop (its legality check is RAW
only), so the order of every conflicting pair of statements is kept inside
an iteration, and across iterations for every buffer TVM does not version
(parameters, buffers used after the loop; an access through a view, a
``match_buffer`` at any level or a ``decl_buffer`` with ``data=``, is one of
the buffer it views: ``views.py``): read-after-write as ``data`` edges,
write-after-read and write-after-write as ``order`` edges (see
``frontend/hazards.py``).

"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..errors import InputError, UnsupportedLoopError
from ..model import Edge, Graph, Machine, Op
from ..model.pipeline import PipelineAnnotation
from .costs import DEFAULT_QUANTUM, StatementAnalyzer, StmtInfo
from .hazards import SYMBOLIC_TRIP, Hazard, Iterations, merge_hazards, statement_regions, versioned_buffers
from .hazards import hazards as find_hazards
from .ir import const_int, double_buffered, is_register, manifested_buffers, scope_of, tirx
from .invariant import hoistable_lets
from .opaque import (BARRIER_COPY, barrier_refusal, bound_var, check_statement_flow, filled_view, hidden_alloc_refusal,
                     hidden_buffers, inlined_lets, is_storage_sync, let_refusal, pseudo_accesses)
from .loops import (find_loops, kernel_shared_buffers, loop_body_allocations, pipeline_children, read_annotation,
                    resolve_loop)
from .lowering import lower_to_pipeline
from .target import machine_for, parse_target
from .views import Views

__all__ = ["Extraction", "extract_loop", "pipeline_statements"]


@dataclass(frozen=True)
class Extraction:
    """The graph of one loop and how it maps back to the loop's statements.

    ``hazards`` are the conflicts on buffers the front-end found (with
    their buffer names), already edges of the graph; ``double_buffered`` the
    buffers a block marks ``double_buffer_scope`` (TVM gives them at least two
    versions); ``versioned`` the buffers InjectSoftwarePipeline multi-versions
    (every other buffer keeps one copy whatever the stages).  ``trip_count``
    is the number of iterations (``ceildiv(extent, step)``), None when the
    extent is symbolic (``extent`` then holds it as text), ``step`` the
    loop's step.  ``graph.ops[i]`` is
    statement ``stmts[i]`` and ``graph.edges`` are the
    dependences between statements (what annotation legality is checked
    against); ``op_index`` maps op name -> statement index; ``quantum`` is
    the number of cycles per time unit of the graph.
    """

    graph: Graph
    stmts: tuple[StmtInfo, ...]
    op_index: dict
    loop: str
    func: str
    trip_count: int | None
    quantum: int
    machine: Machine
    arch: str
    annotation: PipelineAnnotation | None = None
    nested: tuple[str, ...] = ()
    hazards: tuple[Hazard, ...] = ()
    double_buffered: tuple[str, ...] = ()
    versioned: frozenset | None = None
    step: int = 1
    extent: str | None = None
    #: The kernel around the loop, for the throughput model: threads per block, the grid (blockIdx.x
    #: first) and the registers per thread its register-scope buffers take (``StatementAnalyzer``).
    threads: int = 0
    grid: tuple[int, ...] = ()
    local_regs: int = 0
    #: (name, scope, bytes) of every shared buffer of the loop's kernel (``loops.kernel_shared_buffers``)
    kernel_smem: tuple = ()
    #: Why no multi-stage pipeline of this loop is known to compile correctly (``opaque``: ``barrier_refusal``,
    #: ``let_refusal``, ``hidden_alloc_refusal``), or None.
    refusal: str | None = None

    @property
    def trips(self) -> str:
        """The trip count as text: a number, or ``ceildiv(extent, step)`` for a symbolic extent."""
        if self.trip_count is not None:
            return str(self.trip_count)
        return self.extent if self.step == 1 else f"ceildiv({self.extent}, {self.step})"

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.stmts]

    def describe(self) -> str:
        """A table of the statements: kind, units, cycles, latency, footprints."""
        q = self.quantum
        lines = [f"loop '{self.loop}' in '{self.func}': trip count {self.trips}, {len(self.stmts)} "
                 f"statements, machine {self.machine.name} ({self.arch}), 1 time unit = {q} cycles"]
        for s in self.stmts:
            op = self.graph.ops[s.index]
            work = ", ".join(f"{u} {c:.0f}" for u, c in sorted(s.work.items()) if c > 0) or "none"
            lines.append(f"  [{s.index}] {s.name:28s} {s.kind:9s} cycles {work} -> {op.cycles} units; "
                         f"latency {s.latency:.0f}; smem {s.smem} B; regs {op.regs}"
                         + ("; async-capable" if s.async_capable else ""))
        for e in self.graph.edges:
            lines.append(f"  edge {e.src} -> {e.dst}: delay {e.delay} units, distance {e.distance}")
        return "\n".join(lines)


# -- the public entry point --------------------------------------------------
def extract_loop(sch, loop, target, *, machine=None, quantum: int | None = None,
                 streaming_copies: bool = False) -> Extraction:
    """The dependence graph of ``loop`` (a LoopRV or loop name) of ``sch`` on ``target``.

    ``target``: a ``tvm.target.Target`` or an arch string ("sm_80", "sm_90a").
    ``machine``: a Machine or built-in name (default: the model of the arch).
    ``quantum``: cycles per time unit (default ``DEFAULT_QUANTUM``).
    ``streaming_copies``: mark copies ``variable_latency`` (the warp-specialized
    model, in which a producer warp hides their latency); off for TVM's s_tir
    pipeline, where stages must hide it.

    A symbolic extent (a sequence length) is planned like any other: the
    schedule does not depend on the trip count (``trip_count`` is None).
    Raises UnsupportedLoopError for loops that cannot be pipelined: a step
    that is not a constant, a body that is a single statement, control flow
    as a statement of the body (or a While / Break inside one; a guard inside
    a statement is fine), a thread-bound or vectorized loop.  Loops in TVM's
    hand-scheduled style (opaque blocks, explicit barriers, let-bindings:
    ``opaque.py``) are extracted; where TVM cannot compile any pipeline of
    one, ``refusal`` says why and ``auto_pipeline`` refuses it.
    """
    arch, _ = parse_target(target)
    m = machine_for(arch, machine)
    q = DEFAULT_QUANTUM if quantum is None else int(quantum)
    if q < 1:
        raise InputError(f"quantum must be an integer >= 1 (cycles per time unit), got {quantum!r}")
    ref = resolve_loop(sch, loop)
    node = ref.node
    func = sch.mod[ref.func]
    if node.kind not in (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED):
        kind = tirx.ForKind(int(node.kind)).name.lower()
        raise UnsupportedLoopError(f"loop '{ref.name}' is a {kind} loop: only serial loops are software-pipelined")
    it = loop_iterations(node, ref.name)
    check_statement_flow(pipeline_children(node, ref.name), ref.name)
    # the statements as InjectSoftwarePipeline will see them, after TVM's passes that precede it
    low_func, low = lower_to_pipeline(func, ref)
    _check_canonical(low.node, it, ref.name)
    an = StatementAnalyzer(func, ref, m)
    lan = StatementAnalyzer(low_func, low, m, lowered=True)
    entries = pipeline_statements(node, low.node, ref.name, an, lan)
    stmts, nested, regions, unseen, hidden, tvm_seen = _analyze_statements(entries, low, an, lan)
    # every access through a view (match_buffer, decl_buffer with data=) as one of the buffer it views
    views, low_views = Views(func), Views(low_func)
    stmts, regions = views.resolve(stmts, regions, fallback=low_views)
    unseen = set(low_views.names(sorted(unseen)))
    hidden = set(views.names(sorted(hidden))) | set(low_views.names(sorted(hidden)))
    if len(stmts) < 2:
        raise UnsupportedLoopError(f"loop '{ref.name}' has a single statement: there is nothing to overlap")
    stmts, regions = _with_barriers_and_lets([c for c, _ in entries], pipeline_children(low.node, ref.name), stmts,
                                             regions, an.buffer_map, q)
    stmts = _dedupe_names(stmts)
    graph = _build_graph(stmts, ref.name, m, q, streaming_copies)
    # what TVM's versioning leaves: write-after-read / write-after-write / loop-carried hazards
    owned = versioned_buffers(low_func, low.node)
    versioned = owned - unseen - hidden
    found = tuple(find_hazards(stmts, regions, it, versioned))
    graph = merge_hazards(graph, found, stmts, q)
    return Extraction(graph=graph, stmts=tuple(stmts), op_index={s.name: s.index for s in stmts},
                      loop=ref.name, func=ref.func, trip_count=None if it.symbolic is not None else it.trip,
                      quantum=q, machine=m, extent=None if it.symbolic is None else str(it.symbolic),
                      arch=arch, annotation=read_annotation(node), nested=tuple(nested), hazards=found,
                      double_buffered=double_buffered(low_func.body), versioned=versioned, step=it.step,
                      threads=an.threads_per_block,
                      grid=tuple(an.grid[t] for t in sorted(an.grid, key=lambda t: t[-1])),
                      local_regs=lan.local_regs, kernel_smem=kernel_shared_buffers(low_func.body, low.node),
                      refusal=barrier_refusal([c for c, _ in entries], ref.name,
                                              None if it.symbolic is None else (low.node.min, low.node.extent),
                                              low_func.body)
                      or let_refusal([c for c, _ in entries], pipeline_children(low.node, ref.name), ref.name,
                                     it.symbolic is not None, set(hoistable_lets(low.node, low_func.body)))
                      or hidden_alloc_refusal(sorted((owned & hidden) - tvm_seen), ref.name)
                      or low_views.refusal(owned, ref.name))


def _analyze_statements(entries, low, an, lan):
    """Each pipeline statement analyzed (a nested pipeline as its statements), with its regions, and
    the buffers TVM cannot version: (stmts, nested loops, regions, unseen reads, hidden buffers,
    buffers some statement's TVM-visible regions name)."""
    stmts: list[StmtInfo] = []
    nested = []
    regions = []
    unseen: set = set()
    hidden: set = set()
    tvm_seen: set = set()  # buffers some statement's regions, as TVM computes them, name
    for c, a in entries:
        first = len(stmts)
        inner_ann = read_annotation(c) if isinstance(c, tirx.For) else None
        # opaque blocks (empty declared regions): analyzed through a view with the accesses of their bodies
        view, filled = filled_view(c, a.buffer_map) if inner_ann is None else (c, ())
        if inner_ann is not None:
            stmts += a.analyze_nested(len(stmts), c, inner_ann, _inner_statements(c, low.node, a, an, lan))
            nested.append(c.loop_var.name)
        else:
            stmts.append(a.analyze(len(stmts), view))
        # regions of the lowered statements are in TVM's compacted coordinates: compared with those of
        # the statements as written they prove nothing, so they are left empty (may overlap anything)
        reg = statement_regions(view, an.buffer_map) if a is an else _unknown_regions(stmts[first:])
        regions += [reg] * (3 if inner_ann is not None else 1)  # a nested pipeline is 3 statements
        if a is lan:  # reads TVM does not see (a rewritten block's stale regions): it cannot version them
            seen = statement_regions(c, lan.buffer_map)[0]
            unseen |= {b for st in stmts[first:] for b in st.reads if b not in seen}
        hidden |= hidden_buffers(c, a.buffer_map, filled)  # TVM versions only what it sees
        tvm_seen |= {b for side in statement_regions(c, a.buffer_map) for b in side}
    return stmts, nested, regions, unseen, hidden, tvm_seen


def loop_iterations(node, name: str) -> Iterations:
    """The iterations of loop ``node`` (a ``For`` as written): ``i = min + step * k``, ``k < trip``.

    The trip count is ``ceildiv(extent, step)``, as TVM's CanonicalizeLoop
    counts it.  A symbolic extent gives ``SYMBOLIC_TRIP`` iterations with
    ``symbolic`` set (hazards then consider every distance).  A step that is
    not a constant >= 1 is refused (UnsupportedLoopError): the hazards need it.
    """
    extent = const_int(node.extent)
    raw = getattr(node, "step", None)  # TVM 0.27: None for a step of 1
    step = 1 if raw is None else const_int(raw)
    if step is None or step < 1:
        raise UnsupportedLoopError(f"loop '{name}' has step {raw}: only a constant step >= 1 can be "
                                   "software-pipelined (write the loop with a constant positive step)")
    if extent is None:
        return Iterations(node.loop_var, node.min, step, SYMBOLIC_TRIP, symbolic=node.extent)
    return Iterations(node.loop_var, node.min, step, max(0, -(-extent // step)))


def _check_canonical(low_node, it: Iterations, name: str) -> None:
    """The loop after TVM's passes must run the ``it.trip`` iterations counted here."""
    low = loop_iterations(low_node, name)
    if (low.symbolic is None) != (it.symbolic is None) or low.trip != it.trip:
        raise UnsupportedLoopError(
            f"loop '{name}': TVM's passes before InjectSoftwarePipeline give it {low.trip} iterations, tvm_twill "
            f"counts {it.trip}: cannot tell which iterations the pipeline shifts")


def pipeline_statements(sched_node, low_node, name: str, an, lan) -> list:
    """The statements InjectSoftwarePipeline will see in a loop, as ``(statement, analyzer)`` pairs.

    ``sched_node`` is the loop as written, ``low_node`` the same loop after
    TVM's passes that precede InjectSoftwarePipeline (``lower_to_pipeline``);
    ``an`` / ``lan`` analyze statements of the one and of the other.  A
    statement those passes leave alone is taken (and costed) as written.  A
    statement holding a copy annotated ``tirx.manifest_shared_memory_local_stage``
    (dlight's tensor-core rules) is rewritten by ManifestSharedMemoryLocalStage:
    when the shared buffer it fills is allocated in the loop body (where
    PlanAndUpdateBufferAllocationLocation puts a tile used only in the loop),
    a global->local statement is inserted before it and the copy then stores
    local->shared; those statements are taken from the lowered loop.  The
    count must be the lowered loop's: otherwise UnsupportedLoopError (a pass
    changed the loop in a way not accounted for here).
    """
    sched = pipeline_children(sched_node, name)
    low = pipeline_children(low_node, name)
    here = {b.name for b in loop_body_allocations(low_node)}
    groups = []
    for c in sched:
        targets = manifested_buffers(c)
        groups.append((c, sum(1 for t in targets if t in here), bool(targets)))
    expected = sum(1 + k for _, k, _ in groups)
    if expected != len(low):
        raise UnsupportedLoopError(
            f"loop '{name}': TVM's passes before InjectSoftwarePipeline turn its {len(sched)} statements into "
            f"{len(low)}, tvm_twill accounts for {expected}: cannot tell which statements the pass will see")
    out, j = [], 0
    for c, k, split in groups:
        out += [(s, lan) for s in low[j:j + k + 1]] if split else [(c, an)]
        j += k + 1
    return out


def _inner_statements(inner, outer_low, a, an, lan) -> list:
    """The pipeline statements of a nested pipeline loop ``inner`` (see ``pipeline_statements``)."""
    if a is lan:  # already lowered
        return [(c, lan) for c in pipeline_children(inner, inner.loop_var.name)]
    found: list = []
    find_loops(outer_low, inner.loop_var.name, found)
    found = [f for f in found if f.loop_var.same_as(inner.loop_var)]
    if len(found) != 1:
        raise UnsupportedLoopError(f"nested pipeline loop '{inner.loop_var.name}': found {len(found)} copies of it "
                                   "after TVM's passes before InjectSoftwarePipeline")
    return pipeline_statements(inner, found[0], inner.loop_var.name, an, lan)


def _unknown_regions(infos) -> tuple[dict, dict]:
    return ({b: [] for i in infos for b in i.reads}, {b: [] for i in infos for b in i.writes})


def _with_barriers_and_lets(children, lowered, stmts, regions, buffer_map, quantum):
    """The statements with the pseudo-buffers of explicit barriers and let-bindings (``opaque.py``).

    A barrier statement is named ``storage_sync``, a let-binding ``let_<var>``; each has a latency of one
    time unit (a barrier waits for every warp, a binding is an integer op), so what depends on it issues
    later, never in the same slot; a loop with an explicit barrier keeps its copies synchronous (a cp.async
    completes after the barrier that was to publish it)."""
    if len(children) != len(stmts):  # a nested pipeline: three statements for one child
        if any(is_storage_sync(c) or bound_var(c) is not None for c in children):
            raise UnsupportedLoopError("a loop with a nested software pipeline and explicit barriers or "
                                       "let-bindings in its body is not supported: pipeline one of them")
        return stmts, regions
    scope = {b.name: scope_of(b) for b in buffer_map}
    memory = [[b for b in (*s.reads, *s.writes) if b in scope and not is_register(scope[b])] for s in stmts]
    inlined = inlined_lets(children, lowered) if len(lowered) == len(children) else set()
    pseudo = pseudo_accesses(children, memory, inlined)
    has_sync = any(is_storage_sync(c) for c in children)
    out, regs = [], []
    for c, s, (r, w), (rd, wr) in zip(children, stmts, pseudo, regions, strict=True):
        name = "storage_sync" if is_storage_sync(c) else (f"let_{bound_var(c).name}" if bound_var(c) is not None
                                                           else s.name)
        not_async = BARRIER_COPY if has_sync and s.async_capable else s.not_async
        latency = max(s.latency, float(quantum)) if w else s.latency
        out.append(replace(s, name=name, reads=s.reads + r, writes=s.writes + w, exposed=s.exposed + r,
                           async_capable=s.async_capable and not has_sync, not_async=not_async, latency=latency))
        regs.append(({**rd, **{b: [] for b in r}}, {**wr, **{b: [] for b in w}}))
    return out, regs


def _dedupe_names(stmts):
    seen: dict = {}
    out = []
    for s in stmts:
        n = s.name
        if n in seen:
            seen[n] += 1
            n = f"{n}#{seen[s.name]}"
        else:
            seen[n] = 1
        out.append(replace(s, name=n))
    return out


def _units(cycles: float, q: int) -> int:
    return 0 if cycles <= 0 else max(1, math.ceil(cycles / q - 1e-9))


def _build_graph(stmts, loop_name, m, q, streaming) -> Graph:
    ops = []
    for s in stmts:
        work = dict(s.work)
        if streaming and s.kind == "copy":  # one producer issues every copy instruction (model/throughput.py)
            work["TMA"] = max(work.get("TMA", 0.0), s.copy.producer_issue if s.copy is not None else 0.0)
        units = {u: _units(c, q) for u, c in work.items() if c > 0}
        cycles = max(units.values(), default=0)
        # registers count only while another statement still needs them
        regs = sum(r for b, r in s.reg_writes.items()
                   if any(b in t.reads for t in stmts if t.index != s.index))
        common = dict(regs=regs, smem=s.smem, spill_cost=0,
                      variable_latency=bool(streaming and s.kind == "copy"))
        if len(units) <= 1:
            unit = next(iter(units), "ALU")
            ops.append(Op(name=s.name, cycles=cycles, unit=unit, **common))
        else:
            rrt = tuple({u: 1 for u, n in units.items() if j < n} for j in range(cycles))
            ops.append(Op(name=s.name, cycles=cycles, unit=max(units, key=units.get), rrt=rrt, **common))
    edges = []
    for i, a in enumerate(stmts):
        delay = _units(a.latency, q)  # >= 1 for a statement with work: its consumer issues later
        for j, b in enumerate(stmts):
            if i < j and set(a.writes) & set(b.reads):
                edges.append(Edge(a.name, b.name, delay=delay, distance=0))
            elif i >= j and set(a.writes) & set(b.exposed):
                edges.append(Edge(a.name, b.name, delay=delay, distance=1))
    graph = Graph(name=f"{loop_name}", ops=tuple(ops), edges=tuple(edges), machine=m, normalize=False,
                  cycles_per_unit=q)
    return graph


