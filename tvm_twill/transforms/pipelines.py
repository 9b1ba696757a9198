"""Every tvm_twill TIR pipeline, defined in one place: TVM's own pass list with our passes at named anchors.

As TVM keeps its pipelines in ``tirx/compilation_pipeline.py``, this module is the one map of ours.  Each
pipeline is the stock s_tir pass list TVM would run under the current PassContext
(``frontend.ir.stock_s_tir_passes``: its config switches, and any pass a later TVM adds, take effect)
with tvm_twill's passes inserted next to a named TVM pass (an ``Insert``), in the order the table lists:

=================  ==========================================================================================
``tvm_twill_waits``  TVM's default plus the wait-count guard (``WAIT_GUARD``): what a plan that TVM miscounts
                     and that needs no other pipeline compiles with; TVM's finalization.
``tvm_twill_swp``    ``SWP``: loop-invariant lets hoisted, constant prologue waits, uniform guard loops around
                     ThreadSync, wgmma fragments and proxy fences for wgmma functions; then the wait guard.
``tvm_twill_ws``     ``WS``: the warp-specialization rewrite after FlattenBuffer (with the fragment shrink),
                     the consumers' named barriers after ThreadSync, proxy fences; then the wait guard; then
                     the two checks of the final TIR (``WS_CHECKS``).
=================  ==========================================================================================

Both tvm_twill pipelines first drop the plain-build proxy fences the wgmma intrinsics carry
(``frontend.plain_fences``): they place their own.  Both finalize devices with
``warp_memory.finalize_passes`` (LowerWarpMemory repeated).  ``ws_passes`` returns the WS pipeline in
its three parts (up to the rewrite, the rewrite onward, the checks), which ``emit_and_check`` runs with
the protocol check in between.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import UnsupportedLoopError
from ..frontend.ir import splice_passes, stock_finalize_passes, stock_s_tir_passes, tir_pipeline_registry, tirx, tvm
from ..frontend.plain_fences import drop_plain_fences_pass
from ..frontend.target import parse_target
from ..model.pipeline import WS_DEPTH
from .fragments import shrink_thread_fragments_pass
from .let_hoist import hoist_invariant_lets_pass
from .proxy_fence import proxy_fence_pass
from .swp_lowering import (constant_async_waits_pass, guard_skip_barriers_pass, uniform_guard_loops_pass,
                           wgmma_fences_pass, wgmma_fragments_pass)
from .wait_counts import exact_async_waits_pass, mark_expected_waits_pass
from .warp_memory import finalize_passes
from .ws import rewrite as _ws
from .ws.compiled import check_compiled, verify_compiled_protocol
from .ws.lowering import check_protocol, check_role_branches, verify_role_branches, warp_specialize_pass
from .ws.role_barriers import consumer_barriers_pass

__all__ = ["Insert", "PIPELINES", "SWP", "SWP_PIPELINE", "WAITS_PIPELINE", "WAIT_GUARD", "WS", "WS_CHECKS",
           "WS_PIPELINE", "WsPasses", "emit_and_check", "register", "swp_passes", "waits_passes", "ws_passes"]

#: ``tvm.compile(mod, target, tir_pipeline=...)`` names of the pipelines (``register`` them first).
WAITS_PIPELINE = "tvm_twill_waits"
SWP_PIPELINE = "tvm_twill_swp"
WS_PIPELINE = "tvm_twill_ws"

_INJECT = "s_tir.InjectSoftwarePipeline"
_FLATTEN = "tirx.FlattenBuffer"
_THREAD_SYNC = "s_tir.ThreadSync"
_AFTER_THREAD_SYNC = "s_tir.InferFragment"        # the first pass after TVM's ThreadSync passes
_MERGE_SHARED = "s_tir.MergeSharedMemoryAllocations"


@dataclass(frozen=True)
class Insert:
    """``passes`` inserted right after (``before``: right before) TVM's pass named ``anchor``."""

    anchor: str
    passes: tuple
    before: bool = False


#: The wait-count guard (``wait_counts``): the mark right before InjectSoftwarePipeline, the exact counts
#: right after it, before any pass that rewrites TVM's counts.
WAIT_GUARD = (Insert(_INJECT, (exact_async_waits_pass,)),
              Insert(_INJECT, (mark_expected_waits_pass,), before=True))

SWP = (Insert(_INJECT, (hoist_invariant_lets_pass,), before=True),
       Insert(_INJECT, (constant_async_waits_pass,)),
       Insert(_THREAD_SYNC, (uniform_guard_loops_pass,), before=True),
       Insert(_AFTER_THREAD_SYNC, (guard_skip_barriers_pass,), before=True),
       Insert(_FLATTEN, (wgmma_fragments_pass,)),
       Insert(_MERGE_SHARED, (wgmma_fences_pass,), before=True)) + WAIT_GUARD

WS = (Insert(_FLATTEN, (shrink_thread_fragments_pass, warp_specialize_pass)),
      Insert(_AFTER_THREAD_SYNC, (consumer_barriers_pass,), before=True),
      Insert(_MERGE_SHARED, (proxy_fence_pass,), before=True)) + WAIT_GUARD

#: Checks of the final TIR, the last passes of ``tvm_twill_ws``: no ``__syncthreads`` in a role branch, and
#: the ring protocol read off the kernel as compiled passes the model check.
WS_CHECKS = (verify_role_branches, verify_compiled_protocol)


def _with(inserts, passes: list) -> list:
    for ins in inserts:
        passes = splice_passes(passes, ins.anchor, list(ins.passes), before=ins.before)
    return passes


def waits_passes() -> list:
    """The ``tvm_twill_waits`` pass list under the current PassContext."""
    return _with(WAIT_GUARD, stock_s_tir_passes())


def swp_passes() -> list:
    """The ``tvm_twill_swp`` pass list under the current PassContext."""
    return [drop_plain_fences_pass] + _with(SWP, stock_s_tir_passes())


@dataclass(frozen=True)
class WsPasses:
    """The ``tvm_twill_ws`` pass list in its three parts."""

    to_rewrite: list     #: TVM's passes (and ours) that run before the rewrite
    rewrite_on: list     #: the rewrite and every pass after it
    checks: list         #: the checks of the final TIR

    def all(self) -> list:
        return self.to_rewrite + self.rewrite_on + self.checks


def ws_passes() -> WsPasses:
    """The ``tvm_twill_ws`` pass list under the current PassContext, in its three parts."""
    passes = [drop_plain_fences_pass] + _with(WS, stock_s_tir_passes())
    i = passes.index(warp_specialize_pass)
    return WsPasses(passes[:i], passes[i:], list(WS_CHECKS))


def _pipeline(passes, finalize):
    def build():
        @tvm.transform.module_pass(opt_level=0)
        def _run(mod, _ctx):
            return tvm.ir.transform.Sequential(passes())(mod)

        host, device = finalize()
        return _run, host, device
    return build


#: name -> TVM pipeline factory (what ``tvm.compile(..., tir_pipeline=name)`` calls).
PIPELINES = {
    WAITS_PIPELINE: _pipeline(waits_passes, stock_finalize_passes),
    SWP_PIPELINE: _pipeline(swp_passes, finalize_passes),
    WS_PIPELINE: _pipeline(lambda: ws_passes().all(), finalize_passes),
}


def register(name: str) -> str:
    """Register the tvm_twill pipeline ``name`` with TVM (idempotent); returns ``name`` for ``tvm.compile``."""
    registry = tir_pipeline_registry()
    if name not in registry.PIPELINE_MAP:
        registry.register_tir_pipeline(name, PIPELINES[name])
    return name


def emit_and_check(mod, target):
    """Run the WS rewrite as ``tvm.compile`` will (the passes up to it, then it) and model check the ring
    protocol it emitted; then the rest of the pipeline and the checks of the final TIR (the protocol as
    compiled).  Returns (WsKernelFacts, the compiled protocol's ProtocolReport).

    Raises UnsupportedLoopError when the loop cannot be specialized or a protocol fails the check (the
    report's first violation, with its trace, in the message)."""
    arch, tgt = parse_target(target)
    mod = tirx.transform.BindTarget(tgt.with_host(tvm.target.Target("llvm")))(mod)
    with tvm.transform.PassContext(config={"tirx.use_async_copy": 1}):
        parts = ws_passes()
        mod = tvm.transform.Sequential(parts.to_rewrite)(mod)
    facts = _emitted_facts(mod, arch)
    check_protocol(facts)
    with tvm.transform.PassContext(config={"tirx.use_async_copy": 1}):
        final = tvm.transform.Sequential(parts.rewrite_on)(mod)   # the checks below raise UnsupportedLoopError
    check_role_branches(final)
    return facts, check_compiled(final)[0]


def _emitted_facts(mod, arch: str):
    """The facts of the one loop the rewrite specializes in ``mod`` (UnsupportedLoopError unless exactly one)."""
    found = []
    for _, func in mod.functions_items():
        if isinstance(func, tirx.PrimFunc):
            _, facts = _ws.warp_specialize_func(func, arch)
            if facts is not None:
                found.append(facts)
    if len(found) != 1:
        raise UnsupportedLoopError("warp specialization: "
                                   f"expected one loop annotated with {WS_DEPTH}, found {len(found)}")
    return found[0]
