"""Happens-before on global memory: data races between warps of a CTA and between CTAs of one launch.

One shadow per launch (launches on a stream are ordered, so each starts clean), one lazily made
``_Shadow`` per global buffer the launch touches.  Per byte it keeps the last plain write (CTA, warp,
clock, PTX line) and which CTA read it since (none, one, or several), with each warp's clock and line
of its last read.  The rule:

- two accesses by warps of the same CTA conflict (same byte, one a write) unless the earlier one
  happens before the later one by the CTA's vector clocks (bar.sync, mbarrier, ... as for shared
  memory); accesses of one warp are ordered;
- two conflicting accesses by different CTAs of a launch are never ordered (nothing in these kernels
  synchronises CTAs), so both are reported;
- reads of bytes nothing wrote in the launch (read-only inputs), and writes of distinct bytes, never
  conflict; atomics (atom / red) are not checked against each other, but they count as writes for the
  plain accesses of others.
"""
from __future__ import annotations

import numpy as np

from . import findings as F

NONE, MANY = -1, -2


class _Shadow:
    def __init__(self, n: int, nwarps: int):
        self.wr_cta = np.full(n, NONE, np.int32)
        self.wr_warp = np.zeros(n, np.int16)
        self.wr_clk = np.zeros(n, np.int64)
        self.wr_line = np.zeros(n, np.int32)
        self.rd_cta = np.full(n, NONE, np.int32)
        self.rd_clk = np.zeros((nwarps, n), np.int64)
        self.rd_line = np.zeros((nwarps, n), np.int32)


class GlobalShadow:
    """The global-memory race shadow of one launch (``grid``: its CTA extents, ``nwarps`` per CTA)."""

    def __init__(self, gmem, grid, nwarps: int):
        self.gmem = gmem
        self.grid = tuple(grid)
        self.nwarps = nwarps
        self.bufs: dict[int, _Shadow] = {}

    def serial(self, ctaid) -> int:
        gx, gy, _ = self.grid
        x, y, z = ctaid
        return x + gx * (y + gy * z)

    def ctaid(self, serial: int) -> tuple:
        gx, gy, _ = self.grid
        return (serial % gx, (serial // gx) % gy, serial // (gx * gy))

    def _shadow(self, k: int) -> _Shadow:
        s = self.bufs.get(k)
        if s is None:
            s = self.bufs[k] = _Shadow(self.gmem.bufs[k][1].size, self.nwarps)
        return s

    def access(self, cta, w, ins, act, k, idx, nbytes, write, atomic=False):
        """Check and record an access of warp ``w`` (lanes ``act``) to bytes ``idx`` ([lanes, nbytes]) of
        global buffer ``k``."""
        s = self._shadow(k)
        flat = idx.reshape(-1)
        c = self.serial(cta.ctaid)
        vcw = cta.vc[w.idx]
        if atomic:
            if write:
                self._note_write(s, flat, c, w, vcw, ins, s.rd_cta[flat])
            return
        wc = s.wr_cta[flat]
        if (wc != NONE).any():
            ww = s.wr_warp[flat]
            bad = (wc != NONE) & ((wc != c) | ((ww != w.idx) & (s.wr_clk[flat] > vcw[ww])))
            if bad.any():
                self._report(cta, w, ins, act, k, flat, bad, nbytes, write, "write")
        rc = s.rd_cta[flat]
        if not write:
            if not (rc == c).all():
                s.rd_cta[flat] = np.where((rc == NONE) | (rc == c), c, MANY)
            s.rd_clk[w.idx, flat] = vcw[w.idx]
            s.rd_line[w.idx, flat] = ins.line
            return
        read = rc != NONE
        if read.any():
            foreign = read & (rc != c)
            if foreign.any():
                self._report(cta, w, ins, act, k, flat, foreign, nbytes, True, "read")
            else:
                late = s.rd_clk[:, flat] > vcw[:, None]
                late[w.idx] = False
                if late.any():
                    u, pos = np.argwhere(late)[0]
                    bad = np.zeros(flat.size, np.bool_)
                    bad[pos] = True
                    self._report(cta, w, ins, act, k, flat, bad, nbytes, True, "read", reader=int(u))
        self._note_write(s, flat, c, w, vcw, ins, rc)

    @staticmethod
    def _note_write(s, flat, c, w, vcw, ins, rc):
        s.wr_cta[flat] = c
        s.wr_warp[flat] = w.idx
        s.wr_clk[flat] = vcw[w.idx]
        s.wr_line[flat] = ins.line
        if (rc != NONE).any():                  # forget the reads of the old value (none for most stores)
            s.rd_cta[flat] = NONE
            s.rd_clk[:, flat] = 0

    def _report(self, cta, w, ins, act, k, flat, bad, nbytes, write, other_kind, reader=None):
        s = self.bufs[k]
        pos = int(np.argmax(bad))
        b = int(flat[pos])
        lanes = np.zeros(32, np.bool_)
        lanes[act[bad.reshape(-1, nbytes).any(1)]] = True
        base, _, name = self.gmem.bufs[k]
        if other_kind == "write":
            oc, ow, ol = int(s.wr_cta[b]), int(s.wr_warp[b]), int(s.wr_line[b])
        else:
            oc = int(s.rd_cta[b])
            ow = reader if reader is not None else -1
            ol = int(s.rd_line[ow, b]) if ow >= 0 else 0
        same = oc == self.serial(cta.ctaid)
        who = (f"warp {ow}" if same else
               f"CTA {self.ctaid(oc)} warp {ow}" if oc >= 0 and ow >= 0 else
               f"CTA {self.ctaid(oc)}" if oc >= 0 else "other CTAs")
        at = f" at PTX line {ol}" if ol else ""
        why = "no happens-before" if same else "CTAs of a launch are not ordered"
        cta.finding(F.DataRace, w, ins, lanes,
                    f"{'write' if write else 'read'} of global byte {b} of {name} races with a {other_kind} by "
                    f"{who}{at} ({why})", other=(ow, ol, cta.launch.cuda_line_of.get(ol), other_kind),
                    address=base + b)
