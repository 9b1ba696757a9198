"""mov (with vector packing), cvt (every rounding mode, saturation, packed half and fp8 forms), cvta.

PTX ISA 9.7.9.21 (cvt): every conversion rounds once, exactly (``floats.encode`` for the 16- and 8-bit formats,
float64 -> float32 casts for f32, which are correctly rounded from an exact or round-to-odd float64).  Integer
sources of 64 bits reach floats through an exact round-to-odd float64 (``floats.odd_sum`` of their two halves),
so u64/s64 -> f32 is not rounded twice.  Float to integer conversions saturate to the destination's range and
map NaN to 0 (9.7.9.21: "float-to-integer conversions ... saturate"; NaN -> 0).  Packed conversions
``cvt.{rn,rz}{.relu}{.satfinite}.{f16x2,bf16x2}.f32 d, a, b`` and ``cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.f32
d, a, b`` put ``cvt(a)`` in the upper half of d and ``cvt(b)`` in the lower; ``cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2}
d, a`` widens the lower byte of a into the lower half of d.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..errors import EmulationError
from .floats import decode, encode, f64_round, odd_sum
from .values import LANES, RAW, TYPED, WIDTH, por

SHARED_WINDOW = 1 << 44     # generic address of shared offset 0 (any address in [W, W + 2^32) is shared)
LOCAL_WINDOW = 1 << 45
PARAM_WINDOW = 1 << 46    # generic address of .param offset 0 (cvta.param: kernel parameters, tensor maps)
FLOAT_T = ("f16", "bf16", "f32", "f64")
F8 = {"e4m3x2": "e4m3", "e5m2x2": "e5m2"}
HALF2 = {"f16x2": "f16", "bf16x2": "bf16"}
F32_TINY = 1.1754943508222875e-38


def _to_float64(x, t):
    if t == "bf16":
        return decode(x, "bf16")
    return x.astype(np.float64)


def round_float(x64, dt, mode, satfinite=False, relu=False):
    """float64 (exact or rounded to odd) -> values of float type dt ('f16'/'f32'/'bf16'/'f64'), one rounding."""
    mode = mode or "rn"
    if dt == "f64":
        return x64
    if dt == "bf16" or (dt == "f16" and (mode != "rn" or satfinite or relu)):
        bits = encode(x64, dt, mode, satfinite, relu)
        return bits.view(np.float16) if dt == "f16" else bits
    npt = np.float16 if dt == "f16" else np.float32
    if mode == "rn":
        return x64.astype(npt)          # the callers' np.errstate silences overflow to inf
    with np.errstate(all="ignore"):
        r = x64.astype(npt)
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


def _int_to_float(x, st, dt, mode):
    """Integers -> float dt, rounded once: 64-bit sources through an exact round-to-odd float64."""
    if WIDTH[st] < 8:
        return round_float(x.astype(np.float64), dt, mode)
    if dt == "f64":
        return np.array([f64_round(Fraction(int(a)), mode or "rn") for a in x.tolist()], np.float64)
    hi = (x >> np.array(32, x.dtype)).astype(np.float64) * 4294967296.0
    lo = (x.view(np.uint64) & np.uint64(0xFFFFFFFF)).astype(np.float64)
    return round_float(odd_sum(hi, lo), dt, mode)


def _float_to_int(v, dt, mode):
    v = INT_ROUND.get(mode, np.trunc)(v)
    info = np.iinfo(TYPED[dt])
    if WIDTH[dt] == 8:
        lo, hi = int(info.min), int(info.max)
        return np.array([0 if a != a else (hi if a >= hi else lo if a <= lo else int(a)) for a in v.tolist()],
                        TYPED[dt])
    return np.where(np.isnan(v), 0, np.clip(v, info.min, info.max)).astype(TYPED[dt])


def convert(x, st, dt, mode, sat, ftz=False, satfinite=False, relu=False):
    """Values x of PTX type st -> PTX type dt."""
    sf, df = st in FLOAT_T, dt in FLOAT_T
    if sf:
        v = _to_float64(x, st)
        if ftz and st == "f32":
            v = np.where(np.abs(v) < F32_TINY, np.copysign(0.0, v), v)
        if not df:
            return _float_to_int(v, dt, mode)
        if mode in INT_ROUND:
            v = INT_ROUND[mode](v)
            mode = None
        if sat:
            v = np.where(np.isnan(v), 0.0, np.clip(v, 0.0, 1.0))
        r = round_float(v, dt, mode, satfinite, relu)
        if ftz and dt == "f32":
            r = np.where(np.abs(r) < np.float32(F32_TINY), np.copysign(np.float32(0), r), r).astype(np.float32)
        return r
    if df:
        return _int_to_float(x, st, dt, mode)
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
    mode = next((m for m in p[1:-2] if m in ("rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi")), None)
    flags = dict(sat="sat" in p, ftz="ftz" in p, satfinite="satfinite" in p, relu="relu" in p)
    if dt in HALF2 or dt in F8:
        return _compile_packed(ins, cc, dt, st, mode or "rn", flags)
    if dt not in TYPED or st not in TYPED or dt.endswith("x2") or st.endswith("x2"):
        raise EmulationError(f"unsupported cvt types in {ins.opcode} at PTX line {ins.line}")
    a = cc.read(ins.operands[1], st, ins)
    pa = cc.poison(ins.operands[1], ins)
    put = cc.write(ins.operands[0], dt, ins)

    def run(w):
        with np.errstate(all="ignore"):
            put(w, convert(a(w), st, dt, mode, **flags), pa(w))
    return run


def _compile_packed(ins, cc, dt, st, mode, flags):
    """Packed cvt (PTX ISA 9.7.9.21): two f32 sources -> f16x2 / bf16x2 / e4m3x2 / e5m2x2 (a in the upper half),
    or e4m3x2 / e5m2x2 -> f16x2 (the lower byte to the lower half)."""
    if st == "f32" and mode in ("rn", "rz") and not flags["sat"] and not flags["ftz"]:
        fmt = HALF2.get(dt) or F8[dt]
        if fmt in ("e4m3", "e5m2") and (mode != "rn" or not flags["satfinite"]):
            raise EmulationError(f"{ins.opcode} needs .rn.satfinite at PTX line {ins.line}")
        shift = 16 if dt in HALF2 else 8
        out_t = "b32" if dt in HALF2 else "b16"
        a, b = (cc.read(o, "f32", ins) for o in ins.operands[1:3])
        pa, pb = (cc.poison(o, ins) for o in ins.operands[1:3])
        put = cc.write(ins.operands[0], out_t, ins)

        def run(w):
            with np.errstate(all="ignore"):
                hi = encode(a(w).astype(np.float64), fmt, mode, flags["satfinite"], flags["relu"])
                lo = encode(b(w).astype(np.float64), fmt, mode, flags["satfinite"], flags["relu"])
            put(w, (hi.astype(np.uint32) << shift | lo).astype(TYPED[out_t]), por(pa(w), pb(w)))
        return run
    if dt == "f16x2" and st in F8 and mode == "rn" and not (flags["sat"] or flags["ftz"] or flags["satfinite"]):
        a = cc.read(ins.operands[1], "b16", ins)
        pa = cc.poison(ins.operands[1], ins)
        put = cc.write(ins.operands[0], "b32", ins)

        def widen(w):
            x = a(w)
            hi = encode(decode(x >> np.uint16(8), F8[st]), "f16", "rn", False, flags["relu"])
            lo = encode(decode(x & np.uint16(0xFF), F8[st]), "f16", "rn", False, flags["relu"])
            put(w, hi.astype(np.uint32) << 16 | lo, pa(w))
        return widen
    raise EmulationError(f"unsupported packed cvt {ins.opcode} at PTX line {ins.line}")


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
