"""Run the TVM-generated attention kernels on a GPU without TVM (GPU-machine half of the attention checks).

``bench/attention_gpu.py`` (``gpu_suite.py prepare``) compiles the kernels with TVM and writes their CUDA
source, launch shape and parameters (``DIR/<arch>/attention/manifest.json``); this script needs only torch,
nvcc and the CUDA driver (``bench/cuda_driver.py``, ctypes).  It builds every kernel with ``nvcc -cubin``
(in parallel), then runs each variant in its own process (a fault or a hang cannot poison the others): for
each KV length ``n`` of the manifest's cases it checks the kernel against
``torch.nn.functional.scaled_dot_product_attention`` in fp32 under the kernels' conventions (``reference``:
unscaled scores, top-left causal mask, zeros for a row that sees no key), and on the timed cases measures
it (median of CUDA-event times) against SDPA in fp16 and, in the results, against the variant's unpipelined
kernel (``baseline``), next to the model's predicted TFLOPS (``prediction``, from ``plan.prediction()``)
with the error.  Statuses as in ``bench/gpu_gemm_run.py``.

    python bench/gpu_attention_run.py gpu_kernels/sm_80/attention --out bench/results/gpu_attention_sm_80.json
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_gemm_run import FAILING, remaining, write_json  # noqa: E402

RESULT = "gpu_attention_run result: "
#: Absolute error allowed against the fp32 reference (P is rounded to fp16 before O += P V; outputs are O(1)).
TOLERANCE = 2e-2


def reference(F, q, k, v, causal: bool):
    """The kernels' attention through ``F.scaled_dot_product_attention`` (``F``: torch.nn.functional, or a
    stand-in with its semantics): ``q (heads, q_len, d)``, ``k, v (heads, n, d)``; unscaled scores
    (``scale=1.0``), the causal mask top-left aligned (key ``c`` seen by query ``r`` when ``c <= r``, which is
    SDPA's ``is_causal``), zeros for a row that sees no key (only ``n == 0``: top-left, row 0 sees key 0)."""
    if k.shape[1] == 0:
        return q * 0
    return F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=causal, scale=1.0)[0]


def useful_flops(heads: int, q_len: int, n: int, d: int, causal: bool) -> float:
    """FLOP of the two GEMMs over the (query, key) pairs the mask keeps (the usual attention count)."""
    pairs = sum(min(r + 1, n) for r in range(q_len)) if causal else q_len * n
    return 4.0 * heads * pairs * d


def executed_flops(v: dict, man: dict, n: int) -> float:
    """FLOP the kernel runs for KV length ``n`` as the model counts them: the prediction's flops per iteration
    x KV tiles x CTAs (the comparison with the predicted TFLOPS is like for like)."""
    p = v.get("prediction") or {}
    ctas = math.prod(v["grid"])
    return float(p.get("flops_per_iteration", 0.0)) * -(-n // v["block_n"]) * ctas


def compare(pred: dict | None, measured_tflops: float) -> dict:
    """Predicted next to measured: ``{"predicted_tflops", "measured_tflops", "error"}`` (error: predicted /
    measured - 1; None without a prediction)."""
    if not pred or not measured_tflops:
        return {"predicted_tflops": None, "measured_tflops": measured_tflops, "error": None}
    return {"predicted_tflops": pred["tflops"], "measured_tflops": measured_tflops, "bound": pred.get("bound"),
            "error": pred["tflops"] / measured_tflops - 1.0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels", help="folder with manifest.json and the exported .cu files")
    ap.add_argument("--out", help="JSON results file (rewritten after each variant)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per variant's process")
    ap.add_argument("--deadline", type=float, default=None, help="epoch seconds: nothing starts after it")
    ap.add_argument("--variant", help=argparse.SUPPRESS)  # internal: run this one variant here, print its result
    args = ap.parse_args(argv)
    kdir = Path(args.kernels)
    man = json.loads((kdir / "manifest.json").read_text())
    if args.variant is not None:
        print(RESULT + json.dumps(run_variant(kdir, man, args.variant, args.warmup, args.iters)), flush=True)
        return 0
    if not args.out:
        ap.error("--out is required")
    doc = {"device": None, "arch": man["arch"], "heads": man["heads"], "q_len": man["q_len"],
           "cases": man["cases"], "commit": man.get("commit"),
           "command": " ".join(["python", "bench/gpu_attention_run.py"] + list(argv if argv is not None
                                                                               else sys.argv[1:])),
           "warmup": args.warmup, "iters": args.iters, "timeout_s": args.timeout,
           "timing": "median of CUDA-event times", "results": []}
    print(f"attention {man['arch']}: {man['heads']} heads x {man['q_len']} queries, KV lengths "
          f"{[c['n'] for c in man['cases']]}, commit {doc['commit']}")
    compile_all(kdir, man, args.deadline)
    for v in man["variants"]:
        r = isolated(kdir, v["name"], args)
        doc["device"] = doc["device"] or r.get("device")
        doc["results"].append(r)
        relate(doc["results"])
        write_json(Path(args.out), doc)
    print_table(doc)
    statuses = [r["status"] for r in doc["results"]]
    if statuses and all(s == "not run" for s in statuses):
        print(f"gpu_attention_run: nothing ran: {doc['results'][0].get('error', '')}", file=sys.stderr)
        return 2
    return 1 if any(s in FAILING for s in statuses) else 0


def device_arch() -> str | None:
    """sm_XY[a] of GPU 0 by nvidia-smi (no torch in the parent), None without one."""
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.match(r"(\d+)\.(\d+)", p.stdout.strip())
    return f"sm_{m[1]}{m[2]}" + ("a" if m[1] == "9" else "") if m else None


def compile_all(kdir: Path, man: dict, deadline: float | None) -> None:
    """``nvcc -cubin`` of every variant for this GPU's arch, in parallel (what a variant's process then loads);
    a failure is left for the variant to report."""
    arch = device_arch()
    if arch is None:
        return

    def one(v):
        cubin = kdir / f"{v['name']}.{arch}.cubin"
        left = remaining(deadline, 300.0)
        if left <= 0:
            return
        try:
            p = subprocess.run(["nvcc", f"-arch={arch}", "-cubin", "-o", str(cubin), str(kdir / v["cu"]),
                                "-Xptxas", "-v"], capture_output=True, text=True, timeout=left, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            p = None
            (kdir / f"{v['name']}.{arch}.ptxas.txt").write_text(f"nvcc: {type(e).__name__}: {e}")
        if p is not None:
            (kdir / f"{v['name']}.{arch}.ptxas.txt").write_text(("" if p.returncode == 0 else "FAILED\n") + p.stderr)

    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, min(16, os.cpu_count() or 1))) as pool:
        list(pool.map(one, man["variants"]))
    print(f"nvcc -arch={arch}: {len(man['variants'])} kernels in {time.perf_counter() - t:.0f} s", flush=True)


def isolated(kdir: Path, name: str, args) -> dict:
    """Variant ``name`` in a fresh process under ``args.timeout`` (less when the deadline is nearer)."""
    left = remaining(args.deadline, args.timeout)
    if left <= 0:
        return {"variant": name, "status": "not run", "error": "the suite's time budget is spent"}
    cmd = [sys.executable, str(Path(__file__).resolve()), str(kdir), "--variant", name, "--warmup",
           str(args.warmup), "--iters", str(args.iters)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=left, check=False)
    except subprocess.TimeoutExpired:
        return {"variant": name, "status": "timeout", "error": f"no result within {left:.0f} s"}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith(RESULT):
            return json.loads(line[len(RESULT):])
    tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
    return {"variant": name, "status": "crashed", "error": f"exit status {p.returncode}: " + " | ".join(tail)}


def relate(rows: list) -> None:
    """Each timed case's speedup over its variant's unpipelined kernel, once both have run."""
    by_name = {r["variant"]: r for r in rows}
    for r in rows:
        base = by_name.get(r.get("baseline") or "")
        if not base or r["status"] != "ok" or base.get("status") != "ok":
            continue
        base_ms = {c["n"]: c.get("ms") for c in base["cases"]}
        for c in r["cases"]:
            if c.get("ms") and base_ms.get(c["n"]):
                c["speedup_vs_unpipelined"] = base_ms[c["n"]] / c["ms"]


def print_table(doc: dict) -> None:
    print(f"{doc['device']} ({doc['arch']}): attention forward, fp16, commit {doc['commit']}")
    print(f"{'variant':24s} {'status':7s} {'n':>5s} {'err':>8s} {'ms':>8s} {'TFLOP/s':>8s} {'SDPA':>7s} "
          f"{'x unpip':>7s} {'pred':>7s} {'meas':>7s} {'pred err':>8s} bound")
    for r in doc["results"]:
        if r["status"] not in ("ok", "wrong"):
            print(f"{r['variant']:24s} {r['status']:7s} {str(r.get('error', ''))[:90]}")
            continue
        for c in r["cases"]:
            if "ms" not in c:
                print(f"{r['variant']:24s} {r['status']:7s} {c['n']:5d} {c['max_abs_err']:8.1e}")
                continue
            p = c["predicted_vs_measured"]
            pe = f"{100 * p['error']:+7.0f}%" if p["error"] is not None else "       -"
            print(f"{r['variant']:24s} {r['status']:7s} {c['n']:5d} {c['max_abs_err']:8.1e} {c['ms']:8.3f} "
                  f"{c['tflops']:8.1f} {c['sdpa_tflops']:7.1f} {c.get('speedup_vs_unpipelined', float('nan')):7.2f} "
                  f"{p['predicted_tflops'] or float('nan'):7.1f} {p['measured_tflops']:7.1f} {pe} "
                  f"{p.get('bound') or ''}")
    notes = {r["variant"]: (r.get("prediction") or {}).get("note") for r in doc["results"]}
    for name, note in notes.items():
        if note:
            print(f"note {name}: {note}")
    print("pred: the model's TFLOPS for the kernel (plan.prediction(), on the plan's machine model); meas: the "
          "FLOP the model counts (all KV tiles) / time; TFLOP/s and SDPA: masked-attention FLOP / time")


def run_variant(kdir: Path, man: dict, name: str, warmup: int, iters: int) -> dict:
    """One variant, in this process: load its cubin, check every case against SDPA, time the timed ones."""
    v = next((x for x in man["variants"] if x["name"] == name), None)
    if v is None:
        return {"variant": name, "status": "failed", "error": f"no variant {name!r} in the manifest"}
    try:
        import torch
    except ImportError:
        return {"variant": name, "status": "not run", "error": "missing module torch (pip install torch)"}
    if not torch.cuda.is_available():
        return {"variant": name, "status": "not run", "error": "no CUDA GPU here; run it on a GPU machine"}
    cc = torch.cuda.get_device_capability()
    arch = f"sm_{cc[0]}{cc[1]}" + ("a" if cc[0] == 9 else "")
    info = {"variant": name, "device": torch.cuda.get_device_name(), "arch": arch, "torch": torch.__version__,
            "kernel_arch": man["arch"], "baseline": v.get("baseline"), "prediction": v.get("prediction")}
    if int(re.sub(r"\D", "", man["arch"])) > cc[0] * 10 + cc[1]:
        return {**info, "status": "not run", "error": f"{man['arch']} code does not run on {arch}"}
    from cuda_driver import Launcher

    torch.zeros(1, device="cuda")  # the primary context, current on this thread: the driver loads the cubin into it
    cubin = kdir / f"{name}.{arch}.cubin"
    log = kdir / f"{name}.{arch}.ptxas.txt"
    if not cubin.is_file():
        p = subprocess.run(["nvcc", f"-arch={arch}", "-cubin", "-o", str(cubin), str(kdir / v["cu"]), "-Xptxas",
                            "-v"], capture_output=True, text=True, check=False)
        log.write_text(("" if p.returncode == 0 else "FAILED\n") + p.stderr)
    text = log.read_text() if log.is_file() else ""
    if text.startswith("FAILED") or not cubin.is_file():
        return {**info, "status": "failed", "error": "nvcc: " + text[-500:]}
    regs, spills = re.findall(r"Used (\d+) registers", text), re.findall(r"(\d+) bytes spill stores", text)
    info.update(registers=int(regs[0]) if regs else None, spill_bytes=int(spills[0]) if spills else None)
    try:
        launch = Launcher(cubin.read_bytes(), v["kernel"], v["grid"], v["block"], v.get("dyn_smem", 0))
        cases = [_case(launch, man, v, c, torch, warmup, iters) for c in man["cases"]]
    except Exception as e:  # noqa: BLE001  (a launch error or a fault: this variant's verdict)
        return {**info, "status": "failed", "error": f"{type(e).__name__}: {e}"}
    ok = all(c["correct"] for c in cases)
    return {**info, "status": "ok" if ok else "wrong", "correct": ok, "cases": cases}


def _math_backend(torch):
    """SDPA restricted to its math backend (older torch: whatever it picks)."""
    import contextlib

    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return contextlib.nullcontext()
    return sdpa_kernel(SDPBackend.MATH)


def _case(launch, man: dict, v: dict, case: dict, torch, warmup: int, iters: int) -> dict:
    from common import median_cuda_ms
    from cuda_driver import pack_params

    F = torch.nn.functional
    n, d, heads, q_len = case["n"], v["head_dim"], man["heads"], man["q_len"]
    g = torch.Generator(device="cuda").manual_seed(1000 + n)  # the same inputs in every variant's process
    q = (torch.randn(heads, q_len, d, device="cuda", generator=g) * d ** -0.5).half()
    k = torch.randn(heads, n, d, device="cuda", generator=g).half()
    vv = torch.randn(heads, n, d, device="cuda", generator=g).half()
    o = torch.full((heads, q_len, d), float("nan"), device="cuda", dtype=torch.float16)  # every row must be written
    ptrs = {"Q": q.data_ptr(), "K": k.data_ptr(), "V": vv.data_ptr(), "O": o.data_ptr()}
    packed = pack_params(v["params"], ptrs, n)
    stream = torch.cuda.current_stream().cuda_stream
    launch(packed, stream)
    torch.cuda.synchronize()
    with _math_backend(torch):  # SDPA's own formula (the top-left causal mask as documented), in fp32
        ref = reference(F, q.float(), k.float(), vv.float(), v["causal"])
    err = (o.float() - ref).abs().max().item() if o.numel() else 0.0
    row = {"n": n, "max_abs_err": err, "correct": bool(err < TOLERANCE)}  # NaN (a row not written) fails
    if not case.get("timed"):
        return row
    ms = median_cuda_ms(lambda: launch(packed, stream), torch, warmup, iters)
    sdpa_ms = median_cuda_ms(lambda: F.scaled_dot_product_attention(q[None], k[None], vv[None],
                                                                    is_causal=v["causal"], scale=1.0),
                             torch, warmup, iters)
    flop = useful_flops(heads, q_len, n, d, v["causal"])
    measured = executed_flops(v, man, n) / ms / 1e9
    return {**row, "ms": ms, "tflops": flop / ms / 1e9, "sdpa_ms": sdpa_ms, "sdpa_tflops": flop / sdpa_ms / 1e9,
            "vs_sdpa": sdpa_ms / ms, "predicted_vs_measured": compare(v.get("prediction"), measured)}


if __name__ == "__main__":
    sys.exit(main())
