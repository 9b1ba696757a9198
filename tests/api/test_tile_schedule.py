"""``tile_schedule`` (tvm_twill/tiles.py, transforms/tiles.py): the tile loops rewritten for data-parallel and
persistent, checked on llvm against numpy (ragged shapes and ragged grids included), compiled for CUDA with the
chosen grid, and the K loop still planned by ``auto_pipeline`` afterwards."""
import numpy as np
import pytest

import tvm_twill
from tvm_twill.check.verify import cpu_runnable
from tvm_twill.errors import InputError, UnsupportedLoopError
from tvm_twill.frontend import compile_cuda, kernel_info
from tvm_twill.frontend.ir import s_tir, tvm
from tvm_twill.model.tiles import raster

SM80 = "sm_80"


def simt_gemm(m, n, k, bm=16, bn=16, bk=8, threads=True, fused=False):
    """``C = A @ B`` (fp32): bm x bn tiles on blockIdx.y x blockIdx.x (``fused``: one blockIdx.x loop over both),
    shared A/B tiles per k step of bk, one output per thread; ragged when bm, bn, bk do not divide m, n, k."""
    from tvm import te
    a = te.placeholder((m, k), "float32", name="A")
    b = te.placeholder((k, n), "float32", name="B")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    sch = s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a, b, c])}))
    blk = sch.get_sblock("C")
    i, j, kk = sch.get_loops(blk)
    i0, i1 = sch.split(i, [None, bm])
    j0, j1 = sch.split(j, [None, bn])
    k0, k1 = sch.split(kk, [None, bk])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    if fused:
        sch.bind(sch.fuse(i0, j0), "blockIdx.x")
    else:
        sch.bind(i0, "blockIdx.y")
        sch.bind(j0, "blockIdx.x")
    for idx in (0, 1):
        sh = sch.cache_read(blk, idx, "shared")
        sch.compute_at(sh, k0)
        if threads:
            _, tx = sch.split(sch.fuse(*sch.get_loops(sh)[-2:]), [None, bm * bn])
            sch.bind(tx, "threadIdx.x")
    sch.bind(sch.fuse(i1, j1), "threadIdx.x")
    return sch


def _run_llvm(mod, args):
    lib = tvm.compile(cpu_runnable(mod, "tile-scheduled function"), target="llvm")
    tensors = [tvm.runtime.tensor(x.copy()) for x in args]
    lib(*tensors)
    return tensors[-1].numpy()


def _inputs(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-4, 5, size=(m, k)).astype("float32")
    b = rng.integers(-4, 5, size=(k, n)).astype("float32")
    return a, b, np.full((m, n), 7.0, "float32")  # C's initial value must be overwritten everywhere


# (m, n, k, sm_count, ctas_per_sm, group, along): ragged m / n / k, tiles not a multiple of the grid, ragged panels
CASES = [(70, 50, 40, 3, 1, 2, "m"), (64, 64, 32, 4, 1, 8, "m"), (33, 97, 19, 5, 2, 3, "n"), (16, 16, 8, 7, 1, 2, "m"),
         (100, 20, 24, 2, 3, 4, "m")]


@pytest.mark.parametrize("kind", ["data_parallel", "persistent"])
@pytest.mark.parametrize("m,n,k,sms,occ,group,along", CASES)
def test_numerics_on_llvm_match_numpy(kind, m, n, k, sms, occ, group, along):
    sch = simt_gemm(m, n, k)
    plan = tvm_twill.tile_schedule(sch, SM80, kind=kind, sm_count=sms, ctas_per_sm=occ, group=group, along=along)
    tiles = -(-m // 16) * -(-n // 16)
    assert plan.kind == kind and plan.tiles == tiles and plan.applied and plan.k_split == 1
    assert plan.ctas == (tiles if kind == "data_parallel" else min(tiles, sms * occ))
    a, b, c = _inputs(m, n, k)
    got = _run_llvm(sch.mod, [a, b, c])
    np.testing.assert_array_equal(got, a @ b)


@pytest.mark.slow
def test_numerics_on_random_shapes_and_grids():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=25, deadline=None, derandomize=True)
    @given(st.integers(17, 90), st.integers(17, 90), st.integers(9, 40), st.integers(1, 12), st.integers(1, 3),
           st.integers(1, 6), st.sampled_from(["m", "n"]), st.sampled_from(["data_parallel", "persistent"]),
           st.booleans())
    def check(m, n, k, sms, occ, group, along, kind, fused):
        sch = simt_gemm(m, n, k, fused=fused)  # (the builder needs 2+ tiles and k steps: its copies keep loops)
        tvm_twill.tile_schedule(sch, SM80, kind=kind, sm_count=sms, ctas_per_sm=occ, group=group, along=along)
        a, b, c = _inputs(m, n, k, seed=m * n + k)
        np.testing.assert_array_equal(_run_llvm(sch.mod, [a, b, c]), a @ b)
    check()


@pytest.mark.parametrize("rows,cols,group,along", [(5, 4, 2, "m"), (7, 3, 3, "n"), (4, 4, 8, "m"), (6, 5, 1, "m")])
def test_the_tir_raster_is_the_models(rows, cols, group, along):
    from tvm_twill.frontend.ir import eval_int, tirx
    from tvm_twill.transforms.tiles import raster_expr
    t = tirx.Var("t", "int32")
    r, c = raster_expr(t, rows, cols, group, along)
    got = [(eval_int(r, [(t, i)]), eval_int(c, [(t, i)])) for i in range(rows * cols)]
    assert got == [raster(i, rows, cols, group, along) for i in range(rows * cols)]


@pytest.mark.parametrize("kind", ["data_parallel", "persistent"])
def test_one_fused_blockidx_loop_is_one_row_of_tiles(kind):
    sch = simt_gemm(50, 40, 16, fused=True)
    plan = tvm_twill.tile_schedule(sch, SM80, kind=kind, sm_count=4, ctas_per_sm=1)
    assert plan.grid == (1, 12) and plan.ctas == (12 if kind == "data_parallel" else 4)
    a, b, c = _inputs(50, 40, 16, seed=1)
    np.testing.assert_array_equal(_run_llvm(sch.mod, [a, b, c]), a @ b)


def test_the_rewritten_nest_reads_the_raster():
    sch = simt_gemm(80, 64, 8)
    tvm_twill.tile_schedule(sch, SM80, kind="data_parallel", group=2, ctas_per_sm=1)
    text = sch.mod.script()
    assert 'for tile_cta in T.thread_binding(20, thread="blockIdx.x")' in text and "blockIdx.y" not in text
    assert "T.min" in text  # 5 tile rows in panels of 2: the ragged last panel's height is a min
    sch = simt_gemm(64, 64, 8)
    tvm_twill.tile_schedule(sch, SM80, kind="data_parallel", group=2, ctas_per_sm=1)
    assert "T.min" not in sch.mod.script()  # 4 rows: whole panels

@pytest.mark.parametrize("kind,sms,grid", [("persistent", 3, 3), ("data_parallel", 3, 20), ("persistent", 40, 20)])
def test_cuda_kernel_compiles_with_the_chosen_grid(kind, sms, grid):
    sch = simt_gemm(70, 50, 40)
    plan = tvm_twill.tile_schedule(sch, SM80, kind=kind, sm_count=sms, ctas_per_sm=1)
    assert plan.ctas == grid
    assert kernel_info(sch, SM80).grid == (grid, 1, 1)
    _, src = compile_cuda(sch, SM80)
    assert "blockIdx.y" not in src and "blockIdx.x" in src
    if kind == "persistent" and grid < 20:
        assert "for (int tile_iter = 0;" in src


def test_residency_is_read_from_the_kernel():
    sch = simt_gemm(64, 64, 32)
    plan = tvm_twill.tile_schedule(sch, SM80, kind="persistent", apply=False)
    r = plan.residency
    assert r["threads"] == 256 and r["smem"] == 2 * 16 * 8 * 4  # the A and B tiles of one k step, fp32
    # A100: 256 threads x 128 registers = 32768 -> 2 CTAs/SM by registers
    assert plan.ctas_per_sm == 2 and r["limiter"] == "registers" and plan.sm_count == 108
    assert "assumed" in plan.explain() and not plan.applied
    assert kernel_info(sch, SM80).grid == (4, 4, 1)  # apply=False: untouched


def test_dlight_gemm_batch_loop_of_one_is_no_axis_and_residency_counts_the_persistent_loop():
    from tvm_twill.workloads import dlight_gemm
    sch = s_tir.Schedule(dlight_gemm(512, 512, 1024))  # blockIdx.z (1) x blockIdx.x (4) x blockIdx.y (4)
    plan = tvm_twill.tile_schedule(sch, SM80, kind="persistent", sm_count=7)
    assert plan.grid == (4, 4) and plan.ctas == 7 and plan.k_loop == "ax3_0_0"
    info = kernel_info(sch, SM80)
    assert info.grid == (7, 1, 1) and plan.residency["smem"] == info.dyn_smem  # measured on the looped kernel
    compile_cuda(sch, SM80)


def test_auto_pipeline_still_plans_the_k_loop_after_tile_schedule():
    from tvm_twill.workloads import tensorcore_gemm_mnk
    sch, _, _ = tensorcore_gemm_mnk(512, 384, 256)
    plan = tvm_twill.tile_schedule(sch, "sm_80", kind="persistent", sm_count=5, ctas_per_sm=1)
    assert plan.tiles == 12 and plan.ctas == 5 and plan.k_loop == "k_0_0"
    assert kernel_info(sch, "sm_80").grid == (5, 1, 1)
    k0 = next(lp for lp in sch.get_loops(sch.get_sblock("C_o_update")) if sch.get(lp).loop_var.name == "k_0_0")
    pp = tvm_twill.auto_pipeline(sch, k0, "sm_80", time_limit=20)
    assert pp.applied and pp.annotation.num_stages > 1
    compile_cuda(sch, "sm_80")


def test_auto_on_a_tensor_core_gemm_explains_its_choice():
    from tvm_twill.workloads import tensorcore_gemm_mnk
    sch, _, _ = tensorcore_gemm_mnk(1024, 1024, 4096)  # 64 tiles, 128 k-iterations of 32
    plan = tvm_twill.tile_schedule(sch, "sm_90a", kind="auto", sm_count=132, ctas_per_sm=1)
    # one partial wave of 64/132 and 128 k-iterations: the rule wants Stream-K, which is not emitted yet
    assert plan.model.efficiency["stream_k"] > plan.model.efficiency["data_parallel"] + 0.05
    assert plan.model.choice == "stream_k" and plan.kind == "data_parallel" and plan.ctas == 64
    text = plan.explain()
    assert "not implemented yet" in text and "tail efficiency 48.5%" in text and "stream_k" in text
    with pytest.raises(UnsupportedLoopError, match="stream_k TIR emission is not implemented yet"):
        tvm_twill.tile_schedule(sch, "sm_90a", kind="stream_k")
    sk = tvm_twill.tile_schedule(sch, "sm_90a", kind="stream_k", apply=False, sm_count=132, ctas_per_sm=1)
    assert sk.kind == "stream_k" and sk.k_split > 1 and sk.workspace_bytes == sk.ctas * 128 * 128 * 4


@pytest.mark.parametrize("kw,text", [({"kind": "split_k"}, "unknown kind 'split_k'"),
                                     ({"sm_count": 0}, "sm_count must be a positive integer"),
                                     ({"along": "k"}, "along must be 'm' or 'n'"),
                                     ({"block": "nope"}, "no block named 'nope'")])
def test_bad_input_is_one_typed_line(kw, text):
    with pytest.raises(InputError, match=text) as err:
        tvm_twill.tile_schedule(simt_gemm(32, 32, 8), SM80, **kw)
    assert "\n" not in str(err.value)


def test_no_blockidx_loop_is_refused():
    sch = simt_gemm(32, 32, 8, threads=False)
    text = sch.mod.script().replace('thread="blockIdx.y"', 'thread="vthread.y"').replace('thread="blockIdx.x"',
                                                                                        'thread="vthread.x"')
    bare = s_tir.Schedule(tvm.script.from_source(text))
    with pytest.raises(InputError, match="no loop above block 'C' is bound to blockIdx"):
        tvm_twill.tile_schedule(bare, SM80)


def test_exported_lazily():
    assert tvm_twill.tile_schedule.__module__ == "tvm_twill.tiles" and tvm_twill.TilePlan.__name__ == "TilePlan"
