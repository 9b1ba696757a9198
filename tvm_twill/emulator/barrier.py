"""Named barriers (bar / barrier: sync, arrive, red) and the membermask rules of the .sync warp primitives.

By the PTX ISA, "Parallel Synchronization and Communication Instructions: bar, barrier", "bar.warp.sync",
"shfl.sync", "vote.sync", "elect.sync" and "Control Flow Instructions: exit":

- Ids 0..15.  A thread count b "must be a multiple of the warp size"; it is at most the CTA's threads
  (rounded up to whole warps) and nonzero for ``arrive``; every arrival at one barrier instance gives the same
  b.  A violation is a ``BarrierMismatch``.
- A barrier "causes executing thread to wait for all non-exited threads from its warp and marks warps'
  arrival": a warp arrives as a unit.  Without b every warp with a non-exited thread participates (as threads
  exit, a barrier for all threads of the CTA held up only by them is released); with b it completes when b / 32
  warps arrived, and exits do not count, so a counted barrier whose participants exited deadlocks.
- ``.aligned`` (``bar.*`` is ``barrier.*.aligned``): every non-exited thread of the warp executes the same
  instruction; reaching it with part of the warp is a ``BarrierMismatch``.  A non-aligned ``barrier`` in
  divergent code is legal: the arriving thread group is parked until the warp's other non-exited threads
  arrive at the same barrier id (at any instruction), then the warp arrives.
- ``bar.red.popc.u32`` / ``.and.pred`` / ``.or.pred``: the reduction of predicate c over the threads of every
  participating warp, delivered to each; red mixed with sync / arrive on one instance is a ``BarrierMismatch``.
- ``shfl.sync`` / ``vote.sync`` / ``elect.sync`` / ``bar.warp.sync``: the executing thread must be in the
  membermask, and every non-exited thread the membermask names must execute the instruction (the emulator
  runs a warp's divergent thread groups apart, so lanes of another group count as not executing it).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import EmulationError
from . import findings as F
from .state import NamedBarrier
from .values import BLOCKED, LANE_IDS, LANES

_RED = {"popc": "u32", "and": "pred", "or": "pred"}


@dataclass(eq=False, slots=True)
class BarPass:
    """A barrier instance a warp arrived at completed: ``lanes`` still execute their barrier instruction once
    more to leave it (and receive ``value``, a reduction's result)."""

    lanes: np.ndarray
    value: object = None


def _form(ins):
    p = [x for x in ins.parts if x != "cta"]
    kind = next((x for x in p[1:] if x in ("sync", "arrive", "red")), None)
    red = next((x for x in p[1:] if x in _RED), None) if kind == "red" else None
    if kind is None or (kind == "red" and red is None):
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
    return kind, red, p[0] == "bar" or "aligned" in p


def compile_bar(ins, cc):
    if ins.parts[:2] == ["bar", "warp"]:
        return compile_warp_sync(ins, cc)
    kind, red, aligned = _form(ins)
    ops = ins.operands
    src = ops[1:-1] if red else ops
    if not 1 <= len(src) <= 2:
        raise EmulationError(f"unexpected operands of {ins.opcode} at PTX line {ins.line}")
    bid = cc.read(src[0], "u32", ins)
    cnt = cc.read(src[1], "u32", ins) if len(src) > 1 else None
    cval = cc.read(ops[-1], "pred", ins) if red else None
    put = cc.write(ops[0], _RED[red], ins) if red else None
    launch = cc.launch

    def run(w):
        cta = launch.cta
        act = np.nonzero(w.m)[0]
        i = int(bid(w)[act[0]])
        bp = w.bar_pass.get(i)
        if bp is not None and (w.m & bp.lanes).any():
            return _leave(w, i, bp, put)
        n = int(cnt(w)[act[0]]) if cnt is not None else None
        _check_operands(cta, w, ins, i, n, kind)
        b = cta.bars.get(i)
        if b is None:
            b = cta.bars[i] = NamedBarrier(n, np.zeros(cta.nwarps, np.int64), red=red)
        _check_instance(cta, w, ins, b, i, n, red)
        vals = (np.asarray(cval(w), np.bool_) & w.m) if red else None
        lanes = w.m.copy()
        if not (w.m == w.live).all():
            got = _park(cta, w, ins, b, i, vals, aligned)
            if got is None:
                return None
            lanes, vals = got
        if red:
            b.contribute(vals, lanes)
        b.arrived.append((w, kind != "arrive", lanes))
        b.vc = np.maximum(b.vc, cta.vc[w.idx])
        if kind == "arrive" and (lanes & ~w.m).any():
            w.bar_pass[i] = BarPass(lanes & ~w.m)       # parked groups leave their arrive without arriving again
        cta.release(w)
        check_bars(cta)
        if kind == "arrive":
            return None
        bp = w.bar_pass.get(i)
        if bp is not None and (w.m & bp.lanes).any():
            return _leave(w, i, bp, put)
        w.wait = lambda: i not in w.bar_pass
        w.needs = list
        return BLOCKED
    return run


def _leave(w, i, bp, put):
    bp.lanes = bp.lanes & ~w.m
    if not bp.lanes.any():
        del w.bar_pass[i]
    if put is not None:     # no value: the instance was not a reduction (reported): undefined, 0 here
        put(w, np.full(LANES, bp.value if bp.value is not None else 0), None)
    return None


def _check_operands(cta, w, ins, i, n, kind):
    size = cta.nwarps * LANES
    if not 0 <= i <= 15:
        cta.finding(F.BarrierMismatch, w, ins, w.m, f"barrier id {i} outside 0..15")
    if n is None:
        if kind == "arrive":
            cta.finding(F.BarrierMismatch, w, ins, w.m, "barrier.arrive needs a thread count")
    elif n == 0 or n % LANES or n > size:
        cta.finding(F.BarrierMismatch, w, ins, w.m, f"barrier {i} with thread count {n}: it must be a nonzero "
                    f"multiple of the warp size (32), at most the CTA's {size} threads")


def _check_instance(cta, w, ins, b, i, n, red):
    if b.count != n:
        cta.finding(F.BarrierMismatch, w, ins, w.m, f"barrier {i} with thread count {n} while other warps use "
                    f"{b.count}")
    if b.red != red:
        cta.finding(F.BarrierMismatch, w, ins, w.m, f"barrier {i}: bar.red{'.' + red if red else ''} mixed with "
                    f"{'bar.red.' + b.red if b.red else 'bar.sync / bar.arrive'} on the same barrier")


def _park(cta, w, ins, b, i, vals, aligned):
    """A barrier reached by a thread group of the warp.  Returns (lanes, reduction values) of the warp's arrival
    once every non-exited thread of the warp is there; else parks the group (it runs its barrier instruction again
    to leave once the barrier completes) and returns None.  The other threads may still exit (nvcc's
    ``if (t >= n) return;`` before ``__syncthreads()``); for .aligned, threads of the warp arriving at another
    instruction are a ``BarrierMismatch``."""
    parked = b.parked.setdefault(w.idx, [])
    lanes, v = w.m.copy(), vals
    for _pc, m, pv in parked:
        lanes |= m
        if v is not None:
            v = v | pv
    if not (w.live & ~lanes).any():
        if aligned and any(pc != w.pc for pc, _m, _v in parked):
            cta.finding(F.BarrierMismatch, w, ins, w.m, f"barrier {i} (.aligned) reached by the warp's threads at "
                        f"different instructions (divergent)")
        w.groups.extend([pc, m] for pc, m, _ in parked)
        del b.parked[w.idx]
        return lanes, v
    rest = w.mask & ~w.m
    if not rest.any() and not w.groups:
        cta.finding(F.BarrierMismatch, w, ins, w.m, f"barrier {i}: the warp's other threads wait at another "
                    "barrier")
        del b.parked[w.idx]
        return w.live.copy(), v
    parked.append((w.pc, w.m.copy(), vals))
    w.mask, w.mask_all = rest, False
    return None


def unpark_on_exit(cta, w):
    """Threads of w exited: a thread group parked at a non-aligned barrier whose warp's other non-exited threads
    are now all parked runs its barrier instruction again, as the warp's arrival."""
    for b in cta.bars.values():
        parked = b.parked.get(w.idx)
        if not parked:
            continue
        lanes = np.zeros(LANES, np.bool_)
        for _pc, m, _v in parked:
            lanes |= m
        if not (w.live & ~lanes).any():
            w.groups.extend([pc, m & w.live] for pc, m, _ in parked)
            del b.parked[w.idx]


def check_bars(cta):
    """Complete every barrier whose participants all arrived: a counted one at count / 32 warps, one without a
    count when every warp with a non-exited thread arrived."""
    live = sum(1 for w in cta.warps if not w.done)
    for i in list(cta.bars):
        b = cta.bars[i]
        need = max(1, -(-b.count // LANES)) if b.count is not None else live
        if len(b.arrived) >= need:
            del cta.bars[i]
            if b.parked:        # thread groups of warps that have not arrived wait for the next instance
                cta.bars[i] = NamedBarrier(b.count, np.zeros_like(b.vc), red=b.red, parked=b.parked)
            value = b.result()
            for w, sync, lanes in b.arrived:
                if sync:
                    cta.vc[w.idx] = np.maximum(cta.vc[w.idx], b.vc)
                    w.bar_pass[i] = BarPass(lanes, value)


def compile_warp_sync(ins, cc):
    """bar.warp.sync membermask: the executing thread is in the mask and every non-exited thread it names executes
    it.  A warp executes as a unit here, so it orders nothing further."""
    member = cc.read(ins.operands[0], "b32", ins)
    launch = cc.launch

    def run(w):
        check_members(launch.cta, w, ins, member(w))
    return run


def member_bits(mask):
    return ((mask.astype(np.uint64) >> LANE_IDS.astype(np.uint64)) & np.uint64(1)).astype(np.bool_)


def check_members(cta, w, ins, mask):
    """PTX ISA (shfl.sync, vote.sync, elect.sync, bar.warp.sync): undefined if the executing thread is not in
    membermask; the instruction waits for every non-exited thread of membermask to execute it.  Returns the
    member lanes."""
    act = np.nonzero(w.m)[0]
    if act.size and (mask[act] != mask[act[0]]).any():
        cta.finding(F.BarrierMismatch, w, ins, w.m, f"{ins.opcode} with different membermasks in one warp")
    bits = member_bits(mask[act[0]] if act.size else mask[0])
    out = w.m & ~bits
    if out.any():
        cta.finding(F.BarrierMismatch, w, ins, out, f"{ins.opcode} executed by lanes outside its membermask")
    missing = bits & w.live & ~w.m
    if missing.any():
        lanes = ",".join(str(k) for k in np.nonzero(missing)[0][:8])
        cta.finding(F.BarrierMismatch, w, ins, missing, f"{ins.opcode}: lanes {lanes} of its membermask do not "
                    "execute it")
    return bits
