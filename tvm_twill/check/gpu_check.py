"""``PipelinePlan.verify``: the planned kernel computes what the unpipelined one computes, run on the emulator.

No GPU needed.  The function as ``auto_pipeline`` found it (``plan.source``) is compiled with
``tvm.compile`` for the plan's arch (TVM's default TIR pipeline; tvm_twill's when it issues wgmma), the
planned module with ``tvm_twill.build(mod, arch, plan)``; both run through ``tvm_twill.emulator`` on the same
small random inputs, one draw per seed, and every parameter's final values are compared within a tolerance
for the accumulation order (``TOLERANCE``, relative to the largest reference magnitude).  The planned kernel
runs under ``interleavings`` adversarial schedules; any finding of either kernel (race, deadlock, async copy
read before its wait, missing proxy fence, out-of-bounds access, ...) makes the check fail.

Unlike ``check_on_cpu`` (llvm, GPU intrinsics refused) this runs the CUDA kernels themselves: tensor cores,
cp.async, mbarrier rings, warp specialization, TMA and wgmma.  It needs nvcc (the emulator executes the PTX
nvcc writes).  ``blocks`` picks the CTAs to run (None: every CTA of the launch).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..compiler import build
from ..errors import InputError, UnsupportedLoopError
from ..frontend import parse_target
from ..frontend.ir import const_int, tirx, tvm
from ..transforms.pipelines import WS_PIPELINE, register

__all__ = ["TOLERANCE", "GpuCheck", "verify_on_emulator"]

#: Largest |planned - original| accepted, relative to max(1, max |original|), by output dtype.
TOLERANCE = {"float16": 1e-2, "bfloat16": 2e-2, "float32": 1e-3, "float64": 1e-9}


@dataclass(frozen=True)
class GpuCheck:
    """What ``verify`` found: ``findings`` are ``(kernel, seed, finding)`` with kernel "planned" or "original";
    ``max_error`` the largest relative difference over every parameter and seed; ``wrong`` names the
    parameters past ``TOLERANCE``."""

    loop: str
    arch: str
    seeds: tuple[int, ...]
    interleavings: int
    findings: tuple = ()
    max_error: float = 0.0
    wrong: tuple[str, ...] = ()
    instructions: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.findings and not self.wrong

    def __str__(self) -> str:
        head = (f"verify: loop '{self.loop}' ({self.arch}) planned vs original on the emulator, seeds "
                f"{list(self.seeds)} x {self.interleavings} interleavings: "
                f"{'ok' if self.ok else 'FAILED'}, max relative error {self.max_error:.3g}, "
                f"{len(self.findings)} findings, {self.instructions} warp instructions, {self.seconds:.1f} s")
        lines = [head] + [f"  {p} differs past its tolerance" for p in self.wrong]
        lines += [f"  {kernel} kernel (seed {seed}): {f}" for kernel, seed, f in self.findings[:20]]
        return "\n".join(lines)


def _params(mod) -> list:
    funcs = [f for _, f in mod.functions_items() if isinstance(f, tirx.PrimFunc)]
    if len(funcs) != 1:
        raise UnsupportedLoopError(f"verify: the module has {len(funcs)} functions: it checks one")
    out = []
    for buf in funcs[0].params:
        shape = [const_int(d) for d in getattr(buf, "shape", None) or ()]
        if getattr(buf, "shape", None) is None or any(d is None for d in shape):
            raise UnsupportedLoopError(f"verify: parameter '{buf.name}' is not a buffer of fixed shape: check an "
                                       "instance with fixed shapes")
        out.append((buf.name, tuple(shape), str(buf.dtype)))
    return out


def _inputs(params, seed: int) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for _, shape, dtype in params:
        if dtype.startswith("float"):
            out.append(rng.uniform(-1, 1, shape).astype(dtype))
        else:
            out.append(rng.integers(0, 4, size=shape).astype("bool" if dtype == "bool" else dtype))
    return out


def _compare(params, ref, got) -> tuple[float, list]:
    worst, wrong = 0.0, []
    for (name, _, dtype), r, g in zip(params, ref, got):
        r64, g64 = r.astype(np.float64), g.astype(np.float64)
        scale = max(1.0, float(np.nanmax(np.abs(r64)))) if r64.size else 1.0
        diff = np.abs(r64 - g64)
        diff[np.isnan(r64) & np.isnan(g64)] = 0.0
        err = float(np.nan_to_num(diff, nan=np.inf).max()) / scale if diff.size else 0.0
        worst = max(worst, err)
        if err > TOLERANCE.get(dtype, 0.0):
            wrong.append(name)
    return worst, wrong


def _compile_original(plan, target):
    pipeline = register(WS_PIPELINE) if plan.wgmma else "default"
    return tvm.compile(plan.source, target=target, tir_pipeline=pipeline)


def verify_on_emulator(plan, mod, *, seeds=3, interleavings: int = 2, blocks=None) -> GpuCheck:
    """Emulate ``build(mod, plan.arch, plan)`` and the unpipelined ``plan.source`` on the same random inputs
    for each seed (``seeds``: a count or a list), compare every parameter; see the module doc."""
    from .. import emulator

    if plan.source is None:
        raise InputError("verify needs the plan's source module: use a plan auto_pipeline returned")
    seed_list = tuple(range(seeds)) if isinstance(seeds, int) else tuple(int(s) for s in seeds)
    if not seed_list or interleavings < 1:
        raise InputError(f"verify needs at least one seed and one interleaving, got seeds={seeds!r}, "
                         f"interleavings={interleavings}")
    params = _params(plan.source)
    arch, target = parse_target(plan.arch)
    planned, original = build(mod, target, plan), _compile_original(plan, target)
    t0 = time.perf_counter()
    found, worst, wrong, total = [], 0.0, set(), 0
    for seed in seed_list:
        results = []
        for kernel, f, n in (("original", original, 1), ("planned", planned, interleavings)):
            args = _inputs(params, seed)
            report = emulator.run(f, *args, seed=seed, interleavings=n, blocks=blocks, target=target)
            found += [(kernel, seed, x) for x in report.findings]
            total += report.instructions
            results.append(args)
        err, bad = _compare(params, *results)
        if all(np.array_equal(a, b, equal_nan=True) for a, b in zip(_inputs(params, seed), results[1])):
            bad.append("(no parameter written: no CTA of blocks computed anything)")
        worst, wrong = max(worst, err), wrong | set(bad)
    return GpuCheck(loop=plan.loop, arch=arch, seeds=seed_list, interleavings=interleavings, findings=tuple(found),
                    max_error=worst, wrong=tuple(sorted(wrong)), instructions=total,
                    seconds=time.perf_counter() - t0)
