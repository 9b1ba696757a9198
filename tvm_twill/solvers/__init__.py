"""Solver backends on the model: z3 joint SWP+WS (default), pulp/CBC modulo
scheduling and cost normalization, and the paper-faithful z3 encoding.

``Deadline`` (``limits``) is the one wall-clock limit of a solve; ``Family``
(``families``) names the constraint families."""
from .families import Family
from .limits import Deadline
from .search import Prepared, SolveOptions, default_max_ii, prepare, solve, solve_prepared

__all__ = ["Deadline", "Family", "Prepared", "SolveOptions", "default_max_ii", "prepare", "solve",
           "solve_prepared"]
