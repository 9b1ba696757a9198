"""The warp-specialization panel of a plan's picture (pure Python on the model; matplotlib passed in).

A warp-specialized loop runs its global->shared copies on a producer warp
that fills a ring of ``depth`` shared-memory slots, and its other statements
on the consumer warps (one group, or ordered groups taking turns).  This
panel draws that, over a few iterations of the joint schedule:

* **producer warp**: each copy of iteration ``k`` at its scheduled time
  ``time + k*ii``, labelled with the slot it fills (``k mod depth``);
* **ring slot s**: the iterations that use slot ``s``, each from the
  producer's first copy into it (the slot acquired: lighter, hatched, while
  it fills) through the end of its last copy (the full barrier completes) to
  its release by the consumers (the empty barrier): the end of the
  consumers' work of that iteration, one ii later for a wgmma body that keeps
  its groups in flight one iteration (``release_lag``).  A reuse that would
  start before the previous release is marked: the producer waits there;
* **consumer warps** or **consumer group g (turn i)**: the consumer
  statements of each iteration, per group when the consumers take turns.

Times are the schedule's (the model's steady state); in the kernel the
producer may run ahead of them by up to ``depth`` slots.  ``ring_timeline``
computes the panel's data (``RingTimeline``); ``draw_ring`` draws it, and
every rectangle carries a label saying what it is (``Rectangle.get_label()``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from ..model.groups import group_name

__all__ = ["MAX_RING_ITERATIONS", "Ring", "RingTimeline", "SlotUse", "WsBar", "draw_ring", "ring_timeline"]

#: At most this many iterations are drawn in the panel (enough to see every slot reused when depth < 11).
MAX_RING_ITERATIONS = 12
_ITER_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


@dataclass(frozen=True)
class Ring:
    """What the picture needs of a warp specialization: the producer's ops (the ring's copies), the ring
    depth, ``release_lag`` (1: iteration k releases slot k-1), and the consumer groups' token order
    (None: one consumer group; else the ops of group g are named ``op@g``, ``model.groups``)."""

    producers: tuple[str, ...]
    depth: int
    release_lag: int = 0
    order: tuple[int, ...] | None = None


@dataclass(frozen=True)
class WsBar:
    """One op of one iteration on a lane: ``[start, end)`` in model time units."""

    start: int
    end: int
    op: str
    iteration: int


@dataclass(frozen=True)
class SlotUse:
    """Iteration ``iteration`` in its ring slot: acquired at ``acquire``, full at ``filled``, released at
    ``release``; ``waits``: the producer's acquire comes before the previous user's release."""

    iteration: int
    acquire: int
    filled: int
    release: int
    waits: bool = False


@dataclass(frozen=True)
class RingTimeline:
    """The panel's data: ``producer`` bars, ``slots[s]`` uses of slot ``s``, ``groups``: (lane label, bars)
    of each consumer group in group order, ``iterations`` drawn, ``span`` (end of the last bar)."""

    producer: tuple[WsBar, ...]
    slots: tuple[tuple[SlotUse, ...], ...]
    groups: tuple[tuple[str, tuple[WsBar, ...]], ...]
    iterations: int
    span: int

    def slot_of(self, iteration: int) -> int:
        return iteration % len(self.slots)


def _cycles(schedule, graph, name) -> int:
    return max(1, schedule.cycles.get(name, graph.op(name).cycles))  # a zero-time op: a sliver


def _group_ops(schedule, ring) -> list[tuple[str, list[str]]]:
    consumers = [n for n in schedule.in_order() if n not in ring.producers]
    if not ring.order:
        return [("consumer warps", consumers)]
    groups = []
    for g in sorted(ring.order):
        ops = [n for n in consumers if "@" in n and n == group_name(n.rsplit("@", 1)[0], g)]
        groups.append((f"consumer group {g} (turn {ring.order.index(g)})", ops))
    return groups


def ring_timeline(schedule, graph, ring: Ring, iterations: int | None = None) -> RingTimeline:
    """The producer lane, the ring slots over time and the consumer groups of ``ring`` in ``schedule``
    (solved on ``graph``), for ``iterations`` iterations (default: depth + 2, at most ``MAX_RING_ITERATIONS``)."""
    missing = [n for n in ring.producers if n not in schedule.ops]
    if missing or ring.depth < 1:
        raise InputError(f"the ring's producer ops {missing} are not in the schedule of graph '{schedule.graph}'"
                         if missing else f"a ring needs at least one slot, got depth {ring.depth}")
    ii = schedule.ii
    n = iterations if iterations is not None else min(MAX_RING_ITERATIONS, ring.depth + 2)
    producer = [WsBar(schedule.ops[p].time + k * ii, schedule.ops[p].time + k * ii + _cycles(schedule, graph, p),
                      p, k) for k in range(n) for p in schedule.in_order() if p in ring.producers]
    groups = [(label, tuple(WsBar(schedule.ops[o].time + k * ii,
                                  schedule.ops[o].time + k * ii + _cycles(schedule, graph, o), o, k)
                            for k in range(n) for o in ops)) for label, ops in _group_ops(schedule, ring)]
    first = min(schedule.ops[p].time for p in ring.producers)
    full = max(schedule.ops[p].time + _cycles(schedule, graph, p) for p in ring.producers)
    done = max((b.end for _, bars in groups for b in bars if b.iteration == 0), default=full)
    slots: list[list[SlotUse]] = [[] for _ in range(ring.depth)]
    for k in range(n):
        uses = slots[k % ring.depth]
        acquire = first + k * ii
        waits = bool(uses) and acquire < uses[-1].release
        uses.append(SlotUse(k, acquire, full + k * ii, max(done, full) + (k + ring.release_lag) * ii, waits))
    bars = [*producer, *(b for _, bs in groups for b in bs)]
    span = max([b.end for b in bars] + [u.release for us in slots for u in us])
    return RingTimeline(tuple(producer), tuple(tuple(u) for u in slots),
                        tuple((label, bs) for label, bs in groups), n, span)


def _text(ax, x, y, w, texts, span, chars=160):
    """The first of ``texts`` that fits in the bar (``chars``: characters across the whole axis), or none."""
    for text in texts:
        if text and w >= span * len(text) / chars:
            ax.text(x + w / 2, y, text, ha="center", va="center", fontsize=6, color="white", clip_on=True,
                    zorder=3)
            return


def draw_ring(ax, timeline: RingTimeline, ring: Ring, factor: float, label: str, Rectangle) -> None:
    """Draw ``timeline`` on ``ax`` (module docstring): one row per lane, top to bottom the producer warp, the
    ring slots and the consumer groups; times multiplied by ``factor`` (``label``: the axis)."""
    copies = []
    for b in timeline.producer:
        s = timeline.slot_of(b.iteration)
        copies.append((b.start, b.end, f"producer: {b.op}@{b.iteration} fills slot {s}",
                       (f"{b.op}@{b.iteration}\u2192s{s}", f"s{s}"), b.iteration, None))
    rows = [("producer warp", copies)]
    for s, uses in enumerate(timeline.slots):
        cells = []
        for u in uses:
            cells.append((u.acquire, u.filled, f"ring slot {s}: iteration {u.iteration} filling", (), u.iteration,
                          "//"))
            wait = " (producer waits)" if u.waits else ""
            cells.append((u.filled, u.release, f"ring slot {s}: iteration {u.iteration} held until its release"
                          + wait, (f"it {u.iteration}{wait}", f"{u.iteration}"), u.iteration, None))
        rows.append((f"ring slot {s}", cells))
    for name, bars in timeline.groups:
        rows.append((name, [(b.start, b.end, f"{name}: {b.op}@{b.iteration}", (f"{b.op}@{b.iteration}", b.op),
                             b.iteration, None) for b in bars]))
    span = timeline.span
    for r, (name, cells) in enumerate(reversed(rows)):
        y = float(r)
        for a, b, what, text, k, hatch in cells:
            color = _ITER_COLORS[k % len(_ITER_COLORS)]
            ax.add_patch(Rectangle((a * factor, y + 0.08), max(b - a, 0) * factor, 0.84, facecolor=color,
                                   alpha=0.45 if hatch else 1.0, hatch=hatch, edgecolor="black", linewidth=0.5,
                                   label=what, zorder=2))
            _text(ax, a * factor, y + 0.5, (b - a) * factor, text, span * factor)
        ax.axhline(y + 1.0, color="black", linewidth=0.4)
    ax.set_ylim(0, len(rows))
    ax.set_xlim(0, span * factor)
    ax.set_yticks([r + 0.5 for r in range(len(rows))], [name for name, _ in reversed(rows)], fontsize=7)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel(label)
    lag = ", one iteration later: wgmma in flight" if ring.release_lag else ""
    ax.set_title(f"warp specialization: a ring of {ring.depth} slot(s) (hatched: filling; solid: full until the "
                 f"consumers release it{lag}); {timeline.iterations} iterations as scheduled (color: iteration)",
                 fontsize=9)
