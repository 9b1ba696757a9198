"""Loop-invariant let-bindings: which top-level ``T.let`` of a loop body may be bound once, before the loop.

With a symbolic trip count TVM's InjectSoftwarePipeline puts each statement
of the prologue, body and epilogue under its own guard, a ``Bind`` (the
statement form of ``T.let``) included; the bound variable is then in scope
only under that guard, and the statements using it under other guards refer
to an undefined variable (TVM emits the CUDA, nvcc rejects it).  TVM's
ragged prefill and tree attention bind ``L_kv_base = kv_indptr[b_idx]`` in
their KV loop.  Such a binding has the same value in every iteration, so it
can be bound once before the loop (``transforms.let_hoist`` does, right
before InjectSoftwarePipeline), and every use, whatever its stage, sees the
value it saw.

A top-level binding of the loop body is *invariant* (``hoistable_lets``)
when its value

* mentions no variable defined in the loop (the loop variable, a let, loop or
  block variable of the body) other than an earlier invariant binding;
* loads only buffers allocated outside the loop whose contents the loop
  cannot change: a global buffer the function never stores to (read-only for
  the launch, ``frontend.uniform``'s notion), or a thread-local buffer
  (``local`` scope) no statement of the loop stores to; never a buffer passed
  to a call (an intrinsic may write it), never shared memory (another thread
  may store to it while this one runs the loop);
* calls nothing but pure operations (no side effect, no state read).

Only bindings that are direct statements of the body count (not ones inside
a child block InjectSoftwarePipeline flattens).  A value loads memory only if
the loop runs: the hoisted binding is guarded by the trip count
(``if_then_else(extent > 0, value, 0)``, which evaluates only the branch
taken), so no load happens that the loop would not have made.
"""
from __future__ import annotations

from .ir import is_true, s_tir, scope_of, tirx, tvm, tvm_ffi
from .uniform import alias_roots, escaped_buffers

__all__ = ["body_statements", "hoistable_lets", "invariant_value"]

_PURE_EFFECT = 1  # TVM's CallEffectKind: 0 expression annotation, 1 pure


def body_statements(loop_node) -> list:
    """``(pipeline index, statement)`` of the direct statements of ``loop_node``'s body, numbered as
    InjectSoftwarePipeline numbers its statements (a child block of a statement sequence is flattened)."""
    body = loop_node.body
    if isinstance(body, s_tir.SBlockRealize):
        body = body.block.body
    if not isinstance(body, tirx.SeqStmt):
        return []
    out, i = [], 0
    for c in body.seq:
        if isinstance(c, s_tir.SBlockRealize) and is_true(c.predicate) and isinstance(c.block.body, tirx.SeqStmt):
            i += len(c.block.body.seq)
        else:
            out.append((i, c))
            i += 1
    return out


def _defined_in(loop_node) -> list:
    """Every variable the loop defines: its loop variable and each let, loop or block variable of its body."""
    out = [loop_node.loop_var]

    def on_realize(r):
        out.extend(iv.var for iv in r.block.iter_vars)

    tvm_ffi.structural_walk(loop_node.body, [(tirx.Bind, lambda s: out.append(s.var)),
                                            (tirx.LetStmt, lambda s: out.append(s.var)),
                                            (tirx.For, lambda s: out.append(s.loop_var)),
                                            (tirx.Let, lambda e: out.append(e.var)),
                                            (s_tir.SBlockRealize, on_realize)])
    return out


def _allocated_in(loop_node) -> list:
    """The buffers the loop's body allocates (out of scope before the loop)."""
    out: list = []

    def on_block(blk):
        out.extend(blk.alloc_buffers)

    tvm_ffi.structural_walk(loop_node.body, [(s_tir.SBlock, on_block)])
    return out


def _pure_call(call) -> bool:
    op = call.op
    try:
        kind = op.get_attr("TCallEffectKind") if isinstance(op, tvm.ir.Op) else None
    except Exception:  # noqa: BLE001 - an op without the attribute is not known pure
        kind = None
    return kind is not None and int(kind) <= _PURE_EFFECT


class _Context:
    """What the invariance test needs about one loop of one function (module docstring)."""

    def __init__(self, loop_node, func_body):
        self.root = alias_roots(func_body)
        stored_fn: set = set()
        stored_loop: set = set()
        tvm_ffi.structural_walk(func_body, [(tirx.BufferStore, lambda s: stored_fn.add(self.root(s.buffer)))])
        tvm_ffi.structural_walk(loop_node.body, [(tirx.BufferStore, lambda s: stored_loop.add(self.root(s.buffer)))])
        self.stored_fn, self.stored_loop = stored_fn, stored_loop
        self.escaped = {self.root(b) for b in escaped_buffers(func_body)}
        self.inner = {self.root(b) for b in _allocated_in(loop_node)}
        self.defined = _defined_in(loop_node)

    def loads_ok(self, buf) -> bool:
        r = self.root(buf)
        if r in self.escaped or r in self.inner:
            return False
        scope = scope_of(buf)
        if scope == "global":
            return r not in self.stored_fn
        return scope == "local" and r not in self.stored_loop


def invariant_value(value, ctx: _Context, hoisted=()) -> bool:
    """Whether ``value`` has the same value in every iteration of ``ctx``'s loop (module docstring);
    ``hoisted``: the variables of the earlier invariant bindings, defined before the loop once hoisted."""
    bad: list = []

    def on_var(v):
        if any(v.same_as(d) for d in ctx.defined) and not any(v.same_as(h) for h in hoisted):
            bad.append(v)

    def on_load(ld):
        if not ctx.loads_ok(ld.source):
            bad.append(ld)

    def on_call(call):
        if not _pure_call(call):
            bad.append(call)

    tvm_ffi.structural_walk(value, [(tirx.Var, on_var), (tvm.ir.expr.TensorLoad, on_load),
                                    (tvm.ir.expr.Call, on_call)])
    return not bad


def hoistable_lets(loop_node, func_body) -> list:
    """The pipeline indices of the top-level bindings of ``loop_node``'s body that are loop-invariant
    (module docstring), in order.  ``func_body``: the body of the function the loop is in."""
    ctx = _Context(loop_node, func_body)
    out, hoisted = [], []
    for i, c in body_statements(loop_node):
        if isinstance(c, tirx.Bind) and invariant_value(c.value, ctx, hoisted):
            out.append(i)
            hoisted.append(c.var)
    return out
