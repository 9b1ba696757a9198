"""Progress lines of ``auto_pipeline``: a line as each step begins and ends once a plan has run
``plan_progress.AFTER`` seconds (set to 0 here, so every plan counts as slow: nothing is timed), none with
``quiet=True``; a step still running when the plan reaches AFTER is announced by a timer."""
import re

import pytest

pytest.importorskip("tvm")
import tvm  # noqa: E402

import tir_gen  # noqa: E402
import tvm_twill  # noqa: E402
from tvm_twill.planner import plan_progress  # noqa: E402

LOOP = tir_gen.build_copy_loop(tir_gen.CopyLoopSpec(trip=8, widths=(16, 256)))


def plan(**kw):
    return tvm_twill.auto_pipeline(tvm.s_tir.Schedule(tvm.script.from_source(LOOP)), "i", "sm_80", **kw)


def test_a_slow_plan_reports_its_steps_on_stderr(monkeypatch, capsys):
    monkeypatch.setattr(plan_progress, "AFTER", 0.0)
    p = plan()
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and len(lines) == 6 and all(ln.startswith("tvm_twill: loop 'i': ") for ln in lines)
    assert "extracting the loop's statements" in lines[0] and "extracted 3 statements" in lines[1]
    assert "solving the 3-statement loop (time limit 10s)" in lines[2]
    assert re.search(r"solved: ii \d+ cycles \(optimal\) \(\d+\.\ds\)$", lines[3])
    assert "fitting the stages" in lines[4]
    assert f"stages fitted: {p.annotation.num_stages} stage(s), ii {p.ii_cycles} cycles" in lines[5]


def test_quiet_silences_them(monkeypatch, capsys):
    monkeypatch.setattr(plan_progress, "AFTER", 0.0)
    plan(quiet=True)
    assert capsys.readouterr().err == ""


def test_a_long_step_is_announced_while_it_runs(monkeypatch):
    """The timer: a step that begins before AFTER and still runs at AFTER gets its line then (no clock is read
    by the test: the step waits until the line is there)."""
    import io
    import threading
    stream = io.StringIO()
    said = threading.Event()
    progress = plan_progress.PlanProgress("k", stream=stream)
    monkeypatch.setattr(plan_progress, "AFTER", 0.05)
    original = progress._say
    monkeypatch.setattr(progress, "_say", lambda what: (original(what), said.set()))
    progress.begin("a long step")
    assert said.wait(timeout=60)
    progress.step("the long step ended")
    progress.close()
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("tvm_twill: loop 'k': a long step (") and "the long step ended" in lines[1]
