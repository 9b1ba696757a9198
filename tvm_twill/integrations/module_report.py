"""What ``plan_module`` reports: each loop nest's outcome, refusals grouped, the model's predicted change.

Plain data (no TVM): ``LoopOutcome`` per pipeline nest, ``ModulePlan`` for the
module (the planned IRModule in ``mod``).  ``ModulePlan.summary()`` is the
text a user reads first; ``to_dict(timings=False)`` is what two runs with
different executors must agree on exactly.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field

from .common import reason_of

__all__ = ["LoopOutcome", "ModulePlan", "reason_group", "reason_of"]


#: The prefix ``solvers.memo`` puts on an error it found on another graph with the same dependences.
_REUSED = re.compile(r"graph '[^']*' has the dependence graph of '[^']*' \(ops by position\), solved earlier: ")


#: A quoted name: a quote that no letter precedes, to the next quote that no letter follows (an apostrophe,
#: as in "annotation's" or "can't", opens and closes nothing).
_NAME = re.compile(r"(?<!\w)'[^']*'(?!\w)")


def reason_group(reason: str) -> str:
    """The reason with names ('...'), numbers and the cache's "solved earlier" prefix taken out, so that the
    same refusal of different loops falls in one group; every other word of it stays as written."""
    return re.sub(r"\d+", "N", _NAME.sub("'…'", _REUSED.sub("", reason)))


@dataclass(frozen=True)
class LoopOutcome:
    """One pipeline nest (``loops`` outermost first) of PrimFunc ``func``.

    ``status``: "planned" (the plan is written) or "kept" (the annotations
    stay as they were; ``reason`` says why).  ``ii_before``: the model ii in
    cycles of the nest's annotation as it was (``evaluate_annotation`` on the
    outermost loop; None when it cannot be evaluated); ``ii_after``: of what
    the nest has now (``ii_before`` when kept); ``trip_count`` of the
    outermost loop.  ``staging``: the copies of the written plan ("direct",
    "registers" or "none", as ``dlight.AutoPipelined``); ``alternatives``: the
    model ii of each variant planned.  ``solves``: solver runs this nest
    caused in this call (``solve_s`` seconds of solver time, measured where
    they ran); ``reused``: solves answered by the cache (an identical loop
    solved before).  ``time_limited``: a solve of this nest (any variant)
    was cut short by the time limit (a schedule not proven optimal, or none
    in time): its outcome depends on machine speed and load, so it may differ
    between runs and executors; a larger ``time_limit`` makes it reproducible.
    """

    func: str
    loops: tuple[str, ...]
    status: str
    reason: str = ""
    staging: str = ""
    ii_before: int | None = None
    ii_after: int | None = None
    trip_count: int | None = None
    alternatives: tuple[tuple[str, int], ...] = ()
    solves: int = 0
    reused: int = 0
    solve_s: float = 0.0
    time_limited: bool = False

    @property
    def planned(self) -> bool:
        return self.status == "planned"

    def to_dict(self, timings: bool = True) -> dict:
        d = asdict(self)
        d["loops"], d["alternatives"] = list(self.loops), [list(a) for a in self.alternatives]
        if not timings:
            del d["solve_s"]
        return d


@dataclass(frozen=True)
class ModulePlan:
    """What ``plan_module`` did to a module: ``mod`` (the planned IRModule; the input is unchanged),
    ``loops`` (one ``LoopOutcome`` per pipeline nest, functions by name, nests in program order),
    ``kernels`` (PrimFuncs looked at), ``workers`` (the local pool's size, or the executor's type),
    ``rounds`` (planning rounds), ``solves`` (solver runs, ``solve_s`` seconds of solver time summed
    over the workers), ``wall_s`` (the whole call), ``cache`` (``PlanCache.stats()`` after it), ``phases``
    (seconds of ``wall_s``: "evaluate" the annotations as they were, "plan" the rounds with their solves,
    "write" the plans)."""

    mod: object
    arch: str
    kernels: int
    loops: tuple[LoopOutcome, ...]
    workers: object
    rounds: int
    solves: int
    solve_s: float
    wall_s: float
    cache: dict
    phases: dict = field(default_factory=dict)

    @property
    def planned(self) -> list[LoopOutcome]:
        return [lo for lo in self.loops if lo.planned]

    @property
    def kept(self) -> list[LoopOutcome]:
        return [lo for lo in self.loops if not lo.planned]

    def refusals(self) -> list[tuple[str, int]]:
        """(reason group, number of nests) of the kept nests, the most frequent first (then by text)."""
        counts = Counter(reason_group(lo.reason) for lo in self.kept)
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))

    def predicted(self) -> dict:
        """The model's estimate of the pipelined loops' time, summed over the nests whose ii is known
        before and after: sum of ii (cycles) x trip count, ``before`` and ``after``; ``compared`` nests
        counted, ``unknown`` left out.  A model figure per thread block, not a measurement."""
        known = [lo for lo in self.loops if None not in (lo.ii_before, lo.ii_after, lo.trip_count)]
        before = sum(lo.ii_before * lo.trip_count for lo in known)
        after = sum(lo.ii_after * lo.trip_count for lo in known)
        return {"before": before, "after": after, "compared": len(known), "unknown": len(self.loops) - len(known),
                "change": (after - before) / before if before else 0.0}

    def to_dict(self, timings: bool = True) -> dict:
        d = {"arch": self.arch, "kernels": self.kernels, "nests": len(self.loops), "planned": len(self.planned),
             "kept": len(self.kept), "refusals": [list(r) for r in self.refusals()], "predicted": self.predicted(),
             "rounds": self.rounds, "solves": self.solves,
             "loops": [lo.to_dict(timings) for lo in self.loops]}
        if timings:
            d.update(workers=str(self.workers), solve_s=self.solve_s, wall_s=self.wall_s, cache=self.cache,
                     phases=self.phases)
        return d

    def summary(self) -> str:
        """The report as text: counts, refusals by reason, the predicted change, times, one row per nest."""
        p = self.predicted()
        lines = [(f"plan_module for {self.arch}: {self.kernels} kernels, {len(self.loops)} pipeline nests: "
                  f"{len(self.planned)} planned, {len(self.kept)} kept")]
        if self.kept:
            lines.append("kept, by reason:")
            lines += [f"  {n} x {group}" for group, n in self.refusals()]
        change = f" ({p['change']:+.1%})" if p["before"] else ""
        lines.append(f"model's estimate (not a measurement): sum of ii x trip count over {p['compared']} nests "
                     f"({p['unknown']} unknown): before {p['before']} cycles, after {p['after']} cycles{change}")
        limited = [lo for lo in self.loops if lo.time_limited]
        if limited:
            lines.append(f"{len(limited)} nest(s) met the time limit ({', '.join(lo.func for lo in limited)}): "
                         "their outcome depends on machine speed and load; raise time_limit to make it reproducible")
        lines.append(f"solves: {self.solves} run in {self.solve_s:.2f} s of solver time, "
                     f"{sum(lo.reused for lo in self.loops)} reused; {self.rounds} rounds on "
                     f"{self.workers} worker(s); wall time {self.wall_s:.2f} s"
                     + (" (" + ", ".join(f"{k} {v:.2f} s" for k, v in self.phases.items()) + ")" if self.phases else ""))
        lines.append("| function | loops | outcome | staging | ii before | ii after | trips | solves | solve s |")
        lines.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for lo in self.loops:
            lines.append(f"| {lo.func} | {', '.join(lo.loops)} | {lo.status} | {lo.staging or '-'} | "
                         f"{_num(lo.ii_before)} | {_num(lo.ii_after)} | {_num(lo.trip_count)} | {lo.solves} | "
                         f"{lo.solve_s:.2f} |")
        return "\n".join(lines)


def _num(v) -> str:
    return "?" if v is None else str(v)
