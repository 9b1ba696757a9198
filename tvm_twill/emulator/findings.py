"""Typed findings of the emulator.  Each names the kernel, the CTA, the warp and lanes, the PTX line and the
CUDA source line (from ``.loc``; None where nvcc gave none)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Where:
    kernel: str
    cta: tuple
    warp: int
    lanes: tuple
    ptx_line: int
    cuda_line: int | None

    def __str__(self):
        lanes = _lanes(self.lanes)
        return (f"{self.kernel} cta {self.cta} warp {self.warp} lanes {lanes} PTX line {self.ptx_line}"
                f" (CUDA line {self.cuda_line})")


def _lanes(lanes):
    if not lanes:
        return "-"
    if list(lanes) == list(range(lanes[0], lanes[-1] + 1)):
        return f"{lanes[0]}-{lanes[-1]}" if len(lanes) > 1 else str(lanes[0])
    return ",".join(map(str, lanes))


@dataclass(frozen=True)
class Finding:
    where: Where
    message: str

    @property
    def kind(self) -> str:
        return type(self).__name__

    def __str__(self):
        return f"{self.kind}: {self.message} at {self.where}"


@dataclass(frozen=True)
class DataRace(Finding):
    """Two accesses to the same bytes, at least one a write, not ordered by happens-before.
    ``other`` is the earlier access (warp, PTX line, CUDA line, 'read'/'write')."""

    other: tuple = field(default=())
    address: int = 0


@dataclass(frozen=True)
class AsyncReadBeforeWait(Finding):
    """A read of an async copy's destination before its completion was observed (wait_group / mbarrier)."""

    address: int = 0


@dataclass(frozen=True)
class InFlightOverwrite(Finding):
    """A write to bytes an in-flight async copy still writes."""

    address: int = 0


@dataclass(frozen=True)
class MbarrierMisuse(Finding):
    """An mbarrier used before init / after inval, initialised twice, over-arrived, or its tx-count underflowed."""


@dataclass(frozen=True)
class Deadlock(Finding):
    """Every live warp is blocked; ``blocked`` lists each warp's blocking instruction."""

    blocked: tuple = ()


@dataclass(frozen=True)
class BarrierMismatch(Finding):
    """bar.sync thread counts that disagree for one barrier id, or a barrier / .aligned collective reached by
    part of a warp (divergent)."""


@dataclass(frozen=True)
class BadAccess(Finding):
    """An out-of-bounds or misaligned memory access."""

    address: int = 0


@dataclass(frozen=True)
class PoisonUse(Finding):
    """A poisoned value (uninitialized shared memory, an unobserved async destination) reached a global
    store, a branch predicate or an address."""


@dataclass(frozen=True)
class UninitializedRead(Finding):
    """A read of shared memory that nothing wrote (reported when ``strict_uninitialized``)."""

    address: int = 0


@dataclass(frozen=True)
class ProxyFenceMissing(Finding):
    """An async-proxy read (wgmma) of shared bytes an ordinary store wrote, with no fence.proxy.async by the
    writer happening before the async operation was issued."""

    address: int = 0


@dataclass(frozen=True)
class SetmaxnregMisuse(Finding):
    """setmaxnreg out of range, not a multiple of 8, in the wrong direction, reached by part of a warp, or not
    the same instruction in every warp of its warp group."""


@dataclass(frozen=True)
class WgmmaFenceMissing(Finding):
    """A wgmma.mma_async with no wgmma.fence before it: the warp's first, or one using an accumulator or A register
    an instruction wrote since the warp's last wgmma.fence."""


@dataclass(frozen=True)
class Trap(Finding):
    """A ``trap`` instruction executed."""


@dataclass(frozen=True)
class UnfinishedAsync(Finding):
    """The kernel exited with async copies never waited for."""
