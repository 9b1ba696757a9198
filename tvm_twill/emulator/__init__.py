"""tvm_twill.emulator: run the PTX of a kernel TVM built on the CPU, under adversarial timings, and report
races, deadlocks, async-copy misuse and wrong results.

``run(f, *args, seed=0, interleavings=1, source=None, blocks=None)`` executes every kernel launch the
host code of ``f`` (what ``tvm.compile`` returned for a CUDA target) makes, in order, on numpy arguments,
writing outputs back in place, and returns a ``Report``.  ``run_ptx`` is the same on PTX text and an
explicit list of launches.  The model, the rules and the findings: docs/emulator.md.

Asynchronous work follows one protocol, ``state.AsyncOp``: a cp.async copy, a bulk / TMA copy, a bulk
store, a wgmma and a cp.async.mbarrier.arrive are each an op its handler issues and the CTA completes
once, later (``CTA.complete`` calls the op's ``perform``: the data moves as the source is then); a wait
covering it calls its ``observe``, and ``completes_on`` says which mbarrier its completion advances.
mbarrier arrivals, tx-counts and phases are methods of ``state.MBarrier``, whichever op drives them.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import EmulationError
from . import findings
from .engine import Policy, run_grid
from .launch import Launch, TensorMap
from .loader import Prepared
from .memmodel import BenignRace, MixedSizeRace, ReadOnlyViolation
from .memory import GlobalMemory
from .ptx import parse

__all__ = ["BenignRace", "EmulationError", "Launch", "MixedSizeRace", "Policy", "ReadOnlyViolation", "Report",
           "TensorMap", "findings", "handled_forms", "load_ptx", "run", "run_ptx"]


@dataclass
class Report:
    ok: bool
    findings: list
    instructions: int
    seconds: float
    interleavings: int = 1
    launches: int = 0
    notes: list = field(default_factory=list)

    def __str__(self):
        head = (f"{'ok' if self.ok else 'FINDINGS'}: {len(self.findings)} findings, {self.instructions} warp "
                f"instructions, {self.launches} launches x {self.interleavings} interleavings, {self.seconds:.2f} s")
        return "\n".join([head] + [f"  {f}" for f in self.findings[:20]])


def run_ptx(ptx: str, launches, *args, seed: int = 0, interleavings: int = 1, blocks=None,
            policy: Policy | None = None) -> Report:
    """Execute ``launches`` (objects with kernel, grid, block, dyn_smem, params) of the PTX text on ``args``
    (numpy arrays and ints).  Outputs are written back into the arrays."""
    if interleavings < 1:
        raise EmulationError(f"interleavings must be at least 1, got {interleavings}")
    policy = policy or Policy()
    module = parse(ptx)
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    for a in arrays:
        if not a.flags.c_contiguous:
            raise EmulationError("every array argument must be C-contiguous; pass np.ascontiguousarray(a)")
    original = [a.copy() for a in arrays]
    t0 = time.perf_counter()
    found, total, results = [], 0, None
    for k in range(interleavings):
        for a, o in zip(arrays, original):
            a[...] = o
        rng = np.random.default_rng([seed, k])
        total += _run_once(module, launches, args, rng, policy, blocks, found.append)
        now = [a.copy() for a in arrays]
        if results is None:
            results = now
        elif any(not np.array_equal(x, y, equal_nan=True) for x, y in zip(results, now)):
            found.append(findings.Finding(findings.Where("*", (), -1, (), 0, None),
                                          f"interleaving {k} (seed {seed}) computed different outputs than "
                                          "interleaving 0: the result depends on the schedule"))
    for a, r in zip(arrays, results):
        a[...] = r
    counted = [f for f in found if policy.strict_benign_races or not isinstance(f, BenignRace)]
    return Report(not counted, found, total, time.perf_counter() - t0, interleavings, len(launches))


def _run_once(module, launches, args, rng, policy, blocks, report):
    gmem = GlobalMemory()
    buffers = {}
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            buffers[i] = gmem.add(a, f"arg{i}")
    total = 0
    for launch in launches:
        prep = Prepared(module, launch, gmem, buffers)
        total += run_grid(prep, prep.ctas(blocks), rng, policy, report)
    return total


def run(f, *args, seed: int = 0, interleavings: int = 1, source: str | None = None, blocks=None, mod=None,
        target=None, policy: Policy | None = None) -> Report:
    """Emulate every kernel launch of ``f`` (``tvm.compile`` output for CUDA) on numpy ``args``.

    ``source``: CUDA text replacing the module's (fault injection); ``blocks``: only these CTAs;
    ``interleavings``: seeded schedules (outputs that differ between them are a finding).  The launches (grid,
    block, dynamic shared memory, scalars, tensor maps) are read from ``f`` itself (``launch.launches``);
    ``target`` names the arch nvcc compiles the PTX for (default: sm_90a if the source uses Hopper features,
    else sm_80); ``mod`` is not needed and refused."""
    from .launch import launches
    ptx_text, launch_list = launches(f, args, mod=mod, target=target, source=source)
    return run_ptx(ptx_text, launch_list, *args, seed=seed, interleavings=interleavings, blocks=blocks,
                   policy=policy)


def handled_forms() -> frozenset:
    """Opcode forms (opcode with every dot modifier) that have a handler: see ``forms.FORMS``."""
    from .forms import FORMS
    return FORMS


def load_ptx(ptx: str) -> list:
    """Parse the PTX and compile every instruction of every kernel (no execution); returns the kernel names.
    Raises EmulationError naming the first opcode form without a handler and its PTX line."""
    module = parse(ptx)
    gmem = GlobalMemory()
    for name, k in module.kernels.items():
        params = tuple(("scalar", t or "u64", 0) for _, t, _, _ in k.params)
        Prepared(module, Launch(name, (1, 1, 1), (32, 1, 1), 0, params), gmem, {})
    return sorted(module.kernels)
