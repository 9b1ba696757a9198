"""The emulator's state while a CTA runs: ``Policy``, ``Warp``, ``CTA``, the barriers, and the ``AsyncOp``
protocol every asynchronous agent implements.

An ``AsyncOp`` (a cp.async copy, a bulk / TMA copy, a bulk store, a wgmma, a cp.async.mbarrier.arrive) is
issued by its handler and completed once, later, by ``CTA.complete``, which calls its ``perform``; a
wait that covers it calls its ``observe``.  An ``MBarrier`` carries its phase, pending count and
tx-count and makes its own transitions (arrive, expect-tx, complete-tx, phase completion, test-wait),
whoever drives them: an arrive instruction, a bulk copy's complete-tx, a cp.async arrive firing.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import InitVar, dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError
from . import findings as F
from .memory import SharedMemory
from .ptx import Instruction
from .values import LANE_IDS, LANES


@dataclass(frozen=True)
class Policy:
    """Adversarial-timing knobs.  completion: 'latest' (default) or 'random'; slice: the most instructions a
    warp runs before the scheduler may switch; spurious: probability that mbarrier.try_wait fails although
    the phase completed; strict_uninitialized: report every read of never-written shared memory (by default
    poison only is reported where it reaches a global store, a branch or an address); strict_exit: report
    cp.async copies a warp never waited for; strict_cp_async_proxy: treat cp.async writes as generic-proxy
    writes that wgmma may read only after a fence.proxy.async (the PTX ISA leaves this open; CUTLASS and
    Triton issue no fence there, so it is off by default); elect: the lane elect.sync elects among its executing
    members, 'lowest' (default) or 'highest' (the PTX ISA fixes only that a mask elects the same lane every time);
    strict_wgmma_fence: report an accumulator / A register written between a wgmma.fence and the first wgmma after
    it (nvcc's placement of accumulator initialisation; ptxas 13 accepts it silently); strict_mbarrier_init_fence:
    report a bulk copy completing on an mbarrier whose init no fence.mbarrier_init / fence.proxy.async published
    (off by default: the ISA leaves the proxy of complete-tx open and Triton fences with bar.sync alone)."""

    completion: str = "latest"
    slice: int = 64
    spurious: float = 0.25
    strict_uninitialized: bool = False
    strict_exit: bool = False
    strict_cp_async_proxy: bool = False
    elect: str = "lowest"
    strict_wgmma_fence: bool = False
    strict_mbarrier_init_fence: bool = False
    max_instructions: int = 200_000_000
    # the memory model (memmodel): sm_count SMs with ctas_per_sm CTAs each (0: what fits an SM) run at once;
    # dispatch 'linear' (CTAs start in linear id order, as the hardware does) or 'random' (seeded, per
    # interleaving); strict_cross_cta: report every spin-wait on another CTA outside a cooperative launch;
    # strict_benign_races: count BenignRace findings in Report.ok
    sm_count: int = 2
    ctas_per_sm: int = 0
    dispatch: str = "linear"
    strict_cross_cta: bool = False
    strict_benign_races: bool = False

    def __post_init__(self):
        choices = {"completion": ("latest", "random"), "elect": ("lowest", "highest"),
                   "dispatch": ("linear", "random")}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise InputError(f"Policy({name}={getattr(self, name)!r}): expected one of {', '.join(allowed)}")
        counts = {"slice": 1, "max_instructions": 1, "sm_count": 1, "ctas_per_sm": 0}
        for name, low in counts.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise InputError(f"Policy({name}={v!r}): expected an integer >= {low}")
        if not 0 <= self.spurious <= 1:
            raise InputError(f"Policy(spurious={self.spurious!r}): expected a probability in [0, 1]")


class AsyncOp(ABC):
    """An asynchronous agent a warp issued.  ``id``: its key in ``CTA.ops``, where the scheduler finds it
    (0: not kept there: a wgmma completes at its wait_group, a cp.async arrive once its copies have);
    ``warp``: the issuing warp's index; ``done``: it completed."""

    __slots__ = ()
    id: int
    warp: int
    done: bool

    @abstractmethod
    def perform(self, cta: CTA) -> None:
        """Complete now, reading the source as it is at this moment; sets ``done``."""

    def observe(self, cta: CTA, clock: int) -> None:
        """The issuer observed the completed op (a wait covering it) at ``clock``.  Nothing by default: an op
        whose writes are ordered by its completion itself."""

    def completes_on(self, bar: int) -> bool:
        """Its completion performs complete-tx on the mbarrier at shared offset ``bar``."""
        return False


@dataclass(eq=False, slots=True)
class AsyncArrive(AsyncOp):
    """A cp.async.mbarrier.arrive: once the copies ``ops`` (ids) its warp issued before it are complete, it
    fires: their bytes count as written at the warp's clock at the arrive, the global reads ``reads``
    (flight ids) end, and it arrives ``count`` times on the mbarrier at ``bar`` with that clock."""

    warp: int
    bar: int
    count: int
    ops: tuple
    vc: np.ndarray
    clock: int
    ins: Instruction
    reads: tuple = ()       # copies of this warp whose global reads are in flight: the barrier's waiters see them
    done: bool = False
    id: int = 0

    def perform(self, cta):
        for i in self.ops:
            cta.ops[i].observe(cta, self.clock)
        for i in self.reads:
            cta.launch.gshadow.end(i, self.warp, self.clock)
        self.done = True
        mb = cta.mbars.get(self.bar)
        if mb is None or not mb.valid:
            return
        mb.release(self.vc)
        mb.arrive(cta, cta.warps[self.warp], self.ins, self.count)


@dataclass(eq=False, slots=True)
class MBarrier:
    """An mbarrier object at shared offset ``addr``: the phase (unbounded; the hardware exposes its parity),
    the arrivals still pending in it and the count each phase starts with, the tx-count, and the clocks
    released into the current phase (``vc_cur``) and published by the last completed one (``vc_done``)."""

    addr: int
    expected: int
    pending: int
    vc_cur: np.ndarray
    vc_done: np.ndarray
    phase: int = 0
    tx: int = 0
    valid: bool = True
    underflow: bool = False      # a tx-count underflow was reported
    init_warp: int = -1          # the warp that initialised it, and its own clock then
    init_clock: int = 0
    async_visible: bool = False  # the init was published to the async proxy (a fence after it by that warp)

    @classmethod
    def init(cls, addr: int, count: int, nwarps: int, warp: int = -1, clock: int = 0) -> MBarrier:
        z = np.zeros(nwarps, np.int64)
        return cls(addr, count, count, z, z.copy(), init_warp=warp, init_clock=clock)

    def release(self, vc: np.ndarray) -> None:
        """A release arrive (or a copy completing on it) joins clock ``vc`` into the current phase."""
        self.vc_cur = np.maximum(self.vc_cur, vc)

    def acquire(self, cta: CTA, w: Warp) -> None:
        """A successful wait: warp w's clock joins the last completed phase's."""
        cta.vc[w.idx] = np.maximum(cta.vc[w.idx], self.vc_done)

    def arrive(self, cta: CTA, w: Warp, ins: Instruction, count: int, tx: int = 0) -> None:
        """``count`` arrivals (with expect-tx of ``tx`` bytes); more than are pending is an over-arrival."""
        self.tx += tx
        if count > self.pending:
            cta.finding(F.MbarrierMisuse, w, ins, w.m, f"over-arrival on the mbarrier at shared offset {self.addr}: "
                        f"{count} arrivals with {self.pending} pending in phase {self.phase}")
        self.pending -= count
        self._complete_phases(cta, w, ins)

    def expect_tx(self, cta: CTA, w: Warp | None, ins: Instruction | None, nbytes: int) -> None:
        self.tx += nbytes
        self._complete_phases(cta, w, ins)

    def complete_tx(self, cta: CTA, w: Warp | None, ins: Instruction | None, nbytes: int) -> None:
        """complete-tx of ``nbytes``: by mbarrier.complete_tx, or by a bulk copy (``ins`` a cp.async.bulk), which
        may reach the object through the async proxy.  With ``Policy(strict_mbarrier_init_fence=True)`` its init
        must have been published to it (fence.mbarrier_init.release.cluster or fence.proxy.async after the init,
        as the CUDA Programming Guide's TMA example and CUTLASS's pipelines do), else ``ProxyFenceMissing``.  The
        PTX ISA does not say which proxy a complete-tx uses on its mbarrier; within one CTA, a CTA barrier after
        the init is what Triton relies on, so the default asks no fence."""
        if ins is not None and ins.parts[0] == "cp" and not self.async_visible and cta.policy.strict_mbarrier_init_fence:
            self.async_visible = True       # reported once
            cta.finding(F.ProxyFenceMissing, w, ins, None, f"a bulk copy completes on the mbarrier at shared offset "
                        f"{self.addr} whose init (warp {self.init_warp}) has no fence.mbarrier_init or "
                        "fence.proxy.async after it", address=self.addr)
        self.tx -= nbytes
        self._complete_phases(cta, w, ins)

    def add_pending(self, count: int) -> None:
        """cp.async.mbarrier.arrive without .noinc: the current phase waits for ``count`` more arrivals (the
        arrive to come when the copies complete)."""
        self.pending += count

    def drop(self, count: int, cta: CTA | None = None, w: Warp | None = None, ins: Instruction | None = None) -> None:
        """arrive_drop: the phases after this one expect ``count`` fewer arrivals (more than expected: reported)."""
        if count > self.expected and cta is not None:
            cta.finding(F.MbarrierMisuse, w, ins, w.m, f"arrive_drop of {count} on the mbarrier at shared offset "
                        f"{self.addr} expecting {self.expected}")
            count = self.expected
        self.expected -= count

    def passed(self, want: np.ndarray, parity: bool) -> np.ndarray:
        """test_wait / try_wait per lane: has the phase ``want`` names (its parity, or its number) completed?"""
        if parity:
            return (want.astype(np.int64) & 1) != (self.phase & 1)
        return want.astype(np.int64) < self.phase

    def _complete_phases(self, cta, w, ins):
        while self.pending <= 0:
            if self.tx != 0:
                if self.tx < 0 and not self.underflow:
                    self.underflow = True
                    cta.finding(F.MbarrierMisuse, w, ins, w.m if w is not None else None,
                                f"tx-count underflow ({self.tx}) on the mbarrier at shared offset {self.addr}")
                return
            extra = -self.pending
            self.phase += 1
            self.pending = self.expected - extra
            self.vc_done = self.vc_cur
            self.vc_cur = np.zeros_like(self.vc_cur)
            if self.expected <= 0:      # every participant dropped out: one phase per arrival event
                return


@dataclass(eq=False, slots=True)
class NamedBarrier:
    """A named barrier instance (bar / barrier id) being filled: its thread count (None: every warp with a
    non-exited thread), the warps arrived so far (warp, waits?, its lanes), the join of their clocks, the
    reduction of ``bar.red`` (op popc / and / or, None: sync or arrive) and, per warp, the thread groups parked at
    a non-aligned barrier until the rest of their warp arrives ((pc, lanes, predicate values))."""

    count: int | None
    vc: np.ndarray
    arrived: list[tuple[Warp, bool, np.ndarray]] = field(default_factory=list)
    red: str | None = None
    parked: dict[int, list] = field(default_factory=dict)
    popc: int = 0
    all_: bool = True
    any_: bool = False

    def contribute(self, vals: np.ndarray, lanes: np.ndarray) -> None:
        """bar.red: the predicate values of one warp's arriving threads."""
        v = vals[lanes]
        self.popc += int(v.sum())
        self.all_ = self.all_ and bool(v.all())
        self.any_ = self.any_ or bool(v.any())

    def result(self):
        return {"popc": self.popc, "and": self.all_, "or": self.any_}.get(self.red)


@dataclass(eq=False, slots=True)
class Warp:
    """One warp: registers (raw bits and poison per register), thread groups, what blocks it, and its
    in-flight async work.  ``mask`` is the running thread group; ``m`` / ``full`` the lanes (guard applied)
    of the instruction executing now."""

    cta: CTA = field(repr=False)
    idx: int
    dtypes: InitVar[list]
    nthreads: InitVar[int]
    regs: list[np.ndarray] = field(init=False, repr=False)
    pois: list[np.ndarray | None] = field(init=False, repr=False)
    live: np.ndarray = field(init=False)          # lanes that have not exited
    mask: np.ndarray = field(init=False)
    m: np.ndarray = field(init=False)
    mask_all: bool = field(init=False)
    full: bool = field(init=False)
    done: bool = field(init=False)
    pc: int = 0
    groups: list[list] = field(default_factory=list)                 # other thread groups: [pc, mask]
    wait: Callable[[], bool] | None = None        # True while blocked
    wait_ins: Instruction | None = None
    needs: Callable[[], list[AsyncOp]] | None = None   # async ops whose completion could unblock the warp
    bar_pass: dict = field(default_factory=dict)  # barrier id -> barrier.BarPass: an instance it arrived at completed
    poll: tuple[int, int] | None = None           # (mbarrier, phase) of a failed test_wait / try_wait parking it
    polled: set | None = None                     # the polls it was woken from (engine._wake_pollers)
    local: np.ndarray | None = None               # local memory, [32, frame bytes], made on first use
    uncommitted: list[AsyncOp] = field(default_factory=list)         # cp.async ops not yet in a group
    async_groups: list[list[AsyncOp]] = field(default_factory=list)  # committed cp.async groups, oldest first
    bulk_uncommitted: list[AsyncOp] = field(default_factory=list)    # bulk stores not yet in a bulk group
    bulk_groups: list[list[AsyncOp]] = field(default_factory=list)   # committed bulk groups, oldest first
    wg_pending: list[AsyncOp] = field(default_factory=list)          # wgmma ops not yet committed
    wg_groups: list[list[AsyncOp]] = field(default_factory=list)     # committed wgmma groups, oldest first
    wg_busy: dict[int, int] = field(default_factory=dict)            # register -> in-flight wgmma ops writing it
    wg_result_pois: dict[int, np.ndarray | None] = field(default_factory=dict)   # register -> poison of the
    # last completed wgmma result
    maxnreg: int | None = None                    # the setmaxnreg limit, once set
    setmaxnreg_count: int = 0                     # how many setmaxnreg the warp executed
    wgmma_count: int = 0                          # how many wgmma.mma_async the warp executed
    wg_fence: tuple | None = None                 # (its registers' arrays at its last wgmma.fence or wgmma, fence?)
    writes: int = 0                               # memory writes so far (memmodel.spinning)
    spin: tuple | None = None                     # the state of its last strong global load (memmodel.spinning)
    parked: bool = False                          # parked on global memory (memmodel.park)
    pending_acq: dict | None = None               # clocks its strong reads saw since its last acquire fence
    fence_rel: dict | None = None                 # its knowledge at its last release fence

    def __post_init__(self, dtypes, nthreads):
        self.regs = [np.zeros(LANES, dt) for dt in dtypes]
        self.pois = [None] * len(dtypes)
        self.live = (LANE_IDS + self.idx * LANES) < nthreads
        self.mask = self.live.copy()
        self.m = self.mask
        self.mask_all = self.full = bool(self.mask.all())
        self.done = not self.live.any()

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


@dataclass(eq=False, slots=True)
class CTA:
    """One CTA of a launch being run: its warps, shared memory with its shadow, the warps' vector clocks
    (``vc[i]``: warp i's), the barriers, and the async ops in flight (``ops``, by id)."""

    launch: Any = field(repr=False)               # loader.Prepared: the compiled launch
    ctaid: tuple[int, int, int]
    rng: np.random.Generator = field(repr=False)
    policy: Policy
    report_fn: Callable[[F.Finding], None] = field(repr=False)
    kernel: Any = field(init=False, repr=False)   # ptx.Kernel
    nwarps: int = field(init=False)
    shared: SharedMemory = field(init=False, repr=False)
    vc: np.ndarray = field(init=False, repr=False)
    warps: list[Warp] = field(init=False, repr=False)
    bars: dict[int, NamedBarrier] = field(default_factory=dict, repr=False)   # named barrier id -> barrier
    mbars: dict[int, MBarrier] = field(default_factory=dict, repr=False)      # shared offset -> mbarrier
    ops: dict[int, AsyncOp] = field(default_factory=dict, repr=False)         # async op id -> op
    next_op: int = 1
    async_arrives: list[AsyncArrive] = field(default_factory=list, repr=False)   # not yet fired
    proxy_fences: dict[int, tuple[list[int], list[int]]] = field(default_factory=dict, repr=False)
    # warp -> ([instruction count], [own clock]) of each of its fence.proxy.async
    instructions: int = 0
    seen: set = field(default_factory=set, repr=False)
    setmaxnreg_seen: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict, repr=False)
    # (warp group, k) -> (warp, PTX line) of the first k-th setmaxnreg
    serial: int = field(init=False)               # linear CTA id in the launch
    ext: list = field(default_factory=list, repr=False)   # (warp, clock, {(CTA, warp): clock}): memmodel
    sh_strength: Any = field(default=None, repr=False)    # memmodel.SharedStrength, on the first strong access

    def __post_init__(self):
        launch = self.launch
        self.kernel = launch.kernel
        self.serial = launch.gshadow.serial(self.ctaid)
        nthreads = launch.nthreads
        self.nwarps = (nthreads + LANES - 1) // LANES
        self.shared = SharedMemory(launch.shared_size, self.nwarps)
        for off, init in launch.shared_inits:
            self.shared.data[off:off + len(init)] = np.frombuffer(init, np.uint8)
            self.shared.poison[off:off + len(init)] = False
        self.vc = np.eye(self.nwarps, dtype=np.int64) + 1
        self.warps = [Warp(self, k, launch.dtypes, nthreads) for k in range(self.nwarps)]

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

    def unfenced(self, idx: np.ndarray, vcw: np.ndarray) -> int | None:
        """A shared byte (of idx) whose generic-proxy write has no fence.proxy.async by its writer that happens
        before a reader with clock ``vcw`` (what an async-proxy read needs); None: every byte is fenced."""
        sm = self.shared
        writers = sm.wr_warp[idx]
        seqs = sm.wr_seq[idx]
        for u in np.unique(writers):
            sel = writers == u
            fs, fc = self.proxy_fences.get(int(u), ([], []))
            k = np.searchsorted(np.asarray(fs, np.int64), seqs[sel], side="right")
            fc = np.asarray(fc + [np.iinfo(np.int64).max], np.int64)
            ok = fc[k] <= vcw[u]
            if not ok.all():
                return int(idx[sel][~ok][0])
        return None

    # --- async ops ----------------------------------------------------------------------------------
    def complete(self, op: AsyncOp) -> None:
        """Complete ``op`` now (if it has not), then fire the cp.async arrives whose copies are all done."""
        if op.done:
            return
        op.perform(self)
        if self.async_arrives:
            self.fire_arrives()

    def fire_arrives(self):
        still = []
        for a in self.async_arrives:
            if all(self.ops[i].done for i in a.ops):
                a.perform(self)
            else:
                still.append(a)
        self.async_arrives = still

    def needs_of(self, w):
        """Copies whose completion could unblock warp w."""
        return [op for op in w.needs() if not op.done] if w.needs is not None else []
