"""``tvm_twill.build``: a plan compiles as planned, through the README's own lines.

The README's compile snippet is executed as written; the CUDA it produces must
hold every asynchronous copy the plan promises (``plan.async_copies``): a
cp.async reading each copy's global source, commit groups, and exactly the
wait_group counts ``plan.waits`` predicts.  Without ``plan.pass_context()``
TVM emits the commit / wait calls but plain copies (the bug this guards).
"""
import pathlib
import re

import pytest

pytest.importorskip("tvm")
import tvm  # noqa: E402

import tvm_twill  # noqa: E402
from tvm_twill.errors import InputError  # noqa: E402
from tvm_twill.workloads import tensorcore_gemm  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
CP_ASYNC_CALL = re.compile(r"\bptx_cp_async\w*\((?P<args>[^;]*)\);")


def readme_block(marker: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    found = [b for b in blocks if marker in b]
    assert len(found) == 1, f"the README has {len(found)} python blocks with {marker!r}"
    return found[0]


def kernel_of(src: str) -> str:
    return src[src.index('extern "C" __global__'):]


def promised_sources(plan) -> list[str]:
    """The global buffer each promised async copy reads."""
    stmts = {s.name: s for s in plan.extraction.stmts}
    out = []
    for name in plan.async_copies:
        (src,) = [r for r in stmts[name].reads if not r.endswith("shared") and "shared" not in r]
        out.append(src)
    return out


@pytest.fixture(scope="module")
def readme_run():
    ns: dict = {}
    exec(compile(readme_block("tvm_twill.build(sch.mod, \"sm_80\", plan)"), "README.md", "exec"), ns)
    return ns


def test_readme_lines_compile_every_promised_async_copy(readme_run):
    plan, kernel = readme_run["plan"], kernel_of(readme_run["cuda"])
    assert plan.applied and plan.annotation.async_stages and len(plan.async_copies) == 2
    calls = [m.group("args") for m in CP_ASYNC_CALL.finditer(kernel)]
    for src in promised_sources(plan):
        assert any(re.search(rf"\b{src}_ptr\b", args) for args in calls), f"no cp.async reads {src}"
    # each async statement runs once per stage of the prologue / body / epilogue it is in
    assert len(calls) == len(plan.async_copies) * (plan.annotation.num_stages)
    assert "cp_async_commit_group" in kernel
    waits = sorted({int(w) for w in re.findall(r"cp_async_wait_group_async_wait_group_(\d+)\(\)", kernel)})
    assert waits == sorted({w.in_flight for w in plan.waits})
    assert f"{', '.join(plan.async_copies)} become cp.async when compiled with tvm_twill.build" in plan.explain()


def test_a_bare_compile_loses_the_copies_the_pass_context_keeps(readme_run):
    sch, plan = readme_run["sch"], readme_run["plan"]
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_80"})
    bare = kernel_of(tvm.compile(sch.mod, target=target).mod.imports[0].inspect_source())
    assert not CP_ASYNC_CALL.search(bare)
    with plan.pass_context():
        planned = kernel_of(tvm.compile(sch.mod, target=target, tir_pipeline=plan.tir_pipeline or "default")
                            .mod.imports[0].inspect_source())
    assert planned == kernel_of(readme_run["cuda"])


def test_build_refuses_a_module_without_the_plan():
    sch, k0, _ = tensorcore_gemm(256)
    before = sch.mod
    plan = tvm_twill.auto_pipeline(sch, k0, "sm_80")
    assert plan.applied
    with pytest.raises(InputError, match="the module does not carry the plan of loop 'k_0_0'.*sch.mod after"):
        tvm_twill.build(before, "sm_80", plan)
    with pytest.raises(InputError, match="build takes PipelinePlans"):
        tvm_twill.build(sch.mod, "sm_80", ["k_0_0"])


def test_pass_config_follows_the_plans():
    from tvm_twill.compiler import pass_config
    sch, k0, _ = tensorcore_gemm(256)
    plan = tvm_twill.auto_pipeline(sch, k0, "sm_80", apply=False)
    assert plan.annotation.async_stages and pass_config(plan) == {}  # not applied: nothing to lower
    sch, k0, _ = tensorcore_gemm(256)
    plan = tvm_twill.auto_pipeline(sch, k0, "sm_80")
    assert pass_config(plan) == {"tirx.use_async_copy": 1} == dict(plan.pass_context().config)
