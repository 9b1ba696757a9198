"""Warp specialization for ``auto_pipeline(..., warp_specialize=False | True | "auto")``.

The one-role plan (TVM's InjectSoftwarePipeline: every warp runs every
statement) is compared with the joint schedule on the full machine model:
the loop's global->shared copies become variable-latency streaming producer
ops (a producer warp runs them ahead through a ring of ``depth`` slots,
section 5.3 of the Twill paper) and the rest is placed by the joint solver on
the machine's warp roles, spill costs and register limits.  ``"auto"``
specializes when that ii is smaller; ``True`` specializes regardless.

A specialized loop loses its software-pipeline annotation and gets
``tvm_twill.ws_depth`` (and, on sm_90a, ``tvm_twill.ws_registers``);
``transforms.warp_specialize`` rewrites it during ``tvm.compile(...,
tir_pipeline=plan.tir_pipeline)``.  Before the plan is returned the
transform is run on the schedule and the mbarrier protocol it emitted is
model checked (``model.protocol``); a kernel that fails is never returned.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .errors import InputError, UnsupportedLoopError
from .frontend.ir import thread_extents
from .model import Schedule
from .model.pipeline import ANNOTATION_KEYS, WS_DEPTH, WS_KEYS, WS_REGISTERS
from .report import register_peaks
from .transforms import buffer_versions
from .transforms.ws_lowering import WS_PIPELINE, emit_and_check, register_pipeline

__all__ = ["WS_CHOICES", "WarpSpecialization", "apply_warp_specialization", "plan_warp_specialization",
           "register_budgets"]

WS_CHOICES = (False, True, "auto")

#: Registers per thread the producer warp group keeps (CUTLASS's choice: address arithmetic only).
PRODUCER_REGISTERS = 40
#: Most registers per thread a consumer asks for (setmaxnreg takes 24..256 in steps of 8; ptxas caps at 255).
CONSUMER_REGISTER_CAP = 240


@dataclass(frozen=True)
class WarpSpecialization:
    """The warp-specialization decision for one loop, and what the transform emits when it is taken.

    ``roles``: role name -> statements it runs.  ``ring_depth``: slots of
    the producer/consumer ring.  ``barriers``: what each barrier is for
    (mbarrier arrays ``ws_full[s]`` / ``ws_empty[s]`` and named barrier ids).
    ``registers``: setmaxnreg (producer, consumer) per thread, or None.
    ``register_peaks``: the joint schedule's modelled peak registers per
    thread of the (producer, consumer) roles (tiles handed between
    statements; accumulators are the same whatever the schedule and are
    not counted), checked to fit ``registers``.
    ``ii_swp_cycles`` / ``ii_ws_cycles``: the ii of the one-role plan and of
    the joint schedule with a producer, in machine cycles: the schedule the
    kernel runs (one producer role, one consumer group).  ``joint_split``:
    when the joint optimum on the full machine spreads the consumer
    statements over several warp roles, which the transform does not emit
    (no consumer ping-pong yet), ``(roles, ii in cycles)`` of that optimum;
    the consumers are then re-solved as one group and ``ii_ws_cycles`` is
    that ii (never the unreachable one).  ``facts`` and
    ``protocol``: what the transform emitted and the model check of it.
    """

    chosen: bool
    reason: str
    ii_swp_cycles: int
    ii_ws_cycles: int | None
    schedule: Schedule | None = None
    roles: dict | None = None
    ring_depth: int | None = None
    barriers: dict | None = None
    registers: tuple[int, int] | None = None
    copy: str | None = None
    facts: object = None
    protocol: object = None
    joint_split: tuple[int, int] | None = None
    register_peaks: tuple[int, int] | None = None

    @property
    def tir_pipeline(self) -> str | None:
        return WS_PIPELINE if self.chosen else None

    @property
    def annotations(self) -> dict:
        """The loop annotations the transform reads."""
        out = {WS_DEPTH: self.ring_depth}
        if self.registers is not None:
            out[WS_REGISTERS] = list(self.registers)
        return out

    def explain(self) -> str:
        lines = [f"warp specialization: {self.reason}"]
        if self.joint_split is not None:
            roles, ii = self.joint_split
            lines.append(f"  the joint optimum on the full machine ({ii} cycles) runs the consumer statements as "
                         f"{roles} warp roles; the transform emits one consumer group (no ping-pong), so the "
                         f"consumers were solved as one role: ii {self.ii_ws_cycles} cycles")
        if self.chosen:
            for role, stmts in self.roles.items():
                lines.append(f"  {role}: {', '.join(stmts)}")
            engine = {"bulk": "TMA (the full barrier completes by bytes)",
                      "cp.async": "cp.async (each lane's copies arrive on the full barrier)"}.get(
                self.copy, "TMA or cp.async (decided when the kernel is emitted)")
            lines.append(f"  ring: {self.ring_depth} slots, copies by {engine}; barriers: "
                         + "; ".join(f"{k} = {v}" for k, v in self.barriers.items()))
            if self.facts is not None and self.facts.copy_plans:
                lines.append("  producer copies per slot: " + "; ".join(self.facts.copy_plans))
            if self.facts is not None and self.facts.release_lag:
                lines.append(f"  consumer wgmma: {self.facts.wgmma_groups} commit groups per iteration stay in "
                             f"flight (wgmma.wait_group {self.facts.wgmma_wait}), slot k-1 released after it")
            if self.registers:
                lines.append(f"  setmaxnreg: producer {self.registers[0]}, consumers {self.registers[1]} "
                             "registers per thread")
            if self.register_peaks:
                lines.append(f"  the joint schedule's register peaks per thread (tiles between statements, "
                             f"accumulators excluded): producer {self.register_peaks[0]}, consumers "
                             f"{self.register_peaks[1]}")
            if self.protocol is not None:
                lines.append(f"  protocol model check: no deadlock, overwrite or early read in "
                             f"{self.protocol.states} states ({self.protocol.iterations} iterations)")
            lines.append(f"  compile with tvm.compile(mod, target, tir_pipeline={WS_PIPELINE!r})")
        return "\n".join(lines)


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


def plan_warp_specialization(sch, ref, ex, swp_plan, machine, arch: str, choice, solve,
                             time_limit: float) -> WarpSpecialization:
    """Decide and (when chosen and ``apply``) write the warp specialization of ``ref`` (see module doc)."""
    if choice not in WS_CHOICES:
        raise InputError(f"warp_specialize must be False, True or 'auto', got {choice!r}")
    q = ex.quantum
    ii_swp = swp_plan.schedule.ii * q
    copies = [s for s in ex.stmts if s.async_capable]
    if not copies:
        if choice is True:
            raise UnsupportedLoopError(f"warp specialization: loop '{ex.loop}' has no global->shared copy for "
                                       "a producer warp")
        return WarpSpecialization(False, "not specialized: the loop has no global->shared copy for a producer "
                                  "warp", ii_swp, None)
    ann = swp_plan.annotation
    versions = buffer_versions(ann, [s.writes for s in ex.stmts], [s.reads for s in ex.stmts])
    depth = max(2, max(versions.get(b, 1) for s in copies for b in s.writes))
    names = {s.name for s in copies}
    graph = ex.graph.replace(ops=tuple(replace(op, variable_latency=True) if op.name in names else op
                                       for op in ex.graph.ops), machine=machine)
    from .solvers import SolveOptions, prepare
    opts = SolveOptions(time_limit=time_limit, streaming_depth=depth)
    solved_on = machine
    ws = solve(graph, solved_on, options=opts)
    split = None
    consumer_roles = {p.warp for n, p in ws.ops.items() if n not in names}
    if len(consumer_roles) > 1:  # the kernel has one consumer group: solve what it runs
        split = (len(consumer_roles), ws.ii * q)
        solved_on = replace(machine, warp_groups=2)  # role 1 streams, role 0 runs the rest
        ws = solve(graph, solved_on, options=opts)
    ii_ws = ws.ii * q
    if choice == "auto" and ii_ws >= ii_swp:
        return WarpSpecialization(False, f"not specialized: the joint schedule with a producer warp has ii "
                                  f"{ii_ws} cycles, no better than the one-role pipeline's {ii_swp} cycles "
                                  "(warp_specialize=True forces it)", ii_swp, ii_ws, schedule=ws,
                                  joint_split=split)
    why = (f"specialized: ii {ii_ws} cycles with a producer warp vs {ii_swp} cycles one-role"
           if ii_ws < ii_swp else f"specialized on request (warp_specialize=True): ii {ii_ws} cycles with a "
           f"producer warp vs {ii_swp} cycles one-role")
    producer_role = next(p.warp for n, p in ws.ops.items() if n in names)
    peaks = register_peaks(ws, prepare(graph, solved_on, opts).graph)  # the graph as solved
    peak = (peaks.get(producer_role, 0), max((r for w, r in peaks.items() if w != producer_role), default=0))
    registers = None
    if arch.endswith("a") and arch >= "sm_90":
        registers = register_budgets(_consumer_threads(sch.mod[ref.func]))
        for role, need, have in zip(("producer", "consumer"), peak, registers):
            if need > have:
                raise UnsupportedLoopError(
                    f"warp specialization: the joint schedule holds {need} registers per thread in the {role} "
                    f"role, more than its setmaxnreg budget {have}: plan without warp_specialize")
    roles = {"producer warp": tuple(s.name for s in copies),
             "consumer warps": tuple(s.name for s in ex.stmts if not s.async_capable)}
    barriers = {"ws_full[s]": "mbarrier: slot s landed (producer -> consumers)",
                "ws_empty[s]": "mbarrier: slot s released by every consumer warp (consumers -> producer)",
                "named barrier 0": "__syncthreads once, after mbarrier.init (all threads)"}
    return WarpSpecialization(True, why, ii_swp, ii_ws, schedule=ws, roles=roles, ring_depth=depth,
                              barriers=barriers, registers=registers, joint_split=split, register_peaks=peak)


def apply_warp_specialization(sch, ref, ws: WarpSpecialization, target) -> WarpSpecialization:
    """Write the annotations, run the transform and the protocol check; on failure restore the loop."""
    saved = {k: ref.node.annotations[k] for k in (*ANNOTATION_KEYS, *WS_KEYS) if k in (ref.node.annotations or {})}
    for k in saved:
        sch.unannotate(ref.rv, k)
    sch.annotate(ref.rv, WS_DEPTH, ws.ring_depth)
    if ws.registers is not None:
        sch.annotate(ref.rv, WS_REGISTERS, list(ws.registers))
    try:
        facts, report = emit_and_check(sch.mod, target)
    except Exception:
        for k in WS_KEYS:
            if k in (sch.get(ref.rv).annotations or {}):
                sch.unannotate(ref.rv, k)
        for k, v in saved.items():
            sch.annotate(ref.rv, k, v)
        raise
    register_pipeline()
    return replace(ws, facts=facts, protocol=report, copy=facts.copy)
