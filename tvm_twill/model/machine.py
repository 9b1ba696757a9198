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
  ``b200`` instead names FlashAttention-4's six roles (``FA4_ROLES``: two
  softmax warp groups, a correction warp group, single MMA, epilogue and
  load warps, with their setmaxnreg budgets); ``generic_roles`` gives the
  interchangeable four that the TIR passes plan on.
* Registers: 65536 32-bit registers per SM, at most 255 per thread.
* Shared memory per block: 163 KB (A100, Orin), 99 KB (A40, L40S, RTX 5090),
  227 KB (H100, B200): the programming guide's per-compute-capability
  maximum (per SM minus the 1 KB the driver reserves per block).
* One built-in per arch TVM targets, modelled on one part: sm_80 ``a100``,
  sm_86 ``a40`` (GA102: 1024 dense fp16 tensor FLOP/clk/SM = 149.7 TFLOPS /
  (84 SMs x 1.74 GHz); 128 fp32 FMA/clk/SM), sm_87 ``orin`` (Jetson AGX
  Orin: 16 SMs at 1.3 GHz, A100-class tensor cores, 2048 FLOP/clk/SM from
  170 sparse INT8 TOPS), sm_89 ``l40s`` (AD102: 1024 FLOP/clk/SM, 362
  TFLOPS / (142 x 2.52 GHz)), sm_90[a] ``h100``, sm_100[a|f] and sm_103
  ``b200``, sm_120[a|f] and sm_121 ``rtx5090`` (GB202 consumer Blackwell:
  1024 FLOP/clk/SM = 419 TFLOPS / (170 x 2.41 GHz), mma.sync only: no wgmma,
  no tcgen05, no tensor memory; 128 KB shared memory per SM, 99 KB per
  block).  GeForce parts halve the fp16 rate with fp32 accumulation; the
  data-center rate is used (docs/machines.md).
* Tensor memory: 256 KB on B200 (128 lanes x 512 columns x 4 bytes), none before.
* ``spill_cost`` = 1 time unit: the built-ins are used with graphs whose
  times are already small integers; a graph in raw cycles should give each
  op's ``spill_cost`` itself (a 64 KiB fp32 tile through shared memory at
  128 B/clk is about 1000 cycles).

* Chip figures (``CostModel.chip``, ``model/chip.py``): DRAM and L2
  bandwidth, L2 size, the shared-memory port, issue slots and residency
  limits of each part, with their sources in docs/machines.md.

The cost-model figures (``tc_flops_per_clock`` ...) are used by the TIR
front-end to turn tile shapes into cycles; they are not part of the JSON
format and a machine read from JSON has none (``costs`` is None).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import MachineError
from .arch import parse_arch
from .chip import CHIPS, Chip

MACHINE_FORMAT = "tvm-twill-machine/1"
#: Interchangeable warp roles of a machine without named ones (module docstring).
GENERIC_ROLES = 4


@dataclass(frozen=True)
class CostModel:
    """Per-SM throughput figures for turning tile shapes into cycles."""

    arch: str
    sms: int
    clock_ghz: float
    tc_flops_per_clock: int      # dense fp16/bf16 FLOP per clock per SM
    mufu_per_clock: int          # ex2 results per clock per SM
    fma_per_clock: int           # fp32 FMA results per clock per SM
    hbm_bytes_per_s: float       # DRAM bandwidth of the whole GPU, bytes per second
    smem_bytes_per_clock: int = 128  # shared-memory bandwidth per SM (32 banks x 4 B)
    chip: Chip | None = None     # memory levels, issue slots, residency limits (model/chip.py)

    @property
    def hbm_bytes_per_clock(self) -> float:
        """The DRAM bandwidth one SM gets per clock: bandwidth / (SMs x clock), to 2 decimals."""
        return round(self.hbm_bytes_per_s / (self.sms * self.clock_ghz * 1e9), 2)


@dataclass(frozen=True)
class WarpRole:
    """A named warp role of a machine whose roles are not interchangeable (the FA4 split of ``b200``):
    ``warps`` warps issue its ops together, ``regs`` registers per thread (its setmaxnreg budget);
    ``streams``: the role that issues the variable-latency copies (the load warp); ``in_loop`` False: a
    role that issues none of the loop's ops (FA4's epilogue warp stores O after the KV loop)."""

    name: str
    warps: int
    regs: int
    streams: bool = False
    in_loop: bool = True

    @property
    def kind(self) -> tuple:
        """What the solver sees of the role: two roles of one kind are interchangeable."""
        return (self.warps, self.regs, self.streams, self.in_loop)


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
    #: Named warp roles, one per warp group (``WarpRole``): role ``k`` issues only ops of exactly its warp
    #: count and holds at most its register budget; the last may stream.  Empty: interchangeable roles of
    #: ``warps_per_group`` warps and ``regs_per_thread_max`` registers each.
    roles: tuple = ()

    def generic_roles(self) -> Machine:
        """The machine with interchangeable roles (4 of ``warps_per_group`` warps), as every machine without
        named roles has: what the TIR passes plan on (they emit no FA4-style kernel)."""
        return replace(self, roles=(), warp_groups=GENERIC_ROLES) if self.roles else self

    def role_regs(self, warp: int) -> int:
        """The register budget of role ``warp``: its named role's, else ``regs_per_thread_max``."""
        return self.roles[warp].regs if self.roles and 0 <= warp < len(self.roles) else self.regs_per_thread_max

    def role_takes(self, warp: int, op) -> bool:
        """Can role ``warp`` issue ``op``?  Any role of interchangeable ones; a named role: ops of its width."""
        if not self.roles or not 0 <= warp < len(self.roles):
            return True
        return self.roles[warp].in_loop and self.roles[warp].warps == op.warps

    def __post_init__(self):
        object.__setattr__(self, "units", dict(self.units))
        self.validate()

    def __hash__(self):
        return hash((self.name, tuple(sorted(self.units.items())), self.warp_groups))

    def capacity(self, unit: str) -> int:
        return self.units[unit]

    def spill_of(self, op) -> int:
        """Cycles to hand ``op``'s value to another warp: the op's own ``spill_cost``, else the machine's."""
        return self.spill_cost if op.spill_cost is None else op.spill_cost

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
        if self.roles:
            _validate_roles(self)


def _validate_roles(m: Machine) -> None:
    """Named roles: one per warp group, budgets within the per-thread maximum and, together, the SM's file."""
    if len(m.roles) != m.warp_groups:
        raise MachineError(f"machine '{m.name}': {len(m.roles)} named roles for {m.warp_groups} warp groups: "
                           "give one role per warp group")
    for r in m.roles:
        if not isinstance(r, WarpRole) or r.warps < 1 or not 24 <= r.regs <= m.regs_per_thread_max:
            raise MachineError(f"machine '{m.name}': role {r!r} needs >= 1 warps and 24..{m.regs_per_thread_max} "
                               "registers per thread")
    if any(r.streams for r in m.roles[:-1]):
        raise MachineError(f"machine '{m.name}': only the last named role may stream (the variable-latency role "
                           "is the last warp group)")
    used = sum(r.warps * 32 * r.regs for r in m.roles)
    if used > m.regs_per_sm:
        raise MachineError(f"machine '{m.name}': its roles hold {used} registers, more than the SM's {m.regs_per_sm}")


_UNITS = {"TC": 1, "SFU": 1, "ALU": 1, "TMA": 1}

#: FlashAttention-4's forward kernel on sm_100 (16 warps, 512 threads): two softmax warp groups, a
#: correction warp group, one warp each issuing the MMAs, the loads and the epilogue (a 16th warp idles);
#: setmaxnreg budgets for head dim 128: softmax 192, correction 80, the other warp group 512 - 2 x 192 -
#: 80 = 48 (docs/machines.md cites the source).
FA4_ROLES = (WarpRole("softmax0", 4, 192), WarpRole("softmax1", 4, 192), WarpRole("correction", 4, 80),
             WarpRole("mma", 1, 48), WarpRole("epilogue", 1, 48, in_loop=False), WarpRole("load", 1, 48, streams=True))

#: Built-in machines.  Derivations are in the module docstring.
BUILTIN_MACHINES: dict[str, Machine] = {
    "a100": Machine(
        name="a100", units=_UNITS, smem_bytes=163 * 1024, tmem_bytes=0,
        costs=CostModel(arch="sm_80", sms=108, clock_ghz=1.41, tc_flops_per_clock=2048,
                        mufu_per_clock=16, fma_per_clock=64,
                        # 1.555e12 B/s / (108 SMs x 1.41e9 clk/s)
                        hbm_bytes_per_s=1.555e12, chip=CHIPS["a100"])),
    "h100": Machine(
        name="h100", units=_UNITS, smem_bytes=227 * 1024, tmem_bytes=0,
        costs=CostModel(arch="sm_90a", sms=132, clock_ghz=1.83, tc_flops_per_clock=4096,
                        mufu_per_clock=16, fma_per_clock=128,
                        # 3.35e12 B/s / (132 SMs x 1.83e9 clk/s) ~ 14 B/clk
                        hbm_bytes_per_s=3.35e12, chip=CHIPS["h100"])),
    "b200": Machine(
        name="b200", units=_UNITS, smem_bytes=227 * 1024, tmem_bytes=128 * 512 * 4, warp_groups=len(FA4_ROLES),
        roles=FA4_ROLES,
        costs=CostModel(arch="sm_100a", sms=148, clock_ghz=1.85, tc_flops_per_clock=8192,
                        mufu_per_clock=16, fma_per_clock=128,
                        # 8e12 B/s / (148 SMs x 1.85e9 clk/s)
                        hbm_bytes_per_s=8.0e12, chip=CHIPS["b200"])),
}


_AMPERE_UNITS = _UNITS  # cp.async takes the TMA unit's place (module docstring)

BUILTIN_MACHINES.update({
    "a40": Machine(
        name="a40", units=_AMPERE_UNITS, smem_bytes=99 * 1024, tmem_bytes=0,
        costs=CostModel(arch="sm_86", sms=84, clock_ghz=1.74, tc_flops_per_clock=1024,
                        mufu_per_clock=16, fma_per_clock=128,
                        # 696e9 B/s / (84 SMs x 1.74e9 clk/s)
                        hbm_bytes_per_s=696e9, chip=CHIPS["a40"])),
    "orin": Machine(
        name="orin", units=_AMPERE_UNITS, smem_bytes=163 * 1024, tmem_bytes=0,
        costs=CostModel(arch="sm_87", sms=16, clock_ghz=1.3, tc_flops_per_clock=2048,
                        mufu_per_clock=16, fma_per_clock=128,
                        # 204.8e9 B/s LPDDR5 (shared with the CPU) / (16 SMs x 1.3e9 clk/s)
                        hbm_bytes_per_s=204.8e9, chip=CHIPS["orin"])),
    "l40s": Machine(
        name="l40s", units=_AMPERE_UNITS, smem_bytes=99 * 1024, tmem_bytes=0,
        costs=CostModel(arch="sm_89", sms=142, clock_ghz=2.52, tc_flops_per_clock=1024,
                        mufu_per_clock=16, fma_per_clock=128,
                        # 864e9 B/s / (142 SMs x 2.52e9 clk/s)
                        hbm_bytes_per_s=864e9, chip=CHIPS["l40s"])),
    "rtx5090": Machine(
        name="rtx5090", units=_UNITS, smem_bytes=99 * 1024, tmem_bytes=0,
        costs=CostModel(arch="sm_120", sms=170, clock_ghz=2.41, tc_flops_per_clock=1024,
                        mufu_per_clock=16, fma_per_clock=128,
                        # 1.792e12 B/s / (170 SMs x 2.41e9 clk/s)
                        hbm_bytes_per_s=1.792e12, chip=CHIPS["rtx5090"])),
})

#: Compute capability -> built-in machine, and the arch suffixes each accepts
#: ("a": arch-specific features, "f": family-specific, CUDA 12.9+).
ARCH_MACHINES: dict[int, tuple[str, tuple[str, ...]]] = {
    80: ("a100", ("",)), 86: ("a40", ("",)), 87: ("orin", ("",)), 89: ("l40s", ("",)),
    90: ("h100", ("", "a")),
    100: ("b200", ("", "a", "f")), 103: ("b200", ("", "a", "f")),
    120: ("rtx5090", ("", "a", "f")), 121: ("rtx5090", ("", "a", "f")),
}


def get_machine(name_or_machine) -> Machine:
    """A built-in machine by name (``BUILTIN_MACHINES``: a100, h100, b200, a40, ...), or the Machine itself."""
    if isinstance(name_or_machine, Machine):
        return name_or_machine
    key = str(name_or_machine).lower()
    if key not in BUILTIN_MACHINES:
        raise MachineError(f"unknown machine '{name_or_machine}': use one of "
                           f"{', '.join(BUILTIN_MACHINES)} or a tvm-twill-machine/1 JSON file")
    return BUILTIN_MACHINES[key]


def machine_for_arch(arch: str) -> Machine:
    """The built-in model of a CUDA arch string (``ARCH_MACHINES``: sm_80 -> a100, sm_86 -> a40,
    sm_87 -> orin, sm_89 -> l40s, sm_90[a] -> h100, sm_100[a|f] -> b200, sm_120[a|f] -> rtx5090).

    Raises MachineError (one line) for a malformed string ("sm_80x"), an arch
    before sm_80 and an arch without a model ("sm_999").
    """
    caps = parse_arch(arch)
    cc, suffix = caps.cc, caps.suffix
    if cc < 80:
        raise MachineError(f"CUDA arch '{arch}' predates sm_80: tvm_twill needs cp.async (sm_80 or newer)")
    known = ", ".join(f"sm_{c} ({name})" for c, (name, _) in ARCH_MACHINES.items())
    if cc not in ARCH_MACHINES:
        raise MachineError(f"no machine model for CUDA arch '{arch}': tvm_twill models {known}; pass a "
                           "Machine (machine=...) for another part")
    name, suffixes = ARCH_MACHINES[cc]
    if suffix not in suffixes:
        allowed = ", ".join(f"'sm_{cc}{x}'" for x in suffixes)
        raise MachineError(f"unknown CUDA arch '{arch}': compute capability {cc} is written {allowed}")
    return BUILTIN_MACHINES[name]
