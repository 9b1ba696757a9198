"""Loop-invariant let-bindings bound once before a pipelined loop of symbolic extent.

With a symbolic trip count TVM 0.27's InjectSoftwarePipeline puts each
statement of the prologue, body and epilogue under its own guard, a ``Bind``
included: the variable is then undefined in the statements using it under
other guards, and nvcc rejects the CUDA TVM emits (``L_kv_base`` in TVM's
ragged prefill and tree attention).  ``hoist_invariant_lets`` moves every
binding ``frontend.invariant.hoistable_lets`` finds loop-invariant out of
such a loop (one annotated ``software_pipeline_stage``), right before it,
guarded by the trip count (``let x = if_then_else(extent > 0, value, 0)``:
the value's loads happen only when the loop runs, as they did), and drops
the binding's entries from the loop's stage and order annotations (the
order of the others re-ranked, their relative order kept).  Each use, in
any stage, then reads the value it read before.  A loop of constant extent,
or one without a pipeline annotation, is left as it is.  The pass runs
right before InjectSoftwarePipeline in ``tvm_twill_swp``; the front-end's
``let_refusal`` refuses exactly the bindings it does not hoist.
"""
from __future__ import annotations

from ..frontend.invariant import body_statements, hoistable_lets
from ..frontend.ir import is_true, s_tir, tirx, tvm_ffi
from ..model.pipeline import ORDER, STAGE

__all__ = ["hoist_invariant_lets", "hoist_invariant_lets_pass"]


def _without(body, drop: set):
    """``body`` (a loop body) without its direct statements at pipeline indices ``drop``."""
    realize = body if isinstance(body, s_tir.SBlockRealize) else None
    seq = realize.block.body if realize is not None else body
    kept, i = [], 0
    for c in seq.seq:
        flat = isinstance(c, s_tir.SBlockRealize) and is_true(c.predicate) and isinstance(c.block.body, tirx.SeqStmt)
        if flat or i not in drop:
            kept.append(c)
        i += len(c.block.body.seq) if flat else 1
    new_seq = tirx.SeqStmt(kept)
    if realize is None:
        return new_seq
    blk = realize.block
    new_blk = s_tir.SBlock(blk.iter_vars, blk.reads, blk.writes, blk.name_hint, new_seq, blk.init, blk.alloc_buffers,
                           blk.match_buffers, blk.annotations)
    return s_tir.SBlockRealize(realize.iter_values, realize.predicate, new_blk)


def _annotations(annotations, drop: set) -> dict:
    """The stage and order annotations without the entries at ``drop``, the order re-ranked."""
    out = dict(annotations.items())
    stage = [int(s) for s in annotations[STAGE]]
    keep = [i for i in range(len(stage)) if i not in drop]
    out[STAGE] = [stage[i] for i in keep]
    if ORDER in annotations:
        order = [int(o) for o in annotations[ORDER]]
        ranked = sorted(keep, key=lambda i: order[i])
        rank = {i: r for r, i in enumerate(ranked)}
        out[ORDER] = [rank[i] for i in keep]
    return out


def hoist_invariant_lets(func):
    """``func`` with the loop-invariant bindings of its pipelined loops of symbolic extent bound before the
    loop (module docstring)."""
    body = func.body

    def fix(loop):
        if STAGE not in loop.annotations or isinstance(loop.extent, tirx.IntImm):
            return loop
        drop = hoistable_lets(loop, body)
        if not drop:
            return loop
        binds = [c for i, c in body_statements(loop) if i in drop]
        new_loop = tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, _without(loop.body, set(drop)),
                            loop.thread_binding, _annotations(loop.annotations, set(drop)), getattr(loop, "step", None))
        runs = loop.extent > 0
        hoisted = [tirx.Bind(b.var, tirx.if_then_else(runs, b.value, tirx.const(0, b.value.ty.dtype))) for b in binds]
        return tirx.SeqStmt([*hoisted, new_loop])

    return func.with_body(tvm_ffi.structural_map(body, [(tirx.For, fix)]))


@tirx.transform.prim_func_pass(opt_level=0, name="TwillHoistInvariantLets")
def hoist_invariant_lets_pass(func, mod, ctx):
    return hoist_invariant_lets(func)
