"""dlight schedules with optimal software pipelines.

TVM's dlight ``gpu.Matmul`` rule schedules fp16 GEMMs on tensor cores (it
hands them to ``MatmulTensorization``: wmma) with a fixed nested pipeline,
stages [0, 0, 0, 0, 0, 1, 1] on the outer k loop and [0, 0, 1] on the inner
one, and stages its global->shared copies through registers
(``tirx.manifest_shared_memory_local_stage``: TVM splits each copy into a
global->local load and a local->shared store before it pipelines the loop).
``AutoPipelined(rule)`` applies the rule, then re-plans every pipeline nest
the rule wrote with ``auto_pipeline``::

    import tvm.s_tir.dlight as dl
    with tvm.target.Target({"kind": "cuda", "arch": "sm_80"}):
        mod = dl.ApplyDefaultSchedule(tvm_twill.integrations.dlight.AutoPipelined(dl.gpu.Matmul()))(mod)

A nest whose copies are staged through registers is planned twice: as dlight
wrote it, and with direct global->shared copies (the staging annotation
removed), which cp.async runs on sm_80 and newer.  The plan with the smaller
model ii is kept; on a tie the direct copies, which hold no staging
registers (``staging="registers"`` or ``"direct"`` plans only that variant).  A nest that cannot be planned keeps dlight's annotations, and
the reason is logged (logger ``tvm_twill.integrations.dlight``); so does a target
tvm_twill has no model for (the rule's schedule is returned unchanged), and
a schedule without a pipeline (INFO: nothing to re-plan).

dlight's ``Matmul`` reads the arch with ``check_sm_version``, which takes
digits only: on "sm_90a" it gets -1, writes a schedule without tensor cores
and no pipeline.  ``AutoPipelined`` hands the rule the same target with the
plain arch ("sm_90": the suffix only adds instructions dlight's schedules do
not use) and plans the pipelines for the arch asked for ("sm_90a"), saying
so at INFO.  Plans run with ``quiet=True`` (no progress lines from inside
dlight).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from ..api import PipelinePlan, auto_pipeline
from ..errors import InputError
from ..frontend import (dlight_target, local_stage_blocks, loop_rv, parse_target, pipeline_nests, resolve_loop,
                       scratch_schedule)
from ..frontend.ir import dlight_schedule_rule_base
from ..transforms import apply_annotation, remove_annotation
from ..transforms.wait_counts import annotate_expected_waits
from .common import drop_staging, reason_of

__all__ = ["STAGING", "AutoPipelined", "NestReplan", "replan_schedule"]

#: The ``staging`` choices: plan both variants and keep the better, or only one of them.
STAGING = ("best", "registers", "direct")

log = logging.getLogger("tvm_twill.dlight")  # the public name (the module moved, the log did not)
_ScheduleRule = dlight_schedule_rule_base()


@dataclass(frozen=True)
class NestReplan:
    """What happened to one pipeline nest (loop names outermost first).

    ``plan``: the plan written on the schedule (None: the nest kept its
    annotations, ``reason`` says why); ``staging``: "direct" (copies made
    global->shared, cp.async-capable), "registers" (staged through registers,
    as dlight wrote them) or "none" (the nest had no staged copies);
    ``alternatives``: model ii in cycles of each variant planned.
    """

    loops: tuple[str, ...]
    plan: PipelinePlan | None
    staging: str
    reason: str = ""
    alternatives: tuple[tuple[str, int], ...] = ()


def replan_schedule(sch, target, *, machine=None, time_limit: float = 10.0, staging: str = "best") -> list[NestReplan]:
    """Re-plan every software-pipeline nest of ``sch`` (a dlight-scheduled function) in place.

    Loops nested in one another are planned together, innermost first (as
    ``auto_pipeline(sch, [outer, inner], target)``).  ``staging``: for copies
    staged through registers, "best" (plan both variants, keep the smaller
    ii), "registers" (keep dlight's staging) or "direct" (global->shared).
    Returns one ``NestReplan`` per nest.  Raises UnsupportedTargetError for a
    target tvm_twill has no model for.
    """
    _check_staging(staging)
    parse_target(target)  # refuse an unsupported target before any work
    return [_replan_nest(sch, nest, target, machine, time_limit, staging) for nest in pipeline_nests(sch)]


def _check_staging(staging) -> None:
    if staging not in STAGING:
        raise InputError(f"staging must be one of {list(STAGING)}, got {staging!r}")


def _replan_nest(sch, nest, target, machine, time_limit, staging) -> NestReplan:
    """Plan one nest (LoopRefs, outermost first) on scratch copies, write the better variant on ``sch``.

    Loops are handled by reference (``loop_rv`` on each scratch schedule, the nest's own LoopRVs on
    ``sch``); any failure keeps dlight's annotations, its reason logged and returned."""
    names = tuple(r.name for r in nest)
    try:
        staged = bool(local_stage_blocks(sch, nest[0]))
    except Exception as err:  # noqa: BLE001 - dlight's schedule is kept whatever happens here
        return _kept(names, "none", reason_of(err))
    variants = ("none",) if not staged else (("registers", "direct") if staging == "best" else (staging,))
    tried, failures = [], []
    for variant in variants:
        try:
            trial = scratch_schedule(sch)  # the same IR: planning here leaves sch alone
            rvs = [loop_rv(trial, r.node) for r in nest]
            if variant == "direct":
                drop_staging(trial, resolve_loop(trial, rvs[0]))
            plan = auto_pipeline(trial, rvs if len(rvs) > 1 else rvs[0], target, machine=machine,
                                 time_limit=time_limit, quiet=True)  # no progress lines from inside dlight
        except Exception as err:  # noqa: BLE001 - one variant failing is said, not raised
            failures.append(f"{variant}: {reason_of(err)}")
            continue
        tried.append((variant, plan))
    alternatives = tuple((v, p.ii_cycles) for v, p in tried)
    if not tried:
        return _kept(names, "registers" if staged else "none", "; ".join(failures))
    for f in failures:
        log.info("pipeline nest %s: variant not planned (%s)", list(names), f)
    # the smaller ii; on a tie the direct copies (no staging registers)
    variant, plan = min(tried, key=lambda vp: (vp[1].ii_cycles, vp[0] == "registers"))
    try:
        _write(sch, nest, plan, variant)
    except Exception as err:  # noqa: BLE001 - pragma: no cover - the plan was applied on the same IR
        return _kept(names, "registers" if staged else "none", f"writing the plan failed: {reason_of(err)}")
    log.info("pipeline nest %s re-planned (%s copies): ii %d cycles (%s)", list(names), variant,
             plan.ii_cycles, ", ".join(f"{v} {ii}" for v, ii in alternatives))
    return NestReplan(loops=names, plan=plan, staging=variant, alternatives=alternatives)


def _kept(names, staging, reason) -> NestReplan:
    log.warning("pipeline nest %s keeps dlight's annotation: %s", list(names), reason)
    return NestReplan(loops=names, plan=None, staging=staging, reason=reason)


def _write(sch, nest, plan, variant) -> None:
    """Write ``plan`` (outermost; ``plan.inner`` innermost first, as ``auto_pipeline`` orders a nest) on the
    nest's own loops of ``sch``."""
    if variant == "direct":
        drop_staging(sch, nest[0])
    inner_first = sorted(range(len(nest)), key=lambda i: -len(nest[i].ancestors))  # auto_pipeline's order
    for i, p in zip(inner_first, (*plan.inner, plan)):
        rv = nest[i].rv
        if p.applied:
            apply_annotation(sch, rv, p.annotation)
            annotate_expected_waits(sch, rv, p.tvm_waits)
        else:  # the plan is the loop without a pipeline
            remove_annotation(sch, rv)


class AutoPipelined(_ScheduleRule):
    """A dlight ``ScheduleRule`` that applies ``rule``, then re-plans the pipelines it wrote.

    ``time_limit``: seconds of solving per loop; ``machine``: a Machine or
    built-in name (default: the model of the target's arch); ``staging``:
    what to do with copies staged through registers (``STAGING``: "best",
    "registers", "direct").  The rule's
    schedule(s) are re-planned in place and returned as the rule returned
    them (one Schedule, a list, or None when the rule does not apply);
    ``last`` holds the ``NestReplan``s of the latest call.
    """

    def __init__(self, rule, time_limit: float = 10.0, machine=None, staging: str = "best"):
        if not isinstance(rule, _ScheduleRule):
            raise InputError(f"AutoPipelined wraps a dlight ScheduleRule (like dl.gpu.Matmul()), got "
                             f"{type(rule).__name__}")
        _check_staging(staging)
        self.rule = rule
        self.time_limit = time_limit
        self.machine = machine
        self.staging = staging
        self.last: list[NestReplan] = []

    def __repr__(self) -> str:
        return (f"AutoPipelined({type(self.rule).__name__}(), time_limit={self.time_limit!r}, "
                f"staging={self.staging!r})")

    def is_target_available(self, target) -> bool:
        return self.rule.is_target_available(target)

    def apply(self, func, target, tunable: bool):
        rule = type(self.rule).__name__
        scheduling, suffixed = dlight_target(target)
        if suffixed is not None:  # dlight would read the arch as -1: no tensor cores, no pipeline
            log.info("dlight's rules cannot read arch '%s' (check_sm_version takes digits only): %s schedules "
                     "for '%s', and its pipelines are planned for '%s'", suffixed, rule,
                     scheduling.attrs["arch"], suffixed)
        space = self.rule.apply(func, scheduling, tunable)
        self.last = []
        if space is None:
            return None
        for sch in space if isinstance(space, (list, tuple)) else [space]:
            try:
                self.last += replan_schedule(sch, target, machine=self.machine, time_limit=self.time_limit,
                                             staging=self.staging)
            except Exception as err:  # noqa: BLE001 - e.g. a target without a model: dlight's schedule as it is
                log.info("%s's schedule kept as dlight wrote it: %s", rule, reason_of(err))
                return space
        if not self.last:
            log.info("%s wrote no software pipeline for '%s' (a schedule without tensor cores, or a shape it "
                     "does not tensorize): nothing to re-plan", rule, target.attrs.get("arch", target))
        return space
