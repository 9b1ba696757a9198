"""The solver on generated graphs: every bundled graph in 2-4 copies, jittered, up to 60 ops.

    python bench/solver_generated.py [--time-limit 10] [--save] [--only SUBSTR]

The graphs come from ``scale_graphs.generated_suite`` (fixed seed ``GENERATED_SEED``, fixed
order, so every run sees the same graphs): each bundled graph in machine cycles, joined as k
heads (independent copies), as k sub-tiles sharing the loads, and as k heads of two sub-tiles,
k = 2, 3, 4, each op's cycles jittered by up to 15%.  Every graph is reported, failures
included.  For each: the answer's ii, whether it was proven optimal and how fast, the gap to
the lower bound otherwise, the answer's source (heuristic, z3, serial fallback), the wall time
against the limit, and whether the package's checker accepts the schedule.

``--paper`` also runs the paper's backends on each graph, with the same limit: Algorithm 1 of the
Twill paper, the modulo-scheduling ILP on CBC (pulp) then the joint SMT on z3 per length
(``solvers.paper_smt.paper_search``), side by side with the default (z3 joint search with the
incumbent heuristic).

``--save`` writes ``bench/results/solver_generated.{json,md}``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from common import cpu_name, git_commit  # noqa: E402
from scale_graphs import GENERATED_SEED, JITTER, UNIT_CYCLES, generated_suite  # noqa: E402

from tvm_twill.errors import InfeasibleError, SolverTimeoutError  # noqa: E402
from tvm_twill.model import check  # noqa: E402
from tvm_twill.solvers import prepare, solve  # noqa: E402
from tvm_twill.solvers.paper_smt import paper_search  # noqa: E402

HEADER = ["graph", "join", "k", "ops", "ii (units)", "lower bound", "proven", "proof (s)", "gap", "answer from",
          "wall (s)", "limit (s)", "within limit", "checker", "paper backends: ii (CBC + z3)"]


def run_one(g, limit: float) -> dict:
    start = time.perf_counter()
    try:
        s = solve(g, time_limit=limit)
    except InfeasibleError as e:
        return {"status": "infeasible", "family": e.family, "wall": time.perf_counter() - start}
    except SolverTimeoutError as e:
        return {"status": "no schedule", "reason": str(e), "wall": time.perf_counter() - start}
    wall = time.perf_counter() - start
    prep = prepare(g)
    violations = check(s, prep.graph, prep.machine)
    lb = s.lower_bound.ii
    return {"status": "ok", "ii": s.ii, "lb": lb, "optimal": bool(s.optimal),
            "proof_seconds": s.proof_seconds if s.optimal else None,
            "gap": 0.0 if s.optimal else (s.ii - lb) / s.ii,
            "source": s.attempts[-1].solver if s.attempts else "?",
            "wall": wall, "checker": "ok" if not violations else f"{len(violations)} violations"}


def run_paper(g, limit: float) -> dict:
    """The paper's Algorithm 1 (CBC modulo ILP, then z3 per length) on the prepared graph."""
    prep = prepare(g)
    start = time.perf_counter()
    try:
        s = paper_search(prep.graph, prep.machine, time_limit=limit)
    except SolverTimeoutError:
        return {"status": "timeout", "wall": time.perf_counter() - start}
    except InfeasibleError:
        return {"status": "not found", "wall": time.perf_counter() - start}
    bad = check(s, prep.graph, prep.machine)
    return {"status": "ok" if not bad else "invalid", "ii": s.ii, "wall": time.perf_counter() - start}


def paper_cell(row: dict) -> str:
    p = row.get("paper")
    if p is None:
        return "-"
    return (f"{p['ii']} in {p['wall']:.1f} s" if p["status"] == "ok" else f"{p['status']} ({p['wall']:.1f} s)")


def cells(row: dict, limit: float) -> list[str]:
    r = row["run"]
    base = [row["graph"], row["join"], str(row["k"]), str(row["ops"])]
    wall = f"{r['wall']:.2f}"
    within = "yes" if r["wall"] <= limit else f"no (+{r['wall'] - limit:.1f} s)"
    if r["status"] != "ok":
        what = r.get("family") or r.get("reason", "")
        return base + [r["status"], "-", "-", "-", "-", what, wall, f"{limit:g}", within, "-", paper_cell(row)]
    proof = f"{r['proof_seconds']:.2f}" if r["proof_seconds"] is not None else "-"
    return base + [str(r["ii"]), str(r["lb"]), "yes" if r["optimal"] else "no", proof,
                   f"{100 * r['gap']:.1f}%", r["source"], wall, f"{limit:g}", within, r["checker"], paper_cell(row)]


def summary(rows: list, limit: float) -> list[str]:
    ok = [r for r in rows if r["run"]["status"] == "ok"]
    mid = [r for r in rows if 20 <= r["ops"] <= 40]
    proven10 = [r for r in mid if r["run"]["status"] == "ok" and r["run"]["optimal"]
                and r["run"]["proof_seconds"] is not None and r["run"]["proof_seconds"] <= 10]
    gaps = [r["run"]["gap"] for r in ok if not r["run"]["optimal"]]
    over = [r for r in rows if r["run"]["wall"] > limit]
    return [f"- graphs: {len(rows)} ({min(r['ops'] for r in rows)}-{max(r['ops'] for r in rows)} ops); "
            f"a schedule for {len(ok)}, infeasible {sum(r['run']['status'] == 'infeasible' for r in rows)}, "
            f"no schedule {sum(r['run']['status'] == 'no schedule' for r in rows)}",
            f"- 20-40 ops: {len(mid)} graphs, proven optimal within 10 s: {len(proven10)}",
            f"- not proven: {len(gaps)}" + (f", largest gap {100 * max(gaps):.1f}%" if gaps else ""),
            f"- wall time over the {limit:g} s limit: {len(over)}"
            + (f" (worst +{max(r['run']['wall'] for r in over) - limit:.2f} s)" if over else ""),
            f"- checker violations: {sum(r['run'].get('checker', 'ok') != 'ok' for r in ok)}"] + _paper_summary(rows)


def _paper_summary(rows: list) -> list[str]:
    runs = [(r, r["paper"]) for r in rows if r.get("paper") is not None]
    if not runs:
        return []
    ok = [(r, p) for r, p in runs if p["status"] == "ok"]
    same = sum(1 for r, p in ok if r["run"]["status"] == "ok" and p["ii"] == r["run"]["ii"])
    worse = sum(1 for r, p in ok if r["run"]["status"] == "ok" and p["ii"] > r["run"]["ii"])
    better = sum(1 for r, p in ok if r["run"]["status"] == "ok" and p["ii"] < r["run"]["ii"])
    return [f"- paper backends (CBC modulo ILP + z3 per length), same limit: a schedule for {len(ok)} of "
            f"{len(runs)}; ii equal to the default's {same}, larger {worse}, smaller {better}; no answer "
            f"{len(runs) - len(ok)}"]


def markdown(doc: dict) -> str:
    limit = doc["time_limit"]
    lines = ["# The solver on generated graphs", "",
             f"- command: `{doc['command']}`", f"- commit: `{doc['commit']}`", f"- host: {doc['host']}",
             f"- generator: `bench/scale_graphs.py` `generated_suite(seed={doc['seed']})`: every bundled graph "
             f"in machine cycles ({doc['unit_cycles']} cycles per unit for the graphs written in units), "
             f"joined as k = 2-4 heads, sub-tiles sharing the loads, and heads of two sub-tiles; every op's "
             f"cycles times uniform(1 - {doc['jitter']}, 1 + {doc['jitter']})", ""]
    lines += summary(doc["rows"], limit) + [""]
    lines += ["| " + " | ".join(HEADER) + " |", "|" + " --- |" * len(HEADER)]
    lines += ["| " + " | ".join(cells(r, limit)) + " |" for r in doc["rows"]]
    lines += ["", "ii and the lower bound are in the solver's normalized time units (the costs divided by their common quantum after normalization). \"proof (s)\": seconds until every smaller ii was refuted with a schedule at ii in hand. "
              "\"gap\": (ii - lower bound) / ii of an answer not proven optimal. \"answer from\": the solver "
              "whose schedule was returned (`serial` is the fallback valid by construction). "
              "\"checker\": `tvm_twill.model.check` on the returned schedule."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=10.0, help="seconds per graph (default 10)")
    ap.add_argument("--only", default=None, help="run only graphs whose name contains this")
    ap.add_argument("--paper", action="store_true", help="also run the paper's backends (CBC + z3) per graph")
    ap.add_argument("--save", action="store_true", help="write bench/results/solver_generated.{json,md}")
    args = ap.parse_args(argv)
    rows = []
    print(" | ".join(HEADER))
    for name, source, join, k, g in generated_suite():
        if args.only and args.only not in name:
            continue
        row = {"graph": name, "source": source, "join": join, "k": k, "ops": len(g.ops),
               "run": run_one(g, args.time_limit)}
        if args.paper:
            row["paper"] = run_paper(g, args.time_limit)
        rows.append(row)
        print(" | ".join(cells(row, args.time_limit)), flush=True)
    print("\n".join(summary(rows, args.time_limit)))
    if args.save:
        doc = {"command": "python bench/solver_generated.py " + " ".join(argv or sys.argv[1:]),
               "commit": git_commit(), "host": f"{cpu_name()}, Python {sys.version.split()[0]}",
               "seed": GENERATED_SEED, "unit_cycles": UNIT_CYCLES, "jitter": JITTER,
               "time_limit": args.time_limit, "rows": rows}
        out = ROOT / "bench" / "results"
        (out / "solver_generated.json").write_text(json.dumps(doc, indent=2) + "\n")
        (out / "solver_generated.md").write_text(markdown(doc))
        print(f"wrote {out / 'solver_generated.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
