"""sm_90 bulk stores, shared memory to global, and their bulk async-groups:

* ``cp.async.bulk.tensor.Nd.global.shared::cta{.tile}.bulk_group [map, {c0, ...}], [src]`` (TMA store);
* ``cp.async.bulk.global.shared::cta.bulk_group [dst], [src], size`` (1-D);
* ``cp.async.bulk.commit_group`` and ``cp.async.bulk.wait_group{.read} N``.

PTX ISA semantics: the copy is asynchronous; ``commit_group`` closes the issuing thread's uncommitted bulk
copies into a bulk async-group; ``wait_group N`` returns once at most the N newest groups are pending, and
``wait_group.read N`` once their *sources* have been read.  Until then the source must not be written
(reading it is fine).  The source is read through the async proxy, so a generic store into it needs a
``fence.proxy.async`` between the store and the copy.

Emulation: at issue, the source bytes are read-checked against the issuer's clock (a write by another
warp not ordered before the copy is a ``DataRace``; a generic write without the writer's proxy fence
happening before the issue is ``ProxyFenceMissing``) and enter a read window: any write into it before
the covering wait is ``InFlightOverwrite``.  The copy completes (reads the source, writes global memory)
as late as legal: at the covering ``wait_group`` (``.read`` included), at a random moment under
``Policy(completion="random")``, or when the CTA ends.  The window closes only at the covering wait.
Its global writes are in flight on the race shadow (``globalrace``) from issue to the covering
``wait_group`` without ``.read`` (or the CTA's end): a ``.read`` wait leaves its groups listed for that.
A tensor store takes its box as a load does (``tensormap.box_elements``, swizzled) and skips elements
outside the tensor; poisoned source bytes reaching global memory are a ``PoisonUse``.  Groups are kept
per warp (the lanes of a warp commit and wait together in the code nvcc emits).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import EmulationError
from . import findings as F
from .convert import PARAM_WINDOW
from .encodings import tma_swizzle
from .memops import address
from .ptx import Instruction
from .state import AsyncOp
from .tensormap import DTYPES, box_elements


@dataclass(eq=False, slots=True)
class StoreOp(AsyncOp):
    """A bulk / TMA store of shared bytes to global memory, in a bulk async-group of its warp."""

    id: int
    warp: int
    src: np.ndarray          # shared byte indices read, in copy order
    view: np.ndarray         # global bytes
    dst: np.ndarray          # byte offsets into view, -1: outside the tensor (skipped)
    line: int
    ins: Instruction
    done: bool = False
    window: bool = True      # its source is still held in a read window

    def perform(self, cta):
        sm = cta.shared
        keep = self.dst >= 0
        if (sm.poison[self.src] & keep).any():
            cta.finding(F.PoisonUse, cta.warps[self.warp], self.ins, None,
                        "a bulk store writes poisoned shared bytes (never written, or written by a copy not yet "
                        "complete) to global memory")
        self.view[self.dst[keep]] = sm.data[self.src[keep]]
        self.done = True

    def close(self, cta):
        """Close the read window (a covering wait_group)."""
        if self.window:
            np.add.at(cta.shared.async_readers, self.src, -1)
            self.window = False


def compile_bulk_group(ins, cc):
    p = ins.parts
    launch = cc.launch
    if p[3] == "commit_group":
        def commit(w):
            w.bulk_groups.append(list(w.bulk_uncommitted))
            w.bulk_uncommitted.clear()
        return commit
    if p[3] == "wait_group":
        if ins.operands[0].kind != "imm" or p[4:] not in ([], ["read"]):
            raise EmulationError(f"unsupported form {ins.opcode} (an immediate group count) at PTX line {ins.line}")
        n = ins.operands[0].value

        read = p[4:] == ["read"]

        def wait(w):
            groups = w.bulk_groups
            k = max(len(groups) - n, 0)
            cta = launch.cta
            for g in groups[:k]:
                for op in g:
                    cta.complete(op)
                    op.close(cta)
                    if not read:
                        launch.gshadow.end(op.id, w.idx, cta.vc[w.idx, w.idx])
            if not read:            # .read leaves the groups: their global writes may still be in flight
                del groups[:k]
        return wait
    if "global" not in p or "shared::cta" not in p or p.index("global") > p.index("shared::cta"):
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
    return _compile_store(ins, cc, p[3] == "tensor")


def _compile_store(ins, cc, tensor):
    ops = ins.operands
    launch = cc.launch
    if tensor:
        tmap = cc.read(ops[0].items[0], "u64", ins)
        coords = [cc.read(o, "s32", ins) for o in ops[0].items[1].items]
    else:
        dst = address(cc, ops[0], ins)
        size = cc.read(ops[2], "u32", ins)
    src = address(cc, ops[1], ins)

    def run(w):
        cta = launch.cta
        for lane in np.nonzero(w.m)[0].tolist():
            s0 = int(src(w)[lane])
            if tensor:
                tm = launch.tensormaps.get(int(tmap(w)[lane]) - PARAM_WINDOW)
                if tm is None:
                    raise EmulationError(f"cp.async.bulk.tensor with an address that is no tensor-map parameter "
                                         f"at PTX line {ins.line}")
                if tm.interleave != 0:
                    raise EmulationError(f"tensor store with interleave {tm.interleave} at PTX line {ins.line}: "
                                         "only tile mode without interleave is modelled")
                k, view = launch.buffer_of(tm.buffer[0])
                esz = DTYPES[tm.dtype][0]
                off, inside = box_elements(tm, [int(c(w)[lane]) for c in coords])
                g = ((off + tm.buffer[1])[:, None] + np.arange(esz)).reshape(-1)
                g = np.where(np.repeat(inside, esz), g, -1)
                if (g >= view.size).any():
                    cta.finding(F.BadAccess, w, ins, w.m, "a TMA store writes past the end of its tensor map's "
                                "buffer (the map's dims and strides describe more than the array holds)")
                    g = np.where(g < view.size, g, -1)
                sbytes = tma_swizzle(tm.swizzle)(s0 + np.arange(g.size, dtype=np.int64))
            else:
                n, d0 = int(size(w)[lane]), int(dst(w)[lane])
                if n % 16 or d0 % 16 or s0 % 16:
                    cta.finding(F.BadAccess, w, ins, w.m, f"cp.async.bulk of {n} bytes: size and addresses must be "
                                "multiples of 16", address=s0)
                    continue
                k, view, goff = launch.gmem.locate(np.array([d0], np.uint64), n)
                if view is None:
                    cta.finding(F.BadAccess, w, ins, w.m, "cp.async.bulk destination outside every buffer",
                                address=goff)
                    continue
                g = int(goff[0]) + np.arange(n, dtype=np.int64)
                sbytes = s0 + np.arange(n, dtype=np.int64)
            _issue(cta, w, ins, np.asarray(sbytes, np.int64), view, g, (k, lane, "TMA store" if tensor else "bulk store"))
    return run


def _issue(cta, w, ins, sbytes, view, gbytes, target):
    """Issue a store of shared ``sbytes`` to global bytes ``gbytes`` of ``view`` (-1: skipped); ``target``:
    (buffer index, issuing lane, what) for the global race shadow."""
    sm = cta.shared
    if (sbytes < 0).any() or (sbytes >= sm.size).any():
        cta.finding(F.BadAccess, w, ins, w.m, "bulk store source outside shared memory", address=int(sbytes[0]))
        return
    vcw = cta.vc[w.idx]
    bad = sm.check_read(sbytes, w.idx, vcw)
    if bad.any():
        b = int(sbytes[bad][0])
        cta.finding(F.DataRace, w, ins, w.m, f"bulk store read of shared byte {b} races with a write by warp "
                    f"{sm.wr_warp[b]} at PTX line {sm.wr_line[b]}",
                    other=(int(sm.wr_warp[b]), int(sm.wr_line[b]), None, "write"), address=b)
    gen = sbytes[sm.wr_generic[sbytes]]
    if gen.size:
        unfenced = cta.unfenced(gen, vcw)
        if unfenced is not None:
            cta.finding(F.ProxyFenceMissing, w, ins, w.m, f"a bulk store (async proxy) reads shared byte {unfenced} "
                        f"written by an ordinary store (warp {sm.wr_warp[unfenced]}, PTX line "
                        f"{sm.wr_line[unfenced]}) with no fence.proxy.async between them", address=int(unfenced))
    sm.note_read(sbytes, w.idx, vcw[w.idx], ins.line)
    np.add.at(sm.async_readers, sbytes, 1)
    op = StoreOp(cta.next_op, w.idx, sbytes, view, gbytes, ins.line, ins)
    k, lane, what = target
    g = gbytes[gbytes >= 0]
    cta.launch.gshadow.begin(cta, w, ins, op.id, k, np.array([lane]), g[None, :], True, what,
                             "the issuer's cp.async.bulk.wait_group (not .read) covering it")
    cta.next_op += 1
    cta.ops[op.id] = op
    w.bulk_uncommitted.append(op)
