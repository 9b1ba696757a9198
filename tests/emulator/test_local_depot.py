"""nvcc's stack frame: ``.local .align A .b8 __local_depot0[N]`` (a local array indexed by a loop variable
lives there) must be parsed as a local variable, not skipped as a ``.loc`` debug directive."""
import numpy as np

from tvm_twill import emulator as E
from tvm_twill.emulator.ptx import parse

SRC = """.version 9.0
.target sm_80
.address_size 64
.visible .entry k(
    .param .u64 k_param_0,
    .param .u64 k_param_1
)
{
    .local .align 16 .b8 __local_depot0[128];
    .reg .b64 %SPL;
    .reg .b32 %r<8>;
    .reg .b64 %rd<16>;
    mov.u64 %SPL, __local_depot0;
    ld.param.u64 %rd1, [k_param_0];
    ld.param.u64 %rd2, [k_param_1];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    ld.global.b32 %r2, [%rd4];
    add.u64 %rd6, %SPL, 64;
    st.local.u32 [%rd6+4], %r2;
    ld.local.u32 %r3, [%rd6+4];
    st.global.b32 [%rd5], %r3;
    ret;
}
"""


def test_local_depot_is_a_local_variable():
    k = next(iter(parse(SRC).kernels.values()))
    assert [(v.name, v.space, v.size) for v in k.variables] == [("__local_depot0", "local", 128)]


def test_stack_frame_round_trips_per_lane():
    x = (np.arange(32, dtype=np.uint32) * 2654435761).astype(np.uint32)
    out = np.zeros(32, np.uint32)
    launch = E.Launch("k", (1, 1, 1), (32, 1, 1), 0, (("buffer", 0, 0), ("buffer", 1, 0)))
    report = E.run_ptx(SRC, [launch], x, out)
    assert report.findings == [] and np.array_equal(out, x)
