"""WS pass 4, producer copy rewriting: each copy nest -> the producer's copies into slot ``s`` of its ring.

``rewrite_copies(ws, rings, th)`` returns a frozen ``ProducerCopies`` for one
producer iteration (its variable ``it``, slot ``s = it mod depth``):

* cp.async: the nest re-distributed over the producer warp's 32 lanes, one
  ``cp.async`` per lane and vector;
* TMA (``ws.bulk``): where ``tma_copy`` finds and proves a plan, one elected
  lane issues one ``cp.async.bulk.tensor`` per tile or one ``cp.async.bulk``
  per contiguous row (a swizzled ring needs a 128-byte swizzled tensor box;
  without one the ring loses its swizzle: the returned ``Rings`` says so);
  otherwise the warp's lanes issue one 16-byte ``cp.async.bulk`` per vector;
  ``total_bytes`` is what the iteration's ``arrive.expect_tx`` announces.

The barrier operations around these (waits, arrives) are ``ws_barriers``'.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ...frontend.ir import T, const_int, tirx, tvm_ffi
from ...frontend.ir import substitute as _subst
from ...model.wgmma_layout import ATOM_BYTES
from ..tir_util import i32, u32
from .tma_copy import TENSOR_ALIGN, plan_tile_copy
from .registers import WsThreads
from .rings import Rings, slot_phase
from .roles import THREAD_TAGS, WsLoop

__all__ = ["ProducerCopies", "rewrite_copies"]


@dataclass(frozen=True, eq=False)
class ProducerCopies:
    """One producer iteration's copies (over the iteration variable ``it``)."""

    it: object            # Var: the producer's iteration
    issue: tuple          # statements every producer lane runs (cp.async, per-lane bulk copies)
    elected: tuple        # statements one elected lane runs (planned TMA copies)
    total_bytes: object   # bytes the iteration's bulk copies complete (expect_tx), an int32 expression
    plans: tuple          # how each copy is issued, per slot (WsKernelFacts.copy_plans)
    host: tuple           # statements encoding tensor maps before the launch
    tensor_maps: tuple    # tma_copy.TensorMapSpec of each tensor copy
    aligned: tuple        # (ring, element offset, alignment) each TMA destination needs


def _guarded(stmt, guards):
    for g in reversed(guards):
        stmt = tirx.IfThenElse(g, stmt, None)
    return stmt


def rewrite_copies(ws: WsLoop, rings: Rings, th: WsThreads) -> tuple[ProducerCopies, Rings]:
    """The producer's copies of one iteration, and the rings (a ring may lose its swizzle here)."""
    it = tirx.Var("ws_p", "int32")
    slot, _ = slot_phase(it, ws.depth)
    sw, sw_why = dict(rings.swizzled), dict(rings.why_not)
    issue, elected, plans, host, tensor_maps, aligned = [], [], [], [], [], []
    total_bytes = i32(0)
    for ci, c in enumerate(ws.copies):
        key = next(k for k in rings.rings if k.same_as(c.dst))
        ring, n = rings.rings[key]
        eb = tvm_ffi.dtype(str(c.dst.dtype)).bits // 8
        vlen = const_int(c.vec[2]) if c.vec else 1
        tile = _plan_tma(ws, rings, c, ci, key, sw, sw_why) if ws.bulk else None
        if tile is not None:
            stmt = tile.issue(slot * n + (rings.pads[key][0] if key in sw else 0), rings.full.ptr_to([slot]))
            elected.append(_guarded(stmt, c.guards))
            plans.append(f"{c.dst.name}: {tile.describe}")
            host += tile.host
            if tile.tensor_map is not None:
                tensor_maps.append(tile.tensor_map)
                aligned.append((ring, rings.pads[key][0], ATOM_BYTES) if key in sw else (ring, 0, TENSOR_ALIGN))
        else:
            plan, op = _lane_copy(ws, rings, c, ring, n, eb, vlen, slot)
            plans.append(plan)
            issue.append(_per_lane(ws, th, c, ci, op))
        if ws.bulk:
            nbytes = ws.n_threads * math.prod(const_int(e) for _, _, e in c.loops) * vlen * eb
            guard = None
            for g in c.guards:
                guard = g if guard is None else tirx.And(guard, g)
            total_bytes = total_bytes + (tirx.Select(guard, i32(nbytes), i32(0)) if guard is not None
                                         else i32(nbytes))
    copies = ProducerCopies(it=it, issue=tuple(issue), elected=tuple(elected), total_bytes=total_bytes,
                            plans=tuple(plans), host=tuple(host), tensor_maps=tuple(tensor_maps),
                            aligned=tuple(aligned))
    return copies, dataclasses.replace(rings, swizzled=sw, why_not=sw_why)


def _plan_tma(ws: WsLoop, rings: Rings, c, ci: int, key, sw: dict, sw_why: dict):
    """``tma_copy``'s plan of one copy (None: per-lane bulk copies); drops a swizzle no TMA box reproduces."""
    ring, n = rings.rings[key]
    eb = tvm_ffi.dtype(str(c.dst.dtype)).bits // 8
    pvars = [(ws.tvars[t], i32(0), i32(ws.ext[t])) for t in THREAD_TAGS if t in ws.tvars] + list(c.loops) + \
        ([c.vec] if c.vec else [])
    block_vars = [(s.node.var, i32(0), s.value) for s in ws.path if isinstance(s, tirx.AttrStmt)
                  and s.attr_key == "thread_extent" and s.node.thread_tag.startswith("blockIdx")]
    outer = block_vars + [(ws.loop.loop_var, ws.loop.min, ws.loop.extent)]
    tile = plan_tile_copy(ws.func, c, pvars, outer, ring, n, eb, ci, tensor=rings.tensor_ok,
                          relayout=sw[key].tile if key in sw else None)
    if key in sw and (tile is None or tile.plan.kind != "tensor" or tile.plan.swizzle != 3):
        sw_why[key] = "no 128-byte swizzled TMA box reproduces the copy"
        del sw[key]
        tile = plan_tile_copy(ws.func, c, pvars, outer, ring, n, eb, ci, tensor=rings.tensor_ok)
    return tile


def _lane_copy(ws: WsLoop, rings: Rings, c, ring, n: int, eb: int, vlen: int, slot):
    """(plan description, the copy call of one lane and vector): a 16-byte bulk copy, or cp.async."""
    vsub = [(c.vec[0], c.vec[1])] if c.vec else []
    dst_ptr = ring.ptr_to([_subst(c.store.indices[0] + slot * n, vsub)])
    src = c.store.value
    src_i = _subst(src.indices[0], vsub)
    if c.fill is not None:  # zero-fill: read no byte where the condition fails (the source then at element 0)
        src_i = tirx.Select(_subst(c.fill, vsub), src_i, tirx.const(0, src_i.ty.dtype))
    src_ptr = src.source.ptr_to([src_i])
    if ws.bulk:
        plan = (f"{c.dst.name}: {ws.n_threads * math.prod(const_int(e) for _, _, e in c.loops)} bulk copies of "
                f"{vlen * eb} B (one per lane and vector)")
        return plan, T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"](
            dst_ptr, src_ptr, u32(vlen * eb), rings.full.ptr_to([slot]))
    kind = "cp.async.cg.shared.global" if vlen * eb == 16 else "cp.async.ca.shared.global"
    if c.fill is not None:  # src-size 0 where the guard fails: cp.async writes zeros, the arrive tracks them
        return (f"{c.dst.name}: cp.async of {vlen * eb} B per lane and vector, zero-filled where {c.fill}",
                T.ptx[kind](dst_ptr, src_ptr, i32(vlen * eb), tirx.Select(_subst(c.fill, vsub), u32(vlen * eb),
                                                                         u32(0))))
    return f"{c.dst.name}: cp.async of {vlen * eb} B per lane and vector", T.ptx[kind](dst_ptr, src_ptr,
                                                                                       i32(vlen * eb))


def _per_lane(ws: WsLoop, th: WsThreads, c, ci: int, op):
    """The copy nest's points dealt to the producer warp's lanes: lane + 32 j takes consumer thread lane + 32 j."""
    x, y = ws.ext.get("threadIdx.x", 1), ws.ext.get("threadIdx.y", 1)
    j = tirx.Var(f"ws_c{ci}", "int32")
    c_lin = j * 32 + th.lane
    tsub = []
    if "threadIdx.x" in ws.tvars:
        tsub.append((ws.tvars["threadIdx.x"], tirx.floormod(c_lin, x)))
    if "threadIdx.y" in ws.tvars:
        tsub.append((ws.tvars["threadIdx.y"], tirx.floormod(tirx.floordiv(c_lin, x), y)))
    if "threadIdx.z" in ws.tvars:
        tsub.append((ws.tvars["threadIdx.z"], tirx.floordiv(c_lin, x * y)))
    inner = _guarded(tirx.Evaluate(op), c.guards)
    for v, mn, ex in reversed(c.loops):
        inner = tirx.For(v, mn, ex, tirx.ForKind.SERIAL, inner)
    return tirx.For(j, i32(0), i32(ws.n_threads // 32), tirx.ForKind.SERIAL, _subst(inner, tsub))
