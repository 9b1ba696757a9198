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
``Deadlock`` finding lists each warp's blocking instruction.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import EmulationError
from . import findings as F
from .memory import SharedMemory
from .values import BLOCKED, LANE_IDS, LANES, YIELD


@dataclass(frozen=True)
class Policy:
    """Adversarial-timing knobs.  completion: 'latest' (default) or 'random'; slice: the most instructions a
    warp runs before the scheduler may switch; spurious: probability that mbarrier.try_wait fails although
    the phase completed; strict_uninitialized: report every read of never-written shared memory (by default
    poison only is reported where it reaches a global store, a branch or an address); strict_exit: report
    cp.async copies a warp never waited for; strict_cp_async_proxy: treat cp.async writes as generic-proxy
    writes that wgmma may read only after a fence.proxy.async (the PTX ISA leaves this open; CUTLASS and
    Triton issue no fence there, so it is off by default)."""

    completion: str = "latest"
    slice: int = 64
    spurious: float = 0.25
    strict_uninitialized: bool = False
    strict_exit: bool = False
    strict_cp_async_proxy: bool = False
    max_instructions: int = 200_000_000


class Warp:
    def __init__(self, cta, idx, nregs, dtypes, nthreads):
        self.cta = cta
        self.idx = idx
        self.regs = [np.zeros(LANES, dt) for dt in dtypes]
        self.pois = [None] * nregs
        first = idx * LANES
        self.live = (LANE_IDS + first) < nthreads
        self.mask = self.live.copy()
        self.pc = 0
        self.groups = []            # other thread groups: [pc, mask]
        self.m = self.mask
        self.mask_all = bool(self.mask.all())
        self.full = self.mask_all
        self.wait = None            # callable -> True while blocked
        self.wait_ins = None
        self.bar_pass = False
        self.uncommitted = []       # cp.async ops not yet in a group
        self.async_groups = []      # committed groups (lists of ops), oldest first
        self.local = None
        self.done = not self.live.any()
        self.needs = None           # callable -> async ops whose completion could unblock the warp
        self.wg_pending = []        # wgmma ops not yet committed
        self.wg_groups = []         # committed wgmma groups, oldest first
        self.wg_busy = {}           # register -> in-flight wgmma ops writing it
        self.wg_result_pois = {}    # register -> poison of the last completed wgmma result
        self.maxnreg = None         # the setmaxnreg limit, once set
        self.setmaxnreg_count = 0   # how many setmaxnreg the warp executed
        self.poll = None            # (mbarrier, phase) of a failed test_wait / try_wait parking the warp
        self.polled = None          # the poll it was last woken from (see _wake_pollers)

    def blocked(self) -> bool:
        if self.wait is None:
            return False
        if self.wait():
            return True
        self.wait = None
        return False

    def switch_group(self):
        """Run the group with the smallest pc next; merge groups at equal pcs."""
        if self.mask.any():
            self.groups.append([self.pc, self.mask])
        if not self.groups:
            self.done = True
            return
        self.groups.sort(key=lambda g: g[0])
        pc, mask = self.groups.pop(0)
        while self.groups and self.groups[0][0] == pc:
            mask = mask | self.groups.pop(0)[1]
        self.pc, self.mask = pc, mask
        self.mask_all = bool(mask.all())


class CTA:
    def __init__(self, launch, ctaid, rng, policy, report):
        self.launch = launch
        self.kernel = launch.kernel
        self.ctaid = ctaid
        self.rng = rng
        self.policy = policy
        self.report_fn = report
        nthreads = launch.nthreads
        self.nwarps = (nthreads + LANES - 1) // LANES
        self.shared = SharedMemory(launch.shared_size, self.nwarps)
        for off, init in launch.shared_inits:
            self.shared.data[off:off + len(init)] = np.frombuffer(init, np.uint8)
            self.shared.poison[off:off + len(init)] = False
        self.vc = np.eye(self.nwarps, dtype=np.int64) + 1
        self.warps = [Warp(self, k, len(launch.dtypes), launch.dtypes, nthreads) for k in range(self.nwarps)]
        self.bars = {}              # named barrier id -> dict
        self.mbars = {}             # shared offset -> MBarrier
        self.ops = {}               # async copy id -> op
        self.next_op = 1
        self.async_arrives = []     # pending cp.async.mbarrier.arrive agents
        self.proxy_fences = {}      # warp -> ([instruction count], [own clock]) of its fence.proxy.async
        self.instructions = 0
        self.seen = set()
        self.setmaxnreg_seen = {}   # (warp group, k) -> (warp, PTX line) of the first k-th setmaxnreg

    def where(self, w, ins, lanes):
        lanes = tuple(int(x) for x in np.nonzero(lanes)[0]) if lanes is not None else ()
        return F.Where(self.kernel.name, self.ctaid, w.idx if w is not None else -1, lanes,
                       ins.line if ins is not None else 0, ins.cuda_line if ins is not None else None)

    def finding(self, cls, w, ins, lanes, message, **kw):
        key = (cls.__name__, w.idx if w is not None else -1, ins.line if ins is not None else 0)
        if key in self.seen:
            return
        self.seen.add(key)
        self.report_fn(cls(self.where(w, ins, lanes), message, **kw))

    def release(self, w):
        """The warp's clock ticks after a release (its earlier accesses are published with the old value)."""
        self.vc[w.idx, w.idx] += 1

    # --- async copies -------------------------------------------------------------------------------
    def complete(self, op):
        if op.done:
            return
        if hasattr(op, "perform"):
            op.perform(self)
        else:
            from .memops import complete_copy
            complete_copy(self, op)
        self.fire_arrives()

    def fire_arrives(self):
        from .sync import fire_async_arrive
        still = []
        for a in self.async_arrives:
            if all(self.ops[i].done for i in a.ops):
                fire_async_arrive(self, a)
            else:
                still.append(a)
        self.async_arrives = still

    def needs_of(self, w):
        """Copies whose completion could unblock warp w."""
        return [op for op in w.needs() if not op.done] if w.needs is not None else []


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


def _complete_for_someone(cta, live) -> bool:
    order = list(live)
    cta.rng.shuffle(order)
    for w in order:
        need = cta.needs_of(w)
        if need:
            for op in sorted(need, key=lambda o: o.id):
                cta.complete(op)
            return True
    return False


def _wake_pollers(live) -> bool:
    """A failed test_wait / try_wait does not block in PTX; the emulator parks the warp until the phase
    changes (it would only spin).  When nothing else can run, each parked warp runs on once: a program
    that tests and goes on proceeds, one parked again on the same phase is really waiting."""
    woke = False
    for w in live:
        if w.poll is not None and w.poll != w.polled and w.wait is not None:
            w.polled, w.wait = w.poll, None
            woke = True
    return woke


def _deadlock(cta, live):
    lines = []
    for w in live:
        ins = w.wait_ins
        lines.append((w.idx, ins.line if ins else None, ins.opcode if ins else "?",
                      ins.cuda_line if ins else None))
    first = live[0]
    desc = "; ".join(f"warp {k}: {op} at PTX line {ln} (CUDA line {cl})" for k, ln, op, cl in lines)
    cta.finding(F.Deadlock, first, first.wait_ins, first.mask, f"every live warp is blocked: {desc}",
                blocked=tuple(lines))


def step(cta, w, n):
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
