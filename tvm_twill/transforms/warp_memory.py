"""Every ``warp``-scope buffer of a kernel -> one thread's share in registers (TVM's LowerWarpMemory, repeated).

The mma.sync intrinsics (``tvm.s_tir.tensor_intrin.cuda``, and ``kernels.attention_tc``'s own) keep their
fragments in ``warp``-scope buffers indexed ``[lane, register]``.  TVM's LowerWarpMemory (in the device
finalization passes) rewrites such a buffer of ``32 * R`` elements into ``R`` per-thread ``local`` elements
(the lane index dropped from every access and from the pointer offsets of ldmatrix / mma / mma_fill /
mma_store).  But TVM 0.27's rewriter, walking a sequence of statements, takes the first ``warp``
allocation it meets, rewrites the statements after it as that buffer's scope and stops there: every later
``warp`` allocation in that sequence (an allocation is a statement of the sequence since 0.27) is left as
it was, a whole warp's buffer declared in every thread and indexed ``threadIdx.x * R + e``.  The
tensor-core attention allocates six fragments in one sequence: only the first (``S_w``, 32 floats per
thread) was lowered, ``O_w`` stayed ``float O_w_ptr[2048]`` per thread (32 x 64 fp32 at head dim 64), the
ldmatrix / mma operands ``half Q_w_ptr[512]`` ...; indexed by the lane, nvcc cannot keep such an array in
registers unless it proves the thread offset away, and in the warp-specialized kernel it did not: an 8 KB
(head dim 64) or 16 KB (128) local-memory stack frame.

``lower_all_warp_memory_pass`` (module pass) runs TVM's LowerWarpMemory, then again while a ``warp``
allocation is left: each run lowers the first remaining one of each sequence, so there are at most as many
runs as fragments; a kernel with none or one runs it once, as TVM's pipeline does.  The generated CUDA
declares one thread's registers per fragment (``float O_w_ptr[64]``, ``half Q_w_ptr[16]``, ...) indexed by
unrolled constants, which ptxas keeps in registers (``0 bytes stack frame``).  The first run's errors are
the kernel's, as in TVM's pipeline.  A later run TVM refuses (a fragment whose lane index it cannot see,
e.g. hidden by TVM's common-subexpression elimination: "LowerWarpMemory failed due to store index=cse_v7")
ends the repetition: the module of the last run is kept, the fragments left whole as TVM's pipeline leaves
them, so no kernel TVM compiles fails here.  A run that lowers nothing while a ``warp`` allocation is left
raises ``WarpMemoryError`` (TVM's pass changed).

``finalize_passes()`` is ``frontend.ir.stock_finalize_passes()`` with this pass in place of TVM's
LowerWarpMemory among the device passes (not after it: TVM's pass would then try the fragment this one
gave up on and fail): the (host, device) factories a TIR pipeline of the package returns
(``tvm_twill_swp``, ``tvm_twill_ws``).
"""
from __future__ import annotations

from ..errors import TwillError
from ..frontend.ir import splice_passes, stock_device_passes, stock_finalize_passes, tirx, tvm, tvm_ffi

__all__ = ["WarpMemoryError", "finalize_passes", "lower_all_warp_memory", "lower_all_warp_memory_pass",
           "warp_allocations"]

_TVM_PASS = "tirx.LowerWarpMemory"


class WarpMemoryError(TwillError, RuntimeError):
    """TVM's LowerWarpMemory ran and lowered none of the ``warp``-scope buffers left (an internal error)."""


def warp_allocations(mod) -> list[str]:
    """Names of the ``warp``-scope buffers allocated in the PrimFuncs of ``mod``, in program order."""
    names: list[str] = []
    for _, func in mod.functions_items():
        if isinstance(func, tirx.PrimFunc):
            tvm_ffi.structural_walk(func.body, [(tirx.AllocBuffer, lambda a: names.append(str(a.buffer.name))
                                                 if a.buffer.scope() == "warp" else None)])
    return names


def lower_all_warp_memory(mod):
    """``mod`` through TVM's LowerWarpMemory, then again while ``warp`` allocations are left and TVM lowers them.

    Raises what TVM's first run raises, and WarpMemoryError when a run leaves as many as it found."""
    mod = tirx.transform.LowerWarpMemory()(mod)
    left = warp_allocations(mod)
    while left:
        try:
            after = tirx.transform.LowerWarpMemory()(mod)
        except tvm.error.InternalError:  # a fragment TVM cannot lower: left whole, as TVM's pipeline leaves it
            return mod
        now = warp_allocations(after)
        if len(now) >= len(left):
            raise WarpMemoryError(f"TVM's LowerWarpMemory left the warp buffers {now} as they were")
        mod, left = after, now
    return mod


@tvm.transform.module_pass(opt_level=0, name="TwillLowerAllWarpMemory")
def lower_all_warp_memory_pass(mod, _ctx):
    return lower_all_warp_memory(mod)


def finalize_passes():
    """(host, device) finalization factories: TVM's, with ``lower_all_warp_memory_pass`` in place of its
    LowerWarpMemory on the device (RuntimeError when TVM's device passes have none: revisit this module)."""
    host, _ = stock_finalize_passes()

    def device_passes():
        passes = splice_passes(stock_device_passes(), _TVM_PASS, [lower_all_warp_memory_pass], before=True)
        return tvm.ir.transform.Sequential([p for p in passes if p.info.name != _TVM_PASS])
    return host, device_passes
