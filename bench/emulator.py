"""Emulator speed: warp instructions per second and time per kernel kind (tvm_twill.emulator on the CPU).

Kernels TVM builds (nvcc 13 -ptx), one interleaving each, default policy:

- SWP sm_80 GEMM 256^3 (TVM's tensor-core schedule, auto_pipeline, cp.async): every CTA of its launch (the
  issue's speed target: under 30 s on one core);
- WS sm_80 GEMM 256^3 (producer warp + cp.async/mbarrier ring), every CTA;
- WS sm_90a GEMM 256^3 (TMA + wgmma, workloads.wgmma_gemm), every CTA of its 2 x 4 grid;
- an elementwise kernel (4096 fp32) and a row reduction (16 x 1024 fp32, shuffles + shared memory).

Launches come from the compiled module (``emulator.run``).  Each kernel's time is given as wall-clock and
as the process's CPU time (on a shared machine the wall time counts the waits for a core; the rate is per
CPU second).

    python bench/emulator.py            # print the table
    python bench/emulator.py --save     # and record it in bench/results/emulator.md
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "emulator"))

from common import ROOT, cpu_name, git_commit


def _gemm(ws):
    from tvm_kernels import compile_module, gemm_inputs

    import tvm_twill
    from tvm_twill.workloads import tensorcore_gemm
    sch, k0, k1 = tensorcore_gemm(256)
    plan = tvm_twill.auto_pipeline(sch, [k0, k1], "sm_80", warp_specialize=ws)
    f = compile_module(sch.mod, pipeline=plan.tir_pipeline, async_copy=True)
    a, b, c = gemm_inputs(256)
    check = lambda: float(np.abs(c - a.astype(np.float32) @ b.astype(np.float32)).max())
    return f, (a, b, c), check, None


def _wgmma():
    from tvm_kernels import compile_module, gemm_inputs

    import tvm_twill
    from tvm_twill.workloads import wgmma_gemm
    sch, k0, _ = wgmma_gemm(256)
    plan = tvm_twill.auto_pipeline(sch, k0, "sm_90a", warp_specialize=True)
    f = compile_module(sch.mod, "sm_90a", plan.tir_pipeline, async_copy=True)
    a, b, c = gemm_inputs(256)
    return f, (a, b, c), lambda: float(np.abs(c - a.astype(np.float32) @ b.astype(np.float32).T).max()), None


def _elementwise():
    from tvm_kernels import elementwise
    _, f = elementwise(4096)
    a = np.linspace(-4, 4, 4096).astype(np.float32)
    b = np.zeros_like(a)
    return f, (a, b), lambda: float(np.abs(b - (np.exp(a) * 0.5 + a)).max()), None


def _row_sum():
    from tvm_kernels import row_sum
    _, f = row_sum(16, 1024)
    a = np.random.default_rng(0).uniform(-1, 1, (16, 1024)).astype(np.float32)
    c = np.zeros(16, np.float32)
    return f, (a, c), lambda: float(np.abs(c - a.sum(1)).max()), None


KINDS = {"SWP sm_80 GEMM 256^3": lambda: _gemm(False), "WS sm_80 GEMM 256^3": lambda: _gemm(True),
         "WS sm_90a GEMM 256^3 (TMA + wgmma)": _wgmma, "elementwise 4096 fp32": _elementwise,
         "row sum 16x1024 fp32": _row_sum}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--save", action="store_true", help="write bench/results/emulator.md")
    args = ap.parse_args()
    from tvm_twill import emulator as E
    from tvm_twill.emulator.launch import launches
    rows = []
    for name, build in KINDS.items():
        f, arrays, check, blocks = build()
        _, launch_list = launches(f, arrays)        # nvcc -ptx once (cached), outside the timing
        t, c0 = time.perf_counter(), time.process_time()
        report = E.run(f, *arrays, blocks=blocks)
        secs, cpu = time.perf_counter() - t, time.process_time() - c0
        ctas = len(blocks) if blocks else int(np.prod(launch_list[0].grid))
        name = f"{name}, {ctas} CTAs of grid {launch_list[0].grid}"
        rows.append((name, report.instructions, secs, cpu, report.instructions / cpu, len(report.findings), check()))
        print(f"{name}: {report.instructions} warp instructions, {secs:.2f} s wall, {cpu:.2f} s CPU, "
              f"{report.instructions / cpu:,.0f} instr per CPU s, findings {len(report.findings)}, "
              f"max error {check():.2e}", flush=True)
    table = ["| kernel | warp instructions | wall s | CPU s | instructions per CPU s | findings | max abs error |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    table += [f"| {n} | {i} | {s:.2f} | {c:.2f} | {r:,.0f} | {f} | {e:.1e} |" for n, i, s, c, r, f, e in rows]
    print("\n".join(table))
    if not args.save:
        print("not saved (pass --save to record this table in bench/results/)")
        return
    head = ["# Emulator speed (tvm_twill.emulator, one interleaving, default policy)", "",
            "- command: `python bench/emulator.py --save`", f"- commit: `{git_commit()}`",
            f"- host: {cpu_name()}, Python {platform.python_version()}, numpy {np.__version__}, one process", ""]
    out = ROOT / "bench" / "results" / "emulator.md"
    out.write_text("\n".join(head + table) + "\n")
    print(f"saved {out}")


if __name__ == "__main__":
    main()
