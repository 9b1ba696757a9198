"""bench/fa3_gap.py: the wgmma attention's compiled schedules against the same split graph with FA3's freedoms.

Checked: the kernel compiles to the look-ahead turn, which beats the turn across the back edge, which beats
one group; the free graph's edges are a subset of the turn across the back edge's split graph, so its ii is
no larger; the table is recorded only where asked.
"""
import importlib.util
import pathlib

import pytest

pytest.importorskip("tvm")
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("fa3_gap", ROOT / "bench" / "fa3_gap.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fa3_gap_orders_the_schedules_and_records_only_where_asked(tmp_path, monkeypatch):
    bench = _bench()
    rows = {r["schedule"]: r for r in bench.rows_for(128, 32, time_limit=20)}
    assert list(rows) == list(bench.KINDS)
    one, wrapped, ahead, free = (rows[k] for k in (bench.KINDS[0], bench.KINDS[1], bench.KINDS[2], bench.KINDS[4]))
    assert [r["schedule"] for r in rows.values() if r["compiled"]] == [bench.KINDS[2]]   # the look-ahead turn
    assert ahead["ii_cycles"] < wrapped["ii_cycles"] < one["ii_cycles"]
    assert ahead["tc_busy"] > wrapped["tc_busy"] > one["tc_busy"]
    assert free["ii_cycles"] <= wrapped["ii_cycles"] and free["tc_busy"] >= wrapped["tc_busy"]
    assert all(0 < r["tc_busy"] <= 1 for r in rows.values())
    text = bench.table(list(rows.values()))
    assert text.count("\n") == 1 + len(rows) and "| 128 | 32 | two groups, look-ahead turn | yes |" in text

    # the recording, without solving again: the rows above stand in for the solves
    monkeypatch.setattr(bench, "rows_for", lambda d, bn, tl: list(rows.values()))
    results = ROOT / "bench" / "results"
    before = sorted(p.name for p in results.iterdir())
    assert bench.main(["--head-dims", "128"]) == 0
    assert sorted(p.name for p in results.iterdir()) == before
    assert bench.main(["--head-dims", "128", "--out", str(tmp_path)]) == 0
    md = (tmp_path / "fa3_gap.md").read_text()
    assert "Command: `python bench/fa3_gap.py --head-dims 128 --out" in md and text in md


def test_a_tile_the_kernel_cannot_take_is_one_line_and_exit_2(capsys):
    assert _bench().main(["--head-dims", "64", "--block-n", "7"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("fa3_gap: AttentionShape:") and "change block_n" in err
