"""tvm_twill.compiler.ptxas: ptxas's messages as typed facts (wgmma serialization, injected waits).

The parser tests read lines as nvcc 13.0 printed them (``nvcc -arch=sm_90a -cubin -Xptxas -v``) for the
three kernels below; the compile tests rebuild those kernels and are skipped without nvcc.
"""
import shutil

import pytest

from tvm_twill.errors import ToolchainError
from tvm_twill.compiler import ptxas as P
from tvm_twill.compiler.sass import ptxas_report

# nvcc 13.0 on CALL_BETWEEN (an accumulator passed to a non-inlined call between wgmma and its wait),
# then on DIVERGENT (the wgmma under a per-thread branch); the register lines are not messages
SAMPLE = """\
ptxas info    : 0 bytes gmem
ptxas info    : (C7519) warpgroup.arrive is injected in around line 83 by compiler to allow use of registers in GMMA in function 'k'
ptxas info    : (C7517) warpgroup.wait is injected in around line 87 by compiler to allow use of registers defined by GMMA in function 'k'
ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma instructions reading accumulator registers of  a wgmma between start and end of the pipeline stage in the function 'k'
ptxas info    : Compiling entry function 'k' for 'sm_90a'
ptxas info    : Function properties for k
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 30 registers, used 0 barriers
ptxas info    : (C7520) Potential Performance Loss: wgmma.mma_async instructions are serialized due to program dependence on compiler-inserted WG.AR in divergent path in the function 'k'
"""

_HEAD = r"""#include <cstdint>
__device__ __noinline__ void touch(float& x) { x *= 2.0f; }
extern "C" __global__ void __launch_bounds__(128) k(float* out, uint64_t da, uint64_t db, int n) {
  float d[4] = {0, 0, 0, 0};
  for (int i = 0; i < n; ++i) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
"""
_WGMMA = r"""asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "l"(da + i), "l"(db + i));
"""
_TAIL = r"""    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  }
  out[threadIdx.x] = d[0] + d[1] + d[2] + d[3];
}
"""
_COMMIT = '    asm volatile("wgmma.commit_group.sync.aligned;\\n" ::: "memory");\n'
#: wgmma, commit, wait: nothing between a wgmma and its wait touches its accumulators
CLEAN = _HEAD + "    " + _WGMMA + _COMMIT + _TAIL
#: an accumulator handed to a call between the commit and the wait: ptxas serializes (C7514)
CALL_BETWEEN = _HEAD + "    " + _WGMMA + _COMMIT + "    touch(d[1]);\n" + _TAIL
#: the wgmma under a per-thread branch: ptxas serializes (C7520)
DIVERGENT = _HEAD + "    if (threadIdx.x < (unsigned)n) " + _WGMMA + _COMMIT + _TAIL

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (CUDA toolkit)")


def test_serialization_and_injections_are_typed_facts():
    msgs = P.parse_ptxas(SAMPLE)
    assert [(m.code, m.kind) for m in msgs] == [("C7519", "arrive injected"), ("C7517", "wait injected"),
                                                ("C7514", "wgmma serialized"), ("C7520", "wgmma serialized")]
    ser = P.wgmma_serialized(msgs)
    assert [m.code for m in ser] == ["C7514", "C7520"]
    # whitespace runs in ptxas's text collapse; the kernel's name and the PTX line are kept
    assert ser[0].reason == ("non wgmma instructions reading accumulator registers of a wgmma between start and "
                             "end of the pipeline stage")
    assert ser[1].reason == "program dependence on compiler-inserted WG.AR in divergent path"
    assert all(m.function == "k" and m.severity == "info" for m in msgs)
    assert (msgs[0].line, msgs[1].line, ser[0].line) == (83, 87, None)
    assert ser[0].describe().startswith("ptxas C7514: wgmma serialized in 'k' due to non wgmma")


def test_register_lines_and_unknown_codes():
    assert P.parse_ptxas("ptxas info    : Used 30 registers, used 0 barriers\n") == ()
    (m,) = P.parse_ptxas("ptxas warning : (C7999) something new\n")
    assert (m.kind, m.severity, m.reason) == ("other", "warning", "something new")
    assert P.wgmma_serialized([m]) == ()


@needs_nvcc
def test_ptxas_serializes_and_says_so():
    clean = P.ptxas_messages(CLEAN, "sm_90a")
    assert P.wgmma_serialized(clean) == ()
    (call,) = P.wgmma_serialized(P.ptxas_messages(CALL_BETWEEN, "sm_90a"))
    assert call.function == "k" and "accumulator registers" in call.reason
    (div,) = P.wgmma_serialized(P.ptxas_messages(DIVERGENT, "sm_90a"))
    assert div.function == "k" and "divergent" in div.reason
    # the tutorials' report keeps the line beside the register figures
    assert any("are serialized" in line for line in ptxas_report(CALL_BETWEEN, "sm_90a"))


@needs_nvcc
def test_nvcc_rejecting_the_source_is_a_toolchain_error():
    with pytest.raises(ToolchainError, match="nvcc -arch=sm_90a failed on the kernel"):
        P.ptxas_output("this is not CUDA", "sm_90a")


# nvcc 13.0's -v lines for a file with two entry functions (the counts changed to tell them apart)
TWO_KERNELS = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'other_kernel' for 'sm_90a'
ptxas info    : Function properties for other_kernel
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers
ptxas info    : Compile time = 18.527 ms
ptxas info    : Compiling entry function 'main_kernel' for 'sm_90a'
ptxas info    : Function properties for main_kernel
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 32768 bytes smem, 400 bytes cmem[0]
"""


def test_kernel_registers_gives_each_entry_its_count():
    assert P.kernel_registers(TWO_KERNELS) == {"other_kernel": 40, "main_kernel": 168}
    assert P.kernel_registers(SAMPLE) == {"k": 30}
    assert P.kernel_registers("ptxas info    : Used 12 registers\n") == {}  # no entry named: nobody's


@needs_nvcc
def test_kernel_registers_of_a_compiled_file():
    src = ('extern "C" __global__ void main_kernel(float* a) { a[threadIdx.x] *= 2.0f; }\n'
           'extern "C" __global__ void other_kernel(float* a) { a[threadIdx.x] += 1.0f; }\n')
    regs = P.kernel_registers(P.ptxas_output(src, "sm_90a"))
    assert sorted(regs) == ["main_kernel", "other_kernel"] and all(1 <= r <= 255 for r in regs.values())
