"""What a worker process runs for ``plan_module``: one solve, without TVM.

``plan_module`` extracts dependence graphs and writes plans in the parent
process (TVM); a worker only receives pure-Python model objects (``Graph``,
``Machine``, ``SolveOptions``: dataclasses that pickle) and returns the
``Schedule``, or the ``TwillError`` the solve raised, with the seconds it
took.  This module imports no TVM, so a worker (a spawned process, or a Dask
or Ray worker on another machine with tvm_twill installed) starts in about a
second.
"""
from __future__ import annotations

import time

from ..errors import TwillError

__all__ = ["solve_job"]


def solve_job(graph, machine, options) -> tuple[str, object, float]:
    """``("schedule", Schedule, seconds)`` or ``("error", TwillError, seconds)`` for one solve.

    Anything else raised (a bug) propagates, so the executor's future carries it to the parent.
    """
    from ..solvers import solve  # z3 and CBC load here, in the worker

    start = time.perf_counter()
    try:
        outcome: tuple[str, object] = ("schedule", solve(graph, machine, options=options))
    except TwillError as err:
        outcome = ("error", err.with_traceback(None))
    return outcome[0], outcome[1], time.perf_counter() - start
