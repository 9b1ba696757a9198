"""Pictures of schedules (tvm_twill.report.plot): every file written is opened and looked at.

A picture passes when matplotlib's own reader opens it, it has the expected
size, and it is not blank: it holds many distinct colors and each of its
three panels (the reservation table, the graph, the timeline) has ink.
"""
import builtins
import sys

import pytest

from tvm_twill.data import load_example
from tvm_twill.errors import InputError, PlotUnavailableError
from tvm_twill.model import Edge, Graph, Op, Placement, Schedule, get_machine
from tvm_twill.solvers import SolveOptions, prepare, solve_prepared

mpimg = pytest.importorskip("matplotlib.image")
np = pytest.importorskip("numpy")

from tvm_twill.report import plot  # noqa: E402  (after the importorskip: the module itself needs no matplotlib)


def solved(name, **graph_changes):
    graph = load_example(name)
    if graph_changes:
        graph = graph.replace(**graph_changes)
    opts = SolveOptions(time_limit=120)
    prepared = prepare(graph, None, opts)
    return solve_prepared(prepared, opts), prepared.graph, prepared.machine


def assert_picture(path, min_colors=6):
    """The file is a real, non-blank picture with ink in every panel."""
    assert path.stat().st_size > 10_000
    img = mpimg.imread(path)
    h, w = img.shape[:2]
    assert w >= 1000 and h >= 400, f"unexpected size {w}x{h}"
    rgb = (img[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    colors = np.unique(rgb, axis=0)
    assert len(colors) >= min_colors, f"only {len(colors)} colors: the picture is (nearly) blank"
    # not blank: a sizeable share of the pixels is not background white
    ink = (rgb < 235).any(axis=1).reshape(h, w)
    assert ink.mean() > 0.05
    top, bottom = ink[: h // 2], ink[h // 2:]
    left, right = top[:, : w // 2], top[:, w // 2:]
    for part, what in ((left, "reservation table"), (right, "dependence graph"), (bottom, "timeline")):
        assert part.mean() > 0.005, f"the {what} panel is empty"
    return img


@pytest.mark.parametrize("name", ["fa_fwd_fig1", "fa_fwd_hopper", "fa_bwd_hopper"])
def test_paper_graphs_draw(tmp_path, name):
    schedule, graph, machine = solved(name)
    out = plot.plot_schedule(schedule, graph, machine, tmp_path / f"{name}.png")
    assert out == tmp_path / f"{name}.png"
    assert_picture(out)


def test_svg_and_pdf_are_written(tmp_path):
    schedule, graph, machine = solved("fa_fwd_fig1")
    for ext, magic in ((".svg", b"<svg"), (".pdf", b"%PDF")):
        out = plot.plot_schedule(schedule, graph, machine, tmp_path / f"fig1{ext}")
        data = out.read_bytes()
        assert magic in data[:400] and len(data) > 5_000


def test_time_axis_follows_the_normalization():
    norm, _, _ = solved("fa_fwd_hopper_raw")
    assert plot.time_axis(norm) == (128.0, "time (machine cycles; 1 unit = 128 cycles)")
    raw, _, _ = solved("fa_fwd_fig1")
    assert raw.normalization is None and plot.time_axis(raw) == (1.0, "time (cycles)")
    assert plot.time_axis(raw, cycles_per_unit=16)[0] == 16.0
    mixed = Schedule(graph="g", machine="h100", ii=1, length=1, ops={}, cycles={},
                     normalization={"mapping": {"100": 1, "300": 2}, "max_ratio_error": 0.33})
    factor, label = plot.time_axis(mixed)
    assert factor == 1.0 and "normalized time units" in label and "cycles)" not in label


def test_huge_magnitudes_draw_a_bounded_picture(tmp_path, monkeypatch):
    """ii in the thousands: the drawing primitives depend on the graph, not on the cycle counts."""
    calls = []
    Figure = plot._matplotlib()[0]
    real = Figure.savefig

    def counting(self, *a, **kw):
        calls.append(sum(len(ax.patches) + len(ax.texts) + len(ax.lines) for ax in self.axes))
        return real(self, *a, **kw)
    monkeypatch.setattr(Figure, "savefig", counting)
    big, g_big, m = solved("fa_fwd_hopper_raw", normalize=False)
    small, g_small, _ = solved("fa_fwd_hopper_raw")
    assert big.ii >= 1000
    assert_picture(plot.plot_schedule(big, g_big, m, tmp_path / "raw.png"))
    plot.plot_schedule(small, g_small, m, tmp_path / "normalized.png")
    assert calls[0] == calls[1] < 400


def test_many_stages_cap_the_drawn_iterations(tmp_path):
    """A chain of ops longer than ii: many overlapped copies, at most MAX_ITERATIONS drawn."""
    n = 14
    ops = [Op(f"op{i}", cycles=1, unit="ALU") for i in range(n)]
    edges = [Edge(f"op{i}", f"op{i + 1}", delay=1) for i in range(n - 1)]
    graph = Graph("chain", ops, edges, machine="h100", normalize=False)
    sched = Schedule(graph="chain", machine="h100", ii=n, length=(n - 1) * (n + 1) + 1,
                     ops={f"op{i}": Placement(time=i * (n + 1), stage=i * (n + 1) // n, order=i, warp=0)
                          for i in range(n)},
                     cycles={f"op{i}": 1 for i in range(n)})
    out = plot.plot_schedule(sched, graph, get_machine("h100"), tmp_path / "chain.png")
    assert_picture(out, min_colors=4)


def test_a_schedule_of_another_graph_is_refused(tmp_path):
    schedule, _, machine = solved("fa_fwd_fig1")
    other = load_example("fa_fwd_hopper")
    with pytest.raises(InputError, match="plot the schedule with the graph it was solved on"):
        plot.plot_schedule(schedule, other, machine, tmp_path / "x.png")


def test_unwritable_path_is_a_typed_error(tmp_path):
    schedule, graph, machine = solved("fa_fwd_fig1")
    with pytest.raises(InputError, match="cannot write the picture"):
        plot.plot_schedule(schedule, graph, machine, tmp_path / "no" / "such" / "dir" / "x.png")
    with pytest.raises(InputError, match="use .png, .svg or .pdf"):
        plot.plot_schedule(schedule, graph, machine, tmp_path / "x.nosuchformat")


def test_missing_matplotlib_is_a_one_line_fix(monkeypatch, tmp_path):
    real_import = builtins.__import__

    def no_matplotlib(name, *a, **kw):
        if name.split(".")[0] == "matplotlib":
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *a, **kw)
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    for mod in [m for m in sys.modules if m.split(".")[0] == "matplotlib"]:
        monkeypatch.delitem(sys.modules, mod)
    schedule, graph, machine = solved("fa_fwd_fig1")
    with pytest.raises(PlotUnavailableError) as info:
        plot.plot_schedule(schedule, graph, machine, tmp_path / "x.png")
    msg = str(info.value)
    assert "\n" not in msg and "pip install" in msg and "matplotlib" in msg
    assert isinstance(info.value, ImportError) and info.value.exit_code == 2
    assert not (tmp_path / "x.png").exists()


def test_bars_too_narrow_for_a_name_carry_a_number_and_a_key(tmp_path, monkeypatch):
    """Short copies next to a long compute op: their bars are numbered and the key names them."""
    ops = [Op("load_A_tile", cycles=1, unit="TMA"), Op("load_B_tile", cycles=1, unit="TMA"),
           Op("mma", cycles=40, unit="TC")]
    edges = [Edge("load_A_tile", "mma", delay=1), Edge("load_B_tile", "mma", delay=1),
             Edge("mma", "mma", delay=40, distance=1)]
    graph = Graph("narrow", ops, edges, machine="h100", normalize=False)
    sched = Schedule(graph="narrow", machine="h100", ii=40, length=42,
                     ops={"load_A_tile": Placement(time=0, stage=0, order=0, warp=0),
                          "load_B_tile": Placement(time=1, stage=0, order=1, warp=0),
                          "mma": Placement(time=2, stage=0, order=2, warp=0)},
                     cycles={"load_A_tile": 1, "load_B_tile": 1, "mma": 40})
    keys = []
    Figure = plot._matplotlib()[0]
    real = Figure.supxlabel

    def recording(self, text, **kw):
        keys.append(text)
        return real(self, text, **kw)
    monkeypatch.setattr(Figure, "supxlabel", recording)
    assert_picture(plot.plot_schedule(sched, graph, get_machine("h100"), tmp_path / "narrow.png"), min_colors=4)
    assert keys == ["bars too narrow for a name carry the op's number: 0 = load_A_tile, 1 = load_B_tile"]
