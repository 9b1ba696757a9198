"""The consumers' block barriers, retargeted to the consumer threads: a named barrier per ``__syncthreads``.

A warp-specialized kernel's consumers may need barriers of their own: an
epilogue after the loop that goes through shared memory (O normalised into a
shared tile, then stored by other threads), a body that exchanges values
through shared memory.  TVM's ThreadSync places those barriers (it runs after
the WS rewrite), but it refuses to place one under a condition that depends on
the thread ("Cannot insert syncs inside condition"), and a ``__syncthreads``
inside one role would deadlock: the other role never reaches it.

So the rewrite marks the role branch's condition ``tvm_thread_invariant``
(``mark_role_branch``): ThreadSync then plans the consumers' barriers inside
the branch exactly as it would in the unspecialized kernel, and this pass,
right after ThreadSync, turns each ``tvm_storage_sync("shared" / "shared.dyn")``
in the consumer branch into ``bar.sync CONSUMER_BARRIER, consumer_threads``
and removes the mark (the final TIR tests the plain condition).  That is sound
because the only threads that run the consumer branch are the consumer threads,
all of them, at places ThreadSync checked to be thread-invariant; what the
producer writes (the rings) reaches the consumers through the mbarriers,
which the protocol check covers.  A barrier ThreadSync places in the
producer branch is left as it is: ``ws_lowering.check_role_branches`` refuses
that kernel.  Named barrier ``CONSUMER_BARRIER`` (15) is reserved for this.
With ordered consumer groups (``consumer_order``: group ``c`` takes its turns on
barrier ``1 + c``, ``c < 7``), a barrier inside the consumer loop would span the
groups and deadlock against the turns; ``consumer_order`` admits shared stores
in that loop only where ``group_scratch`` proved each group's shared scratch
private, so there each barrier becomes group ``c``'s own, ``bar.sync 8 + c,
threads per group`` (read off the loop's turn: its id + 7, half its count).
A kernel whose consumer branch needs no barrier comes out unchanged (only the
mark removed).
"""
from __future__ import annotations

from ...frontend.ir import T, const_int, tirx, tvm, tvm_ffi
from ...frontend.ir import substitute as _subst
from ..tir_util import op_name

__all__ = ["CONSUMER_BARRIER", "GROUP_BARRIER", "ROLE_VAR", "consumer_barriers_pass", "mark_role_branch", "retarget_barriers"]

#: Named barrier of the consumer threads' own block barriers (0 is __syncthreads, 1 .. 7 the ordered groups').
CONSUMER_BARRIER = 15
#: Group c's own barriers inside an ordered consumer loop: GROUP_BARRIER + c.
GROUP_BARRIER = 8
_TURN = "tirx.ptx.bar_sync_count"
#: The warp index the role branch tests (``warp_specialize``).
ROLE_VAR = "ws_warp"
_INVARIANT = "tirx.tvm_thread_invariant"
_SYNC = "tirx.tvm_storage_sync"


def mark_role_branch(cond):
    """The role branch's condition as ThreadSync may plan barriers under (``tvm_thread_invariant``)."""
    return T.tvm_thread_invariant(cond)


def _is_block_sync(stmt) -> bool:
    call = stmt.value if isinstance(stmt, tirx.Evaluate) else None
    return isinstance(call, tvm.ir.expr.Call) and op_name(call) == _SYNC and \
        str(call.args[0]).strip('"') in ("shared", "shared.dyn")


def _consumer_threads(cond) -> int:
    """Threads of the consumer side of ``cond`` (true for the producer's warps ``ws_warp >= W``): 32 W."""
    warp = next(v for v in tirx.analysis.undefined_vars(cond) if v.name == ROLE_VAR)
    ana = tvm.sym.Analyzer()
    for w in range(1, 65):
        if const_int(ana.simplify(_subst(cond, [(warp, tirx.const(w, "int32"))]))) == 1:
            return 32 * w
    raise RuntimeError("warp specialization: the role branch gives no warp below 65 to the producer")


def retarget_barriers(stmt):
    """``stmt`` with every marked role branch unmarked and its consumer side's block barriers named."""
    def on_if(node):
        cond = node.condition
        if not (isinstance(cond, tvm.ir.expr.Call) and op_name(cond) == _INVARIANT):
            return node
        inner = cond.args[0]
        if ROLE_VAR not in {v.name for v in tirx.analysis.undefined_vars(inner)}:
            return node          # a kernel's own thread-invariant condition, not a role branch
        threads = _consumer_threads(inner)
        bar = tirx.Evaluate(T.ptx.bar.sync(tirx.const(CONSUMER_BARRIER, "uint32"), tirx.const(threads, "uint32")))
        consumer = node.else_case
        if consumer is not None:
            consumer = tvm_ffi.structural_map(consumer, [(tirx.For, _group_barriers)], order="post")
            consumer = tvm_ffi.structural_map(consumer, [(tirx.Evaluate, lambda e: bar if _is_block_sync(e)
                                                          else e)], order="post")
        return tirx.IfThenElse(inner, node.then_case, consumer)
    return tvm_ffi.structural_map(stmt, [(tirx.IfThenElse, on_if)], order="post")


def _turn(loop):
    """The ordered groups' turn (``bar.sync 1 + c, 2 T``: its id depends on the warp) in ``loop``, or None."""
    found = []
    tvm_ffi.structural_walk(loop.body, [(tvm.ir.expr.Call, lambda c: found.append(c) if op_name(c) == _TURN
                                         and const_int(c.args[0]) is None else None)])
    return found[0] if found else None


def _group_barriers(loop):
    """In a loop with ordered groups' turns: each block barrier -> the group's own (id + 7, half the count)."""
    turn = _turn(loop)
    if turn is None:
        return loop
    count = const_int(turn.args[1])
    bar = tirx.Evaluate(T.ptx.bar.sync(turn.args[0] + tirx.const(GROUP_BARRIER - 1, "uint32"),
                                       tirx.const(count // 2, "uint32")))
    return tvm_ffi.structural_map(loop, [(tirx.Evaluate, lambda e: bar if _is_block_sync(e) else e)], order="post")


@tirx.transform.prim_func_pass(opt_level=0, name="TwillConsumerBarriers")
def consumer_barriers_pass(func, mod, ctx):
    """``retarget_barriers`` on the body: right after TVM's ThreadSync passes."""
    return func.with_body(retarget_barriers(func.body))
