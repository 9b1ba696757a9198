"""Warp specialization: auto_pipeline(..., warp_specialize=...) -> producer warp + mbarrier rings, compiled by TVM.

No GPU here: the kernels are compiled with ``tvm.compile`` and ``nvcc -cubin``;
the tests read the CUDA source and ptxas's report, and the emitted mbarrier
protocol is model checked (tvm_twill.model.protocol).
"""
import dataclasses
import re
import shutil
import subprocess

import pytest

tvm = pytest.importorskip("tvm")

import tvm_twill  # noqa: E402
from tvm_twill.errors import InputError, UnsupportedLoopError  # noqa: E402
from tvm_twill.frontend import read_annotation  # noqa: E402
from tvm_twill.model.pipeline import WS_DEPTH, WS_REGISTERS  # noqa: E402
from tvm_twill.model.protocol import check_ring  # noqa: E402
from tvm_twill.transforms.ws import rewrite as W  # noqa: E402
from tvm_twill.transforms.pipelines import WS_PIPELINE  # noqa: E402
from tvm_twill.planner.warpspec import register_budgets  # noqa: E402

N = 1024  # TVM's tensor-core GEMM schedule (its tiles, guarded at this size)


def _compile(sch, arch, plan):
    with tvm.transform.PassContext(config={"tirx.use_async_copy": 1}):
        f = tvm.compile(sch.mod, target=tvm.target.Target({"kind": "cuda", "arch": arch}),
                        tir_pipeline=plan.tir_pipeline)
    return f.mod.imports[0].inspect_source()


def _ptxas(src, arch, tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    cu = tmp_path / "k.cu"
    cu.write_text(src)
    r = subprocess.run(["nvcc", f"-arch={arch}", "-cubin", "-Xptxas", "-v", "-o", str(tmp_path / "k.cubin"),
                        str(cu)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout + r.stderr


@pytest.fixture(scope="module")
def ws_kernels():
    from tvm_twill.workloads import tensorcore_gemm
    out = {}
    for arch in ("sm_90a", "sm_80"):
        sch, k0, k1 = tensorcore_gemm(N)
        plan = tvm_twill.auto_pipeline(sch, [k0, k1], arch, warp_specialize=True)
        out[arch] = (sch, k0, k1, plan, _compile(sch, arch, plan))
    return out


def test_sm90a_kernel_has_tma_mbarriers_elect_and_setmaxnreg(ws_kernels, tmp_path):
    sch, k0, k1, plan, src = ws_kernels["sm_90a"]
    ws = plan.warp_specialization
    assert plan.applied and ws.chosen and plan.tir_pipeline == WS_PIPELINE == "tvm_twill_ws"
    assert ws.copy == "bulk" and ws.registers is not None
    for needle in ("mbarrier.try_wait.parity", "expect_tx", "elect.sync", "setmaxnreg.dec.sync.aligned",
                   "setmaxnreg.inc.sync.aligned", "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx",
                   "__launch_bounds__(256, 1)", "__shfl_sync"):
        assert needle in src, needle
    assert "cp.async.wait_group" not in src  # the ring replaces TVM's commit/wait groups on this loop
    # TVM's padded tiles are not one TMA box: the elected lane copies each padded row with one bulk copy
    # (64 B rows of A, 256 B rows of B), not one 16-byte copy per lane and vector
    assert ws.facts.copy_plans == ("A_shared.dyn: 128 bulk copies of 64 B (128 rows)",
                                   "B_shared.dyn: 32 bulk copies of 256 B (32 rows)")
    assert not ws.facts.tensor_maps and "CUtensorMap" not in src
    # the loop carries the ring annotations, not a software pipeline; the inner loop keeps its pipeline
    node = sch.get(k0)
    assert int(node.annotations[WS_DEPTH]) == ws.ring_depth and read_annotation(node) is None
    assert [int(r) for r in node.annotations[WS_REGISTERS]] == list(ws.registers)
    assert read_annotation(sch.get(k1)) is not None
    log = _ptxas(src, "sm_90a", tmp_path)
    assert "0 bytes spill stores, 0 bytes spill loads" in log
    assert "C7508" not in log and "setmaxnreg" not in log.lower().replace("ptxas info", "")
    regs = int(re.search(r"Used (\d+) registers", log).group(1))
    f = ws.facts
    # setmaxnreg only moves registers within the pool ptxas allocated: it must not ask for more
    assert f.producer_threads * ws.registers[0] + f.consumer_threads * ws.registers[1] \
        <= (f.producer_threads + f.consumer_threads) * regs


def test_sm80_kernel_uses_cp_async_mbarrier_arrive_and_test_wait(ws_kernels, tmp_path):
    sch, k0, _, plan, src = ws_kernels["sm_80"]
    ws = plan.warp_specialization
    assert ws.copy == "cp.async" and ws.registers is None
    for needle in ("mbarrier.test_wait.parity", "cp.async.mbarrier.arrive.noinc", "cp.async.cg.shared.global",
                   "mbarrier.init", "__launch_bounds__(160)"):
        assert needle in src, needle
    for absent in ("try_wait", "setmaxnreg", "elect.sync", "cp.async.bulk"):  # sm_90-only instructions
        assert absent not in src, absent
    log = _ptxas(src, "sm_80", tmp_path)
    assert "0 bytes spill stores, 0 bytes spill loads" in log


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_every_emitted_kernel_passed_the_protocol_check(ws_kernels, arch):
    plan = ws_kernels[arch][3]
    ws = plan.warp_specialization
    proto = ws.facts.ring_protocol()
    assert ws.protocol.ok and ws.protocol.states > 100
    assert proto.depth == ws.ring_depth and proto.consumers == ws.facts.consumer_threads // 32
    assert proto.full_init == (1 if arch == "sm_90a" else 32)
    assert ws.facts.release_lag == 0 and proto.release_lag == 0  # mma.sync consumers: no wgmma groups to overlap
    assert "protocol model check" in plan.explain() and "producer warp" in plan.explain()


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_auto_reports_both_iis_and_picks_by_them(mma_gemm, arch):
    sch, k0, k1 = mma_gemm()
    plan = tvm_twill.auto_pipeline(sch, [k0, k1], arch, warp_specialize="auto")
    ws = plan.warp_specialization
    assert ws.ii_swp_cycles == plan.ii_cycles and ws.ii_ws_cycles is not None
    assert ws.chosen == (ws.ii_ws_cycles < ws.ii_swp_cycles)
    text = plan.explain()
    assert f"{ws.ii_ws_cycles} cycles" in text and f"{ws.ii_swp_cycles} cycles" in text
    if not ws.chosen:  # the one-role plan was applied as without warp_specialize
        assert plan.tir_pipeline is None and read_annotation(sch.get(k0)) is not None


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_the_reported_ii_is_the_one_the_kernel_runs(ws_kernels, arch):
    """One producer role and a role per consumer group, as emitted: a joint optimum that splits the consumer
    statements over several roles is reported, and the consumers are re-solved as one group (or two ordered
    groups, each on a role of its own)."""
    ws = ws_kernels[arch][3].warp_specialization
    copies = set(ws.roles["producer warp"])
    consumer_roles = {p.warp for n, p in ws.schedule.ops.items() if n not in copies}
    producer_roles = {p.warp for n, p in ws.schedule.ops.items() if n in copies}
    groups = len(ws.consumer_order or (0,))
    assert len(consumer_roles) == groups and len(producer_roles) == 1 and not consumer_roles & producer_roles
    for g in range(groups if ws.consumer_order else 0):
        assert len({p.warp for n, p in ws.schedule.ops.items() if n.endswith(f"@{g}")}) == 1
    assert ws.ii_ws_cycles == ws.schedule.ii * ws_kernels[arch][3].quantum
    if ws.joint_split is not None:
        roles, ii = ws.joint_split
        assert roles > 1 and ii <= (ws.one_group or ws).ii_ws_cycles   # at most one consumer group's ii
        assert f"runs the consumer statements as {roles} warp roles" in ws.explain()


def test_register_peaks_of_the_joint_schedule_fit_the_setmaxnreg_budgets(ws_kernels, mma_gemm, monkeypatch):
    ws = ws_kernels["sm_90a"][3].warp_specialization
    assert ws.register_peaks is not None and ws.register_peaks[1] > 0  # the inner pipeline's ldmatrix tiles
    assert all(need <= have for need, have in zip(ws.register_peaks, ws.registers))
    assert f"consumers {ws.register_peaks[1]}" in ws.explain()
    import tvm_twill.planner.warpspec as warpspec
    monkeypatch.setattr(warpspec, "register_budgets", lambda threads: (40, ws.register_peaks[1] - 8))
    sch, k0, k1 = mma_gemm()
    with pytest.raises(tvm_twill.UnsupportedLoopError, match="more than its setmaxnreg budget"):
        tvm_twill.auto_pipeline(sch, [k0, k1], "sm_90a", warp_specialize=True)


def test_default_changes_nothing(mma_gemm):
    sch, k0, k1 = mma_gemm()
    plan = tvm_twill.auto_pipeline(sch, [k0, k1], "sm_90a")
    assert plan.warp_specialization is None and plan.tir_pipeline is None
    assert WS_DEPTH not in sch.get(k0).annotations


@pytest.mark.parametrize("bad", ["yes", 1, None, "AUTO"])
def test_bad_warp_specialize_value_is_refused(mma_gemm, bad):
    sch, k0, _ = mma_gemm()
    with pytest.raises(InputError, match="warp_specialize must be False, True or 'auto'"):
        tvm_twill.auto_pipeline(sch, k0, "sm_80", warp_specialize=bad)


@pytest.mark.parametrize("field,value,kind", [
    ("consumer_parities", (0,) * 9, "read-before-commit"),     # the consumers never flip the phase
    ("producer_parities", (1,) * 9, None),                      # the producer never flips the phase
    ("release_last", False, "overwrite"),                        # release before the last read
    ("full_count", 31, "read-before-commit"),                    # one lane short on the full barrier
    ("empty_count", 3, "overwrite"),                             # one consumer warp short
    ("tail_acquires", 0, "producer-tail"),                       # no producer tail
])
def test_a_seeded_bug_in_the_emitted_kernel_is_refused(mma_gemm, monkeypatch, field, value, kind):
    real = W.warp_specialize_func

    def buggy(func, arch):
        new, facts = real(func, arch)
        return new, (dataclasses.replace(facts, **{field: value}) if facts is not None else None)

    monkeypatch.setattr(W, "warp_specialize_func", buggy)
    sch, k0, k1 = mma_gemm()
    before = dict(sch.get(k0).annotations)
    with pytest.raises(UnsupportedLoopError, match="fails the model check" + (f" \\({kind}\\)" if kind else "")):
        tvm_twill.auto_pipeline(sch, k0, "sm_80", warp_specialize=True)
    assert dict(sch.get(k0).annotations) == before  # the loop is left as it was


def test_a_loop_without_copies_cannot_be_specialized():
    from tir_loops import register_only
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": register_only}))
    with pytest.raises(UnsupportedLoopError, match="no global->shared copy"):
        tvm_twill.auto_pipeline(sch, "i", "sm_80", warp_specialize=True)
    plan = tvm_twill.auto_pipeline(sch, "i", "sm_80", warp_specialize="auto")
    assert not plan.warp_specialization.chosen and "no global->shared copy" in plan.explain()


def test_register_budgets_fit_the_pool():
    for consumers in (128, 256, 384):
        p, c = register_budgets(consumers)
        n = consumers + 128
        assert p % 8 == 0 and c % 8 == 0 and 24 <= p <= c <= 240
        assert 128 * p + consumers * c <= n * (min(255, 65536 // n) // 8 * 8)
    with pytest.raises(UnsupportedLoopError, match="setmaxnreg needs at least 24"):
        register_budgets(1024 * 8)


@pytest.mark.parametrize("depth", range(1, 9))
@pytest.mark.parametrize("tma", [True, False])
def test_the_emitted_protocol_shape_is_correct_for_every_depth(depth, tma):
    """The protocol the transform emits (full count 1 or 32 lanes, one arrival per consumer warp), checked for
    ring depths 1-8 with 1-4 consumer warps."""
    from tvm_twill.model.protocol import RingProtocol
    for warps in range(1, 5 if depth <= 4 else 3):
        proto = RingProtocol(depth=depth, consumers=warps, tma=tma, lanes=1 if tma else 32,
                             full_count=1 if tma else 32, empty_count=warps)
        assert check_ring(proto).ok
