"""The passes of the ``tvm_twill_swp`` TIR pipeline (defined in ``transforms.pipelines``), and why each is there.

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
costs overlap only in the prologue (once per kernel).  (In the epilogue of
such a loop TVM itself emits 0.)  So every prologue and epilogue wait of a
symbolic trip count compiles to 0, which is what ``annotate.async_waits``
(trip count None) and ``plan.waits`` state.  Constant counts are left
alone.  The pass runs right after InjectSoftwarePipeline.

The same guards hold shared-memory statements (the prologue's copies, the
epilogue's reads).  TVM's ThreadSync refuses to place a barrier between two
statements under an ``if`` ("Cannot insert syncs inside condition"), since a
barrier some threads skip deadlocks the block.  A guard of the iteration's bound is the same in
every thread of the block (it reads only the trip count, block indices and
loop counters), so ``uniform_guard_loops`` rewrites each such guard ``if c:
S`` into ``for _ in range(c ? 1 : 0): S``: the same statements run, and
ThreadSync may put the barrier inside, which every thread of the block then
reaches or skips together.  A guard counts as uniform only when it reads no
memory other buffers may differ in and no variable that depends on a thread
index (``frontend.uniform``, the rule the front-end's barrier refusal uses
too: a read-only global buffer, or a local one every thread stores the same
values to, is uniform); any other ``if`` is
left as it was, so ThreadSync still refuses a barrier under it.  The pass
runs right before ThreadSync.  ThreadSync plans a loop as if its body runs:
a barrier it puts inside a guard loop is what orders the statements before the
guard with those after it (e.g. the fragment store of S with the softmax that
reads it, the guard between them being the next iteration's GEMM, absent when
the trip count is short).  So ``guard_skip_barriers``, right after the
ThreadSync passes, gives every guard loop that holds a barrier the same
barrier on its other path: ``for _ in range(c ? 1 : 0): S`` becomes that
loop followed by ``if not c: barrier``; ``c`` is uniform, so every thread
takes the same path, and a barrier separates what precedes the guard from
what follows it on both.  Right before InjectSoftwarePipeline,
``let_hoist.hoist_invariant_lets`` binds a pipelined loop's loop-invariant
lets once before it (TVM's guards would leave them undefined in the other
guarded statements).

A function that issues wgmma (``kernels.fa_forward_wgmma`` pipelined on its KV
loop) needs two more passes, the ones ``tvm_twill_ws`` runs for it: the
warp-group accumulators shrunk to per-thread registers after FlattenBuffer
(``fragments.shrink_thread_fragments``) and the proxy fences before the
barriers ahead of a wgmma, before MergeSharedMemoryAllocations
(``proxy_fence``: cp.async writes shared memory through the generic proxy,
and the fence must follow the wait).  Both are applied to wgmma functions only
(``wgmma_only``), so every other kernel compiles as before.  Every other pass
is TVM's own (``frontend.ir.stock_s_tir_passes``).  TVM's LowerWarpMemory in the device finalization is
repeated until every ``warp``-scope fragment TVM can lower is one thread's registers
(``warp_memory.finalize_passes``: TVM's pass lowers only the first fragment of a sequence).
"""
from __future__ import annotations

from ..frontend.ir import T, tirx, tvm, tvm_ffi
from ..frontend.uniform import uniformity, varying_vars
from .fragments import shrink_thread_fragments
from .proxy_fence import add_proxy_fences
from .wgmma_overlap import has_wgmma

__all__ = ["constant_async_waits", "constant_async_waits_pass", "guard_skip_barriers",
           "guard_skip_barriers_pass", "uniform_guard_loops", "uniform_guard_loops_pass",
           "varying_vars", "wgmma_fences_pass", "wgmma_fragments_pass"]

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


def _touches_shared(stmt) -> bool:
    """Whether ``stmt`` reads or writes a shared-memory (or warp-scope) buffer: what ThreadSync guards."""
    found = []

    def on_var(v):
        ty = getattr(v, "ty", None)
        scope = str(getattr(ty, "storage_scope", "") or "")
        if scope.startswith("shared") or scope == "warp":
            found.append(v)

    tvm_ffi.structural_walk(stmt, [(tirx.Var, on_var)])
    return bool(found)


def uniform_guard_loops(func):
    """``func`` with every block-uniform ``if c: S`` (no else) around shared-memory statements rewritten as
    ``for _ in range(c ? 1 : 0): S`` (module docstring: why, and what counts as uniform)."""
    u = uniformity(func.body)

    def fix(node):
        if node.else_case is not None or not u.uniform(node.condition) or not _touches_shared(node.then_case):
            return node
        one, zero = tirx.const(1, "int32"), tirx.const(0, "int32")
        return tirx.For(tirx.Var("guard", "int32"), zero, tirx.Select(node.condition, one, zero),
                        tirx.ForKind.SERIAL, node.then_case)

    return func.with_body(tvm_ffi.structural_map(func.body, [(tirx.IfThenElse, fix)]))


@tirx.transform.prim_func_pass(opt_level=0, name="TwillUniformGuardLoops")
def uniform_guard_loops_pass(func, mod, ctx):
    return uniform_guard_loops(func)


_SYNC = "tirx.tvm_storage_sync"
_SELECT = tirx.Select  # the node type (uniform_guard_loops builds one through ``tirx.Select``)


def _guard_condition(loop):
    """``c`` of a guard loop ``for guard in range(c ? 1 : 0)`` that ``uniform_guard_loops`` wrote, else None."""
    ext = loop.extent
    if (loop.loop_var.name != "guard" or not isinstance(ext, _SELECT)
            or not (isinstance(ext.true_value, tirx.IntImm) and ext.true_value.value == 1)
            or not (isinstance(ext.false_value, tirx.IntImm) and ext.false_value.value == 0)):
        return None
    return ext.condition


def _barrier_scopes(stmt) -> list:
    """The scopes (``"shared"``, ``"shared.dyn"``) of the ``tvm_storage_sync`` barriers in ``stmt``, in order."""
    found: list = []

    def on_call(call):
        if getattr(call.op, "name", "") == _SYNC and call.args:
            scope = str(call.args[0]).strip('"')
            if scope.startswith("shared") and scope not in found:
                found.append(scope)

    tvm_ffi.structural_walk(stmt, [(tvm.ir.expr.Call, on_call)])
    return found


def guard_skip_barriers(func):
    """``func`` with the barriers of each guard loop also on the path that skips it (module docstring)."""

    def fix(loop):
        cond = _guard_condition(loop)
        scopes = _barrier_scopes(loop.body) if cond is not None else []
        if not scopes:
            return loop
        syncs = [tirx.Evaluate(T.tvm_storage_sync(scope)) for scope in scopes]
        return tirx.SeqStmt([loop, tirx.IfThenElse(tirx.Not(cond), syncs[0] if len(syncs) == 1
                                                   else tirx.SeqStmt(syncs), None)])

    return func.with_body(tvm_ffi.structural_map(func.body, [(tirx.For, fix)]))


@tirx.transform.prim_func_pass(opt_level=0, name="TwillGuardSkipBarriers")
def guard_skip_barriers_pass(func, mod, ctx):
    return guard_skip_barriers(func)


@tirx.transform.prim_func_pass(opt_level=0, name="TwillSwpWgmmaFragments")
def wgmma_fragments_pass(func, mod, ctx):
    """``fragments.shrink_thread_fragments`` on a function that issues wgmma; others unchanged."""
    return shrink_thread_fragments(func)[0] if has_wgmma([func.body]) else func


@tirx.transform.prim_func_pass(opt_level=0, name="TwillSwpWgmmaFences")
def wgmma_fences_pass(func, mod, ctx):
    """``proxy_fence.add_proxy_fences`` (itself a no-op without wgmma)."""
    return add_proxy_fences(func)
