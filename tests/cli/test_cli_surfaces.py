"""The CLI's pictures, normalization warning / --strict-normalization, and documented positionals."""
import json

import pytest

from tvm_twill.cli import build_parser, main

DISTORTED = {  # 1 and 1000 cycles: no integer scale up to U = 300 keeps the ratio within 10%
    "format": "tvm-twill-graph/1", "name": "distorted", "machine": "h100",
    "ops": [{"name": "A", "unit": "TC", "cycles": 1}, {"name": "B", "unit": "SFU", "cycles": 1000},
            {"name": "C", "unit": "TC", "cycles": 7}],
    "edges": [{"src": "A", "dst": "B", "delay": 1}, {"src": "B", "dst": "C", "delay": 1000}],
}


def write(tmp_path, doc):
    path = tmp_path / f"{doc['name']}.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_example_plot_writes_a_picture(tmp_path, capsys):
    mpimg = pytest.importorskip("matplotlib.image")
    out = tmp_path / "fig1.png"
    assert main(["example", "fa_fwd_fig1", "--plot", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    img = mpimg.imread(out)
    assert img.shape[1] > 1000 and img[..., :3].std() > 0.05


def test_solve_plot_writes_a_picture(tmp_path, capsys):
    mpimg = pytest.importorskip("matplotlib.image")
    from tvm_twill.data import example_path
    out = tmp_path / "bwd.png"
    assert main(["solve", str(example_path("fa_bwd_hopper")), "--plot", str(out)]) == 0
    img = mpimg.imread(out)
    assert img.shape[0] > 400 and img[..., :3].std() > 0.05


def test_plot_to_an_unwritable_place_is_exit_2(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    code = main(["example", "fa_fwd_fig1", "--plot", str(tmp_path / "no" / "dir" / "x.png")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("tvm-twill: error: cannot write the picture") and err.count("\n") == 1


def test_distorting_normalization_warns_on_stderr(tmp_path, capsys):
    assert main(["solve", write(tmp_path, DISTORTED), "--time-limit", "60"]) == 0
    captured = capsys.readouterr()
    warnings = [ln for ln in captured.err.splitlines() if ln.startswith("tvm-twill: warning: ")]
    assert len(warnings) == 1 and "distorts the ratio of some op costs" in warnings[0]
    assert "--no-normalize" in warnings[0]
    assert "warning" not in captured.out


def test_strict_normalization_refuses_with_exit_2(tmp_path, capsys):
    code = main(["solve", write(tmp_path, DISTORTED), "--strict-normalization"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("tvm-twill: error: --strict-normalization: cost normalization")
    assert err.count("\n") == 1


def test_exact_normalization_is_silent(capsys):
    assert main(["example", "fa_fwd_hopper_raw", "--strict-normalization"]) == 0
    captured = capsys.readouterr()
    assert "warning" not in captured.err
    out = captured.out
    assert "1 unit = 128 machine cycles" in out and "time (cycles)" in out  # normalized units with their scale
    assert "warp group 0 (warps 0-3)" in out


@pytest.mark.parametrize("command, positionals", [("solve", ["GRAPH.json"]), ("example", ["NAME"]),
                                                  ("check", ["GRAPH.json", "SCHEDULE.json"])])
def test_positionals_are_documented_in_help(command, positionals):
    sub = next(a for a in build_parser()._subparsers._group_actions if a.choices).choices[command]
    text = sub.format_help()
    for action in sub._positionals._group_actions:
        assert action.help, f"{command} {action.metavar} has no help"
    for p in positionals:
        assert p in text
