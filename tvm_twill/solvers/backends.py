"""The solver packages, imported lazily, with one fix-it message when missing."""
from __future__ import annotations

from ..errors import SolverUnavailableError

#: The pinned versions (pyproject.toml): solver versions decide which optimal schedule is returned.
PINS = {"z3": "z3-solver==5.4.0.0", "pulp": "pulp==3.3.2"}


def _load(module: str, what: str):
    try:
        return __import__(module)
    except ImportError:
        dist = PINS[module]
        raise SolverUnavailableError(f"{what} needs the Python package {dist.split('==')[0]}, which is not "
                                     f"installed: pip install {dist}") from None


def load_z3(what: str = "the default solver"):
    """The z3 module, or SolverUnavailableError naming ``what`` needs it and the fix."""
    return _load("z3", what)


def load_pulp(what: str = "cost normalization"):
    """The pulp module, or SolverUnavailableError naming ``what`` needs it and the fix."""
    return _load("pulp", what)
