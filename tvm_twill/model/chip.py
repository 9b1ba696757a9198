"""Chip figures of the built-in machines: memory levels, per-SM limits, issue slots.

A ``Chip`` holds the figures of one part that the throughput model
(``model/throughput.py``) needs beyond the per-SM unit rates of
``CostModel``: the bandwidth of DRAM and of L2 for the whole chip, the L2
size, the per-SM shared-memory port, the warp-instruction issue slots, and
the limits that decide how many thread blocks (CTAs) one SM holds.  Every
figure and its public source is in docs/machines.md; the derivations are
repeated next to each number below.  No figure here is fitted to measured
kernel throughput: a figure changes only with a source.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import MachineError

__all__ = ["CHIPS", "Chip"]


@dataclass(frozen=True)
class Chip:
    """Figures of one GPU part (docs/machines.md, "Chip figures").

    ``dram_bytes_per_s`` / ``l2_bytes_per_s``: bandwidth of the whole chip;
    ``l2_bytes``: L2 capacity; ``smem_port_bytes_per_clock``: what one SM's
    shared memory reads or writes per clock (32 banks x 4 B);
    ``issue_per_clock``: warp instructions one SM issues per clock (one per
    warp scheduler); ``warp_issue_per_clock``: what one warp issues per
    clock (a warp belongs to one scheduler); ``regs_per_sm`` /
    ``smem_per_sm`` / ``max_ctas_per_sm`` / ``max_warps_per_sm``: the
    residency limits; ``reg_alloc_unit``: registers are given to a warp in
    units of this many (per warp); ``smem_reserved_per_cta``: shared memory
    the driver keeps per resident block; ``shuffle_per_clock``: warp-shuffle
    results per clock per SM (the programming guide's throughput table).
    """

    part: str
    dram_bytes_per_s: float
    l2_bytes_per_s: float
    l2_bytes: int
    smem_per_sm: int
    max_ctas_per_sm: int
    max_warps_per_sm: int
    smem_port_bytes_per_clock: int = 128
    issue_per_clock: int = 4
    warp_issue_per_clock: int = 1
    regs_per_sm: int = 65536
    reg_alloc_unit: int = 256
    smem_reserved_per_cta: int = 1024
    shuffle_per_clock: int = 32

    def __post_init__(self):
        for name in ("dram_bytes_per_s", "l2_bytes_per_s", "l2_bytes", "smem_per_sm", "max_ctas_per_sm",
                     "max_warps_per_sm", "smem_port_bytes_per_clock", "issue_per_clock", "warp_issue_per_clock",
                     "regs_per_sm", "reg_alloc_unit"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise MachineError(f"chip '{self.part}': {name} must be a positive number, got {v!r}")


KB = 1024
MB = 1024 * 1024

#: Built-in machine name -> its chip.  Sources and derivations: docs/machines.md.
CHIPS: dict[str, Chip] = {
    # A100 SXM4 40 GB: 1555 GB/s HBM2 (data sheet); L2 40 MB and 5120 B/clk of L2 bandwidth
    # (A100 white paper), x 1.41 GHz = 7.22 TB/s; 164 KB shared memory, 32 blocks and 64 warps per SM
    # (programming guide, compute capability 8.0).
    "a100": Chip(part="A100 SXM4 40GB", dram_bytes_per_s=1.555e12, l2_bytes_per_s=5120 * 1.41e9,
                 l2_bytes=40 * MB, smem_per_sm=164 * KB, max_ctas_per_sm=32, max_warps_per_sm=64),
    # H100 SXM5: 3.35 TB/s HBM3 (data sheet), L2 50 MB (Hopper white paper); L2 bandwidth: no vendor
    # figure, 5.5 TB/s from microbenchmarks (docs/machines.md); 228 KB shared memory, 32 blocks,
    # 64 warps per SM (compute capability 9.0).
    "h100": Chip(part="H100 SXM5", dram_bytes_per_s=3.35e12, l2_bytes_per_s=5.5e12, l2_bytes=50 * MB,
                 smem_per_sm=228 * KB, max_ctas_per_sm=32, max_warps_per_sm=64),
    # B200: 8 TB/s HBM3e (data sheet), L2 126 MB (two dies; microbenchmark report); L2 bandwidth: H100's
    # per-SM-per-clock rate (5.5e12 / (132 x 1.83e9) = 22.8 B/clk/SM) x 148 SMs x 1.85 GHz, no vendor
    # figure; 228 KB shared memory, 32 blocks, 64 warps per SM (compute capability 10.0).
    "b200": Chip(part="B200", dram_bytes_per_s=8.0e12, l2_bytes_per_s=22.8 * 148 * 1.85e9, l2_bytes=126 * MB,
                 smem_per_sm=228 * KB, max_ctas_per_sm=32, max_warps_per_sm=64),
    # A40: 696 GB/s GDDR6 (data sheet), L2 6 MB (GA102 white paper); L2 bandwidth: no vendor figure,
    # 32 B/clk/SM assumed (docs/machines.md) x 84 x 1.74 GHz; 100 KB shared memory, 16 blocks,
    # 48 warps per SM (compute capability 8.6).
    "a40": Chip(part="A40", dram_bytes_per_s=696e9, l2_bytes_per_s=32 * 84 * 1.74e9, l2_bytes=6 * MB,
                smem_per_sm=100 * KB, max_ctas_per_sm=16, max_warps_per_sm=48),
    # Jetson AGX Orin 64GB: 204.8 GB/s LPDDR5 shared with the CPU (data sheet), L2 4 MB (Orin technical
    # brief); L2 bandwidth 32 B/clk/SM assumed; 164 KB shared memory, 16 blocks, 64 warps per SM
    # (compute capability 8.7, as docs/machines.md's per-arch table).
    "orin": Chip(part="Jetson AGX Orin 64GB", dram_bytes_per_s=204.8e9, l2_bytes_per_s=32 * 16 * 1.3e9,
                 l2_bytes=4 * MB, smem_per_sm=164 * KB, max_ctas_per_sm=16, max_warps_per_sm=64),
    # L40S: 864 GB/s GDDR6 (data sheet), L2 96 MB (Ada white paper, AD102 as in L40S); L2 bandwidth
    # 32 B/clk/SM assumed; 100 KB shared memory, 24 blocks, 48 warps per SM (compute capability 8.9).
    "l40s": Chip(part="L40S", dram_bytes_per_s=864e9, l2_bytes_per_s=32 * 142 * 2.52e9, l2_bytes=96 * MB,
                 smem_per_sm=100 * KB, max_ctas_per_sm=24, max_warps_per_sm=48),
    # GeForce RTX 5090: 1792 GB/s GDDR7 (data sheet), L2 96 MB (Blackwell GeForce white paper); L2
    # bandwidth 32 B/clk/SM assumed; 128 KB shared memory, 32 blocks, 48 warps per SM (compute
    # capability 12.0, Blackwell tuning guide).
    "rtx5090": Chip(part="GeForce RTX 5090", dram_bytes_per_s=1.792e12, l2_bytes_per_s=32 * 170 * 2.41e9,
                    l2_bytes=96 * MB, smem_per_sm=128 * KB, max_ctas_per_sm=32, max_warps_per_sm=48),
}
