"""Other compilers' kernels, frozen as PTX in tests/emulator/foreign/ (``make_triton.py`` regenerates them),
run on the emulator as their compiler wrote them: 0 findings and numpy's values.

Triton's tutorial matmul on sm_80 (cp.async, ldmatrix, mma.sync) and sm_90 (cp.async, wgmma) with a K that
is not a multiple of the K tile, so its masked prefetches past K run: Triton issues them as cp.async with a
src-size of 0 (no source byte read, 16 bytes of zeros written), and the first CTA reads past the end of A
there.  The launch is what Triton's launcher passes: the grid of tiles, ``num_warps`` x 32 threads, the
metadata's shared memory as dynamic shared memory, the kernel's parameters and two trailing scratch
pointers (null: the kernels use no scratch).

Triton's tutorial TMA matmul for sm_90a (``make_triton_tma.py``): TMA loads and store, wgmma, stmatrix,
``cvt.rn.f16x2.f32``; and its warp-specialized form with device-side tensor maps (not emulated yet).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from tvm_twill import emulator as E

HERE = Path(__file__).resolve().parent / "foreign"
TRITON = sorted(p.stem for p in HERE.glob("triton_matmul_*.ptx"))


def _triton_matmul(name: str, m: int, n: int, k: int, seed: int = 0):
    meta = json.loads((HERE / f"{name}.json").read_text())
    ptx = (HERE / f"{name}.ptx").read_text()
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, (m, k)).astype(np.float16)
    b = rng.integers(-3, 4, (k, n)).astype(np.float16)
    c = np.full((m, n), np.float16(np.nan))
    t = meta["tiles"]
    grid = (-(-m // t["BLOCK_SIZE_M"]) * -(-n // t["BLOCK_SIZE_N"]), 1, 1)
    s32 = lambda v: ("scalar", "s32", v)  # noqa: E731
    params = (("buffer", 0, 0), ("buffer", 1, 0), ("buffer", 2, 0), s32(m), s32(n), s32(k), s32(k), s32(n), s32(n),
              ("scalar", "u64", 0), ("scalar", "u64", 0))
    launch = E.Launch(meta["kernel"], grid, (32 * meta["num_warps"], 1, 1), meta["shared"], params)
    return ptx, launch, a, b, c


def test_the_frozen_kernels_are_there():
    assert TRITON == ["triton_matmul_sm80", "triton_matmul_sm90"]


@pytest.mark.parametrize("name", TRITON)
def test_tritons_tutorial_matmul_runs_clean_and_right(name):
    ptx, launch, a, b, c = _triton_matmul(name, 128, 64, 80)      # K = 80: the last K tile is masked
    report = E.run_ptx(ptx, [launch], a, b, c, interleavings=2)
    assert report.ok, "\n".join(str(f) for f in report.findings[:5])
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)   # small integers: exact
    np.testing.assert_array_equal(c, want)


def test_the_masked_prefetch_is_a_zero_fill_not_a_read():
    """Triton's masked K tail: the same kernel with the src-size operand forced to 16 reads the source, past
    the end of A for the last CTA row, which is a BadAccess finding; as Triton wrote it, it is none."""
    ptx, launch, a, b, c = _triton_matmul("triton_matmul_sm80", 64, 64, 48)
    lines = [ln for ln in ptx.splitlines() if ln.strip().startswith("cp.async.cg.shared.global")]
    assert lines and all(ln.rstrip().rstrip(";").split(",")[-1].strip().startswith("%r") for ln in lines)
    forced = "\n".join(ln.rsplit(",", 1)[0] + ", 16;" if ln.strip().startswith("cp.async.cg.shared.global") else ln
                       for ln in ptx.splitlines())
    report = E.run_ptx(forced, [launch], a, b, c)
    assert any(f.kind == "BadAccess" for f in report.findings)


def _struct(*fields):
    return ("struct", tuple(fields))


def _cute_sgemm(m: int, n: int, k: int, alpha: float, beta: float, seed: int = 0):
    """CuTe's sgemm_sm80 fp16 "TN" kernel: C (column-major, ldC = m) = alpha * A (m x k, K-major) @ B (n x k,
    K-major)^T + beta * C, launched as ``gemm_tn`` launches it (grid of 128 x 128 tiles, 128 threads, its
    SharedStorage of three 128 x 64 stages of A and of B as dynamic shared memory)."""
    ptx = (HERE / "cute_sgemm_sm80.ptx").read_text()
    name = re.search(r"^\.entry (\S+)\(", ptx, re.M).group(1)
    rng = np.random.default_rng(seed)
    a = rng.integers(-1, 2, (m, k)).astype(np.float16)
    b = rng.integers(-1, 2, (n, k)).astype(np.float16)
    c = rng.integers(-4, 5, (n, m)).astype(np.float16)     # column-major m x n: row j of c is column j of C
    s32, f16 = (lambda v: ("scalar", "s32", v)), (lambda v: ("bytes", np.float16(v).tobytes()))  # noqa: E731
    empty = _struct()
    params = (_struct((0, s32(m)), (4, s32(n)), (8, s32(k))), empty,          # the problem shape, the CTA tiler
              ("buffer", 0, 0), _struct((0, s32(k))), empty, empty, empty,    # A, its stride (ldA, _1), sA, copies
              ("buffer", 1, 0), _struct((0, s32(k))), empty, empty, empty,    # B, ldB, sB, copies
              ("buffer", 2, 0), _struct((0, s32(m))), empty, empty,           # C, (_1, ldC), sC, the tiled MMA
              _struct((0, f16(alpha))), _struct((0, f16(beta))))
    smem = 2 * 3 * 128 * 64 * 2
    launch = E.Launch(name, (-(-m // 128), -(-n // 128), 1), (128, 1, 1), smem, params)
    want = (alpha * (a.astype(np.float64) @ b.astype(np.float64).T) + beta * c.astype(np.float64).T).T
    return ptx, launch, a, b, c, want.astype(np.float16)


def test_cutes_sgemm_sm80_runs_clean_and_right():
    ptx, launch, a, b, c, want = _cute_sgemm(256, 128, 128, 2.0, -1.0)   # two CTAs, two K tiles
    report = E.run_ptx(ptx, [launch], a, b, c, interleavings=2)
    assert report.ok, "\n".join(str(f) for f in report.findings[:5])
    np.testing.assert_array_equal(c, want)          # small integers: every fp16 partial sum is exact


def _triton_tma(m: int, n: int, k: int, seed: int = 0):
    """Triton's tutorial TMA matmul (sm_90a, host-side descriptors): C = A @ B^T, A m x k, B n x k, launched
    as Triton's launcher launches it (``make_tensordesc_arg``: a descriptor is its CUtensorMap, encoded by
    ``cuTensorMapEncodeTiled`` with the metadata's block, swizzle and element type, then its shape (i32)
    and strides (i64); the grid of 128 x 128 tiles, 8 warps, the metadata's shared memory)."""
    from tvm_twill.emulator.tensormap import from_encode_args
    meta = json.loads((HERE / "triton_tma_matmul_sm90.json").read_text())
    ptx = (HERE / "triton_tma_matmul_sm90.ptx").read_text()
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, (m, k)).astype(np.float16)
    b = rng.integers(-3, 4, (n, k)).astype(np.float16)
    c = np.full((m, n), np.float16(np.nan))
    s32, u64 = (lambda v: ("scalar", "s32", v)), (lambda v: ("scalar", "u64", v))  # noqa: E731

    def desc(arg, rows, cols, dm):
        box_rows, box_cols = dm["block_size"]
        encoded = from_encode_args("float16", 2, (arg, 0), [cols, rows, 2 * cols, box_cols, box_rows, 1, 1, 0,
                                                           dm["swizzle"], 2, 0])
        return (("tensormap", encoded), s32(rows), s32(cols), u64(cols), u64(1))

    dms = meta["tensordesc_meta"]
    params = (*desc(0, m, k, dms[0]), *desc(1, n, k, dms[1]), *desc(2, m, n, dms[2]), s32(m), s32(n), s32(k),
              u64(0), u64(0))
    t = meta["tiles"]
    grid = (-(-m // t["BLOCK_SIZE_M"]) * -(-n // t["BLOCK_SIZE_N"]), 1, 1)
    launch = E.Launch(meta["kernel"], grid, (32 * meta["num_warps"], 1, 1), meta["shared"], params)
    return ptx, launch, a, b, c


def test_tritons_tma_matmul_computes_numpys_values():
    ptx, launch, a, b, c = _triton_tma(256, 128, 80)       # two CTAs; K = 80: TMA zero-fills the last K tile
    E.run_ptx(ptx, [launch], a, b, c, interleavings=2)
    want = (a.astype(np.float32) @ b.astype(np.float32).T).astype(np.float16)
    np.testing.assert_array_equal(c, want)


def test_tritons_tma_matmul_runs_clean():
    """Triton publishes its mbarrier inits with bar.sync alone, no fence.mbarrier_init: clean by default, flagged
    under ``Policy(strict_mbarrier_init_fence=True)`` (docs/emulator.md)."""
    ptx, launch, a, b, c = _triton_tma(256, 128, 80)
    report = E.run_ptx(ptx, [launch], a, b, c, interleavings=2)
    assert report.ok, "\n".join(str(f) for f in report.findings[:5])
    strict = E.run_ptx(ptx, [launch], a, b, c, policy=E.Policy(strict_mbarrier_init_fence=True))
    assert {f.kind for f in strict.findings} == {"ProxyFenceMissing"}


@pytest.mark.xfail(strict=True, raises=E.EmulationError, reason="device-side tensor maps (tensormap.replace, "
                   "tensormap.cp_fenceproxy, fence.proxy.tensormap) are not emulated")
def test_tritons_warp_specialized_tma_matmul_runs_clean_and_right():
    """``warp_specialize=True`` with device-side descriptors: a producer and two consumer warp groups; each
    consumer builds its own C descriptor (box 64 x 64, its own 128 bytes of global scratch) and TMA-stores
    its own 64 rows, so the consumers' stores never overlap."""
    meta = json.loads((HERE / "triton_tma_matmul_ws_sm90.json").read_text())
    ptx = (HERE / "triton_tma_matmul_ws_sm90.ptx").read_text()
    m, n, k = 128, 128, 80
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, (m, k)).astype(np.float16)
    b = rng.integers(-3, 4, (n, k)).astype(np.float16)
    c = np.full((m, n), np.float16(np.nan))
    scratch = np.zeros(meta["global_scratch_size"], np.uint8)
    s32 = lambda v: ("scalar", "s32", v)  # noqa: E731
    params = (("buffer", 0, 0), ("buffer", 1, 0), ("buffer", 2, 0), s32(m), s32(n), s32(k), ("buffer", 3, 0),
              ("scalar", "u64", 0))
    launch = E.Launch(meta["kernel"], (1, 1, 1), (32 * meta["num_warps"], 1, 1), meta["shared"], params)
    report = E.run_ptx(ptx, [launch], a, b, c, scratch, interleavings=2)
    assert report.ok, "\n".join(str(f) for f in report.findings[:5])
    np.testing.assert_array_equal(c, (a.astype(np.float32) @ b.astype(np.float32).T).astype(np.float16))
