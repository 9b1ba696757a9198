"""4096^3 fp16 -> fp32 tensor-core GEMM: auto_pipeline vs TVM's hand annotations vs cuBLAS.

Builds TVM's tensor-core GEMM (``tvm.testing.tir.mma_schedule``, the kernel of
TVM's software-pipeline tests) four ways: the simple and the nested loop, each
pipelined by ``tvm_twill.auto_pipeline`` and by TVM's hand annotation; compiles
them with async copy for the GPU's arch (sm_90a on H100); checks each against
a reference product (torch on the GPU if available, else numpy); times them
with TVM's time_evaluator (or CUDA events) and ``torch.matmul`` (cuBLAS); prints
a table and writes ``bench/results/gemm_gpu_<device>.json`` with the device,
git commit and command.

    python bench/gemm_gpu.py                      # on a machine with a GPU and TVM
    python bench/gemm_gpu.py --export DIR --arch sm_90a
        # no GPU needed: compile here, write DIR/manifest.json + .cu files for
        # bench/gpu_gemm_run.py, which runs them on a GPU machine without TVM

Exits with status 2 and a one-line message when no GPU is visible.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from common import git_commit, median_cuda_ms  # noqa: E402
from predicted import ptxas_registers, record, serial  # noqa: E402

try:
    import tvm_twill  # noqa: F401
except ImportError:  # a source checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT))

N = 4096
def variants(arch: str, time_limit: float):
    """(name, schedule, annotations, model II in cycles, TIR pipeline, tensor maps, the plan or the
    ``evaluate_annotation`` of the kernel as compiled, for its prediction) for the kernels: six on
    every arch, nine on sm_90a (the wgmma GEMM, plain and warp-specialized with and without the 128-byte
    swizzled rings).  Tensor maps: the
    ``TensorMapSpec.to_json()`` of each TMA tensor copy, which a launcher outside TVM must encode."""
    import tvm_twill
    from tvm_twill.workloads import TVM_HAND_ANNOTATIONS, tensorcore_gemm

    out = []
    for loop in ("simple", "nested"):
        sch, k0, k1 = tensorcore_gemm(N)
        plan = tvm_twill.auto_pipeline(sch, k0 if loop == "simple" else [k0, k1], arch, time_limit=time_limit)
        anns = {"k0": plan.annotations if plan.applied else {}}
        if plan.inner:
            anns["k1"] = plan.inner[0].annotations if plan.inner[0].applied else {}
        out.append((f"auto_{loop}", sch, anns, plan.ii_cycles, None, [], plan))
        sch, k0, k1 = tensorcore_gemm(N, hand=loop)
        ev = tvm_twill.evaluate_annotation(sch, k0, arch)
        out.append((f"hand_{loop}", sch, TVM_HAND_ANNOTATIONS[loop], ev.ii_cycles, None, [], ev))
    # warp-specialized: producer warp + mbarrier ring on k0, the inner loop software-pipelined
    sch, k0, k1 = tensorcore_gemm(N)
    plan = tvm_twill.auto_pipeline(sch, [k0, k1], arch, time_limit=time_limit, warp_specialize=True)
    anns = {"k0": plan.annotations, "k1": plan.inner[0].annotations if plan.inner[0].applied else {}}
    out.append(("auto_nested_ws", sch, anns, plan.warp_specialization.ii_ws_cycles, plan.tir_pipeline,
                _maps(plan), plan))
    # the same kernel with its 4 consumer warps as 2 groups taking turns (named barriers, group 1 first):
    # the planner keeps one group here (no gain in the model), so the order is forced, for its numerics
    from tvm_twill.model.pipeline import WS_CONSUMER_ORDER
    from tvm_twill.transforms.pipelines import emit_and_check
    sch, k0, k1 = tensorcore_gemm(N)
    plan = tvm_twill.auto_pipeline(sch, [k0, k1], arch, time_limit=time_limit, warp_specialize=True)
    sch.annotate(k0, WS_CONSUMER_ORDER, [1, 0])
    facts, _ = emit_and_check(sch.mod, arch)  # raises unless the rings + turns pass the model check
    anns = {"k0": {**plan.annotations, WS_CONSUMER_ORDER: [1, 0]},
            "k1": plan.inner[0].annotations if plan.inner[0].applied else {}}
    out.append(("auto_nested_ws_ordered", sch, anns, plan.warp_specialization.ii_ws_cycles, plan.tir_pipeline,
                [m.to_json() for m in facts.tensor_maps], plan))
    if arch == "sm_90a":  # wgmma consumers (B stored N x K: C = A @ B^T), plain and warp-specialized
        from tvm_twill.transforms.pipelines import WS_PIPELINE
        from tvm_twill.workloads import wgmma_gemm
        sch, k0, _ = wgmma_gemm(N)
        ev = serial(sch, k0, arch)  # the kernel as compiled: the loop unpipelined
        out.append(("wgmma_plain", sch, {}, ev.ii_cycles, WS_PIPELINE, [], ev))
        sch, k0, _ = wgmma_gemm(N)
        plan = tvm_twill.auto_pipeline(sch, k0, arch, time_limit=time_limit, warp_specialize=True)
        out.append(("wgmma_ws", sch, {"k0": plan.annotations}, plan.warp_specialization.ii_ws_cycles,
                    plan.tir_pipeline, _maps(plan), plan))
        # the same kernel with the rings in the consumer's own no-swizzle layout (3-d TMA boxes of 16-byte
        # rows): the GPU run compares the two layouts' numerics and times
        from tvm_twill.model.pipeline import WS_SWIZZLE
        sch, k0, _ = wgmma_gemm(N)
        sch.annotate(k0, WS_SWIZZLE, 0)
        plan = tvm_twill.auto_pipeline(sch, k0, arch, time_limit=time_limit, warp_specialize=True)
        out.append(("wgmma_ws_noswizzle", sch, {"k0": {**plan.annotations, WS_SWIZZLE: 0}},
                    plan.warp_specialization.ii_ws_cycles, plan.tir_pipeline, _maps(plan), plan))
    return out


def _maps(plan) -> list:
    return [m.to_json() for m in plan.warp_specialization.facts.tensor_maps]


#: Variants whose kernel reads B as N x K (K-major): C = A @ B^T.
B_TRANSPOSED = {"wgmma_plain", "wgmma_ws", "wgmma_ws_noswizzle"}


def export(args) -> int:
    """Compile here and write kernels + manifest for bench/gpu_gemm_run.py."""
    from tvm_twill.frontend import compile_cuda, kernel_info

    d = Path(args.export)
    d.mkdir(parents=True, exist_ok=True)
    man = {"M": N, "N": N, "K": N, "b_transposed": False, "arch": args.arch, "commit": git_commit(),
           "command": " ".join([sys.executable, *sys.argv]), "variants": []}
    for name, sch, anns, model_ii, pipeline, tmaps, planned in variants(args.arch, args.time_limit):
        _, src = compile_cuda(sch, args.arch, tir_pipeline=pipeline)
        pred = record(planned, ptxas_registers(src, args.arch))
        info = kernel_info(sch, args.arch, tir_pipeline=pipeline)
        sig = re.search(r'extern "C" __global__ void (?:__launch_bounds__\([\d, ]+\) )?(\w+)\(([^)]*)\)', src)
        params = [p.split()[-1].removesuffix("_ptr") for p in sig.group(2).split(",")]
        (d / f"{name}.cu").write_text(src)
        man["variants"].append({"name": name, "cu": f"{name}.cu", "kernel": sig.group(1), "grid": list(info.grid),
                                "block": list(info.block), "dyn_smem": info.dyn_smem, "args": params,
                                "annotation": anns, "model_ii_cycles": model_ii,
                                "b_transposed": name in B_TRANSPOSED, "tensor_maps": tmaps, "prediction": pred})
        print(f"{name:14s} grid {info.grid} block {info.block} smem {info.dyn_smem:6d} B  model II {model_ii}  "
              f"predicted {pred['tflops']} TFLOPS ({pred['bound']}, {pred['machine']})  {anns}")
    (d / "manifest.json").write_text(json.dumps(man, indent=2) + "\n")
    print(f"wrote {d / 'manifest.json'}; run on the GPU machine: python bench/gpu_gemm_run.py {d} --out "
          f"bench/results/gemm_gpu.json")
    return 0


def run(args) -> int:
    import numpy as np
    import tvm

    dev = tvm.cuda(0)
    if not dev.exist:
        print("gemm_gpu: no CUDA GPU visible to TVM (tvm.cuda(0).exist is False); run it on a GPU machine, or "
              "use --export DIR here and bench/gpu_gemm_run.py on the GPU machine", file=sys.stderr)
        return 2
    try:
        import torch
        has_torch = torch.cuda.is_available()
    except ImportError:
        torch, has_torch = None, False
    from tvm_twill.frontend import compile_cuda

    arch = args.arch
    if arch is None:
        major, minor = (int(x) for x in str(dev.compute_version).split("."))
        arch = f"sm_{major}{minor}" + ("a" if major == 9 else "")
    rng = np.random.default_rng(0)
    a_np = rng.uniform(size=(N, N)).astype("float16")
    b_np = rng.uniform(size=(N, N)).astype("float16")
    if has_torch:
        ref = (torch.from_numpy(a_np).cuda().float() @ torch.from_numpy(b_np).cuda().float()).cpu().numpy()
    else:
        ref = a_np.astype("float32") @ b_np.astype("float32")
    flop = 2.0 * N ** 3
    rows = []
    for name, sch, anns, model_ii, pipeline, _, _ in variants(arch, args.time_limit):
        f, _ = compile_cuda(sch, arch, tir_pipeline=pipeline)
        b_in = np.ascontiguousarray(b_np.T) if name in B_TRANSPOSED else b_np
        a, b = tvm.runtime.tensor(a_np, dev), tvm.runtime.tensor(b_in, dev)
        c = tvm.runtime.tensor(np.zeros((N, N), dtype="float32"), dev)
        f(a, b, c)
        dev.sync()
        err = float(np.abs(c.numpy() - ref).max() / np.abs(ref).max())
        ms = _time_tvm(f, dev, (a, b, c), args)
        rows.append({"variant": name, "annotation": anns, "model_ii_cycles": model_ii, "ms": ms,
                     "tflops": flop / ms / 1e9, "max_rel_err": err, "correct": err < 1e-3})
    if has_torch:
        at, bt = torch.from_numpy(a_np).cuda(), torch.from_numpy(b_np).cuda()
        ms = _time_events(lambda: torch.matmul(at, bt), args, torch)
        rows.append({"variant": "torch.matmul (cuBLAS, fp16 out)", "ms": ms, "tflops": flop / ms / 1e9})
    device = torch.cuda.get_device_name() if has_torch else str(getattr(dev, "device_name", "cuda"))
    doc = {"device": device, "arch": arch, "M": N, "N": N, "K": N, "tvm": tvm.__version__, "commit": git_commit(),
           "command": " ".join([sys.executable, *sys.argv]), "warmup": args.warmup, "iters": args.iters,
           "timing": "median", "results": rows}
    out = Path(args.out) / f"gemm_gpu_{re.sub(r'[^A-Za-z0-9]+', '_', device).strip('_').lower()}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"{device} ({arch}), {N}^3 fp16 -> fp32, commit {doc['commit']}")
    print(f"{'variant':34s} {'ms':>8s} {'TFLOP/s':>8s} {'rel err':>9s} {'model II':>9s}")
    for r in rows:
        print(f"{r['variant']:34s} {r['ms']:8.3f} {r['tflops']:8.1f} {r.get('max_rel_err', float('nan')):9.2e} "
              f"{str(r.get('model_ii_cycles', '')):>9s}")
    print(f"wrote {out}")
    return 0 if all(r.get("correct", True) for r in rows) else 1


def _time_tvm(f, dev, tensors, args) -> float:
    """Median milliseconds per call (TVM time_evaluator when available)."""
    import numpy as np

    try:
        ev = f.time_evaluator("main", dev, number=args.iters, repeat=3, min_repeat_ms=0)
        return float(np.median(ev(*tensors).results)) * 1e3
    except (AttributeError, TypeError):
        for _ in range(args.warmup):
            f(*tensors)
        dev.sync()
        times = []
        for _ in range(args.iters):
            t = time.perf_counter()
            f(*tensors)
            dev.sync()
            times.append((time.perf_counter() - t) * 1e3)
        return sorted(times)[len(times) // 2]


def _time_events(fn, args, torch) -> float:
    return median_cuda_ms(fn, torch, args.warmup, args.iters)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default=None, help="CUDA arch (default: the GPU's; sm_90a for --export)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"), help="folder for the JSON results")
    ap.add_argument("--export", metavar="DIR", help="compile only and write kernels for bench/gpu_gemm_run.py")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--time-limit", type=float, default=10.0, help="solver seconds per loop")
    args = ap.parse_args(argv)
    try:
        import tvm  # noqa: F401
    except ImportError:
        print("gemm_gpu: needs apache-tvm (pip install apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post0); "
              "without TVM on the GPU machine use --export here and bench/gpu_gemm_run.py there", file=sys.stderr)
        return 2
    if args.export:
        args.arch = args.arch or "sm_90a"
        return export(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
