"""Warp-specialize a Hopper GEMM: producer warp + mbarrier ring + wgmma consumers, from the joint schedule.

Runs without a GPU (TVM generates CUDA without one; nvcc, if installed,
reports registers and spills)::

    python tutorials/warp_specialized_gemm.py               # wgmma GEMM, sm_90a
    python tutorials/warp_specialized_gemm.py --mma --arch sm_80

The kernel is ``workloads.wgmma_gemm``: an fp16 "TN" GEMM (C = A @ B^T, fp32
accumulation) with one warp group per 64 x 128 tile, its K loop ``k_0``
holding two global->shared copies (core-matrix layout) and four
``wgmma.mma_async m64n128k16``.  ``--mma`` uses TVM's mma.sync GEMM instead
(``workloads.tensorcore_gemm``; sm_80 needs it, wgmma is sm_90a only).

One call replaces ``sch.annotate``: ``auto_pipeline(sch, loop, target,
warp_specialize=...)``.  ``True`` always specializes, ``"auto"`` only when the
joint schedule with a producer warp has a smaller ii than the one-role
pipeline (it says why in ``plan.explain()``).  The plan names the TIR pipeline
that performs the rewrite inside ``tvm.compile``; ``tvm_twill.build(sch.mod,
arch, plan)`` compiles with it.
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
    ap = argparse.ArgumentParser(description="warp-specialized GEMM with tvm_twill.auto_pipeline")
    ap.add_argument("--arch", default="sm_90a", help="CUDA arch (sm_90a for wgmma; sm_80 ... with --mma)")
    ap.add_argument("--mma", action="store_true", help="TVM's mma.sync GEMM instead of the wgmma one")
    ap.add_argument("--n", type=int, default=4096, help="M = N = K")
    ap.add_argument("--no-nvcc", action="store_true", help="skip the nvcc register/spill report")
    args = ap.parse_args(argv)

    import tvm_twill
    from tvm_twill.compiler.sass import print_ptxas_report
    from tvm_twill.workloads import tensorcore_gemm, wgmma_gemm

    if not args.mma and not args.arch.startswith("sm_90"):
        print(f"wgmma needs sm_90a, not {args.arch}: pass --mma for TVM's mma.sync GEMM", file=sys.stderr)
        return 2

    # 1. The schedule and the one call: "auto" first, to see the decision and both ii.
    def schedule():
        if args.mma:
            sch, k0, k1 = tensorcore_gemm(args.n)
            return sch, [k0, k1]  # the inner ldmatrix/mma loop keeps a software pipeline
        sch, k0, _ = wgmma_gemm(args.n)
        return sch, [k0]

    sch, loops = schedule()
    auto = tvm_twill.auto_pipeline(sch, loops, args.arch, warp_specialize="auto", apply=False)
    print("warp_specialize='auto':", auto.warp_specialization.reason)

    # 2. Force it, and read the plan: roles, ring, barriers, copies, setmaxnreg, the protocol check.
    sch, loops = schedule()
    plan = tvm_twill.auto_pipeline(sch, loops, args.arch, warp_specialize=True)
    ws = plan.warp_specialization
    print("\n" + ws.explain())

    # 3. Compile as planned: tvm.compile under plan.pass_context() with tir_pipeline=plan.tir_pipeline.
    lib = tvm_twill.build(sch.mod, args.arch, plan)
    src = lib.mod.imports[0].inspect_source()
    kernel = src[src.index('extern "C" __global__'):]
    print(f"\ntvm_twill.build(sch.mod, {args.arch!r}, plan): tvm.compile(..., tir_pipeline={plan.tir_pipeline!r}) "
          "-> kernel signature:")
    print("   ", kernel.splitlines()[0][:200])
    print("instructions in the kernel:")
    for name, pattern in (("mbarrier waits", r"mbarrier_wait|test_wait"), ("elect.sync", r"elect_one_sync"),
                          ("TMA tensor copies", r"cp_async_bulk_tensor_g2s"),
                          ("bulk copies", r"cp_async_bulk_g2s_cluster_async_bulk_shared"),
                          ("cp.async + mbarrier arrive", r"mbarrier_arrive_noinc"),
                          ("setmaxnreg", r"setmaxnreg"), ("wgmma.mma_async", r"mma_async_sync_aligned_m64"),
                          ("wgmma.wait_group", r"wgmma_wait_group")):
        print(f"    {name:28s} {len(re.findall(pattern, kernel)):3d} call sites")
    if ws.facts.tensor_maps:
        print("tensor maps encoded on the host before the launch:")
        for m in ws.facts.tensor_maps:
            print(f"    {m.param}: {m.buffer} {m.dtype}, dims {m.global_dims}, box {m.box}")

    # 4. Registers and spills, when nvcc is installed: the budget setmaxnreg asks for must fit.
    print_ptxas_report(src, args.arch, skip=args.no_nvcc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
