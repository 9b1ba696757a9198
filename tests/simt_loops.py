"""s_tir loops that run on CUDA cores (no tensor core): a SIMT GEMM, a GEMM + bias + ReLU and an
implicit-GEMM convolution, each as one pipelined loop whose copies stage global tiles in shared
memory.  Plain serial loops (no thread bindings), so they also compile for llvm and run on the CPU."""
from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def simt_gemm(A: T.Buffer((16, 64), "float32"), B: T.Buffer((64, 16), "float32"),
              C: T.Buffer((16, 16), "float32")):
    # C = A B, fp32 on the CUDA cores: k in tiles of 8, each tile of A and B staged in shared memory
    with T.sblock("root"):
        acc = T.sblock_alloc_buffer((16, 16), "float32", scope="local")
        for i, j in T.grid(16, 16):
            with T.sblock("init"):
                acc[i, j] = T.float32(0)
        for ko in T.serial(8):
            with T.sblock("body"):
                AS = T.sblock_alloc_buffer((16, 8), "float32", scope="shared")
                BS = T.sblock_alloc_buffer((8, 16), "float32", scope="shared")
                for i, kk in T.grid(16, 8):
                    with T.sblock("A_shared"):
                        AS[i, kk] = A[i, ko * 8 + kk]
                for kk, j in T.grid(8, 16):
                    with T.sblock("B_shared"):
                        BS[kk, j] = B[ko * 8 + kk, j]
                for i, j, kk in T.grid(16, 16, 8):
                    with T.sblock("fma"):
                        acc[i, j] = acc[i, j] + AS[i, kk] * BS[kk, j]
        for i, j in T.grid(16, 16):
            with T.sblock("store"):
                C[i, j] = acc[i, j]


@T.prim_func(s_tir=True)
def gemm_bias_relu(A: T.Buffer((16, 32), "float32"), W: T.Buffer((32, 64), "float32"),
                   bias: T.Buffer((64,), "float32"), Y: T.Buffer((16, 64), "float32")):
    # Y = relu(A W + bias), one loop over column tiles of 8: A is staged once; each iteration stages
    # W's tile and the bias slice, accumulates on the CUDA cores, then the epilogue (bias, ReLU, store)
    with T.sblock("root"):
        AS = T.sblock_alloc_buffer((16, 32), "float32", scope="shared")
        for i, k in T.grid(16, 32):
            with T.sblock("A_shared"):
                AS[i, k] = A[i, k]
        for jo in T.serial(8):
            with T.sblock("body"):
                WS = T.sblock_alloc_buffer((32, 8), "float32", scope="shared")
                BS = T.sblock_alloc_buffer((8,), "float32", scope="shared")
                acc = T.sblock_alloc_buffer((16, 8), "float32", scope="local")
                for k, j in T.grid(32, 8):
                    with T.sblock("W_shared"):
                        WS[k, j] = W[k, jo * 8 + j]
                for j in range(8):
                    with T.sblock("bias_shared"):
                        BS[j] = bias[jo * 8 + j]
                for i, j in T.grid(16, 8):
                    with T.sblock("init"):
                        acc[i, j] = T.float32(0)
                for i, j, k in T.grid(16, 8, 32):
                    with T.sblock("fma"):
                        acc[i, j] = acc[i, j] + AS[i, k] * WS[k, j]
                for i, j in T.grid(16, 8):
                    with T.sblock("epilogue"):
                        Y[i, jo * 8 + j] = T.max(acc[i, j] + BS[j], T.float32(0))


@T.prim_func(s_tir=True)
def conv_implicit_gemm(X: T.Buffer((34, 8), "float32"), Wt: T.Buffer((3, 8, 16), "float32"),
                       Y: T.Buffer((32, 16), "float32")):
    # 1-d convolution as an implicit GEMM: Y[n, co] = sum over r, ci of X[n + r, ci] Wt[r, ci, co];
    # the reduction loop runs over the filter taps r: each iteration gathers the shifted input window
    # (the im2col tile, never materialized in global memory) and the tap's weights into shared memory
    with T.sblock("root"):
        acc = T.sblock_alloc_buffer((32, 16), "float32", scope="local")
        for n, co in T.grid(32, 16):
            with T.sblock("init"):
                acc[n, co] = T.float32(0)
        for r in T.serial(3):
            with T.sblock("body"):
                XS = T.sblock_alloc_buffer((32, 8), "float32", scope="shared")
                WS = T.sblock_alloc_buffer((8, 16), "float32", scope="shared")
                for n, ci in T.grid(32, 8):
                    with T.sblock("im2col"):
                        XS[n, ci] = X[n + r, ci]
                for ci, co in T.grid(8, 16):
                    with T.sblock("W_shared"):
                        WS[ci, co] = Wt[r, ci, co]
                for n, co, ci in T.grid(32, 16, 8):
                    with T.sblock("fma"):
                        acc[n, co] = acc[n, co] + XS[n, ci] * WS[ci, co]
        for n, co in T.grid(32, 16):
            with T.sblock("store"):
                Y[n, co] = acc[n, co]
