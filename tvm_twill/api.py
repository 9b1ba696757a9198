"""``auto_pipeline`` and ``evaluate_annotation``: the user-facing TVM entry points.

``auto_pipeline`` replaces hand-written ``sch.annotate(loop, "software_pipeline_stage", ...)``::

    sch = ...                                   # a tvm.s_tir.Schedule
    k0 = sch.get_loops(sch.get_sblock("C_o_update"))[3]
    plan = tvm_twill.auto_pipeline(sch, k0, "sm_90a")
    print(plan.explain())                       # stages, orders, what limits the II
    # sch now carries software_pipeline_stage / _order / _async_stages on k0

It extracts the loop's dependence graph (``frontend``), finds the schedule
with the smallest initiation interval (``solvers.solve``), turns it into
annotations (``transforms``), checks them with TVM's own
InjectSoftwarePipeline, and returns a ``PipelinePlan``.

Nested pipelines (TVM's nested GEMM test: an outer k loop whose body holds
the shared-memory copies and an inner loop of register-level loads and mma):
pass both loops, ``auto_pipeline(sch, [k0, k1], target)``.  Loops are
pipelined innermost first, one at a time; when the outer loop is extracted,
the annotated inner loop counts as the three statements TVM turns it into
(prologue, body, epilogue), each costed from the inner annotation.  Calling
``auto_pipeline`` on each loop yourself, inner first, is equivalent.

The model: TVM's s_tir pipeline has no warp specialization (every thread
runs every statement), so schedules are solved on the machine with a single
warp role; the II is a throughput figure in the graph's time unit
(``plan.quantum`` cycles), legality only depends on stage and order.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace

from .errors import InfeasibleError, InputError, UnsupportedLoopError
from .frontend.tir import (Extraction, extract_loop, inject_pipeline, machine_for, parse_target,
                           resolve_loop, scratch_schedule)
from .model import (Graph, Machine, Schedule, check, critical_recurrence, graph_to_dict, machine_to_dict,
                    make_schedule, rec_mii, res_mii, resource_bottleneck)
from .transforms.annotate import (ANNOTATION_KEYS, AsyncWait, PipelineAnnotation, annotation_from_schedule,
                                  apply_annotation, async_waits, buffer_versions, legality_violations,
                                  read_annotation)

__all__ = ["AnnotationEval", "PipelinePlan", "annotation_ii", "auto_pipeline", "evaluate_annotation",
           "shared_memory", "swp_machine"]


def swp_machine(machine: Machine) -> Machine:
    """The machine as TVM's s_tir pipeline uses it: one warp role (no warp specialization)."""
    return replace(machine, warp_groups=1)


# -- results -----------------------------------------------------------------
@dataclass(frozen=True)
class PipelinePlan:
    """What ``auto_pipeline`` decided for one loop.

    ``schedule`` (with ``.ii`` in time units of ``quantum`` cycles) and
    ``graph`` are the model's; ``annotation`` / ``annotations`` what is (or
    would be) written on the loop; ``applied`` whether it was written and
    ``reason`` why or why not; ``waits`` the cp.async wait counts the
    pipelined loop needs (``transforms.async_waits``); ``inner`` the plans of
    nested loops pipelined first.
    """

    loop: str
    arch: str
    extraction: Extraction
    schedule: Schedule
    annotation: PipelineAnnotation
    applied: bool
    reason: str
    machine: Machine
    waits: tuple[AsyncWait, ...] = ()
    inner: tuple["PipelinePlan", ...] = ()
    time_limit: float = 10.0

    @property
    def graph(self) -> Graph:
        return self.extraction.graph

    @property
    def quantum(self) -> int:
        """Cycles per time unit of ``graph`` and ``schedule``."""
        return self.extraction.quantum

    @property
    def ii_cycles(self) -> int:
        return self.schedule.ii * self.quantum

    @property
    def annotations(self) -> dict:
        """The loop annotations, ``{key: [int, ...]}``, as ``sch.annotate`` takes them."""
        return self.annotation.to_dict()

    @property
    def shared_memory(self) -> dict:
        """buffer -> (versions TVM allocates, bytes): the multi-buffering of this annotation."""
        return shared_memory(self.extraction, self.annotation)

    @property
    def smem_bytes(self) -> int:
        """Shared memory the pipelined loop's buffers take (all versions)."""
        return sum(b for _, b in self.shared_memory.values())

    def explain(self) -> str:
        """Why these stages, and what limits the II (plain text)."""
        return _explain(self)

    def graph_json(self) -> str:
        """The graph in ``tvm-twill-graph/1`` JSON, with the single-role machine inline."""
        doc = graph_to_dict(self.graph)
        doc["machine"] = machine_to_dict(self.machine)
        return json.dumps(doc, indent=2)

    def reproduce(self) -> str:
        """A Python snippet that re-solves this loop's graph without TVM."""
        return (f"# tvm_twill: loop '{self.loop}' for {self.arch} (1 time unit = {self.quantum} cycles)\n"
                "import json\n"
                "from tvm_twill.model import graph_from_dict\n"
                "from tvm_twill.solvers import solve\n\n"
                f"GRAPH = r'''{self.graph_json()}'''\n\n"
                "graph = graph_from_dict(json.loads(GRAPH))\n"
                f"schedule = solve(graph, graph.machine, time_limit={self.time_limit!r})\n"
                f"print(schedule.ii)  # {self.schedule.ii}\n"
                "print({n: (p.stage, p.order) for n, p in schedule.ops.items()})\n")


@dataclass(frozen=True)
class AnnotationEval:
    """The II an existing annotation achieves under the model.

    ``ii`` is in time units of ``quantum`` cycles (the same units as
    ``PipelinePlan.schedule.ii`` for the same quantum); ``throughput`` is
    loop iterations per cycle (1 / ``ii_cycles``); ``times`` the issue times
    that realize it; ``bound`` names what stops a smaller II.
    """

    loop: str
    annotation: PipelineAnnotation
    ii: int
    quantum: int
    times: dict
    extraction: Extraction
    bound: str = ""

    @property
    def ii_cycles(self) -> int:
        return self.ii * self.quantum

    @property
    def throughput(self) -> float:
        return 1.0 / self.ii_cycles

    @property
    def graph(self) -> Graph:
        return self.extraction.graph

    @property
    def smem_bytes(self) -> int:
        return sum(b for _, b in shared_memory(self.extraction, self.annotation).values())


def shared_memory(ex: Extraction, ann: PipelineAnnotation) -> dict:
    """buffer -> (versions, bytes) for the shared buffers written in the loop (TVM's versioning)."""
    versions = buffer_versions(ann, [s.writes for s in ex.stmts], [s.reads for s in ex.stmts])
    per_iter: dict = {}
    for st in ex.stmts:
        for buf, nbytes in st.smem_writes.items():
            per_iter[buf] = max(per_iter.get(buf, 0), nbytes)
    return {buf: (versions.get(buf, 1), versions.get(buf, 1) * n) for buf, n in per_iter.items()}


# -- auto_pipeline -------------------------------------------------------------
def auto_pipeline(sch, loop, target, *, machine=None, time_limit: float = 10.0, apply: bool = True,
                  quantum: int | None = None, verify: bool = True) -> PipelinePlan:
    """Pipeline ``loop`` of ``sch`` optimally for ``target``; returns a PipelinePlan.

    ``loop``: a LoopRV or loop name, or a list of them (nested pipelines:
    pipelined innermost first; the plan of the outermost is returned, the
    others in ``plan.inner``).  ``target``: a ``tvm.target.Target`` or an arch
    string ("sm_80", "sm_90a").  ``machine``: a Machine or built-in name
    (default: the model of the arch).  ``time_limit``: seconds for the solver.
    ``apply``: write the annotations on ``sch`` (otherwise only plan; with
    several loops the inner ones are planned on a scratch copy).
    ``quantum``: cycles per model time unit.  ``verify``: run TVM's passes
    through InjectSoftwarePipeline on the annotated module.

    The plan is an explained no-op (``applied`` False, ``reason`` says why)
    when the loop's trip count is smaller than the stage count (TVM PR 17579)
    or when the optimal schedule has one stage in the original order.
    Raises UnsupportedLoopError (control flow, dynamic extent, single
    statement, ...), UnsupportedTargetError (non-CUDA, before sm_80),
    InfeasibleError / SolverTimeoutError from the solver.
    """
    if isinstance(loop, (list, tuple)):
        return _auto_nested(sch, list(loop), target, machine=machine, time_limit=time_limit, apply=apply,
                            quantum=quantum, verify=verify)
    return _auto_one(sch, loop, target, machine=machine, time_limit=time_limit, apply=apply, quantum=quantum,
                     verify=verify)


def _auto_nested(sch, loops, target, **kw) -> PipelinePlan:
    if not loops:
        raise InputError("auto_pipeline got an empty list of loops: pass a loop or [outer, inner]")
    refs = [resolve_loop(sch, lp) for lp in loops]
    names = [r.name for r in refs]
    if len(set(names)) != len(names):
        raise InputError(f"auto_pipeline got loop(s) twice: {names}")
    # with apply=False the inner loops are annotated on a scratch schedule over the same IR
    work = sch if kw["apply"] else scratch_schedule(sch)
    depth = {r.name: len(r.ancestors) for r in refs}
    plans = []
    for name in sorted(names, key=lambda n: -depth[n]):  # innermost first
        is_last = name == min(names, key=lambda n: depth[n])
        plans.append(_auto_one(work, name, target, **{**kw, "apply": True if not is_last else kw["apply"]}))
    outer = plans[-1]
    return replace(outer, inner=tuple(plans[:-1]))


def _auto_one(sch, loop, target, *, machine, time_limit, apply, quantum, verify) -> PipelinePlan:
    from .solvers import solve  # lazily: the solver pulls in z3

    arch, _ = parse_target(target)
    m = machine_for(arch, machine)
    ref = resolve_loop(sch, loop)
    for a in ref.ancestors:
        if read_annotation(a) is not None:
            # the outer annotation counts this loop as one statement (or as its old pipeline)
            raise UnsupportedLoopError(
                f"loop '{ref.name}' is inside the pipelined loop '{a.loop_var.name}': pipeline inner loops "
                "first (auto_pipeline(sch, [outer, inner], ...)), then the outer loop")
    ex = extract_loop(sch, ref.rv, arch, machine=m, quantum=quantum)
    ms = swp_machine(m)
    graph = ex.graph.replace(machine=ms)
    ex = replace(ex, graph=graph)
    sched = solve(graph, ms, time_limit=time_limit)
    ann = annotation_from_schedule(sched, ex.names, ex.deps, [s.async_capable for s in ex.stmts],
                                   allow_async=True)
    ann = _group_async_copies(_prefer_program_order(ann, graph, ms, ex.deps, sched.ii), graph, ms, ex.deps,
                              sched.ii)
    waits = async_waits(ann, ex.deps, ex.trip_count) if ann.async_stages else ()
    plan = PipelinePlan(loop=ex.loop, arch=arch, extraction=ex, schedule=sched, annotation=ann, applied=False,
                        reason="", machine=ms, waits=waits, time_limit=time_limit)
    if ann.num_stages > ex.trip_count:
        return replace(plan, reason=(
            f"not applied: the optimal schedule has {ann.num_stages} stages but loop '{ex.loop}' runs only "
            f"{ex.trip_count} iteration(s); TVM's pipeline would have no steady state (the case of TVM PR "
            "17579). Give the loop more iterations (a smaller tile of its split) or leave it unpipelined"))
    if ann.num_stages == 1 and list(ann.orders) == sorted(ann.orders) and not ann.async_stages:
        return replace(plan, reason=(
            f"not applied: the optimal schedule (II {sched.ii} units) keeps every statement of '{ex.loop}' in "
            "one stage in program order, which is what the loop already does; annotating would change nothing"))
    if not apply:
        return replace(plan, reason="not applied: apply=False (call transforms.apply_annotation to write it)")
    previous = read_annotation(ref.node)
    apply_annotation(sch, ref.rv, ann)
    if verify:
        try:
            inject_pipeline(sch.mod)
        except UnsupportedLoopError:
            _restore(sch, ref.rv, previous)  # leave the schedule as it was
            raise
    return replace(plan, applied=True, reason=f"applied to loop '{ex.loop}'")


def _restore(sch, loop_rv, previous: PipelineAnnotation | None) -> None:
    if previous is not None:
        apply_annotation(sch, loop_rv, previous)
        return
    for key in ANNOTATION_KEYS:
        if key in sch.get(loop_rv).annotations:
            sch.unannotate(loop_rv, key)


def _achieves(cand: PipelineAnnotation, graph, machine, deps, ii: int) -> bool:
    """Is ``cand`` legal for TVM and does it still reach ``ii`` under the model?"""
    if legality_violations(cand, deps):
        return False
    try:
        return annotation_ii(graph, machine, cand)[0] <= ii
    except InfeasibleError:
        return False


def _prefer_program_order(ann: PipelineAnnotation, graph, machine, deps, ii: int) -> PipelineAnnotation:
    """Keep the statements in their program order when that costs no II.

    The solver's order is one of many equally good ones (it follows issue
    slots); the program order is what TVM's own annotations use and what nvcc
    handles best: on TVM's nested GEMM for sm_90a, the inner order
    ldmatrix A, mma, ldmatrix B (same stages, same model II) makes nvcc keep
    the warp fragments in a 2 KB local-memory stack frame, program order none.
    """
    cand = replace(ann, orders=tuple(range(len(ann.orders))))
    if cand == ann or not _achieves(cand, graph, machine, deps, ii):
        return ann
    return cand


def _group_async_copies(ann: PipelineAnnotation, graph, machine, deps, ii: int) -> PipelineAnnotation:
    """Put the statements of the async stage next to each other, in program order, when that costs nothing.

    TVM commits one cp.async group per contiguous run of async statements;
    keeping the copies contiguous gives one group per iteration (the simplest
    wait counts, and it avoids TVM's wrong body count for interleaved copies,
    see ``transforms.async_waits``).  The new order is kept only if it is
    legal and still achieves ``ii`` (``annotation_ii``); otherwise the
    schedule's order stays.
    """
    if not ann.async_stages:
        return ann
    st = ann.async_stages[0]
    seq = sorted(range(len(ann.orders)), key=lambda i: ann.orders[i])
    copies = sorted(i for i in seq if ann.stages[i] == st)  # in program order, as a person writes them
    first = min(seq.index(c) for c in copies)
    new_seq = seq[:first] + copies + [i for i in seq[first:] if i not in copies]
    if new_seq == seq:
        return ann
    orders = [0] * len(seq)
    for pos, i in enumerate(new_seq):
        orders[i] = pos
    cand = replace(ann, orders=tuple(orders))
    return cand if _achieves(cand, graph, machine, deps, ii) else ann


# -- evaluate_annotation --------------------------------------------------------
def evaluate_annotation(sch, loop, target, *, machine=None, quantum: int | None = None) -> AnnotationEval:
    """The II (and throughput) that the annotation already on ``loop`` achieves under the model.

    Definition: the smallest ii for which there are issue offsets
    0 <= off[v] < ii, non-decreasing in the annotated order, such that the
    times ``stage[v] * ii + off[v]`` satisfy the model's dependence (1),
    resource (2), register (5) and memory (6) rules on the single-role
    machine.  The stage/order pair fixes everything but the offsets, so this
    is the best the annotation can do; an optimal ``auto_pipeline`` schedule
    of the same graph can only be as good or better.

    Offsets are found exactly for units of capacity 1 (all built-in units):
    with the order fixed, dependences, the [0, ii) window and non-overlap on
    a unit are all difference constraints, solved by Bellman-Ford (least
    offsets); registers and memory are then checked on those offsets.
    """
    arch, _ = parse_target(target)
    m = machine_for(arch, machine)
    ex = extract_loop(sch, loop, arch, machine=m, quantum=quantum)
    ann = ex.annotation
    if ann is None:
        raise UnsupportedLoopError(f"loop '{ex.loop}' has no software_pipeline_stage/order annotation: nothing to "
                                   "evaluate (auto_pipeline writes one)")
    if len(ann.stages) != len(ex.stmts):
        raise UnsupportedLoopError(
            f"loop '{ex.loop}' has {len(ex.stmts)} pipeline statements ({', '.join(ex.names)}) but its "
            f"annotation has {len(ann.stages)} entries: InjectSoftwarePipeline would reject it")
    bad = legality_violations(ann, ex.deps)
    if bad:
        raise InputError(f"the annotation of loop '{ex.loop}' is not a legal pipeline: {bad[0]}")
    ms = swp_machine(m)
    graph = ex.graph.replace(machine=ms)
    ex = replace(ex, graph=graph)
    ii, times, bound = annotation_ii(graph, ms, ann)
    return AnnotationEval(loop=ex.loop, annotation=ann, ii=ii, quantum=ex.quantum, times=times, extraction=ex,
                          bound=bound)


def annotation_ii(graph: Graph, machine: Machine, ann: PipelineAnnotation) -> tuple[int, dict, str]:
    """(ii, times, what binds) of a fixed stage/order assignment; see ``evaluate_annotation``."""
    lo = max(res_mii(graph, machine), rec_mii(graph))
    hi = lo + sum(max([op.cycles] + [e.delay for e in graph.out_edges(op.name)]) for op in graph.ops) + 1
    last_fail = "dependence"
    for ii in range(lo, 4 * hi + 1):
        times, why = _times_at(graph, machine, ann, ii)
        if times is not None:
            if ii == lo:
                bound = "the lower bound max(ResMII, RecMII)"
            else:
                bound = f"{last_fail} at ii {ii - 1} with these stages and orders"
            return ii, times, bound
        last_fail = why
    raise InfeasibleError(f"graph '{graph.name}': the annotation has no valid II under the model ({last_fail})",
                          family=last_fail)


def _times_at(graph, machine, ann, ii):
    """Least issue times for the annotation at ``ii``, or (None, reason)."""
    names = graph.names
    idx = {n: i for i, n in enumerate(names)}
    n = len(names)
    src = n  # virtual source: offsets are measured from it
    cons = []  # (u, v, w): off[v] >= off[u] + w
    st = ann.stages
    for e in graph.edges:
        u, v = idx[e.src], idx[e.dst]
        cons.append((u, v, e.delay - (st[v] + e.distance - st[u]) * ii))
    seq = sorted(range(n), key=lambda i: ann.orders[i])
    cons += [(a, b, 0) for a, b in zip(seq, seq[1:])]
    for v in range(n):
        cons.append((src, v, 0))
        cons.append((v, src, -(ii - 1)))
    pos = {v: k for k, v in enumerate(seq)}
    for unit, cap in machine.units.items():
        if cap != 1:
            continue  # checked on the result below
        users = [(v, _span(graph.ops[v], unit)) for v in range(n)]
        users = [(v, c) for v, c in users if c > 0]
        for a, ca in users:
            for b, cb in users:
                if pos[a] < pos[b]:
                    cons.append((a, b, ca))        # b starts after a ends
                    cons.append((b, a, cb - ii))   # and ends before a's next instance
    dist = [0] * (n + 1)
    for _ in range(n + 2):
        changed = False
        for u, v, w in cons:
            if dist[u] + w > dist[v]:
                dist[v] = dist[u] + w
                changed = True
        if not changed:
            break
    else:
        return None, "dependence/resources"
    if dist[src] != 0:
        return None, "dependence/resources"
    times = {names[v]: st[v] * ii + dist[v] for v in range(n)}
    sched = make_schedule(graph, machine.name, ii, times, {nm: 0 for nm in names},
                          {op.name: op.cycles for op in graph.ops})
    bad = [v for v in check(sched, graph, machine) if v.rule in (1, 2, 5, 6)]
    if bad:
        return None, {1: "dependence", 2: "resources", 5: "registers", 6: "memory"}[bad[0].rule]
    return times, ""


def _span(op, unit) -> int:
    """Cycles from the op's issue to the end of its last use of ``unit`` (0: unused)."""
    rows = [j for j, row in enumerate(op.reservation()) if any(u == unit and k for u, k in row)]
    return rows[-1] + 1 if rows else 0


# -- explain ----------------------------------------------------------------------
def _explain(plan: PipelinePlan) -> str:
    ex, s, ann, g = plan.extraction, plan.schedule, plan.annotation, plan.graph
    q = plan.quantum
    m = plan.machine
    L = [f"auto_pipeline: loop '{plan.loop}' ({ex.trip_count} iterations) for {plan.arch} on machine "
         f"'{m.name}', single warp role (TVM s_tir pipelines have no warp specialization); "
         f"1 time unit = {q} cycles"]
    for inner in plan.inner:
        L.append(f"  nested loop '{inner.loop}' was pipelined first: {inner.reason}; "
                 f"its stages {list(inner.annotation.stages)}, orders {list(inner.annotation.orders)}")
    L.append("statements (one per child of the loop body, as InjectSoftwarePipeline sees them):")
    for st in ex.stmts:
        op = g.ops[st.index]
        p = s.ops[st.name]
        L.append(f"  [{st.index}] {st.name}: {st.description}; {op.cycles} units on "
                 f"{'+'.join(st.units) or 'nothing'}; issue time {p.time} -> stage {ann.stages[st.index]}, "
                 f"order {ann.orders[st.index]}")
    res, rec = res_mii(g, m), rec_mii(g)
    L.append(f"II = {s.ii} units = {s.ii * q} cycles per iteration "
             f"({'optimal' if s.optimal else 'best found'}); lower bounds: ResMII {res}, RecMII {rec}")
    if s.ii == res:
        unit, total, cap = resource_bottleneck(g, m)
        users = [op.name for op in g.ops if op.usage(unit)]
        L.append(f"what limits the II: resources - unit {unit} is busy {total} of every {s.ii} units "
                 f"(capacity {cap}), used by {', '.join(users)}")
    elif s.ii == rec:
        cyc = critical_recurrence(g) or []
        L.append(f"what limits the II: recurrence {' -> '.join(cyc + cyc[:1])} (a loop-carried dependence, "
                 "e.g. the accumulator)")
    else:
        reasons = sorted({a.reason for a in s.attempts if a.result == "unsat" and a.reason})
        L.append(f"what limits the II: every ii in [{max(res, rec)}, {s.ii}) was proven infeasible by "
                 f"{'; '.join(reasons) or 'the model constraints'} (registers, shared memory or latency "
                 "within the fixed window)")
    L.append("why these stages:")
    lifted = False
    for e in g.edges:
        a, b = ex.op_index[e.src], ex.op_index[e.dst]
        if e.distance == 0 and ann.stages[b] > ann.stages[a]:
            lifted = True
            L.append(f"  {e.dst} runs {ann.stages[b] - ann.stages[a]} stage(s) after {e.src}: it needs "
                     f"{e.delay} units ({e.delay * q} cycles) after {e.src} issues, and II is {s.ii} units")
    if not lifted:
        L.append("  every dependence fits within one stage at this II")
    smem = plan.shared_memory
    if smem:
        L.append("shared memory (TVM allocates stage distance + 1 versions): "
                 + ", ".join(f"{n} x{v} = {b} B" for n, (v, b) in smem.items())
                 + f"; total {plan.smem_bytes} B of {m.smem_bytes} B")
    if ann.async_stages:
        waits = ", ".join(f"{w.part}{'' if w.iteration is None else '[' + str(w.iteration) + ']'} {w.in_flight}"
                          for w in plan.waits)
        L.append(f"async stages {list(ann.async_stages)}: their copies become cp.async; predicted "
                 f"cp.async.wait_group counts: {waits or 'none'}")
    else:
        L.append("no async stage (no stage consists only of cp.async-capable copies)")
    L.append(f"annotations: {plan.annotations}")
    L.append(f"result: {plan.reason}")
    return "\n".join(L)
