"""SASS of the warp-specialized GEMM: is the role dispatch warp-uniform (issue #8)?

For each arch (default sm_80 and sm_90a) it plans TVM's tensor-core GEMM (``workloads.tensorcore_gemm``,
n=1024) with ``auto_pipeline(..., warp_specialize=True)``, compiles it with TVM (``compile_cuda``), then
builds three variants of the emitted CUDA source with ``nvcc -arch=ARCH -cubin -Xptxas -v`` and reads
their SASS (``cuobjdump -sass``, ``tvm_twill.compiler.sass.role_report``):

* ``shfl``: the source as emitted (the warp index ``ws_warp = __shfl_sync(0xffffffff, w, 0, 32)``);
* ``plain``: the control, ``__shfl_sync(...)`` replaced by its argument ``w`` (the warp index itself:
  ``threadIdx.y`` here, blockDim.x is 32; ``threadIdx.x >> 5`` in a 1-D block), text replacement;
* ``redux``: a tried alternative, ``__reduce_min_sync(0xffffffff, w)`` (``redux.sync``: its result is
  written to a uniform register on sm_80+).

It prints a table (registers from ptxas; the role-dispatch compares and branches; uniform or not; ELECT,
USETMAXREG, R2UR counts; branches uniform/total; BRA.U.ANY loops); only with ``--save`` (or ``--out
DIR``) it writes ``ws_sass.md`` (default folder ``bench/results/``) with the commit, the nvcc and
cuobjdump versions and the command line.  Needs nvcc and cuobjdump (``pip install 'tvm-twill[sass]'``).

    python bench/ws_sass.py
    python bench/ws_sass.py --save
"""
from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from common import git_commit  # noqa: E402

try:
    import tvm_twill  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT))

import tvm_twill  # noqa: E402
from tvm_twill.compiler.sass import (disassemble, find_cuobjdump, parse_sass, role_report,  # noqa: E402
                                       tool_version)

_SHFL = re.compile(r"__shfl_sync\(\(uint\)4294967295, (\([^;]*?\)), 0, 32\)")
VARIANTS = ("shfl", "plain", "redux")


def variant_source(src: str, variant: str) -> str:
    """The emitted source, or its warp-index broadcast replaced (see the module docstring)."""
    if variant == "shfl":
        return src
    if len(_SHFL.findall(src)) != 1:
        raise ValueError("expected exactly one __shfl_sync warp-index broadcast in the kernel source")
    repl = r"\1" if variant == "plain" else r"((int)__reduce_min_sync(0xffffffffu, (unsigned)\1))"
    return _SHFL.sub(repl, src)


def ws_source(arch: str, n: int) -> str:
    from tvm_twill.frontend.lowering import compile_cuda
    from tvm_twill.workloads import tensorcore_gemm
    sch, k0, k1 = tensorcore_gemm(n)
    plan = tvm_twill.auto_pipeline(sch, [k0, k1], arch, warp_specialize=True)
    if not (plan.applied and plan.warp_specialization and plan.warp_specialization.chosen):
        raise RuntimeError(f"{arch}: the plan is not warp-specialized")
    return compile_cuda(sch, arch, tir_pipeline=plan.tir_pipeline)[1]


def nvcc_cubin(src: str, arch: str, folder: Path, nvcc: str) -> tuple[Path, int]:
    """Compile ``src``; returns the cubin and ptxas's register count."""
    cu, cubin = folder / "k.cu", folder / "k.cubin"
    cu.write_text(src)
    r = subprocess.run([nvcc, f"-arch={arch}", "-cubin", "-Xptxas", "-v", "-o", str(cubin), str(cu)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"nvcc failed for {arch}: {r.stderr[-2000:]}")
    return cubin, int(re.search(r"Used (\d+) registers", r.stdout + r.stderr).group(1))


def measure(arch: str, n: int, nvcc: str, cuobjdump: str) -> list[dict]:
    src = ws_source(arch, n)
    rows = []
    for v in VARIANTS:
        with tempfile.TemporaryDirectory() as d:
            cubin, regs = nvcc_cubin(variant_source(src, v), arch, Path(d), nvcc)
            fns = parse_sass(disassemble(cubin, cuobjdump))
        rep = role_report(fns[0])
        rows.append({"arch": arch, "variant": v, "registers": regs, "report": rep})
    return rows


def table(rows: list[dict]) -> str:
    head = ("| arch | variant | registers | role dispatch (compare ; branch) | uniform | ELECT | USETMAXREG | R2UR "
            "| uniform / all branches | BRA.U.ANY loops |")
    out = [head, "| " + " | ".join("---" for _ in range(10)) + " |"]
    for r in rows:
        rep = r["report"]
        disp = "<br>".join(f"`{line}`" for line in rep.lines()) or "(none found)"
        out.append(f"| {r['arch']} | {r['variant']} | {r['registers']} | {disp} | {'yes' if rep.uniform else 'no'} "
                   f"| {rep.elect} | {rep.usetmaxreg} | {rep.r2ur} | {rep.uniform_branches} / {rep.branches} "
                   f"| {rep.waterfalls} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--archs", nargs="+", default=["sm_80", "sm_90a"])
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--save", action="store_true", help="write ws_sass.md to bench/results/")
    ap.add_argument("--out", default=None, metavar="DIR", help="folder for the results (implies --save)")
    args = ap.parse_args(argv)
    nvcc = shutil.which("nvcc") or next((p for p in ("/usr/local/cuda/bin/nvcc",) if Path(p).exists()), None)
    cuobjdump = find_cuobjdump()
    if nvcc is None or cuobjdump is None:
        print(f"needs nvcc ({nvcc}) and cuobjdump ({cuobjdump}): pip install 'tvm-twill[sass]'", file=sys.stderr)
        return 2
    rows = [row for arch in args.archs for row in measure(arch, args.size, nvcc, cuobjdump)]
    text = table(rows)
    print(text)
    if not (args.save or args.out):
        print("not saved (pass --save to record this table in bench/results/)")
        return 0
    command = "python bench/ws_sass.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None
                                                                              else sys.argv[1:]))
    md = [
        "# SASS of the warp-specialized GEMM: role dispatch",
        "",
        f"- command: `{command.strip()}`",
        f"- commit: `{git_commit()}`",
        f"- nvcc: {tool_version(nvcc)}; cuobjdump: {tool_version(cuobjdump)}",
        f"- kernel: `workloads.tensorcore_gemm({args.size})`, `auto_pipeline(..., warp_specialize=True)`, "
        "`nvcc -arch=ARCH -cubin -Xptxas -v`, `cuobjdump -sass`, `tvm_twill.compiler.sass.role_report`",
        "- variants: `shfl` as emitted (`ws_warp = __shfl_sync(0xffffffff, w, 0, 32)`); `plain` the control, "
        "the call replaced by its argument `w` (the warp index, `threadIdx.y`: blockDim.x is 32); `redux` "
        "`__reduce_min_sync(0xffffffff, w)`",
        "- uniform: every role branch is guarded by a uniform predicate (`@UPx`) or is a `.U` branch; "
        "BRA.U.ANY loops: ptxas's loops (`@P0 ELECT P1` / `@P1 R2UR` / `@P0 BRA.U.ANY` back) that issue an "
        "instruction needing uniform operands once per distinct per-lane value; their ELECTs are counted in "
        "ELECT",
        "",
        text,
        "",
    ]
    out = Path(args.out) if args.out else ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "ws_sass.md").write_text("\n".join(md))
    print(f"wrote {out / 'ws_sass.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
