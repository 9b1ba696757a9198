"""Progress lines of ``auto_pipeline`` on stderr: one per finished step (extraction, solve, stage fit, warp
specialization) of a plan that has run longer than ``AFTER`` seconds, so a fast plan prints nothing and a
slow one (a warp-specialized plan takes several seconds) is not silent.  ``quiet=True`` turns them off."""
from __future__ import annotations

import sys
import time

__all__ = ["AFTER", "PlanProgress"]

#: Seconds a plan runs before its steps are reported.
AFTER = 1.0


class PlanProgress:
    """``step(what)`` prints ``tvm_twill: loop 'k': <what> (<seconds>s)`` once the plan has run ``AFTER``
    seconds (read when the step ends), unless quiet."""

    def __init__(self, loop: str, quiet: bool = False, stream=None):
        self.loop, self.quiet, self.stream = loop, quiet, stream
        self.start = time.monotonic()

    def step(self, what: str) -> None:
        if self.quiet:
            return
        elapsed = time.monotonic() - self.start
        if elapsed >= AFTER:
            print(f"tvm_twill: loop '{self.loop}': {what} ({elapsed:.1f}s)", file=self.stream or sys.stderr,
                  flush=True)
