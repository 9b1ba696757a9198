"""Struct parameters (``.param .align A .b8 name[N]``: a C++ object passed by value, as CuTe passes its
layouts and tensors), given to a launch as ``("struct", ((byte_offset, item), ...))``."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from tvm_twill import emulator as E
from tvm_twill.errors import EmulationError

PTX = """
.version 8.7
.target sm_80
.address_size 64
.visible .entry k(
    .param .align 8 .b8 k_param_0[24],
    .param .u32 k_param_1
)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [k_param_0];
    ld.param.u32 %r1, [k_param_0+8];
    ld.param.u16 %r2, [k_param_0+12];
    ld.param.u32 %r3, [k_param_1];
    mov.u32 %r4, %tid.x;
    mul.wide.u32 %rd2, %r4, 4;
    add.s64 %rd3, %rd1, %rd2;
    mad.lo.s32 %r5, %r4, %r1, %r2;
    add.s32 %r5, %r5, %r3;
    st.global.u32 [%rd3], %r5;
    ret;
}
"""


def _launch(fields):
    return E.Launch("k", (1, 1, 1), (32, 1, 1), 0, (("struct", fields), ("scalar", "u32", 1000)))


def test_a_struct_parameter_carries_a_pointer_and_scalars_at_their_offsets():
    out = np.zeros(40, np.uint32)
    fields = ((0, ("buffer", 0, 16)), (8, ("scalar", "u32", 7)), (12, ("bytes", (5).to_bytes(2, "little"))))
    report = E.run_ptx(PTX, [_launch(fields)], out)
    assert report.ok, report.findings
    t = np.arange(32, dtype=np.uint32)
    np.testing.assert_array_equal(out[4:36], t * 7 + 5 + 1000)      # the pointer is out + 16 bytes
    assert not out[:4].any() and not out[36:].any()


def test_a_field_outside_the_struct_is_refused_in_one_line():
    with pytest.raises(EmulationError, match="outside the 24-byte parameter k_param_0"):
        E.run_ptx(PTX, [_launch(((20, ("scalar", "u64", 1)),))], np.zeros(32, np.uint32))


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas (nvcc)")
def test_the_kernel_is_legal_ptx(tmp_path):
    src = tmp_path / "k.ptx"
    src.write_text(PTX)
    subprocess.run(["ptxas", "-arch=sm_80", str(src), "-o", str(tmp_path / "k.cubin")], check=True,
                   capture_output=True)
