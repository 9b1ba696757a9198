"""Machine descriptions (``tvm-twill-machine/1``) and the built-in models.

A machine gives the capacity of each functional unit per SM, the warp roles
a schedule may use, and the on-chip memories.  Built-ins are derived from
NVIDIA's CUDA C++ Programming Guide (its throughput table) and the
architecture papers; the figures and their sources are in docs/machines.md:

* Units.  Tile-level ops occupy a whole SM's unit, so each unit has capacity
  1: ``TC`` the tensor cores (mma.sync / wgmma / tcgen05.mma), ``SFU`` the
  MUFU pipe (ex2 and friends), ``ALU`` the FP32/INT pipes, ``TMA`` the async
  global->shared copy engine (cp.async on sm_80, cp.async.bulk.tensor on
  sm_90a/sm_100a; one name so one graph runs on every machine).
* Warp roles.  ``warp_groups`` = 4 roles of ``warps_per_group`` = 4 warps
  (128 threads): Hopper/Blackwell issue wgmma/tcgen05 per warp group and a
  4-group block is the largest that still leaves 128 registers per thread
  (65536 / 512).  A100 keeps the same role structure so schedules compare.
* Registers: 65536 32-bit registers per SM, at most 255 per thread.
* Shared memory per block: 163 KB (A100), 227 KB (H100, B200).
* Tensor memory: 256 KB on B200 (128 lanes x 512 columns x 4 bytes), none before.
* ``spill_cost`` = 1 time unit: the built-ins are used with graphs whose
  times are already small integers; a graph in raw cycles should give each
  op's ``spill_cost`` itself (a 64 KiB fp32 tile through shared memory at
  128 B/clk is about 1000 cycles).

The cost-model figures (``tc_flops_per_clock`` ...) are used by the TIR
front-end to turn tile shapes into cycles; they are not part of the JSON
format and a machine read from JSON has none (``costs`` is None).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import MachineError

MACHINE_FORMAT = "tvm-twill-machine/1"


@dataclass(frozen=True)
class CostModel:
    """Per-SM throughput figures for turning tile shapes into cycles."""

    arch: str
    sms: int
    clock_ghz: float
    tc_flops_per_clock: int      # dense fp16/bf16 FLOP per clock per SM
    mufu_per_clock: int          # ex2 results per clock per SM
    fma_per_clock: int           # fp32 FMA results per clock per SM
    hbm_bytes_per_clock: float   # DRAM bandwidth / (SMs x clock)
    smem_bytes_per_clock: int = 128  # shared-memory bandwidth per SM (32 banks x 4 B)


@dataclass(frozen=True)
class Machine:
    name: str
    units: dict = field(default_factory=dict)
    warp_groups: int = 4
    warps_per_group: int = 4
    regs_per_thread_max: int = 255
    regs_per_sm: int = 65536
    smem_bytes: int = 232448
    tmem_bytes: int = 0
    spill_cost: int = 1
    costs: CostModel | None = field(default=None, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "units", dict(self.units))
        self.validate()

    def __hash__(self):
        return hash((self.name, tuple(sorted(self.units.items())), self.warp_groups))

    def capacity(self, unit: str) -> int:
        return self.units[unit]

    @property
    def arch(self) -> str | None:
        return self.costs.arch if self.costs else None

    def validate(self) -> None:
        from .graph import MAX_INT, check_name, show_int

        check_name(self.name, "machine name", MachineError)

        def pos(v, what, minimum=1):
            if not isinstance(v, bool) and isinstance(v, int) and v > MAX_INT:
                raise MachineError(f"machine '{self.name}': {what} is {show_int(v)}, beyond what any GPU has "
                                   f"(at most {MAX_INT})")
            if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
                raise MachineError(f"machine '{self.name}': {what} must be an integer >= {minimum}, "
                                   f"got {show_int(v) if isinstance(v, int) else repr(v)[:100]}")
        if not self.units:
            raise MachineError(f"machine '{self.name}' has no units: give at least one unit with capacity >= 1")
        for u, c in self.units.items():
            check_name(u, f"machine '{self.name}' unit name", MachineError)
            if isinstance(c, bool) or not isinstance(c, int) or c < 1:
                raise MachineError(f"machine '{self.name}': unit '{u}' capacity must be an integer >= 1, "
                                   f"got {show_int(c) if isinstance(c, int) else repr(c)[:100]} (a unit with zero capacity can run nothing; remove it)")
            pos(c, f"unit '{u}' capacity")
        pos(self.warp_groups, "warp_groups")
        pos(self.warps_per_group, "warps_per_group")
        pos(self.regs_per_thread_max, "regs_per_thread_max")
        pos(self.regs_per_sm, "regs_per_sm")
        pos(self.smem_bytes, "smem_bytes", 0)
        pos(self.tmem_bytes, "tmem_bytes", 0)
        pos(self.spill_cost, "spill_cost", 0)


_UNITS = {"TC": 1, "SFU": 1, "ALU": 1, "TMA": 1}

#: Built-in machines.  Derivations are in the module docstring.
BUILTIN_MACHINES: dict[str, Machine] = {
    "a100": Machine(
        name="a100", units=_UNITS, smem_bytes=163 * 1024, tmem_bytes=0,
        costs=CostModel(arch="sm_80", sms=108, clock_ghz=1.41, tc_flops_per_clock=2048,
                        mufu_per_clock=16, fma_per_clock=64,
                        # 1.555e12 B/s / (108 SMs x 1.41e9 clk/s)
                        hbm_bytes_per_clock=round(1.555e12 / (108 * 1.41e9), 2))),
    "h100": Machine(
        name="h100", units=_UNITS, smem_bytes=227 * 1024, tmem_bytes=0,
        costs=CostModel(arch="sm_90a", sms=132, clock_ghz=1.83, tc_flops_per_clock=4096,
                        mufu_per_clock=16, fma_per_clock=128,
                        # 3.35e12 B/s / (132 SMs x 1.83e9 clk/s) ~ 14 B/clk
                        hbm_bytes_per_clock=round(3.35e12 / (132 * 1.83e9), 2))),
    "b200": Machine(
        name="b200", units=_UNITS, smem_bytes=227 * 1024, tmem_bytes=128 * 512 * 4,
        costs=CostModel(arch="sm_100a", sms=148, clock_ghz=1.85, tc_flops_per_clock=8192,
                        mufu_per_clock=16, fma_per_clock=128,
                        # 8e12 B/s / (148 SMs x 1.85e9 clk/s)
                        hbm_bytes_per_clock=round(8.0e12 / (148 * 1.85e9), 2))),
}


def get_machine(name_or_machine) -> Machine:
    """A built-in machine by name (``a100``, ``h100``, ``b200``), or the Machine itself."""
    if isinstance(name_or_machine, Machine):
        return name_or_machine
    key = str(name_or_machine).lower()
    if key not in BUILTIN_MACHINES:
        raise MachineError(f"unknown machine '{name_or_machine}': use one of "
                           f"{', '.join(BUILTIN_MACHINES)} or a tvm-twill-machine/1 JSON file")
    return BUILTIN_MACHINES[key]


def machine_for_arch(arch: str) -> Machine:
    """The built-in model of a CUDA arch string: sm_8x -> a100, sm_90[a] -> h100, sm_10x -> b200."""
    a = str(arch).lower().strip()
    digits = "".join(ch for ch in a.removeprefix("sm_") if ch.isdigit())
    if not a.startswith("sm_") or not digits:
        raise MachineError(f"unknown CUDA arch '{arch}': expected a string like 'sm_80', 'sm_90a' or 'sm_100a'")
    cc = int(digits)
    if 80 <= cc < 90:
        return BUILTIN_MACHINES["a100"]
    if 90 <= cc < 100:
        return BUILTIN_MACHINES["h100"]
    if 100 <= cc < 110:
        return BUILTIN_MACHINES["b200"]
    raise MachineError(f"no machine model for '{arch}': tvm_twill models sm_80 (a100), "
                       "sm_90a (h100) and sm_100a (b200)")
