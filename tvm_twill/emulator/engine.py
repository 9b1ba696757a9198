"""Executing one kernel launch: warps, divergence, the seeded scheduler, async completion and deadlocks.

A warp runs its active thread group with numpy over 32 lanes.  Divergence:
the warp keeps its other groups as (pc, mask); after a step it always runs the
group with the smallest pc and merges groups that reach the same pc
(min-pc reconvergence, right for the structured code nvcc emits).

CTAs run concurrently (``run_grid``): as many as are resident at once (an
occupancy from the block size and shared memory, ``Policy.sm_count``), a
random resident CTA advancing at each step; inside a CTA the scheduler picks a
random runnable warp and runs it for a random number of instructions
(1..``slice``), so warps advance independently.  A warp spinning on global
memory is parked until another warp writes it (``memmodel.park``).  Async copies complete as late as is legal by
default: only when every live warp is blocked does it complete the copies one
blocked warp needs (picked at random); ``Policy(completion="random")``
completes a random pending copy before each slice with probability 1/4.
When every warp is blocked and no copy can help, the CTA is deadlocked: a
``Deadlock`` finding lists each warp's blocking instruction.  The state all
this runs on (``Warp``, ``CTA``, the barriers, the ``AsyncOp`` protocol) is
``state.py``.
"""
from __future__ import annotations

import numpy as np

from ..errors import EmulationError
from . import findings as F
from .memmodel import resident_ctas
from .state import CTA, Policy, Warp
from .values import BLOCKED, YIELD

__all__ = ["CTA", "Policy", "Warp", "run_cta", "run_grid", "step"]


RAN, STUCK, DONE = 0, 1, 2


def run_cta(cta: CTA) -> int:
    """Run a CTA alone to completion (or deadlock).  Returns the number of warp instructions executed."""
    return run_grid(cta.launch, [cta.ctaid], cta.rng, cta.policy, cta.report_fn, first=cta)


def run_grid(launch, ctaids, rng, policy: Policy, report, first: CTA | None = None) -> int:
    """Run the CTAs ``ctaids`` of a launch concurrently: at most ``memmodel.resident_ctas`` at once,
    dispatched in linear order (``Policy(dispatch='random')``: a seeded order), a random resident CTA
    advancing one warp slice at a time.  A CTA whose warps are all blocked inside it is deadlocked
    (reported at once); one with a warp parked on global memory waits for another CTA's write.  When no
    resident CTA can advance, each is reported as deadlocked and retired.  Returns the instructions run."""
    order = list(ctaids)
    if policy.dispatch == "random":
        order = [order[i] for i in rng.permutation(len(order))]
    launch.dispatch_rank = {launch.gshadow.serial(c): i for i, c in enumerate(order)}
    slots = resident_ctas(launch, policy, len(order))
    queue, resident, stuck, total, version = order[::-1], [], set(), 0, -1
    with np.errstate(all="ignore"):
        while queue or resident:
            while queue and len(resident) < slots:
                cid = queue.pop()
                resident.append(first if first is not None else CTA(launch, cid, rng, policy, report))
                first = None
            if launch.gshadow.version != version:
                stuck.clear()
                version = launch.gshadow.version
            cand = [c for c in resident if c.serial not in stuck] if stuck else resident
            if not cand:
                for cta in resident:
                    launch.cta = cta
                    _deadlock(cta, [w for w in cta.warps if not w.done], len(queue))
                    total += _finish(cta)
                resident, stuck = [], set()
                continue
            cta = cand[rng.integers(len(cand))] if len(cand) > 1 else cand[0]
            launch.cta = cta
            r = _advance(cta, rng, policy)
            if r == STUCK:
                stuck.add(cta.serial)
            elif r == DONE:
                total += _finish(cta)
                resident.remove(cta)
    return total


def _advance(cta: CTA, rng, pol: Policy) -> int:
    """One scheduling step of a CTA: run a random runnable warp for a random slice."""
    live = [w for w in cta.warps if not w.done]
    if not live:
        return DONE
    if pol.completion == "random" and rng.random() < 0.25:
        pend = [op for op in cta.ops.values() if not op.done]
        if pend:
            cta.complete(pend[rng.integers(len(pend))])
    runnable = [w for w in live if not w.blocked()]
    if not runnable:
        if _complete_for_someone(cta, live) or _wake_pollers(cta, live):
            return RAN
        if any(w.parked for w in live):
            return STUCK
        _deadlock(cta, live, 0)
        return DONE
    w = runnable[rng.integers(len(runnable))] if len(runnable) > 1 else runnable[0]
    step(cta, w, int(rng.integers(1, pol.slice + 1)))
    if cta.instructions > pol.max_instructions:
        raise EmulationError(f"kernel {cta.kernel.name} ran over {pol.max_instructions} instructions; "
                             "pass a smaller problem or raise Policy.max_instructions")
    return RAN


def _finish(cta: CTA) -> int:
    """A CTA ended (or was retired): its async ops complete and its global accesses in flight end."""
    cta.launch.cta = cta
    for op in list(cta.ops.values()):
        cta.complete(op)
    cta.launch.gshadow.end_cta(cta)
    return cta.instructions


def _complete_for_someone(cta: CTA, live: list[Warp]) -> bool:
    """Complete, in issue order, the copies one blocked warp needs, and no more than unblock it: a copy beyond
    what its wait (an mbarrier phase, a wait_group) requires stays in flight, so a phase that completes early
    (an expect_tx below the bytes its copies bring) lets the waiter run while the rest still writes."""
    order = list(live)
    cta.rng.shuffle(order)
    for w in order:
        need = cta.needs_of(w)
        if need:
            for op in sorted(need, key=lambda o: o.id):
                cta.complete(op)
                if not w.blocked():
                    break
            return True
    return False


def _wake_pollers(cta: CTA, live: list[Warp]) -> bool:
    """A failed test_wait / try_wait does not block in PTX; the emulator parks the warp until the phase
    changes (it would only spin).  When nothing else can run, each parked warp runs on once per (mbarrier,
    phase) it polls: a program that tests and goes on proceeds; one parked again on a poll it was woken from
    is really waiting (a warp polling two barriers that never complete in turn is a deadlock, not an endless
    loop)."""
    woke = False
    for w in live:
        if w.poll is None or w.wait is None:
            continue
        if w.polled is None:
            w.polled = set()
        if w.poll not in w.polled:
            w.polled.add(w.poll)
            w.wait = None
            woke = True
    return woke


def _deadlock(cta: CTA, live: list[Warp], waiting: int) -> None:
    lines = []
    for w in live:
        ins = w.wait_ins
        lines.append((w.idx, ins.line if ins else None, ins.opcode if ins else "?",
                      ins.cuda_line if ins else None))
    first = live[0]
    desc = "; ".join(f"warp {k}: {op} at PTX line {ln} (CUDA line {cl})" for k, ln, op, cl in lines)
    why = ""
    if any(w.parked for w in live):
        why = (" (spinning on global memory no resident CTA will write"
               + (f"; {waiting} CTAs of the grid are not resident: they start only when one ends)" if waiting
                  else ")"))
    cta.finding(F.Deadlock, first, first.wait_ins, first.mask, f"every live warp is blocked{why}: {desc}",
                blocked=tuple(lines))


def step(cta: CTA, w: Warp, n: int) -> None:
    """Run up to n instructions of warp w (stops early when it blocks or finishes)."""
    prog = cta.launch.program
    for _ in range(n):
        if w.done:
            return
        kind, fn, gi, gneg, ins = prog[w.pc]
        m = w.mask
        full = w.mask_all
        if gi >= 0:
            g = w.regs[gi]
            m = m & ~g if gneg else m & g
            gp = w.pois[gi]
            if gp is not None and (gp & w.mask).any():
                cta.finding(F.PoisonUse, w, ins, gp & w.mask, "a poisoned predicate guards this instruction")
            full = False
        if kind == 0:
            if gi < 0 or m.any():
                w.m = m
                w.full = full
                cta.instructions += 1
                r = fn(w)
                if r == BLOCKED:
                    w.wait_ins = ins
                    return
                w.pc += 1
                if r == YIELD:
                    w.wait_ins = ins
                    return
            else:
                w.pc += 1
        else:
            cta.instructions += 1
            if fn(w, m) == BLOCKED:
                w.wait_ins = ins
                return
        if w.groups or not w.mask.any():
            w.switch_group()
