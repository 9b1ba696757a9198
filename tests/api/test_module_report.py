"""``ModulePlan.summary()``'s refusals by reason: names in quotes are grouped away, every other word of a reason
comes out as written (an apostrophe, as in "annotation's", is not a quote).  Pure Python: no TVM."""
from tvm_twill.integrations.module_report import LoopOutcome, ModulePlan, reason_group

SMALLER = "its annotation's model ii ({} cycles) is smaller than the best plan's ({} cycles)"
UNKNOWN = ("its annotation's model ii is unknown: UnsupportedLoopError: loop '{}' has no "
           "software_pipeline_stage/order annotation: nothing to evaluate (auto_pipeline writes one)")
QUOTED = ('TVM rejects the function with every plan written: UnsupportedLoopError: InjectSoftwarePipeline: '
          'buffer "{}_shared" of loop \'{}\' can\'t be versioned')


def _report(*reasons):
    loops = tuple(LoopOutcome(f"f{i}", (f"k{i}",), "kept", reason=r) for i, r in enumerate(reasons))
    return ModulePlan(mod=None, arch="sm_80", kernels=len(loops), loops=loops, workers=1, rounds=1, solves=0,
                      solve_s=0.0, wall_s=0.0, cache={})


def test_a_reason_with_an_apostrophe_comes_out_whole():
    plan = _report(SMALLER.format(512, 640), SMALLER.format(96, 128))
    assert plan.refusals() == [(SMALLER.format("N", "N"), 2)]
    assert f"  2 x {SMALLER.format('N', 'N')}" in plan.summary().splitlines()


def test_a_reason_with_quotes_comes_out_whole_but_the_names():
    plan = _report(UNKNOWN.format("k_0"), UNKNOWN.format("j"), QUOTED.format("A", "k_0_0"), QUOTED.format("B", "k"))
    lines = plan.summary().splitlines()
    assert f"  2 x {UNKNOWN.format('…')}" in lines
    assert "  1 x " + QUOTED.format("A", "…") in lines and "  1 x " + QUOTED.format("B", "…") in lines
    assert reason_group("loop 'k' can't be 'x'") == "loop '…' can't be '…'"
