"""Pipeline depth: bound the number of stages of a schedule (``auto_pipeline(..., max_stages=)``).

Why: the solver minimizes II first, then the schedule length; when a
latency is long against a small body (500 cycles of DRAM over a few cycles
of work) the shortest schedule at the smallest II can need dozens of stages
(36 for a 64-iteration loop), each one a live version of every buffer in
flight and one more unrolled iteration of prologue and epilogue.  A user
would rather pay a larger II.

How, without touching the solver: stages are ``time // ii`` (shifted so the
first is 0), so a schedule has at most ``K`` stages when every pair of ops
issues within ``(K - 1) * ii`` time units of each other (with ``r = t0 mod
ii < ii``: ``floor((r + (K - 1) * ii) / ii) = K - 1``).  That is a
modulo-scheduling constraint the model already has: an edge ``b -> a`` with
delay 0 and distance ``K - 1`` says ``t[a] + (K - 1) * ii >= t[b]``.
``bound_stages`` adds it for every ordered pair of ops that take part in a
dependence (the others are clamped into the stage range anyway, see
``annotation_from_schedule``).  The solver then finds the smallest II that
fits the real latencies into ``K`` stages (the edges form recurrences, so
RecMII grows as ``latency / (K - 1)``), optimal under the bound, and the
result is checked by the same checker.  The added edges only restrict the
schedule: legality (stages/orders against the loop's dependences) is
untouched.

Default ``K`` (``default_max_stages``): at most ``DEFAULT_MAX_STAGES`` and
at most the trip count (more stages than iterations only unroll the loop
into its prologue and epilogue).  Shared memory is bounded by the model's
memory rule (every live version counts), whatever ``K``.
"""
from __future__ import annotations

from ..errors import InputError

#: Default cap on the number of pipeline stages (TVM's own annotations use 2-5).
DEFAULT_MAX_STAGES = 8


def default_max_stages(trip_count: int) -> int:
    """The default stage bound of a loop of ``trip_count`` iterations (>= 1)."""
    return max(1, min(DEFAULT_MAX_STAGES, int(trip_count)))


def check_max_stages(value) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"max_stages must be an integer >= 1 (or None for the default), got {value!r}")
    return value


def bound_stages(graph, max_stages: int, linked):
    """``graph`` with the edges that keep every schedule within ``max_stages`` stages (>= 2).

    ``linked``: names of the ops that take part in a dependence.
    """
    from ..model import Edge

    if max_stages < 2:
        raise InputError("bound_stages needs max_stages >= 2 (one stage is the unpipelined loop)")
    names = [n for n in graph.names if n in set(linked)]
    extra = [Edge(b, a, delay=0, distance=max_stages - 1) for a in names for b in names if a != b]
    return graph.replace(edges=tuple(graph.edges) + tuple(extra))
