"""Exact rounding of floating-point results to the PTX formats (PTX ISA 9.7.3 "Floating-Point Instructions",
5.2.5 "Floating Point Types" / "Alternate Floating-Point Data Formats").

Every emulated float result is computed first as a float64 that is either the exact result or its
*round-to-odd* value (``odd_sum``): a float64 with at least two more significand bits than the destination,
whose last bit records whether anything was lost.  Rounding that value once more, in any IEEE mode, gives the
correctly rounded result (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms
using rounding to odd", IEEE TC 2008), so no result is rounded twice.

``encode`` rounds float64 values to the bit patterns of f16, bf16, f32, e4m3 or e5m2 with integer
arithmetic (any of ``rn rz rm rp``, ``.satfinite``, ``.relu``); ``decode`` is its exact inverse.  ``f64_round``
rounds an exact ``Fraction`` to float64 in a directed mode, for the f64 operations float64 hardware cannot do
in one rounding (``fma.f64``, directed ``add/sub/mul/div/sqrt/rcp.f64``).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

#: name -> (exponent bits, significand bits, has infinities)
FORMATS = {"f16": (5, 10, True), "bf16": (8, 7, True), "f32": (8, 23, True), "e4m3": (4, 3, False),
           "e5m2": (5, 2, True)}
STORAGE = {8: np.uint8, 16: np.uint16, 32: np.uint32}
MODES = ("rn", "rz", "rm", "rp")


def _limits(fmt):
    eb, mb, inf = FORMATS[fmt]
    top = (1 << eb) - 1
    maxfin = (top << mb) - 1 if inf else (top << mb) | ((1 << mb) - 2)     # e4m3: S.1111.110 = 448
    return eb, mb, inf, maxfin


def canonical_nan(fmt) -> int:
    """The canonical NaN bits: sign 0, exponent and significand all ones (f32: 0x7FFFFFFF)."""
    eb, mb, _ = FORMATS[fmt]
    return (1 << (eb + mb)) - 1


def odd_sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b (float64) rounded to odd: exact when representable, else the neighbour with an odd last bit.

    TwoSum gives the exact error; a finite nonzero result never crosses zero (Hauser: tiny sums are exact)."""
    s = a + b                       # callers run under np.errstate (inf - inf is their NaN)
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    fix = (e != 0) & ((s.view(np.int64) & 1) == 0) & np.isfinite(s)
    if not fix.any():
        return s
    return np.where(fix, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)


def zero_sign(r: np.ndarray, a: np.ndarray, b: np.ndarray, mode) -> np.ndarray:
    """IEEE 754 6.3: an exact zero sum of nonzero (or differently signed) terms is -0 in .rm, else +0."""
    if mode != "rm":
        return r
    plus = (a == 0) & (b == 0) & ~np.signbit(a) & ~np.signbit(b)
    return np.where((r == 0) & ~plus, -0.0, r)


def encode(x, fmt: str, mode: str = "rn", satfinite: bool = False, relu: bool = False) -> np.ndarray:
    """float64 values (exact, or rounded to odd) -> bit patterns of fmt, rounded once in mode.

    Overflow follows IEEE 754 7.4 (``rz`` and the mode pointing towards zero give MAX_NORM); ``satfinite`` clamps
    overflow and infinities to +-MAX_NORM (NaN stays NaN); ``relu`` turns negative results and -0 into +0.  A
    format without infinities (e4m3) saturates on overflow.  NaN results are the canonical NaN."""
    eb, mb, has_inf, maxfin = _limits(fmt)
    x = np.asarray(x, np.float64)
    if relu:
        x = np.where(x <= 0, 0.0, x)
    sign = np.signbit(x) & ~np.isnan(x)
    a = np.abs(x)
    fin = np.isfinite(a)
    af = np.where(fin, a, 0.0)
    _, e = np.frexp(af)
    emin = 2 - (1 << (eb - 1))
    ex = np.maximum(e.astype(np.int64) - 1, emin)           # the exponent of the destination's quantum + mb
    q = np.ldexp(af, (mb - ex).astype(np.int32))            # exact: a power-of-two scaling
    n = np.floor(q)
    frac = q - n
    n = n.astype(np.int64)
    if mode == "rn":
        n = n + ((frac > 0.5) | ((frac == 0.5) & (n & 1 == 1)))
    elif mode == "rp":
        n = n + ((frac > 0) & ~sign)
    elif mode == "rm":
        n = n + ((frac > 0) & sign)
    elif mode != "rz":
        raise ValueError(f"unknown rounding mode {mode}")
    sub = e.astype(np.int64) - 1 < emin
    bits = np.where(af == 0, 0, np.where(sub, 0, (ex - emin) << mb) + n)     # a carry into the exponent is right
    inf_bits = ((1 << eb) - 1) << mb
    if has_inf and not satfinite:
        towards_zero = {"rn": False, "rz": True, "rp": sign, "rm": ~sign}[mode]
        big = np.where(towards_zero, maxfin, inf_bits)
        bits = np.where(bits > maxfin, big, bits)
        bits = np.where(fin, bits, inf_bits)
    else:
        bits = np.where((bits > maxfin) | ~fin, maxfin, bits)
    bits = bits | (sign.astype(np.int64) << (eb + mb))
    bits = np.where(np.isnan(x), canonical_nan(fmt), bits)
    return bits.astype(STORAGE[1 + eb + mb])


def decode(bits, fmt: str) -> np.ndarray:
    """Bit patterns of fmt -> their exact float64 values."""
    eb, mb, has_inf, _ = _limits(fmt)
    b = np.asarray(bits).astype(np.int64) & ((1 << (1 + eb + mb)) - 1)
    sign = (b >> (eb + mb)) & 1
    ef = (b >> mb) & ((1 << eb) - 1)
    m = b & ((1 << mb) - 1)
    bias = (1 << (eb - 1)) - 1
    mag = np.where(ef == 0, np.ldexp(m.astype(np.float64), 1 - bias - mb),
                   np.ldexp((m + (1 << mb)).astype(np.float64), (ef - bias - mb).astype(np.int32)))
    top = ef == (1 << eb) - 1
    if has_inf:
        mag = np.where(top, np.where(m == 0, np.inf, np.nan), mag)
    else:
        mag = np.where(top & (m == (1 << mb) - 1), np.nan, mag)
    return np.where(sign == 1, -mag, mag)


def f64_round(v: Fraction, mode: str, zero: float = 0.0) -> float:
    """An exact rational -> float64 rounded in mode (``zero``: the signed zero to return for an exact 0)."""
    if v == 0:
        return zero
    try:
        r = float(v)                                    # correctly rounded to nearest (int / int division)
    except OverflowError:
        r = math.inf if v > 0 else -math.inf
    if mode == "rn":
        return r
    if math.isinf(r):
        toward_zero = mode == "rz" or (mode == "rp") == (v < 0)
        return math.copysign(1.7976931348623157e308, r) if toward_zero else r
    exact = Fraction(r)
    if exact == v:
        return r
    if mode == "rz":
        return math.nextafter(r, 0.0) if abs(exact) > abs(v) else r
    if mode == "rm":
        return math.nextafter(r, -math.inf) if exact > v else r
    return math.nextafter(r, math.inf) if exact < v else r
