"""A protocol check cut short (the plan's time limit, the state budget) is no kernel (issue #38, item 7).

``auto_pipeline`` gives every mbarrier protocol check ``CHECK_TIME_FACTOR`` (20) x the plan's ``time_limit`` seconds and
``model.protocol.MAX_STATES`` states; past either there is no verdict: ``warp_specialize=True`` refuses in one
line that says what to do, ``"auto"`` falls back to the software pipeline and says why.  The loop: a SIMT GEMM
of 8 warps whose k loop has a symbolic trip count.  Its check finishes in well under a second here; the tests
cut it short with a clock that runs fast (``ring_state.time``) or a small budget, so they take seconds, not the
minutes a deep ring can take.
"""
import pytest

tvm = pytest.importorskip("tvm")
from tvm.script import tirx as T  # noqa: E402

import tvm_twill  # noqa: E402
from tvm_twill.planner import warpspec  # noqa: E402
from tvm_twill.errors import UnsupportedLoopError  # noqa: E402
from tvm_twill.frontend import read_annotation  # noqa: E402
from tvm_twill.model import protocol, ring_state  # noqa: E402
from tvm_twill.model.pipeline import WS_DEPTH  # noqa: E402
from tvm_twill.model.protocol import RingProtocol, check_ring  # noqa: E402
from tvm_twill.transforms.ws import lowering as ws_lowering  # noqa: E402


@T.prim_func(s_tir=True)
def simt_gemm_k(a: T.handle, b: T.handle, c: T.handle):
    # C = A^T B in fp32 on the CUDA cores: a 16 x 16 block tile, 256 threads (8 warps) of one output each; the k
    # loop (K / 64 trips, symbolic) stages a 64 x 16 tile of A (stored k-major) and of B in shared memory,
    # one 16-byte vector per thread and tile
    K = T.int32()
    A = T.match_buffer(a, (K, 16), "float32")
    B = T.match_buffer(b, (K, 16), "float32")
    C = T.match_buffer(c, (16, 16), "float32")
    with T.sblock("root"):
        A_shared = T.sblock_alloc_buffer((K, 16), scope="shared")
        B_shared = T.sblock_alloc_buffer((K, 16), scope="shared")
        C_local = T.sblock_alloc_buffer((16, 16), scope="local")
        for t in T.thread_binding(256, thread="threadIdx.x"):
            with T.sblock("C_init"):
                v_i = T.axis.spatial(16, t // 16)
                v_j = T.axis.spatial(16, t % 16)
                C_local[v_i, v_j] = T.float32(0.0)
            for k_0 in range(K // 64):
                for u in T.thread_binding(256, thread="threadIdx.x"):
                    for v in T.vectorized(4):
                        with T.sblock("A_shared"):
                            v0 = T.axis.spatial(K, k_0 * 64 + (u * 4 + v) // 16)
                            v1 = T.axis.spatial(16, (u * 4 + v) % 16)
                            A_shared[v0, v1] = A[v0, v1]
                for u in T.thread_binding(256, thread="threadIdx.x"):
                    for v in T.vectorized(4):
                        with T.sblock("B_shared"):
                            v0 = T.axis.spatial(K, k_0 * 64 + (u * 4 + v) // 16)
                            v1 = T.axis.spatial(16, (u * 4 + v) % 16)
                            B_shared[v0, v1] = B[v0, v1]
                for k_1 in range(64):
                    with T.sblock("C_update"):
                        v_i = T.axis.spatial(16, t // 16)
                        v_j = T.axis.spatial(16, t % 16)
                        v_k = T.axis.reduce(K, k_0 * 64 + k_1)
                        C_local[v_i, v_j] = C_local[v_i, v_j] + A_shared[v_k, v_i] * B_shared[v_k, v_j]
            with T.sblock("C_local"):
                v0 = T.axis.spatial(16, t // 16)
                v1 = T.axis.spatial(16, t % 16)
                C[v0, v1] = C_local[v0, v1]


class FastClock:
    """``time`` for ``model.ring_state``: every reading a minute after the last, so a check passes any
    deadline at its first reading after the start."""

    def __init__(self):
        self.now = 0.0

    def monotonic(self):
        self.now += 60.0
        return self.now


@pytest.fixture
def unfinished(monkeypatch):
    """Protocol checks that cannot finish: a fresh report cache, and the clock or the budget (by name)."""
    monkeypatch.setattr(protocol, "_REPORTS", {})

    def cut(by: str):
        if by == "deadline":
            monkeypatch.setattr(ring_state, "time", FastClock())
        else:
            monkeypatch.setattr(protocol, "MAX_STATES", 1000)
    return cut


def test_the_gemm_is_warp_specialized_when_its_check_finishes(monkeypatch):
    """The loop of the tests below: 8 consumer warps and a symbolic trip count, checked in full."""
    monkeypatch.setattr(protocol, "_REPORTS", {})
    sch = tvm.s_tir.Schedule(simt_gemm_k)
    plan = tvm_twill.auto_pipeline(sch, "k_0", "sm_80", warp_specialize=True, time_limit=1, quiet=True)
    ws = plan.warp_specialization
    assert plan.applied and ws.chosen and plan.extraction.trip_count is None
    assert ws.protocol.protocol.consumers == 8 and ws.protocol.ok and ws.protocol.states > 1000


@pytest.mark.parametrize("by,says", [
    ("deadline", r"could not be model checked in the 20s a check gets \(20 x the plan's time_limit; \d+ states "
                 r"explored, no verdict\), so no kernel: raise time_limit, or plan without warp_specialize$"),
    ("states", r"could not be model checked: more than 1000 states, too many to explore, so no kernel: bind "
               r"fewer consumer threads around the loop, or plan without warp_specialize$")])
def test_true_refuses_a_protocol_it_could_not_check(unfinished, by, says):
    unfinished(by)
    sch = tvm.s_tir.Schedule(simt_gemm_k)
    before = sch.mod
    with pytest.raises(UnsupportedLoopError, match=r"^warp specialization: the emitted mbarrier protocol \(\d+ ring "
                                                   r"slots, 8 consumer warps\) " + says) as err:
        tvm_twill.auto_pipeline(sch, "k_0", "sm_80", warp_specialize=True, time_limit=1, quiet=True)
    assert "\n" not in str(err.value) and "iterations" not in str(err.value)
    tvm.ir.assert_structural_equal(sch.mod, before)   # no kernel: the loop is as it was


def test_auto_falls_back_to_the_software_pipeline_and_says_why(unfinished, monkeypatch):
    unfinished("deadline")
    # "auto" takes the producer variant (as if the model predicted it faster): the check is what refuses it
    monkeypatch.setattr(warpspec, "_by_throughput", lambda *a, **kw: (True, "predicted faster (forced by the test)"))
    sch = tvm.s_tir.Schedule(simt_gemm_k)
    plan = tvm_twill.auto_pipeline(sch, "k_0", "sm_80", warp_specialize="auto", time_limit=1, quiet=True)
    ws = plan.warp_specialization
    assert plan.tir_pipeline is None and not ws.chosen and ws.protocol is None
    assert ws.reason.startswith("not specialized: warp specialization: the emitted mbarrier protocol")
    assert "could not be model checked in the 20s a check gets (20 x the plan's time_limit" in ws.reason
    assert "(warp_specialize='auto' fell back to the software pipeline: warp specialization: the emitted " \
           "mbarrier protocol" in plan.outcome and "raise time_limit" in plan.outcome
    loop = sch.get(sch.get_loops(sch.get_sblock("C_update"))[1])
    assert WS_DEPTH not in (loop.annotations or {})
    assert (read_annotation(loop) is not None) == plan.applied


def test_a_long_check_reports_its_progress(monkeypatch):
    """``protocol_limits``'s reports reach the plan's progress (``PlanProgress.step``) as the check runs."""
    monkeypatch.setattr(protocol, "_REPORTS", {})
    monkeypatch.setattr(ws_lowering, "REPORT_EVERY", 0.0)

    class Lines:
        def __init__(self):
            self.said = []

        def step(self, what):
            self.said.append(what)

    lines = Lines()
    with ws_lowering.protocol_limits(60.0, lines):
        report = check_ring(RingProtocol(3, 4))
    assert report.ok and lines.said
    assert all(line.startswith("warp specialization: model checking the mbarrier protocol, ") and
               line.endswith(" states so far") for line in lines.said)
