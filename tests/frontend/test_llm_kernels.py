"""The front-end, unmodified, on TVM's own LLM attention kernels (``tvm.relax.frontend.nn.llm``).

Those kernels keep their own structure: opaque blocks with empty read/write regions, explicit
``T.tvm_storage_sync`` barriers inside the KV loop, let-bindings, guarded loads at the ragged tail.

* every KV loop TVM ships (sequence prefill, paged prefill, ragged prefill, tree attention, decode) is
  extracted: the loads feed the GEMMs through dependences derived from the opaque blocks' bodies, every
  barrier keeps its place among the shared-memory statements, guarded copies are copies;
* their trip counts are block-uniform (``ceildiv(kv_len, 32)``; ``ceildiv(kv_chunk_len[0], 32)``, an indptr
  difference every thread stores alike).  The ragged prefill, tree attention and decode bind a let TVM keeps
  (the KV base read from ``kv_indptr``, a rescale factor): with a symbolic trip count TVM's pipeline guards
  the binding alone.  The KV base is loop-invariant (the read-only ``kv_indptr`` at the block's batch index):
  ``tvm_twill_swp`` binds it before the loop, and a legal two-stage plan of the ragged prefill and of tree
  attention is valid CUDA (without the hoist nvcc rejects it: the binding is used outside its guard).  Decode's
  rescale factor reads the running row maximum the loop updates: it stays refused.  The sequence, paged and
  ragged prefill are pipelined: TVM's default pipeline cannot compile the plans (a barrier under the prologue's guard),
  ``plan.tir_pipeline`` (tvm_twill_swp) can, the copies stay synchronous, and on the TIR TVM emits every
  explicit barrier still separates the shared-memory accesses it separated, for trip counts 0, 1, 2, the
  stage count and a ragged length (a plan that moves the S GEMM above the barrier publishing K is caught);
* small kernels written in the same style run on the CPU (llvm): a two-stage plan computes what the loop
  does for ragged lengths, the annotation a hidden (unversioned) buffer forbids computes something else, and
  a loop that owns a buffer TVM cannot see is refused (TVM's pass fails on it).
"""
import functools
import importlib
import shutil

import numpy as np
import pytest

pytest.importorskip("tvm")
import tvm  # noqa: E402
from barrier_order import barrier_violations, named_var, trip_count  # noqa: E402
from tvm.script import tirx as T  # noqa: E402

from tvm_twill.api import auto_pipeline  # noqa: E402
from tvm_twill.emulator.launch import compile_ptx  # noqa: E402
from tvm_twill.errors import ToolchainError, UnsupportedLoopError  # noqa: E402
from tvm_twill.frontend import extract_loop  # noqa: E402
from tvm_twill.frontend.lowering import compile_cuda, inject_pipeline  # noqa: E402
from tvm_twill.frontend.loops import resolve_loop  # noqa: E402
from tvm_twill.model.pipeline import PipelineAnnotation  # noqa: E402
from tvm_twill.transforms import apply_annotation, legality_violations, let_hoist  # noqa: E402
from tvm_twill.transforms.pipelines import SWP_PIPELINE, register  # noqa: E402

register(SWP_PIPELINE)

LLM = "tvm.relax.frontend.nn.llm"
#: kind -> the refusal of a kernel that binds a let TVM keeps (the KV base read from kv_indptr, a rescale factor)
LET = {"decode": "statement 6 binds 'o_scale' \\(a let TVM does not substitute into its uses\\) whose value changes "
              "between iterations"}


def _kernel(kind):
    prefill = importlib.import_module(f"{LLM}._prefill_kernels")
    decode = importlib.import_module(f"{LLM}._decode_kernels")
    tree = importlib.import_module(f"{LLM}.tree_attn")
    tgt = tvm.target.Target({"kind": "cuda", "arch": "sm_80"})
    make = {
        "sequence_prefill": lambda: prefill._attention_sequence_prefill(4, 4, 128, "float16", tgt),
        "paged_prefill": lambda: prefill._attention_prefill(4, 4, 128, "float16", False, {}, tgt),
        "ragged_prefill": lambda: prefill._attention_prefill_ragged(4, 4, 128, 128, "float16", {}, tgt),
        "tree_attention": lambda: tree.tree_attn(4, 4, 128, "float16", {}, tgt),
        "decode": lambda: decode._attention_decode(4, 4, 128, "float16", False, {}, tgt),
    }[kind]
    return tvm.s_tir.Schedule(tvm.IRModule({"main": make()}))


#: kind -> (the K load, the S = Q K^T GEMM that reads it, the V load, the O += P V GEMM that reads it, the class
#: of the K load: a guarded copy, or SFU work where the kernel applies RoPE (cos, sin) while loading K)
KERNELS = {
    "sequence_prefill": ("K_load", "S_gemm_update", "V_load", "O_gemm_update", "copy"),
    "paged_prefill": ("K_load", "S_gemm_update", "V_load", "O_gemm_update", "sfu"),
    "ragged_prefill": ("K_load", "S_gemm_update", "V_load", "O_gemm_update", "sfu"),
    "tree_attention": ("KV_load", "S_gemm_update", "KV_load", "O_gemm_update", "sfu"),
    "decode": ("KV_load", "j", "KV_load", "j#3", "sfu"),
}


@pytest.fixture(scope="module", params=sorted(KERNELS))
def llm(request):
    sch = _kernel(request.param)
    return request.param, sch, extract_loop(sch, "iterator", "sm_80")


def test_every_tvm_kv_loop_is_extracted_with_its_barriers_and_derived_dependences(llm):
    kind, sch, ex = llm
    g = ex.graph
    edges = {(e.src, e.dst, e.distance) for e in g.edges}
    k_load, s_gemm, v_load, o_gemm, load_kind = KERNELS[kind]
    # the opaque load blocks declare no access: the dependences come from their bodies
    assert (k_load, s_gemm, 0) in edges and (v_load, o_gemm, 0) in edges
    load = ex.stmts[ex.op_index[k_load]]
    assert load.kind == load_kind and not load.async_capable  # a guarded copy is a copy, kept synchronous
    # V_smem is written only in an opaque block: TVM cannot see it, so it is not taken as versioned
    assert "V_smem" not in ex.versioned
    # each barrier stays between the statements it separated, in every iteration
    syncs = [n for n in ex.names if n.startswith("storage_sync")]
    assert syncs
    for sync in syncs:
        i = ex.op_index[sync]
        for j, s in enumerate(ex.stmts):
            if "sync:tvm_storage_sync" in s.reads:
                a, b = (s.name, sync) if j < i else (sync, s.name)
                assert (a, b, 0) in edges and (b, a, 1) in edges, (sync, s.name)
    # the trip count (ceildiv(kv_len, 32), or ceildiv(kv_chunk_len[0], 32): an indptr difference every thread
    # of the block stores alike) is block-uniform: no barrier refusal; a let TVM keeps is refused
    if kind not in LET:
        assert ex.refusal is None
    else:
        with pytest.raises(UnsupportedLoopError, match=LET[kind]):
            auto_pipeline(sch, "iterator", "sm_80", apply=False)


#: kind -> what gives the KV loop's trip count: a shape variable or a local buffer's loads
LENGTH = {"sequence_prefill": "kv_len", "paged_prefill": "kv_chunk_len", "ragged_prefill": "kv_chunk_len"}


@functools.cache
def _planned(kind):
    """The kernel planned with its two GEMM blocks marked for tensorizing: costed on the tensor cores, the
    loads' latency matters and the plan pipelines them, which is what the lowering tests below need (as
    SIMT FMA loops on the CUDA cores the loop is ALU-bound and its best plan is one stage).  The mark is a
    block annotation TVM's lowering ignores: the code compiled is the kernel's own."""
    sch = _kernel(kind)
    for gemm in ("S_gemm_update", "O_gemm_update"):
        sch.annotate(sch.get_sblock(gemm), "meta_schedule.auto_tensorize", "mma")
    source = sch.mod
    plan = auto_pipeline(sch, "iterator", "sm_80", time_limit=60, quiet=True)
    return source, sch, plan


@pytest.mark.parametrize("kind", sorted(LENGTH))
def test_the_planned_prefill_compiles_with_tvm_twill_swp_and_not_with_tvm_default(kind):
    _, sch, plan = _planned(kind)
    assert plan.applied and plan.annotation.num_stages > 1 and plan.tir_pipeline == "tvm_twill_swp"
    # a barrier does not order a cp.async's completion: the copies of a loop with barriers stay synchronous
    assert plan.annotation.async_stages == ()
    with pytest.raises(Exception, match="Cannot insert syncs inside condition"):
        compile_cuda(sch, "sm_80")  # TVM's default pipeline: a barrier under the prologue's guard
    _, src = compile_cuda(sch, "sm_80", tir_pipeline=plan.tir_pipeline)
    assert "__syncthreads" in src and "cp.async" not in src
    if shutil.which("nvcc") is not None:
        assert ".entry" in compile_ptx(src, "sm_80")  # valid CUDA (a let used outside its guard would not be)


@pytest.mark.parametrize("kind", sorted(LENGTH))
def test_every_barrier_still_separates_what_it_separated_in_the_emitted_tir(kind):
    source, sch, plan = _planned(kind)
    tgt = tvm.target.Target({"kind": "cuda", "arch": "sm_80"})
    with tgt:
        original, pipelined = inject_pipeline(source), inject_pipeline(sch.mod)
    n = LENGTH[kind] if LENGTH[kind] != "kv_len" else named_var(source["main"], "kv_len")
    stages = plan.annotation.num_stages
    lengths = (0, 32, 64, 32 * stages, 32 * stages + 32 + 5)  # trip counts 0, 1, 2, the stage count, ragged
    trips = [trip_count(original, "iterator", n, x) for x in lengths]
    assert trips[:4] == [0, 1, 2, stages] and trips[4] == stages + 2
    assert barrier_violations(original, pipelined, "iterator", n, lengths) == []
    if kind != "sequence_prefill":
        return
    # the checker sees a wrong order: the S GEMM moved above the barrier that publishes K
    names = [s.name for s in plan.extraction.stmts]
    first = ["let_L_kv_start", "let_L_kv_base", "K_load", "S_gemm_init", "S_gemm_update"]
    seq = first + [n for n in names if n not in first]
    wrong = PipelineAnnotation((0,) * len(names), tuple(seq.index(n) for n in names), ())
    work = tvm.s_tir.Schedule(source)
    apply_annotation(work, resolve_loop(work, "iterator").rv, wrong)
    with tgt:
        bad = barrier_violations(original, inject_pipeline(work.mod), "iterator", n, lengths)
    assert "n=1: no barrier left between (('K_load',), 0, 0) and (('S_gemm_update',), 0, 0)" in bad


@pytest.mark.parametrize("kind", ["ragged_prefill", "tree_attention"])
def test_the_kv_base_let_is_hoisted_a_legal_plan_is_valid_cuda_and_not_without_the_hoist(kind, monkeypatch):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    sch = _kernel(kind)
    ex = extract_loop(sch, "iterator", "sm_80")
    assert ex.refusal is None and ex.names[1] == "let_L_kv_base"
    # O += P V one tile behind, issued first in the body: legal (tree attention's own plan is one stage)
    late = [i for i, n in enumerate(ex.names) if n.startswith("O_gemm")]
    seq = late + [i for i in range(len(ex.names)) if i not in late]
    ann = PipelineAnnotation(tuple(int(i in late) for i in range(len(seq))), tuple(map(seq.index, range(len(seq)))),
                             ())
    assert legality_violations(ann, ex.graph) == []
    apply_annotation(sch, resolve_loop(sch, "iterator").rv, ann)
    _, src = compile_cuda(sch, "sm_80", tir_pipeline=SWP_PIPELINE)
    assert src.count("int L_kv_base = ") == 1 and ".entry" in compile_ptx(src, "sm_80")
    # without the hoist, TVM compiles the plan to CUDA that uses the binding outside the guard it sits under
    monkeypatch.setattr(let_hoist, "hoist_invariant_lets", lambda func: func)
    _, src = compile_cuda(sch, "sm_80", tir_pipeline=SWP_PIPELINE)
    with pytest.raises(ToolchainError, match='identifier "L_kv_base" is undefined'):
        compile_ptx(src, "sm_80")


# -- a small kernel in the same style, on the CPU -------------------------------------------------------
@T.prim_func(s_tir=True)
def ragged_scale(a: T.handle, c: T.handle, n: T.int32):
    A = T.match_buffer(a, (64,), "float32")
    C = T.match_buffer(c, (64,), "float32")
    with T.sblock("kernel"):
        T.reads()
        T.writes()
        B = T.sblock_alloc_buffer((4,), "float32")
        for i in range(16):
            base: T.let[T.int32] = i * 4
            for j in range(4):
                with T.sblock("ld"):
                    T.reads()
                    T.writes()
                    cur: T.let[T.int32] = base + j
                    if cur < n:
                        B[j] = A[cur]
                    else:
                        B[j] = T.float32(0)
            for j in range(4):
                with T.sblock("sq"):
                    T.reads()
                    T.writes()
                    B[j] = B[j] * B[j] + T.float32(1)
            for j in range(4):
                with T.sblock("st"):
                    T.reads()
                    T.writes()
                    C[base + j] = B[j] * T.float32(2)


@T.prim_func(s_tir=True)
def ragged_square(a: T.handle, c: T.handle, n: T.int32):
    A = T.match_buffer(a, (64,), "float32")
    C = T.match_buffer(c, (65,), "float32")
    with T.sblock("kernel"):
        T.reads()
        T.writes()
        B = T.sblock_alloc_buffer((4,), "float32")  # used after the loop too: one storage, never versioned
        E = T.sblock_alloc_buffer((4,), "float32")
        for i in range(16):
            base: T.let[T.int32] = i * 4
            for j in range(4):
                with T.sblock("ld"):
                    T.reads()
                    T.writes()
                    cur: T.let[T.int32] = base + j
                    if cur < n:
                        B[j] = A[cur]
                    else:
                        B[j] = T.float32(0)
            for j in range(4):
                with T.sblock("sq"):
                    T.reads()
                    T.writes()
                    E[j] = B[j] * B[j] + T.float32(1)
            for j in range(4):
                with T.sblock("st"):
                    T.reads()
                    T.writes()
                    C[base + j] = E[j] * T.float32(2)
        with T.sblock("tail"):
            T.reads()
            T.writes()
            C[64] = B[0] + E[0]


def _run(mod, n, size=64):
    rng = np.random.default_rng(7)
    a = tvm.runtime.tensor(rng.standard_normal(64).astype("float32"))
    c = tvm.runtime.tensor(np.zeros(size, "float32"))
    tvm.compile(mod, target="llvm")(a, c, n)
    return c.numpy()


def test_llm_style_loop_is_pipelined_as_planned_and_computes_the_same_on_the_cpu():
    sch = tvm.s_tir.Schedule(ragged_square)
    ex = extract_loop(sch, "i", "sm_80")
    # the dependences come from the opaque blocks' bodies; TVM substitutes 'base' into its uses
    edges = {(e.src, e.dst, e.distance) for e in ex.graph.edges}
    assert {("ld", "sq", 0), ("sq", "st", 0), ("sq", "ld", 1), ("st", "sq", 1)} <= edges
    assert ex.refusal is None and not ex.versioned
    plan = auto_pipeline(sch, "i", "sm_80", time_limit=60)
    assert plan.applied and plan.annotation.num_stages == 2
    assert legality_violations(plan.annotation, ex.graph) == []
    for n in (0, 1, 37, 64):  # a ragged tail: the guarded loads fill zeros past n
        assert np.array_equal(_run(sch.mod, n, 65), _run(ragged_square, n, 65))
    # the order the hidden buffer B forbids (the next load before this iteration's square) computes otherwise
    wrong = PipelineAnnotation((0, 0, 1, 1), (0, 1, 2, 3), ())
    assert legality_violations(wrong, ex.graph)
    work = tvm.s_tir.Schedule(ragged_square)
    apply_annotation(work, resolve_loop(work, "i").rv, wrong)
    assert not np.array_equal(_run(work.mod, 64, 65), _run(ragged_square, 64, 65))


def test_llm_style_loop_on_the_cpu_hidden_buffer_orders_the_iterations():
    sch = tvm.s_tir.Schedule(ragged_scale)
    ex = extract_loop(sch, "i", "sm_80")
    assert ex.names == ["let_base", "ld", "sq", "st"] and "B" not in ex.versioned
    # B is hidden from TVM in opaque blocks: one storage for every iteration, so the next load waits
    forbidden = PipelineAnnotation((0, 0, 1, 1), (0, 1, 2, 3), ())
    assert any("does not multi-version" in v for v in legality_violations(forbidden, ex.graph))
    # TVM's pipeline pass cannot version a buffer of the loop it does not see: planning is refused
    with pytest.raises(UnsupportedLoopError, match="buffer 'B' is allocated in the loop and accessed only"):
        auto_pipeline(sch, "i", "sm_80", time_limit=60)
    work = tvm.s_tir.Schedule(ragged_scale)
    apply_annotation(work, resolve_loop(work, "i").rv, PipelineAnnotation((0, 0, 0, 1), (1, 2, 3, 0), ()))
    with pytest.raises(Exception, match="unordered_map::at"):
        _run(work.mod, 64)
    for n in (0, 37, 64):  # the loop as written: the guarded loads fill zeros past n
        got = _run(ragged_scale, n)
        a = np.random.default_rng(7).standard_normal(64).astype("float32")
        a[n:] = 0
        assert np.allclose(got, (a * a + 1) * 2)
