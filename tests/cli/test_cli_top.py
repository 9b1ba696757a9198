"""``tvm-twill solve --top K``: the K best schedules on the command line and in the schedule format."""
import json
import re

import pytest

from tvm_twill import cli
from tvm_twill.data import example_path
from tvm_twill.errors import FormatError
from tvm_twill.model import check, load_graph, schedule_from_dict, schedule_to_dict
from tvm_twill.model.canonical import automorphisms, canonical_form
from tvm_twill.solvers import prepare

FIG1 = str(example_path("fa_fwd_fig1"))


def run(argv, capsys):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _volatile(doc):
    return {k: v for k, v in doc.items() if k not in ("solve_seconds", "attempts")}


def test_top_1_writes_the_schema_of_a_plain_solve(tmp_path, capsys):
    plain, top1 = tmp_path / "plain.json", tmp_path / "top1.json"
    assert run(["solve", FIG1, "--json", str(plain), "--quiet"], capsys)[0] == 0
    assert run(["solve", FIG1, "--json", str(top1), "--top", "1", "--quiet"], capsys)[0] == 0
    a, b = json.loads(plain.read_text()), json.loads(top1.read_text())
    assert list(a) == list(b) and "alternatives" not in b
    assert _volatile(a) == _volatile(b)


def test_top_k_lists_distinct_checked_schedules_in_order(tmp_path, capsys):
    out_file = tmp_path / "top.json"
    code, out, _ = run(["solve", FIG1, "--json", str(out_file), "--top", "5", "--quiet"], capsys)
    assert code == 0
    doc = json.loads(out_file.read_text())
    best = schedule_from_dict(doc)
    assert len(best.alternatives) == 4
    # the top level is the plain solve's document; each alternative is a schedule document of its own
    assert [schedule_from_dict(a) for a in doc["alternatives"]] == list(best.alternatives)
    prep = prepare(load_graph(FIG1))
    g, m = prep.graph, prep.machine
    maps = automorphisms(g, m)[0]
    every = [best, *best.alternatives]
    assert all(check(s, g, m) == [] for s in every)
    forms = {canonical_form(g, {n: p.time for n, p in s.ops.items()}, {n: p.warp for n, p in s.ops.items()},
                            m.warp_groups, maps) for s in every}
    assert len(forms) == 5
    assert [(s.ii, s.length) for s in every] == sorted((s.ii, s.length) for s in every)
    # the report says how each differs from the first
    assert re.search(r"the 5 best schedules .*\n  1st: ii 2, length 4.*\n  2nd: ii same, ", out)
    assert "5th: " in out and schedule_to_dict(best)["alternatives"] == doc["alternatives"]
    code, out, _ = run(["check", FIG1, str(out_file)], capsys)
    assert code == 0 and "(and its 4 alternatives)" in out


def test_check_finds_a_broken_alternative(tmp_path, capsys):
    out_file = tmp_path / "top.json"
    assert run(["solve", FIG1, "--json", str(out_file), "--top", "3", "--quiet"], capsys)[0] == 0
    doc = json.loads(out_file.read_text())
    alt = doc["alternatives"][1]
    alt["ops"]["O"].update(time=alt["ops"]["S"]["time"], stage=alt["ops"]["S"]["stage"])  # O on S's TC slot
    alt["length"] = max(p["time"] + doc["cycles"][n] for n, p in alt["ops"].items())
    out_file.write_text(json.dumps(doc))
    code, out, _ = run(["check", FIG1, str(out_file)], capsys)
    assert code == 1
    assert re.search(r"^alternatives\[1\]: rule 2 \(resources\)", out, re.M)


@pytest.mark.parametrize("argv, match", [
    (["--top", "0"], r"--top must be a count of schedules from 1 to 64, got 0"),
    (["--top", "65"], r"--top must be a count of schedules from 1 to 64, got 65"),
    (["--top", "2", "--encoding", "paper"], r"--encoding paper has no --top"),
])
def test_bad_top_exits_2(argv, match, capsys):
    code, _, err = run(["solve", FIG1, *argv], capsys)
    assert code == 2
    assert len(err.splitlines()) == 1 and re.search(match, err)


def test_reading_refuses_nested_or_foreign_alternatives(tmp_path, capsys):
    out_file = tmp_path / "top.json"
    assert run(["solve", FIG1, "--json", str(out_file), "--top", "2", "--quiet"], capsys)[0] == 0
    doc = json.loads(out_file.read_text())
    nested = json.loads(json.dumps(doc))
    nested["alternatives"][0]["alternatives"] = []
    with pytest.raises(FormatError, match=r"alternatives\[0\] has alternatives of its own"):
        schedule_from_dict(nested)
    foreign = json.loads(json.dumps(doc))
    foreign["alternatives"][0]["graph"] = "other"
    with pytest.raises(FormatError, match=r"alternatives\[0\] is a schedule of graph 'other'"):
        schedule_from_dict(foreign)
    many = json.loads(json.dumps(doc))
    many["alternatives"] = many["alternatives"] * 64
    with pytest.raises(FormatError, match=r"alternatives has 64 schedules; at most 63"):
        schedule_from_dict(many)
