"""The ``tvm-twill`` command line.

::

    tvm-twill solve GRAPH.json [--machine NAME|FILE] [--json OUT] [--time-limit S]
                               [--cross-warp-sync] [--no-normalize] [--plot OUT.png]
                               [--strict-normalization] [--quiet] [--encoding joint|paper] [--top K]
    tvm-twill example [NAME] [same options as solve]
    tvm-twill check GRAPH.json SCHEDULE.json [--machine NAME|FILE] [--cross-warp-sync]
    tvm-twill machines
    tvm-twill --version

Exit status:

* 0 success (``check``: the schedule is valid).  When the time limit ends
  the search with a valid schedule in hand that is not proven optimal, it is
  printed as usual, followed by one line ``tvm-twill: not proven optimal:
  gap X% ...`` on stderr, and the status is still 0.  An ii that is optimal
  with a secondary objective (the length, the register peak) not proven
  minimal (``--encoding paper``, or tie-breaks cut short) gets one line
  ``tvm-twill: ii=N is optimal ...; length L not proven minimal (...)``
  instead;
* 1 ``check`` found violations (and nothing else ever exits 1);
* 2 invalid input: a malformed or hostile file, option or argument (one line
  ``tvm-twill: error: ...`` on stderr);
* 3 no schedule: infeasible (with the constraint family that rules it out)
  or out of time before any valid schedule was found (one ``tvm-twill:
  error: ...`` line);
* 4 internal error: a bug in tvm_twill (one line ``tvm-twill: internal
  error: ...`` asking for a report; set ``TVM_TWILL_DEBUG=1`` for the
  traceback);
* 130 interrupted (Ctrl-C; one line ``tvm-twill: interrupted``);
* 141 the reader of stdout went away (a closed pipe); nothing more is printed.

``--plot`` draws the schedule (``tvm_twill.report.plot``; matplotlib is imported
only then).  A cost normalization that distorts some cost ratio by more than
10% is warned about on stderr (``tvm-twill: warning: ...``);
``--strict-normalization`` refuses it instead (exit 2, before the search).

Progress: a solve that runs longer than a second reports on stderr which ii
it is proving, the incumbent and the lower bound (``--quiet``: not).

Output is never lost to the terminal's encoding: characters that stdout or
stderr cannot encode (an ASCII locale) are written as backslash escapes.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from . import __version__, report
from .data import example_names, load_example
from .errors import InfeasibleError, InputError, NormalizationError, SolverTimeoutError, TwillError
from .model import (BUILTIN_MACHINES, check, dump, get_machine, load_graph, load_machine, load_schedule,
                    schedule_to_dict)
from .model.canonical import MAX_TOP_K
from .planner.roofline import graph_prediction
from .solvers import SolveOptions, prepare, solve_prepared
from .solvers.progress import StderrProgress, gap

EXIT_OK, EXIT_VIOLATIONS, EXIT_INPUT, EXIT_NO_SCHEDULE, EXIT_INTERNAL = 0, 1, 2, 3, 4
EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 130, 141
#: Every status ``main`` returns.
EXIT_CODES = (EXIT_OK, EXIT_VIOLATIONS, EXIT_INPUT, EXIT_NO_SCHEDULE, EXIT_INTERNAL, EXIT_INTERRUPTED,
              EXIT_BROKEN_PIPE)
#: The longest --time-limit: z3 counts its timeout in milliseconds in 32 bits.
MAX_TIME_LIMIT = 1e6

PROG = "tvm-twill"


def _machine(arg):
    """``--machine``: a built-in name, or a tvm-twill-machine/1 file."""
    if arg is None:
        return None
    if arg.endswith(".json") or Path(arg).is_file():
        return load_machine(arg)
    return get_machine(arg)


def _solve_options(args):
    t = args.time_limit
    if not (t > 0):  # NaN too
        raise InputError(f"--time-limit must be > 0 seconds, got {t:g}")
    if not math.isfinite(t) or t > MAX_TIME_LIMIT:
        raise InputError(f"--time-limit must be > 0 seconds and at most {MAX_TIME_LIMIT:g}, got {t:g}")
    if args.top < 1 or args.top > MAX_TOP_K:
        raise InputError(f"--top must be a count of schedules from 1 to {MAX_TOP_K}, got {args.top}")
    if args.top > 1 and args.encoding == "paper":
        raise InputError("--encoding paper has no --top: use the default encoding for the K best schedules")
    return SolveOptions(time_limit=args.time_limit, cross_warp_sync=args.cross_warp_sync,
                        normalize_objective=args.normalize_objective, top_k=args.top,
                        progress=None if args.quiet else StderrProgress(prefix=f"{PROG}: "))


def _solve_and_print(graph, args) -> int:
    if args.no_normalize:
        graph = graph.replace(normalize=False)
    options = _solve_options(args)
    if args.plot:  # refused before the solve, not after it
        from .report.plot import require_matplotlib
        require_matplotlib()
    machine = _machine(args.machine)
    prepared = prepare(graph, machine, options)  # what is scheduled: the report's cycles
    warning = report.normalization_warning(prepared)
    if warning and args.strict_normalization:  # refused before the (expensive) search
        raise NormalizationError(f"--strict-normalization: {warning}")
    if warning:
        print(f"{PROG}: warning: {warning}", file=sys.stderr)
    if args.encoding == "paper":
        if args.cross_warp_sync:
            raise InputError("--encoding paper has no --cross-warp-sync: use the default encoding for it")
        from .solvers.paper_smt import paper_search  # the paper's Algorithm 1 with Figures 4-6
        schedule = paper_search(prepared.graph, prepared.machine, deadline=prepared.deadline)
    else:
        schedule = solve_prepared(prepared, options)
    prediction = graph_prediction(prepared.graph, schedule, prepared.machine, source=graph)
    if args.json:  # first: a closed stdout or a failing picture must not lose the schedule
        try:
            doc = schedule_to_dict(schedule)
            if prediction is not None:  # read back as an extension key (docs/formats.md)
                doc["prediction"] = prediction.to_dict()
            dump(doc, args.json)
        except (OSError, ValueError) as e:
            raise InputError(f"cannot write {args.json}: {getattr(e, 'strerror', None) or e}") from None
    print(report.render(schedule, prepared.graph, prepared.machine), end="")
    if prediction is not None:
        print(f"\nprediction: {prediction.explain()}")
    if args.plot:
        from .report.plot import plot_schedule  # matplotlib only when asked
        plot_schedule(schedule, prepared.graph, prepared.machine, args.plot,
                      cycles_per_unit=report.unit_scale(schedule, prepared.graph))
        print(f"\nwrote {args.plot}")
    loose = report.unproven_tie_breaks(schedule)
    if not schedule.ii_optimal:  # the anytime answer: valid, with its proven lower bound
        lb = schedule.lower_bound.ii
        sys.stdout.flush()
        _say(f"not proven optimal: gap {100 * gap(schedule.ii, lb):.1f}% (ii={schedule.ii}, every ii below {lb} "
             f"proven impossible); raise --time-limit to close it")
    elif loose:  # the ii is optimal; a secondary objective is not proven minimal
        sys.stdout.flush()
        why = ("--encoding paper takes the first length Algorithm 1 finds and has no register objective"
               if args.encoding == "paper" else "the tie-breaks' budget or the time limit ended them")
        _say(f"ii={schedule.ii} is optimal (every smaller ii proven impossible); "
             f"{', '.join(t.describe() for t in loose)} ({why})")
    if args.json:
        print(f"\nwrote {args.json}")
    return 0


def cmd_solve(args) -> int:
    return _solve_and_print(load_graph(args.graph), args)


def cmd_example(args) -> int:
    if args.name is None:
        print("bundled examples (tvm-twill example NAME solves one):")
        for name in example_names():
            g = load_example(name)
            machine = g.machine.name if g.machine else "h100 (default)"
            units = "normalized from raw cycles" if g.normalize else "unit-scale cycles"
            print(f"  {name:22s} {len(g.ops):2d} ops on {machine}, {units}")
        return 0
    return _solve_and_print(load_example(args.name), args)


def cmd_check(args) -> int:
    """Check a schedule against its graph with the independent checker.

    A schedule that records a ``normalization`` or ``streaming`` report was
    made on the prepared graph, so the graph is prepared the same way (the
    recorded U and ring depth) before checking.
    """
    graph = load_graph(args.graph)
    schedule = load_schedule(args.schedule)
    if schedule.graph != graph.name:
        raise InputError(f"{args.schedule} is a schedule of graph '{schedule.graph}', "
                         f"but {args.graph} is graph '{graph.name}'")
    machine = _machine(args.machine) or graph.machine or get_machine(schedule.machine)
    machine = get_machine(machine)
    if machine.name.casefold() != schedule.machine.casefold():
        where = "--machine" if args.machine else args.graph
        raise InputError(f"{args.schedule} is a schedule for machine '{schedule.machine}', but {where} "
                         f"names machine '{machine.name}': check it on the machine it was made for "
                         f"(--machine)")
    if schedule.normalization is not None or schedule.streaming is not None:
        opts = SolveOptions(
            normalize_bound=(schedule.normalization or {}).get("U", SolveOptions.normalize_bound),
            normalize_objective=(schedule.normalization or {}).get("objective", SolveOptions.normalize_objective),
            streaming_depth=(schedule.streaming or {}).get("depth", SolveOptions.streaming_depth))
        prepared = prepare(graph.replace(normalize=schedule.normalization is not None), machine, opts)
        graph, machine = prepared.graph, prepared.machine
    else:
        graph.validate_for(machine)
    violations = check(schedule, graph, machine, cross_warp_sync=args.cross_warp_sync)
    for i, alt in enumerate(schedule.alternatives):  # --top K: every schedule of the file
        violations += [f"alternatives[{i}]: {v}" for v in check(alt, graph, machine,
                                                                 cross_warp_sync=args.cross_warp_sync)]
    for v in violations:
        print(v)
    if violations:
        print(f"{len(violations)} violation(s): the schedule is not valid for {graph.name} on {machine.name}")
        return 1
    more = f" (and its {len(schedule.alternatives)} alternatives)" if schedule.alternatives else ""
    print(f"valid: {graph.name} on {machine.name}, ii={schedule.ii}, length={schedule.length}{more}")
    return 0


def cmd_machines(args) -> int:
    rows = []
    for m in BUILTIN_MACHINES.values():
        rows.append([m.name, m.arch or "-", ", ".join(f"{u}:{c}" for u, c in m.units.items()),
                     (f"{len(m.roles)} named ({'/'.join(str(r.warps) for r in m.roles)} warps)" if m.roles
                      else f"{m.warp_groups} x {m.warps_per_group}"), m.regs_per_thread_max,
                     f"{m.smem_bytes // 1024} KiB", f"{m.tmem_bytes // 1024} KiB" if m.tmem_bytes else "-"])
    print(report.table(["name", "arch", "units (capacity)", "warp groups", "regs/thread", "smem", "tmem"],
                       rows))
    return 0


def _add_solve_options(p):
    p.add_argument("--machine", metavar="NAME|FILE",
                   help="built-in machine (see 'tvm-twill machines') or a tvm-twill-machine/1 file; "
                        "default: the graph's")
    p.add_argument("--json", metavar="OUT", help="also write the schedule (tvm-twill-schedule/1) to OUT")
    p.add_argument("--time-limit", metavar="S", type=float, default=30.0,
                   help="seconds for the whole search (default 30)")
    p.add_argument("--cross-warp-sync", action="store_true",
                   help="a consumer waits for a value from another warp as on a blocking edge")
    p.add_argument("--normalize-objective", choices=("relative", "paper"), default="relative",
                   help="cost normalization: least relative ratio error (default) or the paper's ZLP objective F")
    p.add_argument("--encoding", choices=("joint", "paper"), default="joint",
                   help="joint: the default z3 search (proves optimality); paper: the Twill paper's Algorithm 1 "
                        "with its op[v,i,t] encoding (Figures 4-6), slower, never claims optimality")
    p.add_argument("--top", metavar="K", type=int, default=1,
                   help="the K best schedules, distinct up to renaming, in order of ii then the tie-break "
                        f"(1 to {MAX_TOP_K}; --json writes the 2nd.. as \"alternatives\", docs/formats.md)")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress lines on stderr (solves longer than a second print them)")
    p.add_argument("--no-normalize", action="store_true",
                   help="schedule the graph's cycles as they are, even if it asks for normalization "
                        "(exact ratios; the solver's work does not grow with cycle magnitudes, but "
                        "listings get long)")
    p.add_argument("--plot", metavar="OUT.png",
                   help="also draw the schedule (reservation table, pipelined timeline per warp role, "
                        "dependence graph) to OUT.png / .svg / .pdf; needs matplotlib (pip install "
                        "'tvm-twill[plot]')")
    p.add_argument("--strict-normalization", action="store_true",
                   help="refuse (exit 2) when cost normalization distorts some cost ratio by more than 10%% "
                        "(otherwise a warning on stderr)")


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (``tvm-twill: error: ...``), exit status 2."""

    def error(self, message):
        print(f"{PROG}: error: {_one_line(message)} (see '{self.prog} --help')", file=sys.stderr)
        raise SystemExit(EXIT_INPUT)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG, description="Optimal software pipelining + warp specialization (Twill) "
                               "for tile-level loop dependence graphs.",
        epilog="exit status: 0 ok, 1 check found violations, 2 invalid input, 3 no schedule "
               "(infeasible or out of time), 4 internal error (please report), 130 interrupted")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("solve", help="find the optimal schedule of a graph file and print it")
    p.add_argument("graph", metavar="GRAPH.json", help="the loop dependence graph (tvm-twill-graph/1 JSON)")
    _add_solve_options(p)
    p.set_defaults(run=cmd_solve)

    p = sub.add_parser("example", help="list the bundled example graphs, or solve one")
    p.add_argument("name", metavar="NAME", nargs="?",
                   help="a bundled example graph (omit it to list them)")
    _add_solve_options(p)
    p.set_defaults(run=cmd_example)

    p = sub.add_parser("check", help="check a schedule file against a graph (rules 1-6)")
    p.add_argument("graph", metavar="GRAPH.json", help="the loop dependence graph (tvm-twill-graph/1 JSON)")
    p.add_argument("schedule", metavar="SCHEDULE.json",
                   help="the schedule to check (tvm-twill-schedule/1 JSON, e.g. from solve --json)")
    p.add_argument("--machine", metavar="NAME|FILE", help="default: the graph's, else the schedule's")
    p.add_argument("--cross-warp-sync", action="store_true",
                   help="also treat every cross-warp edge as blocking")
    p.set_defaults(run=cmd_check)

    p = sub.add_parser("machines", help="list the built-in machine models")
    p.set_defaults(run=cmd_machines)
    return parser


def _one_line(message: str, limit: int = 2000) -> str:
    """``message`` on one line: control characters and lone surrogates escaped, length bounded."""
    out = []
    for ch in str(message)[: 2 * limit]:
        o = ord(ch)
        out.append(ascii(ch)[1:-1] if o < 0x20 or 0x7F <= o < 0xA0 or 0xD800 <= o < 0xE000 else ch)
    text = "".join(out)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fail(message: str, code: int) -> int:
    print(f"{PROG}: error: {_one_line(message)}", file=sys.stderr)
    return code


def _say(line: str) -> None:
    try:
        print(f"{PROG}: {_one_line(line)}", file=sys.stderr)
    except Exception:  # stderr itself is gone: the exit status still tells
        pass


def _escape_unencodable():
    """Let stdout/stderr write what their encoding cannot (backslash escapes);
    returns a function that restores them."""
    undo = []
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        errors = getattr(stream, "errors", None)
        if reconfigure is None or errors is None:
            continue
        try:
            reconfigure(errors="backslashreplace")
            undo.append((reconfigure, errors))
        except Exception:
            pass

    def restore():
        for reconfigure, errors in undo:
            try:
                reconfigure(errors=errors)
            except Exception:
                pass
    return restore


def _run(argv) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help, --version (0) and usage errors (2)
        return e.code if isinstance(e.code, int) else EXIT_INPUT
    try:
        code = args.run(args)
    except InfeasibleError as e:
        return _fail(f"infeasible ({e.family}): {e}", EXIT_NO_SCHEDULE)
    except SolverTimeoutError as e:
        return _fail(f"timed out: {e}", EXIT_NO_SCHEDULE)
    except TwillError as e:
        # every deliberate error is about the input or its answer: never 1 (violations)
        return _fail(str(e), e.exit_code if e.exit_code in (EXIT_INPUT, EXIT_NO_SCHEDULE) else EXIT_INPUT)
    sys.stdout.flush()
    return code


def main(argv=None) -> int:
    """Run the CLI; return the exit status (see the module docstring).

    Never raises (but for ``TVM_TWILL_DEBUG=1``, which lets internal errors
    through with their traceback)."""
    restore = _escape_unencodable()
    try:
        return _run(argv)
    except KeyboardInterrupt:
        _say("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        try:  # the reader left: write nothing more (not even at exit)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except Exception:
            pass
        return EXIT_BROKEN_PIPE
    except Exception as e:  # a bug: one line, unless debugging
        if os.environ.get("TVM_TWILL_DEBUG", "") not in ("", "0"):
            raise
        try:
            detail = str(e)
        except Exception:
            detail = "(no message)"
        _say(f"internal error: {type(e).__name__}: {detail} -- this is a bug in tvm-twill {__version__}; "
             "please report it with the command and its input files (TVM_TWILL_DEBUG=1 shows the traceback)")
        return EXIT_INTERNAL
    finally:
        restore()


if __name__ == "__main__":
    sys.exit(main())
