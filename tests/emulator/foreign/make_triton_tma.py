"""Regenerate the frozen Triton sm_90a TMA + wgmma matmuls of this folder (Triton is not a dependency).

    python3 -m venv /tmp/triton && /tmp/triton/bin/pip install triton==3.9.0 numpy
    TRITON_DEFAULT_FP_FUSION=1 /tmp/triton/bin/python tests/emulator/foreign/make_triton_tma.py

* ``triton_tma_matmul_sm90``: Triton's tutorial TMA matmul (``python/tutorials/09-persistent-matmul.py``,
  ``matmul_kernel_tma``, MIT license) with host-side tensor descriptors: TMA loads, wgmma, stmatrix and a
  TMA store.  A descriptor argument becomes a 128-byte ``CUtensorMap`` parameter followed by its shape
  (i32) and strides (i64), as Triton's launcher passes them (``make_tensordesc_arg``); the encode is
  ``cuTensorMapEncodeTiled`` with the metadata's block, swizzle 3 (128B), L2 promotion 128B.
* ``triton_tma_matmul_ws_sm90``: the same GEMM with device-side descriptors (``tl.make_tensor_descriptor``)
  and ``warp_specialize=True``: a producer warp group and two consumer warp groups (12 warps).  Triton 3.9
  ignores ``warp_specialize`` for host-side descriptors on sm_90 (the PTX is identical) and fails to
  compile the num_warps=4 variant, so the device-side form is the one that specializes.
"""
import json
import pathlib

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

HERE = pathlib.Path(__file__).resolve().parent
TILES = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64}


@triton.jit
def matmul_kernel_tma(a_desc, b_desc, c_desc, M, N, K, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                      BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    k_tiles = tl.cdiv(K, BLOCK_SIZE_K)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = pid_m * BLOCK_SIZE_M
    offs_bn = pid_n * BLOCK_SIZE_N
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in tl.range(k_tiles):
        offs_k = k * BLOCK_SIZE_K
        a = a_desc.load([offs_am, offs_k])
        b = b_desc.load([offs_bn, offs_k])
        accumulator = tl.dot(a, b.T, accumulator)
    c_desc.store([offs_am, offs_bn], accumulator.to(tl.float16))


@triton.jit
def matmul_kernel_ws(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                     BLOCK_SIZE_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_SIZE_N, BLOCK_SIZE_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_N])
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in tl.range(tl.cdiv(K, BLOCK_SIZE_K), warp_specialize=True):
        a = a_desc.load([pid_m * BLOCK_SIZE_M, k * BLOCK_SIZE_K])
        b = b_desc.load([pid_n * BLOCK_SIZE_N, k * BLOCK_SIZE_K])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([pid_m * BLOCK_SIZE_M, pid_n * BLOCK_SIZE_N], acc.to(tl.float16))


def compile_tma():
    desc = "tensordesc<fp16[128, 64]>"
    sig = {"a_desc": desc, "b_desc": desc, "c_desc": "tensordesc<fp16[128, 128]>", "M": "i32", "N": "i32",
           "K": "i32", **{k: "constexpr" for k in TILES}, "GROUP_SIZE_M": "constexpr"}
    src = ASTSource(fn=matmul_kernel_tma, signature=sig, constexprs={**TILES, "GROUP_SIZE_M": 8},
                    attrs={(i,): [["tt.divisibility", 16]] for i in (3, 4, 5)})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8, "num_stages": 3})


def compile_ws():
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
           **{k: "constexpr" for k in TILES}}
    src = ASTSource(fn=matmul_kernel_ws, signature=sig, constexprs=TILES,
                    attrs={(i,): [["tt.divisibility", 16]] for i in range(6)})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 3})


def main():
    for name, make in (("triton_tma_matmul_sm90", compile_tma), ("triton_tma_matmul_ws_sm90", compile_ws)):
        k = make()
        (HERE / f"{name}.ptx").write_text(k.asm["ptx"])
        md = k.metadata
        meta = {"kernel": md.name, "num_warps": md.num_warps, "shared": md.shared,
                "global_scratch_size": md.global_scratch_size, "global_scratch_align": md.global_scratch_align,
                "profile_scratch_size": md.profile_scratch_size, "tiles": TILES,
                "tensordesc_meta": getattr(md, "tensordesc_meta", None), "triton": triton.__version__,
                "target": "sm_90a"}
        (HERE / f"{name}.json").write_text(json.dumps(meta, indent=1) + "\n")
        print(name, md.num_warps, "warps,", md.shared, "bytes of shared memory")


if __name__ == "__main__":
    main()
