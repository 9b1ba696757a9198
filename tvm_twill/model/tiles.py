"""Tile schedulers of a GEMM-class kernel, pure Python: who computes which output tile, in which order.

The output of an ``M x N x K`` GEMM is cut into ``tile_m x tile_n`` tiles (``tiles_m x tiles_n`` of them,
the last row and column ragged) and each tile's K loop into ``k_iters = ceil(K / tile_k)`` k-iterations.
A *work unit* is ``(tile, k_begin, k_end)``: one CTA runs k-iterations ``k_begin .. k_end - 1`` of one tile.
The kinds (docs/tiles.md):

* ``data_parallel``: one CTA per tile, ``tiles`` CTAs; the hardware runs them in waves of ``resident``
  (``sm_count x ctas_per_sm``).
* ``persistent``: ``min(tiles, resident)`` CTAs; CTA ``c`` runs tiles ``c, c + grid, c + 2 grid, ...``.
* ``stream_k``: CUTLASS's data-parallel + Stream-K hybrid.  With ``full = tiles // resident`` full waves,
  the last ``tiles - max(full - 1, 0) x resident`` tiles (at most two waves' worth: the partial wave and
  the full wave before it) are Stream-K tiles: their ``(tile, k)`` iterations, in linear order
  ``tile x k_iters + k``, are split evenly over ``sk_ctas <= resident`` CTAs (the first ``rem`` get one
  more); the data-parallel tiles follow, round robin over the grid.  Here the Stream-K tiles are the
  *first* linear tile ids (CUTLASS's order) and the data-parallel tiles the rest.

A tile split over several CTAs is *finalized* by the CTA that runs its last k-iteration (the highest CTA
id of its contributors); every other contributor writes its fp32 partial tile to the workspace slot of its
own CTA id and raises that slot's flag; the finalizer waits for each contributor's flag, adds the partial
and runs the epilogue.  Each CTA writes at most one partial (the start of the last tile of its range), so

    workspace_bytes = sk_ctas x tile_m x tile_n x 4        flags = sk_ctas (one int32 each)

Each CTA runs its Stream-K units from the end of its range to the start: the partial first (nothing to wait
for), its finalizing unit last, so a wait never waits for a CTA that is itself waiting (waits are one deep).
Waits only point to lower CTA ids, and every Stream-K CTA is resident at once (``sk_ctas <= resident``),
so spinning on a flag cannot deadlock.

The raster order maps the linear tile id to ``(tile_m, tile_n)``: CUTLASS's swizzle / Triton's grouped
order, panels of ``group`` tile rows (``along="m"``) or columns (``along="n"``) walked column by column
(row by row), the last panel ragged.  The wave model and the ``auto`` rule are at the end of the module.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import InputError

__all__ = ["KINDS", "MIN_SK_ITERS", "Assignment", "Problem", "Unit", "WaveModel", "assign", "auto_rule",
           "cutlass_sm90_sk_tiles", "raster", "simulate", "wave_model"]

#: The kinds a tile scheduler can be.
KINDS = ("data_parallel", "persistent", "stream_k")
#: CUTLASS sm90's ``min_iters_per_sk_unit_``: fewer k-iterations per tile than this, and Stream-K is not used.
MIN_SK_ITERS = 8
#: ``auto`` picks Stream-K only when the wave model predicts at least this much more efficiency (absolute).
SK_MARGIN = 0.05
#: Bytes of one fp32 accumulator element in the workspace.
PARTIAL_BYTES = 4


def _pos(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise InputError(f"tile scheduler: {name} must be a positive integer, got {v!r}")
    return v


@dataclass(frozen=True)
class Problem:
    """An ``m x n x k`` GEMM cut into ``tile_m x tile_n`` output tiles, ``tile_k`` per k-iteration, operands of
    ``elem_bytes`` bytes."""

    m: int
    n: int
    k: int
    tile_m: int = 128
    tile_n: int = 128
    tile_k: int = 64
    elem_bytes: int = 2

    def __post_init__(self):
        for name in ("m", "n", "k", "tile_m", "tile_n", "tile_k", "elem_bytes"):
            _pos(name, getattr(self, name))

    @property
    def tiles_m(self) -> int:
        return -(-self.m // self.tile_m)

    @property
    def tiles_n(self) -> int:
        return -(-self.n // self.tile_n)

    @property
    def tiles(self) -> int:
        return self.tiles_m * self.tiles_n

    @property
    def k_iters(self) -> int:
        return -(-self.k // self.tile_k)

    @property
    def partial_bytes(self) -> int:
        """One fp32 partial tile."""
        return self.tile_m * self.tile_n * PARTIAL_BYTES

    @property
    def iteration_bytes(self) -> int:
        """Operand bytes one k-iteration of one tile loads (an A and a B tile)."""
        return (self.tile_m + self.tile_n) * self.tile_k * self.elem_bytes


def raster(tile: int, tiles_m: int, tiles_n: int, group: int = 8, along: str = "m") -> tuple[int, int]:
    """Linear tile id -> ``(tile_m, tile_n)`` in the grouped order: panels of ``group`` rows (``along="m"``;
    ``"n"``: columns), each walked across its rows first; the last panel has ``tiles_m % group`` rows when
    ``group`` does not divide ``tiles_m``.  ``group=1`` is the plain row-major order."""
    if along not in ("m", "n"):
        raise InputError(f"tile raster: along must be 'm' or 'n', got {along!r}")
    _pos("group", group)
    if along == "n":
        c, r = raster(tile, tiles_n, tiles_m, group, "m")
        return r, c
    if not 0 <= tile < tiles_m * tiles_n:
        raise InputError(f"tile raster: tile id {tile} outside 0..{tiles_m * tiles_n - 1}")
    per_panel = group * tiles_n
    first = (tile // per_panel) * group
    rows = min(tiles_m - first, group)  # the ragged last panel
    local = tile % per_panel
    return first + local % rows, local // rows


@dataclass(frozen=True)
class Unit:
    """K-iterations ``k_begin .. k_end - 1`` of linear tile ``tile``."""

    tile: int
    k_begin: int
    k_end: int


@dataclass(frozen=True)
class Assignment:
    """What each CTA runs, in order (``units[c]``), and the Stream-K fixup: ``finalizer[tile]`` the CTA that
    writes a split tile's output, ``waits`` the ``(waiter, waited, tile)`` triples, ``slots[cta]`` the tile whose
    partial CTA ``cta`` writes to workspace slot ``cta``."""

    kind: str
    grid: int
    resident: int
    units: tuple
    sk_tiles: int = 0
    sk_ctas: int = 0
    finalizer: dict = field(default_factory=dict)
    waits: tuple = ()
    slots: dict = field(default_factory=dict)
    workspace_bytes: int = 0
    flags: int = 0


def _check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise InputError(f"tile scheduler: unknown kind {kind!r}: use one of {', '.join(KINDS)} or 'auto'")
    return kind


def assign(p: Problem, sm_count: int, ctas_per_sm: int, kind: str) -> Assignment:
    """The assignment of ``p``'s tiles to CTAs for ``kind`` on ``sm_count`` SMs holding ``ctas_per_sm`` CTAs
    each (module doc)."""
    resident = _pos("sm_count", sm_count) * _pos("ctas_per_sm", ctas_per_sm)
    k = p.k_iters
    if _check_kind(kind) == "data_parallel":
        return Assignment(kind, p.tiles, resident, tuple((Unit(t, 0, k),) for t in range(p.tiles)))
    if kind == "persistent":
        grid = min(p.tiles, resident)
        return Assignment(kind, grid, resident,
                          tuple(tuple(Unit(t, 0, k) for t in range(c, p.tiles, grid)) for c in range(grid)))
    return _stream_k(p, resident)


def _stream_k(p: Problem, resident: int) -> Assignment:
    k, tiles = p.k_iters, p.tiles
    dp_tiles = max(tiles // resident - 1, 0) * resident
    sk_tiles = tiles - dp_tiles
    sk_iters = sk_tiles * k
    sk_ctas = min(resident, sk_iters)
    grid = resident if dp_tiles else sk_ctas
    base, rem = divmod(sk_iters, sk_ctas)
    units, owners = [], {}
    start = 0
    for c in range(grid):
        mine = []
        if c < sk_ctas:
            end = start + base + (1 if c < rem else 0)
            at = start
            while at < end:  # the range [start, end) cut at tile boundaries
                t, kb = divmod(at, k)
                ke = min(k, kb + end - at)
                mine.append(Unit(t, kb, ke))
                owners.setdefault(t, []).append(c)
                at += ke - kb
            start = end
            mine.reverse()  # the partial (start of the last tile) first, the finalizing unit last
        mine.extend(Unit(t, 0, k) for t in range(sk_tiles + c, tiles, grid))
        units.append(tuple(mine))
    finalizer = {t: cs[-1] for t, cs in owners.items()}
    waits = tuple((cs[-1], w, t) for t, cs in sorted(owners.items()) for w in cs[:-1])
    slots = {w: t for _, w, t in waits}
    return Assignment("stream_k", grid, resident, tuple(units), sk_tiles=sk_tiles, sk_ctas=sk_ctas,
                      finalizer=finalizer, waits=waits, slots=slots,
                      workspace_bytes=sk_ctas * p.partial_bytes, flags=sk_ctas)


def simulate(p: Problem, a: Assignment) -> list[float]:
    """Each CTA's finish time in k-iterations, every CTA resident from time 0 (``a.grid <= a.resident``; a
    data-parallel grid larger than that runs in waves: CTA ``c`` starts when CTA ``c - resident`` ends).
    A unit costs its k-iterations; a partial's write and each partial a finalizer reads cost
    ``partial_bytes / iteration_bytes`` k-iterations (the fixup moves an fp32 tile at the rate the
    k-loop moves its operands).  A finalizing unit ends no earlier than its contributors' partials.
    Raises InputError when a wait points to a CTA at or above the waiter (it could deadlock)."""
    fix = p.partial_bytes / p.iteration_bytes
    written: dict[int, float] = {}  # cta -> time its partial is in the workspace
    waits_of: dict[int, list[int]] = {}
    for waiter, waited, _ in a.waits:
        if waited >= waiter:
            raise InputError(f"stream-K fixup: CTA {waiter} waits for CTA {waited}, not a lower id")
        waits_of.setdefault(waiter, []).append(waited)
    ends = []
    for c, units in enumerate(a.units):
        now = ends[c - a.resident] if c >= a.resident else 0.0
        for u in units:
            now += u.k_end - u.k_begin
            if a.slots.get(c) == u.tile and a.finalizer.get(u.tile) != c:
                now += fix
                written[c] = now
            elif a.finalizer.get(u.tile) == c:
                contributors = [w for w in waits_of.get(c, ()) if a.slots.get(w) == u.tile]
                now = max([now] + [written[w] for w in contributors]) + fix * len(contributors)
        ends.append(now)
    return ends


def cutlass_sm90_sk_tiles(tiles: int, ctas_per_wave: int, k_iters: int) -> int:
    """The Stream-K tiles CUTLASS's sm90 scheduler picks in its Heuristic mode (0: data-parallel), as its
    ``get_num_sk_tiles`` (cutlass/gemm/kernel/tile_scheduler_params.h, used by
    sm90_tile_scheduler_stream_k.hpp): no tail wave or ``k_iters <= 8``: 0; a tail at least half a wave: 0;
    else every tile but ``max(full_waves - 1, 0)`` full waves.  Clusters of 1 CTA."""
    full = tiles // ctas_per_wave
    total = -(-tiles // ctas_per_wave)
    if full == total or k_iters <= MIN_SK_ITERS:
        return 0
    if 2 * (tiles - full * ctas_per_wave) >= ctas_per_wave:
        return 0
    return tiles - (full - 1 if full > 1 else 0) * ctas_per_wave


@dataclass(frozen=True)
class WaveModel:
    """The wave model of one problem on ``resident`` CTA slots (module doc, docs/tiles.md): ``waves`` of
    one-tile CTAs, the last with ``tail_tiles`` tiles (its efficiency ``tail_efficiency``); per kind the
    predicted ``efficiency`` (useful k-iterations / (resident x the slowest CTA's time)), ``makespan`` in
    k-iterations; Stream-K's ``fixup_bytes`` (partials written and read) against ``operand_bytes``, its
    ``sk_tiles``, workspace and flags; the ``choice`` of the ``auto`` rule and its ``reason``."""

    tiles: int
    k_iters: int
    resident: int
    waves: int
    tail_tiles: int
    tail_efficiency: float
    efficiency: dict
    makespan: dict
    fixup_bytes: int
    operand_bytes: int
    sk_tiles: int
    sk_workspace_bytes: int
    sk_flags: int
    choice: str
    reason: str


def wave_model(p: Problem, sm_count: int, ctas_per_sm: int = 1) -> WaveModel:
    """The wave model of ``p`` on ``sm_count`` SMs with ``ctas_per_sm`` CTAs each, and ``auto``'s choice."""
    resident = _pos("sm_count", sm_count) * _pos("ctas_per_sm", ctas_per_sm)
    useful = p.tiles * p.k_iters
    eff, span, sk = {}, {}, None
    for kind in KINDS:
        a = assign(p, sm_count, ctas_per_sm, kind)
        span[kind] = max(simulate(p, a))
        eff[kind] = useful / (resident * span[kind])
        sk = a if kind == "stream_k" else sk
    waves = -(-p.tiles // resident)
    tail = p.tiles - (waves - 1) * resident
    choice, reason = auto_rule(p, resident, eff)
    return WaveModel(tiles=p.tiles, k_iters=p.k_iters, resident=resident, waves=waves, tail_tiles=tail,
                     tail_efficiency=tail / resident, efficiency=eff, makespan=span,
                     fixup_bytes=2 * len(sk.waits) * p.partial_bytes, operand_bytes=useful * p.iteration_bytes,
                     sk_tiles=sk.sk_tiles, sk_workspace_bytes=sk.workspace_bytes, sk_flags=sk.flags, choice=choice,
                     reason=reason)


def auto_rule(p: Problem, resident: int, eff: dict) -> tuple[str, str]:
    """``auto``'s choice (docs/tiles.md, "The auto rule"): ``stream_k`` when the tail wave leaves slots idle,
    every tile has more than ``MIN_SK_ITERS`` k-iterations, and the wave model predicts at least
    ``SK_MARGIN`` more efficiency than the data-parallel decomposition; else ``persistent`` when there is
    more than one wave; else ``data_parallel``."""
    dp, sk = eff["data_parallel"], eff["stream_k"]
    if p.tiles % resident and p.k_iters > MIN_SK_ITERS and sk - dp >= SK_MARGIN:
        return "stream_k", (f"tail wave {p.tiles % resident}/{resident} CTAs; Stream-K {sk:.1%} vs "
                            f"data-parallel {dp:.1%} (>= {SK_MARGIN:.0%} better)")
    why = ("no tail wave" if p.tiles % resident == 0 else
           f"{p.k_iters} k-iterations per tile (<= {MIN_SK_ITERS})" if p.k_iters <= MIN_SK_ITERS else
           f"Stream-K {sk:.1%} vs data-parallel {dp:.1%} (< {SK_MARGIN:.0%} better)")
    if p.tiles > resident:
        return "persistent", f"{why}; {math.ceil(p.tiles / resident)} waves: one resident grid loops over tiles"
    return "data_parallel", f"{why}; one wave: one tile per CTA"
