"""Every opcode form of the frozen sm_80 corpus has a handler, and every sm_80 corpus kernel loads (each of
its instructions compiles to a handler); the forms without one are listed here with the reason."""
from pathlib import Path

import pytest

from tvm_twill import emulator as E
from tvm_twill.errors import EmulationError

HERE = Path(__file__).resolve().parent
#: forms of the corpus the emulator does not execute yet (the wmma of dlight's Matmul rule); loading a kernel that has one raises EmulationError naming it
NOT_YET = {"wmma.load.a.sync.aligned.row.m16n16k16.shared.f16", "wmma.load.b.sync.aligned.col.m16n16k16.shared.f16",
           "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32", "wmma.store.d.sync.aligned.row.m16n16k16.shared.f32"}
SM80 = ["swp_sm80", "swp_sm86", "swp_sm80_hand_nested", "ws_sm80", "ws_sm80_ordered", "dlight_elementwise",
        "dlight_gemv", "dlight_row_sum", "dlight_rms_norm", "dlight_softmax", "wgmma_plain_sm90a",
        "wgmma_ws_sm90a", "wgmma_ws_noswizzle_sm90a", "ws_sm100a"]  # dlight_matmul*: wmma


def test_every_corpus_form_has_a_handler_or_is_listed():
    forms = [line.split()[0] for line in (HERE / "opcodes.txt").read_text().splitlines()]
    handled = E.handled_forms()
    missing = sorted(f for f in forms if f not in handled and f not in NOT_YET)
    assert not missing, missing
    assert not (NOT_YET & handled)


@pytest.mark.parametrize("name", SM80)
def test_sm80_corpus_kernel_loads(name):
    path = HERE / "corpus" / f"{name}.ptx"
    if not path.exists():
        pytest.fail(f"corpus file {path.name} is missing")
    assert E.load_ptx(path.read_text())


def test_a_form_outside_the_handlers_is_refused_when_loaded():
    text = (HERE / "corpus" / "dlight_matmul.ptx").read_text()
    with pytest.raises(EmulationError, match=r"unsupported opcode \S+ at PTX line \d+"):
        E.load_ptx(text)
