"""The 128-byte swizzled re-layout of wgmma operand tiles (model/wgmma_layout.py), pure Python.

The property the transform relies on: for a K-major no-swizzle tile re-laid by ``sw128_offset`` (+ the
swizzle XOR), a descriptor whose start is re-laid the same way, read as a 128-byte swizzled operand with
SBO 1024 B, reads exactly the bytes the old descriptor read, for every start ``start_ok`` accepts; and a
start it refuses really would read other bytes.
"""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvm_twill.errors import InputError
from tvm_twill.model.tma import swizzle
from tvm_twill.model.wgmma_layout import NO_SWIZZLE, SW128, SwizzledTile, operand_addresses, sw128_offset


def _agree(tile: SwizzledTile, b0: int, k_bytes: int = 32) -> bool:
    rows = tile.rows - 8 * ((b0 % (16 * tile.rows)) // 128)  # the rows from the start's row group on
    old = operand_addresses(b0, 16 * tile.rows, 128, NO_SWIZZLE, rows, k_bytes)
    new = operand_addresses(sw128_offset(b0, tile.rows), 16, 1024, SW128, rows, k_bytes)
    return all(new[key] == tile.physical(old[key]) for key in old)


@pytest.mark.parametrize("rows", [8, 16, 64, 128, 256])
@pytest.mark.parametrize("chunks", [8, 16, 24])
def test_relayout_is_a_bijection_and_every_accepted_start_reads_the_same_bytes(rows, chunks):
    tile = SwizzledTile(rows, chunks)
    assert sorted(tile.physical(b) for b in range(tile.slot_bytes)) == list(range(tile.slot_bytes))
    accepted = [b0 for b0 in range(0, tile.slot_bytes, 128) if tile.start_ok(b0)]
    assert len(accepted) == (rows // 8) * (chunks // 8) * 7  # chunks 0..6 of each atom row, every row group
    assert all(_agree(tile, b0) for b0 in accepted)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 32), st.integers(1, 4), st.data())
def test_random_tiles_and_starts(r8, c8, data):
    tile = SwizzledTile(8 * r8, 8 * c8)
    c = data.draw(st.integers(0, tile.chunks - 1))
    m = data.draw(st.integers(0, r8 - 1))
    b0 = c * 16 * tile.rows + m * 128
    assert tile.start_ok(b0) == (c % 8 <= 6)
    if tile.start_ok(b0):
        assert _agree(tile, b0)


def test_refused_starts_would_read_other_bytes():
    tile = SwizzledTile(8, 16)
    crossing = 7 * 16 * 8  # chunk 7: the second 16 bytes of k are in the next atom column
    assert not tile.start_ok(crossing) and not _agree(tile, crossing)
    assert not tile.start_ok(16)  # inside a core matrix (row 1)
    assert not tile.start_ok(tile.slot_bytes)  # past the slot


def test_no_swizzle_reading_is_the_workload_core_matrix_layout():
    # wgmma_intrinsics: element (r, k) of an R-row tile at fp16 offset (k//8)*8R + (r//8)*64 + (r%8)*8 + k%8
    rows = 64
    got = operand_addresses(0, 16 * rows, 128, NO_SWIZZLE, rows, 32)
    for (i, kb), addr in got.items():
        k = kb // 2
        assert addr == 2 * ((k // 8) * 8 * rows + (i // 8) * 64 + (i % 8) * 8 + k % 8) + kb % 2


def test_swizzled_reading_is_cutlass_sw128_kmajor():
    # row i, k byte kb of a 1024-aligned atom: 128-byte rows, 16-byte chunk (kb // 16) XOR (i % 8)
    got = operand_addresses(0, 16, 1024, SW128, 16, 128)
    for (i, kb), addr in got.items():
        assert addr == (i // 8) * 1024 + (i % 8) * 128 + ((kb // 16) ^ (i % 8)) * 16 + kb % 16
        assert addr == swizzle((i // 8) * 1024 + (i % 8) * 128 + kb, 3)


def test_geometry_reasons():
    assert SwizzledTile.of(8192, 1024, 128) == SwizzledTile(64, 8)
    assert SwizzledTile.of(16384, 2048, 128) == SwizzledTile(128, 8)
    assert "SBO" in SwizzledTile.of(8192, 1024, 1024)
    assert "LBO" in SwizzledTile.of(8192, 1000, 128)
    assert "k chunks" in SwizzledTile.of(4096, 1024, 128)   # 4 chunks of 16 B: 64-byte rows
    with pytest.raises(InputError, match="layout type 2"):
        operand_addresses(0, 16, 512, 2, 8, 32)
