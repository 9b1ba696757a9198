"""wgmma with A in registers (the RS form, f16 and bf16) and from shared memory (SS), in the kernels of TVM's
own Hopper codegen tests (apache/tvm, tests/python/tirx/codegen/test_codegen_hopper.py: ``test_wgmma_rs_nt``,
``test_wgmma_ss_nt``), built by TVM 0.27 and run on the emulator, checked as those tests check them on a GPU
(against numpy within 1e-3).  TVM's RS kernel fills each thread's A registers in the fragment order of
CuTe's ``ALayout_64x16`` (``encodings.wgmma_a``, checked against CuTe's headers in test_encodings.py).
TVM's ``T.cuda.wgmma.noop_barrier`` calls are left out: they are empty ``asm volatile`` statements (no
PTX instruction), and TVM 0.27's code generator refuses them on these buffer elements.  A planted change
of an A register between the wgmma and its wait (an edit of the PTX) is reported.
"""
import math
import re
import shutil

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
if shutil.which("nvcc") is None:
    pytest.skip("nvcc not installed", allow_module_level=True)

from tvm.script import tirx as T

from tvm_twill import emulator as E
from tvm_twill.emulator import findings as F

SM90A = {"kind": "cuda", "arch": "sm_90a"}
M = N = 64
K = 16
SWIZZLE = 3
LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
MMA = "wgmma.mma_async.sync.aligned.m64n64k16.f32.{0}.{0}"
PTX_TYPE = {"float16": "f16", "bfloat16": "bf16"}


def rs_kernel(dtype="float16"):
    """test_wgmma_rs_nt: A (64 x 16, K-major) from global into registers, B (16 x 64, N-major) by TMA with a
    128-byte swizzle, one m64n64k16 wgmma, the accumulator stored to C."""
    shape_a, shape_b, shape_c = (M, K), (K, N), (M, N)
    b_bytes = 2 * math.prod(shape_b)
    a_elems, c_elems = math.prod(shape_a) // 128, math.prod(shape_c) // 128
    a_words = a_elems // 2
    b_tma_args = [N, K, N * 2, N, K, 1, 1, 0, SWIZZLE, 0, 0]
    b_encode_args = [1, 64, SWIZZLE]

    @T.prim_func
    def main(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
        A = T.match_buffer(A_ptr, shape_a, dtype=dtype, align=16)
        B = T.match_buffer(B_ptr, shape_b, dtype=dtype, align=16)
        C = T.match_buffer(C_ptr, shape_c, dtype="float32", align=16)
        B_map: T.let[T.handle("tensormap")] = T.tvm_stack_alloca("tensormap", 1)
        T.call_packed("runtime.cuTensorMapEncodeTiled", B_map, dtype, 2, B.data, *b_tma_args)
        T.device_entry()
        cta_id = T.cta_id([1])
        tx = T.thread_id([128])
        B_smem = T.alloc_buffer(shape_b, dtype, scope="shared", align=1024)
        bar = T.shared_scalar("uint64")
        descB: T.uint64
        A_local = T.alloc_buffer((a_elems,), dtype, scope="local")
        C_local = T.alloc_buffer((c_elems,), "float32", scope="local")
        A_local_b32 = T.decl_buffer((a_words,), "uint32", data=A_local.data)
        for i in T.serial(0, a_elems // 4):
            row = T.meta_var((tx % 32) // 4 + (tx // 32) * 16)
            col = T.meta_var(i * 8 + tx % 4 * 2)
            A_local[i * 4] = A[row, col]
            A_local[i * 4 + 1] = A[row, col + 1]
            A_local[i * 4 + 2] = A[row + 8, col]
            A_local[i * 4 + 3] = A[row + 8, col + 1]
        if tx == 0:
            T.ptx.mbarrier.init.shared.b64(T.address_of(bar), T.uint32(1))
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        if tx == 0:
            T.ptx[LOAD](B_smem.data, T.address_of(B_map), 0, 0, T.address_of(bar))
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(T.address_of(bar), T.uint32(b_bytes))
        T.cuda.mbarrier_wait(T.address_of(bar), 0)
        T.cuda.cta_sync()
        for i in T.serial(0, c_elems):
            C_local[i] = T.float32(0.0)
        T.cuda.wgmma.encode_matrix_descriptor(T.address_of(descB), B_smem.data, *b_encode_args)
        T.ptx.wgmma.fence.sync.aligned()
        T.ptx[MMA.format(PTX_TYPE[dtype])](*[C_local[i] for i in range(c_elems)], *[A_local_b32[i] for i in range(a_words)],
                   descB, T.bool(False), 1, 1, 1)
        T.ptx.wgmma.commit_group.sync.aligned()
        T.ptx.wgmma.wait_group.sync.aligned(0)
        for i in T.serial(0, c_elems // 4):
            row = T.meta_var((tx % 32) // 4 + (tx // 32) * 16)
            col = T.meta_var(i * 8 + tx % 4 * 2)
            C[row, col] = C_local[i * 4]
            C[row, col + 1] = C_local[i * 4 + 1]
            C[row + 8, col] = C_local[i * 4 + 2]
            C[row + 8, col + 1] = C_local[i * 4 + 3]
    return tvm.compile(tvm.IRModule({"main": main}), target=tvm.target.Target(SM90A), tir_pipeline="tirx")


def _inputs(shape_a, shape_b, dtype="float16"):
    rng = np.random.default_rng(0)
    if dtype == "bfloat16":
        import ml_dtypes
        dtype = ml_dtypes.bfloat16
    return (rng.standard_normal(shape_a).astype(dtype), rng.standard_normal(shape_b).astype(dtype),
            np.zeros((M, N), "float32"))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tvms_register_a_wgmma_matches_numpy_with_no_findings(dtype):
    f = rs_kernel(dtype)
    assert "wgmma.mma_async" in f.mod.imports[0].inspect_source()
    a, b, c = _inputs((M, K), (K, N), dtype)
    report = E.run(f, a, b, c, interleavings=2)
    assert report.ok, str(report)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3, atol=1e-3)


def test_an_a_register_changed_before_the_wgmma_wait_is_reported():
    from tvm_twill.emulator import launch as L
    f = rs_kernel()
    a, b, c = _inputs((M, K), (K, N))
    ptx, launches = L.launches(f, [a, b, c])
    regs = re.search(r"wgmma\.mma_async[^{]*\{[^}]*\}, \{(%r\d+), (%r\d+),", ptx)
    assert regs, "no register-A wgmma in the PTX"
    a1 = regs.group(2)
    bad_ptx = ptx.replace("\twgmma.commit_group.sync.aligned;",
                          f"\twgmma.commit_group.sync.aligned;\n\txor.b32 {a1}, {a1}, 15360;", 1)
    assert bad_ptx != ptx
    report = E.run_ptx(bad_ptx, launches, a, b, c)
    bad = [x for x in report.findings if isinstance(x, F.InFlightOverwrite)]
    assert bad and "register A operand a1" in bad[0].message, str(report)
    # the wgmma computed with the registers as issued
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3, atol=1e-3)


def ss_kernel():
    """test_wgmma_ss_nt: A (16 x 64) and B (16 x 64), both M/N-major, loaded by TMA with a 128-byte swizzle,
    one m64n64k16 wgmma from two shared-memory descriptors (trans-a = trans-b = 1)."""
    shape_a, shape_b, shape_c = (K, M), (K, N), (M, N)
    ab_bytes = 2 * (math.prod(shape_a) + math.prod(shape_b))
    c_elems = math.prod(shape_c) // 128
    a_tma_args = [M, K, M * 2, M, K, 1, 1, 0, SWIZZLE, 0, 0]
    b_tma_args = [N, K, N * 2, N, K, 1, 1, 0, SWIZZLE, 0, 0]
    encode_args = [1, 64, SWIZZLE]

    @T.prim_func
    def main(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
        A = T.match_buffer(A_ptr, shape_a, dtype="float16", align=16)
        B = T.match_buffer(B_ptr, shape_b, dtype="float16", align=16)
        C = T.match_buffer(C_ptr, shape_c, dtype="float32", align=16)
        A_map: T.let[T.handle("tensormap")] = T.tvm_stack_alloca("tensormap", 1)
        T.call_packed("runtime.cuTensorMapEncodeTiled", A_map, "float16", 2, A.data, *a_tma_args)
        B_map: T.let[T.handle("tensormap")] = T.tvm_stack_alloca("tensormap", 1)
        T.call_packed("runtime.cuTensorMapEncodeTiled", B_map, "float16", 2, B.data, *b_tma_args)
        T.device_entry()
        cta_id = T.cta_id([1])
        tx = T.thread_id([128])
        A_smem = T.alloc_buffer(shape_a, "float16", scope="shared", align=1024)
        B_smem = T.alloc_buffer(shape_b, "float16", scope="shared", align=1024)
        bar = T.shared_scalar("uint64")
        descA: T.uint64
        descB: T.uint64
        C_local = T.alloc_buffer((c_elems,), "float32", scope="local")
        if tx == 0:
            T.ptx.mbarrier.init.shared.b64(T.address_of(bar), T.uint32(1))
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        if tx == 0:
            T.ptx[LOAD](A_smem.data, T.address_of(A_map), 0, 0, T.address_of(bar))
            T.ptx[LOAD](B_smem.data, T.address_of(B_map), 0, 0, T.address_of(bar))
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(T.address_of(bar), T.uint32(ab_bytes))
        T.cuda.mbarrier_wait(T.address_of(bar), 0)
        T.cuda.cta_sync()
        for i in T.serial(0, c_elems):
            C_local[i] = T.float32(0.0)
        T.cuda.wgmma.encode_matrix_descriptor(T.address_of(descA), A_smem.data, *encode_args)
        T.cuda.wgmma.encode_matrix_descriptor(T.address_of(descB), B_smem.data, *encode_args)
        T.ptx.wgmma.fence.sync.aligned()
        T.ptx[MMA.format("f16")](*[C_local[i] for i in range(c_elems)], descA, descB, T.bool(False), 1, 1, 1, 1)
        T.ptx.wgmma.commit_group.sync.aligned()
        T.ptx.wgmma.wait_group.sync.aligned(0)
        for i in T.serial(0, c_elems // 4):
            row = T.meta_var((tx % 32) // 4 + (tx // 32) * 16)
            col = T.meta_var(i * 8 + tx % 4 * 2)
            C[row, col] = C_local[i * 4]
            C[row, col + 1] = C_local[i * 4 + 1]
            C[row + 8, col] = C_local[i * 4 + 2]
            C[row + 8, col + 1] = C_local[i * 4 + 3]
    return tvm.compile(tvm.IRModule({"main": main}), target=tvm.target.Target(SM90A), tir_pipeline="tirx")


def test_tvms_shared_operand_wgmma_with_mn_major_swizzled_tiles_matches_numpy():
    a, b, c = _inputs((K, M), (K, N))
    report = E.run(ss_kernel(), a, b, c, interleavings=2)
    assert report.ok, str(report)
    np.testing.assert_allclose(c, a.T.astype(np.float32) @ b.astype(np.float32), rtol=1e-3, atol=1e-3)
