"""The roofline picture of a prediction (``PipelinePlan.plot(path, kind="roofline")``).

A hierarchical roofline (one point per memory level, all at the kernel's
predicted TFLOPS, each at its own arithmetic intensity):

* **compute ceilings** (horizontal): the tensor-core rate the chip sustains
  (``Prediction.sustained_tflops``, a measured best-case matmul; docs/machines.md)
  and, dashed, the data-sheet peak (``Prediction.peak_tflops``) when it is
  higher; the SFU and the CUDA cores at the TFLOPS this kernel would reach
  if that unit alone limited it (its cycles per round in
  ``Prediction.terms``), or, when the kernel gives the unit no work, the
  chip's rate (SFU: one op per result; CUDA cores: two FLOP per FMA);
  likewise issue and shared memory when the kernel has those terms;
* **memory roofs** (diagonals, TFLOPS = intensity x bandwidth): L2 and DRAM
  of the chip (``model/chip.py``);
* **the kernel**: at FLOP per byte of global->shared traffic through L2 and
  per byte of compulsory DRAM traffic (bytes recovered from the L2 and DRAM
  terms: term / CTAs per SM x bandwidth per clock / SMs, the inverse of
  ``throughput.copy_cost``), labelled with its TFLOPS and its bound.

``plot_roofline`` returns a ``Roofline`` with the numbers it drew, so a
caller (or a test) can read them without parsing the picture.  matplotlib is
imported lazily (``plot._matplotlib``: the Agg canvas, no pyplot).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from .plot import _matplotlib

__all__ = ["Roofline", "plot_roofline", "roofline"]

_COMPUTE = (("tensor core", "#4e79a7"), ("SFU", "#f28e2b"), ("CUDA cores", "#59a14f"), ("issue", "#b07aa1"),
            ("shared memory", "#9c755f"))
_MEMORY = (("L2", "#e15759"), ("DRAM", "#76b7b2"))
_DATASHEET = "tensor core, data sheet"


@dataclass(frozen=True)
class Roofline:
    """What ``plot_roofline`` draws.  ``ceilings``: name -> TFLOPS (horizontal lines); ``roofs``: memory
    level -> TB/s (diagonals); ``points``: memory level -> (FLOP per byte, TFLOPS) of the kernel;
    ``tflops`` / ``bound``: the prediction's; ``path``: the file written (None when only computed)."""

    ceilings: dict
    roofs: dict
    points: dict
    tflops: float
    bound: str
    path: Path | None = None
    notes: dict = field(default_factory=dict)


def roofline(prediction, costs) -> Roofline:
    """The numbers of the roofline of ``prediction`` (a ``model.prediction.Prediction``) on the machine
    whose ``CostModel`` is ``costs`` (with chip figures)."""
    if costs is None or costs.chip is None:
        raise InputError("a roofline needs the machine's chip figures (a built-in machine): this one has none")
    p, chip = prediction, costs.chip
    clock, sms, k = costs.clock_ghz * 1e9, costs.sms, max(1, p.ctas_per_sm)

    def kernel_tflops(cycles):  # what the chip delivers when one round takes ``cycles``
        return k * p.flops_per_iteration / cycles * clock * sms / 1e12

    chip_rate = {"tensor core": p.peak_tflops, "SFU": costs.mufu_per_clock * sms * clock / 1e12,
                 "CUDA cores": 2 * costs.fma_per_clock * sms * clock / 1e12}
    ceilings, notes = {}, {}
    for name, _ in _COMPUTE:
        term = p.terms.get(name, 0.0)
        if name == "tensor core" and p.peak_tflops > (p.sustained_tflops or p.peak_tflops):
            ceilings[name], notes[name] = p.sustained_tflops, "sustained, measured matmul"
            ceilings[_DATASHEET], notes[_DATASHEET] = p.peak_tflops, "chip peak"
        elif name == "tensor core":
            ceilings[name], notes[name] = p.peak_tflops, "chip peak"
        elif term > 0:
            ceilings[name], notes[name] = kernel_tflops(term), "this kernel's work"
        elif name in chip_rate:
            ceilings[name], notes[name] = chip_rate[name], "chip rate"
    roofs = {"L2": chip.l2_bytes_per_s / 1e12, "DRAM": chip.dram_bytes_per_s / 1e12}
    points = {}
    for level, per_s in (("L2", chip.l2_bytes_per_s), ("DRAM", chip.dram_bytes_per_s)):
        term = p.terms.get(level, 0.0)
        if term > 0:
            nbytes = term / k * (per_s / clock) / sms
            points[level] = (p.flops_per_iteration / nbytes, p.tflops)
    return Roofline(ceilings, roofs, points, p.tflops, p.bound, None, notes)


def _peak(r: Roofline) -> float:
    return r.ceilings.get(_DATASHEET, r.ceilings["tensor core"])


def plot_roofline(prediction, costs, path, *, title: str | None = None) -> Roofline:
    """Draw the roofline of ``prediction`` (module docstring) to ``path`` (.png, .svg, .pdf); returns the
    ``Roofline`` drawn, with ``path`` set.  Raises PlotUnavailableError without matplotlib, InputError
    when the machine has no chip figures or the file cannot be written."""
    Figure, _, _ = _matplotlib()
    r = roofline(prediction, costs)
    top = 3 * _peak(r)
    bottom = min([c for c in r.ceilings.values()] + [y for _, y in r.points.values()]) / 3
    ridge = _peak(r) / min(r.roofs.values())  # where the lowest roof meets the tensor-core peak
    xs = [x for x, _ in r.points.values()] + [ridge]
    lo, hi = 10 ** math.floor(math.log10(min(xs) / 8)), 10 ** math.ceil(math.log10(max(xs) * 8))
    fig = Figure(figsize=(9, 6), dpi=110, layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    for (name, color) in _COMPUTE:
        if name in r.ceilings:
            y = r.ceilings[name]
            off = y > top  # beyond the chart: named in the legend only
            ax.plot([lo, hi], [min(y, top)] * 2, color=color, lw=0 if off else 1.6,
                    label=f"{name} ({r.notes[name]}): {y:.0f} TFLOPS" + (" (above the chart)" if off else ""))
    if _DATASHEET in r.ceilings:
        y = r.ceilings[_DATASHEET]
        ax.plot([lo, hi], [y, y], color=dict(_COMPUTE)["tensor core"], lw=1.2, ls="--",
                label=f"{_DATASHEET} ({r.notes[_DATASHEET]}): {y:.0f} TFLOPS")
    for (level, color) in _MEMORY:
        bw = r.roofs[level]
        ax.plot([lo, hi], [lo * bw, hi * bw], color=color, lw=1.6, ls="--", label=f"{level}: {bw:.2f} TB/s")
    for level, (x, y) in r.points.items():
        ax.plot([x], [y], marker="o", ms=8, color=dict(_MEMORY)[level], markeredgecolor="black")
        ax.annotate(f"vs {level}: {x:.0f} FLOP/B", (x, y), textcoords="offset points", xytext=(8, -14), fontsize=8)
    ax.set_xlim(lo, hi)
    ax.set_ylim(bottom, top)
    ax.set_xlabel("arithmetic intensity (FLOP per byte of global->shared traffic at that level)")
    ax.set_ylabel("TFLOPS (chip)")
    ax.axhline(r.tflops, color="black", lw=0.8, ls=":")
    ax.text(lo * 1.2, r.tflops * 1.08, f"predicted {r.tflops:.0f} TFLOPS, bound: {r.bound}", fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    fig.suptitle(title or f"roofline: {r.tflops:.0f} TFLOPS, bound: {r.bound}", fontsize=11)
    out = Path(path)
    try:
        fig.savefig(out)
    except OSError as e:
        raise InputError(f"cannot write the picture {out}: {e.strerror or e}") from None
    except ValueError as e:
        raise InputError(f"cannot write the picture {out}: {e}; use .png, .svg or .pdf") from None
    return Roofline(r.ceilings, r.roofs, r.points, r.tflops, r.bound, out, r.notes)
