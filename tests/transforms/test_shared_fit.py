"""A software-pipelining plan fits the block's shared memory as TVM allocates it (stage distance + 1 versions
of each shared buffer), not only as the solver's live-value memory rule counts it (stages.fit_shared)."""
import dataclasses

import pytest

tvm = pytest.importorskip("tvm")

import tvm_twill  # noqa: E402
from tvm_twill.model.machine import get_machine  # noqa: E402
from tvm_twill.workloads import wgmma_gemm  # noqa: E402

FREE = 172032   # TVM's versions of the unconstrained plan of wgmma_gemm(512): A x7 + B x7, both copies in async
#                 stage 0 (the copies through L2 and DRAM, docs/machines.md)
FIT = 163840    # the optimum as solved (A in stage 1, B in stage 0): A x6 + B x7; below it fit_shared re-plans


def _plan(limit, **kw):
    sch, k0, _ = wgmma_gemm(512)
    m = dataclasses.replace(get_machine("h100"), smem_bytes=limit)
    return tvm_twill.auto_pipeline(sch, [k0], "sm_90a", machine=m, **kw)


@pytest.mark.parametrize("limit", [232448, FREE - 1, FIT - 1, 90111, 65536, 49151])
def test_the_plan_fits_every_shared_memory_limit(limit):
    plan = _plan(limit)
    assert plan.smem_bytes <= limit
    text = plan.explain()
    if limit >= FREE:
        assert plan.applied and plan.smem_bytes == FREE and "shared memory: TVM's" not in text
        assert plan.sync_copies == ()
    elif limit >= FIT:  # both copies in the async stage would not fit: A stays a plain copy, and the plan says so
        assert plan.applied and plan.smem_bytes == FIT and "shared memory: TVM's" not in text
        assert "to stage 0: " in dict(plan.sync_copies)["A_shared.dyn"]
    else:   # the first plan's versions overflowed: said, with what was chosen instead
        assert f"more than the {limit} B a block has; the best plan that fits has " \
               f"{plan.annotation.num_stages} stage(s) (" in text and f"dynamic {plan.smem_bytes} B of the {limit} B a block has" in text


def test_one_byte_short_costs_no_more_than_a_much_smaller_limit():
    # the re-solve with the memory rule tightened finds the 5-stage plan a 120000 B machine gets directly
    short, smaller = _plan(FREE - 1), _plan(120000)
    assert short.ii_cycles <= smaller.ii_cycles and short.smem_bytes <= FREE - 1
    assert "shared memory: TVM's" not in smaller.explain()


def test_an_explicit_max_stages_still_bounds_first():
    plan = _plan(232448, max_stages=3)
    assert plan.annotation.num_stages <= 3 and "shared memory: TVM's" not in plan.explain()


# -- static ("shared") and dynamic ("shared.dyn") shared memory, each against its own limit ---------------
import re  # noqa: E402
import shutil  # noqa: E402

from tvm_twill.frontend import compile_cuda, kernel_info  # noqa: E402
from tvm_twill.planner.stages import DYNAMIC, STATIC, STATIC_SMEM_BYTES, shared_by_scope  # noqa: E402
from tvm_twill.compiler.sass import ptxas_report  # noqa: E402
from tvm_twill.workloads import gemv  # noqa: E402


def _ptxas_smem(src, arch):
    """ptxas's static shared memory of the one kernel in ``src`` (``nvcc -Xptxas -v``; 0 when it states none)."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    (line,) = [ln for ln in ptxas_report(src, arch) if "registers" in ln]
    found = re.search(r"(\d+) bytes smem", line)
    return int(found.group(1)) if found else 0


@pytest.mark.parametrize("scope", ["shared", "shared.dyn"])
def test_a_gemv_plan_states_the_shared_memory_ptxas_and_the_launch_use(scope):
    # a 32 x 512 fp16 tile of A per step: 32 KiB a version; whatever stages the model picks, the plan's static
    # bytes are ptxas's smem figure (within 48 KiB) and its dynamic bytes the launch's dynamic shared memory
    sch, (k0,) = gemv(4096, 4096, bk=512, scope=scope)
    plan = tvm_twill.auto_pipeline(sch, k0, "sm_80")
    used = shared_by_scope(plan.extraction, plan.annotation)
    assert used[STATIC] + used[DYNAMIC] == plan.smem_bytes
    _, src = compile_cuda(sch, "sm_80")   # ptxas refuses more than 48 KiB of static __shared__ arrays
    assert _ptxas_smem(src, "sm_80") == used[STATIC]
    assert kernel_info(sch, "sm_80").dyn_smem == used[DYNAMIC]
    text = plan.explain()
    if scope == "shared":
        assert used == {STATIC: plan.smem_bytes, DYNAMIC: 0} and plan.smem_bytes <= STATIC_SMEM_BYTES
        assert (f"static (__shared__) {plan.smem_bytes} B of the {STATIC_SMEM_BYTES} B a kernel may declare"
                in text)
    else:   # the dynamic pool may take the arch's opt-in maximum
        assert used[STATIC] == 0 and f"dynamic {plan.smem_bytes} B of the 166912 B a block has" in text


def test_the_kernels_other_shared_buffers_count_too():
    # X (8 KiB) is loaded once per block before the k loop: with it, three 16 KiB versions of A do not fit
    sch, (k0,) = gemv(4096, 4096, bk=256, scope="shared", x_once=True)
    plan = tvm_twill.auto_pipeline(sch, k0, "sm_80")
    used = shared_by_scope(plan.extraction, plan.annotation)
    assert used[STATIC] == plan.smem_bytes + 8192 <= STATIC_SMEM_BYTES
    _, src = compile_cuda(sch, "sm_80")
    assert _ptxas_smem(src, "sm_80") == used[STATIC]
    assert (f"the kernel's X0_shared (not in the loop) = 8192 B; in all: static (__shared__) {used[STATIC]} B of "
            f"the {STATIC_SMEM_BYTES} B") in plan.explain()


def test_a_static_tile_that_fits_no_version_is_refused_with_the_limit():
    sch, (k0,) = gemv(4096, 8192, bm=32, bk=1024, scope="shared")   # 64 KiB of A per step: not even one fits
    with pytest.raises(tvm_twill.UnsupportedLoopError,
                       match=r"loop 'k_0': its buffers exceed the shared memory limits even unpipelined .* more "
                             r"than the 49152 B of static shared memory .*use smaller tiles or the dynamic pool"):
        tvm_twill.auto_pipeline(sch, k0, "sm_80")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_warp_specialized_static_rings_stay_within_48_kib(arch):
    sch, (k0,) = gemv(4096, 4096, bk=256, scope="shared")
    plan = tvm_twill.auto_pipeline(sch, k0, arch, warp_specialize=True)
    ws = plan.warp_specialization
    assert ws.chosen and ws.ring_depth == 2
    _, src = compile_cuda(sch, arch, tir_pipeline=plan.tir_pipeline)
    assert _ptxas_smem(src, arch) == 2 * 16896 + 128 <= STATIC_SMEM_BYTES   # two slots + the mbarrier arrays
    sch, (k0,) = gemv(4096, 4096, bk=512, scope="shared")   # two slots of 33 KiB: no ring fits 48 KiB
    with pytest.raises(tvm_twill.UnsupportedLoopError,
                       match=r"two ring slots of 33792 B do not fit the 49152 B of static shared memory \(scope "
                             r"'shared'\) a kernel may declare: plan a smaller tile, the dynamic pool"):
        tvm_twill.auto_pipeline(sch, k0, arch, warp_specialize=True)


@pytest.mark.parametrize("vector, dtype, moved", [(None, "float16", 2), (8, "float32", 32)])
def test_warp_specializing_a_gemv_names_the_copies_it_cannot_hand_over(vector, dtype, moved):
    sch, (k0,) = gemv(4096, 4096, bk=256, scope="shared.dyn", vector=vector, dtype=dtype)
    with pytest.raises(tvm_twill.UnsupportedLoopError,
                       match=rf"has global->shared copies, but none a producer warp's cp.async can run \('A0_shared.dyn'"
                             rf" moves {moved}-byte vectors per thread; 'X0_shared.dyn' moves {moved}-byte"):
        tvm_twill.auto_pipeline(sch, k0, "sm_80", warp_specialize=True)
    plan = tvm_twill.auto_pipeline(gemv(4096, 4096, bk=256, scope="shared.dyn", vector=vector, dtype=dtype)[0],
                                   "k_0", "sm_80", warp_specialize="auto")
    assert not plan.warp_specialization.chosen and "moves" in plan.warp_specialization.reason


@pytest.mark.parametrize("arch", ["sm_90a"])   # was refused: "register budgets need ... 128 consumer threads"
def test_a_one_warp_gemv_is_warp_specialized_without_setmaxnreg(arch):
    # 32 consumer threads: not a warp group, so no register budgets (setmaxnreg acts on whole warp groups)
    sch, (k0,) = gemv(4096, 4096, bk=256, scope="shared.dyn")
    plan = tvm_twill.auto_pipeline(sch, k0, arch, warp_specialize=True)
    assert plan.applied and plan.warp_specialization.chosen and plan.warp_specialization.registers is None
    _, src = compile_cuda(sch, arch, tir_pipeline=plan.tir_pipeline)
    assert "setmaxnreg" not in src and _ptxas_smem(src, arch) == 128   # only the mbarrier arrays are static
