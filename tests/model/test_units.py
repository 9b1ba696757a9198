"""Units kept in every graph the project writes: a graph extracted from a TVM loop counts in units of the
front-end's quantum and says so (``cycles_per_unit``), through ``plan.graph``, ``plan.graph_json()``, the JSON
format and the CLI's report of it."""
import json
import subprocess
import sys

import pytest

from tvm_twill.errors import FormatError
from tvm_twill.model import Edge, Graph, Op, graph_from_dict, graph_to_dict


def test_the_format_keeps_the_unit_and_refuses_a_bad_one():
    g = Graph(name="g", ops=(Op(name="a", cycles=2, unit="ALU"),), edges=(Edge("a", "a", delay=2, distance=1),),
              machine="h100", normalize=False, cycles_per_unit=16)
    doc = graph_to_dict(g)
    assert doc["cycles_per_unit"] == 16 and graph_from_dict(doc).cycles_per_unit == 16
    assert "cycles_per_unit" not in graph_to_dict(g.replace(cycles_per_unit=1))
    for bad in (0, -3, 2.5, True):
        with pytest.raises(FormatError, match=r"cycles_per_unit must be an integer"):
            graph_from_dict(dict(doc, cycles_per_unit=bad))


@pytest.fixture(scope="module")
def plan():
    pytest.importorskip("tvm")
    import tvm

    import tir_gen
    import tvm_twill
    sch = tvm.s_tir.Schedule(tvm.script.from_source(tir_gen.build_copy_loop(tir_gen.CopyLoopSpec(8, (16, 256)))))
    return tvm_twill.auto_pipeline(sch, "i", "sm_80", apply=False)


def test_a_plans_graph_says_its_unit(plan):
    assert plan.quantum > 1 and plan.graph.cycles_per_unit == plan.quantum
    assert graph_to_dict(plan.graph)["cycles_per_unit"] == plan.quantum
    doc = json.loads(plan.graph_json())
    assert doc["cycles_per_unit"] == plan.quantum and graph_from_dict(doc).cycles_per_unit == plan.quantum
    ns: dict = {}
    exec(compile(plan.reproduce(), "reproduce", "exec"), ns)
    assert ns["schedule"].ii == plan.schedule.ii


def test_the_cli_reports_a_plans_graph_in_machine_cycles(plan, tmp_path):
    path = tmp_path / "loop.json"
    path.write_text(plan.graph_json(), encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "tvm_twill.cli", "solve", str(path), "--quiet"], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    q, ii = plan.quantum, plan.schedule.ii
    assert f"ii = {ii}  (one iteration starts every {ii} units = {ii * q} machine cycles)" in r.stdout
    assert f"time unit of the graph: 1 unit = {q} machine cycles" in r.stdout
    assert "time (cycles)" in r.stdout and "busy (cycles)" in r.stdout
