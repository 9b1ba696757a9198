"""A kernel's predicted throughput: cycles per iteration, TFLOPS per SM and per chip, the bound.

``predict`` combines the terms of ``model/throughput.py`` (formulas in
docs/machines.md, "Throughput model").  Per SM, one round (every resident
CTA runs one iteration) takes

    round = max(ii, CTAs x each per-CTA unit term, CTAs x the copy's L2 and DRAM terms,
                CTAs x flops / tensor FLOP per clock)

where the tensor-core term (the larger of the tensor work given and flops / tensor FLOP
per clock) is divided by the chip's sustained fraction of the data-sheet tensor rate
(``Chip.tc_sustained``, a published measurement; docs/machines.md, "Sustained
tensor-core rate"), so no prediction exceeds the sustained peak, itself at most the
data-sheet peak, and

    TFLOPS per SM = CTAs x flops per iteration / round x clock
    TFLOPS (chip) = TFLOPS per SM x SMs x tiles / (waves x SMs x CTAs)

with waves = ceil(tiles / (SMs x CTAs)) when the problem's tile count is
known (else 1).  The bound is the largest term, ties in ``BOUNDS`` order;
when the schedule's ii is larger than every resource term the loop is
latency-bound, reported as ``occupancy`` when registers or shared memory
(not the hardware's warp or CTA slots) keep more CTAs off the SM.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .throughput import BOUNDS, Occupancy, copy_cost

__all__ = ["Prediction", "predict"]


@dataclass(frozen=True)
class Prediction:
    """``cycles_per_iteration``: one round per SM (each resident CTA one iteration), in cycles;
    ``terms``: every bound's cycles per round; ``ctas_per_sm`` / ``occupancy_limiter``;
    ``tflops_per_sm`` / ``tflops`` (the chip, for the problem's tiles); ``bound``; ``peak_tflops``:
    the data-sheet dense tensor peak; ``sustained_tflops``: the part of it the tensor cores sustain
    (``Chip.tc_sustained`` x the peak)."""

    cycles_per_iteration: float
    ctas_per_sm: int
    occupancy_limiter: str
    flops_per_iteration: float
    tflops_per_sm: float
    tflops: float
    bound: str
    terms: dict = field(default_factory=dict)
    wave_efficiency: float = 1.0
    peak_tflops: float = 0.0
    sustained_tflops: float = 0.0

    def to_dict(self) -> dict:
        return {"tflops": round(self.tflops, 1), "bound": self.bound,
                "tflops_per_sm": round(self.tflops_per_sm, 3),
                "cycles_per_iteration": round(self.cycles_per_iteration, 1),
                "ctas_per_sm": self.ctas_per_sm}

    def explain(self) -> str:
        terms = ", ".join(f"{k} {v:.0f}" for k, v in self.terms.items() if v > 0)
        sustained = self.sustained_tflops or self.peak_tflops
        held = "" if sustained >= self.peak_tflops else f"; the tensor cores sustain {sustained:.0f}"
        return (f"predicted {self.tflops:.0f} TFLOPS on the chip ({self.tflops_per_sm:.2f} per SM, "
                f"{100 * self.tflops / self.peak_tflops:.0f}% of the {self.peak_tflops:.0f} TFLOPS peak{held}), bound: "
                f"{self.bound}; {self.ctas_per_sm} CTA(s) per SM (limited by {self.occupancy_limiter}), "
                f"{self.cycles_per_iteration:.0f} cycles per round of one iteration per CTA "
                f"(cycles per round: {terms}); waves use {100 * self.wave_efficiency:.0f}% of the SMs")


def predict(costs, *, ii_cycles: float, flops: float, occ: Occupancy, work: dict | None = None,
            copy_bytes: float = 0.0, reuse: float = 1.0, tiles: int | None = None, quantum: float = 0.0,
            l2_bytes: float | None = None) -> Prediction:
    """The prediction for a loop whose schedule has ``ii_cycles`` per iteration of one CTA.

    ``flops``: useful FLOP per iteration of one CTA; ``work``: per-CTA cycles
    per iteration on each SM-shared resource (keys of ``BOUNDS``: "tensor
    core", "SFU", "CUDA cores", "issue", "shared memory"); ``copy_bytes`` /
    ``reuse``: global->shared bytes per iteration and the L2 reuse of their
    tiles (``throughput.wave_reuse``); ``tiles``: CTAs of the problem; ``quantum``: the schedule's
    time unit in cycles (its ii is rounded up to it, so a resource within one quantum of the round is
    what sets it, not latency); ``l2_bytes``: the part of ``copy_bytes`` the CTA pulls from L2 when
    a cluster multicasts tiles (``throughput.Cluster.l2_bytes``; default all of them).
    """
    k = occ.ctas
    clock = costs.clock_ghz * 1e9
    terms = {b: 0.0 for b in BOUNDS}
    for b, v in (work or {}).items():
        terms[b] = max(terms[b], k * float(v))
    sustained = getattr(costs.chip, "tc_sustained", 1.0)
    terms["tensor core"] = max(terms["tensor core"], k * flops / costs.tc_flops_per_clock) / sustained
    if copy_bytes:
        c = copy_cost(costs, copy_bytes, ctas_per_sm=k, reuse=reuse, l2_bytes=l2_bytes)
        terms["shared memory"] = max(terms["shared memory"], c.port)
        terms["L2"], terms["DRAM"] = c.l2, c.dram
    resource = max(terms.values())
    terms["latency"] = float(ii_cycles)
    rnd = max(resource, float(ii_cycles), 1e-9)
    bound = next(b for b in BOUNDS if terms[b] >= rnd * (1 - 1e-9) - (quantum if b != "latency" else 0.0))
    if bound == "latency" and occ.limiter in ("registers", "shared memory"):
        bound = "occupancy"
    per_sm = k * flops / rnd * clock / 1e12
    eff = 1.0
    if tiles:
        slots = costs.sms * k
        eff = tiles / (math.ceil(tiles / slots) * slots)
    peak = costs.tc_flops_per_clock * costs.sms * clock / 1e12
    return Prediction(cycles_per_iteration=rnd, ctas_per_sm=k, occupancy_limiter=occ.limiter,
                      flops_per_iteration=flops, tflops_per_sm=per_sm, tflops=per_sm * costs.sms * eff,
                      bound=bound, terms={b: v for b, v in terms.items() if v > 0}, wave_efficiency=eff,
                      peak_tflops=peak, sustained_tflops=peak * sustained)
