"""Register values of one warp: numpy arrays of 32 lanes, raw bits, with a per-lane poison mask.

A register holds its raw bits in the unsigned type of its declared width
(``.pred``: bool).  An instruction reads it as its own type (a view, or a
truncation / zero extension when widths differ) and writes typed results back
as raw bits.  Poison is ``None`` (no lane poisoned) or a bool array; results
carry the union of their sources' poison.

``Compiler`` turns operands into small closures over a warp (``w.regs``,
``w.pois``) once per kernel, so that executing an instruction does no parsing.
"""
from __future__ import annotations

import numpy as np

from ..errors import EmulationError
from .ptx import WIDTH

LANES = 32
#: What an instruction's handler returns when its warp cannot go on (a wait not yet satisfied), and when it
#: gives the scheduler a chance to run another warp (the engine's loop reads both).
BLOCKED = 1
YIELD = 2
RAW = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
TYPED = {"u8": np.uint8, "s8": np.int8, "b8": np.uint8, "u16": np.uint16, "s16": np.int16, "b16": np.uint16,
         "f16": np.float16, "bf16": np.uint16, "u32": np.uint32, "s32": np.int32, "b32": np.uint32,
         "f32": np.float32, "f16x2": np.uint32, "bf16x2": np.uint32, "u64": np.uint64, "s64": np.int64,
         "b64": np.uint64, "f64": np.float64, "pred": np.bool_}
LANE_IDS = np.arange(LANES, dtype=np.uint32)


def raw_dtype(ptype: str):
    return np.bool_ if ptype == "pred" else RAW[WIDTH[ptype]]


def por(*ps):
    """Union of poison masks (None = clean)."""
    out = None
    for p in ps:
        if p is not None:
            out = p if out is None else (out | p)
    return out


def to_type(raw: np.ndarray, t: str) -> np.ndarray:
    """Raw bits (any width) -> values of PTX type t."""
    if t == "pred":
        return raw.astype(np.bool_) if raw.dtype != np.bool_ else raw
    w = WIDTH[t]
    if raw.dtype == np.bool_ or raw.dtype.itemsize != w:
        raw = raw.astype(RAW[w])
    elif raw.dtype.kind != "u":
        raw = raw.view(RAW[w])
    return raw.view(TYPED[t])


def to_raw(v: np.ndarray, t: str, reg_dtype) -> np.ndarray:
    """Values of PTX type t -> raw bits in a register's storage dtype."""
    if reg_dtype == np.bool_:
        return np.asarray(v).astype(np.bool_)
    v = np.ascontiguousarray(v, dtype=TYPED[t]) if t != "pred" else np.asarray(v, np.uint8)
    bits = v.view(RAW[v.dtype.itemsize]) if v.dtype.kind != "b" else v
    if bits.dtype != reg_dtype:
        bits = bits.astype(reg_dtype)
    return bits


def imm_value(op, t: str) -> np.ndarray:
    """An immediate operand as a full 32-lane array of type t."""
    if op.kind == "fimm":
        if t in ("f32", "f64", "f16", "bf16"):
            bits = np.array([op.value], dtype=RAW[op.width]).view(np.float32 if op.width == 4 else np.float64)
            return np.full(LANES, bits[0], dtype=np.float64).astype(TYPED[t]) if t != "bf16" else \
                np.full(LANES, f32_to_bf16(bits.astype(np.float32))[0], np.uint16)
        return np.full(LANES, op.value % (1 << (8 * WIDTH[t])), RAW[WIDTH[t]]).view(TYPED[t])
    if t == "pred":
        return np.full(LANES, bool(op.value))
    if t in ("f32", "f64", "f16"):
        return np.full(LANES, op.value, TYPED[t])
    return np.full(LANES, op.value % (1 << (8 * WIDTH[t])), RAW[WIDTH[t]]).view(TYPED[t])


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits (round to nearest even; NaN kept quiet)."""
    b = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    return np.where(nan, np.uint16(0x7FC0), r) if nan.any() else r


def bf16_to_f32(b: np.ndarray) -> np.ndarray:
    return (b.astype(np.uint32) << 16).view(np.float32)


class Compiler:
    """Per-kernel register numbering and operand closures."""

    def __init__(self, kernel, symbols: dict, sregs):
        self.kernel = kernel
        self.index = {}
        self.dtypes = []
        for name, ptype in kernel.regs.items():
            self.index[name] = len(self.dtypes)
            self.dtypes.append(raw_dtype(ptype))
        self.ptypes = dict(kernel.regs)
        self.symbols = symbols      # name -> (space, address)
        self.sregs = sregs          # name -> function(w) -> uint32 array

    def reg(self, op, ins):
        if op.kind != "reg" or op.name not in self.index:
            raise EmulationError(f"unknown register {op.name or op.kind} in {ins.opcode} at PTX line {ins.line}")
        return self.index[op.name]

    def read(self, op, t: str, ins):
        """A closure w -> array of type t for a source operand."""
        if op.kind == "reg":
            i = self.reg(op, ins)
            if op.negated:
                return lambda w: ~to_type(w.regs[i], "pred")
            if t == "pred":
                return lambda w: w.regs[i]
            dt = TYPED[t]
            if self.dtypes[i] == RAW[WIDTH[t]]:
                return lambda w: w.regs[i].view(dt)
            return lambda w: to_type(w.regs[i], t)
        if op.kind in ("imm", "fimm"):
            c = imm_value(op, t)
            c.setflags(write=False)
            return lambda w: c
        if op.kind == "sreg":
            f = self.sregs(op.name, ins)
            return lambda w: to_type(f(w), t)
        if op.kind == "sym" and op.name in self.symbols:
            c = np.full(LANES, self.symbols[op.name][1] % (1 << (8 * WIDTH[t])), RAW[WIDTH[t]]).view(TYPED[t])
            return lambda w: c
        raise EmulationError(f"operand {op.kind} {op.name} not readable as .{t} in {ins.opcode} at PTX line {ins.line}")

    def poison(self, op, ins):
        if op.kind == "reg":
            i = self.reg(op, ins)
            return lambda w: w.pois[i]
        return lambda w: None

    def write(self, op, t: str, ins):
        """A closure (w, values of type t, poison) -> None that honours the active mask w.m / w.full."""
        if op.kind == "sink":
            return lambda w, v, p: None
        i = self.reg(op, ins)
        rd = self.dtypes[i]

        def put(w, v, p):
            bits = to_raw(v, t, rd)
            if w.full:
                w.regs[i] = bits
                w.pois[i] = p
            else:
                m = w.m
                w.regs[i] = np.where(m, bits, w.regs[i])
                old = w.pois[i]
                if p is not None or old is not None:
                    new = np.where(m, p if p is not None else False, old if old is not None else False)
                    w.pois[i] = new if new.any() else None
        return put
