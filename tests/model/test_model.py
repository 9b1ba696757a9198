"""The pure-Python model: strict JSON formats, bounds, and the checker's rules."""
import json

import pytest

from tvm_twill.errors import FormatError, GraphError, MachineError
from tvm_twill.model import (Edge, Graph, Machine, Op, check, explain_lower_bound, get_machine, graph_from_dict, graph_to_dict,
                             load_graph, machine_for_arch, machine_from_dict, make_schedule, rec_mii, res_mii,
                             schedule_from_dict, schedule_to_dict)


def doc(**over):
    d = {"format": "tvm-twill-graph/1", "name": "g", "machine": "h100", "normalize": False,
         "ops": [{"name": "S", "unit": "TC", "cycles": 1}, {"name": "P", "unit": "SFU", "cycles": 1}],
         "edges": [{"src": "S", "dst": "P"}]}
    d.update(over)
    return d


@pytest.mark.parametrize("over, err, match", [
    ({"format": "tvm-twill-graph/2"}, FormatError, r"format is \"tvm-twill-graph/2\", expected"),
    ({"ops": [{"name": "S", "cycles": 1}, {"name": "S", "cycles": 2}]}, GraphError, "duplicate op name 'S'"),
    ({"edges": [{"src": "S", "dst": "Q"}]}, GraphError, "names unknown op 'Q'"),
    ({"edges": [{"src": "S", "dst": "P", "delay": -1}]}, GraphError, "delay must be >= 0"),
    ({"ops": [{"name": "S", "cycles": 1.5}]}, FormatError, "op 'S' cycles must be an integer, got 1.5"),
    ({"ops": [{"name": "S", "cycles": 1, "colour": "red"}]}, FormatError, "unknown field 'colour'"),
    ({"machine": "h900"}, MachineError, "unknown machine 'h900'"),
    ({"edges": [{"src": "S", "dst": "P"}, {"src": "P", "dst": "S"}]}, GraphError,
     "zero-distance dependence cycle S -> P -> S"),
    ({"edges": [{"src": "S", "dst": "S", "distance": 0}]}, GraphError, "zero-distance dependence cycle S -> S"),
    ({"ops": [], "edges": []}, GraphError, "has no ops"),
    ({"ops": [{"name": "S", "cycles": 2, "rrt": [{"TC": 1}]}], "edges": []}, GraphError,
     "rrt has 1 rows but cycles is 2"),
    ({"machine": {"name": "m", "units": {"TC": 0}}}, MachineError, "unit 'TC' capacity must be an integer >= 1"),
])
def test_malformed_graphs_are_rejected_with_one_line(over, err, match):
    with pytest.raises(err, match=match) as ei:
        graph_from_dict(doc(**over))
    assert "\n" not in str(ei.value)


def test_truncated_json_file(tmp_path):
    p = tmp_path / "g.json"
    p.write_text(json.dumps(doc())[:-20])
    with pytest.raises(FormatError, match=r"not valid JSON .* truncated"):
        load_graph(p)


def test_unknown_unit_is_found_against_the_machine():
    g = graph_from_dict(doc(ops=[{"name": "S", "unit": "XU", "cycles": 1}], edges=[]))
    with pytest.raises(GraphError, match="uses unit 'XU', which machine 'h100' does not have"):
        g.validate_for(get_machine("h100"))


def test_round_trip_and_defaults():
    g = graph_from_dict(doc())
    assert g.edges[0].delay == 1 and g.edges[0].distance == 0  # delay defaults to the source's cycles
    assert graph_from_dict(graph_to_dict(g)) == g
    m = machine_from_dict({"format": "tvm-twill-machine/1", "name": "x", "units": {"TC": 2}})
    assert m.units == {"TC": 2} and m.warp_groups == 4


def test_machines_and_arch_lookup():
    assert machine_for_arch("sm_80").name == "a100"
    assert machine_for_arch("sm_86").name == "a40"  # every arch its own model: tests/model/test_archs.py
    assert machine_for_arch("sm_90a").name == "h100"
    assert machine_for_arch("sm_100a").tmem_bytes == 256 * 1024
    with pytest.raises(MachineError, match="CUDA arch 'sm_75' predates sm_80"):
        machine_for_arch("sm_75")


def test_bounds():
    m = get_machine("h100")
    g = Graph("b", (Op("a", 3, "TC"), Op("b", 2, "TC"), Op("c", 1, "SFU")),
              (Edge("a", "c", 3), Edge("c", "a", 4, distance=2)), normalize=False)
    assert res_mii(g, m) == 5            # TC holds 3 + 2 cycles
    assert rec_mii(g) == 4               # (3 + 4) / 2 rounded up
    m2 = Machine("two", units={"TC": 2, "SFU": 1})
    assert res_mii(g, m2) == 3           # ceil(5 / 2)


FIG1 = Graph("fig1", (Op("S", 1, "TC", regs=64), Op("P", 1, "SFU", regs=64), Op("O", 1, "TC", regs=64)),
             (Edge("S", "P", 1, blocking=True), Edge("P", "O", 1), Edge("O", "O", 1, distance=1)),
             normalize=False)
H100 = get_machine("h100")


def sched(times, warps, ii=2, graph=FIG1):
    return make_schedule(graph, "h100", ii, times, warps, {o.name: o.cycles for o in graph.ops})


def rules(s, g=FIG1, m=H100, **kw):
    return sorted({v.rule for v in check(s, g, m, **kw)})


def test_checker_accepts_the_paper_schedule_and_round_trips():
    s = sched({"S": 0, "P": 2, "O": 3}, {"S": 0, "P": 1, "O": 1})
    assert check(s, FIG1, H100) == []
    assert schedule_from_dict(json.loads(json.dumps(schedule_to_dict(s)))) == s


def test_rule1_dependence_with_cross_warp_spill():
    assert rules(sched({"S": 0, "P": 2, "O": 3}, {"S": 0, "P": 1, "O": 0})) == [1]  # P->O needs 1 + spill 1


def test_rule2_resources():
    assert 2 in rules(sched({"S": 0, "P": 2, "O": 4}, {"S": 0, "P": 1, "O": 1}))   # S and O share TC slot 0


def test_rule3_variable_latency_warp():
    g = Graph("vl", (Op("L", 1, "TMA", variable_latency=True), Op("M", 1, "TC")), (Edge("L", "M", 1),),
              normalize=False)
    assert rules(sched({"L": 0, "M": 1}, {"L": 0, "M": 0}, graph=g), g) == [3]
    assert rules(sched({"L": 0, "M": 2}, {"L": 1, "M": 0}, graph=g), g) == []


def test_rule4_blocking_sync():
    assert rules(sched({"S": 0, "P": 2, "O": 3}, {"S": 0, "P": 0, "O": 0})) == [4]  # S (next iter.) runs at 2


def test_cross_warp_sync_extension_treats_cross_edges_as_blocking():
    g = Graph("x", (Op("A", 1, "TC"), Op("B", 1, "SFU"), Op("C", 2, "ALU")),
              (Edge("A", "B", 1),), normalize=False)
    s = sched({"A": 0, "B": 2, "C": 1}, {"A": 0, "B": 1, "C": 1}, ii=4, graph=g)
    assert rules(s, g) == []
    assert rules(s, g, cross_warp_sync=True) == [4]  # C executes on B's warp when B waits


def test_rule5_registers_count_every_inflight_instance():
    g = Graph("r", (Op("A", 1, "TC", regs=100), Op("B", 1, "SFU")), (Edge("A", "B", 5),), normalize=False)
    m = Machine("m", units={"TC": 1, "SFU": 1}, regs_per_thread_max=255)
    # A's value lives [0, 5): with ii = 2, three instances overlap at some slot (300 > 255)
    assert rules(sched({"A": 0, "B": 5}, {"A": 0, "B": 0}, graph=g), g, m) == [5]
    assert rules(sched({"A": 0, "B": 5}, {"A": 0, "B": 0}, ii=3, graph=g), g, m) == []  # two: 200


def test_rule6_memory():
    g = Graph("s", (Op("A", 1, "TMA", smem=100_000), Op("B", 1, "TC")), (Edge("A", "B", 5),), normalize=False)
    # A's buffer lives [0, 5): three in flight at ii = 2 (300 KB > 227 KB), two at ii = 3
    assert rules(sched({"A": 0, "B": 5}, {"A": 0, "B": 0}, graph=g), g) == [6]
    assert rules(sched({"A": 0, "B": 5}, {"A": 0, "B": 0}, ii=3, graph=g), g) == []


def test_structure_violations():
    s = sched({"S": 0, "P": 2, "O": 3}, {"S": 0, "P": 1, "O": 7})
    assert any("outside [0, 4)" in v.message for v in check(s, FIG1, H100))


def test_lower_bound_explanation_names_unit_and_recurrence():
    g = Graph("b", (Op("a", 3, "TC"), Op("b", 2, "TC"), Op("c", 1, "SFU")),
              (Edge("a", "c", 3), Edge("c", "a", 1, distance=1), Edge("c", "a", 4, distance=2)),
              normalize=False)
    lines = explain_lower_bound(g, H100)
    assert lines[0] == "ResMII = 5: unit TC is reserved 5 cycles per iteration and has capacity 1"
    assert lines[1] == "RecMII = 4: recurrence a -> c -> a needs 4 cycles every 1 iteration(s)"


def test_unknown_machine_names_the_file(tmp_path):
    p = tmp_path / "g.json"
    p.write_text(json.dumps(doc(machine="h900")))
    with pytest.raises(MachineError, match=r"g\.json: unknown machine 'h900'"):
        load_graph(p)


def test_schedule_extension_keys_are_validated():
    s = schedule_to_dict(sched({"S": 0, "P": 2, "O": 3}, {"S": 0, "P": 1, "O": 1}))
    with pytest.raises(FormatError, match="streaming depth must be an integer"):
        schedule_from_dict({**s, "streaming": {"ops": ["S"], "depth": "2"}})
    with pytest.raises(FormatError, match="normalization is missing required field 'mapping'"):
        schedule_from_dict({**s, "normalization": {"U": 300, "distortion": 0}})
