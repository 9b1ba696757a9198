"""``PipelinePlan.plot(path, kind="roofline")`` and ``plot_roofline``: the prediction on the chip's roofline."""
import pytest

pytest.importorskip("matplotlib")

from tvm_twill.data import load_example
from tvm_twill.errors import InputError
from tvm_twill.model import BUILTIN_MACHINES
from tvm_twill.model.prediction import predict
from tvm_twill.model.throughput import occupancy
from tvm_twill.report.plot_roofline import plot_roofline, roofline
from tvm_twill.planner.roofline import graph_prediction
from tvm_twill.solvers import prepare, solve_prepared

H100 = BUILTIN_MACHINES["h100"].costs
PNG = b"\x89PNG\r\n\x1a\n"


def _l2_bound():
    """One CTA per SM copying 24 KiB per iteration for a 128x128x64 GEMM piece (the wgmma GEMM's)."""
    occ = occupancy(H100.chip, threads=384, regs_per_thread=0, smem_bytes=4 * 24576, roles=[(128, 40), (256, 232)])
    flops = 2.0 * 128 * 128 * 64
    return predict(H100, ii_cycles=256, flops=flops, occ=occ, work={"tensor core": flops / 4096},
                   copy_bytes=24576, reuse=4.0)


def test_roofline_numbers_by_hand(tmp_path):
    p = _l2_bound()
    r = plot_roofline(p, H100, tmp_path / "roof.png")
    assert r.path.read_bytes().startswith(PNG)
    # ceilings: the tensor cores at the sustained rate (794.5 of 989.4, docs/machines.md) and the data-sheet
    # peak; the SFU and CUDA cores at the chip's rate (no such work here)
    assert r.ceilings["tensor core"] == pytest.approx(4096 * 132 * 1.83e9 / 1e12 * 794.5 / 989.4)
    assert r.ceilings["tensor core, data sheet"] == pytest.approx(4096 * 132 * 1.83e9 / 1e12)
    assert r.notes["tensor core"] == "sustained, measured matmul"
    assert r.ceilings["SFU"] == pytest.approx(16 * 132 * 1.83e9 / 1e12)
    assert r.ceilings["CUDA cores"] == pytest.approx(2 * 128 * 132 * 1.83e9 / 1e12)
    assert r.roofs == {"L2": 5.5, "DRAM": 3.35}
    # the kernel: 2097152 FLOP per 24576 B through L2, per 24576 / 4 B from DRAM
    assert r.points["L2"] == pytest.approx((2097152 / 24576, p.tflops))
    assert r.points["DRAM"] == pytest.approx((4 * 2097152 / 24576, p.tflops))
    assert r.bound == p.bound == "L2"
    # on the L2 roof (it is the bound), under the DRAM roof and under every ceiling
    x, y = r.points["L2"]
    assert y == pytest.approx(x * r.roofs["L2"])
    assert r.points["DRAM"][1] <= r.points["DRAM"][0] * r.roofs["DRAM"]
    # and under the ceilings of what it uses (a unit it gives no work, drawn at the chip's rate, limits nothing)
    assert all(y <= c for n, c in r.ceilings.items() if r.notes[n] != "chip rate")


def test_a_unit_the_kernel_uses_is_drawn_at_this_kernels_rate(tmp_path):
    g = load_example("fa_fwd_hopper")
    prepared = prepare(g, g.machine)
    s = solve_prepared(prepared)
    p = graph_prediction(prepared.graph, s, prepared.machine, source=g)
    r = roofline(p, H100)
    # two exps (P_a, P_b), 512 cycles each, for 4 GEMMs of 2097152 FLOP per iteration
    assert r.ceilings["SFU"] == pytest.approx(4 * 2097152 / 1024 * 1.83e9 * 132 / 1e12)
    assert r.notes["SFU"] == "this kernel's work" and r.notes["CUDA cores"] == "chip rate"
    # tensor-bound at the sustained rate; the graph's 1024 CTAs fill 1024 / 1056 of 8 waves on 132 SMs
    assert r.bound == "tensor core" and r.tflops == pytest.approx(r.ceilings["tensor core"] * 1024 / 1056, rel=1e-6)
    assert "L2" in r.points and "DRAM" not in r.points  # a graph has no problem shape: no DRAM term


def test_bad_inputs(tmp_path):
    p = _l2_bound()
    with pytest.raises(InputError, match="needs the machine's chip figures"):
        roofline(p, None)
    with pytest.raises(InputError, match="cannot write the picture"):
        plot_roofline(p, H100, tmp_path / "roof.unknownext")


def test_plan_plot_roofline(tmp_path):
    pytest.importorskip("tvm")
    from tvm_twill.api import auto_pipeline
    from tvm_twill.workloads import wgmma_gemm
    sch, k0, _ = wgmma_gemm(4096)
    plan = auto_pipeline(sch, [k0], "sm_90a", warp_specialize=True)
    r = plan.plot(tmp_path / "plan.png", kind="roofline")
    assert r.path.read_bytes().startswith(PNG)
    p = plan.prediction()
    assert (r.tflops, r.bound) == (p.tflops, p.bound) and set(r.points) == {"L2", "DRAM"}
    assert plan.plot(tmp_path / "sched.png") == tmp_path / "sched.png"  # the default kind: the schedule
    with pytest.raises(InputError, match="plot kind must be 'schedule' or 'roofline'"):
        plan.plot(tmp_path / "x.png", kind="bars")
