"""One unit test per opcode form of the frozen corpus (tests/emulator/opcodes.txt).

Each case is a tiny hand-written PTX kernel that executes the forms it names; a tracer wrapped around
the compiled instructions checks that every named form really executed (inside the case's own code,
not the frame around it), and the kernel's outputs are checked against values computed here from the
PTX ISA's semantics (numpy, exact rationals for rounding modes, fragment layouts written out by hand);
never against ``tvm_twill.model``.  Where a form's effect is ordering (barriers, waits, fences), a
variant of the case with the instruction removed or changed must produce the named finding.
``test_every_corpus_form_has_its_own_case`` fails listing the corpus forms without a case.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from tvm_twill import emulator as E
from tvm_twill.emulator import loader

HERE = Path(__file__).resolve().parent
T = 32
BEGIN, END = "// case begins", "// case ends"
REGS = """
    .reg .pred %p<16>;
    .reg .b16 %rs<16>;
    .reg .b32 %r<64>;
    .reg .f32 %f<80>;
    .reg .b64 %rd<40>;
"""


@dataclass(frozen=True)
class Case:
    """``forms`` must each execute between BEGIN and END of ``ptx``; ``args()`` gives fresh arrays,
    ``check(args)`` asserts on them after the run; ``findings`` are the finding kinds expected (none: the
    report must be ok); ``variants`` are (old, new, expected finding kinds) edits of the text that must be
    caught."""

    name: str
    forms: tuple
    ptx: str
    launch: E.Launch
    args: Callable
    check: Callable
    findings: frozenset = frozenset()
    variants: tuple = ()
    interleavings: int = 1


CASES: list[Case] = []


def kernel(body, params, shared="", target="sm_80"):
    plist = ",\n".join(params)
    return (f".version 8.7\n.target {target}\n.address_size 64\n.visible .entry k(\n{plist}\n)\n{{\n{REGS}"
            f"{shared}\n{body}\n    ret;\n}}\n")


# ------------------------------------------------------------------------------------------------------
# the lane frame: %r2 / %r4 = first word of this thread's row of x / y (%rd5 / %rd6 point at the rows);
# %rd7 / %rd8 point at the thread's rows of out / aux (4 words each); %r3 %r13 %r14 %r15 go to out.

FRAME_IN = """
    ld.param.u64 %rd1, [k_param_0];
    ld.param.u64 %rd2, [k_param_1];
    ld.param.u64 %rd3, [k_param_2];
    ld.param.u64 %rd9, [k_param_3];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 16;
    add.s64 %rd5, %rd1, %rd4;
    add.s64 %rd6, %rd2, %rd4;
    add.s64 %rd7, %rd3, %rd4;
    add.s64 %rd8, %rd9, %rd4;
    ld.global.b32 %r2, [%rd5];
    ld.global.b32 %r4, [%rd6];
    mov.u32 %r3, 0;
    mov.u32 %r13, 0;
    mov.u32 %r14, 0;
    mov.u32 %r15, 0;
"""
FRAME_OUT = """
    st.global.b32 [%rd7], %r3;
    st.global.b32 [%rd7+4], %r13;
    st.global.b32 [%rd7+8], %r14;
    st.global.b32 [%rd7+12], %r15;
"""
SHARED = "    .shared .align 128 .b8 sbuf[4096];\n    .shared .align 8 .b64 mbar;\n"
RNG = np.random.default_rng(19)
EDGES = np.array([0, 1, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, 0xFFFF, 0x8000, 31, 32, 33], np.uint32)


def ints(n=T):
    v = RNG.integers(0, 2**32, size=(n, 4), dtype=np.uint64).astype(np.uint32)
    v[:len(EDGES), 0] = EDGES
    v[len(EDGES):2 * len(EDGES), 0] = EDGES[::-1]
    return v


def floats(n=T, nan=True, scale=100.0):
    v = (RNG.standard_normal((n, 4)) * scale).astype(np.float32)
    v[:6, 0] = [0.0, -0.0, 1.5, -2.5, 1e-3, 1e3]
    if nan:
        v[7, 0] = np.nan
    return v.view(np.uint32)


def halves(n=T):
    h = (RNG.standard_normal((n, 8)) * 50).astype(np.float16)
    h[:4, 0] = [0.0, -0.0, 65504.0, 2.0**-24]
    return h.view(np.uint32)


def _eq_half(n):
    v = ints(n)
    v[::3, 0] = ints(n)[::3, 0]
    return v


def _with_f16_nan(v):
    v[9, 0] = (v[9, 0] & 0xFFFF0000) | 0x7E00
    return v


def _f16_ties(v):
    v[10:14, 0] = np.array([1 + 2.0**-11, 1 + 3 * 2.0**-11, 70000.0, 2.0**-26], np.float32).view(np.uint32)
    return v


def _zero_at(v, i):
    v[i, 0] = 0
    return v


def lanes(name, forms, body, want, x=ints, y=ints, threads=T, compare="bits", aux=None, findings=(),
          variants=(), shared=SHARED, interleavings=1, rtol=0.0, check=None):
    """A case in the lane frame.  ``want(x, y)`` gives the expected out words: an array of shape (threads,)
    (%r3 only) or (threads, k) (%r3, %r13, %r14, %r15 in that order); ``aux(x, y)`` the expected aux
    words.  compare: 'bits', 'f32' (NaN matches NaN), or 'close' (rtol).  ``check(args)``, if given, replaces
    ``want`` (for results the PTX ISA leaves open, such as which lane elect.sync picks)."""
    forms = (forms,) if isinstance(forms, str) else tuple(forms)
    ptx = kernel(FRAME_IN + f"{BEGIN}\n{body}\n{END}\n" + FRAME_OUT,
                 [f"    .param .u64 k_param_{i}" for i in range(4)], shared)
    xv, yv = x(threads), y(threads)
    xv, yv = np.broadcast_to(xv, (threads, 4)).copy(), np.broadcast_to(yv, (threads, 4)).copy()

    def args():
        return (xv.copy(), yv.copy(), np.zeros((threads, 4), np.uint32), np.zeros((threads, 4), np.uint32))

    def default_check(a):
        got_out, got_aux = a[2], a[3]
        exp = np.asarray(want(xv, yv))
        exp = exp.reshape(threads, -1)
        _compare(got_out[:, :exp.shape[1]], exp, compare, rtol, name)
        if aux is not None:
            ea = np.asarray(aux(xv, yv)).reshape(threads, -1)
            _compare(got_aux[:, :ea.shape[1]], ea, "bits", 0.0, name + " (aux)")
    launch = E.Launch("k", (1, 1, 1), (threads, 1, 1), 0, tuple(("buffer", i, 0) for i in range(4)))
    CASES.append(Case(name, forms, ptx, launch, args, check or default_check, frozenset(findings), tuple(variants),
                      interleavings))


def _compare(got, exp, compare, rtol, name):
    exp = np.asarray(exp)
    if compare == "bits":
        np.testing.assert_array_equal(got, exp.astype(np.uint64).astype(np.uint32), err_msg=name)
    else:
        g, e = got.view(np.float32), exp.astype(np.float32)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(e), err_msg=name)
        ok = ~np.isnan(e)
        if compare == "f32":
            np.testing.assert_array_equal(g[ok], e[ok], err_msg=name)
        else:
            np.testing.assert_allclose(g[ok], e[ok], rtol=rtol, err_msg=name)


def f32(u):
    return np.asarray(u, np.uint32).view(np.float32)


def f16lo(u):
    return (np.asarray(u, np.uint32) & 0xFFFF).astype(np.uint16).view(np.float16)


def bits16(h):
    return np.asarray(h, np.float16).view(np.uint16).astype(np.uint32)


def s32(u):
    return np.asarray(u, np.uint32).view(np.int32)


def u64(lo, hi):
    return lo.astype(np.uint64) | (hi.astype(np.uint64) << np.uint64(32))


def split64(v):
    v = np.asarray(v, np.uint64)
    return np.stack([(v & np.uint64(0xFFFFFFFF)).astype(np.uint32), (v >> np.uint64(32)).astype(np.uint32)], 1)


def round_f32(q: Fraction, mode: str) -> float:
    """The float32 that rounds the exact rational q in mode rn (ties to even) / rz / rm / rp (no overflow)."""
    lo = np.float32(float(q))
    while Fraction(float(lo)) > q:
        lo = np.nextafter(lo, np.float32(-np.inf))
    while Fraction(float(np.nextafter(lo, np.float32(np.inf)))) <= q:
        lo = np.nextafter(lo, np.float32(np.inf))
    if Fraction(float(lo)) == q:
        return lo
    hi = np.nextafter(lo, np.float32(np.inf))
    if mode == "rm" or (mode == "rz" and q > 0):
        return lo
    if mode == "rp" or mode == "rz":
        return hi
    dl, dh = q - Fraction(float(lo)), Fraction(float(hi)) - q
    if dl != dh:
        return lo if dl < dh else hi
    return lo if int(np.float32(lo).view(np.uint32)) % 2 == 0 else hi


def exact_fma(mode):
    def want(x, y):
        a, b, c = f32(x[:, 0]), f32(y[:, 0]), f32(x[:, 1])
        return np.array([round_f32(Fraction(float(p)) * Fraction(float(q)) + Fraction(float(r)), mode)
                         for p, q, r in zip(a, b, c)], np.float32).view(np.uint32)
    return want


def fma_inputs(n):
    v = (RNG.standard_normal((n, 4)) * 3).astype(np.float32)
    v[:, 0] = 1 + RNG.integers(1, 2**12, n) * 2.0**-23       # products fall between two floats
    return v.view(np.uint32)


# ---------------------------------------------------------------- integer and bit arithmetic
lanes("add.s32", "add.s32", "add.s32 %r3, %r2, %r4;", lambda x, y: x[:, 0].astype(np.uint64) + y[:, 0])
lanes("sub.s32", "sub.s32", "sub.s32 %r3, %r2, %r4;", lambda x, y: x[:, 0].astype(np.int64) - y[:, 0])
lanes("neg.s32", "neg.s32", "neg.s32 %r3, %r2;", lambda x, y: -x[:, 0].astype(np.int64))
lanes("mad.lo.s32", "mad.lo.s32", "mad.lo.s32 %r3, %r2, %r4, %r2;",
      lambda x, y: x[:, 0].astype(object) * y[:, 0].astype(object) + x[:, 0].astype(object) & 0xFFFFFFFF)
lanes("mul.lo.s32", "mul.lo.s32", "mul.lo.s32 %r3, %r2, %r4;",
      lambda x, y: x[:, 0].astype(object) * y[:, 0].astype(object) & 0xFFFFFFFF)
lanes("mul.wide.s32", "mul.wide.s32", "mul.wide.s32 %rd10, %r2, %r4;\n    mov.b64 {%r3, %r13}, %rd10;",
      lambda x, y: split64(np.array([int(a) * int(b) % 2**64 for a, b in zip(s32(x[:, 0]), s32(y[:, 0]))],
                                    np.uint64)))
lanes("mul.wide.u32", "mul.wide.u32", "mul.wide.u32 %rd10, %r2, %r4;\n    mov.b64 {%r3, %r13}, %rd10;",
      lambda x, y: split64(x[:, 0].astype(np.uint64) * y[:, 0].astype(np.uint64)))
lanes("mul.wide.u16", "mul.wide.u16",
      "cvt.u16.u32 %rs1, %r2;\n    cvt.u16.u32 %rs2, %r4;\n    mul.wide.u16 %r3, %rs1, %rs2;",
      lambda x, y: (x[:, 0] & 0xFFFF).astype(np.uint64) * (y[:, 0] & 0xFFFF))
lanes("mul.lo.s16", "mul.lo.s16",
      "cvt.u16.u32 %rs1, %r2;\n    cvt.u16.u32 %rs2, %r4;\n    mul.lo.s16 %rs3, %rs1, %rs2;\n"
      "    cvt.u32.u16 %r3, %rs3;", lambda x, y: (x[:, 0] & 0xFFFF) * (y[:, 0] & 0xFFFF) & 0xFFFF)
lanes("sub.s16", "sub.s16",
      "cvt.u16.u32 %rs1, %r2;\n    cvt.u16.u32 %rs2, %r4;\n    sub.s16 %rs3, %rs1, %rs2;\n"
      "    cvt.u32.u16 %r3, %rs3;",
      lambda x, y: ((x[:, 0] & 0xFFFF).astype(np.int64) - (y[:, 0] & 0xFFFF)) & 0xFFFF)
lanes("64-bit add, mul.lo, shifts, or, xor, and", ("add.s64", "mul.lo.s64", "shl.b64", "shr.u64", "or.b64",
                                                    "xor.b64", "and.b64", "mov.b64"),
      """
    mov.b64 %rd10, {%r2, %r4};
    ld.global.b32 %r5, [%rd5+4];
    ld.global.b32 %r6, [%rd6+4];
    mov.b64 %rd11, {%r5, %r6};
    add.s64 %rd12, %rd10, %rd11;
    mul.lo.s64 %rd13, %rd10, %rd11;
    and.b32 %r7, %r6, 63;
    shl.b64 %rd14, %rd10, %r7;
    shr.u64 %rd15, %rd10, %r7;
    or.b64 %rd16, %rd14, %rd11;
    xor.b64 %rd17, %rd16, %rd15;
    and.b64 %rd18, %rd17, %rd12;
    xor.b64 %rd19, %rd18, %rd13;
    mov.b64 {%r3, %r13}, %rd19;
    mov.b64 {%r14, %r15}, %rd12;""",
      lambda x, y: _sixty_four(x, y))


def _sixty_four(x, y):
    a, b = u64(x[:, 0], y[:, 0]), u64(x[:, 1], y[:, 1])
    s = (y[:, 1] & 63).astype(np.uint64)
    add = a + b
    mul = np.array([int(p) * int(q) % 2**64 for p, q in zip(a, b)], np.uint64)
    res = (((a << s) | b) ^ (a >> s)) & add ^ mul
    return np.concatenate([split64(res), split64(add)], 1)


lanes("shl.b32 (amounts past 31 give 0)", "shl.b32", "and.b32 %r5, %r4, 63;\n    shl.b32 %r3, %r2, %r5;",
      lambda x, y: np.where((y[:, 0] & 63) > 31, 0, x[:, 0].astype(np.uint64) << (y[:, 0] & 63) & 0xFFFFFFFF))
lanes("shr.u32 (amounts past 31 give 0)", "shr.u32", "and.b32 %r5, %r4, 63;\n    shr.u32 %r3, %r2, %r5;",
      lambda x, y: np.where((y[:, 0] & 63) > 31, 0, x[:, 0] >> np.minimum(y[:, 0] & 63, 31)))
lanes("shr.s32 (sign fill, clamped at 31)", "shr.s32", "and.b32 %r5, %r4, 63;\n    shr.s32 %r3, %r2, %r5;",
      lambda x, y: (s32(x[:, 0]) >> np.minimum(y[:, 0] & 63, 31).astype(np.int32)).view(np.uint32))
lanes("and/or/xor/not.b32", ("and.b32", "or.b32", "xor.b32", "not.b32"),
      "and.b32 %r3, %r2, %r4;\n    or.b32 %r13, %r2, %r4;\n    xor.b32 %r14, %r2, %r4;\n    not.b32 %r15, %r2;",
      lambda x, y: np.stack([x[:, 0] & y[:, 0], x[:, 0] | y[:, 0], x[:, 0] ^ y[:, 0], ~x[:, 0]], 1))
lanes("and/xor.b16", ("and.b16", "xor.b16"),
      "mov.b32 {%rs1, %rs2}, %r2;\n    mov.b32 {%rs3, %rs4}, %r4;\n    and.b16 %rs5, %rs1, %rs4;\n"
      "    xor.b16 %rs6, %rs2, %rs3;\n    mov.b32 %r3, {%rs5, %rs6};",
      lambda x, y: (x[:, 0] & (y[:, 0] >> 16)) & 0xFFFF | (((x[:, 0] >> 16) ^ y[:, 0]) & 0xFFFF) << 16)

# ---------------------------------------------------------------- moves and selects
lanes("mov.b32 packs and unpacks halves", "mov.b32",
      "mov.b32 {%rs1, %rs2}, %r2;\n    mov.b32 %r3, {%rs2, %rs1};\n    mov.b32 %r13, %r4;",
      lambda x, y: np.stack([(x[:, 0] >> 16) | (x[:, 0] << 16), y[:, 0]], 1))
lanes("mov.u32 / mov.s32 / mov.f32 / mov.u64", ("mov.u32", "mov.s32", "mov.f32", "mov.u64"),
      "mov.u32 %r3, %ntid.x;\n    mov.s32 %r13, -5;\n    mov.f32 %f1, 0f3FC00000;\n    mov.b32 %r14, %f1;\n"
      "    mov.u64 %rd10, %rd4;\n    cvt.u32.u64 %r15, %rd10;",
      lambda x, y: np.stack([np.full(T, T), np.full(T, 2**32 - 5), np.full(T, 0x3FC00000),
                             np.arange(T) * 16], 1))
lanes("selp.b32 / selp.b16 / selp.u16", ("selp.b32", "selp.b16", "selp.u16"),
      "setp.lt.u32 %p1, %r2, %r4;\n    selp.b32 %r3, %r2, %r4, %p1;\n"
      "    cvt.u16.u32 %rs1, %r2;\n    cvt.u16.u32 %rs2, %r4;\n    selp.b16 %rs3, %rs1, %rs2, %p1;\n"
      "    selp.u16 %rs4, %rs2, 7, %p1;\n    cvt.u32.u16 %r13, %rs3;\n    cvt.u32.u16 %r14, %rs4;",
      lambda x, y: np.stack([np.minimum(x[:, 0], y[:, 0]), np.minimum(x[:, 0], y[:, 0]) & 0xFFFF,
                             np.where(x[:, 0] < y[:, 0], y[:, 0] & 0xFFFF, 7)], 1))

# ---------------------------------------------------------------- comparisons (setp), predicates
SETP = [("setp.eq.s32", lambda a, b: s32(a) == s32(b)), ("setp.ne.s32", lambda a, b: s32(a) != s32(b)),
        ("setp.lt.s32", lambda a, b: s32(a) < s32(b)), ("setp.gt.s32", lambda a, b: s32(a) > s32(b)),
        ("setp.lt.u32", lambda a, b: a < b), ("setp.gt.u32", lambda a, b: a > b),
        ("setp.ne.b32", lambda a, b: a != b)]
for _form, _f in SETP:
    lanes(_form, _form, f"{_form} %p1, %r2, %r4;\n    selp.b32 %r3, 1, 0, %p1;\n"
          f"    {_form} %p2, %r2, %r2;\n    selp.b32 %r13, 1, 0, %p2;",
          lambda x, y, _f=_f: np.stack([_f(x[:, 0], y[:, 0]), _f(x[:, 0], x[:, 0])], 1), y=lambda n: _eq_half(n))


lanes("setp.eq.s16", "setp.eq.s16",
      "cvt.u16.u32 %rs1, %r2;\n    cvt.u16.u32 %rs2, %r4;\n    setp.eq.s16 %p1, %rs1, %rs2;\n"
      "    selp.b32 %r3, 1, 0, %p1;", lambda x, y: (x[:, 0] & 0xFFFF) == (y[:, 0] & 0xFFFF),
      y=lambda n: np.where(np.arange(n)[:, None] % 2 == 0, ints(n) & 0xFFFF0000 | 0x1234, ints(n)),
      x=lambda n: ints(n) & 0xFFFF0000 | 0x1234)
lanes("setp.lt.s64 / setp.ge.s64", ("setp.lt.s64", "setp.ge.s64"),
      "mov.b64 %rd10, {%r2, %r4};\n    ld.global.b32 %r5, [%rd5+4];\n    ld.global.b32 %r6, [%rd6+4];\n"
      "    mov.b64 %rd11, {%r5, %r6};\n    setp.lt.s64 %p1, %rd10, %rd11;\n    setp.ge.s64 %p2, %rd10, %rd11;\n"
      "    selp.b32 %r3, 1, 0, %p1;\n    selp.b32 %r13, 1, 0, %p2;",
      lambda x, y: np.stack([u64(x[:, 0], y[:, 0]).view(np.int64) < u64(x[:, 1], y[:, 1]).view(np.int64),
                             u64(x[:, 0], y[:, 0]).view(np.int64) >= u64(x[:, 1], y[:, 1]).view(np.int64)], 1))
lanes("setp.gt.f16 (NaN compares false)", "setp.gt.f16",
      "mov.b32 {%rs1, %rs2}, %r2;\n    mov.b32 {%rs3, %rs4}, %r4;\n    setp.gt.f16 %p1, %rs1, %rs3;\n"
      "    selp.b32 %r3, 1, 0, %p1;", lambda x, y: f16lo(x[:, 0]) > f16lo(y[:, 0]),
      x=lambda n: _with_f16_nan(halves(n)), y=halves)


lanes("and.pred", "and.pred", "setp.lt.u32 %p1, %r2, %r4;\n    setp.gt.u32 %p2, %r2, 1000000;\n"
      "    and.pred %p3, %p1, %p2;\n    selp.b32 %r3, 1, 0, %p3;",
      lambda x, y: (x[:, 0] < y[:, 0]) & (x[:, 0] > 1000000))

# ---------------------------------------------------------------- conversions
lanes("cvt.u16.u32 / cvt.u32.u16 (truncate, zero-extend)", ("cvt.u16.u32", "cvt.u32.u16"),
      "cvt.u16.u32 %rs1, %r2;\n    cvt.u32.u16 %r3, %rs1;", lambda x, y: x[:, 0] & 0xFFFF)
lanes("cvt.u64.u32 / cvt.u32.u64 / cvt.s64.s32", ("cvt.u64.u32", "cvt.u32.u64", "cvt.s64.s32"),
      "cvt.u64.u32 %rd10, %r2;\n    mov.b64 {%r3, %r13}, %rd10;\n    cvt.s64.s32 %rd11, %r2;\n"
      "    mov.b64 {%r14, %r15}, %rd11;\n    mov.b64 %rd12, {%r4, %r2};\n    cvt.u32.u64 %r16, %rd12;\n"
      "    xor.b32 %r3, %r3, %r16;",
      lambda x, y: np.stack([x[:, 0] ^ y[:, 0], np.zeros(T, np.uint32), x[:, 0],
                             np.where(s32(x[:, 0]) < 0, 0xFFFFFFFF, 0)], 1))
lanes("cvt.f32.f16 (exact) / cvt.rn.f16.f32 (nearest even)", ("cvt.f32.f16", "cvt.rn.f16.f32"),
      "mov.b32 {%rs1, %rs2}, %r2;\n    cvt.f32.f16 %f1, %rs1;\n    mov.b32 %r3, %f1;\n"
      "    mov.b32 %f2, %r4;\n    cvt.rn.f16.f32 %rs3, %f2;\n    cvt.u32.u16 %r13, %rs3;",
      lambda x, y: np.stack([f16lo(x[:, 0]).astype(np.float32).view(np.uint32),
                             bits16(f32(y[:, 0]).astype(np.float16))], 1), x=halves,
      y=lambda n: _f16_ties(floats(n, nan=False, scale=3e3)))


lanes("cvt.sat.f32.f32 (clamps to [0, 1], NaN to 0)", "cvt.sat.f32.f32",
      "mov.b32 %f1, %r2;\n    cvt.sat.f32.f32 %f2, %f1;\n    mov.b32 %r3, %f2;",
      lambda x, y: np.clip(np.nan_to_num(f32(x[:, 0]), nan=0.0), 0, 1).astype(np.float32).view(np.uint32),
      x=lambda n: floats(n, scale=1.0))
lanes("cvta.param.u64 gives a generic address of the parameter", "cvta.param.u64",
      "mov.b64 %rd10, k_param_1;\n    cvta.param.u64 %rd11, %rd10;\n    ld.u64 %rd12, [%rd11];\n"
      "    add.s64 %rd13, %rd12, %rd4;\n    ld.global.b32 %r3, [%rd13];", lambda x, y: y[:, 0])
lanes("cvta.to.global.u64 / ld.param.u64", ("cvta.to.global.u64", "ld.param.u64"),
      "ld.param.u64 %rd10, [k_param_1];\n    cvta.to.global.u64 %rd11, %rd10;\n    add.s64 %rd12, %rd11, %rd4;\n"
      "    ld.global.b32 %r3, [%rd12];", lambda x, y: y[:, 0])

# ---------------------------------------------------------------- floating point
lanes("add.f32 / sub.f32 / mul.f32 (round to nearest)", ("add.f32", "sub.f32", "mul.f32"),
      "mov.b32 %f1, %r2;\n    mov.b32 %f2, %r4;\n    add.f32 %f3, %f1, %f2;\n    sub.f32 %f4, %f1, %f2;\n"
      "    mul.f32 %f5, %f1, %f2;\n    mov.b32 %r3, %f3;\n    mov.b32 %r13, %f4;\n    mov.b32 %r14, %f5;",
      lambda x, y: np.stack([(f32(x[:, 0]).astype(np.float64) + f32(y[:, 0])).astype(np.float32),
                             (f32(x[:, 0]).astype(np.float64) - f32(y[:, 0])).astype(np.float32),
                             (f32(x[:, 0]).astype(np.float64) * f32(y[:, 0])).astype(np.float32)], 1),
      x=floats, y=lambda n: floats(n, nan=False), compare="f32")
lanes("neg.f32 flips the sign bit", "neg.f32", "mov.b32 %f1, %r2;\n    neg.f32 %f2, %f1;\n    mov.b32 %r3, %f2;",
      lambda x, y: x[:, 0] ^ 0x80000000, x=lambda n: floats(n, nan=False))
lanes("max.f32 drops a NaN operand", "max.f32",
      "mov.b32 %f1, %r2;\n    mov.b32 %f2, %r4;\n    max.f32 %f3, %f1, %f2;\n    mov.b32 %r3, %f3;",
      lambda x, y: np.where(np.isnan(f32(x[:, 0])), f32(y[:, 0]), np.fmax(f32(x[:, 0]), f32(y[:, 0]))),
      x=floats, y=lambda n: floats(n, nan=False), compare="f32")
lanes("div.rn.f32 (correctly rounded, x/0 = inf)", "div.rn.f32",
      "mov.b32 %f1, %r2;\n    mov.b32 %f2, %r4;\n    div.rn.f32 %f3, %f1, %f2;\n    mov.b32 %r3, %f3;",
      lambda x, y: (f32(x[:, 0]).astype(np.float64) / f32(y[:, 0]).astype(np.float64)).astype(np.float32),
      x=floats, y=lambda n: _zero_at(floats(n, nan=False), 3), compare="f32")


lanes("fma.rn.f32 (one rounding, nearest even)", "fma.rn.f32",
      "mov.b32 %f1, %r2;\n    mov.b32 %f2, %r4;\n    ld.global.f32 %f3, [%rd5+4];\n"
      "    fma.rn.f32 %f4, %f1, %f2, %f3;\n    mov.b32 %r3, %f4;", exact_fma("rn"), x=fma_inputs, y=fma_inputs)
lanes("fma.rm.f32 (one rounding, toward -inf)", "fma.rm.f32",
      "mov.b32 %f1, %r2;\n    mov.b32 %f2, %r4;\n    ld.global.f32 %f3, [%rd5+4];\n"
      "    fma.rm.f32 %f4, %f1, %f2, %f3;\n    mov.b32 %r3, %f4;", exact_fma("rm"), x=fma_inputs, y=fma_inputs)
lanes("ex2.approx.ftz.f32 (2 ulp)", "ex2.approx.ftz.f32",
      "mov.b32 %f1, %r2;\n    ex2.approx.ftz.f32 %f2, %f1;\n    mov.b32 %r3, %f2;",
      lambda x, y: np.exp2(f32(x[:, 0]).astype(np.float64)), x=lambda n: floats(n, nan=False, scale=5.0),
      compare="close", rtol=2.5e-7)
lanes("rsqrt.approx.f32 (2 ulp)", "rsqrt.approx.f32",
      "mov.b32 %f1, %r2;\n    abs.f32 %f1, %f1;\n    add.f32 %f1, %f1, 0f3F800000;\n    rsqrt.approx.f32 %f2, %f1;\n"
      "    mov.b32 %r3, %f2;",
      lambda x, y: 1 / np.sqrt(np.abs(f32(x[:, 0]).astype(np.float64)) + 1),
      x=lambda n: floats(n, nan=False), compare="close", rtol=2.5e-7)
lanes("add.f16 / mul.f16 (round to nearest)", ("add.f16", "mul.f16"),
      "mov.b32 {%rs1, %rs2}, %r2;\n    mov.b32 {%rs3, %rs4}, %r4;\n    add.f16 %rs5, %rs1, %rs3;\n"
      "    mul.f16 %rs6, %rs1, %rs3;\n    cvt.u32.u16 %r3, %rs5;\n    cvt.u32.u16 %r13, %rs6;",
      lambda x, y: np.stack([bits16((f16lo(x[:, 0]).astype(np.float64) + f16lo(y[:, 0])).astype(np.float16)),
                             bits16((f16lo(x[:, 0]).astype(np.float64) * f16lo(y[:, 0])).astype(np.float16))], 1),
      x=halves, y=halves)

# ---------------------------------------------------------------- global and shared memory
lanes("ld.global.nc scalars and vectors", ("ld.global.nc.f32", "ld.global.nc.u16", "ld.global.nc.v2.u16",
                                           "ld.global.nc.v2.u32", "ld.global.nc.v4.u16", "ld.global.nc.v4.u32"),
      """
    ld.global.nc.f32 %f1, [%rd5+12];
    mov.b32 %r3, %f1;
    ld.global.nc.u16 %rs1, [%rd5+6];
    ld.global.nc.v2.u16 {%rs2, %rs3}, [%rd5+8];
    ld.global.nc.v4.u16 {%rs4, %rs5, %rs6, %rs7}, [%rd5];
    ld.global.nc.v2.u32 {%r5, %r6}, [%rd5+8];
    ld.global.nc.v4.u32 {%r7, %r8, %r9, %r10}, [%rd5];
    cvt.u32.u16 %r11, %rs1;
    cvt.u32.u16 %r12, %rs3;
    mov.b32 %r13, {%rs7, %rs4};
    mov.b32 %r14, {%rs2, %rs5};
    add.s32 %r15, %r6, %r10;
    xor.b32 %r15, %r15, %r11;
    shl.b32 %r12, %r12, 7;
    xor.b32 %r15, %r15, %r12;
    sub.s32 %r15, %r15, %r9;""", lambda x, y: _nc_loads(x))


def _nc_loads(x):
    h = x.view(np.uint16).reshape(T, 8).astype(np.uint32)
    w15 = ((x[:, 3].astype(np.uint64) + x[:, 3]) ^ h[:, 3] ^ (h[:, 5] << 7)) - x[:, 2].astype(np.uint64)
    return np.stack([x[:, 3], h[:, 3] | h[:, 0] << 16, h[:, 4] | h[:, 1] << 16, w15 & 0xFFFFFFFF], 1)


lanes("st.global scalars and a vector", ("st.global.f32", "st.global.u16", "st.global.u32", "st.global.v4.u32"),
      "mov.b32 %f1, %r4;\n    st.global.v4.u32 [%rd8], {%r2, %r4, %r2, %r4};\n    st.global.u32 [%rd8+4], %r2;\n"
      "    st.global.f32 [%rd8+8], %f1;\n    cvt.u16.u32 %rs1, %r4;\n    st.global.u16 [%rd8+14], %rs1;",
      lambda x, y: np.zeros((T, 1)),
      aux=lambda x, y: np.stack([x[:, 0], x[:, 0], y[:, 0], (y[:, 0] & 0xFFFF) | (y[:, 0] & 0xFFFF) << 16], 1))
_SHARED_ADDR = "mov.u32 %r20, sbuf;\n    shl.b32 %r21, %r1, 4;\n    add.s32 %r22, %r20, %r21;\n" \
               "    xor.b32 %r23, %r21, 16;\n    add.s32 %r24, %r20, %r23;\n"
lanes("st.shared / ld.shared, scalars and vectors (a lane reads its neighbour's row)",
      ("st.shared.f32", "st.shared.u16", "st.shared.v2.u32", "st.shared.v4.u16", "st.shared.v4.u32",
       "ld.shared.f32", "ld.shared.v4.u16", "ld.shared.v4.u32", "st.volatile.shared.f32",
       "ld.volatile.shared.f32"),
      _SHARED_ADDR + """
    ld.global.v4.u32 {%r5, %r6, %r7, %r8}, [%rd5];
    st.shared.v4.u32 [%r22], {%r5, %r6, %r7, %r8};
    ld.shared.v4.u32 {%r9, %r10, %r11, %r12}, [%r24];
    mov.b32 %f1, %r4;
    st.shared.f32 [%r22+4], %f1;
    cvt.u16.u32 %rs1, %r4;
    st.shared.u16 [%r22+8], %rs1;
    ld.shared.f32 %f2, [%r24+4];
    ld.shared.v4.u16 {%rs2, %rs3, %rs4, %rs5}, [%r24+8];
    st.shared.v2.u32 [%r22+8], {%r9, %r10};
    st.shared.v4.u16 [%r22], {%rs5, %rs4, %rs3, %rs2};
    st.volatile.shared.f32 [%r22+12], %f2;
    ld.volatile.shared.f32 %f3, [%r24+12];
    ld.shared.v4.u32 {%r3, %r13, %r14, %r15}, [%r24];
    mov.b32 %r16, %f3;
    xor.b32 %r15, %r15, %r16;
    xor.b32 %r15, %r15, %r12;""", lambda x, y: _shared_round_trip(x, y))


# nvcc folds a constant into the offset and leaves the register below the array, below zero: [%r+256] with
# %r = a shared offset - 256 addresses in 32 bits (register + offset modulo 2^32), not at 2^32 + offset
lanes("st.shared / ld.shared from a 32-bit register that wrapped below zero (the sum wraps back)",
      ("st.shared.v4.u32", "ld.shared.v4.u32"), _SHARED_ADDR + """
    add.s32 %r25, %r22, -1048576;
    add.s32 %r26, %r24, -1048576;
    ld.global.v4.u32 {%r5, %r6, %r7, %r8}, [%rd5];
    st.shared.v4.u32 [%r25+1048576], {%r5, %r6, %r7, %r8};
    bar.sync 0;
    ld.shared.v4.u32 {%r3, %r13, %r14, %r15}, [%r26+1048576];""", lambda x, y: x[np.arange(T) ^ 1])


def _shared_round_trip(x, y):
    nb = np.arange(T) ^ 1
    row = x.copy()
    row[:, 1] = y[:, 0]
    row[:, 2] = (row[:, 2] & 0xFFFF0000) | (y[:, 0] & 0xFFFF)
    h = row.view(np.uint16).reshape(T, 8)                 # what each row holds before the second round
    f2, hh = row[nb, 1], h[nb, 4:8]
    new = np.zeros((T, 4), np.uint32)
    new[:, 0] = hh[:, 3].astype(np.uint32) | hh[:, 2].astype(np.uint32) << 16
    new[:, 1] = hh[:, 1].astype(np.uint32) | hh[:, 0].astype(np.uint32) << 16
    new[:, 2], new[:, 3] = x[nb, 0], x[nb, 1]
    f3 = f2[nb]
    new[:, 3] = f2
    out = new[nb].copy()
    out[:, 3] = out[:, 3] ^ f3 ^ x[nb, 3]
    return out


# ---------------------------------------------------------------- control flow and warp primitives
lanes("bra / bra.uni: divergent paths reconverge", ("bra", "bra.uni"), """
    and.b32 %r5, %r1, 1;
    setp.eq.s32 %p1, %r5, 0;
    @%p1 bra $EVEN;
    add.s32 %r3, %r2, 100;
    bra.uni $JOIN;
$EVEN:
    add.s32 %r3, %r2, 200;
$JOIN:
    add.s32 %r3, %r3, 1;""", lambda x, y: x[:, 0].astype(np.uint64) + np.where(np.arange(T) % 2 == 0, 201, 101))
lanes("ret ends only the lanes that take it", "ret",
      "mov.u32 %r3, 7;\n    setp.lt.u32 %p1, %r1, 5;\n    @%p1 ret;",
      lambda x, y: np.where(np.arange(T) < 5, 0, 7))
lanes("activemask.b32 in a divergent branch", "activemask.b32", """
    and.b32 %r5, %r1, 1;
    setp.eq.s32 %p1, %r5, 0;
    @%p1 bra $E;
    activemask.b32 %r3;
$E:""", lambda x, y: np.where(np.arange(T) % 2 == 1, 0xAAAAAAAA, 0))
lanes("shfl.sync.down / idx (clamped, out-of-range source keeps its own value)",
      ("shfl.sync.down.b32", "shfl.sync.idx.b32"),
      "shfl.sync.down.b32 %r3|%p1, %r2, 3, 31, -1;\n    selp.b32 %r13, 1, 0, %p1;\n"
      "    and.b32 %r5, %r4, 31;\n    shfl.sync.idx.b32 %r14, %r2, %r5, 31, -1;\n"
      "    shfl.sync.down.b32 %r15, %r2, 2, 0x101f, -1;",
      lambda x, y: _shuffles(x, y))


def _shuffles(x, y):
    lane = np.arange(T)
    down = np.where(lane + 3 < 32, x[np.minimum(lane + 3, 31), 0], x[:, 0])
    idx = x[y[:, 0] & 31, 0]
    # c = 0x101f: segment mask 0x10 splits the warp into halves of 16; clamp 0x1f within the segment
    seg_end = (lane & 0x10) | 0xF
    src = lane + 2
    down_seg = np.where(src <= seg_end, x[np.minimum(src, 31), 0], x[:, 0])
    return np.stack([down, lane + 3 < 32, idx, down_seg], 1)


def _elect_check(a):
    out = a[2]
    assert out[:, 0].sum() == 1 and (out[:, 0] == out[:, 2]).all()     # one lane elected, and it is %r5
    leader = int(np.nonzero(out[:, 0])[0][0])
    assert (out[:, 1] == leader).all()                                # every lane learns the leader


lanes("elect.sync elects exactly one lane, and every lane learns which", "elect.sync",
      "elect.sync %r5|%p1, -1;\n    selp.b32 %r3, 1, 0, %p1;\n    mov.u32 %r13, %r5;\n"
      "    setp.eq.u32 %p2, %r5, %r1;\n    selp.b32 %r14, 1, 0, %p2;", None, check=_elect_check)
lanes("trap is a finding", "trap", "trap;", lambda x, y: np.zeros(T), findings=("Trap",))
lanes("setmaxnreg.dec then .inc, checked for range, step 8 and direction",
      ("setmaxnreg.dec.sync.aligned.u32", "setmaxnreg.inc.sync.aligned.u32"),
      "setmaxnreg.dec.sync.aligned.u32 40;\n    setmaxnreg.inc.sync.aligned.u32 232;\n    mov.u32 %r3, %r2;",
      lambda x, y: x[:, 0], threads=128,      # setmaxnreg is .sync.aligned over a whole warp group
      variants=(("inc.sync.aligned.u32 232", "inc.sync.aligned.u32 32", {"SetmaxnregMisuse"}),
                ("dec.sync.aligned.u32 40", "dec.sync.aligned.u32 44", {"SetmaxnregMisuse"}),
                ("dec.sync.aligned.u32 40", "dec.sync.aligned.u32 16", {"SetmaxnregMisuse"})))

# ---------------------------------------------------------------- barriers
_WORD_ADDR = "mov.u32 %r20, sbuf;\n    shl.b32 %r21, %r1, 2;\n    add.s32 %r22, %r20, %r21;\n"
lanes("bar.sync orders the other warp's shared store before the load", "bar.sync", _WORD_ADDR + """
    st.shared.u32 [%r22], %r2;
    bar.sync 0;
    xor.b32 %r23, %r21, 128;
    add.s32 %r24, %r20, %r23;
    ld.shared.u32 %r3, [%r24];""", lambda x, y: x[np.arange(64) ^ 32, 0], threads=64,
      variants=(("bar.sync 0;", "", {"DataRace", "PoisonUse"}),))
lanes("bar.arrive (producer) releases to bar.sync (consumer)", "bar.arrive", """
    setp.lt.u32 %p1, %r1, 32;
    mov.u32 %r20, sbuf;
    and.b32 %r21, %r1, 31;
    shl.b32 %r21, %r21, 2;
    add.s32 %r22, %r20, %r21;
    @%p1 bra $CONS;
    st.shared.u32 [%r22], %r2;
    bar.arrive 1, 64;
    bra.uni $DONE;
$CONS:
    bar.sync 1, 64;
    ld.shared.u32 %r3, [%r22];
$DONE:""", lambda x, y: np.where(np.arange(64) < 32, x[(np.arange(64) + 32) % 64, 0], 0), threads=64,
      variants=(("bar.arrive 1, 64;", "", {"Deadlock"}), ("bar.arrive 1, 64;", "bar.arrive 1, 96;",
                                                          {"BarrierMismatch", "Deadlock"})))
lanes("bar.warp.sync between a lane's store and its neighbour's load", "bar.warp.sync", _WORD_ADDR + """
    st.shared.u32 [%r22], %r2;
    bar.warp.sync -1;
    xor.b32 %r23, %r21, 4;
    add.s32 %r24, %r20, %r23;
    ld.shared.u32 %r3, [%r24];""", lambda x, y: x[np.arange(T) ^ 1, 0])

# ---------------------------------------------------------------- cp.async and mbarriers
_ROW_ADDR = "mov.u32 %r20, sbuf;\n    shl.b32 %r21, %r1, 4;\n    add.s32 %r22, %r20, %r21;\n" \
            "    xor.b32 %r23, %r21, 16;\n    add.s32 %r24, %r20, %r23;\n"
lanes("cp.async.cg 16 bytes, committed and waited for", ("cp.async.cg.shared.global", "cp.async.commit_group",
                                                          "cp.async.wait_group"), _ROW_ADDR + """
    cp.async.cg.shared.global [%r22], [%rd5], 16;
    cp.async.commit_group;
    cp.async.wait_group 0;
    ld.shared.v4.u32 {%r3, %r13, %r14, %r15}, [%r24];""", lambda x, y: x[np.arange(T) ^ 1],
      variants=(("cp.async.wait_group 0;", "", {"AsyncReadBeforeWait"}),))
lanes("cp.async.wait_group 1 waits for all but the newest group", "cp.async.wait_group", _ROW_ADDR + """
    cp.async.cg.shared.global [%r22], [%rd5], 16;
    cp.async.commit_group;
    add.s32 %r25, %r22, 1024;
    cp.async.cg.shared.global [%r25], [%rd6], 16;
    cp.async.commit_group;
    cp.async.wait_group 1;
    ld.shared.v4.u32 {%r3, %r13, %r14, %r15}, [%r24];
    cp.async.wait_group 0;""", lambda x, y: x[np.arange(T) ^ 1],
      variants=(("ld.shared.v4.u32 {%r3, %r13, %r14, %r15}, [%r24];",
                 "add.s32 %r26, %r24, 1024;\n    ld.shared.v4.u32 {%r3, %r13, %r14, %r15}, [%r26];",
                 {"AsyncReadBeforeWait"}),))
_INIT = """
    mov.u32 %r30, mbar;
    setp.ne.s32 %p1, %r1, 0;
    @%p1 bra $INITED;
    mbarrier.init.shared.b64 [%r30], {count};
    fence.mbarrier_init.release.cluster;
$INITED:
    bar.sync 0;
"""
_WAIT = """
$WAIT:
    mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 %p2, [%r30], 0, 0x989680;
    @!%p2 bra $WAIT;
"""
lanes("cp.async.mbarrier.arrive.noinc: the barrier completes when every thread's copies landed",
      ("cp.async.mbarrier.arrive.noinc.shared.b64", "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64",
       "mbarrier.init.shared.b64"),
      _INIT.format(count=32) + _ROW_ADDR + """
    cp.async.cg.shared.global [%r22], [%rd5], 16;
    cp.async.mbarrier.arrive.noinc.shared.b64 [%r30];""" + _WAIT + """
    ld.shared.v4.u32 {%r3, %r13, %r14, %r15}, [%r24];""", lambda x, y: x[np.arange(T) ^ 1],
      variants=(("[%r30], 32;", "[%r30], 33;", {"Deadlock"}),))
lanes("mbarrier.arrive / test_wait.parity: parity 0 completes after every arrival, parity 1 does not",
      ("mbarrier.arrive.shared.b64", "mbarrier.test_wait.parity.shared.b64", "mbarrier.init.shared.b64"),
      _INIT.format(count=64) + _WORD_ADDR + """
    st.shared.u32 [%r22], %r2;
    mbarrier.arrive.shared.b64 %rd20, [%r30];
    mov.u32 %r31, 0;
$TWAIT:
    mbarrier.test_wait.parity.shared.b64 %p2, [%r30], %r31;
    @!%p2 bra $TWAIT;
    xor.b32 %r23, %r21, 128;
    add.s32 %r24, %r20, %r23;
    ld.shared.u32 %r3, [%r24];
    mov.u32 %r32, 1;
    mbarrier.test_wait.parity.shared.b64 %p3, [%r30], %r32;
    selp.b32 %r13, 1, 0, %p3;""", lambda x, y: np.stack([x[np.arange(64) ^ 32, 0], np.zeros(64)], 1),
      threads=64, variants=(("[%r30], 64;", "[%r30], 96;", {"Deadlock"}),))
lanes("cp.async.bulk (1-D) completes on its mbarrier with expect_tx",
      ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes", "mbarrier.arrive.expect_tx.shared.b64",
       "fence.mbarrier_init.release.cluster"),
      _INIT.format(count=1) + """
    mov.u32 %r20, sbuf;
    @%p1 bra $WAIT;
    mbarrier.arrive.expect_tx.shared.b64 _, [%r30], 512;
    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r20], [%rd1], 512, [%r30];""" + _WAIT + """
    shl.b32 %r21, %r1, 4;
    xor.b32 %r21, %r21, 496;
    add.s32 %r22, %r20, %r21;
    ld.shared.v4.u32 {%r3, %r13, %r14, %r15}, [%r22];""", lambda x, y: x[31 - np.arange(T)],
      variants=(("[%r30], 512;", "[%r30], 256;", {"MbarrierMisuse"}),))


# ---------------------------------------------------------------- TMA tile loads (tensor maps)
def _tma_case(rank):
    """2-D: a float32 12 x 20 tensor, an 8 x 4 box at (16, 10), partly outside (zero fill), no swizzle.
    3-D: a float16 2 x 8 x 64 tensor, a 64 x 8 x 1 box at (0, 4, 1), half outside, 128-byte swizzle."""
    if rank == 2:
        tensor = RNG.standard_normal((12, 20)).astype(np.float32)
        tm = E.TensorMap("float32", 2, (0, 0), (20, 12), (80,), (8, 4), (1, 1), 0, 0, 0, 0)
        coords, nbytes = "{%r32, %r33}", 128
        dense = np.zeros((4, 8), np.float32)
        dense[:2, :4] = tensor[10:12, 16:20]
        image = dense.view(np.uint8).ravel()
        set_coords = "mov.u32 %r32, 16;\n    mov.u32 %r33, 10;"
    else:
        tensor = RNG.standard_normal((2, 8, 64)).astype(np.float16)
        tm = E.TensorMap("float16", 3, (0, 0), (64, 8, 2), (128, 1024), (64, 8, 1), (1, 1, 1), 0, 3, 0, 0)
        coords, nbytes = "{%r32, %r33, %r34}", 1024
        dense = np.zeros((8, 64), np.float16)
        dense[:4] = tensor[1, 4:8]
        flat = dense.view(np.uint8).ravel()
        o = np.arange(1024)
        image = np.zeros(1024, np.uint8)
        image[o ^ (((o >> 7) & 7) << 4)] = flat          # Swizzle<3,4,3>: 16-byte chunk ^= 128-byte row
        set_coords = "mov.u32 %r32, 0;\n    mov.u32 %r33, 4;\n    mov.u32 %r34, 1;"
    words = nbytes // 4 // T
    body = f"""
    ld.param.u64 %rd2, [k_param_1];
    mov.u32 %r1, %tid.x;
    mov.b64 %rd10, k_param_0;
    cvta.param.u64 %rd11, %rd10;
{BEGIN}
{_INIT.format(count=1)}
    mov.u32 %r20, tbuf;
    @%p1 bra $WAIT;
    mbarrier.arrive.expect_tx.shared.b64 _, [%r30], {nbytes};
    {set_coords}
    cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes [%r20], [%rd11, {coords}], [%r30];
{_WAIT}
{END}
    mul.lo.s32 %r21, %r1, {4 * words};
    add.s32 %r22, %r20, %r21;
    mul.wide.u32 %rd3, %r1, {4 * words};
    add.s64 %rd4, %rd2, %rd3;
""" + "".join(f"    ld.shared.u32 %r3, [%r22+{4 * i}];\n    st.global.u32 [%rd4+{4 * i}], %r3;\n"
              for i in range(words))
    shared = "    .shared .align 1024 .b8 tbuf[1024];\n    .shared .align 8 .b64 mbar;\n"
    ptx = kernel(body, ["    .param .align 64 .b8 k_param_0[128]", "    .param .u64 k_param_1"], shared,
                 target="sm_90a")
    launch = E.Launch("k", (1, 1, 1), (T, 1, 1), 0, (("tensormap", tm), ("buffer", 1, 0)))

    def check(a):
        np.testing.assert_array_equal(a[1].view(np.uint8), image)
    form = f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes"
    CASES.append(Case(f"TMA {rank}-D tile load", (form,), ptx, launch,
                      lambda: (tensor.copy(), np.zeros(nbytes // 4, np.uint32)), check,
                      variants=((f"[%r30], {nbytes};", f"[%r30], {nbytes // 2};", {"MbarrierMisuse"}),)))


_tma_case(2)
_tma_case(3)

# ---------------------------------------------------------------- tensor cores
_MAT = RNG.integers(-4, 5, size=(4, 8, 8)).astype(np.float16)      # ldmatrix: four 8 x 8 matrices
for _trans in ("", ".trans"):
    _form = f"ldmatrix.sync.aligned.m8n8.x4{_trans}.shared.b16"
    lanes(f"ldmatrix x4{_trans} (lane 8j+r gives row 7-r of matrix j)", _form, _ROW_ADDR + f"""
    ld.global.v4.u32 {{%r5, %r6, %r7, %r8}}, [%rd5];
    st.shared.v4.u32 [%r22], {{%r5, %r6, %r7, %r8}};
    shr.u32 %r25, %r1, 3;
    shl.b32 %r25, %r25, 7;
    and.b32 %r26, %r1, 7;
    sub.s32 %r26, 7, %r26;
    shl.b32 %r26, %r26, 4;
    add.s32 %r27, %r20, %r25;
    add.s32 %r27, %r27, %r26;
    {_form} {{%r3, %r13, %r14, %r15}}, [%r27];""",
          lambda x, y, _t=bool(_trans): _ldmatrix(_t), x=lambda n: _MAT.view(np.uint32).reshape(n, 4).copy())


def _ldmatrix(trans):
    lane = np.arange(T)
    logical = _MAT[:, ::-1, :].view(np.uint16)                         # logical row r = stored row 7 - r
    r, c = lane // 4, lane % 4
    out = np.zeros((T, 4), np.uint32)
    for j in range(4):
        m = logical[j].T if trans else logical[j]
        out[:, j] = m[r, 2 * c].astype(np.uint32) | m[r, 2 * c + 1].astype(np.uint32) << 16
    return out


_A16 = RNG.integers(-3, 4, size=(16, 16)).astype(np.float16)
_B16 = RNG.integers(-3, 4, size=(16, 8)).astype(np.float16)
_C16 = RNG.integers(-8, 9, size=(8, 8)).astype(np.float32)            # rows g and g + 8 of C are equal


def _mma_fragments(n):
    lane = np.arange(n)
    g, t = lane // 4, lane % 4

    def pair(m, rr, cc):
        return m[rr, cc].view(np.uint16).astype(np.uint32) | m[rr, cc + 1].view(np.uint16).astype(np.uint32) << 16
    a = np.stack([pair(_A16, g, 2 * t), pair(_A16, g + 8, 2 * t), pair(_A16, g, 2 * t + 8),
                  pair(_A16, g + 8, 2 * t + 8)], 1)
    bt = _B16.T
    b = np.stack([pair(bt, g, 2 * t), pair(bt, g, 2 * t + 8), _C16[g, 2 * t].view(np.uint32),
                  _C16[g, 2 * t + 1].view(np.uint32)], 1)
    return a, b


def _mma_want(x, y):
    lane = np.arange(T)
    g, t = lane // 4, lane % 4
    c = np.concatenate([_C16, _C16])
    d = _A16.astype(np.float64) @ _B16.astype(np.float64) + c
    return np.stack([d[g, 2 * t], d[g, 2 * t + 1], d[g + 8, 2 * t], d[g + 8, 2 * t + 1]], 1).astype(
        np.float32).view(np.uint32)


lanes("mma.sync m16n8k16 with the PTX ISA fragment layouts", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", """
    ld.global.v4.u32 {%r5, %r6, %r7, %r8}, [%rd5];
    ld.global.v2.u32 {%r9, %r10}, [%rd6];
    ld.global.v2.f32 {%f1, %f2}, [%rd6+8];
    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f3, %f4, %f5, %f6}, {%r5, %r6, %r7, %r8}, {%r9, %r10}, {%f1, %f2, %f1, %f2};
    mov.b32 %r3, %f3;
    mov.b32 %r13, %f4;
    mov.b32 %r14, %f5;
    mov.b32 %r15, %f6;""", _mma_want, x=lambda n: _mma_fragments(n)[0], y=lambda n: _mma_fragments(n)[1])

_WA = RNG.integers(-3, 4, size=(16, 16)).astype(np.float16)
_WBT = RNG.integers(-3, 4, size=(16, 16)).astype(np.float16)          # B column-major: _WBT[n, k] = B[k, n]
_WMMA_FORMS = ("wmma.load.a.sync.aligned.row.m16n16k16.shared.f16", "wmma.load.b.sync.aligned.col.m16n16k16.shared.f16",
               "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32", "wmma.store.d.sync.aligned.row.m16n16k16.shared.f32")
_A8 = ", ".join(f"%r{i}" for i in range(41, 49))
_B8 = ", ".join(f"%r{i}" for i in range(49, 57))
_C8 = ", ".join(f"%f{i}" for i in range(1, 9))
_D8 = ", ".join(f"%f{i}" for i in range(11, 19))
lanes("wmma m16n16k16: load A (row) and B (col), mma with C = 1, store D (row)", _WMMA_FORMS, f"""
    mov.u32 %r20, sbuf;
    shl.b32 %r21, %r1, 4;
    add.s32 %r22, %r20, %r21;
    ld.global.v4.u32 {{%r5, %r6, %r7, %r8}}, [%rd5];
    st.shared.v4.u32 [%r22], {{%r5, %r6, %r7, %r8}};
    ld.global.v4.u32 {{%r5, %r6, %r7, %r8}}, [%rd6];
    st.shared.v4.u32 [%r22+512], {{%r5, %r6, %r7, %r8}};
    mov.u32 %r40, 16;
    wmma.load.a.sync.aligned.row.m16n16k16.shared.f16 {{{_A8}}}, [%r20], %r40;
    add.s32 %r25, %r20, 512;
    wmma.load.b.sync.aligned.col.m16n16k16.shared.f16 {{{_B8}}}, [%r25], %r40;
""" + "".join(f"    mov.f32 %f{i}, 0f3F800000;\n" for i in range(1, 9)) + f"""
    wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {{{_D8}}}, {{{_A8}}}, {{{_B8}}}, {{{_C8}}};
    add.s32 %r26, %r20, 1024;
    wmma.store.d.sync.aligned.row.m16n16k16.shared.f32 [%r26], {{{_D8}}}, %r40;
    shl.b32 %r27, %r1, 5;
    add.s32 %r28, %r26, %r27;
    ld.shared.v4.u32 {{%r3, %r13, %r14, %r15}}, [%r28];
    ld.shared.v4.u32 {{%r5, %r6, %r7, %r8}}, [%r28+16];
    st.global.v4.u32 [%rd8], {{%r5, %r6, %r7, %r8}};""",
      lambda x, y: _wmma_d()[:, :4], aux=lambda x, y: _wmma_d()[:, 4:],
      x=lambda n: _WA.view(np.uint32).reshape(n, 4).copy(), y=lambda n: _WBT.view(np.uint32).reshape(n, 4).copy())


def _wmma_d():
    d = _WA.astype(np.float64) @ _WBT.astype(np.float64).T + 1
    return d.astype(np.float32).view(np.uint32).reshape(T, 8)


def _wgmma_case():
    """One warp group: D = A B^T twice (scale-d false, then true), A 64 x 16 and B^T 128 x 16 f16 in the
    K-major no-swizzle layout (8 x 16-byte core matrices: LBO 128 bytes along K, SBO 256 bytes along M / N),
    written by ordinary stores and made visible to the async proxy by fence.proxy.async."""
    a = RNG.integers(-3, 4, size=(64, 16)).astype(np.float16)
    bt = RNG.integers(-3, 4, size=(128, 16)).astype(np.float16)
    image = np.zeros(6144, np.uint8)
    for base, mat in ((0, a), (2048, bt)):
        rows, ks = np.meshgrid(np.arange(mat.shape[0]), np.arange(16), indexing="ij")
        off = base + (rows % 8) * 16 + (rows // 8) * 256 + (ks // 8) * 128 + (ks % 8) * 2
        image.view(np.uint8)[off.ravel()[:, None] + np.arange(2)] = mat.view(np.uint8).reshape(-1, 2)
    d = 2 * (a.astype(np.float64) @ bt.astype(np.float64).T)
    thread, i = np.meshgrid(np.arange(128), np.arange(64), indexing="ij")
    w, lane = thread // 32, thread % 32
    row = 16 * w + lane // 4 + 8 * ((i // 2) % 2)
    col = 8 * (i // 4) + 2 * (lane % 4) + i % 2
    want = d[row, col].astype(np.float32)
    copy = "".join(f"""
    add.s32 %r5, %r1, {k * 128};
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r6, [%rd4];
    shl.b32 %r7, %r5, 2;
    add.s32 %r8, %r20, %r7;
    st.shared.u32 [%r8], %r6;""" for k in range(12))
    acc = ", ".join(f"%f{j}" for j in range(1, 65))
    mma = "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"
    stores = "".join(f"    st.global.f32 [%rd6+{4 * j}], %f{j + 1};\n" for j in range(64))
    body = f"""
    ld.param.u64 %rd1, [k_param_0];
    ld.param.u64 %rd2, [k_param_1];
    mov.u32 %r1, %tid.x;
    mov.u32 %r20, wsm;{copy}
{BEGIN}
    fence.proxy.async.shared::cta;
    bar.sync 0;
    cvt.u64.u32 %rd20, %r20;
    shr.u64 %rd20, %rd20, 4;
    and.b64 %rd20, %rd20, 16383;
    or.b64 %rd21, %rd20, {(128 >> 4) << 16 | (256 >> 4) << 32};
    add.s64 %rd22, %rd21, {2048 >> 4};
    setp.ne.b32 %p3, %r1, %r1;
    setp.eq.b32 %p4, %r1, %r1;
    wgmma.fence.sync.aligned;
    {mma} {{{acc}}}, %rd21, %rd22, %p3, 1, 1, 0, 0;
    {mma} {{{acc}}}, %rd21, %rd22, %p4, 1, 1, 0, 0;
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned 0;
{END}
    mul.wide.u32 %rd5, %r1, 256;
    add.s64 %rd6, %rd2, %rd5;
{stores}"""
    ptx = kernel(body, ["    .param .u64 k_param_0", "    .param .u64 k_param_1"],
                 "    .shared .align 128 .b8 wsm[6144];\n", target="sm_90a")
    launch = E.Launch("k", (1, 1, 1), (128, 1, 1), 0, (("buffer", 0, 0), ("buffer", 1, 0)))

    def check(args):
        np.testing.assert_array_equal(args[1], want)
    forms = ("wgmma.fence.sync.aligned", "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16",
             "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned", "fence.proxy.async.shared::cta")
    CASES.append(Case("wgmma m64n128k16 from descriptors (scale-d false, then true)", forms, ptx, launch,
                      lambda: (image.view(np.uint32).copy(), np.zeros((128, 64), np.float32)), check,
                      variants=(("fence.proxy.async.shared::cta;", "", {"ProxyFenceMissing"}),
                                ("wgmma.wait_group.sync.aligned 0;", "", {"PoisonUse"}))))


_wgmma_case()


# ---------------------------------------------------------------- the runner and the coverage check
@pytest.fixture
def executed(monkeypatch):
    """(PTX line, opcode form) of every instruction that ran with at least one active lane."""
    seen = set()
    compile_ = loader.Prepared._compile

    def traced(self, ins):
        kind, fn, gi, neg, ins_ = compile_(self, ins)
        key = (ins.line, ins.opcode)
        if kind == 0:
            def run(w, _fn=fn):
                seen.add(key)
                return _fn(w)
        else:
            def run(w, m, _fn=fn):
                if m.any():
                    seen.add(key)
                return _fn(w, m)
        return kind, run, gi, neg, ins_
    monkeypatch.setattr(loader.Prepared, "_compile", traced)
    return seen


def _span(ptx):
    lines = ptx.splitlines()
    return (next(i for i, s in enumerate(lines, 1) if BEGIN in s), next(i for i, s in enumerate(lines, 1) if END in s))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_form(case, executed):
    args = case.args()
    report = E.run_ptx(case.ptx, [case.launch], *args, interleavings=case.interleavings)
    assert {f.kind for f in report.findings} == set(case.findings), str(report)
    first, last = _span(case.ptx)
    ran = {form for line, form in executed if first < line < last}
    assert not set(case.forms) - ran, f"named but not executed by the case: {sorted(set(case.forms) - ran)}"
    case.check(args)
    for old, new, expected in case.variants:
        assert old in case.ptx, old
        bad = E.run_ptx(case.ptx.replace(old, new), [case.launch], *case.args(), interleavings=4)
        assert {f.kind for f in bad.findings} & expected, f"{old!r} -> {new!r}: {bad}"


def test_every_corpus_form_has_its_own_case():
    forms = {line.split()[0] for line in (HERE / "opcodes.txt").read_text().splitlines() if line.strip()}
    covered = {f for c in CASES for f in c.forms}
    missing = sorted(forms - covered)
    assert not missing, f"corpus opcode forms without a unit case in this file: {missing}"
    assert covered <= E.handled_forms(), sorted(covered - E.handled_forms())
