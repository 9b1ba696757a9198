"""atom and red on shared and global memory (add, min, max, exch, cas, and, or, xor, inc, dec).

The active lanes apply their operations one after another in lane order (the
hardware's order among lanes is unspecified; every order gives the same
final value for the commutative operations).  Atomics do not race with each
other (they are strong, .gpu scope unless the instruction names one: PTX ISA,
atom / red and "Memory Consistency Model"), but a plain access unordered with
them races; ``.acquire`` / ``.release`` / ``.acq_rel`` make the release /
acquire edges of ``memmodel``, and every atom / red continues the release
sequence of the location.
"""
from __future__ import annotations

import numpy as np

from ..errors import EmulationError
from . import findings as F
from .memmodel import SCOPE, Order, order_of
from .memops import address, space_of
from .values import LANES, TYPED, WIDTH, por

OPS = {"add", "min", "max", "exch", "cas", "and", "or", "xor", "inc", "dec"}


def _apply(op, old, x, y, t):
    if op == "add":
        return (old + x).astype(old.dtype)
    if op == "min":
        return np.minimum(old, x)
    if op == "max":
        return np.maximum(old, x)
    if op == "exch":
        return x
    if op == "cas":
        return y if old == x else old
    if op == "and":
        return old & x
    if op == "or":
        return old | x
    if op == "xor":
        return old ^ x
    if op == "inc":
        return old.dtype.type(0) if old >= x else old.dtype.type(old + 1)
    return x if (old == 0 or old > x) else old.dtype.type(old - 1)       # dec


def compile_atom(ins, cc):
    p = ins.parts
    red = p[0] == "red"
    t = p[-1]
    op = next((m for m in p[1:] if m in OPS), None)
    if op is None or t not in TYPED or t in ("pred", "f16x2", "bf16x2") or "v2" in p or "v4" in p:
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
    space = space_of(p)
    ops = ins.operands
    a_op = ops[0] if red else ops[1]
    srcs = ops[1:] if red else ops[2:]
    put = None if red else cc.write(ops[0], t, ins)
    addr = address(cc, a_op, ins)
    vals = [cc.read(o, t, ins) for o in srcs]
    ps = [cc.poison(o, ins) for o in srcs]
    w_ = WIDTH[t]
    launch = cc.launch
    order = order_of(ins)

    def run(w):
        cta = launch.cta
        a = addr(w)
        xs = [v(w) for v in vals]
        old_all = np.zeros(LANES, TYPED[t])
        pold = np.zeros(LANES, np.bool_)
        for lane in np.nonzero(w.m)[0].tolist():
            one = np.zeros(LANES, np.bool_)
            one[lane] = True
            raw, pz = _rw(cta, w, ins, space, a, one, w_, order=order)
            if raw is None:
                return
            old = raw[lane].view(TYPED[t])[0]
            new = _apply(op, old, xs[0][lane], xs[1][lane] if len(xs) > 1 else None, t)
            data = np.zeros((LANES, w_), np.uint8)
            data[lane] = np.array([new], TYPED[t]).view(np.uint8)
            _rw(cta, w, ins, space, a, one, w_, data, order)
            old_all[lane] = old
            pold[lane] = pz is not None and bool(pz[lane])
        if put is not None:
            put(w, old_all, por(pold if pold.any() else None, *[q(w) for q in ps]))
    return run


def _rw(cta, w, ins, space, a, lanes, nbytes, data=None, order=None):
    """Read (data None) or write one lane's bytes, outside the race check (see the module docstring)."""
    from .memops import access
    sm = cta.shared
    if space == "shared" or (space == "generic" and int(a[np.argmax(lanes)]) >= (1 << 44)):
        off = int(a[np.argmax(lanes)]) - ((1 << 44) if space == "generic" else 0)
        if off < 0 or off + nbytes > sm.size or off % nbytes:
            cta.finding(F.BadAccess, w, ins, lanes, f"atomic on shared offset {off}", address=off)
            return None, None
        if data is None:
            return np.tile(sm.data[off:off + nbytes], (LANES, 1)), np.full(LANES, sm.poison[off:off + nbytes].any())
        sm.data[off:off + nbytes] = data[np.argmax(lanes)]
        sm.poison[off:off + nbytes] = False
        sm.note_write(np.arange(off, off + nbytes), w.idx, cta.vc[w.idx, w.idx], ins.line)
        return data, None
    return access(cta, w, ins, "global", a, lanes, nbytes, data is not None, data, None, atomic=True,
                  order=order or Order(SCOPE["gpu"]))


HANDLERS = {"atom": compile_atom, "red": compile_atom}