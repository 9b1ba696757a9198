"""The pure-Python model: graph, machine, schedule, bounds, checker, JSON I/O.

Nothing here imports TVM or a solver; everything else builds on it: the vocabulary of the other rooms, the
ring protocol checker of warp-specialized kernels, the throughput model.  docs/model.md.
"""
from .bounds import critical_recurrence, explain_lower_bound, rec_mii, res_mii, resource_bottleneck
from .families import Bound, Family
from .checker import Violation, check, live_intervals, register_peaks, verify
from .graph import Edge, Graph, Op
from .io import (GRAPH_FORMAT, dump, graph_from_dict, graph_to_dict, load_graph, load_machine,
                 load_schedule, machine_from_dict, machine_to_dict, schedule_from_dict, schedule_to_dict)
from .machine import BUILTIN_MACHINES, CostModel, Machine, get_machine, machine_for_arch
from .schedule import (Attempt, LowerBound, Placement, Schedule, TieBreak, body_order, busy_share, make_schedule,
                       topological_order)

__all__ = [
    "Attempt", "BUILTIN_MACHINES", "Bound", "Family", "critical_recurrence", "explain_lower_bound", "resource_bottleneck", "CostModel", "Edge", "GRAPH_FORMAT", "Graph", "LowerBound", "Machine",
    "Op", "Placement", "Schedule", "Violation", "body_order", "busy_share", "check", "dump", "get_machine",
    "graph_from_dict", "graph_to_dict", "live_intervals", "load_graph", "load_machine", "load_schedule",
    "machine_for_arch", "machine_from_dict", "machine_to_dict", "make_schedule", "rec_mii", "register_peaks", "res_mii",
    "schedule_from_dict", "schedule_to_dict", "TieBreak", "topological_order", "verify",
]
