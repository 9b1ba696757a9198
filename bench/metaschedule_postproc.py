"""MetaSchedule postprocessor benchmark: what ``TwillPipeline`` costs per candidate, cold and cached.

For each arch (default sm_80 and sm_90a) it samples N candidates of
MetaSchedule's software-pipelining tensor-core design space for an n^3 fp16
GEMM (``tvm_twill.metaschedule.tensorcore_tune_context``: ``ReplayTrace`` through the
default "cuda-tensorcore" postprocessors, no GPU), then times
``TwillPipeline.apply`` on a fresh schedule of each candidate, twice:

* cold: with an empty ``PlanCache`` (every distinct loop is extracted,
  solved and verified by TVM once; repeats within the pass already hit);
* cached: the same candidates again with the filled cache, as a tuning run
  meets loops it has seen (solves, extractions, TVM verdicts reused; the
  annotations are still derived, checked and written for each candidate).

The process is warmed up first (imports, z3, TVM's pass registry) on one
candidate with a throw-away cache.  Times are wall-clock milliseconds of the
``apply`` call alone (building the schedule is not counted).  It prints a
table; only with ``--save`` (or ``--out DIR``) it writes
``metaschedule_postproc.json`` and ``.md`` (default folder ``bench/results/``)
with the host, the commit and the command line.

    python bench/metaschedule_postproc.py                    # 16 candidates per arch, print only
    python bench/metaschedule_postproc.py --save
    python bench/metaschedule_postproc.py --archs sm_80 --candidates 8 --size 1024
"""
from __future__ import annotations

import argparse
import collections
import json
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from common import cpu_name, git_commit  # noqa: E402
try:
    import tvm_twill  # noqa: F401
except ImportError:  # a source checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT))

from tvm_twill.cache import PlanCache  # noqa: E402
from tvm_twill.metaschedule import TwillPipeline  # noqa: E402
from tvm_twill.metaschedule import sample_candidates, tensorcore_tune_context  # noqa: E402


def host() -> dict:
    import tvm
    import z3

    import os
    return {"cpu": cpu_name(), "nproc": os.cpu_count(), "python": platform.python_version(), "tvm": tvm.__version__,
            "z3": z3.get_version_string()}


def _kind(reason: str) -> str:
    """A short category for a kept nest's reason (the table groups them)."""
    if "so does the rule's annotation" in reason:
        return "TVM cannot lower the candidate, with the rule's annotation either (VerifyGPUCode)"
    if "VerifyGPUCode" in reason:
        return "plan over the target's limits (VerifyGPUCode)"
    if "Permuted SLayout" in reason:
        return "TVM rejects the rule's own layout (InjectPermutedLayout), before any pipelining"
    if reason.startswith("InfeasibleError"):
        return "infeasible under the model: " + reason.rsplit(": ", 1)[-1][:70]
    if "grouped they fit no II" in reason:
        return ("TVM needs the async copies grouped; grouped, no II up to twice the optimum fits the model: "
                + reason.rsplit("(", 1)[-1][:-1])
    if "Check failed" in reason:
        check = reason.split(") is false: ", 1)[-1] if ") is false: " in reason else reason.split("Check failed: ")[-1]
        return "InjectSoftwarePipeline rejects the plan: " + check[:70]
    return reason[:90]


def timed_pass(twill, modules) -> tuple[list[float], list]:
    import tvm

    times, replans = [], []
    for mod in modules:
        sch = tvm.s_tir.Schedule(mod)
        t0 = time.perf_counter()
        ok = twill.apply(sch)
        times.append((time.perf_counter() - t0) * 1000.0)
        assert ok
        replans.append(twill.history[-1])
    return times, replans


def bench_arch(arch: str, args) -> dict:
    from tvm.s_tir import meta_schedule as ms

    ctx = tensorcore_tune_context(args.size, arch, intrinsics=args.intrinsics, seed=args.seed,
                                  postprocs=ms.postproc.Postproc.create("cuda-tensorcore"))
    t0 = time.perf_counter()
    modules = [sch.mod for sch in sample_candidates(ctx, args.candidates)]
    sample_s = time.perf_counter() - t0

    def twill_with(cache):
        tw = TwillPipeline(cache=cache, time_limit=args.time_limit)
        tw._initialize_with_tune_context(ctx)
        return tw

    timed_pass(twill_with(PlanCache()), modules[:1])  # warm-up: imports, z3, TVM's passes
    cache = PlanCache()
    twill = twill_with(cache)
    cold, replans = timed_pass(twill, modules)
    after_cold = cache.stats()
    cached, again = timed_pass(twill, modules)
    stats = cache.stats()
    same = all([(n.loops, n.reason, n.plan and n.plan.annotations) for n in a.nests] ==
               [(n.loops, n.reason, n.plan and n.plan.annotations) for n in b.nests] for a, b in zip(replans, again))
    kept = collections.Counter(_kind(n.reason) for r in replans for n in r.nests if n.kept)
    return {"arch": arch, "target": str(ctx.target.attrs.get("arch")), "candidates": len(modules),
            "sample_seconds": round(sample_s, 2),
            "nests": sum(len(r.nests) for r in replans),
            "planned": sum(1 for r in replans for n in r.nests if not n.kept),
            "kept": dict(sorted(kept.items())),
            "cold_ms": [round(t, 2) for t in cold], "cached_ms": [round(t, 2) for t in cached],
            "solves_cold": after_cold["solves"]["misses"], "solve_hits_cold": after_cold["solves"]["hits"],
            "solves_cached_pass": stats["solves"]["misses"] - after_cold["solves"]["misses"],
            "extractions_cached_pass": stats["extractions"]["misses"] - after_cold["extractions"]["misses"],
            "verdicts_cached_pass": stats["verdicts"]["misses"] - after_cold["verdicts"]["misses"],
            "same_plans": same}


def _summary(ms_list: list[float]) -> str:
    return (f"{statistics.mean(ms_list):.1f} / {statistics.median(ms_list):.1f} / {max(ms_list):.1f}"
            if ms_list else "-")


HEADER = ["arch", "candidates", "nests planned / kept", "distinct solves", "cold ms (mean / median / max)",
          "cached ms (mean / median / max)", "solves / extractions / TVM checks in cached pass", "same plans"]


def _cells(r: dict) -> list[str]:
    return [r["arch"], str(r["candidates"]), f"{r['planned']} / {r['nests'] - r['planned']}", str(r["solves_cold"]),
            _summary(r["cold_ms"]), _summary(r["cached_ms"]),
            f"{r['solves_cached_pass']} / {r['extractions_cached_pass']} / {r['verdicts_cached_pass']}",
            "yes" if r["same_plans"] else "NO"]


def table(rows: list[dict]) -> list[str]:
    return ["| " + " | ".join(HEADER) + " |", "|" + " --- |" * len(HEADER)] + \
           ["| " + " | ".join(_cells(r)) + " |" for r in rows]


def markdown(doc: dict) -> str:
    h = doc["host"]
    lines = ["# MetaSchedule postprocessor: TwillPipeline per candidate, cold and cached", "",
             f"- command: `{doc['command']}`", f"- commit: `{doc['commit']}`",
             f"- host: {h['cpu']}, {h['nproc']} cores, Python {h['python']}, TVM {h['tvm']}, z3 {h['z3']}",
             f"- workload: {doc['size']}^3 fp16 -> fp32 GEMM, MetaSchedule's `{doc['intrinsics']}` tensor-core rule "
             f"with software pipelining, {doc['candidates']} candidates per arch sampled by ReplayTrace "
             f"(seed {doc['seed']}) through the default cuda-tensorcore postprocessors; solve time limit "
             f"{doc['time_limit']} s", "", *table(doc["rows"]), "",
             "Cold: empty cache (each distinct loop extracted, solved and checked by TVM once); cached: the same "
             "candidates again.  Times are the `TwillPipeline.apply` call alone, in milliseconds.", "",
             "Why nests kept MetaSchedule's annotation (the reason is logged and recorded per nest):", ""]
    for r in doc["rows"]:
        for kind, n in r["kept"].items():
            lines.append(f"- {r['arch']}: {n} x {kind}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--archs", nargs="+", default=["sm_80", "sm_90a"], help="CUDA archs (TVM target tags)")
    ap.add_argument("--candidates", type=int, default=16, help="design-space candidates per arch")
    ap.add_argument("--size", type=int, default=512, help="GEMM size n (n^3)")
    ap.add_argument("--intrinsics", choices=("mma", "wmma"), default="mma", help="the tensor-core rule")
    ap.add_argument("--seed", type=int, default=1, help="MetaSchedule's random state")
    ap.add_argument("--time-limit", type=float, default=10.0, help="seconds per loop solve")
    ap.add_argument("--save", action="store_true", help="write metaschedule_postproc.json / .md to bench/results/")
    ap.add_argument("--out", default=None, metavar="DIR", help="folder for the results (implies --save)")
    args = ap.parse_args(argv)
    if args.candidates < 1:
        ap.error("--candidates must be at least 1")

    rows = []
    for arch in args.archs:
        row = bench_arch(arch, args)
        rows.append(row)
        print(f"{arch}: {row['candidates']} candidates sampled in {row['sample_seconds']} s", flush=True)
    print("\n".join(table(rows)))
    if not (args.save or args.out):
        print("not saved (pass --save to record this table in bench/results/)")
        return 0
    doc = {"command": "python bench/metaschedule_postproc.py " + " ".join(shlex.quote(a) for a in
                                                                          (argv if argv is not None else sys.argv[1:])),
           "commit": git_commit(), "host": host(), "size": args.size, "intrinsics": args.intrinsics,
           "candidates": args.candidates, "seed": args.seed, "time_limit": args.time_limit, "rows": rows}
    out = Path(args.out) if args.out else ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "metaschedule_postproc.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / "metaschedule_postproc.md").write_text(markdown(doc))
    print(f"saved {out / 'metaschedule_postproc.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
