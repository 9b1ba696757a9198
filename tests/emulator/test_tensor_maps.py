"""Tensor-map box addressing, out-of-bounds fill and encode checks against an outside reference: the
argument lists of TVM's own Hopper codegen tests (apache/tvm, tests/python/tirx/codegen/
test_codegen_hopper.py, the 0.27 development line) decoded with the emulator's tensor-map code, against
expectations derived by hand from the CUDA driver API's description of ``cuTensorMapEncodeTiled``.

The rules the expectations use (stated here in our words, written independently of the emulator):

* every array is innermost dimension first; ``globalDim`` and ``boxDim`` count elements;
* ``globalStrides`` has rank - 1 entries, the byte distance between consecutive indices of dimensions
  1, 2, ...; dimension 0 is contiguous;
* a copy's coordinates are signed element indices of the box's first element; box element (j0, j1, ..)
  is global element (c0 + j0, c1 + j1, ..) (element strides 1, as in every list TVM's tests pass);
* the box is dense in shared memory, innermost first; with a swizzle of span S (32, 64, 128 bytes)
  the 16-byte chunk of each byte address is XORed with the address's 128-byte row number mod S / 16;
* an element with a coordinate outside [0, globalDim) reads as zero (``FLOAT_OOB_FILL_NONE``) or as NaN
  (``FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA``); a tensor store skips it.
"""
import itertools

import numpy as np
import pytest

from tvm_twill.emulator import tensormap as TM
from tvm_twill.errors import InputError

ESIZE = {"uint8": 1, "float16": 2, "float32": 4, "float8_e4m3fn": 1}


def _unicast_args(shape, args, esize):
    """test_cp_async_bulk_tensor_global_to_shared_unicast: its lists give strides in elements and the test
    multiplies them by the element size (``tma_args_copy``)."""
    out = list(args)
    for i in range(len(shape) - 1):
        out[len(shape) + i] *= esize
    return out


def _swizzle_args(swizzle, esize):
    """test_cp_async_bulk_tensor_global_to_shared_swizzle: 8 rows of 16 B scaled to the swizzle span."""
    args = [16, 64, 16, 16, 64, 1, 1, 0, 0, 0, 0]
    args[0] = args[0] * (1 << swizzle) // esize
    args[2] = args[2] * (1 << swizzle)
    args[3] = args[3] * (1 << swizzle) // esize
    args[-3] = swizzle
    return args


UNICAST = [((128,), [128, 128, 1, 0, 0, 0, 0]), ((16, 16), [16, 16, 16, 16, 16, 1, 1, 0, 0, 0, 0]),
           ((16, 64), [64, 16, 64, 64, 16, 1, 1, 0, 0, 0, 0])]
# (rank, args, box coordinates) from test_cp_async_bulk_tensor_global_to_shared_multicast1/2 and
# test_cp_async_bulk_tensor_shared_to_global (float32; strides already in bytes)
FLOAT32_LISTS = [
    (3, [4, 4, 4, 16, 64, 4, 4, 4, 1, 1, 1, 0, 0, 0, 0], [(0, 0, 0)]),
    (4, [4, 4, 4, 4, 16, 64, 256, 4, 4, 4, 4, 1, 1, 1, 1, 0, 0, 0, 0], [(0, 0, 0, 0)]),
    (5, [4, 2, 2, 2, 2, 16, 32, 64, 128, 4, 2, 2, 2, 2, 1, 1, 1, 1, 1, 0, 0, 0, 0], [(0,) * 5]),
    (1, [128, 32, 1, 0, 0, 0, 0], [(0,), (32,), (64,), (96,)]),
    (2, [16, 16, 64, 16, 4, 1, 1, 0, 0, 0, 0], [(0, 0), (0, 4), (0, 8), (0, 12)]),
    (3, [16, 16, 4, 64, 64 * 16, 16, 16, 1, 1, 1, 1, 0, 0, 0, 0], [(0, 0, 0), (0, 0, 1), (0, 0, 2), (0, 0, 3)]),
    (3, [16, 16, 4, 64, 64 * 16, 16, 16, 4, 1, 1, 1, 0, 0, 0, 0], [(0, 0, 0)]),
]


def _by_hand(dims, strides, box, coords, esize):
    """(byte offset from the map's address, inside?) of each box element in shared order, from the rules."""
    offs, inside = [], []
    for j in itertools.product(*[range(b) for b in reversed(box)]):    # outermost varies slowest
        j = j[::-1]                                                    # innermost first
        g = [c + jj for c, jj in zip(coords, j)]
        inside.append(all(0 <= gi < d for gi, d in zip(g, dims)))
        offs.append(g[0] * esize + sum(gi * s for gi, s in zip(g[1:], strides)))
    return np.array(offs), np.array(inside)


def _decode(dtype, rank, args):
    return TM.from_encode_args(dtype, rank, (0, 0), args)


def _check_box(tm, coords):
    esize = ESIZE[tm.dtype]
    want_off, want_in = _by_hand(tm.dims, tm.strides, tm.box, coords, esize)
    off, inside = TM.box_elements(tm, coords)
    np.testing.assert_array_equal(inside, want_in)
    np.testing.assert_array_equal(off[inside], want_off[want_in])


@pytest.mark.parametrize("dtype", ["float16", "float32", "float8_e4m3fn"])
@pytest.mark.parametrize("case", range(len(UNICAST)))
def test_tvms_unicast_lists_decode_to_the_documented_box(dtype, case):
    shape, args = UNICAST[case]
    tm = _decode(dtype, len(shape), _unicast_args(shape, args, ESIZE[dtype]))
    assert tm.dims == tuple(reversed(shape)) and tm.box == tm.dims and tm.swizzle == 0 and tm.oob_fill == 0
    _check_box(tm, (0,) * len(shape))
    # the whole tensor, row-major: shared element k is global element k
    off, inside = TM.box_elements(tm, (0,) * len(shape))
    assert inside.all() and (off == np.arange(int(np.prod(shape))) * ESIZE[dtype]).all()


@pytest.mark.parametrize("case", range(len(FLOAT32_LISTS)))
def test_tvms_float32_lists_decode_to_the_documented_box(case):
    rank, args, coord_list = FLOAT32_LISTS[case]
    tm = _decode("float32", rank, args)
    for coords in coord_list:
        _check_box(tm, coords)


def _swizzled(addr, span):
    """The chunk rule: 16-byte chunk ^= (128-byte row) mod (span / 16)."""
    return addr ^ (((addr >> 7) & (span // 16 - 1)) << 4)


@pytest.mark.parametrize("swizzle", [1, 2, 3])
@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32"])
def test_tvms_swizzle_lists_place_each_element_where_the_chunk_rule_puts_it(swizzle, dtype):
    from tvm_twill.emulator.encodings import tma_swizzle
    esize = ESIZE[dtype]
    tm = _decode(dtype, 2, _swizzle_args(swizzle, esize))
    span = {1: 32, 2: 64, 3: 128}[swizzle]
    assert tm.box[0] * esize == span and tm.swizzle == swizzle
    off, inside = TM.box_elements(tm, (0, 0))
    assert inside.all()
    dense = np.arange(off.size) * esize
    got = tma_swizzle(tm.swizzle)(dense)
    np.testing.assert_array_equal(got, _swizzled(dense, span))
    # TVM's test reads element i of the tensor back at shared element Swizzle<swizzle, log2(16 / esize), 3>(i)
    m = int(np.log2(16 // esize))
    i = off // esize
    tvm_pos = i ^ ((i >> (m + 3)) & ((1 << swizzle) - 1)) << m
    np.testing.assert_array_equal(got // esize, tvm_pos)


EDGE = [(-3, 0), (20, 0), (0, 30), (20, 30), (-5, -2), (24, 40), (30, 50)]


@pytest.mark.parametrize("coords", EDGE)
def test_partial_boxes_at_the_edges_are_out_of_bounds_where_documented(coords):
    """A 40 x 24 fp16 tensor (dims innermost first 24, 40; 48-byte rows padded to 64), a 16 x 8 box."""
    tm = _decode("float16", 2, [24, 40, 64, 8, 16, 1, 1, 0, 0, 0, 0])
    _check_box(tm, coords)
    _, inside = TM.box_elements(tm, coords)
    rows = np.arange(16)[:, None] + coords[1]
    cols = np.arange(8)[None, :] + coords[0]
    np.testing.assert_array_equal(inside.reshape(16, 8), (rows >= 0) & (rows < 40) & (cols >= 0) & (cols < 24))


@pytest.mark.parametrize("dtype,fill", [("float16", 0), ("float16", 1), ("float32", 1), ("bfloat16", 1),
                                        ("int32", 0), ("uint8", 0)])
def test_out_of_bounds_fill_is_zero_or_a_nan_of_the_type(dtype, fill):
    tm = _decode(dtype, 1, [64, 16, 1, 0, 0, 0, fill])
    esize = {"float16": 2, "bfloat16": 2, "float32": 4, "int32": 4, "uint8": 1}[dtype]
    b = TM.fill_bytes(tm, 5)
    assert b.size == 5 * esize
    if fill == 0:
        assert not b.any()
    elif dtype == "bfloat16":
        h = b.view(np.uint16).astype(np.uint32) << 16
        assert np.isnan(h.view(np.float32)).all()
    else:
        assert np.isnan(b.view({"float16": np.float16, "float32": np.float32}[dtype])).all()


# test_tensormap_encode_tiled_runtime_validation: what TVM's runtime.cuTensorMapEncodeTiled refuses, with the
# message it refuses with; the emulator stands in for that call, so it must refuse the same maps
VALIDATION = [
    ((16, 16), "float16", [0, 16, 32, 16, 16, 1, 1, 0, 0, 0, 0], r"globalDim\[0\] must be non-zero"),
    ((16, 16), "float16", [(1 << 32) + 1, 16, 32, 16, 16, 1, 1, 0, 0, 0, 0],
     r"globalDim\[0\] must be less than or equal to 2\^32"),
    ((16, 16), "float16", [16, 16, 1 << 40, 16, 16, 1, 1, 0, 0, 0, 0], r"globalStrides\[0\] must be less than 2\^40"),
    ((16, 16), "float16", [16, 16, 32, 0, 16, 1, 1, 0, 0, 0, 0], r"boxDim\[0\] must be non-zero"),
    ((16, 16), "float16", [16, 16, 32, 7, 16, 1, 1, 0, 0, 0, 0],
     r"boxDim\[0\] \* elementSizeInBytes\(tensorDataType\) must be a multiple of 16 bytes"),
    ((16, 16), "float16", [16, 16, 32, 16, 16, 0, 1, 0, 0, 0, 0], r"elementStrides\[0\] must be non-zero"),
    ((16, 16), "float16", [16, 16, 32, 16, 16, 9, 1, 0, 0, 0, 0],
     r"elementStrides\[0\] must be less than or equal to 8"),
    ((16, 16), "float16", [16, 16, 32, 16, 16, 2, 1, 0, 0, 0, 0], r"elementStrides\[0\] must be one"),
    ((16, 16), "float16", [16, 16, 32, 16, 16, 1, 1, 2, 0, 0, 0],
     r"tensorRank must be greater than or equal to 3 when interleave is not NONE"),
    ((8, 8, 8), "float16", [8, 8, 8, 16, 128, 8, 8, 8, 1, 1, 1, 2, 1, 0, 0],
     r"globalStrides\[0\] must be a multiple of 32"),
    ((8, 8, 8), "float16", [8, 8, 8, 32, 256, 8, 8, 8, 1, 1, 1, 2, 2, 0, 0],
     r"CU_TENSOR_MAP_INTERLEAVE_32B requires CU_TENSOR_MAP_SWIZZLE_32B"),
    ((16, 16), "int32", [16, 16, 64, 4, 16, 1, 1, 0, 0, 0, 1],
     r"CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA requires a floating-point tensorDataType"),
    ((16, 16), "float32", [16, 16, 64, 4, 16, 1, 1, 0, 0, 0, 0, 7],
     r"force_cu_dtype only supports CU_TENSOR_MAP_DATA_TYPE_TFLOAT32"),
    ((16, 16), "float16", [16, 16, 32, 8, 16, 1, 1, 0, 0, 0, 0, 11],
     r"CU_TENSOR_MAP_DATA_TYPE_TFLOAT32 requires a scalar float32"),
]


@pytest.mark.parametrize("case", range(len(VALIDATION)))
def test_the_encodes_tvms_runtime_refuses_are_refused(case):
    shape, dtype, args, message = VALIDATION[case]
    with pytest.raises(InputError, match=message):
        _decode(dtype, len(shape), args)


def test_swizzle_span_bounds_the_inner_box_and_counts_are_checked():
    with pytest.raises(InputError, match=r"SWIZZLE_64B implies the bounding box inner dimension will be <= 64"):
        _decode("float16", 2, [64, 64, 128, 64, 8, 1, 1, 0, 2, 0, 0])
    with pytest.raises(InputError, match=r"expects 11 \(or \+1 force_cu_dtype\) fields after the address for rank 2"):
        _decode("float16", 2, [64, 64, 128, 64, 8, 1, 1, 0, 2, 0])
    with pytest.raises(InputError, match="does not model the tf32 rounding"):
        _decode("float32", 2, [16, 16, 64, 4, 16, 1, 1, 0, 0, 0, 0, 11])
    assert _decode("float32", 2, [16, 16, 64, 4, 16, 1, 1, 0, 0, 0, 0, -1]).box == (4, 16)


def test_element_strides_take_every_sth_element_of_the_box():
    """elementStrides (1, 2): ceil(16 / 2) = 8 rows of the 16-row box, rows c1, c1 + 2, ..., dense in shared."""
    tm = _decode("float16", 2, [16, 32, 32, 16, 16, 1, 2, 0, 0, 0, 0])
    assert TM.box_shape(tm) == (16, 8)
    off, inside = TM.box_elements(tm, (0, 20))
    rows = 20 + 2 * np.arange(8)
    np.testing.assert_array_equal(off.reshape(8, 16), rows[:, None] * 32 + np.arange(16)[None, :] * 2)
    np.testing.assert_array_equal(inside.reshape(8, 16), np.broadcast_to((rows < 32)[:, None], (8, 16)))
