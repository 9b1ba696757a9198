"""TVM 0.27's IR, as the front-end walks it: the one place that names TVM's moving namespaces.

TVM renames its namespaces between releases (``tvm.tir`` became ``tvm.tirx``
and ``tvm.s_tir``, ``tvm.arith`` became ``tvm.sym``).  Every other front-end
module imports ``tvm``, ``tirx`` and ``s_tir`` from here, so a rename is a
change to this file alone.  The helpers are small, side-effect-free views of
IR nodes: constants, dtypes, storage scopes, structured children.
"""
from __future__ import annotations

import threading

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.script import tirx as T  # TIRx builders (PTX / CUDA intrinsics) for the transforms

__all__ = ["AUTO_COPY", "CONTROL_FLOW", "DOUBLE_BUFFER_SCOPE", "MANIFEST_LOCAL_STAGE", "T", "auto_copy_bytes",
           "branches", "children", "const_int", "dlight", "dlight_schedule_rule_base", "double_buffered", "dtype_bytes",
           "eval_int",
           "fingerprint",
           "has_block", "is_register", "is_shared", "is_true", "manifested_buffers", "meta_schedule_postproc_base",
           "meta_schedule_te_workloads", "meta_schedule_verify_gpu_code", "prim_functions", "relax_frontend", "s_tir", "scope_of",
           "splice_passes", "stock_device_passes", "stock_finalize_passes", "stock_s_tir_passes", "substitute", "thread_extents",
           "tir_pipeline_registry", "tirx", "tvm", "tvm_ffi", "vector_lanes", "walk_all", "walk_stmts"]

#: Block annotation of a global->shared copy that TVM's ManifestSharedMemoryLocalStage pass
#: splits into a global->local and a local->shared statement (dlight's tensor-core rules set it).
MANIFEST_LOCAL_STAGE = "tirx.manifest_shared_memory_local_stage"
#: Block annotation of MetaSchedule's cooperative copies (its tensor-core rule's mma.sync path), which
#: TVM's LowerAutoCopy spreads over every thread of the block, vectorized to the ``vector_bytes`` annotation.
AUTO_COPY = "auto_copy"
#: Block annotation (a write index) asking InjectSoftwarePipeline for two versions of that buffer.
DOUBLE_BUFFER_SCOPE = "double_buffer_scope"

#: Statements that make a loop body not straight-line.
CONTROL_FLOW = (tirx.IfThenElse, tirx.While, tirx.Break, tirx.Continue, tirx.Return)


def const_int(expr) -> int | None:
    """The integer value of an expression, or None when it is not constant."""
    if isinstance(expr, int):
        return expr
    if isinstance(expr, tirx.IntImm):
        return int(expr.value)
    try:
        e = tvm.sym.Analyzer().simplify(expr)
    except Exception:  # noqa: BLE001 - anything non-simplifiable is "not constant"
        return None
    return int(e.value) if isinstance(e, tirx.IntImm) else None


def substitute(node, vmap):
    """``node`` with each variable ``k`` of the pairs ``vmap`` = [(k, expr)] replaced by its ``expr``."""
    return tvm_ffi.structural_map(node, [(tirx.Var, lambda v: next((e for k, e in vmap if k.same_as(v)), v))])


def eval_int(expr, values) -> int | None:
    """``expr`` with each variable of the pairs ``values`` = [(var, int)] replaced by its value and
    every other variable by 0, folded to an int (None if it does not fold)."""
    def value(v):
        ty = v.ty
        if not isinstance(ty, tvm.ir.type.PrimType):  # a buffer or handle, not an index variable
            return v
        return tirx.const(next((x for k, x in values if k.same_as(v)), 0), str(ty))
    return const_int(tvm.sym.Analyzer().simplify(tvm_ffi.structural_map(expr, [(tirx.Var, value)])))


def dtype_bytes(dtype) -> float:
    d = tvm_ffi.dtype(str(dtype))
    return d.bits * d.lanes / 8


def scope_of(buf) -> str:
    s = buf.scope()
    return "global" if s in ("", "global") else s


def is_shared(scope: str) -> bool:
    return scope.startswith("shared") and scope != "shared.barrier"


def is_register(scope: str) -> bool:
    return scope not in ("global",) and not scope.startswith("shared")


def is_true(expr) -> bool:
    return isinstance(expr, tirx.IntImm) and int(expr.value) == 1


def children(stmt):
    """Direct structured children of a statement (for walking)."""
    if isinstance(stmt, tirx.SeqStmt):
        return list(stmt.seq)
    if isinstance(stmt, s_tir.SBlockRealize):
        return [stmt.block]
    if isinstance(stmt, s_tir.SBlock):
        return [s for s in (stmt.init, stmt.body) if s is not None]
    body = getattr(stmt, "body", None)
    return [body] if isinstance(body, tirx.Stmt) else []


def branches(stmt):
    """``children``, and both branches of a guard (``IfThenElse``): what a statement may execute."""
    if isinstance(stmt, tirx.IfThenElse):
        return [b for b in (stmt.then_case, stmt.else_case) if b is not None]
    return children(stmt)


def walk_all(stmt):
    """Every statement under ``stmt`` (``walk_stmts`` through both branches of each guard)."""
    yield stmt
    for c in branches(stmt):
        yield from walk_all(c)


def thread_extents(stmt, out: dict) -> None:
    if isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.THREAD_BINDING:
        tag = stmt.thread_binding.thread_tag
        if tag.startswith("threadIdx"):
            out[tag] = max(out.get(tag, 1), const_int(stmt.extent) or 1)
    for c in children(stmt):
        thread_extents(c, out)


def has_block(stmt) -> bool:
    if isinstance(stmt, s_tir.SBlockRealize):
        return True
    return any(has_block(c) for c in children(stmt))


def vector_lanes(stmt) -> int:
    """Lanes of the widest vectorized loop in ``stmt`` (1 when there is none)."""
    lanes = [1]

    def visit(s):
        if isinstance(s, tirx.For) and s.kind == tirx.ForKind.VECTORIZED:
            lanes[0] = max(lanes[0], const_int(s.extent) or 1)
        for c in children(s):
            visit(c)

    visit(stmt)
    return lanes[0]


def walk_stmts(stmt):
    yield stmt
    for c in children(stmt):
        yield from walk_stmts(c)




def manifested_buffers(stmt) -> list[str]:
    """Names of the shared buffers filled by the blocks in ``stmt`` annotated ``MANIFEST_LOCAL_STAGE``."""
    out = []
    for node in walk_stmts(stmt):
        if isinstance(node, s_tir.SBlock) and MANIFEST_LOCAL_STAGE in node.annotations:
            body = node.body
            out.append(body.buffer.name if isinstance(body, tirx.BufferStore) else "")
    return out


def double_buffered(stmt) -> tuple[str, ...]:
    """Names of the buffers that blocks in ``stmt`` mark ``DOUBLE_BUFFER_SCOPE``."""
    out = []
    for node in walk_stmts(stmt):
        if isinstance(node, s_tir.SBlock) and DOUBLE_BUFFER_SCOPE in node.annotations:
            index = const_int(node.annotations[DOUBLE_BUFFER_SCOPE])
            if index is not None and 0 <= index < len(node.writes):
                name = node.writes[index].source.name
                if name not in out:
                    out.append(name)
    return tuple(out)


def prim_functions(sch):
    """(name, PrimFunc) of every TIR function of a schedule's module."""
    for gv, func in sch.mod.functions_items():
        if isinstance(func, tirx.PrimFunc):
            yield gv.name_hint, func


def auto_copy_bytes(block) -> int | None:
    """The vector bytes of a cooperative copy block (``AUTO_COPY``; 0 when it states none), None for
    any other block."""
    ann = block.annotations
    if AUTO_COPY not in ann or not int(ann[AUTO_COPY]):
        return None
    return int(ann["vector_bytes"]) if "vector_bytes" in ann else 0


def fingerprint(node) -> tuple:
    """A hashable key of a PrimFunc or IRModule: equal keys mean structurally equal IR (TVM's
    ``structural_hash``) with the same names of functions, parameters, loops, blocks and buffers
    (which structural equality ignores, and which extraction and messages report)."""
    if isinstance(node, tvm.IRModule):
        return tvm_ffi.structural_hash(node), tuple(sorted((gv.name_hint, fingerprint(f)) for gv, f in
                                                           node.functions_items() if isinstance(f, tirx.PrimFunc)))
    names = [getattr(p, "name", "") for p in node.params]

    def on_loop(loop):
        names.append(loop.loop_var.name)

    def on_block(blk):
        names.append(blk.name_hint)
        names.extend(b.name for b in blk.alloc_buffers)
        names.extend(m.buffer.name for m in blk.match_buffers)

    tvm_ffi.structural_walk(node.body, [(tirx.For, on_loop), (s_tir.SBlock, on_block)])
    return tvm_ffi.structural_hash(node), tuple(names)


def relax_frontend():
    """``(tvm.relax, tvm.relax.frontend.nn)``, loaded when a whole model is built (``tvm_twill.workloads.llama``)."""
    from tvm import relax
    from tvm.relax.frontend import nn
    return relax, nn


def cuda_tensor_intrinsics():
    """``tvm.s_tir.tensor_intrin.cuda`` (importing it registers TVM's CUDA tensor intrinsics), loaded when asked."""
    import tvm.s_tir.tensor_intrin.cuda as tc
    return tc


def dlight():
    """``tvm.s_tir.dlight`` (its GPU schedule rules), loaded when asked."""
    import tvm.s_tir.dlight as dl
    return dl


def dlight_schedule_rule_base():
    """dlight's ``ScheduleRule`` base class, for tvm_twill.integrations.dlight."""
    from tvm.s_tir.dlight import ScheduleRule
    return ScheduleRule


def meta_schedule_postproc_base():
    """(PyPostproc, derived_object) of TVM's MetaSchedule, for tvm_twill.integrations.metaschedule."""
    from tvm.s_tir.meta_schedule.postproc import PyPostproc
    from tvm.ir.utils import derived_object
    return PyPostproc, derived_object


def tir_pipeline_registry():
    """TVM's registry of named TIR pipelines (``tvm.compile(..., tir_pipeline=name)``)."""
    from tvm.tirx import compilation_pipeline
    return compilation_pipeline


def stock_finalize_passes():
    """(host, device) finalization pass factories of TVM's default s_tir pipeline."""
    from tvm.s_tir import pipeline
    return pipeline.finalize_host_passes, pipeline.finalize_device_passes


_STOCK_LOCK = threading.Lock()


class _CaptureSequential:
    """Stands in for ``tvm.ir.transform.Sequential`` while TVM's pipeline builds its pass list: keeps the
    list and returns the module unchanged, so nothing runs."""

    captured: list = []

    def __init__(self, passes, *args, **kwargs):
        _CaptureSequential.captured = list(passes)

    def __call__(self, mod):
        return mod


def stock_s_tir_passes() -> list:
    """The passes TVM's default s_tir pipeline runs under the current PassContext, in its order.

    TVM 0.27 builds that list inside the pipeline at call time, switching
    passes on and off by PassContext options (bound checkers, ldg32, lwp,
    async copies, CSE, ...), and runs it at once.  To reuse exactly what TVM
    would run (with any pass a later TVM adds) instead of a copy of the list,
    the stock pipeline is run on an empty module with ``Sequential`` swapped
    for a recorder (under a lock: the swap is process-wide for its duration).
    """
    from tvm.s_tir import pipeline
    with _STOCK_LOCK:
        real = tvm.ir.transform.Sequential
        tvm.ir.transform.Sequential = _CaptureSequential
        try:
            stock, _, _ = pipeline.default_s_tir_pipeline()
            stock(tvm.IRModule({}))
            return list(_CaptureSequential.captured)
        finally:
            tvm.ir.transform.Sequential = real
            _CaptureSequential.captured = []


def stock_device_passes() -> list:
    """The passes of TVM's default device finalization (``stock_finalize_passes()[1]``), in its order: its
    ``Sequential`` is built with the recorder in place, as ``stock_s_tir_passes`` reads the s_tir list."""
    from tvm.s_tir import pipeline
    with _STOCK_LOCK:
        real = tvm.ir.transform.Sequential
        tvm.ir.transform.Sequential = _CaptureSequential
        try:
            pipeline.finalize_device_passes()
            return list(_CaptureSequential.captured)
        finally:
            tvm.ir.transform.Sequential = real
            _CaptureSequential.captured = []


def splice_passes(passes: list, at: str, extra: list, before: bool = False) -> list:
    """``passes`` with ``extra`` inserted right after (``before``: right before) the first pass named ``at``
    (``pass.info.name``).

    Raises RuntimeError when there is no such pass: TVM's pipeline changed and the splice point must be
    revisited (an internal error, not the user's)."""
    names = [p.info.name for p in passes]
    if at not in names:
        raise RuntimeError(f"TVM's s_tir pipeline has no pass '{at}' to insert at (passes: {names})")
    i = names.index(at) + (0 if before else 1)
    return passes[:i] + list(extra) + passes[i:]
def meta_schedule():
    """``tvm.s_tir.meta_schedule``, loaded when a tuning context is built (``tvm_twill.integrations.metaschedule``), with
    TVM's CUDA tensor intrinsics registered (the "cuda-tensorcore" rules name them)."""
    import tvm.s_tir.tensor_intrin.cuda  # noqa: F401 - registers the tensor intrinsics
    from tvm.s_tir import meta_schedule as ms
    return ms


def meta_schedule_te_workloads():
    """``tvm.s_tir.meta_schedule.testing.te_workload`` (MetaSchedule's reference TE workloads), loaded when asked."""
    from tvm.s_tir.meta_schedule.testing import te_workload
    return te_workload


def meta_schedule_verify_gpu_code():
    """TVM's ``VerifyGPUCode`` postprocessor class (the target's thread, shared-memory and register limits)."""
    from tvm.s_tir.meta_schedule.postproc import VerifyGPUCode
    return VerifyGPUCode
