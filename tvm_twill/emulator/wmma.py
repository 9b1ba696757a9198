"""wmma m16n16k16 (f16 inputs, f32 or f16 accumulators): load.a / load.b / load.c, mma, store.d.

PTX leaves the distribution of a wmma fragment over the lanes unspecified
(only wmma instructions may interpret it), so the emulator picks its own,
used consistently by every wmma instruction:

- A (16 x 16, 8 ``.f16x2`` registers): lane l holds row ``l % 16``, element
  j of the lane (half ``j % 2`` of register ``j // 2``) is column j (rows
  are held twice, by lanes l and l + 16);
- B (16 x 16): lane l holds column ``l % 16``, element j is row (k) j;
- C / D f32 (8 registers): lane l register i is (``l // 2``, ``8 (l % 2) + i``);
  f16 (4 ``.f16x2`` registers): element j of lane l is (``l // 2``, ``8 (l % 2) + j``).

Loads and stores go element by element through the shared-memory shadow
(races, poison); ``.row`` / ``.col`` and the stride operand (in elements) give
each element's address.  Products are summed in float64 and rounded once.
"""
from __future__ import annotations

import numpy as np

from ..errors import EmulationError
from .memops import access, address, space_of
from .values import LANE_IDS, LANES

ROW16 = (LANE_IDS % 16).astype(np.int64)
C_ROW = (LANE_IDS // 2).astype(np.int64)
C_COL0 = (8 * (LANE_IDS % 2)).astype(np.int64)


def _fragment_elements(kind):
    """For each of the 16 (A/B) or 8 (C/D) elements of a lane: (row, col) arrays over the lanes."""
    if kind == "a":
        return [(ROW16, np.full(LANES, j, np.int64)) for j in range(16)]
    if kind == "b":
        return [(np.full(LANES, j, np.int64), ROW16) for j in range(16)]
    return [(C_ROW, C_COL0 + j) for j in range(8)]


def compile_wmma(ins, cc):
    p = ins.parts
    if "m16n16k16" not in p:
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
    if p[1] in ("load", "store"):
        return _compile_load_store(ins, cc, p)
    if p[1] == "mma":
        return _compile_mma(ins, cc, p)
    raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")


def _compile_load_store(ins, cc, p):
    kind, t = p[2], p[-1]
    layout = "row" if "row" in p else "col"
    if kind not in ("a", "b", "c", "d") or t not in ("f16", "f32") or (kind in "ab" and t != "f16"):
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
    store = p[1] == "store"
    regs_op, addr_op = (ins.operands[1], ins.operands[0]) if store else (ins.operands[0], ins.operands[1])
    stride = cc.read(ins.operands[2], "u32", ins) if len(ins.operands) > 2 else None
    addr = address(cc, addr_op, ins)
    space = space_of(p)
    elems = _fragment_elements("c" if kind == "d" else kind)
    eb = 2 if t == "f16" else 4
    regs = [cc.reg(o, ins) for o in regs_op.items]
    if len(regs) * 4 // eb != len(elems):
        raise EmulationError(f"{ins.opcode} with {len(regs)} registers at PTX line {ins.line}")
    launch = cc.launch

    def run(w):
        cta = launch.cta
        base = addr(w)
        ld = stride(w).astype(np.uint64) if stride is not None else np.full(LANES, 16, np.uint64)
        words = [w.regs[i].copy() for i in regs]
        pz = np.zeros((len(regs), LANES), np.bool_)
        for j, (r, c) in enumerate(elems):
            lin = (r * ld.astype(np.int64) + c) if layout == "row" else (c * ld.astype(np.int64) + r)
            a = base + (lin * eb).astype(np.uint64)
            reg, half = (j // 2, j % 2) if eb == 2 else (j, 0)
            if store:
                val = (words[reg] >> np.uint32(16 * half)) & np.uint32(0xFFFF) if eb == 2 else words[reg]
                data = np.ascontiguousarray(val.astype(np.uint16 if eb == 2 else np.uint32)).view(np.uint8)
                pr = w.pois[regs[reg]]
                access(cta, w, ins, space, a, w.m, eb, True, data.reshape(LANES, eb), pr)
                continue
            raw, pe = access(cta, w, ins, space, a, w.m, eb)
            v = raw.view(np.uint16 if eb == 2 else np.uint32).reshape(-1).astype(np.uint32)
            if eb == 2:
                keep = np.uint32(0xFFFF0000 if half == 0 else 0x0000FFFF)
                words[reg] = (words[reg] & keep) | (v << np.uint32(16 * half))
            else:
                words[reg] = v
            if pe is not None:
                pz[reg] |= pe
        if not store:
            for k, i in enumerate(regs):
                w.regs[i] = np.where(w.m, words[k], w.regs[i]).astype(np.uint32)
                w.pois[i] = pz[k] if pz[k].any() else None
    return run


def _compile_mma(ins, cc, p):
    dt, ct = p[-2], p[-1]
    if "row" not in p or "col" not in p or dt not in ("f16", "f32") or ct not in ("f16", "f32"):
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
    d, a, b, c = ins.operands
    ra, rb = [cc.reg(o, ins) for o in a.items], [cc.reg(o, ins) for o in b.items]
    rc, rd = [cc.reg(o, ins) for o in c.items], [cc.reg(o, ins) for o in d.items]
    ea, eb_, ec = _fragment_elements("a"), _fragment_elements("b"), _fragment_elements("c")
    launch = cc.launch

    def unpack(w, regs, elems, half_regs):
        m = np.zeros((16, 16))
        pm = np.zeros((16, 16), np.bool_)
        for j, (r, col) in enumerate(elems):
            reg = regs[j // 2] if half_regs else regs[j]
            bits = w.regs[reg]
            if half_regs:
                v = ((bits >> np.uint32(16 * (j % 2))) & np.uint32(0xFFFF)).astype(np.uint16).view(np.float16)
            else:
                v = bits.view(np.float32)
            m[r, col] = v
            if w.pois[reg] is not None:
                pm[r, col] |= w.pois[reg]
        return m, pm

    def run(w):
        from .tensor import check_aligned
        check_aligned(launch.cta, w, ins)
        A, pa = unpack(w, ra, ea, True)
        B, pb = unpack(w, rb, eb_, True)
        C, pc = unpack(w, rc, ec, ct == "f16")
        D = A @ B + C
        P = pa.any(1)[:, None] | pb.any(0)[None, :] | pc
        for j, (r, col) in enumerate(ec):
            v, pz = D[r, col], P[r, col]
            if dt == "f32":
                w.regs[rd[j]] = v.astype(np.float32).view(np.uint32)
                w.pois[rd[j]] = pz if pz.any() else None
                continue
            reg, half = rd[j // 2], j % 2
            bits = v.astype(np.float16).view(np.uint16).astype(np.uint32) << np.uint32(16 * half)
            keep = np.uint32(0xFFFF0000 if half == 0 else 0x0000FFFF)
            w.regs[reg] = ((w.regs[reg] if half else np.zeros(LANES, np.uint32)) & keep) | bits
            old = w.pois[reg] if half else None
            pz = pz | old if old is not None else pz
            w.pois[reg] = pz if pz.any() else None
    return run


HANDLERS = {"wmma": compile_wmma}
