"""``mma.sync.aligned.{shape}.row.col{.satfinite}.{dtype}.{atype}.{btype}.{ctype}`` (PTX ISA, "Warp-level
matrix multiply-accumulate instructions", mma.sync with ``.m16n8k8`` / ``.m16n8k16`` / ``.m16n8k32``):

* 16-bit inputs (``.f16``, ``.bf16``), m16n8k8 and m16n8k16; ``.f32`` accumulators, or ``.f16`` ones for
  ``.f16`` inputs (two per register, the low half first);
* ``.tf32`` m16n8k8 with ``.f32`` accumulators; a ``.tf32`` operand is a ``.b32`` register of which the
  low 13 mantissa bits are not part of the value (they are dropped);
* 8-bit integers (``.s8`` / ``.u8``, mixed allowed) m16n8k16 and m16n8k32 with ``.s32`` accumulators:
  exact, wrapping modulo 2^32, or clamped with ``.satfinite``;
* ``.e4m3`` / ``.e5m2`` m16n8k32 with ``.f32`` accumulators (sm_89+).

Where each element lives comes from ``encodings`` (the ISA's fragment figures).  Float products are summed
exactly enough in float64 and rounded once to the accumulator type; the hardware's order and intermediate
precision are unspecified, so results agree with a GPU within that tolerance, bit for bit on exact sums.
Reaching it with part of the warp is a ``BarrierMismatch`` finding (``.sync.aligned``).
"""
from __future__ import annotations

import numpy as np

from ..errors import EmulationError
from . import encodings as E
from . import findings as F
from .values import LANE_IDS, LANES, bf16_to_f32

_LANE = LANE_IDS.astype(np.int64)
_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "s8": 8, "u8": 8, "e4m3": 8, "e5m2": 8}
_K = {"m16n8k8": 8, "m16n8k16": 16, "m16n8k32": 32}


def check_aligned(cta, w, ins):
    if not (w.m == w.live).all():
        cta.finding(F.BarrierMismatch, w, ins, w.m, f"{ins.parts[0]}.sync.aligned reached by part of the warp")


def _fp8_table(ebits: int, mbits: int, ieee: bool) -> np.ndarray:
    """Values of the 256 codes of an 8-bit float (OCP FP8: e4m3 without infinities, e5m2 IEEE-like)."""
    out = np.empty(256, np.float64)
    bias = (1 << (ebits - 1)) - 1
    for code in range(256):
        s, e, m = code >> 7, (code >> mbits) & ((1 << ebits) - 1), code & ((1 << mbits) - 1)
        if ieee and e == (1 << ebits) - 1:
            v = np.inf if m == 0 else np.nan
        elif not ieee and e == (1 << ebits) - 1 and m == (1 << mbits) - 1:
            v = np.nan
        elif e == 0:
            v = m * 2.0 ** (1 - bias - mbits)
        else:
            v = (1 + m / (1 << mbits)) * 2.0 ** (e - bias)
        out[code] = -v if s else v
    return out


_FP8 = {"e4m3": _fp8_table(4, 3, False), "e5m2": _fp8_table(5, 2, True)}
_FAST = {"f16": np.float16, "f32": np.float32}


def _decode(raw: np.ndarray, t: str) -> np.ndarray:
    if t == "f16":
        return raw.astype(np.uint16, copy=False).view(np.float16).astype(np.float64)
    if t == "bf16":
        return bf16_to_f32(raw.astype(np.uint16, copy=False)).astype(np.float64)
    if t == "tf32":
        return (raw.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    if t in _FP8:
        return _FP8[t][raw.astype(np.int64)]
    if t == "f32":
        return raw.astype(np.uint32, copy=False).view(np.float32).astype(np.float64)
    if t == "s32":
        return raw.astype(np.uint32, copy=False).view(np.int32).astype(np.int64)
    return raw.astype(np.uint8).view(np.int8).astype(np.int64) if t == "s8" else raw.astype(np.int64)


def _maps(shape: str, t: str):
    """(A map, B map, registers of A, registers of B): a map gives (row, col) of element i of a lane."""
    if _BITS[t] == 8:
        n = _K[shape] // 8
        return E.mma_8bit_a, E.mma_8bit_b, n, n // 2
    if t == "tf32":
        return E.mma_tf32_m16n8k8_a, E.mma_tf32_m16n8k8_b, 4, 2
    if shape == "m16n8k16":
        return E.mma_m16n8k16_a, E.mma_m16n8k16_b, 4, 2
    return E.mma_m16n8k8_a, E.mma_m16n8k8_b, 2, 1


def _legal(shape, d, a, b, c, sat) -> bool:
    if d != c or shape not in _K:
        return False
    if a in ("f16", "bf16"):
        return b == a and shape != "m16n8k32" and not sat and (d == "f32" or (a == "f16" and d == "f16"))
    if a == "tf32":
        return b == a and shape == "m16n8k8" and d == "f32" and not sat
    if a in ("s8", "u8"):
        return b in ("s8", "u8") and shape != "m16n8k8" and d == "s32"
    return a in _FP8 and b in _FP8 and shape == "m16n8k32" and d == "f32" and not sat


class _Operand:
    """One fragment operand: its registers, how many elements each holds, and each element's tile place."""

    def __init__(self, items, t, emap, rows, cols):
        self.n, self.t = len(items), t
        self.per = 32 // _BITS.get(t, 32)
        self.places = [emap(_LANE, i) for i in range(self.n * self.per)]
        self.rows, self.cols = rows, cols
        src = np.full(rows * cols, -1, np.int64)
        for i, (r, c) in enumerate(self.places):
            src[r * cols + c] = (i // self.per) * LANES * self.per + _LANE * self.per + i % self.per
        assert (src >= 0).all()
        self.src = src

    def tile(self, regs):
        raw = np.array(regs, np.uint32)
        fast = _FAST.get(self.t)
        if fast is not None:        # the common types: a view, no decode
            return raw.view(fast).reshape(-1)[self.src].astype(np.float64).reshape(self.rows, self.cols)
        raw = raw.view({1: np.uint32, 2: np.uint16, 4: np.uint8}[self.per])
        return _decode(raw.reshape(-1)[self.src], self.t).reshape(self.rows, self.cols)

    def poison(self, pz, out):
        """Mark in ``out`` (rows x cols) the elements held by a poisoned register lane."""
        for i, (r, c) in enumerate(self.places):
            p = pz[i // self.per]
            if p is not None:
                out[r[p], c[p]] = True


def compile_mma(ins, cc):
    p = ins.parts
    sat = "satfinite" in p
    q = [x for x in p if x != "satfinite"]
    if len(q) != 10 or q[1:3] != ["sync", "aligned"] or q[4:6] != ["row", "col"] or \
            not _legal(q[3], *q[6:10], sat):
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
    shape, (_, at, bt, ct) = q[3], q[6:10]
    K = _K[shape]
    amap, bmap, na, nb = _maps(shape, at)
    d, a, b, c = ins.operands
    nc = 2 if ct == "f16" else 4
    if (len(a.items), len(b.items), len(c.items), len(d.items)) != (na, nb, nc, nc):
        raise EmulationError(f"wrong operand count in {ins.opcode} at PTX line {ins.line}")
    A = _Operand(a.items, at, amap, 16, K)
    B = _Operand(b.items, bt, bmap, K, 8)
    C = _Operand(c.items, ct, E.mma_m16n8k16_c, 16, 8)
    rt = "f32" if ct == "f32" else "b32" if ct == "f16" else "s32"
    ra, rb = [cc.read(o, "b32", ins) for o in a.items], [cc.read(o, "b32", ins) for o in b.items]
    rc = [cc.read(o, "b32", ins) for o in c.items]
    pin = [cc.poison(o, ins) for o in a.items + b.items + c.items]
    puts = [cc.write(o, rt, ins) for o in d.items]
    out_idx = np.stack([r * 8 + col for r, col in C.places])          # [elements, 32]
    launch = cc.launch

    def run(w):
        check_aligned(launch.cta, w, ins)
        D = _result(A.tile([r(w) for r in ra]) @ B.tile([r(w) for r in rb]) + C.tile([r(w) for r in rc]), ct, sat)
        vals = D.reshape(-1)[out_idx]                                  # [elements, 32]
        regs = _pack(vals, ct)
        P = _poisoned([f(w) for f in pin], A, B, C, na, nb)
        for i in range(nc):
            puts[i](w, regs[i], P[i] if P is not None else None)
    return run


def _result(acc, ct, sat):
    if ct == "s32":
        if sat:
            return np.clip(acc, -(1 << 31), (1 << 31) - 1).astype(np.int64)
        return ((acc + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int64)
    return acc.astype(np.float16 if ct == "f16" else np.float32)


def _pack(vals, ct):
    """Destination registers from the per-element values [elements, 32]."""
    if ct == "f16":
        h = vals.astype(np.float16).view(np.uint16).astype(np.uint32)
        return [h[2 * i] | (h[2 * i + 1] << 16) for i in range(len(vals) // 2)]
    return list(vals.astype(np.float32 if ct == "f32" else np.int32, copy=False))


def _poisoned(pz, A, B, C, na, nb):
    """Per destination register, the lanes whose value depends on a poisoned input (None: none)."""
    if all(x is None for x in pz):
        return None
    pa = np.zeros((A.rows, A.cols), np.bool_)
    pb = np.zeros((B.rows, B.cols), np.bool_)
    pc = np.zeros((16, 8), np.bool_)
    A.poison(pz[:na], pa)
    B.poison(pz[na:na + nb], pb)
    C.poison(pz[na + nb:], pc)
    out = pa.any(1)[:, None] | pb.any(0)[None, :] | pc
    res = []
    for i in range(C.n):
        m = np.zeros(LANES, np.bool_)
        for j in range(C.per):
            r, col = C.places[i * C.per + j]
            m |= out[r, col]
        res.append(m if m.any() else None)
    return res
