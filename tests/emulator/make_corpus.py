"""Regenerate the frozen PTX corpus of the emulator tests: ``tests/emulator/corpus/*.ptx`` + ``opcodes.txt``.

The corpus is what TVM 0.27 and nvcc 13 make of the kernels this project
generates, at small shapes:

* software-pipelined (SWP) tensor-core GEMMs (TVM's mma.sync schedule,
  ``workloads.tensorcore_gemm``, planned by ``auto_pipeline`` on both loops)
  for sm_80 and sm_86, and TVM's hand-written nested annotation (the inner
  ldmatrix/mma loop pipelined too, which the planner leaves alone at this size);
* warp-specialized (WS) GEMMs: the mma GEMM on sm_80 (cp.async + mbarrier),
  sm_90a and sm_100a (TMA), each also with two ordered consumer groups; the
  wgmma GEMM (``workloads.wgmma_gemm``) on sm_90a, plain (no pipeline, the
  WS TIR pipeline only), warp-specialized with the 128-byte swizzled rings and
  without swizzle;
* TVM's own dlight kernels for sm_80: Matmul (``workloads.dlight_gemm``; also
  re-planned by ``tvm_twill.integrations.dlight.AutoPipelined``), GEMV,
  a row sum (Reduction), RMSNorm and softmax (GeneralReduction), an
  elementwise kernel (Fallback) and the Matmul with a symbolic M.

Each kernel is kept as ``NAME.cu`` (the CUDA source TVM wrote) and
``NAME.ptx`` (``nvcc -ptx -lineinfo -arch=ARCH``, compiled from ``NAME.cu`` in
a fixed scratch folder whose path is then cut from the ``.file`` directive, so
it names only ``NAME.cu``).
``opcodes.txt`` lists every distinct opcode form (the opcode with all its
dot-modifiers, no operands, no predicate guard) of the corpus with its count,
sorted by form::

    python tests/emulator/make_corpus.py            # all kernels (a few minutes: TVM + the solver)
    python tests/emulator/make_corpus.py --only ws_sm80 --only dlight_gemv
    python tests/emulator/make_corpus.py --inventory-only   # rewrite opcodes.txt from the .ptx files

Deterministic: fixed shapes, the solver under its deterministic limits, and
no timestamps in the output (nvcc's PTX header names the compiler build only).
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
INVENTORY = HERE / "opcodes.txt"
ROOT = HERE.parents[1]

#: M = N = K of the mma.sync GEMMs (TVM's schedule: 128 x 128 block tiles, the grid sized to N).
MMA_N = 256
#: M = N = K of the wgmma GEMMs (64 x 128 block tiles, 64-wide K steps).
WGMMA_N = 256
#: The solver's seconds per loop (the answers are deterministic; this only bounds the search).
TIME_LIMIT = 20.0


# --- the kernels ------------------------------------------------------------------------------------------

def _mma_swp(arch: str):
    import tvm_twill
    from tvm_twill.workloads import tensorcore_gemm

    sch, k0, k1 = tensorcore_gemm(MMA_N)
    tvm_twill.auto_pipeline(sch, [k0, k1], arch, time_limit=TIME_LIMIT)
    return sch.mod, arch, "default"


def _mma_hand_nested():
    from tvm_twill.workloads import tensorcore_gemm

    sch, _, _ = tensorcore_gemm(MMA_N, hand="nested")  # the inner ldmatrix/mma loop pipelined too
    return sch.mod, "sm_80", "default"


def _mma_ws(arch: str, ordered: bool):
    import tvm_twill
    from tvm_twill.model.pipeline import WS_CONSUMER_ORDER
    from tvm_twill.workloads import tensorcore_gemm

    sch, k0, k1 = tensorcore_gemm(MMA_N)
    plan = tvm_twill.auto_pipeline(sch, [k0, k1], arch, time_limit=TIME_LIMIT, warp_specialize=True)
    if ordered:  # two consumer groups taking turns, group 1 first (the planner keeps one group here)
        sch.annotate(k0, WS_CONSUMER_ORDER, [1, 0])
    return sch.mod, arch, plan.tir_pipeline


def _wgmma(variant: str):
    import tvm_twill
    from tvm_twill.model.pipeline import WS_SWIZZLE
    from tvm_twill.transforms.pipelines import WS_PIPELINE
    from tvm_twill.workloads import wgmma_gemm

    sch, k0, _ = wgmma_gemm(WGMMA_N)
    if variant == "plain":
        return sch.mod, "sm_90a", WS_PIPELINE
    if variant == "noswizzle":
        sch.annotate(k0, WS_SWIZZLE, 0)
    plan = tvm_twill.auto_pipeline(sch, k0, "sm_90a", time_limit=TIME_LIMIT, warp_specialize=True)
    return sch.mod, "sm_90a", plan.tir_pipeline


def _dlight(rule_name: str, func):
    import tvm
    import tvm.s_tir.dlight as dl

    rule = {"matmul": dl.gpu.Matmul, "gemv": dl.gpu.GEMV, "reduction": dl.gpu.Reduction,
            "general": dl.gpu.GeneralReduction, "fallback": dl.gpu.Fallback}[rule_name]()
    mod = tvm.IRModule({"main": func})
    with tvm.target.Target({"kind": "cuda", "arch": "sm_80"}):
        mod = dl.ApplyDefaultSchedule(rule)(mod)
    return mod, "sm_80", "default"


def _gemv():
    from tvm import te

    w = te.placeholder((256, 512), "float16", name="W")
    x = te.placeholder((512,), "float16", name="x")
    k = te.reduce_axis((0, 512), name="k")
    y = te.compute((256,), lambda i: te.sum(w[i, k].astype("float32") * x[k].astype("float32"), axis=k), name="y")
    return te.create_prim_func([w, x, y])


def _row_sum():
    from tvm import te

    a = te.placeholder((64, 256), "float32", name="A")
    k = te.reduce_axis((0, 256), name="k")
    return te.create_prim_func([a, te.compute((64,), lambda i: te.sum(a[i, k], axis=k), name="S")])


def _rms_norm():
    from tvm import te

    x = te.placeholder((32, 256), "float16", name="X")
    g = te.placeholder((256,), "float16", name="G")
    k = te.reduce_axis((0, 256), name="k")
    sq = te.compute((32,), lambda i: te.sum(x[i, k].astype("float32") * x[i, k].astype("float32"), axis=k),
                    name="sq")
    y = te.compute((32, 256), lambda i, j: (x[i, j].astype("float32") * te.rsqrt(sq[i] / 256.0 + 1e-5)
                                            * g[j].astype("float32")).astype("float16"), name="Y")
    return te.create_prim_func([x, g, y])


def _softmax():
    from tvm import te, topi

    x = te.placeholder((32, 256), "float32", name="X")
    return te.create_prim_func([x, topi.nn.softmax(x, axis=1)])


def _elementwise():
    from tvm import te

    a = te.placeholder((64, 256), "float16", name="A")
    b = te.placeholder((64, 256), "float16", name="B")
    c = te.compute((64, 256), lambda i, j: te.max(a[i, j] * b[i, j] + a[i, j], te.const(0, "float16")), name="C")
    return te.create_prim_func([a, b, c])


def _dlight_gemm(m, twill: bool = False):
    import tvm.s_tir.dlight as dl

    from tvm_twill.integrations.dlight import AutoPipelined
    from tvm_twill.workloads import dlight_gemm

    rule = AutoPipelined(dl.gpu.Matmul()) if twill else None
    return dlight_gemm(m, 256, 256, arch="sm_80", rule=rule), "sm_80", "default"


#: name -> builder returning (IRModule, arch, TIR pipeline name).
KERNELS = {
    "swp_sm80": lambda: _mma_swp("sm_80"),
    "swp_sm86": lambda: _mma_swp("sm_86"),
    "swp_sm80_hand_nested": _mma_hand_nested,
    "ws_sm80": lambda: _mma_ws("sm_80", False),
    "ws_sm80_ordered": lambda: _mma_ws("sm_80", True),
    "ws_sm90a": lambda: _mma_ws("sm_90a", False),
    "ws_sm90a_ordered": lambda: _mma_ws("sm_90a", True),
    "ws_sm100a": lambda: _mma_ws("sm_100a", False),
    "wgmma_plain_sm90a": lambda: _wgmma("plain"),
    "wgmma_ws_sm90a": lambda: _wgmma("ws"),
    "wgmma_ws_noswizzle_sm90a": lambda: _wgmma("noswizzle"),
    "dlight_matmul": lambda: _dlight_gemm(256),
    "dlight_matmul_dynamic": lambda: _dlight_gemm("m"),
    "dlight_matmul_twill": lambda: _dlight_gemm(256, twill=True),
    "dlight_gemv": lambda: _dlight("gemv", _gemv()),
    "dlight_row_sum": lambda: _dlight("reduction", _row_sum()),
    "dlight_rms_norm": lambda: _dlight("general", _rms_norm()),
    "dlight_softmax": lambda: _dlight("general", _softmax()),
    "dlight_elementwise": lambda: _dlight("fallback", _elementwise()),
}


def cuda_source(mod, arch: str, pipeline: str) -> str:
    import tvm

    with tvm.transform.PassContext(config={"tirx.use_async_copy": 1}):
        f = tvm.compile(mod, target=tvm.target.Target({"kind": "cuda", "arch": arch}), tir_pipeline=pipeline)
    return f.mod.imports[0].inspect_source()


#: Where nvcc compiles: a fixed folder, because nvcc hashes the source's path into the names of internal
#: functions (the debug strings of -lineinfo), so a fresh temporary folder would change the PTX each run.
SCRATCH = Path(tempfile.gettempdir()) / "tvm_twill_corpus"


def nvcc_ptx(name: str, src: str, arch: str) -> str:
    SCRATCH.mkdir(exist_ok=True)
    cu, ptx = SCRATCH / f"{name}.cu", SCRATCH / f"{name}.ptx"
    cu.write_text(src)
    try:
        r = subprocess.run(["nvcc", "-ptx", "-lineinfo", f"-arch={arch}", "-o", ptx.name, cu.name],
                           cwd=SCRATCH, capture_output=True, text=True, check=False)
        if r.returncode:
            raise RuntimeError(f"nvcc -ptx failed on {name} ({arch}):\n{r.stderr[-2000:]}")
        return ptx.read_text().replace(f'"{SCRATCH.resolve()}/', '"')
    finally:
        cu.unlink(missing_ok=True)
        ptx.unlink(missing_ok=True)


# --- the opcode inventory ---------------------------------------------------------------------------------

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_LABEL = re.compile(r"^[$\w]+:\s*")
_GUARD = re.compile(r"^@!?%?[$\w]+\s+")
_OPCODE = re.compile(r"^[a-z][\w.:]*")


def opcode_forms(ptx: str) -> Counter:
    """Counter of opcode forms in a PTX text: every instruction statement, its label, predicate guard and
    operands dropped (``$L__BB0_2: @%p1 bra.uni $L__BB0_2;`` -> ``bra.uni``), inline-asm braces included
    (``{ .reg .pred p; setp.ne.b32 p, %r1, 0; ... }``).  Directives (``.reg``, ``.loc``, ``.param``,
    the debug sections, ...) are not instructions: a line that starts with a dot is dropped, and so is a
    statement that does."""
    text = _COMMENT.sub("", ptx)
    text = "\n".join(line for line in text.splitlines() if not line.strip().startswith("."))
    out: Counter = Counter()
    for stmt in text.split(";"):
        while True:
            before = stmt
            stmt = _GUARD.sub("", _LABEL.sub("", stmt.strip().lstrip("{}()").strip()))
            if stmt == before:
                break
        m = _OPCODE.match(stmt)
        if m and not stmt.startswith("."):
            out[m.group(0)] += 1
    return out


def write_inventory() -> Counter:
    total: Counter = Counter()
    for p in sorted(CORPUS.glob("*.ptx")):
        total += opcode_forms(p.read_text())
    lines = [f"{form} {n}" for form, n in sorted(total.items())]
    INVENTORY.write_text("\n".join(lines) + "\n")
    return total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", choices=sorted(KERNELS), help="regenerate only these kernels")
    ap.add_argument("--inventory-only", action="store_true", help="only rewrite opcodes.txt from the .ptx files")
    args = ap.parse_args(argv)
    if not args.inventory_only:
        sys.path.insert(0, str(ROOT))
        CORPUS.mkdir(exist_ok=True)
        for name in args.only or KERNELS:
            mod, arch, pipeline = KERNELS[name]()
            src = cuda_source(mod, arch, pipeline)
            (CORPUS / f"{name}.cu").write_text(src)
            (CORPUS / f"{name}.ptx").write_text(nvcc_ptx(name, src, arch))
            print(f"{name}: {arch}, TIR pipeline {pipeline}, {len(src)} B of CUDA", flush=True)
    total = write_inventory()
    size = sum(p.stat().st_size for p in CORPUS.iterdir())
    print(f"{len(total)} opcode forms, {sum(total.values())} instructions; corpus {size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
