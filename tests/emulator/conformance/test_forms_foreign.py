"""Unit cases for the forms other compilers (Triton, CuTe / CUTLASS) emit for GEMM and attention.

Every kernel is hand-written PTX that ptxas 13 assembles (the test skips without ptxas); values are checked
against numpy references with the fragment layouts written out here from the PTX ISA's figures
("Matrix Fragments for mma.m16n8k8 / m16n8k16 / m16n8k32", ldmatrix / stmatrix "Figure: ... fragment").
"""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from ptxkit import ptxas

from tvm_twill import emulator as E

pytestmark = pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas (CUDA 13) to assemble")
LANE = np.arange(32)
G, Q = LANE // 4, LANE % 4


def assemble(ptx: str, arch: str) -> str:
    ok, messages = ptxas(ptx, arch)
    assert ok, messages
    return ptx


def module(body: str, nparams: int, target: str, regs: str = "", shared: str = "") -> str:
    params = ",\n".join(f"    .param .u64 k_param_{i}" for i in range(nparams))
    loads = "\n".join(f"    ld.param.u64 %rd{i}, [k_param_{i}];" for i in range(nparams))
    return (f".version 8.7\n.target {target}\n.address_size 64\n.visible .entry k(\n{params}\n)\n{{\n"
            f"    .reg .pred %p<8>;\n    .reg .b32 %r<96>;\n    .reg .b64 %rd<32>;\n{regs}{shared}\n{loads}\n"
            f"    mov.u32 %r0, %tid.x;\n{body}\n    ret;\n}}\n")


def launch(nparams: int, threads: int = 32, smem: int = 0) -> E.Launch:
    return E.Launch("k", (1, 1, 1), (threads, 1, 1), smem, tuple(("buffer", i, 0) for i in range(nparams)))


# --- mma.sync ----------------------------------------------------------------------------------------------
# Each lane's registers are its fragment, gathered here with the ISA figures' formulas; element i of a
# lane is part i % per of register i // per (the low bits first).

def a_place(shape: str, t: str, i):
    """(row, col) of A element i (PTX ISA mma fragment figures for A)."""
    if t in ("s8", "u8", "e4m3", "e5m2"):
        return G + 8 * ((i % 8) >= 4), 4 * Q + i % 4 + 16 * (i >= 8)
    if t == "tf32":
        return G + 8 * (i % 2), Q + 4 * (i // 2)
    return G + 8 * ((i // 2) % 2), 2 * Q + i % 2 + 8 * (i >= 4)      # f16 / bf16 (k8: i < 4 only)


def b_place(shape: str, t: str, i):
    """(k, n) of B element i."""
    if t in ("s8", "u8", "e4m3", "e5m2"):
        return 4 * Q + i % 4 + 16 * (i >= 4), G
    if t == "tf32":
        return Q + 4 * i, G
    return 2 * Q + i % 2 + 8 * (i >= 2), G


def c_place(i):
    return G + 8 * (i >= 2), 2 * Q + i % 2


def fp8_code(x: float, t: str) -> int:
    """The e4m3 / e5m2 code of x (exactly representable), from the formats' definition."""
    eb, mb = (4, 3) if t == "e4m3" else (5, 2)
    bias = (1 << (eb - 1)) - 1
    for code in range(128):
        e, m = code >> mb, code & ((1 << mb) - 1)
        v = m * 2.0 ** (1 - bias - mb) if e == 0 else (1 + m / (1 << mb)) * 2.0 ** (e - bias)
        if v == abs(x):
            return code | (0x80 if x < 0 else 0)
    raise AssertionError(x)


def bits(x: np.ndarray, t: str) -> np.ndarray:
    """Raw element bits of values x in type t."""
    if t == "f16":
        return x.astype(np.float16).view(np.uint16).astype(np.uint32)
    if t == "bf16":
        return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint32)
    if t in ("tf32", "f32"):
        return x.astype(np.float32).view(np.uint32)
    if t == "s32":
        return x.astype(np.int64).astype(np.uint32)
    if t in ("e4m3", "e5m2"):
        return np.vectorize(lambda v: fp8_code(float(v), t))(x).astype(np.uint32)
    return (x.astype(np.int64) & 0xFF).astype(np.uint32)


def fragment(mat: np.ndarray, t: str, place, nelem: int) -> np.ndarray:
    """[32, registers] uint32: each lane's registers holding mat's elements at ``place``."""
    width = {"f16": 16, "bf16": 16, "s8": 8, "u8": 8, "e4m3": 8, "e5m2": 8}.get(t, 32)
    per = 32 // width
    regs = np.zeros((32, nelem // per), np.uint32)
    for i in range(nelem):
        r, c = place(i)
        regs[:, i // per] |= bits(mat[r, c], t) << np.uint32(width * (i % per))
    return regs


MMA = [  # shape, d, a, b, c, K, target
    ("m16n8k16", "f32", "f16", "f16", "f32", 16, "sm_80"), ("m16n8k16", "f16", "f16", "f16", "f16", 16, "sm_80"),
    ("m16n8k16", "f32", "bf16", "bf16", "f32", 16, "sm_80"), ("m16n8k8", "f32", "f16", "f16", "f32", 8, "sm_80"),
    ("m16n8k8", "f16", "f16", "f16", "f16", 8, "sm_80"), ("m16n8k8", "f32", "bf16", "bf16", "f32", 8, "sm_80"),
    ("m16n8k8", "f32", "tf32", "tf32", "f32", 8, "sm_80"), ("m16n8k32", "s32", "s8", "s8", "s32", 32, "sm_80"),
    ("m16n8k32", "s32", "u8", "s8", "s32", 32, "sm_80"), ("m16n8k16", "s32", "s8", "u8", "s32", 16, "sm_80"),
    ("m16n8k32", "f32", "e4m3", "e4m3", "f32", 32, "sm_89"), ("m16n8k32", "f32", "e5m2", "e4m3", "f32", 32, "sm_89"),
]


def mma_kernel(opcode: str, na: int, nb: int, nc: int) -> str:
    """Lane t loads its na + nb + nc registers from rows t of three [32, n] uint32 arrays, runs ``opcode``
    and stores its nc result registers to row t of the fourth."""
    lines = []
    for p, n, base in ((0, na, 10), (1, nb, 20), (2, nc, 30)):
        lines += [f"    mul.wide.u32 %rd{8 + p}, %r0, {4 * n};", f"    add.s64 %rd{12 + p}, %rd{p}, %rd{8 + p};"]
        lines += [f"    ld.global.b32 %r{base + j}, [%rd{12 + p}+{4 * j}];" for j in range(n)]
    lines += [f"    mul.wide.u32 %rd11, %r0, {4 * nc};", "    add.s64 %rd15, %rd3, %rd11;"]
    reg = lambda base, n: "{" + ", ".join(f"%r{base + j}" for j in range(n)) + "}"  # noqa: E731
    lines.append(f"    {opcode} {reg(40, nc)}, {reg(10, na)}, {reg(20, nb)}, {reg(30, nc)};")
    lines += [f"    st.global.b32 [%rd15+{4 * j}], %r{40 + j};" for j in range(nc)]
    return "\n".join(lines)


def operands(at, bt, ct, K, rng):
    if at in ("s8", "u8"):
        lo = lambda t: (0, 255) if t == "u8" else (-128, 127)  # noqa: E731
        A = rng.integers(*lo(at), (16, K), endpoint=True)
        B = rng.integers(*lo(bt), (K, 8), endpoint=True)
        return A, B, rng.integers(-(1 << 20), 1 << 20, (16, 8))
    vals = np.array([-2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 3])
    A, B = rng.choice(vals, (16, K)), rng.choice(vals, (K, 8))
    return A, B, rng.integers(-8, 9, (16, 8)).astype(np.float64)


@pytest.mark.parametrize("shape,dt,at,bt,ct,K,target", MMA, ids=[".".join(m[:5]) for m in MMA])
def test_mma_sync_forms(shape, dt, at, bt, ct, K, target):
    """PTX ISA, mma (sync, m16n8k8 / m16n8k16 / m16n8k32): D = A B + C over the fragment layouts; the sums
    here are exact (small values), so the result is numpy's bit for bit."""
    rng = np.random.default_rng(hash((shape, at, bt, ct)) % 2**32)
    A, B, C = operands(at, bt, ct, K, rng)
    per = {"f16": 2, "bf16": 2, "tf32": 1}.get(at, 4)
    na, nb, nc = 16 * K // 32 // per, K * 8 // 32 // per, 2 if ct == "f16" else 4
    fa = fragment(A, at, lambda i: a_place(shape, at, i), na * per)
    fb = fragment(B, bt, lambda i: b_place(shape, bt, i), nb * per)
    fc = fragment(C, ct, c_place, 4)
    opcode = f"mma.sync.aligned.{shape}.row.col.{dt}.{at}.{bt}.{ct}"
    ptx = assemble(module(mma_kernel(opcode, na, nb, nc), 4, target), target)
    out = np.zeros((32, nc), np.uint32)
    report = E.run_ptx(ptx, [launch(4)], fa, fb, fc, out)
    assert report.ok, report.findings[:3]
    D = A @ B + C
    want = fragment(D, dt, c_place, 4)
    np.testing.assert_array_equal(out, want)


def test_mma_s32_wraps_and_satfinite_clamps():
    """PTX ISA, mma: ``.satfinite`` clamps the s32 result to [-2^31, 2^31 - 1]; without it the s32 sum wraps
    (two's complement) here."""
    A, B = np.full((16, 32), 127), np.full((32, 8), 127)
    C = np.full((16, 8), (1 << 31) - 1000)
    fa = fragment(A, "s8", lambda i: a_place("m16n8k32", "s8", i), 16)
    fb = fragment(B, "s8", lambda i: b_place("m16n8k32", "s8", i), 8)
    fc = fragment(C, "s32", c_place, 4)
    exact = A @ B + C
    for sat, want in (("", (exact + 2**31) % 2**32 - 2**31), (".satfinite", np.minimum(exact, 2**31 - 1))):
        opcode = f"mma.sync.aligned.m16n8k32.row.col{sat}.s32.s8.s8.s32"
        ptx = assemble(module(mma_kernel(opcode, 4, 2, 4), 4, "sm_80"), "sm_80")
        out = np.zeros((32, 4), np.uint32)
        assert E.run_ptx(ptx, [launch(4)], fa, fb, fc, out).ok
        np.testing.assert_array_equal(out, fragment(want, "s32", c_place, 4))


def test_mma_qualifier_orders_are_one_form():
    """ptxas takes ``mma.sync.m16n8k16.aligned.row.col...``: the same instruction as the ISA's order."""
    rng = np.random.default_rng(1)
    A, B, C = operands("f16", "f16", "f32", 16, rng)
    fa = fragment(A, "f16", lambda i: a_place("m16n8k16", "f16", i), 8)
    fb = fragment(B, "f16", lambda i: b_place("m16n8k16", "f16", i), 4)
    fc = fragment(C, "f32", c_place, 4)
    ptx = assemble(module(mma_kernel("mma.aligned.m16n8k16.row.sync.col.f32.f16.f16.f32", 4, 2, 4), 4, "sm_80"),
                   "sm_80")
    out = np.zeros((32, 4), np.uint32)
    assert E.run_ptx(ptx, [launch(4)], fa, fb, fc, out).ok
    np.testing.assert_array_equal(out, fragment(A @ B + C, "f32", c_place, 4))


def test_mma_by_part_of_the_warp_is_a_finding():
    ptx = module("    setp.lt.u32 %p1, %r0, 16;\n    @%p1 bra DONE;\n" + mma_kernel(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", 4, 2, 4) + "\nDONE:", 4, "sm_80")
    assemble(ptx, "sm_80")
    arrs = [np.zeros((32, n), np.uint32) for n in (4, 2, 4, 4)]
    report = E.run_ptx(ptx, [launch(4)], *arrs)
    assert {f.kind for f in report.findings} == {"BarrierMismatch"}


# --- the emulator's fragment maps against CuTe's MMA_Traits ------------------------------------------------

def _cute_tables(tmp_path_factory) -> dict:
    import hashlib
    import importlib.metadata
    import importlib.util
    from collections import defaultdict
    from pathlib import Path

    from tvm_twill.emulator.launch import cache_dir

    nvcc, spec = shutil.which("nvcc"), importlib.util.find_spec("cutlass_library")
    if nvcc is None or spec is None or spec.origin is None:
        pytest.skip("needs nvcc and the nvidia-cutlass wheel (CuTe's headers)")
    inc = Path(spec.origin).parent / "source" / "include"
    src = Path(__file__).with_name("cute_mma_more.cu")
    key = hashlib.sha256((src.read_text() + importlib.metadata.version("nvidia-cutlass")).encode()).hexdigest()
    exe = cache_dir().parent / "cute" / f"cute_mma_more_{key[:24]}"
    if not exe.is_file():
        build = tmp_path_factory.mktemp("cute") / "cute_mma_more"
        r = subprocess.run([nvcc, "-std=c++17", "-I", str(inc), "-o", str(build), str(src)], capture_output=True,
                           text=True, check=False)
        assert r.returncode == 0, r.stderr[-3000:]
        exe.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(build, exe.with_suffix(".tmp"))
        exe.with_suffix(".tmp").replace(exe)
    tab = defaultdict(dict)
    for line in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines():
        name, side, t, v, idx = line.split()
        tab[name, side][int(t), int(v)] = int(idx)
    return tab


@pytest.fixture(scope="module")
def cute_mma(tmp_path_factory):
    return _cute_tables(tmp_path_factory)


def _maps(name):
    from tvm_twill.emulator import encodings as enc
    k = int(name.split(".")[0].split("k")[-1])
    t = name.split(".")[1]
    if t in ("s8", "e4m3"):
        return k, enc.mma_8bit_a, enc.mma_8bit_b, k // 2, k // 4
    if t == "tf32":
        return k, enc.mma_tf32_m16n8k8_a, enc.mma_tf32_m16n8k8_b, 4, 2
    if k == 8:
        return k, enc.mma_m16n8k8_a, enc.mma_m16n8k8_b, 4, 2
    return k, enc.mma_m16n8k16_a, enc.mma_m16n8k16_b, 8, 4


@pytest.mark.parametrize("name", ["m16n8k8.f16", "m16n8k16.f16", "m16n8k8.bf16", "m16n8k8.tf32", "m16n8k16.s8",
                                  "m16n8k32.s8", "m16n8k32.e4m3"])
def test_fragment_maps_match_cute(cute_mma, name):
    """encodings' mma.sync maps give every (lane, value) the tile element CuTe's MMA_Traits give it (values
    numbered as the registers hold them, low bits first; C: f16 accumulators two per register)."""
    from tvm_twill.emulator import encodings as enc
    k, amap, bmap, na, nb = _maps(name)
    got = {"A": {}, "B": {}, "C": {}}
    for lane in range(32):
        for i in range(na):
            r, c = amap(lane, i)
            got["A"][lane, i] = r + 16 * c
        for i in range(nb):
            kk, n = bmap(lane, i)
            got["B"][lane, i] = n + 8 * kk
        for i in range(4):
            r, c = enc.mma_m16n8k16_c(lane, i)
            got["C"][lane, i] = r + 16 * c
    for side in "ABC":
        assert got[side] == cute_mma[name, side], side


# --- stmatrix and ldmatrix ---------------------------------------------------------------------------------

def stored_row(num: int, trans: bool, regs: np.ndarray, m: int, r: int) -> np.ndarray:
    """The 8 16-bit elements of row r of matrix m that stmatrix stores (PTX ISA stmatrix fragment figure):
    element c comes from lane 4 r + c // 2, register m, half c % 2; with .trans element (r, c) is the
    transposed fragment's (c, r): lane 4 c + r // 2, half r % 2."""
    h = regs.view(np.uint16).reshape(32, num, 2)
    if trans:
        return np.array([h[4 * c + r // 2, m, r % 2] for c in range(8)], np.uint16)
    return np.array([h[4 * r + c // 2, m, c % 2] for c in range(8)], np.uint16)


def matrix_kernel(num: int, st: str, ld: str, oob: int = 0) -> str:
    """Lane t: registers from row t of param 0; stmatrix them with lane L addressing position 8 num - 1 - L
    (reversed rows); copy the shared rows to param 1; ldmatrix them back (same addresses) into param 2."""
    regs = "{" + ", ".join(f"%r{10 + j}" for j in range(num)) + "}"
    back = "{" + ", ".join(f"%r{20 + j}" for j in range(num)) + "}"
    return "\n".join([
        f"    mul.wide.u32 %rd4, %r0, {4 * num};", "    add.s64 %rd5, %rd0, %rd4;",
        *[f"    ld.global.b32 %r{10 + j}, [%rd5+{4 * j}];" for j in range(num)],
        f"    and.b32 %r1, %r0, {8 * num - 1};", f"    sub.u32 %r2, {8 * num - 1}, %r1;", "    shl.b32 %r3, %r2, 4;",
        "    mov.u32 %r4, sm;", "    add.u32 %r5, %r4, %r3;", f"    add.u32 %r6, %r5, {oob};",
        f"    {st} [%r6], {regs};", "    bar.sync 0;",
        f"    setp.lt.u32 %p1, %r0, {8 * num};", "    shl.b32 %r7, %r0, 4;", "    add.u32 %r8, %r4, %r7;",
        "    @%p1 ld.shared.v4.b32 {%r30, %r31, %r32, %r33}, [%r8];", "    mul.wide.u32 %rd6, %r0, 16;",
        "    add.s64 %rd7, %rd1, %rd6;", "    @%p1 st.global.v4.b32 [%rd7], {%r30, %r31, %r32, %r33};",
        f"    {ld} {back}, [%r5];", "    add.s64 %rd8, %rd2, %rd4;",
        *[f"    st.global.b32 [%rd8+{4 * j}], %r{20 + j};" for j in range(num)]])


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_stmatrix_layout_and_ldmatrix_in_any_qualifier_order(num, trans):
    """PTX ISA stmatrix (sm_90): row r of matrix m goes to the address lane 8 m + r gives, holding the
    fragment of register m; ldmatrix (written ``.x{num}{.trans}.m8n8`` as CuTe orders it) reads it back."""
    tr = ".trans" if trans else ""
    ptx = module(matrix_kernel(num, f"stmatrix.sync.aligned.m8n8.x{num}{tr}.shared.b16",
                               f"ldmatrix.sync.aligned.x{num}{tr}.m8n8.shared::cta.b16"), 3, "sm_90a",
                 shared=f"    .shared .align 16 .b8 sm[{128 * num}];\n")
    assemble(ptx, "sm_90a")
    rng = np.random.default_rng(num + 10 * trans)
    regs = rng.integers(0, 2**32, (32, num), dtype=np.uint64).astype(np.uint32)
    rows, back = np.zeros((8 * num, 8), np.uint16), np.zeros((32, num), np.uint32)
    report = E.run_ptx(ptx, [launch(3)], regs, rows, back)
    assert report.ok, report.findings[:3]
    for m in range(num):
        for r in range(8):
            np.testing.assert_array_equal(rows[8 * num - 1 - (8 * m + r)], stored_row(num, trans, regs, m, r))
    np.testing.assert_array_equal(back, regs)


def test_stmatrix_outside_shared_memory_is_a_finding():
    ptx = module(matrix_kernel(4, "stmatrix.sync.aligned.m8n8.x4.shared.b16",
                               "ldmatrix.sync.aligned.m8n8.x4.shared.b16", oob=16), 3, "sm_90a",
                 shared="    .shared .align 16 .b8 sm[512];\n")
    assemble(ptx, "sm_90a")
    report = E.run_ptx(ptx, [launch(3)], np.zeros((32, 4), np.uint32), np.zeros((32, 8), np.uint16),
                       np.zeros((32, 4), np.uint32))
    assert "BadAccess" in {f.kind for f in report.findings}


# --- cp.async: src-size, ignore-src, cache hints -----------------------------------------------------------

def cp_async_kernel(form: str, extra: str, pre: str = "") -> str:
    """4 lanes: lane t copies 16 bytes from src + offs[t] (param 1: byte offsets, param 2: src-size or the
    ignore flag) to shared 16 t with ``form``; after the wait the shared bytes go to param 3."""
    return "\n".join([
        "    mul.wide.u32 %rd4, %r0, 4;", "    add.s64 %rd5, %rd1, %rd4;", "    ld.global.u32 %r1, [%rd5];",
        "    add.s64 %rd6, %rd2, %rd4;", "    ld.global.u32 %r2, [%rd6];", "    setp.ne.u32 %p1, %r2, 0;",
        "    cvt.u64.u32 %rd7, %r1;", "    add.s64 %rd8, %rd0, %rd7;", "    mov.u32 %r3, sm;",
        "    shl.b32 %r4, %r0, 4;", "    add.u32 %r5, %r3, %r4;", pre,
        f"    {form} [%r5], [%rd8], 16{extra};", "    cp.async.commit_group;", "    cp.async.wait_group 0;",
        "    ld.shared.v4.b32 {%r10, %r11, %r12, %r13}, [%r5];", "    mul.wide.u32 %rd9, %r0, 16;",
        "    add.s64 %rd10, %rd3, %rd9;", "    st.global.v4.b32 [%rd10], {%r10, %r11, %r12, %r13};"])


def run_cp_async(form, extra, offs, arg, pre=""):
    ptx = module(cp_async_kernel(form, extra, pre), 4, "sm_80", shared="    .shared .align 16 .b8 sm[64];\n")
    assemble(ptx, "sm_80")
    src = np.arange(1, 57, dtype=np.uint8)                 # 56 bytes: the last 16-byte slot is half outside
    out = np.full((4, 16), 0xEE, np.uint8)
    report = E.run_ptx(ptx, [launch(4, threads=4)], src, np.array(offs, np.uint32), np.array(arg, np.uint32), out)
    return report, src, out


FAR = 1 << 24          # past the end of every buffer


@pytest.mark.parametrize("form", ["cp.async.cg.shared.global", "cp.async.ca.shared.global.L2::128B",
                                  "cp.async.cg.shared.global.L2::256B", "cp.async.ca.L2::64B.shared::cta.global"])
def test_cp_async_src_size_reads_only_src_size_bytes(form):
    """PTX ISA cp.async: src-size bytes come from the source and cp-size - src-size zeros follow; src-size 0
    reads nothing, so its source address may lie outside every buffer; bytes past src-size are not read
    (lane 3: 8 bytes at offset 48 of a 56-byte buffer).  The prefetch-size hints change nothing."""
    report, src, out = run_cp_async(form, ", %r2", [0, 16, FAR, 48], [16, 5, 0, 8])
    assert report.ok, report.findings[:3]
    want = np.zeros((4, 16), np.uint8)
    want[0], want[1, :5], want[3, :8] = src[:16], src[16:21], src[48:56]
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("offs,sizes,message", [([0, 16, FAR, 48], [16, 5, 1, 8], "outside every global buffer"),
                                                ([0, 16, 32, 48], [16, 5, 0, 16], "outside every global buffer"),
                                                ([0, 16, 32, 48], [16, 17, 0, 8], "above its cp-size")])
def test_cp_async_reading_bytes_outside_or_src_size_above_cp_size_is_a_finding(offs, sizes, message):
    report, _, _ = run_cp_async("cp.async.cg.shared.global", ", %r2", offs, sizes)
    assert [f.kind for f in report.findings][:1] == ["BadAccess"] and message in str(report.findings[0])


def test_cp_async_ignore_src_and_cache_policy():
    """PTX ISA cp.async: with ignore-src true zeros are written and the source is not read; the
    ``.L2::cache_hint`` cache-policy operand (from createpolicy) is only a hint."""
    pre = "    createpolicy.fractional.L2::evict_first.b64 %rd20, 1.0;"
    form = "cp.async.cg.shared.global.L2::cache_hint"
    report, src, out = run_cp_async(form, ", %p1, %rd20", [0, FAR, 32, FAR], [0, 1, 0, 1], pre)
    assert report.ok, report.findings[:3]
    want = np.zeros((4, 16), np.uint8)
    want[0], want[2] = src[:16], src[32:48]
    np.testing.assert_array_equal(out, want)
    report, _, _ = run_cp_async(form, ", %p1, %rd20", [0, FAR, 32, FAR], [0, 0, 0, 1], pre)
    assert report.findings[0].kind == "BadAccess" and "outside every global buffer" in str(report.findings[0])


# --- ld / st hints, prefetch, createpolicy, nanosleep, griddepcontrol --------------------------------------

HINTED = """
    createpolicy.fractional.L2::evict_last.L2::evict_unchanged.b64 %rd20, 0.5;
    createpolicy.fractional.L2::evict_normal.b64 %rd21;
    createpolicy.range.global.L2::evict_last.L2::evict_first.b64 %rd22, [%rd0], 64, 128;
    createpolicy.cvt.L2.b64 %rd23, %rd22;
    griddepcontrol.wait;
    mul.wide.u32 %rd4, %r0, 16;
    add.s64 %rd5, %rd0, %rd4;
    add.s64 %rd6, %rd1, %rd4;
    prefetch.global.L2 [%rd5];
    prefetch.global.L2::evict_last [%rd5];
    prefetch.L1 [%rd5];
    prefetchu.L1 [%rd5];
    prefetch.global.L2 [%rd5+1048576];
    nanosleep.u32 100;
    ld.global.L1::evict_last.L2::256B.b32 %r1, [%rd5];
    ld.global.nc.L1::no_allocate.L2::cache_hint.v2.b32 {%r2, %r3}, [%rd5+8], %rd20;
    ld.global.L2::cache_hint.b32 %r4, [%rd5+4], %rd23;
    add.u32 %r1, %r1, 1;
    st.global.L1::evict_first.b32 [%rd6], %r1;
    st.global.L1::no_allocate.L2::cache_hint.v2.b32 [%rd6+8], {%r2, %r3}, %rd21;
    griddepcontrol.launch_dependents;
    st.global.L2::cache_hint.b32 [%rd6+4], %r4, %rd22;
"""


def test_hints_prefetch_createpolicy_nanosleep_griddepcontrol():
    """Cache and eviction hints, cache policies, prefetches (even of an address outside every buffer: no
    value is read), nanosleep and griddepcontrol (one launch: nothing to wait for) leave the values: out =
    in, plus 1 in word 0 of each row."""
    ptx = module(HINTED, 2, "sm_90a")
    assemble(ptx, "sm_90a")
    x = np.arange(64 * 4, dtype=np.uint32).reshape(64, 4)
    out = np.zeros_like(x)
    report = E.run_ptx(ptx, [launch(2, threads=64)], x, out, interleavings=2)
    assert report.ok, report.findings[:3]
    want = x.copy()
    want[:, 0] += 1
    np.testing.assert_array_equal(out, want)


TMA_HINTED = """.version 8.7
.target sm_90a
.address_size 64
.visible .entry k(
    .param .align 64 .b8 k_param_0[128],
    .param .u64 k_param_1
)
{
    .reg .pred %p<4>;
    .reg .b32 %r<40>;
    .reg .b64 %rd<24>;
    .shared .align 1024 .b8 tbuf[128];
    .shared .align 8 .b64 mbar;
    ld.param.u64 %rd1, [k_param_1];
    mov.b64 %rd10, k_param_0;
    cvta.param.u64 %rd11, %rd10;
    mov.u32 %r0, %tid.x;
    mov.u32 %r30, mbar;
    mov.u32 %r20, tbuf;
    setp.ne.u32 %p1, %r0, 0;
    @%p1 bra $SKIP;
    mbarrier.init.shared.b64 [%r30], 1;
    fence.mbarrier_init.release.cluster;
$SKIP:
    bar.sync 0;
    @%p1 bra $WAIT;
    createpolicy.fractional.L2::evict_first.b64 %rd20, 1.0;
    mbarrier.arrive.expect_tx.shared.b64 _, [%r30], 128;
    mov.u32 %r32, 16;
    mov.u32 %r33, 10;
    cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%r20], [%rd11, {%r32, %r33}], [%r30], %rd20;
$WAIT:
    mbarrier.try_wait.parity.shared.b64 %p2, [%r30], 0;
    @!%p2 bra $WAIT;
    shl.b32 %r21, %r0, 2;
    add.u32 %r22, %r20, %r21;
    ld.shared.u32 %r3, [%r22];
    mul.wide.u32 %rd3, %r0, 4;
    add.s64 %rd4, %rd1, %rd3;
    st.global.u32 [%rd4], %r3;
    ret;
}
"""


def test_tma_load_with_an_l2_cache_hint():
    """CUTLASS's SM90_TMA_LOAD writes ``cp.async.bulk.tensor...mbarrier::complete_tx::bytes.L2::cache_hint``
    with a cache-policy operand (PTX ISA cp.async.bulk.tensor): the hint changes nothing.  An 8 x 4 box of a
    float32 12 x 20 tensor at (16, 10), half outside (zero fill)."""
    assemble(TMA_HINTED, "sm_90a")
    tensor = np.random.default_rng(3).standard_normal((12, 20)).astype(np.float32)
    tm = E.TensorMap("float32", 2, (0, 0), (20, 12), (80,), (8, 4), (1, 1), 0, 0, 0, 0)
    out = np.zeros((4, 8), np.float32)
    report = E.run_ptx(TMA_HINTED, [E.Launch("k", (1, 1, 1), (32, 1, 1), 0, (("tensormap", tm), ("buffer", 1, 0)))],
                       tensor, out, interleavings=2)
    assert report.ok, report.findings[:3]
    want = np.zeros((4, 8), np.float32)
    want[:2, :4] = tensor[10:12, 16:20]
    np.testing.assert_array_equal(out, want)


def test_a_legal_mma_form_without_a_handler_is_refused_with_its_line():
    """m16n8k4 tf32 is legal PTX (ptxas assembles it) but not emulated: a one-line EmulationError."""
    ptx = assemble(module(mma_kernel("mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32", 2, 1, 4), 4, "sm_80"),
                   "sm_80")
    line = next(i for i, ln in enumerate(ptx.splitlines(), 1) if "mma.sync" in ln)
    with pytest.raises(E.EmulationError, match=rf"mma\.sync\.aligned\.m16n8k4\.row\.col\.f32\.tf32\.tf32\.f32 at PTX "
                       rf"line {line}$"):
        E.run_ptx(ptx, [launch(4)], *[np.zeros((32, n), np.uint32) for n in (2, 1, 4, 4)])
