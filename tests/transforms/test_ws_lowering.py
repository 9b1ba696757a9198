"""The tvm_twill_ws TIR pipeline is TVM's own pass list with the rewrite spliced in, and it refuses bad kernels.

* the pass names equal TVM's default s_tir pipeline's under the same
  PassContext options, plus the two passes after FlattenBuffer, the proxy
  fences before MergeSharedMemoryAllocations and the role-branch and
  compiled-protocol checks at the end (a copied list dropped the bound
  checkers, ldg32 and lwp passes those options switch on);
* a kernel whose emitted ring protocol is broken on purpose is refused by
  ``tvm.compile`` itself, not only by ``auto_pipeline``'s check;
* a ``__syncthreads`` inside one role's branch is refused on the final TIR.
"""
import dataclasses

import pytest

tvm = pytest.importorskip("tvm")

import tvm_twill  # noqa: E402
from tvm.script import tirx as T  # noqa: E402
from tvm_twill.errors import UnsupportedLoopError  # noqa: E402
from tvm_twill.transforms.ws import rewrite as W  # noqa: E402
from tvm_twill.transforms.ws.lowering import check_role_branches, verify_role_branches  # noqa: E402
from tvm_twill.transforms.pipelines import WS_PIPELINE, register, ws_passes  # noqa: E402

tirx = tvm.tirx

SPLICED = ["TwillShrinkThreadFragments", "TwillWarpSpecialize"]


def _compiled_pass_names(config, pipeline):
    """The pass names ``tvm.compile`` runs for a small CUDA kernel with ``pipeline``, from the first pass of
    the pipeline's list to the last one before the finalization passes (recorded by a pass instrument)."""
    seen = []

    @tvm.instrument.pass_instrument
    class Record:
        def run_before_pass(self, mod, info):
            seen.append(info.name)

    @T.prim_func(s_tir=True)
    def f(a: T.Buffer((64,), "float32")):
        for b in T.thread_binding(2, thread="blockIdx.x"):
            for t in T.thread_binding(32, thread="threadIdx.x"):
                with T.sblock("add"):
                    a[b * 32 + t] = a[b * 32 + t] + T.float32(1)

    with tvm.transform.PassContext(config=config, instruments=[Record()]):
        tvm.compile(tvm.IRModule({"main": f}), target=tvm.target.Target({"kind": "cuda", "arch": "sm_80"}),
                    tir_pipeline=pipeline)
    first = seen.index("TwillDropPlainFences" if "TwillDropPlainFences" in seen else "s_tir.CanonicalizeLoop")
    last = max(i for i, n in enumerate(seen) if n in ("tirx.BF16StorageLegalize", "TwillCheckCompiledProtocol"))
    return [n for n in seen[first:last + 1] if n not in ("_pipeline", "_run", "sequential")]


@pytest.mark.parametrize("config", [{}, {"tirx.use_async_copy": 1}, {"tirx.instrument_bound_checkers": True},
                                    {"tirx.s_tir.ldg32": True}, {"tirx.instrument_lwp": True},
                                    {"tirx.disable_cse_tir": True, "tirx.disable_storage_rewrite": True}])
def test_pass_names_are_tvms_with_the_rewrite_spliced_in(config):
    with tvm.transform.PassContext(config=config):
        listed = [p.info.name for p in ws_passes().all()]
    ours = _compiled_pass_names(config, register(WS_PIPELINE))
    stock = _compiled_pass_names(config, "s_tir")
    k = stock.index("s_tir.InjectSoftwarePipeline")  # the cp.async wait-count guard around it (wait_counts)
    stock = stock[:k] + ["TwillMarkExpectedAsyncWaits", stock[k], "TwillExactAsyncWaits"] + stock[k + 1:]
    f = stock.index("s_tir.InferFragment")  # the consumers' named barriers, after ThreadSync (role_barriers)
    stock = stock[:f] + ["TwillConsumerBarriers"] + stock[f:]
    i = stock.index("tirx.FlattenBuffer") + 1
    j = stock.index("s_tir.MergeSharedMemoryAllocations")
    assert ours == ["TwillDropPlainFences"] + stock[:i] + SPLICED + stock[i:j] + ["TwillProxyFence"] + stock[j:] + ["TwillVerifyRoleBranches",
                                                                                   "TwillCheckCompiledProtocol"]
    it = iter(ours)  # what ws_passes lists is what ran (composite passes also show their inner passes)
    assert all(name in it for name in listed)
    if config.get("tirx.instrument_bound_checkers"):
        assert "s_tir.InstrumentBoundCheckers" in ours


def test_a_compiled_kernel_with_a_broken_protocol_is_refused(mma_gemm, monkeypatch):
    sch, k0, k1 = mma_gemm()
    plan = tvm_twill.auto_pipeline(sch, [k0, k1], "sm_80", warp_specialize=True)
    assert plan.warp_specialization.chosen
    real = W.warp_specialize_func

    def broken(func, arch, *a, **kw):  # the consumers release one slot too early
        new, facts = real(func, arch, *a, **kw)
        return new, (None if facts is None else dataclasses.replace(facts, release_last=False))
    monkeypatch.setattr(W, "warp_specialize_func", broken)
    with pytest.raises(RuntimeError, match="fails the model check"):
        with tvm.transform.PassContext(config={"tirx.use_async_copy": 1}):
            tvm.compile(sch.mod, target=tvm.target.Target({"kind": "cuda", "arch": "sm_80"}),
                        tir_pipeline=plan.tir_pipeline)
    monkeypatch.setattr(W, "warp_specialize_func", real)
    with tvm.transform.PassContext(config={"tirx.use_async_copy": 1}):  # the same plan, unbroken, compiles
        tvm.compile(sch.mod, target=tvm.target.Target({"kind": "cuda", "arch": "sm_80"}),
                    tir_pipeline=plan.tir_pipeline)


def _role_kernel(sync_in: str | None):
    warp = tirx.Var("ws_warp", "int32")
    sync = tirx.Evaluate(T.tvm_storage_sync("shared"))
    work = tirx.Evaluate(tirx.IntImm("int32", 0))
    branch = tirx.IfThenElse(warp >= 4, sync if sync_in == "producer" else work,
                             sync if sync_in == "consumer" else work)
    body = tirx.SeqStmt([tirx.Bind(warp, tirx.IntImm("int32", 0)), sync, branch])
    return tvm.IRModule({"main": tirx.PrimFunc([], body)})


@pytest.mark.parametrize("where", ["producer", "consumer"])
def test_a_syncthreads_inside_a_role_branch_is_refused(where):
    with pytest.raises(UnsupportedLoopError, match=f"__syncthreads inside the {where} branch"):
        check_role_branches(_role_kernel(where))
    with pytest.raises(RuntimeError, match=f"__syncthreads inside the {where} branch"):  # as the pipeline's pass
        verify_role_branches(_role_kernel(where))


def test_a_syncthreads_outside_the_role_branches_is_kept():
    mod = _role_kernel(None)
    assert verify_role_branches(mod).same_as(mod)
