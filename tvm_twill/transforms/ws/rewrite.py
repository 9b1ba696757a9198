"""The warp-specialization transform: a lowered s_tir kernel -> producer warp + consumer warps on mbarrier rings.

``warp_specialize_func`` is the driver of a chain of small passes, each in its
own module, each taking and returning frozen values (in data-flow order):

1. ``ws_roles.find_ws_loop``       -> ``WsLoop``: the loop, its threads, producer copies / consumer statements
2. ``ws_rings.allocate_rings``     -> ``Rings``: a ring per copied tile, swizzle choices, full / empty arrays
3. ``ws_registers.assign_threads`` -> ``WsThreads``: producer size, setmaxnreg budgets, the warp index
4. ``ws_copies.rewrite_copies``    -> ``ProducerCopies`` (+ ``Rings``): the copies into slot ``s``
5. ``ws_barriers.producer_loop`` / ``consumer_loop`` -> ``ProducerLoop`` / ``ConsumerLoop``: waits, arrives
6. here: the role branch, the grown thread binding, and ``WsKernelFacts`` read off what was emitted.

Runs inside ``tvm.compile`` as a pass of the ``tvm_twill_ws`` TIR pipeline
(``transforms.ws.lowering``), right after FlattenBuffer: at that point the s_tir
schedule's loops, thread bindings and flat buffers are fixed, software
pipelines of inner loops are already injected, and nothing has inserted
synchronisation yet.  It rewrites the one loop that carries the
``tvm_twill.ws_depth`` annotation (written by ``auto_pipeline(...,
warp_specialize=...)``):

* every statement of the loop body that copies global memory into a shared
  buffer allocated in the body is a **producer** statement; its buffer becomes
  a ring of ``depth`` slots; the rest of the body is the **consumer**;
* the block gets extra threads for the producer (one warp, or one warp group
  where the arch has ``setmaxnreg`` and the plan gives register budgets:
  sm_90a, sm_100a, sm_120a, ...; its other three warps only give registers back);
  every arch decision reads ``model.arch.parse_arch`` (one capability table);
  the role branch tests a warp index broadcast with ``shfl.sync``, so it is
  warp-uniform by construction;
* producer (one warp): for each iteration, wait ``empty[s]`` at ``phase ^ 1``,
  issue its copies into slot ``s`` and signal ``full[s]``: ``cp.async``
  re-distributed over the warp's 32 lanes + ``cp.async.mbarrier.arrive.noinc``
  (``full`` counts 32 lanes), or on sm_90a TMA copies completing by bytes
  (``mbarrier::complete_tx``; ``full`` counts 1) after one elected lane's
  ``arrive.expect_tx`` of the iteration's bytes: that lane issues one
  ``cp.async.bulk.tensor`` per tile or one ``cp.async.bulk`` per contiguous
  row where ``tma_copy`` finds and proves such a plan, the warp's lanes one
  16-byte ``cp.async.bulk`` per vector otherwise (a ring read only by wgmma
  descriptors takes the 128-byte swizzle, ``wgmma_swizzle``); then a
  producer tail that acquires every slot once more, so the warp exits only
  after every consumer released every slot;
* consumers: wait ``full[s]`` at ``phase``, run the original body reading
  slot ``s``, ``__syncwarp`` and one lane per warp arrives on ``empty[s]``
  (``empty`` counts the consumer warps); a wgmma body (sm_90a) instead keeps
  its groups in flight for one iteration (``transforms.wgmma_overlap``,
  ``WsKernelFacts.release_lag`` 1): no ``wait_group 0`` per group, one
  ``wgmma.wait_group G`` per iteration, then the release of the previous
  iteration's slot, and after the loop ``wait_group 0`` and the last
  release (off with the loop annotation ``tvm_twill.ws_wgmma_overlap = 0``
  or ``overlap=False``; never on a one-slot ring, which would deadlock);
* with ``tvm_twill.ws_consumer_order`` (``consumer_order``): the consumer
  warps as groups taking turns through named barriers around the body;
* archs with ``setmaxnreg``: one per role from the plan's register budgets, with
  ``__launch_bounds__(threads, 1)`` so ptxas honours them.

Slot and phase are functions of the iteration ``i``: ``s = i mod depth``,
``phase = (i div depth) mod 2``, the CUTLASS ``PipelineState`` without mutable
state.  The protocol (state-transition table in ``model/protocol.py``) is
read off the emitted statements (``WsKernelFacts.ring_protocol``) and model
checked before ``auto_pipeline`` returns (``pipelines.emit_and_check``).
"""
from __future__ import annotations

from ...frontend.ir import T, const_int, tirx, tvm_ffi
from ...frontend.ir import substitute as _subst
from ...model.wgmma_layout import ATOM_BYTES
from .. import wgmma_overlap as _ov
from . import wgmma_swizzle as _sw
from .role_barriers import mark_role_branch
from ..tir_util import flatten_seq, i32, path_to, stores, u32, uses_var
from .barriers import (
    ConsumerLoop,
    ProducerLoop,
    barrier_init,
    consumer_loop,
    producer_loop,
)
from .copies import ProducerCopies, rewrite_copies
from .facts import WsKernelFacts
from .registers import (
    WsThreads,
    assign_threads,
    consumer_role,
    grow_binding,
    launch_bounds,
    producer_role,
)
from .rings import Rings, allocate_rings
from .roles import WsLoop, find_ws_loop

__all__ = ["WsKernelFacts", "warp_specialize_func"]


def warp_specialize_func(func, arch: str, overlap: bool | None = None):
    """Rewrite the annotated loop of one lowered PrimFunc; returns (new func, WsKernelFacts) or (func, None).

    ``overlap``: keep wgmma groups in flight across consumer iterations where safe (``wgmma_overlap``);
    None reads the loop's ``tvm_twill.ws_wgmma_overlap`` annotation (default 1).  The passes, in order:"""
    ws = find_ws_loop(func, arch)                      # ws_roles: the loop, its threads, producer / consumer
    if ws is None:
        return func, None
    rings = allocate_rings(ws)                         # ws_rings: a ring per tile, full / empty barriers
    th = assign_threads(ws)                            # ws_registers: producer size, setmaxnreg budgets
    copies, rings = rewrite_copies(ws, rings, th)      # ws_copies: the producer's copies into slot s
    prod = producer_loop(ws, rings, copies)            # ws_barriers: acquire empty[s] .. signal full[s]
    cons = consumer_loop(ws, rings, th, overlap)       # ws_barriers: acquire full[s] .. release empty[s]
    body = _role_branch(ws, rings, th, prod, cons)     # the roles under one warp-uniform branch
    new_fbody = _rebuild(ws, th, body)                 # the grown thread binding, the tensor maps
    if copies.host:  # tensor maps: encoded on the host before the launch (SplitHostDevice keeps them there)
        new_fbody = tirx.SeqStmt([*copies.host, new_fbody])
    return func.with_body(new_fbody), _facts(ws, rings, th, copies, prod, cons)


def _role_branch(ws: WsLoop, rings: Rings, th: WsThreads, prod: ProducerLoop, cons: ConsumerLoop):
    """The new body of the innermost thread binding: rings, barriers, warp index, init, the two roles."""
    inner_attr = ws.path[ws.inner_i]
    loop = ws.loop
    prologue, rest = _split_prologue(ws, th, inner_attr.body)
    branch = tvm_ffi.structural_map(rest, [(tirx.For, lambda f: cons.placed if f.same_as(loop) else f)],
                                    order="post")
    return tirx.SeqStmt([
        *rings.allocs,
        tirx.AllocBuffer(rings.full, {"buffer_data_alignment": 8}),
        tirx.AllocBuffer(rings.empty, {"buffer_data_alignment": 8}),
        tirx.AllocBuffer(rings.done, {}),
        *[_pad(v, r, eb) for v, r, eb in rings.pads.values()],
        tirx.Bind(th.warp, T.tvm_warp_shuffle(u32(0xFFFFFFFF), tirx.floordiv(th.lin, 32), i32(0), i32(32), i32(32))),
        *prologue,
        tirx.IfThenElse(th.lin == 0, tirx.SeqStmt(barrier_init(ws, rings, th, prod.full_count)), None),
        tirx.Evaluate(T.tvm_storage_sync("shared")),
        tirx.IfThenElse(mark_role_branch(th.warp >= th.consumer_warps), tirx.SeqStmt(producer_role(th, list(prod.stmts))),
                        consumer_role(th, branch)),
    ])


def _split_prologue(ws: WsLoop, th: WsThreads, body):
    """(hoisted prologue, the rest of ``body``): when statements before the loop write shared memory the loop
    reads, TVM's ThreadSync needs a CTA barrier between them, which it cannot place inside the consumers'
    branch; so they run before the role branch, guarded to the consumer threads that ran them, and the
    barrier after the mbarrier init orders them.  Declarations stay unguarded (their scope is the rest);
    the order of the statements is kept.  No shared store before the loop: ([], body), nothing moved."""
    seq = flatten_seq(body)
    at = next(i for i, st in enumerate(seq) if uses_loop(st, ws.loop))
    decl = (tirx.AllocBuffer, tirx.Bind)
    if not any(st.buffer.scope().startswith("shared") for x in seq[:at] if not isinstance(x, decl)
               for st in stores(x)):
        return [], body
    out, run = [], []
    for x in seq[:at]:
        if isinstance(x, decl):
            if run:
                out.append(tirx.IfThenElse(th.warp < th.consumer_warps, tirx.SeqStmt(run), None))
                run = []
            out.append(x)
        else:
            run.append(x)
    if run:
        out.append(tirx.IfThenElse(th.warp < th.consumer_warps, tirx.SeqStmt(run), None))
    rest = seq[at:]
    return out, rest[0] if len(rest) == 1 else tirx.SeqStmt(rest)


def uses_loop(stmt, loop) -> bool:
    """Is ``loop`` ``stmt`` or inside it?"""
    return path_to(stmt, lambda x: x.same_as(loop)) is not None


def _pad(var, ring, eb):
    """``var`` = elements from a swizzled ring's start to its first 1024-byte boundary."""
    return tirx.Bind(var, tirx.Cast("int32", tirx.floordiv(tirx.floormod(u32(ATOM_BYTES) - tirx.floormod(
        T.cuda.cvta_generic_to_shared(ring.ptr_to([0])), u32(ATOM_BYTES)), u32(ATOM_BYTES)), u32(eb))))


def _rebuild(ws: WsLoop, th: WsThreads, body):
    """The function body with the innermost thread binding's new body, the grown binding widened."""
    inner_attr = ws.path[ws.inner_i]
    grow_attr = next(s for _, s in ws.attrs if s.node.thread_tag == th.grow)

    def rebuild(node):
        """Post order: the innermost thread attr gets the new body before the grown one (maybe itself) is
        widened to the producer's extra threads."""
        if node.same_as(inner_attr):
            node = tirx.AttrStmt(node.node, node.attr_key, node.value, launch_bounds(th, body))
        if node.attr_key == "thread_extent" and node.node.same_as(grow_attr.node):
            return grow_binding(th, node)
        return node
    return tvm_ffi.structural_map(ws.func.body, [(tirx.AttrStmt, rebuild)], order="post")


def _parities(expr, var, depth: int) -> tuple:
    """The constant parity ``expr`` takes at ``var`` = 0 .. 2 * depth."""
    def ev(e):
        if isinstance(e, tirx.BitwiseXor):
            a, b = ev(e.a), ev(e.b)
            return None if a is None or b is None else a ^ b
        if isinstance(e, tirx.Cast):
            return ev(e.value)
        return const_int(e)
    return tuple(ev(_subst(expr, [(var, i32(i))])) for i in range(2 * depth + 1))


def _facts(ws: WsLoop, rings: Rings, th: WsThreads, copies: ProducerCopies, prod: ProducerLoop,
           cons: ConsumerLoop) -> WsKernelFacts:
    """What was emitted, read off the emitted statements (the protocol checker's input)."""
    ov, empty = cons.overlap, rings.empty
    seq = flatten_seq(cons.body)
    reads = [i for i, st in enumerate(seq) if any(uses_var(st, r) for r, _ in rings.rings.values())]
    releases = [i for i, st in enumerate(seq) if uses_var(st, empty)]
    waits = [i for i, st in enumerate(seq) if _ov.is_wait_group(st)]   # lag 1: the release follows it
    ahead = cons.lookahead     # look-ahead: lag 1, this iteration's groups (issued in the next) + the wait's N
    lag = ov is not None or ahead is not None
    after = list(cons.loop.seq[1:]) if lag and isinstance(cons.loop, tirx.SeqStmt) else []
    groups = ov[1] if ov is not None else ahead.groups if ahead is not None else 0
    wait = _ov.wait_group_count(seq[waits[-1]]) if waits else 0
    od = cons.ordering
    return WsKernelFacts(depth=ws.depth, consumer_threads=ws.n_threads, producer_threads=th.producer_threads,
                         copy="bulk" if ws.bulk else "cp.async", full_count=prod.full_count,
                         empty_count=th.consumer_warps, ring_bytes=rings.ring_bytes,
                         static_ring_bytes=rings.static_ring_bytes, registers=th.registers,
                         producer_statements=len(ws.copies),
                         producer_parities=_parities(prod.parity, prod.it, ws.depth),
                         consumer_parities=_parities(cons.phase, cons.it, ws.depth),
                         tail_acquires=prod.tail_acquires,
                         release_last=bool(releases) and min(releases) > max(reads + waits, default=-1),
                         release_lag=int(lag), wgmma_groups=groups,
                         wgmma_wait=wait + groups if ahead is not None else wait,
                         final_release=not lag or any(uses_var(st, empty) for st in after),
                         copy_plans=copies.plans, tensor_maps=copies.tensor_maps,
                         operand_layouts=_sw.describe(rings.swizzled, rings.why_not),
                         swizzle_pad_bytes=rings.pad_bytes,
                         **(od.facts(seq, reads, cons.it, ws.trip, cons.placed, after[0] if ahead and after else None)
                            if od is not None else {}))
