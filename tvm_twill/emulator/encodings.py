"""Where tensor-core and copy-engine instructions put each element: the fragment maps, swizzles and
descriptors the emulator needs, as pure functions (integers in, integers out; numpy arrays work too).

Each map is written from the PTX ISA's figures and tables and tested against CuTe (the ``nvidia-cutlass``
wheel: pycute for the swizzles, CuTe's C++ headers, compiled and run, for the fragment maps, the
ldmatrix copy traits and the wgmma descriptors and canonical layouts).  Nothing here is shared with
``tvm_twill.model``: the emulator is independent evidence.

Notation: ``lane`` 0..31 within a warp, ``g = lane >> 2`` (the group), ``q = lane & 3`` (the thread in
the group); ``t`` 0..127 the thread within a warp group, ``w = t >> 5`` its warp.

* ``mma.sync.aligned.m16n8k16.row.col`` (f16/bf16 inputs, f32 accumulators): ``mma_m16n8k16_a``,
  ``mma_m16n8k16_b``, ``mma_m16n8k16_c``; element ``i`` of a lane is half ``i & 1`` of register ``i >> 1``
  (``mma_m16n8k16_c`` also places an f16 accumulator: element i is half ``i & 1`` of register ``i >> 1``).
  m16n8k8 16-bit (``mma_m16n8k8_a`` / ``_b``), tf32 m16n8k8 (``mma_tf32_m16n8k8_a`` / ``_b``) and 8-bit
  m16n8k16 / m16n8k32 (``mma_8bit_a`` / ``_b``) from the PTX ISA's mma fragment figures.
* ``ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16``: ``ldmatrix_source`` (which stored element
  a lane's register half receives) and ``ldmatrix_row_lane`` (which lane gives the address of a row).
* Swizzles: ``swizzle(bits, base, shift)`` is CuTe's ``Swizzle<B, M, S>``; ``tma_swizzle(mode)`` the
  tensor-map modes (``CUtensorMapSwizzle`` 0..3: none, 32, 64, 128 bytes) on byte addresses;
  ``wgmma_swizzle(layout_type)`` the same patterns under the wgmma descriptor's codes.
* wgmma (sm_90a): ``decode_wgmma_desc`` / ``encode_wgmma_desc`` (the 64-bit shared-memory matrix
  descriptor), ``wgmma_operand_address`` (the shared byte address of operand element (row, k) that a
  descriptor names: K-major or MN-major, every swizzle), ``wgmma_c`` (the m64nNk16 f32 accumulator)
  and ``wgmma_a`` (the register A operand of m64nNk16).
"""
from __future__ import annotations

from ..errors import InputError

#: The wgmma descriptor's layout codes (bits 62-63) -> swizzle span in bytes (0: no swizzle).
WGMMA_LAYOUT_SWIZZLE_BYTES = {0: 0, 1: 128, 2: 64, 3: 32}
#: ``CUtensorMapSwizzle`` (0 NONE, 1 32B, 2 64B, 3 128B) -> swizzle span in bytes.
TMA_SWIZZLE_BYTES = {0: 0, 1: 32, 2: 64, 3: 128}
_SPAN_BITS = {0: 0, 32: 1, 64: 2, 128: 3}


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise InputError(message)


# --- mma.sync m16n8k16 ----------------------------------------------------------------------------------

def mma_m16n8k16_a(lane, i):
    """(row, col) in the 16 x 16 A tile of element ``i`` (0..7) of ``lane``: registers a0..a3 hold
    (rows g, g + 8) x (cols 2q, 2q + 1) for k < 8, then the same for k >= 8."""
    g, q = lane >> 2, lane & 3
    return g + 8 * ((i >> 1) & 1), 2 * q + (i & 1) + 8 * (i >> 2)


def mma_m16n8k16_b(lane, i):
    """(k, n) in the 16 x 8 B tile of element ``i`` (0..3) of ``lane``: b0 holds k = 2q, 2q + 1 of
    column g, b1 the same 8 rows further down."""
    g, q = lane >> 2, lane & 3
    return 2 * q + (i & 1) + 8 * (i >> 1), g


def mma_m16n8k16_c(lane, i):
    """(row, col) in the 16 x 8 f32 C/D tile of element ``i`` (0..3) of ``lane`` (one f32 per register)."""
    g, q = lane >> 2, lane & 3
    return g + 8 * (i >> 1), 2 * q + (i & 1)


def mma_m16n8k8_a(lane, i):
    """(row, col) in the 16 x 8 A tile of element ``i`` (0..3) of m16n8k8 with 16-bit A: a0 (rows g, g + 8)
    x (cols 2q, 2q + 1)."""
    g, q = lane >> 2, lane & 3
    return g + 8 * ((i >> 1) & 1), 2 * q + (i & 1)


def mma_m16n8k8_b(lane, i):
    """(k, n) in the 8 x 8 B tile of element ``i`` (0..1) of m16n8k8 with 16-bit B."""
    g, q = lane >> 2, lane & 3
    return 2 * q + (i & 1), g


def mma_tf32_m16n8k8_a(lane, i):
    """(row, col) of register ``i`` (0..3, one tf32 each) of m16n8k8 ``.tf32`` A: rows g (a0, a2) and g + 8
    (a1, a3), cols q (a0, a1) and q + 4 (a2, a3)."""
    g, q = lane >> 2, lane & 3
    return g + 8 * (i & 1), q + 4 * (i >> 1)


def mma_tf32_m16n8k8_b(lane, i):
    """(k, n) of register ``i`` (0..1) of m16n8k8 ``.tf32`` B: k = q (b0), q + 4 (b1); n = g."""
    g, q = lane >> 2, lane & 3
    return q + 4 * i, g


def mma_8bit_a(lane, i):
    """(row, col) of element ``i`` (0..15 for m16n8k32, 0..7 for m16n8k16; byte ``i & 3`` of register
    ``i >> 2``) of 8-bit A (.s8/.u8/.e4m3/.e5m2): rows g (i % 8 < 4) and g + 8, cols 4q + (i & 3), + 16
    for i >= 8."""
    g, q = lane >> 2, lane & 3
    return g + 8 * ((i >> 2) & 1), 4 * q + (i & 3) + 16 * (i >> 3)


def mma_8bit_b(lane, i):
    """(k, n) of element ``i`` (0..7 for k32, 0..3 for k16; byte ``i & 3`` of register ``i >> 2``) of 8-bit
    B: k = 4q + (i & 3), + 16 for i >= 4; n = g."""
    g, q = lane >> 2, lane & 3
    return 4 * q + (i & 3) + 16 * (i >> 2), g


# --- ldmatrix ----------------------------------------------------------------------------------------------

def ldmatrix_row_lane(matrix, row):
    """The lane whose address operand gives row ``row`` (0..7) of matrix ``matrix`` (0..3): ``8 * matrix +
    row``.  With ``.x1`` only lanes 0..7 supply addresses, ``.x2`` lanes 0..15, ``.x4`` all 32."""
    return 8 * matrix + row


def ldmatrix_source(num: int, trans: bool, lane, reg, half):
    """The stored element that half ``half`` (0 low, 1 high 16 bits) of destination register ``reg`` of
    ``lane`` receives from ``ldmatrix...x{num}{.trans}``: ``(matrix, row, col)`` with ``row`` the stored
    row (whose 16-byte address lane ``ldmatrix_row_lane(matrix, row)`` supplies) and ``col`` the 16-bit
    element in that row.  Register j comes from matrix j; without ``.trans`` a lane gets row ``lane >> 2``,
    columns 2q and 2q + 1; with ``.trans`` it gets column ``lane >> 2`` of stored rows 2q and 2q + 1."""
    _check(num in (1, 2, 4), f"ldmatrix .x{num}: the count is 1, 2 or 4")
    _check(not isinstance(reg, int) or 0 <= reg < num, f"ldmatrix .x{num} has registers 0..{num - 1}, not {reg}")
    g, q = lane >> 2, lane & 3
    if trans:
        return reg, 2 * q + half, g
    return reg, g, 2 * q + half


# --- swizzles ----------------------------------------------------------------------------------------------

class Swizzle:
    """CuTe's ``Swizzle<B, M, S>``: XOR the ``B`` bits at ``M + max(S, 0)`` into the ``B`` bits at
    ``M - min(S, 0)``: ``offset ^ ((offset & yyy) >> S)`` (``<< -S`` for a negative shift)."""

    def __init__(self, bits: int, base: int, shift: int):
        _check(bits >= 0 and base >= 0 and abs(shift) >= bits,
               f"Swizzle<{bits}, {base}, {shift}>: need bits >= 0, base >= 0 and |shift| >= bits")
        self.bits, self.base, self.shift = bits, base, shift
        mask = (1 << bits) - 1
        self.yyy_mask = mask << (base + max(shift, 0))
        self.zzz_mask = mask << (base - min(shift, 0))

    def __call__(self, offset):
        y = offset & self.yyy_mask
        return offset ^ (y >> self.shift if self.shift >= 0 else y << -self.shift)

    def __repr__(self):
        return f"Swizzle<{self.bits},{self.base},{self.shift}>"


def swizzle(bits: int, base: int, shift: int) -> Swizzle:
    """``Swizzle<bits, base, shift>`` as a function of an offset (int or integer numpy array)."""
    return Swizzle(bits, base, shift)


def span_swizzle(span_bytes: int) -> Swizzle:
    """The 16-byte-chunk swizzle of a ``span_bytes`` (0, 32, 64 or 128) pattern on byte addresses:
    ``Swizzle<log2(span / 16), 4, 3>``: the 16-byte chunk within a 128-byte row ^= the row mod (span / 16),
    repeating every ``8 * span`` bytes.  0 is the identity (``Swizzle<0, 4, 3>``)."""
    _check(span_bytes in _SPAN_BITS, f"swizzle span {span_bytes} B: use 0, 32, 64 or 128")
    return Swizzle(_SPAN_BITS[span_bytes], 4, 3)


def tma_swizzle(mode: int) -> Swizzle:
    """The byte-address swizzle of a tensor map's ``CUtensorMapSwizzle`` ``mode`` (0..3)."""
    _check(mode in TMA_SWIZZLE_BYTES, f"tensor-map swizzle mode {mode}: use 0 (none), 1 (32B), 2 (64B), 3 (128B)")
    return span_swizzle(TMA_SWIZZLE_BYTES[mode])


def wgmma_swizzle(layout_type: int) -> Swizzle:
    """The byte-address swizzle of a wgmma descriptor's layout code (0 none, 1 128B, 2 64B, 3 32B)."""
    _check(layout_type in WGMMA_LAYOUT_SWIZZLE_BYTES, f"wgmma layout type {layout_type}: a 2-bit code, 0..3")
    return span_swizzle(WGMMA_LAYOUT_SWIZZLE_BYTES[layout_type])


# --- wgmma descriptors and operand addressing --------------------------------------------------------------

def decode_wgmma_desc(desc: int) -> dict:
    """The fields of a 64-bit wgmma shared-memory matrix descriptor, byte values where they are addresses:
    ``start`` (bits 0-13, x16), ``lbo`` (16-29, x16), ``sbo`` (32-45, x16), ``base_offset`` (49-51),
    ``layout`` (62-63: 0 none, 1 128B, 2 64B, 3 32B swizzle) and ``swizzle_bytes`` (its span)."""
    desc = int(desc)
    _check(0 <= desc < 1 << 64, f"wgmma descriptor {desc:#x} is not a 64-bit value")
    layout = (desc >> 62) & 3
    return {"start": (desc & 0x3FFF) << 4, "lbo": ((desc >> 16) & 0x3FFF) << 4, "sbo": ((desc >> 32) & 0x3FFF) << 4,
            "base_offset": (desc >> 49) & 7, "layout": layout, "swizzle_bytes": WGMMA_LAYOUT_SWIZZLE_BYTES[layout]}


def encode_wgmma_desc(start: int, lbo: int, sbo: int, base_offset: int = 0, layout: int = 0) -> int:
    """The descriptor with these fields (``start``, ``lbo``, ``sbo`` in bytes, multiples of 16 below
    2^18); the inverse of ``decode_wgmma_desc``."""
    for name, v in (("start", start), ("lbo", lbo), ("sbo", sbo)):
        _check(0 <= v < 1 << 18 and v % 16 == 0,
               f"wgmma descriptor {name} = {v}: a byte offset, a multiple of 16 below 2^18")
    _check(0 <= base_offset < 8 and 0 <= layout < 4, f"base_offset {base_offset} (0..7) or layout {layout} (0..3)")
    return ((start >> 4) | (lbo >> 4) << 16 | (sbo >> 4) << 32 | base_offset << 49 | layout << 62)


def wgmma_operand_address(desc, row, k, *, k_major: bool = True, elem_bytes: int = 2):
    """Shared-memory byte address of element (``row``, ``k``) of a wgmma operand that descriptor ``desc``
    (an int, or ``decode_wgmma_desc``'s dict) names; ``row`` is m for A, n for B.  ``k_major`` is
    ``imm-trans`` = 0 (K-major).  With T = 16 / ``elem_bytes`` elements per 16-byte core-matrix row and
    W = swizzle span / 16 (1 without swizzle), the offset before the swizzle is::

        K-major,  none:      (row % 8) * 16 + (row // 8) * SBO + (k // T) * LBO + (k % T) * eb
        K-major,  swizzled:  (row % 8) * 16W + (row // 8) * SBO + k * eb                 (LBO unused)
        MN-major, none:      (row % T) * eb + (row // T) * SBO + (k % 8) * 16 + (k // 8) * LBO
        MN-major, swizzled:  (row % T) * eb + ((row // T) % W) * 16 + (row // (T W)) * LBO
                             + (k % 8) * 16W + (k // 8) * SBO

    and the address is the swizzle of (start + offset).  A non-zero base offset is refused (its effect is
    not pinned down by the documentation)."""
    d = decode_wgmma_desc(desc) if not isinstance(desc, dict) else desc
    _check(d["base_offset"] == 0, f"wgmma descriptor base_offset {d['base_offset']}: only 0 is modelled")
    _check(elem_bytes in (1, 2, 4), f"wgmma element size {elem_bytes} B: 1, 2 or 4")
    t, eb = 16 // elem_bytes, elem_bytes
    w = max(d["swizzle_bytes"] // 16, 1)
    if k_major and d["layout"] == 0:
        off = (row % 8) * 16 + (row // 8) * d["sbo"] + (k // t) * d["lbo"] + (k % t) * eb
    elif k_major:
        off = (row % 8) * 16 * w + (row // 8) * d["sbo"] + k * eb
    elif d["layout"] == 0:
        off = (row % t) * eb + (row // t) * d["sbo"] + (k % 8) * 16 + (k // 8) * d["lbo"]
    else:
        off = ((row % t) * eb + ((row // t) % w) * 16 + (row // (t * w)) * d["lbo"]
               + (k % 8) * 16 * w + (k // 8) * d["sbo"])
    return span_swizzle(d["swizzle_bytes"])(d["start"] + off)


def wgmma_c(thread, i, n: int):
    """(row, col) in the 64 x ``n`` f32 accumulator of register ``i`` (0 .. n/2 - 1) of ``thread`` (0..127
    in the warp group) of ``wgmma.mma_async.m64n{n}k16.f32``: warp w owns rows 16w..16w+15; registers
    come in fours covering an 8-column step: (g, 2q), (g, 2q+1), (g+8, 2q), (g+8, 2q+1)."""
    _check(n % 8 == 0 and 8 <= n <= 256, f"wgmma N = {n}: a multiple of 8 in 8..256")
    w, lane = thread >> 5, thread & 31
    g, q = lane >> 2, lane & 3
    return 16 * w + g + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * q + (i & 1)


def wgmma_a(thread, i):
    """(row, k) in the 64 x 16 A tile of element ``i`` (0..7, two per 32-bit register a0..a3) of
    ``thread`` for the register-A form of ``wgmma.mma_async.m64nNk16`` (16-bit A): warp w holds rows
    16w..16w+15 in mma.sync's m16n8k16 A layout."""
    w, lane = thread >> 5, thread & 31
    g, q = lane >> 2, lane & 3
    return 16 * w + g + 8 * ((i >> 1) & 1), 2 * q + (i & 1) + 8 * (i >> 2)
