"""Memory spaces and the shadow state that race detection reads.

- ``GlobalMemory``: the kernel arguments (numpy arrays, viewed as bytes, so
  stores land in the caller's arrays) at distinct fake 64-bit base addresses,
  plus the module's ``.global``/``.const`` variables.  An access that falls in
  no buffer is a ``BadAccess`` finding.
- ``SharedMemory`` (one per CTA): the bytes, a per-byte poison mark (new
  shared memory is poisoned), and the happens-before shadow.

Race detection is per warp: a warp executes as a unit, so each warp has one
vector clock (``vc[w]``), and the shadow keeps, per byte, the last writer
(warp, clock, PTX line) and, per warp, the clock and line of its last read
since that write.  Per-thread clocks would cost 32x the shadow and only add
intra-warp ordering, which the kernels here get from converged execution.
An async copy's bytes carry ``owner`` (the copy) and the clock ``PENDING``
until a wait observes it: any read of such a byte is reported.
"""
from __future__ import annotations

import bisect

import numpy as np

PENDING = np.int64(1 << 62)
GLOBAL_BASE = 0x7F00_0000_0000
GLOBAL_STRIDE = 1 << 36


class GlobalMemory:
    def __init__(self):
        self.bases = []   # sorted base addresses
        self.bufs = []    # (base, uint8 view, name)
        self.symbols = {}  # module .global/.const variable -> address

    def add(self, array: np.ndarray, name: str) -> int:
        base = GLOBAL_BASE + GLOBAL_STRIDE * len(self.bufs)
        view = array.reshape(-1).view(np.uint8) if array.size else np.zeros(0, np.uint8)
        self.bases.append(base)
        self.bufs.append((base, view, name))
        return base

    def find(self, addrs: np.ndarray, nbytes: int):
        """(buffer view, byte offsets) for lane addresses, or (None, first bad address)."""
        _, view, off = self.locate(addrs, nbytes)
        return view, off

    def locate(self, addrs: np.ndarray, nbytes: int):
        """(buffer index, view, byte offsets) for lane addresses, or (-1, None, first bad address)."""
        a0 = int(addrs[0])
        k = bisect.bisect_right(self.bases, a0) - 1
        if k < 0:
            return -1, None, a0
        base, view, _ = self.bufs[k]
        off = addrs.astype(np.int64) - np.int64(base)
        bad = (off < 0) | (off + nbytes > view.size)
        if bad.any():
            return -1, None, int(addrs[np.argmax(bad)])
        return k, view, off


class SharedMemory:
    def __init__(self, size: int, nwarps: int):
        self.size = size
        self.data = np.zeros(size, np.uint8)
        self.poison = np.ones(size, np.bool_)
        self.wr_warp = np.zeros(size, np.int16)
        self.wr_clk = np.zeros(size, np.int64)
        self.wr_line = np.zeros(size, np.int32)
        self.owner = np.zeros(size, np.int32)       # async copy id that wrote (or writes) the byte, 0: none
        self.rd_clk = np.zeros((nwarps, size), np.int64)
        self.rd_line = np.zeros((nwarps, size), np.int32)
        self.is_mbar = np.zeros(size, np.bool_)
        self.wr_generic = np.zeros(size, np.bool_)     # last write by the generic proxy (st, not an async copy)
        self.wr_seq = np.zeros(size, np.int64)         # when (instruction count) it was written
        self.async_readers = np.zeros(size, np.int16)  # in-flight wgmma ops that will still read the byte

    def check_read(self, idx, w, vcw):
        """Indices (into idx) of bytes whose last write does not happen before this read by warp w."""
        ww = self.wr_warp[idx]
        wc = self.wr_clk[idx]
        bad = (wc > vcw[ww]) & ((ww != w) | (wc == PENDING))
        return bad

    def note_read(self, idx, w, clk, line):
        self.rd_clk[w, idx] = clk
        self.rd_line[w, idx] = line

    def check_write(self, idx, w, vcw):
        """(bad write-write mask, (warp, position) of a racing read or None)."""
        ww = self.wr_warp[idx]
        wc = self.wr_clk[idx]
        bad_w = (wc > vcw[ww]) & (ww != w)
        rc = self.rd_clk[:, idx]
        late = rc > vcw[:, None]
        late[w] = False
        if late.any():
            u, pos = np.argwhere(late)[0]
            return bad_w, (int(u), int(pos))
        return bad_w, None

    def note_write(self, idx, w, clk, line):
        self.wr_warp[idx] = w
        self.wr_clk[idx] = clk
        self.wr_line[idx] = line
        self.rd_clk[:, idx] = 0


def lane_bytes(offsets: np.ndarray, nbytes: int) -> np.ndarray:
    """[lanes, nbytes] byte indices for per-lane start offsets."""
    return offsets.astype(np.int64)[:, None] + np.arange(nbytes, dtype=np.int64)[None, :]
