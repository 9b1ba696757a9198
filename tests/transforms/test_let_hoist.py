"""Loop-invariant let-bindings bound once before a pipelined loop of symbolic extent (``transforms.let_hoist``).

With a symbolic trip count TVM's InjectSoftwarePipeline guards each statement alone, a ``T.let`` included:
its variable is then undefined in the statements of other guards.  A binding whose value reads no loop
variable, no let of the loop, and only memory the loop cannot change (a global the function never writes, a
local the loop never writes) is hoisted by ``tvm_twill_swp`` and no longer refused by the front-end; any other
binding is not hoisted and stays refused.  Small kernels on the CPU (llvm).
"""
import numpy as np
import pytest

pytest.importorskip("tvm")
import tvm  # noqa: E402
from tvm.script import tirx as T  # noqa: E402

from tvm_twill.errors import UnsupportedLoopError  # noqa: E402
from tvm_twill.frontend import extract_loop  # noqa: E402
from tvm_twill.frontend.invariant import hoistable_lets  # noqa: E402
from tvm_twill.frontend.loops import resolve_loop  # noqa: E402
from tvm_twill.frontend.lowering import lower_to_pipeline  # noqa: E402
from tvm_twill.model.pipeline import PipelineAnnotation  # noqa: E402
from tvm_twill.transforms import apply_annotation  # noqa: E402
from tvm_twill.transforms.let_hoist import hoist_invariant_lets  # noqa: E402
from tvm_twill.transforms.pipelines import SWP_PIPELINE, register  # noqa: E402


# a read-only global: invariant
@T.prim_func(s_tir=True)
def readonly(a: T.handle, off: T.handle, c: T.handle, n: T.int32):
    A = T.match_buffer(a, (128,), "float32")
    Off = T.match_buffer(off, (16,), "int32")
    C = T.match_buffer(c, (64,), "float32")
    with T.sblock("kernel"):
        Loc = T.sblock_alloc_buffer((1,), "int32", scope="local")
        B = T.sblock_alloc_buffer((4,), "float32")
        Loc[0] = Off[1]
        for i in range(n):
            base: T.let[T.int32] = Off[0]
            for j in range(4):
                with T.sblock("ld"):
                    B[j] = A[base + i * 4 + j]
            for j in range(4):
                with T.sblock("st"):
                    C[i * 4 + j] = B[j] * T.float32(2)


# a local written only before the loop: invariant
@T.prim_func(s_tir=True)
def local_before(a: T.handle, off: T.handle, c: T.handle, n: T.int32):
    A = T.match_buffer(a, (128,), "float32")
    Off = T.match_buffer(off, (16,), "int32")
    C = T.match_buffer(c, (64,), "float32")
    with T.sblock("kernel"):
        Loc = T.sblock_alloc_buffer((1,), "int32", scope="local")
        B = T.sblock_alloc_buffer((4,), "float32")
        Loc[0] = Off[1]
        for i in range(n):
            base: T.let[T.int32] = Loc[0] + Off[0]
            for j in range(4):
                with T.sblock("ld"):
                    B[j] = A[base + i * 4 + j]
            for j in range(4):
                with T.sblock("st"):
                    C[i * 4 + j] = B[j] * T.float32(2)


# reads the loop variable
@T.prim_func(s_tir=True)
def loop_var(a: T.handle, off: T.handle, c: T.handle, n: T.int32):
    A = T.match_buffer(a, (128,), "float32")
    Off = T.match_buffer(off, (16,), "int32")
    C = T.match_buffer(c, (64,), "float32")
    with T.sblock("kernel"):
        Loc = T.sblock_alloc_buffer((1,), "int32", scope="local")
        B = T.sblock_alloc_buffer((4,), "float32")
        Loc[0] = Off[1]
        for i in range(n):
            base: T.let[T.int32] = Off[i]
            for j in range(4):
                with T.sblock("ld"):
                    B[j] = A[base + i * 4 + j]
            for j in range(4):
                with T.sblock("st"):
                    C[i * 4 + j] = B[j] * T.float32(2)


# a local the loop writes
@T.prim_func(s_tir=True)
def local_written(a: T.handle, off: T.handle, c: T.handle, n: T.int32):
    A = T.match_buffer(a, (128,), "float32")
    Off = T.match_buffer(off, (16,), "int32")
    C = T.match_buffer(c, (64,), "float32")
    with T.sblock("kernel"):
        Loc = T.sblock_alloc_buffer((1,), "int32", scope="local")
        B = T.sblock_alloc_buffer((4,), "float32")
        Loc[0] = Off[1]
        for i in range(n):
            base: T.let[T.int32] = Loc[0]
            for j in range(4):
                with T.sblock("ld"):
                    B[j] = A[base + i * 4 + j]
            for j in range(4):
                with T.sblock("st"):
                    Loc[0] = Loc[0] + 1
                    C[i * 4 + j] = B[j] * T.float32(2)


# a global the function writes
@T.prim_func(s_tir=True)
def global_written(a: T.handle, off: T.handle, c: T.handle, n: T.int32):
    A = T.match_buffer(a, (128,), "float32")
    Off = T.match_buffer(off, (16,), "int32")
    C = T.match_buffer(c, (64,), "float32")
    with T.sblock("kernel"):
        Loc = T.sblock_alloc_buffer((1,), "int32", scope="local")
        B = T.sblock_alloc_buffer((4,), "float32")
        Loc[0] = Off[1]
        for i in range(n):
            base: T.let[T.int32] = T.Cast("int32", C[63])
            for j in range(4):
                with T.sblock("ld"):
                    B[j] = A[base + i * 4 + j]
            for j in range(4):
                with T.sblock("st"):
                    C[i * 4 + j] = B[j] * T.float32(2)


INVARIANT = {"readonly": readonly, "local_before": local_before}
VARIANT = {"loop_var": loop_var, "local_written": local_written, "global_written": global_written}


def _lowered(func):
    sch = tvm.s_tir.Schedule(func)
    low_func, low = lower_to_pipeline(sch.mod["main"], resolve_loop(sch, "i"))
    return low_func, low.node


@pytest.mark.parametrize("name", sorted(INVARIANT))
def test_an_invariant_let_is_hoistable_and_not_refused(name):
    low_func, loop = _lowered(INVARIANT[name])
    assert hoistable_lets(loop, low_func.body) == [0]
    assert extract_loop(tvm.s_tir.Schedule(INVARIANT[name]), "i", "sm_80").refusal is None


@pytest.mark.parametrize("name", sorted(VARIANT))
def test_a_variant_let_is_not_hoisted_and_stays_refused(name):
    low_func, loop = _lowered(VARIANT[name])
    assert hoistable_lets(loop, low_func.body) == []
    ex = extract_loop(tvm.s_tir.Schedule(VARIANT[name]), "i", "sm_80")
    assert ex.refusal is not None
    with pytest.raises(UnsupportedLoopError, match="statement 0 binds 'base' .* whose value changes between"):
        raise UnsupportedLoopError(ex.refusal)


#: the binding in stage 1, the copy in stage 0 and the store in stage 1 (a two-stage pipeline)
TWO_STAGE = PipelineAnnotation((1, 0, 1), (0, 1, 2), ())


def _pipelined(func):
    sch = tvm.s_tir.Schedule(func)
    apply_annotation(sch, resolve_loop(sch, "i").rv, TWO_STAGE)
    return sch.mod


def test_the_pass_binds_the_let_before_the_loop_and_drops_its_annotation_entries():
    low_func, _ = _lowered(_pipelined(readonly)["main"])
    out = hoist_invariant_lets(low_func)
    text = out.script()
    assert "base: T.let[T.int32] = T.if_then_else(n > 0, Off[0], 0)" in text
    assert '"software_pipeline_stage": [0, 1]' in text and '"software_pipeline_order": [0, 1]' in text
    assert text.index("base: T.let") < text.index("for i in")
    # a variant binding is left where it is
    low_func, _ = _lowered(_pipelined(loop_var)["main"])
    assert hoist_invariant_lets(low_func).script() == low_func.script()


def _run(mod, n, pipeline):
    rng = np.random.default_rng(3)
    a = tvm.runtime.tensor(rng.standard_normal(128).astype("float32"))
    off = tvm.runtime.tensor(np.arange(3, 19).astype("int32"))
    c = tvm.runtime.tensor(np.zeros(64, "float32"))
    tvm.compile(mod, target="llvm", tir_pipeline=pipeline)(a, off, c, n)
    return c.numpy()


@pytest.mark.parametrize("name", sorted(INVARIANT))
def test_a_pipelined_loop_with_an_invariant_let_computes_what_the_loop_does(name):
    mod = _pipelined(INVARIANT[name])
    with pytest.raises(Exception, match="base"):  # TVM's own pipeline: the let undefined under other guards
        _run(mod, 5, "default")
    swp = register(SWP_PIPELINE)
    for n in (0, 1, 2, 5):  # trip counts 0, 1, 2 (the stage count), a longer one
        assert np.array_equal(_run(mod, n, swp), _run(INVARIANT[name], n, "default"))
