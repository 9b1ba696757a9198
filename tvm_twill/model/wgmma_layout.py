"""Where a wgmma reads its shared-memory operand, and the 128-byte swizzled re-layout of a K-major tile (pure).

A wgmma operand in shared memory is named by a matrix descriptor: a start
address, a leading and a stride byte offset (LBO, SBO) and a layout type.
For a K-major operand (each row's k elements contiguous in 16-byte chunks of
8 fp16) the PTX ISA gives two canonical forms (section "Matrix Descriptor",
CuTe's ``GMMA::Layout_K_*``):

* **no swizzle** (INTERLEAVE): core matrices of 8 rows x 16 bytes, each 128
  contiguous bytes; row ``i``, byte ``kb`` of the k extent is at
  ``start + (i // 8) * SBO + (i % 8) * 16 + (kb // 16) * LBO + kb % 16``;
* **128-byte swizzle**: rows of 128 bytes, 8 of them an atom of 1024 bytes;
  the address ``start + (i // 8) * SBO + (i % 8) * 128 + kb`` goes through the
  swizzle of the address bits (bits [4, 7) XOR bits [7, 10), the same function
  the TMA unit writes with, ``model.tma.swizzle``); LBO is unused.  With the
  descriptor's base offset 0 the atoms must start on 1024-byte boundaries.

``operand_addresses`` is that reading, element by element.  ``sw128_offset``
re-lays a K-major no-swizzle tile of ``rows`` rows (SBO = 128 B, LBO =
``16 * rows`` B: TVM's and tvm_twill's wgmma tiles) as 128-byte swizzled
atoms: row ``i``, chunk ``c`` goes to pre-swizzle byte ``(c // 8) * 128 *
rows + (i // 8) * 1024 + (i % 8) * 128 + (c % 8) * 16``.  The same function maps
a descriptor's start, so a kernel re-laid this way reads, through the new
descriptor (SBO = 1024 B, 128-byte swizzle), exactly the elements the old
descriptor read, as long as one instruction's k extent stays inside one
atom row (``SwizzledTile.start_ok``); the tests check this over every
start, row count and chunk count in range.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from .tma import swizzle

__all__ = ["ATOM_BYTES", "CHUNK", "NO_SWIZZLE", "SW128", "SwizzledTile", "operand_addresses", "sw128_offset"]

#: 16-byte chunk: one row of a core matrix.
CHUNK = 16
#: One 128-byte-swizzle atom: 8 rows of 128 bytes (its alignment).
ATOM_BYTES = 1024
#: Layout-type codes as TVM's ``encode_matrix_descriptor`` takes them (the CUtensorMapSwizzle numbering).
NO_SWIZZLE, SW128 = 0, 3


def operand_addresses(start: int, lbo: int, sbo: int, layout: int, rows: int, k_bytes: int) -> dict:
    """{(row, k byte): shared byte address} a wgmma reads for a K-major operand of ``rows`` rows and
    ``k_bytes`` bytes of k (32 for one instruction), from a descriptor with ``start``, ``lbo``, ``sbo`` (bytes)
    and ``layout`` (``NO_SWIZZLE`` or ``SW128``)."""
    if layout not in (NO_SWIZZLE, SW128):
        raise InputError(f"layout type {layout} is not modelled (0: none, 3: 128-byte swizzle)")
    out = {}
    for i in range(rows):
        for kb in range(k_bytes):
            if layout == NO_SWIZZLE:
                out[(i, kb)] = start + (i // 8) * sbo + (i % 8) * CHUNK + (kb // CHUNK) * lbo + kb % CHUNK
            else:
                out[(i, kb)] = swizzle(start + (i // 8) * sbo + (i % 8) * 128 + kb, SW128)
    return out


def sw128_offset(b: int, rows: int) -> int:
    """Pre-swizzle byte offset in the swizzled tile of byte ``b`` of a K-major no-swizzle tile of ``rows`` rows
    (SBO 128 B, LBO ``16 * rows`` B).  Apply ``tma.swizzle(., 3)`` for the physical byte (slot 1024-aligned)."""
    c, rest = divmod(b, CHUNK * rows)
    m, rest = divmod(rest, 128)
    r8, kb = divmod(rest, CHUNK)
    return (c // 8) * 128 * rows + m * ATOM_BYTES + r8 * 128 + (c % 8) * CHUNK + kb


@dataclass(frozen=True)
class SwizzledTile:
    """A K-major tile of ``rows`` rows and ``chunks`` 16-byte k chunks that can take the 128-byte swizzle."""

    rows: int
    chunks: int

    @classmethod
    def of(cls, slot_bytes: int, lbo: int, sbo: int) -> SwizzledTile | str:
        """The tile a no-swizzle descriptor geometry (``lbo``, ``sbo`` in bytes) over a ``slot_bytes`` slot
        describes, or the reason it cannot be swizzled."""
        if sbo != 128:
            return f"SBO {sbo} B is not the dense K-major core-matrix stride (128 B)"
        if lbo % CHUNK or lbo // CHUNK % 8 or lbo <= 0:
            return f"LBO {lbo} B is not 16 x (a multiple of 8 rows)"
        rows = lbo // CHUNK
        if slot_bytes % lbo or (slot_bytes // lbo) % 8:
            return f"the {slot_bytes}-byte slot is not 128-byte rows of {rows} rows (k chunks a multiple of 8)"
        return cls(rows, slot_bytes // lbo)

    @property
    def slot_bytes(self) -> int:
        return self.rows * self.chunks * CHUNK

    def physical(self, b: int) -> int:
        """Physical byte (slot-relative, slot on a 1024-byte boundary) of no-swizzle tile byte ``b``."""
        return swizzle(sw128_offset(b, self.rows), SW128)

    def start_ok(self, b0: int, k_bytes: int = 32) -> bool:
        """Can a descriptor starting at no-swizzle tile byte ``b0`` be re-laid?  It must start a core matrix
        row 0 (``b0 % 128 == 0``) and its ``k_bytes`` must stay inside one 128-byte atom row."""
        if b0 % 128 or not 0 <= b0 < self.slot_bytes:
            return False
        c = b0 // (CHUNK * self.rows)
        return (c % 8) * CHUNK + k_bytes <= 128
