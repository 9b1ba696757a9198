"""Progress reports of a solve, and the anytime answer's gap.

``solve(..., progress=callback)`` (or ``SolveOptions(progress=...)``) calls
``callback(Progress)`` at each step of the search: after the incumbent
heuristic, before each ii the exact search decides, when the tie-breaks
start, and once at the end.  ``StderrProgress`` is the CLI's printer: it
stays silent for solves shorter than ``after`` seconds (default 1) and
then prints one line per report.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass


def gap(ii: int, lower_bound: int) -> float:
    """(ii - lower bound) / ii: how far a schedule may be from the optimum (0: proven optimal)."""
    return max(0.0, (ii - lower_bound) / ii) if ii else 0.0


@dataclass(frozen=True)
class Progress:
    """One progress report.

    ``phase``: ``"incumbent"`` (the heuristic's schedule is in hand),
    ``"proving"`` (the exact search decides ``ii``), ``"tie-breaks"`` (ii is
    proven optimal; shortest length etc.), ``"done"``, then with ``top_k``
    ``"top-k"`` (the next best schedules are sought at ``ii``).  ``incumbent``: ii of
    the best valid schedule so far (None: none yet); ``lower_bound``: every ii
    below it is proven impossible; ``elapsed``: seconds since the solve began.
    """

    phase: str
    elapsed: float
    lower_bound: int
    incumbent: int | None = None
    ii: int | None = None

    @property
    def gap(self) -> float | None:
        return None if self.incumbent is None else gap(self.incumbent, self.lower_bound)

    def line(self) -> str:
        inc = "none yet" if self.incumbent is None else f"ii={self.incumbent}"
        g = "" if self.gap is None else f" (gap {100 * self.gap:.1f}%)"
        what = {"incumbent": "heuristic done", "proving": f"proving ii={self.ii}",
                "tie-breaks": f"ii={self.ii} optimal, tie-breaks", "done": "done",
                "top-k": f"the next best schedules at ii={self.ii}"}.get(self.phase, self.phase)
        return f"[{self.elapsed:6.1f}s] {what}; incumbent {inc}, lower bound {self.lower_bound}{g}"


class StderrProgress:
    """A progress callback that prints ``Progress.line()`` to ``stream`` (stderr) once the
    solve has run ``after`` seconds; earlier reports are dropped."""

    def __init__(self, prefix: str = "", after: float = 1.0, stream=None):
        self.prefix, self.after, self.stream = prefix, after, stream

    def __call__(self, p: Progress) -> None:
        if p.elapsed < self.after:
            return
        print(self.prefix + p.line(), file=self.stream or sys.stderr, flush=True)
