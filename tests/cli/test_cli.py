"""The tvm-twill command line: exit statuses, one-line errors, JSON round trip."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tvm_twill import cli
from tvm_twill.data import example_path
from tvm_twill.model import check, load_graph, schedule_from_dict
from tvm_twill.solvers import prepare

REPO = Path(__file__).resolve().parents[2]


def graph_doc(ops=None, edges=None, **top):
    doc = {"format": "tvm-twill-graph/1", "name": "g", "machine": "h100", "normalize": False,
           "ops": ops if ops is not None else [{"name": "A", "unit": "TC", "cycles": 1},
                                               {"name": "B", "unit": "SFU", "cycles": 1}],
           "edges": edges if edges is not None else [{"src": "A", "dst": "B"}]}
    doc.update(top)
    return doc


def write(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def run(argv, capsys):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(err, match):
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("tvm-twill: error: ")
    assert "Traceback" not in err
    assert re.search(match, lines[0]), lines[0]


MALFORMED_GRAPHS = {
    "duplicate names": (graph_doc(ops=[{"name": "A", "cycles": 1}, {"name": "A", "cycles": 2}], edges=[]),
                        r"duplicate op name 'A'"),
    "dangling edge": (graph_doc(edges=[{"src": "A", "dst": "Z"}]), r"edge A->Z names unknown op 'Z'"),
    "negative delay": (graph_doc(edges=[{"src": "A", "dst": "B", "delay": -1}]),
                       r"edge A->B delay must be >= 0, got -1"),
    "unknown unit": (graph_doc(ops=[{"name": "A", "unit": "NPU", "cycles": 1}], edges=[]),
                     r"op 'A' uses unit 'NPU', which machine 'h100' does not have"),
    "unknown machine": (graph_doc(machine="z900"), r"unknown machine 'z900'"),
    "zero-distance cycle": (graph_doc(edges=[{"src": "A", "dst": "B"}, {"src": "B", "dst": "A"}]),
                            r"zero-distance dependence cycle A -> B -> A"),
    "wrong format version": (graph_doc(format="tvm-twill-graph/2"),
                             r'format is "tvm-twill-graph/2", expected "tvm-twill-graph/1"'),
    "non-integer cycles": (graph_doc(ops=[{"name": "A", "cycles": 1.5}], edges=[]),
                           r"op 'A' cycles must be an integer, got 1.5"),
    "truncated JSON": (json.dumps(graph_doc())[:40], r"not valid JSON .*is the file truncated\?"),
    "unknown field": (graph_doc(ops=[{"name": "A", "cycles": 1, "latency": 3}], edges=[]),
                      r"ops\[0\] has unknown field 'latency'"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_GRAPHS))
def test_malformed_graph_exits_2(case, tmp_path, capsys):
    doc, match = MALFORMED_GRAPHS[case]
    code, out, err = run(["solve", write(tmp_path, "g.json", doc)], capsys)
    assert code == 2
    assert_one_line_error(err, match)


def test_missing_file_exits_2(tmp_path, capsys):
    code, _, err = run(["solve", str(tmp_path / "nope.json")], capsys)
    assert code == 2
    assert_one_line_error(err, r"nope\.json: no such file")


def test_zero_capacity_machine_exits_2(tmp_path, capsys):
    machine = {"format": "tvm-twill-machine/1", "name": "broken", "units": {"TC": 1, "SFU": 0}}
    code, _, err = run(["solve", write(tmp_path, "g.json", graph_doc()),
                        "--machine", write(tmp_path, "m.json", machine)], capsys)
    assert code == 2
    assert_one_line_error(err, r"unit 'SFU' capacity must be an integer >= 1, got 0")


def test_unknown_machine_option_exits_2(tmp_path, capsys):
    code, _, err = run(["solve", write(tmp_path, "g.json", graph_doc()), "--machine", "z900"], capsys)
    assert code == 2
    assert_one_line_error(err, r"unknown machine 'z900': use one of a100, h100, b200")


def test_unknown_example_exits_2(capsys):
    code, _, err = run(["example", "fa_fig7"], capsys)
    assert code == 2
    assert_one_line_error(err, r"unknown example 'fa_fig7': bundled examples are .*fa_fwd_fig1")


def test_bad_time_limit_exits_2(capsys):
    code, _, err = run(["example", "fa_fwd_fig1", "--time-limit", "0"], capsys)
    assert code == 2
    assert_one_line_error(err, r"--time-limit must be > 0 seconds, got 0")


def test_register_infeasible_exits_3_with_the_family(tmp_path, capsys):
    """Two values live together on the only fixed-latency warp need 300 > 255 registers."""
    machine = {"format": "tvm-twill-machine/1", "name": "two_roles", "units": {"TC": 1, "ALU": 1, "TMA": 1},
               "warp_groups": 2}  # one role is the variable-latency warp: one role is left
    graph = graph_doc(
        ops=[{"name": "load", "unit": "TMA", "cycles": 1, "variable_latency": True},
             {"name": "A", "unit": "TC", "cycles": 1, "regs": 200},
             {"name": "B", "unit": "ALU", "cycles": 1, "regs": 100},
             {"name": "C", "unit": "TC", "cycles": 1}],
        edges=[{"src": "load", "dst": "A"}, {"src": "A", "dst": "C"}, {"src": "B", "dst": "C"}],
        machine=machine)
    code, out, err = run(["solve", write(tmp_path, "g.json", graph)], capsys)
    assert code == 3
    assert_one_line_error(err, r"infeasible \(registers\): graph 'g' has no schedule on 'two_roles'.*registers")


def test_a_tiny_time_limit_still_answers(capsys):
    # normalization cannot finish in 1 ms, nor can the search: the rounding normalization and
    # the serial schedule (valid by construction) answer, not proven optimal, exit 0
    code, out, err = run(["example", "fa_bwd_raw", "--time-limit", "0.001"], capsys)
    assert code == 0 and "optimal: not proven" in out and "rounding objective" in out
    assert err.splitlines()[-1].startswith("tvm-twill: not proven optimal: gap ") and "error" not in err


def test_time_limit_exits_3_when_not_even_the_serial_schedule_is_valid(tmp_path, capsys):
    """Out of time before any valid schedule, and the serial one breaks the registers: exit 3, the reason said."""
    machine = {"format": "tvm-twill-machine/1", "name": "one_role", "units": {"TC": 1, "ALU": 1}, "warp_groups": 1}
    graph = graph_doc(ops=[{"name": "A", "unit": "TC", "cycles": 1, "regs": 200},
                           {"name": "B", "unit": "ALU", "cycles": 1, "regs": 100},
                           {"name": "C", "unit": "TC", "cycles": 1}],
                      edges=[{"src": "A", "dst": "C"}, {"src": "B", "dst": "C"}], machine=machine)
    code, _, err = run(["solve", write(tmp_path, "g.json", graph), "--time-limit", "0.001"], capsys)
    assert code == 3
    assert_one_line_error(err, r"timed out: time limit 0.001 s reached .*no fallback: the serial schedule at ii=\d+ "
                               r"breaks rule 5 \(registers\)")


def test_solve_prints_the_report(capsys):
    code, out, err = run(["solve", str(example_path("fa_fwd_fig1"))], capsys)
    assert code == 0 and err == ""
    for expected in ("ii = 2", "length L = 4", "optimal: yes", "ResMII = 2: unit TC", "TC 2/1, SFU 1/1",
                     "attempts",
                     "steady-state order: S (stage 0, slot 0) -> P (stage 1, slot 0) -> O (stage 1, slot 1)",
                     "warp roles", "prologue cycles [0, 2)"):
        assert expected in out


@pytest.mark.parametrize("name", ["fa_fwd_fig1", "fa_fwd_hopper_raw"])
def test_json_round_trips_and_checks(name, tmp_path, capsys):
    out_file = tmp_path / "s.json"
    graph_file = str(example_path(name))
    code, out, _ = run(["solve", graph_file, "--json", str(out_file)], capsys)
    assert code == 0 and f"wrote {out_file}" in out
    doc = json.loads(out_file.read_text())
    assert doc["format"] == "tvm-twill-schedule/1"
    schedule = schedule_from_dict(doc)
    prep = prepare(load_graph(graph_file))
    assert check(schedule, prep.graph, prep.machine) == []
    # the check command prepares the graph the way the schedule records
    code, out, _ = run(["check", graph_file, str(out_file)], capsys)
    assert code == 0 and out.startswith("valid:")


def test_check_reports_violations_with_exit_1(tmp_path, capsys):
    graph_file = str(example_path("fa_fwd_fig1"))
    out_file = tmp_path / "s.json"
    assert run(["solve", graph_file, "--json", str(out_file)], capsys)[0] == 0
    doc = json.loads(out_file.read_text())
    doc["ops"]["O"].update(time=2, stage=1)  # O now collides with S on the TC
    doc["length"] = 3
    out_file.write_text(json.dumps(doc))
    code, out, _ = run(["check", graph_file, str(out_file)], capsys)
    assert code == 1
    assert "rule 2 (resources): unit TC at slot 0 (mod ii 2) holds 2 > capacity 1" in out


def test_check_rejects_a_schedule_of_another_graph(tmp_path, capsys):
    out_file = tmp_path / "s.json"
    assert run(["solve", str(example_path("fa_fwd_fig1")), "--json", str(out_file)], capsys)[0] == 0
    code, _, err = run(["check", str(example_path("gemm_tma")), str(out_file)], capsys)
    assert code == 2
    assert_one_line_error(err, r"is a schedule of graph 'fa_fwd_fig1', but .* is graph 'gemm_tma'")


def test_machines_lists_the_builtins(capsys):
    code, out, _ = run(["machines"], capsys)
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["a100", "h100", "b200", "a40", "orin", "l40s",
                                                                  "rtx5090"]
    assert "sm_90a" in out and "256 KiB" in out  # b200 tensor memory


def test_example_lists_the_bundled_graphs(capsys):
    code, out, _ = run(["example"], capsys)
    assert code == 0 and "fa_fwd_blackwell_raw" in out


def test_interrupt_exits_130(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "cmd_machines", interrupted)
    code, _, err = run(["machines"], capsys)
    assert code == 130
    assert err == "tvm-twill: interrupted\n"


def test_bugs_are_one_internal_error_line_exit_4(monkeypatch, capsys):
    def broken(args):
        raise RuntimeError("a genuine bug")
    monkeypatch.setattr(cli, "cmd_machines", broken)
    monkeypatch.delenv("TVM_TWILL_DEBUG", raising=False)
    code, _, err = run(["machines"], capsys)
    assert code == 4 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("tvm-twill: internal error: RuntimeError: a genuine bug") and "please report" in err


def test_bugs_keep_their_traceback_with_tvm_twill_debug(monkeypatch):
    def broken(args):
        raise RuntimeError("a genuine bug")
    monkeypatch.setattr(cli, "cmd_machines", broken)
    monkeypatch.setenv("TVM_TWILL_DEBUG", "1")
    with pytest.raises(RuntimeError, match="a genuine bug"):
        cli.main(["machines"])


def test_version(capsys):
    code, out, _ = run(["--version"], capsys)
    assert code == 0 and out.startswith("tvm-twill 0.")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "1e300"])
def test_non_finite_or_negative_time_limit_exits_2(value, capsys):
    code, _, err = run(["example", "fa_fwd_fig1", f"--time-limit={value}"], capsys)
    assert code == 2
    assert_one_line_error(err, r"--time-limit must be > 0 seconds")


def test_check_refuses_a_schedule_of_another_machine(tmp_path, capsys):
    graph = write(tmp_path, "g.json", graph_doc())
    out = str(tmp_path / "s.json")
    assert run(["solve", graph, "--json", out], capsys)[0] == 0
    code, _, err = run(["check", graph, out, "--machine", "b200"], capsys)
    assert code == 2
    assert_one_line_error(err, r"schedule for machine 'h100', but --machine names machine 'b200'")
    doc = json.loads(Path(out).read_text())
    doc["machine"] = "a100"
    bad = write(tmp_path, "s2.json", doc)
    code, _, err = run(["check", graph, bad], capsys)
    assert code == 2
    assert_one_line_error(err, r"schedule for machine 'a100', but .*g\.json names machine 'h100'")


def _subprocess(args, **kw):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(args, capture_output=True, text=True, env=env, cwd=REPO, timeout=120, **kw)


def test_module_entry_point_exits_2_without_traceback(tmp_path):
    proc = _subprocess([sys.executable, "-m", "tvm_twill.cli", "solve", str(tmp_path / "missing.json")])
    assert proc.returncode == 2
    assert_one_line_error(proc.stderr, r"missing\.json: no such file")
    assert proc.stdout == ""


def test_console_script_solves_an_example():
    script = Path(sys.executable).with_name("tvm-twill")
    if not script.exists():
        pytest.skip("tvm-twill is not installed in this environment (pip install -e .)")
    proc = _subprocess([str(script), "example", "gemm_tma"])
    assert proc.returncode == 0, proc.stderr
    assert "ii = 2" in proc.stdout


def test_paper_encoding_is_a_cli_choice(capsys):
    """The paper's Algorithm 1 with its op[v,i,t] encoding finds Figure 1's II = 2, L = 4: the ii at its lower
    bound is optimal, the length (Algorithm 1's first) is not proven minimal."""
    code, out, err = run(["example", "fa_fwd_fig1", "--encoding", "paper", "--quiet"], capsys)
    assert code == 0, err
    assert "ii = 2 " in out and "length L = 4 " in out
    assert "optimal: yes for the ii" in out and "length 4 not proven minimal (at least 3, gap 25.0%)" in out
    code, _, err = run(["example", "fa_fwd_fig1", "--encoding", "paper", "--cross-warp-sync"], capsys)
    assert code == 2 and "--encoding paper has no --cross-warp-sync" in err
