"""tvm_twill: provably optimal software pipelining and warp specialization for TVM.

Layers (imports point one way): ``model`` (pure Python) <- ``solvers`` <-
``frontend`` / ``transforms`` (TVM) <- ``api`` / ``cli``.  TVM-facing names are
loaded lazily so the solver works without TVM installed.
"""
from .errors import (FormatError, GraphError, InfeasibleError, InputError, MachineError,
                     SolverTimeoutError, SolverUnavailableError, TwillError, UnsupportedLoopError,
                     UnsupportedTargetError)
from .model import Edge, Graph, Machine, Op, Schedule, check, get_machine

__version__ = "0.1.0"

_LAZY = {"solve": "tvm_twill.solvers", "auto_pipeline": "tvm_twill.api",
         "evaluate_annotation": "tvm_twill.api"}


def __getattr__(name):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tvm_twill' has no attribute '{name}'")


__all__ = ["Edge", "FormatError", "Graph", "GraphError", "InfeasibleError", "InputError", "Machine",
           "MachineError", "Op", "Schedule", "SolverTimeoutError", "SolverUnavailableError", "TwillError",
           "UnsupportedLoopError", "UnsupportedTargetError", "auto_pipeline", "check",
           "evaluate_annotation", "get_machine", "solve"]
