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
or touched by another loop), and every view of those (``views.py`` resolves
an access through a match_buffer or decl_buffer to the buffer it views before
the rules here run: the names and regions below are the owners').  For such a
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
left out.  A statement never conflicts with itself: its instances keep the
iteration order whatever the stages.

Distances from the index arithmetic
-----------------------------------
Distances count iterations of the pipeline, not values of the loop
variable: TVM's CanonicalizeLoop runs ``for i in range(m, m + e, s)`` as
``k = 0 .. ceildiv(e, s) - 1`` with ``i = m + s * k`` (``Iterations``), so
``SG[i + 4]`` read and ``SG[i]`` written with ``s = 2`` conflict 2
iterations apart, not 4.  Every index is rewritten in ``k`` first.  Regions
are TVM's statement-level regions (boxes, one range per dimension); two
boxes overlap iff every dimension does, so one dimension that never
overlaps proves two accesses disjoint.  In a dimension whose starts are
``c * k + b_x`` and ``c * k + b_y`` (one constant stride ``c``; the offsets
``b`` may be symbolic, e.g. an outer loop's variable, as long as TVM bounds
their difference ``g``) and whose extents TVM bounds (``e_x``, ``e_y``), the
boxes of iterations ``k`` and ``k + d`` overlap iff ``-e_y < c * d + g <
e_x``: an interval of ``d``, so the smallest distance is exact for the boxes
(and a lower bound for the accesses inside them: on the safe side).
Strides that differ or are not constant are bounded over every ``k`` and
``d`` at once: disjoint when the bound proves it, else assumed to overlap at
every distance.  An assumed overlap is never a guess of a larger distance:
the hazard takes the smallest distance of the range (1, or 0 inside an
iteration), the accesses are kept in order from there on, and its
``reason`` (shown by ``explain()``) says what could not be proven.  Across
iterations regions are compared only for buffers TVM does not version: a
buffer it owns is compacted to one iteration's footprint
(``CompactBufferAllocation``), so ``T[i, j]`` of two iterations is the same
storage (found by the differential tests: an outer ``T[i, j]`` moved into
the loop, with a trailing write).

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
from .ir import const_int, s_tir, substitute, tvm
from .loops import loop_body_allocations
from .views import declared_buffers


@dataclass(frozen=True)
class Hazard:
    """Statement ``dst`` must stay after ``src`` of ``distance`` iterations earlier, because of ``buffer``."""

    src: int
    dst: int
    distance: int
    buffer: str
    kind: str  # "raw", "war" or "waw"
    #: '' when the overlap at ``distance`` is proven from the index arithmetic; else what was assumed
    #: (the accesses are then kept in order from that distance on)
    reason: str = ""

    def describe(self, names) -> str:
        """One line for messages: ``src -> dst (kind on 'buffer', distance d[; reason])``."""
        why = f"; {self.reason}" if self.reason else ""
        return f"{names[self.src]} -> {names[self.dst]} ({self.kind} on '{self.buffer}', distance {self.distance}{why})"


# -- which buffers TVM versions ------------------------------------------------
def _all_buffer_names(func) -> list[str]:
    """The names of the parameters and of every buffer the function allocates, matches or declares."""
    return [getattr(p, "name", "") for p in func.params] + [b.name for b in declared_buffers(func.body)]


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


# -- the iterations and region overlap ----------------------------------------------
#: Bounds at or beyond this magnitude are TVM's "unbounded" (its +-inf sentinels).
_UNBOUNDED = 2 ** 62
#: The trip count the analysis assumes for a loop whose extent is symbolic: any int32 count.
SYMBOLIC_TRIP = 2 ** 31 - 1


class Iterations:
    """The iterations of the pipelined loop, numbered as InjectSoftwarePipeline numbers them.

    TVM's CanonicalizeLoop (the first pass before InjectSoftwarePipeline)
    rewrites ``for i in range(min, min + extent, step)`` into ``for i' in
    range(ceildiv(extent, step))`` with ``i = min + step * i'`` (it keeps the
    loop variable), so the pipeline shifts statements by whole iterations
    ``k`` of ``i = min + step * k``, ``k = 0 .. trip - 1``.  ``canonical``
    writes an index of the loop as written in terms of ``k`` (the loop
    variable then stands for ``k``); ``bounds`` are constant bounds of an
    expression over the iterations.

    ``symbolic``: the loop's extent when it is not a constant (a sequence
    length); ``trip`` is then ``SYMBOLIC_TRIP``, the most iterations an int32
    loop runs, so that every distance a real trip count allows is considered.
    """

    def __init__(self, var, start, step: int, trip: int, symbolic=None):
        self.var, self.min, self.step, self.trip = var, start, int(step), int(trip)
        self.symbolic = symbolic
        self._an = tvm.sym.Analyzer()
        self._an.bind(var, tvm.ir.Range.from_min_extent(0, max(1, self.trip)))

    def canonical(self, expr):
        """``expr`` (in the loop variable as written) in terms of the iteration number ``k``."""
        if self.step == 1 and const_int(self.min) == 0:
            return expr
        return self._an.simplify(substitute(expr, [(self.var, self.min + self.step * self.var)]))

    def bounds(self, expr) -> tuple[int, int] | None:
        """(min, max) of ``expr`` (in ``k``) over the iterations, or None when TVM cannot bound it."""
        b = self._an.const_int_bound(self._an.simplify(expr))
        lo, hi = int(b.min_value), int(b.max_value)
        return None if abs(lo) >= _UNBOUNDED or abs(hi) >= _UNBOUNDED else (lo, hi)

    def __repr__(self) -> str:
        trip = self.trip if self.symbolic is None else f"ceildiv({self.symbolic}, {self.step})"
        return f"Iterations({self.var.name} = {self.min} + {self.step} * k, k < {trip})"


def _affine(expr, var):
    """(coefficient, offset) of ``expr`` = coefficient * var + offset, the coefficient a constant; or None."""
    try:
        coef = tvm.sym.detect_linear_equation(expr, [var])
    except Exception:  # noqa: BLE001
        return None
    if len(coef) != 2:
        return None
    c = const_int(coef[0])
    return None if c is None else (c, coef[1])


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def _dim_distances(ax, ay, it: Iterations, dlo: int, dhi: int, buf: str):
    """The distances d in [dlo, dhi] at which one dimension of region x (iteration k) and of region y
    (iteration k + d) may overlap: ``((lo, hi) or None when never, reason)``; ``reason`` is non-empty
    when the dimension could not be decided exactly and every distance of the range is assumed."""
    name = it.var.name
    ext = [it.bounds(it.canonical(e)) for e in (ax.extent, ay.extent)]
    if ext[0] is None or ext[1] is None:
        return (dlo, dhi), f"the extent of an access to '{buf}' has no bound"
    ex, ey = ext[0][1], ext[1][1]
    sx, sy = it.canonical(ax.min), it.canonical(ay.min)
    fx, fy = _affine(sx, it.var), _affine(sy, it.var)
    if fx is not None and fy is not None and fx[0] == fy[0]:
        # start_y(k + d) - start_x(k) = c * d + g; the boxes overlap iff -ey < c * d + g < ex
        c, g = fx[0], it.bounds(fy[1] - fx[1])
        if g is None:
            return (dlo, dhi), f"'{buf}'[{ay.min}] vs '{buf}'[{ax.min}]: offset {fy[1] - fx[1]} has no bound"
        low, high = 1 - ey - g[1], ex - 1 - g[0]  # overlap iff low <= c * d <= high
        if c == 0:
            span = (dlo, dhi) if low <= 0 <= high else None
        elif c > 0:
            span = (max(dlo, _ceil_div(low, c)), min(dhi, high // c))
        else:
            span = (max(dlo, _ceil_div(high, c)), min(dhi, low // c))
        if span is not None and span[0] > span[1]:
            span = None
        why = "" if g[0] == g[1] else (f"'{buf}'[{ay.min}] vs '{buf}'[{ax.min}]: offset {fy[1] - fx[1]} is not "
                                       f"constant (bounded to [{g[0]}, {g[1]}])")
        return span, why
    # different or non-constant strides: bound the gap over every iteration k and distance d of the range
    d = tvm.tirx.Var("d", it.var.ty.dtype)
    an = tvm.sym.Analyzer()
    an.bind(it.var, tvm.ir.Range.from_min_extent(0, max(1, it.trip)))
    an.bind(d, tvm.ir.Range.from_min_extent(dlo, dhi - dlo + 1))
    gb = an.const_int_bound(an.simplify(substitute(sy, [(it.var, it.var + d)]) - sx))
    if (abs(int(gb.min_value)) < _UNBOUNDED and int(gb.min_value) >= ex) or \
            (abs(int(gb.max_value)) < _UNBOUNDED and int(gb.max_value) <= -ey):
        return None, ""
    return (dlo, dhi), f"'{buf}'[{ay.min}] vs '{buf}'[{ax.min}]: not one constant stride in '{name}'"


def _region_distance(rx, ry, it: Iterations, dlo: int, dhi: int, buf: str) -> tuple[int | None, str]:
    """Smallest d in [dlo, dhi] at which region ``rx`` (iteration k) may overlap ``ry`` (iteration k + d).

    Regions are boxes: they overlap iff every dimension overlaps, so one
    dimension that never overlaps proves them disjoint.  Returns (d or None,
    the reasons of the dimensions that were assumed to overlap).
    """
    if len(rx.region) != len(ry.region):
        return dlo, f"'{buf}' accessed with {len(rx.region)} and {len(ry.region)} indices"
    lo, hi, why = dlo, dhi, []
    for ax, ay in zip(rx.region, ry.region):
        span, reason = _dim_distances(ax, ay, it, dlo, dhi, buf)
        if span is None:
            return None, ""
        lo, hi = max(lo, span[0]), min(hi, span[1])
        if lo > hi:
            return None, ""
        if reason:
            why.append(reason)
    return lo, "; ".join(why)


def _first_overlap(regs_x, regs_y, it: Iterations, dlo: int, dhi: int, buf: str) -> tuple[int | None, str]:
    """Smallest d in [dlo, dhi] at which any region of x (iteration k) may overlap any of y (iteration k + d).

    ``(d or None, reason)``: ``reason`` is empty when d is proven from the
    index arithmetic, else says what was assumed (ties go to a proven pair).
    """
    if dlo > dhi:
        return None, ""
    if not regs_x or not regs_y:  # an access we could not see a region for: assume the worst
        if buf.startswith("sync:"):
            return dlo, "an explicit barrier orders every shared and global access around it"
        if buf.startswith("let:"):
            return dlo, f"'{buf[4:]}' is one variable, bound anew in each iteration"
        return dlo, f"the regions of '{buf}' are not known (a statement TVM's passes rewrite)"
    best: tuple[int | None, str] = (None, "")
    for rx in regs_x:
        for ry in regs_y:
            d, why = _region_distance(rx, ry, it, dlo, dhi, buf)
            if d is not None and (best[0] is None or (d, bool(why)) < (best[0], bool(best[1]))):
                best = (d, why)
    return best


def _overlap(regs_x, regs_y, it: Iterations, buf: str) -> bool:
    """May a region of x overlap a region of y in the same iteration?"""
    return _first_overlap(regs_x, regs_y, it, 0, 0, buf)[0] is not None


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


def hazards(stmts, regions, it: Iterations, versioned) -> list[Hazard]:
    """The dependences on buffers TVM does not version (see the module docstring).

    ``stmts``: the StmtInfo of the pipeline statements (``reads`` / ``writes``
    buffer names); ``regions[i]``: (reads, writes) name -> [BufferRegion] of
    statement i (the pieces of a nested pipeline share their loop's regions);
    ``it``: the loop's iterations (``Iterations``: its min, step and trip
    count); ``versioned``: names TVM multi-versions (``versioned_buffers``).
    """
    out: list[Hazard] = []
    names = sorted({b for s in stmts for b in (*s.reads, *s.writes)})
    for buf in names:
        touch = [s.index for s in stmts if buf in s.reads or buf in s.writes]
        carried = buf not in versioned or not _regular(buf, touch, stmts, regions, it)
        for x in touch:
            for y in touch:
                if x == y:
                    continue
                sx, sy = stmts[x], stmts[y]
                wx, wy = buf in sx.writes, buf in sy.writes
                if not (wx or wy):
                    continue
                kind = "raw" if wx and buf in sy.reads else ("war" if wy and buf in sx.reads else "waw")
                pairs = _pairs(wx, wy, regions[x], regions[y], buf)
                if x < y:
                    d, why = _pairs_first(pairs, it, 0, 0, buf)
                    if d is not None:
                        out.append(Hazard(x, y, 0, buf, kind, _assumed(why, "may overlap in one iteration")))
                        continue
                if not carried:
                    continue
                if buf in versioned:
                    # TVM compacts a buffer it owns to one iteration's footprint: indices that differ
                    # between iterations share storage, so regions prove nothing across iterations
                    d, why = (1 if it.trip > 1 else None), (f"'{buf}' is read before it is written or written "
                                                             "without a later read in the iteration: TVM's "
                                                             "versions do not separate iterations")
                else:
                    d, why = _pairs_first(pairs, it, 1, it.trip - 1, buf)
                    why = _assumed(why, "distance not proven")
                if d is not None:
                    out.append(Hazard(x, y, d, buf, kind, why))
    return out


def _assumed(why: str, what: str) -> str:
    """The reason text of a hazard whose overlap was assumed ('' when it was proven)."""
    return f"{what}, order kept: {why}" if why else ""


def _regular(buf, touch, stmts, regions, it) -> bool:
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
                buf in stmts[y].writes and _overlap(regions[y][1].get(buf, []), rx_r, it, buf)
                for y in touch if y < x):
            return False
        if buf in sx.writes:
            rx_w = regions[x][1].get(buf, [])
            later = [y for y in touch if y > x and buf in stmts[y].reads]
            if not any(_overlap(rx_w, regions[y][0].get(buf, []), it, buf) for y in later):
                return False
    return True


def _pairs(wx, wy, reg_x, reg_y, buf):
    """Region lists that conflict: x's writes vs everything of y, everything of x vs y's writes."""
    rx_r, rx_w = reg_x[0].get(buf, []), reg_x[1].get(buf, [])
    ry_r, ry_w = reg_y[0].get(buf, []), reg_y[1].get(buf, [])
    pairs = []
    if wx:
        pairs.append((rx_w, ry_r + ry_w))
    if wy:
        pairs.append((rx_r + rx_w, ry_w))
    return pairs


def _pairs_first(pairs, it, dlo, dhi, buf) -> tuple[int | None, str]:
    """The smallest distance in [dlo, dhi] at which a pair of region lists may overlap, with its reason."""
    found = [_first_overlap(a, b, it, dlo, dhi, buf) for a, b in pairs]
    found = [(d, why) for d, why in found if d is not None]
    return min(found, key=lambda f: (f[0], bool(f[1]))) if found else (None, "")


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
