"""A plan says only what was proven, and what the build compiles (issue #38, items 3, 5 and 6).

* A solve the time limit cut short (``time_limit=0``: the serial fallback) is "not proven optimal", with
  its proven lower bound; no text calls it the optimal schedule or lists IIs "proven infeasible" that were
  never decided, and no range runs backwards.
* The cp.async waits of a loop of symbolic trip count are stated as ``tvm_twill.build`` compiles them: the
  body's count, and 0 in the prologue and epilogue (TVM guards those iterations; their counts are lowered to
  0), not the counts a constant trip count would have.
* On sm_90a the one-role software pipeline issues per-thread cp.async: explain() names and prices its
  copies so, never TMA (only the warp-specialized kernel issues TMA).
"""
import math
import re

import pytest

tvm = pytest.importorskip("tvm")

import tvm_twill  # noqa: E402
from tvm_twill import workloads  # noqa: E402
from tvm_twill.api import auto_pipeline  # noqa: E402

_WAIT = re.compile(r"tvm_builtin_ptx_cp_async_wait_group_async_wait_group_(\d+)\(\);")
_RANGE = re.compile(r"from (\d+) to (\d+) cycles")


def _kernel(src: str) -> str:
    return src[src.index('extern "C" __global__'):]


_SYMBOLIC_COPY = '''
@T.prim_func(s_tir=True)
def f(a: T.handle, c: T.handle):
    n = T.int32()
    X = T.match_buffer(a, (4, n, 64), "float32")
    C = T.match_buffer(c, (4, n, 64), "float32")
    for tx in T.thread_binding(4, thread="threadIdx.x"):
        for i in T.serial(n):
            with T.sblock("body"):
                S = T.sblock_alloc_buffer((4, 64), "float32", scope="shared")
                for j0 in range(16):
                    for v in T.vectorized(4):
                        with T.sblock("copy"):
                            S[tx, j0 * 4 + v] = X[tx, i, j0 * 4 + v]
                for j in range(64):
                    with T.sblock("use"):
                        C[tx, i, j] = S[tx, j] * T.float32(2)
'''


def test_a_plan_the_time_limit_cut_short_claims_only_its_lower_bound():
    # (tensorcore_gemm's k0 says the same; this loop builds in milliseconds)
    plan = auto_pipeline(tvm.s_tir.Schedule(tvm.script.from_source(_SYMBOLIC_COPY)), "i", "sm_80", time_limit=0)
    s, q = plan.schedule, plan.quantum
    assert not s.ii_optimal and s.lower_bound.ii < s.ii  # nothing was decided: the serial schedule
    assert not any(a.result == "unsat" for a in s.attempts)
    text = plan.explain()
    for claim in (plan.outcome, text):
        assert "the optimal schedule" not in claim and "optimal II" not in claim and "(optimal)" not in claim
        assert f"not proven optimal: every II below {s.lower_bound.ii * q} cycles proven infeasible" in claim
    assert "was proven infeasible" not in text  # no II was refuted, so no range of refuted IIs
    ranges = [(int(a), int(b)) for a, b in _RANGE.findall(text)]
    assert ranges and all(a <= b for a, b in ranges)
    assert f"the IIs from {s.lower_bound.ii * q} to {(s.ii - 1) * q} cycles were not proven infeasible" in text


def test_symbolic_trip_count_waits_are_what_the_build_compiles():
    sch = tvm.s_tir.Schedule(tvm.script.from_source(_SYMBOLIC_COPY))
    plan = auto_pipeline(sch, "i", "sm_80")
    assert plan.applied and plan.extraction.trip_count is None and plan.annotation.async_stages
    kernel = _kernel(tvm_twill.build(sch.mod, "sm_80", plan).mod.imports[0].inspect_source())
    body = kernel[kernel.index("for (int i = 0; i < (n - "):]
    body = body[:body.index("\n  }\n")]  # the steady-state loop of the kernel
    in_body = [int(n) for n in _WAIT.findall(body)]
    outside = [int(n) for n in _WAIT.findall(kernel.replace(body, ""))]
    assert in_body and outside
    assert in_body == [w.in_flight for w in plan.waits if w.part == "body"]
    assert {w.in_flight for w in plan.waits if w.part != "body"} == set(outside) == {0}
    text = plan.explain()
    stated = re.search(r"predicted cp.async.wait_group counts: ([^\n]*)", text).group(1)
    assert [int(n) for n in re.findall(r"body (\d+)", stated)] == in_body
    assert "every prologue and epilogue wait 0" in stated
    assert not re.search(r"(prologue|epilogue)\[\d+\] [1-9]", stated)


def test_sm90_one_role_copies_are_named_and_priced_as_cp_async():
    sch, k0, _ = workloads.wgmma_gemm(512)
    plan = auto_pipeline(sch, k0, "sm_90a", warp_specialize=False)
    assert plan.applied and plan.async_copies
    text = plan.explain()
    assert "TMA" not in text
    for st in plan.extraction.stmts:
        if st.async_capable:
            copy = st.copy
            assert f"on async copy (cp.async): port {copy.port:.0f}" in st.description
            # the graph the one-role solve uses: the block's cp.async, not the producer's TMA boxes
            issue = tvm_twill.model.throughput.issue_cycles(
                plan.machine.costs.chip, {"cp.async": copy.nbytes / (32 * 16)},
                warps=plan.extraction.threads // 32)
            assert copy.issue == pytest.approx(issue)
            assert plan.graph.ops[st.index].cycles == math.ceil(copy.cycles / plan.quantum - 1e-9)
    kernel = _kernel(tvm_twill.build(sch.mod, "sm_90a", plan).mod.imports[0].inspect_source())
    assert "ptx_cp_async" in kernel and "cp.async.bulk" not in kernel
