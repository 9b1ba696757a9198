"""The warp-specialization passes one at a time, TVM style: a small lowered kernel before, the TIR expected after,
compared with ``tvm.ir.assert_structural_equal``.

The kernel: 64 threads, a 4-iteration loop annotated with ring depth 2 whose body copies a 64-float tile
of A to shared memory (one float per thread) and writes twice it to C.  Lowered by TVM's own passes up to
FlattenBuffer, the point where ``tvm_twill_ws`` runs the transform.
"""
import pytest

tvm = pytest.importorskip("tvm")

from tvm import tirx  # noqa: E402
from tvm.script import tirx as T  # noqa: E402

from tvm_twill.errors import UnsupportedLoopError  # noqa: E402
from tvm_twill.frontend.ir import tvm_ffi  # noqa: E402
from tvm_twill.model.pipeline import WS_DEPTH  # noqa: E402
from tvm_twill.transforms.ws.barriers import consumer_loop, producer_loop  # noqa: E402
from tvm_twill.transforms.ws.copies import rewrite_copies  # noqa: E402
from tvm_twill.transforms.ws.registers import assign_threads  # noqa: E402
from tvm_twill.transforms.ws.rings import allocate_rings, remap  # noqa: E402
from tvm_twill.transforms.ws.roles import find_ws_loop  # noqa: E402


@T.prim_func(s_tir=True)
def _tile_loop(A: T.Buffer((256,), "float32"), C: T.Buffer((256,), "float32")):
    for tx in T.thread_binding(0, 64, thread="threadIdx.x"):
        for k in T.serial(0, 4, annotations={WS_DEPTH: 2}):
            with T.sblock("compute"):
                S = T.sblock_alloc_buffer((64,), dtype="float32", scope="shared")
                with T.sblock():
                    S[tx] = A[k * 64 + tx]
                with T.sblock():
                    C[k * 64 + tx] = S[tx] * T.float32(2)


@T.prim_func(s_tir=True)
def _tile_written_twice(A: T.Buffer((256,), "float32"), C: T.Buffer((256,), "float32")):
    for tx in T.thread_binding(0, 64, thread="threadIdx.x"):
        for k in T.serial(0, 4, annotations={WS_DEPTH: 2}):
            with T.sblock("compute"):
                S = T.sblock_alloc_buffer((64,), dtype="float32", scope="shared")
                with T.sblock():
                    S[tx] = A[k * 64 + tx]
                with T.sblock():
                    S[tx] = S[tx] + T.float32(1)
                with T.sblock():
                    C[k * 64 + tx] = S[tx]


@T.prim_func(s_tir=True)
def _tile_computed_from_global(A: T.Buffer((256,), "float32"), C: T.Buffer((256,), "float32")):
    for tx in T.thread_binding(0, 64, thread="threadIdx.x"):
        for k in T.serial(0, 4, annotations={WS_DEPTH: 2}):
            with T.sblock("compute"):
                S = T.sblock_alloc_buffer((64,), dtype="float32", scope="shared")
                with T.sblock():
                    S[tx] = A[k * 64 + tx] * T.float32(2)
                with T.sblock():
                    C[k * 64 + tx] = S[tx]


@T.prim_func(s_tir=True)
def _scratch_tile(A: T.Buffer((256,), "float32"), C: T.Buffer((256,), "float32")):
    for tx in T.thread_binding(0, 64, thread="threadIdx.x"):
        for k in T.serial(0, 4, annotations={WS_DEPTH: 2}):
            with T.sblock("compute"):
                S = T.sblock_alloc_buffer((64,), dtype="float32", scope="shared")
                X = T.sblock_alloc_buffer((64,), dtype="float32", scope="shared")
                with T.sblock():
                    S[tx] = A[k * 64 + tx]
                with T.sblock():
                    X[tx] = S[tx] * T.float32(2)
                with T.sblock():
                    C[k * 64 + tx] = X[63 - tx]


def _lower(prim):
    """``prim`` as the WS pass sees it: TVM's s_tir passes up to FlattenBuffer."""
    from tvm_twill.frontend.lowering import pipeline_prefix_passes

    tgt = tvm.target.Target({"kind": "cuda", "arch": "sm_80"}).with_host(tvm.target.Target("llvm"))
    mod = tvm.tirx.transform.BindTarget(tgt)(tvm.IRModule({"main": prim}))
    passes = pipeline_prefix_passes() + [tvm.s_tir.transform.LowerOpaqueBlock(), tvm.tirx.transform.FlattenBuffer()]
    with tvm.transform.PassContext(config={"tirx.use_async_copy": 1}):
        return tvm.transform.Sequential(passes)(mod)["main"]


@pytest.fixture(scope="module")
def lowered():
    func = _lower(_tile_loop)
    decl = []   # the flat views FlattenBuffer declared of the parameters A and C, in order
    tvm_ffi.structural_walk(func.body, [(tirx.DeclBuffer, lambda d: decl.append(d.buffer) and None)])
    a, c = decl
    ws = find_ws_loop(func, "sm_90a")
    return func, ws, a, c


def _names(func):
    """The tile S, thread variable and loop variable of the lowered kernel."""
    ws = find_ws_loop(func, "sm_90a")
    return ws.tile_allocs[0].buffer, ws.tvars["threadIdx.x"], ws.loop.loop_var


def _f32(x):
    return tirx.const(x, "float32")


def test_role_split_puts_the_copy_in_the_producer_and_the_rest_in_the_consumer(lowered):
    func, ws, a, c = lowered
    s, tx, k = _names(func)
    assert (ws.depth, ws.n_threads, ws.regs, ws.bulk, int(ws.trip)) == (2, 64, None, False, 4)
    assert len(ws.copies) == 1 and len(ws.consumer) == 1 and ws.copies[0].dst.same_as(s)
    tvm.ir.assert_structural_equal(ws.copies[0].stmt, tirx.BufferStore(s, tirx.BufferLoad(a, [k * 64 + tx]), [tx]))
    tvm.ir.assert_structural_equal(ws.consumer[0],
                                   tirx.BufferStore(c, tirx.BufferLoad(s, [tx]) * _f32(2.0), [k * 64 + tx]))


def test_role_split_refuses_a_tile_write_that_is_not_a_global_copy():
    with pytest.raises(UnsupportedLoopError, match="the statement writing 'S' is not a copy from global memory"):
        find_ws_loop(_lower(_tile_computed_from_global), "sm_90a")
    with pytest.raises(UnsupportedLoopError, match="'S' is written by a copy and by the loop's compute"):
        find_ws_loop(_lower(_tile_written_twice), "sm_90a")


def test_role_split_keeps_a_tile_written_by_compute_with_the_consumer():
    """A shared scratch tile the loop computes (no global load) is the consumers', allocation included; only
    the copied tile becomes a ring."""
    ws = find_ws_loop(_lower(_scratch_tile), "sm_90a")
    assert [c.dst.name for c in ws.copies] == ["S"] and [a.buffer.name for a in ws.tile_allocs] == ["S"]
    allocs = [s.buffer.name for s in ws.consumer if isinstance(s, tirx.AllocBuffer)]
    assert allocs == ["X"] and len(ws.consumer) == 3


def test_no_annotated_loop_means_no_roles():
    func = _lower(_tile_loop)
    plain = func.with_body(tvm_ffi.structural_map(
        func.body, [(tirx.For, lambda f: tirx.For(f.loop_var, f.min, f.extent, f.kind, f.body))], order="post"))
    assert find_ws_loop(plain, "sm_90a") is None


def test_ring_allocation_gives_each_tile_depth_slots_and_remaps_reads_into_slot_s(lowered):
    func, ws, _, c = lowered
    s, tx, k = _names(func)
    rings = allocate_rings(ws)
    ring = tirx.decl_buffer((128,), "float32", name="S_ring", scope="shared")   # 2 slots of 64 floats
    tvm.ir.assert_structural_equal(rings.allocs[0], tirx.AllocBuffer(ring, {"buffer_data_alignment": 128}),
                                   map_free_vars=True)
    assert (rings.ring_bytes, rings.static_ring_bytes, tuple(rings.full.shape), tuple(rings.empty.shape)) == \
        (512, 512, (8,), (8,))
    got, n = rings.rings[s]
    assert n == 64
    slot = tirx.Var("slot", "int32")
    tvm.ir.assert_structural_equal(
        remap(ws.consumer[0], rings.rings, slot),
        tirx.BufferStore(c, tirx.BufferLoad(got, [tx + slot * 64]) * _f32(2.0), [k * 64 + tx]))


def test_barrier_insertion_producer_acquires_empty_copies_and_signals_full(lowered):
    func, ws, a, _ = lowered
    s, tx, _ = _names(func)
    rings = allocate_rings(ws)
    copies, rings = rewrite_copies(ws, rings, assign_threads(ws))
    prod = producer_loop(ws, rings, copies)
    ring, full, empty = rings.rings[s][0], rings.full, rings.empty
    p, j, t = tirx.Var("ws_p", "int32"), tirx.Var("ws_c0", "int32"), tirx.Var("ws_t", "int32")
    slot, phase = tirx.floormod(p, 2), tirx.floormod(tirx.floordiv(p, 2), 2)
    point = tirx.floormod(j * 32 + tirx.floormod(tx, 32), 64)   # lane + 32 j takes consumer thread lane + 32 j
    copy = T.ptx["cp.async.ca.shared.global"](ring.ptr_to([point + slot * 64]), a.ptr_to([p * 64 + point]),
                                             tirx.const(4, "int32"))
    expected = [
        tirx.For(p, 0, 4, tirx.ForKind.SERIAL, tirx.SeqStmt([
            tirx.Evaluate(T.cuda.mbarrier_wait(empty.ptr_to([slot]), tirx.bitwise_xor(phase, 1))),
            tirx.For(j, 0, 2, tirx.ForKind.SERIAL, tirx.Evaluate(copy)),
            tirx.Evaluate(T.ptx["cp.async.mbarrier.arrive.noinc.shared.b64"](full.ptr_to([slot]))),
        ])),
        tirx.For(t, 4, 2, tirx.ForKind.SERIAL, tirx.Evaluate(T.cuda.mbarrier_wait(
            empty.ptr_to([tirx.floormod(t, 2)]), tirx.bitwise_xor(tirx.floormod(tirx.floordiv(t, 2), 2), 1)))),
    ]
    tvm.ir.assert_structural_equal(tirx.SeqStmt(list(prod.stmts)), tirx.SeqStmt(expected), map_free_vars=True)
    assert (prod.full_count, prod.tail_acquires) == (32, 2)   # cp.async: every lane of the warp arrives


def test_barrier_insertion_consumer_acquires_full_and_one_lane_per_warp_releases_empty(lowered):
    func, ws, _, c = lowered
    s, tx, _ = _names(func)
    th = assign_threads(ws)
    rings = allocate_rings(ws)
    cons = consumer_loop(ws, rings, th, overlap=None)
    ring, full, empty = rings.rings[s][0], rings.full, rings.empty
    i = tirx.Var("ws_k", "int32")
    slot, phase = tirx.floormod(i, 2), tirx.floormod(tirx.floordiv(i, 2), 2)
    expected = tirx.For(i, 0, 4, tirx.ForKind.SERIAL, tirx.SeqStmt([
        tirx.Evaluate(T.cuda.mbarrier_wait(full.ptr_to([slot]), phase)),
        tirx.BufferStore(c, tirx.BufferLoad(ring, [tx + slot * 64]) * _f32(2.0), [i * 64 + tx]),
        tirx.SeqStmt([tirx.Evaluate(T.cuda.warp_sync()), tirx.IfThenElse(
            tirx.floormod(tx, 32) == 0, tirx.Evaluate(T.ptx.mbarrier.arrive.shared.b64(empty.ptr_to([slot]))),
            None)]),
    ]))
    tvm.ir.assert_structural_equal(cons.placed, expected, map_free_vars=True)
    assert cons.overlap is None and cons.ordering is None


def test_register_pass_grows_the_block_by_one_producer_warp(lowered):
    _, ws, _, _ = lowered
    th = assign_threads(ws)
    assert (th.producer_threads, th.consumer_warps, th.grow, th.new_extent, th.registers) == \
        (32, 2, "threadIdx.x", 96, None)
    tvm.ir.assert_structural_equal(th.lane, tirx.floormod(ws.tvars["threadIdx.x"], 32))
