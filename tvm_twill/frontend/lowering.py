"""Lowering and compiling s_tir modules with TVM (for auto_pipeline's check, tests, tutorials, benchmarks)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import InputError, UnsupportedLoopError
from .ir import (branches, const_int, dtype_bytes, stock_s_tir_passes, tir_pipeline_registry, tirx, tvm,
                 tvm_ffi)
from .loops import LoopRef
from .target import parse_target

__all__ = ["ASYNC_COPY_CONFIG", "KernelInfo", "compile_cuda", "inject_pipeline", "kernel_info",
           "lower_to_pipeline", "pipeline_prefix_passes"]

#: PassContext key that turns async pipeline stages into cp.async (TVM 0.27 spelling).
ASYNC_COPY_CONFIG = "tirx.use_async_copy"


def pipeline_prefix_passes():
    """TVM's default s_tir passes up to and including InjectSoftwarePipeline, as TVM's own pipeline
    lists them under the current PassContext (``ir.stock_s_tir_passes``)."""
    passes = stock_s_tir_passes()
    names = [p.info.name for p in passes]
    return passes[:names.index("s_tir.InjectSoftwarePipeline") + 1]


def lower_to_pipeline(func, ref: LoopRef) -> tuple:
    """``(lowered function, LoopRef)``: loop ``ref`` of ``func`` as InjectSoftwarePipeline will see it.

    Runs TVM's own passes that precede InjectSoftwarePipeline
    (``pipeline_prefix_passes`` without it) and finds the loop again by its
    loop variable, which those passes keep.  Its body then holds exactly the
    statements the pass pipelines: e.g. ManifestSharedMemoryLocalStage has
    split each copy annotated ``tirx.manifest_shared_memory_local_stage``
    (dlight's tensor-core rules) into a global->local and a local->shared
    statement, and thread bindings are lifted above the loop.  The returned
    LoopRef has no LoopRV (``rv`` None): it is not a loop of any schedule.
    """
    try:
        mod = tvm.transform.Sequential(pipeline_prefix_passes()[:-1])(tvm.IRModule({"main": func}))
    except Exception as err:  # noqa: BLE001 - TVM raises ValueError / InternalError
        raise UnsupportedLoopError(f"loop '{ref.name}': TVM's passes before InjectSoftwarePipeline fail on "
                                   f"this function: {_last_line(err)}") from None
    low = mod["main"]
    found: list = []

    def visit(stmt, loops):
        if isinstance(stmt, tirx.For):
            if stmt.loop_var.same_as(ref.node.loop_var):
                found.append((stmt, tuple(loops)))
            loops = loops + [stmt]
        for c in branches(stmt):  # through guards too: a tile-walk kernel nests its loop under one
            visit(c, loops)

    visit(low.body, [])
    if len(found) != 1:
        raise UnsupportedLoopError(f"loop '{ref.name}': found {len(found)} copies of it after TVM's passes before "
                                   "InjectSoftwarePipeline: cannot tell which statements the pass will see")
    node, ancestors = found[0]
    return low, LoopRef(rv=None, node=node, name=ref.name, func=ref.func, ancestors=ancestors)


def _last_line(err) -> str:
    msg = str(err).strip().splitlines()
    return next((ln for ln in reversed(msg) if ln.strip()), type(err).__name__).strip()


def inject_pipeline(mod):
    """Run the s_tir passes through InjectSoftwarePipeline; TVM's rejection becomes UnsupportedLoopError."""
    try:
        return tvm.transform.Sequential(pipeline_prefix_passes())(mod)
    except Exception as err:  # noqa: BLE001 - TVM raises ValueError / InternalError
        raise UnsupportedLoopError(f"InjectSoftwarePipeline rejects the annotated loop: {_last_line(err)}") from None


def compile_cuda(mod_or_sch, target, *, async_copy: bool = True, tir_pipeline: str | None = None):
    """Compile with ``tvm.compile`` for a CUDA target; returns (module, CUDA source).

    ``async_copy`` sets the PassContext key that lowers async stages to cp.async; ``tir_pipeline`` names
    a registered TIR pipeline (``plan.tir_pipeline``; None: TVM's default).
    """
    _, tgt = parse_target(target)
    mod = mod_or_sch.mod if hasattr(mod_or_sch, "mod") and not isinstance(mod_or_sch, tvm.IRModule) else mod_or_sch
    with tvm.transform.PassContext(config={ASYNC_COPY_CONFIG: int(async_copy)}):
        f = tvm.compile(mod, target=tgt, tir_pipeline=tir_pipeline or "default")
    return f, f.mod.imports[0].inspect_source()


@dataclass(frozen=True)
class KernelInfo:
    """Launch facts of a compiled s_tir kernel: name, grid, block, dynamic shared memory bytes."""

    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dyn_smem: int


def kernel_info(mod_or_sch, target, *, async_copy: bool = True, tir_pipeline: str | None = None) -> KernelInfo:
    """Run TVM's default pipeline (as ``tvm.compile`` does) and read the device kernel's launch facts.

    Used to check the model's shared-memory prediction against what TVM
    allocates, and to launch exported kernels without TVM.
    """
    _, tgt = parse_target(target)
    mod = mod_or_sch.mod if not isinstance(mod_or_sch, tvm.IRModule) else mod_or_sch
    mod = tirx.transform.BindTarget(tgt.with_host(tvm.target.Target("llvm")))(mod)
    if tir_pipeline is None:
        pipeline, _, _ = tirx.get_default_tir_pipeline(tgt)
    else:
        pipeline, _, _ = tir_pipeline_registry().PIPELINE_MAP[tir_pipeline]()
    with tvm.transform.PassContext(config={ASYNC_COPY_CONFIG: int(async_copy)}):
        mod = pipeline(mod)
    kernels = [(gv.name_hint, f) for gv, f in mod.functions_items()
               if isinstance(f, tirx.PrimFunc) and "tirx.kernel_launch_params" in (f.attrs or {})]
    if len(kernels) != 1:
        raise InputError(f"expected one device kernel, found {len(kernels)}: kernel_info reads single-kernel modules")
    name, func = kernels[0]
    ext = {}
    smem = [0]

    def on_attr(a):
        if a.attr_key == "thread_extent":
            ext[a.node.thread_tag] = const_int(a.value) or 1

    def on_alloc(a):
        if a.buffer.scope() == "shared.dyn":
            smem[0] += int(math.prod(const_int(d) or 1 for d in a.buffer.shape) * dtype_bytes(a.buffer.dtype))

    tvm_ffi.structural_walk(func.body, [(tirx.AttrStmt, on_attr), (tirx.AllocBuffer, on_alloc)])
    grid = tuple(ext.get(f"blockIdx.{d}", 1) for d in "xyz")
    block = tuple(ext.get(f"threadIdx.{d}", 1) for d in "xyz")
    return KernelInfo(name=name, grid=grid, block=block, dyn_smem=smem[0])


