"""Time-limit benchmark: ``--time-limit`` against the wall time and memory actually taken.

For the largest bundled graphs and a 20-op graph made of two disjoint copies
of ``fa_fwd_hopper_measured`` (refuted at once: its registers never fit), and
two random 30- and 40-op graphs with heavy register pressure
(``bench/scale_graphs.tight_graph``) that the exact search cannot finish, so
the limit really ends the solve, and for each limit (default 1, 5, 20 s), it measures

* the whole ``tvm_twill.solvers.solve`` call in this process, and
* a whole-process CLI run (``python -m tvm_twill.cli solve GRAPH --time-limit
  T``: interpreter start, imports, solve, report),

and reports the result (ii, or timeout / infeasible), the wall time and its
ratio to the limit.  The solver's contract: the ``solve`` call ends within
10% of the limit; a CLI process adds its start-up and report (about 0.3 s
here).

Magnitudes: graphs whose integers sit at the documented limit 2**31-1 (an
op of 2**31-1 cycles, a self-edge of delay 2**31-1, a machine of 2**31-1
warp groups, ...; ``"normalize": false``), each solved by a CLI process with
``--time-limit`` (default 2 s): wall time against the limit, exit status,
and the process's peak resident memory (its ``VmHWM``),
next to the same for the 3-op ``fa_fwd_fig1`` (the interpreter and imports
alone).  Then the size and build time of the z3 model and the heuristic's
time against the cycle magnitude.

It prints the tables; ``--save`` writes ``bench/results/time_limits.json``
and ``.md`` (host, commit, command), ``--out DIR`` elsewhere.  Runtime:
about 6 minutes with the defaults (``--skip-graphs``: the magnitudes only,
under a minute).

    python bench/time_limits.py --save
    python bench/time_limits.py --limits 1 5 --skip-cli
    python bench/time_limits.py --skip-graphs
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from common import git_commit  # noqa: E402
try:
    import tvm_twill  # noqa: F401
except ImportError:  # a source checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT))

from solver import host  # noqa: E402
from tvm_twill.errors import InfeasibleError, SolverTimeoutError  # noqa: E402
from tvm_twill.model import dump, graph_to_dict, load_graph  # noqa: E402
from tvm_twill.solvers import solve  # noqa: E402

GRAPHS = ROOT / "tvm_twill" / "data" / "graphs"
LARGEST = ("fa_fwd_hopper_measured", "fa_bwd_raw", "fa_fwd_blackwell_raw")


def doubled(graph):
    """Two disjoint copies of ``graph`` (the second one's names end in ``_2``)."""
    ops = tuple(graph.ops) + tuple(replace(o, name=o.name + "_2") for o in graph.ops)
    edges = tuple(graph.edges) + tuple(replace(e, src=e.src + "_2", dst=e.dst + "_2") for e in graph.edges)
    return graph.replace(name=graph.name + "_x2", ops=ops, edges=edges)


def run_api(graph, limit: float) -> dict:
    t0 = time.perf_counter()
    try:
        s = solve(graph, time_limit=limit)
        result = f"ii={s.ii} L={s.length}" + ("" if s.optimal else f" (anytime, lower bound {s.lower_bound.ii})")
    except SolverTimeoutError as e:
        where = re.search(r"reached (.*?ii=\d+)", str(e))
        result = "timeout " + (where.group(1) if where else "")
    except InfeasibleError as e:
        result = f"infeasible ({e.family})"
    return {"seconds": round(time.perf_counter() - t0, 3), "result": result}


def run_cli(path: str, limit: float) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "tvm_twill.cli", "solve", path, "--time-limit", f"{limit:g}"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    return {"seconds": round(time.perf_counter() - t0, 3), "exit": p.returncode}


BIG = 2**31 - 1
#: Graphs at the documented integer limit (``"normalize": false``): name -> graph document fields.
AT_LIMIT = {
    "an op of 2**31-1 cycles": {"ops": [{"name": "A", "cycles": BIG, "unit": "TC"},
                                        {"name": "B", "cycles": 1, "unit": "ALU"}],
                                "edges": [{"src": "A", "dst": "B", "delay": 1}]},
    "a self-edge of delay 2**31-1": {"ops": [{"name": "A", "cycles": 1, "unit": "TC"}],
                                     "edges": [{"src": "A", "dst": "A", "delay": BIG, "distance": 1}]},
    "2**31-1 warp groups": {"machine": {"name": "m", "units": {"TC": 1, "ALU": 1}, "warp_groups": BIG},
                            "ops": [{"name": "A", "cycles": 1, "unit": "TC"},
                                    {"name": "B", "cycles": 1, "unit": "ALU"}],
                            "edges": [{"src": "A", "dst": "B", "delay": 1}]},
    "a recurrence of 2**31-1 delays": {
        "ops": [{"name": "A", "cycles": BIG, "unit": "TC"}, {"name": "B", "cycles": 1, "unit": "TC"},
                {"name": "C", "cycles": 5, "unit": "SFU", "regs": 100}],
        "edges": [{"src": "A", "dst": "B", "delay": BIG, "blocking": True}, {"src": "B", "dst": "C", "delay": BIG},
                  {"src": "C", "dst": "A", "delay": BIG, "distance": 1}]},
    "a unit of capacity 2**31-1": {"machine": {"name": "m", "units": {"TC": BIG}, "warp_groups": 4},
                                   "ops": [{"name": "A", "cycles": BIG, "unit": "TC"},
                                           {"name": "B", "cycles": BIG, "unit": "TC"}]},
    "all at once (6 ops)": {
        "machine": {"name": "m", "units": {"TC": 1, "SFU": 2, "ALU": BIG, "TMA": 1}, "warp_groups": BIG,
                    "regs_per_thread_max": 255, "spill_cost": BIG},
        "ops": [{"name": "L", "cycles": BIG, "unit": "TMA", "variable_latency": True, "smem": 1024},
                {"name": "S", "cycles": BIG, "unit": "TC", "regs": 64}, {"name": "P", "cycles": BIG // 3,
                                                                       "unit": "SFU", "regs": 64},
                {"name": "O", "cycles": BIG, "unit": "TC", "regs": 128}, {"name": "X", "cycles": 7, "unit": "ALU"},
                {"name": "R", "cycles": 3, "rrt": [{"ALU": 5}, {"SFU": 2, "ALU": 1}, {"TC": 1}]}],
        "edges": [{"src": "L", "dst": "S", "delay": BIG}, {"src": "S", "dst": "P", "delay": BIG, "blocking": True},
                  {"src": "P", "dst": "O", "delay": BIG}, {"src": "O", "dst": "O", "delay": BIG, "distance": 1},
                  {"src": "O", "dst": "X", "delay": 1}, {"src": "X", "dst": "R", "delay": BIG},
                  {"src": "R", "dst": "S", "delay": 3, "distance": BIG}]},
}


#: The CLI, then its own peak resident memory on stderr: Linux's VmHWM of the process's memory
#: map (``ru_maxrss`` would also count what this parent held when it forked the child).
_MEASURED_CLI = """
import sys
from tvm_twill.cli import main
code = main(sys.argv[1:])
try:
    hwm = [line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")][0]
except (OSError, IndexError):
    import resource
    hwm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print("peak-kib", hwm, file=sys.stderr)
sys.exit(code)
"""


def run_cli_measured(path: str, limit: float) -> dict:
    """A CLI process: wall seconds, exit status, peak resident memory (MiB), first line of the answer."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-c", _MEASURED_CLI, "solve", path, "--time-limit", f"{limit:g}", "--quiet"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    wall = time.perf_counter() - t0
    error = [line for line in p.stderr.strip().splitlines() if not line.startswith("peak-kib ")]
    peak = [int(line.split()[1]) for line in p.stderr.splitlines() if line.startswith("peak-kib ")]
    first = p.stdout.splitlines()[1:2]
    answer = first[0].split("(")[0].strip() if p.returncode == 0 and first else (error[-1][:90] if error else "")
    return {"seconds": round(wall, 3), "exit": p.returncode, "peak_mib": round(peak[0] / 1024, 1) if peak else None,
            "answer": answer}


def magnitude_cases(limit: float, tmp: str) -> list:
    """Every ``AT_LIMIT`` graph, and fa_fwd_fig1 as the baseline, through ``run_cli_measured``."""
    rows = [{"case": "fa_fwd_fig1 (baseline: 3 small ops)", "limit": limit,
             **run_cli_measured(str(GRAPHS / "fa_fwd_fig1.json"), limit)}]
    for i, (case, fields) in enumerate(AT_LIMIT.items()):
        path = str(Path(tmp) / f"at_limit_{i}.json")
        Path(path).write_text(json.dumps({"format": "tvm-twill-graph/1", "name": f"at_limit_{i}",
                                          "normalize": False, **fields}))
        rows.append({"case": case, "limit": limit, **run_cli_measured(path, limit)})
        print(" | ".join(_mag_cells(rows[-1])), flush=True)
    return rows


MAG_HEADER = ["graph (normalize: false)", "limit (s)", "CLI wall (s)", "wall / limit", "peak RSS (MiB)", "exit",
              "answer"]


def _mag_cells(r: dict) -> list:
    return [r["case"], f"{r['limit']:g}", f"{r['seconds']:.2f}", f"{r['seconds'] / r['limit']:.2f}",
            "-" if r["peak_mib"] is None else f"{r['peak_mib']:.0f}", str(r["exit"]), r["answer"].replace("|", "/")]


def magnitude_graph(scale: int):
    """Six ops (a multi-instance unit, a reservation table, blocking, a recurrence)
    whose cycles and delays grow with ``scale``; ``normalize: false``."""
    from tvm_twill.model import Edge, Graph, Op
    ops = (Op("L", 3 * scale, "TMA", variable_latency=True, smem=1024),
           Op("A", 5 * scale, "TC", regs=64), Op("B", 2 * scale, "SFU", regs=32),
           Op("C", 4 * scale, "ALU"), Op("D", 1 * scale, "ALU"),
           Op("R", 3, rrt=({"ALU": 1}, {"ALU": 2, "SFU": 1}, {"ALU": 2})))
    edges = (Edge("L", "A", 3 * scale), Edge("A", "B", 5 * scale, blocking=True), Edge("B", "C", 2 * scale),
             Edge("C", "A", 4 * scale, distance=1), Edge("C", "D", scale), Edge("D", "R", scale))
    return Graph("magnitude", ops, edges, normalize=False)


def magnitudes() -> list:
    """Model size and build time of the z3 problem (at ii = 11 * scale) against the
    cycle magnitude, and the model layer's validation (``Graph.validate_for``) time."""
    from tvm_twill.model import Machine
    from tvm_twill.solvers.smt import JointProblem
    from tvm_twill.model import rec_mii, res_mii
    from tvm_twill.solvers.heuristic import incumbent
    m = Machine("m", units={"TC": 1, "SFU": 1, "ALU": 2, "TMA": 1}, warp_groups=3, regs_per_thread_max=255)
    JointProblem(magnitude_graph(1), m, 11)  # warm up z3
    rows = []
    for scale in (1, 1000, 10 ** 6):
        g = magnitude_graph(scale)
        t0 = time.perf_counter()
        problem = JointProblem(g, m, 11 * scale)
        build = time.perf_counter() - t0
        t0 = time.perf_counter()
        status = problem.solve(time_limit=30).status
        query = time.perf_counter() - t0
        lb = max(res_mii(g, m), rec_mii(g))
        t0 = time.perf_counter()
        inc = incumbent(g, m, lb, 64 * lb)
        heuristic = time.perf_counter() - t0
        row = {"scale": scale, "assertions": len(problem.solver.assertions()), "build_seconds": round(build, 4),
               "query": status, "query_seconds": round(query, 4), "heuristic_seconds": round(heuristic, 4),
               "heuristic_ii": None if inc is None else inc.ii}
        if scale <= 10 ** 5:
            t0 = time.perf_counter()
            g.validate_for(m)
            row["validate_for_seconds"] = round(time.perf_counter() - t0, 4)
        rows.append(row)
    g = magnitude_graph(10 ** 5)
    t0 = time.perf_counter()
    g.validate_for(m)
    rows.append({"scale": 10 ** 5, "validate_for_seconds": round(time.perf_counter() - t0, 4)})
    return rows


HEADER = ["graph", "ops", "limit (s)", "solve() wall (s)", "solve() / limit", "solve() result",
          "CLI process wall (s)", "CLI / limit", "CLI exit"]


def _cells(r: dict) -> list:
    api, cli = r["solve"], r.get("cli")
    return [r["graph"], str(r["ops"]), f"{r['limit']:g}", f"{api['seconds']:.2f}",
            f"{api['seconds'] / r['limit']:.2f}", api["result"],
            "-" if cli is None else f"{cli['seconds']:.2f}", "-" if cli is None else f"{cli['seconds'] / r['limit']:.2f}",
            "-" if cli is None else str(cli["exit"])]


def markdown(doc: dict) -> str:
    h = doc["host"]
    lines = ["# Time limits: --time-limit against measured wall time", "",
             f"- command: `{doc['command']}`", f"- commit: `{doc['commit']}`",
             f"- host: {h['cpu']}, {h['nproc']} cores, Python {h['python']}, z3 {h['z3']}, pulp {h['pulp']}",
             "", "| " + " | ".join(HEADER) + " |", "|" + " --- |" * len(HEADER)]
    lines += ["| " + " | ".join(_cells(r)) + " |" for r in doc["rows"]]
    if doc.get("at_limit"):
        lines += ["", "## Integers at the documented limit 2**31-1: wall time and peak memory of a CLI process", "",
                  "| " + " | ".join(MAG_HEADER) + " |", "|" + " --- |" * len(MAG_HEADER)]
        lines += ["| " + " | ".join(_mag_cells(r)) + " |" for r in doc["at_limit"]]
        lines += ["", "Peak RSS is the process's own high-water mark (`VmHWM`: interpreter, imports, z3, the solve "
                  "and the report); the "
                  "baseline row is what a 3-op graph takes.  Before the interval reservation table, the bounded "
                  "roles and the bounded report (commit 51172cf), the first row still ran at 60 s and the next "
                  "two died of MemoryError under a 4 GB address-space limit; under the 2 GiB limit of "
                  "`tests/cli/test_hostile.py` the five rows it shares with this table (all but \"all at once\") ended in "
                  "MemoryError (exit 4)."]
    lines += ["", "## Magnitudes (normalize: false)", "",
              "| cycle scale | z3 assertions | build (s) | one query | query (s) | heuristic (s) | heuristic ii | "
              "model Graph.validate_for (s) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in doc["magnitudes"]:
        lines.append(f"| {r['scale']:g} | {r.get('assertions', '-')} | {r.get('build_seconds', '-')} | "
                     f"{r.get('query', '-')} | {r.get('query_seconds', '-')} | {r.get('heuristic_seconds', '-')} | "
                     f"{r.get('heuristic_ii', '-')} | {r.get('validate_for_seconds', '-')} |")
    lines += ["", "The z3 model has the same size at every magnitude (nothing per cycle or per slot), and the "
              "incumbent heuristic takes the same time (its reservation table is intervals)."]
    lines += ["", "solve() is the whole call (normalization, model building, search, core minimization, "
              "tie-breaks, final check); the CLI column is a whole process (interpreter start, imports, "
              "solve, report).  A result finished before its limit is the same schedule at every limit "
              "(the tie-breaks are bounded by z3's deterministic rlimit, not by time).  CLI exit 3: timed out."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limits", type=float, nargs="+", default=[1.0, 5.0, 20.0], help="time limits (s)")
    ap.add_argument("--skip-cli", action="store_true", help="measure solve() only")
    ap.add_argument("--skip-graphs", action="store_true", help="only the magnitude cases")
    ap.add_argument("--magnitude-limit", type=float, default=2.0, help="--time-limit of the magnitude cases (s)")
    ap.add_argument("--save", action="store_true", help="write time_limits.json / .md to bench/results/")
    ap.add_argument("--out", default=None, metavar="DIR", help="folder for the results (implies --save)")
    args = ap.parse_args(argv)
    tmp = tempfile.TemporaryDirectory()
    rows = [] if args.skip_graphs else graph_rows(args, tmp.name)
    print(" | ".join(MAG_HEADER))
    at_limit = magnitude_cases(args.magnitude_limit, tmp.name)
    mags = magnitudes()
    for r in mags:
        print("magnitude", r)
    doc = {"command": shlex.join([Path(sys.executable).name, *sys.argv]), "commit": git_commit(), "host": host(),
           "rows": rows, "at_limit": at_limit, "magnitudes": mags}
    if not (args.save or args.out):
        print("not saved (pass --save to record these tables in bench/results/)")
        return 0
    out = Path(args.out or ROOT / "bench" / "results")
    out.mkdir(parents=True, exist_ok=True)
    (out / "time_limits.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / "time_limits.md").write_text(markdown(doc))
    print(f"wrote {out / 'time_limits.json'} and {out / 'time_limits.md'}")
    return 0


def graph_rows(args, tmp: str) -> list:
    """The bundled and generated graphs at every limit: solve() and (unless --skip-cli) a CLI process."""
    graphs = [(load_graph(GRAPHS / f"{n}.json"), str(GRAPHS / f"{n}.json")) for n in LARGEST]
    big = doubled(graphs[0][0])
    big_path = str(Path(tmp) / f"{big.name}.json")
    dump(graph_to_dict(big), big_path)
    graphs.append((big, big_path))
    from scale_graphs import tight_graph  # random graphs the exact search cannot finish in 20 s
    for n in (30, 40):
        g = tight_graph(n, 1)
        gpath = str(Path(tmp) / f"{g.name}.json")
        dump(graph_to_dict(g), gpath)
        graphs.append((g, gpath))
    rows = []
    print(" | ".join(HEADER))
    for graph, path in graphs:
        for limit in args.limits:
            row = {"graph": graph.name, "ops": len(graph.ops), "limit": limit, "solve": run_api(graph, limit)}
            if not args.skip_cli:
                row["cli"] = run_cli(path, limit)
            rows.append(row)
            print(" | ".join(_cells(row)), flush=True)
    return rows


if __name__ == "__main__":
    sys.exit(main())
