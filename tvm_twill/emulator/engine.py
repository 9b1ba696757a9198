"""Executing one kernel launch: warps, divergence, the seeded scheduler, async completion and deadlocks.

A warp runs its active thread group with numpy over 32 lanes.  Divergence:
the warp keeps its other groups as (pc, mask); after a step it always runs the
group with the smallest pc and merges groups that reach the same pc
(min-pc reconvergence, right for the structured code nvcc emits).

CTAs run one after another (they share nothing but global memory, and these
kernels never synchronise CTAs).  Inside a CTA the scheduler picks a random
runnable warp and runs it for a random number of instructions (1..``slice``),
so warps advance independently.  Async copies complete as late as is legal by
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
from .state import CTA, Policy, Warp
from .values import BLOCKED, YIELD

__all__ = ["CTA", "Policy", "Warp", "run_cta", "step"]


def run_cta(cta: CTA) -> int:
    """Run a CTA to completion (or deadlock).  Returns the number of warp instructions executed."""
    rng = cta.rng
    pol = cta.policy
    with np.errstate(all="ignore"):
        while True:
            live = [w for w in cta.warps if not w.done]
            if not live:
                break
            if pol.completion == "random" and rng.random() < 0.25:
                pend = [op for op in cta.ops.values() if not op.done]
                if pend:
                    cta.complete(pend[rng.integers(len(pend))])
            runnable = [w for w in live if not w.blocked()]
            if not runnable:
                if _complete_for_someone(cta, live) or _wake_pollers(live):
                    continue
                _deadlock(cta, live)
                break
            w = runnable[rng.integers(len(runnable))] if len(runnable) > 1 else runnable[0]
            step(cta, w, int(rng.integers(1, pol.slice + 1)))
            if cta.instructions > pol.max_instructions:
                raise EmulationError(f"kernel {cta.kernel.name} ran over {pol.max_instructions} instructions; "
                                     "pass a smaller problem or raise Policy.max_instructions")
    for op in list(cta.ops.values()):
        cta.complete(op)
    cta.launch.gshadow.end_cta(cta)
    return cta.instructions


def _complete_for_someone(cta: CTA, live: list[Warp]) -> bool:
    order = list(live)
    cta.rng.shuffle(order)
    for w in order:
        need = cta.needs_of(w)
        if need:
            for op in sorted(need, key=lambda o: o.id):
                cta.complete(op)
            return True
    return False


def _wake_pollers(live: list[Warp]) -> bool:
    """A failed test_wait / try_wait does not block in PTX; the emulator parks the warp until the phase
    changes (it would only spin).  When nothing else can run, each parked warp runs on once: a program
    that tests and goes on proceeds, one parked again on the same phase is really waiting."""
    woke = False
    for w in live:
        if w.poll is not None and w.poll != w.polled and w.wait is not None:
            w.polled, w.wait = w.poll, None
            woke = True
    return woke


def _deadlock(cta: CTA, live: list[Warp]) -> None:
    lines = []
    for w in live:
        ins = w.wait_ins
        lines.append((w.idx, ins.line if ins else None, ins.opcode if ins else "?",
                      ins.cuda_line if ins else None))
    first = live[0]
    desc = "; ".join(f"warp {k}: {op} at PTX line {ln} (CUDA line {cl})" for k, ln, op, cl in lines)
    cta.finding(F.Deadlock, first, first.wait_ins, first.mask, f"every live warp is blocked: {desc}",
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
