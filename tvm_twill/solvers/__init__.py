"""Solver backends on the model: z3 joint SWP+WS (default), pulp/CBC modulo
scheduling and cost normalization, and the paper-faithful z3 encoding."""
from .search import Prepared, SolveOptions, default_max_ii, prepare, solve, solve_prepared

__all__ = ["Prepared", "SolveOptions", "default_max_ii", "prepare", "solve", "solve_prepared"]
