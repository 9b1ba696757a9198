"""``PipelinePlan.check_on_cpu``: the planned loop computes what the original loop computes, run on the CPU.

No GPU needed: the function before ``auto_pipeline`` and the same function
with what the plan wrote (every nested plan that was applied; the loops are
found by name within the plan's function, unnamed blocks or not) are compiled for llvm
and run on the same small-integer inputs (exact in floating point); every
parameter's final value must agree element for element.  What cannot run on
a CPU is taken out first, as the project's differential tests do, without
changing what is computed:

* ``software_pipeline_async_stages`` (cp.async has no CPU lowering; it only
  changes when a copy completes, and TVM's waits order every read after it);
* thread bindings (``threadIdx`` / ``blockIdx`` loops) become serial loops:
  an s_tir loop nest means the same whichever loops are bound to threads
  (TVM inserts the barriers that keep that meaning on the GPU).

Loops with GPU-only intrinsics (ldmatrix, mma, wgmma, any ``ptx_*``) or
warp-scope buffers, symbolic shapes, or more than ``MAX_ELEMENTS`` parameter
elements are refused with UnsupportedLoopError: check a small CPU-runnable
instance of the loop instead (the same statements on small tiles).
A warp-specialized kernel runs only on a GPU.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError, UnsupportedLoopError
from ..frontend import annotated_pipeline_loops, schedule_loops
from ..frontend.ir import const_int, s_tir, tirx, tvm
from ..model.pipeline import ASYNC_STAGES
from ..transforms import apply_annotation, remove_annotation

__all__ = ["MAX_ELEMENTS", "CpuCheck", "check_on_cpu", "cpu_runnable"]

#: The most parameter elements (all parameters together) ``check_on_cpu`` runs.
MAX_ELEMENTS = 1 << 22
_GPU_ONLY = re.compile(r"T\.(ptx_\w+|tvm_mma_sync|tvm_load_matrix_sync|tvm_store_matrix_sync|tvm_fill_fragment"
                       r"|tvm_bmma_sync|mma_\w+|ldmatrix\w*)\b|scope=\"(warp|wmma\.\w+|local\.fragment)\"")
_THREAD_LOOP = re.compile(r"T\.thread_binding\(([^()]*?),\s*thread=\"(?:threadIdx|blockIdx|vthread)[^\"]*\"\)")


@dataclass(frozen=True)
class CpuCheck:
    """What ``check_on_cpu`` compared: ``mismatches`` maps each parameter whose final values differ to the
    number of differing elements (empty: the plan computes what the loop computes)."""

    loop: str
    parameters: tuple[str, ...]
    elements: int
    seed: int
    mismatches: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def __str__(self) -> str:
        if self.ok:
            return (f"check_on_cpu: loop '{self.loop}' planned and original agree on all {self.elements} elements "
                    f"of {', '.join(self.parameters)} (llvm, inputs seed {self.seed})")
        bad = ", ".join(f"{n}: {k}" for n, k in self.mismatches.items())
        return f"check_on_cpu: loop '{self.loop}' planned and original DIFFER (wrong elements per parameter: {bad})"


def cpu_runnable(mod, what: str):
    """``mod`` with the async-stage annotations removed and thread-bound loops serial, re-parsed; refuses
    modules with GPU-only intrinsics or warp-scope buffers (UnsupportedLoopError)."""
    text = mod.script()
    gpu = _GPU_ONLY.search(text)
    if gpu:
        raise UnsupportedLoopError(f"check_on_cpu: the {what} uses {gpu.group(0)}, which runs only on a GPU: "
                                   "check a CPU-runnable instance of the loop (the same statements without "
                                   "tensor-core intrinsics)")
    mod = tvm.script.from_source(_THREAD_LOOP.sub(r"T.serial(\1)", text))
    sch = s_tir.Schedule(mod)
    for ref in annotated_pipeline_loops(sch):
        if ASYNC_STAGES in sch.get(ref.rv).annotations:
            sch.unannotate(ref.rv, ASYNC_STAGES)
    return sch.mod


def _inputs(func, seed: int) -> list:
    rng = np.random.default_rng(seed)
    out, total = [], 0
    for buf in func.params:  # TVM 0.27: a buffer parameter is a Var with a shape and a dtype
        if getattr(buf, "shape", None) is None:
            raise UnsupportedLoopError(f"check_on_cpu: parameter '{buf.name}' is not a buffer: check_on_cpu runs "
                                       "functions whose parameters are all buffers")
        shape = [const_int(d) for d in buf.shape]
        if any(d is None for d in shape):
            raise UnsupportedLoopError(f"check_on_cpu: buffer '{buf.name}' has a symbolic shape {list(buf.shape)}: "
                                       "check an instance with fixed shapes")
        total += int(np.prod(shape, dtype=np.int64))
        if total > MAX_ELEMENTS:
            raise UnsupportedLoopError(f"check_on_cpu: the parameters have more than {MAX_ELEMENTS} elements: check "
                                       "a smaller instance of the loop")
        dtype = str(buf.dtype)
        out.append((buf.name, rng.integers(-4, 5, size=shape).astype("bool" if dtype == "bool" else dtype)))
    return out, total


def _run(mod, args: list) -> list:
    lib = tvm.compile(mod, target="llvm")
    tensors = [tvm.runtime.tensor(a.copy()) for a in args]
    lib(*tensors)
    return [t.numpy() for t in tensors]


def check_on_cpu(plan, *, seed: int = 0) -> CpuCheck:
    """Compile the function before ``plan`` and with it for llvm, run both on the same inputs (drawn with
    ``seed``), compare every parameter; see the module doc for what is refused."""
    if plan.tir_pipeline is not None:
        raise UnsupportedLoopError(f"check_on_cpu: loop '{plan.loop}' is warp-specialized: its kernel (mbarriers, "
                                   "a producer warp) runs only on a GPU; check the plan without warp_specialize")
    if plan.source is None:
        raise InputError("check_on_cpu needs the plan's source module: use a plan auto_pipeline returned")
    source = plan.source
    before, after = cpu_runnable(source, "original function"), cpu_runnable(_planned(plan), "planned function")
    funcs = [f for _, f in before.functions_items() if isinstance(f, tirx.PrimFunc)]
    if len(funcs) != 1:
        raise UnsupportedLoopError(f"check_on_cpu: the module has {len(funcs)} functions: it runs one")
    named, total = _inputs(funcs[0], seed)
    args = [a for _, a in named]
    try:
        ref, got = _run(before, args), _run(after, args)
    except Exception as err:  # noqa: BLE001 - TVM raises ValueError / InternalError / TVMError
        last = next((ln for ln in reversed(str(err).strip().splitlines()) if ln.strip()), type(err).__name__)
        raise UnsupportedLoopError(f"check_on_cpu: llvm cannot build or run this function ({last.strip()}): check a "
                                   "CPU-runnable instance of the loop") from None
    bad = {}
    for (name, _), r, g in zip(named, ref, got):
        same = (r == g) | (np.isnan(r) & np.isnan(g)) if r.dtype.kind == "f" else r == g
        wrong = int((~same).sum())
        if wrong:
            bad[name] = wrong
    return CpuCheck(loop=plan.loop, parameters=tuple(n for n, _ in named), elements=total, seed=seed,
                    mismatches=bad)


def _planned(plan):
    """The source module with what ``auto_pipeline`` wrote: the annotation of each plan that was applied (or,
    with ``apply=False``, would be), innermost first; in a nest, a loop whose plan was not applied has no
    annotation (``auto_pipeline`` drops the nest's annotations before planning it), so the outer plan's
    statements are the ones it was planned on."""
    sch = s_tir.Schedule(plan.source)
    chain = _plan_chain(plan)
    rvs = [_loop_of(sch, p) for p in chain]  # before any change: LoopRVs stay valid while annotations change
    for p, rv in reversed(list(zip(chain, rvs))):
        if p.applied or not p.options.apply and not _changes_nothing(p.annotation):
            apply_annotation(sch, rv, p.annotation)
        elif len(chain) > 1:
            remove_annotation(sch, rv)
    return sch.mod


def _changes_nothing(ann) -> bool:
    """One stage in program order, no async stage: the loop as it is (``auto_pipeline`` writes no such plan)."""
    return ann.num_stages == 1 and list(ann.orders) == sorted(ann.orders) and not ann.async_stages


def _loop_of(sch, p):
    """The LoopRV of plan ``p``'s loop in ``sch``: the loop of that name in the plan's function, found by
    reference (``schedule_loops``), so a loop whose blocks have no name (``with T.sblock():``) is found too."""
    hits = [rv for fname, rv, node in schedule_loops(sch)
            if node.loop_var.name == p.loop and fname == p.extraction.func]
    if len(hits) != 1:
        raise UnsupportedLoopError(f"check_on_cpu: function '{p.extraction.func}' has {len(hits)} loops named "
                                   f"'{p.loop}': it runs a plan whose loop's name is unique in its function")
    return hits[0]


def _plan_chain(plan) -> list:
    """The plan and its nested plans, outermost first."""
    return [plan, *[q for p in plan.inner for q in _plan_chain(p)]]
