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

Async copies (``begin`` / ``end``): a cp.async or bulk / TMA load reads global memory, a bulk / TMA store
writes it, at some moment between its issue and the event that completes it for the program (the
issuer's cp.async.wait_group or the mbarrier complete-tx; the issuer's cp.async.bulk.wait_group, not
``.read``).  At issue the access is checked and recorded as the issuer's, with its clock then; its bytes
are then *in flight* until that event: any conflicting access meanwhile (by any warp, the issuer's
included, or by another async copy) is a race, since nothing can be ordered after an event that has not
happened.  At the event the access is recorded again with the clock of the warp that observes it, so
later accesses must be ordered after the event.  A CTA's copies all end when it ends.
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
        self.nfl = 0                    # async copies in flight on bytes of this chunk
        self.fl_rd = self.fl_wr = None  # per byte: how many of them read / write it (made on first use)


class _Flight:
    """An async copy's global access in flight: its CTA serial, warp, PTX line, what it is, whether it writes,
    what completes it, and its bytes per chunk key."""

    def __init__(self, cta, warp, line, what, write, until):
        self.cta, self.warp, self.line, self.what, self.write, self.until = cta, warp, line, what, write, until
        self.parts = []


class GlobalShadow:
    """The global-memory race shadow of one launch (``grid``: its CTA extents, ``nwarps`` per CTA)."""

    def __init__(self, gmem, grid, nwarps: int):
        self.gmem = gmem
        self.grid = tuple(grid)
        self.nwarps = nwarps
        self.chunks: dict[tuple[int, int], _Chunk] = {}
        self.flights: dict[int, _Flight] = {}      # async copy id -> its access in flight (this CTA's)

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
        found = []                      # races, one report for the instruction with every racing lane
        for key, s, loc, sel in self._parts(k, flat):
            self._access(cta, w, ins, key, s, loc, lane[sel], write, atomic, found)
        if found:
            lanes = np.zeros(32, np.bool_)
            for f in found:
                lanes[f[1]] = True
            self._report(cta, w, ins, found[0], lanes)

    def _parts(self, k, flat):
        """(chunk key, chunk, byte offsets in it, selection of ``flat``) for byte offsets ``flat`` of buffer k."""
        ch = flat >> SHIFT
        j0 = int(ch[0])
        parts = [(j0, slice(None))] if (ch == j0).all() else [(int(j), ch == j) for j in np.unique(ch)]
        for j, sel in parts:
            key = (k, j)
            s = self.chunks.get(key)
            if s is None:
                s = self.chunks[key] = _Chunk(self.nwarps)
            yield key, s, flat[sel] - (j << SHIFT), sel

    def _access(self, cta, w, ins, key, s, loc, lane, write, atomic, found):
        c = self.serial(cta.ctaid)
        vcw = cta.vc[w.idx]
        if s.nfl:
            fl = s.fl_wr[loc] | s.fl_rd[loc] if write else s.fl_wr[loc]
            if fl.any():
                found.append(self._in_flight(key, loc, lane, fl != 0, write))
        rc = s.rd_cta[loc]
        if atomic:
            if write:
                self._note_write(s, loc, c, w.idx, vcw[w.idx], ins.line, rc)
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
        self._note_write(s, loc, c, w.idx, vcw[w.idx], ins.line, rc)

    @staticmethod
    def _note_write(s, loc, c, warp, clock, line, rc):
        s.wr_cta[loc] = c
        s.wr_warp[loc] = warp
        s.wr_clk[loc] = clock
        s.wr_line[loc] = line
        if (rc != NONE).any():                  # forget the reads of the old value (none for most stores)
            s.rd_cta[loc] = NONE
            s.rd_clk[:, loc] = 0

    def _report(self, cta, w, ins, race, lanes):
        k, _, at_byte, write, other_kind, oc, ow, ol = race[:8]
        base, _, name = self.gmem.bufs[k]
        same = oc == self.serial(cta.ctaid)
        who = (f"warp {ow}" if same else
               f"CTA {self.ctaid(oc)} warp {ow}" if oc >= 0 and ow >= 0 else
               f"CTA {self.ctaid(oc)}" if oc >= 0 else "other CTAs")
        at = f" at PTX line {ol}" if ol else ""
        why = race[8] if len(race) > 8 else "no happens-before" if same else "CTAs of a launch are not ordered"
        what = race[9] if len(race) > 9 else other_kind
        cta.finding(F.DataRace, w, ins, lanes,
                    f"{'write' if write else 'read'} of global byte {at_byte} of {name} races with a {what} by "
                    f"{who}{at} ({why})", other=(ow, ol, cta.launch.cuda_line_of.get(ol), other_kind),
                    address=base + at_byte)

    # --- async copies in flight ---------------------------------------------------------------------
    def begin(self, cta, w, ins, op_id, k, act, idx, write, what, until):
        """Async copy ``op_id``, issued by lanes ``act`` of warp w, accesses bytes ``idx`` ([lanes, n] offsets) of
        buffer k at some moment until ``until`` happens: check and record it as an access at issue, then hold
        it in flight."""
        if idx.size == 0:
            return
        self.access(cta, w, ins, act, k, idx, idx.shape[1], write)
        gbytes = idx.reshape(-1)
        fl = _Flight(self.serial(cta.ctaid), w.idx, ins.line, what, write, until)
        for key, s, loc, _ in self._parts(k, gbytes):
            if s.fl_rd is None:
                s.fl_rd = np.zeros(1 << SHIFT, np.int32)
                s.fl_wr = np.zeros(1 << SHIFT, np.int32)
            (s.fl_wr if write else s.fl_rd)[loc] += 1         # once per byte, however many lanes read it
            s.nfl += 1
            fl.parts.append((key, s, loc))
        self.flights[op_id] = fl

    def end(self, op_id, warp, clock):
        """The event completing copy ``op_id`` for the program happened, observed by ``warp`` at ``clock``: the
        access leaves flight and is recorded as that warp's at that clock."""
        fl = self.flights.pop(op_id, None)
        if fl is None:
            return
        for _, s, loc in fl.parts:
            (s.fl_wr if fl.write else s.fl_rd)[loc] -= 1
            s.nfl -= 1
            if fl.write:
                self._note_write(s, loc, fl.cta, warp, clock, fl.line, s.rd_cta[loc])
            else:
                rc = s.rd_cta[loc]
                if not (rc == fl.cta).all():
                    s.rd_cta[loc] = np.where((rc == NONE) | (rc == fl.cta), fl.cta, MANY)
                later = s.rd_clk[warp, loc] <= clock      # keep a later read of that warp's own
                at = loc if later.all() else loc[later]
                s.rd_clk[warp, at] = clock
                s.rd_line[warp, at] = fl.line

    def end_cta(self, cta):
        """A CTA ended: every copy it issued is complete; each access is recorded with its issuer's last clock."""
        for op_id, fl in list(self.flights.items()):
            self.end(op_id, fl.warp, int(cta.vc[fl.warp, fl.warp]))

    def _in_flight(self, key, loc, lane, bad, write):
        """A race with an async copy in flight on ``loc`` of chunk ``key`` (the first racing byte's copy)."""
        b = int(loc[int(np.argmax(bad))])
        fl = next(f for f in self.flights.values() if (write or f.write) and
                  any(k == key and (lc == b).any() for k, _, lc in f.parts))
        why = f"the {fl.what} issued there may {'write' if fl.write else 'read'} it until {fl.until}"
        return (key[0], lane[bad], (key[1] << SHIFT) + b, write, "write" if fl.write else "read", fl.cta, fl.warp,
                fl.line, why, f"{fl.what} in flight")


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
