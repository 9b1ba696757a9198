"""Progress lines of ``auto_pipeline`` on stderr, for plans that run longer than ``AFTER`` seconds: a fast
plan prints nothing, a slow one (a warp-specialized plan takes several seconds) is not silent.

``begin(what)`` announces a step that may take long: its line is printed when the plan reaches ``AFTER``
seconds while the step still runs (a timer), or at once if the plan already has; ``step(what)`` reports a
finished step, once the plan has run ``AFTER`` seconds.  ``quiet=True`` prints nothing; ``close()`` cancels
a pending line (the plan ended first)."""
from __future__ import annotations

import sys
import threading
import time

__all__ = ["AFTER", "PlanProgress"]

#: Seconds a plan runs before its steps are reported.
AFTER = 1.0


class PlanProgress:
    """Lines ``tvm_twill: loop 'k': <what> (<seconds>s)`` on ``stream`` (stderr); see the module doc."""

    def __init__(self, loop: str, quiet: bool = False, stream=None):
        self.loop, self.quiet, self.stream = loop, quiet, stream
        self.start = time.monotonic()
        self._timer = None
        self._lock = threading.Lock()

    def _say(self, what: str) -> None:
        with self._lock:
            print(f"tvm_twill: loop '{self.loop}': {what} ({time.monotonic() - self.start:.1f}s)",
                  file=self.stream or sys.stderr, flush=True)

    def begin(self, what: str) -> None:
        self.close()
        if self.quiet:
            return
        wait = AFTER - (time.monotonic() - self.start)
        if wait <= 0:
            self._say(what)
            return
        self._timer = threading.Timer(wait, self._say, [what])
        self._timer.daemon = True
        self._timer.start()

    def step(self, what: str) -> None:
        self.close()
        if not self.quiet and time.monotonic() - self.start >= AFTER:
            self._say(what)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
