"""Floating-point arithmetic (PTX ISA 9.7.3 "Floating-Point Instructions" and 9.7.4 "Half Precision
Floating-Point Instructions"): f32, f64, f16, bf16 and the packed f16x2 / bf16x2, each result rounded once.

- ``add sub mul fma mad div sqrt rcp`` with ``.rn .rz .rm .rp``: an exact or round-to-odd float64 rounded once
  to the destination (``floats``); f64 results that float64 hardware cannot give in one rounding (``fma.f64``,
  directed ``mul/div/sqrt/rcp.f64``) are computed with ``fractions.Fraction``.  ``mad.f32`` / ``mad.f64`` are
  ``fma`` (9.7.3.5: on sm_20+ ``mad.rnd.f32`` is ``fma.rnd.f32``).
- ``.ftz`` (f32, f16, f16x2): subnormal inputs and results (after rounding) become zero of the same sign.
- ``.sat`` (f32, f16, f16x2): the result is clamped to [0, 1], NaN becomes +0 (-0 stays).  ``.relu`` (half fma, cvt):
  negative results become +0, NaN stays NaN.
- ``min``/``max``: -0 < +0; a NaN operand yields the other operand, two NaN operands the canonical NaN;
  ``.NaN`` propagates NaN (canonical).  ``neg``/``abs`` flip / clear the sign bit.
- ``.approx`` / ``.full`` (``div rcp sqrt rsqrt ex2 lg2 sin cos tanh``): computed in float64 and rounded to
  nearest, i.e. within 0.5 ulp (plus float64's own error) of the exact result: inside every maximum error the
  ISA states for them, but not the hardware's bits.  ``div.approx.f32`` keeps the ISA's rule for a divisor
  with 2^126 < |b| < 2^128: the result is 0 (of a/b's sign), NaN when a is infinite (9.7.3.8).
Half results (f16, bf16, both halves of f16x2 / bf16x2) with NaN are the canonical NaN 0x7FFF.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..errors import EmulationError
from .convert import round_float
from .floats import f64_round, odd_sum, zero_sign
from .values import por

HALF = {"f16": "f16", "bf16": "bf16", "f16x2": "f16", "bf16x2": "bf16"}
TINY = {"f32": 1.1754943508222875e-38, "f16": 6.103515625e-05, "bf16": 1.1754943508222875e-38}
ROUNDS = ("rn", "rz", "rm", "rp")
F32_NAN = np.float32(np.uint32(0x7FFFFFFF).view(np.float32))


def _f16_value(bits):
    return bits.astype(np.uint16).view(np.float16).astype(np.float64)


def _bf16_value(bits):
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)


VALUE = {"f16": _f16_value, "bf16": _bf16_value}


def _unpack(t):
    """PTX type -> (register read type, raw -> list of float64 components, low first)."""
    if t in ("f32", "f64", "f16"):
        return t, lambda x: [x.astype(np.float64)]
    if t == "bf16":
        return t, lambda x: [_bf16_value(x)]
    f = VALUE[HALF[t]]
    return "b32", lambda x: [f(x & np.uint32(0xFFFF)), f(x >> np.uint32(16))]


def _half_bits(v, fmt):
    """float64 (exact or rounded to odd) -> f16 / bf16 bits, rounded once to nearest even; canonical NaN.

    f16: numpy's float64 -> float16 cast is one correct rounding.  bf16: round to odd into float32 first
    (24 >= 8 + 2 bits), then to nearest even into bf16 by integer arithmetic."""
    nan = np.isnan(v)
    if fmt == "f16":
        bits = v.astype(np.float16).view(np.uint16)
    else:
        r = v.astype(np.float32)
        inexact = (r.astype(np.float64) != v) & np.isfinite(r) & ~nan
        even = (r.view(np.uint32) & 1) == 0
        fix = inexact & even
        if fix.any():
            r = np.where(fix, np.nextafter(r, np.where(v > r, np.float32(np.inf), np.float32(-np.inf))), r)
        b = r.view(np.uint32).astype(np.uint64)
        bits = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, np.uint16(0x7FFF), bits) if nan.any() else bits


def _pack(t, rs):
    """Results (f32 / f64 values, or f16 / bf16 bits) -> values of the register read type."""
    if t in ("f32", "f64"):
        return rs[0].astype(np.float32) if t == "f32" else rs[0]
    if t == "f16":
        return rs[0].view(np.float16)
    if t == "bf16":
        return rs[0]
    return rs[0].astype(np.uint32) | (rs[1].astype(np.uint32) << np.uint32(16))


def _round(v, fmt, mode):
    if fmt == "f64":
        return v
    return round_float(v, "f32", mode).astype(np.float64)


def _flush(x, fmt):
    return np.where(np.abs(x) < TINY[fmt], np.copysign(0.0, x), x)


# --- exact (or round-to-odd) float64 values of the operations, for every format but f64 ----------------------

def _add(x, y, mode):
    return zero_sign(odd_sum(x, y), x, y, mode)


def _fma(x, y, z, mode):
    p = x * y                       # exact: at most 2 x 24 significand bits, exponent well inside float64's
    return zero_sign(odd_sum(p, z), p, z, mode)


def _minmax(op, nan_prop):
    def f(x, y, mode):
        if op == "min":
            pick = (x < y) | ((x == y) & np.signbit(x) & ~np.signbit(y))
        else:
            pick = (x > y) | ((x == y) & ~np.signbit(x) & np.signbit(y))
        r = np.where(pick, x, y)
        xn, yn = np.isnan(x), np.isnan(y)
        if nan_prop:
            return np.where(xn | yn, np.nan, r)
        return np.where(xn, np.where(yn, np.nan, y), np.where(yn, x, r))
    return f


EXACT = {
    "add": _add, "sub": lambda x, y, m: _add(x, -y, m), "mul": lambda x, y, m: x * y,
    "fma": _fma, "mad": _fma, "div": lambda x, y, m: x / y, "rcp": lambda x, m: 1.0 / x,
    "sqrt": lambda x, m: np.sqrt(x), "rsqrt": lambda x, m: 1.0 / np.sqrt(x), "ex2": lambda x, m: np.exp2(x),
    "lg2": lambda x, m: np.log2(x), "sin": lambda x, m: np.sin(x), "cos": lambda x, m: np.cos(x),
    "tanh": lambda x, m: np.tanh(x), "abs": lambda x, m: np.abs(x), "neg": lambda x, m: -x,
    "min": _minmax("min", False), "max": _minmax("max", False),
    "min.NaN": _minmax("min", True), "max.NaN": _minmax("max", True),
}


def _fma_rn32(x, y, z, mode):
    """fma.rn.f32 fast path: float64 x*y+z, unless it lands on an f32 midpoint or below f32's normal range
    (the only places where rounding it again to f32 differs from rounding the exact value once)."""
    s = x * y + z
    low = s.view(np.int64) & 0x1FFFFFFF
    if (low == 0x10000000).any() or (np.abs(s) < 2.0 ** -125).any():
        return _fma(x, y, z, mode)
    return s


def _div_approx(x, y, mode):
    """div.approx.f32: a * (1 / b); for 2^126 < |b| < 2^128, 0 (NaN for an infinite a), as the ISA says."""
    q = x / y
    big = (np.abs(y) > 2.0 ** 126) & np.isfinite(y)
    if not big.any():
        return q
    return np.where(big, np.where(np.isinf(x), np.nan, np.copysign(0.0, q)), q)


#: f32 round-to-nearest: float64 then one cast is innocuous for + - * / sqrt of f32 operands (53 >= 2 * 24 + 2;
#: Figueroa, "When is double rounding innocuous?", SIGNUM 1995); fma goes through _fma_rn32.
PLAIN_RN = {"add": lambda x, y, m: x + y, "sub": lambda x, y, m: x - y, "fma": _fma_rn32, "mad": _fma_rn32}
NO_ROUND = {"abs", "neg", "min", "max", "min.NaN", "max.NaN"}
ARITY = {"fma": 3, "mad": 3, "add": 2, "sub": 2, "mul": 2, "div": 2, "min": 2, "max": 2}


# --- f64: float64 is the destination, so anything float64 hardware rounds differently goes through Fraction ---

def _two_sum_directed(x, y, mode):
    s = x + y
    bb = s - x
    e = (x - (s - bb)) + (y - bb)
    fin = np.isfinite(x) & np.isfinite(y)
    up = {"rz": (e != 0) & ((e > 0) != (s > 0)), "rm": e < 0, "rp": e > 0}[mode]
    direction = {"rz": np.where(s > 0, -np.inf, np.inf), "rm": -np.inf, "rp": np.inf}[mode]
    r = np.where(fin & np.isfinite(s) & up, np.nextafter(s, direction), s)
    big = fin & np.isinf(s)
    keep = {"rz": False, "rm": s < 0, "rp": s > 0}[mode]
    r = np.where(big & ~keep, np.copysign(np.finfo(np.float64).max, s), r)
    return zero_sign(r, x, y, mode)


def _lanes64(fn, xs, fast):
    """Per lane: fn(Fractions...) for all-finite lanes where ``fast`` (numpy's result) is not final."""
    out = fast.copy()
    fin = np.all([np.isfinite(x) for x in xs], axis=0)
    for i in np.nonzero(fin)[0]:
        v = fn(*[float(x[i]) for x in xs])
        if v is not None:
            out[i] = v
    return out


def _fma64_lane(mode):
    def f(x, y, z):
        p = Fraction(x) * Fraction(y)
        p0 = math.copysign(0.0, x) * math.copysign(1.0, y)     # the product's sign, used when it is zero
        same = p == 0 and z == 0 and math.copysign(1, p0) == math.copysign(1, z)
        zero = p0 if same else (-0.0 if mode == "rm" else 0.0)  # IEEE 754 6.3
        return f64_round(p + Fraction(z), mode, zero)
    return f


def _f64(op, xs, mode):
    with np.errstate(all="ignore"):
        if op in ("add", "sub"):
            y = xs[1] if op == "add" else -xs[1]
            return xs[0] + y if mode == "rn" else _two_sum_directed(xs[0], y, mode)
        if op in ("fma", "mad"):
            return _lanes64(_fma64_lane(mode), xs, xs[0] * xs[1] + xs[2])
        fast = EXACT[op](*xs, mode)
        if mode == "rn" or op in NO_ROUND or op not in ("mul", "div", "rcp", "sqrt"):
            return fast
        if op == "mul":
            return _lanes64(lambda x, y: None if x == 0 or y == 0 else f64_round(Fraction(x) * Fraction(y), mode), xs,
                            fast)
        if op in ("div", "rcp"):
            num, den = (xs[0], xs[1]) if op == "div" else (np.ones_like(xs[0]), xs[0])
            return _lanes64(lambda x, y: None if x == 0 or y == 0 else f64_round(Fraction(x) / Fraction(y), mode),
                            [num, den], fast)
        return _lanes64(lambda x: None if x <= 0 else _sqrt64(x, mode), xs, fast)


def _sqrt64(x, mode):
    r = math.sqrt(x)
    sq, fx = Fraction(r) ** 2, Fraction(x)
    if sq == fx or mode == "rn":
        return r
    if mode == "rp":
        return math.nextafter(r, math.inf) if sq < fx else r
    return math.nextafter(r, 0.0) if sq > fx else r


# --- compiling -------------------------------------------------------------------------------------------

def _opname(ins):
    p = ins.parts
    op = p[0]
    if op in ("min", "max") and "NaN" in p:
        op += ".NaN"
    if "xorsign" in p:
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
    return op


def compile_float(ins, cc):
    """add sub mul fma mad div min max abs neg rcp sqrt rsqrt ex2 lg2 sin cos tanh on a float type."""
    p = ins.parts
    t = p[-1]
    op = _opname(ins)
    if op not in EXACT or t not in ("f32", "f64") + tuple(HALF):
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
    mode = next((m for m in p[1:-1] if m in ROUNDS), "rn")
    if t in HALF and mode != "rn":
        raise EmulationError(f"unsupported rounding .{mode} in {ins.opcode} at PTX line {ins.line}")
    fmt = "f64" if t == "f64" else ("f32" if t == "f32" else HALF[t])
    ftz = "ftz" in p and fmt in ("f32", "f16")
    sat, relu = "sat" in p, "relu" in p
    n = ARITY.get(p[0], 1)
    rt, unpack = _unpack(t)
    srcs = [cc.read(o, rt, ins) for o in ins.operands[1:1 + n]]
    pois = [cc.poison(o, ins) for o in ins.operands[1:1 + n]]
    put = cc.write(ins.operands[0], rt, ins)
    fn = _div_approx if (op == "div" and "approx" in p and fmt == "f32") else EXACT[op]
    rounds = op not in NO_ROUND

    half = fmt in ("f16", "bf16")

    def component(xs):
        if ftz:
            xs = [_flush(x, fmt) for x in xs]
        if fmt == "f64":
            return _f64(op, xs, mode)
        r = fn(*xs, mode)
        if half:
            bits = _half_bits(r, fmt)
            if not (ftz or sat or relu):
                return bits
            r = VALUE[fmt](bits)
        elif rounds:
            r = _round(r, fmt, mode)
        if ftz:
            r = _flush(r, fmt)
        if sat:
            r = np.where(np.isnan(r), 0.0, np.clip(r, 0.0, 1.0))
        if relu:
            r = np.where(r <= 0, 0.0, r)
        return _half_bits(r, fmt) if half else r

    fast32 = fmt == "f32" and not (ftz or sat or relu) and rounds
    if fast32 and mode == "rn":
        fn = PLAIN_RN.get(op, fn)

    def run(w):
        with np.errstate(all="ignore"):
            comps = [unpack(s(w)) for s in srcs]
            if fast32:
                r = round_float(fn(*[c[0] for c in comps], mode), "f32", mode)
            else:
                r = _pack(t, [component([c[k] for c in comps]) for k in range(len(comps[0]))])
                if fmt == "f32" and op.startswith(("min", "max")):
                    r = np.where(np.isnan(r), F32_NAN, r)
        put(w, r, por(*[q(w) for q in pois]))
    return run
