"""Hopper GEMM consumers on wgmma (issue #8): s_tir tensor intrinsics for m64nNk16, the wgmma_gemm workload,
plain and warp-specialized (TMA bulk-copy producer) kernels for sm_90a.

No GPU here: tensorize's structural check (the schedule's blocks against the intrinsics' descriptions),
the fragment layout's arithmetic, the CUDA source and ptxas's report are what is checked.
"""
import re
import shutil
import subprocess

import pytest

tvm = pytest.importorskip("tvm")

import tvm_twill  # noqa: E402
from tvm_twill.transforms.fragments import shrink_thread_fragments  # noqa: E402
from tvm_twill.transforms.pipelines import WS_PIPELINE, register  # noqa: E402
from tvm_twill.kernels.wgmma_intrinsics import wgmma_element, wgmma_fragment  # noqa: E402
from tvm_twill.workloads import wgmma_gemm  # noqa: E402

N = 1024
TARGET = {"kind": "cuda", "arch": "sm_90a"}
_WAIT_CALL = re.compile(r"wgmma_wait_group_wait_group_sync_aligned_(\d+)\(\)")  # N of each wgmma.wait_group call


def _compile(sch, pipeline):
    with tvm.transform.PassContext(config={"tirx.use_async_copy": 1}):
        f = tvm.compile(sch.mod, target=tvm.target.Target(TARGET), tir_pipeline=pipeline)
    return f.mod.imports[0].inspect_source()


def _ptxas(src, tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    cu = tmp_path / "k.cu"
    cu.write_text(src)
    r = subprocess.run(["nvcc", "-arch=sm_90a", "-cubin", "-Xptxas", "-v", "-o", str(tmp_path / "k.cubin"), str(cu)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout + r.stderr


@pytest.mark.parametrize("bn", [64, 128, 256])
def test_fragment_layout_is_a_bijection_matching_the_isa_figure(bn):
    seen = {}
    for i in range(64):
        for j in range(bn):
            t, r = wgmma_fragment(i, j)
            assert 0 <= t < 128 and 0 <= r < bn // 2 and (t, r) not in seen
            seen[(t, r)] = (i, j)
            assert wgmma_element(t, r) == (i, j)
    assert len(seen) == 64 * bn
    # PTX ISA figure: warp w owns rows 16w..16w+15; lane 0 of warp 1 holds rows 16 and 24, columns 0 and 1
    assert [wgmma_element(32, r) for r in range(4)] == [(16, 0), (16, 1), (24, 0), (24, 1)]
    assert wgmma_element(5, 4) == (1, 8 + 2)  # lane 5: row 5 // 4 = 1, columns 2 * (5 % 4) + 8 * (r // 4)


def test_tensorize_structural_check_accepts_the_schedule():
    sch, k0, k1 = wgmma_gemm(256)  # tensorize raises when a block does not match its intrinsic's description
    text = sch.mod.script()
    assert "wgmma" in text and "encode_matrix_descriptor" in text
    assert [int(sch.get(loop).extent) for loop in (k0, k1)] == [256 // 64, 4]
    plain, _, _ = wgmma_gemm(256, tensorize=False)
    assert "wgmma" not in plain.mod.script()


def test_tensorize_rejects_a_mismatched_tile():
    from tvm_twill.kernels.wgmma_intrinsics import wgmma_intrinsics
    sch, _, _ = wgmma_gemm(256, tensorize=False)
    blk = sch.get_sblock("C_update")
    with pytest.raises(Exception):  # the m64n64 description does not match the 64 x 128 block tile
        sch.tensorize(sch.get_loops(blk)[-3], wgmma_intrinsics(64)["mma"])


@pytest.fixture(scope="module")
def plain_source():
    sch, _, _ = wgmma_gemm(N)
    return _compile(sch, register(WS_PIPELINE))


def test_plain_kernel_has_wgmma_and_per_thread_accumulators(plain_source, tmp_path):
    src = plain_source
    for needle in ("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", "wgmma.fence.sync.aligned",
                   "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned 0",
                   "ptx_wgmma_encode_matrix_descriptor", "__launch_bounds__(128)"):
        assert needle in src, needle
    assert "float C_local_ptr[64];" in src  # one thread's 64 registers, not the warp group's 8192
    assert set(_WAIT_CALL.findall(src)) == {"0"}  # not warp-specialized: every group synchronous, as before
    assert "threadIdx.x) * 64)]" not in src
    log = _ptxas(src, tmp_path)
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in log
    assert "C75" not in log


def _flattened(sch):
    from tvm_twill.frontend.lowering import pipeline_prefix_passes
    mod = tvm.tirx.transform.BindTarget(tvm.target.Target(TARGET).with_host(tvm.target.Target("llvm")))(sch.mod)
    passes = pipeline_prefix_passes() + [tvm.s_tir.transform.LowerOpaqueBlock(), tvm.tirx.transform.FlattenBuffer()]
    with tvm.transform.PassContext(config={"tirx.use_async_copy": 1}):
        return tvm.transform.Sequential(passes)(mod)["main"]


def test_shrink_rewrites_the_accumulator_and_nothing_else():
    from tvm_twill.workloads import tensorcore_gemm
    assert shrink_thread_fragments(_flattened(wgmma_gemm(256)[0]))[1] == ["C_local"]
    assert shrink_thread_fragments(_flattened(tensorcore_gemm(256)[0]))[1] == []  # warp buffers, mma.sync


@pytest.fixture(scope="module")
def ws_kernel():
    sch, k0, _ = wgmma_gemm(N)
    plan = tvm_twill.auto_pipeline(sch, [k0], "sm_90a", warp_specialize=True)
    return sch, k0, plan, _compile(sch, plan.tir_pipeline)


def _consumer_loop(src):
    """(the text of the consumer loop, the text after it) of a warp-specialized kernel's source."""
    start = src.index("for (int ws_k")
    depth, i = 0, src.index("{", start)
    while True:
        depth += {"{": 1, "}": -1}.get(src[i], 0)
        if depth == 0:
            return src[start:i + 1], src[i + 1:]
        i += 1


def test_warp_specialized_wgmma_kernel(ws_kernel, tmp_path):
    sch, k0, plan, src = ws_kernel
    ws = plan.warp_specialization
    assert plan.applied and ws.chosen and ws.copy == "bulk" and ws.protocol.ok
    for needle in ("mbarrier.try_wait.parity", "expect_tx", "elect.sync", "setmaxnreg.dec.sync.aligned",
                   "setmaxnreg.inc.sync.aligned",
                   "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
                   "const __grid_constant__ CUtensorMap A_tmap0", "const __grid_constant__ CUtensorMap B_tmap1",
                   "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", "__launch_bounds__(256, 1)",
                   "float C_local_ptr[64];"):
        assert needle in src, needle
    # each tile is one TMA box of 128-byte rows, stored with the 128-byte swizzle (wgmma_swizzle): the
    # descriptors say so (LBO 1 = unused, SBO 64 = 1024 B, layout 3 = 128-byte swizzle)
    assert ws.facts.copy_plans == ("A_shared.dyn: 1 TMA tensor copy (2-d box 64 x 64, 8192 B, swizzle 128 B)",
                                   "B_shared.dyn: 1 TMA tensor copy (2-d box 64 x 128, 16384 B, swizzle 128 B)")
    a_map, b_map = (m.to_json() for m in ws.facts.tensor_maps)
    assert a_map["global_dims"] == [N, N] and a_map["global_strides"] == [2 * N]
    assert a_map["box"] == [64, 64] and b_map["box"] == [64, 128] and a_map["swizzle"] == b_map["swizzle"] == 3
    body = src[src.index("main_kernel("):]
    assert body.count("cp_async_bulk_tensor_g2s") == 2 and "cp_async_bulk_g2s" not in body
    assert body.count("ptx_wgmma_encode_matrix_descriptor(") == 2 and body.count(", 1, 64, 3);") == 2
    # each swizzled ring is used from its next 1024-byte boundary (a run-time pad), and the producer traps
    # if that did not hold (instead of reading shifted tiles)
    assert "int ws_pad0 = " in body and "int ws_pad1 = " in body
    assert ws.facts.swizzle_pad_bytes == 2 * 1024   # room for the two pads (the plan's shared-memory fit reads it)
    assert body.count("tvm_builtin_cuda_trap_when_assert_failed(") == 2 and "% (uint)1024) == (uint)0" in body
    text = ws.explain()
    assert "A_shared.dyn: 1 TMA tensor copy" in text and "wgmma.wait_group 4" in text
    assert "wgmma operand layouts: A_shared.dyn: 128-byte swizzle (64 rows x 128 B" in text
    log = _ptxas(src, tmp_path)
    assert "0 bytes spill stores, 0 bytes spill loads" in log
    assert "C7508" not in log and "C75" not in log
    regs = int(re.search(r"Used (\d+) registers", log).group(1))
    f = ws.facts
    assert f.producer_threads * ws.registers[0] + f.consumer_threads * ws.registers[1] \
        <= (f.producer_threads + f.consumer_threads) * regs


def test_ws_consumer_keeps_one_iteration_of_wgmma_groups_in_flight(ws_kernel, tmp_path):
    """CUTLASS's Hopper mainloop: per iteration fence/MMA/commit x 4 (no wait), one ``wait_group 4`` (every
    group of the previous iteration done), then the release of the previous iteration's slot; after the loop
    ``wait_group 0`` and the release of the last slot."""
    sch, k0, plan, src = ws_kernel
    f = plan.warp_specialization.facts
    assert (f.release_lag, f.wgmma_groups, f.wgmma_wait, f.final_release) == (1, 4, 4, True)
    proto = f.ring_protocol()
    assert (proto.release_lag, proto.groups, proto.wait_n) == (1, 4, 4) and plan.warp_specialization.protocol.ok
    loop, after = _consumer_loop(src)
    assert _WAIT_CALL.findall(loop) == ["4"]          # exactly one wait, G = 4 commit groups per iteration
    assert loop.count("commit_group_sync_aligned()") == 1 and "for (int k_1 = 0; k_1 < 4;" in loop
    wait_at = loop.index("wait_group_sync_aligned_4()")
    # slot of iteration k - 1; ring depth 2: the one-role plan has 2 stages (its copies through L2 take
    # about an ii, docs/machines.md), so TVM versions the tiles twice
    release_at = loop.index("ws_empty_ptr[((ws_k + 1) & 1)]")
    assert wait_at < loop.index("if (1 <= ws_k)") < release_at
    assert _WAIT_CALL.findall(after)[0] == "0" and after.index("sync_aligned_0()") < after.index("ws_empty_ptr[")
    assert after.index("ws_empty_ptr[") < after.index("C_ptr[")   # released before the epilogue's stores
    assert '"wgmma.wait_group.sync.aligned 4;"' in src
    log = _ptxas(src, tmp_path)
    assert "0 bytes spill stores, 0 bytes spill loads" in log and "C75" not in log


def test_ws_overlap_can_be_turned_off(tmp_path):
    from tvm_twill.model.pipeline import WS_WGMMA_OVERLAP
    from tvm_twill.transforms.pipelines import emit_and_check
    sch, k0, _ = wgmma_gemm(N)
    sch.annotate(k0, WS_WGMMA_OVERLAP, 0)
    plan = tvm_twill.auto_pipeline(sch, [k0], "sm_90a", warp_specialize=True)
    assert plan.warp_specialization.facts.release_lag == 0 and plan.warp_specialization.protocol.ok
    loop, after = _consumer_loop(_compile(sch, plan.tir_pipeline))
    assert _WAIT_CALL.findall(loop) == ["0"] and "ws_empty_ptr[(ws_k & 1)]" in loop  # ring depth 2
    assert not _WAIT_CALL.findall(after)
    sch.unannotate(k0, WS_WGMMA_OVERLAP)
    assert emit_and_check(sch.mod, "sm_90a")[0].release_lag == 1


def test_ws_one_slot_ring_keeps_synchronous_groups():
    """Depth 1 with lag 1 deadlocks (tests/model/test_protocol.py): the transform keeps lag 0."""
    from tvm_twill.model.pipeline import WS_DEPTH
    from tvm_twill.transforms.pipelines import emit_and_check
    sch, k0, _ = wgmma_gemm(256)
    tvm_twill.auto_pipeline(sch, [k0], "sm_90a", warp_specialize=True)
    sch.unannotate(k0, WS_DEPTH)
    sch.annotate(k0, WS_DEPTH, 1)
    facts, report = emit_and_check(sch.mod, "sm_90a")
    assert facts.depth == 1 and facts.release_lag == 0 and report.ok
    sch.unannotate(k0, WS_DEPTH)
    sch.annotate(k0, WS_DEPTH, 2)
    facts, report = emit_and_check(sch.mod, "sm_90a")
    assert facts.depth == 2 and facts.release_lag == 1 and report.ok


@pytest.mark.parametrize("field,value,kind", [
    ("release_last", False, "overwrite"),    # release of slot k-1 before the wait_group
    ("wgmma_wait", 5, "overwrite"),          # G + 1 groups may stay pending: iteration k-1's not covered
    ("final_release", False, "deadlock"),    # the last slot is never released: the producer tail waits forever
])
def test_a_seeded_overlap_bug_in_the_emitted_kernel_is_refused(monkeypatch, field, value, kind):
    import dataclasses

    from tvm_twill.transforms.ws import rewrite as W
    real = W.warp_specialize_func

    def buggy(func, arch):
        new, facts = real(func, arch)
        return new, (dataclasses.replace(facts, **{field: value}) if facts is not None else None)

    monkeypatch.setattr(W, "warp_specialize_func", buggy)
    sch, k0, _ = wgmma_gemm(256)
    with pytest.raises(tvm_twill.UnsupportedLoopError, match=f"fails the model check \\({kind}\\)"):
        tvm_twill.auto_pipeline(sch, [k0], "sm_90a", warp_specialize=True)


def test_overlap_counts_groups_statically_and_refuses_what_it_cannot_prove():
    from tvm_twill.frontend.ir import tvm_ffi
    from tvm_twill.transforms import wgmma_overlap as ov
    tirx = tvm.tirx
    found = []
    tvm_ffi.structural_walk(_flattened(wgmma_gemm(256)[0]).body, [(tirx.For, lambda f: found.append(f) if int(
        f.extent) == 4 and "commit_group" in f.script() and "for" not in f.body.script() else None)])
    (k1,) = found                                   # the inner loop: 4 x (fence, mma, commit, wait_group 0)
    stripped, groups = ov.overlap_groups([k1], 2)
    assert groups == 4 and "wait_group" not in stripped[0].script() and "commit_group" in stripped[0].script()
    v, n = tirx.Var("v", "int32"), tirx.Var("n", "int32")
    assert ov.overlap_groups([tirx.For(v, 0, 2, tirx.ForKind.SERIAL, k1)], 2) is None   # 8 groups: wait takes 0-7
    assert ov.overlap_groups([tirx.For(v, 0, n, tirx.ForKind.SERIAL, k1)], 2) is None   # trip count not static
    assert ov.overlap_groups([tirx.IfThenElse(n > 0, k1, None)], 2) is None             # commits under a branch
    assert ov.overlap_groups([k1], 1) is None                                           # one slot: deadlock
    mmas = []
    tvm_ffi.structural_walk(k1, [(tvm.ir.expr.Call, lambda c: mmas.append(c) if "mma_async" in c.script() else None)])
    acc = mmas[0].args[0]
    touch = tirx.BufferStore(acc.source, tvm.tirx.const(0.0, "float32"), list(acc.indices))
    assert ov.overlap_groups([k1, touch], 2) is None          # the accumulator written while groups are in flight
    read = tirx.Evaluate(acc)
    assert ov.overlap_groups([k1, read], 2) is None           # ... or read


# ---------------------------------------------------------------------------- 128-byte swizzled rings
_TMA = re.compile(r"cp_async_bulk_tensor_g2s\w*\(tvm_builtin_cuda_cvta_generic_to_shared\(\(&\(\(\(half\*\)buf_dyn_shmem_ptr"
                  r"\)\[(.+?)\]\)\)\), \(\(void\*\)\(\(unsigned long long\)\(&\((\w+)\)\)\)\), (.+), "
                  r"tvm_builtin_cuda_cvta_generic_to_shared\(\(&\(ws_full_ptr")
_DESC = re.compile(r"ptx_wgmma_encode_matrix_descriptor\(\(&\((desc_\w+)_ptr\[0\]\)\), \(&\(\(\(half\*\)"
                   r"buf_dyn_shmem_ptr\)\[(.+?)\]\)\), (\d+), (\d+), (\d+)\);")


def _c_eval(expr: str, env: dict) -> int:
    """A CUDA index expression of the emitted source, at the given values (integer +, *, %, / >= 0)."""
    py = expr.replace("(int)", "").replace("blockIdx.x", "bx").replace("blockIdx.y", "by").replace("/", "//")
    return eval(py, {}, env)  # noqa: S307 - our own generated source


def _operand_reads(src, facts, n, bn, p=3, bx=1, by=2):
    """For block (bx, by), iteration p: {(operand, kk, row, k): (global row, global k)} of every element the
    consumer's wgmmas read, found by replaying the emitted TMA copies (tensor maps from the plan, box origins
    and destinations from the source) and reading the emitted descriptors with model.wgmma_layout."""
    from tvm_twill.model.tma import swizzle
    from tvm_twill.model.wgmma_layout import operand_addresses
    env = {"ws_p": p, "ws_k": p, "bx": bx, "by": by, "ws_pad0": 0, "ws_pad1": 0}
    maps = {m.param: m.to_json() for m in facts.tensor_maps}
    at = {}  # pool byte -> (global row, global k)
    for dst, param, coords in _TMA.findall(src):
        m = maps[param]
        base = 2 * _c_eval(dst, env)
        assert base % 1024 == 0                     # a slot starts on an atom (the pool start taken aligned)
        origin = [_c_eval(c, env) for c in coords.split(", ")]
        strides = [1] + [s // 2 for s in m["global_strides"]]
        box = m["box"]
        for lin in range(int(__import__("math").prod(box))):
            rem, g = lin, 0
            for d, e in enumerate(box):
                g += (origin[d] + rem % e) * strides[d]
                rem //= e
            for byte in (0, 1):
                at[base + swizzle(2 * lin + byte, m["swizzle"])] = (g // n, g % n, byte)
    reads = {}
    for name, start, ldo, sdo, layout in _DESC.findall(src):
        rows = 64 if name == "desc_a" else bn
        for kk in range(4):
            addr = operand_addresses(2 * _c_eval(start, {**env, "k_1": kk}), 16 * int(ldo), 16 * int(sdo),
                                     int(layout), rows, 32)
            for (i, kb), b in addr.items():
                gr, gk, byte = at[b]
                assert byte == kb % 2
                reads[(name, kk, i, kb // 2)] = (gr, gk)
    return reads


def _expected_reads(n, bn, p=3, bx=1, by=2):
    """C = A @ B^T: the kk-th m64n{bn}k16 of iteration p reads A[by*64 + i, 64p + 16kk + k], B[bx*bn + j, ...]."""
    out = {}
    for kk in range(4):
        for k in range(16):
            out.update({("desc_a", kk, i, k): (by * 64 + i, 64 * p + 16 * kk + k) for i in range(64)})
            out.update({("desc_b", kk, j, k): (bx * bn + j, 64 * p + 16 * kk + k) for j in range(bn)})
    return out


@pytest.fixture(scope="module")
def ws_kernel_unswizzled():
    from tvm_twill.model.pipeline import WS_SWIZZLE
    sch, k0, _ = wgmma_gemm(N)
    sch.annotate(k0, WS_SWIZZLE, 0)
    plan = tvm_twill.auto_pipeline(sch, [k0], "sm_90a", warp_specialize=True)
    return sch, k0, plan, _compile(sch, plan.tir_pipeline)


def test_every_wgmma_reads_the_gemm_operand_element_through_tma_and_its_descriptor(ws_kernel, ws_kernel_unswizzled):
    """End to end, per element: what TMA writes (tensor map + box origin + slot) and where each descriptor
    reads are taken from the emitted kernels; both the swizzled and the no-swizzle kernel feed every wgmma
    exactly the GEMM's operands."""
    want = _expected_reads(N, 128)
    for _, _, plan, src in (ws_kernel, ws_kernel_unswizzled):
        assert _operand_reads(src, plan.warp_specialization.facts, N, 128) == want


@pytest.mark.slow  # about 200 s on two cores (the per-element check runs into the planted mismatch): the default
# suite keeps the end-to-end check itself (test_every_wgmma_reads_the_gemm_operand_element_through_tma_...)
def test_a_wrong_descriptor_mode_is_caught_by_the_end_to_end_check(ws_kernel):
    _, _, plan, src = ws_kernel
    bad = src.replace(", 1, 64, 3);", ", 1, 64, 0);", 1)     # A's descriptor says "no swizzle"
    with pytest.raises((AssertionError, KeyError)):
        assert _operand_reads(bad, plan.warp_specialization.facts, N, 128) == _expected_reads(N, 128)


def test_swizzle_can_be_turned_off(ws_kernel_unswizzled, tmp_path):
    _, _, plan, src = ws_kernel_unswizzled
    ws = plan.warp_specialization
    assert ws.facts.copy_plans == ("A_shared.dyn: 1 TMA tensor copy (3-d box 8 x 64 x 8, 8192 B)",
                                   "B_shared.dyn: 1 TMA tensor copy (3-d box 8 x 128 x 8, 16384 B)")
    assert ws.facts.operand_layouts == ("A_shared.dyn: no swizzle (tvm_twill.ws_swizzle = 0)",
                                        "B_shared.dyn: no swizzle (tvm_twill.ws_swizzle = 0)")
    assert "ws_pad" not in src and src.count(", 64, 8, 0);") == 1 and ws.protocol.ok
    assert "0 bytes spill stores" in _ptxas(src, tmp_path)


def test_swizzle_pads_past_shared_memory_fall_back_and_deeper_rings_are_capped(monkeypatch):
    import dataclasses

    from tvm_twill.frontend import costs as fe_costs
    from tvm_twill.model.machine import get_machine
    # a DRAM latency of 4000 cycles puts the MMA 5 stages after its copies: 6 versions, a 6-slot ring
    monkeypatch.setattr(fe_costs, "DRAM_LATENCY_CYCLES", 4000)
    h100 = get_machine("h100")
    sch, k0, _ = wgmma_gemm(N)   # 6 slots x 24 KB: 147584 B unswizzled, 149632 B with the two 1 KB pads
    plan = tvm_twill.auto_pipeline(sch, [k0], "sm_90a", warp_specialize=True,
                                   machine=dataclasses.replace(h100, smem_bytes=148000))
    ws = plan.warp_specialization
    assert ws.facts.swizzle_pad_bytes == 0 and sch.get(k0).annotations["tvm_twill.ws_swizzle"] == 0
    assert "no swizzle: the swizzled rings' alignment pads need 149632 B" in ws.explain()
    assert all("no swizzle" in s for s in ws.facts.operand_layouts) and ws.facts.ring_bytes == 147456
    # 147500 B: the one-role pipeline's six versions fit, six slots and their mbarrier arrays do not; the
    # ring is planned five deep (rings checked after emission too)
    sch, k0, _ = wgmma_gemm(N)
    plan = tvm_twill.auto_pipeline(sch, [k0], "sm_90a", warp_specialize=True,
                                   machine=dataclasses.replace(h100, smem_bytes=147500))
    ws = plan.warp_specialization
    assert ws.ring_depth == 5 and ws.facts.ring_bytes == 5 * 24576 + 2048 and ws.protocol.ok
    assert "ring depth 5, not the pipeline's 6" in ws.explain()


def _descriptor_loop(off, ext, ldo=64, sdo=8, layout=0, extra=None):
    from tvm.script import tirx as T
    tirx = tvm.tirx
    tile = tirx.decl_buffer((4096,), "float16", name="A_tile", scope="shared.dyn")
    desc = tirx.decl_buffer((1,), "uint64", name="desc", scope="local")
    k = tirx.Var("k", "int32")
    call = T.cuda.wgmma.encode_matrix_descriptor(
        T.address_of(desc[0]), T.tvm_access_ptr(T.type_annotation("float16"), tile.data, off(k), ext, 1),
        ldo, sdo, layout)
    body = tirx.Evaluate(call) if extra is None else tirx.SeqStmt([tirx.Evaluate(call), extra(tile)])
    return tile, tirx.For(k, 0, 4, tirx.ForKind.SERIAL, body)


@pytest.mark.parametrize("case,reason", [
    (dict(off=lambda k: k * 1024, ext=1024), None),                         # k16 slices: chunks 0, 2, 4, 6
    (dict(off=lambda k: (k + 4) * 512, ext=1024), "crosses a 128-byte atom row"),  # chunk 7 + 1: next atom
    (dict(off=lambda k: k * 1024 + 4, ext=1024), "inside a core matrix"),
    (dict(off=lambda k: k * 1024 + tvm.tirx.Var("x", "int32"), ext=1024), "not a function of constant-range"),
    (dict(off=lambda k: k * 1024, ext=1024, layout=3), "already laid out with swizzle mode 3"),
    (dict(off=lambda k: k * 1024, ext=1024, sdo=64), "SBO 1024 B"),
    (dict(off=lambda k: k * 1024, ext=1024, ldo=48), "k chunks a multiple of 8"),   # 48 rows: 10.7 chunks
    (dict(off=lambda k: k * 1024, ext=1024,
          extra=lambda t: tvm.tirx.Evaluate(tvm.tirx.BufferLoad(t, [0]))), "read other than through wgmma"),
])
def test_swizzle_candidates_refuse_what_they_cannot_prove(case, reason):
    from tvm_twill.transforms import tir_util as U
    from tvm_twill.transforms.ws.wgmma_swizzle import candidates
    tile, loop = _descriptor_loop(**case)
    ok, why = candidates([loop], [(tile, 4096, 2)], U.uses_var)
    if reason is None:
        assert tile in ok and ok[tile].starts == (0, 2048, 4096, 6144) and ok[tile].tile.rows == 64
    else:
        assert tile not in ok and reason in why[tile], why


@pytest.mark.parametrize("bn", [64, 256])
def test_other_tile_widths_swizzle_and_read_their_operands(bn):
    n = 512
    sch, k0, _ = wgmma_gemm(n, bn=bn)
    plan = tvm_twill.auto_pipeline(sch, [k0], "sm_90a", warp_specialize=True)
    f = plan.warp_specialization.facts
    assert f.operand_layouts[1] == f"B_shared.dyn: 128-byte swizzle ({bn} rows x 128 B, 1024-byte atoms)"
    assert [m.box for m in f.tensor_maps] == [(64, 64), (64, bn)] and plan.warp_specialization.protocol.ok
    assert _operand_reads(_compile(sch, plan.tir_pipeline), f, n, bn) == _expected_reads(n, bn)
    if bn == 256:  # the pipeline keeps 6 versions of B, 4 of A; 6 ring slots of both would not fit (245760 B)
        assert plan.warp_specialization.ring_depth == 5 and f.ring_bytes == 5 * 40960 + 2048
        assert "ring depth 5, not the pipeline's 6: 6 slots of 40960 B exceed the 232448 B" in \
            plan.warp_specialization.explain()


def test_a_ring_that_cannot_have_two_slots_is_refused_or_not_chosen():
    import dataclasses

    from tvm_twill.model.machine import get_machine
    small = dataclasses.replace(get_machine("h100"), smem_bytes=40000)   # one 24 KB slot fits, two do not
    sch, k0, _ = wgmma_gemm(512)
    with pytest.raises(tvm_twill.UnsupportedLoopError, match="two ring slots of 24576 B do not fit the 40000 B"):
        tvm_twill.auto_pipeline(sch, [k0], "sm_90a", warp_specialize=True, machine=small)
    assert "ws_depth" not in sch.mod.script()
    plan = tvm_twill.auto_pipeline(sch, [k0], "sm_90a", warp_specialize="auto", machine=small)
    assert not plan.warp_specialization.chosen and "exceed the 40000 B" in plan.warp_specialization.reason


@pytest.mark.parametrize("trans_b,ok", [(0, True), (1, False)])
def test_swizzle_is_refused_beside_a_transposed_wgmma_operand(trans_b, ok):
    from tvm_twill.frontend.ir import tvm_ffi
    from tvm_twill.transforms import tir_util as U
    from tvm_twill.transforms.ws.wgmma_swizzle import candidates
    mmas = []
    tvm_ffi.structural_walk(_flattened(wgmma_gemm(256)[0]).body, [(tvm.ir.expr.Call, lambda c: mmas.append(c) if any(
        getattr(a, "value", None) == "mma_async" for a in c.args) else None)])
    mma = mmas[0]
    i = next(i for i, a in enumerate(mma.args) if getattr(a, "value", None) == "mma_async")
    args = list(mma.args)
    args[i - 1] = tvm.tirx.const(trans_b, "int32")   # imm-trans-b: B read MN-major
    changed = tvm.ir.expr.Call(mma.op, args, mma.attrs, ret_ty=mma.ty)
    tile, loop = _descriptor_loop(lambda k: k * 1024, 1024, extra=lambda t: tvm.tirx.Evaluate(changed))
    good, why = candidates([loop], [(tile, 4096, 2)], U.uses_var)
    assert (tile in good) == ok and (ok or "transposed (MN-major)" in why[tile])


@pytest.mark.parametrize("value", [2, "yes"])
def test_a_malformed_swizzle_annotation_is_refused_in_one_line(value):
    from tvm_twill.model.pipeline import WS_SWIZZLE
    sch, k0, _ = wgmma_gemm(256)
    sch.annotate(k0, WS_SWIZZLE, value)
    with pytest.raises(tvm_twill.UnsupportedLoopError, match="tvm_twill.ws_swizzle must be 0 or 1, got") as e:
        tvm_twill.auto_pipeline(sch, [k0], "sm_90a", warp_specialize=True)
    assert "\n" not in str(e.value)
