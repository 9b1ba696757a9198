"""Every GPU check of the project behind one command (finishes well inside 20 minutes on one H100/H200).

The TVM wheel (~100 MB) does not travel to a GPU machine, so the suite has
two halves:

    python bench/gpu_suite.py prepare gpu_kernels      # here, with TVM: compile every kernel
    python bench/gpu_suite.py run gpu_kernels           # on the GPU machine (torch, CuPy, nvcc)

``prepare`` writes, for each target arch of the suite (sm_90a for H100/H200
and sm_80 for A100-class code, which also runs on Hopper), the CUDA source
and launch configuration of TVM's tensor-core GEMM pipelined six ways
(``auto_pipeline`` and TVM's hand annotation, simple and nested loop, the
warp-specialized kernel of ``auto_pipeline(..., warp_specialize=True)``:
producer warp + mbarrier ring, and that kernel with its consumer warps in
two groups taking turns through named barriers); on sm_90a also the wgmma GEMM of
``workloads.wgmma_gemm``, plain and warp-specialized (with 128-byte swizzled rings, and with the
no-swizzle layout), which reads B as N x K;
see ``bench/gemm_gpu.py``).  ``run`` builds each with ``nvcc -cubin``, checks it
against torch (fp32) and numpy (a row slice), times it against
``torch.matmul`` (cuBLAS) and writes ``bench/results/gpu_gemm_<arch>.json``
with the device, the commit and the command (``bench/gpu_gemm_run.py``).
A kernel that is not right is reported as wrong; the exit status is 1 then.

With the session's device tool: put the prepared folder in a path that
``.git/info/exclude`` ignores, name it in ``carry``, and run
``python3 bench/gpu_suite.py run gpu_kernels`` there.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHS = ("sm_90a", "sm_80")


def prepare(out: Path, time_limit: float) -> int:
    for arch in ARCHS:
        cmd = [sys.executable, str(ROOT / "bench" / "gemm_gpu.py"), "--export", str(out / arch), "--arch", arch,
               "--time-limit", str(time_limit)]
        print("+", " ".join(cmd), flush=True)
        rc = subprocess.run(cmd).returncode
        if rc:
            return rc
    print(f"prepared {out}: run `python3 bench/gpu_suite.py run {out}` on the GPU machine")
    return 0


def run(kernels: Path, results: Path) -> int:
    status = 0
    for arch in ARCHS:
        kdir = kernels / arch
        if not (kdir / "manifest.json").is_file():
            print(f"gpu_suite: {kdir}/manifest.json is missing: run `gpu_suite.py prepare {kernels}` first",
                  file=sys.stderr)
            return 2
        out = results / f"gpu_gemm_{arch}.json"
        cmd = [sys.executable, str(ROOT / "bench" / "gpu_gemm_run.py"), str(kdir), "--out", str(out)]
        print("+", " ".join(cmd), flush=True)
        rc = subprocess.run(cmd).returncode
        if rc == 2:
            return 2  # no GPU / missing packages: one line already printed
        status = status or rc
        if out.is_file():
            res = json.loads(out.read_text())
            bad = [f"{r['variant']} ({r.get('status', 'wrong')})" for r in res.get("results", [])
                   if r.get("status") in ("wrong", "failed", "timeout", "crashed") or r.get("correct") is False]
            if bad:
                print(f"gpu_suite: failing {arch} kernels: {', '.join(bad)}", file=sys.stderr)
                status = 1
    return status


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="compile every kernel of the suite here (needs TVM, no GPU)")
    p.add_argument("out", type=Path, help="folder to write (carried to the GPU machine)")
    p.add_argument("--time-limit", type=float, default=30.0, help="solver seconds per loop")
    r = sub.add_parser("run", help="run every check on this machine's GPU (needs torch, CuPy, nvcc; no TVM)")
    r.add_argument("kernels", type=Path, help="the folder `prepare` wrote")
    r.add_argument("--results", type=Path, default=ROOT / "bench" / "results", help="where the JSON results go")
    args = ap.parse_args(argv)
    return prepare(args.out, args.time_limit) if args.cmd == "prepare" else run(args.kernels, args.results)


if __name__ == "__main__":
    sys.exit(main())
