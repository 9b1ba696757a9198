"""Block uniformity: which values are the same in every thread of a thread block.

A barrier (``__syncthreads``) is correct under a condition only when every
thread of the block takes the same branch.  TVM's InjectSoftwarePipeline
guards each statement of the prologue, body and epilogue of a loop of
symbolic extent with its iteration's bound; the ``tvm_twill_swp`` TIR pipeline
(``transforms.swp_lowering.uniform_guard_loops``) lets TVM's ThreadSync place
barriers under such a guard when the guard is *uniform*, and the front-end
refuses to plan a loop with explicit barriers whose bound is not
(``opaque.barrier_refusal``).  Both use the rule here:

* varying: a thread index (``threadIdx.*``, as a ``thread_extent`` attribute or
  a thread-bound loop that is not ``blockIdx.*``), and every let / loop
  variable computed from a varying variable or from memory (to a fixpoint);
* an expression is uniform when it reads no memory, calls nothing but pure
  integer arithmetic (``if_then_else``, ``likely``, min, max, floordiv,
  floormod) and reads no varying variable.  Parameters, shape variables and
  block indices are uniform.

A value loaded from memory may well be the same in every thread (an indptr
entry read at a block index), but proving it would mean following the stores;
the rule does not try, so such a value counts as varying.
"""
from __future__ import annotations

from .ir import tirx, tvm, tvm_ffi

__all__ = ["is_uniform", "reads_varying", "varying_vars"]

_PURE = ("if_then_else", "likely", ".min", ".max", "floordiv", "floormod")


def _thread_varying_tag(tag) -> bool:
    return not str(tag).startswith("blockIdx")


def varying_vars(stmt) -> set:
    """The variables of ``stmt`` whose value may differ between the threads of a block (module docstring)."""
    varying: set = set()
    defs: list = []

    def on_attr(attr):
        if attr.attr_key == "thread_extent" and str(attr.node.thread_tag).startswith("threadIdx"):
            varying.add(attr.node.var)

    def on_let(let):
        defs.append((let.var, [let.value]))

    def on_bind(bind):
        defs.append((bind.var, [bind.value]))

    def on_for(loop):
        if loop.kind == tirx.ForKind.THREAD_BINDING and (
                loop.thread_binding is None or _thread_varying_tag(loop.thread_binding.thread_tag)):
            varying.add(loop.loop_var)
        defs.append((loop.loop_var, [loop.min, loop.extent]))

    tvm_ffi.structural_walk(stmt, [(tirx.AttrStmt, on_attr), (tirx.LetStmt, on_let), (tirx.Bind, on_bind),
                                   (tirx.For, on_for)])
    changed = True
    while changed:
        changed = False
        for var, exprs in defs:
            if var not in varying and any(reads_varying(e, varying) for e in exprs):
                varying.add(var)
                changed = True
    return varying


def reads_varying(expr, varying: set) -> bool:
    """Whether ``expr`` reads memory, calls anything but pure integer arithmetic, or reads a ``varying`` variable."""
    found = []

    def on_var(v):
        if v in varying:
            found.append(v)

    def on_load(_):
        found.append("load")

    def on_call(call):
        if not getattr(call.op, "name", "").endswith(_PURE):
            found.append(call)

    tvm_ffi.structural_walk(expr, [(tirx.Var, on_var), (tvm.ir.expr.TensorLoad, on_load),
                                   (tvm.ir.expr.Call, on_call)])
    return bool(found)


def is_uniform(exprs, func_body) -> bool:
    """Whether every expression of ``exprs`` has the same value in every thread of a block of ``func_body``."""
    varying = varying_vars(func_body)
    return not any(reads_varying(e, varying) for e in exprs)
