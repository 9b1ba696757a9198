"""Typed errors of tvm_twill.

Every user-facing failure is one of these, with a one-line message that says
what is wrong and what to do.  ``exit_code`` is what the CLI returns for it:
2 for invalid input, 3 for a well-formed problem that has no answer (infeasible
or timed out).  ``assert`` is kept for internal invariants only.
"""
from __future__ import annotations


class TwillError(Exception):
    """Base class of every error tvm_twill raises on purpose."""

    exit_code = 1


class InputError(TwillError, ValueError):
    """Invalid input: a malformed graph, machine, schedule or option."""

    exit_code = 2


class FormatError(InputError):
    """A JSON document that is not valid for its declared format."""


class GraphError(InputError):
    """A dependence graph that breaks a structural rule."""


class MachineError(InputError):
    """An unknown or malformed machine description."""


class SolverUnavailableError(TwillError, ImportError):
    """A solver backend whose Python package is missing."""

    exit_code = 2


class ToolchainError(TwillError, RuntimeError):
    """An external tool the package runs (nvcc) is missing or rejected its input."""

    exit_code = 2


class InfeasibleError(TwillError):
    """No schedule exists under the model (for any ii, or within the search).

    ``family`` names the constraint family that rules it out: one of the
    strings of ``tvm_twill.model.families.Family`` (``"registers"``,
    ``"memory"``, ``"blocking sync"``, ...), or None when none is known.
    """

    exit_code = 3

    def __init__(self, message: str, family: str | None = None, attempts=()):
        super().__init__(message)
        self.family = family
        self.attempts = tuple(attempts)


class SolverTimeoutError(TwillError):
    """The solver ran out of time before it proved an answer."""

    exit_code = 3

    def __init__(self, message: str, attempts=()):
        super().__init__(message)
        self.attempts = tuple(attempts)


class UnsupportedLoopError(TwillError, ValueError):
    """A TIR loop that tvm_twill cannot pipeline (control flow, dynamic extent...)."""

    exit_code = 2


class WaitCountError(UnsupportedLoopError):
    """A pipelined loop whose cp.async wait counts TVM emits cannot be checked or corrected against the
    counts tvm_twill computes (``transforms.wait_counts``): compiling it could read copies still in flight."""


class UnsupportedTargetError(TwillError, ValueError):
    """A target that has no machine model or no async copy."""

    exit_code = 2


class PlotUnavailableError(TwillError, ImportError):
    """Pictures were asked for but matplotlib is not installed."""

    exit_code = 2


class NormalizationError(InputError):
    """Cost normalization distorts the cost ratios more than the caller allows (``--strict-normalization``)."""


class EmulationError(TwillError):
    """PTX the CPU emulator (tvm_twill.emulator) cannot execute: an unknown instruction or form, with its PTX line."""

    exit_code = 2
