"""One arch capability table (tvm_twill.model.arch): the flags, the one parser, and what each WS kernel holds.

The expected flags are the PTX ISA's target requirements of each instruction,
written out here by hand per arch (the table in the module docstring of
``tvm_twill.model.arch`` names the sections).  The kernel tests compile the
warp-specialized mma.sync GEMM for archs the other WS tests do not cover and
read what the CUDA source must and must not contain; nvcc accepts each.
"""
import pathlib
import re
import shutil
import subprocess

import pytest

from tvm_twill.errors import MachineError
from tvm_twill.model.arch import FEATURE_SOURCES, parse_arch

ROOT = pathlib.Path(__file__).resolve().parents[2]

# arch -> the flags set, from the PTX ISA's "Target ISA notes" (all others must be unset)
BASE = {"cp_async", "mbarrier"}
HOPPER = BASE | {"try_wait", "expect_tx", "bulk_copy", "elect", "clusters", "proxy_fence"}
EXPECTED = {
    "sm_80": BASE, "sm_86": BASE, "sm_87": BASE, "sm_89": BASE,
    "sm_90": HOPPER,
    "sm_90a": HOPPER | {"wgmma", "setmaxnreg"},
    "sm_100": HOPPER,
    "sm_100a": HOPPER | {"setmaxnreg", "tcgen05"},
    "sm_100f": HOPPER | {"setmaxnreg", "tcgen05"},
    "sm_103a": HOPPER | {"setmaxnreg", "tcgen05"},
    "sm_120": HOPPER,
    "sm_120a": HOPPER | {"setmaxnreg"},
    "sm_121f": HOPPER | {"setmaxnreg"},
}


@pytest.mark.parametrize("arch", sorted(EXPECTED))
def test_flags_follow_the_ptx_target_requirements(arch):
    caps = parse_arch(arch)
    assert set(caps.features) == EXPECTED[arch]
    assert caps.name == arch and caps.cc == int(re.search(r"\d+", arch).group())


def test_every_flag_names_its_source():
    assert set(FEATURE_SOURCES) == {f for f in parse_arch("sm_90a").__dataclass_fields__} - {"name", "cc", "suffix"}


def test_sm100a_has_no_wgmma_and_text_order_does_not_matter():
    # the bug this table replaced: "sm_100a" >= "sm_90" is False as text
    assert "sm_100a" < "sm_90"
    assert parse_arch("sm_100a").setmaxnreg and not parse_arch("sm_100a").wgmma
    assert parse_arch("sm_100a").cc > parse_arch("sm_90a").cc


@pytest.mark.parametrize("bad,why", [("sm_80x", "unknown CUDA arch"), ("sm_90z", "compute capability 90 is written"),
                                     ("compute_90", "unknown CUDA arch"), ("", "unknown CUDA arch")])
def test_malformed_arch_is_one_line(bad, why):
    with pytest.raises(MachineError, match=why) as info:
        parse_arch(bad)
    assert "\n" not in str(info.value)


def test_no_other_module_parses_or_compares_arch_strings():
    offenders = []
    for p in (ROOT / "tvm_twill").rglob("*.py"):
        if p.name == "arch.py":
            continue
        for i, line in enumerate(p.read_text().splitlines(), 1):
            if re.search(r"""r["']sm_\(|arch\s*[<>]=?\s*["']sm_|startswith\(["']sm_|endswith\(["']a["']\)""", line):
                offenders.append(f"{p.relative_to(ROOT)}:{i}: {line.strip()}")
    assert offenders == []


# ---------------------------------------------------------------------------- the kernels, per arch

# arch -> (must contain, must not contain) in the CUDA source of the WS mma.sync GEMM
KERNEL_CONTENT = {
    "sm_90": (("mbarrier.try_wait.parity", "cp.async.bulk", "elect.sync", "__launch_bounds__(160)"),
              ("setmaxnreg", "wgmma", "test_wait")),
    "sm_100a": (("mbarrier.try_wait.parity", "cp.async.bulk", "elect.sync", "setmaxnreg.dec.sync.aligned",
                 "setmaxnreg.inc.sync.aligned", "__launch_bounds__(256, 1)"),
                ("wgmma", "tcgen05", "test_wait")),
    "sm_120a": (("mbarrier.try_wait.parity", "cp.async.bulk", "setmaxnreg.dec.sync.aligned",
                 "__launch_bounds__(256, 1)"),
                ("wgmma", "tcgen05", "test_wait")),
}


@pytest.mark.parametrize("arch", [pytest.param("sm_90", marks=pytest.mark.slow), "sm_100a",
                                  pytest.param("sm_120a", marks=pytest.mark.slow)])
def test_ws_kernel_uses_what_the_arch_has(arch, tmp_path):
    tvm = pytest.importorskip("tvm")
    import tvm_twill
    from tvm_twill.workloads import tensorcore_gemm

    sch, k0, k1 = tensorcore_gemm(1024)
    plan = tvm_twill.auto_pipeline(sch, [k0, k1], arch, warp_specialize=True)
    ws = plan.warp_specialization
    caps = parse_arch(arch)
    assert ws.chosen and (ws.registers is not None) == caps.setmaxnreg
    assert ws.facts.producer_threads == (128 if caps.setmaxnreg else 32)  # a warp group gives registers back
    with tvm.transform.PassContext(config={"tirx.use_async_copy": 1}):
        f = tvm.compile(sch.mod, target=tvm.target.Target({"kind": "cuda", "arch": arch}),
                        tir_pipeline=plan.tir_pipeline)
    src = f.mod.imports[0].inspect_source()
    present, absent = KERNEL_CONTENT[arch]
    assert [n for n in present if n not in src] == []
    assert [n for n in absent if n in src] == []
    if shutil.which("nvcc") is None:
        pytest.fail("nvcc is not installed: the kernel must be compiled")
    cu = tmp_path / "k.cu"
    cu.write_text(src)
    r = subprocess.run(["nvcc", f"-arch={arch}", "-cubin", "-Xptxas", "-v", "-o", str(tmp_path / "k.cubin"),
                        str(cu)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    log = r.stdout + r.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in log and "C7508" not in log
