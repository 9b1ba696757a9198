"""Happens-before on global memory: data races between warps of a CTA and between CTAs of one launch.

One shadow per launch (launches on a stream are ordered, so each starts clean), made in 16 KiB chunks
of the global buffers as the launch touches them (a few CTAs of a large problem cost little).  Per byte it keeps the last plain write (CTA, warp,
clock, PTX line) and which CTA read it since (none, one, or several), with each warp's clock and line
of its last read.  The rule:

- two accesses by warps of the same CTA conflict (same byte, one a write) unless the earlier one
  happens before the later one by the CTA's vector clocks (bar.sync, mbarrier, ... as for shared
  memory); accesses of one warp are ordered;
- two conflicting accesses by different CTAs of a launch are ordered only by release / acquire
  patterns (``memmodel``: the accessing warp's knowledge covers the earlier access's CTA, warp and clock);
- two unordered conflicting accesses that are *morally strong* (PTX ISA, "Memory Consistency Model",
  "Morally strong operations": both strong, each one's scope includes the other's thread, and they
  overlap completely) do not race; strong ones overlapping in part are a ``MixedSizeRace``; a weak access
  and a strong one (an atomic included) race;
- unordered writes of the same value, to the same bytes, with the same width are a ``BenignRace``;
- reads of bytes nothing wrote in the launch (read-only inputs), and writes of distinct bytes, never
  conflict; a byte ``ld.global.nc`` reads must not be written in the launch (``ReadOnlyViolation``).

Strength (per byte: the last write's scope, 0 weak; the reads' weakest) is kept only for chunks a strong
access touched; each byte keeps the extent of its last write (width, position) for the same-width rules.

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
from . import memmodel as M

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
        self.ext = np.zeros(n, np.int16)    # the last write's extent: width * 16 + byte position in it
        self.kind = self.rkind = self.rext = None    # strength of the last write / the reads (made on first use)
        self.nc = None                  # read by ld.global.nc (made on first use)
        self.nfl = 0                    # async copies in flight on bytes of this chunk
        self.fl_rd = self.fl_wr = None  # per byte: how many of them read / write it (made on first use)


class _Flight:
    """An async copy's global access in flight: its CTA serial, warp, PTX line, what it is, whether it writes,
    what completes it, and its bytes per chunk key."""

    def __init__(self, cta, warp, line, what, write, until):
        self.cta, self.warp, self.line, self.what, self.write, self.until = cta, warp, line, what, write, until
        self.parts = []


class GlobalShadow:
    """The global-memory race shadow of one launch (``grid``: its CTA extents, ``nwarps`` per CTA).  Besides
    the shadow: the release clocks of strongly written locations (``sync``, by (buffer, element offset):
    (clocks, scope, CTA)), the Fence-SC clocks (``sc_clocks``, by CTA serial for .cta / .cluster, -1 for
    wider), and ``version``, which every global write advances."""

    def __init__(self, gmem, grid, nwarps: int):
        self.gmem = gmem
        self.grid = tuple(grid)
        self.nwarps = nwarps
        self.chunks: dict[tuple[int, int], _Chunk] = {}
        self._flights: dict[int, dict[int, _Flight]] = {}    # CTA serial -> async copy id -> access in flight
        self.owner = None                                   # the loader.Prepared whose ``cta`` runs now
        self.sync: dict[tuple[int, int], tuple] = {}
        self.sc_clocks: dict[int, dict] = {}
        self.version = 0

    @property
    def flights(self) -> dict[int, _Flight]:
        """The running CTA's async copies in flight (copy ids are per CTA)."""
        return self._flights.setdefault(self.owner.cta.serial, {})

    def serial(self, ctaid) -> int:
        gx, gy, _ = self.grid
        x, y, z = ctaid
        return x + gx * (y + gy * z)

    def ctaid(self, serial: int) -> tuple:
        gx, gy, _ = self.grid
        return (serial % gx, (serial // gx) % gy, serial // (gx * gy))

    def access(self, cta, w, ins, act, k, idx, nbytes, write, atomic=False, order=M.WEAK, elem=None, new=None):
        """Check and record an access of warp ``w`` (lanes ``act``) to bytes ``idx`` ([lanes, nbytes]) of
        global buffer ``k``: ``order`` its strength (an atomic is strong at .gpu scope at least), ``elem``
        its element width (vector accesses are one access per element), ``new`` the bytes a write stores."""
        if atomic and not order.strong:
            order = M.Order(M.SCOPE["gpu"])
        flat = idx.reshape(-1)
        lane = np.repeat(act, nbytes)
        ext = M.extent(nbytes, elem or nbytes, len(act))
        newf = new.reshape(-1) if new is not None else None
        if write:
            self.version += 1
        found = []                      # races, one report for the instruction with every racing lane
        for key, s, loc, sel in self._parts(k, flat):
            nb = newf[sel] if newf is not None else None
            self._access(cta, w, ins, key, s, loc, lane[sel], write, atomic, found, order, ext[sel], nb)
        if found:
            lanes = np.zeros(32, np.bool_)
            for f in found:
                lanes[f[1]] = True
            real = [f for f in found if f[10] is not M.BenignRace]
            self._report(cta, w, ins, (real or found)[0], lanes)

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

    def _access(self, cta, w, ins, key, s, loc, lane, write, atomic, found, o, ext, new):
        c = cta.serial
        vcw = cta.vc[w.idx]
        if s.nfl:
            fl = s.fl_wr[loc] | s.fl_rd[loc] if write else s.fl_wr[loc]
            if fl.any():
                found.append(self._in_flight(key, loc, lane, fl != 0, write))
        if atomic and not write:
            return                      # an atom's read half: its write half is checked
        if o.strong and s.kind is None:
            s.kind, s.rkind, s.rext = (np.zeros(1 << SHIFT, np.int8), np.zeros(1 << SHIFT, np.int8),
                                       np.zeros(1 << SHIFT, np.int16))
        if o.nc or s.nc is not None:
            self._read_only(cta, w, ins, key, s, loc, lane, write, o)
        rc = s.rd_cta[loc]
        wc = s.wr_cta[loc]
        if (wc != NONE).any():
            ww = s.wr_warp[loc]
            clk = s.wr_clk[loc]
            bad = (wc != NONE) & ((wc != c) | ((ww != w.idx) & (clk > vcw[ww])))
            if bad.any() and cta.ext:
                bad &= ~self._known(cta, w, wc, ww, clk, bad & (wc != c))
            if bad.any():
                r = self._classify(s, key, loc, lane, bad, write, "write", None, o, ext, wc != c, new)
                if r is not None:
                    found.append(r)
        if not write:
            if not (rc == c).all():
                s.rd_cta[loc] = np.where((rc == NONE) | (rc == c), c, MANY)
            s.rd_clk[w.idx, loc] = vcw[w.idx]
            s.rd_line[w.idx, loc] = ins.line
            if s.kind is not None:
                s.rkind[loc] = np.where(rc == NONE, o.strong, np.minimum(s.rkind[loc], o.strong))
                s.rext[loc] = ext
            return
        read = rc != NONE
        if read.any():
            self._check_reads(cta, w, key, s, loc, lane, rc, read, o, ext, found)
        self._note_write(s, loc, c, w.idx, vcw[w.idx], ins.line, rc, o.strong, ext)

    def _check_reads(self, cta, w, key, s, loc, lane, rc, read, o, ext, found):
        c = cta.serial
        foreign = read & (rc != c)
        if foreign.any() and cta.ext:
            foreign &= ~self._known_reads(cta, w, s, loc, rc, foreign)
        if foreign.any():
            r = self._classify(s, key, loc, lane, foreign, True, "read", None, o, ext, foreign, None)
            if r is not None:
                found.append(r)
            return
        late = s.rd_clk[:, loc] > cta.vc[w.idx][:, None]
        late[w.idx] = False
        late &= (rc == c)[None, :]
        if late.any() and s.kind is not None:
            ms, same = self._strong_pair(s, loc, "read", o, ext, np.zeros(loc.size, np.bool_))
            late &= ~(ms & same)[None, :]
        if late.any():
            u, pos = np.argwhere(late)[0]
            one = np.zeros(loc.size, np.bool_)
            one[pos] = True
            found.append(_other(s, key, loc, lane, one, True, "read", int(u)) + (None, None, F.DataRace))

    def _known(self, cta, w, wc, ww, clk, foreign):
        """Per byte: is the foreign write (CTA wc, warp ww, clock clk) ordered before warp w's access?"""
        out = np.zeros(wc.shape, np.bool_)
        if not foreign.any():
            return out
        k = M.knowledge(cta, w.idx)
        for x in np.unique(wc[foreign]).tolist():
            sel = foreign & (wc == x)
            out[sel] = M.orders(k, int(x), ww[sel], clk[sel])
        return out

    def _known_reads(self, cta, w, s, loc, rc, foreign):
        """Per byte: are all reads of the one foreign CTA that read it ordered before warp w's write?"""
        out = np.zeros(loc.shape, np.bool_)
        k = M.knowledge(cta, w.idx)
        for x in np.unique(rc[foreign]).tolist():
            if x < 0:
                continue
            sel = foreign & (rc == x)
            kv = np.array([k.get((int(x), u), 0) for u in range(self.nwarps)], np.int64)[:, None]
            out[sel] = (s.rd_clk[:, loc[sel]] <= kv).all(0)
        return out

    def _classify(self, s, key, loc, lane, bad, write, other_kind, reader, o, ext, foreign, new):
        """The race on bytes ``bad`` against the earlier access, as the memory model classes it; None when
        every byte is a morally strong pair."""
        cls = F.DataRace
        if s.kind is not None:
            ms, same = self._strong_pair(s, loc, other_kind, o, ext, foreign)
            if (bad & ms & ~same).any():
                bad, cls = bad & ms & ~same, M.MixedSizeRace
            else:
                bad = bad & ~(ms & same)
            if not bad.any():
                return None
        if cls is F.DataRace and write and other_kind == "write" and new is not None:
            old = self.gmem.bufs[key[0]][1][(key[1] << SHIFT) + loc]
            benign = bad & (s.ext[loc] == ext) & (old == new)
            if benign.any() and (bad & ~benign).any():
                bad = bad & ~benign
            elif benign.any():
                cls = M.BenignRace
        return _other(s, key, loc, lane, bad, write, other_kind, reader) + (None, None, cls)

    @staticmethod
    def _strong_pair(s, loc, other_kind, o, ext, foreign):
        """Per byte: is the earlier access (the last write, or the reads) and this one a strong pair whose
        scopes include each other (.cta / .cluster: the same CTA), and do they have the same extent?"""
        ok = s.kind[loc] if other_kind == "write" else s.rkind[loc]
        oext = s.ext[loc] if other_kind == "write" else s.rext[loc]
        ms = (ok > 0) & (o.strong > 0) & (~foreign | ((ok >= 3) & (o.strong >= 3)))
        return ms, oext == ext

    def _read_only(self, cta, w, ins, key, s, loc, lane, write, o):
        """ld.global.nc reads bytes the launch writes, or a write to bytes it read (CUDA Programming Guide,
        the read-only data cache: the data must not change while the kernel runs)."""
        if s.nc is None:
            s.nc = np.zeros(1 << SHIFT, np.bool_)
        hit = s.nc[loc] if write else (s.wr_cta[loc] != NONE)
        if not write:
            s.nc[loc] = True
        if hit.any():
            b = int(loc[int(np.argmax(hit))])
            base, _, name = self.gmem.bufs[key[0]]
            at = (key[1] << SHIFT) + b
            what = ("a write to" if write else "ld.global.nc of") + f" global byte {at} of {name}"
            why = "that ld.global.nc reads in this kernel" if write else "that this kernel writes"
            lanes = np.zeros(32, np.bool_)
            lanes[lane[hit]] = True
            cta.finding(M.ReadOnlyViolation, w, ins, lanes, f"{what} {why}: the read-only data path needs it "
                        "unchanged for the kernel's lifetime", address=base + at)

    def writer(self, k, flat) -> int | None:
        """The CTA serial that last wrote the first of bytes ``flat`` of buffer k that has a writer."""
        for _, s, loc, _ in self._parts(k, flat):
            wc = s.wr_cta[loc]
            if (wc >= 0).any():
                return int(wc[int(np.argmax(wc >= 0))])
        return None

    @staticmethod
    def _note_write(s, loc, c, warp, clock, line, rc, kind=0, ext=0):
        s.wr_cta[loc] = c
        s.wr_warp[loc] = warp
        s.wr_clk[loc] = clock
        s.wr_line[loc] = line
        s.ext[loc] = ext
        if s.kind is not None:
            s.kind[loc] = kind
        if (rc != NONE).any():                  # forget the reads of the old value (none for most stores)
            s.rd_cta[loc] = NONE
            s.rd_clk[:, loc] = 0

    def _report(self, cta, w, ins, race, lanes):
        k, _, at_byte, write, other_kind, oc, ow, ol = race[:8]
        base, _, name = self.gmem.bufs[k]
        same = oc == cta.serial
        who = (f"warp {ow}" if same else
               f"CTA {self.ctaid(oc)} warp {ow}" if oc >= 0 and ow >= 0 else
               f"CTA {self.ctaid(oc)}" if oc >= 0 else "other CTAs")
        at = f" at PTX line {ol}" if ol else ""
        cls = race[10]
        why = race[8] or ("no happens-before" if same else "CTAs of a launch are not ordered without a release / acquire")
        what = race[9] or other_kind
        if cls is M.MixedSizeRace:
            why = "strong accesses overlapping in part are not morally strong"
        elif cls is M.BenignRace:
            why = "the same value with the same width: the PTX model gives the bytes that value; undefined " \
                  "behaviour in CUDA C++"
        cta.finding(cls, w, ins, lanes,
                    f"{'write' if write else 'read'} of global byte {at_byte} of {name} races with a {what} by "
                    f"{who}{at} ({why})", other=(ow, ol, cta.launch.cuda_line_of.get(ol), other_kind),
                    address=base + at_byte)

    # --- release / acquire ----------------------------------------------------------------------------
    def publish(self, cta, w, k, starts, o, rmw):
        """A strong write of the elements at byte offsets ``starts`` of buffer k: a release (or a write after a
        release fence) leaves the writer's knowledge there; an atomic continues the release sequence."""
        clocks = M.release_clocks(cta, w, o)
        for st in starts.tolist():
            old = self.sync.get((k, st)) if rmw else None
            new = M.join(old[0] if old else None, clocks)
            if new:
                self.sync[(k, st)] = (new, o.strong, cta.serial)
            elif old is None:
                self.sync.pop((k, st), None)

    def forget(self, k, starts):
        """A weak write ends the release sequences of its elements."""
        for st in starts.tolist():
            self.sync.pop((k, st), None)

    def observe(self, cta, w, k, starts, o):
        """A strong read of the elements at ``starts``: an acquire joins the clocks released there (from a
        morally strong release), a relaxed read keeps them for the warp's next acquire fence."""
        clocks = None
        for st in starts.tolist():
            got = self.sync.get((k, st))
            if got is not None and (got[2] == cta.serial or (got[1] >= 3 and o.strong >= 3)):
                clocks = M.join(clocks, got[0])
        M.take(cta, w, clocks, o)

    # --- async copies in flight ---------------------------------------------------------------------
    def begin(self, cta, w, ins, op_id, k, act, idx, write, what, until):
        """Async copy ``op_id``, issued by lanes ``act`` of warp w, accesses bytes ``idx`` ([lanes, n] offsets) of
        buffer k at some moment until ``until`` happens: check and record it as an access at issue, then hold
        it in flight."""
        if idx.size == 0:
            return
        self.access(cta, w, ins, act, k, idx, idx.shape[1], write)
        gbytes = idx.reshape(-1)
        fl = _Flight(cta.serial, w.idx, ins.line, what, write, until)
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
        for op_id, fl in list(self._flights.get(cta.serial, {}).items()):
            self.end(op_id, fl.warp, int(cta.vc[fl.warp, fl.warp]))
        self._flights.pop(cta.serial, None)

    def _in_flight(self, key, loc, lane, bad, write):
        """A race with an async copy in flight on ``loc`` of chunk ``key`` (the first racing byte's copy)."""
        b = int(loc[int(np.argmax(bad))])
        fl = next(f for fs in self._flights.values() for f in fs.values() if (write or f.write) and
                  any(k == key and (lc == b).any() for k, _, lc in f.parts))
        why = f"the {fl.what} issued there may {'write' if fl.write else 'read'} it until {fl.until}"
        return (key[0], lane[bad], (key[1] << SHIFT) + b, write, "write" if fl.write else "read", fl.cta, fl.warp,
                fl.line, why, f"{fl.what} in flight", F.DataRace)


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
