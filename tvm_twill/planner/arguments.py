"""The arguments of the TVM entry points, checked in one place: one typed line per bad argument.

``check_options`` validates every field of an ``api.AutoPipelineOptions`` (its ``__post_init__`` calls
it, so ``auto_pipeline``, ``plan_module``, ``metaschedule.replan_pipelines`` and ``dlight.AutoPipelined``
refuse the same values the same way); ``check_call`` the schedule, loop(s) and target that
``auto_pipeline`` and ``evaluate_annotation`` take; ``options_of`` the ``options`` object with its
keywords.  Each raises InputError (what is wrong, what to pass instead) before any work is done; a
target of the right type that tvm_twill cannot plan for is ``parse_target``'s UnsupportedTargetError.
"""
from __future__ import annotations

import math

from ..errors import InputError
from ..frontend import parse_target
from ..frontend.ir import s_tir, tirx, tvm
from ..model import Machine, get_machine
from ..model.canonical import MAX_TOP_K
from .depth import check_max_stages
from .warpspec import WS_CHOICES

__all__ = ["check_call", "check_model", "check_options", "options_of", "seconds"]

_CACHE_METHODS = ("extract", "solve", "verify")


def check_model(machine, quantum) -> None:
    """``machine``: None, a Machine or a built-in name; ``quantum``: None or an int >= 1."""
    if machine is not None:
        if not isinstance(machine, (str, Machine)):
            raise InputError(f"machine must be a tvm_twill.Machine or a built-in machine name such as 'h100' "
                             f"(None: the target's model), got {type(machine).__name__}")
        get_machine(machine)  # MachineError (an InputError) for an unknown name
    if quantum is not None and (isinstance(quantum, bool) or not isinstance(quantum, int) or quantum < 1):
        raise InputError(f"quantum must be an integer >= 1 (cycles per model time unit; None: the front-end's), "
                         f"got {quantum!r}")


def check_options(opts) -> None:
    """InputError for the first bad field of ``opts`` (an AutoPipelineOptions); ``time_limit=None`` is
    stored as ``math.inf`` (no limit), what the solvers read as no deadline."""
    check_model(opts.machine, opts.quantum)
    limit = opts.time_limit
    if limit is None:
        object.__setattr__(opts, "time_limit", math.inf)  # frozen: set once, while it is being built
    elif isinstance(limit, bool) or not isinstance(limit, (int, float)) or math.isnan(limit) or limit < 0:
        raise InputError(f"time_limit must be a number of seconds >= 0 (None: no limit), got {limit!r}")
    for name in ("apply", "verify", "quiet"):
        if not isinstance(getattr(opts, name), bool):
            raise InputError(f"{name} must be True or False, got {getattr(opts, name)!r}")
    check_max_stages(opts.max_stages)
    ws = opts.warp_specialize
    if not any(ws is c or ws == c for c in WS_CHOICES) or isinstance(ws, int) and not isinstance(ws, bool):
        raise InputError(f"warp_specialize must be False, True or 'auto', got {ws!r}")
    if opts.cache is not None and not all(callable(getattr(opts.cache, n, None)) for n in _CACHE_METHODS):
        raise InputError(f"cache must be a tvm_twill.planner.cache.PlanCache (None: no cache), got {type(opts.cache).__name__}")
    k = opts.top_k
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_TOP_K:
        raise InputError(f"top_k must be an integer from 1 to {MAX_TOP_K} (how many annotations to plan), got {k!r}")


def options_of(cls, options, option_kw: dict, who: str):
    """``options`` (a ``cls`` or None: the defaults) with the keyword options ``option_kw`` replaced."""
    if options is not None and not isinstance(options, cls):
        raise InputError(f"{who}: options must be a tvm_twill.AutoPipelineOptions (or None), got "
                         f"{type(options).__name__}: pass the options as keywords, e.g. {who}(..., time_limit=5)")
    return (options if options is not None else cls()).replace(**option_kw)


def check_call(who: str, sch, loop, target, *, nested: bool = True, machine=None, quantum=None) -> None:
    """The schedule, the loop (or, ``nested``, a list of loops), the target, ``machine`` and ``quantum``
    of ``who``'s call."""
    if not isinstance(sch, s_tir.Schedule):
        hint = " (wrap it: tvm.s_tir.Schedule(mod))" if isinstance(sch, (tvm.IRModule, tirx.PrimFunc)) else ""
        raise InputError(f"{who} takes a tvm.s_tir.Schedule, got {type(sch).__name__}{hint}: pass the schedule "
                         "and loops of it (sch.get_loops(...) or loop names)")
    loops = list(loop) if nested and isinstance(loop, (list, tuple)) else [loop]
    bad = [lp for lp in loops if not isinstance(lp, (str, s_tir.schedule.LoopRV))]
    if bad:
        what = "a LoopRV (sch.get_loops(...)) or a loop name" + (", or a list of them [outer, inner]" if nested else "")
        raise InputError(f"{who}: loop must be {what}, got {type(bad[0]).__name__}")
    if not isinstance(target, (str, tvm.target.Target)):
        raise InputError(f"{who}: target must be a tvm.target.Target or an arch string such as 'sm_90a', got "
                         f"{type(target).__name__}")
    parse_target(target)  # UnsupportedTargetError (one line) for a target tvm_twill cannot plan for
    check_model(machine, quantum)


def seconds(limit: float, code: bool = False) -> str:
    """A time limit for a message (``10s``; ``none``: no limit) or, ``code``, as Python (``float('inf')``)."""
    if limit == math.inf:
        return "float('inf')" if code else "none"
    return repr(limit) if code else f"{limit:g}s"
