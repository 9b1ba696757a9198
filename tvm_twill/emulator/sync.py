"""Barriers, mbarriers, fences and warp primitives (shfl, vote, activemask, elect).

bar.sync / barrier.sync: a warp arrives as a unit (32 threads); without a
count the barrier waits for every warp that has not exited.  On completion
each waiter's vector clock joins every participant's (bar.arrive gives only
the release side).  Reaching it with part of the warp (divergent) or with a
count that disagrees with the other arrivals is a ``BarrierMismatch``.

mbarrier: phase (an unbounded integer; the hardware exposes its parity),
pending, expected and tx-count per object (``state.MBarrier``, which makes
its own transitions), held beside shared memory (its 8 bytes are marked so
that an ordinary store to a valid mbarrier is reported).  A release arrive
joins the arriving warp's clock into the phase; a successful
``test_wait``/``try_wait`` joins the last completed phase's clock into the
waiter.  A wait that fails leaves the warp off the schedule until the phase
changes (it would only spin); ``try_wait`` fails spuriously with
``Policy.spurious`` probability.
"""
from __future__ import annotations

import numpy as np

from ..errors import EmulationError
from . import findings as F
from .memops import address
from .state import MBarrier, NamedBarrier
from .values import BLOCKED, LANE_IDS, LANES, YIELD


def mbar_of(cta, w, ins, addr):
    mb = cta.mbars.get(addr)
    if mb is None or not mb.valid:
        cta.finding(F.MbarrierMisuse, w, ins, w.m, f"mbarrier at shared offset {addr} used before init"
                    if mb is None else f"mbarrier at shared offset {addr} used after inval")
        return None
    return mb


def _lane_addrs(addr, w, ins):
    act = np.nonzero(w.m)[0]
    a = addr(w)[act]
    return act, a


def compile_mbarrier(ins, cc):
    p = ins.parts
    op = p[1]
    ops = ins.operands
    launch = cc.launch
    if op == "init":
        addr = address(cc, ops[0], ins)
        cnt = cc.read(ops[1], "u32", ins)

        def init(w):
            cta = launch.cta
            act, a = _lane_addrs(addr, w, ins)
            c = cnt(w)[act]
            for k, ad in enumerate(a.tolist()):
                if ad % 8 or ad + 8 > cta.shared.size:
                    cta.finding(F.BadAccess, w, ins, w.m, "mbarrier object misaligned or outside shared memory",
                                address=ad)
                    continue
                old = cta.mbars.get(ad)
                if old is not None and old.valid:
                    cta.finding(F.MbarrierMisuse, w, ins, w.m, f"mbarrier at shared offset {ad} initialised "
                                "while valid")
                cta.mbars[ad] = MBarrier.init(ad, int(c[k]), cta.nwarps)
                cta.shared.is_mbar[ad:ad + 8] = True
                cta.shared.poison[ad:ad + 8] = False
        return init
    if op == "inval":
        addr = address(cc, ops[0], ins)

        def inval(w):
            cta = launch.cta
            for ad in set(_lane_addrs(addr, w, ins)[1].tolist()):
                mb = mbar_of(cta, w, ins, ad)
                if mb is not None:
                    mb.valid = False
                    cta.shared.is_mbar[ad:ad + 8] = False
        return inval
    if op in ("arrive", "arrive_drop", "expect_tx", "complete_tx"):
        return _compile_arrive(ins, cc, op, p, ops)
    if op in ("test_wait", "try_wait"):
        return _compile_wait(ins, cc, op, p, ops)
    raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")


def _compile_arrive(ins, cc, op, p, ops):
    launch = cc.launch
    expect = "expect_tx" in p
    has_dst = op.startswith("arrive")
    ai = 1 if has_dst else 0
    addr = address(cc, ops[ai], ins)
    extra = cc.read(ops[ai + 1], "u32", ins) if len(ops) > ai + 1 else None
    dst = cc.write(ops[0], "b64", ins) if has_dst and ops[0].kind == "reg" else None

    def run(w):
        cta = launch.cta
        act, a = _lane_addrs(addr, w, ins)
        x = extra(w)[act] if extra is not None else np.ones(act.size, np.int64)
        for ad in sorted(set(a.tolist())):
            mb = mbar_of(cta, w, ins, ad)
            if mb is None:
                continue
            sel = a == ad
            if op == "expect_tx":
                mb.expect_tx(cta, w, ins, int(x[sel].sum()))
                continue
            if op == "complete_tx":
                mb.complete_tx(cta, w, ins, int(x[sel].sum()))
                continue
            if dst is not None:
                dst(w, np.full(LANES, mb.phase, np.uint64), None)
            mb.release(cta.vc[w.idx])
            if expect:
                mb.arrive(cta, w, ins, int(sel.sum()), tx=int(x[sel].sum()))
            else:
                mb.arrive(cta, w, ins, int(x[sel].sum()))
            if op == "arrive_drop":
                mb.drop(int(sel.sum()))
        if op.startswith("arrive"):
            cta.release(w)
    return run


def _compile_wait(ins, cc, op, p, ops):
    launch = cc.launch
    put = cc.write(ops[0], "pred", ins)
    addr = address(cc, ops[1], ins)
    parity = "parity" in p
    arg = cc.read(ops[2], "u32" if parity else "b64", ins)

    def run(w):
        cta = launch.cta
        act, a = _lane_addrs(addr, w, ins)
        if (a != a[0]).any():
            raise EmulationError(f"{ins.opcode} with lanes on different barriers at PTX line {ins.line}")
        mb = mbar_of(cta, w, ins, int(a[0]))
        if mb is None:
            put(w, np.zeros(LANES, np.bool_), None)
            return None
        ok = mb.passed(arg(w)[act], parity)
        res = np.zeros(LANES, np.bool_)
        res[act] = ok
        if op == "try_wait" and ok.any() and cta.rng.random() < cta.policy.spurious:
            res[:] = False
            put(w, res, None)
            return None
        if ok.any():
            mb.acquire(cta, w)
        put(w, res, None)
        if not ok.all():
            k0 = mb.phase
            w.wait = lambda: mb.phase == k0
            w.poll = (mb.addr, k0)
            w.needs = lambda: [cta.ops[i] for aa in cta.async_arrives if aa.bar == mb.addr for i in aa.ops] + \
                [op for op in cta.ops.values() if not op.done and op.completes_on(mb.addr)]
            return YIELD
        return None
    return run


def compile_bar(ins, cc):
    p = ins.parts
    if p[0] == "bar" and len(p) > 1 and p[1] == "warp":
        return lambda w: None
    kind = p[1] if len(p) > 1 else "sync"
    if kind not in ("sync", "arrive"):
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
    bid = cc.read(ins.operands[0], "u32", ins)
    cnt = cc.read(ins.operands[1], "u32", ins) if len(ins.operands) > 1 else None
    launch = cc.launch
    sync = kind == "sync"

    def run(w):
        if w.bar_pass:
            w.bar_pass = False
            return None
        cta = launch.cta
        act = np.nonzero(w.m)[0]
        i = int(bid(w)[act[0]])
        n = int(cnt(w)[act[0]]) if cnt is not None else None
        if not (w.m == w.live).all():
            cta.finding(F.BarrierMismatch, w, ins, w.m, f"barrier {i} reached by part of the warp (divergent)")
        b = cta.bars.get(i)
        if b is None:
            b = cta.bars[i] = NamedBarrier(n, np.zeros(cta.nwarps, np.int64))
        if b.count != n:
            cta.finding(F.BarrierMismatch, w, ins, w.m, f"barrier {i} with thread count {n} while other "
                        f"warps use {b.count}")
        b.arrived.append((w, sync))
        b.vc = np.maximum(b.vc, cta.vc[w.idx])
        cta.release(w)
        check_bars(cta)
        if not sync:
            return None
        if w.bar_pass:
            w.bar_pass = False
            return None
        w.wait = lambda: not w.bar_pass
        w.needs = list
        return BLOCKED
    return run


def check_bars(cta):
    live = sum(1 for w in cta.warps if not w.done)
    for i in list(cta.bars):
        b = cta.bars[i]
        need = b.count // LANES if b.count is not None else live
        if len(b.arrived) >= need:
            del cta.bars[i]
            for w, sync in b.arrived:
                if sync:
                    cta.vc[w.idx] = np.maximum(cta.vc[w.idx], b.vc)
                    w.bar_pass = True


def compile_fence(ins, cc):
    """Fences order nothing the emulator does not already order, except fence.proxy.async: recorded per warp
    (when, and the warp's clock) for the proxy check of wgmma operands."""
    if ins.parts[:3] != ["fence", "proxy", "async"]:
        return lambda w: None
    launch = cc.launch

    def run(w):
        cta = launch.cta
        seqs, clks = cta.proxy_fences.setdefault(w.idx, ([], []))
        seqs.append(cta.instructions)
        clks.append(int(cta.vc[w.idx, w.idx]))
    return run


def compile_shfl(ins, cc):
    p = ins.parts
    mode = p[2] if p[1] == "sync" else p[1]
    if mode not in ("idx", "up", "down", "bfly") or p[-1] != "b32":
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
    dst = ins.operands[0]
    dsts = dst.items if dst.kind == "pair" else (dst,)
    put = cc.write(dsts[0], "b32", ins)
    putp = cc.write(dsts[1], "pred", ins) if len(dsts) > 1 else None
    a, b, c = (cc.read(o, "b32", ins) for o in ins.operands[1:4])
    pa = cc.poison(ins.operands[1], ins)
    member = cc.read(ins.operands[4], "b32", ins) if len(ins.operands) > 4 else None
    launch = cc.launch

    def run(w):
        if member is not None:
            _check_members(launch.cta, w, ins, member(w))
        lane = LANE_IDS.astype(np.int64)
        bv = b(w).astype(np.int64) & 31
        cv = c(w).astype(np.int64)
        clamp, seg = cv & 31, (cv >> 8) & 31
        mx = (lane & seg) | (clamp & ~seg)
        mn = lane & seg
        if mode == "up":
            j = lane - bv
            ok = j >= mx
        elif mode == "down":
            j = lane + bv
            ok = j <= mx
        elif mode == "bfly":
            j = lane ^ bv
            ok = j <= mx
        else:
            j = mn | (bv & ~seg)
            ok = j <= mx
        j = np.where(ok, j, lane) & 31
        val = a(w)[j]
        src_p = pa(w)
        pz = ~w.m[j] | (src_p[j] if src_p is not None else False)
        put(w, val, pz if pz.any() else None)
        if putp is not None:
            putp(w, ok, None)
    return run


def compile_vote(ins, cc):
    p = ins.parts
    if p[0] == "activemask":
        put = cc.write(ins.operands[0], "b32", ins)
        return lambda w: put(w, np.full(LANES, _bits(w.m), np.uint32), None)
    mode = p[2] if p[1] == "sync" else p[1]
    a = cc.read(ins.operands[1], "pred", ins)
    pa = cc.poison(ins.operands[1], ins)
    if mode == "ballot":
        put = cc.write(ins.operands[0], "b32", ins)
        return lambda w: put(w, np.full(LANES, _bits(a(w) & w.m), np.uint32), pa(w))
    put = cc.write(ins.operands[0], "pred", ins)
    fns = {"all": lambda v, m: (v | ~m).all(), "any": lambda v, m: (v & m).any(),
           "uni": lambda v, m: (v & m).all() or not (v & m).any()}
    if mode not in fns:
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
    f = fns[mode]
    return lambda w: put(w, np.full(LANES, f(a(w), w.m)), pa(w))


def _check_members(cta, w, ins, mask):
    """A .sync warp primitive executed by a lane outside its membermask is undefined."""
    bits = (mask.astype(np.uint64) >> LANE_IDS.astype(np.uint64)) & np.uint64(1)
    out = w.m & (bits == 0)
    if out.any():
        cta.finding(F.BarrierMismatch, w, ins, out, f"{ins.opcode} executed by lanes outside its membermask")


def _bits(mask):
    return int(np.dot(mask.astype(np.uint64), (np.uint64(1) << LANE_IDS.astype(np.uint64))))


def compile_elect(ins, cc):
    dst = ins.operands[0]
    dsts = dst.items if dst.kind == "pair" else (dst,)
    put = cc.write(dsts[0], "b32", ins)
    putp = cc.write(dsts[1], "pred", ins) if len(dsts) > 1 else None
    mask = cc.read(ins.operands[1], "b32", ins)
    launch = cc.launch

    def run(w):
        mk = int(mask(w)[np.nonzero(w.m)[0][0]])
        members = [k for k in np.nonzero(w.m)[0].tolist() if mk >> k & 1]
        leader = members[int(launch.cta.rng.integers(len(members)))] if members else 0
        put(w, np.full(LANES, leader, np.uint32), None)
        if putp is not None:
            putp(w, LANE_IDS == leader, None)
    return run


HANDLERS = {"mbarrier": compile_mbarrier, "bar": compile_bar, "barrier": compile_bar, "fence": compile_fence,
            "membar": compile_fence, "shfl": compile_shfl, "vote": compile_vote, "activemask": compile_vote,
            "elect": compile_elect}