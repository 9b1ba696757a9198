"""Hand-written PTX kernels for the synchronization conformance tests: each is assembled by ptxas (the test
skips without it) and run on the emulator.  ``kernel(body)`` wraps a body in an entry ``k`` with four u64
parameters (%rd1..%rd4 loaded, %r1 = %tid.x, %r2 = x[tid], %rd5 = &out[tid]) and a register frame."""
from __future__ import annotations

import numpy as np
import pytest

from ptxkit import ptxas

from tvm_twill import emulator as E

REGS = """
    .reg .pred %p<16>;
    .reg .b16 %rs<16>;
    .reg .b32 %r<96>;
    .reg .f32 %f<80>;
    .reg .b64 %rd<40>;
"""
FRAME = """
    ld.param.u64 %rd1, [k_param_0];
    ld.param.u64 %rd2, [k_param_1];
    ld.param.u64 %rd3, [k_param_2];
    ld.param.u64 %rd4, [k_param_3];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd6, %r1, 4;
    add.s64 %rd7, %rd1, %rd6;
    ld.global.u32 %r2, [%rd7];
    add.s64 %rd5, %rd2, %rd6;
"""


def kernel(body: str, shared: str = "    .shared .align 128 .b8 sbuf[4096];\n    .shared .align 8 .b64 mbar[4];\n",
           target: str = "sm_80") -> str:
    params = ",\n".join(f"    .param .u64 k_param_{i}" for i in range(4))
    return (f".version 8.7\n.target {target}\n.address_size 64\n.visible .entry k(\n{params}\n)\n{{\n{REGS}{shared}"
            f"{FRAME}{body}\n    ret;\n}}\n")


def assemble(ptx: str) -> None:
    """ptxas must accept the kernel (a finding is never a parse error)."""
    verdict = ptxas(ptx, ptx.split(".target ", 1)[1].split()[0])
    if verdict is None:
        pytest.skip("ptxas is not on PATH")
    assert verdict[0], verdict[1]


def run(ptx: str, threads: int, x: np.ndarray, out: np.ndarray, *extra: np.ndarray, policy=None, interleavings=2,
        check_ptxas=True):
    """Assemble and run one CTA of ``threads`` threads on (x, out, extra...) (four u64 parameters)."""
    if check_ptxas:
        assemble(ptx)
    arrays = [x, out, *extra]
    while len(arrays) < 4:
        arrays.append(np.zeros(4, np.uint32))
    launch = E.Launch("k", (1, 1, 1), (threads, 1, 1), 0, tuple(("buffer", i, 0) for i in range(4)))
    return E.run_ptx(ptx, [launch], *arrays, interleavings=interleavings, policy=policy)


def kinds(report) -> set:
    return {f.kind for f in report.findings}


def inputs(n: int, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    return np.random.default_rng(seed).integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32), np.zeros(n, np.uint32)
