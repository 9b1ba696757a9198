"""Every opcode form of the frozen corpus has a handler, and every corpus kernel loads (each of
its instructions compiles to a handler); the forms without one are listed here with the reason."""
from pathlib import Path

import pytest

from tvm_twill import emulator as E
from tvm_twill.errors import EmulationError

HERE = Path(__file__).resolve().parent
#: forms of the corpus the emulator does not execute yet (none today)
NOT_YET: set = set()
KERNELS = sorted(p.stem for p in (HERE / "corpus").glob("*.ptx"))


def test_every_corpus_form_has_a_handler_or_is_listed():
    forms = [line.split()[0] for line in (HERE / "opcodes.txt").read_text().splitlines()]
    handled = E.handled_forms()
    missing = sorted(f for f in forms if f not in handled and f not in NOT_YET)
    assert not missing, missing
    assert not (NOT_YET & handled)


@pytest.mark.parametrize("name", KERNELS)
def test_corpus_kernel_loads(name):
    path = HERE / "corpus" / f"{name}.ptx"
    if not path.exists():
        pytest.fail(f"corpus file {path.name} is missing")
    assert E.load_ptx(path.read_text())


def test_a_form_outside_the_handlers_is_refused_when_loaded():
    text = (HERE / "corpus" / "dlight_matmul.ptx").read_text().replace("wmma.mma.sync.aligned.row.col",
                                                                        "wmma.mma.sync.aligned.row.row.satfinite")
    with pytest.raises(EmulationError, match=r"unsupported opcode \S+ at PTX line \d+"):
        E.load_ptx(text)
