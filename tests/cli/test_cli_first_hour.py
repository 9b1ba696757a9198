"""The small things a new user trips over: the CLI keeps --json when stdout closes, refuses --plot without
matplotlib before solving, TVM target tags are targets, and the README's Python snippet runs from any
directory."""
import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

import quickstart_env

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "tvm_twill.cli"]


def test_json_is_written_before_a_closed_stdout_ends_the_run(tmp_path):
    out, pic = tmp_path / "s.json", tmp_path / "p.png"
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", MPLBACKEND="Agg")
    proc = subprocess.Popen([*CLI, "example", "fa_fwd_fig1", "--json", str(out), "--plot", str(pic), "--quiet"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first line (as `| head` after its lines)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=600) == 141, err
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["format"] == "tvm-twill-schedule/1" and doc["ii"] == 2


def test_plot_without_matplotlib_is_refused_before_the_solve(tmp_path):
    out = tmp_path / "s.json"
    env = quickstart_env.env(tmp_path / "site", blocked=("matplotlib",))
    r = subprocess.run([*CLI, "example", "fa_fwd_fig1", "--json", str(out), "--plot", str(tmp_path / "p.png")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 2 and r.stdout == "" and not out.exists()
    assert r.stderr == ("tvm-twill: error: plotting needs matplotlib, which is not installed: pip install "
                        "'tvm-twill[plot]' (or pip install matplotlib)\n")


def test_a_tvm_target_tag_is_a_target():
    pytest.importorskip("tvm")
    import tvm
    from tir_loops import short_loop

    import tvm_twill
    from tvm_twill.errors import UnsupportedTargetError
    plan = tvm_twill.auto_pipeline(tvm.s_tir.Schedule(short_loop), "i", "nvidia/nvidia-a100", apply=False)
    assert plan.arch == "sm_80" and plan.machine.name.startswith("a100")
    with pytest.raises(UnsupportedTargetError, match=r"^unknown TVM target tag 'nvidia/no-such-gpu': pass a tag"):
        tvm_twill.auto_pipeline(tvm.s_tir.Schedule(short_loop), "i", "nvidia/no-such-gpu")


def test_the_readme_python_snippet_runs_outside_the_repository(tmp_path, monkeypatch):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "load_graph(" in b)
    solver_part = block[:block.index("# On a TVM s_tir schedule")]
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    exec(compile(solver_part, "README.md", "exec"), ns)
    assert ns["schedule"].ii == 2 and ns["schedule"].optimal


def test_the_cli_on_a_graph_never_imports_tvm(tmp_path):
    """``solve`` / ``example`` / ``check`` / ``machines`` on a graph: TVM (30-100 s to import) is never loaded,
    not even with --plot (every command in one process, then its sys.modules)."""
    graph, sched, pic = tmp_path / "g.json", tmp_path / "s.json", tmp_path / "p.png"
    from tvm_twill.data import example_path
    graph.write_text(pathlib.Path(example_path("fa_fwd_fig1")).read_text(encoding="utf-8"), encoding="utf-8")
    plot = ["--plot", str(pic)] if importlib.util.find_spec("matplotlib") else []
    runs = [["example", "fa_fwd_fig1", "--quiet"], ["solve", str(graph), "--json", str(sched), "--quiet", *plot],
            ["check", str(graph), str(sched)], ["machines"], ["example"]]
    code = ("import contextlib, io, sys\nfrom tvm_twill.cli import main\n"
            f"for argv in {runs!r}:\n"
            "    with contextlib.redirect_stdout(io.StringIO()):\n"
            "        rc = main(argv)\n"
            "    assert rc in (0, None), (argv, rc)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tvm', 'tvm_ffi')))\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[]", r.stdout[-2000:]
    assert sched.exists() and (pic.exists() or not plot)
