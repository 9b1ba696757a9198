"""Every GPU check of the project behind one command (at most 19 minutes of GPU time by construction).

The TVM wheel (~100 MB) does not travel to a GPU machine, so the suite has
two halves:

    python bench/gpu_suite.py prepare gpu_kernels      # here, with TVM: compile every kernel
    python bench/gpu_suite.py run gpu_kernels           # on the GPU machine (torch and nvcc; no TVM)

``prepare`` writes, for each target arch of the suite (sm_90a for H100/H200
and sm_80 for A100-class code, which also runs on Hopper), the CUDA source
and launch configuration of TVM's tensor-core GEMM pipelined six ways
(``auto_pipeline`` and TVM's hand annotation, simple and nested loop, the
warp-specialized kernel of ``auto_pipeline(..., warp_specialize=True)``:
producer warp + mbarrier ring, and that kernel with its consumer warps in
two groups taking turns through named barriers); on sm_90a also the wgmma GEMM of
``workloads.wgmma_gemm``, plain and warp-specialized (with 128-byte swizzled rings, and with the
no-swizzle layout), which reads B as N x K;
see ``bench/gemm_gpu.py``), and in ``<arch>/attention`` the FlashAttention-forward kernels
(``bench/attention_gpu.py``: the SIMT kernel unpipelined, software-pipelined and warp-specialized, on sm_80
also the tensor-core kernel unpipelined and pipelined, on sm_90a also the wgmma kernel unpipelined and
warp-specialized (FA3's two consumer warp groups with the look-ahead turn); head dim 64 and 128, causal and
not; the KV length a scalar argument).  Every manifest entry carries the model's prediction (``plan.prediction()``: cycles per
iteration, TFLOPS, bound; ``bench/predicted.py``).  ``run`` builds each kernel with ``nvcc -cubin``, checks
the GEMMs against torch (fp32) and numpy (a row slice) and times them against ``torch.matmul`` (cuBLAS)
(``bench/gpu_gemm_run.py``), checks the attention kernels against torch's
``scaled_dot_product_attention`` at four KV lengths and times them against it and against their
unpipelined kernel (``bench/gpu_attention_run.py``), prints predicted next to measured TFLOPS with the
error, and writes ``bench/results/gpu_gemm_<arch>.json`` and ``gpu_attention_<arch>.json`` with the device,
the commit and the command.  A kernel that is not right is reported as wrong; the exit status is 1 then.

GPU time budget.  The suite runs 15 GEMM variants + 2 cuBLAS baselines and 40 attention variants (20 on
sm_80, 20 on sm_90a), each in its own process.  A GEMM variant is one nvcc, one check and 5 + 20 timed
launches of a 4096^3 product (about 1 ms each); an attention variant is four checks and, at the two timed
KV lengths, 3 + 10 launches of the kernel and of SDPA (a SIMT kernel at 16 x 2048 x 2048, d 128, takes
tens of ms) after one parallel nvcc of all 40 kernels: about 10-20 s a process, 12-15 minutes in all.  By
construction it stays under 20: ``run`` sets a deadline ``BUDGET_S`` (19 minutes) after it starts; each
process gets at most ``VARIANT_TIMEOUT_S`` and never past the deadline, and a variant not started by
then is reported ``not run`` (not a verdict on the kernel).

Without a GPU, ``emulate`` runs the same numerics on the CPU, on tvm_twill's PTX emulator (needs nvcc
and the package, not TVM): each prepared kernel's PTX on a few of its CTAs (``--blocks``; the 4096^3
problem is minutes per CTA on the CPU; the attention kernels at the KV lengths ``--kv-len``: 101, ragged,
5, fewer tiles than the pipeline's stages, and 0),
on seeded random inputs, the rows and columns it wrote compared against numpy, and every emulator finding
(race, deadlock, missing proxy fence, ...) reported, next to each kernel's predicted TFLOPS (the emulator
gives no timings); exit 1 if a kernel is wrong or has a finding.  ``--save`` writes
``bench/results/emulated_gemm_<arch>.json`` and ``emulated_attention_<arch>.json``::

    python bench/gpu_suite.py emulate gpu_kernels --blocks 0,0,0 --save

With the session's device tool: put the prepared folder in a path that
``.git/info/exclude`` ignores, name it in ``carry``, and run
``python3 bench/gpu_suite.py run gpu_kernels`` there.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHS = ("sm_90a", "sm_80")


#: The suite's GPU time: nothing starts later than this after ``run`` starts.
BUDGET_S = 19 * 60
#: Seconds one variant's process may take (nvcc, checks, timing).
VARIANT_TIMEOUT_S = 90
PARTS = ("gemm", "attention")


def prepare(out: Path, time_limit: float, parts=PARTS) -> int:
    for arch in ARCHS:
        if "gemm" in parts:
            cmd = [sys.executable, str(ROOT / "bench" / "gemm_gpu.py"), "--export", str(out / arch), "--arch", arch,
                   "--time-limit", str(time_limit)]
            print("+", " ".join(cmd), flush=True)
            rc = subprocess.run(cmd, check=False).returncode
            if rc:
                return rc
        if "attention" in parts:
            sys.path.insert(0, str(ROOT / "bench"))
            import attention_gpu
            print(f"+ attention_gpu.export({out / arch / 'attention'}, {arch})", flush=True)
            attention_gpu.export(out / arch / "attention", arch, time_limit)
    print(f"prepared {out}: run `python3 bench/gpu_suite.py run {out}` on the GPU machine")
    return 0


def _steps(kernels: Path, results: Path):
    """(runner script, kernel folder, results file) of every part prepared, in run order."""
    for arch in ARCHS:
        yield "gpu_gemm_run.py", kernels / arch, results / f"gpu_gemm_{arch}.json"
        if (kernels / arch / "attention" / "manifest.json").is_file():
            yield "gpu_attention_run.py", kernels / arch / "attention", results / f"gpu_attention_{arch}.json"


def run(kernels: Path, results: Path, budget_s: float = BUDGET_S) -> int:
    status = 0
    deadline = time.time() + budget_s
    for script, kdir, out in _steps(kernels, results):
        if not (kdir / "manifest.json").is_file():
            print(f"gpu_suite: {kdir}/manifest.json is missing: run `gpu_suite.py prepare {kernels}` first",
                  file=sys.stderr)
            return 2
        cmd = [sys.executable, str(ROOT / "bench" / script), str(kdir), "--out", str(out), "--timeout",
               str(VARIANT_TIMEOUT_S), "--deadline", str(deadline)]
        print("+", " ".join(cmd), flush=True)
        if time.time() >= deadline:
            print(f"gpu_suite: the {budget_s:.0f} s budget is spent: {out.name} not written", file=sys.stderr)
            continue
        rc = subprocess.run(cmd, check=False).returncode
        if rc == 2 and time.time() >= deadline:  # every variant past the deadline: not a verdict
            continue
        if rc == 2:  # no GPU / missing packages: one line already printed
            print(f"gpu_suite: without a GPU, `gpu_suite.py emulate {kernels}` runs the numerics on the emulator",
                  file=sys.stderr)
            return 2
        status = status or rc
        if out.is_file():
            res = json.loads(out.read_text())
            bad = [f"{r['variant']} ({r.get('status', 'wrong')})" for r in res.get("results", [])
                   if r.get("status") in ("wrong", "failed", "timeout", "crashed") or r.get("correct") is False]
            if bad:
                print(f"gpu_suite: failing kernels of {out.name}: {', '.join(bad)}", file=sys.stderr)
                status = 1
    left = deadline - time.time()
    print(f"gpu_suite: {budget_s - left:.0f} s of the {budget_s:.0f} s budget used")
    return status


def _launch(v: dict):
    """The emulator's Launch of a manifest variant: buffers A, B, C are arguments 0, 1, 2; TMA parameters get
    the tensor maps the manifest records (what the GPU runner encodes with cuTensorMapEncodeTiled)."""
    from tvm_twill.emulator import Launch, TensorMap
    index = {"A": 0, "B": 1, "C": 2}
    maps = {m["param"]: m for m in v.get("tensor_maps", [])}
    params = []
    for a in v["args"]:
        if a in maps:
            m = maps[a]
            params.append(("tensormap", TensorMap(m["dtype"], m["rank"], (index[m["buffer"]], 0),
                                                  tuple(m["global_dims"]), tuple(m["global_strides"]),
                                                  tuple(m["box"]), tuple(m["element_strides"]), 0, m["swizzle"],
                                                  0, 0)))
        else:
            params.append(("buffer", index[a], 0))
    grid, block = (list(v["grid"]) + [1, 1])[:3], (list(v["block"]) + [1, 1])[:3]
    return Launch(v["kernel"], tuple(grid), tuple(block), v.get("dyn_smem", 0), tuple(params))


def emulate_variant(kdir: Path, man: dict, v: dict, blocks, seed: int, interleavings: int) -> dict:
    """One prepared kernel on the emulator: its CTAs ``blocks`` on seeded inputs, against numpy."""
    import numpy as np

    from tvm_twill import emulator
    from tvm_twill.emulator.launch import compile_ptx
    M, N, K = man["M"], man["N"], man["K"]
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    bm = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    b = np.ascontiguousarray(bm.T) if v.get("b_transposed", man.get("b_transposed", False)) else bm
    c = np.zeros((M, N), np.float32)
    ptx = compile_ptx((kdir / v["cu"]).read_text(), man["arch"])
    report = emulator.run_ptx(ptx, [_launch(v)], a, b, c, seed=seed, interleavings=interleavings,
                              blocks=blocks)
    rows, cols = np.flatnonzero((c != 0).any(axis=1)), np.flatnonzero((c != 0).any(axis=0))
    written = int((c != 0).sum())
    err = rel = float("inf")
    if written:
        ref = a[rows].astype(np.float32) @ bm[:, cols].astype(np.float32)
        err = float(np.abs(c[np.ix_(rows, cols)] - ref).max())
        rel = err / max(1e-30, float(np.abs(ref).max()))
    correct = written > 0 and rel < 1e-3
    return {"variant": v["name"], "status": "ok" if correct and report.ok else "wrong", "correct": correct,
            "findings": [str(f) for f in report.findings], "elements_written": written, "max_abs_err": err,
            "max_rel_err": rel, "blocks": [list(x) for x in blocks], "seed": seed, "interleavings": interleavings,
            "instructions": report.instructions, "seconds": round(report.seconds, 2),
            "prediction": v.get("prediction")}


def _predicted(r: dict) -> str:
    p = r.get("prediction")
    return f"  predicted {p['tflops']} TFLOPS ({p['bound']}, {p['machine']})" if p else ""


def _emulated(part: str, kdir: Path, man: dict, v: dict, blocks, seed: int, interleavings: int, kv_lens):
    """(result, error text) of each emulation of variant ``v``: a GEMM once, an attention kernel per KV length."""
    if part == "gemm":
        r = emulate_variant(kdir, man, v, blocks, seed, interleavings)
        yield r, f"rel err {r['max_rel_err']:.2e}"
        return
    sys.path.insert(0, str(ROOT / "bench"))
    from attention_gpu import emulate_variant as emulate_attention
    for n in kv_lens:
        r = emulate_attention(kdir, man, v, n, blocks, seed, interleavings)
        yield r, f"abs err {r['max_abs_err']:.2e} (n {n})"


def emulate(kernels: Path, results: Path | None, blocks, seed: int, interleavings: int, only=None,
            kv_lens=(101, 5, 0), parts=PARTS) -> int:
    """``emulate_variant`` for every prepared kernel (of ``only`` and ``parts``, if given), the attention kernels
    at each KV length of ``kv_lens``; results JSON only when asked."""
    sys.path.insert(0, str(ROOT))
    archs = [a for a in ARCHS if (kernels / a / "manifest.json").is_file()
             or (kernels / a / "attention" / "manifest.json").is_file()]
    if not archs:
        print(f"gpu_suite: no {kernels}/<arch>/manifest.json: run `gpu_suite.py prepare {kernels}` first",
              file=sys.stderr)
        return 2
    status = 0
    for arch in archs:
        for part, kdir in (("gemm", kernels / arch), ("attention", kernels / arch / "attention")):
            if part not in parts or not (kdir / "manifest.json").is_file():
                continue
            man = json.loads((kdir / "manifest.json").read_text())
            doc = {"mode": "emulated (tvm_twill.emulator, no GPU)", "arch": man["arch"], "commit": man.get("commit"),
                   "command": " ".join(["python", "bench/gpu_suite.py", *sys.argv[1:]]),
                   "prepare_command": man.get("command"), "results": []}
            doc.update({k: man[k] for k in ("M", "N", "K", "heads", "q_len") if k in man})
            for v in man["variants"]:
                if only and v["name"] not in only:
                    continue
                for r, err in _emulated(part, kdir, man, v, blocks, seed, interleavings, kv_lens):
                    doc["results"].append(r)
                    print(f"{arch} {r['variant']:24s} {r['status']:5s} {err}  {len(r['findings'])} findings  "
                          f"{r['instructions']} warp instr  {r['seconds']:.1f} s{_predicted(r)}", flush=True)
                    for f in r["findings"]:
                        print(f"    {f}")
                    status = status or int(r["status"] != "ok")
            if results is not None:
                results.mkdir(parents=True, exist_ok=True)
                (results / f"emulated_{part}_{arch}.json").write_text(json.dumps(doc, indent=2) + "\n")
    return status


def _block(text: str) -> tuple:
    parts = [int(x) for x in text.split(",")]
    return tuple(parts + [0] * (3 - len(parts)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="compile every kernel of the suite here (needs TVM, no GPU)")
    p.add_argument("out", type=Path, help="folder to write (carried to the GPU machine)")
    p.add_argument("--time-limit", type=float, default=30.0, help="solver seconds per loop")
    p.add_argument("--part", action="append", choices=PARTS, help="only these parts (default: all)")
    r = sub.add_parser("run", help="run every check on this machine's GPU (needs torch, nvcc; no TVM)")
    r.add_argument("kernels", type=Path, help="the folder `prepare` wrote")
    r.add_argument("--results", type=Path, default=ROOT / "bench" / "results", help="where the JSON results go")
    e = sub.add_parser("emulate", help="run the numerics on the CPU emulator (no GPU; needs nvcc)")
    e.add_argument("kernels", type=Path, help="the folder `prepare` wrote")
    e.add_argument("--blocks", nargs="+", type=_block, default=[(0, 0, 0)], metavar="X,Y,Z",
                   help="the CTAs to run (default 0,0,0)")
    e.add_argument("--seed", type=int, default=0, help="inputs and schedules seed")
    e.add_argument("--interleavings", type=int, default=1, help="seeded schedules per kernel")
    e.add_argument("--variant", action="append", help="only these variants")
    e.add_argument("--part", action="append", choices=PARTS, help="only these parts (default: all)")
    e.add_argument("--kv-len", type=int, nargs="+", default=[101, 5, 0],
                   help="the attention kernels' KV lengths (default 101 5 0: ragged, fewer tiles than stages, none)")
    e.add_argument("--save", action="store_true", help="write bench/results/emulated_{gemm,attention}_<arch>.json")
    e.add_argument("--results", type=Path, default=ROOT / "bench" / "results", help="where --save writes")
    args = ap.parse_args(argv)
    if args.cmd == "emulate":
        return emulate(args.kernels, args.results if args.save else None, args.blocks, args.seed,
                       args.interleavings, args.variant, args.kv_len, tuple(args.part or PARTS))
    if args.cmd == "prepare":
        return prepare(args.out, args.time_limit, tuple(args.part or PARTS))
    return run(args.kernels, args.results)


if __name__ == "__main__":
    sys.exit(main())
