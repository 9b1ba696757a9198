"""What one tile copy can be issued as on Hopper's copy engine (pure Python).

A warp-specialized producer copies a tile from global into a shared ring
slot.  The front-end sees the copy as a loop nest: for every *point* (thread,
loop iterations, vector lane) one element moves from global offset ``g`` to
slot offset ``s``.  This module decides, from those pairs alone, how few
copy-engine instructions reproduce exactly the same pairs:

* ``tensor``: one ``cp.async.bulk.tensor.Nd`` with a tensor map (TMA), when
  the slot holds one TMA box: the pairs, in slot order, factor into at most
  five box dimensions that are dense in shared memory, innermost contiguous in
  global, optionally through one of TMA's swizzle modes (32, 64 or 128 B);
* ``rows``: one ``cp.async.bulk`` per run contiguous in both memories, when
  the runs are 16-byte multiples at 16-byte aligned offsets and their starts
  form a regular grid (padded tiles, TVM's ``mma`` layouts);
* ``None``: neither (the caller keeps per-vector copies).

``factor`` is the one piece of arithmetic both share: it writes the pairs,
sorted by slot offset, as a mixed-radix layout ``[(extent, g stride, s
stride), ...]`` (innermost first).  ``simulate`` replays a plan the way the
hardware executes it (box enumeration, then the swizzle XOR on the byte
address) so a plan is only accepted when its replay gives back the original
pairs; tests use it as the independent oracle.

TMA facts used (CUDA driver API, ``cuTensorMapEncodeTiled``; PTX ISA,
``cp.async.bulk.tensor``): rank 1..5; box extents 1..256; the innermost box
row is a multiple of 16 bytes and, with a swizzle, at most the swizzle span;
global strides (dimensions 1..) are multiples of 16 bytes; the box lands
densely in shared memory (dimension 0 fastest), and a swizzle of span
``32 * 2**k`` bytes XORs address bits [4, 4+k+1) with bits [7, 7+k+1) (CuTe's
``Swizzle<k+1, 4, 3>``), so the slot must start on a ``256 * 2**k``-byte
boundary.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SWIZZLE_SPAN", "CopyPlan", "factor", "plan_copy", "simulate", "swizzle"]

#: CUtensorMapSwizzle value -> swizzle span in bytes (0: none).
SWIZZLE_SPAN = {0: 0, 1: 32, 2: 64, 3: 128}
MAX_BOX = 256
MAX_RANK = 5


def swizzle(byte_addr: int, mode: int) -> int:
    """The shared byte address TMA writes for the dense box address ``byte_addr`` (an involution)."""
    if mode == 0:
        return byte_addr
    bits = mode  # 1, 2, 3 bits of 16-byte chunk index XORed with the row bits above 128 B
    return byte_addr ^ (((byte_addr >> 7) & ((1 << bits) - 1)) << 4)


def swizzle_alignment(mode: int) -> int:
    """Bytes the slot start must be aligned to for ``mode`` (the swizzle pattern's repeat)."""
    return 128 if mode == 0 else 128 << mode


@dataclass(frozen=True)
class CopyPlan:
    """How to issue one tile copy.  ``kind``: ``"tensor"`` or ``"rows"``.

    ``dims``: ``(extent, g stride, s stride)`` innermost first, in elements
    (for ``tensor`` the box, dense in shared memory after the swizzle; for
    ``rows``, dimension 0 is the run and the others the grid of runs).
    ``swizzle``: CUtensorMapSwizzle value (``tensor`` only).
    ``elem_bytes``: bytes per element.  ``origin``: (global, slot) offsets of the first element
    (``tensor``: the box's corner; its slot offset is 0).
    """

    kind: str
    dims: tuple[tuple[int, int, int], ...]
    swizzle: int
    elem_bytes: int
    origin: tuple[int, int] = (0, 0)

    @property
    def instructions(self) -> int:
        """Copy instructions per tile."""
        if self.kind == "tensor":
            return 1
        n = 1
        for e, _, _ in self.dims[1:]:
            n *= e
        return n

    @property
    def bytes(self) -> int:
        n = self.elem_bytes
        for e, _, _ in self.dims:
            n *= e
        return n


def factor(g: list[int], s: list[int]) -> list[tuple[int, int, int]] | None:
    """``[(extent, g stride, s stride), ...]`` (innermost first) such that point ``p`` of the lists, written in
    mixed radix by the extents, is ``g[p] = g[0] + sum(d_i * gs_i)`` and ``s[p] = s[0] + sum(d_i * ss_i)``;
    None when no such layout exists.  Adjacent dimensions that form one are merged."""
    n = len(g)
    if n == 0 or len(s) != n:
        return None
    if n == 1:
        return [(1, 1, 1)]
    dims: list[tuple[int, int, int]] = []
    block = 1
    while block < n:
        gs, ss = g[block] - g[0], s[block] - s[0]
        e = 1
        while block * (e + 1) <= n and all(g[e * block + t] == g[t] + e * gs and s[e * block + t] == s[t] + e * ss
                                           for t in range(block)):
            e += 1
        while (n // block) % e:
            e -= 1  # a mixed radix needs extents that divide what is left
        if e < 2:
            return None
        dims.append((e, gs, ss))
        block *= e
    merged: list[tuple[int, int, int]] = []
    for e, gs, ss in dims:
        if merged and merged[-1][1] * merged[-1][0] == gs and merged[-1][2] * merged[-1][0] == ss:
            pe, pg, ps = merged[-1]
            merged[-1] = (pe * e, pg, ps)
        else:
            merged.append((e, gs, ss))
    if _replay(merged, g[0], s[0]) != list(zip(g, s)):
        return None
    return merged


def _replay(dims, g0: int, s0: int) -> list[tuple[int, int]]:
    out = [(g0, s0)]
    for e, gs, ss in dims:
        out = [(a + j * gs, b + j * ss) for j in range(e) for a, b in out]
    return out


def _split_box(dims, limit: int):
    """Split dimensions wider than ``limit`` (a split keeps the same pairs)."""
    out = []
    for e, gs, ss in dims:
        while e > limit:
            f = next((f for f in range(limit, 1, -1) if e % f == 0), None)
            if f is None:
                return None
            out.append((f, gs, ss))
            gs, ss, e = gs * f, ss * f, e // f
        out.append((e, gs, ss))
    return out


def plan_copy(pairs: list[tuple[int, int]], elem_bytes: int, slot_bytes: int,
              modes: tuple[int, ...] = (0, 3, 2, 1)) -> CopyPlan | None:
    """The cheapest plan that reproduces ``pairs`` ((global, slot) element offsets; global ones relative to
    the copy's base address, slot ones to the slot start), or None.  Every slot element must be written
    once.

    Tried in order: one tensor copy, unswizzled then 128 / 64 / 32-byte swizzle (``modes``); then bulk
    rows.  The caller proves what depends on run-time values: the base address's 16-byte alignment
    (rows) and that the box's coordinates stay inside the tensor (tensor)."""
    if not pairs or elem_bytes <= 0:
        return None
    by_s = sorted(pairs, key=lambda p: p[1])
    if len({p[1] for p in by_s}) != len(by_s):
        return None
    n = len(by_s)
    want = sorted(pairs)
    for mode in modes:
        span = SWIZZLE_SPAN[mode]
        if mode and slot_bytes % swizzle_alignment(mode):
            continue
        dense = sorted((swizzle(s * elem_bytes, mode), g) for g, s in by_s)
        if [a for a, _ in dense] != [i * elem_bytes for i in range(n)]:
            continue  # the slot is not one dense box image (padding, or another swizzle)
        dims = factor([g for _, g in dense], list(range(n)))
        if dims is None or dims[0][1] != 1:
            continue
        dims = _split_box(dims, MAX_BOX)
        if dims is None or len(dims) > MAX_RANK:
            continue
        row = dims[0][0] * elem_bytes
        if row % 16 or (span and row != span):
            continue
        if any(gs <= 0 or (gs * elem_bytes) % 16 for _, gs, _ in dims[1:]):
            continue
        plan = CopyPlan("tensor", tuple(dims), mode, elem_bytes, (dense[0][1], 0))
        if sorted(simulate(plan)) == want:
            return plan
    dims = factor([p[0] for p in by_s], [p[1] for p in by_s])
    if dims is None:
        return None
    e0, g0, s0 = dims[0]
    origin = by_s[0]
    if g0 != 1 or s0 != 1 or (e0 * elem_bytes) % 16 or any(o * elem_bytes % 16 for o in origin):
        return None
    if any((gs * elem_bytes) % 16 or (ss * elem_bytes) % 16 for _, gs, ss in dims[1:]):
        return None
    plan = CopyPlan("rows", tuple(dims), 0, elem_bytes, origin)
    return plan if sorted(simulate(plan)) == want else None


def simulate(plan: CopyPlan) -> list[tuple[int, int]]:
    """The (global, slot) element pairs the hardware moves for ``plan``: ``tensor``: enumerate the box from
    ``origin`` (dimension 0 fastest), write it densely from the slot start and apply the swizzle to each
    byte address; ``rows``: each run copies ``extent_0`` contiguous elements."""
    eb = plan.elem_bytes
    if plan.kind == "tensor":
        out = []
        ext = [e for e, _, _ in plan.dims]
        gst = [gs for _, gs, _ in plan.dims]
        total = 1
        for e in ext:
            total *= e
        for lin in range(total):
            rem, goff = lin, plan.origin[0]
            for e, gs in zip(ext, gst):
                goff += (rem % e) * gs
                rem //= e
            out.append((goff, swizzle(lin * eb, plan.swizzle) // eb))
        return out
    return _replay(plan.dims, *plan.origin)
