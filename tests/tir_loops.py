"""Small s_tir loops shared by the front-end, API and MetaSchedule tests
(shaped like those of TVM's InjectSoftwarePipeline tests)."""
import pytest

pytest.importorskip("tvm")

from tvm.script import tirx as T  # noqa: E402


@T.prim_func(s_tir=True)
def dynamic_compute(a_handle: T.handle, c_handle: T.handle):
    k = T.int32()
    A = T.match_buffer(a_handle, (16, k), "float32")
    C = T.match_buffer(c_handle, (16, k), "float32")
    for tx in T.thread_binding(0, 16, thread="threadIdx.x"):
        for i in T.serial(0, k):
            with T.sblock("compute"):
                T.reads(A[tx, i])
                T.writes(C[tx, i])
                B = T.sblock_alloc_buffer((16, 1), dtype="float32", scope="shared")
                with T.sblock():
                    T.reads(A[tx, i])
                    T.writes(B[tx, 0])
                    B[tx, 0] = A[tx, i] * T.float32(2)
                with T.sblock():
                    T.reads(B[tx, 0])
                    T.writes(C[tx, i])
                    C[tx, i] = B[tx, 0] + T.float32(1)


@T.prim_func(s_tir=True)
def single_statement(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    for tx in T.thread_binding(0, 16, thread="threadIdx.x"):
        for i in T.serial(0, 16):
            with T.sblock("compute"):
                T.reads(A[tx, i])
                T.writes(C[tx, i])
                C[tx, i] = A[tx, i] + T.float32(1)


@T.prim_func(s_tir=True)
def with_control_flow(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    for tx in T.thread_binding(0, 16, thread="threadIdx.x"):
        for i in T.serial(0, 16):
            with T.sblock("compute"):
                T.reads(A[tx, i])
                T.writes(C[tx, i])
                B = T.sblock_alloc_buffer((16, 1), dtype="float32", scope="shared")
                with T.sblock():
                    T.reads(A[tx, i])
                    T.writes(B[tx, 0])
                    B[tx, 0] = A[tx, i] * T.float32(2)
                if i % 2 == 0:
                    with T.sblock():
                        T.reads(B[tx, 0])
                        T.writes(C[tx, i])
                        C[tx, i] = B[tx, 0] + T.float32(1)


@T.prim_func(s_tir=True)
def register_only(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    """Two statements through a register tile: no global->shared copy (nothing for a producer warp)."""
    for tx in T.thread_binding(0, 16, thread="threadIdx.x"):
        for i in T.serial(0, 16):
            with T.sblock("compute"):
                T.reads(A[tx, i])
                T.writes(C[tx, i])
                B = T.sblock_alloc_buffer((16, 1), dtype="float32", scope="local")
                with T.sblock():
                    T.reads(A[tx, i])
                    T.writes(B[tx, 0])
                    B[tx, 0] = A[tx, i] * T.float32(2)
                with T.sblock():
                    T.reads(B[tx, 0])
                    T.writes(C[tx, i])
                    C[tx, i] = B[tx, 0] + T.float32(1)


@T.prim_func(s_tir=True)
def short_loop(A: T.Buffer((2,), "float32"), E: T.Buffer((2,), "float32")):
    # TVM's test_less_loop_than_num_stage (PR 17579): 2 iterations, a 4-statement chain
    for i in T.serial(0, 2):
        with T.sblock("compute"):
            B = T.sblock_alloc_buffer((1,), dtype="float32", scope="shared")
            C = T.sblock_alloc_buffer((1,), dtype="float32", scope="shared")
            D = T.sblock_alloc_buffer((1,), dtype="float32", scope="shared")
            with T.sblock():
                B[0] = A[i] * T.float32(2)
            with T.sblock():
                C[0] = B[0] + T.float32(3)
            with T.sblock():
                D[0] = C[0] + T.float32(4)
            with T.sblock():
                E[i] = D[0] + T.float32(5)


@T.prim_func(s_tir=True)
def strided_shared(A: T.Buffer((48, 8), "float32"), C: T.Buffer((48, 8), "float32"), D: T.Buffer((48,), "float32")):
    """A loop of step 2 (20 iterations) over a shared buffer TVM does not version (allocated outside, read
    after the loop): 'use' reads SG[i + 4], which 'write' overwrites 2 iterations later (i grows by 2)."""
    SG = T.sblock_alloc_buffer((48,), "float32", scope="shared")
    for k in range(48):
        with T.sblock("init"):
            SG[k] = T.Cast("float32", k)
    for i in T.serial(0, 40, step=2):
        with T.sblock("body"):
            for j in range(8):
                with T.sblock("use"):
                    C[i, j] = SG[i + 4] + A[i, j]
            with T.sblock("write"):
                SG[i] = A[i, 0] * T.float32(2)
    for k in range(48):
        with T.sblock("after"):
            D[k] = SG[k]


@T.prim_func(s_tir=True)
def strided_nest(a: T.handle, c: T.handle, n: T.int32):
    """An inner loop whose min is symbolic (an outer variable and a parameter) and whose step is 3, over a
    2-d parameter: 'rd' reads G[o, i + 6, :], which 'wr' writes 2 iterations later."""
    G = T.match_buffer(a, (4, 64, 4), "float32")
    C = T.match_buffer(c, (4, 64, 4), "float32")
    for o in range(4):
        for i in T.serial(o + n, o + n + 30, step=3):
            with T.sblock("body"):
                for j in range(4):
                    with T.sblock("rd"):
                        C[o, i, j] = G[o, i + 6, j] * T.float32(2)
                for j in range(4):
                    with T.sblock("wr"):
                        G[o, i, j] = C[o, i, j] + T.float32(1)


@T.prim_func(s_tir=True)
def symbolic_chain(a: T.handle, e: T.handle):
    """short_loop with a symbolic trip count n (runs on the CPU): a 4-statement chain through shared tiles."""
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    E = T.match_buffer(e, (n,), "float32")
    for i in T.serial(0, n):
        with T.sblock("compute"):
            B = T.sblock_alloc_buffer((1,), dtype="float32", scope="shared")
            C = T.sblock_alloc_buffer((1,), dtype="float32", scope="shared")
            D = T.sblock_alloc_buffer((1,), dtype="float32", scope="shared")
            with T.sblock():
                B[0] = A[i] * T.float32(2)
            with T.sblock():
                C[0] = B[0] + T.float32(3)
            with T.sblock():
                D[0] = C[0] + T.float32(4)
            with T.sblock():
                E[i] = D[0] + T.float32(5)


@T.prim_func(s_tir=True)
def param_scratch(A: T.Buffer((64, 8), "float32"), S: T.Buffer((8,), "float32"), C: T.Buffer((64, 8), "float32")):
    for i in T.serial(64):
        with T.sblock("body"):
            for j in range(8):
                with T.sblock("load"):
                    S[j] = A[i, j] * T.float32(2)
            for j in range(8):
                with T.sblock("use"):
                    C[i, j] = S[j] + T.float32(1)
