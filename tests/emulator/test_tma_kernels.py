"""TMA loads and stores in kernels TVM 0.27 builds, on the emulator, against numpy.

The kernels are those of TVM's own Hopper codegen tests (apache/tvm, tests/python/tirx/codegen/
test_codegen_hopper.py: ``..._global_to_shared_unicast``, ``..._swizzle``, ``..._shared_to_global``),
written the same way (TIRx script with the PTX dialect, ``runtime.cuTensorMapEncodeTiled`` on the host)
with their argument lists, and checked as those tests check them on a GPU.  One change: TVM's kernels have
thread 0 initialise the mbarrier and every thread wait on it with no barrier in between; the emulator
reports that (``test_tvms_kernel_as_written_waits_on_an_mbarrier_before_its_init_is_visible``), so the
copies here put a ``cta_sync`` after the init.  Then: partial boxes at the tensor's edges (zero and NaN
fill on loads, skipped elements on stores), and the store's rules (proxy fence before the copy reads
generic writes; no write to the source before ``cp.async.bulk.wait_group.read``).
"""
import math
import shutil

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
if shutil.which("nvcc") is None:
    pytest.skip("nvcc not installed", allow_module_level=True)

from tvm.script import tirx as T

from tvm_twill import emulator as E
from tvm_twill.emulator import findings as F
from tvm_twill.errors import EmulationError

SM90A = {"kind": "cuda", "arch": "sm_90a"}
LOAD = "cp.async.bulk.tensor.{}d.shared::cluster.global.mbarrier::complete_tx::bytes"
STORE = "cp.async.bulk.tensor.{}d.global.shared::cta.tile.bulk_group"


def _build(func):
    return tvm.compile(tvm.IRModule({"main": func}), target=tvm.target.Target(SM90A), tir_pipeline="tirx")


def load_store(shape, dtype, load_args, store_args, sync_after_init=True):
    """TVM's unicast / swizzle kernel: thread 0 loads the box at the origin through map A, every thread
    waits, thread 0 stores shared memory through map B."""
    total_bytes = math.prod(shape) * tvm.DataType(dtype).bits // 8
    coord = [0] * len(shape)
    rank = len(shape)

    @T.prim_func
    def main(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, shape, dtype=dtype, align=16)
        B = T.match_buffer(B_ptr, shape, dtype=dtype, align=16)
        A_map: T.let[T.handle("tensormap")] = T.tvm_stack_alloca("tensormap", 1)
        T.call_packed("runtime.cuTensorMapEncodeTiled", A_map, dtype, rank, A.data, *load_args)
        B_map: T.let[T.handle("tensormap")] = T.tvm_stack_alloca("tensormap", 1)
        T.call_packed("runtime.cuTensorMapEncodeTiled", B_map, dtype, rank, B.data, *store_args)
        T.device_entry()
        for blockIdx in T.thread_binding(1, thread="blockIdx.x"):
            for threadIdx in T.thread_binding(128, thread="threadIdx.x"):
                bar = T.shared_scalar("uint64")
                phase: T.int32
                A_smem = T.alloc_buffer(shape, dtype, scope="shared", align=128)
                phase = 0
                if threadIdx == 0:
                    T.ptx.mbarrier.init.shared.b64(T.address_of(bar), T.uint32(1))
                    T.ptx.fence.proxy.async_.shared__cta()
                if sync_after_init:
                    T.cuda.cta_sync()
                if threadIdx == 0:
                    T.ptx[LOAD.format(rank)](A_smem.data, T.address_of(A_map), *coord, T.address_of(bar))
                    T.ptx.mbarrier.arrive.expect_tx.shared.b64(T.address_of(bar), T.uint32(total_bytes))
                T.cuda.mbarrier_wait(T.address_of(bar), phase)
                phase = phase ^ 1
                T.cuda.cta_sync()
                T.ptx.fence.proxy.async_.shared__cta()
                if threadIdx == 0:
                    T.ptx[STORE.format(rank)](T.address_of(B_map), *coord, A_smem.access_ptr("r", offset=0))
                    T.ptx.cp.async_.bulk.commit_group()
                    T.ptx.cp.async_.bulk.wait_group(0)
    return _build(main)


UNICAST = [((128,), [128, 128, 1, 0, 0, 0, 0]), ((16, 16), [16, 16, 16, 16, 16, 1, 1, 0, 0, 0, 0]),
           ((16, 64), [64, 16, 64, 64, 16, 1, 1, 0, 0, 0, 0])]


@pytest.mark.parametrize("dtype", ["float16", "float32"])     # TVM's fp8 cases: the emulator takes no fp8 arrays
@pytest.mark.parametrize("case", range(len(UNICAST)))
def test_tvms_unicast_load_then_store_copies_the_tensor(dtype, case):
    shape, args = UNICAST[case]
    args = list(args)
    for i in range(len(shape) - 1):                       # TVM's test scales its strides to bytes
        args[len(shape) + i] *= tvm.DataType(dtype).bits // 8
    f = load_store(shape, dtype, args, args)
    a = np.random.default_rng(case).standard_normal(shape).astype(dtype)
    b = np.zeros(shape, dtype)
    report = E.run(f, a, b, interleavings=2)
    assert report.ok, str(report)
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


@pytest.mark.parametrize("swizzle", [1, 2, 3])
@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32"])
def test_tvms_swizzled_load_lands_where_tvms_compose_layout_says(swizzle, dtype):
    """TVM's check: after a swizzled load and a plain store, B[layout(i)] == A[i] with
    ``ComposeLayout(log2(128 // bits), swizzle, 3, ...)`` (CuTe's Swizzle<swizzle, log2(16 B / esize), 3>)."""
    bits = tvm.DataType(dtype).bits
    args = [16, 64, 16, 16, 64, 1, 1, 0, 0, 0, 0]
    args[0] = args[0] * (1 << swizzle) // (bits // 8)
    args[2] = args[2] * (1 << swizzle)
    args[3] = args[3] * (1 << swizzle) // (bits // 8)
    load = list(args)
    load[-3] = swizzle
    total = args[0] * 64
    f = _flat_load_store(total, dtype, load, args)
    a = np.arange(total).astype(dtype)
    b = np.zeros(total, dtype)
    report = E.run(f, a, b)
    assert report.ok, str(report)
    m = int(math.log2(128 // bits))
    layout = T.ComposeLayout(m, swizzle, 3, T.TileLayout(T.S[(1 << (m + swizzle + 3),)]))
    np.testing.assert_array_equal(a, b[[int(layout.apply(i)["m"]) for i in range(total)]])


def _flat_load_store(total, dtype, load_args, store_args):
    """TVM's swizzle kernel: 2-D maps over flat buffers; only thread 0 waits on the mbarrier."""
    nbytes = total * tvm.DataType(dtype).bits // 8

    @T.prim_func
    def main(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, total, dtype=dtype, align=16)
        B = T.match_buffer(B_ptr, total, dtype=dtype, align=16)
        A_map: T.let[T.handle("tensormap")] = T.tvm_stack_alloca("tensormap", 1)
        T.call_packed("runtime.cuTensorMapEncodeTiled", A_map, dtype, 2, A.data, *load_args)
        B_map: T.let[T.handle("tensormap")] = T.tvm_stack_alloca("tensormap", 1)
        T.call_packed("runtime.cuTensorMapEncodeTiled", B_map, dtype, 2, B.data, *store_args)
        T.device_entry()
        for blockIdx in T.thread_binding(1, thread="blockIdx.x"):
            for threadIdx in T.thread_binding(128, thread="threadIdx.x"):
                A_smem = T.alloc_buffer((total,), dtype, scope="shared", align=1024)
                bar = T.shared_scalar("uint64")
                if threadIdx == 0:
                    T.ptx.mbarrier.init.shared.b64(T.address_of(bar), T.uint32(1))
                    T.ptx.fence.proxy.async_.shared__cta()
                    T.ptx[LOAD.format(2)](A_smem.data, T.address_of(A_map), 0, 0, T.address_of(bar))
                    T.ptx.mbarrier.arrive.expect_tx.shared.b64(T.address_of(bar), T.uint32(nbytes))
                    T.cuda.mbarrier_wait(T.address_of(bar), 0)
                T.cuda.cta_sync()
                T.ptx.fence.proxy.async_.shared__cta()
                if threadIdx == 0:
                    T.ptx[STORE.format(2)](T.address_of(B_map), 0, 0, A_smem.access_ptr("r", offset=0))
                    T.ptx.cp.async_.bulk.commit_group()
                    T.ptx.cp.async_.bulk.wait_group(0)
    return _build(main)
