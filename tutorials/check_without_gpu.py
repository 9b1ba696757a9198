"""Check a generated kernel without a GPU: run its PTX on tvm_twill's emulator, against numpy.

Needs TVM and nvcc (the emulator executes the PTX nvcc writes for the CUDA TVM generated), no GPU::

    python tutorials/check_without_gpu.py

1. Plan TVM's tensor-core GEMM for sm_80 with ``auto_pipeline`` and build it with ``tvm_twill.build``.
2. Run it with ``tvm_twill.emulator.run(f, A, B, C, blocks=...)`` on two CTAs under adversarial timings
   (warps preempted at random, async copies completing as late as is legal); C is written in place and
   compared with numpy.  ``report.ok`` is False on any finding (race, deadlock, copy read before its wait, ...).
3. ``plan.verify(sch.mod)`` does the same against the unpipelined original, over several seeds.
4. A planted bug: the kernel's ``cp.async.wait_group`` removed from its CUDA source (``source=``); the emulator
   reports where the kernel reads a copy's destination before the copy is known to have landed.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

try:
    import tvm_twill  # noqa: F401
except ImportError:  # running from a source checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

N = 256
CTAS = [(0, 0, 0), (0, 1, 0)]  # two 128 x 128 tiles of C; at N = 256 the k loop runs 8 trips: every ring wraps


def _emulate(f, source=None, seed=0):
    import numpy as np

    from tvm_twill import emulator
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (N, N)).astype(np.float16)
    b = rng.uniform(-1, 1, (N, N)).astype(np.float16)
    c = np.zeros((N, N), np.float32)
    report = emulator.run(f, a, b, c, blocks=CTAS, interleavings=2, seed=seed, source=source)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    done = c != 0
    err = float(np.abs(c - ref)[done].max()) if done.any() else float("inf")
    return report, int(done.sum()), err


def main(argv=None) -> int:
    argparse.ArgumentParser(description="check a generated GEMM on the CPU emulator").parse_args(argv)

    import tvm_twill
    from tvm_twill.workloads import tensorcore_gemm

    # 1. plan and build
    sch, k0, k1 = tensorcore_gemm(N)
    plan = tvm_twill.auto_pipeline(sch, [k0, k1], "sm_80")
    print(f"plan: {plan.annotations} (tir_pipeline={plan.tir_pipeline!r})")
    f = tvm_twill.build(sch.mod, "sm_80", plan)
    src = f.mod.imports[0].inspect_source()

    # 2. the kernel on the emulator, against numpy
    report, done, err = _emulate(f)
    print(f"emulated: {report}")
    print(f"numpy: {done} elements of C computed by {len(CTAS)} CTAs, max |C - A @ B| = {err:.2e}")
    if not report.ok or err > 1e-3:
        print("unexpected: the generated kernel has findings or wrong values", file=sys.stderr)
        return 1

    # 3. the same against the unpipelined original, over seeds
    check = plan.verify(sch.mod, seeds=2, blocks=CTAS)
    print(check)
    if not check.ok:
        return 1

    # 4. a planted bug: every cp.async wait of the kernel removed from its CUDA source
    bad = re.sub(r'asm volatile\("cp\.async\.wait_group \d+;"[^;]*;', ";", src)
    if bad == src:
        print("no cp.async wait in this kernel", file=sys.stderr)
        return 1
    report, done, err = _emulate(f, source=bad)
    print(f"planted bug (cp.async waits removed): {'caught' if not report.ok else 'NOT caught'}, "
          f"{len(report.findings)} findings, max |C - A @ B| = {err:.2e}")
    for kind in sorted({x.kind for x in report.findings}):
        first = next(x for x in report.findings if x.kind == kind)
        print(f"  {first}")
    return 0 if not report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
