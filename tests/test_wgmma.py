"""Hopper GEMM consumers on wgmma (issue #8): s_tir tensor intrinsics for m64nNk16, the wgmma_gemm workload,
plain and warp-specialized (TMA bulk-copy producer) kernels for sm_90a.

No GPU here: tensorize's structural check (the schedule's blocks against the intrinsics' descriptions),
the fragment layout's arithmetic, the CUDA source and ptxas's report are what is checked.
"""
import re
import shutil
import subprocess

import pytest

tvm = pytest.importorskip("tvm")

import tvm_twill  # noqa: E402
from tvm_twill.transforms.fragments import shrink_thread_fragments  # noqa: E402
from tvm_twill.transforms.ws_lowering import register_pipeline  # noqa: E402
from tvm_twill.workloads import wgmma_element, wgmma_fragment, wgmma_gemm  # noqa: E402

N = 1024
TARGET = {"kind": "cuda", "arch": "sm_90a"}


def _compile(sch, pipeline):
    with tvm.transform.PassContext(config={"tirx.use_async_copy": 1}):
        f = tvm.compile(sch.mod, target=tvm.target.Target(TARGET), tir_pipeline=pipeline)
    return f.mod.imports[0].inspect_source()


def _ptxas(src, tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    cu = tmp_path / "k.cu"
    cu.write_text(src)
    r = subprocess.run(["nvcc", "-arch=sm_90a", "-cubin", "-Xptxas", "-v", "-o", str(tmp_path / "k.cubin"), str(cu)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout + r.stderr


@pytest.mark.parametrize("bn", [64, 128, 256])
def test_fragment_layout_is_a_bijection_matching_the_isa_figure(bn):
    seen = {}
    for i in range(64):
        for j in range(bn):
            t, r = wgmma_fragment(i, j)
            assert 0 <= t < 128 and 0 <= r < bn // 2 and (t, r) not in seen
            seen[(t, r)] = (i, j)
            assert wgmma_element(t, r) == (i, j)
    assert len(seen) == 64 * bn
    # PTX ISA figure: warp w owns rows 16w..16w+15; lane 0 of warp 1 holds rows 16 and 24, columns 0 and 1
    assert [wgmma_element(32, r) for r in range(4)] == [(16, 0), (16, 1), (24, 0), (24, 1)]
    assert wgmma_element(5, 4) == (1, 8 + 2)  # lane 5: row 5 // 4 = 1, columns 2 * (5 % 4) + 8 * (r // 4)


def test_tensorize_structural_check_accepts_the_schedule():
    sch, k0, k1 = wgmma_gemm(256)  # tensorize raises when a block does not match its intrinsic's description
    text = sch.mod.script()
    assert "wgmma" in text and "encode_matrix_descriptor" in text
    assert [int(sch.get(loop).extent) for loop in (k0, k1)] == [256 // 64, 4]
    plain, _, _ = wgmma_gemm(256, tensorize=False)
    assert "wgmma" not in plain.mod.script()


def test_tensorize_rejects_a_mismatched_tile():
    from tvm_twill.workloads import wgmma_intrinsics
    sch, _, _ = wgmma_gemm(256, tensorize=False)
    blk = sch.get_sblock("C_update")
    with pytest.raises(Exception):  # the m64n64 description does not match the 64 x 128 block tile
        sch.tensorize(sch.get_loops(blk)[-3], wgmma_intrinsics(64)["mma"])


@pytest.fixture(scope="module")
def plain_source():
    sch, _, _ = wgmma_gemm(N)
    return _compile(sch, register_pipeline())


def test_plain_kernel_has_wgmma_and_per_thread_accumulators(plain_source, tmp_path):
    src = plain_source
    for needle in ("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", "wgmma.fence.sync.aligned",
                   "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned 0",
                   "ptx_wgmma_encode_matrix_descriptor", "__launch_bounds__(128)"):
        assert needle in src, needle
    assert "float C_local_ptr[64];" in src  # one thread's 64 registers, not the warp group's 8192
    assert "threadIdx.x) * 64)]" not in src
    log = _ptxas(src, tmp_path)
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in log
    assert "C75" not in log


def _flattened(sch):
    from tvm_twill.frontend.lowering import pipeline_prefix_passes
    mod = tvm.tirx.transform.BindTarget(tvm.target.Target(TARGET).with_host(tvm.target.Target("llvm")))(sch.mod)
    passes = pipeline_prefix_passes() + [tvm.s_tir.transform.LowerOpaqueBlock(), tvm.tirx.transform.FlattenBuffer()]
    with tvm.transform.PassContext(config={"tirx.use_async_copy": 1}):
        return tvm.transform.Sequential(passes)(mod)["main"]


def test_shrink_rewrites_the_accumulator_and_nothing_else():
    from tvm_twill.workloads import tensorcore_gemm
    assert shrink_thread_fragments(_flattened(wgmma_gemm(256)[0]))[1] == ["C_local"]
    assert shrink_thread_fragments(_flattened(tensorcore_gemm(256)[0]))[1] == []  # warp buffers, mma.sync


def test_warp_specialized_wgmma_kernel(tmp_path):
    sch, k0, _ = wgmma_gemm(N)
    plan = tvm_twill.auto_pipeline(sch, [k0], "sm_90a", warp_specialize=True)
    ws = plan.warp_specialization
    assert plan.applied and ws.chosen and ws.copy == "bulk" and ws.protocol.ok
    src = _compile(sch, plan.tir_pipeline)
    for needle in ("mbarrier.try_wait.parity", "expect_tx", "elect.sync", "setmaxnreg.dec.sync.aligned",
                   "setmaxnreg.inc.sync.aligned",
                   "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes",
                   "const __grid_constant__ CUtensorMap A_tmap0", "const __grid_constant__ CUtensorMap B_tmap1",
                   "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", "__launch_bounds__(256, 1)",
                   "float C_local_ptr[64];"):
        assert needle in src, needle
    # each tile is one TMA box of the core-matrix layout (k % 8, row, k // 8): two tensor copies per iteration
    assert ws.facts.copy_plans == ("A_shared.dyn: 1 TMA tensor copy (3-d box 8 x 64 x 8, 8192 B)",
                                   "B_shared.dyn: 1 TMA tensor copy (3-d box 8 x 128 x 8, 16384 B)")
    a_map, b_map = (m.to_json() for m in ws.facts.tensor_maps)
    assert a_map["global_dims"] == [8, N, N // 8] and a_map["global_strides"] == [2 * N, 16]
    assert a_map["box"] == [8, 64, 8] and b_map["box"] == [8, 128, 8] and a_map["swizzle"] == 0
    body = src[src.index("main_kernel("):]
    assert body.count("cp_async_bulk_tensor_g2s") == 2 and "cp_async_bulk_g2s" not in body
    log = _ptxas(src, tmp_path)
    assert "0 bytes spill stores, 0 bytes spill loads" in log
    assert "C7508" not in log and "C75" not in log
    regs = int(re.search(r"Used (\d+) registers", log).group(1))
    f = ws.facts
    assert f.producer_threads * ws.registers[0] + f.consumer_threads * ws.registers[1] \
        <= (f.producer_threads + f.consumer_threads) * regs
