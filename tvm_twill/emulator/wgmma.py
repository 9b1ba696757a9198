"""sm_90a warp-group MMA (wgmma) with shared-memory descriptors, its fence / commit / wait, and setmaxnreg.

Each warp of the warp group executes its copy of ``wgmma.mma_async`` and
owns 16 rows of the 64 x N accumulator (``encodings.wgmma_c``), so each
warp's op computes its own rows.  An op is an async agent: at issue its
accumulator registers are poisoned (a read before the covering
``wgmma.wait_group`` yields poison), its shared operands are checked
(race with the issuer's clock at issue; a byte last written by the generic
proxy needs the writer's ``fence.proxy.async`` happening before the issue,
else ``ProxyFenceMissing``) and held in a read window until completion (a
write into the window is ``InFlightOverwrite``).  It completes as late as
legal: at the covering wait_group (or at exit), reading shared memory then.
Descriptors are decoded with ``encodings`` (checked against CuTe).  Both the
SS form (A and B in shared memory) and the RS form (A in four 32-bit
registers per thread, ``encodings.wgmma_a``, CuTe's ``ALayout_64x16``) are
executed, with f16 / bf16 inputs and f32 accumulators.  The RS form's A
registers are read at issue; the PTX ISA forbids changing them before the
covering wait, so a value that differs at completion is ``InFlightOverwrite``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import EmulationError
from . import findings as F
from . import regown
from .encodings import decode_wgmma_desc, wgmma_a, wgmma_c, wgmma_operand_address
from .ptx import Instruction
from .regown import plain
from .state import AsyncOp
from .values import LANE_IDS, LANES, bf16_to_f32


@dataclass(eq=False, slots=True)
class WgmmaOp(AsyncOp):
    """This warp's share of one wgmma.mma_async: its 16 rows of the accumulator, completing at the covering
    wgmma.wait_group (or at exit)."""

    warp: int
    regs: list[int]         # the accumulator registers
    in_pois: list           # their poison at issue (None where an earlier op of this warp still writes one)
    a_idx: np.ndarray | None    # [16, 16] shared byte address of A(m, k) for this warp's rows (None: RS form)
    b_idx: np.ndarray       # [16, N] shared byte address of B(k, n)
    scale_d: bool
    line: int
    ins: Instruction
    chain: list[bool]       # per register: an earlier in-flight op of this warp writes it
    n: int
    dt: str                 # the input type: f16 or bf16
    rc: list                # per register: the (row, column) of the accumulator each lane holds
    a_regs: list[int] | None = None     # the RS form's A registers
    a_snap: list | None = None          # their bits and poison at issue
    done: bool = False
    id: int = 0

    def perform(self, cta):
        _complete(cta, cta.warps[self.warp], self)
        self.done = True


def _operand_addresses(desc, rows, ks, k_major):
    d = decode_wgmma_desc(int(desc))
    if d["base_offset"] != 0:
        raise EmulationError(f"wgmma descriptor with base_offset {d['base_offset']} is not modelled")
    return wgmma_operand_address(d, rows, ks, k_major=k_major).astype(np.int64)


def compile_wgmma(ins, cc):
    p = ins.parts
    if p[1] in ("fence", "commit_group"):
        if p[1] == "fence":
            return regown.fence

        def commit(w):
            w.wg_groups.append(w.wg_pending)
            w.wg_pending = []
        return commit
    if p[1] == "wait_group":
        n = ins.operands[0].value
        launch = cc.launch

        def wait(w):
            groups = w.wg_groups
            k = len(groups) - n
            cta = launch.cta
            for g in groups[:max(k, 0)]:
                for op in g:
                    cta.complete(op)
            w.wg_groups = groups[max(k, 0):]
        return wait
    return _compile_mma_async(ins, cc)


def _compile_mma_async(ins, cc):
    p = ins.parts
    shape = p[4] if len(p) > 4 else ""
    if p[1] != "mma_async" or not shape.startswith("m64n") or not shape.endswith("k16") or p[5] != "f32" or \
            p[6] not in ("f16", "bf16") or p[7] != p[6]:
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
    n = int(shape[4:-3])
    ops = ins.operands
    rs = ops[1].kind == "vec"
    if len(ops) != (7 if rs else 8) or len(ops[0].items) != n // 2 or (rs and len(ops[1].items) != 4):
        raise EmulationError(f"unexpected wgmma operands at PTX line {ins.line}")
    if rs:      # {d}, {a0..a3}, descB, scale-d, imm-scale-a, imm-scale-b, imm-trans-b: no trans-a
        ops = [ops[0], ops[1], ops[2], ops[3], ops[4], ops[5], None, ops[6]]
    dt = p[6]
    regs = [cc.reg(o, ins) for o in ops[0].items]
    a_regs = [cc.reg(o, ins) for o in ops[1].items] if rs else None
    da = None if rs else cc.read(ops[1], "b64", ins)
    db = cc.read(ops[2], "b64", ins)
    scale = cc.read(ops[3], "pred", ins) if ops[3].kind == "reg" else None
    scale_imm = bool(ops[3].value) if ops[3].kind == "imm" else True
    if ops[4].value != 1 or ops[5].value != 1:
        raise EmulationError(f"wgmma with negated operands is not supported at PTX line {ins.line}")
    ta, tb = (0 if rs else ops[6].value), ops[7].value
    launch = cc.launch
    lane = LANE_IDS.astype(np.int64)
    ks = np.arange(16)

    def run(w):
        cta = launch.cta
        regown.check_group(cta, w, ins, "wgmma.mma_async", F.BarrierMismatch)
        w.wgmma_count += 1
        regown.check_fence(cta, w, ins, regs + (a_regs or []))
        act = np.nonzero(w.m)[0]
        b0 = int(db(w)[act[0]])
        wg = w.idx % 4
        rows = 16 * wg + np.arange(16)
        a_idx = None if rs else _operand_addresses(int(da(w)[act[0]]), rows[:, None], ks[None, :], ta == 0)
        b_idx = _operand_addresses(b0, np.arange(n)[None, :], ks[:, None], tb == 0)
        s = bool(scale(w)[act[0]]) if scale is not None else scale_imm
        busy = w.wg_busy      # registers an in-flight op of this warp still writes
        chain = [busy.get(i, 0) > 0 for i in regs]
        op = WgmmaOp(w.idx, regs, [None if c else w.pois[i] for c, i in zip(chain, regs)], a_idx, b_idx, s,
                     ins.line, ins, chain, n, dt, [wgmma_c(32 * wg + lane, i, n) for i in range(n // 2)], a_regs,
                     [(plain(w.regs[r]).view(np.uint32).copy(), w.pois[r]) for r in a_regs] if rs else None)
        for i in regs:
            busy[i] = busy.get(i, 0) + 1
        regown.hold(w, regs, "an accumulator", ins.line)
        if rs:
            regown.hold(w, a_regs, "an A-fragment", ins.line)
        _issue_checks(cta, w, ins, op)
        for i in regs:
            w.pois[i] = np.ones(LANES, np.bool_)
        w.wg_pending.append(op)
    return run


def _bytes(op):
    idx = op.b_idx.reshape(-1) if op.a_idx is None else np.concatenate([op.a_idx.reshape(-1), op.b_idx.reshape(-1)])
    return idx[:, None] + np.arange(2)[None, :]


def _register_a(cta, w, op):
    """The RS form's 16 x 16 A tile of this warp (values as uint16 bits, poison per row) from the registers
    as issued; a register changed since the issue is reported."""
    h = np.zeros((16, 16), np.uint16)
    pois = np.zeros(16, np.bool_)
    lane = np.arange(LANES)
    row0 = 16 * (op.warp % 4)
    for j, (r, (bits, p)) in enumerate(zip(op.a_regs, op.a_snap)):
        regown.release(cta, w, op, r, label=f"register A operand a{j}")
        for half in (0, 1):
            m, k = wgmma_a(32 * (op.warp % 4) + lane, 2 * j + half)
            h[m - row0, k] = (bits >> (16 * half)) & 0xFFFF
            if p is not None:
                pois[m[p] - row0] = True
    return h, pois


def _issue_checks(cta, w, ins, op):
    sm = cta.shared
    idx = _bytes(op).reshape(-1)
    if (idx < 0).any() or (idx >= sm.size).any():
        raise EmulationError(f"wgmma operand outside shared memory at PTX line {ins.line}")
    vcw = cta.vc[w.idx]
    bad = sm.check_read(idx, w.idx, vcw)
    if bad.any():
        b = idx[bad][0]
        cta.finding(F.DataRace, w, ins, w.m, f"wgmma read of shared byte {b} races with a write by warp "
                    f"{sm.wr_warp[b]} at PTX line {sm.wr_line[b]}", other=(int(sm.wr_warp[b]), int(sm.wr_line[b]),
                                                                        None, "write"), address=int(b))
    gen = idx[sm.wr_generic[idx]]
    if gen.size:
        unfenced = cta.unfenced(gen, vcw)
        if unfenced is not None:
            cta.finding(F.ProxyFenceMissing, w, ins, w.m, f"wgmma (async proxy) reads shared byte {unfenced} "
                        f"written by an ordinary store (warp {sm.wr_warp[unfenced]}, PTX line "
                        f"{sm.wr_line[unfenced]}) with no fence.proxy.async between them", address=int(unfenced))
    sm.note_read(idx, w.idx, vcw[w.idx], ins.line)
    np.add.at(sm.async_readers, idx, 1)


def _complete(cta, w, op):
    """Perform the op now: read its shared operands as they are and write the accumulator registers."""
    sm = cta.shared
    data = sm.data.view(np.uint16) if sm.size % 2 == 0 else None
    if data is None:
        raise EmulationError("shared window of odd size")
    hb = data[op.b_idx // 2]
    if op.a_idx is None:
        ha, pa_rows = _register_a(cta, w, op)
    else:
        ha = data[op.a_idx // 2]
        pa_rows = (sm.poison[op.a_idx].reshape(16, 16) | sm.poison[op.a_idx + 1].reshape(16, 16)).any(1)
    conv = (lambda h: bf16_to_f32(h).astype(np.float64)) if op.dt == "bf16" else \
        (lambda h: h.view(np.float16).astype(np.float64))
    D = conv(ha) @ conv(hb)                                            # [16, N] for this warp's rows
    pb = sm.poison[op.b_idx] | sm.poison[op.b_idx + 1]
    P = pa_rows[:, None] | pb.any(0)[None, :]
    row0 = 16 * (op.warp % 4)
    for i, reg in enumerate(op.regs):
        r, c = op.rc[i]
        val = D[r - row0, c]
        if op.scale_d:
            val = val + plain(w.regs[reg]).view(np.float32).astype(np.float64)
        pz = P[r - row0, c]
        # an accumulator chained from an earlier op of this warp carries that op's result poison (it completed
        # first, in order); otherwise the poison the register had at issue
        before = w.wg_result_pois.get(reg) if op.chain[i] else op.in_pois[i]
        if op.scale_d and before is not None:
            pz = pz | before
        pz = pz if pz.any() else None
        regown.release(cta, w, op, reg, val.astype(np.float32).view(np.uint32))
        w.wg_result_pois[reg] = pz
        w.wg_busy[reg] -= 1
        w.pois[reg] = pz if w.wg_busy[reg] == 0 else np.ones(LANES, np.bool_)   # a later op still in flight
    np.add.at(sm.async_readers, _bytes(op).reshape(-1), -1)


def finish_wgmma(cta, w):
    """At exit: complete what was never waited for (the registers are dead; only the windows close)."""
    for g in [*w.wg_groups, w.wg_pending]:
        for op in g:
            cta.complete(op)
    w.wg_groups, w.wg_pending = [], []


def compile_setmaxnreg(ins, cc):
    p = ins.parts
    if p[1] not in ("inc", "dec") or ins.operands[0].kind != "imm":
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
    n = ins.operands[0].value
    launch = cc.launch

    def run(w):
        cta = launch.cta
        if not 24 <= n <= 256 or n % 8:
            cta.finding(F.SetmaxnregMisuse, w, ins, w.m, f"setmaxnreg {n}: must be a multiple of 8 in 24..256")
        regown.check_group(cta, w, ins, "setmaxnreg", F.SetmaxnregMisuse)
        cur = w.maxnreg
        if cur is not None and ((p[1] == "inc" and n < cur) or (p[1] == "dec" and n > cur)):
            cta.finding(F.SetmaxnregMisuse, w, ins, w.m, f"setmaxnreg.{p[1]} {n} with the current limit {cur}")
        w.maxnreg = n
        _same_in_warp_group(cta, w, ins)
    return run


def _same_in_warp_group(cta, w, ins):
    """The k-th setmaxnreg of every warp of a warp group must be the same instruction (PTX ISA)."""
    k = w.setmaxnreg_count
    w.setmaxnreg_count = k + 1
    first = cta.setmaxnreg_seen.setdefault((w.idx // 4, k), (w.idx, ins.line))
    if first[1] != ins.line:
        cta.finding(F.SetmaxnregMisuse, w, ins, w.m, f"warp {w.idx} executes setmaxnreg at PTX line {ins.line} where "
                    f"warp {first[0]} of its warp group executed the one at PTX line {first[1]}")


HANDLERS = {"wgmma": compile_wgmma, "setmaxnreg": compile_setmaxnreg}