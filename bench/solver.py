"""Solver benchmark: the default search vs the paper-faithful Algorithm 1, per example graph.

For every graph (default: the examples shipped in ``tvm_twill/data/graphs``)
it runs, in one process and one after the other:

* ``tvm_twill.solvers.solve`` -- the default encoding; "proven optimum" is
  the time until the optimal ii is proven (every smaller ii shown
  impossible, a schedule at ii found), "total" adds the tie-breaks (shortest
  length, register peak, latest issue); the ratio column compares the
  paper-faithful time with the total;
* ``tvm_twill.solvers.paper_smt.paper_search`` -- Figures 4-6 on the
  straight-line program and Algorithm 1, on the same prepared graph
  (normalized costs, streaming loads at zero latency), with a per-graph time
  limit; a timeout is reported as such, never as a result.

Both schedules are verified by the independent checker.  It prints a table;
only when asked (``--save``, or ``--out DIR``) it also writes
``solver.json`` and ``solver.md`` (default folder ``bench/results/``) with
the host (CPU, nproc, python, z3 and pulp versions), the git commit and the
command line, so a plain run leaves the source tree as it was.

    python bench/solver.py                      # print the table only
    python bench/solver.py --save               # and record it in bench/results/
    python bench/solver.py --graphs 'tvm_twill/data/graphs/fa_*.json' --paper-time-limit 60
    python bench/solver.py --skip-paper
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from common import git_commit  # noqa: E402
try:
    import tvm_twill  # noqa: F401
except ImportError:  # a source checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT))

from tvm_twill.errors import InfeasibleError, SolverTimeoutError  # noqa: E402
from tvm_twill.model import check, load_graph  # noqa: E402
from tvm_twill.solvers import prepare, solve  # noqa: E402
from tvm_twill.solvers.paper_smt import paper_search  # noqa: E402

DEFAULT_GRAPHS = str(ROOT / "tvm_twill" / "data" / "graphs" / "*.json")


def host() -> dict:
    import pulp
    import z3

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "nproc": os.cpu_count(), "python": platform.python_version(),
            "z3": z3.get_version_string(), "pulp": pulp.__version__, "platform": platform.platform()}


def run_default(graph, machine, time_limit: float) -> dict:
    start = time.perf_counter()
    try:
        s = solve(graph, machine, time_limit=time_limit)
    except SolverTimeoutError as e:
        return {"status": "timeout", "seconds": round(time.perf_counter() - start, 3), "attempts": len(e.attempts)}
    except InfeasibleError as e:
        return {"status": "infeasible", "seconds": round(time.perf_counter() - start, 3),
                "attempts": len(e.attempts), "family": e.family}
    return {"status": "ok", "ii": s.ii, "length": s.length, "seconds": round(time.perf_counter() - start, 3),
            "proof_seconds": round(s.proof_seconds, 3), "attempts": len(s.attempts), "optimal": s.optimal}


def run_paper(prepared, time_limit: float) -> dict:
    start = time.perf_counter()
    try:
        s = paper_search(prepared.graph, prepared.machine, time_limit=time_limit)
    except SolverTimeoutError as e:
        return {"status": "timeout", "seconds": round(time.perf_counter() - start, 3), "attempts": len(e.attempts),
                "last": _attempt(e.attempts[-1]) if e.attempts else None}
    except InfeasibleError as e:
        return {"status": "not found", "seconds": round(time.perf_counter() - start, 3), "attempts": len(e.attempts)}
    violations = check(s, prepared.graph, prepared.machine)
    return {"status": "ok" if not violations else "invalid", "ii": s.ii, "length": s.length,
            "seconds": round(time.perf_counter() - start, 3), "attempts": len(s.attempts),
            "attempt_log": [_attempt(a) for a in s.attempts]}


def _attempt(a) -> dict:
    return {"ii": a.ii, "length": a.length, "result": a.result, "seconds": a.seconds, "solver": a.solver}


def bench(path: str, args) -> dict:
    graph = load_graph(path)
    prepared = prepare(graph)
    row = {"graph": graph.name, "file": os.path.relpath(path, ROOT), "machine": prepared.machine.name,
           "ops": len(graph.ops), "edges": len(graph.edges), "normalized": prepared.normalization is not None,
           "default": run_default(graph, prepared.machine, args.time_limit)}
    if prepared.normalization is not None:
        row["distortion"] = prepared.normalization["distortion"]
    if not args.skip_paper:
        row["paper"] = run_paper(prepared, args.paper_time_limit)
    return row


def _cells(row: dict) -> list[str]:
    d = row["default"]
    if d["status"] == "ok":
        left = [str(d["ii"]), str(d["length"]), f"{d['proof_seconds']:.2f}", f"{d['seconds']:.2f}",
                str(d["attempts"]), "yes" if d["optimal"] else "no"]
    else:
        left = [d["status"], "-", "-", f"{d['seconds']:.2f}", str(d["attempts"]), "-"]
    p = row.get("paper")
    if p is None:
        right = ["skipped", "-", "-", "-"]
    elif p["status"] in ("ok", "invalid"):
        ratio = f"{p['seconds'] / d['seconds']:.1f}x" if d["seconds"] else "-"
        right = [f"{p['ii']}/{p['length']}" + ("" if p["status"] == "ok" else " INVALID"),
                 f"{p['seconds']:.2f}", str(p["attempts"]), ratio]
    else:
        right = [p["status"], f">{p['seconds']:.0f}" if p["status"] == "timeout" else f"{p['seconds']:.2f}",
                 str(p["attempts"]), "-"]
    return [row["graph"], row["machine"], str(row["ops"])] + left + right


HEADER = ["graph", "machine", "ops", "II", "L", "proven optimum (s)", "total with tie-breaks (s)", "attempts",
          "optimal",
          "paper II/L", "paper time (s)", "paper attempts", "paper / default"]


def markdown(doc: dict) -> str:
    h = doc["host"]
    lines = ["# Solver benchmark: default search vs paper-faithful Algorithm 1", "",
             f"- command: `{doc['command']}`", f"- commit: `{doc['commit']}`",
             f"- host: {h['cpu']}, {h['nproc']} cores, Python {h['python']}, z3 {h['z3']}, pulp {h['pulp']}",
             f"- default solver time limit: {doc['time_limit']} s; paper-faithful search: "
             + ("skipped" if doc["paper_time_limit"] is None else f"{doc['paper_time_limit']} s per graph"),
             "", "| " + " | ".join(HEADER) + " |", "|" + " --- |" * len(HEADER)]
    lines += ["| " + " | ".join(_cells(r)) + " |" for r in doc["rows"]]
    lines += ["", "II and L are in the graph's (normalized) time units.  The paper-faithful search "
              "runs on the same prepared graph; it never claims optimality (Algorithm 1 tries only "
              "the lengths with the first ceil(L/II), so it proves no smaller II impossible)."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", default=DEFAULT_GRAPHS, help="glob of tvm-twill-graph/1 files")
    ap.add_argument("--time-limit", type=float, default=300.0, help="seconds for the default solver per graph")
    ap.add_argument("--paper-time-limit", type=float, default=120.0,
                    help="seconds for the paper-faithful search per graph")
    ap.add_argument("--skip-paper", action="store_true", help="run the default solver only")
    ap.add_argument("--save", action="store_true",
                    help="write solver.json / solver.md (to --out, default bench/results/); without it nothing "
                         "is written")
    ap.add_argument("--out", default=None, metavar="DIR",
                    help="folder for solver.json / solver.md (implies --save; default bench/results/)")
    args = ap.parse_args(argv)
    paths = sorted(glob.glob(args.graphs))
    if not paths:
        print(f"no graph matches {args.graphs!r}", file=sys.stderr)
        return 2
    rows = []
    print(" | ".join(HEADER))
    for path in paths:
        row = bench(path, args)
        rows.append(row)
        print(" | ".join(_cells(row)), flush=True)
    doc = {"command": shlex.join([Path(sys.executable).name, *sys.argv]), "commit": git_commit(), "host": host(),
           "time_limit": args.time_limit, "paper_time_limit": None if args.skip_paper else args.paper_time_limit,
           "rows": rows}
    if not (args.save or args.out):
        print("not saved (pass --save to record this table in bench/results/)")
        return 0
    out = Path(args.out or ROOT / "bench" / "results")
    out.mkdir(parents=True, exist_ok=True)
    (out / "solver.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / "solver.md").write_text(markdown(doc))
    print(f"wrote {out / 'solver.json'} and {out / 'solver.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
