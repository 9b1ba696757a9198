"""Warp specialization for ``auto_pipeline(..., warp_specialize=False | True | "auto")``.

The one-role plan (TVM's InjectSoftwarePipeline: every warp runs every
statement) is compared with the joint schedule on the full machine model:
the loop's global->shared copies become variable-latency streaming producer
ops (a producer warp runs them ahead through a ring of ``depth`` slots,
section 5.3 of the Twill paper) and the rest is placed by the joint solver on
the machine's warp roles, spill costs and register limits.  ``"auto"``
specializes when that ii is smaller; ``True`` specializes regardless.  Every
solve here models the consumers as the kernel runs them: in program order,
one iteration after the other (``model.groups.in_program_order``; the
transform does not software-pipeline the consumer body).  The consumer warps
run as one group, or as two groups taking turns on the tensor core through
named barriers, one turn per run of tensor-core statements
(``order_consumer_groups``: when the joint schedule of the loop split over two
data-parallel groups with those turns, ``model.groups``, has a smaller ii and
passes the checker with each group on a role of its own).

A specialized loop loses its software-pipeline annotation and gets
``tvm_twill.ws_depth`` (and, on sm_90a, ``tvm_twill.ws_registers``; with
ordered groups ``tvm_twill.ws_consumer_order``);
``transforms.ws.rewrite`` rewrites it during ``tvm.compile(...,
tir_pipeline=plan.tir_pipeline)``.  Before the plan is returned the
transform is run on the schedule and the mbarrier protocol it emitted is
model checked (``model.protocol``); a kernel that fails is never returned.
"""
from __future__ import annotations

from dataclasses import replace
from itertools import takewhile

from ..errors import InputError, TwillError, UnsupportedLoopError
from ..frontend.costs import CP_ASYNC_BYTES
from ..frontend.ir import thread_extents
from ..model.arch import parse_arch
from ..model import check, register_peaks
from ..model.groups import in_program_order, look_ahead, place_groups, rotate_turns, split_consumers, with_turns
from ..model.pipeline import (ANNOTATION_KEYS, WS_CONSUMER_ORDER, WS_DEPTH, WS_KEYS, WS_LOOKAHEAD, WS_REGISTERS,
                             WS_SWIZZLE)
from .context import Candidate, PlanningContext
from .stages import DYNAMIC, STATIC, STATIC_SMEM_BYTES, other_shared, shared_limits, shared_memory
from .ws_plan import (REFUSED_LOOKAHEAD, REFUSED_ORDER, Alternative, ConsumerGroups, GroupsDecision, JointSolve,
                      JointSplit, WarpSpecialization, WsDecision, WsEmitted, WsTiming)
from .roofline import compare_variants, variant_throughput
from ..transforms import buffer_versions
from ..transforms.wgmma_overlap import has_wgmma
from ..transforms.ws.facts import barrier_slots
from ..transforms.pipelines import WS_PIPELINE, emit_and_check, register
from ..transforms.ws.lowering import protocol_limits

__all__ = ["WS_CHOICES", "WarpSpecialization", "apply_warp_specialization", "order_consumer_groups",
           "plan_warp_specialization", "register_budgets"]

WS_CHOICES = (False, True, "auto")

#: Registers per thread the producer warp group keeps (CUTLASS's choice: address arithmetic only).
PRODUCER_REGISTERS = 40
#: Most registers per thread a consumer asks for (setmaxnreg takes 24..256 in steps of 8; ptxas caps at 255).
CONSUMER_REGISTER_CAP = 240


def register_budgets(consumer_threads: int, producer_threads: int = 128,
                     regs_per_sm: int = 65536) -> tuple[int, int]:
    """(producer, consumer) setmaxnreg values for one block per SM.

    ptxas gives every thread of a ``__launch_bounds__(n, 1)`` kernel
    ``R = floor8(min(255, regs_per_sm / n))`` registers; setmaxnreg moves
    registers between the warp groups within that pool, so the consumers get
    ``floor8((n R - P r_p) / C)``, at most 240."""
    n = consumer_threads + producer_threads
    pool = n * (min(255, regs_per_sm // n) // 8 * 8)
    consumer = (pool - producer_threads * PRODUCER_REGISTERS) // consumer_threads // 8 * 8
    consumer = min(CONSUMER_REGISTER_CAP, consumer)
    if consumer < 24:
        raise UnsupportedLoopError(f"warp specialization: {consumer_threads} consumer threads leave {consumer} "
                                   "registers per thread (setmaxnreg needs at least 24)")
    return PRODUCER_REGISTERS, consumer


def _consumer_threads(func) -> int:
    ext: dict = {}
    thread_extents(func.body, ext)
    n = 1
    for v in ext.values():
        n *= v
    return n


#: Consumer groups tried by the planner: two, FA3's ping-pong.
CONSUMER_GROUPS = 2
#: Seconds (at most) the solve of the split loop gets.  Its chains and turns give a recurrence bound the
#: heuristic's incumbent usually meets or nearly meets, and refuting the ii between them can take z3 minutes;
#: the groups are chosen on a valid schedule with a smaller ii than one group's optimum, proven or not (the
#: note says which), so a bounded share of the plan's time is spent on the proof.
GROUPS_TIME_LIMIT = 10.0


def _has_wgmma(func) -> bool:
    return has_wgmma([func.body])


def order_consumer_groups(func, graph, names, machine, opts, solve, one_ii: int, q: int) -> GroupsDecision:
    """Should the consumer warps of ``func`` run as ``CONSUMER_GROUPS`` ordered groups?  Solves the split
    loop (``model.groups``: ``graph``, in program order, split over the groups, with the round-robin turns of
    its tensor-core sections, as ``transforms.ws.consumer_order`` emits them) on a machine of one producer and
    that many consumer roles.  The decision's ``order`` is None unless the ii is smaller than ``one_ii`` (one
    group's) and the schedule, each group on a role of its own, passes the checker.  When a wgmma body's turn
    spans the back edge and the look-ahead turn (``_look_ahead``) beats it, the schedule is the look-ahead's
    and ``no_lookahead`` the decision with the turn across the back edge (the fallback)."""
    warps, g = _consumer_threads(func) // 32, CONSUMER_GROUPS
    if warps % g or (_has_wgmma(func) and (warps // g) % 4):
        whole = " of whole warp groups (wgmma)" if _has_wgmma(func) else ""
        return GroupsDecision(None, None, f"one group: {warps} consumer warps do not split into {g} groups{whole}")
    rotated, sections = rotate_turns(graph, names)
    wraps, graph = rotated is not graph, rotated   # the first turn spans the back edge
    if not sections:
        return GroupsDecision(None, None, f"one group: no consumer statement uses the tensor core, so {g} groups "
                                          "would have nothing to take turns on")
    split = with_turns(split_consumers(graph, names, g), sections, g)
    on = replace(machine.generic_roles(), warp_groups=g + 1)
    gopts = replace(opts, time_limit=min(opts.time_limit, GROUPS_TIME_LIMIT))
    try:
        sched = solve(split, on, options=gopts)
    except TwillError as e:
        return GroupsDecision(None, None, f"one group: {g} groups have no joint schedule "
                                          f"({str(e).splitlines()[0]})", sections)
    ii = sched.ii * q
    proof = _proof(sched, q)
    if sched.ii >= one_ii:
        return GroupsDecision(None, JointSolve(sched, split, on), f"one group: {g} groups of {warps // g} warps reach "
                              f"ii {ii} cycles{proof}, no better than one group's {one_ii * q}", sections)
    from ..solvers import prepare
    placed = place_groups(sched, split, names, g)
    prep = prepare(split, on, opts)
    bad = check(placed, prep.graph, prep.machine)
    if bad:
        return GroupsDecision(None, JointSolve(sched, split, on), f"one group: the joint schedule of {g} groups (ii "
                              f"{ii} cycles) with each group on a warp role of its own fails the checker ({bad[0]})",
                              sections)
    order = tuple(range(g))
    turns = "; ".join(", ".join(sec) for sec in sections)
    if wraps:
        turns += f" (spanning the back edge: from {sections[0][0]} of iteration k to {sections[0][-1]} of k + 1)"
    note = (f"{g} groups of {warps // g} warps taking turns on the tensor core ({len(sections)} turn(s) per "
            f"iteration: {turns}; the rest of each group's work runs under the other group's turns): ii {ii} "
            f"cycles{proof} vs {one_ii * q} with one group")
    ahead = _look_ahead(func, split, sections, g, on, gopts, solve, names, opts, sched.ii, q) if wraps else None
    across = GroupsDecision(order, JointSolve(placed, split, on), note, sections)  # no look-ahead: its fallback
    if ahead is None:
        return across
    sched2, split2, proof2 = ahead
    first = list(takewhile(lambda n: n in sections[0], (op.name for op in graph.ops if op.name not in names)))
    last = [n for n in sections[0] if n not in first]     # the turn: the last run, then the first (rotate_turns)
    note2 = (f"{g} groups of {warps // g} warps taking turns on the tensor core with a look-ahead (1 turn per "
             f"iteration: {', '.join(first)} of iteration k, then {', '.join(last)} of k - 1 left in flight until a "
             f"statement depends on it; the rest of each group's work runs under its own in-flight GEMM and the other "
             f"group's turns): ii {sched2.ii * q} cycles{proof2} vs {ii} with the turn across the back edge, "
             f"{one_ii * q} with one group")
    return GroupsDecision(order, JointSolve(sched2, split2, on), note2, sections, no_lookahead=across)


def _look_ahead(func, split, sections, g, on, gopts, solve, names, opts, ii: int, q: int):
    """The look-ahead turn (``model.groups.look_ahead``, ``transforms.ws.look_ahead``) of a wgmma body whose one
    turn spans the back edge: (placed schedule, its graph, the proof note) when its ii is smaller than ``ii``
    (the turn across the back edge) and each group on a role of its own passes the checker, else None."""
    if not _has_wgmma(func):
        return None
    graph = look_ahead(split, sections, g)
    if graph is None:
        return None
    try:
        sched = solve(graph, on, options=gopts)
    except TwillError:
        return None
    if sched.ii >= ii:
        return None
    from ..solvers import prepare
    placed, prep = place_groups(sched, graph, names, g), prepare(graph, on, opts)
    return None if check(placed, prep.graph, prep.machine) else (placed, graph, _proof(sched, q))


def _proof(sched, q: int) -> str:
    """What the note says of a schedule's optimality."""
    lb = sched.lower_bound.ii * q if sched.lower_bound is not None else None
    return "" if sched.optimal else \
        " (optimal: no ii below it; the time limit cut the tie-breaks short)" if sched.ii_optimal else \
        " (not proven optimal" + (f": no ii below {lb} cycles)" if lb else ")")


def _ring_fit(copies, depth: int, machine, others=()) -> tuple[int, int, str]:
    """(the deepest ring depth <= ``depth`` that fits, bytes of one slot of every ring, the limit in words).

    The rings keep their tiles' scope: static ones ("shared") and the mbarrier arrays (always static) within
    ``STATIC_SMEM_BYTES``, everything within the block's ``smem_bytes``; ``others``: (scope, bytes) of the
    kernel's other shared buffers, counted once."""
    slot: dict = {}
    for st in copies:
        for buf, nbytes in st.smem_writes.items():
            slot[buf] = (max(slot.get(buf, (0, ""))[0], nbytes), st.smem_scopes.get(buf, STATIC))
    static = sum(n for n, sc in slot.values() if not sc.startswith(DYNAMIC))
    total = sum(n for n, _ in slot.values())
    caps = shared_limits(machine)
    others = list(others)
    fixed_static, fixed_all = sum(b for sc, b in others if sc == STATIC), sum(b for _, b in others)

    def fits(d):
        bars = 2 * 8 * barrier_slots(d)
        return static * d + bars + fixed_static <= caps[STATIC] and total * d + bars + fixed_all <= caps[DYNAMIC]

    fit = next((d for d in range(depth, 0, -1) if fits(d)), 0)
    limit = (f"the {caps[STATIC]} B of static shared memory (scope 'shared') a kernel may declare"
             if static and static * depth + 2 * 8 * barrier_slots(depth) + fixed_static > caps[STATIC]
             else f"the {caps[DYNAMIC]} B of shared memory a block has")
    return fit, total, limit


def _no_producer_copy(ex) -> str:
    """Why no statement of ``ex`` can go to a producer warp: none copies global->shared, or the copies move
    vectors cp.async cannot (it moves 4, 8 or 16 bytes per thread), or are not plain copies."""
    found = [s for s in ex.stmts if s.kind == "copy"]
    if not found:
        return "has no global->shared copy for a producer warp"
    parts = []
    for s in found:
        sizes = s.vector_bytes
        if sizes and any(v not in CP_ASYNC_BYTES for v in sizes):
            parts.append(f"'{s.name}' moves {'/'.join(map(str, sizes))}-byte vectors per thread")
        elif s.not_async:  # a transposing or misaligned vector (frontend/cp_async.py)
            parts.append(f"'{s.name}': {s.not_async}")
        else:
            parts.append(f"'{s.name}' is not a plain element-for-element copy")
    return (f"has global->shared copies, but none a producer warp's cp.async can run ({'; '.join(parts)}; "
            f"cp.async moves {', '.join(map(str, CP_ASYNC_BYTES))} bytes per thread): vectorize the copies to "
            "one of those sizes")


def _by_throughput(ex, swp_plan: Candidate, ii_swp: int, ii_ws: int, ring_bytes: int, budgets) -> tuple[bool, str]:
    """(the producer variant is better, why): compared by predicted throughput per SM (occupancy
    counted: ``roofline.compare_variants``), by ii where the machine has no chip figures."""
    smem = sum(b for _, b in shared_memory(ex, swp_plan.annotation).values())  # the one-role plan's versions
    pair = compare_variants(ex, swp_plan.schedule, ii_swp, smem, ii_ws, ring_bytes, budgets)
    if pair is None:
        return ii_ws < ii_swp, f"has ii {ii_ws} cycles vs the one-role pipeline's {ii_swp} cycles"
    plain, ws = pair
    return (ws.tflops_per_sm > plain.tflops_per_sm,
            f"(ii {ii_ws} cycles) predicts {variant_throughput(ws)} vs the one-role pipeline's (ii {ii_swp} cycles) "
            f"{variant_throughput(plain)}: variants compared by throughput per SM")


def _ring_depth(ex, ann, copies, machine) -> tuple[int, int, str | None, str]:
    """(ring depth, bytes of one slot of every ring, why shallower than the pipeline's buffer versions or None,
    the shared-memory limit in words).  Every ring has the same depth: the pipeline's buffer versions of its
    tiles (at least 2), capped where the rings (+ the mbarrier arrays) fill shared memory; below 2 nothing fits."""
    versions = buffer_versions(ann, [s.writes for s in ex.stmts], [s.reads for s in ex.stmts])
    depth = max(2, max(versions.get(b, 1) for s in copies for b in s.writes))
    fit, slot, limit = _ring_fit(copies, depth, machine, other_shared(ex, ann).values())
    if fit >= depth:
        return depth, slot, None, limit
    return fit, slot, f"ring depth {fit}, not the pipeline's {depth}: {depth} slots of {slot} B exceed {limit}", limit


def _latency_depth(depth: int, ex, names, ii_cycles: int, note: str | None) -> tuple[int, str | None]:
    """(ring depth, why shallower) once the schedule's ii is known: with ``d`` slots the producer runs ``d - 1``
    iterations ahead of the consumers, so ``1 + ceil(L / ii)`` slots hide the copies' latency ``L`` (the delay
    of their edges: an unloaded DRAM access plus the tile's share of the bandwidth, ``frontend.costs``); a
    deeper ring only holds shared memory (and makes the protocol's state space grow with every slot)."""
    q = ex.quantum
    latency = max((e.delay for e in ex.graph.edges if e.src in names), default=0) * q
    need = max(2, 1 + -(-latency // max(ii_cycles, 1)))
    if need >= depth:
        return depth, note
    return need, (f"ring depth {need}, not the pipeline's {depth}: at ii {ii_cycles} cycles, {need - 1} slot(s) "
                  f"ahead of the consumers cover the copies' {latency}-cycle latency")


def _role_register_peaks(ws, graph, names, budgets) -> tuple[int, int]:
    """The joint schedule's peak registers per thread of the (producer, consumer) roles, checked to fit the
    setmaxnreg ``budgets`` (when the kernel gets them)."""
    producer_role = next(p.warp for n, p in ws.ops.items() if n in names)
    peaks = register_peaks(ws, graph)
    peak = (peaks.get(producer_role, 0), max((r for w, r in peaks.items() if w != producer_role), default=0))
    if budgets is not None:
        for role, need, have in zip(("producer", "consumer"), peak, budgets):
            if need > have:
                raise UnsupportedLoopError(
                    f"warp specialization: the joint schedule holds {need} registers per thread in the "
                    f"{role} role, more than its setmaxnreg budget {have}: plan without warp_specialize")
    return peak


def _roles_and_barriers(ex, copies, order) -> tuple[dict, dict]:
    """What each role runs, and what each barrier is for (``WarpSpecialization.roles`` / ``barriers``)."""
    consumers = tuple(s.name for s in ex.stmts if not s.async_capable)
    roles = {"producer warp": tuple(s.name for s in copies)}
    roles.update({f"consumer group {g}": consumers for g in range(len(order))} if order
                 else {"consumer warps": consumers})
    barriers = {"ws_full[s]": "mbarrier: slot s landed (producer -> consumers)",
                "ws_empty[s]": "mbarrier: slot s released by every consumer warp (consumers -> producer)",
                "named barrier 0": "__syncthreads once, after mbarrier.init (all threads)"}
    barriers.update({f"named barrier {1 + g}": f"consumer group {g}'s turn (bar.sync by group {g}, bar.arrive "
                     "by the group before it in the order)" for g in range(len(order or ()))})
    return roles, barriers


def plan_warp_specialization(sch, ref, ctx: PlanningContext, swp_plan: Candidate, arch: str) -> WarpSpecialization:
    """Decide the warp specialization of ``ref`` against ``swp_plan``, its one-role plan (see module doc):
    ``ctx.options.warp_specialize`` (``WS_CHOICES``), solved on ``ctx.full_machine`` within
    ``ctx.options.time_limit`` by ``ctx.solve``."""
    ex, choice, solve = ctx.extraction, ctx.options.warp_specialize, ctx.solve
    if choice not in WS_CHOICES:
        raise InputError(f"warp_specialize must be False, True or 'auto', got {choice!r}")
    q = ex.quantum
    ii_swp = swp_plan.schedule.ii * q
    machine = ctx.full_machine.generic_roles()  # the kernel emitted here has a producer and consumer warps
    copies = [s for s in ex.stmts if s.async_capable]
    if not copies:
        why = _no_producer_copy(ex)
        if choice is True:
            raise UnsupportedLoopError(f"warp specialization: loop '{ex.loop}' {why}")
        return WarpSpecialization(False, f"not specialized: the loop {why}", WsTiming(ii_swp))
    depth, slot, depth_note, limit = _ring_depth(ex, swp_plan.annotation, copies, machine)
    if depth < 2:
        if choice is True:
            raise UnsupportedLoopError(f"warp specialization: loop '{ex.loop}': two ring slots of {slot} B "
                                       f"do not fit {limit}: plan a smaller tile, the dynamic pool "
                                       "('shared.dyn') or without warp_specialize")
        return WarpSpecialization(False, f"not specialized: {depth_note}", WsTiming(ii_swp))
    names = {s.name for s in copies}
    # the consumers run their statements in program order, one iteration after the other (model.groups)
    graph = in_program_order(ex.graph.replace(ops=tuple(replace(op, variable_latency=True) if op.name in names
                                                        else op for op in ex.graph.ops), machine=machine), names)
    from ..solvers import SolveOptions, prepare
    opts = SolveOptions(time_limit=ctx.options.time_limit, streaming_depth=depth)
    solved_on = machine
    one = solve(graph, solved_on, options=opts)
    split = None
    consumer_roles = {p.warp for n, p in one.ops.items() if n not in names}
    if len(consumer_roles) > 1:  # the kernel has one consumer group: solve what it runs
        split = JointSplit(len(consumer_roles), one.ii * q)
        solved_on = replace(machine, warp_groups=2)  # role 1 streams, role 0 runs the rest
        one = solve(graph, solved_on, options=opts)
    decided = order_consumer_groups(sch.mod[ref.func], graph, names, machine, opts, solve, one.ii, q)
    groups_ii = decided.solved.schedule.ii * q if decided.solved is not None else None

    def finish(joint: JointSolve, order, note: str, alternatives: tuple[Alternative, ...] = (),
               lookahead: bool = False) -> WarpSpecialization:
        ii_ws = joint.schedule.ii * q
        ring, ring_note = _latency_depth(depth, ex, names, ii_ws, depth_note)  # the schedule holds with fewer slots
        threads = _consumer_threads(sch.mod[ref.func])
        budgets = (register_budgets(threads) if parse_arch(arch).setmaxnreg and threads % 128 == 0  # whole warp
                   else None)                                                                        # groups
        better, versus = _by_throughput(ex, swp_plan, ii_swp, ii_ws, ring * slot, budgets)
        timing = WsTiming(ii_swp, ii_ws, split)
        if choice == "auto" and not better:
            return WarpSpecialization(False, f"not specialized: the joint schedule with a producer warp {versus} "
                                      "(warp_specialize=True forces it)", timing, schedule=joint.schedule,
                                      groups=ConsumerGroups(ii_cycles=groups_ii, note=note))
        why = (f"specialized: {versus}" if better else f"specialized on request (warp_specialize=True): {versus}")
        prepared = prepare(joint.graph, joint.machine, opts)  # the graph as solved
        peak = _role_register_peaks(joint.schedule, prepared.graph, names, budgets)
        roles, barriers = _roles_and_barriers(ex, copies, order)
        return WarpSpecialization(
            True, why, timing, schedule=joint.schedule,
            decision=WsDecision(roles, ring, barriers, budgets, peak, ring_note, prepared.graph, prepared.machine),
            groups=ConsumerGroups(order, decided.sections if order else (), lookahead, groups_ii, note),
            alternatives=alternatives)

    base = finish(JointSolve(one, graph, solved_on), None, decided.note)
    if decided.order is None:
        return base
    fallback = (Alternative(REFUSED_ORDER, base),)
    plain = decided.no_lookahead
    if plain is not None:  # the look-ahead turn, else the turn across the back edge, else one group
        fallback = (Alternative(REFUSED_LOOKAHEAD, finish(plain.solved, plain.order, plain.note, fallback)),
                    *fallback)
    return finish(decided.solved, decided.order, decided.note, fallback, lookahead=plain is not None)


def apply_warp_specialization(sch, ref, ws: WarpSpecialization, target, smem_limit: int | None = None, *,
                              time_limit: float | None = None, progress=None) -> WarpSpecialization:
    """Write the annotations, run the transform and the protocol check; on failure restore the loop.

    ``smem_limit``: the machine's shared bytes per block.  Rings past it are refused; when only the
    swizzled rings' 1024-byte alignment pads put them past it (``WsKernelFacts.swizzle_pad_bytes``),
    the plan decides on no swizzle and the kernel is emitted without it (``tvm_twill.ws_swizzle = 0``,
    said in the plan).  Ordered consumer groups the transform refuses: one group, said in the plan.
    At most three attempts (the look-ahead turn, ordered groups, then one group), each at most two
    emissions.  ``time_limit`` / ``progress``: the plan's (``ws_lowering.protocol_limits``)."""
    with protocol_limits(time_limit, progress):
        return _apply(sch, ref, ws, target, smem_limit)


def _apply(sch, ref, ws: WarpSpecialization, target, smem_limit: int | None) -> WarpSpecialization:
    """``ws``, else its alternatives in order, each with the note of what the transform refused before it."""
    saved = {k: ref.node.annotations[k] for k in (*ANNOTATION_KEYS, *WS_KEYS) if k in (ref.node.annotations or {})}
    plan, rest = ws, ws.alternatives
    while True:
        try:
            return _attempt(sch, ref, plan, target, smem_limit, saved)
        except UnsupportedLoopError as e:
            if not rest:
                raise
            plan, rest = rest[0].noted(str(e).removeprefix("warp specialization: ")), rest[1:]


def _attempt(sch, ref, ws: WarpSpecialization, target, smem_limit: int | None, saved: dict) -> WarpSpecialization:
    """``_emit`` on the loop without its pipeline annotations; on failure the loop as it was, and the error."""
    for k in saved:
        if k in (sch.get(ref.rv).annotations or {}):
            sch.unannotate(ref.rv, k)
    user_swizzle = WS_SWIZZLE in (sch.get(ref.rv).annotations or {})
    try:
        return _emit(sch, ref, ws, target, smem_limit)
    except Exception:
        _restore(sch, ref, saved, drop_swizzle=not user_swizzle)
        raise


def _restore(sch, ref, saved: dict, drop_swizzle: bool) -> None:
    """The loop's annotations as they were before ``apply_warp_specialization``."""
    keys = (*WS_KEYS, WS_SWIZZLE) if drop_swizzle else WS_KEYS
    for k in keys:
        if k in (sch.get(ref.rv).annotations or {}):
            sch.unannotate(ref.rv, k)
    for k, v in saved.items():
        sch.annotate(ref.rv, k, v)


def _emit(sch, ref, ws: WarpSpecialization, target, smem_limit: int | None) -> WarpSpecialization:
    """Annotate the loop with ``ws``, emit and check the kernel; fit shared memory (the swizzle decision)."""
    sch.annotate(ref.rv, WS_DEPTH, ws.ring_depth)
    if ws.registers is not None:
        sch.annotate(ref.rv, WS_REGISTERS, list(ws.registers))
    if ws.consumer_order is not None:
        sch.annotate(ref.rv, WS_CONSUMER_ORDER, list(ws.consumer_order))
    if ws.lookahead:
        sch.annotate(ref.rv, WS_LOOKAHEAD, 1)
    facts, report = emit_and_check(sch.mod, target)
    if ws.turn_sections and facts.order_sections != len(ws.turn_sections):
        raise UnsupportedLoopError(
            f"warp specialization: the kernel's consumer groups take {facts.order_sections} turn(s) per iteration, "
            f"the plan's schedule {len(ws.turn_sections)} ({'; '.join(', '.join(t) for t in ws.turn_sections)})")
    if facts.order_lookahead != ws.lookahead:
        raise UnsupportedLoopError(f"warp specialization: the kernel {'lacks' if ws.lookahead else 'has'} the "
                                   f"look-ahead turn the plan's schedule {'has' if ws.lookahead else 'lacks'}")
    if smem_limit is not None and facts.static_bytes > min(STATIC_SMEM_BYTES, smem_limit):
        raise UnsupportedLoopError(
            f"warp specialization: the {ws.ring_depth}-slot rings and mbarriers need {facts.static_bytes} B of "
            f"static shared memory (scope 'shared'), more than the {min(STATIC_SMEM_BYTES, smem_limit)} B a "
            "kernel may declare: plan a smaller tile, the dynamic pool ('shared.dyn') or without "
            "warp_specialize")
    layout_note = ws.layout_note
    need = facts.shared_bytes
    if smem_limit is not None and need > smem_limit and facts.swizzle_pad_bytes and \
            WS_SWIZZLE not in (sch.get(ref.rv).annotations or {}):
        layout_note = (f"no swizzle: the swizzled rings' alignment pads need {need} B of shared memory, more "
                       f"than the {smem_limit} B a block has")
        sch.annotate(ref.rv, WS_SWIZZLE, 0)
        facts, report = emit_and_check(sch.mod, target)
        need = facts.shared_bytes
    if smem_limit is not None and need > smem_limit:
        raise UnsupportedLoopError(f"warp specialization: the {ws.ring_depth}-slot rings need {need} B of "
                                   f"shared memory, more than the {smem_limit} B a block has: plan a smaller "
                                   "tile or without warp_specialize")
    register(WS_PIPELINE)
    return replace(ws, emitted=WsEmitted(facts, report, layout_note))
