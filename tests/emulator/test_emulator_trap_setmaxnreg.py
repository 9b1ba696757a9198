"""``trap`` and ``setmaxnreg`` misuse planted in the CUDA source of a TVM-built elementwise kernel
(``run(..., source=...)``, compiled by nvcc; setmaxnreg makes it an sm_90a build): each is a finding naming
the CUDA line of the planted statement; a correct setmaxnreg (the whole warp group, a multiple of 8 in
24..256) is not.  A count out of range or not a multiple of 8 is refused by nvcc already; the PTX-level
cases of tests/emulator/test_emulator_forms.py plant those."""
import re
import shutil

import numpy as np
import pytest

from tvm_twill import emulator as E
from tvm_twill.emulator import findings as F

N, THREADS = 256, 128
TID = "((int)threadIdx.x)"


@pytest.fixture(scope="module")
def elementwise():
    pytest.importorskip("tvm")  # the kernel is TVM-built; the PTX-only tests above run without TVM
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH: the planted CUDA source is compiled with nvcc")
    import tvm_kernels as K
    _, f = K.elementwise(n=N, threads=THREADS)
    src = f.mod.imports[0].inspect_source()
    head = re.search(r"main_kernel\([^)]*\) \{\n", src)
    assert head, "the elementwise kernel's body was not found"
    return f, src, head.group(0)


def _run(elementwise, extra):
    """Run with ``extra`` planted as the first statement of the kernel; returns (report, its CUDA line, B)."""
    f, src, head = elementwise
    new = src.replace(head, head + "  " + extra + "\n")
    line = new.splitlines().index("  " + extra) + 1
    a = np.random.default_rng(1).uniform(-1, 1, N).astype(np.float32)
    b = np.zeros(N, np.float32)
    return E.run(f, a, b, source=new), line, (a, b)


def _of(report, cls):
    return [x for x in report.findings if isinstance(x, cls)]


def test_trap_is_a_finding_at_its_cuda_line(elementwise):
    report, line, _ = _run(elementwise, f"if ({TID} == 40) {{ __trap(); }}")
    traps = _of(report, F.Trap)
    assert traps and not report.ok, str(report)
    assert traps[0].where.warp == 1 and traps[0].where.lanes == (8,) and traps[0].where.cuda_line == line


def test_a_correct_setmaxnreg_is_no_finding(elementwise):
    report, _, (a, b) = _run(elementwise, 'asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");')
    assert report.ok, str(report)
    np.testing.assert_allclose(b, np.exp(a) * 0.5 + a, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("extra, message", [
    (('asm volatile("setmaxnreg.dec.sync.aligned.u32 40;"); asm volatile("setmaxnreg.dec.sync.aligned.u32 '
     '56;");'), "current limit 40"),
    ((f'if ({TID} < 64) {{ asm volatile("setmaxnreg.dec.sync.aligned.u32 40;"); }} else {{ asm volatile('
     '"setmaxnreg.dec.sync.aligned.u32 56;"); }'), "of its warp group executed"),
], ids=["dec-raises-the-limit", "warp-group-disagrees"])
def test_setmaxnreg_misuse_is_a_finding_at_its_cuda_line(elementwise, extra, message):
    report, line, _ = _run(elementwise, extra)
    bad = _of(report, F.SetmaxnregMisuse)
    assert bad and message in bad[0].message, str(report)
    assert bad[0].where.cuda_line == line and bad[0].where.kernel == "main_kernel"
