"""Loads and stores (ld / st in every state space), and the checks of a shared-memory write other handlers
share.

Addresses: ``.shared`` operands are 32-bit offsets in the CTA's shared
window; generic addresses put shared memory at ``SHARED_WINDOW`` and local
memory at ``LOCAL_WINDOW`` (what ``cvta`` adds); anything else is global.
Every shared access goes through the happens-before shadow
(``memory.SharedMemory``); global accesses are bounds checked, carry
poison and go through the launch's global race shadow (``globalrace``).
A 32-bit address register plus its offset wraps modulo 2^32 (then zero-extends): nvcc's
shared-memory code relies on it.
"""
from __future__ import annotations

import numpy as np

from ..errors import EmulationError
from . import findings as F
from .convert import LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW
from . import memmodel as M
from .memory import PENDING, lane_bytes
from .values import BLOCKED, LANES, RAW, TYPED, WIDTH, por

SPACES = ("global", "shared", "local", "param", "const")
_LOW32 = np.uint64(0xFFFFFFFF)


def address(cc, op, ins):
    """A closure w -> uint64 addresses (32 lanes) for an address operand."""
    if op.kind != "addr":
        raise EmulationError(f"expected an address operand in {ins.opcode} at PTX line {ins.line}")
    off = np.uint64(op.offset % (1 << 64))
    b = op.base
    if b is None:
        c = np.full(LANES, off, np.uint64)
        return lambda w: c
    if b.kind == "sym":
        if b.name not in cc.symbols:
            raise EmulationError(f"unknown symbol {b.name} in {ins.opcode} at PTX line {ins.line}")
        c = np.full(LANES, (cc.symbols[b.name][1] + op.offset) % (1 << 64), np.uint64)
        return lambda w: c
    i = cc.reg(b, ins)
    if cc.dtypes[i] == np.uint64:
        return lambda w: w.regs[i] + off
    # a 32-bit register addresses in 32 bits: register + offset wraps modulo 2^32 (nvcc relies on it, e.g.
    # ``[%r+256]`` where %r is a shared offset minus 256 that went below zero), then zero-extends
    return lambda w: (w.regs[i].astype(np.uint64) + off) & _LOW32


def space_of(parts):
    """The state space an opcode names ('generic' when none)."""
    for p in parts[1:]:
        s = p.split("::")[0]
        if s in SPACES:
            return s
    return "generic"


def access(cta, w, ins, space, addrs, m, nbytes, write=False, data=None, pois=None, align=None, atomic=False,
           order=M.WEAK, elem=None):
    """Read (returns uint8 [32, nbytes], poison [32] or None) or write bytes for the lanes in m.  ``atomic``:
    an atom / red lane; ``order``: its place in the memory model (``memmodel.Order``), ``elem`` the element
    width of a vector access."""
    act = np.nonzero(m)[0]
    out = np.zeros((LANES, nbytes), np.uint8)
    if act.size == 0:
        return out, None
    if write:
        w.writes += 1
    a = addrs[act]
    if space == "generic":
        sh = (a >= SHARED_WINDOW) & (a < SHARED_WINDOW + (1 << 32))
        lo = (a >= LOCAL_WINDOW) & (a < LOCAL_WINDOW + (1 << 32))
        if sh.all():
            space, addrs = "shared", addrs - np.uint64(SHARED_WINDOW)
        elif lo.all():
            space, addrs = "local", addrs - np.uint64(LOCAL_WINDOW)
        elif ((a >= PARAM_WINDOW) & (a < PARAM_WINDOW + (1 << 32))).all():
            space, addrs = "param", addrs - np.uint64(PARAM_WINDOW)
        elif (sh | lo).any():
            raise EmulationError(f"a generic access mixing state spaces across lanes at PTX line {ins.line}")
        else:
            space = "global"
        a = addrs[act]
    al = align or nbytes
    mis = (a % np.uint64(al)) != 0
    if mis.any():
        cta.finding(F.BadAccess, w, ins, lane_mask(act[mis]), f"misaligned {nbytes}-byte {space} access",
                    address=int(a[mis][0]))
        return out, None
    if space == "shared":
        return _shared(cta, w, ins, act, a.astype(np.int64), nbytes, write, data, pois, out, order, elem)
    if space == "param":
        buf, off = cta.launch.param_bytes, a.astype(np.int64)
        if write or (off + nbytes > buf.size).any():
            raise EmulationError(f"a .param access outside the parameters at PTX line {ins.line}")
        out[act] = buf[lane_bytes(off, nbytes)]
        return out, None
    if space == "local":
        return _local(cta, w, ins, act, a.astype(np.int64), nbytes, write, data, out)
    k, view, off = cta.launch.gmem.locate(a, nbytes)
    if view is None:
        cta.finding(F.BadAccess, w, ins, lane_mask(act), f"{nbytes}-byte global access outside every buffer",
                    address=off)
        return out, None
    idx = lane_bytes(off, nbytes)
    gs = cta.launch.gshadow
    gs.access(cta, w, ins, act, k, idx, nbytes, write, atomic, order, elem, data[act] if write else None)
    starts = (off[:, None] + np.arange(0, nbytes, elem or nbytes)).reshape(-1) if order.strong or gs.sync else None
    if write:
        if pois is not None and pois[act].any():
            cta.finding(F.PoisonUse, w, ins, lane_mask(act[pois[act]]), "a poisoned value is stored to global memory")
        view[idx] = data[act]
        if order.strong or atomic:
            gs.publish(cta, w, k, starts, order, atomic)
        elif gs.sync:
            gs.forget(k, starts)
        return out, None
    out[act] = view[idx]
    if order.strong:
        gs.observe(cta, w, k, starts, order)
    return out, None


def lane_mask(sel):
    """The [32] lane mask of the lanes ``sel``."""
    m = np.zeros(LANES, np.bool_)
    m[sel] = True
    return m


def _shared(cta, w, ins, act, off, nbytes, write, data, pois, out, order=M.WEAK, elem=None):
    sm = cta.shared
    bad = (off < 0) | (off + nbytes > sm.size)
    if bad.any():
        cta.finding(F.BadAccess, w, ins, lane_mask(act[bad]), f"{nbytes}-byte shared access outside the "
                    f"{sm.size}-byte window", address=int(off[bad][0]))
        return out, None
    idx = lane_bytes(off, nbytes).reshape(-1)
    vcw = cta.vc[w.idx]
    clk = vcw[w.idx]
    ss = cta.sh_strength
    if order.strong and ss is None:
        ss = cta.sh_strength = M.SharedStrength(sm.size)
    strong = (order, M.extent(nbytes, elem or nbytes, act.size)) if ss is not None else None
    if write:
        check_shared_write(cta, w, ins, act, idx, nbytes, strong)
        if sm.is_mbar[idx].any():
            cta.finding(F.MbarrierMisuse, w, ins, lane_mask(act), "an ordinary store to a valid mbarrier object")
        sm.data[idx] = data[act].reshape(-1)
        sm.poison[idx] = np.repeat(pois[act], nbytes) if pois is not None else False
        sm.owner[idx] = 0
        sm.wr_generic[idx] = True
        sm.wr_seq[idx] = cta.instructions
        sm.note_write(idx, w.idx, clk, ins.line)
        if strong is not None:
            _shared_strong(cta, w, ss, off, nbytes, elem, idx, True, strong)
        return out, None
    bad = sm.check_read(idx, w.idx, vcw)
    if bad.any() and strong is not None:
        bad &= ~ss.pair(idx, order, strong[1], "write")
    if bad.any():
        _report_read(cta, w, ins, act, idx, bad, nbytes)
    if cta.policy.strict_uninitialized:
        unw = sm.poison[idx] & (sm.wr_line[idx] == 0)
        if unw.any():
            cta.finding(F.UninitializedRead, w, ins, lane_mask(act[unw.reshape(-1, nbytes).any(1)]),
                        "a read of shared memory nothing wrote", address=int(idx[unw][0]))
    sm.note_read(idx, w.idx, clk, ins.line)
    if strong is not None:
        _shared_strong(cta, w, ss, off, nbytes, elem, idx, False, strong)
    out[act] = sm.data[idx].reshape(-1, nbytes)
    p = np.zeros(LANES, np.bool_)
    p[act] = sm.poison[idx].reshape(-1, nbytes).any(1)
    return out, (p if p.any() else None)


def _report_read(cta, w, ins, act, idx, bad, nbytes):
    sm = cta.shared
    b = idx[bad][0]
    lanes = lane_mask(act[bad.reshape(-1, nbytes).any(1)])
    if sm.wr_clk[b] == PENDING:
        op = cta.ops.get(int(sm.owner[b]))
        state = "in flight" if op is not None and not op.done else "complete but not observed by a wait"
        cta.finding(F.AsyncReadBeforeWait, w, ins, lanes,
                    f"a read of shared byte {b} that a cp.async (warp {sm.wr_warp[b]}, PTX line {sm.wr_line[b]}) "
                    f"writes: the copy is {state}", address=int(b))
        return
    ow, ol = int(sm.wr_warp[b]), int(sm.wr_line[b])
    cta.finding(F.DataRace, w, ins, lanes, f"read of shared byte {b} races with a write by warp {ow} at PTX "
                f"line {ol} (no happens-before)", other=(ow, ol, _cuda(cta, ol), "write"), address=int(b))


def _cuda(cta, line):
    return cta.launch.cuda_line_of.get(line)


def _shared_strong(cta, w, ss, off, nbytes, elem, idx, write, strong):
    """The memory model on shared memory, after the race check: the strength record, and the release /
    acquire of a strong access (a weak write ends the release at its elements)."""
    order, ext = strong
    ss.note(idx, write, order, ext)
    if not order.strong and not ss.sync:
        return
    starts = (off[:, None] + np.arange(0, nbytes, elem or nbytes)).reshape(-1)
    if write:
        ss.publish(cta, w, starts, order)
    else:
        ss.observe(cta, w, starts, order)


def check_shared_write(cta, w, ins, act, idx, nbytes, strong=None):
    """Check a write of shared bytes ``idx`` by lanes ``act`` of warp w (in-flight readers and copies, races);
    the caller records it.  ``strong``: (order, extent) of a write the memory model knows the strength of
    (``memmodel.SharedStrength``): a morally strong pair does not race."""
    sm = cta.shared
    if sm.async_readers[idx].any():
        b = idx[sm.async_readers[idx] > 0][0]
        cta.finding(F.InFlightOverwrite, w, ins, lane_mask(act), f"a write to shared byte {b} that an in-flight "
                    "wgmma or bulk store still reads (before its wgmma.wait_group or cp.async.bulk.wait_group.read)",
                    address=int(b))
    own = sm.owner[idx]
    if own.any():
        live = [int(o) for o in np.unique(own[own != 0]) if not cta.ops[int(o)].done]
        if live:
            b = idx[np.isin(own, live)][0]
            cta.finding(F.InFlightOverwrite, w, ins, lane_mask(act), f"a write to shared byte {b} that an in-flight "
                        f"cp.async (PTX line {sm.wr_line[b]}) still writes", address=int(b))
    bad_w, racing_read = sm.check_write(idx, w.idx, cta.vc[w.idx])
    if strong is not None:
        ss = cta.sh_strength
        bad_w = bad_w & ~ss.pair(idx, strong[0], strong[1], "write")
        if racing_read is not None and ss.pair(idx, strong[0], strong[1], "read")[racing_read[1]]:
            racing_read = None
    if bad_w.any():
        b = idx[bad_w][0]
        ow, ol = int(sm.wr_warp[b]), int(sm.wr_line[b])
        if sm.wr_clk[b] != PENDING or ow != w.idx:
            cta.finding(F.DataRace, w, ins, lane_mask(act), f"write of shared byte {b} races with a write by warp "
                        f"{ow} at PTX line {ol}", other=(ow, ol, _cuda(cta, ol), "write"), address=int(b))
    if racing_read is not None:
        u, pos = racing_read
        b = idx[pos]
        ol = int(sm.rd_line[u, b])
        cta.finding(F.DataRace, w, ins, lane_mask(act), f"write of shared byte {b} races with a read by warp {u} "
                    f"at PTX line {ol}", other=(u, ol, _cuda(cta, ol), "read"), address=int(b))


def _local(cta, w, ins, act, off, nbytes, write, data, out):
    size = cta.launch.local_size
    if w.local is None:
        w.local = np.zeros((LANES, max(size, 1)), np.uint8)
    if (off < 0).any() or (off + nbytes > size).any():
        cta.finding(F.BadAccess, w, ins, lane_mask(act), "local access outside the frame", address=int(off[0]))
        return out, None
    idx = lane_bytes(off, nbytes)
    rows = act[:, None]
    if write:
        w.local[rows, idx] = data[act]
        return out, None
    out[act] = w.local[rows, idx]
    return out, None


def _vec(parts):
    for p in parts:
        if p in ("v2", "v4", "v8"):
            return int(p[1:])
    return 1


def compile_ld(ins, cc):
    p = ins.parts
    t = p[-1]
    if t not in TYPED:
        raise EmulationError(f"unsupported type in {ins.opcode} at PTX line {ins.line}")
    space = space_of(p)
    n = _vec(p)
    dst, src = ins.operands
    dsts = dst.items if dst.kind == "vec" else (dst,)
    if len(dsts) != n:
        raise EmulationError(f"{ins.opcode} with {len(dsts)} destinations at PTX line {ins.line}")
    ew = WIDTH[t]
    puts = [cc.write(d, t, ins) for d in dsts]
    addr = address(cc, src, ins)
    launch = cc.launch
    order = M.order_of(ins)

    def run(w):
        a = addr(w)
        raw, pz = access(launch.cta, w, ins, space, a, w.m, ew * n, align=ew * n, order=order, elem=ew)
        if order.strong and space in ("global", "generic", "shared") and M.spinning(w, raw):
            if M.park(launch.cta, w, ins, a, ew * n, space):
                return BLOCKED
        vals = raw.view(RAW[ew]).reshape(LANES, n)
        for k, put in enumerate(puts):
            put(w, np.ascontiguousarray(vals[:, k]).view(TYPED[t]), pz)
    return run


def compile_st(ins, cc):
    p = ins.parts
    t = p[-1]
    if t not in TYPED:
        raise EmulationError(f"unsupported type in {ins.opcode} at PTX line {ins.line}")
    space = space_of(p)
    n = _vec(p)
    dst, src = ins.operands
    srcs = src.items if src.kind == "vec" else (src,)
    ew = WIDTH[t]
    reads = [cc.read(s, t, ins) for s in srcs]
    ps = [cc.poison(s, ins) for s in srcs]
    addr = address(cc, dst, ins)
    launch = cc.launch
    raw_t = RAW[ew]
    order = M.order_of(ins)

    def run(w):
        vals = np.array([np.ascontiguousarray(r(w)).view(raw_t) for r in reads]).T
        data = np.ascontiguousarray(vals).view(np.uint8).reshape(LANES, ew * n)
        access(launch.cta, w, ins, space, addr(w), w.m, ew * n, True, data, por(*[q(w) for q in ps]),
               align=ew * n, order=order, elem=ew)
    return run


HANDLERS = {"ld": compile_ld, "st": compile_st}
