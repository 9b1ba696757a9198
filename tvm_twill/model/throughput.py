"""What a pipelined loop delivers per SM and per chip: bandwidth, issue, occupancy, the bound.

Pure Python over ``CostModel`` / ``Chip`` (model/machine.py, model/chip.py);
the formulas are written out in docs/machines.md ("Throughput model").

* **Occupancy** (``occupancy``): CTAs per SM = the smallest of what the
  registers (per warp, rounded up to the allocation unit), the shared memory
  (plus the driver's reserve per CTA), the warp slots and the CTA slots allow.
* **L2 reuse** (``wave_reuse``): a tile read by several CTAs resident at once
  comes from DRAM once per wave.  Blocks are launched in raster order
  (``blockIdx.x`` fastest); the first wave is the first ``resident`` linear
  block ids; reuse = wave size / distinct tiles of the operand in it (the
  tile is named by the block coordinates its address depends on).
* **Copy cost** (``copy_cost``): bytes per iteration of one CTA through the
  SM's shared-memory port, through its share of L2 (the chip's L2 bandwidth
  over SMs x resident CTAs), and, for the compulsory traffic (bytes /
  reuse), through its share of DRAM; the largest is the copy's cycles.
* **Clusters and TMA multicast** (``Cluster``): a cluster of m x n CTAs whose
  TMA loads multicast reads A's tile from L2 once for the n CTAs of a
  cluster row and B's once for the m CTAs of a cluster column, so one CTA's
  L2 bytes are A / n + B / m; every CTA still writes the whole tiles into its
  own shared memory (the port term is unchanged).
* **Issue cost** (``issue_cycles``): each instruction of the issuing warp
  (``ISSUE_SLOTS``: a bulk copy or TMA box with its address arithmetic, a
  cp.async, an ldmatrix, an mma, a wgmma) takes issue slots; one warp issues
  at most ``warp_issue_per_clock`` per clock, the SM ``issue_per_clock``.
* **Prediction** (``predict``): per SM, one "round" (every resident CTA runs
  one iteration) takes the largest of the schedule's ii and each shared
  resource's time for all resident CTAs; throughput per SM = CTAs/SM x work
  per iteration / round.  The bound is the term that sets the round.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import MachineError

__all__ = ["BOUNDS", "ISSUE_SLOTS", "Cluster", "CopyCost", "Occupancy", "copy_cost", "issue_cycles", "occupancy", "unit_label",
           "uses_bulk_copies", "wave_reuse"]

#: What can limit a kernel, in the order ties are reported.
BOUNDS = ("tensor core", "SFU", "CUDA cores", "issue", "shared memory", "L2", "DRAM", "latency", "occupancy")

#: Issue slots (warp instructions) one instruction of the issuing warp takes, its own address
#: arithmetic included: a bulk copy or a TMA box needs its shared and global addresses (two
#: integer adds), a uniform-register move and the copy itself; the rest are one instruction each.
ISSUE_SLOTS = {"bulk": 4, "tma": 4, "cp.async": 1, "ldmatrix": 1, "mma": 1, "wgmma": 1, "ffma": 1, "mufu": 1}


@dataclass(frozen=True)
class Occupancy:
    """CTAs per SM, what limits it, and what each resource alone would allow."""

    ctas: int
    limiter: str
    by: dict = field(default_factory=dict)


def occupancy(chip, *, threads: int, regs_per_thread: int, smem_bytes: int, roles=None) -> Occupancy:
    """CTAs of ``threads`` threads, ``regs_per_thread`` registers each and ``smem_bytes`` of shared
    memory that one SM of ``chip`` holds at once.  ``roles``: (threads, registers per thread) per
    warp role when setmaxnreg gives the roles different budgets (their sum is the CTA's registers).
    Raises MachineError when not even one CTA fits."""
    warps = math.ceil(threads / 32)
    parts = roles or [(threads, regs_per_thread)]
    regs_cta = sum(math.ceil(t / 32) * math.ceil(r * 32 / chip.reg_alloc_unit) * chip.reg_alloc_unit
                   for t, r in parts)
    by = {  # ties: the hardware's slots first (more CTAs cannot come from fewer registers then)
        "CTA slots": chip.max_ctas_per_sm,
        "threads": chip.max_warps_per_sm // warps,
        "registers": chip.regs_per_sm // regs_cta if regs_cta else chip.max_ctas_per_sm,
        "shared memory": chip.smem_per_sm // (smem_bytes + chip.smem_reserved_per_cta),
    }
    ctas = min(by.values())
    limiter = next(k for k, v in by.items() if v == ctas)
    if ctas < 1:
        raise MachineError(f"a block of {threads} threads x {regs_per_thread} registers with {smem_bytes} B of shared "
                           f"memory does not fit one SM of {chip.part} ({limiter}): use fewer")
    return Occupancy(ctas, limiter, by)


def wave_reuse(grid, uses, resident: int) -> float:
    """CTAs of the first wave per distinct tile of an operand.

    ``grid``: block extents, ``blockIdx.x`` first (the raster order: x
    fastest); ``uses[i]``: the operand's address depends on block coordinate
    i; ``resident``: CTAs the chip runs at once (SMs x CTAs per SM).
    """
    grid = [max(1, int(g)) for g in grid]
    wave = max(1, min(int(resident), math.prod(grid)))
    seen = set()
    for linear in range(wave):
        coord, rest = [], linear
        for g in grid:
            coord.append(rest % g)
            rest //= g
        seen.add(tuple(c for c, u in zip(coord, uses, strict=False) if u))
    return wave / len(seen)


@dataclass(frozen=True)
class CopyCost:
    """Cycles one CTA's copy of ``nbytes`` takes through each level, and the level that sets it."""

    port: float
    l2: float
    dram: float

    @property
    def cycles(self) -> float:
        return max(self.port, self.l2, self.dram)

    @property
    def bound(self) -> str:
        return max((self.port, "shared memory"), (self.l2, "L2"), (self.dram, "DRAM"), key=lambda t: t[0])[1]


#: CTAs in one cluster, at most (sm_90: 8 portable, 16 with the non-portable cluster size attribute).
MAX_CLUSTER_CTAS = 16


@dataclass(frozen=True)
class Cluster:
    """A thread-block cluster of ``m`` x ``n`` CTAs (CUTLASS's ``ClusterShape<m, n, 1>``: m CTAs along
    the output's rows, n along its columns) whose TMA loads multicast operand tiles.

    The n CTAs of a cluster row compute the same rows of C, so they share A's tile; the m CTAs of a
    cluster column share B's.  With multicast each shared tile is read from L2 once per cluster
    (each CTA issues 1/n of A's tile, or 1/m of B's, to every CTA that needs it), so one CTA's L2
    bytes per iteration are ``a / n + b / m`` (``multicast_a`` / ``multicast_b`` off: that operand is
    read by every CTA).  The default 1 x 1 cluster is a kernel without clusters.
    """

    m: int = 1
    n: int = 1
    multicast_a: bool = True
    multicast_b: bool = True

    def __post_init__(self):
        for name in ("m", "n"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise MachineError(f"cluster {name} must be a positive integer, got {v!r}")
        if self.m * self.n > MAX_CLUSTER_CTAS:
            raise MachineError(f"a cluster of {self.m} x {self.n} CTAs exceeds the {MAX_CLUSTER_CTAS} CTAs a cluster "
                               f"may hold: use fewer")

    def l2_bytes(self, a_bytes: float, b_bytes: float) -> float:
        """Bytes one CTA pulls from L2 per iteration for ``a_bytes`` of A and ``b_bytes`` of B."""
        return (a_bytes / (self.n if self.multicast_a else 1)
                + b_bytes / (self.m if self.multicast_b else 1))


def copy_cost(costs, nbytes: float, *, ctas_per_sm: int = 1, reuse: float = 1.0,
              active: int | None = None, l2_bytes: float | None = None) -> CopyCost:
    """``nbytes`` per iteration of one CTA, ``ctas_per_sm`` CTAs resident on every SM, each tile
    read by ``reuse`` CTAs of a wave: port = bytes x CTAs / port B/clk; L2 = L2 bytes x A / L2 B/clk
    of the chip; DRAM = bytes / reuse x A / DRAM B/clk of the chip, with A the CTAs running at
    once (``active``: SMs x CTAs per SM, fewer when the grid is smaller).  ``l2_bytes``: what the
    CTA pulls from L2 when a cluster multicasts tiles (``Cluster.l2_bytes``); ``nbytes`` otherwise."""
    chip = costs.chip
    clock = costs.clock_ghz * 1e9
    share = costs.sms * ctas_per_sm if active is None else max(1, active)
    from_l2 = nbytes if l2_bytes is None else l2_bytes
    if not 0 <= from_l2 <= nbytes:
        raise MachineError(f"l2_bytes {from_l2!r} must lie between 0 and the {nbytes!r} bytes the CTA copies: "
                           f"multicast shares tiles, it does not add any")
    return CopyCost(port=nbytes * ctas_per_sm / chip.smem_port_bytes_per_clock,
                    l2=from_l2 * share * 1.0 / (chip.l2_bytes_per_s / clock),
                    dram=nbytes / max(reuse, 1.0) * share / (chip.dram_bytes_per_s / clock))


def issue_cycles(chip, instructions: dict, *, warps: int = 1) -> float:
    """Cycles ``warps`` issuing warps spend on ``instructions`` (kind -> count, ``ISSUE_SLOTS``):
    slots / (warps x warp_issue_per_clock), never below slots / issue_per_clock of the SM."""
    slots = sum(ISSUE_SLOTS[k] * n for k, n in instructions.items())
    per_clock = min(max(1, warps) * chip.warp_issue_per_clock, chip.issue_per_clock)
    return slots / per_clock


def unit_label(costs, unit: str, *, producer: bool = False) -> str:
    """How a machine unit is named to a reader.  ``TMA`` is the machine's async copy path: per-thread
    cp.async in TVM's one-role software pipeline on every arch (its async stages lower to cp.async, and
    the front-end prices them so), and TMA / bulk copies only where a warp-specialized ``producer`` issues
    them (sm_90 and later, ``uses_bulk_copies``)."""
    if unit == "TMA" and not (producer and uses_bulk_copies(costs)):
        return "async copy (cp.async)"
    return unit


def uses_bulk_copies(costs) -> bool:
    """sm_90 and later: a producer's copies are TMA boxes and bulk copies (cp.async.bulk)."""
    return costs is not None and _cc(costs.arch) >= 90


def _cc(arch) -> int:
    digits = "".join(ch for ch in str(arch or "") if ch.isdigit())
    return int(digits) if digits else 0
