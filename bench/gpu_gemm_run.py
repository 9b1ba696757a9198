"""Run TVM-generated GEMM kernels on a GPU without TVM (GPU-machine half of the GEMM benchmark).

The TVM wheel is too large to carry to the GPU machine, so ``bench/gemm_gpu.py --export``
compiles the kernels with TVM here and writes their CUDA source and launch
configuration; this script (torch + nvcc, which the GPU machine has; CuPy when
installed, else the driver through ctypes, ``bench/cuda_driver.py``; cuda-python
for the kernels with tensor maps) builds each with ``nvcc -cubin``, launches it
on torch tensors, checks the result against torch (fp32) and numpy (a row
slice), times it against ``torch.matmul`` (cuBLAS) and prints the model's
predicted TFLOPS (the manifest's ``prediction``) next to the measured.

Each variant (and the cuBLAS baseline) runs in its own process with a time
limit (``--timeout``), so a kernel that faults or hangs cannot poison the
others, and the results file is rewritten after every variant.  Each result
has a ``status``: ``ok``, ``wrong`` (it ran; the numbers differ), ``failed``
(nvcc or the launch failed), ``timeout``, ``crashed`` (the process died
without a result) or ``not run`` (a module it needs is missing, or there is
no GPU), which is not a verdict on the kernel.

    python bench/gpu_gemm_run.py bench/gpu_kernels --out bench/results/gemm_gpu.json
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

#: The line prefix a variant's process prints its JSON result after.
RESULT = "gpu_gemm_run result: "
#: The pseudo-variant that times torch.matmul.
BASELINE = "torch.matmul (cuBLAS, fp16 out)"
#: Statuses that fail the run (``not run`` does not: it says nothing about the kernel).
FAILING = ("wrong", "failed", "timeout", "crashed")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels", help="folder with manifest.json and the exported .cu files")
    ap.add_argument("--out", help="JSON results file (rewritten after each variant)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per variant's process")
    ap.add_argument("--deadline", type=float, default=None, help="epoch seconds: no variant starts after it")
    ap.add_argument("--variant", help=argparse.SUPPRESS)  # internal: run this one variant here, print its result
    args = ap.parse_args(argv)
    kdir = Path(args.kernels)
    man = json.loads((kdir / "manifest.json").read_text())
    if args.variant is not None:
        print(RESULT + json.dumps(run_variant(kdir, man, args.variant, args.warmup, args.iters)), flush=True)
        return 0
    if not args.out:
        ap.error("--out is required")
    doc = {"device": None, "arch": None, "M": man["M"], "N": man["N"], "K": man["K"], "commit": man.get("commit"),
           "command": " ".join(["python", "bench/gpu_gemm_run.py"] + list(argv if argv is not None else sys.argv[1:])),
           "warmup": args.warmup, "iters": args.iters, "timeout_s": args.timeout,
           "timing": "median of CUDA-event times", "results": []}
    print(f"{man['M']}x{man['N']}x{man['K']} fp16 -> fp32, commit {doc['commit']}")
    print(f"{'variant':40s} {'status':8s} {'ms':>8s} {'TFLOP/s':>8s} {'rel err':>9s} {'regs':>5s} {'spill':>5s} "
          f"{'pred':>8s} {'pred err':>9s} bound")
    for name in [v["name"] for v in man["variants"]] + [BASELINE]:
        r = isolated(kdir, name, args)
        for key in ("device", "arch", "torch", "cupy"):
            if r.get(key) and not doc.get(key):
                doc[key] = r[key]
        doc["results"].append(r)
        write_json(Path(args.out), doc)
        print_row(r)
    statuses = [r["status"] for r in doc["results"]]
    if all(s == "not run" for s in statuses):
        print(f"gpu_gemm_run: nothing ran: {doc['results'][0].get('error', '')}", file=sys.stderr)
        return 2
    return 1 if any(s in FAILING for s in statuses) else 0


def remaining(deadline: float | None, timeout: float) -> float:
    """Seconds a step may take: ``timeout``, less when the suite's ``deadline`` (epoch seconds) is nearer."""
    return timeout if deadline is None else min(timeout, deadline - time.time())


def isolated(kdir: Path, name: str, args) -> dict:
    """Run variant ``name`` in a fresh process (this script with ``--variant``) under ``args.timeout`` (less
    when ``args.deadline`` is nearer; past it the variant is ``not run``)."""
    left = remaining(getattr(args, "deadline", None), args.timeout)
    if left <= 0:
        return {"variant": name, "status": "not run", "error": "the suite's time budget is spent"}
    cmd = child_command(kdir, name, args)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=left, check=False)
    except subprocess.TimeoutExpired:
        return {"variant": name, "status": "timeout", "error": f"no result within {left:.0f} s"}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith(RESULT):
            return json.loads(line[len(RESULT):])
    tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
    return {"variant": name, "status": "crashed", "error": f"exit status {p.returncode}: " + " | ".join(tail)}


def child_command(kdir: Path, name: str, args) -> list:
    return [sys.executable, str(Path(__file__).resolve()), str(kdir), "--variant", name,
            "--warmup", str(args.warmup), "--iters", str(args.iters)]


def write_json(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(path)  # a reader never sees half a file


def print_row(r: dict) -> None:
    if r["status"] not in ("ok", "wrong"):
        why = str(r.get("error") or "").strip().splitlines()
        print(f"{r['variant']:40s} {r['status']:8s} {why[0][:80] if why else ''}", flush=True)
        return
    p = r.get("predicted_vs_measured") or {}
    pred = f"{p['predicted_tflops']:8.1f} {100 * p['error']:+8.0f}%" if p.get("error") is not None else f"{'-':>18s}"
    print(f"{r['variant']:40s} {r['status']:8s} {r['ms']:8.3f} {r['tflops']:8.1f} "
          f"{r.get('max_rel_err', float('nan')):9.2e} {str(r.get('registers', '')):>5s} "
          f"{str(r.get('spill_bytes', '')):>5s} {pred} {p.get('bound') or ''}", flush=True)


def _modules(variant: dict | None):
    """The modules a variant needs, imported; a missing one is returned as its name."""
    import importlib

    names = ["numpy", "torch"] + (["cuda.bindings.driver"] if variant and variant.get("tensor_maps") else [])
    mods = {}
    for n in names:
        try:
            mods[n] = importlib.import_module(n)
        except ImportError:
            return n
    try:  # optional: without it, plain kernels launch through the driver by ctypes (bench/cuda_driver.py)
        mods["cupy"] = importlib.import_module("cupy")
    except ImportError:
        pass
    return mods


def run_variant(kdir: Path, man: dict, name: str, warmup: int, iters: int) -> dict:
    """One variant (or the baseline), in this process: nvcc, launch, check against torch and numpy, time."""
    v = next((x for x in man["variants"] if x["name"] == name), None)
    if v is None and name != BASELINE:
        return {"variant": name, "status": "failed", "error": f"no variant {name!r} in the manifest"}
    mods = _modules(v)
    if isinstance(mods, str):
        pip = {"cuda.bindings.driver": "cuda-python"}.get(mods, mods)
        return {"variant": name, "status": "not run", "error": f"missing module {mods} (pip install {pip})"}
    torch = mods["torch"]
    if not torch.cuda.is_available():
        return {"variant": name, "status": "not run", "error": "no CUDA GPU here; run it on a GPU machine"}
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import median_cuda_ms

    M, N, K = man["M"], man["N"], man["K"]
    cc = torch.cuda.get_device_capability()
    arch = f"sm_{cc[0]}{cc[1]}" + ("a" if cc[0] == 9 else "")
    info = {"variant": name, "device": torch.cuda.get_device_name(), "arch": arch, "torch": torch.__version__,
            "cupy": getattr(mods.get("cupy"), "__version__", None)}
    torch.manual_seed(0)  # the same inputs in every variant's process
    A = torch.randn(M, K, device="cuda", dtype=torch.float16)
    Bm = torch.randn(K, N, device="cuda", dtype=torch.float16)  # the product is A @ Bm for every variant
    flop = 2.0 * M * N * K
    if v is None:  # the cuBLAS baseline
        Cb = torch.empty(M, N, device="cuda", dtype=torch.float16)
        ms = median_cuda_ms(lambda: torch.matmul(A, Bm, out=Cb), torch, warmup, iters)
        return {**info, "status": "ok", "ms": ms, "tflops": flop / ms / 1e9}
    return {**info, **_check_and_time(kdir, man, v, arch, mods, A, Bm, warmup, iters, median_cuda_ms)}


def _check_and_time(kdir, man, v, arch, mods, A, Bm, warmup, iters, median_cuda_ms) -> dict:
    np, torch = mods["numpy"], mods["torch"]
    M, N, K = man["M"], man["N"], man["K"]
    Bt = Bm.t().contiguous()  # B stored N x K, for the kernels that read it K-major ("b_transposed")
    ref = A.float() @ Bm.float()
    rows = slice(0, 64)  # numpy check on a row slice (a full 4096^3 product in numpy is minutes)
    ref_np = A[rows].float().cpu().numpy() @ Bm.float().cpu().numpy()
    cubin = kdir / (v["name"] + f".{arch}.cubin")
    p = subprocess.run(["nvcc", f"-arch={arch}", "-cubin", "-o", str(cubin), str(kdir / v["cu"]), "-Xptxas", "-v"],
                       capture_output=True, text=True, check=False)
    if p.returncode:
        return {"status": "failed", "error": "nvcc: " + p.stderr[-500:]}
    regs = re.findall(r"Used (\d+) registers", p.stderr)
    spills = re.findall(r"(\d+) bytes spill stores", p.stderr)
    C = torch.zeros(M, N, device="cuda", dtype=torch.float32)
    bufs = {"A": A, "B": Bt if v.get("b_transposed", man.get("b_transposed", False)) else Bm, "C": C}
    try:
        launch = launcher(cubin, v, bufs, torch, mods.get("cupy"))
        launch()
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001  (a launch error or a fault: this variant's verdict)
        return {"status": "failed", "error": f"{type(e).__name__}: {e}"}
    err = (C - ref).abs().max().item()
    rel = err / ref.abs().max().item()
    np_err = float(np.abs(C[rows].cpu().numpy() - ref_np).max())
    correct = rel < 1e-3 and np_err / float(np.abs(ref_np).max()) < 1e-3
    ms = median_cuda_ms(launch, torch, warmup, iters)
    tflops = 2.0 * M * N * K / ms / 1e9
    return {"status": "ok" if correct else "wrong", "correct": correct, "ms": ms, "tflops": tflops,
            "prediction": v.get("prediction"), "predicted_vs_measured": predicted_vs_measured(v.get("prediction"),
                                                                                               tflops), "max_abs_err": err, "max_rel_err": rel, "numpy_max_abs_err": np_err,
            "registers": int(regs[0]) if regs else None, "spill_bytes": int(spills[0]) if spills else None,
            "annotation": v.get("annotation")}


def predicted_vs_measured(pred: dict | None, measured_tflops: float) -> dict:
    """The model's TFLOPS (``plan.prediction()``, recorded by ``prepare``) next to the measured, with the error
    (predicted / measured - 1; None without a prediction)."""
    if not pred or not measured_tflops:
        return {"predicted_tflops": None, "measured_tflops": measured_tflops, "error": None}
    return {"predicted_tflops": pred["tflops"], "measured_tflops": measured_tflops, "bound": pred.get("bound"),
            "machine": pred.get("machine"), "error": pred["tflops"] / measured_tflops - 1.0}


def launcher(cubin, v: dict, bufs: dict, torch, cupy):
    """A launch closure for variant ``v``: through the driver API when it has tensor-map parameters, else
    through CuPy."""
    if v.get("tensor_maps"):
        return driver_launcher(cubin, v, bufs, torch)
    if cupy is None:
        from cuda_driver import Launcher, pack_params
        fn = Launcher(Path(cubin).read_bytes(), v["kernel"], v["grid"], v["block"], v.get("dyn_smem", 0))
        packed = pack_params([{"kind": "buffer", "arg": a} for a in v["args"]],
                             {a: bufs[a].data_ptr() for a in v["args"]}, 0)
        return lambda: fn(packed, torch.cuda.current_stream().cuda_stream)
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
