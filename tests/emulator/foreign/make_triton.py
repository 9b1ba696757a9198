"""Regenerate the frozen Triton kernels of this folder (Triton is not a dependency of tvm_twill or its tests).

    python3 -m venv /tmp/triton && /tmp/triton/bin/pip install triton==3.9.0 numpy
    TRITON_DEFAULT_FP_FUSION=1 /tmp/triton/bin/python tests/emulator/foreign/make_triton.py

``triton.compile`` needs no GPU: the target is given (``GPUTarget("cuda", 80 | 90, 32)``).  The kernel is
Triton's tutorial matmul (``python/tutorials/03-matrix-multiplication.py``, MIT license), as written there,
with the arguments the tutorial's JIT would specialize: unit strides as constants, and the pointers,
sizes and row strides marked divisible by 16 (which is what lets Triton vectorize the loads into
cp.async).  Each kernel is written as ``<name>.ptx`` beside a ``<name>.json`` of what a launch needs
(warps, shared memory, the tile sizes, Triton's trailing scratch pointers).
"""
import json
import pathlib

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

HERE = pathlib.Path(__file__).resolve().parent


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                  GROUP_SIZE_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = accumulator.to(tl.float16)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


SIGNATURE = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
             "stride_am": "i32", "stride_ak": "constexpr", "stride_bk": "i32", "stride_bn": "constexpr",
             "stride_cm": "i32", "stride_cn": "constexpr"}
TILES = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}
DIVISIBLE_BY_16 = (0, 1, 2, 3, 4, 5, 6, 8, 10)   # the pointers, M, N, K and the row strides
KERNELS = {"triton_matmul_sm80": 80, "triton_matmul_sm90": 90}


def compile_one(cc: int):
    consts = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, **TILES}
    src = ASTSource(fn=matmul_kernel, signature={**SIGNATURE, **{k: "constexpr" for k in TILES}},
                    constexprs=consts, attrs={(i,): [["tt.divisibility", 16]] for i in DIVISIBLE_BY_16})
    return triton.compile(src, target=GPUTarget("cuda", cc, 32), options={"num_warps": 4, "num_stages": 3})


def main():
    for name, cc in KERNELS.items():
        k = compile_one(cc)
        (HERE / f"{name}.ptx").write_text(k.asm["ptx"])
        meta = {"kernel": k.metadata.name, "num_warps": k.metadata.num_warps, "shared": k.metadata.shared,
                "global_scratch_size": k.metadata.global_scratch_size,
                "profile_scratch_size": k.metadata.profile_scratch_size, "tiles": TILES,
                "triton": triton.__version__, "target": f"sm_{cc}"}
        (HERE / f"{name}.json").write_text(json.dumps(meta, indent=1) + "\n")
        print(name, meta["shared"], "bytes of shared memory")


if __name__ == "__main__":
    main()
