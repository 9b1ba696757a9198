"""One table of what each CUDA arch can execute: the only place arch strings are parsed.

An arch string is ``sm_<cc><suffix>``: a compute capability (80, 86, 90,
100, 120, ...) and an optional suffix.  ``a`` selects the arch-specific
("architecture-accelerated") instruction set of exactly that part, which
later parts do not inherit; ``f`` (PTX ISA 8.8) selects the feature set
shared by a family (sm_100f runs on sm_100 and sm_103).  Comparing arch
*strings* is wrong ("sm_100a" < "sm_90" as text), so every decision the
package makes about an arch reads a flag of :class:`ArchCaps` instead.

Each flag is the PTX ISA's "Target ISA notes" of the instruction (NVIDIA,
*Parallel Thread Execution ISA*, the section named in ``FEATURE_SOURCES``):

============== ====================================================== ==========================
flag           instruction (PTX ISA section)                           targets
============== ====================================================== ==========================
cp_async       ``cp.async`` (data-movement ... cp-async)               sm_80+
mbarrier       ``mbarrier.init/arrive/test_wait`` (... mbarrier)       sm_80+
try_wait       ``mbarrier.try_wait`` (... mbarrier-test-wait-try-wait) sm_90+
expect_tx      ``mbarrier.expect_tx``, ``arrive.expect_tx``            sm_90+
bulk_copy      ``cp.async.bulk[.tensor]`` (TMA) (... cp-async-bulk)    sm_90+
elect          ``elect.sync`` (... elect-sync)                         sm_90+
clusters       ``barrier.cluster``, ``fence.mbarrier_init``            sm_90+
proxy_fence    ``fence.proxy.async`` (... membar)                      sm_90+
wgmma          ``wgmma.mma_async`` (asynchronous-warpgroup-level ...)  sm_90a only
setmaxnreg     ``setmaxnreg`` (miscellaneous ... setmaxnreg)           sm_90a, sm_100a/f, sm_101a,
                                                                       sm_103a/f, sm_120a/f, sm_121a/f
tcgen05        ``tcgen05.mma`` and friends (tensorcore-5th-generation) sm_100a/f, sm_101a, sm_103a/f
============== ====================================================== ==========================

sm_100a has setmaxnreg, TMA and ``try_wait`` but no ``wgmma``: Blackwell's
tensor-core path is ``tcgen05``, which tvm_twill does not emit.  The
consumer parts (sm_120, sm_121) have TMA and, with ``a``/``f``,
setmaxnreg, but neither wgmma nor tcgen05.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import MachineError

__all__ = ["ArchCaps", "FEATURE_SOURCES", "parse_arch"]

#: the PTX ISA section (under docs.nvidia.com/cuda/parallel-thread-execution/) whose
#: "Target ISA notes" give each flag
FEATURE_SOURCES: dict[str, str] = {
    "cp_async": "data-movement-and-conversion-instructions-cp-async",
    "mbarrier": "parallel-synchronization-and-communication-instructions-mbarrier",
    "try_wait": "parallel-synchronization-and-communication-instructions-mbarrier-test-wait-try-wait",
    "expect_tx": "parallel-synchronization-and-communication-instructions-mbarrier-expect-tx",
    "bulk_copy": "data-movement-and-conversion-instructions-cp-async-bulk-tensor",
    "elect": "parallel-synchronization-and-communication-instructions-elect-sync",
    "clusters": "parallel-synchronization-and-communication-instructions-barrier-cluster",
    "proxy_fence": "parallel-synchronization-and-communication-instructions-membar",
    "wgmma": "asynchronous-warpgroup-level-matrix-instructions-wgmma-mma-async",
    "setmaxnreg": "miscellaneous-instructions-setmaxnreg",
    "tcgen05": "tensorcore-5th-generation-family-instructions",
}

_ARCH_RE = re.compile(r"sm_(\d+)([a-z]?)")
# compute capabilities whose "a" (and, from PTX ISA 8.8, "f") targets have setmaxnreg / tcgen05
_SETMAXNREG = {90: "a", 100: "af", 101: "a", 103: "af", 110: "af", 120: "af", 121: "af"}
_TCGEN05 = {100: "af", 101: "a", 103: "af", 110: "af"}


@dataclass(frozen=True)
class ArchCaps:
    """What one CUDA arch executes (flags documented in the module docstring)."""

    name: str               # "sm_90a"
    cc: int                 # 90
    suffix: str             # "", "a" or "f"
    cp_async: bool
    mbarrier: bool
    try_wait: bool
    expect_tx: bool
    bulk_copy: bool
    elect: bool
    clusters: bool
    proxy_fence: bool
    wgmma: bool
    setmaxnreg: bool
    tcgen05: bool

    @property
    def features(self) -> tuple[str, ...]:
        """The flags that are set, in ``FEATURE_SOURCES`` order."""
        return tuple(f for f in FEATURE_SOURCES if getattr(self, f))


def parse_arch(arch) -> ArchCaps:
    """``"sm_90a"`` -> its :class:`ArchCaps`.

    Raises MachineError (one line) for a string that is not ``sm_<digits>``
    with an optional ``a``/``f`` suffix.  Any compute capability parses; the
    caller decides what it supports (``machine_for_arch`` refuses archs
    before sm_80 and archs without a machine model).
    """
    a = str(arch).strip()
    m = _ARCH_RE.fullmatch(a)
    if not m:
        raise MachineError(f"unknown CUDA arch '{arch}': expected 'sm_' and a compute capability with an optional "
                           "'a'/'f' suffix, like 'sm_80', 'sm_86', 'sm_90a', 'sm_100a' or 'sm_120'")
    cc, suffix = int(m.group(1)), m.group(2)
    if suffix not in ("", "a", "f"):
        raise MachineError(f"unknown CUDA arch '{arch}': compute capability {cc} is written 'sm_{cc}', "
                           f"'sm_{cc}a' or 'sm_{cc}f'")
    hopper_on = cc >= 90
    return ArchCaps(
        name=a, cc=cc, suffix=suffix,
        cp_async=cc >= 80, mbarrier=cc >= 80,
        try_wait=hopper_on, expect_tx=hopper_on, bulk_copy=hopper_on, elect=hopper_on,
        clusters=hopper_on, proxy_fence=hopper_on,
        wgmma=cc == 90 and suffix == "a",
        setmaxnreg=bool(suffix) and suffix in _SETMAXNREG.get(cc, ""),
        tcgen05=bool(suffix) and suffix in _TCGEN05.get(cc, ""),
    )
