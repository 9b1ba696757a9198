"""``tvm_twill.solve`` and ``SolveOptions``: a bad argument is one InputError line naming it, before any solving."""
import pytest

import tvm_twill
from tvm_twill.data import example_path
from tvm_twill.errors import InputError
from tvm_twill.model import load_graph
from tvm_twill.solvers import SolveOptions

GRAPH = load_graph(example_path("fa_fwd_fig1"))

BAD = [
    (lambda: tvm_twill.solve("fa_fwd_fig1.json", "h100"), r"solve takes a tvm_twill.Graph, got str: read a JSON graph"),
    (lambda: tvm_twill.solve(None, "h100"), r"solve takes a tvm_twill.Graph, got NoneType"),
    (lambda: tvm_twill.solve(GRAPH, "h100", options=3), r"options must be a tvm_twill.solvers.SolveOptions"),
    (lambda: tvm_twill.solve(GRAPH, "h100", progress=3), r"SolveOptions: progress must be a callable or None, got 3"),
    (lambda: SolveOptions(time_limit="5"), r"SolveOptions: time_limit must be a number of seconds >= 0"),
    (lambda: SolveOptions(max_ii="5"), r"SolveOptions: max_ii must be an integer >= 1 or None, got '5'"),
    (lambda: SolveOptions(normalize_bound="300"), r"SolveOptions: normalize_bound must be an integer >= 1"),
    (lambda: SolveOptions(normalize_objective="exact"), r"SolveOptions: normalize_objective must be one of"),
    (lambda: SolveOptions(streaming_depth=0), r"SolveOptions: streaming_depth must be an integer >= 1, got 0"),
    (lambda: SolveOptions(heuristic="no"), r"SolveOptions: heuristic must be True or False, got 'no'"),
]


@pytest.mark.parametrize("call, message", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_a_bad_argument_is_one_typed_line(call, message):
    with pytest.raises(InputError, match=message) as err:
        call()
    assert "\n" not in str(err.value)


def test_good_options_still_build():
    assert SolveOptions(time_limit=None, max_ii=8, progress=print).max_ii == 8  # None: no limit
    assert SolveOptions(time_limit=0).time_limit == 0
