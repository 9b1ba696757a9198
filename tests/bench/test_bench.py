"""The benchmarks leave the tree clean unless asked to record their tables (--save / --out)."""
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
GRAPH = "tvm_twill/data/graphs/fa_fwd_fig1.json"


def run_bench(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "bench/solver.py", "--graphs", GRAPH, "--skip-paper", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def snapshot():
    folder = ROOT / "bench" / "results"
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in folder.iterdir()} if folder.exists() else {}


def test_plain_run_writes_nothing():
    before = snapshot()
    r = run_bench()
    assert r.returncode == 0, r.stderr
    assert "fa_fwd_fig1 | h100 | 3 | 2 | 4" in r.stdout
    assert "not saved (pass --save" in r.stdout
    assert snapshot() == before


def test_out_records_the_table(tmp_path):
    r = run_bench("--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "solver.json").stat().st_size > 0
    assert "fa_fwd_fig1" in (tmp_path / "solver.md").read_text()


def test_metaschedule_postproc_bench_records_only_where_asked(tmp_path):
    pytest.importorskip("tvm")
    pytest.importorskip("psutil")  # MetaSchedule's TuneContext needs it
    before = snapshot()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "bench/metaschedule_postproc.py", "--archs", "sm_80", "--candidates", "2",
                        "--out", str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "| sm_80 | 2 | " in r.stdout and "same plans" in r.stdout
    md = (tmp_path / "metaschedule_postproc.md").read_text()
    assert "cached ms (mean / median / max)" in md and "| sm_80 | 2 | " in md
    assert (tmp_path / "metaschedule_postproc.json").stat().st_size > 0
    assert snapshot() == before
