"""role_barriers: the block barriers TVM's ThreadSync places in a warp-specialized kernel's consumer branch.

Before / expected on small statements: a ``__syncthreads`` in the consumer side of the marked role branch
becomes ``bar.sync 15, consumer threads`` and the mark goes; one in an ordered consumer loop (a turn
``bar.sync 1 + c``) becomes the group's own ``bar.sync 8 + c, threads per group``; the producer side and a
kernel's own thread-invariant conditions are left alone.
"""
import pytest

tvm = pytest.importorskip("tvm")
from tvm.script import tirx as T

from tvm_twill.frontend.ir import tirx
from tvm_twill.transforms.ws.role_barriers import mark_role_branch, retarget_barriers

WARP = tirx.Var("ws_warp", "int32")
X = tirx.decl_buffer((64,), "float32", name="X", scope="shared")


def _sync():
    return tirx.Evaluate(T.tvm_storage_sync("shared"))


def _bar(bar_id, threads):
    return tirx.Evaluate(T.ptx.bar.sync(bar_id, tirx.const(threads, "uint32")))


def _store(v):
    return tirx.BufferStore(X, T.float32(v), [0])


def test_a_consumer_syncthreads_becomes_a_named_barrier_of_the_consumers():
    producer = tirx.SeqStmt([_store(0), _sync()])
    before = tirx.IfThenElse(mark_role_branch(WARP >= 2), producer, tirx.SeqStmt([_store(1), _sync(), _store(2)]))
    after = tirx.IfThenElse(WARP >= 2, producer,
                            tirx.SeqStmt([_store(1), _bar(tirx.const(15, "uint32"), 64), _store(2)]))
    tvm.ir.assert_structural_equal(retarget_barriers(before), after, map_free_vars=True)


def test_in_an_ordered_loop_each_group_gets_its_own_barrier():
    k = tirx.Var("ws_k", "int32")
    turn_id = tirx.Cast("uint32", tirx.floordiv(WARP, 2) + 1)
    turn = _bar(turn_id, 128)

    def loop(sync):
        return tirx.For(k, 0, 4, tirx.ForKind.SERIAL, tirx.SeqStmt([turn, _store(1), sync, _store(2)]))
    before = tirx.IfThenElse(mark_role_branch(WARP >= 4), _store(0), tirx.SeqStmt([loop(_sync()), _sync()]))
    group_bar = _bar(turn_id + tirx.const(7, "uint32"), 64)
    after = tirx.IfThenElse(WARP >= 4, _store(0),
                            tirx.SeqStmt([loop(group_bar), _bar(tirx.const(15, "uint32"), 128)]))
    tvm.ir.assert_structural_equal(retarget_barriers(before), after, map_free_vars=True)


def test_a_kernels_own_invariant_condition_is_left_alone():
    tx = tirx.Var("tx", "int32")
    own = tirx.IfThenElse(T.tvm_thread_invariant(tx < 2), tirx.SeqStmt([_store(1), _sync()]), None)
    tvm.ir.assert_structural_equal(retarget_barriers(own), own)
