"""The ``tvm_twill_swp`` TIR pipeline: TVM's s_tir pipeline with constant cp.async wait counts.

For a pipelined loop of symbolic extent, TVM 0.27's InjectSoftwarePipeline
guards the prologue and epilogue with the iteration's bound: in the
prologue a wait on the async copies reads
``async_wait_inflight_count = if_then_else(j < trips, N, 0)`` (wait for all
groups when the iteration does not exist).  The count stays symbolic after
the prologue is unrolled, and CUDA codegen refuses it (``cp_async_wait_group``
needs an immediate).  ``constant_async_waits`` replaces every such count by
the smallest value it can take (its lower bound over the loop variables, at
least 0): ``cp.async.wait_group N`` completes all but the ``N`` newest
groups, so a smaller ``N`` waits for more copies and is always safe; it
costs overlap only in the prologue (once per kernel).  Constant counts are
left alone.  The pass runs right after InjectSoftwarePipeline; every other
pass is TVM's own (``frontend.ir.stock_s_tir_passes``).
"""
from __future__ import annotations

from ..frontend.ir import (splice_passes, stock_finalize_passes, stock_s_tir_passes, tir_pipeline_registry, tirx, tvm,
                           tvm_ffi)

__all__ = ["SWP_PIPELINE", "constant_async_waits", "constant_async_waits_pass", "register_swp_pipeline"]

#: Name of the registered TIR pipeline: ``tvm.compile(mod, target, tir_pipeline=SWP_PIPELINE)``.
SWP_PIPELINE = "tvm_twill_swp"
_KEY = "async_wait_inflight_count"


def _lower_bound(value, ranges) -> int:
    """The smallest value ``value`` takes (>= 0): the smaller branch of a conditional, else TVM's bound."""
    if isinstance(value, tirx.IntImm):
        return max(0, int(value.value))
    if isinstance(value, tvm.ir.expr.Call) and value.op.name.endswith("if_then_else") and len(value.args) == 3:
        return min(_lower_bound(value.args[1], ranges), _lower_bound(value.args[2], ranges))
    an = tvm.sym.Analyzer()
    for var, rng in ranges:
        an.bind(var, rng)
    lo = int(an.const_int_bound(an.simplify(value)).min_value)
    return max(0, lo) if abs(lo) < 2 ** 62 else 0


def constant_async_waits(func):
    """``func`` with every symbolic ``async_wait_inflight_count`` replaced by its lower bound (>= 0)."""
    ranges: list = []

    def collect(loop):
        ranges.append((loop.loop_var, tvm.ir.Range.from_min_extent(loop.min, loop.extent)))

    tvm_ffi.structural_walk(func.body, [(tirx.For, collect)])

    def fix(attr):
        if attr.attr_key != _KEY or isinstance(attr.value, tirx.IntImm):
            return attr
        value = tirx.const(_lower_bound(attr.value, ranges), attr.value.ty.dtype)
        return tirx.AttrStmt(attr.node, attr.attr_key, value, attr.body)

    return func.with_body(tvm_ffi.structural_map(func.body, [(tirx.AttrStmt, fix)]))


@tirx.transform.prim_func_pass(opt_level=0, name="TwillConstantAsyncWaits")
def constant_async_waits_pass(func, mod, ctx):
    return constant_async_waits(func)


def _swp_pipeline():
    @tvm.transform.module_pass(opt_level=0)
    def _pipeline(mod, _ctx):
        passes = splice_passes(stock_s_tir_passes(), "s_tir.InjectSoftwarePipeline", [constant_async_waits_pass])
        return tvm.ir.transform.Sequential(passes)(mod)

    host, device = stock_finalize_passes()
    return _pipeline, host, device


def register_swp_pipeline() -> str:
    """Register the ``tvm_twill_swp`` TIR pipeline (idempotent); returns its name for ``tvm.compile``."""
    registry = tir_pipeline_registry()
    if SWP_PIPELINE not in registry.PIPELINE_MAP:
        registry.register_tir_pipeline(SWP_PIPELINE, _swp_pipeline)
    return SWP_PIPELINE
