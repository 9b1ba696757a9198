"""The solver packages, imported lazily, with one fix-it message when missing."""
from __future__ import annotations

from ..errors import SolverUnavailableError

#: The pinned versions (pyproject.toml): solver versions decide which optimal schedule is returned.
PINS = {"z3": "z3-solver==5.4.0.0", "pulp": "pulp==3.3.2"}


def _missing(module: str, what: str) -> SolverUnavailableError:
    dist = PINS[module]
    return SolverUnavailableError(f"{what} needs the Python package {dist.split('==')[0]}, which is not "
                                  f"installed: pip install {dist}")


# The imports are spelled out (not ``__import__(name)``) so that tests/test_architecture.py
# sees which third-party packages the solvers use.
def load_z3(what: str = "the default solver"):
    """The z3 module, or SolverUnavailableError naming ``what`` needs it and the fix."""
    try:
        import z3
    except ImportError:
        raise _missing("z3", what) from None
    return z3


def load_pulp(what: str = "cost normalization"):
    """The pulp module, or SolverUnavailableError naming ``what`` needs it and the fix."""
    try:
        import pulp
    except ImportError:
        raise _missing("pulp", what) from None
    return pulp
