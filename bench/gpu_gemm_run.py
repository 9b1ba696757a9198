"""Run TVM-generated GEMM kernels on a GPU without TVM (GPU-machine half of the GEMM benchmark).

The TVM wheel is too large to carry to the GPU machine, so ``bench/gemm_gpu.py --export``
compiles the kernels with TVM here and writes their CUDA source and launch
configuration; this script (CuPy + torch + nvcc, which the GPU machine has)
builds each with ``nvcc -cubin``, launches it on torch tensors, checks the
result against torch (fp32) and numpy (a row slice), and times it against
``torch.matmul`` (cuBLAS).

    python bench/gpu_gemm_run.py bench/gpu_kernels --out bench/results/gemm_gpu.json
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels", help="folder with manifest.json and the exported .cu files")
    ap.add_argument("--out", required=True, help="JSON results file")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args(argv)
    try:
        import cupy
        import numpy as np
        import torch
    except ImportError as e:
        print(f"gpu_gemm_run: needs torch, cupy and numpy: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("gpu_gemm_run: no CUDA GPU here; run it on a GPU machine", file=sys.stderr)
        return 2
    kdir = Path(args.kernels)
    man = json.loads((kdir / "manifest.json").read_text())
    M, N, K = man["M"], man["N"], man["K"]
    cc = torch.cuda.get_device_capability()
    arch = f"sm_{cc[0]}{cc[1]}" + ("a" if cc[0] == 9 else "")
    torch.manual_seed(0)
    A = torch.randn(M, K, device="cuda", dtype=torch.float16)
    Bm = torch.randn(K, N, device="cuda", dtype=torch.float16)  # the product is A @ Bm for every variant
    Bt = Bm.t().contiguous()  # B stored N x K, for the kernels that read it K-major ("b_transposed")
    ref = A.float() @ Bm.float()
    rows = slice(0, 64)  # numpy check on a row slice (a full 4096^3 product in numpy is minutes)
    ref_np = A[rows].float().cpu().numpy() @ Bm.float().cpu().numpy()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import median_cuda_ms

    def timeit(fn):
        return median_cuda_ms(fn, torch, args.warmup, args.iters)

    flop = 2.0 * M * N * K
    results = []
    for v in man["variants"]:
        cu = kdir / v["cu"]
        cubin = kdir / (v["name"] + f".{arch}.cubin")
        p = subprocess.run(["nvcc", f"-arch={arch}", "-cubin", "-o", str(cubin), str(cu), "-Xptxas", "-v"],
                           capture_output=True, text=True)
        if p.returncode:  # report this kernel as not built, go on with the others
            print(f"gpu_gemm_run: {v['name']}: nvcc failed\n{p.stderr[-2000:]}", file=sys.stderr)
            results.append({"variant": v["name"], "correct": False, "error": "nvcc: " + p.stderr[-500:]})
            continue
        regs = re.findall(r"Used (\d+) registers", p.stderr)
        spills = re.findall(r"(\d+) bytes spill stores", p.stderr)
        C = torch.zeros(M, N, device="cuda", dtype=torch.float32)
        bufs = {"A": A, "B": Bt if v.get("b_transposed", man.get("b_transposed", False)) else Bm, "C": C}
        try:  # a kernel that cannot be launched (or faults) is reported; the others still run
            launch = launcher(cubin, v, bufs, torch, cupy)
            launch()
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            print(f"gpu_gemm_run: {v['name']}: {type(e).__name__}: {e}", file=sys.stderr)
            results.append({"variant": v["name"], "correct": False, "error": f"{type(e).__name__}: {e}"})
            continue
        err = (C - ref).abs().max().item()
        rel = err / ref.abs().max().item()
        np_err = float(np.abs(C[rows].cpu().numpy() - ref_np).max())
        ms = timeit(launch)
        results.append({"variant": v["name"], "ms": ms, "tflops": flop / ms / 1e9, "max_abs_err": err,
                        "max_rel_err": rel, "numpy_max_abs_err": np_err,
                        "correct": rel < 1e-3 and np_err / float(np.abs(ref_np).max()) < 1e-3,
                        "registers": int(regs[0]) if regs else None,
                        "spill_bytes": int(spills[0]) if spills else None,
                        "annotation": v.get("annotation")})
    try:  # after a kernel fault the context is gone: record that instead of losing the table
        Cb = torch.empty(M, N, device="cuda", dtype=torch.float16)
        ms = timeit(lambda: torch.matmul(A, Bm, out=Cb))
        results.append({"variant": "torch.matmul (cuBLAS, fp16 out)", "ms": ms, "tflops": flop / ms / 1e9})
    except Exception as e:  # noqa: BLE001
        results.append({"variant": "torch.matmul (cuBLAS, fp16 out)", "error": f"{type(e).__name__}: {e}"})
    doc = {"device": torch.cuda.get_device_name(), "arch": arch, "M": M, "N": N, "K": K,
           "torch": torch.__version__, "cupy": cupy.__version__, "commit": man.get("commit"),
           "command": " ".join(["python", "bench/gpu_gemm_run.py"] + (argv or sys.argv[1:])),
           "warmup": args.warmup, "iters": args.iters, "timing": "median of CUDA-event times",
           "results": results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(f"{doc['device']} ({arch}), {M}x{N}x{K} fp16 -> fp32, commit {doc['commit']}")
    print(f"{'variant':40s} {'ms':>8s} {'TFLOP/s':>8s} {'rel err':>9s} {'regs':>5s} {'spill':>5s}")
    for r in results:
        if "error" in r:
            print(f"{r['variant']:40s} failed: {r['error'].splitlines()[0][:80]}")
            continue
        print(f"{r['variant']:40s} {r['ms']:8.3f} {r['tflops']:8.1f} {r.get('max_rel_err', float('nan')):9.2e} "
              f"{str(r.get('registers', '')):>5s} {str(r.get('spill_bytes', '')):>5s}")
    return 0 if all(r.get("correct", True) for r in results) else 1


def launcher(cubin, v: dict, bufs: dict, torch, cupy):
    """A launch closure for variant ``v``: through the driver API when it has tensor-map parameters, else
    through CuPy."""
    if v.get("tensor_maps"):
        return driver_launcher(cubin, v, bufs, torch)
    fn = cupy.RawModule(path=str(cubin)).get_function(v["kernel"])
    if v.get("dyn_smem", 0) > 48 * 1024:
        fn.max_dynamic_shared_size_bytes = v["dyn_smem"]
    cargs = tuple(cupy.asarray(bufs[a]) for a in v["args"])

    def launch():
        fn(tuple(v["grid"]), tuple(v["block"]), cargs, shared_mem=v.get("dyn_smem", 0))

    return launch


def driver_launcher(cubin, v: dict, bufs: dict, torch):
    """A launch closure for a kernel with ``const __grid_constant__ CUtensorMap`` parameters: each tensor
    map of ``v["tensor_maps"]`` is encoded with ``cuTensorMapEncodeTiled`` on its torch tensor, and the
    kernel is launched with ``cuLaunchKernel`` on torch's current stream (cuda-python's driver bindings)."""
    import ctypes

    from cuda.bindings import driver as cu

    def ok(res):
        err, *rest = res if isinstance(res, tuple) else (res,)
        if err != cu.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"CUDA driver error {err}")
        return rest[0] if len(rest) == 1 else rest

    dtypes = {"float16": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
              "bfloat16": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
              "float32": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32}
    module = ok(cu.cuModuleLoadData(Path(cubin).read_bytes()))
    fn = ok(cu.cuModuleGetFunction(module, v["kernel"].encode()))
    smem = int(v.get("dyn_smem", 0))
    if smem > 48 * 1024:
        ok(cu.cuFuncSetAttribute(fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem))
    maps = {m["param"]: m for m in v["tensor_maps"]}
    values, types = [], []
    for a in v["args"]:
        m = maps.get(a)
        if m is None:
            values.append(bufs[a].data_ptr())
            types.append(ctypes.c_void_p)
            continue
        t = bufs[m["buffer"]]
        tmap = ok(cu.cuTensorMapEncodeTiled(
            dtypes[m["dtype"]], m["rank"], t.data_ptr(), [cu.cuuint64_t(x) for x in m["global_dims"]],
            [cu.cuuint64_t(x) for x in m["global_strides"]], [cu.cuuint32_t(x) for x in m["box"]],
            [cu.cuuint32_t(x) for x in m["element_strides"]],
            cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, cu.CUtensorMapSwizzle(m["swizzle"]),
            cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE,
            cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE))
        values.append(tmap)
        types.append(None)  # a cuda-python object: passed by its getPtr()
    grid, block = (list(v["grid"]) + [1, 1])[:3], (list(v["block"]) + [1, 1])[:3]

    def launch():
        stream = cu.CUstream(torch.cuda.current_stream().cuda_stream)
        ok(cu.cuLaunchKernel(fn, *grid, *block, smem, stream, (tuple(values), tuple(types)), 0))

    return launch


if __name__ == "__main__":
    sys.exit(main())
