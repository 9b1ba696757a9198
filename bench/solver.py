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

``--scale`` runs the scale table instead (``bench/scale_graphs.py``: copies
and sub-tiled variants of the FlashAttention graphs, seeded random graphs
with their unit mix, and "tight" random graphs on a two-role machine, of
10 to 40 ops).  For each graph, this checkout's solver (in process, with a
progress callback that records when each incumbent arrived) and, with
``--base DIR`` (a checkout of the code before the change, e.g.
``git worktree add /tmp/base <commit>``), the base solver in a subprocess
with that checkout first on PYTHONPATH, each with ``--scale-time-limit``
seconds: the time to a proven optimum and the time to the first schedule
within 5% of the best lower bound known at the end.  Results go to
``bench/results/solver_scale.json`` and ``.md``.

    python bench/solver.py --scale --base /tmp/base --scale-time-limit 30
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
from common import cpu_name, git_commit  # noqa: E402
try:
    import tvm_twill  # noqa: F401
except ImportError:  # a source checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT))

from tvm_twill.errors import InfeasibleError, SolverTimeoutError  # noqa: E402
from tvm_twill.model import check, load_graph, rec_mii, res_mii  # noqa: E402
from tvm_twill.solvers import prepare, solve  # noqa: E402
from tvm_twill.solvers.paper_smt import paper_search  # noqa: E402

DEFAULT_GRAPHS = str(ROOT / "tvm_twill" / "data" / "graphs" / "*.json")


def host() -> dict:
    import pulp
    import z3

    return {"cpu": cpu_name(), "nproc": os.cpu_count(), "python": platform.python_version(),
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
            "proof_seconds": None if s.proof_seconds is None else round(s.proof_seconds, 3),
            "attempts": len(s.attempts), "optimal": s.optimal, "lower_bound": s.lower_bound.ii}


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
        left = [str(d["ii"]), str(d["length"]), "-" if d["proof_seconds"] is None else f"{d['proof_seconds']:.2f}",
                f"{d['seconds']:.2f}",
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


# -- the scale table -------------------------------------------------------------------
_BASE_SCRIPT = r"""
import json, sys, time
from tvm_twill.model import load_graph
from tvm_twill.solvers import solve
from tvm_twill.errors import SolverTimeoutError, InfeasibleError
start = time.perf_counter()
try:
    s = solve(load_graph(sys.argv[1]), time_limit=float(sys.argv[2]))
    out = {"status": "ok", "ii": s.ii, "optimal": s.optimal, "lb": s.lower_bound.ii,
           "proof_seconds": s.proof_seconds, "seconds": time.perf_counter() - start}
except SolverTimeoutError:
    out = {"status": "timeout", "seconds": time.perf_counter() - start}
except InfeasibleError as e:
    out = {"status": "infeasible", "family": e.family, "seconds": time.perf_counter() - start}
print(json.dumps(out))
"""


def _run_base(base: str, graph_file: str, time_limit: float) -> dict:
    import subprocess
    env = dict(os.environ, PYTHONPATH=str(Path(base).resolve()))
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-c", _BASE_SCRIPT, graph_file, str(time_limit)], env=env,
                           capture_output=True, text=True, timeout=time_limit * 2 + 60, cwd=base)
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, IndexError, json.JSONDecodeError):
        return {"status": "timeout", "seconds": time.perf_counter() - t0}


def _run_new(graph, time_limit: float) -> dict:
    from tvm_twill.solvers.progress import Progress  # noqa: F401  (the reports' type)
    seen = []
    start = time.perf_counter()

    def record(p):
        if p.incumbent is not None:
            seen.append((time.perf_counter() - start, p.incumbent))
    try:
        s = solve(graph, time_limit=time_limit, progress=record)
    except SolverTimeoutError:
        return {"status": "timeout", "seconds": time.perf_counter() - start, "incumbents": seen}
    except InfeasibleError as e:
        return {"status": "infeasible", "family": e.family, "seconds": time.perf_counter() - start}
    seconds = time.perf_counter() - start
    seen.append((seconds, s.ii))
    return {"status": "ok", "ii": s.ii, "optimal": s.optimal, "lb": s.lower_bound.ii,
            "proof_seconds": s.proof_seconds if s.optimal else None, "seconds": seconds,
            "incumbents": seen, "heuristic": [a.ii for a in s.attempts if a.solver == "heuristic"]}


def _within(run: dict, lb: int | None, tol: float = 0.05):
    """Seconds until the run held a schedule with (ii - lb)/ii <= tol (None: never)."""
    if run["status"] != "ok" or lb is None:
        return None
    for t, ii in run.get("incumbents") or [(run["seconds"], run["ii"])]:
        if (ii - lb) / ii <= tol:
            return t
    return None


def bench_scale(args) -> dict:
    import tempfile

    sys.path.insert(0, str(ROOT / "bench"))
    from scale_graphs import scale_suite
    from tvm_twill.model import dump, graph_to_dict
    sizes = tuple(int(x) for x in args.sizes.split(","))
    rows = []
    print(" | ".join(SCALE_HEADER))
    with tempfile.TemporaryDirectory() as tmp:
        for name, family, g in scale_suite(sizes):
            path = os.path.join(tmp, name + ".json")
            dump(graph_to_dict(g), path)
            prepared = prepare(g)
            lb0 = max(res_mii(prepared.graph, prepared.machine), rec_mii(prepared.graph))
            new = _run_new(g, args.scale_time_limit)
            base = _run_base(args.base, path, args.scale_time_limit) if args.base else None
            # the best lower bound known at the end, from either run
            lbs = [r["lb"] for r in (new, base) if r and r["status"] == "ok"]
            lb = max(lbs) if lbs else None
            opt = [r["ii"] for r in (new, base) if r and r["status"] == "ok" and r["optimal"]]
            lb = opt[0] if opt else lb
            for r in (new, base):
                if r is not None:
                    r["within_5pct_seconds"] = _within(r, lb)
                    r.pop("incumbents", None) if r is base else None
            row = {"graph": name, "family": family, "ops": len(g.ops), "machine": prepared.machine.name,
                   "lb0": lb0, "best_lb": lb, "new": new, "base": base}
            rows.append(row)
            print(" | ".join(_scale_cells(row)), flush=True)
    return {"rows": rows, "sizes": sizes}


SCALE_HEADER = ["graph", "family", "ops", "LB0", "ii (gap)", "proven optimum (s)", "within 5% (s)", "total (s)",
                "base ii", "base proven (s)", "base within 5% (s)", "base total (s)"]


def _fmt(x):
    return "-" if x is None else f"{x:.2f}"


def _scale_cells(row: dict) -> list[str]:
    def side(r):
        if r is None:
            return ["not run", "-", "-", "-"]
        if r["status"] != "ok":
            return [r["status"] + (f" ({r['family']})" if r.get("family") else ""), "-", "-", _fmt(r["seconds"])]
        ii = str(r["ii"]) if r["optimal"] else f"{r['ii']} (gap {100 * (r['ii'] - r['lb']) / r['ii']:.1f}%)"
        proof = _fmt(r["proof_seconds"]) if r["optimal"] else "not proven"
        return [ii, proof, _fmt(r["within_5pct_seconds"]), _fmt(r["seconds"])]
    new, base = side(row["new"]), side(row["base"])
    return [row["graph"], row["family"], str(row["ops"]), str(row["lb0"])] + new + [base[0], base[1], base[2],
                                                                                    base[3]]


def scale_markdown(doc: dict) -> str:
    h = doc["host"]
    lines = ["# Solver at scale: incumbent + exact search vs the base search", "",
             f"- command: `{doc['command']}`", f"- commit: `{doc['commit']}`",
             f"- base: `{doc['base']}` (commit `{doc['base_commit']}`)" if doc["base"] else "- base: not run",
             f"- host: {h['cpu']}, {h['nproc']} cores, Python {h['python']}, z3 {h['z3']}, pulp {h['pulp']}",
             f"- time limit: {doc['time_limit']} s per graph and solver (normalization included)", "",
             "| " + " | ".join(SCALE_HEADER) + " |", "|" + " --- |" * len(SCALE_HEADER)]
    lines += ["| " + " | ".join(_scale_cells(r)) + " |" for r in doc["rows"]]
    lines += ["", "LB0 = max(ResMII, RecMII) of the prepared graph.  \"proven optimum\": seconds until every "
              "smaller ii was refuted and a schedule at ii was in hand (the tie-breaks follow; \"total\" "
              "includes them).  \"within 5%\": seconds until the solver held a valid schedule whose ii is within "
              "5% of the best lower bound known at the end (the proven optimum when one run proved it); the "
              "base search returns nothing before its end, so for it this is its total time when its answer "
              "qualifies.  A gap is (ii - lower bound) / ii of an anytime answer (time limit reached, "
              "`optimal` false).  Graphs: `bench/scale_graphs.py`."]
    return "\n".join(lines) + "\n"


def main_scale(args) -> int:
    doc = bench_scale(args)
    base_commit = None
    if args.base:
        import subprocess
        try:
            base_commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=args.base, capture_output=True,
                                         text=True).stdout.strip() or None
        except OSError:
            pass
    doc.update({"command": shlex.join([Path(sys.executable).name, *sys.argv]), "commit": git_commit(),
                "host": host(), "time_limit": args.scale_time_limit, "base": args.base,
                "base_commit": base_commit})
    if not (args.save or args.out):
        print("not saved (pass --save to record this table in bench/results/)")
        return 0
    out = Path(args.out or ROOT / "bench" / "results")
    out.mkdir(parents=True, exist_ok=True)
    (out / "solver_scale.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / "solver_scale.md").write_text(scale_markdown(doc))
    print(f"wrote {out / 'solver_scale.json'} and {out / 'solver_scale.md'}")
    return 0


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
    ap.add_argument("--scale", action="store_true", help="the scale table (10-40 ops) instead")
    ap.add_argument("--base", metavar="DIR", help="--scale: a checkout of the base code to compare against")
    ap.add_argument("--scale-time-limit", type=float, default=30.0, help="--scale: seconds per graph and solver")
    ap.add_argument("--sizes", default="10,20,30,40", help="--scale: graph sizes (ops)")
    args = ap.parse_args(argv)
    if args.scale:
        return main_scale(args)
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
