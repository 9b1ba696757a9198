"""An exact reference for the conformance tests: IEEE-style formats as Python ``Fraction``s and integers.

Independent of the emulator: values are rationals, rounding is integer arithmetic on them
(IEEE 754-2019 4.3 rounding-direction attributes; 7.4 overflow).  Zero results carry an explicit sign.
"""
from __future__ import annotations

import math
from fractions import Fraction


#: name -> (exponent bits, significand bits, has infinities)
FMT = {"f16": (5, 10, True), "bf16": (8, 7, True), "f32": (8, 23, True), "f64": (11, 52, True),
       "e4m3": (4, 3, False), "e5m2": (5, 2, True)}
NAN = "nan"


def value(bits: int, fmt: str):
    """bits -> Fraction, or (sign, 0) for a zero as ('zero', sign), 'nan', or ('inf', sign)."""
    eb, mb, has_inf = FMT[fmt]
    sign = (bits >> (eb + mb)) & 1
    ef = (bits >> mb) & ((1 << eb) - 1)
    m = bits & ((1 << mb) - 1)
    bias = (1 << (eb - 1)) - 1
    if ef == (1 << eb) - 1 and (has_inf or m == (1 << mb) - 1):
        if has_inf and m == 0:
            return ("inf", sign)
        return NAN
    if ef == 0 and m == 0:
        return ("zero", sign)
    mag = Fraction(m, 1 << mb) * Fraction(2) ** (1 - bias) if ef == 0 else \
        (1 + Fraction(m, 1 << mb)) * Fraction(2) ** (ef - bias)
    return -mag if sign else mag


def _floor_log2(a: Fraction) -> int:
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    return e


def round_bits(q: Fraction, fmt: str, mode: str = "rn", zero_sign: int = 0, satfinite: bool = False) -> int:
    """The exact rational q rounded to fmt in mode -> bits (an exact zero gets ``zero_sign``)."""
    eb, mb, has_inf = FMT[fmt]
    bias = (1 << (eb - 1)) - 1
    emin = 1 - bias
    top = eb + mb
    if q == 0:
        return zero_sign << top
    sign = int(q < 0)
    a = abs(q)
    qe = max(_floor_log2(a), emin) - mb
    scaled = a / Fraction(2) ** qe
    n = math.floor(scaled)
    rem = scaled - n
    up = {"rn": rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1), "rz": False,
          "rp": rem > 0 and not sign, "rm": rem > 0 and bool(sign)}[mode]
    n += up
    if n == 1 << (mb + 1):
        n, qe = n >> 1, qe + 1
    if n < 1 << mb:
        bits = n
    else:
        bits = ((qe + mb - emin + 1) << mb) | (n - (1 << mb))
    maxfin = ((1 << eb) - 1 << mb) - 1 if has_inf else ((1 << eb) - 1 << mb) | ((1 << mb) - 2)
    if bits > maxfin:
        toward_zero = mode == "rz" or (mode == "rp" and sign) or (mode == "rm" and not sign)
        bits = maxfin if (toward_zero or satfinite or not has_inf) else ((1 << eb) - 1) << mb
    return (sign << top) | bits


def ulp32(x: float) -> float:
    """The f32 ulp at |x| (the spacing above |x|; subnormal spacing below the normal range)."""
    a = abs(x)
    if a < 2.0 ** -126:
        return 2.0 ** -149
    return 2.0 ** (math.floor(math.log2(a)) - 23)
