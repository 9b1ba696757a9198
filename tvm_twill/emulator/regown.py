"""wgmma's rules on registers and warp groups, by the PTX ISA ("Asynchronous Warpgroup Level Matrix Multiply-
Accumulate Instructions": wgmma.mma_async, wgmma.fence, wgmma.wait_group; "setmaxnreg").

- An in-flight wgmma owns its accumulator registers and, in the register-A form, its A-fragment registers:
  "Accessing the accumulator register or the input register containing fragments of matrix A of a
  wgmma.mma_async instruction without first performing a wgmma.wait_group instruction that waits on a
  wgmma-group including that wgmma.mma_async instruction is undefined behavior."  While it is in flight the
  register's bits are a ``Held`` array: any use of it by an instruction of the warp is an
  ``AsyncReadBeforeWait``, a write replaces the array and is an ``InFlightOverwrite`` at completion.
- wgmma.fence "must be used" before the first wgmma.mma_async of the warp and between a register access and a
  wgmma.mma_async that accesses the same registers (accumulator or A), except for accumulator accesses across
  wgmma.mma_async of the same shape.  The registers' arrays are kept at the warp's last wgmma.fence and at each
  wgmma it issues: an accumulator or A register an instruction wrote after a wgmma of the warp with no
  wgmma.fence since is a ``WgmmaFenceMissing`` (ptxas may repair such code, warning C7515; that is not a
  contract).  nvcc places the initialisation of inline-asm accumulators between the wgmma.fence and the first
  wgmma, which ptxas 13 accepts without a warning: reported only with ``Policy(strict_wgmma_fence=True)``.  Reads
  since the fence are not tracked.
- wgmma.mma_async and setmaxnreg are ``.sync.aligned`` over a warp group, four consecutive warps starting at a
  warp index multiple of 4: a CTA without the whole warp group is reported at the instruction, and a warp group
  whose warps executed different numbers of them is reported when its last warp exits (``BarrierMismatch`` for
  wgmma, ``SetmaxnregMisuse`` for setmaxnreg).
"""
from __future__ import annotations

import numpy as np

from . import findings as F
from .values import LANES


class Held(np.ndarray):
    """The bits of a register an in-flight wgmma owns.  ``w``: the warp; ``what``: (kind, PTX line of the wgmma);
    ``count``: in-flight ops holding it.  Any numpy use reports itself and works on the plain bits."""

    def __array_finalize__(self, obj):
        self.w = getattr(obj, "w", None)
        self.what = getattr(obj, "what", None)
        self.count = getattr(obj, "count", 0)

    def _touch(self):
        w = self.w
        if w is None:
            return
        cta = w.cta
        ins = cta.launch.program[w.pc][4]
        kind, line = self.what
        cta.finding(F.AsyncReadBeforeWait, w, ins, w.m, f"{ins.opcode} uses {kind} register of the wgmma at PTX "
                    f"line {line} before the wgmma.wait_group that covers it")

    def view(self, *a, **k):
        self._touch()
        return np.ndarray.view(plain(self), *a, **k)

    def astype(self, *a, **k):
        self._touch()
        return plain(self).astype(*a, **k)

    def copy(self, *a, **k):
        self._touch()
        return plain(self).copy(*a, **k)

    def __getitem__(self, key):
        self._touch()
        return plain(self)[key]

    def __array_ufunc__(self, ufunc, method, *inputs, **kw):
        self._touch()
        return getattr(ufunc, method)(*[plain(x) for x in inputs], **kw)

    def __array_function__(self, func, types, args, kwargs):
        self._touch()
        return func(*[plain(x) for x in args], **{k: plain(v) for k, v in kwargs.items()})


def plain(a):
    """The bits of a register as a plain array (no report): the wgmma's own accesses."""
    return np.ndarray.view(a, np.ndarray) if isinstance(a, Held) else a


def hold(w, regs, kind, line):
    """The op issued now owns ``regs``."""
    for r in regs:
        cur = w.regs[r]
        if isinstance(cur, Held):
            cur.count += 1
            continue
        h = np.ndarray.view(cur, Held)
        h.w, h.what, h.count = w, (kind, line), 1
        w.regs[r] = h
        if w.wg_fence is not None:
            w.wg_fence[0][r] = h


def release(cta, w, op, r, value=None, label="accumulator register"):
    """The op completed: register r is no longer owned by it (``value``: the bits it writes).  A register an
    instruction replaced while owned is an ``InFlightOverwrite``."""
    cur = w.regs[r]
    if not isinstance(cur, Held):
        cta.finding(F.InFlightOverwrite, w, op.ins, None, f"{label} {list(cta.kernel.regs)[r]} of the wgmma at PTX "
                    f"line {op.line} is written before its wgmma.wait_group")
        new = cur if value is None else value
    else:
        cur.count -= 1
        new = plain(cur) if value is None else value
        if cur.count > 0:
            new = np.ndarray.view(new, Held)
            new.w, new.what, new.count = w, cur.what, cur.count
    w.regs[r] = new
    if w.wg_fence is not None:
        w.wg_fence[0][r] = new


def check_fence(cta, w, ins, regs):
    """wgmma.fence before the warp's first wgmma and between an instruction's write of an accumulator / A register
    and the wgmma using it: by default a write after a wgmma.mma_async of the warp with no wgmma.fence since;
    with ``Policy(strict_wgmma_fence=True)`` also a write between the fence and the first wgmma after it."""
    if w.wg_fence is None:
        cta.finding(F.WgmmaFenceMissing, w, ins, w.m, "no wgmma.fence before the warp's first wgmma.mma_async")
        w.wg_fence = (list(w.regs), False)
        return
    snap, since_fence = w.wg_fence
    if since_fence and not cta.policy.strict_wgmma_fence:
        snap[:] = w.regs
    for r in regs:
        if w.regs[r] is not snap[r]:
            name = list(cta.kernel.regs)[r]
            cta.finding(F.WgmmaFenceMissing, w, ins, w.m, f"register {name} written with no wgmma.fence between "
                        "the write and the wgmma.mma_async using it")
            break
    w.wg_fence = (snap, False)


def fence(w):
    """wgmma.fence: the warp's register accesses so far are ordered before its later wgmma."""
    w.wg_fence = (list(w.regs), True)


def check_group(cta, w, ins, what, cls):
    """At a .sync.aligned warp-group instruction: the CTA holds the whole warp group of w; returns its index."""
    g = w.idx // 4
    if cta.launch.nthreads < 4 * LANES * (g + 1):
        cta.finding(cls, w, ins, w.m, f"{what} by warp {w.idx}: its warp group (warps {4 * g}..{4 * g + 3}) is "
                    f"incomplete, the CTA has {cta.launch.nthreads} threads")
    if not (w.m == w.live).all():
        cta.finding(F.BarrierMismatch, w, ins, w.m, f"{what} reached by part of the warp")
    return g


def warp_exited(cta, w, ins):
    """The last warp of a warp group exited: every warp of it executed as many wgmma.mma_async and setmaxnreg."""
    g = w.idx // 4
    group = cta.warps[4 * g:4 * g + 4]
    if not all(u.done for u in group):
        return
    for attr, what, cls in (("wgmma_count", "wgmma.mma_async", F.BarrierMismatch),
                            ("setmaxnreg_count", "setmaxnreg", F.SetmaxnregMisuse)):
        counts = [getattr(u, attr) for u in group]
        if len(set(counts)) > 1:
            cta.finding(cls, w, ins, None, f"{what} executed by only part of warp group {g}: warps "
                        f"{4 * g}..{4 * g + len(group) - 1} executed it {counts} times")
