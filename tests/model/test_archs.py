"""Every CUDA arch TVM targets has its machine model; the others are refused early, in one line.

The pure-model half (``machine_for_arch``) runs without TVM; ``parse_target``
and ``auto_pipeline`` need it.
"""
import re

import pytest

from tvm_twill.errors import MachineError, TwillError
from tvm_twill.model import BUILTIN_MACHINES, machine_for_arch

EXPECTED = {
    "sm_80": "a100", "sm_86": "a40", "sm_87": "orin", "sm_89": "l40s", "sm_90": "h100", "sm_90a": "h100",
    "sm_100": "b200", "sm_100a": "b200", "sm_100f": "b200", "sm_103a": "b200",
    "sm_120": "rtx5090", "sm_120a": "rtx5090", "sm_121a": "rtx5090",
}
REFUSED = {
    "sm_75": "predates sm_80", "sm_70": "predates sm_80", "sm_999": "no machine model",
    "sm_80x": "unknown CUDA arch", "sm_80a": "compute capability 80 is written", "sm_110": "no machine model",
    "compute_80": "unknown CUDA arch", "sm_": "unknown CUDA arch", "sm_90z": "compute capability 90 is written",
}


def one_line(err: Exception) -> str:
    msg = str(err)
    assert msg and "\n" not in msg
    return msg


@pytest.mark.parametrize("arch, name", sorted(EXPECTED.items()))
def test_machine_for_arch(arch, name):
    m = machine_for_arch(arch)
    assert m.name == name and m is BUILTIN_MACHINES[name]
    # the model's own arch is the same compute capability family
    assert m.costs is not None and re.match(r"sm_\d+", m.costs.arch).group()[:5] == arch[:5]


@pytest.mark.parametrize("arch, why", sorted(REFUSED.items()))
def test_machine_for_arch_refusals_are_typed_one_liners(arch, why):
    with pytest.raises(MachineError) as info:
        machine_for_arch(arch)
    assert why in one_line(info.value) and info.value.exit_code == 2


def test_per_arch_figures():
    """The figures that differ between the Ampere/Ada/Blackwell parts (docs/machines.md)."""
    kib = 1024
    smem = {"a100": 163, "orin": 163, "a40": 99, "l40s": 99, "rtx5090": 99, "h100": 227, "b200": 227}
    for name, k in smem.items():
        assert BUILTIN_MACHINES[name].smem_bytes == k * kib, name
    fma = {n: BUILTIN_MACHINES[n].costs.fma_per_clock for n in smem}
    assert fma["a100"] == 64 and all(fma[n] == 128 for n in ("a40", "orin", "l40s", "rtx5090"))
    tc = {n: BUILTIN_MACHINES[n].costs.tc_flops_per_clock for n in smem}
    assert tc["a40"] == tc["l40s"] == tc["rtx5090"] == 1024 and tc["orin"] == tc["a100"] == 2048
    assert all(BUILTIN_MACHINES[n].tmem_bytes == 0 for n in smem if n != "b200")  # only sm_100 has TMEM


# --- TVM: parse_target, machine_for, auto_pipeline ---------------------------------------------
@pytest.fixture(scope="module")
def frontend():
    pytest.importorskip("tvm")
    from tvm_twill import frontend
    return frontend


@pytest.mark.parametrize("arch, name", sorted(EXPECTED.items()))
def test_parse_target_and_machine_for(frontend, arch, name):
    import tvm
    got, tgt = frontend.parse_target(arch)
    assert got == arch and str(tgt.attrs["arch"]) == arch and tgt.kind.name == "cuda"
    assert frontend.machine_for(got).name == name
    got2, _ = frontend.parse_target(tvm.target.Target({"kind": "cuda", "arch": arch}))
    assert got2 == arch


@pytest.mark.parametrize("arch, why", sorted(REFUSED.items()))
def test_parse_target_refuses_before_building_a_target(frontend, monkeypatch, arch, why):
    import tvm
    from tvm_twill.errors import UnsupportedTargetError

    def no_target(*a, **kw):
        raise AssertionError("a Target was built for a refused arch")
    monkeypatch.setattr(frontend.target.tvm.target, "Target", no_target)
    with pytest.raises(UnsupportedTargetError) as info:
        frontend.parse_target(arch)
    msg = one_line(info.value)
    assert isinstance(info.value, TwillError) and info.value.exit_code == 2
    assert why in msg or (why == "compute capability 80 is written" and "'sm_80'" in msg) or \
        "not a CUDA arch string" in msg
    monkeypatch.undo()
    if arch.startswith("sm_") and len(arch) > 3:  # a Target TVM accepts: refused the same way
        with pytest.raises(UnsupportedTargetError):
            frontend.parse_target(tvm.target.Target({"kind": "cuda", "arch": arch}))


def test_auto_pipeline_on_sm86(frontend, tmp_path):
    """A copy-then-compute loop on sm_86: the a40 model, a legal plan TVM accepts."""
    import tvm
    from tvm.script import tirx as T

    import tvm_twill

    @T.prim_func(s_tir=True)
    def copy_compute(A: T.Buffer((16, 64), "float32"), C: T.Buffer((16, 64), "float32")):
        for tx in T.thread_binding(0, 16, thread="threadIdx.x"):
            for i in T.serial(0, 64):
                with T.sblock("compute"):
                    T.reads(A[tx, i])
                    T.writes(C[tx, i])
                    B = T.sblock_alloc_buffer((16, 1), dtype="float32", scope="shared")
                    with T.sblock():
                        T.reads(A[tx, i])
                        T.writes(B[tx, 0])
                        B[tx, 0] = A[tx, i] * T.float32(2)
                    with T.sblock():
                        T.reads(B[tx, 0])
                        T.writes(C[tx, i])
                        C[tx, i] = B[tx, 0] + T.float32(1)

    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": copy_compute}))
    plan = tvm_twill.auto_pipeline(sch, "i", "sm_86", time_limit=30)
    assert plan.arch == "sm_86" and plan.machine.name == "a40" and plan.machine.warp_groups == 1
    assert plan.machine.smem_bytes == 99 * 1024
    assert plan.schedule.optimal and len(plan.annotation.stages) == 2
    assert plan.outcome and "\n" not in plan.outcome
    text = plan.explain()
    assert "sm_86" in text and "warp group 0 (warps 0-3)" in text
    assert f"II = {plan.ii_cycles} cycles per iteration" in text
    assert not re.search(r"\d+ units\b", text), "explain() gives normalized units instead of cycles"
    # the picture of the plan, in machine cycles
    mpimg = pytest.importorskip("matplotlib.image")
    out = plan.plot(tmp_path / "plan.png")
    img = mpimg.imread(out)
    assert img.shape[1] > 1000 and img[..., :3].std() > 0.05
