"""Warp-level tensor-core instructions: ldmatrix and mma.sync (m16n8k16 / m16n8k8, f16 or bf16 in, f32 out).

The fragment maps (which lane and register holds which matrix element) come
from ``encodings`` (checked there against CuTe); m16n8k8's from the PTX ISA
figure.  Products are summed in float64 and rounded once to
float32; the hardware's accumulation order is unspecified, so results agree
with a GPU within accumulation-order tolerance, not bit for bit.  Both are
``.sync.aligned``: reaching one with part of the warp is a
``BarrierMismatch`` finding.
"""
from __future__ import annotations

import numpy as np

from ..errors import EmulationError
from . import findings as F
from .encodings import ldmatrix_source, mma_m16n8k16_a, mma_m16n8k16_b, mma_m16n8k16_c
from .memops import access, address
from .values import LANE_IDS, LANES, bf16_to_f32

G = LANE_IDS // 4
Q = LANE_IDS % 4


def mma_a(k16: bool, i):
    """(row, col) of element i of A (16 x K) held by each lane."""
    if k16:
        return mma_m16n8k16_a(LANE_IDS.astype(np.int64), i)
    return G + 8 * ((i >> 1) & 1), 2 * Q + (i & 1)          # m16n8k8: a0, a1 (PTX ISA figure)


def mma_b(k16: bool, i):
    """(k, n) of element i of B (K x 8) held by each lane."""
    if k16:
        return mma_m16n8k16_b(LANE_IDS.astype(np.int64), i)
    return 2 * Q + (i & 1), G                              # m16n8k8: b0


def mma_c(i):
    """(row, col) of element i of C/D (16 x 8, f32) held by each lane."""
    return mma_m16n8k16_c(LANE_IDS.astype(np.int64), i)


def _halves(vals, dt):
    lo = (vals & 0xFFFF).astype(np.uint16)
    hi = (vals >> 16).astype(np.uint16)
    if dt == "bf16":
        return bf16_to_f32(lo).astype(np.float64), bf16_to_f32(hi).astype(np.float64)
    return lo.view(np.float16).astype(np.float64), hi.view(np.float16).astype(np.float64)


def check_aligned(cta, w, ins):
    if not (w.m == w.live).all():
        cta.finding(F.BarrierMismatch, w, ins, w.m, f"{ins.parts[0]}.sync.aligned reached by part of the warp")


def compile_mma(ins, cc):
    p = ins.parts
    shape = next((x for x in p if x.startswith("m16n8k")), None)
    if p[1] != "sync" or shape not in ("m16n8k16", "m16n8k8") or p[-4:-3] != ["f32"] or p[-1] != "f32" or \
            p[-3] != p[-2] or p[-3] not in ("f16", "bf16") or "row" not in p or "col" not in p:
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
    k16 = shape == "m16n8k16"
    K = 16 if k16 else 8
    dt = p[-3]
    d, a, b, c = ins.operands
    na, nb = (4, 2) if k16 else (2, 1)
    if len(a.items) != na or len(b.items) != nb or len(c.items) != 4 or len(d.items) != 4:
        raise EmulationError(f"wrong operand count in {ins.opcode} at PTX line {ins.line}")
    ra = [cc.read(o, "b32", ins) for o in a.items]
    rb = [cc.read(o, "b32", ins) for o in b.items]
    rc = [cc.read(o, "f32", ins) for o in c.items]
    pin = [cc.poison(o, ins) for o in a.items + b.items + c.items]
    puts = [cc.write(o, "f32", ins) for o in d.items]
    amap = [mma_a(k16, i) for i in range(2 * na)]
    bmap = [mma_b(k16, i) for i in range(2 * nb)]
    cmap = [mma_c(i) for i in range(4)]
    c_idx = np.stack([r * 8 + c for r, c in cmap])                 # [4, 32]
    # gathers: tile element -> position among the operand registers' 16-bit halves, taken as (register, lane,
    # half) in the order np.array(registers).view(uint16) lays them out (the low half of a register first)
    a_src = _gather([(r * K + c, i) for i, (r, c) in enumerate(amap)], 16 * K)
    b_src = _gather([(k * 8 + n, i) for i, (k, n) in enumerate(bmap)], K * 8)
    c_src = np.argsort(c_idx.reshape(-1), kind="stable")
    launch = cc.launch

    def tile(regs, src, rows, cols):
        h = np.array(regs).view(np.uint16).reshape(-1)[src]
        v = bf16_to_f32(h) if dt == "bf16" else h.view(np.float16)
        return v.astype(np.float64).reshape(rows, cols)

    def run(w):
        check_aligned(launch.cta, w, ins)
        A = tile([r(w) for r in ra], a_src, 16, K)
        B = tile([r(w) for r in rb], b_src, K, 8)
        C = np.array([r(w) for r in rc], np.float64).reshape(-1)[c_src].reshape(16, 8)
        D = (A @ B + C).astype(np.float32).reshape(-1)[c_idx]
        pz = [q(w) for q in pin]
        P = None
        if any(x is not None for x in pz):
            P = _poison(pz, na, nb, amap, bmap, cmap, K)
        for i in range(4):
            puts[i](w, D[i], P[i] if P is not None else None)
    return run


def _gather(places, size):
    """For each tile element (row-major, ``size`` of them), its index among the registers' 16-bit halves laid
    out (register, lane, half); ``places``: (tile indices [32 lanes], element number i) for every element
    i = 2 * register + half."""
    src = np.full(size, -1, np.int64)
    for tidx, i in places:
        src[tidx] = (i // 2) * 2 * LANES + LANE_IDS.astype(np.int64) * 2 + i % 2
    assert (src >= 0).all()
    return src


def _poison(pz, na, nb, amap, bmap, cmap, K):
    """Per output register, lanes whose element depends on a poisoned input."""
    pa = np.zeros((16, K), np.bool_)
    pb = np.zeros((K, 8), np.bool_)
    pc = np.zeros((16, 8), np.bool_)
    for r in range(na):
        if pz[r] is not None:
            pa[amap[2 * r]] |= pz[r]
            pa[amap[2 * r + 1]] |= pz[r]
    for r in range(nb):
        if pz[na + r] is not None:
            pb[bmap[2 * r]] |= pz[na + r]
            pb[bmap[2 * r + 1]] |= pz[na + r]
    for i in range(4):
        if pz[na + nb + i] is not None:
            pc[cmap[i]] |= pz[na + nb + i]
    out = pa.any(1)[:, None] | pb.any(0)[None, :] | pc
    res = [out[cmap[i]] for i in range(4)]
    return [r if r.any() else None for r in res]


def compile_ldmatrix(ins, cc):
    p = ins.parts
    num = next((int(x[1:]) for x in p if x in ("x1", "x2", "x4")), None)
    if p[1:4] != ["sync", "aligned", "m8n8"] or num is None or p[-1] != "b16" or "shared" not in \
            [x.split("::")[0] for x in p]:
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
    trans = "trans" in p
    dst, src = ins.operands
    if len(dst.items) != num:
        raise EmulationError(f"ldmatrix .x{num} with {len(dst.items)} registers at PTX line {ins.line}")
    puts = [cc.write(o, "b32", ins) for o in dst.items]
    addr = address(cc, src, ins)
    used = LANE_IDS < 8 * num
    launch = cc.launch

    lane = LANE_IDS.astype(np.int64)
    src = [[ldmatrix_source(num, trans, lane, j, h) for h in (0, 1)] for j in range(num)]
    lo_idx = np.stack([(8 * m + r) * 8 + c for (m, r, c), _ in src])      # [num, 32] 16-bit element indices
    hi_idx = np.stack([(8 * m + r) * 8 + c for _, (m, r, c) in src])
    p_lo = np.stack([8 * m + r for (m, r, _), _ in src])                   # the rows they come from
    p_hi = np.stack([8 * m + r for _, (m, r, _) in src])

    def run(w):
        cta = launch.cta
        check_aligned(cta, w, ins)
        raw, pz = access(cta, w, ins, "shared", addr(w), w.m & used, 16)   # lane r: row r % 8 of matrix r // 8
        h = raw.view(np.uint16).reshape(-1)
        regs = h[lo_idx].astype(np.uint32) | (h[hi_idx].astype(np.uint32) << 16)
        P = None
        if pz is not None:
            P = pz[p_lo] | pz[p_hi]
        for k in range(num):
            pk = P[k] if P is not None and P[k].any() else None
            puts[k](w, regs[k], pk)
    return run


HANDLERS = {"mma": compile_mma, "ldmatrix": compile_ldmatrix}
