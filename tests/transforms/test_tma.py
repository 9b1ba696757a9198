"""Producer copies as TMA tensor copies or bulk rows (model.tma, transforms.ws.tma_copy; issue #8).

The planner only returns a plan whose replay (``simulate``: TMA's box order and
swizzle XOR) gives back the exact (global, slot) pairs of the copy nest; these
tests check that on known layouts, on random layouts (hypothesis), and end to
end: the tensor maps and coordinates the transform emits for the wgmma GEMM,
replayed for every block and iteration, read exactly what the original copy
nest reads.
"""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvm_twill.model.tma import SWIZZLE_SPAN, CopyPlan, factor, plan_copy, simulate, swizzle

K = 256  # row length (elements) of the global tensor in the hand-made layouts


def _pairs(rows, cols, slot_of):
    return [(r * K + c, slot_of(r, c)) for r in range(rows) for c in range(cols)]


def test_wgmma_core_matrix_layout_is_one_3d_box():
    pairs = _pairs(64, 64, lambda r, c: (c // 8) * 512 + r * 8 + c % 8)
    plan = plan_copy(pairs, 2, 8192)
    assert plan == CopyPlan("tensor", ((8, 1, 1), (64, K, 8), (8, 8, 512)), 0, 2, (0, 0))
    assert plan.instructions == 1 and plan.bytes == 8192


def test_row_major_tile_is_one_2d_box():
    plan = plan_copy(_pairs(64, 64, lambda r, c: r * 64 + c), 2, 8192)
    assert plan.kind == "tensor" and plan.dims == ((64, 1, 1), (64, K, 64)) and plan.swizzle == 0


@pytest.mark.parametrize("mode", [1, 2, 3])
def test_swizzled_tiles_are_found_with_their_mode(mode):
    span = SWIZZLE_SPAN[mode]
    cols = span // 2
    plan = plan_copy(_pairs(64, cols, lambda r, c: swizzle(r * span + 2 * c, mode) // 2), 2, 64 * span)
    assert plan is not None and plan.kind == "tensor" and plan.swizzle == mode
    assert plan.dims[0][0] * 2 == span


def test_padded_rows_become_bulk_rows():
    plan = plan_copy(_pairs(128, 32, lambda r, c: r * 40 + c), 2, 128 * 40 * 2)
    assert plan == CopyPlan("rows", ((32, 1, 1), (128, K, 40)), 0, 2, (0, 0))
    assert plan.instructions == 128


@pytest.mark.parametrize("name, pairs, eb", [
    ("a slot element written twice", [(0, 0), (1, 0)], 2),
    ("4-byte runs", [(r * K + c, r * 4 + c) for r in range(8) for c in range(2)], 2),
    ("row starts off 16 bytes in global", [(r * 12 + c, r * 8 + c) for r in range(8) for c in range(8)], 2),
    ("no regular grid", [(g, s) for s, g in enumerate(random.Random(0).sample(range(1024), 64))], 2),
])
def test_copies_no_instruction_reproduces_get_no_plan(name, pairs, eb):
    assert plan_copy(pairs, eb, 4096) is None, name


def test_swizzle_is_cute_swizzle_3_4_3_and_an_involution():
    # Swizzle<3,4,3> on byte addresses: bits [4,7) ^= bits [7,10)
    for a in range(0, 4096, 2):
        assert swizzle(a, 3) == a ^ (((a >> 7) & 7) << 4)
        for mode in (0, 1, 2, 3):
            assert swizzle(swizzle(a, mode), mode) == a
    assert swizzle(128 + 16, 1) == 128 and swizzle(128, 2) == 128 + 16


@st.composite
def layouts(draw):
    """A random tile: dims with random extents, global strides from a random row-major tensor and a
    random (possibly padded, possibly permuted) slot order."""
    eb = draw(st.sampled_from([1, 2, 4]))
    vec = 16 // eb
    nd = draw(st.integers(1, 3))
    ext = [draw(st.sampled_from([vec, 2 * vec]))] + [draw(st.integers(1, 6)) for _ in range(nd)]
    gstr = [1]
    for e in ext[:-1]:
        gstr.append(gstr[-1] * e * draw(st.sampled_from([1, 1, 2])))
    order = list(range(1, len(ext)))
    order = [0] + draw(st.permutations(order))
    pad = draw(st.sampled_from([0, 0, vec]))
    sstr = [0] * len(ext)
    acc = 1
    for i in order:
        sstr[i] = acc
        acc *= ext[i] + (pad if i == 0 else 0)
    pts = [[]]
    for e in ext:
        pts = [p + [d] for p in pts for d in range(e)]
    pairs = [(sum(d * g for d, g in zip(p, gstr)), sum(d * s for d, s in zip(p, sstr))) for p in pts]
    return pairs, eb, acc * eb


@settings(max_examples=150, deadline=None)
@given(layouts())
def test_a_plan_reproduces_the_copy_exactly(case):
    pairs, eb, slot_bytes = case
    plan = plan_copy(pairs, eb, -(-slot_bytes // 1024) * 1024)
    # every random layout here has 16-byte rows on a grid: some plan exists, and it is exact
    assert plan is not None
    assert sorted(simulate(plan)) == sorted(pairs)
    if plan.kind == "tensor":
        assert len(plan.dims) <= 5 and all(1 <= e <= 256 for e, _, _ in plan.dims)
        assert plan.dims[0][1] == 1 and (plan.dims[0][0] * eb) % 16 == 0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 63), st.integers(0, 63)), min_size=1, max_size=40, unique_by=lambda p: p[1]))
def test_a_plan_is_never_wrong_on_arbitrary_pairs(pairs):
    plan = plan_copy(pairs, 2, 4096)
    assert plan is None or sorted(simulate(plan)) == sorted(pairs)


def test_factor_merges_and_refuses():
    assert factor(list(range(16)), list(range(16))) == [(16, 1, 1)]
    assert factor([0, 1, 8, 9], [0, 1, 2, 3]) == [(2, 1, 1), (2, 8, 2)]
    assert factor([0, 1, 3], [0, 1, 2]) is None


# ---------------------------------------------------------------------------- end to end (TVM)
def test_emitted_tensor_maps_read_what_the_copy_nest_reads():
    """Replay the emitted TMA calls (coordinates evaluated for every block and iteration, box walked over
    the encoded tensor map) and compare with the original copy nest's global reads."""
    tvm = pytest.importorskip("tvm")
    np = pytest.importorskip("numpy")
    import tvm_ffi
    from tvm import tirx

    from tvm_twill.frontend.lowering import pipeline_prefix_passes
    from tvm_twill.transforms.ws import tma_copy
    from tvm_twill.transforms import tir_util as U
    from tvm_twill.transforms.ws import rewrite as W
    from tvm_twill.transforms.ws import roles as R
    from tvm_twill.workloads import wgmma_gemm

    n = 256
    sch, k0, _ = wgmma_gemm(n)
    sch.annotate(k0, "tvm_twill.ws_depth", 2)
    tgt = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}).with_host(tvm.target.Target("llvm"))
    mod = tvm.tirx.transform.BindTarget(tgt)(sch.mod)
    passes = pipeline_prefix_passes() + [tvm.s_tir.transform.LowerOpaqueBlock(), tvm.tirx.transform.FlattenBuffer()]
    with tvm.transform.PassContext(config={"tirx.use_async_copy": 1}):
        func = tvm.transform.Sequential(passes)(mod)["main"]
    new, facts = W.warp_specialize_func(func, "sm_90a")
    assert len(facts.tensor_maps) == 2
    calls = []
    tvm_ffi.structural_walk(new.body, [(tvm.ir.expr.Call, lambda c: calls.append(c)
                                        if "bulk_tensor" in getattr(c.op, "name", "") else None)])
    assert len(calls) == 2
    # the original nests: global offsets read, per block (by, bx) and iteration k
    path = U.path_to(func.body, lambda s: isinstance(s, tirx.For) and "tvm_twill.ws_depth" in (s.annotations or {}))
    loop = path[-1]
    blocks = {s.node.thread_tag: s.node.var for s in path if isinstance(s, tirx.AttrStmt)
              and s.attr_key == "thread_extent"}
    body = U.flatten_seq(loop.body)
    tiles = [s.buffer for s in body if isinstance(s, tirx.AllocBuffer)]
    copies = [c for c in (R.parse_copy(s, tiles) for s in body if not isinstance(s, tirx.AllocBuffer)) if c]
    tx = blocks["threadIdx.x"]
    for copy, spec, call in zip(copies, facts.tensor_maps, calls):
        coords = list(call.args)[2:2 + spec.rank]
        free = []
        for e in coords:
            tvm_ffi.structural_walk(e, [(tirx.Var, lambda v: free.append(v))])
        it = next((v for v in free if v.name == "ws_p"), None)  # the producer's iteration variable
        pvars = [(tx, 128)] + [(v, int(e)) for v, _, e in copy.loops] + [(copy.vec[0], int(copy.vec[2]))]
        grids = np.meshgrid(*[np.arange(e) for _, e in pvars], indexing="ij")
        for by in range(n // 64):
            for bx in range(n // 128):
                for k in range(n // 64):
                    outer = [(blocks["blockIdx.y"], by), (blocks["blockIdx.x"], bx), (loop.loop_var, k)]
                    env = [(v, g.ravel()) for (v, _), g in zip(pvars, grids)] + outer
                    want = np.broadcast_to(tma_copy._evaluate(copy.store.value.indices[0], env), grids[0].size)
                    c = [int(tma_copy._evaluate(e, outer + ([(it, k)] if it is not None else []))) for e in coords]
                    got = _replay_tma(spec, c)
                    assert sorted(got) == sorted(int(x) for x in want)


def _replay_tma(spec, coords):
    """Global element offsets a TMA box load reads: box corner ``coords`` on the encoded tensor map."""
    eb = 2
    strides = [1] + [s // eb for s in spec.global_strides]
    out = [0]
    for d in range(spec.rank):
        assert 0 <= coords[d] and coords[d] + spec.box[d] <= spec.global_dims[d]  # no out-of-bounds fill
        out = [o + (coords[d] + j) * strides[d] for j in range(spec.box[d]) for o in out]
    return out


def test_emitted_bulk_rows_copy_what_the_copy_nest_copies():
    """TVM's padded mma tiles on sm_90a: replay every emitted row copy (its loop over rows, its byte count)
    for every block and iteration and compare the (global, slot) element pairs with the original nest's."""
    tvm = pytest.importorskip("tvm")
    np = pytest.importorskip("numpy")
    import tvm_ffi
    from tvm import tirx

    from tvm_twill.frontend.lowering import pipeline_prefix_passes
    from tvm_twill.transforms.ws import tma_copy
    from tvm_twill.transforms import tir_util as U
    from tvm_twill.transforms.ws import rewrite as W
    from tvm_twill.transforms.ws import roles as R
    from tvm_twill.workloads import tensorcore_gemm

    n, depth = 256, 2
    sch, k0, _ = tensorcore_gemm(n)
    sch.annotate(k0, "tvm_twill.ws_depth", depth)
    tgt = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}).with_host(tvm.target.Target("llvm"))
    mod = tvm.tirx.transform.BindTarget(tgt)(sch.mod)
    passes = pipeline_prefix_passes() + [tvm.s_tir.transform.TransformMmaBufferLayout(),
                                         tvm.s_tir.transform.LowerOpaqueBlock(), tvm.tirx.transform.FlattenBuffer()]
    with tvm.transform.PassContext(config={"tirx.use_async_copy": 1}):
        func = tvm.transform.Sequential(passes)(mod)["main"]
    new, facts = W.warp_specialize_func(func, "sm_90a")
    assert all("rows" in p for p in facts.copy_plans)
    rows = []
    tvm_ffi.structural_walk(new.body, [(tirx.For, lambda f: rows.append(f) if f.loop_var.name.startswith("ws_r")
                                        else None)])
    path = U.path_to(func.body, lambda s: isinstance(s, tirx.For) and "tvm_twill.ws_depth" in (s.annotations or {}))
    loop = path[-1]
    tv = {s.node.thread_tag: (s.node.var, int(s.value)) for s in path if isinstance(s, tirx.AttrStmt)
          and s.attr_key == "thread_extent"}
    body = U.flatten_seq(loop.body)
    tiles = [s.buffer for s in body if isinstance(s, tirx.AllocBuffer)]
    copies = [c for c in (R.parse_copy(s, tiles) for s in body if not isinstance(s, tirx.AllocBuffer)) if c]
    assert len(rows) == len(copies) == 2
    for copy, row_loop in zip(copies, rows):
        call = row_loop.body.value
        dst = call.args[0].args[0].args[0]      # cvta(address_of(ring[i]))
        src = call.args[1].args[0]              # address_of(G[j])
        run = int(call.args[2].value) // 2      # fp16 elements per row copy
        slot_elems = int(dst.source.shape[0]) // depth
        pvars = [tv[t] for t in ("threadIdx.x", "threadIdx.y")] + [(v, int(e)) for v, _, e in copy.loops] + \
            [(copy.vec[0], int(copy.vec[2]))]
        grids = np.meshgrid(*[np.arange(e) for _, e in pvars], indexing="ij")
        free = []
        tvm_ffi.structural_walk(call, [(tirx.Var, lambda v: free.append(v))])
        it = next(v for v in free if v.name == "ws_p")
        nby, nk = tv["blockIdx.y"][1], int(loop.extent)
        for by in sorted({0, 1, nby // 2, nby - 1}):      # first, second, middle and last: every
            for k in sorted({0, 1, depth, nk - 1}):         # term of the addresses moves at least once
                outer = [(tv["blockIdx.x"][0], 0), (tv["blockIdx.y"][0], by)]
                env = [(v, g.ravel()) for (v, _), g in zip(pvars, grids)] + outer + [(loop.loop_var, k)]
                size = grids[0].size
                want = set(zip(np.broadcast_to(tma_copy._evaluate(copy.store.value.indices[0], env), size).tolist(),
                               np.broadcast_to(tma_copy._evaluate(copy.store.indices[0], env), size).tolist()))
                got = set()
                for r in range(int(row_loop.extent)):
                    e2 = outer + [(it, k), (row_loop.loop_var, r)]
                    g0 = tma_copy._evaluate(src.indices[0], e2)
                    s0 = tma_copy._evaluate(dst.indices[0], e2) - (k % depth) * slot_elems
                    got |= {(g0 + e, s0 + e) for e in range(run)}
                assert got == want


def test_without_tensor_maps_a_box_tile_falls_back_to_bulk_rows():
    pairs = _pairs(64, 64, lambda r, c: (c // 8) * 512 + r * 8 + c % 8)
    plan = plan_copy(pairs, 2, 8192, modes=())
    assert plan.kind == "rows" and plan.instructions == 512 and plan.dims[0] == (8, 1, 1)
    assert sorted(simulate(plan)) == sorted(pairs)
