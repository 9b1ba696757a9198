"""sm_90 bulk copies: cp.async.bulk (1-D) and cp.async.bulk.tensor (TMA tile loads) into shared memory,
completing on an mbarrier (``mbarrier::complete_tx::bytes``).

A copy is an async agent: at issue its destination is poisoned and marked
in flight (a write check against earlier accesses with the issuer's clock:
a ring slot refilled while a consumer may still read it is a race); it
completes as late as legal (when every warp is blocked and a waiter needs
that barrier's phase), reading global memory then, and performs complete-tx
of the bytes it wrote.  Its writes are async-proxy writes (wgmma may read
them without a proxy fence) and become visible to the waiters of the phase
it completes.  Its global reads are in flight on the race shadow
(``globalrace``) from issue to that complete-tx.

Tensor maps are the host's ``cuTensorMapEncodeTiled`` arguments
(``tensormap.TensorMap``, a ``("tensormap", map)`` parameter, checked when the
host encodes it): tile mode, no interleave.  The box (``tensormap.box_elements``)
lands densely in shared memory, innermost dimension first, each byte address
swizzled by the map's mode (``encodings.tma_swizzle``); elements outside the
tensor read as zero, or as NaN under ``FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA``,
and complete-tx counts the full box (as CUTLASS expects).  Stores, commit and
wait of bulk async-groups are ``bulkstore.py``; a ``.multicast::cluster`` copy
is refused (clusters are not modelled).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import EmulationError
from . import findings as F
from .convert import PARAM_WINDOW
from .encodings import tma_swizzle
from .memops import address, check_shared_write
from .memory import PENDING
from .ptx import Instruction
from .state import AsyncOp
from .tensormap import DTYPES, box_elements, fill_bytes
from .values import LANES


@dataclass(eq=False, slots=True)
class BulkOp(AsyncOp):
    """A bulk / TMA copy into shared memory, completing with complete-tx on the mbarrier at ``bar``."""

    id: int
    warp: int
    dst: np.ndarray          # shared byte indices written, in source order
    view: np.ndarray         # global bytes
    src: np.ndarray          # byte offsets into view, -1 for out-of-bounds (zero fill)
    bar: int
    vc: np.ndarray
    clock: int
    line: int
    ins: Instruction
    fill: np.ndarray | None = None   # the bytes out-of-bounds source positions read as (None: zeros)
    done: bool = False

    def perform(self, cta):
        sm = cta.shared
        fill = 0 if self.fill is None else self.fill
        data = np.where(self.src >= 0, self.view[np.maximum(self.src, 0)] if self.view.size else 0, fill)
        cta.launch.gshadow.end(self.id, self.warp, self.clock)   # the complete-tx orders it for the waiters
        mine = sm.owner[self.dst] == self.id
        d = self.dst[mine]
        sm.data[d] = data[mine].astype(np.uint8)
        sm.poison[d] = False
        sm.wr_clk[d] = self.clock
        sm.owner[d] = 0
        self.done = True
        mb = cta.mbars.get(self.bar)
        if mb is None or not mb.valid:
            cta.finding(F.MbarrierMisuse, cta.warps[self.warp], self.ins, None,
                        f"a bulk copy completes on shared offset {self.bar}, which holds no valid mbarrier")
            return
        mb.release(self.vc)
        mb.complete_tx(cta, cta.warps[self.warp], self.ins, self.dst.size)

    def completes_on(self, bar):
        return bar == self.bar


def _tile_bytes(tm, coords):
    """Source byte offsets into the buffer (-1 outside the tensor) and destination byte offsets (before the
    swizzle) of a tile-mode box at ``coords`` (innermost first), as ``tensormap.box_elements`` places it."""
    if tm.interleave != 0:
        raise EmulationError(f"tensor map {tm.dtype} with interleave {tm.interleave}: only tile mode without "
                             "interleave is modelled")
    esz = DTYPES[tm.dtype][0]
    off, inside = box_elements(tm, coords)
    src = ((off + tm.buffer[1])[:, None] + np.arange(esz)).reshape(-1)
    src = np.where(np.repeat(inside, esz), src, -1)
    dst = np.arange(off.size * esz, dtype=np.int64)
    return src, dst


def compile_bulk(ins, cc):
    p = ins.parts
    if p[:3] != ["cp", "async", "bulk"]:
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
    if "multicast::cluster" in p:
        raise EmulationError(f"{ins.opcode} at PTX line {ins.line}: a multicast copy writes the shared memory of "
                             "other CTAs of a cluster, and the emulator does not model clusters (it runs one CTA "
                             "at a time); emulate a variant without .multicast::cluster")
    if p[3] in ("commit_group", "wait_group") or "bulk_group" in p:
        from .bulkstore import compile_bulk_group
        return compile_bulk_group(ins, cc)
    tensor = p[3] == "tensor"
    if "mbarrier::complete_tx::bytes" not in p or "global" not in p:
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
    ops = ins.operands
    dst = address(cc, ops[0], ins)
    bar = address(cc, ops[-1], ins)
    launch = cc.launch
    if tensor:
        tmap = cc.read(ops[1].items[0], "u64", ins)
        coords = [cc.read(o, "s32", ins) for o in ops[1].items[1].items]
    else:
        src = address(cc, ops[1], ins)
        size = cc.read(ops[2], "u32", ins)

    def run(w):
        cta = launch.cta
        for lane in np.nonzero(w.m)[0].tolist():
            d0, b0 = int(dst(w)[lane]), int(bar(w)[lane])
            if tensor:
                tm = launch.tensormaps.get(int(tmap(w)[lane]) - PARAM_WINDOW)
                if tm is None:
                    raise EmulationError(f"cp.async.bulk.tensor with an address that is no tensor-map parameter "
                                         f"at PTX line {ins.line}")
                k, view = launch.buffer_of(tm.buffer[0])
                s, doff = _tile_bytes(tm, [int(c(w)[lane]) for c in coords])
                if (s >= view.size).any():
                    cta.finding(F.BadAccess, w, ins, w.m, "a TMA load reads past the end of its tensor map's buffer "
                                "(the map's dims and strides describe more than the array holds)")
                    s = np.where(s < view.size, s, -1)
                dbytes = tma_swizzle(tm.swizzle)(d0 + doff)
                fill = fill_bytes(tm, s.size // DTYPES[tm.dtype][0])
            else:
                n = int(size(w)[lane])
                sa = int(src(w)[lane])
                if n % 16 or d0 % 16 or sa % 16:
                    cta.finding(F.BadAccess, w, ins, w.m, f"cp.async.bulk of {n} bytes: size and addresses must be "
                                "multiples of 16", address=d0)
                    continue
                k, view, off = launch.gmem.locate(np.array([sa], np.uint64), n)
                if view is None:
                    cta.finding(F.BadAccess, w, ins, w.m, "cp.async.bulk source outside every buffer", address=off)
                    continue
                s = int(off[0]) + np.arange(n)
                dbytes = d0 + np.arange(n)
                fill = None
            _issue(cta, w, ins, np.asarray(dbytes, np.int64), view, np.asarray(s, np.int64), b0, fill,
                   (k, lane, "TMA load" if tensor else "bulk copy"))
    return run


def _issue(cta, w, ins, dbytes, view, src, bar, fill, source):
    """Issue a copy of global bytes ``src`` of ``view`` (-1: fill) to shared ``dbytes``; ``source``: (buffer
    index, issuing lane, what) for the global race shadow."""
    sm = cta.shared
    if (dbytes < 0).any() or (dbytes >= sm.size).any():
        cta.finding(F.BadAccess, w, ins, w.m, "bulk copy destination outside shared memory", address=int(dbytes[0]))
        return
    lanes = np.zeros(LANES, np.bool_)
    lanes[np.nonzero(w.m)[0][:1]] = True
    check_shared_write(cta, w, ins, np.nonzero(lanes)[0], dbytes, 1)
    op = BulkOp(cta.next_op, w.idx, dbytes, view, src, bar, cta.vc[w.idx].copy(), int(cta.vc[w.idx, w.idx]),
                ins.line, ins, fill)
    k, lane, what = source
    g = src[src >= 0]
    cta.launch.gshadow.begin(cta, w, ins, op.id, k, np.array([lane]), g[None, :], False, what,
                             "the mbarrier complete-tx that completes it")
    cta.next_op += 1
    cta.ops[op.id] = op
    sm.owner[dbytes] = op.id
    sm.poison[dbytes] = True
    sm.wr_generic[dbytes] = False
    sm.wr_seq[dbytes] = cta.instructions
    sm.note_write(dbytes, w.idx, PENDING, ins.line)
    cta.release(w)


HANDLERS = {}
