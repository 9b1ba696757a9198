"""The chip figures and the throughput model (model/chip.py, model/throughput.py): hand-computed terms."""
import pytest

from tvm_twill.model import BUILTIN_MACHINES
from tvm_twill.model.chip import CHIPS, Chip


def test_every_builtin_machine_has_its_chip_figures():
    for name, m in BUILTIN_MACHINES.items():
        assert m.costs.chip is CHIPS[name]
    a100 = CHIPS["a100"]
    assert a100.l2_bytes_per_s == pytest.approx(5120 * 1.41e9)  # the white paper's 5120 B/clk
    assert a100.max_ctas_per_sm == 32 and a100.max_warps_per_sm == 64 and a100.smem_per_sm == 164 * 1024


def test_chip_refuses_a_non_positive_figure():
    with pytest.raises(ValueError, match="l2_bytes_per_s must be a positive number"):
        Chip(part="x", dram_bytes_per_s=1e12, l2_bytes_per_s=0, l2_bytes=1, smem_per_sm=1,
             max_ctas_per_sm=1, max_warps_per_sm=1)
