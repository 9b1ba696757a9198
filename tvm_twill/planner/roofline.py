"""Predicted throughput of a plan or of a solved graph (``PipelinePlan.prediction()``, ``tvm-twill solve``).

Glue between what the front-end or a graph file knows and the pure model
(``model/throughput.py``, ``model/prediction.py``; formulas in
docs/machines.md, "Throughput model"):

* **A plan** (``plan_prediction``): FLOPs, per-bound cycles and copy traffic
  come from the statements (``StmtInfo.flops`` / ``bounds`` / ``copy``); the block's threads, grid
  and register-scope buffers from the extraction; registers per thread are
  ptxas's figure when the caller has it (``registers=``), else the model's
  estimate: the kernel's register-scope buffers per thread + the schedule's
  peak of registers handed between statements + ``ADDRESS_REGISTERS`` (for
  a warp-specialized plan, the setmaxnreg budgets of its roles).
* **A graph** (``graph_prediction``): ops may declare ``flops``; the cycles of
  one time unit are those of the op whose declared work is slowest per unit
  at the machine's rates (TC: flops / tensor FLOP per clock; ALU: flops / 2 /
  FMA per clock), or the graph's own cycles per normalized unit when larger
  (a graph in measured cycles), the block is the schedule's warp roles, and the copy bytes
  are the ``smem`` of its variable-latency ops through L2 (a graph has no
  problem shape, so no DRAM term and no wave quantization).
"""
from __future__ import annotations

import math

from ..errors import InputError
from ..model import register_peaks
from ..model.prediction import Prediction, predict
from ..model.throughput import occupancy

__all__ = ["ADDRESS_REGISTERS", "compare_variants", "graph_prediction", "plan_prediction", "serialized_ii",
           "variant_throughput"]

#: Registers per thread the model adds for addresses, loop counters and predicates when ptxas's
#: figure is not known (an estimate, stated: the kernels of this project's SASS reports use 30-60
#: more than their tiles).
ADDRESS_REGISTERS = 32


def _sums(stmts) -> tuple[float, dict, float, float, float]:
    flops, work, nbytes, compulsory, producer = 0.0, {}, 0.0, 0.0, 0.0
    for st in stmts:
        flops += st.flops
        for b, v in st.bounds.items():
            work[b] = work.get(b, 0.0) + v
        copy = st.copy
        if copy is not None and copy.nbytes:
            nbytes += copy.nbytes
            compulsory += copy.nbytes / max(1.0, copy.reuse)
            producer += copy.producer_issue
    return flops, work, nbytes, compulsory, producer


def plan_prediction(extraction, schedule, ii_cycles: float, *, smem_bytes: int, registers: int | None = None,
                    roles=None, producer: bool = False, threads: int | None = None) -> Prediction:
    """The prediction of a loop ``extraction`` scheduled at ``ii_cycles``; ``roles``: (threads,
    registers) per warp role under setmaxnreg; ``producer``: a warp-specialized plan (a producer
    warp group of 128 threads more, which issues the copies: the issue term)."""
    costs = extraction.machine.costs
    flops, work, nbytes, compulsory, issue = _sums(extraction.stmts)
    if producer:
        work["issue"] = max(work.get("issue", 0.0), issue)
    threads = threads or (extraction.threads or 32) + (128 if producer else 0)
    if registers is None:
        peak = max(register_peaks(schedule, extraction.graph).values(), default=0)
        registers = min(extraction.machine.regs_per_thread_max, extraction.local_regs + peak + ADDRESS_REGISTERS)
    occ = occupancy(costs.chip, threads=threads, regs_per_thread=registers, smem_bytes=smem_bytes, roles=roles)
    tiles = math.prod(extraction.grid) if extraction.grid else None
    return predict(costs, ii_cycles=ii_cycles, flops=flops, occ=occ, work=work, copy_bytes=nbytes,
                   reuse=nbytes / compulsory if compulsory else 1.0, tiles=tiles, quantum=extraction.quantum)


def serialized_ii(extraction, ii_cycles: float) -> float:
    """The cycles per iteration when ptxas serializes wgmma (``compiler.ptxas``): each wgmma waits for
    its own completion, so the warps that issue the loop's compute run its statements back to back: the
    larger of the schedule's ii and the sum of the cycles of every statement that is not an async copy
    (the copy engine's, ``TMA``: cp.async or bulk copies, which still overlap)."""
    q = extraction.quantum
    ops = extraction.graph.ops
    serial = sum(ops[st.index].cycles * q for st in extraction.stmts if "TMA" not in st.units)
    return max(float(ii_cycles), float(serial))


def compare_variants(extraction, swp_schedule, ii_swp: float, swp_smem: int, ii_ws: float, ws_smem: int,
                     budgets=None) -> tuple[Prediction, Prediction] | None:
    """(one-role plan, warp-specialized plan) predictions, to compare by throughput per SM (None when
    the machine has no chip figures or a variant does not fit an SM).  ``budgets``: setmaxnreg
    (producer, consumer) registers per thread."""
    if extraction.machine.costs is None or extraction.machine.costs.chip is None:
        return None
    consumers = extraction.threads or 128
    roles = [(128, budgets[0]), (consumers, budgets[1])] if budgets else None
    try:
        plain = plan_prediction(extraction, swp_schedule, ii_swp, smem_bytes=swp_smem)
        ws = plan_prediction(extraction, swp_schedule, ii_ws, smem_bytes=ws_smem, roles=roles, producer=True)
    except InputError:
        return None
    return plain, ws


def variant_throughput(pred: Prediction) -> str:
    """One phrase for comparing variants: throughput per SM and what sets it."""
    return (f"{pred.tflops_per_sm:.2f} TFLOPS per SM ({pred.ctas_per_sm} CTA(s) per SM, "
            f"{pred.cycles_per_iteration:.0f} cycles per round, bound: {pred.bound})")


_RATE = {"TC": lambda c: c.tc_flops_per_clock, "ALU": lambda c: 2 * c.fma_per_clock,
         "SFU": lambda c: c.mufu_per_clock}


def graph_prediction(graph, schedule, machine, source=None) -> Prediction | None:
    """The prediction of a solved graph whose ops declare ``flops`` (None when none does, or when
    the machine has no cost model).  ``graph``: as solved; ``source``: as written (default
    ``graph``), whose ``smem`` of a streaming load is one ring slot (``prepare`` charges it once per
    slot), and whose ``ctas`` (the problem's thread blocks, when stated) go over the SMs in waves."""
    costs = machine.costs
    ops = [op for op in graph.ops if op.flops]
    if costs is None or costs.chip is None or not ops:
        return None
    cycles = {n: c for n, c in schedule.cycles.items()} or {op.name: op.cycles for op in graph.ops}
    written = source or graph
    # cycles per scheduled unit: what the declared flops need at the machine's rates, or what the graph's
    # own cycles say when normalization scaled them down (the larger)
    scale = max([(op.flops / _RATE[op.unit](costs)) / max(1, cycles.get(op.name, op.cycles))
                 for op in ops if op.unit in _RATE]
                + [op.cycles / max(1, cycles.get(op.name, op.cycles)) for op in written.ops])
    work = {}
    names = {"TC": "tensor core", "SFU": "SFU", "ALU": "CUDA cores"}
    for op in graph.ops:
        if op.unit in names:
            work[names[op.unit]] = work.get(names[op.unit], 0.0) + cycles.get(op.name, op.cycles) * scale
    peaks = register_peaks(schedule, graph)
    threads = machine.warps_per_group * 32
    roles = [(threads, max(24, peaks.get(w, 0))) for w in schedule.warps_used()]
    streaming = schedule.streaming or {}
    ring = {n: streaming.get("depth", 1) for n in streaming.get("ops", ())}
    smem = sum(op.smem * ring.get(op.name, 1) for op in written.ops)
    nbytes = sum(op.smem for op in written.ops if op.variable_latency)
    occ = occupancy(costs.chip, threads=threads * len(roles), regs_per_thread=0, smem_bytes=smem, roles=roles)
    if nbytes:  # through L2 only: a graph does not say how many CTAs share a tile (no DRAM term)
        work["L2"] = nbytes * costs.sms / (costs.chip.l2_bytes_per_s / (costs.clock_ghz * 1e9))
    return predict(costs, ii_cycles=schedule.ii * scale, flops=float(sum(op.flops for op in graph.ops)), occ=occ,
                   work=work, quantum=scale, tiles=written.ctas or graph.ctas or None)
