"""Re-plan the software pipelines that TVM's dlight writes, with ``tvm_twill.dlight.AutoPipelined``.

Runs without a GPU (TVM generates CUDA source without one; nvcc, if installed,
reports registers and spills)::

    python tutorials/dlight_gemm.py                  # 256^3 fp16 GEMM, sm_80
    python tutorials/dlight_gemm.py --arch sm_86 --dynamic

dlight's ``gpu.Matmul`` rule schedules an fp16 GEMM on tensor cores (wmma) with
a fixed nested pipeline, stages [0, 0, 0, 0, 0, 1, 1] on the outer k loop and
[0, 0, 1] on the inner one, and it stages its global->shared copies through
registers (``tirx.manifest_shared_memory_local_stage``: TVM splits each copy
into a load to registers and a store to shared memory, so the outer loop has
7 pipeline statements).  Wrapping the rule::

    mod = dl.ApplyDefaultSchedule(tvm_twill.dlight.AutoPipelined(dl.gpu.Matmul()))(mod)

applies it, then re-plans every pipeline it wrote: once with dlight's staging
and once with direct global->shared copies (cp.async), keeping the plan with
the smaller model ii.  A direct copy becomes cp.async only when TVM lowers it
correctly: dlight's copy of B transposes (it walks down a column of B), so it
stays a plain copy and the plan's explanation says why.
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
    ap = argparse.ArgumentParser(description="tvm_twill re-plans dlight's tensor-core GEMM pipelines")
    ap.add_argument("--arch", default="sm_80", help="CUDA arch (sm_80, sm_86, ...)")
    ap.add_argument("--size", type=int, default=256, help="M = N = K of the GEMM")
    ap.add_argument("--dynamic", action="store_true", help="a symbolic M (dlight pads it to its tile)")
    ap.add_argument("--no-nvcc", action="store_true", help="skip the nvcc register/spill report")
    args = ap.parse_args(argv)

    import logging

    import tvm
    import tvm.s_tir.dlight as dl

    import tvm_twill
    from tvm_twill.compiler.sass import print_ptxas_report
    from tvm_twill.workloads import dlight_gemm

    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")  # the re-plan logs one line a nest
    m = "m" if args.dynamic else args.size
    print(f"GEMM: C[{m}, {args.size}] = A[{m}, {args.size}] @ B[{args.size}, {args.size}], fp16 -> fp32, "
          f"for {args.arch}")

    # 1. dlight alone, and its own annotation measured under the model.
    plain = tvm.s_tir.Schedule(dlight_gemm(m, args.size, args.size, arch=args.arch))
    dlight = tvm_twill.evaluate_annotation(plain, "ax3_0_0", args.arch)
    print(f"\ndlight's outer loop 'ax3_0_0': {len(dlight.extraction.stmts)} pipeline statements as "
          f"InjectSoftwarePipeline sees them:")
    for st in dlight.extraction.stmts:
        print(f"  [{st.index}] {st.name}: {st.description}")
    print(f"  stages {list(dlight.annotation.stages)}, orders {list(dlight.annotation.orders)}")

    # 2. The same rule, wrapped: dlight schedules, tvm_twill re-plans the pipelines.
    rule = tvm_twill.dlight.AutoPipelined(dl.gpu.Matmul())
    mod = dlight_gemm(m, args.size, args.size, arch=args.arch, rule=rule)
    (nest,) = rule.last
    print()
    print(nest.plan.explain())
    print(f"\nvariants planned (model ii in cycles): {dict(nest.alternatives)}; kept: {nest.staging} copies")
    print(f"model II per outer iteration: dlight {dlight.ii_cycles} cycles, tvm_twill {nest.plan.ii_cycles} cycles "
          f"({dlight.ii_cycles / nest.plan.ii_cycles:.2f}x)")

    # 3. Compile as planned (no GPU needed) and look at the asynchronous copies.
    lib = tvm_twill.build(mod, args.arch, nest.plan)
    src = lib.mod.imports[0].inspect_source()
    kernel = src[src.index('extern "C" __global__'):]
    print("\nCUDA excerpts (cp.async, commit and wait groups):")
    shown = 0
    for line in kernel.splitlines():
        if re.search(r"cp_async|for \(int ax3_0_0", line) and shown < 12:
            print("   ", line.strip()[:140])
            shown += 1
    waits = re.findall(r"wait_group_(\d+)\(\);", kernel)
    print(f"cp.async in the kernel: {'cp.async.ca.shared.global' in src}; wait_group counts: {waits}; "
          f"predicted: {[w.in_flight for w in nest.plan.waits]}")

    # 4. Registers and spills, when nvcc is installed.
    print_ptxas_report(src, args.arch, skip=args.no_nvcc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
