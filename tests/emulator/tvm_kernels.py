"""Kernels TVM builds for the emulator tests.

``emulator.run(f, ...)`` reads the launches from the compiled module; ``launch_for`` (grid and block from
the scheduled IRModule's thread bindings, a generous dynamic shared size) is for the tests that call
``run_ptx`` on PTX they changed.
"""
from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import numpy as np

DYN_SMEM_BOUND = 160 * 1024


def thread_extents(mod):
    from tvm import tirx

    from tvm_twill.frontend.ir import walk_stmts
    ext = {}
    for node in walk_stmts(mod["main"].body):
        if isinstance(node, tirx.For) and node.kind == tirx.ForKind.THREAD_BINDING:
            ext[node.thread_binding.thread_tag] = int(node.extent)
    grid = tuple(ext.get(f"blockIdx.{c}", 1) for c in "xyz")
    block = tuple(ext.get(f"threadIdx.{c}", 1) for c in "xyz")
    return grid, block


def ptx_of(cuda_source: str, arch: str) -> str:
    with tempfile.TemporaryDirectory() as d:
        cu = Path(d) / "k.cu"
        cu.write_text(cuda_source)
        subprocess.run(["nvcc", "-ptx", "-lineinfo", f"-arch={arch}", "-o", str(Path(d) / "k.ptx"), str(cu)],
                       check=True, capture_output=True)
        return (Path(d) / "k.ptx").read_text()


def launch_for(mod, nparams, kernel="main_kernel", dyn_smem=DYN_SMEM_BOUND, ptx=None):
    """The launch of the kernel; a warp-specialized kernel has more threads than its schedule: the PTX's
    .maxntid (TVM's __launch_bounds__) gives the thread count, spread over threadIdx.y."""
    import re

    from tvm_twill.emulator import Launch
    grid, block = thread_extents(mod)
    m = re.search(r"\.maxntid (\d+)", ptx or "")
    if m and int(m.group(1)) != block[0] * block[1] * block[2]:
        block = (block[0], int(m.group(1)) // block[0], 1)
    return Launch(kernel, grid, block, dyn_smem, tuple(("buffer", i, 0) for i in range(nparams)))


def gemm_inputs(n, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (n, n)).astype(np.float16)
    b = rng.uniform(-1, 1, (n, n)).astype(np.float16)
    return a, b, np.zeros((n, n), np.float32)


def compile_module(mod, arch="sm_80", pipeline=None, async_copy=False):
    """``tvm.compile`` for CUDA ``arch`` (what ``emulator.run`` takes)."""
    import tvm
    config = {"tirx.use_async_copy": 1} if async_copy else {}
    with tvm.transform.PassContext(config=config):
        return tvm.compile(mod, target=tvm.target.Target({"kind": "cuda", "arch": arch}), tir_pipeline=pipeline)


def compile_cuda(mod, arch="sm_80", pipeline=None, async_copy=False):
    return compile_module(mod, arch, pipeline, async_copy).mod.imports[0].inspect_source()


def elementwise(n=4096, threads=128):
    """B = exp(A) * 0.5 + A (fp32): a TVM-built elementwise kernel.  Returns (mod, compiled module)."""
    import tvm
    from tvm import te
    a = te.placeholder((n,), "float32", name="A")
    b = te.compute((n,), lambda i: te.exp(a[i]) * 0.5 + a[i], name="B")
    sch = tvm.s_tir.Schedule(te.create_prim_func([a, b]))
    (i,) = sch.get_loops(sch.get_sblock("B"))
    bx, tx = sch.split(i, [None, threads])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch.mod, compile_module(sch.mod)


def row_sum(rows=8, cols=512, threads=128):
    """C[i] = sum_j A[i, j] (fp32), one CTA per row, a cross-thread reduction (shuffles + shared memory)."""
    import tvm
    from tvm import te
    a = te.placeholder((rows, cols), "float32", name="A")
    k = te.reduce_axis((0, cols), name="k")
    c = te.compute((rows,), lambda i: te.sum(a[i, k], axis=k), name="C")
    sch = tvm.s_tir.Schedule(te.create_prim_func([a, c]))
    i, kk = sch.get_loops(sch.get_sblock("C"))
    _, ki = sch.split(kk, [None, threads])
    sch.bind(i, "blockIdx.x")
    sch.bind(ki, "threadIdx.x")
    return sch.mod, compile_module(sch.mod)
