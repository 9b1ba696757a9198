"""The passes of the ``tvm_twill_ws`` TIR pipeline (``transforms.pipelines`` defines it) around the WS rewrite.

``pipelines.emit_and_check`` runs the passes up to the rewrite on a
schedule's module and model checks the mbarrier protocol the rewrite emitted
(what ``auto_pipeline`` does before it returns a warp-specialized plan).  The
pipeline is TVM's own pass list with two passes spliced in after FlattenBuffer:
``fragments.shrink_thread_fragments`` (warp-group accumulators -> per-thread
registers; a no-op on kernels without one, so the pipeline also compiles
plain wgmma kernels) and the rewrite, which model checks the protocol it
emitted and refuses the kernel when it fails; ``role_barriers.consumer_barriers_pass`` right after
TVM's ThreadSync passes (the ``__syncthreads`` ThreadSync placed in the consumer branch -> named
barriers of the consumer threads); and two checks at the end, on
the final TIR: no ``__syncthreads`` inside a role branch (TVM's ThreadSync
runs after the rewrite; the rewrite places its own barriers), and the ring
protocol read off the final TIR (``ws.compiled``: nothing from the passes'
own facts) passes the model check, so a pass after the rewrite that breaks
the protocol (a dropped arrive, a moved release) gets no kernel.  ``transforms.proxy_fence`` is spliced in
before MergeSharedMemoryAllocations, once ThreadSync has placed the barriers
and the async copies are lowered: ``fence.proxy.async`` where generic writes
to shared memory feed wgmma.  TVM's LowerWarpMemory in the device finalization is
repeated until every ``warp``-scope fragment TVM can lower is one thread's registers
(``warp_memory.finalize_passes``: TVM's pass lowers only the first fragment of a sequence).
"""
from __future__ import annotations

import time

from ...errors import InputError, UnsupportedLoopError
from ...frontend.ir import tirx, tvm, walk_stmts
from ...model.protocol import CheckIncomplete, check_limits, check_ring
from . import rewrite as _ws
from .compiled import CHECK_TIME_FACTOR, unchecked_protocol

__all__ = ["check_protocol", "check_role_branches", "protocol_limits", "verify_role_branches",
           "warp_specialize_pass"]

def _arch_of(func) -> str:
    tgt = (func.attrs or {}).get("target")
    arch = tgt.attrs.get("arch", "") if tgt is not None else ""
    return str(arch)


#: Seconds between the progress reports of a long protocol check.
REPORT_EVERY = 5.0


def protocol_limits(time_limit: float | None, progress=None):
    """``model.protocol.check_limits`` for the checks of one plan: each at most ``CHECK_TIME_FACTOR`` x the plan's
    ``time_limit`` seconds (None: only the state budget); ``progress`` (a ``PlanProgress``) hears how far a long
    check got, every ``REPORT_EVERY`` seconds.  A check cut short gives no kernel (``check_protocol``)."""
    seconds = None if time_limit is None else CHECK_TIME_FACTOR * time_limit
    if progress is None:
        return check_limits(seconds=seconds)
    last = [time.monotonic()]

    def report(states: int) -> None:
        if time.monotonic() - last[0] >= REPORT_EVERY:
            last[0] = time.monotonic()
            progress.step(f"warp specialization: model checking the mbarrier protocol, {states} states so far")
    return check_limits(seconds=seconds, progress=report)


def check_protocol(facts) -> object:
    """Model check the ring protocol a rewrite emitted; its report, or UnsupportedLoopError (no kernel)."""
    proto = facts.ring_protocol()
    try:
        report = check_ring(proto)   # under the plan's limits (model.protocol.check_limits)
    except CheckIncomplete as e:  # the state budget or the deadline: no verdict, so no kernel
        raise unchecked_protocol(proto, e) from None
    except InputError as e:
        raise UnsupportedLoopError(f"warp specialization: the emitted protocol could not be model checked "
                                   f"({e})") from None
    if not report.ok:
        v = report.violations[0]
        raise UnsupportedLoopError(f"warp specialization: the emitted mbarrier protocol fails the model check "
                                   f"({v.kind}): {v.message}; trace: {' -> '.join(v.trace)}")
    return report


@tirx.transform.prim_func_pass(opt_level=0, name="TwillWarpSpecialize")
def warp_specialize_pass(func, mod, ctx):
    """The rewrite inside ``tvm.compile``; the protocol it emitted is model checked here, on the rewrite
    that is compiled, so a kernel failing the check is never built."""
    new, facts = _ws.warp_specialize_func(func, _arch_of(func))
    if facts is not None:
        check_protocol(facts)
    return new


_ROLE_VAR = "ws_warp"   # the warp index the role branch tests (warp_specialize_func)
_CTA_BARRIERS = ("tirx.tvm_storage_sync",)


def _role_branch_syncs(func) -> list[str]:
    """The block-wide barriers (``__syncthreads``) inside a role branch of a lowered kernel."""
    out = []
    for node in walk_stmts(func.body):
        if not (isinstance(node, tirx.IfThenElse) and _ROLE_VAR in {v.name for v in tirx.analysis.undefined_vars(
                node.condition)}):
            continue
        for side, branch in (("producer", node.then_case), ("consumer", node.else_case)):
            for inner in walk_stmts(branch) if branch is not None else ():
                call = inner.value if isinstance(inner, tirx.Evaluate) else None
                if isinstance(call, tvm.ir.expr.Call) and getattr(call.op, "name", "") in _CTA_BARRIERS \
                        and str(call.args[0]).strip('"') == "shared":
                    out.append(side)
    return out


def check_role_branches(mod) -> None:
    """Refuse a kernel in which a ``__syncthreads`` landed inside one role's branch (the other role never
    reaches it: a deadlock).  UnsupportedLoopError, one line."""
    for gv, func in mod.functions_items():
        if isinstance(func, tirx.PrimFunc):
            sides = _role_branch_syncs(func)
            if sides:
                raise UnsupportedLoopError(
                    f"warp specialization: '{gv.name_hint}' has a __syncthreads inside the {sides[0]} branch, "
                    "which the other role never reaches (deadlock): keep block-wide barriers out of the loop")


@tvm.transform.module_pass(opt_level=0, name="TwillVerifyRoleBranches")
def verify_role_branches(mod, _ctx):
    """``check_role_branches`` as the last pass of the pipeline: TVM's ThreadSync runs after the rewrite, so
    this reads the final TIR.  (An error raised inside a pass reaches ``tvm.compile``'s caller as a
    RuntimeError with the same one-line message: TVM's FFI does not keep the Python type.)"""
    check_role_branches(mod)
    return mod
