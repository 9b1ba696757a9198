"""``PipelinePlan.explain()``: what a plan does and why, in words and machine cycles.

The text opens with the roles and the ring of a warp-specialized plan, then
the one-role software pipeline: each statement's cost and stage, what limits
the II (resources, a recurrence, or the proven-infeasible IIs), the hazards
kept in order, why each stage, shared memory and async copies, and the
prediction.
"""
from __future__ import annotations

from ..errors import InputError
from ..model import critical_recurrence, rec_mii, res_mii, resource_bottleneck
from ..model.throughput import unit_label
from . import role_name
from ..planner.roofline import serialized_ii
from ..planner.stages import other_shared, shared_summary

__all__ = ["SYMBOLIC_NOTE", "explain_plan", "ii_claim", "schedule_phrase"]

#: What a plan assumes of a loop whose trip count is symbolic (stated in explain()).
SYMBOLIC_NOTE = ("symbolic trip count: the plan is the same for every trip count (the II is the steady "
                 "state's); assumed: TVM's InjectSoftwarePipeline guards each prologue and epilogue statement "
                 "with its iteration's bound, so a loop shorter than the stage count (0 iterations included) "
                 "runs exactly the iterations that exist, with no overlap; the cp.async wait counts shown are "
                 "what tvm_twill.build compiles: the steady state's in the body, and 0 (wait for every copy) in "
                 "the prologue and epilogue, where TVM emits 0 or a count that depends on the trip count, which "
                 "the plan's pipeline plan.tir_pipeline lowers to 0 (safe, with less overlap there)")


def _cut_short(sched) -> bool:
    """Did the time limit end the search below ``sched``'s ii?  No ii between the proven lower bound and it
    was found feasible (a plan that groups its copies keeps a larger ii than a schedule the solver found)."""
    lb = sched.lower_bound
    return (not sched.ii_optimal and lb is not None
            and not any(a.result == "sat" and lb.ii <= a.ii < sched.ii for a in sched.attempts))


def ii_claim(sched, q: int) -> str:
    """What was proven of ``sched``'s ii (``q``: cycles per model unit): "optimal", or "not proven optimal"
    with the lower bound proven (every II below it infeasible) and the gap."""
    if sched.ii_optimal:
        return "optimal"
    lb = sched.lower_bound
    if lb is None:
        return "not proven optimal"
    return (f"not proven optimal: every II below {lb.ii * q} cycles proven infeasible, gap {100 * sched.ii_gap:.1f}%"
            + ("; the time limit ended the search: a larger time_limit can close it" if _cut_short(sched) else ""))


def schedule_phrase(sched, q: int) -> str:
    """"the optimal schedule", or "the best schedule found (not proven optimal: ...)" (``ii_claim``)."""
    return "the optimal schedule" if sched.ii_optimal else f"the best schedule found ({ii_claim(sched, q)})"


def _ws_opening(plan) -> list[str]:
    """A warp-specialized plan's explanation opens with what runs: the roles and the ring."""
    ws = plan.warp_specialization
    if ws is None or not ws.chosen or not plan.applied:
        return []
    return [f"auto_pipeline: loop '{plan.loop}' ({plan.extraction.trips} iterations) for {plan.arch}: "
            f"warp-specialized, ii {ws.ii_ws_cycles} cycles (one role: {ws.ii_swp_cycles}); "
            + "; ".join(f"{role}: {', '.join(stmts)}" for role, stmts in ws.roles.items())
            + f"; a ring of {ws.ring_depth} slots (mbarriers ws_full / ws_empty) between them",
            "the one-role software pipeline it was compared with:"]


def explain_plan(plan) -> str:
    """The text of ``plan.explain()`` (a ``PipelinePlan``)."""
    ex, s, ann, g = plan.extraction, plan.schedule, plan.annotation, plan.graph
    q = plan.quantum
    m = plan.machine
    L = _ws_opening(plan)
    L.append(f"auto_pipeline: loop '{plan.loop}' ({ex.trips} iterations) for {plan.arch} on machine "
             f"'{m.name}', one role: {role_name(0, m)} runs every statement as TVM's software pipeline runs it; "
             f"times in machine cycles (the model counts in units of {q} cycles)")
    if ex.trip_count is None:
        L.append(SYMBOLIC_NOTE)
    for inner in plan.inner:
        L.append(f"  nested loop '{inner.loop}' was pipelined first: {inner.outcome}; "
                 f"its stages {list(inner.annotation.stages)}, orders {list(inner.annotation.orders)}")
    L.append("statements (one per child of the loop body, as InjectSoftwarePipeline sees them):")
    for st in ex.stmts:
        op = g.ops[st.index]
        p = s.ops[st.name]
        L.append(f"  [{st.index}] {st.name}: {st.description}; {op.cycles * q} cycles on "
                 f"{'+'.join(unit_label(m.costs, u) for u in st.units) or 'nothing'}; issues at cycle "
                 f"{p.time * q} -> stage {ann.stages[st.index]}, "
                 f"order {ann.orders[st.index]}")
    L.extend(_limits(plan))
    L.extend(_stages(plan))
    L.extend(_memory(plan))
    L.append(f"annotations: {plan.annotations}")
    if plan.warp_specialization is not None:
        L.append(plan.warp_specialization.explain())
    L.extend(_ptxas(plan))
    if m.costs is not None and m.costs.chip is not None:
        try:
            L.append(f"prediction: {plan.prediction().explain()}")
        except InputError as e:
            L.append(f"prediction: none ({e})")
    L.extend(f"warning: {w}" for w in plan.warnings)
    L.extend(_alternatives(plan))
    L.append(f"result: {plan.outcome}")
    return "\n".join(L)


def _ptxas(plan) -> list[str]:
    """What ptxas said of the kernel (``plan.with_ptxas``), and what the plan does about it."""
    if plan.ptxas is None:  # not asked (plan.with_ptxas)
        return []
    serialized = [p for p in plan.ptxas if p.kind == "wgmma serialized"]
    L = [p.describe() for p in plan.ptxas if p.kind != "wgmma serialized"][:4]
    if plan.ptxas_registers is not None:
        L.append(f"ptxas: {plan.ptxas_registers} registers per thread; the prediction's CTAs per SM use ptxas's "
                 f"figure, not the model's estimate")
    else:
        L.append("ptxas: no register count for this loop's kernel; the prediction's CTAs per SM use the model's "
                 "estimate")
    if not serialized:
        return L + ["ptxas: no wgmma serialization reported"]
    L += [p.describe() for p in serialized]
    ws = plan.warp_specialization
    ii = ws.ii_ws_cycles if ws is not None and ws.chosen and plan.applied else plan.ii_cycles
    L.append(f"ptxas serialized wgmma: the schedule counts on wgmma overlapping the statements issued after it, "
             f"which the compiled kernel does not do; the prediction runs the compute statements back to back: "
             f"{ii} -> {serialized_ii(plan.extraction, ii):.0f} cycles per iteration.  Not re-solved: the cause is "
             f"in the code ptxas compiled ({serialized[0].reason}), which the model's graph does not describe, "
             f"so a re-solve could not tell which schedule avoids it; the prediction takes the serial cost")
    return L


def _ordinal(k: int) -> str:
    return f"{k}{'th' if 10 <= k % 100 < 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


def _alternatives(plan) -> list[str]:
    """``top_k``: how each next best annotation differs from the plan's (the 1st)."""
    alts = plan.alternatives
    if not alts:
        return []
    head = (f"the {1 + len(alts)} best annotations (top_k={plan.options.top_k}; distinct kernels, in order of ii "
            f"then the solver's tie-break; not written: metaschedule.TwillPipeline(top_k=...) samples them):")
    first = (f"  1st: ii {plan.ii_cycles} cycles, stages {list(plan.annotation.stages)}, "
             f"orders {list(plan.annotation.orders)} (above)")
    return [head, first] + [f"  {_ordinal(a.rank)}: {a.difference}" for a in alts]


def _limits(plan) -> list[str]:
    """The II, its lower bounds and what limits it."""
    s, g, m, q = plan.schedule, plan.graph, plan.machine, plan.quantum
    L = []
    gs = plan.solved_graph or g  # the bounds of what was solved (with a stage bound's constraints)
    res, rec = res_mii(gs, m), rec_mii(gs)
    L.append(f"II = {s.ii * q} cycles per iteration ({ii_claim(s, q)}); lower bounds: "
             f"ResMII {res * q} cycles, RecMII {rec * q} cycles")
    reasons = sorted({a.reason for a in s.attempts if a.result == "unsat" and a.reason})
    if not s.ii_optimal:  # say what was decided, and what was not
        lb = s.lower_bound.ii if s.lower_bound is not None else max(res, rec)
        refuted = (f"every II from {max(res, rec) * q} to {(lb - 1) * q} cycles was proven infeasible by "
                   f"{'; '.join(reasons) or 'the model constraints'}" if lb > max(res, rec) else
                   f"no II below the lower bound {lb * q} cycles works")
        L.append(f"what limits the II: not proven: {refuted}; the IIs from {lb * q} to {(s.ii - 1) * q} cycles were "
                 "not proven infeasible" + (" (the time limit ended the search before it decided them)"
                                            if _cut_short(s) else ""))
    elif s.ii == res:
        unit, total, cap = resource_bottleneck(gs, m)
        users = [op.name for op in g.ops if op.usage(unit)]
        L.append(f"what limits the II: resources - unit {unit_label(m.costs, unit)} is busy {total * q} of every "
                 f"{s.ii * q} cycles "
                 f"(capacity {cap}), used by {', '.join(users)}")
    elif s.ii == rec:
        cyc = critical_recurrence(gs) or []
        L.append(f"what limits the II: recurrence {' -> '.join(cyc + cyc[:1])} (a loop-carried dependence, "
                 "e.g. the accumulator)")
    else:
        L.append(f"what limits the II: every II from {max(res, rec) * q} to {(s.ii - 1) * q} cycles (in steps of "
                 f"{q}) was proven infeasible by "
                 f"{'; '.join(reasons) or 'the model constraints'} (registers, shared memory or latency "
                 "within the fixed window)")
    return L


def _stages(plan) -> list[str]:
    """The depth, the hazards kept in order and why each statement is in its stage."""
    ex, s, ann, g, q = plan.extraction, plan.schedule, plan.annotation, plan.graph, plan.quantum
    L = []
    if plan.depth:
        L.append(f"pipeline depth: {plan.depth}")
    if ex.hazards:
        shown = ", ".join(h.describe(ex.names) for h in ex.hazards[:6])
        more = f" and {len(ex.hazards) - 6} more" if len(ex.hazards) > 6 else ""
        L.append(f"order kept for buffers TVM does not multi-version or uses within an iteration: {shown}{more}")
    L.append("why these stages:")
    lifted = False
    for e in g.edges:
        a, b = ex.op_index[e.src], ex.op_index[e.dst]
        if e.distance == 0 and ann.stages[b] > ann.stages[a]:
            lifted = True
            L.append(f"  {e.dst} runs {ann.stages[b] - ann.stages[a]} stage(s) after {e.src}: it needs "
                     f"{e.delay * q} cycles after {e.src} issues, and II is {s.ii * q} cycles")
    if not lifted:
        L.append("  every dependence fits within one stage at this II")
    return L


def _memory(plan) -> list[str]:
    """Shared memory as TVM allocates it, and the async copies."""
    ex, ann, m = plan.extraction, plan.annotation, plan.machine
    L = []
    smem = plan.shared_memory
    if smem:
        L.append("shared memory (TVM allocates stage distance + 1 versions): "
                 + ", ".join(f"{n} x{v} = {b} B" for n, (v, b) in smem.items())
                 + "".join(f"; the kernel's {n} (not in the loop) = {b} B"
                           for n, (_, b) in other_shared(ex, ann).items())
                 + f"; in all: {shared_summary(ex, ann, m)}")
    if ann.async_stages:
        shown = plan.waits if ex.trip_count is not None else [w for w in plan.waits if w.part == "body"]
        waits = ", ".join(f"{w.part}{'' if w.iteration is None else '[' + str(w.iteration) + ']'} {w.in_flight}"
                          for w in shown)
        if len(shown) < len(plan.waits):  # a symbolic trip count: the guarded parts wait for every copy
            waits += "; every prologue and epilogue wait 0 (the trip count is symbolic, see above)"
        L.append(f"async stages {list(ann.async_stages)}: {', '.join(plan.async_copies)} become cp.async when "
                 f"compiled with tvm_twill.build(mod, target, plan) (or under plan.pass_context()); predicted "
                 f"cp.async.wait_group counts: {waits or 'none'}")
        fixed = [f"{w.emitted} -> {w.expected}" for w in plan.tvm_waits if w.emitted != w.expected]
        if fixed:
            L.append(f"  TVM 0.27 would emit larger counts ({', '.join(fixed)}: a race); so the loop carries its "
                     f"async stages as tvm_twill_async_stages: TVM's default pipeline (a plain tvm.compile, "
                     f"MetaSchedule's builder) compiles these copies synchronously, and the plan's pipeline "
                     f"{plan.tir_pipeline} as cp.async with the counts lowered (docs/tvm-wait-counts.md)")
    else:
        L.append("no async stage (no stage consists only of cp.async-capable copies)")
    L.extend(f"  {name} stays a synchronous copy: {why}" for name, why in plan.sync_copies)
    return L
