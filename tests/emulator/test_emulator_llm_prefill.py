"""TVM's own sequence- and paged-prefill attention kernels (``tvm.relax.frontend.nn.llm``), pipelined, on the emulator.

``auto_pipeline(sch, "iterator", "sm_80")`` plans the KV loop of the kernel as TVM's generator writes it
(opaque blocks, explicit ``tvm_storage_sync`` barriers, let-bindings, guarded loads at the ragged tail, a
trip count ``ceildiv(kv_len, 32)``); ``tvm_twill.build`` compiles it with ``plan.tir_pipeline``.  The PTX nvcc
writes for it runs on ``tvm_twill.emulator`` against a float32 numpy reference for KV lengths giving trip
counts 0, 1, 2, the stage count and one more (the last two ragged), two interleavings, no findings
(data races between warps included), output and log-sum-exp equal to the unpipelined kernel's under the same
harness (the harness checked on TVM's own code).  A planted bug (the barrier the pipelined loop keeps between
``O += P V`` of one iteration and the V load of the next, removed from the CUDA) is caught as a race.

The paged prefill (pages of 16 slots, in shuffled order, a tile walk over 16 CTAs) runs once on a batch of five
sequences whose KV lengths give the same trip counts (8 query rows each), with the same checks; so does the ragged
prefill (K and V packed one sequence after the other), whose loop-invariant ``L_kv_base = kv_indptr[b]`` the
``tvm_twill_swp`` pipeline binds once before the KV loop.  Tree attention binds the same let; the solver keeps its
loop in one stage, so a legal two-stage plan (``O += P V`` a tile behind) runs instead, on sequences ending in a
random tree of 8 nodes (each query row sees the prefix and its node's ancestors), against a masked numpy softmax.

The smallest shape the generator accepts that keeps its structure: one head, head dim 64, 32 query rows (one
CTA of 4 warps); a sequence-prefill case emulates in seconds, the paged batch in about 30 s.
"""
import functools
import importlib
import re
import shutil

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
if shutil.which("nvcc") is None:
    pytest.skip("nvcc not installed", allow_module_level=True)

import tvm_twill  # noqa: E402
from tvm_twill import emulator as E  # noqa: E402
from tvm_twill.frontend import extract_loop  # noqa: E402
from tvm_twill.frontend.loops import resolve_loop  # noqa: E402
from tvm_twill.frontend.lowering import compile_cuda  # noqa: E402
from tvm_twill.model.pipeline import PipelineAnnotation  # noqa: E402
from tvm_twill.transforms import apply_annotation, legality_violations  # noqa: E402
from tvm_twill.transforms.pipelines import SWP_PIPELINE, register  # noqa: E402

D, Q_LEN, TILE = 64, 32, 32


@functools.cache
def _built():
    prefill = importlib.import_module("tvm.relax.frontend.nn.llm._prefill_kernels")
    func = prefill._attention_sequence_prefill(1, 1, D, "float16", tvm.target.Target({"kind": "cuda", "arch": "sm_80"}))
    unpipelined = tvm_twill.build(tvm.IRModule({"main": func}), "sm_80")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": func}))
    # S and O marked for tensorizing: planned as tensor-core GEMMs, the loop pipelines (the plan emulated
    # here); as SIMT FMA loops it is ALU-bound and its best plan is one stage.  TVM's lowering ignores the mark.
    for gemm in ("S_gemm_update", "O_gemm_update"):
        sch.annotate(sch.get_sblock(gemm), "meta_schedule.auto_tensorize", "mma")
    plan = tvm_twill.auto_pipeline(sch, "iterator", "sm_80", time_limit=60, quiet=True)
    return plan, tvm_twill.build(sch.mod, "sm_80", plan), unpipelined


def _inputs(n, seed=0):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((1, m, 1, D)).astype("float16") for m in (Q_LEN, n, n))
    return q, k, v, np.zeros((1, Q_LEN, 1, D), "float16"), np.zeros((1, Q_LEN, 1), "float16")


def _reference(q, k, v):
    """(output, log-sum-exp in base 2) of softmax(q k^T) v in float32 (the kernel's sm_scale is 1)."""
    if k.shape[1] == 0:  # no keys: the kernel's initial state (O = 0, m = -5e4, d = 1)
        return np.zeros(q.shape, np.float32), np.full(q.shape[:3], -5e4, np.float32)
    s = np.einsum("qd,kd->qk", q[0, :, 0].astype(np.float32), k[0, :, 0].astype(np.float32))
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    o = (p / p.sum(-1, keepdims=True)) @ v[0, :, 0].astype(np.float32)
    lse = (m[:, 0] + np.log(p.sum(-1))) / np.log(2)
    return o[None, :, None], lse[None, :, None]


#: case -> the KV length for a plan of ``stages`` stages: trip counts 0, 1 and 2, the stage count (its last tile
#: 3 keys short), and one past it (its last tile 5 keys short)
LENGTHS = {
    "trips0": lambda stages: 0,
    "trips1": lambda stages: TILE,
    "trips2": lambda stages: 2 * TILE,
    "stage-count-ragged": lambda stages: stages * TILE - 3,
    "stages+1-ragged": lambda stages: (stages + 1) * TILE - 5,
}


def _trips(stages) -> dict:
    return {"trips0": 0, "trips1": 1, "trips2": 2, "stage-count-ragged": stages, "stages+1-ragged": stages + 1}


def test_the_plan_pipelines_the_kv_loop_with_synchronous_copies():
    plan, f, _ = _built()
    assert plan.applied and plan.annotation.num_stages >= 2 and plan.tir_pipeline == "tvm_twill_swp"
    assert plan.annotation.async_stages == ()  # a barrier does not order a cp.async's completion
    src = f.mod.imports[0].inspect_source()
    assert "cp.async" not in src and "__syncthreads" in src


@pytest.mark.parametrize("case", sorted(LENGTHS))
def test_pipelined_sequence_prefill_runs_on_the_emulator_against_numpy(case):
    plan, f, unpipelined = _built()
    stages = plan.annotation.num_stages
    n = LENGTHS[case](stages)
    assert -(-n // TILE) == _trips(stages)[case]
    q, k, v, o, lse = _inputs(n)
    report = E.run(f, q, k, v, o, lse, interleavings=2)
    assert report.ok, str(report)
    assert report.launches == 1 and report.instructions > 0
    want_o, want_lse = _reference(q, k, v)
    assert np.abs(o.astype(np.float32) - want_o).max() < 5e-3
    assert np.allclose(lse.astype(np.float32), want_lse, rtol=1e-3, atol=0.05)  # fp16: one ulp of 5e4 is 32
    # the unpipelined kernel under the same harness: no findings, the same bits
    o0, lse0 = np.zeros_like(o), np.zeros_like(lse)
    base = E.run(unpipelined, q, k, v, o0, lse0, interleavings=2)
    assert base.ok, str(base)
    assert np.array_equal(o, o0) and np.array_equal(lse, lse0)


def test_a_missing_barrier_in_the_pipelined_loop_is_caught():
    _, f, _ = _built()
    src = f.mod.imports[0].inspect_source()
    loop = src.index("for (int iterator = 0;")
    at = src.index("__syncthreads();", loop)  # after O += P V of iteration i, before the V load of i + 1
    broken = src[:at] + src[at + len("__syncthreads();"):]
    q, k, v, o, lse = _inputs(3 * TILE)
    report = E.run(f, q, k, v, o, lse, source=broken)
    assert not report.ok
    assert any(re.search(r"shared byte \d+ races with a (read|write)", f.message) for f in report.findings)


PAGE = 16


@functools.cache
def _built_paged():
    prefill = importlib.import_module("tvm.relax.frontend.nn.llm._prefill_kernels")
    func = prefill._attention_prefill(1, 1, D, "float16", False, {}, tvm.target.Target({"kind": "cuda",
                                                                                        "arch": "sm_80"}))
    unpipelined = tvm_twill.build(tvm.IRModule({"main": func}), "sm_80")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": func}))
    plan = tvm_twill.auto_pipeline(sch, "iterator", "sm_80", time_limit=60, quiet=True)
    return plan, tvm_twill.build(sch.mod, "sm_80", plan), unpipelined


def _paged_inputs(lengths, q_rows=8, seed=0):
    """The paged kernel's arguments for sequences of KV ``lengths``, and each sequence's (q, k, v)."""
    rng = np.random.default_rng(seed)
    npages = [-(-n // PAGE) for n in lengths]
    values = rng.permutation(sum(npages)).astype("int32")  # the pages of the sequences, in shuffled order
    indptr = np.concatenate([[0], np.cumsum(npages)]).astype("int32")
    last = np.array([n - (c - 1) * PAGE if c else 0 for n, c in zip(lengths, npages)], "int32")
    pages = rng.standard_normal((sum(npages), 2, 1, PAGE, D)).astype("float16")
    q_indptr = (np.arange(len(lengths) + 1) * q_rows).astype("int32")
    q = rng.standard_normal((q_indptr[-1], 1, D)).astype("float16")
    seqs = []
    for b, n in enumerate(lengths):
        ids = values[indptr[b]:indptr[b + 1]]
        k, v = (pages[ids, j, 0].reshape(-1, D)[:n] for j in (0, 1))
        seqs.append((q[None, q_indptr[b]:q_indptr[b + 1]], k[None, :, None], v[None, :, None]))
    args = [q, q_indptr, pages, indptr, values, last, np.zeros(len(lengths), "int32"),
            np.zeros(q_indptr[-1], "int32")]
    return args, seqs


def _run_paged(f, args):
    o = np.zeros_like(args[0])
    lse = np.zeros(args[0].shape[:2], "float32")
    # causal 0, rotary_mode 0 (no RoPE), rope_scale, rope_theta, sm_scale 1
    report = E.run(f, *args, o, lse, 0, 0, 1.0, 1e4, 1.0, interleavings=2)
    return report, o, lse


def test_pipelined_paged_prefill_runs_on_the_emulator_against_numpy():
    plan, f, unpipelined = _built_paged()
    stages = plan.annotation.num_stages
    assert plan.applied and stages >= 2 and plan.annotation.async_stages == ()
    lengths = [LENGTHS[c](stages) for c in sorted(LENGTHS)]
    assert [-(-n // TILE) for n in lengths] == [_trips(stages)[c] for c in sorted(LENGTHS)]
    args, seqs = _paged_inputs(lengths)
    report, o, lse = _run_paged(f, args)
    assert report.ok, str(report)
    rows = 0
    for q, k, v in seqs:
        want_o, want_lse = _reference(q, k, v)
        got = slice(rows, rows + q.shape[1])
        rows += q.shape[1]
        assert np.abs(o[got].astype(np.float32) - want_o[0]).max() < 5e-3
        assert np.allclose(lse[got], want_lse[0], rtol=1e-3, atol=0.05)
    base, o0, lse0 = _run_paged(unpipelined, args)  # TVM's own kernel under the same harness
    assert base.ok, str(base)
    assert np.array_equal(o, o0) and np.array_equal(lse, lse0)


@functools.cache
def _built_ragged():
    prefill = importlib.import_module("tvm.relax.frontend.nn.llm._prefill_kernels")
    func = prefill._attention_prefill_ragged(1, 1, D, D, "float16", {}, tvm.target.Target({"kind": "cuda",
                                                                                           "arch": "sm_80"}))
    unpipelined = tvm_twill.build(tvm.IRModule({"main": func}), "sm_80")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": func}))
    plan = tvm_twill.auto_pipeline(sch, "iterator", "sm_80", time_limit=60, quiet=True)
    return plan, tvm_twill.build(sch.mod, "sm_80", plan), unpipelined


def _ragged_inputs(lengths, q_rows=8, seed=0):
    """The ragged kernel's arguments for sequences of KV ``lengths`` (K and V packed one sequence after the
    other, ``kv_indptr`` their offsets), and each sequence's (q, k, v)."""
    rng = np.random.default_rng(seed)
    kv_indptr = np.concatenate([[0], np.cumsum(lengths)]).astype("int32")
    k, v = (rng.standard_normal((max(1, kv_indptr[-1]), 1, D)).astype("float16") for _ in range(2))
    q_indptr = (np.arange(len(lengths) + 1) * q_rows).astype("int32")
    q = rng.standard_normal((q_indptr[-1], 1, D)).astype("float16")
    seqs = [(q[None, q_indptr[b]:q_indptr[b + 1]], k[None, kv_indptr[b]:kv_indptr[b + 1]],
             v[None, kv_indptr[b]:kv_indptr[b + 1]]) for b in range(len(lengths))]
    args = [q, q_indptr, k, v, kv_indptr, np.zeros(q_indptr[-1], "int32"), np.zeros(len(lengths), "int32")]
    return args, seqs


def test_pipelined_ragged_prefill_runs_on_the_emulator_against_numpy():
    """The ragged prefill binds ``L_kv_base = kv_indptr[b]`` in its KV loop: ``tvm_twill_swp`` binds it once
    before the loop (it is loop-invariant), so the two-stage plan compiles and computes what TVM's kernel does."""
    plan, f, unpipelined = _built_ragged()
    stages = plan.annotation.num_stages
    assert plan.applied and stages >= 2 and plan.annotation.async_stages == ()
    src = f.mod.imports[0].inspect_source()
    # bound once, before the loop, its load made only when the loop runs
    assert src.count("int L_kv_base = ") == 1
    assert re.search(r"if \(0 < kv_chunk_len_ptr\[0\]\) \{\s*condval_\d+ = kv_indptr_ptr", src)
    lengths = [LENGTHS[c](stages) for c in sorted(LENGTHS)]
    args, seqs = _ragged_inputs(lengths)
    report, o, lse = _run_paged(f, args)
    assert report.ok, str(report)
    rows = 0
    for q, k, v in seqs:
        want_o, want_lse = _reference(q, k, v)
        got = slice(rows, rows + q.shape[1])
        rows += q.shape[1]
        assert np.abs(o[got].astype(np.float32) - want_o[0]).max() < 5e-3
        assert np.allclose(lse[got], want_lse[0], rtol=1e-3, atol=0.05)
    base, o0, lse0 = _run_paged(unpipelined, args)  # TVM's own kernel under the same harness
    assert base.ok, str(base)
    assert np.array_equal(o, o0) and np.array_equal(lse, lse0)


TREE = 8  #: tree nodes per sequence: the last TREE keys of the sequence and its TREE query rows


@functools.cache
def _built_tree():
    """TVM's tree attention with ``O += P V`` one tile behind (a legal two-stage plan: the solver's own keeps one
    stage), compiled with ``tvm_twill_swp``, and the kernel as written."""
    tree = importlib.import_module("tvm.relax.frontend.nn.llm.tree_attn")
    func = tree.tree_attn(1, 1, D, "float16", {}, tvm.target.Target({"kind": "cuda", "arch": "sm_80"}))
    unpipelined = tvm_twill.build(tvm.IRModule({"main": func}), "sm_80")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": func}))
    ex = extract_loop(sch, "iterator", "sm_80")
    late = [i for i, n in enumerate(ex.names) if n.startswith("O_gemm")]
    seq = late + [i for i in range(len(ex.names)) if i not in late]
    ann = PipelineAnnotation(tuple(int(i in late) for i in range(len(seq))), tuple(map(seq.index, range(len(seq)))),
                             ())
    assert ex.refusal is None and legality_violations(ann, ex.graph) == []
    apply_annotation(sch, resolve_loop(sch, "iterator").rv, ann)
    f, _ = compile_cuda(sch, "sm_80", tir_pipeline=register(SWP_PIPELINE))
    return ann, f, unpipelined


def _tree_inputs(lengths, seed=0):
    """The tree kernel's arguments for sequences of KV ``lengths`` (a random tree of TREE nodes at the end of each
    non-empty one: ``mask`` holds each node's depth-first interval), and each sequence's (q, k, v, visible)."""
    rng = np.random.default_rng(seed)
    trees = [TREE if n else 0 for n in lengths]
    kv_indptr = np.concatenate([[0], np.cumsum(lengths)]).astype("int32")
    mn_indptr = np.concatenate([[0], np.cumsum(trees)]).astype("int32")
    q_indptr = (np.arange(len(lengths) + 1) * TREE).astype("int32")
    k, v = (rng.standard_normal((max(1, kv_indptr[-1]), 1, D)).astype("float16") for _ in range(2))
    q = rng.standard_normal((q_indptr[-1], 1, D)).astype("float16")
    mask, seqs = [], []
    for b, (n, t) in enumerate(zip(lengths, trees)):
        parent = [-1] + [int(rng.integers(0, i)) for i in range(1, t)]
        order = _preorder(parent)
        size = [sum(_is_ancestor(parent, i, j) for j in range(t)) for i in range(t)]
        mask += [(order[i], order[i] + size[i]) for i in range(t)]
        visible = np.ones((TREE, n), bool)
        for r in range(t):  # query row r is node r: the prefix and the node's ancestors (itself included)
            visible[r, n - t:] = [_is_ancestor(parent, j, r) for j in range(t)]
        kv = slice(kv_indptr[b], kv_indptr[b + 1])
        seqs.append((q[q_indptr[b]:q_indptr[b + 1], 0], k[kv, 0], v[kv, 0], visible))
    # the kernel computes all 32 rows of a query tile and reads the mask of the rows past the sequence's too
    # (their results are dropped): TILE spare entries after the last tree
    mask = np.array(mask + [(0, 0)] * TILE, "int32")
    args = [q, q_indptr, k, v, kv_indptr, np.zeros(q_indptr[-1], "int32"), mn_indptr, mask]
    return args, seqs


def _is_ancestor(parent, a, b) -> bool:
    while b != -1 and b != a:
        b = parent[b]
    return b == a


def _preorder(parent) -> list:
    """Each node's index in a depth-first preorder (children in increasing order)."""
    out, stack = {}, [0] if parent else []
    while stack:
        node = stack.pop()
        out[node] = len(out)
        stack += sorted((c for c in range(len(parent)) if parent[c] == node), reverse=True)
    return [out[i] for i in range(len(parent))]


def _masked_reference(q, k, v, visible):
    """(output, log-sum-exp in base 2) of softmax over the visible keys, in float32."""
    if k.shape[0] == 0:
        return np.zeros(q.shape, np.float32), np.full(q.shape[0], -5e4, np.float32)
    s = np.where(visible, q.astype(np.float32) @ k.astype(np.float32).T, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    lse = (m[:, 0] + np.log(p.sum(-1))) / np.log(2)
    return (p / p.sum(-1, keepdims=True)) @ v.astype(np.float32), lse


def _run_tree(f, args):
    o = np.zeros_like(args[0])
    lse = np.zeros(args[0].shape[:2], "float32")
    # rotary_mode 0 (no RoPE), rope_scale, rope_theta, sm_scale 1
    report = E.run(f, *args, o, lse, 0, 1.0, 1e4, 1.0, interleavings=2)
    return report, o, lse


def test_pipelined_tree_attention_runs_on_the_emulator_against_numpy():
    ann, f, unpipelined = _built_tree()
    stages = ann.num_stages
    src = f.mod.imports[0].inspect_source()
    assert stages == 2 and src.count("int L_kv_base = ") == 1
    lengths = [LENGTHS[c](stages) for c in sorted(LENGTHS)]
    args, seqs = _tree_inputs(lengths)
    assert any(not visible.all() for *_, visible in seqs)  # the tree hides some keys from some rows
    report, o, lse = _run_tree(f, args)
    assert report.ok, str(report)
    for b, (q, k, v, visible) in enumerate(seqs):
        want_o, want_lse = _masked_reference(q, k, v, visible)
        got = slice(b * TREE, (b + 1) * TREE)
        assert np.abs(o[got, 0].astype(np.float32) - want_o).max() < 5e-3
        assert np.allclose(lse[got, 0], want_lse, rtol=1e-3, atol=0.05)
    base, o0, lse0 = _run_tree(unpipelined, args)  # TVM's own kernel under the same harness
    assert base.ok, str(base)
    assert np.array_equal(o, o0) and np.array_equal(lse, lse0)
