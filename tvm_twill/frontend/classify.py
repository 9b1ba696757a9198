"""What one leaf block of a statement does: its class, and the work in it.

Classes, from what the block computes (first match wins):

==============  ===================================================================  ===========
kind            recognised by                                                        runs on
==============  ===================================================================  ===========
``mma``         an mma / wgmma intrinsic call, or a reduction block                  tensor cores
                multiply-accumulating fp16/bf16/fp8/int8 inputs that will be
                tensorized: it reads or writes a tensor-core fragment scope
                (``warp``, ``wmma.*``, ``m16n8k8.*``) or carries MetaSchedule's
                ``meta_schedule.auto_tensorize`` annotation
``sfu``         exp, exp2, log, tanh, rsqrt ... calls                                SFU (MUFU)
``shuffle``     warp shuffles (``tvm_warp_shuffle*``): a shuffle reduction           CUDA cores
``copy``        a plain load->store from global to shared (cp.async, TMA)           copy engine
``fma``         ``x = x + a * b`` on fp32 or wider values (or a reduction block      CUDA cores
                doing it): a SIMT FMA loop; also a low-precision multiply-accumulate
                with neither mark of tensorization (fp16 inputs converted, then
                fp32 FMAs: a SIMT kernel such as ``kernels.fa_forward``)
``store``       writes global memory (an epilogue: bias, activation, the store)      CUDA cores
``ldmatrix``    reads shared, writes registers, computes nothing else                shared port
``alu``         anything else (elementwise work)                                     CUDA cores
==============  ===================================================================  ===========

A low-precision multiply-accumulate not marked for tensorizing is costed as what a SIMT kernel runs:
each input converted to fp32, then one fp32 FMA, at the machine's ``fma_per_clock`` (the CUDA
programming guide's arithmetic-throughput table: 64 per clock per SM on sm_80, 128 on sm_86 and later;
docs/machines.md).  The conversions are not charged, so such a loop's predicted throughput is at most the
CUDA cores' peak (2 x fma_per_clock x SMs x clock: 19.5 TFLOPS on A100, 61.8 on H100).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .cp_async import plain_copy
from .ir import branches, const_int, is_register, is_shared, tirx, tvm, tvm_ffi

__all__ = ["LeafWork", "classify", "describe", "leaf_work", "plain_copy", "predicate_fraction", "uses_tensor_core"]

_SFU_FUNCS = {"exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "tanh", "sigmoid", "sqrt", "rsqrt",
              "erf", "sin", "cos", "tan", "pow", "fast_exp", "fast_erf", "fast_tanh"}
_SHAPE = re.compile(r"m(\d+)n(\d+)k(\d+)")
_TC_DTYPES = ("float16", "bfloat16", "float8", "int8", "uint8", "int4")
#: Register scopes of tensor-core fragments (TVM's wmma, mma.sync and ldmatrix intrinsics operate on them).
_FRAGMENT = re.compile(r"warp$|wmma\.|m\d+n\d+k\d+\.")
#: MetaSchedule's block annotation: the intrinsic its RewriteTensorize postprocessor puts in the block's place.
AUTO_TENSORIZE = "meta_schedule.auto_tensorize"


@dataclass
class LeafWork:
    """Work of one instance of a leaf block: tensor-core FLOP, MUFU calls, shuffles (per thread
    that runs them), FMAs, and tensor-core instructions by kind ("mma" / "wgmma")."""

    flops: float = 0.0
    sfu: float = 0.0
    shuffles: float = 0.0
    fmas: float = 0.0
    mma_instructions: float = 0.0


def _calls(node):
    out = []
    tvm_ffi.structural_walk(node, [(tvm.ir.expr.Call, lambda c: out.append(c))])
    return out


def _op_name(call) -> str:
    return getattr(call.op, "name", "") or ""


def _mma_flops(call) -> float | None:
    """FLOPs of one warp/warpgroup-level mma call, or None if it is not one."""
    name = _op_name(call)
    short = name.split(".")[-1]
    if "mma" not in name or any(w in short for w in ("fill", "store", "load", "ldmatrix", "fence", "commit",
                                                      "wait", "arrive", "descriptor")):
        return None
    for a in call.args:
        if isinstance(a, tvm.ir.expr.StringImm):
            m = _SHAPE.fullmatch(str(a.value))
            if m:
                return 2.0 * int(m.group(1)) * int(m.group(2)) * int(m.group(3))
    return 2.0 * 16 * 16 * 16  # wmma (tvm_mma_sync) fragments are 16x16x16


def uses_tensor_core(stmt) -> bool:
    """Does ``stmt`` (any TIR node) issue a tensor-core MMA (mma.sync, wgmma, wmma)?  The same test as the
    ``mma`` class: what the front-end costs on the tensor core is what the warp-specialization transform
    puts in a turn of ordered consumer groups (``transforms.ws.consumer_order``)."""
    return any(_mma_flops(c) is not None for c in _calls(stmt))


def leaf_work(block) -> LeafWork:
    """The work of one instance of a leaf block.

    Loops inside the block multiply the calls they enclose, except thread-bound
    loops around a warp-level intrinsic: the warp issues it together.
    """
    w = LeafWork()

    def visit(stmt, mult, in_threads):
        if isinstance(stmt, tirx.For):
            ext = const_int(stmt.extent) or 1
            if stmt.kind == tirx.ForKind.THREAD_BINDING:
                visit(stmt.body, mult, in_threads * ext)
            else:
                visit(stmt.body, mult * ext, in_threads)
            return
        if isinstance(stmt, (tirx.Evaluate, tirx.BufferStore)):
            for c in _calls(stmt):
                f = _mma_flops(c)
                short = _op_name(c).split(".")[-1]
                if f is not None:
                    w.flops += mult * f
                    w.mma_instructions += mult
                elif short in _SFU_FUNCS:
                    w.sfu += mult * in_threads
                elif short.startswith("tvm_warp_shuffle"):
                    w.shuffles += mult * in_threads
            if isinstance(stmt, tirx.BufferStore) and _is_fma_update(stmt):
                w.fmas += mult * in_threads
            return
        for c in branches(stmt):  # a guarded statement: both branches counted (an upper bound)
            visit(c, mult, in_threads)

    visit(block.body, 1.0, 1)
    return w


def predicate_fraction(pred, loops) -> float:
    """The share of the instances of a block that its predicate (``T.where``) keeps: 1 unless ``pred`` is a
    conjunction of bounds ``v < c`` / ``v <= c`` / ``c > v`` / ``c >= v`` (``v`` one of ``loops``' variables, a
    constant range), each keeping its share of ``v``'s range (e.g. ``tx < 64`` over 128 threads: half the
    threads run the block).  Anything else counts every instance (an upper bound of the work)."""
    if pred is None or const_int(pred) == 1:
        return 1.0
    if isinstance(pred, tirx.And):
        return predicate_fraction(pred.a, loops) * predicate_fraction(pred.b, loops)
    flip = {tirx.GT: tirx.LT, tirx.GE: tirx.LE}
    kind, var, bound = type(pred), getattr(pred, "a", None), getattr(pred, "b", None)
    if kind in flip:
        kind, var, bound = flip[kind], bound, var
    c = const_int(bound) if bound is not None else None
    loop = next((f for f in loops if isinstance(var, tirx.Var) and f.loop_var.same_as(var)), None)
    if kind not in (tirx.LT, tirx.LE) or c is None or loop is None:
        return 1.0
    lo, ext = const_int(loop.min), const_int(loop.extent)
    if lo is None or not ext:
        return 1.0
    kept = min(max(c + (kind is tirx.LE) - lo, 0), ext)
    return kept / ext


def _is_fma_update(store) -> bool:
    """``X[i] = X[i] + (... * ...)`` (either operand order): a multiply-accumulate."""
    v = store.value
    if not isinstance(v, tvm.ir.prim.expr.Add):
        return False
    muls: list = []
    for acc, other in ((v.a, v.b), (v.b, v.a)):
        if isinstance(acc, tvm.ir.expr.TensorLoad) and acc.source.same_as(store.buffer):
            tvm_ffi.structural_walk(other, [(tvm.ir.prim.expr.Mul, muls.append)])
    return bool(muls)


def _mac_reduction(block, scopes: set) -> str | None:
    """"tc" for a reduction block multiply-accumulating low-precision inputs that will be tensorized
    (``scopes``, the scopes it reads and writes, hold a tensor-core fragment, or it carries
    ``AUTO_TENSORIZE``), "fma" for any other multiply-accumulate reduction (SIMT code), else None."""
    if not any(int(iv.iter_type) == 2 for iv in block.iter_vars):  # 2 = CommReduce
        return None
    if not isinstance(block.body, tirx.BufferStore):
        return None
    muls = []
    tvm_ffi.structural_walk(block.body.value, [(tvm.ir.prim.expr.Mul, lambda m: muls.append(m))])
    if not muls:
        return None
    if not any(str(r.source.dtype).startswith(_TC_DTYPES) for r in block.reads):
        return "fma"
    tensorized = AUTO_TENSORIZE in block.annotations or any(_FRAGMENT.match(s) for s in scopes)
    return "tc" if tensorized else "fma"


def classify(block, work: LeafWork, read_scopes: set, write_scopes: set, plain: bool) -> str:
    """The class of a leaf block (module docstring), from its work and the scopes it reads/writes."""
    mac = _mac_reduction(block, read_scopes | write_scopes)
    if work.flops == 0 and mac == "tc":
        work.flops = 2.0
    if work.fmas == 0 and mac == "fma":
        work.fmas = 1.0
    if work.flops > 0:
        return "mma"
    if work.sfu > 0:
        return "sfu"
    if work.shuffles > 0:
        return "shuffle"
    if plain and "global" in read_scopes and any(is_shared(s) for s in write_scopes):
        return "copy"
    if work.fmas > 0:
        return "fma"
    if "global" in write_scopes:
        return "store"
    if any(is_shared(s) for s in read_scopes) and write_scopes and all(is_register(s) for s in write_scopes):
        return "ldmatrix"
    return "alu"


_WHAT = {"copy": "global->shared copy", "ldmatrix": "shared->register load (ldmatrix)",
         "mma": "tensor-core GEMM", "fma": "SIMT FMA on the CUDA cores", "sfu": "special-function (SFU) math",
         "shuffle": "shuffle reduction", "store": "epilogue store to global memory", "alu": "ALU work",
         "empty": "no work"}


def describe(kind, kinds, copy_bytes, async_ok, copy_label="") -> str:
    """One phrase for a statement: what its leaves do, and its copy traffic."""
    if kind == "mixed":
        text = "loop of " + " + ".join(_WHAT[k] for k in kinds)
    else:
        text = _WHAT.get(kind, kind)
    if copy_bytes:
        text += f", {copy_bytes:.0f} B per iteration" + (" (cp.async-capable)" if async_ok else "")
        if copy_label:
            text += f", {copy_label}"
    return text
