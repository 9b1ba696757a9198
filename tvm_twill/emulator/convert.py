"""mov (with vector packing), cvt (every rounding mode the corpus uses, saturation), cvta and cvt.pack.

Float-to-float narrowing goes through numpy (round to nearest even) for
``.rn``; ``.rz``/``.rm``/``.rp`` are done by comparing the rounded value with
the float64 original and stepping one ulp (``np.nextafter``).  f16 uses
numpy's float16; bf16 its bit pattern (round to nearest even).  Float to
integer conversions saturate to the destination's range and map NaN to 0, as
PTX specifies.
"""
from __future__ import annotations

import numpy as np

from ..errors import EmulationError
from .values import LANES, RAW, TYPED, WIDTH, bf16_to_f32, f32_to_bf16, por

SHARED_WINDOW = 1 << 44     # generic address of shared offset 0 (any address in [W, W + 2^32) is shared)
LOCAL_WINDOW = 1 << 45
PARAM_WINDOW = 1 << 46    # generic address of .param offset 0 (cvta.param: kernel parameters, tensor maps)


def _to_float64(x, t):
    if t == "bf16":
        return bf16_to_f32(x).astype(np.float64)
    return x.astype(np.float64)


def round_float(x64, dt, mode):
    """float64 -> float dtype dt ('f16'/'f32'/'bf16'/'f64') with PTX rounding mode."""
    if dt == "f64":
        return x64
    if dt == "bf16":
        if mode not in ("rn", None):
            raise EmulationError(f"cvt to bf16 with .{mode} is not supported")
        return f32_to_bf16(x64.astype(np.float32))
    npt = np.float16 if dt == "f16" else np.float32
    r = x64.astype(npt)
    if mode in (None, "rn"):
        return r
    r64 = r.astype(np.float64)
    if mode == "rz":
        fix = np.abs(r64) > np.abs(x64)
        return np.where(fix, np.nextafter(r, np.zeros_like(r)), r).astype(npt)
    if mode == "rm":
        return np.where(r64 > x64, np.nextafter(r, np.full_like(r, -np.inf)), r).astype(npt)
    if mode == "rp":
        return np.where(r64 < x64, np.nextafter(r, np.full_like(r, np.inf)), r).astype(npt)
    raise EmulationError(f"unknown rounding mode .{mode}")


INT_ROUND = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}


def convert(x, st, dt, mode, sat):
    """Values x of PTX type st -> PTX type dt."""
    sf, df = st in ("f16", "bf16", "f32", "f64"), dt in ("f16", "bf16", "f32", "f64")
    if sf:
        v = _to_float64(x, st)
        if df:
            if mode in INT_ROUND:
                v = INT_ROUND[mode](v)
                mode = None
            if sat:
                v = np.clip(np.nan_to_num(v, nan=0.0), 0.0, 1.0)
            return round_float(v, dt, mode)
        v = INT_ROUND.get(mode, np.trunc)(v)
        info = np.iinfo(TYPED[dt])
        v = np.where(np.isnan(v), 0, np.clip(v, info.min, info.max))
        return np.array([int(a) for a in v], TYPED[dt]) if WIDTH[dt] == 8 else v.astype(TYPED[dt])
    if df:
        return round_float(x.astype(np.float64) if WIDTH[st] < 8 else
                            np.array([float(int(a)) for a in x], np.float64), dt, mode)
    src = x.astype(np.int64) if x.dtype.itemsize < 8 or x.dtype.kind == "i" else x
    if sat:
        info = np.iinfo(TYPED[dt])
        if src.dtype.kind == "u":
            src = np.minimum(src, np.uint64(info.max))
        else:
            src = np.clip(src, max(info.min, -2**63), min(info.max, 2**63 - 1))
    return src.astype(TYPED[dt])


def compile_cvt(ins, cc):
    p = ins.parts
    if len(p) > 1 and p[1] == "pack":
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
    dt, st = p[-2], p[-1]
    if dt not in TYPED or st not in TYPED:
        raise EmulationError(f"unsupported cvt types in {ins.opcode} at PTX line {ins.line}")
    mode = next((m for m in p[1:-2] if m in ("rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi")), None)
    sat = "sat" in p
    a = cc.read(ins.operands[1], st, ins)
    pa = cc.poison(ins.operands[1], ins)
    put = cc.write(ins.operands[0], dt, ins)
    if dt.endswith("x2"):
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")

    def run(w):
        with np.errstate(all="ignore"):
            put(w, convert(a(w), st, dt, mode, sat), pa(w))
    return run


def compile_mov(ins, cc):
    t = ins.parts[-1]
    if t not in TYPED:
        raise EmulationError(f"unsupported type in {ins.opcode} at PTX line {ins.line}")
    dst, src = ins.operands[0], ins.operands[1]
    if src.kind == "vec":       # pack: the first element is the low bits
        n = len(src.items)
        et = {1: "b8", 2: "b16", 4: "b32"}[WIDTH[t] // n]
        parts = [cc.read(o, et, ins) for o in src.items]
        ps = [cc.poison(o, ins) for o in src.items]
        shift = 8 * WIDTH[et]
        put = cc.write(dst, t, ins)
        wide = RAW[WIDTH[t]]

        def pack(w):
            r = np.zeros(LANES, wide)
            for k, f in enumerate(parts):
                r |= f(w).astype(wide) << wide(shift * k)
            put(w, r.view(TYPED[t]), por(*[q(w) for q in ps]))
        return pack
    if dst.kind == "vec":       # unpack
        n = len(dst.items)
        et = {1: "b8", 2: "b16", 4: "b32"}[WIDTH[t] // n]
        a = cc.read(src, RAW_NAME[WIDTH[t]], ins)
        pa = cc.poison(src, ins)
        puts = [cc.write(o, et, ins) for o in dst.items]
        shift = 8 * WIDTH[et]
        wide, narrow = RAW[WIDTH[t]], RAW[WIDTH[et]]

        def unpack(w):
            x = a(w)
            q = pa(w)
            for k, put in enumerate(puts):
                put(w, (x >> wide(shift * k)).astype(narrow), q)
        return unpack
    a = cc.read(src, t, ins)
    pa = cc.poison(src, ins)
    put = cc.write(dst, t, ins)
    return lambda w: put(w, a(w), pa(w))


RAW_NAME = {1: "b8", 2: "b16", 4: "b32", 8: "b64"}


def compile_cvta(ins, cc):
    p = ins.parts
    t = p[-1]
    to = "to" in p
    space = p[2] if to else p[1]
    if space not in ("shared", "global", "local", "const", "param"):
        raise EmulationError(f"unsupported cvta space in {ins.opcode} at PTX line {ins.line}")
    base = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW, "param": PARAM_WINDOW}.get(space, 0)
    a = cc.read(ins.operands[1], t, ins)
    pa = cc.poison(ins.operands[1], ins)
    put = cc.write(ins.operands[0], t, ins)
    b = np.uint64(base)
    if to:
        return lambda w: put(w, (a(w).astype(np.uint64) - b).astype(TYPED[t]), pa(w))
    return lambda w: put(w, (a(w).astype(np.uint64) + b).astype(TYPED[t]), pa(w))


HANDLERS = {"cvt": compile_cvt, "mov": compile_mov, "cvta": compile_cvta}
