"""``tile_schedule``: the tile scheduler of a GEMM-class kernel, chosen by a wave model and written into TIR.

``tile_schedule(sch, target, kind="auto")`` reads the kernel's ``blockIdx``-bound tile loops, its threads and
shared memory (CTAs per SM), runs the wave model of ``model/tiles.py`` and rewrites the tile loops
(``transforms/tiles.py``) for ``data_parallel`` or ``persistent``; ``stream_k`` is planned (assignment,
fixup, workspace) but not emitted to TIR yet.  docs/tiles.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .errors import InputError, UnsupportedLoopError
from .frontend import machine_for, parse_target, scratch_schedule
from .model.throughput import occupancy
from .model.tiles import KINDS, Problem, WaveModel, assign, wave_model
from .transforms.tiles import blockidx_nest, gemm_facts, kernel_resources, rewrite

__all__ = ["REGS_ASSUMED", "TilePlan", "tile_schedule"]

#: Registers per thread assumed for the CTAs-per-SM figure when none is given (ptxas's count is known only
#: after compiling): 128, the budget of a tensor-core GEMM thread holding a 64-128 element fp32 accumulator.
REGS_ASSUMED = 128
#: The operand tile edge assumed for the fixup estimate when the kernel's parameters are not A, B, C.
_TILE_K_ASSUMED = 32


@dataclass(frozen=True)
class TilePlan:
    """A tile scheduler: ``kind`` (what the kernel now does), ``ctas`` (the launch's CTA count), ``tiles``,
    ``k_split`` (the most CTAs one tile's K loop is split over: 1 unless Stream-K), ``efficiency`` (the wave
    model's prediction for ``kind``); ``requested`` (the kind asked for, ``auto`` included), ``model`` (the
    wave model: every kind's efficiency), the residency figures and ``applied`` (the schedule was rewritten)."""

    kind: str
    ctas: int
    tiles: int
    k_split: int
    efficiency: float
    requested: str
    model: WaveModel
    grid: tuple
    sm_count: int
    ctas_per_sm: int
    residency: dict = field(default_factory=dict)
    group: int = 8
    along: str = "m"
    k_loop: str | None = None
    workspace_bytes: int = 0
    flags: int = 0
    applied: bool = False
    note: str = ""

    def explain(self) -> str:
        """The numbers behind the choice: tiles, waves, CTAs per SM and why, tail efficiency, every kind's
        predicted efficiency, the Stream-K fixup's extra traffic and workspace, the auto rule's reason."""
        w, r = self.model, self.residency
        lines = [f"tile scheduler: {self.kind} ({'auto' if self.requested == 'auto' else 'requested'}), "
                 f"{self.ctas} CTAs for {self.tiles} tiles ({self.grid[0]} x {self.grid[1]} tile grid, "
                 f"raster panels of {self.group} along {self.along}); "
                 f"{'applied to the schedule' if self.applied else 'not applied'}",
                 f"  residency: {self.sm_count} SMs x {self.ctas_per_sm} CTAs/SM = {w.resident} resident CTAs; "
                 f"{r.get('how', '')}",
                 f"  waves: {w.waves} of {w.resident}, the last with {w.tail_tiles} tiles (tail efficiency "
                 f"{w.tail_efficiency:.1%}); {w.k_iters} k-iterations per tile (K loop "
                 f"{self.k_loop or 'not found: 1 assumed'})",
                 "  predicted efficiency: " + ", ".join(f"{k} {v:.1%}" for k, v in w.efficiency.items()),
                 f"  stream_k: {w.sk_tiles} Stream-K tiles; fixup traffic {w.fixup_bytes} B "
                 f"({w.fixup_bytes / w.operand_bytes:.2%} of the operand traffic); workspace "
                 f"{w.sk_workspace_bytes} B (sk_ctas x tile_m x tile_n x 4), {w.sk_flags} flags",
                 f"  auto rule: {w.choice} ({w.reason})"]
        if self.note:
            lines.append(f"  note: {self.note}")
        return "\n".join(lines)


def _check(kind, sm_count, group, along, ctas_per_sm, regs_per_thread) -> None:
    if kind != "auto" and kind not in KINDS:
        raise InputError(f"tile_schedule: unknown kind {kind!r}: use 'auto', {', '.join(map(repr, KINDS))}")
    for name, v in (("sm_count", sm_count), ("group", group), ("ctas_per_sm", ctas_per_sm),
                    ("regs_per_thread", regs_per_thread)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise InputError(f"tile_schedule: {name} must be a positive integer, got {v!r}")
    if along not in ("m", "n"):
        raise InputError(f"tile_schedule: along must be 'm' or 'n' (the raster panels' direction), got {along!r}")


def _residency(sch, tgt, chip, nest, block, ctas_per_sm, regs_per_thread) -> tuple[int, dict]:
    """CTAs per SM and how they were found: the kernel's threads and shared memory as written, and with the
    persistent tile loop (TVM's shared-memory merge reuses less across it), the larger counted."""
    threads, smem = kernel_resources(sch, tgt)
    if ctas_per_sm is not None:
        return ctas_per_sm, {"how": f"{ctas_per_sm} CTAs/SM as given", "threads": threads, "smem": smem}
    looped = smem
    if nest.tiles > 1:
        trial = scratch_schedule(sch)  # Schedule.copy fails on some TVM 0.27 schedules
        rewrite(trial, blockidx_nest(trial, block), "persistent", nest.tiles // 2, 1, "m")
        looped = kernel_resources(trial, tgt)[1]
    regs = regs_per_thread or REGS_ASSUMED
    occ = occupancy(chip, threads=threads, regs_per_thread=regs, smem_bytes=max(smem, looped))
    assumed = "" if regs_per_thread else " (assumed: pass regs_per_thread= or ctas_per_sm=)"
    how = (f"{occ.ctas} CTAs/SM from {threads} threads, {max(smem, looped)} B shared memory ({smem} B as "
           f"written, {looped} B with a persistent tile loop, as TVM lowers the kernel now: a software pipeline "
           f"annotated later multiplies its buffers), {regs} registers/thread{assumed}; limited by {occ.limiter}")
    return occ.ctas, {"how": how, "threads": threads, "smem": max(smem, looped), "regs": regs,
                      "limiter": occ.limiter}


def _problem(nest, facts) -> Problem:
    """The wave model's problem: the nest's tile grid, the K loop's k-iterations, tiles as square as the
    output allows (the fixup estimate needs only a tile's elements and its operand bytes per k-iteration)."""
    tiles = nest.tiles
    edge = max(1, round(math.sqrt(facts["out_elems"] / tiles))) if facts["out_elems"] else 128
    tile_k = max(1, round(facts["k"] / facts["k_iters"])) if facts["k"] else _TILE_K_ASSUMED
    return Problem(nest.rows * edge, nest.cols * edge, facts["k_iters"] * tile_k, edge, edge, tile_k,
                   facts["elem_bytes"] or 2)


def tile_schedule(sch, target, *, kind: str = "auto", sm_count: int | None = None, block: str | None = None,
                  apply: bool = True, group: int = 8, along: str = "m", ctas_per_sm: int | None = None,
                  regs_per_thread: int | None = None) -> TilePlan:
    """Restructure the ``blockIdx``-bound tile loops of the GEMM kernel in ``sch`` (docs/tiles.md).

    ``kind``: ``"data_parallel"``, ``"persistent"``, ``"stream_k"`` or ``"auto"`` (the wave model's rule);
    ``sm_count`` overrides the target's SM count; ``block`` names the GEMM block (default: the one block with
    a reduction axis); ``group`` / ``along``: the raster's panels (``group`` tile rows along ``"m"``, columns
    along ``"n"``); ``ctas_per_sm`` overrides the residency read from the kernel (threads, shared memory,
    ``regs_per_thread`` or ``REGS_ASSUMED`` registers); ``apply=False`` plans without rewriting.
    ``stream_k`` is planned but not emitted: with ``apply=True`` it raises UnsupportedLoopError, and ``auto``
    falls back to the better data-parallel kind, saying so in ``explain()``.  Bad input: InputError."""
    _check(kind, sm_count, group, along, ctas_per_sm, regs_per_thread)
    arch, tgt = parse_target(target)
    machine = machine_for(arch)
    nest = blockidx_nest(sch, block)
    facts = gemm_facts(sch, nest, block)
    per_sm, residency = _residency(sch, tgt, machine.costs.chip, nest, block, ctas_per_sm, regs_per_thread)
    sms = sm_count or machine.costs.sms
    problem = _problem(nest, facts)
    w = wave_model(problem, sms, per_sm)
    chosen, note = (w.choice if kind == "auto" else kind), ""
    if chosen == "stream_k" and apply:
        if kind == "stream_k":
            raise UnsupportedLoopError("tile_schedule: stream_k TIR emission is not implemented yet: plan it with "
                                       "apply=False, or use kind='persistent'")
        chosen = "persistent" if problem.tiles > w.resident else "data_parallel"
        note = (f"auto's rule chose stream_k ({w.efficiency['stream_k']:.1%}), whose TIR emission is not "
                f"implemented yet: {chosen} ({w.efficiency[chosen]:.1%}) was applied instead")
    elif chosen == "stream_k":
        note = "stream_k TIR emission is not implemented yet: this plan is the model's only (apply=False)"
    a = assign(problem, sms, per_sm, chosen)
    if apply:
        rewrite(sch, nest, chosen, a.grid, group, along)
    owners: dict = {}
    for c, units in enumerate(a.units):
        for u in units:
            owners.setdefault(u.tile, set()).add(c)
    return TilePlan(kind=chosen, ctas=a.grid, tiles=problem.tiles, k_split=max(map(len, owners.values())),
                    efficiency=w.efficiency[chosen], requested=kind, model=w, grid=(nest.rows, nest.cols),
                    sm_count=sms, ctas_per_sm=per_sm, residency=residency, group=group, along=along,
                    k_loop=facts["k_loop"], workspace_bytes=a.workspace_bytes, flags=a.flags, applied=apply,
                    note=note)
