"""Progress lines of ``auto_pipeline``: one per step of a plan over ``plan_progress.AFTER`` seconds (set to 0
here, so every plan counts as slow: nothing is timed), none with ``quiet=True``."""
import re

import pytest

pytest.importorskip("tvm")
import tvm  # noqa: E402

import tir_gen  # noqa: E402
import tvm_twill  # noqa: E402
from tvm_twill import plan_progress  # noqa: E402

LOOP = tir_gen.build_copy_loop(tir_gen.CopyLoopSpec(trip=8, widths=(16, 256)))


def plan(**kw):
    return tvm_twill.auto_pipeline(tvm.s_tir.Schedule(tvm.script.from_source(LOOP)), "i", "sm_80", **kw)


def test_a_slow_plan_reports_its_steps_on_stderr(monkeypatch, capsys):
    monkeypatch.setattr(plan_progress, "AFTER", 0.0)
    p = plan()
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and len(lines) == 3 and all(ln.startswith("tvm_twill: loop 'i': ") for ln in lines)
    assert "extracted 3 statements" in lines[0]
    assert re.search(r"solved: ii \d+ cycles \(optimal\) \(\d+\.\ds\)$", lines[1])
    assert f"stages fitted: {p.annotation.num_stages} stage(s), ii {p.ii_cycles} cycles" in lines[2]


def test_quiet_silences_them(monkeypatch, capsys):
    monkeypatch.setattr(plan_progress, "AFTER", 0.0)
    plan(quiet=True)
    assert capsys.readouterr().err == ""
