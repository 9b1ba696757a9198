"""The solver on replicated graphs: k heads of a bundled graph in one loop, machine cycles, no normalization.

    python bench/solver_replicated.py [--time-limit 10] [--save] [--only SUBSTR] [--no-previous]

The graphs (``replicated_suite``, fixed seed ``SEED``, fixed order): each bundled graph of 8 ops or
more (``gemm_tma`` and ``fa_fwd_fig1``, 3 ops, give at most 18 ops at 6 heads and are left out)
as a unit graph (a graph written in time units as it is; a raw graph divided by the gcd of its
costs when that is at least 64 cycles, else rounded to units of 256 cycles), each op's units
plus 0 or 1 (one draw per op of the base, so the heads stay identical), then k = 2-6 heads
(``scale_graphs.copies``) of 20-60 ops sharing one loop, every cycle count, delay and spill
cost times F (10, 64 or 128: every one a multiple of F), ``"normalize": false``, each head
holding r / k of the base graph's registers (r = 1, 1.5 or 2: r > 1 is register pressure),
on one bundled machine the graph fits (drawn among them).  Eight graphs per base, then the
two graphs of issue 39 as far as the repository can rebuild them (two and three heads of
``fa_fwd_hopper_measured`` in units of 1024 cycles, times 10, on the h100's four warp groups;
the issue's exact graphs are not in the repository).

Each graph is solved twice with the same limit: the default search, and the previous one
(``SolveOptions(incumbents=False)``: the heuristic's incumbent only).  For each: ii, the proven
lower bound, whether proven optimal, the gap, which solver's schedule came back, and the wall
time; every schedule is checked by ``model.check``.

``--save`` writes ``bench/results/solver_replicated.{json,md}``.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from dataclasses import replace
from functools import reduce
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from common import cpu_name, git_commit  # noqa: E402
from scale_graphs import GRAPHS, copies  # noqa: E402

from tvm_twill.errors import GraphError, InfeasibleError, MachineError, SolverTimeoutError  # noqa: E402
from tvm_twill.model import check, get_machine, load_graph  # noqa: E402
from tvm_twill.solvers import SolveOptions, prepare, solve  # noqa: E402

SEED = 20260339
FACTORS = (10, 64, 128)
REGISTER_FACTORS = (1.0, 1.5, 2.0)
PER_BASE = 8
MIN_BASE_OPS, MIN_OPS, MAX_OPS = 8, 20, 60
MACHINES = ("a100", "h100", "b200", "a40", "orin", "l40s", "rtx5090")

HEADER = ["graph", "machine", "k", "ops", "F", "r", "ii", "lower bound", "proven", "gap", "answer from", "wall (s)",
          "checker", "previous: ii", "previous: proven", "previous: gap", "previous: wall (s)"]


def unit_graph(g):
    """``g`` in time units: as it is when written in units, else divided by the gcd of its costs
    (at least 64 cycles) or rounded to units of 256 cycles (nonzero costs stay >= 1)."""
    if not g.normalize:
        return g
    costs = [o.cycles for o in g.ops] + [e.delay for e in g.edges] + [o.spill_cost or 0 for o in g.ops]
    q = reduce(math.gcd, costs)
    q = q if q >= 64 else 256

    def u(v):
        return 0 if not v else max(1, round(v / q))
    ops = tuple(replace(o, cycles=u(o.cycles), spill_cost=None if o.spill_cost is None else u(o.spill_cost))
                for o in g.ops)
    edges = tuple(replace(e, delay=u(e.delay)) for e in g.edges)
    return g.replace(ops=ops, edges=edges, normalize=False)


def jittered_units(g, rnd: random.Random):
    """Each op's units plus 0 or 1 (one in three), a delay equal to its source's cycles following it."""
    bump = {o.name: rnd.random() < 1 / 3 for o in g.ops}
    ops = tuple(replace(o, cycles=o.cycles + bump[o.name]) for o in g.ops)
    new = {o.name: o for o in ops}
    edges = tuple(replace(e, delay=new[e.src].cycles if e.delay == g.op(e.src).cycles else e.delay) for e in g.edges)
    return g.replace(ops=ops, edges=edges)


def heads(unit, k: int, r: float, F: int, machine, name: str):
    """k heads of ``unit``, each with r / k of its registers, every cost times F (spills included:
    an op without its own spill cost gets F times the machine's)."""
    c = copies(unit, k, name=name)
    base = {f"{o.name}_{i}": o for i in range(k) for o in unit.ops}
    ops = tuple(replace(o, regs=math.ceil(base[o.name].regs * r / k), cycles=o.cycles * F,
                        spill_cost=F * machine.spill_of(base[o.name])) for o in c.ops)
    edges = tuple(replace(e, delay=e.delay * F) for e in c.edges)
    return c.replace(ops=ops, edges=edges, machine=machine.name, normalize=False)


def fits(g, machine) -> bool:
    try:
        g.validate_for(machine)
        return True
    except (GraphError, MachineError):
        return False


def replicated_suite(seed: int = SEED):
    """(name, base, machine, k, F, r, graph) in a fixed order; one ``random.Random(seed)`` draws all."""
    rnd = random.Random(seed)
    out = []
    for path in sorted(GRAPHS.glob("*.json")):
        base = load_graph(path)
        if len(base.ops) < MIN_BASE_OPS:
            continue
        unit = unit_graph(base)
        ks = [k for k in range(2, 7) if MIN_OPS <= k * len(base.ops) <= MAX_OPS]
        for _ in range(PER_BASE):
            k, F, r = rnd.choice(ks), rnd.choice(FACTORS), rnd.choice(REGISTER_FACTORS)
            j = jittered_units(unit, rnd)
            ms = [get_machine(n) for n in MACHINES]
            ms = [m for m in ms if fits(heads(j, k, r, F, m, "probe"), m)]
            m = rnd.choice(ms)
            name = f"{path.stem}_h{k}_r{r:g}_x{F}_{m.name}"
            out.append((name, path.stem, m.name, k, F, r, heads(j, k, r, F, m, name)))
    raw = load_graph(GRAPHS / "fa_fwd_hopper_measured.json")
    for k in (2, 3):
        name = f"issue39_fa_fwd_hopper_measured_h{k}_x10"
        out.append((name, raw.name, "h100", k, 10, 1.0, heads(_units_of(raw, 1024), k, 1.0, 10, get_machine("h100"),
                                                               name)))
    return out


def _units_of(g, q: int):
    """``g``'s costs rounded to units of ``q`` cycles (nonzero op cycles stay >= 1)."""
    ops = tuple(replace(o, cycles=max(1, round(o.cycles / q)),
                        spill_cost=None if o.spill_cost is None else round(o.spill_cost / q)) for o in g.ops)
    new = {o.name: o for o in ops}
    edges = tuple(replace(e, delay=new[e.src].cycles if e.delay == g.op(e.src).cycles else round(e.delay / q))
                  for e in g.edges)
    return g.replace(ops=ops, edges=edges, normalize=False)


def run_one(g, limit: float, incumbents: bool) -> dict:
    start = time.perf_counter()
    try:
        s = solve(g, options=SolveOptions(time_limit=limit, incumbents=incumbents))
    except InfeasibleError as e:
        return {"status": "infeasible", "family": e.family, "wall": time.perf_counter() - start}
    except SolverTimeoutError as e:
        return {"status": "no schedule", "reason": str(e), "wall": time.perf_counter() - start}
    wall = time.perf_counter() - start
    prep = prepare(g)
    bad = check(s, prep.graph, prep.machine)
    lb = s.lower_bound.ii
    sources = [a.solver for a in s.attempts if a.result == "sat" and a.ii == s.ii]
    return {"status": "ok", "ii": s.ii, "lb": lb, "optimal": bool(s.optimal),
            "gap": 0.0 if s.optimal else (s.ii - lb) / s.ii, "source": sources[0] if sources else "?",
            "wall": wall, "checker": "ok" if not bad else f"{len(bad)} violations"}


def _res(r: dict) -> list[str]:
    if r is None:
        return ["-"] * 4
    if r["status"] != "ok":
        return [r["status"], "-", "-", f"{r['wall']:.2f}"]
    return [str(r["ii"]), "yes" if r["optimal"] else "no", f"{100 * r['gap']:.1f}%", f"{r['wall']:.2f}"]


def cells(row: dict) -> list[str]:
    r, p = row["run"], row.get("previous")
    base = [row["graph"], row["machine"], str(row["k"]), str(row["ops"]), str(row["F"]), f"{row['r']:g}"]
    if r["status"] != "ok":
        what = r.get("family") or r.get("reason", "")
        return base + [r["status"], "-", "-", "-", what, f"{r['wall']:.2f}", "-"] + _res(p)[:1] + _res(p)[1:]
    return base + [str(r["ii"]), str(r["lb"]), "yes" if r["optimal"] else "no", f"{100 * r['gap']:.1f}%",
                   r["source"], f"{r['wall']:.2f}", r["checker"]] + _res(p)


def summary(rows: list, limit: float) -> list[str]:
    def stats(key):
        runs = [r[key] for r in rows if r.get(key) is not None]
        ok = [r for r in runs if r["status"] == "ok"]
        gaps = [r["gap"] for r in ok]
        return (f"a schedule for {len(ok)} of {len(runs)}, proven optimal {sum(r['optimal'] for r in ok)}, "
                f"within 5% of the lower bound {sum(g <= 0.05 for g in gaps)}, largest gap "
                f"{100 * max(gaps, default=0):.1f}%, mean gap {100 * sum(gaps) / max(1, len(gaps)):.2f}%, "
                f"wall time over the {limit:g} s limit {sum(r['wall'] > limit for r in runs)}, "
                f"total wall {sum(r['wall'] for r in runs):.0f} s")
    out = [f"- graphs: {len(rows)} ({min(r['ops'] for r in rows)}-{max(r['ops'] for r in rows)} ops)",
           "- this search: " + stats("run")]
    if any(r.get("previous") for r in rows):
        out.append("- previous search (`incumbents=False`): " + stats("previous"))
        pairs = [(r["run"], r["previous"]) for r in rows if r.get("previous")
                 and r["run"]["status"] == "ok" and r["previous"]["status"] == "ok"]
        out.append(f"- paired: smaller ii {sum(a['ii'] < b['ii'] for a, b in pairs)}, same "
                   f"{sum(a['ii'] == b['ii'] for a, b in pairs)}, larger {sum(a['ii'] > b['ii'] for a, b in pairs)}; "
                   f"proven here and not before {sum(a['optimal'] and not b['optimal'] for a, b in pairs)}, "
                   f"before and not here {sum(b['optimal'] and not a['optimal'] for a, b in pairs)}")
    out.append(f"- checker violations: {sum(r['run'].get('checker', 'ok') != 'ok' for r in rows)}")
    return out


def markdown(doc: dict) -> str:
    limit = doc["time_limit"]
    lines = ["# The solver on replicated graphs (heads sharing one loop, machine cycles, no normalization)", "",
             f"- command: `{doc['command']}`", f"- commit: `{doc['commit']}`", f"- host: {doc['host']}",
             f"- generator: `bench/solver_replicated.py` `replicated_suite(seed={doc['seed']})` (see its docstring)",
             f"- limit: {limit:g} s per graph and per search", ""]
    lines += summary(doc["rows"], limit) + [""]
    lines += ["| " + " | ".join(HEADER) + " |", "|" + " --- |" * len(HEADER)]
    lines += ["| " + " | ".join(cells(r)) + " |" for r in doc["rows"]]
    lines += ["", "k: heads; F: the factor every cost is a multiple of; r: each head holds r / k of the base "
              "graph's registers.  ii and the lower bound in cycles (no normalization).  \"gap\": (ii - lower "
              "bound) / ii, 0 when proven optimal.  \"answer from\": the first solver that found a schedule at "
              "the answer's ii (`heuristic`, `serial`, `smt`, or the structural incumbents `copies`, "
              "`reduction`).  \"previous\": the same solve with `SolveOptions(incumbents=False)`."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=10.0, help="seconds per graph and search (default 10)")
    ap.add_argument("--only", default=None, help="run only graphs whose name contains this")
    ap.add_argument("--no-previous", action="store_true", help="skip the previous search (incumbents=False)")
    ap.add_argument("--save", action="store_true", help="write bench/results/solver_replicated.{json,md}")
    args = ap.parse_args(argv)
    rows = []
    print(" | ".join(HEADER))
    for name, base, machine, k, F, r, g in replicated_suite():
        if args.only and args.only not in name:
            continue
        row = {"graph": name, "base": base, "machine": machine, "k": k, "F": F, "r": r, "ops": len(g.ops),
               "run": run_one(g, args.time_limit, True)}
        if not args.no_previous:
            row["previous"] = run_one(g, args.time_limit, False)
        rows.append(row)
        print(" | ".join(cells(row)), flush=True)
    print("\n".join(summary(rows, args.time_limit)))
    if args.save:
        doc = {"command": "python bench/solver_replicated.py " + " ".join(argv or sys.argv[1:]),
               "commit": git_commit(), "host": f"{cpu_name()}, Python {sys.version.split()[0]}", "seed": SEED,
               "time_limit": args.time_limit, "rows": rows}
        out = ROOT / "bench" / "results"
        (out / "solver_replicated.json").write_text(json.dumps(doc, indent=2) + "\n")
        (out / "solver_replicated.md").write_text(markdown(doc))
        print(f"wrote {out / 'solver_replicated.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
