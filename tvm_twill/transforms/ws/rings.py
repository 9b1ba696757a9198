"""WS pass 2, ring allocation: each copied shared tile -> a ring of ``depth`` slots, plus the mbarrier arrays.

``allocate_rings(ws)`` returns a frozen ``Rings``: per tile its ring buffer and
slot size in elements (slots padded to 16 bytes, 128 for TMA), the ring
allocations, the shared bytes they take, the ``full`` / ``empty`` mbarrier
arrays (padded to 64 bytes each: the static shared memory before the dynamic
pool stays a multiple of 128 bytes, so the rings of the pool keep the 128-byte
alignment TMA tensor copies need) and the local spin flag of sm_80's waits.
A ring whose tile only wgmma descriptors read may take the 128-byte swizzle
(``wgmma_swizzle``): 1024 bytes longer, used from a 1024-byte boundary found
at run time (``pads``).

Slot and phase are functions of the iteration ``i`` (``slot_phase``):
``s = i mod depth``, ``phase = (i div depth) mod 2``, the CUTLASS
``PipelineState`` without mutable state.  ``remap`` re-indexes a consumer
statement's tile accesses into slot ``s`` of their rings.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...frontend.ir import const_int, tirx, tvm, tvm_ffi
from ...model.pipeline import WS_SWIZZLE
from ...model.wgmma_layout import ATOM_BYTES
from . import wgmma_swizzle as _sw
from ..tir_util import is_data_of, uses_var, ws_fail
from .tma_copy import TENSOR_ALIGN
from .facts import barrier_slots
from .roles import WsLoop

__all__ = ["Rings", "allocate_rings", "loop_flag", "remap", "slot_phase"]


@dataclass(frozen=True, eq=False)
class Rings:
    """The rings of one kernel (dicts keyed by the original tile buffer; never mutated once built)."""

    rings: dict            # tile -> (ring buffer, slot elements)
    allocs: tuple          # AllocBuffer of each ring, in tile order
    ring_bytes: int        # shared bytes of all rings
    static_ring_bytes: int  # of those, in static __shared__ arrays
    pad_bytes: int         # of those, the swizzled rings' room for their 1024-byte alignment pads
    tensor_ok: bool        # TMA tensor copies possible (bulk, dynamic pool only)
    swizzled: dict         # tile -> wgmma_swizzle choice, for tiles that take the 128-byte swizzle
    why_not: dict          # tile -> why it does not
    pads: dict             # tile -> (pad Var, ring, element bytes): a swizzled ring's offset to 1024 bytes
    full: object           # mbarrier array: the producer's "slot s is written"
    empty: object          # mbarrier array: the consumers' "slot s is free"
    done: object           # local flag of the sm_80 spin wait


def slot_phase(i, depth: int):
    """Slot and phase of iteration ``i`` on a ``depth``-slot ring."""
    return tirx.floormod(i, depth), tirx.floormod(tirx.floordiv(i, depth), 2)


def loop_flag(loop, key: str) -> bool:
    """A 0 / 1 loop annotation (absent: 1); anything else is refused in one line."""
    v = loop.annotations.get(key, 1)
    if const_int(v) not in (0, 1):
        ws_fail(f"the loop annotation {key} must be 0 or 1, got {v!r}")
    return bool(const_int(v))


def _static_shared(body) -> bool:
    """Does the kernel allocate static shared memory (which would shift the dynamic pool's alignment)?"""
    hit = []
    tvm_ffi.structural_walk(body, [(tirx.AllocBuffer, lambda a: hit.append(1) if a.buffer.scope() == "shared"
                                    else None)])
    return bool(hit)


def allocate_rings(ws: WsLoop) -> Rings:
    """One ring per copied tile, the swizzle choices, and the two mbarrier arrays."""
    slot_align = TENSOR_ALIGN if ws.bulk else 16
    tensor_ok = ws.bulk and not _static_shared(ws.func.body) and all(a.buffer.scope() == "shared.dyn"
                                                                     for a in ws.tile_allocs)

    def geometry(b):
        eb = tvm_ffi.dtype(str(b.dtype)).bits // 8
        return -(-math.prod(const_int(d) for d in b.shape) * eb // slot_align) * slot_align // eb, eb
    sw, sw_why = _swizzle_choices(ws, tensor_ok, geometry)
    rings, allocs, pads = {}, [], {}
    ring_bytes = static_ring_bytes = pad_bytes = 0
    for a in ws.tile_allocs:
        b = a.buffer
        n, eb = geometry(b)
        extra = ATOM_BYTES // eb if b in sw else 0
        ring = tirx.decl_buffer((ws.depth * n + extra,), b.dtype, name=f"{b.name}_ring", scope=b.scope())
        rings[b] = (ring, n)
        if extra:
            pads[b] = (tirx.Var(f"ws_pad{len(pads)}", "int32"), ring, eb)
        allocs.append(tirx.AllocBuffer(ring, {"buffer_data_alignment": 128}))
        ring_bytes += (ws.depth * n + extra) * eb
        pad_bytes += extra * eb
        static_ring_bytes += (ws.depth * n + extra) * eb if b.scope() == "shared" else 0
    nbar = barrier_slots(ws.depth)
    return Rings(rings=rings, allocs=tuple(allocs), ring_bytes=ring_bytes, static_ring_bytes=static_ring_bytes,
                 pad_bytes=pad_bytes, tensor_ok=tensor_ok, swizzled=sw, why_not=sw_why, pads=pads,
                 full=tirx.decl_buffer((nbar,), "uint64", name="ws_full", scope="shared"),
                 empty=tirx.decl_buffer((nbar,), "uint64", name="ws_empty", scope="shared"),
                 done=tirx.decl_buffer((1,), "uint32", name="ws_ready", scope="local"))


def _swizzle_choices(ws: WsLoop, tensor_ok: bool, geometry):
    """Tiles read only by wgmma descriptors that take the 128-byte swizzle, and why the others do not."""
    sw, sw_why = {}, {}
    if not (tensor_ok and ws.caps.wgmma):
        return sw, sw_why
    sw, sw_why = _sw.candidates(list(ws.consumer), [(a.buffer, *geometry(a.buffer)) for a in ws.tile_allocs],
                                uses_var)
    for b in list(sw):
        if sum(c.dst.same_as(b) for c in ws.copies) != 1:
            sw_why[b] = "written by more than one copy"
        elif not loop_flag(ws.loop, WS_SWIZZLE):
            sw_why[b] = f"{WS_SWIZZLE} = 0"
        else:
            continue
        del sw[b]
    return sw, sw_why


def remap(stmt, rings: dict, slot):
    """Accesses to each shared tile X -> its ring at ``slot * slot_elems``."""
    def key(buf):
        return next((k for k in rings if k.same_as(buf)), None)

    def on_store(s):
        k = key(s.buffer)
        if k is None:
            return s
        ring, n = rings[k]
        return tirx.BufferStore(ring, s.value, [s.indices[0] + slot * n])

    def on_load(ld):
        k = key(ld.source)
        if k is None:
            return ld
        ring, n = rings[k]
        return tirx.BufferLoad(ring, [ld.indices[0] + slot * n])

    def on_call(c):
        if getattr(c.op, "name", "") == "tirx.tvm_access_ptr":
            k = next((b for b in rings if is_data_of(c.args[1], b)), None)
            if k is not None:
                ring, n = rings[k]
                args = list(c.args)
                args[1] = ring.data
                args[2] = args[2] + slot * n
                return tvm.ir.expr.Call(c.op, args, c.attrs, ret_ty=c.ty)
        return c

    out = tvm_ffi.structural_map(stmt, [(tirx.BufferStore, on_store), (tvm.ir.expr.TensorLoad, on_load),
                                        (tvm.ir.expr.Call, on_call)], order="post")
    for buf in rings:
        if uses_var(out, buf):
            ws_fail(f"'{buf.name}' is used other than by loads, stores and tvm_access_ptr")
    return out
