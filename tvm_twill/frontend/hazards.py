"""Hazards on buffers that InjectSoftwarePipeline does not multi-version (TVM 0.27).

Why
---
``InjectSoftwarePipeline`` shifts statements across iterations: with stages
``s_a`` and ``s_b``, statement ``b`` of iteration ``i`` runs in the same
kernel iteration as statement ``a`` of iteration ``i + s_b - s_a``.  It keeps
read-after-write order for the statements of one iteration, and it gives
``use - def + 1`` versions to the buffers it *owns*: those allocated in the
pipelined loop's body block (and in the flattened child blocks of a nested
pipeline), after ``PlanAndUpdateBufferAllocationLocation`` has moved every
allocation to the lowest common ancestor of its uses.  Every other buffer is
one storage shared by all iterations in flight: function parameters, buffers
allocated outside the loop and still used outside it (read after the loop,
or touched by another loop), ``match_buffer`` aliases of those.  For such a
buffer a reordering of two accesses, one of them a write, changes what the
program computes (write-after-read, write-after-write, and read-after-write
across iterations), and TVM neither checks nor repairs it.

The rule (sound for the pipeline TVM emits)
------------------------------------------
For every buffer ``X`` and every ordered pair of distinct statements ``x``,
``y`` that touch ``X``, at least one writing it:

* same iteration (``x`` before ``y`` in the body, regions may overlap in one
  iteration): a dependence ``(x, y, 0)``: ``x`` keeps a smaller (stage, order).
  This holds for versioned buffers too: the statements of one iteration share
  one version, so a write-after-write or write-after-read inside the
  iteration must keep its order (found by the differential tests: two writes
  of a versioned tile swapped by the order annotation);
* across iterations, for buffers TVM does not version, and for versioned
  buffers used irregularly (a read before the iteration's first write, or a
  write that no later read of the iteration consumes: ``use - def + 1``
  versions then do not separate the iterations) (``x`` of iteration ``j``, ``y`` of iteration ``j + d``,
  ``d >= 1``, regions may overlap): a dependence ``(x, y, d_min)`` with
  ``d_min`` the smallest such ``d``: instance ``j`` of ``x`` keeps running
  before instance ``j + d`` of ``y`` for every ``d >= d_min`` once it does for
  ``d_min`` (``legality_violations`` checks exactly this).

A pair at distance 0 implies its own loop-carried constraint, so that one is
left out.  Regions are TVM's statement-level regions; two regions are proven
disjoint only when, in some dimension, both starts are affine in the loop
variable with constant coefficients and offsets and constant extents
(otherwise they are assumed to overlap: a superfluous edge costs II, a
missing one costs correctness).  Across iterations regions are compared
only for buffers TVM does not version: a buffer it owns is compacted to one
iteration's footprint (``CompactBufferAllocation``), so ``T[i, j]`` of two
iterations is the same storage (found by the differential tests: an outer
``T[i, j]`` moved into the loop, with a trailing write).  A statement never conflicts with itself:
its instances keep the iteration order whatever the stages.

The kinds are reported (``raw`` / ``war`` / ``waw``) for messages only;
every one of these dependences is checked the same way.  In the graph a
write-after-read or write-after-write hazard is an edge of kind ``order``
(no value flows: an async copy must not be its source, see
``transforms.annotate.select_async_stages``), the others are ``data`` edges.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..model import Edge
from .ir import children, const_int, s_tir, tvm
from .loops import loop_body_allocations

#: How many loop-carried distances are tested one by one before the rest is tested as one range.
_EXACT_DISTANCES = 4


@dataclass(frozen=True)
class Hazard:
    """Statement ``dst`` must stay after ``src`` of ``distance`` iterations earlier, because of ``buffer``."""

    src: int
    dst: int
    distance: int
    buffer: str
    kind: str  # "raw", "war" or "waw"


# -- which buffers TVM versions ------------------------------------------------
def _all_buffer_names(func) -> list[str]:
    names = [getattr(p, "name", "") for p in func.params]

    def visit(stmt):
        if isinstance(stmt, s_tir.SBlock):
            names.extend(b.name for b in stmt.alloc_buffers)
            names.extend(m.buffer.name for m in stmt.match_buffers)
        for c in children(stmt):
            visit(c)

    visit(func.body)
    return names


def versioned_buffers(func, loop_node) -> frozenset[str]:
    """Names of the buffers InjectSoftwarePipeline will multi-version in ``loop_node``.

    ``func`` and ``loop_node`` are the function and the loop after TVM's own
    passes that precede InjectSoftwarePipeline (``lowering.lower_to_pipeline``):
    the allocations of the loop's body block (and of the child blocks TVM
    flattens) are what the pass versions.  A name that is not unique in the
    function counts as not versioned (the safe side).
    """
    allocs = loop_body_allocations(loop_node)
    names = [b.name for b in allocs]
    seen = _all_buffer_names(func)
    return frozenset(n for n in names if seen.count(n) <= 1)


# -- region overlap -----------------------------------------------------------------
def _affine(expr, var):
    """(coefficient, offset) of ``expr`` = coefficient * var + offset, both constants; or None."""
    try:
        coef = tvm.sym.detect_linear_equation(expr, [var])
    except Exception:  # noqa: BLE001
        return None
    if len(coef) != 2:
        return None
    c, b = const_int(coef[0]), const_int(coef[1])
    return None if c is None or b is None else (c, b)


def _disjoint(rx, ry, var, dlo: int, dhi: int) -> bool:
    """Are region ``rx`` (iteration j) and ``ry`` (iteration j + d) disjoint for every d in [dlo, dhi]?"""
    if len(rx.region) != len(ry.region):
        return False
    for ax, ay in zip(rx.region, ry.region):
        fx, fy = _affine(ax.min, var), _affine(ay.min, var)
        ex, ey = const_int(ax.extent), const_int(ay.extent)
        if fx is None or fy is None or ex is None or ey is None or fx[0] != fy[0]:
            continue
        c, bx, by = fx[0], fx[1], fy[1]
        # start_y - start_x = c * d + (by - bx), linear in d: check both ends of [dlo, dhi]
        gaps = [c * d + by - bx for d in (dlo, dhi)]
        if all(g >= ex for g in gaps) or all(-g >= ey for g in gaps):
            return True
    return False


def _overlap(regs_x, regs_y, var, dlo, dhi) -> bool:
    """May any region of x (iteration j) overlap any region of y (iteration j + d), d in [dlo, dhi]?"""
    if not regs_x or not regs_y:
        return True  # an access we could not see a region for: assume the worst
    return any(not _disjoint(rx, ry, var, dlo, dhi) for rx in regs_x for ry in regs_y)


def _min_distance(regs_x, regs_y, var, trip: int) -> int | None:
    """Smallest d >= 1 (below ``trip``) at which x of iteration j may touch what y of j + d touches."""
    last = trip - 1
    for d in range(1, min(_EXACT_DISTANCES, last) + 1):
        if _overlap(regs_x, regs_y, var, d, d):
            return d
    if last > _EXACT_DISTANCES and _overlap(regs_x, regs_y, var, _EXACT_DISTANCES + 1, last):
        return _EXACT_DISTANCES + 1
    return None


# -- the hazards --------------------------------------------------------------------
def statement_regions(stmt, buffer_map) -> tuple[dict, dict]:
    """(reads, writes): buffer name -> [BufferRegion] of a pipeline statement, as TVM's MakeSBlock sees it."""
    blk = s_tir.SBlock([], [], [], "", stmt)
    reads, writes = s_tir.analysis.get_sblock_read_write_region(blk, buffer_map)
    r: dict = {}
    w: dict = {}
    for reg in reads:
        r.setdefault(reg.source.name, []).append(reg)
    for reg in writes:
        w.setdefault(reg.source.name, []).append(reg)
    return r, w


def hazards(stmts, regions, loop_var, trip: int, versioned) -> list[Hazard]:
    """The dependences on buffers TVM does not version (see the module docstring).

    ``stmts``: the StmtInfo of the pipeline statements (``reads`` / ``writes``
    buffer names); ``regions[i]``: (reads, writes) name -> [BufferRegion] of
    statement i (the pieces of a nested pipeline share their loop's regions);
    ``versioned``: names TVM multi-versions (``versioned_buffers``).
    """
    out: list[Hazard] = []
    names = sorted({b for s in stmts for b in (*s.reads, *s.writes)})
    for buf in names:
        touch = [s.index for s in stmts if buf in s.reads or buf in s.writes]
        carried = buf not in versioned or not _regular(buf, touch, stmts, regions, loop_var)
        for x in touch:
            for y in touch:
                if x == y:
                    continue
                sx, sy = stmts[x], stmts[y]
                wx, wy = buf in sx.writes, buf in sy.writes
                if not (wx or wy):
                    continue
                kind = "raw" if wx and buf in sy.reads else ("war" if wy and buf in sx.reads else "waw")
                rx_r, rx_w = regions[x][0].get(buf, []), regions[x][1].get(buf, [])
                ry_r, ry_w = regions[y][0].get(buf, []), regions[y][1].get(buf, [])
                if x < y and _pairs_overlap(wx, wy, rx_r, rx_w, ry_r, ry_w, loop_var, 0, 0):
                    out.append(Hazard(x, y, 0, buf, kind))
                    continue
                if not carried:
                    continue
                if buf in versioned:
                    # TVM compacts a buffer it owns to one iteration's footprint: indices that differ
                    # between iterations share storage, so regions prove nothing across iterations
                    d = 1 if trip > 1 else None
                else:
                    d = _pairs_min_distance(wx, wy, rx_r, rx_w, ry_r, ry_w, loop_var, trip)
                if d is not None:
                    out.append(Hazard(x, y, d, buf, kind))
    return out


def _regular(buf, touch, stmts, regions, loop_var) -> bool:
    """Is ``buf`` used so that TVM's ``use - def + 1`` versions separate the iterations?

    True when no statement reads ``buf`` before a write of the same iteration
    (no exposed read: that would read another iteration's version) and every
    writer is followed by a reader of what it writes (so, with the
    same-iteration dependences, no writer runs in a later stage than the last
    reader, which is what the version count assumes).
    """
    for x in touch:
        sx = stmts[x]
        rx_r = regions[x][0].get(buf, [])
        if buf in sx.exposed and not any(  # a read that no earlier write of the iteration covers
                buf in stmts[y].writes and _overlap(regions[y][1].get(buf, []), rx_r, loop_var, 0, 0)
                for y in touch if y < x):
            return False
        if buf in sx.writes:
            rx_w = regions[x][1].get(buf, [])
            later = [y for y in touch if y > x and buf in stmts[y].reads]
            if not any(_overlap(rx_w, regions[y][0].get(buf, []), loop_var, 0, 0) for y in later):
                return False
    return True


def _pairs(wx, wy, rx_r, rx_w, ry_r, ry_w):
    """Region lists that conflict: x's writes vs everything of y, everything of x vs y's writes."""
    pairs = []
    if wx:
        pairs.append((rx_w, ry_r + ry_w))
    if wy:
        pairs.append((rx_r + rx_w, ry_w))
    return pairs


def _pairs_overlap(wx, wy, rx_r, rx_w, ry_r, ry_w, var, dlo, dhi) -> bool:
    return any(_overlap(a, b, var, dlo, dhi) for a, b in _pairs(wx, wy, rx_r, rx_w, ry_r, ry_w))


def _pairs_min_distance(wx, wy, rx_r, rx_w, ry_r, ry_w, var, trip) -> int | None:
    ds = [_min_distance(a, b, var, trip) for a, b in _pairs(wx, wy, rx_r, rx_w, ry_r, ry_w)]
    ds = [d for d in ds if d is not None]
    return min(ds) if ds else None


def merge_hazards(graph, found, stmts, quantum):
    """``graph`` with the hazards ``found`` added as edges (skipping what an existing edge already implies).

    Edge delays: a read-after-write hazard waits for the writer's latency, as
    the front-end's own RAW edges do (a ``data`` edge); a write-after-read or
    write-after-write waits for the earlier statement to finish (its cycles,
    at least 1 unit): a writer must not overwrite what is still being read
    (an ``order`` edge).
    """
    edges = list(graph.edges)
    have = {(graph.index(e.src), graph.index(e.dst)): e.distance for e in edges}
    for h in found:
        if h.src == h.dst or have.get((h.src, h.dst), math.inf) <= h.distance:
            continue
        src, dst = stmts[h.src], stmts[h.dst]
        if h.kind == "raw":
            delay, kind = max(1, math.ceil(src.latency / quantum - 1e-9)), "data"
        else:
            delay, kind = max(1, graph.ops[h.src].cycles), "order"
        if (h.src, h.dst) in have:  # a weaker dependence on the same pair: the stronger one replaces it
            old = [e for e in edges if e.src == src.name and e.dst == dst.name]
            edges = [e for e in edges if e not in old]
            delay = max([delay] + [e.delay for e in old])
            kind = "data" if kind == "data" or any(e.kind == "data" for e in old) else "order"
        have[h.src, h.dst] = h.distance
        edges.append(Edge(src.name, dst.name, delay=delay, distance=h.distance, kind=kind))
    return graph.replace(edges=tuple(edges))
