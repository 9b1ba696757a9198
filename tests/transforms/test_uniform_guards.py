"""transforms.swp_lowering.uniform_guard_loops: a block-uniform guard around shared-memory statements becomes a
loop of 0 or 1 trips (so TVM's ThreadSync may put a barrier inside); any other ``if`` stays an ``if``.
``guard_skip_barriers``: a guard loop that holds a barrier is followed by the barrier under the negated
condition (ThreadSync counted on it to order what comes before the guard with what comes after).

Uniform: the condition reads only parameters, block indices and loop counters of uniform loops.  Not uniform:
a thread index, a let or loop variable computed from one, a memory read.  A guard without shared memory under
it is left alone (ThreadSync has nothing to place there).
"""
import pytest

tvm = pytest.importorskip("tvm")

from tvm.script import tirx as T  # noqa: E402

from tvm_twill.frontend.ir import tirx, tvm_ffi  # noqa: E402
from tvm_twill.transforms.swp_lowering import uniform_guard_loops  # noqa: E402


def _kinds(func):
    """(guard loops, ifs) left in ``func`` after the rewrite."""
    out = {"loops": 0, "ifs": 0}

    def on_for(loop):
        out["loops"] += loop.loop_var.name == "guard"

    def on_if(_):
        out["ifs"] += 1

    tvm_ffi.structural_walk(uniform_guard_loops(func).body, [(tirx.For, on_for), (tirx.IfThenElse, on_if)])
    return out["loops"], out["ifs"]


def _kernel(cond_kind: str):
    @T.prim_func
    def f(a: T.handle, n: T.int32):
        A = T.match_buffer(a, (128,), "float32")
        bx = T.launch_thread("blockIdx.x", 2)
        tx = T.launch_thread("threadIdx.x", 32)
        S = T.alloc_buffer((32,), "float32", scope="shared")
        L = T.alloc_buffer((1,), "int32", scope="local")
        for j in range(4):
            t = T.bind(tx * 2)
            if cond_kind == "uniform":
                if j * 32 < n and bx < 2:
                    S[tx] = A[j * 32 + tx]
            elif cond_kind == "thread":
                if tx < n:
                    S[tx] = A[j * 32 + tx]
            elif cond_kind == "let":
                if t < n:
                    S[tx] = A[j * 32 + tx]
            elif cond_kind == "memory":
                if L[0] < n:
                    S[tx] = A[j * 32 + tx]
            elif cond_kind == "no_shared":
                if j < n:
                    A[tx] = T.float32(0)
            elif cond_kind == "else":
                if j < n:
                    S[tx] = A[j * 32 + tx]
                else:
                    S[tx] = T.float32(0)
            A[j * 32 + tx] = S[(tx + 1) % 32] + T.Cast("float32", t)
    return f


@pytest.mark.parametrize("kind,expected", [("uniform", (1, 0)), ("thread", (0, 1)), ("let", (0, 1)),
                                           ("memory", (0, 1)), ("no_shared", (0, 1)), ("else", (0, 1))])
def test_only_uniform_guards_around_shared_memory_become_loops(kind, expected):
    assert _kinds(_kernel(kind)) == expected


def test_the_guard_loop_runs_the_statement_exactly_when_the_condition_holds():
    func = uniform_guard_loops(_kernel("uniform"))
    loops = []
    tvm_ffi.structural_walk(func.body, [(tirx.For, lambda lp: loops.append(lp) if lp.loop_var.name == "guard"
                                         else None)])
    (loop,) = loops
    assert isinstance(loop.extent, tirx.Select) and int(loop.extent.true_value) == 1
    assert int(loop.extent.false_value) == 0 and int(loop.min) == 0
    assert "S" in str(loop.body) or "shared" in str(loop.body)


def _with_barrier(func):
    """``func`` with a ``tvm_storage_sync("shared")`` as the first statement of each guard loop's body (where
    ThreadSync would place one)."""
    def fix(loop):
        if loop.loop_var.name != "guard":
            return loop
        body = tirx.SeqStmt([tirx.Evaluate(T.tvm_storage_sync("shared")), loop.body])
        return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, body, loop.thread_binding,
                        loop.annotations)
    return func.with_body(tvm_ffi.structural_map(func.body, [(tirx.For, fix)]))


def _barriers_after_guards(func):
    """For each guard loop: the statement right after it in its sequence (None when it is last)."""
    out = []

    def on_seq(seq):
        items = list(seq.seq)
        for i, s in enumerate(items):
            if isinstance(s, tirx.For) and s.loop_var.name == "guard":
                out.append(items[i + 1] if i + 1 < len(items) else None)

    tvm_ffi.structural_walk(func.body, [(tirx.SeqStmt, on_seq)])
    return out


def test_a_guard_loop_with_a_barrier_gets_the_barrier_on_the_path_that_skips_it():
    from tvm_twill.transforms.swp_lowering import guard_skip_barriers
    guarded = uniform_guard_loops(_kernel("uniform"))
    (loop,) = _guard_loops(guarded)
    tvm.ir.assert_structural_equal(guard_skip_barriers(guarded), guarded)  # no barrier inside: unchanged
    fixed = guard_skip_barriers(_with_barrier(guarded))
    (after,) = _barriers_after_guards(fixed)
    assert isinstance(after, tirx.IfThenElse) and after.else_case is None
    tvm.ir.assert_structural_equal(after.condition, tirx.Not(loop.extent.condition))  # exactly when skipped
    assert isinstance(after.then_case, tirx.Evaluate) and "tvm_storage_sync" in str(after.then_case)


def _guard_loops(func):
    loops = []
    tvm_ffi.structural_walk(func.body, [(tirx.For, lambda lp: loops.append(lp) if lp.loop_var.name == "guard"
                                         else None)])
    return loops
