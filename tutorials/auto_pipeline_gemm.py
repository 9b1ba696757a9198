"""Replace hand-written ``software_pipeline_*`` annotations with ``tvm_twill.auto_pipeline``.

Runs without a GPU (TVM generates CUDA source without one; nvcc, if installed,
reports registers and spills)::

    python tutorials/auto_pipeline_gemm.py                # sm_90a, simple loop
    python tutorials/auto_pipeline_gemm.py --arch sm_80 --nested

The kernel is the tensor-core GEMM of TVM's own software-pipeline tests
(``tvm.testing.tir.mma_schedule``: 4096^3, fp16 inputs, fp32 accumulation,
ldmatrix + mma.sync m16n8k16).  Its loop ``k_0_0`` holds two global->shared
copies and the loop ``k_0_1`` of ldmatrix + mma.  TVM's tests pipeline it by
hand::

    sch.annotate(k0, "software_pipeline_stage", [0, 0, 3])
    sch.annotate(k0, "software_pipeline_order", [0, 1, 2])
    sch.annotate(k0, "software_pipeline_async_stages", [0])

This tutorial derives the annotations instead, explains them, compares the
model II with the hand annotation, compiles with ``tvm_twill.build(sch.mod,
arch, plan)`` (a bare ``tvm.compile`` emits no cp.async) and shows the
cp.async lines.
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="auto_pipeline on TVM's tensor-core GEMM")
    ap.add_argument("--arch", default="sm_90a", help="CUDA arch (sm_80, sm_90a, ...)")
    ap.add_argument("--nested", action="store_true", help="also pipeline the inner ldmatrix/mma loop")
    ap.add_argument("--no-nvcc", action="store_true", help="skip the nvcc register/spill report")
    args = ap.parse_args(argv)

    import tvm_twill
    from tvm_twill.compiler.sass import print_ptxas_report
    from tvm_twill.workloads import tensorcore_gemm

    # 1. The schedule, and the one line that replaces the three sch.annotate calls.
    sch, k0, k1 = tensorcore_gemm()  # TVM's tensor-core GEMM from its pipeline tests
    plan = tvm_twill.auto_pipeline(sch, [k0, k1] if args.nested else k0, args.arch)
    print(plan.explain())

    # 2. The same loop with TVM's hand annotation, measured under the same model.
    hand, hk0, hk1 = tensorcore_gemm()
    hand.annotate(hk0, "software_pipeline_stage", [0, 0, 2, 3, 3] if args.nested else [0, 0, 3])
    hand.annotate(hk0, "software_pipeline_order", [0, 1, 3, 2, 4] if args.nested else [0, 1, 2])
    hand.annotate(hk0, "software_pipeline_async_stages", [0])
    if args.nested:
        hand.annotate(hk1, "software_pipeline_stage", [0, 0, 1])
        hand.annotate(hk1, "software_pipeline_order", [0, 1, 2])
    ev = tvm_twill.evaluate_annotation(hand, hk0, args.arch)
    print(f"\nmodel II per k_0_0 iteration: auto_pipeline {plan.ii_cycles} cycles "
          f"(stages {plan.annotations['software_pipeline_stage']}), TVM hand annotation {ev.ii_cycles} cycles "
          f"(stages {list(ev.annotation.stages)}); shared memory {plan.smem_bytes} vs {ev.smem_bytes} bytes")

    # 3. Compile as planned (no GPU needed) and look at the asynchronous copies.  tvm_twill.build is
    #    tvm.compile under plan.pass_context() (tirx.use_async_copy) with plan.tir_pipeline.
    lib = tvm_twill.build(sch.mod, args.arch, plan)
    src = lib.mod.imports[0].inspect_source()
    kernel = src[src.index('extern "C" __global__'):]
    print("\nCUDA excerpts (cp.async, commit and wait groups):")
    for line in kernel.splitlines():
        if re.search(r"cp_async|for \(int k_0_0", line):
            print("   ", line.strip()[:140])
    waits = re.findall(r"wait_group_(\d+)\(\);", kernel)
    print(f"cp.async.wait_group counts in the kernel: {waits}; predicted: {[w.in_flight for w in plan.waits]}")

    # 4. Registers and spills, when nvcc is installed.
    print_ptxas_report(src, args.arch, skip=args.no_nvcc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
