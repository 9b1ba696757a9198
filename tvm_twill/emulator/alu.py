"""The general ALU: integer arithmetic, logic, shifts, bit fields, comparisons, selects.

Each ``compile_*`` takes a parsed instruction and the kernel's ``Compiler`` and
returns a closure ``fn(w)`` executing it for the warp's active lanes.  Float
arithmetic (f32, f64, f16, bf16, f16x2, bf16x2) is ``fparith``'s.  Float
comparisons (PTX ISA 9.7.3.x ``setp``): the ordered ones (``eq ne lt le gt ge``)
are false when either operand is NaN, the unordered ones (``equ neu ltu leu
gtu geu``) true; ``num`` is true when neither is NaN, ``nan`` when either is.
"""
from __future__ import annotations

import numpy as np

from ..errors import EmulationError
from .fparith import compile_float
from .values import TYPED, WIDTH, por

INT = {"u8", "s8", "u16", "s16", "u32", "s32", "u64", "s64", "b8", "b16", "b32", "b64"}
FLOAT = {"f16", "f32", "f64"}
FLOAT_OPS = FLOAT | {"bf16", "f16x2", "bf16x2"}


def _type(ins, allowed):
    t = ins.parts[-1]
    if t not in allowed:
        raise EmulationError(f"unsupported type .{t} in {ins.opcode} at PTX line {ins.line}")
    return t


def _elementwise(ins, cc, t, fn, nsrc, dst_t=None, src_t=None):
    dst_t = dst_t or t
    src_t = src_t or t
    srcs = [cc.read(o, src_t, ins) for o in ins.operands[1:1 + nsrc]]
    pois = [cc.poison(o, ins) for o in ins.operands[1:1 + nsrc]]
    put = cc.write(ins.operands[0], dst_t, ins)
    if len(srcs) == 1:
        a, pa = srcs[0], pois[0]
        return lambda w: put(w, fn(a(w)), pa(w))
    if len(srcs) == 2:
        a, b = srcs
        pa, pb = pois
        return lambda w: put(w, fn(a(w), b(w)), por(pa(w), pb(w)))
    return lambda w: put(w, fn(*[s(w) for s in srcs]), por(*[p(w) for p in pois]))


def _tdiv(a, b):
    """Integer division truncating towards zero, exact for 64-bit values (wraps on -2^63 / -1)."""
    q = abs(a) // abs(b)
    q = -q if (a < 0) != (b < 0) else q
    return (q + 2**63) % 2**64 - 2**63


def _wide(t):
    return {"u16": "u32", "s16": "s32", "u32": "u64", "s32": "s64"}[t]


def _hi(t):
    def f(x, y):
        bits = WIDTH[t] * 8
        if bits == 64:
            xs, ys = [int(v) for v in x], [int(v) for v in y]
            return np.array([((p * q) >> 64) % (1 << 64) for p, q in zip(xs, ys)], np.uint64).view(TYPED[t])
        wide = TYPED[_wide(t)]
        return (x.astype(wide) * y.astype(wide) >> bits).astype(TYPED[t])
    return f


def compile_arith(ins, cc):
    p = ins.parts
    op = p[0]
    if p[-1] in FLOAT_OPS:
        return compile_float(ins, cc)
    t = _type(ins, INT)
    if op in ("add", "sub"):
        f = np.add if op == "add" else np.subtract
        if "sat" in p and t == "s32":
            return _elementwise(ins, cc, t, lambda x, y: np.clip(f(x.astype(np.int64), y.astype(np.int64)),
                                                                 -2**31, 2**31 - 1).astype(np.int32), 2)
        return _elementwise(ins, cc, t, lambda x, y: f(x, y).astype(x.dtype), 2)
    if op == "mul":
        if "wide" in p:
            wt = TYPED[_wide(t)]
            return _elementwise(ins, cc, t, lambda x, y: x.astype(wt) * y.astype(wt), 2, dst_t=_wide(t))
        if "hi" in p:
            return _elementwise(ins, cc, t, _hi(t), 2)
        return _elementwise(ins, cc, t, lambda x, y: (x * y).astype(x.dtype), 2)
    if op in ("mad", "fma"):
        if "wide" in p:
            wt = TYPED[_wide(t)]
            put = cc.write(ins.operands[0], _wide(t), ins)
            a, b = (cc.read(o, t, ins) for o in ins.operands[1:3])
            c = cc.read(ins.operands[3], _wide(t), ins)
            ps = [cc.poison(o, ins) for o in ins.operands[1:4]]
            return lambda w: put(w, a(w).astype(wt) * b(w).astype(wt) + c(w), por(*[q(w) for q in ps]))
        if "hi" in p:
            h = _hi(t)
            return _elementwise(ins, cc, t, lambda x, y, z: (h(x, y) + z).astype(x.dtype), 3)
        return _elementwise(ins, cc, t, lambda x, y, z: (x * y + z).astype(x.dtype), 3)
    if op in ("div", "rem"):
        def idiv(x, y):
            safe = np.where(y == 0, 1, y)
            if x.dtype.kind == "i":
                q = np.trunc(x.astype(np.float64) / safe).astype(x.dtype) if x.dtype.itemsize < 8 else \
                    np.array([_tdiv(a, b) for a, b in zip(x.tolist(), safe.tolist())], x.dtype)
                r = (x - q * safe).astype(x.dtype)
            else:
                q, r = x // safe, x % safe
            out = q if op == "div" else r
            return np.where(y == 0, np.array(-1).astype(x.dtype) if op == "div" else x, out).astype(x.dtype)
        return _elementwise(ins, cc, t, idiv, 2)
    if op in ("min", "max"):
        f = np.minimum if op == "min" else np.maximum
        return _elementwise(ins, cc, t, lambda x, y: f(x, y), 2)
    if op == "abs":
        return _elementwise(ins, cc, t, lambda x: np.abs(x).astype(x.dtype), 1)
    if op == "neg":
        return _elementwise(ins, cc, t, lambda x: (-x).astype(x.dtype), 1)
    raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")


UNARY_FLOAT = ("rcp", "sqrt", "rsqrt", "ex2", "lg2", "sin", "cos", "tanh")


def _shift(op, t):
    bits = WIDTH[t] * 8

    def f(x, s):
        s = s.astype(np.uint64)
        big = s >= bits
        sc = np.where(big, 0, s).astype(x.dtype if x.dtype.kind == "u" else np.dtype(x.dtype.str.replace("i", "u")))
        if op == "shl":
            r = (x.view(sc.dtype) << sc).view(x.dtype)
            return np.where(big, 0, r).astype(x.dtype)
        r = x >> sc.view(x.dtype) if x.dtype.kind == "i" else x >> sc
        fill = np.where(x < 0, -1, 0).astype(x.dtype) if x.dtype.kind == "i" else np.zeros_like(x)
        return np.where(big, fill, r).astype(x.dtype)
    return f


def compile_logic(ins, cc):
    op = ins.parts[0]
    t = _type(ins, INT | {"pred"})
    if op in ("shl", "shr"):
        put = cc.write(ins.operands[0], t, ins)
        a = cc.read(ins.operands[1], t, ins)
        s = cc.read(ins.operands[2], "u32", ins)
        pa, ps = cc.poison(ins.operands[1], ins), cc.poison(ins.operands[2], ins)
        f = _shift(op, t)
        return lambda w: put(w, f(a(w), s(w)), por(pa(w), ps(w)))
    fns = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}
    if op in fns:
        return _elementwise(ins, cc, t, fns[op], 2)
    if op == "not":
        return _elementwise(ins, cc, t, np.logical_not if t == "pred" else np.invert, 1)
    if op == "cnot":
        return _elementwise(ins, cc, t, lambda x: (x == 0).astype(x.dtype), 1)
    if op == "popc":
        return _elementwise(ins, cc, t, _popc, 1, dst_t="u32")
    if op == "clz":
        bits = WIDTH[t] * 8
        return _elementwise(ins, cc, t, lambda x: np.array([bits - int(v).bit_length() for v in x.tolist()],
                                                           np.uint32), 1, dst_t="u32")
    if op == "brev":
        bits = WIDTH[t] * 8
        return _elementwise(ins, cc, t, lambda x: np.array([int(format(int(v), f"0{bits}b")[::-1], 2)
                                                            for v in x.tolist()], x.dtype), 1)
    raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")


def _popc(x):
    u = x.view(np.dtype(f"u{x.dtype.itemsize}")).astype(np.uint64)
    return np.array([int(v).bit_count() for v in u], np.uint32)


def compile_bits(ins, cc):
    op = ins.parts[0]
    if op == "bfe":
        t = _type(ins, INT)
        bits = WIDTH[t] * 8

        def bfe(x, pos, ln):
            pos, ln = pos.astype(np.int64) & 0xFF, ln.astype(np.int64) & 0xFF
            ux = x.view(np.dtype(f"u{x.dtype.itemsize}")).astype(np.uint64)
            out = []
            for v, p, n in zip(ux.tolist(), pos.tolist(), ln.tolist()):
                f = (v >> p) & ((1 << n) - 1) if p < bits else 0
                if x.dtype.kind == "i" and n:
                    sbit = min(p + n - 1, bits - 1)
                    if (v >> sbit) & 1:
                        f |= ~((1 << n) - 1) if p + n - 1 < bits else ~((1 << max(bits - p, 0)) - 1)
                out.append(f % (1 << bits))
            return np.array(out, np.dtype(f"u{x.dtype.itemsize}")).view(x.dtype)
        return _three(ins, cc, t, ("u32", "u32"), bfe)
    if op == "bfi":
        t = _type(ins, INT)
        bits = WIDTH[t] * 8

        def bfi(a, b, pos, ln):
            out = []
            for x, y, p, n in zip(a.tolist(), b.tolist(), (pos & 0xFF).tolist(), (ln & 0xFF).tolist()):
                n = min(n, max(bits - p, 0))
                m = ((1 << n) - 1) << p if p < bits else 0
                out.append(((y % (1 << bits)) & ~m | ((x << p) & m)) % (1 << bits))
            return np.array(out, np.dtype(f"u{WIDTH[t]}")).view(a.dtype)
        srcs = [cc.read(o, ty, ins) for o, ty in zip(ins.operands[1:5], (t, t, "u32", "u32"))]
        ps = [cc.poison(o, ins) for o in ins.operands[1:5]]
        put = cc.write(ins.operands[0], t, ins)
        return lambda w: put(w, bfi(*[s(w) for s in srcs]), por(*[p(w) for p in ps]))
    if op == "prmt":
        mode = ins.parts[2] if len(ins.parts) > 2 else ""
        if mode:
            raise EmulationError(f"unsupported prmt mode .{mode} at PTX line {ins.line}")

        def prmt(a, b, c):
            x = (a.astype(np.uint64) | (b.astype(np.uint64) << 32))
            out = np.zeros(a.shape, np.uint64)
            for k in range(4):
                sel = (c.astype(np.uint64) >> (4 * k)) & 0xF
                byte = (x >> ((sel & 7) * 8)) & 0xFF
                sign = np.where((sel & 8) != 0, np.where(byte & 0x80, 0xFF, 0), byte)
                out |= sign.astype(np.uint64) << (8 * k)
            return out.astype(np.uint32)
        return _three(ins, cc, "b32", ("b32", "b32"), prmt)
    if op == "lop3":
        lut = ins.operands[4]
        if lut.kind != "imm":
            raise EmulationError(f"lop3 needs an immediate LUT at PTX line {ins.line}")
        imm = lut.value

        def lop3(a, b, c):
            r = np.zeros_like(a)
            for k in range(8):
                if imm >> k & 1:
                    ta = a if k & 4 else ~a
                    tb = b if k & 2 else ~b
                    tc = c if k & 1 else ~c
                    r |= ta & tb & tc
            return r
        return _three(ins, cc, "b32", ("b32", "b32"), lop3)
    raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")


def _three(ins, cc, t, more, fn):
    srcs = [cc.read(ins.operands[1], t, ins)] + [cc.read(o, ty, ins) for o, ty in zip(ins.operands[2:4], more)]
    ps = [cc.poison(o, ins) for o in ins.operands[1:4]]
    put = cc.write(ins.operands[0], t, ins)
    return lambda w: put(w, fn(*[s(w) for s in srcs]), por(*[p(w) for p in ps]))


CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
       "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal, "hi": np.greater, "hs": np.greater_equal}


def _cmp(name):
    if name in CMP:
        f = CMP[name]
        return lambda x, y: f(x, y) & ~(np.isnan(x) | np.isnan(y)) if x.dtype.kind == "f" else f(x, y)
    if name.endswith("u") and name[:-1] in CMP:    # unordered float compares: true when either is NaN
        f = CMP[name[:-1]]
        return lambda x, y: f(x, y) | np.isnan(x) | np.isnan(y)
    if name == "num":
        return lambda x, y: ~(np.isnan(x) | np.isnan(y))
    if name == "nan":
        return lambda x, y: np.isnan(x) | np.isnan(y)
    return None


def compile_setp(ins, cc):
    p = ins.parts
    t = _type(ins, INT | FLOAT)
    cmp = _cmp(p[1])
    if cmp is None:
        raise EmulationError(f"unsupported comparison .{p[1]} in {ins.opcode} at PTX line {ins.line}")
    boolop = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}.get(p[2]) if len(p) > 3 else None
    dst = ins.operands[0]
    dsts = dst.items if dst.kind == "pair" else (dst,)
    a, b = (cc.read(o, t, ins) for o in ins.operands[1:3])
    pa, pb = (cc.poison(o, ins) for o in ins.operands[1:3])
    c = cc.read(ins.operands[3], "pred", ins) if boolop else None
    if p[0] == "set":
        dt = p[2] if len(p) > 3 and p[2] in TYPED else p[-2]
        put = cc.write(dst, dt, ins)
        one = {"f32": np.float32(1.0)}.get(dt, np.array(-1).astype(TYPED[dt]))

        def run_set(w):
            r = cmp(a(w), b(w))
            put(w, np.where(r, one, 0).astype(TYPED[dt]), por(pa(w), pb(w)))
        return run_set
    puts = [cc.write(d, "pred", ins) for d in dsts]

    def run(w):
        r = cmp(a(w), b(w))
        q = por(pa(w), pb(w))
        if boolop is not None:
            r2 = boolop(~r, c(w))
            r = boolop(r, c(w))
        puts[0](w, r, q)
        if len(puts) > 1:
            puts[1](w, r2 if boolop is not None else ~r, q)
    return run


def compile_selp(ins, cc):
    t = _type(ins, INT | FLOAT)
    a, b = (cc.read(o, t, ins) for o in ins.operands[1:3])
    c = cc.read(ins.operands[3], "pred" if ins.parts[0] == "selp" else ins.parts[-1], ins)
    ps = [cc.poison(o, ins) for o in ins.operands[1:4]]
    put = cc.write(ins.operands[0], t, ins)
    if ins.parts[0] == "slct":
        return lambda w: put(w, np.where(c(w) >= 0, a(w), b(w)), por(*[p(w) for p in ps]))
    return lambda w: put(w, np.where(c(w), a(w), b(w)), por(*[p(w) for p in ps]))


HANDLERS = {}
for _op in ("add", "sub", "mul", "mad", "fma", "div", "rem", "min", "max", "abs", "neg"):
    HANDLERS[_op] = compile_arith
for _op in UNARY_FLOAT:
    HANDLERS[_op] = compile_float
for _op in ("and", "or", "xor", "not", "cnot", "shl", "shr", "popc", "clz", "brev"):
    HANDLERS[_op] = compile_logic
for _op in ("bfe", "bfi", "prmt", "lop3"):
    HANDLERS[_op] = compile_bits
HANDLERS["setp"] = compile_setp
HANDLERS["set"] = compile_setp
HANDLERS["selp"] = compile_selp
HANDLERS["slct"] = compile_selp
