"""Tensor maps: the arguments of ``cuTensorMapEncodeTiled``, checked as the CUDA driver (and TVM's
``runtime.cuTensorMapEncodeTiled`` wrapper, which the emulator stands in for) checks them, and the box a
tile-mode bulk tensor copy moves.

The rules, from the CUDA driver API's description of ``cuTensorMapEncodeTiled`` and the PTX ISA's tensor
copies, in our words:

* Dimensions are listed innermost first.  ``globalDim[i]`` counts elements (1 .. 2^32).
  ``globalStrides`` has ``rank - 1`` entries, for dimensions 1 .. rank-1, in *bytes* (multiples of 16,
  below 2^40; multiples of 32 with 32-byte interleave); dimension 0 is contiguous (stride = element size).
* ``boxDim[i]`` (1 .. 256) is the box's extent in elements; with no interleave ``boxDim[0] * element size``
  is a multiple of 16 bytes.  ``elementStrides[i]`` (1 .. 8) is the traversal step inside the box along
  dimension i: the copy takes ``ceil(boxDim[i] / elementStrides[i])`` elements, those at box positions
  0, s, 2s, ...  Dimension 0 has no stride in tile mode (TVM's wrapper requires 1).
* A copy names the box's first element by signed element coordinates (innermost first).  Element
  (j0, j1, ...) of the box is global element (c0 + j0 s0, c1 + j1 s1, ...) at byte
  ``address + (c0 + j0 s0) * esize + sum_{i>=1} (ci + ji si) * globalStrides[i-1]``.
  In shared memory the box is dense, innermost first: element (j0, j1, ...) sits at byte
  ``esize * (j0 + n0 (j1 + n1 (j2 + ...)))`` from the destination (n_i the taken extents), then the
  byte address is swizzled by the map's mode (32 / 64 / 128 B: ``encodings.tma_swizzle``); the swizzle
  bounds the box's inner row: ``boxDim[0] * esize`` is at most the span.
* An element with any coordinate outside ``0 .. globalDim[i]-1`` is out of bounds: a load writes zero
  there (``CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE``) or a NaN (``..._NAN_REQUEST_ZERO_FMA``, float types only);
  a store skips it.  The transaction count of a load is the full box.
* ``l2Promotion`` is a cache hint (no effect here); interleaved layouts are checked but not emulated.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError

#: TVM dtype -> (bytes, floating point?) as TVM's wrapper maps dtypes onto ``CUtensorMapDataType``
#: (fp8 travels as UINT8, so it is not a float type for the NaN fill).
DTYPES = {"uint8": (1, False), "int8": (1, False), "float8_e4m3fn": (1, False), "float8_e5m2": (1, False),
          "uint16": (2, False), "float16": (2, True), "bfloat16": (2, True), "uint32": (4, False),
          "int32": (4, False), "float32": (4, True), "uint64": (8, False), "int64": (8, False),
          "float64": (8, True)}
#: The NaN an out-of-bounds element reads as under ``..._NAN_REQUEST_ZERO_FMA`` (any NaN: the canonical one).
NAN_BYTES = {"float16": np.uint16(0x7FFF), "bfloat16": np.uint16(0x7FFF), "float32": np.uint32(0x7FFFFFFF),
             "float64": np.uint64(0x7FFF_FFFF_FFFF_FFFF)}
SWIZZLE_SPAN = {0: None, 1: 32, 2: 64, 3: 128}
OOB_FILL_NONE, OOB_FILL_NAN = 0, 1
TFLOAT32 = 11


@dataclass(frozen=True)
class TensorMap:
    """The arguments of one host call to ``cuTensorMapEncodeTiled`` (a ``CUtensorMap`` kernel parameter):
    ``buffer``: (arg_index, byte_offset) of its global address; dims, byte strides (dims 1..rank-1), box
    and element strides innermost first; the enum values of interleave, swizzle (0 none, 1 32B, 2 64B,
    3 128B), L2 promotion and out-of-bounds fill; ``dtype`` the TVM dtype string."""

    dtype: str
    rank: int
    buffer: tuple[int, int]
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    element_strides: tuple[int, ...]
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int


def from_encode_args(dtype: str, rank: int, buffer: tuple[int, int], fields) -> TensorMap:
    """The map that ``runtime.cuTensorMapEncodeTiled(map, dtype, rank, address, *fields)`` encodes, with
    ``fields`` = dims (rank), byte strides (rank - 1), box (rank), element strides (rank), interleave,
    swizzle, L2 promotion, OOB fill [, force_cu_dtype]; ``buffer`` = (argument index, byte offset) of the
    address.  Raises ``InputError`` where CUDA (or TVM's wrapper) would refuse the encode."""
    rank = int(rank)
    if not 1 <= rank <= 5:
        raise InputError(f"cuTensorMapEncodeTiled: tensorRank {rank} must be 1..5")
    f = [int(x) for x in fields]
    base = 4 * rank + 3
    if len(f) not in (base, base + 1):
        raise InputError(f"cuTensorMapEncodeTiled expects {base} (or +1 force_cu_dtype) fields after the address "
                         f"for rank {rank}, got {len(f)}: dims, strides, box, element strides and four enums")
    dims, strides = f[:rank], f[rank:2 * rank - 1]
    box, estrides = f[2 * rank - 1:3 * rank - 1], f[3 * rank - 1:4 * rank - 1]
    interleave, swizzle, l2, oob = f[4 * rank - 1:4 * rank + 3]
    force = f[base] if len(f) > base else -1
    tm = TensorMap(str(dtype), rank, (int(buffer[0]), int(buffer[1])), tuple(dims), tuple(strides), tuple(box),
                   tuple(estrides), interleave, swizzle, l2, oob)
    check(tm, force)
    if force == TFLOAT32:
        raise InputError("cuTensorMapEncodeTiled with force_cu_dtype TFLOAT32: the emulator does not model the "
                         "tf32 rounding of such loads; encode the map as float32")
    return tm


def _fields_ok(tm: TensorMap) -> None:
    for i, d in enumerate(tm.dims):
        _need(d > 0, f"globalDim[{i}] must be non-zero")
        _need(d <= 1 << 32, f"globalDim[{i}] must be less than or equal to 2^32")
    for i, s in enumerate(tm.strides):
        _need(s >= 0 and s % 16 == 0, f"globalStrides[{i}] must be a multiple of 16")
        _need(s < 1 << 40, f"globalStrides[{i}] must be less than 2^40")
    for i, b in enumerate(tm.box):
        _need(b > 0, f"boxDim[{i}] must be non-zero")
        _need(b <= 256, f"boxDim[{i}] must be less than or equal to 256")
    for i, e in enumerate(tm.element_strides):
        _need(e > 0, f"elementStrides[{i}] must be non-zero")
        _need(e <= 8, f"elementStrides[{i}] must be less than or equal to 8")


def check(tm: TensorMap, force_cu_dtype: int = -1) -> None:
    """Raise ``InputError`` naming the first rule of the driver's (and TVM's wrapper's) that ``tm`` breaks, in
    the order TVM's wrapper checks them."""
    _fields_ok(tm)
    _need(force_cu_dtype in (-1, TFLOAT32), "force_cu_dtype only supports CU_TENSOR_MAP_DATA_TYPE_TFLOAT32 (11)")
    _need(force_cu_dtype != TFLOAT32 or tm.dtype == "float32",
          "CU_TENSOR_MAP_DATA_TYPE_TFLOAT32 requires a scalar float32 tensor_dtype")
    _need(tm.dtype in DTYPES, f"tensor dtype {tm.dtype} has no CUtensorMapDataType")
    _need(tm.interleave in (0, 1, 2), f"Unsupported interleave enum value: {tm.interleave}")
    _need(tm.swizzle in SWIZZLE_SPAN, f"Unsupported swizzle enum value: {tm.swizzle} (0 none, 1 32B, 2 64B, 3 128B)")
    _need(tm.l2_promotion in (0, 1, 2, 3), f"Unsupported l2Promotion enum value: {tm.l2_promotion}")
    _need(tm.oob_fill in (OOB_FILL_NONE, OOB_FILL_NAN), f"Unsupported oobFill enum value: {tm.oob_fill}")
    _need(tm.buffer[1] % 16 == 0, "globalAddress must be 16-byte aligned")
    _need(tm.interleave == 0 or tm.rank >= 3,
          "tensorRank must be greater than or equal to 3 when interleave is not NONE")
    _need(tm.interleave != 2 or tm.swizzle == 1, "CU_TENSOR_MAP_INTERLEAVE_32B requires CU_TENSOR_MAP_SWIZZLE_32B")
    _need(tm.element_strides[0] == 1, "elementStrides[0] must be one: tile mode has no innermost element stride")
    if tm.interleave == 2:
        _need(tm.buffer[1] % 32 == 0, "globalAddress must be 32-byte aligned")
        for i, s in enumerate(tm.strides):
            _need(s % 32 == 0, f"globalStrides[{i}] must be a multiple of 32")
    esize, floating = DTYPES[tm.dtype]
    inner = tm.box[0] * esize
    if tm.interleave == 0:
        _need(inner % 16 == 0, "boxDim[0] * elementSizeInBytes(tensorDataType) must be a multiple of 16 bytes")
        span = SWIZZLE_SPAN[tm.swizzle]
        _need(span is None or inner <= span, f"CU_TENSOR_MAP_SWIZZLE_{span}B implies the bounding box inner "
              f"dimension will be <= {span}.")
    _need(tm.oob_fill != OOB_FILL_NAN or floating,
          "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA requires a floating-point tensorDataType")


def _need(ok: bool, rule: str) -> None:
    if not ok:
        raise InputError(f"cuTensorMapEncodeTiled refuses this map: {rule}")


def box_shape(tm: TensorMap) -> tuple[int, ...]:
    """Elements a tile-mode copy takes along each dimension (innermost first): ceil(box / element stride)."""
    return tuple(-(-b // e) for b, e in zip(tm.box, tm.element_strides))


def box_elements(tm: TensorMap, coords) -> tuple[np.ndarray, np.ndarray]:
    """For the box at element coordinates ``coords`` (innermost first), in shared-memory order (dense,
    innermost first): the byte offset of each element from the map's global address, and whether it is
    inside the tensor."""
    esize = DTYPES[tm.dtype][0]
    shape = box_shape(tm)
    grids = np.meshgrid(*[np.arange(n) for n in reversed(shape)], indexing="ij")       # outermost first
    pos = [g.reshape(-1) for g in reversed(grids)]                                     # innermost first
    inside = np.ones(pos[0].size, np.bool_)
    off = np.zeros(pos[0].size, np.int64)
    for d in range(tm.rank):
        g = int(coords[d]) + pos[d] * tm.element_strides[d]
        inside &= (g >= 0) & (g < tm.dims[d])
        off += g * (esize if d == 0 else int(tm.strides[d - 1]))
    return off, inside


def fill_bytes(tm: TensorMap, n: int) -> np.ndarray:
    """The bytes ``n`` out-of-bounds elements of a load read as: zeros, or the NaN of the map's float type."""
    esize = DTYPES[tm.dtype][0]
    if tm.oob_fill == OOB_FILL_NAN and tm.dtype in NAN_BYTES:
        return np.full(n, NAN_BYTES[tm.dtype]).view(np.uint8)
    return np.zeros(n * esize, np.uint8)
