"""One wall-clock deadline per solve, and the deterministic z3 budgets.

Two kinds of limit, kept apart on purpose:

* ``Deadline``: the caller's ``time_limit`` in wall-clock seconds, created
  once per ``solve`` (or passed in) and threaded through every step that can
  take time: the normalization ZLP (CBC's time limit), building the z3 model,
  every z3 query, unsat-core minimization, the tie-breaks and the final
  check.  When it passes, the solver raises ``SolverTimeoutError``; it never
  returns a different answer because time ran out.
* z3's ``rlimit`` (a count of internal operations, the same on every machine
  for the pinned z3 version): it bounds the optional work, i.e. unsat-core
  minimization and the tie-breaks among schedules at the optimal ii.  A
  query that exhausts its rlimit ends that step the same way on a fast and a
  slow machine, so the schedule returned does not depend on machine speed.

On this project's 2-core x86 reference server z3 counts 2.5 to 15 million
rlimit units per second (2.5 million on the 20-op FlashAttention graphs), so
a core trial costs at most about 0.2 s there and all tie-breaks of one solve
at most about 8 s; a slower machine takes longer for the same answer.
"""
from __future__ import annotations

import time as _time

from ..errors import InputError, SolverTimeoutError

#: rlimit of one unsat-core minimization query (a core element is dropped only
#: when z3 proves the rest unsat within it).
CORE_RLIMIT = 500_000
#: rlimit of one shortest-length query (galloping / bisection on the length).
LENGTH_RLIMIT = 5_000_000
#: rlimit of one register-peak or latest-issue-times query.
TIE_BREAK_RLIMIT = 1_000_000
#: rlimit of all tie-break queries of one solve together (length, registers, times).
TIE_BREAK_TOTAL_RLIMIT = 20_000_000
#: rlimit of one window re-solve of a structural incumbent (``incumbents``: a few ops free, the rest fixed).
WINDOW_RLIMIT = 2_000_000
#: rlimit of each query of the scan at a structural incumbent's ii: the scan's own queries there, so that
#: when z3 answers within it the answer is the one the scan would have found without the incumbent.
CONFIRM_RLIMIT = 2_000_000


def _clock() -> float:
    """The clock every Deadline reads (a module function, so tests can replace it)."""
    return _time.monotonic()


class Deadline:
    """``seconds`` of wall-clock time from now (``None``: no limit).

    ``left()`` is what remains (never negative), ``expired()`` whether it has
    passed, ``check(doing)`` raises SolverTimeoutError naming what was going
    on, and ``elapsed()`` the seconds since it was created.  ``clock``: a
    function returning seconds (default: the module's ``_clock``, monotonic
    time); a test passes a fake one that advances at every read, so "time
    runs out at the k-th check" is exact.  ``reads`` counts the clock reads.
    """

    __slots__ = ("limit", "start", "at", "clock", "reads")

    def __init__(self, seconds: float | None, *, clock=None):
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                    or seconds != seconds or seconds < 0):
            raise InputError(f"time limit must be a number of seconds >= 0, got {seconds!r}")
        self.clock = clock
        self.reads = 0
        self.limit = seconds
        self.start = self._now()
        self.at = None if seconds is None else self.start + seconds

    def _now(self) -> float:
        self.reads += 1
        return (self.clock or _clock)()

    @classmethod
    def of(cls, deadline: "Deadline | None", time_limit: float | None) -> "Deadline":
        """``deadline`` if given, else a new one of ``time_limit`` seconds."""
        return deadline if deadline is not None else cls(time_limit)

    def left(self) -> float:
        return float("inf") if self.at is None else max(0.0, self.at - self._now())

    def expired(self) -> bool:
        return self.at is not None and self._now() >= self.at

    def elapsed(self) -> float:
        return self._now() - self.start

    def message(self, doing: str) -> str:
        return f"time limit {self.limit:g} s reached {doing}: raise the time limit (--time-limit)"

    def check(self, doing: str, attempts=()) -> None:
        """Raise SolverTimeoutError (one line: ``doing``, then the fix) if the deadline passed."""
        if self.expired():
            raise SolverTimeoutError(self.message(doing), attempts)

    def ending_earlier(self, seconds: float) -> "Deadline":
        """This deadline ``seconds`` sooner (its clock reads count here too): a phase that may
        run to its deadline leaves the caller time to finish, e.g. to check the answer."""
        d = Deadline.__new__(Deadline)
        d.limit, d.start, d.reads = self.limit, self.start, 0
        d.clock = self._now
        d.at = None if self.at is None else self.at - seconds
        return d

    def z3_ms(self, cap: float | None = None) -> int:
        """Milliseconds for z3's own ``timeout`` parameter (0: none; >= 1 otherwise)."""
        left = self.left() if cap is None else min(self.left(), cap)
        return 0 if left == float("inf") else max(1, int(left * 1000))


def z3_unknown(reason: str, *, rlimit: int = 0, rlimit_used: int = 0, seconds: float = 0.0,
               allowed: float | None = None) -> str:
    """Classify z3's ``unknown``: ``"timeout"`` (wall clock) or ``"budget"`` (rlimit).

    z3 catches SIGINT while it searches and returns unknown ("interrupted from
    keyboard", or "canceled"); that becomes KeyboardInterrupt here, never a
    false time-out.  z3 also says "canceled" when its own timeout or the
    rlimit stops it, so "canceled" counts as Ctrl-C only when neither was
    reached: ``rlimit_used`` < ``rlimit`` and ``seconds`` (the query's wall
    time) < ``allowed`` (the seconds z3 was given; None: no limit).
    """
    low = reason.lower()
    if "interrupt" in low or "keyboard" in low:
        raise KeyboardInterrupt
    if rlimit and rlimit_used >= rlimit:
        return "budget"
    if low == "timeout" or (allowed is not None and seconds >= 0.9 * allowed):
        return "timeout"
    if "canceled" in low or "cancelled" in low:
        raise KeyboardInterrupt
    return "timeout"
