"""What ``auto_pipeline`` may reuse between calls: solves, extractions and TVM's verdicts.

A MetaSchedule tuning run calls the postprocessor on thousands of candidates,
most of them variations of a few loops.  ``PlanCache`` keeps three bounded,
thread-safe LRU tables (``solvers.memo``):

* ``solves``: solver outcomes keyed by the canonical dependence graph
  (ops by position, no names), the machine and the solve options
  (``solvers.memo.graph_key``): a loop is solved once per run, whatever its
  candidate calls it;
* ``extractions``: ``extract_loop`` results keyed by the function's
  fingerprint (``frontend.ir.fingerprint``: TVM's structural hash plus every
  name, so names in plans and messages are the candidate's own), the loop,
  the arch, the machine and the quantum: extraction runs TVM's passes;
* ``verdicts``: whether TVM accepts an annotated module (InjectSoftwarePipeline
  through ``frontend.inject_pipeline``, or another check such as
  MetaSchedule's VerifyGPUCode), keyed by the module's fingerprint.

The annotation of every loop is still derived from the (possibly reused)
schedule for the loop at hand, checked against that loop's dependences and
verified on that module (the verdict of a structurally identical module is
reused, never one of a different module).  ``SHARED`` is the process-wide
cache ``TwillPipeline`` uses by default; ``auto_pipeline`` uses one only
when given (``AutoPipelineOptions.cache``).
"""
from __future__ import annotations

from ..frontend import extract_loop, inject_pipeline
from ..frontend.ir import fingerprint, tirx, walk_stmts
from ..solvers.memo import DEFAULT_MAXSIZE, LRU, SolveCache

__all__ = ["PlanCache", "SHARED"]


class PlanCache:
    """Bounded, thread-safe memo tables for ``auto_pipeline`` (``maxsize`` entries each)."""

    def __init__(self, maxsize: int = DEFAULT_MAXSIZE):
        self.solves = SolveCache(maxsize)
        self.extractions = LRU(maxsize)
        self.verdicts = LRU(maxsize)

    def clear(self) -> None:
        self.solves.clear()
        self.extractions.clear()
        self.verdicts.clear()

    def stats(self) -> dict:
        """Hits and misses per table (``solves``: misses are solver calls)."""
        return {"solves": {"hits": self.solves.hits, "misses": self.solves.solves, "size": len(self.solves)},
                "extractions": {"hits": self.extractions.hits, "misses": self.extractions.misses,
                                "size": len(self.extractions)},
                "verdicts": {"hits": self.verdicts.hits, "misses": self.verdicts.misses,
                             "size": len(self.verdicts)}}

    def solve(self, graph, machine, *, time_limit: float | None = None, options=None):
        return self.solves.solve(graph, machine, time_limit=time_limit, options=options)

    def extract(self, sch, ref, arch: str, machine, quantum):
        """``extract_loop(sch, ref.rv, arch, machine=machine, quantum=quantum)``, reused for identical IR."""
        func = sch.mod[ref.func]
        # the loop by its place in the function (its name may be shared with another loop)
        place = next((i for i, n in enumerate(s for s in walk_stmts(func.body) if isinstance(s, tirx.For))
                      if n.same_as(ref.node)), None)
        key = (fingerprint(func), ref.func, ref.name, place, arch, repr(machine), quantum)
        value, _ = self.extractions.get_or_compute(
            key, lambda: extract_loop(sch, ref.rv, arch, machine=machine, quantum=quantum))
        return value

    def verdict(self, kind: str, mod, check) -> None:
        """Run ``check(mod)`` (it raises a TwillError to reject) once per structurally identical module."""
        self.verdicts.get_or_compute((kind, fingerprint(mod)), lambda: check(mod))

    def verify(self, mod) -> None:
        """``frontend.inject_pipeline(mod)`` (raises UnsupportedLoopError), its verdict reused."""
        self.verdict("inject_pipeline", mod, _inject)


def _inject(mod) -> None:
    inject_pipeline(mod)  # the lowered module is not kept: only whether TVM accepts it


#: The process-wide cache (MetaSchedule's ``TwillPipeline`` default).
SHARED = PlanCache()
