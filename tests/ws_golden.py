"""Golden CUDA of every warp-specialized (WS) kernel kind: regenerate, save, and diff against a saved set.

A refactor of the WS transform must not change what it emits.  This script
builds every WS kernel kind with ``tests/emulator/make_corpus.py``'s builders
(the mma.sync GEMM on sm_80 / sm_90a / sm_100a, the ordered-consumer-group
variants, the wgmma GEMM plain, warp-specialized with and without the swizzled
rings) and the mma.sync GEMM at 1024 (``--big``), writes each kernel's CUDA
source, and compares it byte for byte with a reference folder::

    python tests/ws_golden.py --save /tmp/ws_ref          # before the change
    python tests/ws_golden.py --diff /tmp/ws_ref          # after: exit 1 on any difference

Deterministic: the builders use fixed shapes and the solver's deterministic limits.
"""
from __future__ import annotations

import argparse
import difflib
import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: The WS kinds of the emulator corpus (their .cu files under tests/emulator/corpus/ are a reference too).
CORPUS_KINDS = ("ws_sm80", "ws_sm80_ordered", "ws_sm90a", "ws_sm90a_ordered", "ws_sm100a",
                "wgmma_plain_sm90a", "wgmma_ws_sm90a", "wgmma_ws_noswizzle_sm90a")
#: The mma.sync GEMM at M = N = K = 1024 (``--big``), WS on each arch.
BIG_ARCHS = ("sm_80", "sm_90a", "sm_100a")


def make_corpus():
    spec = importlib.util.spec_from_file_location("make_corpus", HERE / "emulator" / "make_corpus.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _big(mc, arch: str):
    import tvm_twill
    from tvm_twill.workloads import tensorcore_gemm

    sch, k0, k1 = tensorcore_gemm(1024)
    plan = tvm_twill.auto_pipeline(sch, [k0, k1], arch, time_limit=mc.TIME_LIMIT, warp_specialize=True)
    return sch.mod, arch, plan.tir_pipeline


def builders(big: bool) -> dict:
    """name -> builder returning (IRModule, arch, TIR pipeline name)."""
    mc = make_corpus()
    out = {k: mc.KERNELS[k] for k in CORPUS_KINDS}
    if big:
        out.update({f"ws_big_{a}": (lambda a=a: _big(mc, a)) for a in BIG_ARCHS})
    return out


def generate(names=None, big: bool = False) -> dict:
    """name -> CUDA source of each WS kind (all kinds, or ``names``)."""
    sys.path.insert(0, str(ROOT))
    mc = make_corpus()
    table = builders(big)
    return {n: mc.cuda_source(*table[n]()) for n in (names or table)}


def diff(ref: Path, sources: dict) -> list[str]:
    """Unified diffs of every kind whose source differs from ``ref/NAME.cu`` (or is missing there)."""
    out = []
    for name, src in sources.items():
        path = ref / f"{name}.cu"
        old = path.read_text() if path.exists() else ""
        if old != src:
            out.append("".join(difflib.unified_diff(old.splitlines(True), src.splitlines(True),
                                                    f"ref/{name}.cu", f"new/{name}.cu")))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--save", type=Path, help="write NAME.cu of every kind into this folder")
    g.add_argument("--diff", type=Path, help="compare every kind with NAME.cu in this folder")
    ap.add_argument("--only", action="append", help="only these kinds")
    ap.add_argument("--big", action="store_true", help="also the mma.sync GEMM at 1024 on each arch")
    args = ap.parse_args(argv)
    sources = generate(args.only, args.big)
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
        for name, src in sources.items():
            (args.save / f"{name}.cu").write_text(src)
            print(f"{name}: {len(src)} B", flush=True)
        return 0
    diffs = diff(args.diff, sources)
    for name in sources:
        print(f"{name}: {'differs' if any(f'new/{name}.cu' in d for d in diffs) else 'identical'}")
    for d in diffs:
        print(d)
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
