"""The ring protocol is model checked on the kernel as compiled (transforms.ws.compiled), not on the rewrite's facts.

* the protocol read off the final TIR (after every pass of ``tvm_twill_ws``) is the one the rewrite emitted,
  for the cp.async and TMA rings and the ordered consumer groups;
* a pass inserted after ours that breaks the protocol (moves the consumers' release before their reads: the
  model check finds the overwrite; drops the release or the producer's signal: the reader finds no protocol)
  gets no kernel: ``tvm.compile`` refuses it, where the rewrite's own check saw a correct protocol.
"""
import pytest

tvm = pytest.importorskip("tvm")
tvm_ffi = pytest.importorskip("tvm_ffi")

import tvm_twill  # noqa: E402
from tvm_twill.model.pipeline import WS_CONSUMER_ORDER  # noqa: E402
from tvm_twill.transforms.tir_util import flatten_seq, op_name  # noqa: E402
from tvm_twill.transforms.ws.compiled import check_compiled, read_protocol  # noqa: E402
from tvm_twill.transforms.pipelines import emit_and_check, ws_passes  # noqa: E402
from tvm_twill.workloads import tensorcore_gemm  # noqa: E402

tirx = tvm.tirx
N = 256
CONFIG = {"tirx.use_async_copy": 1}


@pytest.fixture(scope="module")
def planned():
    """arch -> the tensor-core GEMM's module, warp specialized (one consumer group)."""
    out = {}
    for arch in ("sm_80", "sm_90a"):
        sch, k0, k1 = tensorcore_gemm(N)
        plan = tvm_twill.auto_pipeline(sch, [k0, k1], arch, time_limit=20.0, warp_specialize=True)
        assert plan.warp_specialization.chosen
        if WS_CONSUMER_ORDER in sch.get(k0).annotations:  # the planner took two groups: the tests add them
            sch.unannotate(k0, WS_CONSUMER_ORDER)
        out[arch] = (sch, k0)
    return out


def _final(mod, arch: str, extra=()):
    """The module after every pass of tvm_twill_ws (``extra`` passes spliced in before its final checks)."""
    mod = tirx.transform.BindTarget(tvm.target.Target({"kind": "cuda", "arch": arch}).with_host(
        tvm.target.Target("llvm")))(mod)
    with tvm.transform.PassContext(config=CONFIG):
        parts = ws_passes()
        return tvm.transform.Sequential(parts.to_rewrite + parts.rewrite_on + list(extra) + parts.checks)(mod)


def _protocols(mod):
    return [p for _, f in mod.functions_items() if isinstance(f, tirx.PrimFunc) for p in [read_protocol(f)]
            if p is not None]


@pytest.mark.parametrize("arch,order", [("sm_80", None), ("sm_90a", None), ("sm_90a", [1, 0])])
def test_the_compiled_protocol_is_the_emitted_one(planned, arch, order):
    sch, k0 = planned[arch]
    mod = sch.mod if order is None else _with_order(sch, k0, order)
    facts, report = emit_and_check(mod, arch)
    assert report.ok and _protocols(_final(mod, arch)) == [facts.ring_protocol()]
    assert (facts.ring_protocol().order is not None) == (order is not None)


def _with_order(sch, k0, order):
    """The module with ordered consumer groups (the schedule itself left as it was)."""
    sch.annotate(k0, WS_CONSUMER_ORDER, order)
    mod = sch.mod
    sch.unannotate(k0, WS_CONSUMER_ORDER)
    return mod


def _dropping(name: str, which: str):
    """A pass (after ours) replacing every call ``name`` on the mbarrier array ``which`` by a no-op."""
    def drop(e):
        if op_name(e.value) == name and which in str(e.value.args[0]):
            return tirx.Evaluate(tirx.const(0, "int32"))
        return e

    @tirx.transform.prim_func_pass(opt_level=0, name="BreakTheRing")
    def breaker(func, _mod, _ctx):
        return func.with_body(tvm_ffi.structural_map(func.body, [(tirx.Evaluate, drop)], order="post"))
    return breaker


def _release_before_the_reads():
    """A pass (after ours) moving the consumers' release of ``empty[s]`` up to right after their wait on
    ``full[s]``: the slot is handed back before it is read."""
    def has(stmt, name):
        hit = []
        tvm_ffi.structural_walk(stmt, [(tvm.ir.expr.Call, lambda c: hit.append(1) if op_name(c) == name else None)])
        return bool(hit)

    def move(loop):
        seq = flatten_seq(loop.body)
        rel = [i for i, st in enumerate(seq) if has(st, "tirx.ptx.mbarrier_arrive_nocount")]
        wait = [i for i, st in enumerate(seq) if has(st, "tirx.ptx.mbarrier_test_wait_parity")]
        if len(rel) != 1 or not wait or rel[0] < wait[0]:
            return loop
        seq.insert(wait[0] + 1, seq.pop(rel[0]))
        return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, tirx.SeqStmt(seq))

    @tirx.transform.prim_func_pass(opt_level=0, name="BreakTheRing")
    def breaker(func, _mod, _ctx):
        return func.with_body(tvm_ffi.structural_map(func.body, [(tirx.For, move)], order="post"))
    return breaker


BREAKS = {   # what a pass after ours does -> why the kernel is refused
    "moves the release before the reads": (_release_before_the_reads, "fails the mbarrier protocol model check "
                                                                      r"\(overwrite\)"),
    "drops the release": (lambda: _dropping("tirx.ptx.mbarrier_arrive_nocount", "ws_empty"),
                          "releases an empty barrier 0 times per iteration"),
    "drops the producer's signal": (lambda: _dropping("tirx.ptx.cp_async_mbarrier_arrive", "ws_full"),
                                    "no producer loop both waits on an empty barrier and signals a full one"),
}


@pytest.mark.parametrize("what", sorted(BREAKS))
def test_a_protocol_broken_after_the_rewrite_is_refused_on_the_final_tir(planned, what):
    make, why = BREAKS[what]
    sch, _ = planned["sm_80"]
    emit_and_check(sch.mod, "sm_80")          # what the rewrite emitted passes its own check
    with pytest.raises(RuntimeError, match=why):
        _final(sch.mod, "sm_80", [make()])
    final = _final(sch.mod, "sm_80")          # unbroken, the same pipeline compiles it
    assert [r.ok for r in check_compiled(final)] == [True]


def test_tvm_compile_refuses_a_kernel_broken_after_the_rewrite(planned):
    from tvm.tirx import compilation_pipeline as registry

    from tvm_twill.transforms.pipelines import PIPELINES, WS_PIPELINE

    def broken():
        _, host, device = PIPELINES[WS_PIPELINE]()

        @tvm.transform.module_pass(opt_level=0)
        def with_break(mod, _ctx):
            parts = ws_passes()
            return tvm.transform.Sequential(parts.to_rewrite + parts.rewrite_on + [_release_before_the_reads()]
                                            + parts.checks)(mod)
        return with_break, host, device
    if "tvm_twill_test_broken" not in registry.PIPELINE_MAP:
        registry.register_tir_pipeline("tvm_twill_test_broken", broken)
    sch, _ = planned["sm_80"]
    with pytest.raises(RuntimeError, match=r"fails the mbarrier protocol model check \(overwrite\)"):
        with tvm.transform.PassContext(config=CONFIG):
            tvm.compile(sch.mod, target=tvm.target.Target({"kind": "cuda", "arch": "sm_80"}),
                        tir_pipeline="tvm_twill_test_broken")
