"""The warp-specialized kernels the code emits are the ones frozen in the emulator corpus, byte for byte.

A change to the WS transform that changes what it emits must regenerate the corpus
(``python tests/emulator/make_corpus.py --only NAME``) on purpose; ``tests/ws_golden.py`` diffs every
WS kind against a saved folder (``--save`` before a change, ``--diff`` after).
"""
from pathlib import Path

import pytest

pytest.importorskip("tvm")

from ws_golden import generate  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1] / "emulator" / "corpus"

#: The WS kinds whose corpus .cu is current.  Left out: ws_sm100a and wgmma_plain_sm90a (the corpus predates
#: setmaxnreg on sm_100a and the plain wgmma kernel's proxy fence) and ws_sm90a / ws_sm90a_ordered (their
#: ring depth follows the planner's cost model, which has moved since the corpus was made: 5 vs 3 slots); regenerating those files
#: is the corpus owner's call (make_corpus.py --only NAME), after which they belong here.
KINDS = ("ws_sm80", "ws_sm80_ordered", "wgmma_ws_sm90a", "wgmma_ws_noswizzle_sm90a")


@pytest.mark.parametrize("kind", KINDS)
def test_ws_kernel_is_byte_identical_to_the_corpus(kind):
    src = generate([kind])[kind]
    assert src == (CORPUS / f"{kind}.cu").read_text(), f"{kind}: python tests/ws_golden.py --diff shows how"
