"""The values every planning step of one loop passes on: what it plans with (``PlanningContext``: the
extraction, the machines, the options, the solve function) and the plan so far (``Candidate``: schedule,
annotation, the graph it was solved on, why it has its stages).  Both are frozen: a step that changes the
plan returns a new ``Candidate``; one that plans on another machine (a tightened shared-memory budget)
or other options (a smaller stage bound) gets ``dataclasses.replace`` of the context.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from ..frontend import Extraction
from ..model import Graph, Machine, Schedule
from ..model.pipeline import PipelineAnnotation

__all__ = ["Candidate", "PlanningContext", "PlanningOptions"]


class PlanningOptions(Protocol):
    """What the planner reads of ``api.AutoPipelineOptions`` (the planner does not import ``api``)."""

    time_limit: float
    max_stages: int | None
    top_k: int
    warp_specialize: bool | str

    def replace(self, **changes) -> PlanningOptions: ...


@dataclass(frozen=True)
class PlanningContext:
    """What one loop is planned with.

    ``extraction``: the loop's statements and graph (on ``machine``).  ``machine``: the single-role machine
    the one-role schedules are solved on (``api.swp_machine``, ``PipelinePlan.machine``).  ``full_machine``:
    the target's model, every warp role (the shared-memory limits, the warp-specialized solve).
    ``options``: the call's ``AutoPipelineOptions``.  ``solve``: the solve function (``solvers.solve``, or a
    ``PlanCache``'s).
    """

    extraction: Extraction
    machine: Machine
    full_machine: Machine
    options: PlanningOptions
    solve: Callable[..., Schedule]


@dataclass(frozen=True)
class Candidate:
    """A plan of the one-role software pipeline: ``schedule`` and the ``annotation`` TVM reads;
    ``solved_graph``: the graph ``schedule`` was solved on when a stage bound added constraints to the
    loop's (None: the extraction's graph); ``depth``: why it has its number of stages
    (``PipelinePlan.depth``)."""

    schedule: Schedule
    annotation: PipelineAnnotation
    solved_graph: Graph | None = None
    depth: str = ""
