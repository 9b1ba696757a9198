"""Happens-before on global memory: data races between warps of a CTA and between CTAs of one launch.

One shadow per launch (launches on a stream are ordered, so each starts clean), made in 16 KiB chunks
of the global buffers as the launch touches them (a few CTAs of a large problem cost little).  Per byte it keeps the last plain write (CTA, warp,
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
SHIFT = 14                  # the shadow is made in chunks of 16 KiB of a buffer, when first touched


class _Chunk:
    def __init__(self, nwarps: int):
        n = 1 << SHIFT
        self.wr_cta = np.full(n, NONE, np.int32)
        self.wr_warp = np.zeros(n, np.int16)
        self.wr_clk = np.zeros(n, np.int64)
        self.wr_line = np.zeros(n, np.int32)
        self.rd_cta = np.full(n, NONE, np.int32)
        self.rd_clk = np.zeros((nwarps, n), np.int32)
        self.rd_line = np.zeros((nwarps, n), np.int32)


class GlobalShadow:
    """The global-memory race shadow of one launch (``grid``: its CTA extents, ``nwarps`` per CTA)."""

    def __init__(self, gmem, grid, nwarps: int):
        self.gmem = gmem
        self.grid = tuple(grid)
        self.nwarps = nwarps
        self.chunks: dict[tuple[int, int], _Chunk] = {}

    def serial(self, ctaid) -> int:
        gx, gy, _ = self.grid
        x, y, z = ctaid
        return x + gx * (y + gy * z)

    def ctaid(self, serial: int) -> tuple:
        gx, gy, _ = self.grid
        return (serial % gx, (serial // gx) % gy, serial // (gx * gy))

    def access(self, cta, w, ins, act, k, idx, nbytes, write, atomic=False):
        """Check and record an access of warp ``w`` (lanes ``act``) to bytes ``idx`` ([lanes, nbytes]) of
        global buffer ``k``."""
        flat = idx.reshape(-1)
        lane = np.repeat(act, nbytes)
        ch = flat >> SHIFT
        j0 = int(ch[0])
        parts = [(j0, slice(None))] if (ch == j0).all() else [(int(j), ch == j) for j in np.unique(ch)]
        found = []                      # races, one report for the instruction with every racing lane
        for j, sel in parts:
            key = (k, j)
            s = self.chunks.get(key)
            if s is None:
                s = self.chunks[key] = _Chunk(self.nwarps)
            self._access(cta, w, ins, key, s, flat[sel] - (j << SHIFT), lane[sel], write, atomic, found)
        if found:
            lanes = np.zeros(32, np.bool_)
            for f in found:
                lanes[f[1]] = True
            self._report(cta, w, ins, found[0], lanes)

    def _access(self, cta, w, ins, key, s, loc, lane, write, atomic, found):
        c = self.serial(cta.ctaid)
        vcw = cta.vc[w.idx]
        rc = s.rd_cta[loc]
        if atomic:
            if write:
                self._note_write(s, loc, c, w, vcw, ins, rc)
            return
        wc = s.wr_cta[loc]
        if (wc != NONE).any():
            ww = s.wr_warp[loc]
            bad = (wc != NONE) & ((wc != c) | ((ww != w.idx) & (s.wr_clk[loc] > vcw[ww])))
            if bad.any():
                found.append(_other(s, key, loc, lane, bad, write, "write", None))
        if not write:
            if not (rc == c).all():
                s.rd_cta[loc] = np.where((rc == NONE) | (rc == c), c, MANY)
            s.rd_clk[w.idx, loc] = vcw[w.idx]
            s.rd_line[w.idx, loc] = ins.line
            return
        read = rc != NONE
        if read.any():
            foreign = read & (rc != c)
            if foreign.any():
                found.append(_other(s, key, loc, lane, foreign, True, "read", None))
            else:
                late = s.rd_clk[:, loc] > vcw[:, None]
                late[w.idx] = False
                if late.any():
                    u, pos = np.argwhere(late)[0]
                    bad = np.zeros(loc.size, np.bool_)
                    bad[pos] = True
                    found.append(_other(s, key, loc, lane, bad, True, "read", int(u)))
        self._note_write(s, loc, c, w, vcw, ins, rc)

    @staticmethod
    def _note_write(s, loc, c, w, vcw, ins, rc):
        s.wr_cta[loc] = c
        s.wr_warp[loc] = w.idx
        s.wr_clk[loc] = vcw[w.idx]
        s.wr_line[loc] = ins.line
        if (rc != NONE).any():                  # forget the reads of the old value (none for most stores)
            s.rd_cta[loc] = NONE
            s.rd_clk[:, loc] = 0

    def _report(self, cta, w, ins, race, lanes):
        k, _, at_byte, write, other_kind, oc, ow, ol = race
        base, _, name = self.gmem.bufs[k]
        same = oc == self.serial(cta.ctaid)
        who = (f"warp {ow}" if same else
               f"CTA {self.ctaid(oc)} warp {ow}" if oc >= 0 and ow >= 0 else
               f"CTA {self.ctaid(oc)}" if oc >= 0 else "other CTAs")
        at = f" at PTX line {ol}" if ol else ""
        why = "no happens-before" if same else "CTAs of a launch are not ordered"
        cta.finding(F.DataRace, w, ins, lanes,
                    f"{'write' if write else 'read'} of global byte {at_byte} of {name} races with a {other_kind} by "
                    f"{who}{at} ({why})", other=(ow, ol, cta.launch.cuda_line_of.get(ol), other_kind),
                    address=base + at_byte)


def _other(s, key, loc, lane, bad, write, other_kind, reader):
    """A race found in chunk ``s``, with the earlier access read out now (before this one overwrites it):
    (buffer, racing lanes, byte, write?, 'write' / 'read', its CTA serial, warp, PTX line)."""
    b = int(loc[int(np.argmax(bad))])
    if other_kind == "write":
        oc, ow, ol = int(s.wr_cta[b]), int(s.wr_warp[b]), int(s.wr_line[b])
    else:
        oc = int(s.rd_cta[b])
        ow = reader if reader is not None else -1
        ol = int(s.rd_line[ow, b]) if ow >= 0 else 0
    return key[0], lane[bad], (key[1] << SHIFT) + b, write, other_kind, oc, ow, ol
