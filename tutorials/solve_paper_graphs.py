"""Solve the Twill paper's loop graphs, read the reports, and draw the schedules.

Runs headless without TVM and without a GPU (z3 and CBC only; matplotlib for
the pictures)::

    python tutorials/solve_paper_graphs.py                   # pictures in a temporary folder
    python tutorials/solve_paper_graphs.py --out pictures/   # ... or in pictures/
    python tutorials/solve_paper_graphs.py --graphs fa_fwd_fig1 --no-plot

For each bundled graph (``tvm-twill example`` lists them) it

1. loads the graph (``tvm_twill.data.load_example``: ops with their unit and
   cycles, dependence edges with delay and iteration distance);
2. prepares it the way the solver schedules it (``solvers.prepare``: cost
   normalization for graphs in raw cycles, zero-latency streaming loads)
   and solves it (``solvers.solve_prepared``): the smallest initiation
   interval ii, each op's issue time, stage and warp role, and the proof
   that no smaller ii exists;
3. checks the schedule with the independent checker (``model.check``);
4. prints the report ``tvm-twill solve`` prints (``report.render``), and a
   warning when normalization distorts the cost ratios by more than 10%;
5. draws it (``plot.plot_schedule``): the modulo reservation table, the
   pipelined timeline per warp role (Figure 1 of the paper), and the
   dependence graph.

The same from the command line: ``tvm-twill example fa_fwd_fig1 --plot fig1.png``.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
if (_CHECKOUT / "tvm_twill").is_dir():  # run from a source checkout: use its tvm_twill
    sys.path.insert(0, str(_CHECKOUT))

#: Figure 1 of the paper, FlashAttention-3's forward ping-pong on Hopper, and the backward pass.
DEFAULT_GRAPHS = ["fa_fwd_fig1", "fa_fwd_hopper", "fa_bwd_hopper"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="solve the Twill paper's graphs and draw their schedules")
    ap.add_argument("--graphs", nargs="+", default=DEFAULT_GRAPHS, metavar="NAME",
                    help=f"bundled example graphs (default: {' '.join(DEFAULT_GRAPHS)})")
    ap.add_argument("--out", metavar="DIR", help="folder for the pictures (default: a new temporary folder)")
    ap.add_argument("--no-plot", action="store_true", help="print the reports only")
    ap.add_argument("--time-limit", type=float, default=60.0, help="seconds per graph (default 60)")
    args = ap.parse_args(argv)

    from tvm_twill import report
    from tvm_twill.data import load_example
    from tvm_twill.model import check
    from tvm_twill.solvers import SolveOptions, prepare, solve_prepared

    from tvm_twill.errors import PlotUnavailableError
    from tvm_twill.report.plot import require_matplotlib

    out = None
    if not args.no_plot:
        try:   # the quick-start install has no matplotlib: the reports alone, and how to get the pictures
            require_matplotlib()
        except PlotUnavailableError as err:
            print(f"no pictures: {err}\n")
            args.no_plot = True
    if not args.no_plot:
        out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="twill_pictures_"))
        out.mkdir(parents=True, exist_ok=True)
    for name in args.graphs:
        graph = load_example(name)                           # 1. the loop's dependence graph
        options = SolveOptions(time_limit=args.time_limit)
        prepared = prepare(graph, None, options)             # 2. what the solver schedules ...
        schedule = solve_prepared(prepared, options)         #    ... and the optimal schedule
        assert check(schedule, prepared.graph, prepared.machine) == []   # 3. independently checked
        print(f"===== {name} " + "=" * max(0, 60 - len(name)))
        print(report.render(schedule, prepared.graph, prepared.machine))  # 4. the report
        warning = report.normalization_warning(schedule)
        if warning:
            print(f"warning: {warning}")
        if out is not None:                                  # 5. the pictures
            from tvm_twill.report.plot import plot_schedule
            path = plot_schedule(schedule, prepared.graph, prepared.machine, out / f"{name}.png")
            print(f"picture: {path}")
        print(f"summary: {name} ii = {schedule.ii}, length = {schedule.length}, "
              f"{'optimal' if schedule.ii_optimal else 'not proven optimal'}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
