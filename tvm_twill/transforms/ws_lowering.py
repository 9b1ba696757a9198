"""The ``tvm_twill_ws`` TIR pipeline: TVM's s_tir pipeline with the warp-specialization pass after FlattenBuffer.

``register_pipeline()`` registers it under ``WS_PIPELINE`` for
``tvm.compile(mod, target, tir_pipeline=...)``; ``emit_and_check`` runs the
same passes up to the rewrite on a schedule's module and model checks the
mbarrier protocol the rewrite emitted (what ``auto_pipeline`` does before it
returns a warp-specialized plan).  The pass list mirrors TVM 0.27's
``tvm/s_tir/pipeline.py`` (same order, same config switches), plus, before the rewrite,
``fragments.shrink_thread_fragments`` (warp-group accumulators -> per-thread registers; a no-op on
kernels without one, so the pipeline also compiles plain wgmma kernels), and, once ThreadSync has placed
the barriers and the async copies are lowered, ``proxy_fence.proxy_fence_pass`` (``fence.proxy.async``
where generic writes to shared memory feed wgmma); the stock ThreadSync passes stay: the rewrite places
its own barriers and leaves nothing for them to insert inside the role branch.
"""
from __future__ import annotations

from ..errors import InputError, UnsupportedLoopError
from ..frontend.ir import s_tir, stock_finalize_passes, tir_pipeline_registry, tirx, tvm
from ..frontend.lowering import pipeline_prefix_passes
from ..frontend.target import parse_target
from ..model.pipeline import WS_DEPTH
from ..model.protocol import check_ring
from . import warp_specialize as _ws
from .fragments import shrink_thread_fragments_pass
from .proxy_fence import proxy_fence_pass

__all__ = ["WS_PIPELINE", "emit_and_check", "register_pipeline", "warp_specialize_pass"]

#: Name of the registered TIR pipeline: ``tvm.compile(mod, target, tir_pipeline=WS_PIPELINE)``.
WS_PIPELINE = "tvm_twill_ws"


def _arch_of(func) -> str:
    tgt = (func.attrs or {}).get("target")
    arch = tgt.attrs.get("arch", "") if tgt is not None else ""
    return str(arch)


@tirx.transform.prim_func_pass(opt_level=0, name="TwillWarpSpecialize")
def warp_specialize_pass(func, mod, ctx):
    arch = _arch_of(func)
    return _ws.warp_specialize_func(func, arch)[0]


def _ws_pipeline():
    @tvm.transform.module_pass(opt_level=0)
    def _pipeline(mod, _ctx):
        config = tvm.transform.PassContext.current().config
        st, tx = s_tir.transform, tirx.transform
        passes = [st.CanonicalizeLoop(), st.LowerCrossThreadReduction(), st.LowerInitBlock(),
                  st.PlanAndUpdateBufferAllocationLocation(), st.ConvertBlocksToOpaque(), st.LiftThreadBinding(),
                  st.ManifestSharedMemoryLocalStage(), st.CompactBufferAllocation(), st.LowerAutoCopy(),
                  st.UnifyThreadBinding(), st.LowerMatchBuffer(), st.StmtSimplify(), st.InjectPermutedLayout(),
                  st.AnnotateIrregularLoop(), st.InjectSoftwarePipeline(), st.TransformMmaBufferLayout(),
                  st.LowerOpaqueBlock(), tx.FlattenBuffer(),
                  shrink_thread_fragments_pass, warp_specialize_pass,
                  tx.BF16ComputeLegalize(), tx.NarrowDataType(32), st.LoopPartition(),
                  tx.VectorizeLoop(not bool(config.get("tirx.disable_vectorize", False))),
                  st.InjectVirtualThread(), st.InjectDoubleBuffer()]
        if not bool(config.get("tirx.disable_storage_rewrite", False)):
            passes.append(tx.StorageRewrite())
        if config.get("tirx.use_async_copy", False):
            passes.append(st.LowerAsyncDMA())
        passes += [st.HoistIfThenElse(), tx.UnrollLoop(), st.RenormalizeSplitPattern(), tx.StmtSimplify(),
                   tx.RemoveNoOp(), st.RewriteUnsafeSelect()]
        if not bool(config.get("tirx.disable_cse_tir", False)):
            passes.append(tx.CommonSubexprElim())
        passes += [tx.FP8ComputeLegalize(), st.VerifyVTCMLimit(), st.LowerVtcmAlloc(), tx.VerifyMemory(),
                   tx.AnnotateEntryFunc(),
                   st.ThreadSync("shared"), st.ThreadSync("shared.dyn"), st.ThreadSync("warp"),
                   st.InferFragment(), st.LowerThreadAllreduce()]
        if bool(config.get("tirx.use_async_copy", False)):
            passes.append(st.InjectPTXAsyncCopy())
        passes += [proxy_fence_pass, st.MergeSharedMemoryAllocations(), tx.SplitHostDevice(), tx.MakePackedAPI(),
                   tx.FP8StorageLegalize(), tx.BF16StorageLegalize()]
        return tvm.ir.transform.Sequential(passes)(mod)

    host, device = stock_finalize_passes()
    return _pipeline, host, device


def register_pipeline() -> str:
    """Register the ``tvm_twill_ws`` TIR pipeline (idempotent); returns its name for ``tvm.compile``."""
    registry = tir_pipeline_registry()
    if WS_PIPELINE not in registry.PIPELINE_MAP:
        registry.register_tir_pipeline(WS_PIPELINE, _ws_pipeline)
    return WS_PIPELINE


def emit_and_check(mod, target):
    """Run the transform as ``tvm.compile`` will (TVM's passes through FlattenBuffer, then this pass) and
    model check the emitted ring protocol; returns (WsKernelFacts, ProtocolReport).

    Raises UnsupportedLoopError when the loop cannot be specialized or the emitted protocol fails the check
    (the report's first violation, with its trace, in the message)."""
    arch, tgt = parse_target(target)
    mod = tirx.transform.BindTarget(tgt.with_host(tvm.target.Target("llvm")))(mod)
    passes = pipeline_prefix_passes() + [s_tir.transform.TransformMmaBufferLayout(),
                                         s_tir.transform.LowerOpaqueBlock(), tirx.transform.FlattenBuffer()]
    with tvm.transform.PassContext(config={"tirx.use_async_copy": 1}):
        mod = tvm.transform.Sequential(passes)(mod)
    found = []
    for _, func in mod.functions_items():
        if isinstance(func, tirx.PrimFunc):
            _, facts = _ws.warp_specialize_func(func, arch)
            if facts is not None:
                found.append(facts)
    if len(found) != 1:
        raise UnsupportedLoopError("warp specialization: "
                                   f"expected one loop annotated with {WS_DEPTH}, found {len(found)}")
    facts = found[0]
    try:
        report = check_ring(facts.ring_protocol())
    except InputError as e:  # the state budget: no verdict, so no kernel
        raise UnsupportedLoopError(f"warp specialization: the emitted protocol could not be model checked "
                                   f"({e})") from None
    if not report.ok:
        v = report.violations[0]
        raise UnsupportedLoopError(f"warp specialization: the emitted mbarrier protocol fails the model check "
                                   f"({v.kind}): {v.message}; trace: {' -> '.join(v.trace)}")
    return facts, report
