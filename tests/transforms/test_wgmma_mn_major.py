"""The MN-major B operand of ``wgmma_fragment_intrinsics(n)["mma_mn_b"]`` (O += P V in the wgmma attention
kernel: V[key, d] is N-contiguous) against CuTe: the layout atom as the installed CuTe header defines it
(``Layout_MN_INTER_Atom``), tiled to an N x 16 operand with pycute's layout algebra, and the descriptor
fields ``make_gmma_desc<Major::MN>`` reads from it for an INTERLEAVE layout (SBO: the stride of the
core-matrix mode of N, LBO: of K).  What is compared is the registered intrinsic itself: the indices its
description reads B at, the descriptor its implementation encodes, and its imm-trans-b; and, as a third
party, the emulator's decoding of that descriptor.  Runs on a CPU (no nvcc).
"""
import importlib.util
import re
from pathlib import Path

import pytest

tvm = pytest.importorskip("tvm")
import pycute  # a test dependency (nvidia-cutlass): a missing one fails here, it does not skip  # noqa: E402

from tvm_twill.emulator import encodings as EE  # noqa: E402
from tvm_twill.frontend.ir import eval_int, tvm_ffi  # noqa: E402
from tvm_twill.kernels.wgmma_intrinsics import (mn_major_lbo_sbo, mn_major_offset,  # noqa: E402
                                                   wgmma_fragment_intrinsics)

NS = [16, 64, 128, 256]


def _cute_mn_inter_atom_fp16() -> pycute.Layout:
    """``Layout_MN_INTER_Atom<half_t>`` read from the installed CuTe header: the bit layout
    ``Layout_MN_INTER_Atom_Bits`` upcast to 16-bit elements (CuTe's ``upcast<16>``: the unit-stride mode's
    shape and every other stride divided by 16)."""
    spec = importlib.util.find_spec("cutlass_library")
    assert spec is not None and spec.origin, "the nvidia-cutlass wheel is missing (a test dependency)"
    header = Path(spec.origin).parent / "source" / "include" / "cute" / "atom" / "mma_traits_sm90_gmma.hpp"
    text = header.read_text()
    m = re.search(r"using Layout_MN_INTER_Atom_Bits\s*=.*?Layout<Shape<\s*_(\d+)\s*,\s*_(\d+)\s*>\s*,"
                  r"\s*Stride<\s*_(\d+)\s*,\s*_(\d+)\s*>>", text)
    assert m, f"Layout_MN_INTER_Atom_Bits not found in {header}"
    shape, stride = (int(m.group(1)), int(m.group(2))), (int(m.group(3)), int(m.group(4)))
    assert stride[0] == 1  # MN-major: the first (MN) mode is the contiguous one
    return pycute.Layout((shape[0] // 16, shape[1]), (1, stride[1] // 16))


def _cute_tile(n: int) -> pycute.Layout:
    """``tile_to_shape(Layout_MN_INTER_Atom<half_t>, (n, 16))``: the atom repeated column-major over the
    (n / 8, 16 / 8) tiles, as pycute's logical product; mode 0 is the atom, mode 1 the tile."""
    atom = _cute_mn_inter_atom_fp16()
    assert pycute.size(atom) == 64 and atom.shape == (8, 8)
    return pycute.logical_product(atom, pycute.Layout((n // 8, 16 // 8)))


def _cute_offset(tile, n, k):
    return tile(((n % 8, k % 8), (n // 8, k // 8)))


@pytest.mark.parametrize("n", NS)
def test_mn_major_tile_is_cutes_interleave_layout(n):
    tile = _cute_tile(n)
    assert pycute.cosize(tile) == 16 * n  # a dense n x 16 tile
    for nn in range(n):
        for k in range(16):
            assert mn_major_offset(nn, k, n) == _cute_offset(tile, nn, k), (nn, k)
    # make_gmma_desc<Major::MN>, INTERLEAVE: SBO = stride of the N core-matrix mode, LBO = of the K one
    (_, (sbo_elems, lbo_elems)) = tile.stride
    assert mn_major_lbo_sbo(n) == (2 * lbo_elems, 2 * sbo_elems) == (16 * n, 128)


def _b_indices(desc):
    """The index expressions the description reads B at, and its iteration variables (vi, vj, vk)."""
    loads = []
    tvm_ffi.structural_walk(desc.body, [(tvm.ir.expr.TensorLoad, lambda ld: loads.append(ld)
                                         if ld.source.name == "B" else None)])
    blocks = []
    tvm_ffi.structural_walk(desc.body, [(tvm.s_tir.SBlock, lambda b: blocks.append(b) if b.name_hint == "C"
                                         else None)])
    (block,) = blocks
    return loads[0], [iv.var for iv in block.iter_vars]


@pytest.mark.parametrize("n", [64, 128])
def test_the_registered_intrinsic_reads_and_describes_that_layout(n):
    ti = tvm.s_tir.TensorIntrin.get(wgmma_fragment_intrinsics(n)["mma_mn_b"])
    load, (vi, vj, vk) = _b_indices(ti.desc)
    shape = [int(x) for x in load.source.shape]
    assert shape == [2, n // 8, 8, 8]
    strides = [shape[1] * 64, 64, 8, 1]  # the compact B tile the descriptor's start address names
    tile = _cute_tile(n)
    for nn in range(0, n, 3):
        for k in range(16):
            idx = [eval_int(e, [(vi, 0), (vj, nn), (vk, k)]) for e in load.indices]
            assert sum(i * s for i, s in zip(idx, strides)) == _cute_offset(tile, nn, k), (nn, k, idx)
    # the implementation's B descriptor: LBO and SBO in 16-byte units, no swizzle; imm-trans-b = 1
    calls = []
    tvm_ffi.structural_walk(ti.impl.body, [(tvm.ir.expr.Call, lambda c: calls.append(c))])
    enc = [c for c in calls if c.op.name == "tirx.cuda.wgmma_encode_matrix_descriptor"]
    lbo, sbo = mn_major_lbo_sbo(n)
    assert [int(a) for a in enc[1].args[2:5]] == [lbo >> 4, sbo >> 4, 0]
    (mma,) = [c for c in calls if c.op.name.startswith("tirx.ptx.wgmma_f16")]
    at = [i for i, a in enumerate(mma.args) if str(a).strip('"') == "mma_async"][0]
    scale_d, scale_a, scale_b, trans_a, trans_b = (int(a) for a in mma.args[at - 5:at])
    assert (scale_a, scale_b, trans_a, trans_b) == (1, 1, 0, 1)
    assert f"m64n{n}k16" in [str(a).strip('"') for a in mma.args]
    # the emulator, decoding that descriptor as an MN-major operand, reads each element where CuTe put it
    desc = EE.encode_wgmma_desc(0, lbo, sbo, 0, 0)
    for nn in range(n):
        for k in range(16):
            assert EE.wgmma_operand_address(desc, nn, k, k_major=False) == 2 * _cute_offset(tile, nn, k)


def test_the_k_major_intrinsic_is_unchanged():
    from tvm_twill.kernels.wgmma_intrinsics import wgmma_intrinsics
    ti = tvm.s_tir.TensorIntrin.get(wgmma_intrinsics(64)["mma"])
    load, (vi, vj, vk) = _b_indices(ti.desc)
    idx = [eval_int(e, [(vi, 0), (vj, 9), (vk, 11)]) for e in load.indices]
    assert idx == [1, 1, 1, 3]  # [k // 8, n // 8, n % 8, k % 8]: K-major


def test_a_bad_n_is_refused():
    from tvm_twill.errors import InputError
    with pytest.raises(InputError, match="wgmma N must be a multiple of 8 in \\[8, 256\\], got 12"):
        wgmma_fragment_intrinsics(12)
