"""Warp-level tensor-core instructions: ldmatrix, stmatrix, and mma.sync (``mmasync``).

The fragment maps (which lane and register holds which matrix element) come
from ``encodings`` (checked there against CuTe).  All are ``.sync.aligned``:
reaching one with part of the warp is a ``BarrierMismatch`` finding.
"""
from __future__ import annotations

import numpy as np

from ..errors import EmulationError
from .encodings import ldmatrix_source
from .memops import access, address
from .mmasync import check_aligned, compile_mma
from .values import LANE_IDS, LANES


def compile_ldmatrix(ins, cc):
    num, trans = _matrix_form(ins)
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


def _matrix_form(ins) -> tuple[int, bool]:
    p = ins.parts
    num = next((int(x[1:]) for x in p if x in ("x1", "x2", "x4")), None)
    if p[1:4] != ["sync", "aligned", "m8n8"] or num is None or p[-1] != "b16" or "shared" not in \
            [x.split("::")[0] for x in p] or len(p) != 7 + ("trans" in p):
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
    return num, "trans" in p


def compile_stmatrix(ins, cc):
    """``stmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared{::cta}.b16 [p], {r...}`` (PTX ISA, stmatrix,
    sm_90): the inverse of ldmatrix with the same fragment layout (``encodings.ldmatrix_source``): lane
    ``8 m + r`` gives the address of row r of matrix m, 16 bytes, which receives the elements the lanes'
    register m halves hold."""
    num, trans = _matrix_form(ins)
    dst, srcs = ins.operands
    if srcs.kind != "vec" or len(srcs.items) != num:
        raise EmulationError(f"stmatrix .x{num} needs {num} registers at PTX line {ins.line}")
    reads = [cc.read(o, "b32", ins) for o in srcs.items]
    pz = [cc.poison(o, ins) for o in srcs.items]
    addr = address(cc, dst, ins)
    used = LANE_IDS < 8 * num
    lane = LANE_IDS.astype(np.int64)
    src = np.full(8 * num * 8, -1, np.int64)       # stored element (8 m + r) * 8 + c <- (register, lane, half)
    for j in range(num):
        for h in (0, 1):
            m, r, c = ldmatrix_source(num, trans, lane, j, h)
            src[(8 * m + r) * 8 + c] = j * 64 + lane * 2 + h
    launch = cc.launch

    def run(w):
        cta = launch.cta
        check_aligned(cta, w, ins)
        halves = np.array([r(w) for r in reads], np.uint32).view(np.uint16).reshape(-1)
        data = np.zeros((LANES, 16), np.uint8)
        data[:8 * num] = halves[src].reshape(8 * num, 8).view(np.uint8)
        pois = None
        got = [q(w) for q in pz]
        if any(g is not None for g in got):
            bits = np.repeat(np.stack([g if g is not None else np.zeros(LANES, np.bool_) for g in got]), 2, axis=1)
            pois = np.zeros(LANES, np.bool_)
            pois[:8 * num] = bits.reshape(-1)[src].reshape(8 * num, 8).any(1)
        access(cta, w, ins, "shared", addr(w), w.m & used, 16, True, data, pois)
    return run


HANDLERS = {"mma": compile_mma, "ldmatrix": compile_ldmatrix, "stmatrix": compile_stmatrix}
