"""Exact arithmetic in the PTX emulator (PTX ISA 9.7.3 floating-point, 9.7.4 half-precision, 9.7.9.21 cvt,
9.7.3.x setp/min/max), each result checked bit for bit against the exact rational reference in arith_ref.

Every kernel is hand-written PTX (one element per thread, several CTAs, inputs and outputs as 64-bit words)
and assembles with ptxas -arch=sm_90a (test_the_kernels_are_legal_ptx).  Inputs are seeded samples that
stress rounding: random bit patterns, specials (+-0, +-inf, NaN, subnormals, MAX), near-cancelling operands,
exact ties and double-rounding traps.
"""
from __future__ import annotations

import math
import shutil
from fractions import Fraction

import numpy as np
import pytest
from arith_ref import FMT, NAN, round_bits, ulp32, value
from ptxkit import ptxas

from tvm_twill import emulator as E

HDR = ".version 8.7\n.target sm_90a\n.address_size 64\n"
REGS = """    .reg .pred %p<8>;
    .reg .b16 %h<40>;
    .reg .b32 %r<40>;
    .reg .f32 %f<40>;
    .reg .b64 %rd<64>;
    .reg .f64 %fd<40>;
"""
BLOCK = 128
KERNELS: dict[str, str] = {}
RNG = np.random.default_rng(34)
MODES = ("rn", "rz", "rm", "rp")


def kernel(name: str, body: str, nin: int, nout: int) -> str:
    """An entry reading nin 64-bit words per thread into %rd10.. (also %r10.. / %f10.. / %fd10.. / %h10..:
    the low 32 / 32 / 64 / 16 bits) and storing nout words %rd20.. that ``body`` sets."""
    lines = ["    ld.param.u64 %rd1, [pin];", "    ld.param.u64 %rd2, [pout];",
             "    mov.u32 %r1, %ctaid.x;", "    mov.u32 %r2, %ntid.x;", "    mov.u32 %r3, %tid.x;",
             "    mad.lo.s32 %r4, %r1, %r2, %r3;", f"    mul.wide.u32 %rd3, %r4, {8 * nin};",
             "    add.s64 %rd4, %rd1, %rd3;", f"    mul.wide.u32 %rd5, %r4, {8 * nout};",
             "    add.s64 %rd6, %rd2, %rd5;"]
    for i in range(nin):
        lines += [f"    ld.global.u64 %rd{10 + i}, [%rd4+{8 * i}];", f"    cvt.u32.u64 %r{10 + i}, %rd{10 + i};",
                  f"    mov.b32 %f{10 + i}, %r{10 + i};", f"    mov.b64 %fd{10 + i}, %rd{10 + i};",
                  f"    cvt.u16.u32 %h{10 + i}, %r{10 + i};"]
    lines.append(body)
    lines += [f"    st.global.u64 [%rd6+{8 * i}], %rd{20 + i};" for i in range(nout)]
    KERNELS[name] = (f".visible .entry {name}(.param .u64 pin, .param .u64 pout)\n{{\n{REGS}"
                     + "\n".join(lines) + "\n    ret;\n}\n")
    return name


def run(name: str, inputs: np.ndarray, nout: int) -> np.ndarray:
    """Run entry ``name`` on an (N, nin) uint64 array; returns the (N, nout) outputs."""
    n = len(inputs)
    grid = -(-n // BLOCK)
    inp = np.zeros((grid * BLOCK, inputs.shape[1]), np.uint64)
    inp[:n] = inputs
    out = np.zeros((grid * BLOCK, nout), np.uint64)
    launch = E.Launch(name, (grid, 1, 1), (BLOCK, 1, 1), 0, (("buffer", 0, 0), ("buffer", 1, 0)))
    report = E.run_ptx(HDR + KERNELS[name], [launch], inp, out)
    assert report.ok, report.findings
    return out[:n]


def f32out(reg: str, k: int) -> str:
    """Body lines moving f32 register reg into output word k."""
    return f"    mov.b32 %r{30 + k}, {reg};\n    cvt.u64.u32 %rd{20 + k}, %r{30 + k};"


# --- sample inputs ---------------------------------------------------------------------------------------

def f32_samples(n: int) -> np.ndarray:
    """f32 bit patterns: random bits, specials, subnormals, small integers and values near 1."""
    special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F7FFFFF, 0xFF7FFFFF, 1, 0x80000001,
                        0x007FFFFF, 0x00800000, 0x3F800000, 0xBF800000, 0x33800000, 0x4B800000], np.uint32)
    parts = [special, RNG.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32),
             np.float32(RNG.integers(-64, 64, n)).view(np.uint32),
             (np.float32(RNG.uniform(0.5, 2, n)) * np.float32(2.0) ** RNG.integers(-30, 30, n)
              ).astype(np.float32).view(np.uint32),
             RNG.integers(0, 0x00800000, n // 4, dtype=np.uint64).astype(np.uint32)]
    return np.concatenate(parts)


def _pairs(a: np.ndarray) -> np.ndarray:
    """Second operands for a: unrelated values, near-equal (cancellation), and 2^-k scaled (ties, sticky bits)."""
    n = len(a)
    fa = a.view(np.float32)
    other = RNG.permutation(a)
    near = (a.astype(np.int64) + RNG.integers(-3, 4, n)).astype(np.uint32)
    neg = near ^ np.uint32(0x80000000)
    with np.errstate(all="ignore"):
        scaled = (fa * np.float32(2.0) ** RNG.integers(-30, -20, n).astype(np.float32)).view(np.uint32)
    pick = RNG.integers(0, 4, n)
    return np.choose(pick, [other, near, neg, scaled]).astype(np.uint32)


def as_in(*cols) -> np.ndarray:
    return np.stack([np.asarray(c).astype(np.uint64) for c in cols], 1)


def fl(bits: int, fmt: str) -> float:
    """Bits of fmt -> their exact value as a Python float (every format here is a subset of float64)."""
    v = value(int(bits), fmt)
    if v == NAN:
        return math.nan
    if isinstance(v, tuple):
        return math.copysign(math.inf if v[0] == "inf" else 0.0, -1.0 if v[1] else 1.0)
    return float(v)


def to_bits(x: float, fmt: str, mode: str = "rn", zero_sign=None) -> int | str:
    """A float result (exact, or special) -> bits of fmt; NaN -> NAN."""
    eb, mb, _ = FMT[fmt]
    if math.isnan(x):
        return NAN
    if math.isinf(x):
        return (int(x < 0) << (eb + mb)) | (((1 << eb) - 1) << mb)
    return round_bits(Fraction(x), fmt, mode, int(math.copysign(1, x) < 0) if zero_sign is None else zero_sign)


# --- the reference -------------------------------------------------------------------------------------

def _zero_sign_sum(t1: float, t2: float, mode: str) -> int:
    """IEEE 754 6.3: exact zero sum -> the terms' sign if both are zeros of one sign, else -0 in rm, +0."""
    if t1 == 0 and t2 == 0 and math.copysign(1, t1) == math.copysign(1, t2):
        return int(math.copysign(1, t1) < 0)
    return int(mode == "rm")


def ref(op: str, xs: list, fmt: str, mode: str = "rn", ftz: bool = False):
    """The exactly rounded result bits (or NAN) of op on the values of bit patterns xs in fmt."""
    v = [fl(x, fmt) for x in xs]
    tiny = {"f32": 2.0 ** -126, "f16": 2.0 ** -14}.get(fmt, 0.0)
    if ftz:
        v = [math.copysign(0.0, x) if 0 < abs(x) < tiny else x for x in v]
    r = _ref_value(op, v, fmt, mode)
    if ftz and r != NAN:
        eb, mb, _ = FMT[fmt]
        if (r >> mb) & ((1 << eb) - 1) == 0:
            r &= 1 << (eb + mb)
    return r


def _ref_value(op, v, fmt, mode):
    if any(math.isnan(x) for x in v):
        return NAN
    with np.errstate(all="ignore"):
        special = any(math.isinf(x) for x in v) or (op in ("div", "rcp") and v[-1] == 0) or \
            (op == "sqrt" and (v[0] <= 0))
        if special:
            f = np.float64
            r = {"add": lambda: f(v[0]) + v[1], "sub": lambda: f(v[0]) - v[1], "mul": lambda: f(v[0]) * v[1],
                 "fma": lambda: f(v[0]) * v[1] + v[2], "div": lambda: f(v[0]) / f(v[1]),
                 "rcp": lambda: 1.0 / f(v[0]), "sqrt": lambda: np.sqrt(f(v[0]))}[op]()
            return to_bits(float(r), fmt)
    q = [Fraction(x) for x in v]
    if op in ("add", "sub", "fma"):
        exact = (q[0] * q[1] + q[2]) if op == "fma" else (q[0] + q[1] if op == "add" else q[0] - q[1])
        if exact != 0:
            return round_bits(exact, fmt, mode)
        if op == "fma":       # the product's sign when it is zero, else any nonzero term
            t1 = math.copysign(0.0, v[0]) * math.copysign(1.0, v[1]) if q[0] * q[1] == 0 else 1.0
        else:
            t1 = v[0]
        t2 = v[2] if op == "fma" else (v[1] if op == "add" else -v[1])
        return round_bits(exact, fmt, mode, _zero_sign_sum(t1, t2, mode))
    sign = int((math.copysign(1, v[0]) < 0) != (op in ("mul", "div") and math.copysign(1, v[1]) < 0))
    if op == "mul":
        return round_bits(q[0] * q[1], fmt, mode, sign)
    if op == "div":
        return round_bits(q[0] / q[1], fmt, mode, sign)
    if op == "rcp":
        return round_bits(1 / q[0], fmt, mode, sign)
    return _sqrt_bits(q[0], fmt, mode)


def _sqrt_bits(q: Fraction, fmt: str, mode: str) -> int:
    """Correctly rounded sqrt of q > 0: bracket by the rounded candidates' squares."""
    eb, mb, _ = FMT[fmt]
    guess = round_bits(Fraction(math.sqrt(float(q))), fmt, "rz")
    cands = [guess + d for d in range(-2, 3) if guess + d > 0]
    vals = [(value(c, fmt), c) for c in cands]
    below = max((c for x, c in vals if x * x <= q), key=lambda c: value(c, fmt))
    xb = value(below, fmt)
    if xb * xb == q:
        return below
    above = below + 1
    xa = value(above, fmt)
    if mode in ("rz", "rm"):
        return below
    if mode == "rp":
        return above
    mid = (xa + xb) / 2
    return below if mid * mid > q else above         # no ties: sqrt of a float is never a midpoint


def check(got: np.ndarray, want: list, fmt: str, what: str):
    """Bits equal, or both NaN."""
    bad = []
    for i, (g, w) in enumerate(zip(got.tolist(), want)):
        g = int(g)
        if w == NAN:
            if value(g, fmt) != NAN:
                bad.append((i, hex(g), "NaN"))
        elif g != w:
            bad.append((i, hex(g), hex(w)))
    assert not bad, f"{what}: {len(bad)} wrong, first {bad[:5]}"


# --- f32 / f64 arithmetic in every rounding mode ---------------------------------------------------------

def _f32_binary_kernel(op, mod=""):
    body = "\n".join(f"    {op}.{m}{mod}.f32 %f{20 + k}, %f10, %f11;\n" + f32out(f"%f{20 + k}", k)
                     for k, m in enumerate(MODES))
    return kernel(f"f32_{op}{mod.replace('.', '_')}", body, 2, 4)


for _op in ("add", "sub", "mul", "div"):
    _f32_binary_kernel(_op)
_f32_binary_kernel("add", ".ftz")
_f32_binary_kernel("mul", ".ftz")


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_f32_binary_ops_round_once_in_every_mode(op):
    """add/sub/mul/div.{rn,rz,rm,rp}.f32 (PTX ISA 9.7.3.1-9.7.3.8): IEEE 754 results, one rounding each."""
    a = f32_samples(600)
    b = _pairs(a)
    if op == "add":      # ties and sticky bits far below the last place
        a = np.concatenate([a, np.float32([1.0, 1.0, -1.0, 3.0]).view(np.uint32)])
        b = np.concatenate([b, np.float32([2.0 ** -24, 2.0 ** -60, 2.0 ** -60, -3.0]).view(np.uint32)])
    out = run(f"f32_{op}", as_in(a, b), 4)
    for k, m in enumerate(MODES):
        check(out[:, k], [ref(op, [x, y], "f32", m) for x, y in zip(a.tolist(), b.tolist())], "f32", f"{op}.{m}")


@pytest.mark.parametrize("op", ["add", "mul"])
def test_ftz_flushes_subnormal_inputs_and_results_keeping_the_sign(op):
    """.ftz (9.7.3): subnormal sources and results become zero of the same sign."""
    a = np.concatenate([f32_samples(200), np.uint32([1, 0x80000001, 0x00400000, 0x00800000, 0x80800000])])
    b = np.concatenate([_pairs(a[:-5]), np.float32([1.0, 1.0, 0.5, 0.5, 0.5]).view(np.uint32)])
    out = run(f"f32_{op}_ftz", as_in(a, b), 4)
    for k, m in enumerate(MODES):
        check(out[:, k], [ref(op, [x, y], "f32", m, ftz=True) for x, y in zip(a.tolist(), b.tolist())], "f32",
              f"{op}.{m}.ftz")


kernel("f32_fma", "\n".join(f"    fma.{m}.f32 %f{20 + k}, %f10, %f11, %f12;\n" + f32out(f"%f{20 + k}", k)
                            for k, m in enumerate(MODES)) + "\n    mad.rn.f32 %f30, %f10, %f11, %f12;\n"
       + f32out("%f30", 4), 3, 5)


def test_fma_f32_rounds_once_and_mad_is_fma():
    """fma.{rn,rz,rm,rp}.f32 (9.7.3.6): a*b+c with one rounding (float64 would round twice); mad.rn.f32 is
    fma.rn.f32 on sm_20+ (9.7.3.5)."""
    a = f32_samples(500)
    b = _pairs(a)
    with np.errstate(all="ignore"):
        p = a.view(np.float32).astype(np.float64) * b.view(np.float32)
        c = np.where(RNG.integers(0, 2, len(a)) == 1, (-p).astype(np.float32),
                     RNG.permutation(a).view(np.float32)).astype(np.float32).view(np.uint32)
    one = np.float32(1 + 2.0 ** -12).view(np.uint32)       # (1+2^-12)^2 + 2^-70: float64 lands on a tie
    a = np.concatenate([a, [one, one]]).astype(np.uint32)
    b = np.concatenate([b, [one, one]]).astype(np.uint32)
    c = np.concatenate([c, np.float32([2.0 ** -70, -2.0 ** -70]).view(np.uint32)]).astype(np.uint32)
    out = run("f32_fma", as_in(a, b, c), 5)
    args = list(zip(a.tolist(), b.tolist(), c.tolist()))
    for k, m in enumerate(MODES):
        check(out[:, k], [ref("fma", list(x), "f32", m) for x in args], "f32", f"fma.{m}")
    np.testing.assert_array_equal(out[:, 4], out[:, 0])
    assert int(out[-2, 0]) == np.float32(1 + 2.0 ** -11 + 2.0 ** -23).view(np.uint32)


kernel("f32_unary", "\n".join(f"    {op}.{m}.f32 %f{20 + 4 * j + k}, %f10;\n" + f32out(f"%f{20 + 4 * j + k}",
                                                                                   4 * j + k)
                              for j, op in enumerate(("sqrt", "rcp")) for k, m in enumerate(MODES)), 1, 8)


def test_sqrt_and_rcp_f32_in_every_mode():
    """sqrt/rcp.{rn,rz,rm,rp}.f32 (9.7.3.10, 9.7.3.9): IEEE 754 results."""
    a = np.concatenate([f32_samples(500), np.float32([2.0, 3.0, 0.25, -0.0, -4.0]).view(np.uint32)])
    out = run("f32_unary", as_in(a), 8)
    for j, op in enumerate(("sqrt", "rcp")):
        for k, m in enumerate(MODES):
            check(out[:, 4 * j + k], [ref(op, [x], "f32", m) for x in a.tolist()], "f32", f"{op}.{m}")


def _f64_kernel(name, lines, nin):
    body = "\n".join(f"{ln}\n    mov.b64 %rd{20 + k}, %fd{20 + k};" for k, ln in enumerate(lines))
    return kernel(name, body, nin, len(lines))


_f64_kernel("f64_bin", [f"    {op}.{m}.f64 %fd{20 + 4 * j + k}, %fd10, %fd11;"
                        for j, op in enumerate(("add", "mul", "div")) for k, m in enumerate(MODES)], 2)
_f64_kernel("f64_fma", [f"    fma.{m}.f64 %fd{20 + k}, %fd10, %fd11, %fd12;" for k, m in enumerate(MODES)]
            + [f"    sqrt.{m}.f64 %fd{24 + k}, %fd10;" for k, m in enumerate(MODES)]
            + [f"    rcp.{m}.f64 %fd{28 + k}, %fd10;" for k, m in enumerate(MODES)]
            + [f"    sub.{m}.f64 %fd{32 + k}, %fd10, %fd11;" for k, m in enumerate(MODES)], 3)


def f64_samples(n):
    x = np.concatenate([np.float64([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 1.7976931348623157e308, 1.0]),
                        RNG.uniform(-4, 4, n) * 2.0 ** RNG.integers(-40, 40, n),
                        RNG.integers(0, 2**63, n // 4, dtype=np.uint64).view(np.float64)])
    return x.view(np.uint64)


def test_f64_arithmetic_in_every_mode():
    """add/sub/mul/div/fma/sqrt/rcp.{rn,rz,rm,rp}.f64 (9.7.3): exactly rounded (fma.f64 once, not twice)."""
    a = f64_samples(160)
    fa = a.view(np.float64)
    b = np.where(RNG.integers(0, 2, len(a)) == 1, RNG.permutation(a),
                 (fa * 2.0 ** -RNG.integers(40, 70, len(a))).view(np.uint64))
    with np.errstate(all="ignore"):
        c = np.where(RNG.integers(0, 2, len(a)) == 1, (-(fa * b.view(np.float64))).view(np.uint64),
                     RNG.permutation(a))
    out = run("f64_bin", as_in(a, b), 12)
    for j, op in enumerate(("add", "mul", "div")):
        for k, m in enumerate(MODES):
            check(out[:, 4 * j + k], [ref(op, [x, y], "f64", m) for x, y in zip(a.tolist(), b.tolist())],
                  "f64", f"{op}.{m}.f64")
    out = run("f64_fma", as_in(a, b, c), 16)
    for k, m in enumerate(MODES):
        check(out[:, k], [ref("fma", [x, y, z], "f64", m) for x, y, z in zip(a.tolist(), b.tolist(), c.tolist())],
              "f64", f"fma.{m}.f64")
        check(out[:, 4 + k], [ref("sqrt", [x], "f64", m) for x in a.tolist()], "f64", f"sqrt.{m}.f64")
        check(out[:, 8 + k], [ref("rcp", [x], "f64", m) for x in a.tolist()], "f64", f"rcp.{m}.f64")
        check(out[:, 12 + k], [ref("sub", [x, y], "f64", m) for x, y in zip(a.tolist(), b.tolist())], "f64",
              f"sub.{m}.f64")


kernel("f32_sat", "    add.sat.f32 %f20, %f10, %f11;\n" + f32out("%f20", 0)
       + "\n    fma.rn.sat.f32 %f21, %f10, %f11, %f11;\n" + f32out("%f21", 1), 2, 2)


def test_sat_clamps_to_zero_one_and_nan_to_zero():
    """.sat (9.7.3): the result clamped to [0.0, 1.0]; NaN results become +0.0; -0.0 is in range."""
    a = np.float32([0.25, 2.0, -3.0, np.nan, np.inf, -np.inf, 0.5, 1e-3, -0.0]).view(np.uint32)
    b = np.float32([0.5, 1.0, 1.0, 1.0, -np.inf, 1.0, 0.5, -2e-3, -0.0]).view(np.uint32)
    out = run("f32_sat", as_in(a, b), 2).astype(np.uint32).view(np.float32)
    fa, fb = a.view(np.float32).astype(np.float64), b.view(np.float32).astype(np.float64)
    with np.errstate(all="ignore"):
        for k, r in enumerate((fa + fb, fa * fb + fb)):
            want = np.where(np.isnan(r), 0.0, np.clip(r, 0, 1)).astype(np.float32)
            np.testing.assert_array_equal(out[:, k].reshape(-1), want)
    assert out[-1:, 0].view(np.uint32)[0] == 0x80000000      # -0 + -0 = -0 lies in [0, 1]: kept


# --- conversions ------------------------------------------------------------------------------------------

kernel("cvt_i64", "\n".join(f"    cvt.{m}.f32.{s}64 %f{20 + 4 * j + k}, %rd10;\n" + f32out(f"%f{20 + 4 * j + k}",
                                                                                    4 * j + k)
                            for j, s in enumerate("us") for k, m in enumerate(MODES)) + "\n"
       + "\n".join(f"    cvt.{m}.f64.{s}64 %fd{28 + 4 * j + k}, %rd10;\n    mov.b64 %rd{28 + 4 * j + k}, "
                   f"%fd{28 + 4 * j + k};" for j, s in enumerate("us") for k, m in enumerate(MODES)), 1, 16)


def test_cvt_from_64_bit_integers_rounds_once_in_every_mode():
    """cvt.{rn,rz,rm,rp}.{f32,f64}.{u64,s64} (9.7.9.21): the integer rounded once (through float64 it would
    round twice: 2^63 + 2^39 + 1 -> f32)."""
    x = np.concatenate([np.array([0, 1, 2**63 + 2**39 + 1, 2**63 + 2**39, 2**64 - 1, 2**63, 2**63 - 1, 2**53 + 1,
                                  2**24 + 1, 2**62 + 2**38 + 1], np.uint64),
                        RNG.integers(0, 2**64 - 1, 300, dtype=np.uint64, endpoint=True),
                        (RNG.integers(0, 2**32, 100, dtype=np.uint64) << np.uint64(31)) | np.uint64(1)])
    out = run("cvt_i64", as_in(x), 16)
    for j, signed in enumerate((False, True)):
        ints = [int(v) - (2**64 if signed and v >= 2**63 else 0) for v in x.tolist()]
        for k, m in enumerate(MODES):
            check(out[:, 4 * j + k], [round_bits(Fraction(i), "f32", m) for i in ints], "f32", f"cvt.{m}.f32")
            check(out[:, 8 + 4 * j + k],
                  [round_bits(Fraction(i), "f64", m) for i in ints], "f64", f"cvt.{m}.f64")
    assert int(out[2, 0]) == np.float32(2.0 ** 63 + 2.0 ** 40).view(np.uint32)


INT_T = ("s32", "u32", "s64", "u64", "s16", "u16", "s8", "u8")
IRND = {"rzi": lambda q: math.trunc(q), "rmi": math.floor, "rpi": math.ceil,
        "rni": lambda q: round(q)}          # Python's round(Fraction) is round-half-even


def _cvt_int_kernel(src):
    lines = []
    for j, t in enumerate(INT_T):
        for k, m in enumerate(IRND):
            o = 4 * j + k
            reg = "%fd10" if src == "f64" else "%f10"
            if t.endswith("64"):
                lines.append(f"    cvt.{m}.{t}.{src} %rd{20 + o}, {reg};")
            else:
                lines.append(f"    cvt.{m}.{t}.{src} %r{20 + o % 10}, {reg};\n"
                             f"    cvt.u64.{t.replace('s', 'u')} %rd{20 + o}, %r{20 + o % 10};"
                             if t.endswith("32") else
                             f"    cvt.{m}.{t}.{src} %h{20 + o % 10}, {reg};\n"
                             f"    cvt.u64.{t.replace('s', 'u')} %rd{20 + o}, %h{20 + o % 10};")
    return kernel(f"cvt_int_{src}", "\n".join(lines), 1, 4 * len(INT_T))


_cvt_int_kernel("f32")
_cvt_int_kernel("f64")


@pytest.mark.parametrize("src", ["f32", "f64"])
def test_float_to_int_saturates_and_nan_gives_zero(src):
    """cvt.{rzi,rni,rmi,rpi}.{s,u}{8,16,32,64}.{f32,f64} (9.7.9.21): float-to-integer conversions saturate to
    the destination range and NaN -> 0; no host warning or exception."""
    if src == "f32":
        x = np.concatenate([np.float32([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 127.5, 128.0, -129.0, 255.5, 65535.6,
                                        2.0 ** 31, -2.0 ** 31, 2.0 ** 32, 2.0 ** 63, -2.0 ** 63, 2.0 ** 64,
                                        1e30, -1e30, np.inf, -np.inf, np.nan, -0.0]).view(np.uint32),
                            f32_samples(200)]).astype(np.uint64)
        vals = [fl(b, "f32") for b in x.tolist()]
    else:
        x = np.concatenate([np.float64([2.0 ** 63 - 1024, 2.0 ** 64 - 2048, -2.0 ** 63, 4294967295.5, 2.5, -2.5,
                                        np.nan, np.inf]).view(np.uint64), f64_samples(100)])
        vals = [fl(b, "f64") for b in x.tolist()]
    with np.errstate(all="raise"):
        out = run(f"cvt_int_{src}", as_in(x), 32)
    for j, t in enumerate(INT_T):
        bits = int(t[1:])
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if t[0] == "s" else (0, (1 << bits) - 1)
        for k, (m, f) in enumerate(IRND.items()):
            want = [0 if math.isnan(v) else (hi if v >= hi else lo if v <= lo else max(lo, min(hi, f(Fraction(v)))))
                    for v in vals]
            got = [int(g) % (1 << bits) for g in out[:, 4 * j + k].tolist()]
            assert got == [w % (1 << bits) for w in want], f"cvt.{m}.{t}.{src}"


kernel("cvt_f32_narrow", "\n".join(
    [f"    cvt.{m}.f16.f32 %h{20 + k}, %f10;\n    cvt.u64.u16 %rd{20 + k}, %h{20 + k};" for k, m in enumerate(MODES)]
    + ["    cvt.rn.bf16.f32 %h24, %f10;\n    cvt.u64.u16 %rd24, %h24;",
       "    cvt.rz.bf16.f32 %h25, %f10;\n    cvt.u64.u16 %rd25, %h25;",
       "    cvt.rn.relu.bf16.f32 %h26, %f10;\n    cvt.u64.u16 %rd26, %h26;",
       "    cvt.rn.satfinite.f16.f32 %h27, %f10;\n    cvt.u64.u16 %rd27, %h27;"]), 1, 8)


def test_cvt_f32_to_f16_and_bf16_round_once():
    """cvt.{rn,rz,rm,rp}.f16.f32, cvt.{rn,rz}{.relu}{.satfinite}.{f16,bf16}.f32 (9.7.9.21)."""
    x = np.concatenate([f32_samples(400), np.float32([65520.0, 65519.0, -70000.0, 2.0 ** -25, 2.0 ** -24 * 1.5,
                                                      1 + 2.0 ** -8, 1 + 3 * 2.0 ** -9]).view(np.uint32)])
    out = run("cvt_f32_narrow", as_in(x), 8)
    vals = [fl(b, "f32") for b in x.tolist()]

    def want(fmt, m, relu=False):
        res = []
        for v in vals:
            if relu and not math.isnan(v):
                v = max(v, 0.0) + 0.0                  # .relu: negative and -0 -> +0
            res.append(to_bits(v, fmt, m))
        return res
    for k, m in enumerate(MODES):
        check(out[:, k], want("f16", m), "f16", f"cvt.{m}.f16.f32")
    check(out[:, 4], want("bf16", "rn"), "bf16", "cvt.rn.bf16.f32")
    check(out[:, 5], want("bf16", "rz"), "bf16", "cvt.rz.bf16.f32")
    check(out[:, 6], want("bf16", "rn", relu=True), "bf16", "cvt.rn.relu.bf16.f32")
    sat = [NAN if math.isnan(v) else round_bits(Fraction(max(min(v, 1e300), -1e300)), "f16", "rn",
                                                 int(math.copysign(1, v) < 0), satfinite=True) for v in vals]
    check(out[:, 7], sat, "f16", "cvt.rn.satfinite.f16.f32")


# --- comparisons, min / max ------------------------------------------------------------------------------

CMP = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y and not (math.isnan(x) or math.isnan(y)),
       "lt": lambda x, y: x < y, "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y,
       "num": lambda x, y: not (math.isnan(x) or math.isnan(y)), "nan": lambda x, y: math.isnan(x) or math.isnan(y)}
UNORD = {c + "u": (lambda f: lambda x, y: f(x, y) or math.isnan(x) or math.isnan(y))(CMP[c])
         for c in ("eq", "ne", "lt", "le", "gt", "ge")}
UNORD["neu"] = lambda x, y: x != y       # Python: NaN != anything
ALLCMP = {**CMP, **UNORD}
kernel("setp_f32", "\n".join(f"    setp.{c}.f32 %p1, %f10, %f11;\n    selp.u64 %rd{20 + k}, 1, 0, %p1;"
                             for k, c in enumerate(ALLCMP)), 2, len(ALLCMP))


def test_setp_ordered_comparisons_are_false_on_nan_and_unordered_true():
    """setp.{eq,ne,lt,le,gt,ge}.f32 are false when either operand is NaN, their u forms true; num / nan
    (9.7.3.x setp, "Floating Point Comparison Operators")."""
    vals = [0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 2.0 ** -149]
    pairs = [(x, y) for x in vals for y in vals]
    a = np.float32([x for x, _ in pairs]).view(np.uint32)
    b = np.float32([y for _, y in pairs]).view(np.uint32)
    out = run("setp_f32", as_in(a, b), len(ALLCMP))
    for k, (c, f) in enumerate(ALLCMP.items()):
        assert out[:, k].tolist() == [int(f(x, y)) for x, y in pairs], c


MINMAX = ("min", "max", "min.NaN", "max.NaN")
kernel("minmax_f32", "\n".join(f"    {op}.f32 %f{20 + k}, %f10, %f11;\n" + f32out(f"%f{20 + k}", k)
                               for k, op in enumerate(MINMAX)), 2, 4)


def _minmax_ref(op, x, y, fmt):
    nan_bits = (1 << (sum(FMT[fmt][:2]))) - 1           # canonical NaN: 0x7FFFFFFF for f32
    if math.isnan(x) or math.isnan(y):
        if op.endswith("NaN") or (math.isnan(x) and math.isnan(y)):
            return nan_bits
        return to_bits(y if math.isnan(x) else x, fmt)
    lo = x < y or (x == y and math.copysign(1, x) < math.copysign(1, y))     # -0.0 < +0.0
    pick = (x if lo else y) if op.startswith("min") else (y if lo else x)
    return to_bits(pick, fmt)


def test_min_max_nan_and_signed_zero_rules():
    """min/max.f32 (9.7.3.11-12): a NaN operand gives the other operand, two give the canonical NaN; .NaN
    propagates the canonical NaN; -0.0 is less than +0.0."""
    vals = [0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 2.0 ** -149, -3.5]
    pairs = [(x, y) for x in vals for y in vals]
    a = np.float32([x for x, _ in pairs]).view(np.uint32)
    b = np.float32([y for _, y in pairs]).view(np.uint32)
    out = run("minmax_f32", as_in(a, b), 4)
    for k, op in enumerate(MINMAX):
        assert [hex(v) for v in out[:, k].tolist()] == [hex(_minmax_ref(op, x, y, "f32")) for x, y in pairs], op


# --- .approx: within the ISA's stated maximum error -------------------------------------------------------

APPROX = ("rcp", "sqrt", "rsqrt", "ex2", "lg2", "sin", "cos", "tanh")
kernel("approx_f32", "\n".join(f"    {op}.approx.f32 %f{20 + k}, %f10;\n" + f32out(f"%f{20 + k}", k)
                               for k, op in enumerate(APPROX))
       + "\n    div.approx.f32 %f28, %f10, %f11;\n" + f32out("%f28", 8)
       + "\n    div.full.f32 %f29, %f10, %f11;\n" + f32out("%f29", 9), 2, 10)


def test_approx_functions_stay_within_the_isa_maximum_error():
    """The ISA's bounds (9.7.3): rcp.approx.f32 1 ulp; sqrt.approx.f32 relative 2^-23; rsqrt.approx.f32
    relative 2^-22.9; ex2.approx.f32 2 ulp; lg2.approx.f32 absolute 2^-22 (mantissa in [0.5, 2)) / relative
    2^-22 elsewhere; sin/cos.approx.f32 absolute 2^-20.9 on [-pi, pi]; tanh.approx.f32 relative 2^-11;
    div.approx.f32 / div.full.f32 2 ulp (divisor in [2^-126, 2^126]).  The emulator returns the float64 result
    rounded to nearest."""
    n = 400
    pos = (RNG.uniform(1, 2, n) * 2.0 ** RNG.integers(-100, 100, n)).astype(np.float32)
    small = RNG.uniform(-60, 60, n).astype(np.float32)
    ang = RNG.uniform(-math.pi, math.pi, n).astype(np.float32)
    a = np.concatenate([pos, small, ang])
    b = np.concatenate([(RNG.uniform(1, 2, 3 * n) * 2.0 ** RNG.integers(-60, 60, 3 * n))]).astype(np.float32)
    out = run("approx_f32", as_in(a.view(np.uint32), b.view(np.uint32)), 10)
    got = out.astype(np.uint32).view(np.float32).astype(np.float64).reshape(len(a), 10)
    x, y = a.astype(np.float64), b.astype(np.float64)

    def within(k, exact, sel, ulps=None, rel=None, ab=None):
        g, e = got[sel, k], exact[sel]
        if ulps is not None:
            bound = ulps * np.array([ulp32(v) for v in e])
        else:
            bound = (rel * np.abs(e) if rel is not None else 0) + (ab if ab is not None else 0)
        assert np.all(np.abs(g - e) <= bound), (APPROX + ("div.approx", "div.full"))[k]
    allx = slice(None)
    with np.errstate(all="ignore"):
        q = x / y
        in_range = (np.abs(q) >= 2.0 ** -126) & (np.abs(q) <= float(np.finfo(np.float32).max))
        within(0, 1 / x, allx, ulps=1)
        within(1, np.sqrt(np.abs(x)), slice(0, n), rel=2.0 ** -23)
        within(2, 1 / np.sqrt(x), slice(0, n), rel=2.0 ** -22.9)
        within(3, np.exp2(x), slice(n, 2 * n), ulps=2)
        within(4, np.log2(x), slice(0, n), rel=2.0 ** -22, ab=2.0 ** -22)
        within(5, np.sin(x), slice(2 * n, 3 * n), ab=2.0 ** -20.9)
        within(6, np.cos(x), slice(2 * n, 3 * n), ab=2.0 ** -20.9)
        within(7, np.tanh(x), slice(n, 3 * n), rel=2.0 ** -11)
        within(8, q, in_range, ulps=2)
        within(9, q, in_range, ulps=2)


def test_div_approx_gives_zero_for_a_divisor_beyond_2_to_126():
    """div.approx.f32 (9.7.3.8): for 2^126 < |b| < 2^128 the result is 0, or NaN when a is infinite;
    div.full.f32 divides (2 ulp)."""
    a = np.float32([1.0, -3.0, np.inf, 2.0 ** 100, 5.0]).view(np.uint32)
    b = np.float32([2.0 ** 127, 2.0 ** 126 * 1.5, 2.0 ** 127, -2.0 ** 127, 2.0 ** 126]).view(np.uint32)
    out = run("approx_f32", as_in(a, b), 10)
    got = out[:, 8].astype(np.uint32).view(np.float32)
    assert got[:2].tolist() == [0.0, 0.0] and np.signbit(got[1]) and math.isnan(got[2])
    assert got[3] == 0.0 and np.signbit(got[3]) and got[4] == np.float32(5.0 * 2.0 ** -126)
    full = out[:, 9].astype(np.uint32).view(np.float32)
    assert full[0] == np.float32(2.0 ** -127) and full[3] == np.float32(-2.0 ** -27)

# --- packed conversions: f16x2 / bf16x2 / e4m3x2 / e5m2x2 --------------------------------------------------

PACKED = ("cvt.rn.f16x2.f32", "cvt.rz.f16x2.f32", "cvt.rn.relu.f16x2.f32", "cvt.rn.satfinite.f16x2.f32",
          "cvt.rn.bf16x2.f32", "cvt.rz.bf16x2.f32", "cvt.rn.relu.satfinite.bf16x2.f32")
F8 = ("cvt.rn.satfinite.e4m3x2.f32", "cvt.rn.satfinite.e5m2x2.f32", "cvt.rn.satfinite.relu.e4m3x2.f32")
kernel("cvt_packed", "\n".join(f"    {op} %r{20 + k}, %f10, %f11;\n    cvt.u64.u32 %rd{20 + k}, %r{20 + k};"
                               for k, op in enumerate(PACKED))
       + "\n" + "\n".join(f"    {op} %h{20 + k}, %f10, %f11;\n    cvt.u64.u16 %rd{27 + k}, %h{20 + k};"
                          for k, op in enumerate(F8))
       + "\n    cvt.rn.f16x2.e4m3x2 %r30, %h20;\n    cvt.u64.u32 %rd30, %r30;"
       + "\n    cvt.rn.f16x2.e5m2x2 %r31, %h21;\n    cvt.u64.u32 %rd31, %r31;"
       + "\n    cvt.rn.relu.f16x2.e4m3x2 %r32, %h10;\n    cvt.u64.u32 %rd32, %r32;", 2, 13)


def _half(v: float, fmt: str, mode: str, relu=False, satfinite=False):
    if math.isnan(v):
        return NAN
    if relu:
        v = max(v, 0.0) + 0.0
    if math.isinf(v):
        return round_bits(Fraction(math.copysign(1e300, v)), fmt, mode, satfinite=True) if satfinite or \
            not FMT[fmt][2] else to_bits(v, fmt)
    return round_bits(Fraction(v), fmt, mode, int(math.copysign(1, v) < 0), satfinite)


def _nan_bits(fmt):
    return (1 << sum(FMT[fmt][:2])) - 1


def test_packed_cvt_puts_a_in_the_upper_half_and_rounds_each_once():
    """cvt.{rn,rz}{.relu}{.satfinite}.{f16x2,bf16x2}.f32 d, a, b and cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.f32
    d, a, b (9.7.9.21): d = {cvt(a), cvt(b)} with cvt(a) in the upper half; .relu clamps negatives to +0,
    .satfinite clamps overflow and infinities to MAX_NORM, NaN stays NaN; cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2}
    widens exactly, the lower byte to the lower half."""
    a = np.concatenate([f32_samples(300), np.float32([448.0, 464.0, 480.0, 57344.0, 61440.0, 2.0 ** -9,
                                                      2.0 ** -10, -0.0, 0.0625 * 1.0625]).view(np.uint32)])
    b = RNG.permutation(a)
    out = run("cvt_packed", as_in(a, b), 13)
    va, vb = [fl(x, "f32") for x in a.tolist()], [fl(x, "f32") for x in b.tolist()]
    specs = [("f16", "rn", False, False), ("f16", "rz", False, False), ("f16", "rn", True, False),
             ("f16", "rn", False, True), ("bf16", "rn", False, False), ("bf16", "rz", False, False),
             ("bf16", "rn", True, True)]
    for k, (fmt, m, relu, sat) in enumerate(specs):
        hi = [_half(v, fmt, m, relu, sat) for v in va]
        lo = [_half(v, fmt, m, relu, sat) for v in vb]
        check(out[:, k] >> np.uint64(16), hi, fmt, PACKED[k] + " (a, upper)")
        check(out[:, k] & np.uint64(0xFFFF), lo, fmt, PACKED[k] + " (b, lower)")
    for k, (fmt, relu) in enumerate((("e4m3", False), ("e5m2", False), ("e4m3", True))):
        check(out[:, 7 + k] >> np.uint64(8), [_half(v, fmt, "rn", relu, True) for v in va], fmt, F8[k] + " upper")
        check(out[:, 7 + k] & np.uint64(0xFF), [_half(v, fmt, "rn", relu, True) for v in vb], fmt, F8[k] + " lower")
    for k, (col, fmt, relu) in enumerate(((7, "e4m3", False), (8, "e5m2", False))):
        for half, sh in (("lower", 0), ("upper", 8)):
            src = ((out[:, col] >> np.uint64(sh)) & np.uint64(0xFF)).tolist()
            check((out[:, 10 + k] >> np.uint64(2 * sh)) & np.uint64(0xFFFF), [_half(fl(x, fmt), "f16", "rn")
                                                                          for x in src], "f16", f"f16x2.{fmt} {half}")
    src = [(int(x) >> sh) & 0xFF for x in a.tolist() for sh in (0,)]
    check(out[:, 12] & np.uint64(0xFFFF), [_half(fl(x, "e4m3"), "f16", "rn", relu=True) for x in src], "f16",
          "cvt.rn.relu.f16x2.e4m3x2")
    assert int(out[-1, 7]) >> 8 == round_bits(Fraction(0.0625 * 1.0625), "e4m3")


kernel("f8_widen", "    cvt.rn.f16x2.e4m3x2 %r20, %h10;\n    cvt.u64.u32 %rd20, %r20;\n"
       "    cvt.rn.f16x2.e5m2x2 %r21, %h10;\n    cvt.u64.u32 %rd21, %r21;", 1, 2)


def test_fp8_widening_is_exact_for_every_byte():
    """cvt.rn.f16x2.{e4m3x2,e5m2x2} (9.7.9.21) on all 256 byte values in both halves: exact (every e4m3 /
    e5m2 value is an f16), NaN to NaN; e5m2 infinities to f16 infinities."""
    v = np.arange(256, dtype=np.uint64)
    h = v | ((255 - v) << np.uint64(8))
    out = run("f8_widen", as_in(h), 2)
    for k, fmt in enumerate(("e4m3", "e5m2")):
        for sh in (0, 8):
            src = ((h >> np.uint64(sh)) & np.uint64(0xFF)).tolist()
            want = [_half(fl(x, fmt), "f16", "rz") for x in src]       # exact: any mode gives the same bits
            check((out[:, k] >> np.uint64(2 * sh)) & np.uint64(0xFFFF), want, "f16", f"f16x2.{fmt}x2 byte {sh}")

# --- packed half arithmetic -----------------------------------------------------------------------------

HOPS = (("add.rn.f16x2", "add", "f16", ""), ("sub.rn.f16x2", "sub", "f16", ""), ("mul.rn.f16x2", "mul", "f16", ""),
        ("fma.rn.f16x2", "fma", "f16", ""), ("add.rn.ftz.f16x2", "add", "f16", "ftz"),
        ("fma.rn.sat.f16x2", "fma", "f16", "sat"), ("fma.rn.relu.f16x2", "fma", "f16", "relu"),
        ("add.rn.bf16x2", "add", "bf16", ""), ("mul.rn.bf16x2", "mul", "bf16", ""),
        ("fma.rn.bf16x2", "fma", "bf16", ""), ("fma.rn.relu.bf16x2", "fma", "bf16", ""),
        ("min.f16x2", "min", "f16", ""), ("max.NaN.f16x2", "max.NaN", "f16", ""), ("min.bf16x2", "min", "bf16", ""),
        ("neg.f16x2", "neg", "f16", ""), ("abs.bf16x2", "abs", "bf16", ""))
kernel("half2", "\n".join(f"    {op} %r{20 + k}, %r10, %r11{', %r12' if name == 'fma' else ''};\n"
                          f"    cvt.u64.u32 %rd{20 + k}, %r{20 + k};"
                          if name not in ("neg", "abs") else
                          f"    {op} %r{20 + k}, %r10;\n    cvt.u64.u32 %rd{20 + k}, %r{20 + k};"
                          for k, (op, name, _, _) in enumerate(HOPS)), 3, len(HOPS))


def _half_ref(op, name, fmt, flag, xs):
    if name in ("min", "max.NaN"):
        v = [fl(x, fmt) for x in xs]
        return _minmax_ref(name, v[0], v[1], fmt)
    if name in ("neg", "abs"):
        top = 1 << 15
        r = xs[0] ^ top if name == "neg" else xs[0] & (top - 1)
        return NAN if value(xs[0], fmt) == NAN else r
    r = ref(name, xs[:3 if name == "fma" else 2], fmt, "rn", ftz=flag == "ftz")
    if r == NAN:
        return 0 if flag == "sat" else NAN
    v = fl(r, fmt)
    if flag == "sat":
        return to_bits(min(max(v, 0.0), 1.0) + 0.0, fmt)
    if flag == "relu" or op.startswith("fma.rn.relu"):
        return to_bits(max(v, 0.0) + 0.0, fmt)
    return r


def _half_samples(n, fmt):
    if fmt == "f16":
        x = np.concatenate([np.float16([0, -0.0, np.inf, -np.inf, np.nan, 65504, 6e-8, 1.0, -1.0, 0.5]).view(np.uint16),
                            RNG.integers(0, 2**16, n, dtype=np.uint64).astype(np.uint16),
                            np.float16(RNG.uniform(-8, 8, n)).view(np.uint16)])
    else:
        x = (np.float32(RNG.uniform(-8, 8, 2 * n + 10)) * np.float32(2.0) ** RNG.integers(-40, 40, 2 * n + 10)
             ).astype(np.float32).view(np.uint32) >> np.uint32(16)
        x[:4] = [0, 0x8000, 0x7F80, 0x7FC0]
    return x.astype(np.uint32)


def test_packed_half_arithmetic_rounds_each_half_once():
    """add/sub/mul/fma.rn{.ftz}{.sat}{.relu}.{f16x2,bf16x2}, min/max{.NaN}, neg/abs (9.7.4): each half is the
    exactly rounded result of its halves; .ftz flushes f16 subnormals (< 2^-14); .sat clamps to [0, 1] with
    NaN -> +0; .relu clamps negatives to +0; min/max follow the f32 rules per half."""
    n = 150
    cols = []
    for _ in range(3):
        lo16, hi16 = _half_samples(n, "f16"), _half_samples(n, "f16")
        lob, hib = _half_samples(n, "bf16"), _half_samples(n, "bf16")
        m = min(len(lo16), len(lob))
        cols.append((np.concatenate([lo16[:m], lob[:m]]), np.concatenate([RNG.permutation(hi16)[:m],
                                                                          RNG.permutation(hib)[:m]])))
    words = [lo | (hi << np.uint32(16)) for lo, hi in cols]
    out = run("half2", as_in(*words), len(HOPS))
    for k, (op, name, fmt, flag) in enumerate(HOPS):
        for sh in (0, 16):
            xs = [[(int(w[i]) >> sh) & 0xFFFF for w in words] for i in range(len(words[0]))]
            want = [_half_ref(op, name, fmt, flag, x) for x in xs]
            check((out[:, k] >> np.uint64(sh)) & np.uint64(0xFFFF), want, fmt, f"{op} ({'hi' if sh else 'lo'})")


# --- the kernels are legal PTX; a foreign kernel loads past its packed cvt --------------------------------

@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas (nvcc)")
def test_the_kernels_are_legal_ptx():
    ok, messages = ptxas(HDR + "\n".join(KERNELS.values()), "sm_90a")
    assert ok, messages


def test_triton_sm90_matmul_loads_past_its_packed_cvt():
    """Triton's sm_90 matmul packs its f32 accumulators with cvt.rn.f16x2.f32; every instruction compiles."""
    from pathlib import Path
    ptx = Path(__file__).resolve().parents[1] / "foreign" / "triton_matmul_sm90.ptx"
    if not ptx.exists():
        pytest.skip("no foreign Triton kernel in this checkout")
    text = ptx.read_text()
    assert "cvt.rn.f16x2.f32" in text
    E.load_ptx(text)
