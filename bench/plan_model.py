"""A whole model, end to end: plan every software pipeline of a small Llama-class model in one command.

Builds the model with ``tvm.relax.frontend.nn`` (``tvm_twill.workloads.llama``: RMSNorm,
q/k/v/o projections, attention matmuls, SwiGLU MLP), lowers it with relax,
schedules it with dlight for each arch (tensor-core ``Matmul`` first), then
``tvm_twill.plan_module`` re-plans every pipeline nest dlight wrote, with
the solves on a local process pool.  It prints, per arch: how many nests got
a plan, how many were kept and why (grouped), the solver time, the wall time,
and the model's predicted change (sum over nests of model ii x trip count,
before vs after: the model's estimate per thread block, not a measurement).

``--compare-serial`` plans again with one worker (no pool) and reports both
wall times and whether the two results are identical (report and module).
``--compile`` compiles every planned kernel for CUDA with ``tvm.compile``
(no GPU needed).  Only with ``--save`` (or ``--out DIR``) it writes
``plan_model.json`` and ``.md`` (default folder ``bench/results/``) with the
host, the commit and the command line.

    python bench/plan_model.py                                  # sm_80 and sm_90a, print only
    python bench/plan_model.py --arch sm_80 --compare-serial --compile --save
    python bench/plan_model.py --candidates 8 --compare-serial   # + a module of 8 MetaSchedule candidates
    python bench/plan_model.py --layers 1 --hidden 128 --heads 1 --ffn 128 --seq 128   # tiny
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from common import cpu_name, git_commit

try:
    import tvm_twill  # noqa: F401  (no TVM yet: worker processes re-import this script)
except ImportError:  # a source checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", action="append", help="CUDA arch (repeatable; default sm_80 and sm_90a)")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--ffn", type=int, default=2752)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--workers", type=int, default=2, help="local worker processes (1: no pool)")
    ap.add_argument("--time-limit", type=float, default=10.0, help="seconds per solve")
    ap.add_argument("--compare-serial", action="store_true", help="plan again with one worker and compare")
    ap.add_argument("--compile", action="store_true", help="compile every planned kernel for CUDA")
    ap.add_argument("--candidates", type=int, default=0,
                    help="also plan a module of N MetaSchedule candidates of a GEMM (many distinct loops)")
    ap.add_argument("--save", action="store_true", help="write bench/results/plan_model.{json,md}")
    ap.add_argument("--out", help="write plan_model.{json,md} to this folder")
    return ap.parse_args(argv)


def compile_planned(plan) -> dict:
    """tvm.compile each planned kernel alone (with the pass context plans are verified in): name -> "ok" or
    the error's first line."""
    from tvm_twill.frontend import compile_cuda
    from tvm_twill.frontend.ir import tvm

    out = {}
    for name in sorted({lo.func for lo in plan.planned}):
        func = plan.mod[name].with_attr("global_symbol", name)
        try:
            compile_cuda(tvm.IRModule({name: func}), plan.arch)
            out[name] = "ok"
        except Exception as err:  # noqa: BLE001 - recorded, and the run fails below
            out[name] = f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
    return out


def run_arch(arch: str, args, cfg) -> dict:
    from tvm_twill.workloads.llama import dlight_arch, scheduled_module

    t = time.perf_counter()
    mod = scheduled_module(cfg, arch)
    sched = dlight_arch(arch)
    note = "" if sched == arch else f" (for {sched}: dlight reads no arch suffix and would use no tensor cores)"
    print(f"\n== {arch}: model built and scheduled by dlight{note} in {time.perf_counter() - t:.1f} s")
    return plan_and_compare(mod, arch, args, {"arch": arch, "dlight_arch": sched, "label": f"{arch}: the model "
                                              f"(dlight for {sched})", "build_s": time.perf_counter() - t})


def run_candidates(count: int, args) -> dict:
    """A module of ``count`` MetaSchedule candidates of a 512^3 fp16 GEMM (sm_80): distinct loops, unlike the
    model's, so the solves of one round can run side by side."""
    from tvm_twill.frontend.ir import tvm
    from tvm_twill.metaschedule import sample_candidates, tensorcore_tune_context

    t = time.perf_counter()
    cands = sample_candidates(tensorcore_tune_context(512, "sm_80"), count)
    mod = tvm.IRModule({f"candidate{i}": c.mod["main"].with_attr("global_symbol", f"candidate{i}")
                        for i, c in enumerate(cands)})
    print(f"\n== sm_80: {len(cands)} MetaSchedule candidates of a 512^3 GEMM, sampled in "
          f"{time.perf_counter() - t:.1f} s")
    return plan_and_compare(mod, "sm_80", args, {"arch": "sm_80", "dlight_arch": "-",
                                                 "label": f"sm_80: {len(cands)} MetaSchedule candidates of a 512^3 "
                                                          "GEMM", "build_s": time.perf_counter() - t})


def plan_and_compare(mod, arch, args, row) -> dict:
    from tvm_twill import plan_module

    plan = plan_module(mod, arch, max_workers=args.workers, time_limit=args.time_limit)
    print(plan.summary())
    row.update(plan.to_dict())
    if args.compare_serial:
        serial = plan_module(mod, arch, max_workers=1, time_limit=args.time_limit)
        # the same outcomes, and the same module to the letter (names included)
        same = serial.to_dict(timings=False) == plan.to_dict(timings=False) and serial.mod.script() == plan.mod.script()
        row["serial"] = {"wall_s": serial.wall_s, "solve_s": serial.solve_s, "identical": bool(same)}
        print(f"serial (1 worker): wall {serial.wall_s:.2f} s, solver {serial.solve_s:.2f} s; "
              f"{args.workers} workers: wall {plan.wall_s:.2f} s; results identical: {bool(same)}")
    if args.compile:
        row["compiled"] = compile_planned(plan)
        bad = {k: v for k, v in row["compiled"].items() if v != "ok"}
        print(f"compiled for CUDA: {len(row['compiled']) - len(bad)} of {len(row['compiled'])} planned kernels"
              + "".join(f"\n  {k}: {v}" for k, v in bad.items()))
    return row


def markdown(doc: dict) -> str:
    L = ["# plan_model: every pipeline of a small Llama-class model, planned by plan_module", "",
         f"Command: `{doc['command']}`  ", f"Host: {doc['host']}, {doc['cpus']} CPUs; commit {doc['commit']}  ",
         f"Model: {doc['model']}", "",
         ("Predicted change: the model's estimate (sum over nests of model ii x trip count, cycles per "
          "thread block), not a measurement."),
         ("Wall times: the whole `plan_module` call (evaluating the annotations as dlight wrote them, the "
          "planning rounds with their solves, writing), with the solves on a local process pool and serially "
          "(1 worker); identical: the same report and the same module text.  The gain of a pool is bounded "
          "by the longest chain of solves of one nest (one per round) and by the cache, which answers every "
          "nest of the same shape as one already solved.  'dlight for': the arch dlight scheduled for (the "
          "last row, with --candidates, is a module of MetaSchedule candidates instead of the model)."), "",
         ("| arch | dlight for | kernels | nests | planned | kept | solves (reused) | solver s | wall s (workers) "
          "| wall s serial | identical | before | after | change |"), "| --- " * 14 + "|"]
    for r in doc["rows"]:
        p, s = r["predicted"], r.get("serial", {})
        reused = sum(lo["reused"] for lo in r["loops"])
        L.append(f"| {r['arch']} | {r['dlight_arch']} | {r['kernels']} | {r['nests']} | {r['planned']} | {r['kept']} | {r['solves']} "
                 f"({reused}) | {r['solve_s']:.2f} | {r['wall_s']:.2f} ({r['workers']}) | "
                 f"{s.get('wall_s', float('nan')):.2f} | {s.get('identical', '-')} | {p['before']} | {p['after']} | "
                 f"{p['change']:+.1%} |")
    for r in doc["rows"]:
        L += ["", f"## {r['label']}", "", "Kept, by reason: " + ("; ".join(f"{n} x {g}" for g, n in r["refusals"])
                                                             or "none"), "",
              "| function | loops | outcome | staging | ii before | ii after | trips | solves | solve s | time-limited |",
              "| --- " * 10 + "|"]
        for lo in r["loops"]:
            L.append(f"| {lo['func']} | {', '.join(lo['loops'])} | {lo['status']} | {lo['staging'] or '-'} | "
                     f"{lo['ii_before']} | {lo['ii_after']} | {lo['trip_count']} | {lo['solves']} | "
                     f"{lo['solve_s']:.2f} | {'yes' if lo['time_limited'] else 'no'} |")
        if "compiled" in r:
            ok = sum(v == "ok" for v in r["compiled"].values())
            L += ["", f"Compiled for CUDA: {ok} of {len(r['compiled'])} planned kernels."]
    return "\n".join(L) + "\n"


def main(argv=None) -> int:
    args = parse_args(argv)
    from tvm_twill.workloads.llama import LlamaConfig

    cfg = LlamaConfig(layers=args.layers, hidden=args.hidden, heads=args.heads, ffn=args.ffn, seq=args.seq)
    rows = [run_arch(arch, args, cfg) for arch in (args.arch or ["sm_80", "sm_90a"])]
    if args.candidates:
        rows.append(run_candidates(args.candidates, args))
    doc = {"command": "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(__file__, ROOT),
                                                                    *(argv if argv is not None else sys.argv[1:])]),
           "host": f"{cpu_name()} ({platform.platform()})", "cpus": os.cpu_count(), "commit": git_commit(),
           "model": f"layers {cfg.layers}, hidden {cfg.hidden}, heads {cfg.heads}, ffn {cfg.ffn}, seq {cfg.seq}, "
                    "fp16", "rows": rows}
    folder = Path(args.out) if args.out else (ROOT / "bench" / "results" if args.save else None)
    if folder is None:
        print("\nnot saved (pass --save or --out DIR to record plan_model.{json,md})")
    else:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "plan_model.json").write_text(json.dumps(doc, indent=1) + "\n")
        (folder / "plan_model.md").write_text(markdown(doc))
        print(f"\nsaved {folder / 'plan_model.json'} and plan_model.md")
    failed = any(v != "ok" for r in rows for v in r.get("compiled", {}).values()) or \
        any(not r.get("serial", {}).get("identical", True) for r in rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
