"""``build``: compile a module as its plans planned it (the one way from a plan to a kernel).

A plan's annotations need more than ``tvm.compile(mod, target)``: async
stages become cp.async only under ``PassContext(config={"tirx.use_async_copy":
1})`` (without it TVM keeps the commit / wait calls and emits plain copies),
and a warp-specialized loop is rewritten only by the ``tvm_twill_ws`` TIR
pipeline.  ``build(mod, target, plan)`` sets both from the plans, after
checking that the module carries what each applied plan wrote (a module
taken before ``auto_pipeline`` ran would compile the unplanned loop)::

    plan = tvm_twill.auto_pipeline(sch, k0, "sm_80")
    lib = tvm_twill.build(sch.mod, "sm_80", plan)

or by hand: ``with plan.pass_context(): tvm.compile(sch.mod, target,
tir_pipeline=plan.tir_pipeline or "default")``.
"""
from __future__ import annotations

from .errors import InputError
from .frontend import ASYNC_COPY_CONFIG, parse_target
from .frontend.ir import branches, const_int, tirx, tvm
from .transforms.ws_lowering import WS_PIPELINE, register_pipeline

__all__ = ["build", "check_module_carries", "pass_config", "pass_context", "plan_tree"]


def plan_tree(plans) -> list:
    """The plans and every nested plan (``plan.inner``), outermost first; ``plans``: one plan or a list."""
    if plans is None:
        return []
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
    """InputError unless every applied plan's annotations are on its loop in ``mod``."""
    loops = _loop_annotations(mod)
    for p in plan_tree(plans):
        if not p.applied:
            continue
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
        register_pipeline()
    with pass_context(plans):
        return tvm.compile(mod, target=tgt, tir_pipeline=pipeline or "default")
