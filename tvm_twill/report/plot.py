"""Pictures of a schedule (matplotlib, headless; pure Python on the model).

``plot_schedule(schedule, graph, machine, path)`` writes one figure with
three panels:

* **modulo reservation table** (top left): one row per functional unit (a
  sub-row per instance when its capacity is above 1), the slots ``0 ..
  ii-1`` of the steady state, and which op occupies each (bars colored by
  the op's warp role, labelled ``op (stage s)``);
* **dependence graph** (top right): ops in layers along the distance-0
  edges (longest path from a source), colored by warp role; loop-carried
  edges are dashed and labelled with their distance;
* **pipelined timeline** (bottom, like Figure 1 of the Twill paper): a few
  overlapped iterations, each op a bar on its warp role's row starting at
  ``time + k*ii``, colored by iteration ``k``; the prologue, steady state
  and epilogue are shaded;
* with ``ring`` (a warp-specialized plan, ``plot_ws.Ring``), a fourth panel
  (bottom): the producer warp, the ring slots over time and the consumer
  groups (``plot_ws``).

``graph`` must be the graph the solver scheduled
(``tvm_twill.solvers.prepare(...).graph``).  Times are drawn in machine
cycles when they are known (a graph scheduled as given, a normalization with
one scale, or ``cycles_per_unit`` from the caller, e.g. the TIR front-end's
quantum); otherwise in normalized "time units".

Cost.  The number of drawing primitives depends only on the graph (ops,
edges, reservation runs) and on at most ``MAX_ITERATIONS`` drawn
iterations, never on the magnitudes of the times: a schedule in raw cycles
(ii in the thousands) draws as fast as its normalized twin.

matplotlib is imported lazily, only here, and without pyplot (no global
backend is changed: the figure is rendered by the Agg canvas).  Without
matplotlib, ``PlotUnavailableError`` says how to install it.
"""
from __future__ import annotations

from math import ceil
from pathlib import Path

from ..errors import InputError, PlotUnavailableError
from ..model import topological_order
from .plot_ws import draw_ring, ring_timeline
from . import role_name, unit_scale

__all__ = ["MAX_ITERATIONS", "plot_schedule", "require_matplotlib", "time_axis"]

#: At most this many overlapped iterations are drawn in the timeline.
MAX_ITERATIONS = 8
#: Role colors (warp roles) and iteration colors (timeline).
_ROLE_COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                "#9c755f", "#bab0ac"]
_ITER_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def _matplotlib():
    try:
        from matplotlib.figure import Figure
        from matplotlib.patches import FancyArrowPatch, Rectangle
    except ImportError:
        raise PlotUnavailableError("plotting needs matplotlib, which is not installed: "
                                   "pip install 'tvm-twill[plot]' (or pip install matplotlib)") from None
    return Figure, Rectangle, FancyArrowPatch


def require_matplotlib() -> None:
    """PlotUnavailableError now, without matplotlib (the CLI asks before it solves)."""
    _matplotlib()


def time_axis(schedule, cycles_per_unit=None) -> tuple[float, str]:
    """(factor, label): multiply model times by factor to draw them; label the axis with label."""
    if cycles_per_unit:
        return float(cycles_per_unit), f"time (machine cycles; 1 unit = {cycles_per_unit:g} cycles)"
    if not schedule.normalization:
        return 1.0, "time (cycles)"
    scale = unit_scale(schedule)
    if scale is not None:
        return scale, f"time (machine cycles; 1 unit = {scale:g} cycles)"
    return 1.0, "time (normalized time units; no single cycle scale)"


def _ii_text(ii: int, factor: float) -> str:
    return f"ii = {ii}" if factor == 1 else f"ii = {ii} units = {ii * factor:g} cycles"


def _role_color(w: int) -> str:
    return _ROLE_COLORS[w % len(_ROLE_COLORS)]


def _lanes(intervals: list[tuple[float, float]], minimum: int = 1) -> tuple[list[int], int]:
    """First-fit lane of each half-open interval so that lanes never overlap; (lanes, lane count)."""
    ends: list[float] = []
    lane = [0] * len(intervals)
    for i in sorted(range(len(intervals)), key=lambda i: intervals[i]):
        a, b = intervals[i]
        for j, e in enumerate(ends):
            if e <= a:
                lane[i], ends[j] = j, b
                break
        else:
            lane[i] = len(ends)
            ends.append(b)
    return lane, max(minimum, len(ends))


def _label(ax, x, y, w, span, texts, chars, tag=None, tagged=None, **kw):
    """Write the first of ``texts`` that fits in the bar (``chars``: characters across the whole axis);
    when none fits, the short ``tag`` (the op's position in the graph), recorded in ``tagged`` for the
    figure's key, so that no bar is left unnamed where a number fits."""
    for text in texts:
        for size, per in ((7, 1.0), (5.5, 0.8)):
            if w >= span * len(text) * per / chars:
                ax.text(x + w / 2, y, text, ha="center", va="center", fontsize=size, clip_on=True, **kw)
                return
    if tag is not None and w >= span * len(tag[0]) * 0.8 / chars:
        ax.text(x + w / 2, y, tag[0], ha="center", va="center", fontsize=5.5, clip_on=True, **kw)
        tagged.add(tag)


def _wrap(start: int, length: int, ii: int, capacity: int) -> list[tuple[int, int]]:
    """The pieces of [start, start + length) folded onto the slots [0, ii) (full turns capped)."""
    full, rest = divmod(length, ii)
    pieces = [(0, ii)] * min(full, capacity + 1)
    s = start % ii
    if rest:
        pieces += [(s, min(ii, s + rest))] + ([(0, s + rest - ii)] if s + rest > ii else [])
    return pieces


def _tag(graph, name) -> tuple[str, str]:
    return str(graph.names.index(name)), name


def _mrt(ax, schedule, graph, machine, factor, Rectangle, tagged):
    ii = schedule.ii
    used = set().union(*(graph.op(n).units() for n in graph.names))
    units = [u for u in machine.units if u in used]
    rows = {u: [] for u in units}  # unit -> [(a, b, op)] in [0, ii)
    for name in schedule.in_order():
        op, t = graph.op(name), schedule.ops[name].time
        for off, length, row in op.reservation_runs():  # run-length encoded: never per cycle
            for u, n in row:
                if u in rows:
                    rows[u] += [(p, q, name) for p, q in _wrap(t + off, length, ii, machine.units.get(u, 1))
                                for _ in range(n)]
    y, yticks = 0.0, []
    for u in reversed(units):
        lane, count = _lanes([(a, b) for a, b, _ in rows[u]], machine.units.get(u, 1))
        h = 1.0 / count
        for (a, b, name), k in zip(rows[u], lane):
            w = schedule.ops[name].warp
            ax.add_patch(Rectangle((a * factor, y + k * h + 0.05 * h), (b - a) * factor, 0.9 * h,
                                   facecolor=_role_color(w), edgecolor="black", linewidth=0.6))
            _label(ax, a * factor, y + (k + 0.5) * h, (b - a) * factor, ii * factor,
                   [f"{name} (s{schedule.ops[name].stage})", name], 100, _tag(graph, name), tagged, color="white")
        yticks.append((y + 0.5, f"{u} (x{machine.units.get(u, 1)})"))
        y += 1.0
    ax.set_xlim(0, ii * factor)
    ax.set_ylim(0, max(1.0, y))
    ax.set_yticks([p for p, _ in yticks], [t for _, t in yticks])
    if ii <= 16 and factor == 1:
        ax.set_xticks(range(ii + 1))
    else:
        ax.xaxis.get_major_locator().set_params(integer=True)
    if ii <= 24:  # slot boundaries (more would hide the bars)
        ax.set_xticks([k * factor for k in range(ii + 1)], minor=True)
        ax.grid(axis="x", which="both", linewidth=0.4, alpha=0.6)
    ax.set_title(f"modulo reservation table ({_ii_text(ii, factor)}; label: op (stage))", fontsize=9)


def _layers(graph) -> dict:
    """Layer of each op: longest path from a source along distance-0 edges."""
    layer = {}
    for n in topological_order(graph):
        layer[n] = max([layer[e.src] + 1 for e in graph.in_edges(n) if e.distance == 0 and e.src in layer],
                       default=0)
    return layer


def _graph(ax, schedule, graph, machine, FancyArrowPatch):
    layer = _layers(graph)
    by_layer: dict = {}
    for n in graph.names:
        by_layer.setdefault(layer[n], []).append(n)
    pos: dict = {}
    for d in sorted(by_layer):  # order each layer by the mean position of its predecessors
        names = by_layer[d]
        if d:
            def key(n):
                xs = [pos[e.src][0] for e in graph.in_edges(n) if e.src in pos]
                return sum(xs) / len(xs) if xs else 0.0
            names = sorted(names, key=key)
        for i, n in enumerate(names):
            pos[n] = (i - (len(names) - 1) / 2, -d)
    width = max(len(v) for v in by_layer.values())
    for e in graph.edges:
        (x0, y0), (x1, y1) = pos[e.src], pos[e.dst]
        color = "#c0392b" if e.blocking else "#555555"
        if e.src == e.dst:  # a recurrence on one op: a note beside the node (offset in points)
            ax.annotate(f"\u21ba d={e.distance}", (x0, y0), xytext=(4 * len(e.src) + 9, 0),
                        textcoords="offset points", fontsize=7, color=color, va="center")
            continue
        if e.distance:
            style = dict(connectionstyle="arc3,rad=-0.6", linestyle="--")
            a, b = (x0, y0), (x1, y1)
            color = "#7b3fa0"  # loop-carried: its own color, so it stands apart from a forward edge
        else:
            style = dict(connectionstyle="arc3,rad=0.0", linestyle="-")
            a, b = (x0, y0), (x1, y1)
        ax.add_patch(FancyArrowPatch(a, b, arrowstyle="-|>", mutation_scale=9, color=color, linewidth=0.9,
                                     shrinkA=11, shrinkB=11, **style))
        if e.distance:
            ax.annotate(f"d={e.distance}", ((a[0] + b[0]) / 2, (a[1] + b[1]) / 2), xytext=(14, 0),
                        textcoords="offset points", fontsize=6, color=color, ha="left", va="center")
    for n, (x, y) in pos.items():
        w = schedule.ops[n].warp
        ax.text(x, y, n, ha="center", va="center", fontsize=7, color="white", zorder=3,
                bbox=dict(boxstyle="round,pad=0.3", facecolor=_role_color(w), edgecolor="black", linewidth=0.6))
    depth = max(layer.values(), default=0)
    ax.set_xlim(-max(width, 3) / 2 - 0.3, max(width, 3) / 2 + 1.9)  # room on the right: the legend
    ax.set_ylim(-depth - 0.6, 0.6)
    ax.set_axis_off()
    roles = schedule.warps_used()
    handles = [FancyArrowPatch((0, 0), (1, 0), color=_role_color(w)) for w in roles]
    ax.legend(handles, [role_name(w, machine) for w in roles], fontsize=6, loc="upper right",
              handlelength=1.2, frameon=False)
    ax.set_title("dependence graph (color: warp role; red: blocking; purple: loop-carried)", fontsize=9)


def _timeline(ax, schedule, graph, machine, factor, label, Rectangle, tagged):
    ii = schedule.ii
    copies = max(1, ceil(schedule.length / ii))       # iterations in flight in the steady state
    n_iter = min(MAX_ITERATIONS, copies + 2)         # a prologue, >= 1 steady-state body, an epilogue
    roles = schedule.warps_used()
    span = (n_iter - 1) * ii + schedule.length
    bars = {w: [] for w in roles}                    # role -> [(start, end, op, k)]
    for k in range(n_iter):
        for name in schedule.in_order():
            p = schedule.ops[name]
            c = max(1, schedule.cycles.get(name, graph.op(name).cycles))  # zero-time ops: a sliver
            bars[p.warp].append((p.time + k * ii, p.time + k * ii + c, name, k))
    pro_end = (copies - 1) * ii
    steady_end = n_iter * ii if n_iter >= copies else pro_end
    for (a, b), color, text in (((0, pro_end), "#dddddd", "prologue"), ((pro_end, steady_end), "#cfe8cf", "steady state"),
                                ((steady_end, span), "#f3dcdc", "epilogue")):
        if b > a:
            ax.axvspan(a * factor, b * factor, color=color, alpha=0.5, zorder=0)
            ax.text((a + b) / 2 * factor, 0.995, text, transform=ax.get_xaxis_transform(), ha="center",
                    va="top", fontsize=7, style="italic", zorder=4)
    y, yticks = 0.0, []
    ax.set_ylim(0, len(roles) + 0.18)  # headroom for the part names
    for w in reversed(roles):
        lane, count = _lanes([(a, b) for a, b, _, _ in bars[w]])
        h = 1.0 / count
        for (a, b, name, k), j in zip(bars[w], lane):
            ax.add_patch(Rectangle((a * factor, y + j * h + 0.06 * h), (b - a) * factor, 0.88 * h,
                                   facecolor=_ITER_COLORS[k % len(_ITER_COLORS)], edgecolor="black",
                                   linewidth=0.5, zorder=2))
            _label(ax, a * factor, y + (j + 0.5) * h, (b - a) * factor, span * factor, [f"{name}@{k}", name],
                   160, _tag(graph, name), tagged, color="white", zorder=3)
        yticks.append((y + 0.5, role_name(w, machine)))
        y += 1.0
        ax.axhline(y, color="black", linewidth=0.4)
    ax.set_xlim(0, span * factor)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_yticks([p for p, _ in yticks], [t for _, t in yticks], fontsize=7)
    ax.set_xlabel(label)
    more = "" if n_iter >= copies + 2 else f", first {n_iter} drawn"
    ax.set_title(f"pipelined timeline: {n_iter} iterations, one every {_ii_text(ii, factor)}{more} "
                 "(bar: op@iteration, color: iteration)", fontsize=9)


def plot_schedule(schedule, graph, machine, path, *, cycles_per_unit=None, title: str | None = None,
                  ring=None) -> Path:
    """Write the picture of ``schedule`` (module docstring) to ``path`` (.png, .svg, .pdf); return the path.

    ``cycles_per_unit``: machine cycles per model time unit when the caller
    knows it (``PipelinePlan.quantum``); otherwise taken from the schedule
    (see ``time_axis``).  ``ring``: a ``plot_ws.Ring`` to draw the warp
    specialization panel.  Raises PlotUnavailableError without matplotlib and
    InputError when the file cannot be written.
    """
    Figure, Rectangle, FancyArrowPatch = _matplotlib()
    missing = [n for n in graph.names if n not in schedule.ops]
    if missing:
        raise InputError(f"schedule of graph '{schedule.graph}' does not place op(s) {missing} of graph "
                         f"'{graph.name}': plot the schedule with the graph it was solved on")
    if cycles_per_unit is None and getattr(graph, "cycles_per_unit", 1) != 1:  # the graph's own time unit
        cycles_per_unit = unit_scale(schedule, graph)
    factor, label = time_axis(schedule, cycles_per_unit)
    roles = schedule.warps_used()
    n_ops = len(graph.names)
    height = 4.2 + 0.45 * len(roles) + 0.12 * max(0, n_ops - 8)
    ws = ring_timeline(schedule, graph, ring) if ring is not None else None
    ws_rows = 1 + ring.depth + len(ws.groups) if ws is not None else 0
    fig = Figure(figsize=(13, height + 0.3 * ws_rows), dpi=110, layout="constrained")
    grid = fig.add_gridspec(2 if ws is None else 3, 2, height_ratios=[1.15, 1.0] + ([] if ws is None else [0.16 * ws_rows]),
                            width_ratios=[1.25, 1.0])
    tagged: set = set()  # (number, op) of bars too narrow for the op's name
    _mrt(fig.add_subplot(grid[0, 0]), schedule, graph, machine, factor, Rectangle, tagged)
    fig.axes[0].set_xlabel(label.replace("time", "slot (time mod ii)", 1), fontsize=8)
    _graph(fig.add_subplot(grid[0, 1]), schedule, graph, machine, FancyArrowPatch)
    _timeline(fig.add_subplot(grid[1, :]), schedule, graph, machine, factor, label, Rectangle, tagged)
    if ws is not None:
        draw_ring(fig.add_subplot(grid[2, :]), ws, ring, factor, label, Rectangle)
    if tagged:  # the key of the numbered bars
        key = ", ".join(f"{t} = {n}" for t, n in sorted(tagged, key=lambda tn: int(tn[0])))
        fig.supxlabel(f"bars too narrow for a name carry the op's number: {key}", fontsize=7)
    verdict = "optimal ii" if schedule.ii_optimal else "ii not proven optimal"
    fig.suptitle(title or f"{schedule.graph} on {schedule.machine}: ii = {schedule.ii}, length = "
                 f"{schedule.length}, {schedule.num_stages} stage(s), {len(roles)} warp role(s) ({verdict})",
                 fontsize=11)
    out = Path(path)
    try:
        fig.savefig(out)
    except OSError as e:
        raise InputError(f"cannot write the picture {out}: {e.strerror or e}") from None
    except ValueError as e:  # an extension matplotlib has no writer for
        raise InputError(f"cannot write the picture {out}: {e}; use .png, .svg or .pdf") from None
    return out


def plot_ws_plan(plan, ws, path):
    """``plan.plot(path)`` of a warp-specialized plan: the joint schedule and the ring panel."""
    from .plot_ws import Ring
    lag = ws.facts.release_lag if ws.facts is not None else 0
    ring = Ring(producers=tuple(ws.roles["producer warp"]), depth=ws.ring_depth, release_lag=lag,
                order=tuple(ws.consumer_order) if ws.consumer_order else None)
    groups = f"{len(ws.consumer_order)} ordered consumer groups" if ws.consumer_order else "one consumer group"
    return plot_schedule(ws.schedule, ws.solved_graph, ws.solved_machine, path, cycles_per_unit=plan.quantum,
                         ring=ring, title=f"auto_pipeline: loop '{plan.loop}' for {plan.arch}, warp-specialized "
                         f"(machine {ws.solved_machine.name}): II = {ws.ii_ws_cycles} cycles (one role: "
                         f"{ws.ii_swp_cycles}), a producer warp, a ring of {ws.ring_depth} slots, {groups}")
