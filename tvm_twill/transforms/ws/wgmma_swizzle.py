"""128-byte swizzled rings for wgmma operands (sm_90a): the shared layout TMA and wgmma run fastest with.

A wgmma tile in TVM's no-swizzle core-matrix layout is copied by TMA as a
3-d box of 16-byte rows (``(k % 8, row, k // 8)``), the smallest box row
the copy engine takes.  When a ring's slot is read only through wgmma
matrix descriptors, the warp-specialization transform owns its layout and
can store the tile as CUTLASS does: rows of 128 bytes, 8-row atoms of 1024
bytes, 16-byte chunks XOR-swizzled by row (``model.wgmma_layout``).  Then
the producer copies one 2-d box of 128-byte rows with the tensor map's
128-byte swizzle, and each descriptor says "128-byte swizzle, SBO 1024 B".

``candidates`` decides which tiles qualify, from the consumer statements:
every use of the tile is the pointer of an ``encode_matrix_descriptor``
with no swizzle, one geometry (SBO 128 B, LBO 16 x rows) whose rows and
k chunks fill the slot exactly (chunks a multiple of 8), and every start,
evaluated at every iteration of the loops around it, starts a core matrix
and keeps its k extent inside one atom row (``SwizzledTile.start_ok``).
``rewrite`` maps each such descriptor to the swizzled tile (same start
function as the data, ``sw128_offset``) plus the ring's run-time pad (the
ring is allocated 1024 bytes longer and its used part starts at the next
1024-byte boundary: the dynamic pool promises less).  The producer side
(``warp_specialize``) plans the copy on the re-laid (global, slot) pairs
with only the 128-byte mode allowed; if no swizzled tensor copy reproduces
them the tile keeps its no-swizzle layout and the reason is reported.
Turned off with the loop annotation ``tvm_twill.ws_swizzle = 0``.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from ...frontend.ir import const_int, tirx, tvm, tvm_ffi
from ...frontend.ir import substitute as _subst
from ...model.wgmma_layout import ATOM_BYTES, CHUNK, SW128, SwizzledTile
from ..tir_util import is_data_of

__all__ = ["ENCODE", "Candidate", "candidates", "describe", "rewrite", "swizzled_start"]

ENCODE = "tirx.cuda.wgmma_encode_matrix_descriptor"
#: Loop points a descriptor start is evaluated at, at most (beyond: not swizzled).
MAX_POINTS = 4096
NOT_READ = "not read by a wgmma descriptor"


@dataclass(frozen=True)
class Candidate:
    """A tile that can be swizzled: its geometry, element bytes and the descriptor starts seen (no-swizzle
    tile bytes, every loop point)."""

    tile: SwizzledTile
    elem_bytes: int
    starts: tuple[int, ...]


def _descriptors(stmt, loops, out):
    """Every descriptor encode under ``stmt`` as (call, [(loop var, min, extent)] of the loops around it; a
    loop under another statement kind is not followed, so a start using it is refused by ``_points``)."""
    if isinstance(stmt, tirx.For):
        _descriptors(stmt.body, loops + [(stmt.loop_var, stmt.min, stmt.extent)], out)
    elif isinstance(stmt, tirx.SeqStmt):
        for s in stmt.seq:
            _descriptors(s, loops, out)
    else:
        tvm_ffi.structural_walk(stmt, [(tvm.ir.expr.Call, lambda c: out.append((c, loops))
                                        if getattr(c.op, "name", "") == ENCODE else None)])


def _points(expr, loops):
    """Values of ``expr`` at every point of the loops it uses, or None (another variable, too many points)."""
    used = []
    tvm_ffi.structural_walk(expr, [(tirx.Var, lambda v: used.append(v))])
    ranges = []
    for v in used:
        lp = next((lp for lp in loops if lp[0].same_as(v)), None)
        if lp is None:
            return None
        lo, ext = const_int(lp[1]), const_int(lp[2])
        if lo is None or ext is None:
            return None
        if not any(r[0].same_as(v) for r in ranges):
            ranges.append((v, lo, ext))
    total = 1
    for _, _, e in ranges:
        total *= e
    if total > MAX_POINTS:
        return None
    vals = []
    for point in itertools.product(*[range(lo, lo + e) for _, lo, e in ranges]):
        x = const_int(_subst(expr, [(v, tirx.const(p, "int32")) for (v, _, _), p in zip(ranges, point)]))
        if x is None:
            return None
        vals.append(x)
    return vals


def _unmodelled_mma(stmts) -> str | None:
    """Why a wgmma MMA among ``stmts`` reads its operands other than as the layout model's K-major shared
    operands, or None: only ``wgmma_*_ss`` with constant imm-trans-a = imm-trans-b = 0 are modelled."""
    calls = []
    for s in stmts:
        tvm_ffi.structural_walk(s, [(tvm.ir.expr.Call, lambda c: calls.append(c) if getattr(
            c.op, "name", "").startswith("tirx.ptx.wgmma_") and any(getattr(a, "value", None) == "mma_async"
                                                                     for a in c.args) else None)])
    for c in calls:
        i = next(i for i, a in enumerate(c.args) if getattr(a, "value", None) == "mma_async")
        if not c.op.name.endswith("_ss") or i < 2 or const_int(c.args[i - 2]) != 0 or const_int(c.args[i - 1]) != 0:
            return "a wgmma reads a transposed (MN-major) or register operand, which the layout model does not cover"
    return None


def candidates(stmts, tiles: list, uses_var) -> tuple[dict, dict]:
    """({tile buffer: Candidate}, {tile buffer: reason}) for the ``tiles`` [(buffer, slot elements, element
    bytes)] read by the consumer statements ``stmts``; ``uses_var(node, buffer)`` says whether a node uses a
    buffer's data."""
    found = []
    for s in stmts:
        _descriptors(s, [], found)
    ok, why = {}, {}
    bad = _unmodelled_mma(stmts)
    if bad:  # the layout model is K-major shared operands (wgmma ..._ss, imm-trans-a = imm-trans-b = 0)
        return ok, {buf: bad for buf, _, _ in tiles}
    for buf, slot_elems, eb in tiles:
        mine = [(c, lp) for c, lp in found if isinstance(c.args[1], tvm.ir.expr.Call)
                and getattr(c.args[1].op, "name", "") == "tirx.tvm_access_ptr" and is_data_of(c.args[1].args[1], buf)]
        if not mine:
            why[buf] = NOT_READ
            continue
        # every use of the tile is one of those pointers
        stripped = [tvm_ffi.structural_map(s, [(tvm.ir.expr.Call, lambda c: tirx.const(0, "int32")
                                                if any(c.same_as(m) for m, _ in mine) else c)], order="pre")
                    for s in stmts]
        if any(uses_var(s, buf) for s in stripped):
            why[buf] = "read other than through wgmma descriptors"
            continue
        geo = {(const_int(c.args[2]), const_int(c.args[3]), const_int(c.args[4]),
                const_int(c.args[1].args[3])) for c, _ in mine}
        if len(geo) != 1 or any(x is None for x in next(iter(geo))):
            why[buf] = "its descriptors differ in geometry"
            continue
        ldo, sdo, layout, extent = next(iter(geo))
        if layout != 0:
            why[buf] = f"already laid out with swizzle mode {layout}"
            continue
        tile = SwizzledTile.of(slot_elems * eb, ldo * CHUNK, sdo * CHUNK)
        if isinstance(tile, str):
            why[buf] = tile
            continue
        k_bytes = extent * eb // tile.rows
        starts = []
        for c, lp in mine:
            vals = _points(c.args[1].args[2], lp)
            if vals is None:
                starts = None
                break
            starts += [v * eb for v in vals]
        if starts is None:
            why[buf] = "a descriptor start is not a function of constant-range loops"
        elif (extent * eb) % tile.rows or not all(tile.start_ok(b, k_bytes) for b in starts):
            why[buf] = "a descriptor starts inside a core matrix or crosses a 128-byte atom row"
        else:
            ok[buf] = Candidate(tile, eb, tuple(sorted(set(starts))))
    return ok, why


def swizzled_start(e0, tile: SwizzledTile, eb: int):
    """The TIR expression of ``sw128_offset`` for a descriptor start of ``e0`` elements (an exact division)."""
    b0 = e0 * eb
    lbo = CHUNK * tile.rows
    c = tirx.floordiv(b0, lbo)
    m = tirx.floordiv(tirx.floormod(b0, lbo), 128)
    out = tirx.floordiv(c, 8) * (128 * tile.rows) + m * ATOM_BYTES + tirx.floormod(c, 8) * CHUNK
    return tvm.sym.Analyzer().simplify(tirx.floordiv(out, eb))


def rewrite(stmt, chosen: dict):
    """``stmt`` with each descriptor of a chosen tile ({buffer: (Candidate, pad elements expr)}) pointing into
    the swizzled tile: start ``sw128_offset`` + pad, LBO 16 B (unused), SBO 1024 B, 128-byte swizzle."""
    def on_call(c):
        if getattr(c.op, "name", "") != ENCODE or not isinstance(c.args[1], tvm.ir.expr.Call):
            return c
        ptr = c.args[1]
        buf = next((b for b in chosen if getattr(ptr.op, "name", "") == "tirx.tvm_access_ptr"
                    and is_data_of(ptr.args[1], b)), None)
        if buf is None:
            return c
        cand, pad = chosen[buf]
        pargs = list(ptr.args)
        pargs[2] = swizzled_start(pargs[2], cand.tile, cand.elem_bytes) + pad
        new_ptr = tvm.ir.expr.Call(ptr.op, pargs, ptr.attrs, ret_ty=ptr.ty)
        args = [c.args[0], new_ptr, tirx.const(1, "int32"), tirx.const(ATOM_BYTES // CHUNK, "int32"),
                tirx.const(SW128, "int32")]
        return tvm.ir.expr.Call(c.op, args, c.attrs, ret_ty=c.ty)

    return tvm_ffi.structural_map(stmt, [(tvm.ir.expr.Call, on_call)], order="post")


def describe(chosen: dict, why: dict) -> tuple[str, ...]:
    """One line per tile read by wgmma descriptors: its layout, or why it keeps the consumer's own."""
    out = [f"{b.name}: 128-byte swizzle ({c.tile.rows} rows x {c.tile.chunks * CHUNK} B, 1024-byte atoms)"
           for b, c in chosen.items()]
    out += [f"{b.name}: no swizzle ({r})" for b, r in why.items() if r != NOT_READ]
    return tuple(out)
