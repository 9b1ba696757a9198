"""mbarriers, fences and warp primitives (shfl, vote, activemask, elect); named barriers and the membermask
rules are ``barrier.py`` (its handlers are registered here).

mbarrier: phase (an unbounded integer; the hardware exposes its parity),
pending, expected and tx-count per object (``state.MBarrier``, which makes
its own transitions), held beside shared memory (its 8 bytes are marked so
that an ordinary store to a valid mbarrier is reported).  A release arrive
joins the arriving warp's clock into the phase; a successful
``test_wait``/``try_wait`` joins the last completed phase's clock into the
waiter.  A wait that fails leaves the warp off the schedule until the phase
changes (it would only spin); ``try_wait`` fails spuriously with
``Policy.spurious`` probability.  ``.relaxed`` arrives and waits order nothing.
A use by a warp not ordered after the init is reported (``mbar_of``), and a
bulk copy's complete-tx needs the init published to the async proxy
(``fence.mbarrier_init`` / ``fence.proxy.async`` by the initialising warp).
"""
from __future__ import annotations

import numpy as np

from ..errors import EmulationError
from . import findings as F
from . import memmodel
from .barrier import check_members, compile_bar
from .memops import address
from .state import MBarrier
from .values import LANE_IDS, LANES, YIELD


def mbar_of(cta, w, ins, addr):
    """The valid mbarrier at ``addr`` for warp w.  Its init must happen before the use (PTX ISA "Memory Consistency
    Model": the init is a write of the object, an arrive or wait an access of it; "mbarrier.init"): a warp that is
    not ordered after the initialising warp's init (no bar.sync or other synchronization between) is reported,
    whatever the interleaving."""
    mb = cta.mbars.get(addr)
    if mb is None or not mb.valid:
        cta.finding(F.MbarrierMisuse, w, ins, w.m, f"mbarrier at shared offset {addr} used before init"
                    if mb is None else f"mbarrier at shared offset {addr} used after inval")
        return None
    if w.idx != mb.init_warp and cta.vc[w.idx, mb.init_warp] < mb.init_clock:
        cta.finding(F.MbarrierMisuse, w, ins, w.m, f"mbarrier at shared offset {addr} used by warp {w.idx} with no "
                    f"happens-before from its init by warp {mb.init_warp} (a bar.sync between them is missing)")
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
                cta.mbars[ad] = MBarrier.init(ad, int(c[k]), cta.nwarps, w.idx, int(cta.vc[w.idx, w.idx]))
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
    """arrive / arrive_drop (PTX ISA "mbarrier.arrive", "mbarrier.arrive_drop"): each thread arrives with its
    count (default 1; .expect_tx: 1, after adding its txCount); arrive_drop first lowers the expected count of
    the phases that follow by the same count.  .release (default) joins the warp's clock into the phase;
    .relaxed orders nothing."""
    launch = cc.launch
    relaxed = "relaxed" in p
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
            if not relaxed:
                mb.release(cta.vc[w.idx])
            n = int(sel.sum()) if expect else int(x[sel].sum())
            if op == "arrive_drop":
                mb.drop(n, cta, w, ins)
            mb.arrive(cta, w, ins, n, tx=int(x[sel].sum()) if expect else 0)
        if op.startswith("arrive") and not relaxed:
            cta.release(w)
    return run


def _compile_wait(ins, cc, op, p, ops):
    launch = cc.launch
    put = cc.write(ops[0], "pred", ins)
    addr = address(cc, ops[1], ins)
    parity = "parity" in p
    relaxed = "relaxed" in p        # .relaxed: a successful wait acquires nothing (PTX ISA "mbarrier.test_wait")
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
            w.polled = None         # the phase completed: a warp retrying it is not waiting (engine._wake_pollers)
            put(w, res, None)
            return None
        if ok.any() and not relaxed:
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


def compile_fence(ins, cc):
    """Fences order nothing the emulator does not already order, except fence.proxy.async: recorded per warp
    (when, and the warp's clock) for the proxy check of wgmma operands."""
    if memmodel.is_model_fence(ins):              # fence.sc / acq_rel / membar: the memory model's
        return memmodel.compile_fence(ins, cc)
    if ins.parts[:2] == ["fence", "mbarrier_init"]:
        return _compile_init_fence(cc)
    if ins.parts[:3] != ["fence", "proxy", "async"]:
        return lambda w: None
    launch = cc.launch
    covers_mbar = ins.parts[3:] in ([], ["shared::cta"], ["shared::cluster"])

    def run(w):
        cta = launch.cta
        seqs, clks = cta.proxy_fences.setdefault(w.idx, ([], []))
        seqs.append(cta.instructions)
        clks.append(int(cta.vc[w.idx, w.idx]))
        if covers_mbar:
            _publish_inits(cta, w)
    return run


def _compile_init_fence(cc):
    launch = cc.launch
    return lambda w: _publish_inits(launch.cta, w)


def _publish_inits(cta, w):
    """fence.mbarrier_init.release.cluster / fence.proxy.async(.shared): the warp's earlier mbarrier inits become
    visible to the async proxy (the complete-tx of a bulk copy)."""
    for mb in cta.mbars.values():
        if mb.init_warp == w.idx:
            mb.async_visible = True


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
        bits = check_members(launch.cta, w, ins, member(w)) if member is not None else True
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
        pz = ~(w.m & bits)[j] | (src_p[j] if src_p is not None else False)     # a source outside the mask: undefined
        put(w, val, pz if pz.any() else None)
        if putp is not None:
            putp(w, ok, None)
    return run


def compile_vote(ins, cc):
    """vote.sync over the executing lanes of membermask (a ballot's other bits are 0); activemask."""
    p = ins.parts
    if p[0] == "activemask":
        put = cc.write(ins.operands[0], "b32", ins)
        return lambda w: put(w, np.full(LANES, _bits(w.m), np.uint32), None)
    mode = p[2] if p[1] == "sync" else p[1]
    a = cc.read(ins.operands[1], "pred", ins)
    pa = cc.poison(ins.operands[1], ins)
    member = cc.read(ins.operands[2], "b32", ins) if len(ins.operands) > 2 else None
    launch = cc.launch
    fns = {"ballot": lambda v, m: np.full(LANES, _bits(v & m), np.uint32), "all": lambda v, m: (v | ~m).all(),
           "any": lambda v, m: (v & m).any(), "uni": lambda v, m: (v & m).all() or not (v & m).any()}
    if mode not in fns:
        raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
    f = fns[mode]
    put = cc.write(ins.operands[0], "b32" if mode == "ballot" else "pred", ins)

    def run(w):
        m = w.m & check_members(launch.cta, w, ins, member(w)) if member is not None else w.m
        put(w, np.broadcast_to(f(np.asarray(a(w), np.bool_), m), (LANES,)), pa(w))
    return run


def _bits(mask):
    return int(np.dot(mask.astype(np.uint64), (np.uint64(1) << LANE_IDS.astype(np.uint64))))


def compile_elect(ins, cc):
    """elect.sync d|p, membermask (PTX ISA "elect.sync"): one leader among the executing lanes of membermask,
    "the same leader thread is elected for the same membermask every time".  Which one the ISA leaves open:
    the lowest by default, the highest with ``Policy(elect="highest")`` (code assuming lane 0 then misbehaves)."""
    dst = ins.operands[0]
    dsts = dst.items if dst.kind == "pair" else (dst,)
    put = cc.write(dsts[0], "b32", ins)
    putp = cc.write(dsts[1], "pred", ins) if len(dsts) > 1 else None
    mask = cc.read(ins.operands[1], "b32", ins)
    launch = cc.launch

    def run(w):
        cta = launch.cta
        members = np.nonzero(w.m & check_members(cta, w, ins, mask(w)))[0]
        leader = int(members[-1] if cta.policy.elect == "highest" else members[0]) if members.size else 0
        put(w, np.full(LANES, leader, np.uint32), None)
        if putp is not None:
            putp(w, LANE_IDS == leader, None)
    return run


HANDLERS = {"mbarrier": compile_mbarrier, "bar": compile_bar, "barrier": compile_bar, "fence": compile_fence,
            "membar": compile_fence, "shfl": compile_shfl, "vote": compile_vote, "activemask": compile_vote,
            "elect": compile_elect}