"""cp.async and its groups, and cp.async.mbarrier.arrive.

An issued copy is an agent (``CopyOp``, a ``state.AsyncOp``): its destination
bytes are poisoned and marked pending (``owner``, clock ``PENDING``) at issue,
after a write check against earlier accesses with the issuer's clock at issue
(a ring slot refilled while another warp may still read it is a race).  The
scheduler completes it later (``CTA.complete``), reading the source as it is
then.  ``wait_group N`` blocks until every group but the newest N is complete,
then marks their bytes observed by the issuing warp.  Groups are kept per warp
(the lanes of a warp commit and wait together in the code nvcc emits).  The
global source is read in flight (``globalrace``) from issue to that wait, or
to the firing of a ``cp.async.mbarrier.arrive`` the warp issued after it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import EmulationError
from . import findings as F
from . import hintops
from .memops import address, check_shared_write, lane_mask
from .memory import PENDING, lane_bytes
from .state import AsyncArrive, AsyncOp
from .values import BLOCKED


@dataclass(eq=False, slots=True)
class CopyOp(AsyncOp):
    """One cp.async of a warp's active lanes: ``size`` bytes per lane, of which the first ``src_size`` come
    from the source (the rest are zeros)."""

    id: int
    warp: int
    lanes: np.ndarray
    idx: np.ndarray         # [active lanes, size] shared byte indices
    view: np.ndarray | None  # global source bytes (None: no lane reads)
    src_off: np.ndarray
    src_size: np.ndarray
    size: int
    line: int
    done: bool = False
    observed: bool = False  # a wait_group or a cp.async.mbarrier.arrive made its writes visible

    def perform(self, cta):
        sm = cta.shared
        data = np.zeros((self.idx.shape[0], self.size), np.uint8)
        for k in range(self.idx.shape[0]):
            if self.src_size[k]:
                data[k, :self.src_size[k]] = self.view[self.src_off[k]:self.src_off[k] + self.src_size[k]]
        flat = self.idx.reshape(-1)
        mine = sm.owner[flat] == self.id
        sm.data[flat[mine]] = data.reshape(-1)[mine]
        sm.poison[flat[mine]] = False
        self.done = True

    def observe(self, cta, clock):
        """Its bytes (those no later write took over) count as written at ``clock``."""
        sm = cta.shared
        flat = self.idx.reshape(-1)
        mine = flat[sm.owner[flat] == self.id]
        sm.wr_clk[mine] = clock
        sm.owner[mine] = 0
        self.observed = True


def _operands(ins, cc):
    """(src-size reader or None, ignore-src reader or None) of ``cp.async ... [dst], [src], cp-size{, src-size |
    , ignore-src}{, cache-policy}`` (PTX ISA, cp.async); the parser took the cache policy out."""
    extra = ins.operands[3:]
    if len(extra) > 1:
        raise EmulationError(f"cp.async with {len(ins.operands)} operands at PTX line {ins.line}")
    if not extra:
        return None, None
    o = extra[0]
    if o.kind == "reg" and cc.ptypes.get(o.name) == "pred":
        return None, cc.read(o, "pred", ins)
    return cc.read(o, "u32", ins), None


def compile_cp_async(ins, cc):
    """PTX ISA, cp.async: ``cp-size`` bytes are written to [dst]; the first ``src-size`` come from [src] and
    the rest are zeros; with ``src-size`` 0 or ``ignore-src`` true no source byte is read, so only the bytes
    read must lie in a global buffer.  Destination bounds, alignment of both addresses and the group
    tracking apply to every copy.  A ``src-size`` above ``cp-size`` is undefined behaviour: a ``BadAccess``
    finding."""
    p = ins.parts[1:]          # ['async', 'ca' | 'cg', 'shared', 'global']
    if len(p) != 4 or p[1] not in ("ca", "cg") or "shared" not in p[2] or "global" not in p[3]:
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
    ops = ins.operands
    if ops[2].kind != "imm" or ops[2].value not in (4, 8, 16):
        raise EmulationError(f"cp.async size must be an immediate 4, 8 or 16 at PTX line {ins.line}")
    size = ops[2].value
    if p[1] == "cg" and size != 16:
        raise EmulationError(f"cp.async.cg needs size 16 at PTX line {ins.line}")
    dst, src = address(cc, ops[0], ins), address(cc, ops[1], ins)
    src_size, ignore = _operands(ins, cc)
    launch = cc.launch

    def run(w):
        cta = launch.cta
        act = np.nonzero(w.m)[0]
        d = dst(w)[act].astype(np.int64)
        s = src(w)[act]
        ss = np.full(act.size, size, np.int64) if src_size is None else src_size(w)[act].astype(np.int64)
        if ignore is not None:
            ss = np.where(ignore(w)[act], 0, ss)
        if not _checked(cta, w, ins, act, d, s, ss, size):
            return
        rd = ss > 0
        k, view, off = -1, None, np.zeros(act.size, np.int64)
        if rd.any():
            k, view, off = _source(cta, w, ins, launch.gmem, s, ss, rd)
            if view is None:
                return
            # the bytes read are in flight on the global shadow from issue to the wait (or the arrive)
            part = off[rd, None] + np.minimum(np.arange(size), ss[rd, None] - 1)
            launch.gshadow.begin(cta, w, ins, cta.next_op, k, act[rd], part, False, "cp.async",
                                 "the issuer's cp.async.wait_group covering it (or the "
                                 "firing of its cp.async.mbarrier.arrive)")
        _issue(cta, w, ins, act, d, view, off, ss, size)
    return run


def _checked(cta, w, ins, act, d, s, ss, size) -> bool:
    """Alignment, src-size and destination bounds; False (after a finding) when the copy cannot be issued."""
    mis = ((d % size) != 0) | ((s % np.uint64(size)) != 0)
    if mis.any():
        k = int(np.argmax(mis))
        cta.finding(F.BadAccess, w, ins, lane_mask(act[mis]), f"misaligned {size}-byte cp.async (shared "
                    f"{int(d[k])}, global {int(s[k]):#x})", address=int(s[k]) if s[k] % size else int(d[k]))
        return False
    big = ss > size
    if big.any():
        cta.finding(F.BadAccess, w, ins, lane_mask(act[big]), f"cp.async src-size {int(ss[np.argmax(big)])} "
                    f"above its cp-size {size} (undefined behaviour)", address=int(s[np.argmax(big)]))
        return False
    if (d < 0).any() or (d + size > cta.shared.size).any():
        cta.finding(F.BadAccess, w, ins, w.m, "cp.async destination outside shared memory", address=int(d[0]))
        return False
    return True


def _source(cta, w, ins, gmem, s, ss, rd):
    """(buffer, view, offsets) of the lanes ``rd`` that read: each reads ``ss`` bytes at ``s``; (.., None, ..)
    after a finding when one of those bytes is outside the buffer."""
    k, view, off_rd = gmem.locate(s[rd], 1)
    bad = view is not None and bool((off_rd + ss[rd] > view.size).any())
    if view is None or bad:
        where = off_rd if view is None else int(s[rd][np.argmax(off_rd + ss[rd] > view.size)])
        cta.finding(F.BadAccess, w, ins, w.m, "cp.async source outside every global buffer", address=where)
        return -1, None, None
    off = np.zeros(s.size, np.int64)
    off[rd] = off_rd
    return k, view, off


def _issue(cta, w, ins, act, d, view, off, ss, size):
    sm = cta.shared
    idx = lane_bytes(d, size)
    flat = idx.reshape(-1)
    check_shared_write(cta, w, ins, act, flat, size)
    op = CopyOp(cta.next_op, w.idx, w.m.copy(), idx, view, off, ss, size, ins.line)
    cta.next_op += 1
    cta.ops[op.id] = op
    sm.owner[flat] = op.id
    sm.poison[flat] = True
    sm.wr_generic[flat] = cta.policy.strict_cp_async_proxy
    sm.wr_seq[flat] = cta.instructions
    sm.note_write(flat, w.idx, PENDING, ins.line)
    w.uncommitted.append(op)


def compile_commit(ins, cc):
    def run(w):
        w.async_groups.append(w.uncommitted)
        w.uncommitted = []
    return run


def compile_wait(ins, cc):
    if ins.parts[2] == "wait_all":
        n = 0
    else:
        if ins.operands[0].kind != "imm":
            raise EmulationError(f"cp.async.wait_group needs an immediate at PTX line {ins.line}")
        n = ins.operands[0].value
    launch = cc.launch
    commit_first = ins.parts[2] == "wait_all"

    def covered(w):
        k = len(w.async_groups) - n
        return [op for g in w.async_groups[:max(k, 0)] for op in g]

    def run(w):
        if commit_first and w.uncommitted:
            w.async_groups.append(w.uncommitted)
            w.uncommitted = []
        ops = covered(w)
        if any(not op.done for op in ops):
            w.wait = lambda: any(not op.done for op in ops)
            w.needs = lambda: ops
            return BLOCKED
        cta = launch.cta
        clock = cta.vc[w.idx, w.idx]
        for op in ops:
            op.observe(cta, clock)
        for op in ops:
            launch.gshadow.end(op.id, w.idx, clock)
        k = len(w.async_groups) - n
        if k > 0:
            del w.async_groups[:k]
    return run


def compile_cp_async_arrive(ins, cc):
    """cp.async.mbarrier.arrive[.noinc].shared.b64 [bar]: an arrive once this warp's earlier copies complete."""
    noinc = "noinc" in ins.parts
    addr = address(cc, ins.operands[0], ins)
    launch = cc.launch
    from .sync import mbar_of

    def run(w):
        cta = launch.cta
        act = np.nonzero(w.m)[0]
        a = addr(w)[act]
        if (a != a[0]).any():
            raise EmulationError(f"cp.async.mbarrier.arrive with lanes on different barriers at PTX line {ins.line}")
        mb = mbar_of(cta, w, ins, int(a[0]))
        if mb is None:
            return
        if not noinc:
            mb.add_pending(int(act.size))
        # every earlier cp.async of the warp (PTX ISA, cp.async.mbarrier.arrive), also one that already completed
        # (Policy(completion='random')) but that no wait_group or arrive has made visible yet
        ops = tuple(op.id for op in cta.ops.values() if op.warp == w.idx and
                    (not op.done or (isinstance(op, CopyOp) and not op.observed)))
        reads = tuple(i for i, f in launch.gshadow.flights.items() if f.warp == w.idx and f.what == "cp.async")
        arr = AsyncArrive(w.idx, int(a[0]), int(act.size), ops, cta.vc[w.idx].copy(),
                          int(cta.vc[w.idx, w.idx]), ins, reads)
        cta.release(w)
        cta.async_arrives.append(arr)
        cta.fire_arrives()
    return run


def compile_cp(ins, cc):
    p = ins.parts
    if p[1] == "async":
        if len(p) > 2 and p[2] == "commit_group":
            return compile_commit(ins, cc)
        if len(p) > 2 and p[2] in ("wait_group", "wait_all"):
            return compile_wait(ins, cc)
        if len(p) > 2 and p[2] == "mbarrier":
            return compile_cp_async_arrive(ins, cc)
        if len(p) > 2 and p[2] == "bulk":
            from .bulk import compile_bulk
            return compile_bulk(ins, cc)
        return compile_cp_async(ins, cc)
    raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")


def pending_at_exit(cta, w, ins):
    """A warp exited: its copies still complete (the hardware finishes them); a copy the warp never waited
    for is reported only under ``Policy(strict_exit=True)``."""
    mine = [op for op in cta.ops.values() if op.warp == w.idx and not op.done]
    if mine and cta.policy.strict_exit:
        cta.finding(F.UnfinishedAsync, w, ins, None, f"exit with {len(mine)} cp.async copies never waited for")


#: cp, and the hint-only instructions of ``hintops`` (prefetch, createpolicy, nanosleep, griddepcontrol).
HANDLERS = {"cp": compile_cp, **hintops.HANDLERS}
