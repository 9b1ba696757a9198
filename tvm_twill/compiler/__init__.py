"""``build``: compile a module as its plans planned it (the one way from a plan to a kernel).

A plan needs more than ``tvm.compile(mod, target)``: the async-copy PassContext (without it TVM emits no
cp.async) and its TIR pipeline (``plan.tir_pipeline``).  ``build`` sets both; ``build_checked`` then asks
ptxas (``compiler.ptxas``) and returns the plans re-priced by what it said.  ``sass`` reads the SASS.
docs/transforms.md ("Compiling a plan")::

    plan = tvm_twill.auto_pipeline(sch, k0, "sm_80")
    lib = tvm_twill.build(sch.mod, "sm_80", plan)
"""
from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from ..errors import InputError, ToolchainError
from ..frontend import ASYNC_COPY_CONFIG, parse_target
from ..frontend.ir import branches, const_int, tirx, tvm
from .ptxas import find_nvcc, kernel_registers, parse_ptxas, ptxas_output
from ..transforms.pipelines import WAITS_PIPELINE, WS_PIPELINE, register

__all__ = ["CheckedBuild", "attach_ptxas", "build", "build_checked", "check_module_carries", "pass_config",
           "pass_context", "plan_tree"]


def plan_tree(plans) -> list:
    """The plans and every nested plan (``plan.inner``), outermost first; ``plans``: one plan or a list."""
    if plans is None:
        return []
    if not hasattr(plans, "annotation") and not isinstance(plans, (list, tuple)):
        raise InputError(f"build takes a PipelinePlan or a list of them (what auto_pipeline returns), got "
                         f"{type(plans).__name__}")
    todo = [plans] if hasattr(plans, "annotation") else list(plans)
    out = []
    for p in todo:
        if not hasattr(p, "annotation"):
            raise InputError(f"build takes PipelinePlans (what auto_pipeline returns), got {type(p).__name__}")
        out.append(p)
        out.extend(plan_tree(list(p.inner)))
    return out


def pass_config(plans) -> dict:
    """The PassContext config the plans' annotations need: ``{"tirx.use_async_copy": 1}`` when some applied
    plan has an async stage or a warp-specialized loop (its producer's copies are asynchronous), else {}."""
    for p in plan_tree(plans):
        if p.applied and (p.annotation.async_stages or p.tir_pipeline is not None):
            return {ASYNC_COPY_CONFIG: 1}
    return {}


def pass_context(plans):
    """A ``tvm.transform.PassContext`` with ``pass_config(plans)``: ``with pass_context(plan): tvm.compile(...)``.
    It keeps the caller's context (opt level, disabled passes, instruments, config; e.g. a kernel that needs
    ``tirx.disable_cse_tir``) and adds the plans' config to it."""
    outer = tvm.transform.PassContext.current()
    config = {str(k): v for k, v in (outer.config or {}).items()}
    config.update(pass_config(plans))
    return tvm.transform.PassContext(opt_level=outer.opt_level, required_pass=list(outer.required_pass),
                                     disabled_pass=list(outer.disabled_pass), instruments=list(outer.instruments),
                                     config=config)


def _tir_pipeline(plans) -> str | None:
    names = sorted({p.tir_pipeline for p in plan_tree(plans) if p.tir_pipeline is not None})
    if len(names) > 1 and WAITS_PIPELINE in names:  # every other tvm_twill pipeline has the wait guard too
        names.remove(WAITS_PIPELINE)
    if len(names) > 1:
        raise InputError(f"the plans need different TIR pipelines {names}: build one module per pipeline")
    return names[0] if names else None


def _loop_annotations(mod) -> dict:
    """loop name -> {annotation key: value as Python ints} for every loop of every PrimFunc of ``mod``."""
    found: dict = {}

    def value(v):
        if isinstance(v, (list, tuple)) or hasattr(v, "__len__") and not isinstance(v, str):
            return [const_int(x) if const_int(x) is not None else x for x in v]
        return const_int(v) if const_int(v) is not None else v

    def walk(stmt):
        if isinstance(stmt, tirx.For):
            found.setdefault(stmt.loop_var.name, []).append(
                {str(k): value(v) for k, v in (stmt.annotations or {}).items()})
        for c in branches(stmt):  # a loop under a guard too (TVM's tile-walk kernels nest their KV loop so)
            walk(c)

    for _, func in mod.functions_items():
        if isinstance(func, tirx.PrimFunc):
            walk(func.body)
    return found


def check_module_carries(mod, plans) -> None:
    """InputError unless every applied plan's annotations are on its loop in ``mod`` (with the expected wait
    counts of a plan whose TVM counts the guard lowers: ``plan.tvm_waits``)."""
    loops = _loop_annotations(mod)
    for p in plan_tree(plans):
        if not p.applied:
            continue
        # with the wait guard's keys where TVM's counts are too large (transforms.wait_counts)
        want = {k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in p.annotations.items()}
        if not any(all(have.get(k) == v for k, v in want.items()) for have in loops.get(p.loop, [])):
            raise InputError(f"the module does not carry the plan of loop '{p.loop}' ({want}): pass the module "
                             "of the schedule auto_pipeline annotated (sch.mod after the call)")


def build(mod, target, plans=None):
    """``tvm.compile`` of ``mod`` (an IRModule, PrimFunc or s_tir Schedule) for ``target`` (a Target or an arch
    string) with what ``plans`` (one PipelinePlan or a list) need: the async-copy PassContext and the plan's TIR
    pipeline.  Returns TVM's runtime module (``lib.mod.imports[0].inspect_source()`` is the CUDA).

    Raises InputError when an applied plan's annotations are not on its loop in ``mod``, or when the plans
    need two different TIR pipelines."""
    if hasattr(mod, "mod") and hasattr(mod, "get_sblock"):  # an s_tir Schedule
        mod = mod.mod
    if isinstance(mod, tirx.PrimFunc):
        mod = tvm.IRModule({"main": mod})
    if not isinstance(mod, tvm.IRModule):
        raise InputError(f"build takes an IRModule, a PrimFunc or a Schedule, got {type(mod).__name__}")
    _, tgt = parse_target(target)
    check_module_carries(mod, plans)
    pipeline = _tir_pipeline(plans)
    if pipeline == WS_PIPELINE:
        register(WS_PIPELINE)
    with pass_context(plans):
        return tvm.compile(mod, target=tgt, tir_pipeline=pipeline or "default")


class CheckedBuild(NamedTuple):
    """What ``build_checked`` returns: TVM's runtime module and the plans as ptxas re-priced them (the same
    shape as given: one plan, a list of plans, or None)."""

    lib: object
    plans: object


def build_checked(mod, target, plans=None) -> CheckedBuild:
    """``build(mod, target, plans)``, then ptxas on the CUDA it compiled (``nvcc -cubin -Xptxas -v`` for the
    target's arch, once): each plan comes back ``with_ptxas`` (its messages, and the registers per thread of
    its function's kernel when ptxas names one: ``<func>_kernel``, or the only kernel).  Without nvcc on PATH
    the plans come back unchanged.  The given plans are not modified (they are frozen): use the returned
    ones.  Raises what ``build`` raises, and ToolchainError when nvcc rejects TVM's CUDA."""
    lib = build(mod, target, plans)
    if plans is None or find_nvcc() is None:
        return CheckedBuild(lib, plans)
    arch, _ = parse_target(target)
    text = ptxas_output(lib.mod.imports[0].inspect_source(), arch)
    if text is None:  # nvcc went away between the two look-ups
        return CheckedBuild(lib, plans)
    regs = kernel_registers(text)

    def one(p):
        return attach_ptxas(p, text, registers=_registers_of(p.extraction.func, regs))

    return CheckedBuild(lib, one(plans) if hasattr(plans, "annotation") else [one(p) for p in plans])


def _registers_of(func: str, regs: dict) -> int | None:
    """The registers of ``func``'s kernel (TVM names it ``<func>_kernel``), or of the only kernel; None when
    ptxas names several and none is ``func``'s."""
    mine = [r for name, r in regs.items() if name == f"{func}_kernel" or name.startswith(f"{func}_kernel_")]
    if len(mine) == 1:
        return mine[0]
    return next(iter(regs.values())) if len(regs) == 1 else None


def attach_ptxas(plan, messages=None, *, source: str | None = None, registers: int | None = None):
    """``PipelinePlan.with_ptxas``: ``plan`` with ptxas's messages (its output as text, or
    ``PtxasMessage``s) or with what ptxas says of ``source`` (compiled here for the plan's arch), and its
    registers per thread (``registers``; else the count ptxas's text gives when it names one kernel)."""
    if (messages is None) == (source is None):
        raise InputError("with_ptxas takes ptxas's messages or the kernel's CUDA source (one of them)")
    if registers is not None and (isinstance(registers, bool) or not isinstance(registers, int)
                                  or not 1 <= registers <= 255):
        raise InputError(f"registers must be ptxas's registers per thread, an integer from 1 to 255, "
                         f"got {registers!r}")
    text = None
    if source is not None:
        text = ptxas_output(source, plan.arch)
        if text is None:
            raise ToolchainError("with_ptxas(source=...) needs nvcc on PATH: install the CUDA toolkit, "
                                 "or pass ptxas's output as messages")
    elif isinstance(messages, str):
        text = messages
    parsed = parse_ptxas(text) if text is not None else tuple(messages)
    if registers is None and text is not None:
        regs = kernel_registers(text)
        registers = next(iter(regs.values())) if len(regs) == 1 else None
    return replace(plan, ptxas=tuple(parsed), ptxas_registers=registers)
