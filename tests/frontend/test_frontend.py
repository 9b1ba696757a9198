"""TIR front-end: the graphs extracted from TVM's own pipeline-test loops and small TVMScript loops."""
import pytest

tvm = pytest.importorskip("tvm")
from tvm.script import tirx as T  # noqa: E402

from tvm_twill.errors import InputError, UnsupportedLoopError, UnsupportedTargetError  # noqa: E402
from tvm_twill.frontend import DEFAULT_QUANTUM, extract_loop, parse_target  # noqa: E402
from tvm_twill.model import get_machine, machine_from_dict  # noqa: E402
from tvm_twill.transforms import statement_deps  # noqa: E402
from tir_loops import dynamic_compute, single_statement, with_control_flow  # noqa: E402


def _edges(ex):
    return {(e.src, e.dst, e.distance): e.delay for e in ex.graph.edges}


# -- TVM's tensor-core GEMM (mma_schedule, as in TVM's pipeline tests) -----------------------
@pytest.fixture(scope="module")
def gemm(mma_gemm):
    return mma_gemm()


def test_simple_outer_loop_a100(gemm):
    sch, k0, _ = gemm
    ex = extract_loop(sch, k0, "sm_80")
    assert ex.loop == "k_0_0" and ex.trip_count == 128 and ex.quantum == DEFAULT_QUANTUM == 16
    assert ex.names == ["A_shared.dyn", "B_shared.dyn", "k_0_1"]
    a, b, k = ex.stmts
    assert (a.kind, b.kind, k.kind) == ("copy", "copy", "mixed")
    # 8 KiB per CTA-iteration through this CTA's share of L2: 8192 x 108 CTAs at once / 5120 B/clk = 172.8
    # cycles (the shared-memory port: 64); DRAM for the compulsory bytes: the first wave of 108 blocks
    # (blockIdx.x fastest over 16) reads 4 distinct A tiles (reuse 27) and 32 distinct B tiles (reuse
    # 3.375): 8192 / 3.375 x 108 / (1.555e12 / 1.41e9) = 237.7 cycles, so B's copy is DRAM-bound
    assert a.work == {"TMA": pytest.approx(172.8)}
    assert b.work == {"TMA": pytest.approx(8192 / 3.375 * 108 / (1.555e12 / 1.41e9))}
    assert (a.copy.bound, b.copy.bound) == ("L2", "DRAM")
    assert a.copy.reuse == pytest.approx(27.0) and b.copy.reuse == pytest.approx(3.375)
    assert k.work == {"TC": 512.0, "ALU": 320.0}  # 2*128*128*32 / 2048; (16+4 KiB)*2 / 128
    assert a.async_capable and b.async_capable and not k.async_capable
    assert (a.smem, b.smem) == (128 * 40 * 2, 32 * 136 * 2)  # storage_align pads the rows
    assert [op.cycles for op in ex.graph.ops] == [11, 15, 32]
    assert ex.graph.ops[2].rrt is not None and ex.graph.ops[2].usage("ALU") == 20
    # copy latency: 500 + 8192 / 10.21 B/clk = 1302 cycles = 82 units of 16
    assert _edges(ex) == {("A_shared.dyn", "k_0_1", 0): 82, ("B_shared.dyn", "k_0_1", 0): 82,
                          ("k_0_1", "k_0_1", 1): 32}
    assert statement_deps(ex.graph) == [(0, 2, 0), (1, 2, 0), (2, 2, 1)]


def test_simple_outer_loop_h100_is_copy_bound(gemm):
    sch, k0, _ = gemm
    ex = extract_loop(sch, k0, "sm_90a")
    assert ex.machine.name == "h100"
    assert ex.stmts[2].work == {"TC": 256.0, "ALU": 320.0}
    # each 8 KiB copy through its share of L2: 8192 x 132 / (5.5e12 / 1.83e9) = 359.8 cycles = 23 units,
    # so the two copies (46 units) bound the loop, not the ldmatrix + mma statement (20)
    assert ex.stmts[0].work == {"TMA": pytest.approx(8192 * 132 / (5.5e12 / 1.83e9))}
    assert [op.cycles for op in ex.graph.ops] == [23, 23, 20]
    assert _edges(ex)[("A_shared.dyn", "k_0_1", 0)] == 69  # 500 + 8192 / 13.87


def test_inner_loop(gemm):
    sch, _, k1 = gemm
    ex = extract_loop(sch, k1, "sm_80")
    assert ex.trip_count == 2
    assert [s.kind for s in ex.stmts] == ["ldmatrix", "ldmatrix", "mma"]
    assert [s.work for s in ex.stmts] == [{"ALU": 128.0}, {"ALU": 32.0}, {"TC": 256.0}]
    assert [op.unit for op in ex.graph.ops] == ["ALU", "ALU", "TC"]
    assert [op.regs for op in ex.graph.ops] == [32, 8, 0]  # fragments; the accumulator is not counted
    assert _edges(ex) == {("A_shared.dyn_warp_o", "C_o", 0): 8, ("B_shared.dyn_warp_o", "C_o", 0): 2,
                          ("C_o", "C_o", 1): 16}


def test_nested_pipeline_expands_into_three_statements(mma_gemm):
    sch, k0, k1 = mma_gemm()
    sch.annotate(k1, "software_pipeline_stage", [0, 0, 1])
    sch.annotate(k1, "software_pipeline_order", [0, 1, 2])
    ex = extract_loop(sch, k0, "sm_80")
    assert ex.nested == ("k_0_1",)
    assert ex.names == ["A_shared.dyn", "B_shared.dyn", "k_0_1.prologue", "k_0_1.body", "k_0_1.epilogue"]
    pro, body, epi = ex.stmts[2:]
    assert pro.work == {"ALU": 160.0}                    # ldmatrix of k_0_1 = 0
    assert body.work == {"ALU": 160.0, "TC": 256.0}      # ldmatrix of 1, mma of 0
    assert epi.work == {"TC": 256.0}                     # mma of 1
    assert pro.counts == (1, 1, 0) and epi.counts == (0, 0, 1)
    e = _edges(ex)
    assert ("k_0_1.prologue", "k_0_1.body", 0) in e and ("k_0_1.body", "k_0_1.epilogue", 0) in e
    assert ("k_0_1.epilogue", "k_0_1.body", 1) in e  # the accumulator crosses outer iterations


def test_nested_annotation_of_wrong_length(mma_gemm):
    sch, k0, k1 = mma_gemm()
    sch.annotate(k1, "software_pipeline_stage", [0, 1])
    sch.annotate(k1, "software_pipeline_order", [0, 1])
    with pytest.raises(UnsupportedLoopError, match="has 3 statements but its annotation has 2 stages"):
        extract_loop(sch, k0, "sm_80")


def test_loop_by_name(gemm):
    sch, k0, _ = gemm
    assert extract_loop(sch, "k_0_0", "sm_80").names == extract_loop(sch, k0, "sm_80").names


def test_unknown_loop_name(gemm):
    sch, _, _ = gemm
    with pytest.raises(UnsupportedLoopError, match="no loop named 'k9'.*'k_0_0'"):
        extract_loop(sch, "k9", "sm_80")


def test_thread_bound_loop_is_rejected(gemm):
    sch, _, _ = gemm
    with pytest.raises(UnsupportedLoopError, match="thread_binding loop: only serial loops"):
        extract_loop(sch, "j_0_2_i_0_2_fused", "sm_80")


def test_quantum_option(gemm):
    sch, k0, _ = gemm
    ex = extract_loop(sch, k0, "sm_80", quantum=32)
    assert [op.cycles for op in ex.graph.ops] == [6, 8, 16]  # 172.8 / 32, 237.7 / 32, 512 / 32, rounded up
    with pytest.raises(InputError, match="quantum must be an integer >= 1"):
        extract_loop(sch, k0, "sm_80", quantum=0)


def test_streaming_copies_option(gemm):
    sch, k0, _ = gemm
    ex = extract_loop(sch, k0, "sm_90a", streaming_copies=True)
    assert [op.variable_latency for op in ex.graph.ops] == [True, True, False]
    assert not any(op.variable_latency for op in extract_loop(sch, k0, "sm_90a").graph.ops)


def test_describe_lists_statements_and_edges(gemm):
    sch, k0, _ = gemm
    text = extract_loop(sch, k0, "sm_80").describe()
    assert "trip count 128" in text and "async-capable" in text and "edge k_0_1 -> k_0_1" in text


# -- targets ---------------------------------------------------------------------------------
def test_parse_target_forms():
    assert parse_target("sm_90a")[0] == "sm_90a"
    assert parse_target(tvm.target.Target({"kind": "cuda", "arch": "sm_80"}))[0] == "sm_80"


@pytest.mark.parametrize("target, message", [
    ("sm_75", "predates sm_80"),
    ("cuda -arch=sm_80", "is not a CUDA arch string"),
    (42, "must be a tvm.target.Target or an arch string"),
])
def test_unsupported_targets(target, message):
    with pytest.raises(UnsupportedTargetError, match=message):
        parse_target(target)


def test_non_cuda_target():
    with pytest.raises(UnsupportedTargetError, match="target kind 'llvm' is not supported"):
        parse_target(tvm.target.Target({"kind": "llvm"}))


def test_machine_without_cost_model(gemm):
    sch, k0, _ = gemm
    m = machine_from_dict({"name": "toy", "units": {"TC": 1, "ALU": 1, "TMA": 1, "SFU": 1}}, inline=True)
    with pytest.raises(UnsupportedTargetError, match="machine 'toy' has no cost model"):
        extract_loop(sch, k0, "sm_80", machine=m)


def test_explicit_machine(gemm):
    sch, k0, _ = gemm
    assert extract_loop(sch, k0, "sm_80", machine="h100").machine is get_machine("h100")


# -- small TVMScript loops -------------------------------------------------------------------
@T.prim_func(s_tir=True)
def copy_exp_add(A: T.Buffer((64, 1024), "float16"), D: T.Buffer((64, 1024), "float32")):
    for tx in T.thread_binding(0, 64, thread="threadIdx.x"):
        for k in T.serial(0, 16):
            with T.sblock("stage"):
                T.reads(A[tx, k * 64:k * 64 + 64])
                T.writes(D[tx, k * 64:k * 64 + 64])
                AS = T.sblock_alloc_buffer((64, 64), "float16", scope="shared")
                E = T.sblock_alloc_buffer((64, 64), "float32", scope="local")
                for j0 in T.serial(0, 8):
                    for j1 in T.vectorized(0, 8):
                        with T.sblock("load"):
                            T.reads(A[tx, k * 64 + j0 * 8 + j1])
                            T.writes(AS[tx, j0 * 8 + j1])
                            AS[tx, j0 * 8 + j1] = A[tx, k * 64 + j0 * 8 + j1]
                for j in T.serial(0, 64):
                    with T.sblock("exp"):
                        T.reads(AS[tx, j])
                        T.writes(E[tx, j])
                        E[tx, j] = T.exp(T.Cast("float32", AS[tx, j]))
                for j in T.serial(0, 64):
                    with T.sblock("add"):
                        T.reads(E[tx, j])
                        T.writes(D[tx, k * 64 + j])
                        D[tx, k * 64 + j] = E[tx, j] + T.float32(1)


def test_copy_sfu_alu_statements():
    sch = tvm.s_tir.Schedule(copy_exp_add)
    ex = extract_loop(sch, "k", "sm_80")
    assert ex.names == ["load", "exp", "add"]
    assert [s.kind for s in ex.stmts] == ["copy", "sfu", "store"]  # 'add' writes global memory: an epilogue
    load, exp, add = ex.stmts
    # 64 threads x 64 halves: the copy does not re-bind threadIdx.x, so every thread runs it
    assert load.work == {"TMA": 64.0} and load.smem == 8192 and load.async_capable
    assert exp.work == {"SFU": 256.0}      # 4096 exp / 16 per clock
    assert add.work == {"ALU": 64.0}       # 4096 adds / 64 per clock
    assert [op.unit for op in ex.graph.ops] == ["TMA", "SFU", "ALU"]
    assert ex.graph.ops[1].regs == 64      # E: 64 floats per thread, read by 'add'
    assert {(e.src, e.dst, e.distance) for e in ex.graph.edges} == {("load", "exp", 0), ("exp", "add", 0)}


def _guarded_exp(pred):
    """A loop of three statements over 128 threads (one row each): load, exp run by the threads ``pred`` keeps,
    add."""
    @T.prim_func(s_tir=True)
    def f(A: T.Buffer((128, 1024), "float16"), D: T.Buffer((128, 1024), "float32")):
        for k in T.serial(0, 16):
            with T.sblock("stage"):
                AS = T.sblock_alloc_buffer((128, 64), "float16", scope="shared")
                E = T.sblock_alloc_buffer((128, 64), "float32", scope="shared")
                for tx in T.thread_binding(0, 128, thread="threadIdx.x"):
                    for j in T.serial(0, 64):
                        with T.sblock("load"):
                            r, c, kv = T.axis.remap("SSS", [tx, j, k])
                            AS[r, c] = A[r, kv * 64 + c]
                for tx in T.thread_binding(0, 128, thread="threadIdx.x"):
                    for j in T.serial(0, 64):
                        with T.sblock("exp"):
                            r, c = T.axis.remap("SS", [tx, j])
                            T.where(pred(tx))
                            E[r, c] = T.exp(T.Cast("float32", AS[r, c]))
                for tx in T.thread_binding(0, 128, thread="threadIdx.x"):
                    for j in T.serial(0, 64):
                        with T.sblock("add"):
                            r, c, kv = T.axis.remap("SSS", [tx, j, k])
                            D[r, kv * 64 + c] = E[r, c] + T.float32(1)
    return f


@pytest.mark.parametrize("pred,share", [(lambda tx: tx < 64, 0.5), (lambda tx: 64 > tx, 0.5),
                                        (lambda tx: tx <= 31, 0.25), (lambda tx: tx < 200, 1.0),
                                        (lambda tx: tx % 2 == 0, 1.0)])   # not a bound: every thread counted
def test_a_block_predicate_bounding_a_thread_counts_the_threads_it_keeps(pred, share):
    ex = extract_loop(tvm.s_tir.Schedule(_guarded_exp(pred)), "k", "sm_80")
    exp = next(s for s in ex.stmts if s.name == "exp")
    assert exp.kind == "sfu" and exp.work == {"SFU": 128 * 64 * share / 16}   # exps run / 16 per clock


def test_dynamic_extent_is_extracted_with_a_symbolic_trip_count():
    ex = extract_loop(tvm.s_tir.Schedule(dynamic_compute), "i", "sm_80")
    assert ex.trip_count is None and ex.extent == "k" and ex.trips == "k"
    assert "trip count k," in ex.describe()
    assert {(e.src, e.dst, e.distance) for e in ex.graph.edges} >= {(ex.names[0], ex.names[1], 0)}


def test_single_statement_is_rejected():
    sch = tvm.s_tir.Schedule(single_statement)
    with pytest.raises(UnsupportedLoopError, match="loop 'i' has a single statement"):
        extract_loop(sch, "i", "sm_80")


def test_control_flow_is_rejected():
    sch = tvm.s_tir.Schedule(with_control_flow)
    with pytest.raises(UnsupportedLoopError, match="statement 1 is control flow \\(IfThenElse\\)"):
        extract_loop(sch, "i", "sm_80")


def test_producer_issue_cost_of_padded_tiles(gemm):
    """Warp-specialized on sm_90a, one elected thread issues every copy: a padded tile is one bulk copy
    per row (4 issue slots each), so A's 128 rows take 512 cycles, more than its L2 time (359.8)."""
    sch, k0, _ = gemm
    ex = extract_loop(sch, k0, "sm_90a", streaming_copies=True)
    a, b = ex.stmts[:2]
    assert a.copy.producer == {"bulk": 128} and b.copy.producer == {"bulk": 32}
    assert (a.copy.producer_issue, b.copy.producer_issue) == (512.0, 128.0)
    assert [op.cycles for op in ex.graph.ops] == [32, 23, 20]
    # without a producer (TVM's pipeline, every warp issues cp.async) the issue is not the bound
    assert [op.cycles for op in extract_loop(sch, k0, "sm_90a").graph.ops] == [23, 23, 20]
