"""The package works in the quick-start venv (``pip install -e '.[tvm]'``: no pytest, no hypothesis).

A subprocess whose ``sitecustomize`` refuses the test-only packages imports every module of ``tvm_twill``
and builds the reference workloads the tutorials use (``tvm_twill.workloads`` used to import
``tvm.testing``, which imports pytest).  ``tests/api/test_tutorials.py`` runs every tutorial the same way.
"""
import subprocess
import sys

import pytest

from quickstart_env import ROOT, env

pytest.importorskip("tvm")

SCRIPT = """
import importlib, pkgutil
import tvm_twill
for mod in pkgutil.walk_packages(tvm_twill.__path__, "tvm_twill."):
    importlib.import_module(mod.name)
from tvm_twill.workloads import tensorcore_gemm, wgmma_gemm
sch, k0, k1 = tensorcore_gemm(256)
print("loops", sch.get(k0).loop_var.name, sch.get(k1).loop_var.name)
wgmma_gemm(256)
try:
    import pytest
except ModuleNotFoundError as err:
    print("pytest:", err)
"""


def test_package_and_workloads_import_without_pytest(tmp_path):
    r = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env(tmp_path), capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "loops k_0_0 k_0_1" in r.stdout
    assert "pytest: No module named 'pytest' (not in the quick-start venv)" in r.stdout


def test_the_inlined_mma_schedule_is_tvms():
    """``workloads.tensorcore_gemm`` builds what ``tvm.testing.tir.mma_schedule`` builds (its source before)."""
    import tvm
    from tvm import te
    from tvm.s_tir.meta_schedule.testing import te_workload
    from tvm.s_tir.tensor_intrin.cuda import (LDMATRIX_f16_A_DYN_INTRIN, LDMATRIX_f16_B_DYN_INTRIN,
                                              MMA_f16f16f32_INTRIN, MMA_fill_16x16_f32_INTRIN,
                                              MMA_store_16x16_f32_global_INTRIN,
                                              shared_16x16_to_ldmatrix_32x8_layout)
    from tvm.testing.tir import mma_schedule

    from tvm_twill.workloads import tensorcore_gemm

    def index_map(i, j):
        return (i // 16, j // 16, *shared_16x16_to_ldmatrix_32x8_layout(i % 16, j % 16))

    # at 4096 TVM's test factors; at 1024 the same tile with the outer factors sized to the output
    for n, factors in ((4096, ([1, 32, 1, 4, 2], [16, 2, 4, 1, 2], [128, 2, 1])),
                       (1024, ([1, 8, 1, 4, 2], [4, 2, 4, 1, 2], [32, 2, 1]))):
        workload = te.create_prim_func(te_workload.matmul(n, n, n, in_dtype="float16", out_dtype="float32"))
        ref = mma_schedule(workload, 16, "float16", False, *factors,
                           index_map, index_map, index_map, LDMATRIX_f16_A_DYN_INTRIN, LDMATRIX_f16_B_DYN_INTRIN,
                           MMA_f16f16f32_INTRIN, MMA_fill_16x16_f32_INTRIN, MMA_store_16x16_f32_global_INTRIN,
                           "shared.dyn")
        sch, _, _ = tensorcore_gemm(n)
        tvm.ir.assert_structural_equal(sch.mod, ref.mod)


@pytest.mark.parametrize("n", [0, 100, 200, 4000, -128, 256.0])
def test_tensorcore_gemm_refuses_n_off_its_tile(n):
    from tvm_twill.errors import InputError
    from tvm_twill.workloads import tensorcore_gemm, tensorcore_gemm_factors

    with pytest.raises(InputError, match=r"is not a positive multiple of its 128x128 block tile; pass n = 128 \* k"):
        tensorcore_gemm(n)
    assert tensorcore_gemm_factors(384) == ([1, 3, 1, 4, 2], [3, 1, 4, 1, 2], [12, 2, 1])  # an odd tile count
