"""Human-readable reports of a schedule (pure Python on the model).

``render(schedule, graph, machine)`` is what ``tvm-twill solve`` prints; each
section is also a function of its own so that the API (``explain``) and
tests can use just the part they need.  ``graph`` must be the graph the
solver scheduled (``tvm_twill.solvers.prepare(...).graph``: normalized
cycles, zero-latency streaming loads), so that cycles and times agree.

Units.  Times are in the graph's time unit.  A graph given in machine cycles
that the solver normalized (``schedule.normalization``) is scheduled in
*normalized units*: the report says "units" and gives the scale (machine
cycles per unit) whenever the mapping has one; only a graph scheduled as
given is reported in "cycles".

The pipeline listing and what the report costs: docs/planner.md ("The CLI's report").
"""
from __future__ import annotations

from math import ceil

from ..model import explain_lower_bound, rec_mii, register_peaks, res_mii

#: Listings longer than this many cycles keep only the cycles where a unit
#: changes state or an op issues (raw-cycle schedules span thousands).
FULL_LISTING_MAX = 64
#: Schedules with more overlapped copies (length / ii) get one line instead of a listing.
PIPELINE_MAX_COPIES = 64


def table(headers: list[str], rows: list[list]) -> str:
    """Left-aligned columns separated by two spaces (numbers right-aligned)."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    numeric = [bool(rows) and all(isinstance(r[i], (int, float)) for r in rows) for i in range(len(headers))]

    def line(vals):
        out = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(vals, widths, numeric)]
        return "  ".join(out).rstrip()
    return "\n".join([line(headers)] + [line(r) for r in cells])


def _units(graph, machine) -> list[str]:
    """Units the graph uses, in the machine's order."""
    used = set().union(*(op.units() for op in graph.ops))
    return [u for u in machine.units if u in used]


def time_unit(schedule, graph=None) -> str:
    """'cycles' for a graph in machine cycles scheduled as given; 'units' for normalized costs or a graph whose
    ``cycles_per_unit`` is not 1 (see the module docstring)."""
    return "units" if schedule.normalization or getattr(graph, "cycles_per_unit", 1) != 1 else "cycles"


def unit_scale(schedule, graph=None) -> float | None:
    """Machine cycles per time unit of ``schedule``: the graph's own unit (``graph.cycles_per_unit``, e.g. a
    TVM loop's 16-cycle quantum) times the normalization's single scale; None when the units are machine cycles
    or the normalization mapping has no single scale."""
    base = getattr(graph, "cycles_per_unit", 1) or 1
    norm = schedule.normalization
    if not norm:
        return float(base) if base != 1 else None
    scales = {int(k) / v for k, v in norm["mapping"].items() if v}
    return scales.pop() * base if len(scales) == 1 else None


def role_name(warp: int, machine=None) -> str:
    """A warp role in hardware terms: "warp group 1 (warps 4-7)" when the machine's roles are warp
    groups of several warps, "warp 3" when a role is one warp (or the machine is unknown)."""
    g = getattr(machine, "warps_per_group", 1) or 1
    if g == 1:
        return f"warp {warp}"
    return f"warp group {warp} (warps {warp * g}-{warp * g + g - 1})"


def unproven_tie_breaks(schedule) -> list:
    """The tie-breaks (``Schedule.tie_breaks``: length, register peak) not proven minimal."""
    return [t for t in schedule.tie_breaks if not t.proven]


def optimality(schedule) -> str:
    """What was proven, the ii and each tie-break apart: "yes (every smaller ii ...)", "yes for the ii (...);
    length 4 proven minimal; register peak 192 not proven minimal", or "not proven (... gap X%)"."""
    lb = schedule.lower_bound
    if not schedule.ii_optimal:
        if lb is None:
            return "not proven"
        return f"not proven (every ii below {lb.ii} was proven impossible: gap {100 * schedule.ii_gap:.1f}%)"
    text = "yes (every smaller ii was proven impossible)"
    if not unproven_tie_breaks(schedule):
        return text
    return text.replace("yes", "yes for the ii", 1) + "; " + "; ".join(t.describe() for t in schedule.tie_breaks)


def header(schedule, graph=None) -> str:
    """Graph, machine, ii, length, stages and the optimality claim (``optimality``)."""
    unit, scale = time_unit(schedule, graph), unit_scale(schedule, graph)
    ii_text = f"ii = {schedule.ii}  (one iteration starts every {schedule.ii} {unit}"
    if scale is not None:
        ii_text += f" = {schedule.ii * scale:g} machine cycles"
    elif schedule.normalization:
        ii_text += "; normalized, see the mapping below"
    return "\n".join([
        f"graph {schedule.graph} on machine {schedule.machine}",
        ii_text + ")",
        f"length L = {schedule.length}  (stages: {schedule.num_stages}, "
        f"overlapped copies: {_copies(schedule)})",
        f"optimal: {optimality(schedule)}  solved in {schedule.solve_seconds:.2f}s",
    ])


def lower_bound(schedule, graph, machine) -> str:
    """The certificate: ResMII (bottleneck unit) and RecMII (critical recurrence),
    the load of every unit, then why each smaller ii that was tried failed."""
    lb = schedule.lower_bound
    lines = [f"lower bound: ii >= {lb.ii if lb else max(res_mii(graph, machine), rec_mii(graph))}"]
    unit = time_unit(schedule, graph)  # the bound is in the graph's time unit: not cycles once normalized
    lines += [f"  {line}".replace(" cycles", f" {unit}") for line in explain_lower_bound(graph, machine)]
    load = [f"{u} {sum(op.usage(u) for op in graph.ops)}/{machine.capacity(u)}" for u in _units(graph, machine)]
    lines.append(f"  busy {time_unit(schedule, graph)} per iteration / capacity: {', '.join(load)}")
    for a in schedule.attempts:
        if a.ii < schedule.ii and a.result == "unsat":
            lines.append(f"  ii = {a.ii} impossible: {a.reason or 'no schedule'}")
    return "\n".join(lines)


def attempts(schedule) -> str:
    """Every (ii, length) query of the search and its outcome."""
    if not schedule.attempts:
        return "attempts: none recorded"
    rows = [[a.ii, "-" if a.length is None else a.length, a.result, f"{a.seconds:.3f}", a.reason or ""]
            for a in schedule.attempts]
    return "attempts (length '-': any length; reason: constraint families in the unsat core)\n" + \
        table(["ii", "length", "result", "seconds", "reason"], rows)


def preparation(schedule, graph=None) -> str:
    """The graph's time unit, the normalization and streaming reports, or '' when none applies."""
    lines = []
    base = getattr(graph, "cycles_per_unit", 1)
    if base != 1:
        lines.append(f"time unit of the graph: 1 unit = {base} machine cycles (its cycles_per_unit)")
    norm = schedule.normalization
    if norm:
        mapping = {int(k): v for k, v in norm["mapping"].items()}
        pairs = ", ".join(f"{k} -> {v}" for k, v in sorted(mapping.items()))
        lines.append(f"cost normalization ({norm.get('objective', 'relative')} objective, U = {norm['U']}, "
                     f"distortion F = {norm['distortion']}, "
                     f"max ratio error {100 * norm['max_ratio_error']:.1f}%): "
                     f"{'graph units' if base != 1 else 'machine cycles'} -> units")
        lines.append(f"  {pairs}")
        scale = unit_scale(schedule, graph)
        if scale is not None:
            lines.append(f"  1 unit = {scale:g} machine cycles")
    stream = schedule.streaming
    if stream:
        lines.append(f"streaming loads (zero latency, ring of {stream['depth']} buffers, section 5.3): "
                     + ", ".join(stream["ops"]))
    return "\n".join(lines)


#: Cost normalization that distorts some cost ratio by more than this fraction is warned about.
RATIO_ERROR_WARN = 0.10


def normalization_warning(schedule, threshold: float = RATIO_ERROR_WARN) -> str | None:
    """One line when the normalization distorts cost ratios by more than ``threshold``, else None."""
    norm = schedule.normalization
    err = (norm or {}).get("max_ratio_error") or 0.0
    if err <= threshold:
        return None
    return (f"cost normalization distorts the ratio of some op costs by {100 * err:.1f}% (more than "
            f"{100 * threshold:.0f}%): the schedule is optimal for the normalized costs, not necessarily for "
            "the machine cycles; solve with --no-normalize for exact costs")


def ops(schedule, graph) -> str:
    """One row per op, in emitted-body order (with machine-cycle columns when the units have a scale)."""
    scale = unit_scale(schedule, graph)
    rows = []
    for name in schedule.in_order():
        p, op = schedule.ops[name], graph.op(name)
        unit = "+".join(sorted(op.units())) or "-"
        busy = schedule.cycles.get(name, op.cycles)
        row = [name, p.time, p.stage, p.time % schedule.ii, p.order, p.warp, unit, busy]
        if scale is not None:
            row[2:2] = [_num(p.time * scale)]
            row.append(_num(busy * scale))
        rows.append(row)
    headers = ["op", "time", "stage", "slot", "order", "role", "unit", f"busy ({time_unit(schedule, graph)})"]
    if scale is not None:
        headers[1:2] = ["time (units)", "time (cycles)"]
        headers.append("busy (cycles)")
    return table(headers, rows)


def _num(x: float):
    return int(x) if float(x).is_integer() else round(x, 2)


def steady_state(schedule) -> str:
    """The loop body in issue order: op (stage s, slot r)."""
    parts = [f"{n} (stage {schedule.ops[n].stage}, slot {schedule.ops[n].time % schedule.ii})"
             for n in schedule.in_order()]
    return "steady-state order: " + " -> ".join(parts)


def warp_roles(schedule, graph, machine) -> str:
    """Which ops each warp role issues, and its register peak."""
    peaks = register_peaks(schedule, graph)
    rows = []
    for w in schedule.warps_used():
        names = [n for n in schedule.in_order() if schedule.ops[n].warp == w]
        vl = any(graph.op(n).variable_latency for n in names)
        rows.append([role_name(w, machine) + (" (variable latency)" if vl else ""),
                     f"{peaks[w]}/{machine.regs_per_thread_max}", ", ".join(names)])
    threads = machine.warps_per_group * 32
    held = sum(peaks[w] for w in schedule.warps_used()) * threads
    verdict = "fits" if held <= machine.regs_per_sm else "exceeds it: not every role can hold its peak at once"
    budget = (f"register file: the roles' peaks x {threads} threads each = {held} of {machine.regs_per_sm} "
              f"registers per SM ({verdict})")
    return "warp roles (role k of the ops table)\n" + table(["role", "regs", "ops"], rows) + "\n" + budget


def _copies(schedule) -> int:
    return max(1, ceil(schedule.length / schedule.ii))


def pipeline(schedule, graph, machine) -> str:
    """Prologue, steady state and epilogue as a cycle-by-cycle listing (module docstring)."""
    ii, copies = schedule.ii, _copies(schedule)
    if copies > PIPELINE_MAX_COPIES:  # a listing per copy would grow with the magnitudes
        return (f"pipeline: {copies} overlapped copies of the schedule, {ii} {time_unit(schedule)} apart: more than "
                f"the {PIPELINE_MAX_COPIES} listed (the ops table above gives every time)")
    units = _units(graph, machine)
    span = (copies - 1) * ii + schedule.length
    issues: dict[int, list[str]] = {}
    runs = []  # (start, end, unit, tag, count): one per reservation run of each copy
    for name in schedule.in_order():
        for k in range(copies):
            start = schedule.ops[name].time + k * ii
            tag = f"{name}@{k}"
            issues.setdefault(start, []).append(f"{tag}/w{schedule.ops[name].warp}")
            runs += [(start + off, start + off + length, u, tag, n)
                     for off, length, row in graph.op(name).reservation_runs() for u, n in row]
    steady = ((copies - 1) * ii, copies * ii)
    boundaries = {0, steady[0], steady[1], span - 1}
    if span <= FULL_LISTING_MAX:
        shown = range(span)
    else:  # only where something issues or a unit can change state
        events = set(issues) | boundaries | {t for a, b, *_ in runs for t in (a, b, b - 1)}
        shown = sorted(t for t in events if 0 <= t < span)

    def part(t):
        return "prologue" if t < steady[0] else "steady" if t < steady[1] else "epilogue"

    def window(lo, hi):
        return f"cycles [{lo}, {hi})" if hi > lo else "none"

    def state(t):
        busy = {u: [] for u in units}
        for a, b, u, tag, n in runs:
            if a <= t < b and u in busy:
                busy[u].extend([tag] * n)
        return tuple("+".join(busy[u]) or "-" for u in units)

    rows, last = [], None
    for t in shown:
        st = state(t)
        # Long listings keep only cycles where something issues or a unit changes.
        if span <= FULL_LISTING_MAX or t in issues or st != last or t in boundaries:
            rows.append([t, part(t), *st, " ".join(issues.get(t, []))])
        last = st
    copies_text = "1 copy of the schedule" if copies == 1 else \
        f"{copies} copies of the schedule, {ii} {time_unit(schedule, graph)} apart"
    intro = (f"pipeline: {copies_text}; prologue {window(0, steady[0])}, steady state "
             f"{window(*steady)} (the loop body, repeats every ii), epilogue {window(steady[1], span)}")
    if time_unit(schedule, graph) == "units":
        intro = intro.replace("cycles [", "units [")
        scale = unit_scale(schedule, graph)
        intro += f" (1 unit = {scale:g} machine cycles)" if scale is not None else \
            " (normalized units, no single machine-cycle scale)"
    if span > FULL_LISTING_MAX:
        intro += "\n(times where nothing issues and no unit changes are left out)"
    return intro + "\n" + table(["time", "part", *units, "issues"], rows)


def render(schedule, graph, machine) -> str:
    """The full report printed by ``tvm-twill solve``."""
    sections = [header(schedule, graph), lower_bound(schedule, graph, machine),
                attempts(schedule), preparation(schedule, graph), ops(schedule, graph), steady_state(schedule),
                warp_roles(schedule, graph, machine), pipeline(schedule, graph, machine),
                alternatives(schedule, graph)]
    return "\n\n".join(s for s in sections if s) + "\n"


#: Ops whose stage changed that ``difference`` names one by one (then "and N more").
DIFFERENCES_LISTED = 4


def _roles(schedule, graph) -> list:
    """The ops grouped by warp role, each group and the groups in graph order (names of roles aside)."""
    groups: dict = {}
    for n in graph.names:
        groups.setdefault(schedule.ops[n].warp, []).append(n)
    return list(groups.values())


def _listed(items: list, what: str) -> list:
    extra = len(items) - DIFFERENCES_LISTED
    return items[:DIFFERENCES_LISTED] + ([f"and {extra} more {what}"] if extra > 0 else [])


def difference(best, other, graph) -> str:
    """How ``other`` differs from ``best`` (one line): ii, length, register peak, stages, issue times
    within a stage, order, roles."""
    parts = ["ii same" if other.ii == best.ii else f"ii {best.ii}\u2192{other.ii}"]
    if other.length != best.length:
        parts.append(f"length {best.length}\u2192{other.length}")
    regs = (max(register_peaks(best, graph).values()), max(register_peaks(other, graph).values()))
    if regs[0] != regs[1]:
        parts.append(f"register peak {regs[0]}\u2192{regs[1]}")
    a, b = best.ops, other.ops
    parts += _listed([f"stage of {n} {a[n].stage}\u2192{b[n].stage}" for n in graph.names
                      if a[n].stage != b[n].stage], "stage(s)")
    parts += _listed([f"time of {n} {a[n].time}\u2192{b[n].time}" for n in graph.names
                      if a[n].stage == b[n].stage and a[n].time != b[n].time], "time(s)")
    if best.in_order() != other.in_order():
        parts.append(f"order {', '.join(best.in_order())} \u2192 {', '.join(other.in_order())}")
    if _roles(best, graph) != _roles(other, graph):
        show = lambda s: " ".join("{" + ", ".join(g) + "}" for g in _roles(s, graph))  # noqa: E731
        parts.append(f"roles {show(best)} \u2192 {show(other)}")
    return ", ".join(parts)


def _ordinal(k: int) -> str:
    return f"{k}{'th' if 10 <= k % 100 < 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


def alternatives(schedule, graph) -> str:
    """The K best schedules (``schedule`` and its ``alternatives``), each with how it differs from the 1st."""
    if not schedule.alternatives:
        return ""
    lines = [f"the {1 + len(schedule.alternatives)} best schedules (distinct up to renaming; "
             "docs/formats.md, \"The K best schedules\"):",
             f"  1st: ii {schedule.ii}, length {schedule.length}, {schedule.num_stages} stage(s) (above)"]
    for k, alt in enumerate(schedule.alternatives, start=2):
        lines.append(f"  {_ordinal(k)}: {difference(schedule, alt, graph)}")
    return "\n".join(lines)
