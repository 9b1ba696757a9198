"""``transforms.async_queue``: TVM's pipelined TIR read back, a thread's cp.async queue run for real trip counts.

Hand-built regions (the attributes InjectSoftwarePipeline emits: ``async_commit_queue_scope``, ``async_scope``,
``async_wait_queue_scope`` / ``async_wait_inflight_count``) pin the semantics to the PTX ISA's:
``cp.async.wait_group N`` completes every committed group but the N newest; a copy that was never committed is
not covered by any wait; a read of shared memory a copy in flight writes (at an index that may overlap) is a
violation.  Then the real case: TVM 0.27 places the prologue's only wait on a statement the prologue skips, so
the SIMT attention's first read of K has no wait; the guard refuses that annotation.
"""
import pytest

pytest.importorskip("tvm")
import tvm  # noqa: E402
from tvm import tirx  # noqa: E402

from tvm_twill.errors import WaitCountError  # noqa: E402
from unsafe_pipelines import MISSING_WAIT, simt_attention  # noqa: E402
from tvm_twill.frontend import extract_loop, resolve_loop  # noqa: E402
from tvm_twill.transforms import apply_annotation  # noqa: E402
from tvm_twill.transforms.async_queue import trip_envs, violations  # noqa: E402
from tvm_twill.transforms.wait_counts import guard_loop_waits  # noqa: E402

I32 = "int32"
X = tirx.decl_buffer((8, 4), "float32", "X")
S = tirx.decl_buffer((2, 4), "float32", "S", scope="shared")
C = tirx.decl_buffer((8, 4), "float32", "C")


def _c(v):
    return tirx.const(v, I32)


def copy(version, row, commit=True):
    """``S[version, :] = X[row, :]`` under ``async_scope``, committed as one group unless ``commit`` is False."""
    v = tirx.Var("v", I32)
    store = tirx.For(v, _c(0), _c(4), tirx.ForKind.SERIAL,
                     tirx.BufferStore(S, tirx.BufferLoad(X, [_c(row) if isinstance(row, int) else row, v]),
                                      [_c(version) if isinstance(version, int) else version, v]))
    body = tirx.AttrStmt(_c(0), "async_scope", _c(1), store)
    return tirx.AttrStmt(_c(0), "async_commit_queue_scope", _c(0), body) if commit else body


def read(version, out_row=0, wait=None):
    """``C[out_row, :] = S[version, :]``, after ``cp.async.wait_group wait`` when given."""
    v = tirx.Var("v", I32)
    body = tirx.For(v, _c(0), _c(4), tirx.ForKind.SERIAL,
                    tirx.BufferStore(C, tirx.BufferLoad(S, [_c(version) if isinstance(version, int) else version, v]),
                                     [_c(out_row), v]))
    if wait is None:
        return body
    count = _c(wait) if isinstance(wait, int) else wait
    return tirx.AttrStmt(_c(0), "async_wait_queue_scope", _c(0),
                         tirx.AttrStmt(_c(0), "async_wait_inflight_count", count, body))


def seq(*stmts):
    return tirx.SeqStmt(list(stmts))


def test_a_wait_that_leaves_only_newer_groups_in_flight_is_clean():
    assert violations(seq(copy(0, 0), copy(1, 1), read(0, wait=1)), "i", {}) == []


def test_a_count_one_too_large_lets_the_read_see_its_copy_in_flight():
    found = violations(seq(copy(0, 0), copy(1, 1), read(0, wait=2)), "i", {})
    assert len(found) == 1 and "reads 'S'" in found[0]


def test_a_missing_wait_is_a_violation_and_the_newest_group_is_not_completed_by_wait_1():
    assert violations(seq(copy(0, 0), read(0)), "i", {})
    assert violations(seq(copy(0, 0), copy(1, 1), read(1, wait=1)), "i", {})


def test_a_copy_never_committed_is_covered_by_no_wait():
    # PTX: wait_group completes committed groups only (wait_all commits first)
    assert violations(seq(copy(0, 0, commit=False), read(0, wait=0)), "i", {})
    assert violations(seq(copy(0, 0, commit=True), read(0, wait=0)), "i", {}) == []


def test_versions_are_told_apart_in_a_loop():
    # for i in 0..3: copy into S[i % 2]; then read S[(i - 1) % 2] after a wait of 1: the classic double buffer
    i = tirx.Var("i", I32)
    body = seq(copy(tirx.floormod(i, 2), i),
               tirx.IfThenElse(tirx.GE(i, _c(1)), read(tirx.floormod(i - 1, 2), 0, wait=1), None))
    loop = tirx.For(i, _c(0), _c(4), tirx.ForKind.UNROLLED, body)
    assert violations(loop, "i", {}) == []
    too_many = tirx.For(i, _c(0), _c(4), tirx.ForKind.UNROLLED,
                        seq(copy(tirx.floormod(i, 2), i),
                            tirx.IfThenElse(tirx.GE(i, _c(1)), read(tirx.floormod(i - 1, 2), 0, wait=2), None)))
    found = violations(too_many, "i", {})
    assert found and "iteration 1" in found[0]


def test_a_wait_under_a_condition_that_does_not_fold_cannot_be_ordered():
    n = tirx.Var("n", I32)
    region = seq(copy(0, 0), tirx.IfThenElse(tirx.LT(_c(0), n), read(0, wait=0), None))
    assert "cannot be checked" in violations(region, "i", {})[0]
    assert violations(region, "i", {n: (3, 3)}) == []


def test_a_pointer_read_is_the_version_of_its_first_element():
    # tvm_access_ptr(S.data, offset 0, extent 6, read): starts in version 0, its stated extent reaches version 1
    ptr = tvm.tirx.call_intrin("handle", "tirx.tvm_access_ptr", tvm.tirx.call_intrin("handle", "tirx.type_annotation"),
                               S.data, _c(0), _c(6), _c(1))
    use = tirx.Evaluate(tvm.tirx.call_extern("int32", "consume", ptr))
    wait1 = tirx.AttrStmt(_c(0), "async_wait_queue_scope", _c(0),
                          tirx.AttrStmt(_c(0), "async_wait_inflight_count", _c(1), use))
    assert violations(seq(copy(0, 0), copy(1, 1), wait1), "i", {}) == []
    assert violations(seq(copy(1, 0), copy(0, 1), wait1), "i", {})


def test_two_copies_in_flight_to_one_place_count_only_where_the_buffer_is_read():
    assert violations(seq(copy(0, 0), copy(0, 1)), "i", {}) == []
    assert violations(seq(copy(0, 0), copy(0, 1), read(0, wait=0)), "i", {})


def test_trip_envs_realise_every_trip_count_through_the_extents_variable():
    n = tirx.Var("n", I32)
    loop = tirx.For(tirx.Var("j", I32), _c(0), tirx.floordiv(n + 15, 16), tirx.ForKind.SERIAL, tirx.Evaluate(_c(0)))
    envs = trip_envs(loop, 3)
    values = [env[n][0] for _, env in envs]
    assert [(v + 15) // 16 for v in values] == list(range(0, 3 * 3 + 7))
    assert values[:3] == [0, 1, 17]  # the smallest n of each trip count
    static = tirx.For(tirx.Var("j", I32), _c(0), _c(8), tirx.ForKind.SERIAL, tirx.Evaluate(_c(0)))
    assert trip_envs(static, 3) == [("", {})]
    m = tirx.Var("m", I32)
    two = tirx.For(tirx.Var("j", I32), _c(0), n + m, tirx.ForKind.SERIAL, tirx.Evaluate(_c(0)))
    assert trip_envs(two, 3) is None


def test_the_guard_refuses_tvms_missing_prologue_wait():
    _, sch, loop = simt_attention()
    ref = resolve_loop(sch, loop)
    ex = extract_loop(sch, ref.rv, "sm_80")
    apply_annotation(sch, ref.rv, MISSING_WAIT)
    with pytest.raises(WaitCountError, match=r"prologue iteration 1 \(trip count given by n=1\) reads 'K_load_s'"):
        guard_loop_waits(sch, ref.rv, MISSING_WAIT, ex.graph, ex.trip_count)
    assert "tvm_twill_async_wait_counts" not in sch.get(ref.rv).annotations


def test_a_swizzled_pointer_offset_stays_in_its_version():
    # MetaSchedule's tensor-core copies XOR the column with the row (a swizzle): the offset's interval must
    # stay within the version, or every pipelined ldmatrix would look like a read of the copy in flight
    t = tirx.Var("t", I32)
    col = tirx.bitwise_xor(tirx.floormod(t, 4), tirx.floordiv(t, 8)) if hasattr(tirx, "bitwise_xor") else \
        tvm.ir.prim.expr.BitwiseXor(tirx.floormod(t, 4), tirx.floordiv(t, 8))
    ptr = tvm.tirx.call_intrin("handle", "tirx.tvm_access_ptr", tvm.tirx.call_intrin("handle", "tirx.type_annotation"),
                               S.data, col, _c(1), _c(1))
    use = tirx.Evaluate(tvm.tirx.call_extern("int32", "consume", ptr))
    wait1 = tirx.AttrStmt(_c(0), "async_wait_queue_scope", _c(0),
                          tirx.AttrStmt(_c(0), "async_wait_inflight_count", _c(1), use))
    assert violations(seq(copy(0, 0), copy(1, 1), wait1), "i", {t: (0, 3)}) == []
    assert violations(seq(copy(1, 0), copy(0, 1), wait1), "i", {t: (0, 3)})
