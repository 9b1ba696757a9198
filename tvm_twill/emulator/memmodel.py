"""The PTX memory consistency model across warps and CTAs: memory-operation qualifiers, release / acquire
happens-before edges that cross CTAs, fences, spin-wait parking and the findings of the model.

PTX ISA sections relied on ("Memory Consistency Model" chapter and the instruction pages):

* "Operation types" / "Strong operations": ``ld`` / ``st`` with ``.relaxed``, ``.acquire``, ``.release`` and
  a scope, ``.volatile`` (treated as ``.relaxed.sys``) and every ``atom`` / ``red`` are *strong*; a plain
  (``.weak``) access is not.  "Scope": ``.cta``, ``.cluster`` (a launch without clusters is a cluster of
  one CTA), ``.gpu``, ``.sys``; ``atom`` / ``red`` without a scope are ``.gpu``.
* Instruction syntax (``ld``, ``st``, ``atom``, ``red``): ``ld`` takes ``.relaxed`` / ``.acquire`` with a
  required scope; ``st`` ``.relaxed`` / ``.release`` with a required scope; ``atom`` any of ``.relaxed``,
  ``.acquire``, ``.release``, ``.acq_rel``; ``red`` ``.relaxed`` or ``.release``; ``ld.global.nc`` is weak
  only; strong accesses are not allowed on ``.local`` / ``.param``.  Anything else is refused when the kernel
  is loaded (ptxas 13 refuses the same forms).
* "Release and acquire patterns" / "Synchronizes-with": a release pattern (``st.release``, ``red.release``,
  an ``atom`` with release semantics, or ``fence`` then a strong write) observed by an acquire pattern
  (``ld.acquire``, an ``atom`` with acquire semantics, or a strong read then ``fence``) of a morally
  strong pair orders everything before the release before everything after the acquire.  An ``atom`` /
  ``red`` continues the release sequence of the location it modifies.  "Fence-SC order": two morally
  strong ``fence.sc`` synchronise in the order they execute (``membar.{cta,gl,sys}`` is
  ``fence.sc.{cta,gpu,sys}``).

A warp's knowledge is a sparse vector clock over every warp of the launch: its CTA's row of ``CTA.vc``
plus, for each acquire that brought in clocks of other CTAs, ``CTA.ext`` entries ``(warp, clock at the
acquire, clocks)`` that a warp knows once its own clock of that warp reaches the acquire's (the CTA's
barriers carry them without knowing of them).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..errors import EmulationError
from . import findings as F
from .convert import SHARED_WINDOW
from .values import LANES

SCOPE = {"cta": 1, "cluster": 2, "gpu": 3, "sys": 4}
SCOPE_NAME = {v: k for k, v in SCOPE.items()}
SEMS = ("weak", "relaxed", "acquire", "release", "acq_rel", "volatile", "sc", "mmio")
_LEGAL = {"ld": {None, "weak", "volatile", "relaxed", "acquire"},
          "st": {None, "weak", "volatile", "relaxed", "release"},
          "atom": {None, "relaxed", "acquire", "release", "acq_rel"},
          "red": {None, "relaxed", "release"}}


@dataclass(frozen=True, slots=True)
class Order:
    """What a memory operation is in the model: ``strong`` 0 (weak) or its scope (1 cta .. 4 sys),
    whether it acquires / releases, and whether it is a non-coherent ``ld.global.nc``."""

    strong: int = 0
    acquire: bool = False
    release: bool = False
    nc: bool = False


WEAK = Order()


@dataclass(frozen=True)
class BenignRace(F.Finding):
    """Unordered writes of the same value to the same bytes with the same width: the PTX memory model
    gives the bytes that value; the same race is undefined behaviour in CUDA C++.  Not counted in
    ``Report.ok`` unless ``Policy(strict_benign_races=True)``."""

    other: tuple = ()
    address: int = 0


@dataclass(frozen=True)
class MixedSizeRace(F.DataRace):
    """Strong accesses, unordered, whose bytes overlap only in part (PTX ISA, "Memory Consistency Model":
    morally strong operations overlap completely; a partial overlap is a data race)."""


@dataclass(frozen=True)
class ReadOnlyViolation(F.Finding):
    """A byte that ``ld.global.nc`` reads is written in the same kernel (CUDA Programming Guide,
    "Read-Only Data Cache Load Function": the data must be read-only for the kernel's lifetime)."""

    address: int = 0


def order_of(ins) -> Order:
    """The ``Order`` of an ld / st / atom / red; an illegal sem / scope combination raises EmulationError."""
    p = ins.parts
    op = p[0]
    sems = [q for q in p[1:] if q in SEMS and q != "mmio"]
    scopes = [q for q in p[1:] if q in SCOPE]
    nc = "nc" in p

    def bad(why):
        raise EmulationError(f"illegal {op} qualifiers in {ins.opcode} at PTX line {ins.line}: {why} "
                             f"(PTX ISA, {op})")
    if len(sems) > 1 or len(scopes) > 1:
        bad("more than one semantics or scope")
    sem, scope = (sems or [None])[0], (scopes or [None])[0]
    if sem not in _LEGAL[op]:
        bad(f".{sem} is not a semantics of {op}")
    if op in ("ld", "st"):
        if sem in ("relaxed", "acquire", "release") and scope is None:
            bad(f".{sem} needs a scope (.cta, .cluster, .gpu or .sys)")
        if sem in (None, "weak", "volatile") and scope is not None:
            bad(f"a scope goes with .relaxed / .{'acquire' if op == 'ld' else 'release'} only")
        if nc and sem not in (None, "weak"):
            bad(".nc loads are weak")
        if sem not in (None, "weak") and any(s in p for s in ("local", "param", "const")):
            bad("strong accesses are not allowed on .local / .param / .const")
    if op in ("atom", "red"):
        scope = scope or "gpu"
    elif sem in (None, "weak"):
        return Order(nc=nc)
    elif sem == "volatile":
        scope = "sys"
    return Order(SCOPE[scope], sem in ("acquire", "acq_rel"), sem in ("release", "acq_rel"), nc)


# --- knowledge: sparse vector clocks over the launch ------------------------------------------------------
def knowledge(cta, u: int) -> dict:
    """Warp ``u``'s clocks of every warp of the launch it is ordered after: {(CTA serial, warp): clock}."""
    s = cta.serial
    out = {(s, j): int(v) for j, v in enumerate(cta.vc[u])}
    for lw, lclk, clocks in cta.ext:
        if cta.vc[u, lw] >= lclk:
            for key, v in clocks.items():
                if out.get(key, 0) < v:
                    out[key] = v
    return out


def join(a: dict | None, b: dict | None) -> dict | None:
    if not a or not b:
        return dict(a or b) if (a or b) else None
    out = dict(a)
    for key, v in b.items():
        if out.get(key, 0) < v:
            out[key] = v
    return out


def acquire(cta, w, clocks: dict | None) -> None:
    """Warp w acquires ``clocks`` (a release's knowledge): its own CTA's entries join its vector clock,
    the others become an ``ext`` entry stamped with w's clock now."""
    if not clocks:
        return
    s = cta.serial
    row = cta.vc[w.idx]
    foreign = {}
    for (c, j), v in clocks.items():
        if c == s:
            if row[j] < v:
                row[j] = v
        else:
            foreign[(c, j)] = v
    if not foreign:
        return
    clk = int(row[w.idx])
    if cta.ext and cta.ext[-1][:2] == (w.idx, clk):      # a poll again at the same clock: one entry
        cta.ext[-1] = (w.idx, clk, join(cta.ext[-1][2], foreign))
    else:
        cta.ext.append((w.idx, clk, foreign))


def release(cta, w) -> dict:
    """Warp w's knowledge published by a release now; its clock ticks after it."""
    k = knowledge(cta, w.idx)
    cta.release(w)
    return k


def orders(k: dict, serial: int, warp: np.ndarray, clock: np.ndarray) -> np.ndarray:
    """Per byte: does knowledge ``k`` cover the access of (``serial``, ``warp``) at ``clock``?"""
    out = np.zeros(clock.shape, np.bool_)
    for u in np.unique(warp).tolist():
        sel = warp == u
        out[sel] = clock[sel] <= k.get((serial, int(u)), 0)
    return out


# --- fences ----------------------------------------------------------------------------------------------
_LEVEL = {"cta": "cta", "gl": "gpu", "sys": "sys"}
_FENCE_SEMS = ("sc", "acq_rel", "acquire", "release")


def fence_form(ins) -> tuple | None:
    """(sem, scope) of ``fence{.sem}.scope`` or ``membar.level``; None for other fences (proxy, mbarrier_init)."""
    p = ins.parts
    if p[0] == "membar":
        return ("sc", _LEVEL[p[1]]) if len(p) == 2 and p[1] in _LEVEL else None
    if len(p) == 2 and p[1] in SCOPE:
        return "acq_rel", p[1]
    if len(p) == 3 and p[1] in _FENCE_SEMS and p[2] in SCOPE:
        return p[1], p[2]
    return None


def is_model_fence(ins) -> bool:
    """membar and the fences with a semantics or a bare scope (not proxy / mbarrier_init / op_restrict)."""
    p = ins.parts
    return p[0] == "membar" or (len(p) >= 2 and (p[1] in _FENCE_SEMS or p[1] in SCOPE))


def compile_fence(ins, cc):
    """``fence{.sem}.scope`` (PTX ISA, membar / fence; ``fence.scope`` is ``fence.acq_rel.scope``) and
    ``membar.level`` (= ``fence.sc``).  Acquire half: the clocks of the strong reads the warp made since
    its last acquire fence (``Warp.pending_acq``) join its own.  Release half: its knowledge now is
    what its later strong writes publish (``Warp.fence_rel``).  ``fence.sc`` also synchronises with the
    ``fence.sc`` executed before it whose scope includes it (Fence-SC order)."""
    form = fence_form(ins)
    if form is None:
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
    sem, scope = form
    acq, rel, sc = sem != "release", sem != "acquire", sem == "sc"
    code = SCOPE[scope]
    launch = cc.launch

    def run(w):
        cta = launch.cta
        keys = (cta.serial,) if code <= 2 else (cta.serial, -1)     # the fences this one's scope includes
        clocks = launch.gshadow.sc_clocks
        if sc:
            for key in keys:
                acquire(cta, w, clocks.get(key))
        if acq and w.pending_acq:
            acquire(cta, w, w.pending_acq)
            w.pending_acq = None
        if rel:
            w.fence_rel = release(cta, w)
            if sc:
                for key in keys:
                    clocks[key] = join(clocks.get(key), w.fence_rel)
    return run


# --- spin-wait parking ------------------------------------------------------------------------------------
def spinning(w, raw: np.ndarray) -> bool:
    """A strong global load that a warp repeats in exactly the state it executed it last (pc, thread group,
    every register, no store in between) and that reads the same bytes: the warp spins, and nothing it
    does changes until another warp writes those bytes."""
    sig = (w.pc, w.m.tobytes(), w.writes, raw[w.m].tobytes(), hash(b"".join(r.tobytes() for r in w.regs)))
    if w.spin == sig:
        return True
    w.spin = sig
    return False


def park(cta, w, ins, addrs: np.ndarray, nbytes: int, space: str = "global") -> bool:
    """Take warp w off the schedule until the global or shared bytes its lanes read at ``addrs`` change
    (False: another state space).  On waking, the CTA that wrote them is checked: a CTA may only wait on CTAs dispatched
    before it (the hardware dispatches in that order; nothing guarantees the residency of a later one),
    and under ``Policy(strict_cross_cta=True)`` on none, outside a cooperative launch."""
    a = addrs[w.m]
    if space == "shared":
        k, view, off = -1, cta.shared.data, a.astype(np.int64)
    else:
        k, view, off = cta.launch.gmem.locate(a, nbytes)
    if view is None:
        if not ((a >= SHARED_WINDOW) & (a < SHARED_WINDOW + (1 << 32))).all():
            return False
        k, view, off = -1, cta.shared.data, (a - np.uint64(SHARED_WINDOW)).astype(np.int64)
    idx = (off[:, None] + np.arange(nbytes)).reshape(-1)
    saved = view[idx].copy()
    w.parked = True

    def wait():
        if np.array_equal(view[idx], saved):
            return True
        w.parked = False
        woken_by(cta, w, ins, k, idx)
        return False
    w.wait = wait
    w.needs = list
    return True


def woken_by(cta, w, ins, k, idx):
    if k < 0:
        return                                  # shared memory: its own CTA wrote it
    writer = cta.launch.gshadow.writer(k, idx)
    if writer is None or writer == cta.serial or cta.launch.cooperative:
        return
    rank = cta.launch.dispatch_rank
    who = cta.launch.gshadow.ctaid(writer)
    if rank.get(writer, 0) > rank.get(cta.serial, 0):
        cta.finding(F.Deadlock, w, ins, w.m, f"spins on global memory that CTA {who} writes, a CTA dispatched "
                    "after this one: nothing guarantees it is resident while this one waits (CUDA guarantees "
                    "co-residency only in a cooperative launch)")
    elif cta.policy.strict_cross_cta:
        cta.finding(F.Deadlock, w, ins, w.m, f"spins on global memory that CTA {who} writes, outside a "
                    "cooperative launch (Policy(strict_cross_cta=True))")


# --- shared memory --------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def extent(nbytes: int, elem: int, lanes: int) -> np.ndarray:
    """Per byte of an access of ``lanes`` x ``nbytes`` in elements of ``elem`` bytes: width * 16 + position
    (two accesses overlap completely on a byte when these agree)."""
    return np.tile((np.arange(nbytes) % elem + elem * 16).astype(np.int16), lanes)


NO_READ = 127


class SharedStrength:
    """The strength of a CTA's shared-memory accesses, made on its first strong shared access: per byte the
    last write's scope (0 weak) and extent, the weakest read since it (``NO_READ``: none) and the last read's
    extent; and the release clocks of strongly written elements (by shared offset).  Every shared scope
    includes the whole CTA, so any two strong accesses overlapping completely are morally strong."""

    def __init__(self, size: int):
        self.wkind = np.zeros(size, np.int8)
        self.wext = np.zeros(size, np.int16)
        self.rkind = np.full(size, NO_READ, np.int8)
        self.rext = np.zeros(size, np.int16)
        self.sync: dict[int, dict] = {}

    def pair(self, idx, order: Order, ext, side: str) -> np.ndarray:
        """Per byte: is the earlier ``side`` ('write' / 'read') access and this one morally strong?"""
        if not order.strong:
            return np.zeros(idx.shape, np.bool_)
        k, e = (self.wkind[idx], self.wext[idx]) if side == "write" else (self.rkind[idx], self.rext[idx])
        return (k > 0) & (k < NO_READ) & (e == ext)

    def note(self, idx, write: bool, order: Order, ext) -> None:
        if write:
            self.wkind[idx], self.wext[idx], self.rkind[idx] = order.strong, ext, NO_READ
        else:
            self.rkind[idx] = np.minimum(self.rkind[idx], order.strong)
            self.rext[idx] = ext

    def publish(self, cta, w, starts, order: Order) -> None:
        clocks = release_clocks(cta, w, order)
        for st in starts.tolist():
            if clocks:
                self.sync[st] = clocks
            else:
                self.sync.pop(st, None)

    def observe(self, cta, w, starts, order: Order) -> None:
        clocks = None
        for st in starts.tolist():
            clocks = join(clocks, self.sync.get(st))
        take(cta, w, clocks, order)


def release_clocks(cta, w, order: Order) -> dict | None:
    """What a strong write publishes: the warp's knowledge for a release, its knowledge at its last release
    fence (with the write itself) for a relaxed write after one, else nothing."""
    if order.release:
        return release(cta, w)
    if w.fence_rel:
        return join(w.fence_rel, {(cta.serial, w.idx): int(cta.vc[w.idx, w.idx])})
    return None


def take(cta, w, clocks: dict | None, order: Order) -> None:
    """A strong read found ``clocks`` released at its location: an acquire joins them now, a relaxed read
    keeps them for the warp's next acquire fence."""
    if not clocks:
        return
    if order.acquire:
        acquire(cta, w, clocks)
    else:
        w.pending_acq = join(w.pending_acq, clocks)


# --- occupancy --------------------------------------------------------------------------------------------
def resident_ctas(launch, policy, nctas: int) -> int:
    """How many CTAs run at once: every CTA of a cooperative launch; else ``policy.sm_count`` SMs times the
    CTAs per SM (``policy.ctas_per_sm``, or what fits an SM's 2048 threads, 32 CTAs and 228 KiB of shared
    memory)."""
    if launch.cooperative:
        return max(nctas, 1)
    per_sm = policy.ctas_per_sm
    if not per_sm:
        warps = (launch.nthreads + LANES - 1) // LANES
        per_sm = min(32, 64 // max(warps, 1), (228 << 10) // max(launch.shared_size, 1))
    return max(1, per_sm * max(policy.sm_count, 1))
