"""TMA loads and stores in kernels TVM 0.27 builds, on the emulator, against numpy.

The kernels are those of TVM's own Hopper codegen tests (apache/tvm, tests/python/tirx/codegen/
test_codegen_hopper.py: ``..._global_to_shared_unicast``, ``..._swizzle``, ``..._shared_to_global``),
written the same way (TIRx script with the PTX dialect, ``runtime.cuTensorMapEncodeTiled`` on the host)
with their argument lists, and checked as those tests check them on a GPU.  One change: TVM's kernels have
thread 0 initialise the mbarrier and every thread wait on it with no barrier in between; the emulator
reports that (``test_tvms_kernel_as_written_waits_on_an_mbarrier_before_its_init_is_visible``), so the
copies here put a ``cta_sync`` after the init.  Then: partial boxes at the tensor's edges (zero and NaN
fill on loads, skipped elements on stores), and the store's rules (proxy fence before the copy reads
generic writes; no write to the source before ``cp.async.bulk.wait_group.read``; no read of what it
wrote before ``cp.async.bulk.wait_group``, not ``.read``, and a barrier).
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
from tvm_twill.errors import EmulationError, InputError

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


def test_tvms_kernel_as_written_waits_on_an_mbarrier_before_its_init_is_visible():
    """TVM's unicast kernel verbatim: thread 0 initialises the mbarrier and every thread waits on it with no
    barrier between; the other warps' waits are not ordered after the init."""
    f = load_store((16, 16), "float32", [16, 16, 64, 16, 16, 1, 1, 0, 0, 0, 0],
                   [16, 16, 64, 16, 16, 1, 1, 0, 0, 0, 0], sync_after_init=False)
    a = np.arange(256, dtype="float32").reshape(16, 16)
    report = E.run(f, a, np.zeros_like(a))
    assert any(isinstance(x, F.MbarrierMisuse) and "used before init" in x.message for x in report.findings), \
        str(report)


ROWS, COLS, BOX_R, BOX_C = 40, 24, 16, 8      # a 40 x 24 fp16 tensor, 16 x 8 boxes


def edge_load(coords, oob_fill):
    """Thread 0 loads the 16 x 8 box at ``coords`` (innermost first, may hang over any edge); every thread
    copies one element of it to Out with an ordinary load and store."""
    args = [COLS, ROWS, COLS * 2, BOX_C, BOX_R, 1, 1, 0, 0, 0, oob_fill]
    c0, c1 = coords

    @T.prim_func
    def main(A_ptr: T.handle, O_ptr: T.handle):
        A = T.match_buffer(A_ptr, (ROWS, COLS), dtype="float16", align=16)
        Out = T.match_buffer(O_ptr, (BOX_R, BOX_C), dtype="float16", align=16)
        A_map: T.let[T.handle("tensormap")] = T.tvm_stack_alloca("tensormap", 1)
        T.call_packed("runtime.cuTensorMapEncodeTiled", A_map, "float16", 2, A.data, *args)
        T.device_entry()
        for blockIdx in T.thread_binding(1, thread="blockIdx.x"):
            for tx in T.thread_binding(128, thread="threadIdx.x"):
                bar = T.shared_scalar("uint64")
                A_smem = T.alloc_buffer((BOX_R, BOX_C), "float16", scope="shared", align=128)
                if tx == 0:
                    T.ptx.mbarrier.init.shared.b64(T.address_of(bar), T.uint32(1))
                    T.ptx.fence.proxy.async_.shared__cta()
                T.cuda.cta_sync()
                if tx == 0:
                    T.ptx[LOAD.format(2)](A_smem.data, T.address_of(A_map), c0, c1, T.address_of(bar))
                    T.ptx.mbarrier.arrive.expect_tx.shared.b64(T.address_of(bar), T.uint32(BOX_R * BOX_C * 2))
                T.cuda.mbarrier_wait(T.address_of(bar), 0)
                Out[tx // BOX_C, tx % BOX_C] = A_smem[tx // BOX_C, tx % BOX_C]
    return _build(main)


def _window(a, coords, fill):
    """numpy: the 16 x 8 window of a at (row c1, col c0), fill outside."""
    c0, c1 = coords
    out = np.full((BOX_R, BOX_C), fill, a.dtype)
    for r in range(BOX_R):
        for c in range(BOX_C):
            if 0 <= c1 + r < ROWS and 0 <= c0 + c < COLS:
                out[r, c] = a[c1 + r, c0 + c]
    return out


@pytest.mark.parametrize("coords", [(16, 0), (0, 32), (16, 32), (-4, -8), (24, 40)])
@pytest.mark.parametrize("oob_fill", [0, 1])
def test_a_partial_box_on_the_edge_reads_zero_or_nan_outside(coords, oob_fill):
    a = (np.arange(ROWS * COLS) % 251 + 1).astype("float16").reshape(ROWS, COLS)
    out = np.full((BOX_R, BOX_C), 7, "float16")
    report = E.run(edge_load(coords, oob_fill), a, out, interleavings=2)
    assert report.ok, str(report)
    want = _window(a, coords, np.nan if oob_fill else 0)
    np.testing.assert_array_equal(out, want)          # NaN == NaN position by position
    assert np.isnan(out).any() == bool(oob_fill and np.isnan(want).any())


def edge_store(coords, fence=True, overwrite=False, read_wait=True, read_back=None):
    """Every thread writes one element of a 16 x 8 shared box (ordinary stores), then fence.proxy.async and
    a barrier; thread 0 stores the box at ``coords`` through a tensor map and waits for the read.
    ``read_back`` ("sync" / "no sync"): then thread 32 copies B[c1, c0] to the last element of B, after a
    barrier or not."""
    args = [COLS, ROWS, COLS * 2, BOX_C, BOX_R, 1, 1, 0, 0, 0, 0]
    c0, c1 = coords
    wait = "cp.async.bulk.wait_group.read" if read_wait else "cp.async.bulk.wait_group"

    @T.prim_func
    def main(B_ptr: T.handle):
        B = T.match_buffer(B_ptr, (ROWS, COLS), dtype="float16", align=16)
        B_map: T.let[T.handle("tensormap")] = T.tvm_stack_alloca("tensormap", 1)
        T.call_packed("runtime.cuTensorMapEncodeTiled", B_map, "float16", 2, B.data, *args)
        T.device_entry()
        for blockIdx in T.thread_binding(1, thread="blockIdx.x"):
            for tx in T.thread_binding(128, thread="threadIdx.x"):
                S = T.alloc_buffer((BOX_R, BOX_C), "float16", scope="shared", align=128)
                S[tx // BOX_C, tx % BOX_C] = T.float16(tx + 1)
                if fence:
                    T.ptx.fence.proxy.async_.shared__cta()
                T.cuda.cta_sync()
                if tx == 0:
                    T.ptx[STORE.format(2)](T.address_of(B_map), c0, c1, S.access_ptr("r", offset=0))
                    T.ptx.cp.async_.bulk.commit_group()
                    if overwrite:
                        S[0, 0] = T.float16(-1)
                    T.ptx[wait](0)
                if read_back == "sync":
                    T.cuda.cta_sync()
                if read_back is not None and tx == 32:
                    B[ROWS - 1, COLS - 1] = B[c1, c0]
    return _build(main)


@pytest.mark.parametrize("coords", [(0, 0), (16, 32), (16, 0), (8, 24)])
def test_a_tensor_store_on_the_edge_writes_only_inside_the_tensor(coords):
    b = np.zeros((ROWS, COLS), "float16")
    report = E.run(edge_store(coords), b, interleavings=2)
    assert report.ok, str(report)
    box = (np.arange(128) + 1).astype("float16").reshape(BOX_R, BOX_C)
    want = np.zeros_like(b)
    c0, c1 = coords
    want[c1:c1 + BOX_R, c0:c0 + BOX_C] = box[:ROWS - c1, :COLS - c0]
    np.testing.assert_array_equal(b, want)


def test_a_store_reading_generic_writes_without_a_proxy_fence_is_reported():
    report = E.run(edge_store((0, 0), fence=False), np.zeros((ROWS, COLS), "float16"))
    assert any(isinstance(x, F.ProxyFenceMissing) and "bulk store" in x.message for x in report.findings), \
        str(report)


@pytest.mark.parametrize("read_wait", [True, False])
def test_writing_the_source_before_the_bulk_wait_is_reported(read_wait):
    b = np.zeros((ROWS, COLS), "float16")
    report = E.run(edge_store((0, 0), overwrite=True, read_wait=read_wait), b)
    bad = [x for x in report.findings if isinstance(x, F.InFlightOverwrite)]
    assert bad and "bulk store" in bad[0].message, str(report)
    assert b[0, 0] == -1                          # latest legal completion: the store reads the new value


def test_reading_a_tensor_store_back_needs_the_full_wait_and_a_barrier():
    """The store writes global memory until the issuer's cp.async.bulk.wait_group (not .read) returns; another
    warp may read it only after that wait and a barrier."""
    want_read = f"B_ptr[{ROWS * COLS - 1}] = B_ptr[0];"
    for read_wait, sync in ((True, True), (False, False), (False, True)):
        f = edge_store((0, 0), read_wait=read_wait, read_back="sync" if sync else "no sync")
        b = np.zeros((ROWS, COLS), "float16")
        report = E.run(f, b, interleavings=2)
        if not read_wait and sync:
            assert report.ok, str(report)
            assert b[ROWS - 1, COLS - 1] == b[0, 0] == 1
            continue
        src = f.mod.imports[0].inspect_source().splitlines()
        races = [x for x in report.findings if isinstance(x, F.DataRace)]
        sides = [{(x.where.warp, src[x.where.cuda_line - 1].strip()), (x.other[0], src[x.other[2] - 1].strip())}
                 for x in races]
        store = next(t for t in src if "cp_async_bulk_tensor_s2g" in t and "(((void" in t).strip()
        assert {(1, want_read), (0, store)} in sides, str(report)     # without the barrier either may come first
        assert not sync or any("TMA store in flight" in x.message and x.where.warp == 1 for x in races), str(report)


def test_the_host_encode_is_checked_and_takes_tvms_optional_force_cu_dtype():
    """The emulator stands in for runtime.cuTensorMapEncodeTiled when it runs the host code: an encode CUDA
    would refuse is refused there, in one line; TVM's optional trailing force_cu_dtype (-1: none) is read."""
    args = [16, 16, 64, 16, 16, 1, 1, 0, 0, 0, 0]
    a = np.arange(256, dtype="float32").reshape(16, 16)
    b = np.zeros_like(a)
    report = E.run(load_store((16, 16), "float32", args + [-1], args), a, b)
    assert report.ok, str(report)
    np.testing.assert_array_equal(a, b)
    bad = list(args)
    bad[3] = 3                                         # boxDim[0] = 3 floats: 12 bytes
    with pytest.raises(InputError, match=r"^cuTensorMapEncodeTiled refuses this map: boxDim\[0\] \* elementSize"):
        E.run(load_store((16, 16), "float32", bad, args), a, b)


def test_tvms_multicast_kernel_is_refused_in_one_line():
    """test_cp_async_bulk_tensor_global_to_shared_multicast1 (16 x 16 float32): 4 CTAs per cluster, CTA 0 of
    each cluster multicasts the box to all four.  Clusters are not modelled: one clear EmulationError."""
    shape, args = (16, 16), [16, 16, 64, 16, 16, 1, 1, 0, 0, 0, 0]
    multicast = LOAD.format(2) + ".multicast::cluster"

    @T.prim_func
    def main(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, shape, dtype="float32", align=16)
        B = T.match_buffer(B_ptr, shape, dtype="float32", align=16)
        A_map: T.let[T.handle("tensormap")] = T.tvm_stack_alloca("tensormap", 1)
        T.call_packed("runtime.cuTensorMapEncodeTiled", A_map, "float32", 2, A.data, *args)
        T.device_entry()
        for clusterCtaIdx in T.thread_binding(4, thread="clusterCtaIdx.x"):
            for bx in T.thread_binding(4, thread="blockIdx.x"):
                for tx in T.thread_binding(128, thread="threadIdx.x"):
                    bar = T.shared_scalar("uint64")
                    A_smem = T.alloc_buffer(shape, "float32", scope="shared", align=128)
                    if tx == 0:
                        T.ptx.mbarrier.init.shared.b64(T.address_of(bar), T.uint32(1))
                        T.ptx.fence.proxy.async_.shared__cta()
                        T.ptx.mbarrier.arrive.expect_tx.shared.b64(T.address_of(bar), T.uint32(1024))
                        if clusterCtaIdx == 0:
                            T.ptx[multicast](A_smem.data, T.address_of(A_map), 0, 0, T.address_of(bar), 15)
                    T.cuda.mbarrier_wait(T.address_of(bar), 0)

    a = np.arange(256, dtype="float32").reshape(shape)
    with pytest.raises(EmulationError, match=r"launched in thread-block clusters \(clusterCtaIdx.x = 4\): .* does "
                                             r"not model clusters"):
        E.run(_build(main), a, np.zeros_like(a))
