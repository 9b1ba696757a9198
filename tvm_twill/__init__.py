"""tvm_twill: provably optimal software pipelining and warp specialization for TVM.

Layers (imports point one way; docs/architecture.md has the checked table):
``model`` (pure Python) at the bottom; ``solvers`` (z3, CBC), ``frontend``
(TVM in) and ``transforms`` (TVM out) each on the model; ``api``,
``metaschedule`` and ``cli`` on top.  TVM-facing names are loaded lazily so
the solver and the CLI work without TVM installed.
"""
from .errors import (FormatError, GraphError, InfeasibleError, InputError, MachineError,
                     NormalizationError, PlotUnavailableError,
                     SolverTimeoutError, SolverUnavailableError, TwillError, UnsupportedLoopError,
                     UnsupportedTargetError)
from .model import Edge, Graph, Machine, Op, Schedule, check, get_machine

__version__ = "0.1.0"

_LAZY = {"solve": "tvm_twill.solvers", "auto_pipeline": "tvm_twill.api", "build": "tvm_twill.compiler",
         "build_checked": "tvm_twill.compiler",
         "evaluate_annotation": "tvm_twill.api", "AutoPipelineOptions": "tvm_twill.api",
         "plan_module": "tvm_twill.integrations.modules", "tile_schedule": "tvm_twill.tiles",
         "TilePlan": "tvm_twill.tiles"}


def __getattr__(name):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name == "dlight":  # tvm_twill.integrations.dlight.AutoPipelined(...) after a plain `import tvm_twill`
        import importlib
        return importlib.import_module("tvm_twill.integrations.dlight")
    raise AttributeError(f"module 'tvm_twill' has no attribute '{name}'")


__all__ = ["AutoPipelineOptions", "Edge", "FormatError", "Graph", "GraphError", "InfeasibleError", "InputError", "Machine",
           "MachineError", "NormalizationError", "Op", "PlotUnavailableError", "Schedule", "SolverTimeoutError", "SolverUnavailableError", "TilePlan", "TwillError",
           "UnsupportedLoopError", "UnsupportedTargetError", "auto_pipeline", "build", "build_checked", "check",
           "evaluate_annotation", "get_machine", "plan_module", "solve", "tile_schedule"]
