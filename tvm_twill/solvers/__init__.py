"""Solver backends on the model: z3 joint SWP+WS (default), pulp/CBC modulo
scheduling and cost normalization, and the paper-faithful z3 encoding.

``Deadline`` (``limits``) is the one wall-clock limit of a solve; ``Family``
(``model.families``) names the constraint families.  docs/solver.md."""
from ..model.families import Family
from .limits import Deadline
from .memo import SolveCache, graph_key
from .search import Prepared, SolveOptions, default_max_ii, prepare, solve, solve_prepared

__all__ = ["Deadline", "Family", "Prepared", "SolveCache", "SolveOptions", "default_max_ii", "graph_key", "prepare",
           "solve", "solve_prepared"]
