"""Generated GPU loops of symbolic extent, pipelined by tvm_twill, run on the emulator against numpy.

The soundness argument for ``transforms.swp_lowering.uniform_guard_loops`` beyond its unit tests: with a
symbolic trip count TVM guards the pipeline's prologue and epilogue statements with the iteration's bound, and
the rewrite turns those guards into loops of 0 or 1 trips so that ThreadSync may put barriers inside.  If the
rewrite ran a statement that should not run, skipped one that should, or let a barrier be reached by some
threads only, a kernel below would compute something else, race, or deadlock.

Hypothesis draws a kernel: a CTA of 32-128 threads (one to four warps), a loop ``for i in range(n)`` over a
symbolic ``n`` whose iteration copies a row of ``A`` into shared memory (cp.async once planned), then runs a
chain of 1-3 shared-memory statements, each reading the previous tile (and maybe the copied one) at a drawn
rotation, so every statement reads what other warps wrote (ThreadSync puts a barrier before it), and adds
the last tile into a per-thread accumulator carried across iterations.  ``auto_pipeline`` plans it with a
drawn ``max_stages``; ``tvm_twill.build`` compiles it (``tvm_twill_swp``); each kernel is emulated for trip
counts 0, 1, 2, its stage count and two past it, two interleavings, two CTAs, and compared exactly with numpy
(small integers: every sum is exact in float32).  Derandomized, 20 examples in seconds (no shrinking).
The same module compiled by a plain ``tvm.compile`` (TVM's default pipeline, async copies on) is either
refused by TVM or emulated the same way: never a wrong kernel.

A statement may be "looped": two rounds of (write a tile, read it rotated) in one pipeline statement, so
ThreadSync needs a barrier inside the statement, that is inside its guard.  One such kernel does not compile
without the rewrite, and a wrong rewrite (guard loops of one trip whatever the condition) is caught at a
trip count of 0 (the prologue's copy reads past ``A``).
"""
import shutil
import time

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
if shutil.which("nvcc") is None:
    pytest.skip("nvcc not installed", allow_module_level=True)

from hypothesis import HealthCheck, Phase, assume, event, given, settings
from hypothesis import strategies as st

import tvm_twill
from tvm_twill import emulator as E
from tvm_twill.frontend.ir import tirx
from tvm_twill.transforms import swp_lowering

EXAMPLES = 20
BLOCKS = 2
#: (TVMScript of ``op(a, b)``, the same on numpy float32 arrays); exact on small integers.
OPS = (("{a} + {b}", lambda a, b: a + b), ("{a} - {b}", lambda a, b: a - b),
       ("T.max({a}, {b})", np.maximum), ("{a} * T.float32(2) - {b}", lambda a, b: a * np.float32(2) - b))


def _statement(k: int, threads: int, prev: str, step: tuple) -> str:
    """Statement ``k`` of the chain: ``S{k}`` from the previous tile ``prev`` (rotated by ``rot``), combined by
    ``op`` with the copied tile or 1.  ``looped``: two rounds of ``U{k} = ...`` then ``S{k} += U{k}`` (rotated
    again) in one statement, a barrier needed between them inside it (so inside the pipeline's guards)."""
    rot, op, with_copy, looped = step
    r = " + r" if looped else ""
    a = f"{prev}[(tx + {rot}{r}) % {threads}]"
    b = f"S0[(tx + {2 * rot + 1}) % {threads}]" if with_copy else "T.float32(1)"
    value = OPS[op][0].format(a=a, b=b)
    if not looped:
        return f"""
                    for tx in T.thread_binding({threads}, thread="threadIdx.x"):
                        with T.sblock("s{k}"):
                            S{k}[tx] = {value}"""
    return f"""
                    for r in T.serial(2):
                        with T.sblock("s{k}"):
                            for tx in T.thread_binding({threads}, thread="threadIdx.x"):
                                with T.sblock("s{k}u"):
                                    U{k}[tx] = {value}
                            for tx in T.thread_binding({threads}, thread="threadIdx.x"):
                                with T.sblock("s{k}s"):
                                    S{k}[tx] = T.if_then_else(r == 0, T.float32(0), S{k}[tx]) + \\
                                        U{k}[(tx + {3 * rot + 7}) % {threads}]"""


def _script(threads: int, chain: tuple) -> str:
    """The kernel: ``chain`` is one (rotation, op, second operand from the copied tile?, looped?) per
    statement after the copy."""
    stmts, prev = [], "S0"
    for k, step in enumerate(chain, start=1):
        stmts.append(_statement(k, threads, prev, step))
        prev = f"S{k}"
    names = ["S0"] + [f"{t}{k}" for k in range(1, len(chain) + 1) for t in ("S", "U")]
    tiles = "\n".join(f'                    {t} = T.sblock_alloc_buffer(({threads},), "float32", scope="shared")'
                      for t in names)
    return f"""
@T.prim_func(s_tir=True)
def kernel(a_h: T.handle, c_h: T.handle):
    T.func_attr({{"global_symbol": "kernel", "tirx.noalias": True}})
    n = T.int32()
    A = T.match_buffer(a_h, ({BLOCKS}, n, {threads}), "float32")
    C = T.match_buffer(c_h, ({BLOCKS}, {threads}), "float32")
    for bx in T.thread_binding({BLOCKS}, thread="blockIdx.x"):
        with T.sblock("cta"):
            b = T.axis.spatial({BLOCKS}, bx)
            acc = T.sblock_alloc_buffer(({threads},), "float32", scope="local")
            for tx in T.thread_binding({threads}, thread="threadIdx.x"):
                with T.sblock("init"):
                    acc[tx] = T.float32(0)
            for i in T.serial(n):
                with T.sblock("it"):
{tiles}
                    for tx in T.thread_binding({threads}, thread="threadIdx.x"):
                        with T.sblock("copy"):
                            S0[tx] = A[b, i, tx]
{"".join(stmts)}
                    for tx in T.thread_binding({threads}, thread="threadIdx.x"):
                        with T.sblock("add"):
                            acc[tx] = acc[tx] + {prev}[({threads} - 1 - tx) % {threads}]
            for tx in T.thread_binding({threads}, thread="threadIdx.x"):
                with T.sblock("out"):
                    C[b, tx] = acc[tx]
"""


def _reference(a: np.ndarray, chain: tuple) -> np.ndarray:
    blocks, n, threads = a.shape
    tx = np.arange(threads)
    out = np.zeros((blocks, threads), np.float32)
    for i in range(n):
        s0 = prev = a[:, i, :]
        for rot, op, with_copy, looped in chain:
            b = s0[:, (tx + 2 * rot + 1) % threads] if with_copy else np.float32(1)
            if not looped:
                prev = OPS[op][1](prev[:, (tx + rot) % threads], b).astype(np.float32)
                continue
            total = np.zeros_like(prev)
            for r in range(2):
                u = OPS[op][1](prev[:, (tx + rot + r) % threads], b).astype(np.float32)
                total = total + u[:, (tx + 3 * rot + 7) % threads]
            prev = total
        out += prev[:, (threads - 1 - tx) % threads]
    return out


chains = st.lists(st.tuples(st.integers(1, 127), st.integers(0, len(OPS) - 1), st.booleans(), st.booleans()),
                  min_size=1, max_size=3).map(tuple)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(threads=st.sampled_from([32, 64, 128]), chain=chains, max_stages=st.sampled_from([2, 3, 4]),
       seed=st.integers(0, 2 ** 16))
def test_generated_symbolic_pipelines_match_numpy_on_the_emulator(threads, chain, max_stages, seed):
    t0 = time.perf_counter()
    sch = tvm.s_tir.Schedule(tvm.script.from_source(_script(threads, chain)))
    plan = tvm_twill.auto_pipeline(sch, "i", "sm_80", max_stages=max_stages, quiet=True)
    assert plan.applied and plan.tir_pipeline == 'tvm_twill_swp', plan.explain()
    stages = plan.annotation.num_stages
    assume(stages > 1)  # a one-stage plan has no prologue or epilogue to guard
    f = tvm_twill.build(sch.mod, "sm_80", plan)
    src = f.mod.imports[0].inspect_source()
    assert "for (int guard" in src  # the prologue's and epilogue's guards became loops of 0 or 1 trips
    assert ("cp.async" in src) == bool(plan.annotation.async_stages)
    default = _default_build(sch.mod)  # what a plain tvm.compile makes of the same module: refused, or right
    t1 = time.perf_counter()
    rng = np.random.default_rng(seed)
    for n in sorted({0, 1, 2, stages, stages + 2}):
        a = rng.integers(-4, 5, (BLOCKS, n, threads)).astype(np.float32)
        for built in (f, default) if default is not None else (f,):
            c = np.full((BLOCKS, threads), np.nan, np.float32)
            report = E.run(built, a, c, seed=seed, interleavings=2)
            assert report.ok and not report.findings, f"n={n}: {report}"
            np.testing.assert_array_equal(c, _reference(a, chain), err_msg=f"n={n}, stages {plan.annotation}")
    print(f"\n{threads} threads, chain {chain}, {plan.annotation}, {src.count('for (int guard')} guard loops, "
          f"{src.count('__syncthreads')} barriers: build {t1 - t0:.1f} s, "
          f"emulate {time.perf_counter() - t1:.1f} s")


def _default_build(mod):
    """``tvm.compile`` with TVM's default pipeline under ``tirx.use_async_copy`` (what a user who skips
    ``tvm_twill.build`` runs), or None where TVM refuses the module (a loud failure, not a wrong kernel: e.g.
    ThreadSync's "Cannot insert syncs inside condition" on the guarded prologue)."""
    try:
        with tvm.transform.PassContext(config={"tirx.use_async_copy": 1}):
            built = tvm.compile(mod, target=tvm.target.Target({"kind": "cuda", "arch": "sm_80"}))
    except RuntimeError as err:  # TVM's InternalError is one
        event(f"TVM's default pipeline refuses it: {str(err).strip().splitlines()[-1][:60]}")
        return None
    event("TVM's default pipeline compiles it: emulated too")
    return built


CHAIN = ((5, 0, True, False), (17, 3, False, True))  # a fixed kernel of the family: the second one looped


def _planned(monkeypatch=None):
    sch = tvm.s_tir.Schedule(tvm.script.from_source(_script(64, CHAIN)))
    plan = tvm_twill.auto_pipeline(sch, "i", "sm_80", max_stages=3, quiet=True)
    assert plan.applied and plan.annotation.num_stages > 1
    return sch, plan


def test_without_the_guard_rewrite_a_generated_kernel_does_not_compile(monkeypatch):
    sch, plan = _planned()
    monkeypatch.setattr(swp_lowering, "uniform_guard_loops", lambda func: func)
    with pytest.raises(tvm.error.InternalError, match="Cannot insert syncs inside condition"):
        tvm_twill.build(sch.mod, "sm_80", plan)


class _AlwaysOnce:
    """``tirx`` with ``Select(c, t, f)`` = ``t``: a wrong rewrite whose guard loops run once whatever ``c``."""

    Select = staticmethod(lambda cond, then, otherwise: then)

    def __getattr__(self, name):
        return getattr(tirx, name)


def test_a_rewrite_that_ignores_the_guard_is_caught(monkeypatch):
    sch, plan = _planned()
    monkeypatch.setattr(swp_lowering, "tirx", _AlwaysOnce())
    f = tvm_twill.build(sch.mod, "sm_80", plan)
    monkeypatch.undo()
    assert "for (int guard = 0; guard < 1;" in f.mod.imports[0].inspect_source()
    a = np.ones((BLOCKS, 0, 64), np.float32)  # no iteration: every guard is false, yet each guarded part runs
    c = np.full((BLOCKS, 64), np.nan, np.float32)
    report = E.run(f, a, c, interleavings=2)
    assert report.findings or not np.array_equal(c, _reference(a, CHAIN)), str(report)
