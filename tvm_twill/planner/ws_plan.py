"""The warp-specialization plan of one loop (``WarpSpecialization``) and its typed parts: the timing, the
producer/consumer decision, the consumer-group plan, what the transform emitted, and the alternatives
applied in its place when the transform refuses it.  ``warpspec`` fills them in; ``api``, ``report`` and
tests read them.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import NamedTuple

from ..model import Graph, Machine, Schedule, busy_share
from ..model.pipeline import WS_CONSUMER_ORDER, WS_DEPTH, WS_LOOKAHEAD, WS_REGISTERS
from ..model.protocol import ProtocolReport
from ..transforms.pipelines import WS_PIPELINE
from ..transforms.ws.facts import WsKernelFacts

__all__ = ["Alternative", "ConsumerGroups", "GroupsDecision", "JointSolve", "JointSplit", "REFUSED_LOOKAHEAD",
           "REFUSED_ORDER", "WarpSpecialization", "WsDecision", "WsEmitted", "WsTiming"]

#: What an ``Alternative`` lacks of the plans before it, as the consumer-groups note says the transform refused it.
REFUSED_LOOKAHEAD = "the look-ahead turn"
REFUSED_ORDER = "the ordered groups"


class JointSplit(NamedTuple):
    """The joint optimum on the full machine when it spreads the consumer statements over several warp roles:
    how many, and its ii in cycles (a statement partition no TIR kernel runs)."""

    roles: int
    ii_cycles: int


@dataclass(frozen=True)
class JointSolve:
    """A schedule and the graph and machine it was solved on."""

    schedule: Schedule
    graph: Graph
    machine: Machine


@dataclass(frozen=True)
class GroupsDecision:
    """``warpspec.order_consumer_groups``'s answer.  ``order``: the token order of the consumer groups, None
    for one group; ``solved``: the split loop's schedule (each group on a role of its own when ``order`` is
    set), None when it has none; ``note``: why the groups were or were not taken; ``sections``: the runs of
    tensor-core statements the groups take turns on; ``no_lookahead``: when ``solved`` is the look-ahead
    turn's, the decision with the turn across the back edge (applied if the transform refuses the look-ahead)."""

    order: tuple[int, ...] | None
    solved: JointSolve | None
    note: str
    sections: tuple[tuple[str, ...], ...] = ()
    no_lookahead: GroupsDecision | None = None


@dataclass(frozen=True)
class WsTiming:
    """``ii_swp_cycles`` / ``ii_ws_cycles``: the ii of the one-role plan and of the joint schedule with a
    producer, in machine cycles: the schedule the kernel runs.  ``joint_split``: when the joint optimum on
    the full machine spreads the consumer statements over several warp roles (no TIR kernel runs that:
    every consumer warp runs every statement), that optimum; the consumers are then re-solved as one role
    and ``ii_ws_cycles`` is that ii (never the unreachable one)."""

    ii_swp_cycles: int
    ii_ws_cycles: int | None = None
    joint_split: JointSplit | None = None


@dataclass(frozen=True)
class WsDecision:
    """What a specialized loop runs.  ``roles``: role name -> statements it runs.  ``ring_depth``: slots of the
    producer/consumer ring.  ``barriers``: what each barrier is for (mbarrier arrays ``ws_full[s]`` /
    ``ws_empty[s]`` and named barrier ids).  ``registers``: setmaxnreg (producer, consumer) per thread, or
    None.  ``register_peaks``: the joint schedule's modelled peak registers per thread of the (producer,
    consumer) roles (tiles handed between statements; accumulators are the same whatever the schedule and
    are not counted), checked to fit ``registers``.  ``depth_note``: why the ring is shallower than the
    pipeline's buffer versions (shared memory, or fewer slots hide the copies' latency at the schedule's
    ii), or None.  ``solved_graph`` / ``solved_machine``: the graph and machine the schedule was solved on
    (as the solver prepared them: what ``PipelinePlan.plot`` draws)."""

    roles: dict[str, tuple[str, ...]]
    ring_depth: int
    barriers: dict[str, str]
    registers: tuple[int, int] | None
    register_peaks: tuple[int, int]
    depth_note: str | None
    solved_graph: Graph
    solved_machine: Machine


@dataclass(frozen=True)
class ConsumerGroups:
    """The consumer-group plan.  ``order``: when the consumer warps split into groups and the joint schedule
    of that split (``model.groups``) has a smaller ii, the token order the named barriers enforce (the
    plan's ii is then that one); None: one group.  ``turn_sections``: the runs of tensor-core statements the
    groups take turns on, one turn each per iteration (the emitted kernel must take as many);
    ``lookahead``: the turn issues the first run of iteration k, then the last run of k - 1 left in flight
    (``transforms.ws.look_ahead``).  ``ii_cycles`` / ``note``: the ii of the split and why it was or was
    not taken."""

    order: tuple[int, ...] | None = None
    turn_sections: tuple[tuple[str, ...], ...] = ()
    lookahead: bool = False
    ii_cycles: int | None = None
    note: str | None = None


@dataclass(frozen=True)
class WsEmitted:
    """What the transform emitted (``facts``) and the model check of its protocol (``protocol``);
    ``layout_note``: why the rings were emitted without the 128-byte swizzle they qualified for (their
    alignment pads past shared memory), or None; each ring's layout is in ``facts.operand_layouts``."""

    facts: WsKernelFacts
    protocol: ProtocolReport
    layout_note: str | None = None


@dataclass(frozen=True)
class Alternative:
    """A plan applied instead when the transform refuses the plans before it (``WarpSpecialization
    .alternatives``): ``refused`` what those have that ``plan`` lacks (``REFUSED_LOOKAHEAD``, ``REFUSED_ORDER``)."""

    refused: str
    plan: WarpSpecialization

    def noted(self, why: str) -> WarpSpecialization:
        """``plan`` with its consumer-groups note saying the transform refused ``refused`` (``why``)."""
        groups = self.plan.groups
        head = f"{groups.note}; " if groups.order is not None else "one group: "
        return replace(self.plan, groups=replace(groups, note=f"{head}the transform refused {self.refused} ({why})"))


@dataclass(frozen=True)
class WarpSpecialization:
    """The warp-specialization decision for one loop, and what the transform emits when it is taken.

    ``chosen`` / ``reason``: whether the loop is specialized and why.  ``timing``: the ii's (``WsTiming``).
    ``schedule``: the joint schedule with a producer (None: none was solved).  ``decision``: what a
    specialized loop runs (``WsDecision``; None when not chosen).  ``groups``: the consumer-group plan
    (``ConsumerGroups``).  ``emitted``: what the transform emitted once applied (``WsEmitted``; None before).
    ``alternatives``: the plans to apply, in this order, if the transform refuses this one (``Alternative``:
    the turn across the back edge for a look-ahead plan, one consumer group for ordered groups).
    The parts' fields read under their own names too (``ws.ring_depth`` is ``ws.decision.ring_depth``).
    """

    chosen: bool
    reason: str
    timing: WsTiming
    schedule: Schedule | None = None
    decision: WsDecision | None = None
    groups: ConsumerGroups = field(default_factory=ConsumerGroups)
    emitted: WsEmitted | None = None
    alternatives: tuple[Alternative, ...] = ()

    def _alternative(self, refused: str) -> WarpSpecialization | None:
        return next((a.plan for a in self.alternatives if a.refused == refused), None)

    @property
    def one_group(self) -> WarpSpecialization | None:
        """The plan with one consumer group, applied if the transform refuses the ordered groups."""
        return self._alternative(REFUSED_ORDER)

    @property
    def no_lookahead(self) -> WarpSpecialization | None:
        """The plan with the turn across the back edge, applied if the transform refuses the look-ahead turn."""
        return self._alternative(REFUSED_LOOKAHEAD)

    @property
    def ii_swp_cycles(self) -> int:
        return self.timing.ii_swp_cycles

    @property
    def ii_ws_cycles(self) -> int | None:
        return self.timing.ii_ws_cycles

    @property
    def joint_split(self) -> JointSplit | None:
        return self.timing.joint_split

    @property
    def roles(self) -> dict[str, tuple[str, ...]] | None:
        return self.decision.roles if self.decision is not None else None

    @property
    def ring_depth(self) -> int | None:
        return self.decision.ring_depth if self.decision is not None else None

    @property
    def barriers(self) -> dict[str, str] | None:
        return self.decision.barriers if self.decision is not None else None

    @property
    def registers(self) -> tuple[int, int] | None:
        return self.decision.registers if self.decision is not None else None

    @property
    def register_peaks(self) -> tuple[int, int] | None:
        return self.decision.register_peaks if self.decision is not None else None

    @property
    def depth_note(self) -> str | None:
        return self.decision.depth_note if self.decision is not None else None

    @property
    def solved_graph(self) -> Graph | None:
        return self.decision.solved_graph if self.decision is not None else None

    @property
    def solved_machine(self) -> Machine | None:
        return self.decision.solved_machine if self.decision is not None else None

    @property
    def consumer_order(self) -> tuple[int, ...] | None:
        return self.groups.order

    @property
    def turn_sections(self) -> tuple[tuple[str, ...], ...]:
        return self.groups.turn_sections

    @property
    def lookahead(self) -> bool:
        return self.groups.lookahead

    @property
    def groups_ii_cycles(self) -> int | None:
        return self.groups.ii_cycles

    @property
    def groups_note(self) -> str | None:
        return self.groups.note

    @property
    def facts(self) -> WsKernelFacts | None:
        return self.emitted.facts if self.emitted is not None else None

    @property
    def protocol(self) -> ProtocolReport | None:
        return self.emitted.protocol if self.emitted is not None else None

    @property
    def layout_note(self) -> str | None:
        return self.emitted.layout_note if self.emitted is not None else None

    @property
    def copy(self) -> str | None:
        """The producer's copy engine ("bulk": TMA, or "cp.async"), once emitted."""
        return self.emitted.facts.copy if self.emitted is not None else None

    @property
    def tir_pipeline(self) -> str | None:
        return WS_PIPELINE if self.chosen else None

    @property
    def annotations(self) -> dict:
        """The loop annotations the transform reads."""
        out = {WS_DEPTH: self.ring_depth}
        if self.registers is not None:
            out[WS_REGISTERS] = list(self.registers)
        if self.groups.order is not None:
            out[WS_CONSUMER_ORDER] = list(self.groups.order)
        if self.groups.lookahead:
            out[WS_LOOKAHEAD] = 1
        return out

    def explain(self) -> str:
        lines = [f"warp specialization: {self.reason}"]
        if self.timing.joint_split is not None:
            roles, ii = self.timing.joint_split
            lines.append(f"  the joint optimum on the full machine ({ii} cycles) runs the consumer statements as "
                         f"{roles} warp roles; a TIR kernel runs every consumer statement on every consumer warp "
                         f"(a statement partition would move threads' work), so the consumers were solved as "
                         f"one role: ii {self.timing.ii_ws_cycles} cycles")
        if self.groups.note is not None:
            lines.append(f"  consumer groups: {self.groups.note}")
        d = self.decision
        if self.chosen and self.schedule is not None and d is not None:
            lines.append(f"  tensor core busy {busy_share(self.schedule, d.solved_graph, 'TC'):.0%} of the "
                         f"steady state (ii {self.timing.ii_ws_cycles} cycles, as the kernel runs)")
        if self.chosen and d is not None:
            lines += self._explain_kernel(d)
        return "\n".join(lines)

    def _explain_kernel(self, d: WsDecision) -> list[str]:
        """The lines of ``explain`` for a specialized loop: roles, ring, layouts, registers, protocol."""
        lines = [f"  {role}: {', '.join(stmts)}" for role, stmts in d.roles.items()]
        facts, protocol = self.facts, self.protocol
        engine = {"bulk": "TMA (the full barrier completes by bytes)",
                  "cp.async": "cp.async (each lane's copies arrive on the full barrier)"}.get(
            self.copy, "TMA or cp.async (decided when the kernel is emitted)")
        lines.append(f"  ring: {d.ring_depth} slots, copies by {engine}; barriers: "
                     + "; ".join(f"{k} = {v}" for k, v in d.barriers.items()))
        if d.depth_note:
            lines.append(f"  {d.depth_note}")
        if facts is not None and facts.copy_plans:
            lines.append("  producer copies per slot: " + "; ".join(facts.copy_plans))
        if facts is not None and facts.operand_layouts:
            lines.append("  wgmma operand layouts: " + "; ".join(facts.operand_layouts))
        if self.layout_note:
            lines.append(f"  {self.layout_note}")
        if facts is not None and facts.order_lookahead:
            lines.append(f"  consumer look-ahead: each turn issues the first wgmma run of iteration k, then the "
                         f"last run of k-1 ({facts.wgmma_groups} commit groups) left in flight to a "
                         "wgmma.wait_group 0 before the first statement that depends on it, slot k-1 released "
                         "after that wait; the last iteration's run takes one more turn after the loop")
        elif facts is not None and facts.release_lag:
            lines.append(f"  consumer wgmma: {facts.wgmma_groups} commit groups per iteration stay in "
                         f"flight (wgmma.wait_group {facts.wgmma_wait}), slot k-1 released after it")
        if d.registers:
            lines.append(f"  setmaxnreg: producer {d.registers[0]}, consumers {d.registers[1]} "
                         "registers per thread")
        if d.register_peaks:
            lines.append(f"  the joint schedule's register peaks per thread (tiles between statements, "
                         f"accumulators excluded): producer {d.register_peaks[0]}, consumers "
                         f"{d.register_peaks[1]}")
        if facts is not None and facts.order:
            lines.append(f"  consumer groups {', '.join(map(str, facts.order))} take turns (named barriers "
                         f"{', '.join(str(1 + g) for g in sorted(facts.order))}, "
                         f"{facts.order_threads} threads each)")
        if protocol is not None:
            lines.append(f"  protocol model check: no deadlock, overwrite or early read in "
                         f"{protocol.states} states ({protocol.iterations} iterations)")
        lines.append(f"  compile as planned with tvm_twill.build(mod, target, plan) (tvm.compile under "
                     f"plan.pass_context() with tir_pipeline={WS_PIPELINE!r})")
        return lines
