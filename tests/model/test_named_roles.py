"""Named warp roles (the b200 model's FA4 split): what a role may issue and hold, checked and validated."""
from dataclasses import replace

import pytest

from tvm_twill.errors import MachineError
from tvm_twill.model import Edge, Graph, Op, check, get_machine
from tvm_twill.model.machine import FA4_ROLES, WarpRole
from tvm_twill.model.schedule import make_schedule


def _graph(machine):
    ops = (Op("S", 1, "TC", spill_cost=0), Op("P", 1, "SFU", warps=4, regs=128, spill_cost=0), Op("O", 1, "TC"))
    return Graph("g", ops, (Edge("S", "P", 1), Edge("P", "O", 1)), machine=machine, normalize=False)


def _check(graph, machine, warps, times=None):
    times = times or {"S": 0, "P": 1, "O": 2}
    s = make_schedule(graph, machine.name, 3, times, warps, {o.name: o.cycles for o in graph.ops})
    return [str(v) for v in check(s, graph, machine)]


def test_b200_has_fa4_roles_within_the_register_file():
    m = get_machine("b200")
    assert [(r.name, r.warps, r.regs) for r in m.roles] == [
        ("softmax0", 4, 192), ("softmax1", 4, 192), ("correction", 4, 80), ("mma", 1, 48), ("epilogue", 1, 48),
        ("load", 1, 48)]
    assert m.warp_groups == 6 and m.roles[-1].streams and not m.roles[4].in_loop
    assert sum(r.warps * 32 * r.regs for r in m.roles) <= m.regs_per_sm
    g = m.generic_roles()
    assert g.roles == () and g.warp_groups == 4 and get_machine("h100").generic_roles() is get_machine("h100")


def test_a_named_role_issues_only_ops_of_its_width_and_holds_its_budget():
    m = get_machine("b200")
    g = _graph(m)
    assert _check(g, m, {"S": 3, "P": 0, "O": 3}) == []
    assert any("'P' is issued by 4 warp(s), role 'mma' has 1" in v for v in _check(g, m, {"S": 3, "P": 3, "O": 3}))
    assert any("role 'epilogue' has 1 and issues no op of the loop" in v
               for v in _check(g, m, {"S": 4, "P": 0, "O": 3}))
    # P's 128 registers fit a softmax group's 192, not the correction group's 80
    assert any("holds 128 registers per thread" in v and "> 80" in v for v in _check(g, m, {"S": 3, "P": 2, "O": 3}))


def test_named_roles_are_validated():
    m = get_machine("b200")
    with pytest.raises(MachineError, match="6 named roles for 5 warp groups"):
        replace(m, warp_groups=5)
    with pytest.raises(MachineError, match="only the last named role may stream"):
        replace(m, roles=(FA4_ROLES[-1], *FA4_ROLES[:-1]))
    with pytest.raises(MachineError, match="more than the SM's 65536"):
        replace(m, roles=(WarpRole("big", 16, 255), *FA4_ROLES[1:]))


def test_named_roles_round_trip_through_json():
    from tvm_twill.errors import FormatError
    from tvm_twill.model.io import machine_from_dict, machine_to_dict

    m = get_machine("b200")
    d = machine_to_dict(m)
    assert d["roles"][2] == {"name": "correction", "warps": 4, "regs": 80, "streams": False, "in_loop": True}
    assert machine_from_dict(d).roles == m.roles
    with pytest.raises(FormatError, match="roles must be a list"):
        machine_from_dict({**d, "roles": {"name": "x"}})
