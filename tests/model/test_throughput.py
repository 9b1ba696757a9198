"""The chip figures and the throughput model (model/chip.py, model/throughput.py): hand-computed terms."""
import pytest

from tvm_twill.errors import MachineError

from tvm_twill.model import BUILTIN_MACHINES
from tvm_twill.model.chip import CHIPS, Chip


def test_every_builtin_machine_has_its_chip_figures():
    for name, m in BUILTIN_MACHINES.items():
        assert m.costs.chip is CHIPS[name]
    a100 = CHIPS["a100"]
    assert a100.l2_bytes_per_s == pytest.approx(5120 * 1.41e9)  # the white paper's 5120 B/clk
    assert a100.max_ctas_per_sm == 32 and a100.max_warps_per_sm == 64 and a100.smem_per_sm == 164 * 1024


def test_chip_refuses_a_non_positive_figure():
    with pytest.raises(MachineError, match="l2_bytes_per_s must be a positive number"):
        Chip(part="x", dram_bytes_per_s=1e12, l2_bytes_per_s=0, l2_bytes=1, smem_per_sm=1,
             max_ctas_per_sm=1, max_warps_per_sm=1)


def test_sustained_tensor_rate_is_the_published_measurement():
    # docs/machines.md, "Sustained tensor-core rate": best measured matmul / data sheet
    assert CHIPS["h100"].tc_sustained == pytest.approx(794.5 / 989.4) and CHIPS["a100"].tc_sustained == pytest.approx(
        271.2 / 312.0)
    assert all(CHIPS[n].tc_sustained == 1.0 for n in CHIPS if n not in ("h100", "a100"))  # no measurement found
    for bad in (0, 1.2, True):
        with pytest.raises(MachineError, match="tc_sustained must be a fraction in \\(0, 1\\]"):
            Chip(part="x", dram_bytes_per_s=1e12, l2_bytes_per_s=1e12, l2_bytes=1, smem_per_sm=1,
                 max_ctas_per_sm=1, max_warps_per_sm=1, tc_sustained=bad)


# -- the terms, by hand ---------------------------------------------------------------------------
from tvm_twill.model.prediction import predict  # noqa: E402
from tvm_twill.model.throughput import copy_cost, issue_cycles, occupancy, unit_label, wave_reuse  # noqa: E402

H100 = BUILTIN_MACHINES["h100"].costs
A100 = BUILTIN_MACHINES["a100"].costs


def test_occupancy_takes_the_tightest_resource():
    chip = H100.chip
    # 128 threads x 128 registers = 4 warps x 4096 = 16384 registers: 4 CTAs; 32 KiB (+1 KiB): 6; warps 16
    occ = occupancy(chip, threads=128, regs_per_thread=128, smem_bytes=32 * 1024)
    assert (occ.ctas, occ.limiter) == (4, "registers")
    assert occ.by == {"registers": 4, "shared memory": 6, "threads": 16, "CTA slots": 32}
    # 168 registers round up to 5376 per warp (21 x 256); 12 warps = 64512: one CTA
    assert occupancy(chip, threads=384, regs_per_thread=168, smem_bytes=1024).ctas == 1
    # setmaxnreg budgets: 128 producer threads x 40 + 256 consumer threads x 232 = 5120 + 59392 = 64512
    occ = occupancy(chip, threads=384, regs_per_thread=0, smem_bytes=100 * 1024, roles=[(128, 40), (256, 232)])
    assert (occ.ctas, occ.by["registers"], occ.by["shared memory"]) == (1, 1, 2)
    # 64 threads, 32 registers, no shared memory: the hardware's 32 CTA slots
    assert occupancy(chip, threads=64, regs_per_thread=32, smem_bytes=0).limiter == "CTA slots"


def test_occupancy_refuses_a_block_that_does_not_fit():
    with pytest.raises(MachineError, match=r"does not fit one SM of H100 SXM5 \(shared memory\)"):
        occupancy(H100.chip, threads=128, regs_per_thread=32, smem_bytes=300 * 1024)


def test_wave_reuse_follows_the_raster_order():
    # 32 x 32 tiles (blockIdx.x = column tile, fastest), 132 CTAs resident: the first wave is ids 0..131,
    # rows 0..4 (5 distinct A tiles), all 32 columns (32 distinct B tiles)
    assert wave_reuse((32, 32), (False, True), 132) == pytest.approx(132 / 5)
    assert wave_reuse((32, 32), (True, False), 132) == pytest.approx(132 / 32)
    assert wave_reuse((32, 32), (True, True), 132) == 1.0       # every CTA its own tile
    assert wave_reuse((4, 1), (True, False), 132) == 1.0        # a wave larger than the grid: the grid
    assert wave_reuse((8, 4), (False, False), 132) == 32.0      # one tile read by all 32 CTAs


def test_copy_cost_is_the_slowest_level():
    # 24 KiB per iteration, one CTA per SM on H100: port 24576 / 128 = 192 cycles; L2 24576 x 132 SMs /
    # (5.5e12 / 1.83e9 B/clk) = 1079.4; DRAM with each tile read by 4.125 CTAs: 24576 / 4.125 x 132 /
    # (3.35e12 / 1.83e9) = 429.6
    c = copy_cost(H100, 24576, reuse=4.125)
    assert c.port == pytest.approx(192.0)
    assert c.l2 == pytest.approx(24576 * 132 / (5.5e12 / 1.83e9))
    assert c.l2 == pytest.approx(1079.4, abs=0.1)
    assert c.dram == pytest.approx(429.6, abs=0.1)
    assert (c.cycles, c.bound) == (c.l2, "L2")
    # two CTAs per SM: each gets half of its SM's share, so the same bytes take twice the cycles
    assert copy_cost(H100, 24576, ctas_per_sm=2, reuse=4.125).l2 == pytest.approx(2 * c.l2)
    # no reuse, A100: DRAM 8192 x 108 / (1.555e12 / 1.41e9) = 802.2 > L2 8192 x 108 / 5120 = 172.8
    d = copy_cost(A100, 8192)
    assert d.l2 == pytest.approx(172.8) and d.dram == pytest.approx(802.2, abs=0.1) and d.bound == "DRAM"


def test_issue_cost_counts_the_issuing_warps_instructions():
    chip = H100.chip
    assert issue_cycles(chip, {"bulk": 160}) == 640.0         # 160 row copies x 4 slots, one warp
    assert issue_cycles(chip, {"tma": 2}) == 8.0              # two boxes
    assert issue_cycles(chip, {"cp.async": 64}, warps=8) == 16.0  # eight warps share the SM's 4 schedulers
    assert issue_cycles(chip, {"mma": 6, "ldmatrix": 2}, warps=2) == 4.0


def test_unit_label_names_cp_async_unless_a_hopper_producer_issues_tma():
    # the one-role software pipeline issues cp.async on every arch; a warp-specialized producer TMA on sm_90+
    assert unit_label(A100, "TMA") == unit_label(H100, "TMA") == "async copy (cp.async)"
    assert unit_label(H100, "TMA", producer=True) == "TMA"
    assert unit_label(A100, "TMA", producer=True) == "async copy (cp.async)" and unit_label(A100, "TC") == "TC"


def test_prediction_by_hand():
    occ = occupancy(H100.chip, threads=128, regs_per_thread=128, smem_bytes=32 * 1024)  # 4 CTAs
    # 128x128x64 GEMM step: 2097152 FLOP = 512 TC cycles; schedule ii 600 cycles; 32 KiB copied, reuse 8
    p = predict(H100, ii_cycles=600, flops=2097152, occ=occ, work={"tensor core": 512}, copy_bytes=32768,
                reuse=8)
    l2 = 4 * 32768 * 132 / (5.5e12 / 1.83e9)                   # 5756.9 cycles per round: L2-bound
    # tensor core: 4 CTAs x 512 cycles at the data-sheet rate, at the sustained 794.5 / 989.4 of it
    assert p.terms["tensor core"] == pytest.approx(2048 * 989.4 / 794.5) and p.terms["L2"] == pytest.approx(l2)
    assert p.bound == "L2" and p.cycles_per_iteration == pytest.approx(l2)
    assert p.tflops_per_sm == pytest.approx(4 * 2097152 / l2 * 1.83e9 / 1e12)
    assert p.tflops == pytest.approx(p.tflops_per_sm * 132)
    # latency-bound with registers limiting the CTAs: the bound is occupancy
    q = predict(H100, ii_cycles=3000, flops=2097152, occ=occ, work={"tensor core": 512})
    assert q.bound == "occupancy" and q.cycles_per_iteration == 3000
    # 1000 tiles on 132 x 4 slots: 2 waves, 1000 / 1056 of the slots busy
    r = predict(H100, ii_cycles=512, flops=2097152, occ=occ, work={"tensor core": 512}, tiles=1000)
    assert r.bound == "tensor core" and r.wave_efficiency == pytest.approx(1000 / 1056)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=200, deadline=None, derandomize=True)
@given(name=st.sampled_from(sorted(BUILTIN_MACHINES)), ii=st.floats(1, 1e5), flops=st.floats(0, 1e9),
       ctas=st.integers(1, 32), copy=st.floats(0, 1e6), reuse=st.floats(1, 1e4),
       tc=st.floats(0, 1e5), alu=st.floats(0, 1e5), tiles=st.one_of(st.none(), st.integers(1, 100000)))
def test_no_prediction_exceeds_the_peak_or_the_dram_roofline(name, ii, flops, ctas, copy, reuse, tc, alu, tiles):
    from tvm_twill.model.throughput import Occupancy
    costs = BUILTIN_MACHINES[name].costs
    p = predict(costs, ii_cycles=ii, flops=flops, occ=Occupancy(ctas, "threads"),
                work={"tensor core": tc, "CUDA cores": alu}, copy_bytes=copy, reuse=reuse, tiles=tiles)
    peak = costs.tc_flops_per_clock * costs.sms * costs.clock_ghz * 1e9 / 1e12
    assert p.tflops <= peak * (1 + 1e-9)
    assert p.tflops <= peak * costs.chip.tc_sustained * (1 + 1e-9) and p.sustained_tflops <= p.peak_tflops
    if copy:  # the DRAM roofline: flops per compulsory byte x DRAM bandwidth
        roof = flops / (copy / reuse) * costs.chip.dram_bytes_per_s / 1e12
        assert p.tflops <= roof * (1 + 1e-9)


def test_a_resource_within_one_quantum_of_the_ii_is_the_bound():
    from tvm_twill.model.throughput import Occupancy
    # ii 1088 cycles (68 units of 16) for 1079.4 cycles of L2: the ii is the L2 time rounded up to the unit
    p = predict(H100, ii_cycles=1088, flops=1048576, occ=Occupancy(1, "registers"), copy_bytes=24576, reuse=4,
                quantum=16)
    assert p.terms["L2"] == pytest.approx(1079.4, abs=0.1) and p.bound == "L2"
    assert predict(H100, ii_cycles=1088, flops=1048576, occ=Occupancy(1, "registers"), copy_bytes=24576,
                   reuse=4).bound == "occupancy"  # without the quantum: latency, registers keep CTAs off


def test_tensor_bound_loop_runs_at_the_sustained_rate_by_hand():
    from tvm_twill.model.throughput import Occupancy
    # one CTA per SM, a 128x128x128 GEMM piece per iteration (4194304 FLOP), scheduled at ii 1024 cycles
    # (its data-sheet tensor time on H100: 4194304 / 4096)
    flops = 4194304.0
    p = predict(H100, ii_cycles=1024, flops=flops, occ=Occupancy(1, "threads"), work={"tensor core": 1024})
    # at 794.5 / 989.4 of the data-sheet rate the tensor cores take 1024 x 989.4 / 794.5 = 1275.2 cycles
    assert p.bound == "tensor core" and p.cycles_per_iteration == pytest.approx(1024 * 989.4 / 794.5)
    # 4194304 FLOP per 1275.2 cycles x 1.83 GHz x 132 SMs = 794.5 TFLOPS (the measured matmul, on 1.83 GHz)
    assert p.tflops == pytest.approx(4194304 / (1024 * 989.4 / 794.5) * 1.83e9 * 132 / 1e12)
    assert p.tflops == pytest.approx(p.sustained_tflops) and p.sustained_tflops == pytest.approx(794.5, abs=0.1)
    assert "the tensor cores sustain 795" in p.explain()
    # A100: 2048 FLOP per clock per SM at 1.41 GHz, sustained 271.2 of 312
    a = predict(A100, ii_cycles=2048, flops=flops, occ=Occupancy(1, "threads"), work={"tensor core": 2048})
    assert a.tflops == pytest.approx(4194304 / (2048 * 312.0 / 271.2) * 1.41e9 * 108 / 1e12)
    # a part with no published measurement runs at its data sheet: B200, 8192 FLOP per clock per SM
    b200 = BUILTIN_MACHINES["b200"].costs
    b = predict(b200, ii_cycles=512, flops=flops, occ=Occupancy(1, "threads"), work={"tensor core": 512})
    assert b.cycles_per_iteration == 512 and b.tflops == pytest.approx(b.peak_tflops)
    assert "sustain" not in b.explain()
    # a latency-bound loop keeps its ii: the sustained rate only stretches the tensor term
    q = predict(H100, ii_cycles=3000, flops=flops, occ=Occupancy(1, "threads"), work={"tensor core": 1024})
    assert q.bound == "latency" and q.cycles_per_iteration == 3000


# -- clusters and TMA multicast ---------------------------------------------------------------------
from tvm_twill.model.throughput import Cluster  # noqa: E402


def test_cluster_multicast_divides_each_shared_operand_by_the_ctas_sharing_it():
    a, b = 128 * 64 * 2, 256 * 64 * 2                    # a 128x256x64 fp16 stage: 16 KiB of A, 32 KiB of B
    assert Cluster().l2_bytes(a, b) == 49152             # no cluster: every CTA reads both tiles
    assert Cluster(2, 1).l2_bytes(a, b) == 16384 + 16384  # 2 CTAs along M share B's tile: B / 2
    assert Cluster(1, 2).l2_bytes(a, b) == 8192 + 32768   # 2 CTAs along N share A's tile: A / 2
    assert Cluster(2, 2).l2_bytes(a, b) == 8192 + 16384
    assert Cluster(4, 2).l2_bytes(a, b) == 8192 + 8192
    assert Cluster(2, 1, multicast_b=False).l2_bytes(a, b) == 49152  # a cluster without multicast saves nothing
    assert Cluster(2, 2, multicast_a=False).l2_bytes(a, b) == 16384 + 16384


def test_multicast_lowers_the_l2_term_only():
    # 48 KiB per stage, B multicast over a 2x1 cluster: 32 KiB from L2; the port still writes 48 KiB
    plain = copy_cost(H100, 49152, reuse=8)
    shared = copy_cost(H100, 49152, reuse=8, l2_bytes=Cluster(2, 1).l2_bytes(16384, 32768))
    l2_per_clock = H100.chip.l2_bytes_per_s / 1.83e9
    assert shared.port == plain.port == 49152 / 128 == 384.0
    assert shared.l2 == pytest.approx(32768 * 132 / l2_per_clock) == pytest.approx(plain.l2 * 2 / 3)
    assert shared.dram == plain.dram                     # the compulsory traffic is the same
    # in a prediction: the L2 term per round is the multicast one
    from tvm_twill.model.throughput import Occupancy
    p = predict(H100, ii_cycles=1024, flops=2.0 * 128 * 256 * 64, occ=Occupancy(1, "registers"),
                work={"tensor core": 1024}, copy_bytes=49152, reuse=8, l2_bytes=32768)
    assert p.terms["L2"] == pytest.approx(shared.l2) and p.terms["shared memory"] == 384.0


def test_cluster_refuses_bad_shapes():
    with pytest.raises(MachineError, match="cluster m must be a positive integer, got 0"):
        Cluster(0, 1)
    with pytest.raises(MachineError, match="a cluster of 4 x 8 CTAs exceeds the 16 CTAs"):
        Cluster(4, 8)
    with pytest.raises(MachineError, match="l2_bytes 60000 must lie between 0 and the 49152 bytes"):
        copy_cost(H100, 49152, l2_bytes=60000)
