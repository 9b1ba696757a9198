"""Warp specialization in the pictures (tvm_twill.report.plot_ws, PipelinePlan.plot of a WS plan).

Asserted on the drawing's data and on the figure's artists (lane names, the label of every rectangle),
not on pixels: the producer lane, the ring slots over time (which iteration fills which slot, and when it
is released) and each consumer group, ordered groups included.
"""
from dataclasses import replace

import pytest
from small_graphs import fa_loop

from tvm_twill.report import plot
from tvm_twill.errors import InputError
from tvm_twill.model import Edge, Graph, Op, Placement, Schedule, get_machine
from tvm_twill.model.groups import group_order, split_consumers
from tvm_twill.report.plot_ws import Ring, ring_timeline

pytest.importorskip("matplotlib")


@pytest.fixture
def figures(monkeypatch):
    """Every Figure saved while the test runs (the real savefig still writes the file)."""
    from matplotlib.figure import Figure
    saved, real = [], Figure.savefig

    def savefig(self, *args, **kw):
        saved.append(self)
        return real(self, *args, **kw)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return saved


def _labels(ax):
    return [p.get_label() for p in ax.patches]


def _lanes(ax):
    """Lane names top to bottom."""
    ticks = sorted(zip(ax.get_yticks(), (t.get_text() for t in ax.get_yticklabels())), reverse=True)
    return [t for _, t in ticks]


def _tiny(ii=4, producer=(0, 2), consumer=(2, 6)):
    """A copy on a producer role and one consumer op, placed by hand (times in cycles)."""
    g = Graph("tiny", (Op("copy", producer[1], "TMA", variable_latency=True), Op("mma", consumer[1], "TC")),
              (Edge("copy", "mma", 0),), machine="h100", normalize=False)
    ops = {"copy": Placement(producer[0], producer[0] // ii, 0, 1), "mma": Placement(consumer[0], consumer[0] // ii, 1, 0)}
    s = Schedule("tiny", "h100", ii, consumer[0] + consumer[1], ops, {"copy": producer[1], "mma": consumer[1]})
    return s, g


def test_slots_are_filled_in_turn_and_released_after_the_consumers():
    s, g = _tiny()
    t = ring_timeline(s, g, Ring(producers=("copy",), depth=2))
    assert t.iterations == 4 and len(t.slots) == 2
    assert [(b.op, b.iteration, b.start, b.end) for b in t.producer] == [("copy", k, 4 * k, 4 * k + 2)
                                                                         for k in range(4)]
    assert [[u.iteration for u in uses] for uses in t.slots] == [[0, 2], [1, 3]]
    for uses in t.slots:
        for u in uses:  # acquired at the copy's start, full at its end, released when the consumer is done
            assert (u.acquire, u.filled, u.release) == (4 * u.iteration, 4 * u.iteration + 2, 4 * u.iteration + 8)
            assert not u.waits   # slot reuse 8 cycles later: the release at +8 comes just in time
    ((name, bars),) = t.groups
    assert name == "consumer warps" and [(b.op, b.start) for b in bars] == [("mma", 2 + 4 * k) for k in range(4)]


def test_a_ring_too_shallow_for_the_schedule_shows_the_producer_waiting(tmp_path, figures):
    s, g = _tiny()
    one = ring_timeline(s, g, Ring(producers=("copy",), depth=1))
    assert [u.waits for u in one.slots[0]] == [False, True, True]   # reuse at +4, release at +8
    lag = ring_timeline(s, g, Ring(producers=("copy",), depth=2, release_lag=1))
    assert [u.release for u in lag.slots[0]] == [12, 20]            # released one iteration later
    assert [u.waits for u in lag.slots[0]] == [False, True]
    plot.plot_schedule(s, g, get_machine("h100"), tmp_path / "wait.png", ring=Ring(producers=("copy",), depth=1))
    labels = _labels(figures[-1].axes[-1])
    assert "ring slot 0: iteration 0 held until its release" in labels
    assert "ring slot 0: iteration 1 held until its release (producer waits)" in labels


def test_bad_rings_are_refused():
    s, g = _tiny()
    with pytest.raises(InputError, match=r"producer ops \['load'\] are not in the schedule"):
        ring_timeline(s, g, Ring(producers=("load",), depth=2))
    with pytest.raises(InputError, match="at least one slot"):
        ring_timeline(s, g, Ring(producers=("copy",), depth=0))


def test_ordered_consumer_groups_each_get_a_lane(tmp_path, figures):
    """The FA-style loop split over two consumer groups (model.groups): the figure names the producer lane,
    both ring slots and each group with its turn; every bar of a group is one of its own ops."""
    from tvm_twill.solvers import SolveOptions, prepare, solve
    producers = ("load_K", "load_V")
    split = split_consumers(fa_loop(), set(producers), 2)
    machine = replace(get_machine("h100"), warp_groups=3)
    sched = solve(split, machine, options=SolveOptions(time_limit=60))
    order = group_order(sched, split, set(producers), 2)
    assert order is not None
    ring = Ring(producers=producers, depth=2, order=order)
    t = ring_timeline(sched, split, ring)
    assert [name for name, _ in t.groups] == [f"consumer group {g} (turn {order.index(g)})" for g in (0, 1)]
    for g, (_, bars) in enumerate(t.groups):
        assert {b.op for b in bars} == {f"{op}@{g}" for op in ("S", "P", "O")}
    for uses in t.slots:  # every consumer of every group has finished with the slot when it is released
        for u in uses:
            ends = [b.end for _, bars in t.groups for b in bars if b.iteration == u.iteration]
            assert u.release >= max(ends) and u.acquire <= u.filled <= u.release
    prepared = prepare(split, machine, SolveOptions(time_limit=60))
    out = plot.plot_schedule(sched, prepared.graph, prepared.machine, tmp_path / "groups.png", ring=ring)
    assert out.stat().st_size > 10_000
    ax = figures[-1].axes[-1]
    assert _lanes(ax) == ["producer warp", "ring slot 0", "ring slot 1",
                          f"consumer group 0 (turn {order.index(0)})", f"consumer group 1 (turn {order.index(1)})"]
    labels = _labels(ax)
    for k in range(t.iterations):
        for p in producers:
            assert f"producer: {p}@{k} fills slot {k % 2}" in labels
        assert f"ring slot {k % 2}: iteration {k} held until its release" in labels
        for g in (0, 1):
            assert f"consumer group {g} (turn {order.index(g)}): O@{g}@{k}" in labels
    assert "a ring of 2 slot(s)" in ax.get_title()


def test_a_plain_schedule_has_no_ring_panel(tmp_path, figures):
    s, g = _tiny()
    plot.plot_schedule(s, g, get_machine("h100"), tmp_path / "plain.png")
    assert len(figures[-1].axes) == 3 and not any("ring slot" in t for t in _lanes(figures[-1].axes[-1]))


# ------------------------------------------------------------------ a real warp-specialized plan (TVM)

@pytest.fixture(scope="module")
def ws_plan():
    pytest.importorskip("tvm")
    import tvm_twill
    from tvm_twill.workloads import tensorcore_gemm
    sch, k0, k1 = tensorcore_gemm(1024)
    plan = tvm_twill.auto_pipeline(sch, [k0, k1], "sm_80", warp_specialize=True, quiet=True)
    assert plan.applied and plan.warp_specialization.chosen
    return plan


def test_a_ws_plans_picture_has_the_producer_the_ring_and_the_consumers(ws_plan, tmp_path, figures):
    ws = ws_plan.warp_specialization
    out = ws_plan.plot(tmp_path / "ws.png")
    assert out.stat().st_size > 10_000
    fig = figures[-1]
    assert len(fig.axes) == 4 and "warp-specialized" in fig._suptitle.get_text()
    ax = fig.axes[-1]
    depth = ws.ring_depth
    assert _lanes(ax) == ["producer warp", *(f"ring slot {s}" for s in range(depth)), "consumer warps"]
    labels = _labels(ax)
    copies = ws.roles["producer warp"]
    for k in range(depth + 2):
        for c in copies:
            assert f"producer: {c}@{k} fills slot {k % depth}" in labels
        assert f"ring slot {k % depth}: iteration {k} filling" in labels
        for c in ws.roles["consumer warps"]:
            assert f"consumer warps: {c}@{k}" in labels
    # the panels above draw the joint schedule the kernel runs: the producer's role is in the timeline
    producer_role = ws.schedule.ops[copies[0]].warp
    assert producer_role != ws.schedule.ops[ws.roles["consumer warps"][0]].warp
    assert len(_lanes(fig.axes[2])) == len(ws.schedule.warps_used()) == 2


def test_a_ws_plans_explain_points_to_tvm_twill_build(ws_plan):
    text = ws_plan.explain()
    assert "tvm_twill.build(mod, target, plan)" in text.split("warp specialization:")[-1]
    assert "compile with tvm.compile(" not in text
