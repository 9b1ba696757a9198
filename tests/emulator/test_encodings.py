"""tvm_twill.emulator.encodings against CuTe: pycute for the swizzles, CuTe's C++ headers for the rest.

The C++ side is ``cute_layouts.cu``: a host program that nvcc compiles against the CuTe headers of the
``nvidia-cutlass`` wheel (a test dependency) and that prints CuTe's own tables (the mma.sync and wgmma
fragment layouts, the ldmatrix copy traits, GmmaDescriptor, and where make_gmma_desc's canonical
layouts put each element); the binary is cached by the hash of the program, the CuTe version and nvcc's
version.  These tests never skip: without pycute, the headers or nvcc they fail, saying what to install.
"""
from __future__ import annotations

import hashlib
import importlib.util
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from tvm_twill.emulator import encodings as E
from tvm_twill.errors import InputError

HERE = Path(__file__).resolve().parent


def _cutlass_include() -> Path:
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or spec.origin is None:
        pytest.fail("the nvidia-cutlass wheel is missing: pip install -e '.[test]' (it ships CuTe's headers)")
    inc = Path(spec.origin).parent / "source" / "include"
    if not (inc / "cute" / "atom" / "mma_traits_sm90_gmma.hpp").is_file():
        pytest.fail(f"CuTe headers not found under {inc}: reinstall nvidia-cutlass (the test extra pins it)")
    return inc


def _cute_program(nvcc: str, tmp_path_factory) -> Path:
    """cute_layouts.cu compiled against the wheel's headers; the binary is kept under the PTX cache folder
    (``launch.cache_dir()``'s parent), keyed by the program, the CuTe version and nvcc's version."""
    import importlib.metadata

    from tvm_twill.emulator.launch import cache_dir

    inc = _cutlass_include()
    src = (HERE / "cute_layouts.cu").read_text()
    nvcc_version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False).stdout
    key = hashlib.sha256("\0".join((src, importlib.metadata.version("nvidia-cutlass"), nvcc_version)).encode())
    exe = cache_dir().parent / "cute" / f"cute_layouts_{key.hexdigest()[:24]}"
    if exe.is_file():
        return exe
    build = tmp_path_factory.mktemp("cute") / "cute_layouts"
    r = subprocess.run([nvcc, "-std=c++17", "-I", str(inc), "-o", str(build), str(HERE / "cute_layouts.cu")],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    exe.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(build, exe.with_suffix(".tmp"))
    exe.with_suffix(".tmp").replace(exe)
    return exe


@pytest.fixture(scope="module")
def cute(tmp_path_factory):
    """CuTe's tables, parsed: {"mma": {name: {(t, v): index}}, "ldsm": {(name, side): {(t, v): bit}},
    "gmmadesc": [(start, lbo, sbo, base, layout, desc)], "opdesc": {(name, kb): (start, lbo, sbo, layout)},
    "opaddr": {(name, kb): [(row, k, byte)]}}."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.fail("nvcc not found on PATH: the encoding tests compile CuTe's headers with it (install the "
                    "CUDA toolkit, or put its bin/ on PATH)")
    exe = _cute_program(nvcc, tmp_path_factory)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    tab = {"mma": defaultdict(dict), "ldsm": defaultdict(dict), "gmmadesc": [], "opdesc": {},
           "opaddr": defaultdict(list)}
    for line in out.splitlines():
        f = line.split()
        if f[0] == "mma":
            tab["mma"][f[1]][int(f[2]), int(f[3])] = int(f[4])
        elif f[0] == "ldsm":
            tab["ldsm"][f[1], f[2]][int(f[3]), int(f[4])] = int(f[5])
        elif f[0] == "gmmadesc":
            tab["gmmadesc"].append(tuple(int(x) for x in f[1:]))
        elif f[0] == "opdesc":
            tab["opdesc"][f[1], int(f[2])] = tuple(int(x) for x in f[3:])
        elif f[0] == "opaddr":
            tab["opaddr"][f[1], int(f[2])].append(tuple(int(x) for x in f[3:]))
    assert tab["mma"] and tab["ldsm"] and tab["gmmadesc"] and tab["opaddr"], out[:2000]
    return tab


# --- mma.sync and wgmma fragments ---------------------------------------------------------------------------

def test_mma_m16n8k16_fragments_are_cutes_sm80_traits(cute):
    layouts = cute["mma"]
    a, b, c = (layouts[f"sm80_16x8x16_f32f16f16f32_tn_{x}"] for x in "ABC")
    assert len(a) == 32 * 8 and len(b) == 32 * 4 and len(c) == 32 * 4
    for (t, v), idx in a.items():  # (M, K) = (16, 16), column-major
        assert E.mma_m16n8k16_a(t, v) == (idx % 16, idx // 16), (t, v)
    for (t, v), idx in b.items():  # (N, K) = (8, 16)
        assert E.mma_m16n8k16_b(t, v) == (idx // 8, idx % 8), (t, v)
    for (t, v), idx in c.items():  # (M, N) = (16, 8)
        assert E.mma_m16n8k16_c(t, v) == (idx % 16, idx // 16), (t, v)


@pytest.mark.parametrize("n", [64, 128])
def test_wgmma_accumulator_is_cutes_clayout_64xn(cute, n):
    c = cute["mma"][f"gmma_64x{n}x16_C"]
    assert len(c) == 128 * n // 2
    for (t, v), idx in c.items():  # (M, N) = (64, n)
        assert E.wgmma_c(t, v, n) == (idx % 64, idx // 64), (t, v)


def test_wgmma_register_a_is_cutes_alayout_64x16(cute):
    a = cute["mma"]["gmma_64x128x16_rs_A"]
    assert len(a) == 128 * 8
    for (t, v), idx in a.items():  # (M, K) = (64, 16)
        assert E.wgmma_a(t, v) == (idx % 64, idx // 64), (t, v)


def test_fragment_maps_take_numpy_arrays():
    lanes, i = np.meshgrid(np.arange(32), np.arange(8), indexing="ij")
    rows, cols = E.mma_m16n8k16_a(lanes, i)
    assert sorted(zip(rows.ravel().tolist(), cols.ravel().tolist())) == [(r, c) for r in range(16) for c in range(16)]


# --- ldmatrix -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_is_cutes_ldsm_copy_traits(cute, num, trans):
    name = f"x{num}" + ("_trans" if trans else "")
    src, dst = cute["ldsm"][name, "src"], cute["ldsm"][name, "dst"]
    row_of = {}  # bit of the copied tile -> (lane giving the row address, element in the row)
    for (t, v), bit in sorted(src.items()):
        if t < 8 * num and v % 16 == 0:
            row_of.setdefault(bit, (t, v // 16))
    assert len(row_of) == 8 * num * 8  # every 16-bit element of every row, from the lanes that give addresses
    checked = 0
    for (t, v), bit in dst.items():
        if v % 16:
            continue
        lane, col = row_of[bit]
        matrix, row, got_col = E.ldmatrix_source(num, trans, t, v // 32, (v % 32) // 16)
        assert (E.ldmatrix_row_lane(matrix, row), got_col) == (lane, col), (name, t, v)
        checked += 1
    assert checked == 32 * 2 * num  # two 16-bit halves of each destination register of each lane


def test_ldmatrix_count_is_checked():
    with pytest.raises(InputError, match=r"ldmatrix \.x3: the count is 1, 2 or 4"):
        E.ldmatrix_source(3, False, 0, 0, 0)
    with pytest.raises(InputError, match=r"ldmatrix \.x2 has registers 0\.\.1, not 2"):
        E.ldmatrix_source(2, True, 0, 2, 0)


# --- swizzles -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bits,base,shift", [(0, 4, 3), (1, 4, 3), (2, 4, 3), (3, 4, 3), (3, 3, 3), (2, 1, 5),
                                             (3, 4, -4), (1, 0, -2)])
def test_swizzle_is_pycutes(bits, base, shift):
    import pycute  # a test dependency (nvidia-cutlass): a missing one fails here, it does not skip

    ref = pycute.Swizzle(bits, base, shift)
    mine = E.swizzle(bits, base, shift)
    offsets = np.arange(1 << 14)
    assert [ref(int(o)) for o in offsets] == mine(offsets).tolist()
    assert (mine.yyy_mask, mine.zzz_mask) == (ref.yyy_msk, ref.zzz_msk)


@pytest.mark.parametrize("mode,span,bits", [(0, 0, 0), (1, 32, 1), (2, 64, 2), (3, 128, 3)])
def test_tma_and_wgmma_swizzle_modes_are_cutes_swizzle_b43(mode, span, bits):
    import pycute

    ref = pycute.Swizzle(bits, 4, 3)
    code = {0: 0, 32: 3, 64: 2, 128: 1}[span]  # the wgmma descriptor's layout code of the same pattern
    for a in range(0, 1 << 13, 16):
        assert E.tma_swizzle(mode)(a) == E.wgmma_swizzle(code)(a) == ref(a)
    if span:  # the PTX pattern: the 16-byte chunk in a 128-byte row ^= the row mod (span / 16)
        for a in range(0, 4 * 8 * span, 16):
            chunk, row = (a % 128) // 16, a // 128
            assert E.span_swizzle(span)(a) == a - a % 128 + ((chunk ^ (row % (span // 16))) * 16)


def test_bad_swizzles_are_refused():
    with pytest.raises(InputError, match=r"Swizzle<3, 4, 2>: need bits >= 0, base >= 0 and \|shift\| >= bits"):
        E.swizzle(3, 4, 2)
    with pytest.raises(InputError, match="tensor-map swizzle mode 4: use 0"):
        E.tma_swizzle(4)


# --- wgmma descriptors --------------------------------------------------------------------------------------

def test_descriptor_bits_are_cutes_gmma_descriptor(cute):
    assert len(cute["gmmadesc"]) == 4
    for start, lbo, sbo, base, layout, desc in cute["gmmadesc"]:
        assert E.encode_wgmma_desc(start, lbo, sbo, base, layout) == desc
        d = E.decode_wgmma_desc(desc)
        assert (d["start"], d["lbo"], d["sbo"], d["base_offset"], d["layout"]) == (start, lbo, sbo, base, layout)
        assert d["swizzle_bytes"] == {0: 0, 1: 128, 2: 64, 3: 32}[layout]


def test_operand_addresses_are_where_cutes_canonical_layouts_put_each_element(cute):
    """For each canonical GMMA tile (K-major and MN-major, no swizzle and 32/64/128-byte swizzles) and each
    16-wide K slice: the descriptor make_gmma_desc writes for the slice, read by wgmma_operand_address,
    gives the byte CuTe stores element (row, k) at."""
    assert len(cute["opdesc"]) == 26
    for (name, kb), (start, lbo, sbo, layout) in cute["opdesc"].items():
        desc = E.encode_wgmma_desc(start, lbo, sbo, 0, layout)
        cells = np.array(cute["opaddr"][name, kb])
        got = E.wgmma_operand_address(desc, cells[:, 0], cells[:, 1], k_major=name.startswith("k_"))
        bad = np.nonzero(got != cells[:, 2])[0]
        assert bad.size == 0, (name, kb, cells[bad[:3]].tolist(), got[bad[:3]].tolist())


def test_descriptor_misuse_is_refused():
    with pytest.raises(InputError, match="wgmma descriptor start = 8: a byte offset, a multiple of 16"):
        E.encode_wgmma_desc(8, 16, 1024)
    with pytest.raises(InputError, match="base_offset 3: only 0 is modelled"):
        E.wgmma_operand_address(E.encode_wgmma_desc(0, 16, 1024, 3, 1), 0, 0)
    with pytest.raises(InputError, match="wgmma N = 12: a multiple of 8"):
        E.wgmma_c(0, 0, 12)
