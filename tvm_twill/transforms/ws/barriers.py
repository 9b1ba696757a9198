"""WS pass 5, barrier insertion: the producer's and the consumers' loops on the ``full`` / ``empty`` rings.

* ``producer_loop``: each iteration waits ``empty[s]`` at ``phase ^ 1``, issues
  its copies (``ws_copies``) and signals ``full[s]``: cp.async +
  ``cp.async.mbarrier.arrive.noinc`` (``full`` counts 32 lanes), or one elected
  lane's ``arrive.expect_tx`` of the iteration's bytes before its TMA copies
  (``full`` counts 1); then a tail that acquires every slot once more, so the
  producer exits only after every consumer released every slot; TMA
  destinations are checked aligned at run time (a trap, not shifted tiles).
* ``consumer_loop``: each iteration waits ``full[s]`` at ``phase`` (a proxy
  fence after it where cp.async feeds wgmma), runs the body re-indexed into
  slot ``s``, ``__syncwarp`` and one lane per warp arrives on ``empty[s]``
  (``empty`` counts the consumer warps); a wgmma body keeps its groups in
  flight one iteration and releases slot k-1 (``wgmma_overlap``); ordered
  consumer groups take turns around the body, or around each run of its
  tensor-core statements (``consumer_order``).
* ``barrier_init``: one thread initialises both arrays.

sm_80 has no ``mbarrier.try_wait``: its waits spin on ``test_wait.parity``.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...frontend.ir import T, const_int, tirx
from ...frontend.ir import substitute as _subst
from ...model.pipeline import WS_CONSUMER_ORDER, WS_LOOKAHEAD, WS_WGMMA_OVERLAP
from . import look_ahead as _la
from .. import wgmma_overlap as _ov
from . import wgmma_swizzle as _sw
from .consumer_order import Ordering, read_order
from ..proxy_fence import consumer_fence
from ..tir_util import i32, u32, ws_fail
from .copies import ProducerCopies
from .registers import WsThreads
from .rings import Rings, loop_flag, remap, slot_phase
from .roles import WsLoop

__all__ = ["ConsumerLoop", "ProducerLoop", "barrier_init", "consumer_loop", "producer_loop", "wait"]


@dataclass(frozen=True, eq=False)
class ProducerLoop:
    stmts: tuple          # the producer's statements: alignment checks, the loop, the tail
    parity: object        # the parity each iteration waits on empty[s] (over ``it``)
    it: object            # Var: the producer's iteration
    tail_acquires: int    # iterations of the tail
    full_count: int       # mbarrier.init count of every full barrier


@dataclass(frozen=True, eq=False)
class ConsumerLoop:
    placed: object        # what replaces the loop: the consumer loop (after the ordered groups' prologue)
    loop: object          # the consumer loop (lag 1: a SeqStmt of the loop and its epilogue)
    body: object          # the loop body
    it: object            # Var: the consumer's iteration
    phase: object         # the parity each iteration waits on full[s]
    overlap: tuple | None  # wgmma_overlap.overlap_groups' (section, groups), None when synchronous
    ordering: object      # consumer_order.Ordering, None without ordered groups
    lookahead: object = None  # look_ahead.LookAheadBody of the look-ahead turn, None without it


def wait(bar_ptr, parity, try_wait: bool, done):
    """Wait until the mbarrier at ``bar_ptr`` completes the phase of ``parity``."""
    if try_wait:
        return tirx.Evaluate(T.cuda.mbarrier_wait(bar_ptr, parity))
    # sm_80: try_wait is sm_90-only; spin on test_wait.parity
    return tirx.SeqStmt([
        tirx.BufferStore(done, u32(0), [0]),
        tirx.While(tirx.BufferLoad(done, [0]) == u32(0),
                   tirx.Evaluate(T.ptx.mbarrier.test_wait.parity.shared.b64(
                       tirx.BufferLoad(done, [0]), bar_ptr, tirx.Cast("uint32", parity)))),
    ])


def producer_loop(ws: WsLoop, rings: Rings, copies: ProducerCopies) -> ProducerLoop:
    """The producer's iterations around ``copies`` (acquire empty[s], copy, signal full[s]) and its tail."""
    it, depth, full, try_wait = copies.it, ws.depth, rings.full, ws.caps.try_wait
    slot, phase = slot_phase(it, depth)
    parity = tirx.bitwise_xor(phase, 1)
    body = [wait(rings.empty.ptr_to([slot]), parity, try_wait, rings.done)]
    if ws.bulk:
        lead = [tirx.Evaluate(T.ptx.mbarrier.arrive.expect_tx.shared.b64(
            full.ptr_to([slot]), tirx.Cast("uint32", copies.total_bytes))), *copies.elected]
        body.append(tirx.IfThenElse(T.cuda.elect_sync() != u32(0),
                                    tirx.SeqStmt(lead) if len(lead) > 1 else lead[0], None))
        if copies.issue:
            body.append(tirx.Evaluate(T.cuda.warp_sync()))
            body += copies.issue
    else:
        body += copies.issue
        body.append(tirx.Evaluate(T.ptx["cp.async.mbarrier.arrive.noinc.shared.b64"](full.ptr_to([slot]))))
    body = _subst(tirx.SeqStmt(body), [(ws.loop.loop_var, ws.loop.min + it)])
    loop = tirx.For(it, i32(0), ws.trip, tirx.ForKind.SERIAL, body)
    it_t = tirx.Var("ws_t", "int32")
    slot_t, phase_t = slot_phase(it_t, depth)
    tail = tirx.For(it_t, ws.trip, i32(depth), tirx.ForKind.SERIAL,
                    wait(rings.empty.ptr_to([slot_t]), tirx.bitwise_xor(phase_t, 1), try_wait, rings.done))
    # TMA writes 128-byte aligned slots (1024 swizzled): the ring layout makes them so; a kernel where it
    # did not hold traps at once rather than reading shifted tiles
    stmts = [tirx.Evaluate(T.cuda.trap_when_assert_failed(tirx.floormod(
        T.cuda.cvta_generic_to_shared(r.ptr_to([off])), u32(al)) == u32(0))) for r, off, al in copies.aligned]
    return ProducerLoop(stmts=(*stmts, loop, tail), parity=parity, it=it, tail_acquires=const_int(tail.extent),
                        full_count=1 if ws.bulk else 32)


def consumer_loop(ws: WsLoop, rings: Rings, th: WsThreads, overlap: bool | None) -> ConsumerLoop:
    """The consumers' iterations: acquire full[s], the body on slot s, release empty[s] (or slot k-1)."""
    it = tirx.Var("ws_k", "int32")
    slot, phase = slot_phase(it, ws.depth)
    chosen = {b: (rings.swizzled[b], rings.pads[b][0]) for b in rings.swizzled}
    stmts = [_subst(remap(_sw.rewrite(s, chosen) if chosen else s, rings.rings, slot),
                    [(ws.loop.loop_var, ws.loop.min + it)]) for s in ws.consumer]

    def release_of(s):
        return tirx.SeqStmt([tirx.Evaluate(T.cuda.warp_sync()), tirx.IfThenElse(
            th.lane == 0, tirx.Evaluate(T.ptx.mbarrier.arrive.shared.b64(rings.empty.ptr_to([s]))), None)])
    head = [wait(rings.full.ptr_to([slot]), phase, ws.caps.try_wait, rings.done)]
    if not ws.bulk and _ov.has_wgmma(stmts):   # cp.async writes in the generic proxy, wgmma reads in the async
        head.append(consumer_fence())           # one: the reader fences after the acquire (proxy_fence)
    if overlap is None:
        overlap = loop_flag(ws.loop, WS_WGMMA_OVERLAP)
    look = _la.read_flag(ws.loop)
    ov = _ov.overlap_groups(stmts, ws.depth) if overlap and not look else None
    order = read_order(ws.loop)
    od = None if order is None else Ordering.build(order, th.warp, th.consumer_warps, stmts, _ov.has_wgmma(stmts),
                                                 (ws.ext, ws.tvars))
    if look:   # the look-ahead turn: the last run of k - 1 in flight under k's work (look_ahead)
        if od is None or not _ov.has_wgmma(stmts):
            ws_fail(f"{WS_LOOKAHEAD} needs ordered consumer groups ({WS_CONSUMER_ORDER}) and a synchronous wgmma "
                    "consumer body")
        ahead = _la.split(stmts)
        loop, after = _la.emit(od, ahead, it, ws.trip, head, release_of, lambda i: slot_phase(i, ws.depth)[0])
        body = loop.body
        loop = tirx.SeqStmt([loop, after]) if after is not None else loop
        return ConsumerLoop(placed=tirx.SeqStmt([od.prologue(), *ahead.hoisted, loop]), loop=loop, body=body, it=it,
                            phase=phase, overlap=None, ordering=od, lookahead=ahead)
    section = list(stmts if ov is None else ov[0])
    if od is not None:  # ordered consumer groups: my turn, a section, the next group's turn (consumer_order)
        section = od.take_turns(section, it, ws.trip, whole=ov is not None)
    if ov is None:   # synchronous: release slot k at the end of iteration k
        body = tirx.SeqStmt([*head, *section, release_of(slot)])
        loop = tirx.For(it, i32(0), ws.trip, tirx.ForKind.SERIAL, body)
    else:            # wgmma groups of iteration k in flight while k+1 issues: release slot k-1 (wgmma_overlap)
        loop = _ov.overlapped_loop(it, ws.trip, tirx.SeqStmt(head) if len(head) > 1 else head[0], section,
                                   ov[1], release_of, lambda i: slot_phase(i, ws.depth)[0])
        body = loop.seq[0].body
    placed = loop if od is None else tirx.SeqStmt([od.prologue(), loop])
    return ConsumerLoop(placed=placed, loop=loop, body=body, it=it, phase=phase, overlap=ov, ordering=od)


def barrier_init(ws: WsLoop, rings: Rings, th: WsThreads, full_count: int) -> list:
    """mbarrier.init of every full / empty barrier (+ the cluster-scope fence where the arch has clusters)."""
    init = [tirx.Evaluate(T.ptx.mbarrier.init.shared.b64(rings.full.ptr_to([s]), u32(full_count)))
            for s in range(ws.depth)]
    init += [tirx.Evaluate(T.ptx.mbarrier.init.shared.b64(rings.empty.ptr_to([s]), u32(th.consumer_warps)))
             for s in range(ws.depth)]
    if ws.caps.clusters:
        init.append(tirx.Evaluate(T.ptx.fence.mbarrier_init.release.cluster()))
    return init
