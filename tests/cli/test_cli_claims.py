"""The CLI and the schedule's texts say what was proven, the ii and each secondary objective apart (issue #38,
items 3 and 4).

An ii at its lower bound (max(ResMII, RecMII), or the first ii not refuted) is optimal whatever encoding found
it (``Schedule.ii_optimal``); a length or register peak the search did not minimize is said so on its own,
with its proven bound.  A solve the time limit cut short says which ii is proven impossible, and its gap.
"""
from dataclasses import replace

from tvm_twill import cli, report
from tvm_twill.data import load_example
from tvm_twill.solvers import prepare, search, solve
from tvm_twill.solvers.paper_smt import paper_search


def run(argv, capsys):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_paper_encoding_at_the_lower_bound_is_an_optimal_ii_with_an_unproven_length(capsys):
    code, out, err = run(["example", "fa_fwd_hopper", "--encoding", "paper", "--quiet"], capsys)
    assert code == 0
    assert "not proven optimal" not in err and "gap 0.0%" not in err
    assert err.count("\n") == 1 and err.startswith("tvm-twill: ii=4 is optimal (every smaller ii proven impossible)")
    assert "length 4 not proven minimal (at least 3, gap 25.0%)" in err and "register peak 192 not minimized" in err
    assert "optimal: yes for the ii (every smaller ii was proven impossible); length 4 not proven minimal" in out
    # the same in Python
    prep = prepare(load_example("fa_fwd_hopper"))
    s = paper_search(prep.graph, prep.machine, time_limit=60)
    assert not s.optimal and s.ii_optimal and s.ii_gap == 0.0
    length, regs = s.tie_breaks
    assert (length.objective, length.value, length.bound, length.proven) == ("length", 4, 3, False)
    assert (regs.objective, regs.bound, regs.proven) == ("register peak", None, False)


def test_joint_encoding_never_calls_an_ii_at_its_bound_unproven(monkeypatch, capsys):
    """An answer whose ii equals its proven lower bound with ``optimal`` False (the time limit ended the search
    while it named the families that refuted the ii below) is an optimal ii, in every text."""
    real = cli.solve_prepared
    monkeypatch.setattr(cli, "solve_prepared", lambda *a, **k: replace(real(*a, **k), optimal=False))
    code, out, err = run(["example", "fa_fwd_fig1", "--quiet"], capsys)
    assert code == 0 and err == ""  # the ii is optimal and the tie-breaks were proven: nothing to warn about
    assert "optimal: yes (every smaller ii was proven impossible)" in out
    # the tie-breaks cut short (no budget): the ii is still optimal, the length is not proven minimal
    monkeypatch.setattr(search, "TIE_BREAK_TOTAL_RLIMIT", 0)
    code, out, err = run(["example", "fa_fwd_hopper", "--quiet"], capsys)
    assert code == 0 and "not proven optimal" not in err
    assert err.startswith("tvm-twill: ii=4 is optimal") and "length 8 not proven minimal (at least 3, gap 62.5%)" in err


def test_a_solve_cut_short_reports_its_proven_lower_bound_and_gap():
    g = load_example("fa_fwd_hopper")
    s = solve(g, "h100", time_limit=0)  # no time: the serial schedule, nothing decided
    assert not s.ii_optimal and s.lower_bound.ii == 4 and s.ii_gap == (s.ii - 4) / s.ii
    prep = prepare(g)
    text = report.render(s, prep.graph, prep.machine)
    assert f"optimal: not proven (every ii below 4 was proven impossible: gap {100 * s.ii_gap:.1f}%)" in text
    assert "  ii = " not in text  # no ii was refuted one by one (the certificate lists each one refuted)
