"""Regenerate the frozen CuTe kernel of this folder: CUTLASS 4.2's ``examples/cute/tutorial/sgemm_sm80.cu``
through nvcc 13, as its author wrote it (the ``nvidia-cutlass`` 4.2 package ships the source and headers).

    python tests/emulator/foreign/make_cute.py

Writes ``cute_sgemm_sm80.ptx``: the file's first kernel, its fp16 "TN" GEMM (``gemm_tn`` on ``half_t``: a
128 x 128 x 64 CTA tile, three cp.async stages, ldmatrix, mma.sync m16n8k16 with fp16 accumulators,
alpha / beta in fp16).  CuTe passes its shapes, strides and scalars as structs (``.b8`` array parameters).
"""
import pathlib
import re
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent


def cutlass_source() -> pathlib.Path:
    import cutlass_library   # the nvidia-cutlass package
    return pathlib.Path(cutlass_library.__file__).resolve().parent / "source"


def main():
    src = cutlass_source()
    out = HERE / "cute_sgemm_sm80.full.ptx"
    subprocess.run(["nvcc", "-ptx", "-arch=sm_80", "-std=c++17", f"-I{src / 'include'}",
                    f"-I{src / 'tools' / 'util' / 'include'}", str(src / "examples/cute/tutorial/sgemm_sm80.cu"),
                    "-o", str(out)], check=True)
    text = out.read_text()
    out.unlink()
    starts = [m.start() for m in re.finditer(r"^(\.visible )?\.entry ", text, re.M)]
    bodies = [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]
    gemm = [b for b in bodies if "gemm_device" in b.split("(", 1)[0] and "F16F16F16F16" in b.split("(", 1)[0]]
    if len(gemm) != 1:
        sys.exit(f"expected one fp16 gemm_device kernel in sgemm_sm80.cu, found {len(gemm)}")
    (HERE / "cute_sgemm_sm80.ptx").write_text(text[:starts[0]] + gemm[0].rstrip() + "\n")
    print("cute_sgemm_sm80.ptx:", gemm[0].split("(", 1)[0].split()[-1][:60], "...")


if __name__ == "__main__":
    sys.exit(main())
