"""Never a wrong program, never a hang: the CLI under hostile input.

Every malformed or hostile input must end in one typed line on stderr and a
documented exit status (2 for bad input), never a traceback, never exit 4
(an internal error) and never 1 (violations) for anything but a checked
schedule.  Most cases run ``tvm_twill.cli.main`` in-process; a few run the
module in a subprocess under an address-space limit (ASCII stdout, Ctrl-C).
Nothing here times anything.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tvm_twill import cli
from tvm_twill.data import example_names, example_path

REPO = Path(__file__).resolve().parents[2]
DOCUMENTED = set(cli.EXIT_CODES)
EXAMPLES = example_names()
def fuzz(n):
    """Hypothesis settings of these tests: reproducible, no deadline, ``n`` examples."""
    return settings(derandomize=True, deadline=None, max_examples=n, database=None,
                    suppress_health_check=list(HealthCheck))


# -- running the CLI ----------------------------------------------------------
def run_cli(argv):
    """``cli.main(argv)`` in-process: (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main([str(a) for a in argv])
        except SystemExit as e:  # main never raises it; count it as a failure below if it did
            code = ("SystemExit", e.code)
    return code, out.getvalue(), err.getvalue()


def assert_clean(code, err, *, bad_input=False):
    """A documented status, no traceback, no internal error; one error line for 2 and 3."""
    assert code in DOCUMENTED, (code, err)
    assert code != cli.EXIT_INTERNAL, err
    assert "Traceback" not in err, err
    if code in (cli.EXIT_INPUT, cli.EXIT_NO_SCHEDULE):
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("tvm-twill: error: "), err
    if bad_input:
        assert code == cli.EXIT_INPUT, (code, err)


def example_doc(name):
    return json.loads(example_path(name).read_text())


def schedule_doc(graph_doc):
    """A well-formed schedule of ``graph_doc`` (not necessarily valid: check may exit 1):
    ops back to back on warp 0, normalization recorded when the graph asks for it."""
    ops = graph_doc["ops"]
    ii = max(1, sum(op["cycles"] for op in ops))
    times, t = {}, 0
    for op in ops:
        times[op["name"]] = t
        t += op["cycles"]
    doc = {"format": "tvm-twill-schedule/1", "graph": graph_doc["name"],
           "machine": graph_doc["machine"] if isinstance(graph_doc.get("machine"), str) else "h100",
           "ii": ii, "length": max(times[o["name"]] + o["cycles"] for o in ops),
           "cycles": {o["name"]: o["cycles"] for o in ops},
           "ops": {o["name"]: {"time": times[o["name"]], "stage": times[o["name"]] // ii, "order": i, "warp": 0}
                   for i, o in enumerate(ops)}}
    if graph_doc.get("normalize", True):
        doc["normalization"] = {"U": 300, "distortion": 0, "mapping": {}}
        doc.pop("cycles")
    return doc


def write(tmp, name, content):
    p = Path(tmp) / name
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8",
                     errors="surrogatepass")
    return str(p)


FIG1 = example_doc("fa_fwd_fig1")


def fig1(**over):
    d = json.loads(json.dumps(FIG1))
    d.update(over)
    return d


def fig1_op(i, **over):
    d = fig1()
    d["ops"][i].update(over)
    return d


# -- every hostile class, by hand ----------------------------------------------
_DEEP = "[" * 200000 + "]" * 200000
_FIG1_TEXT = json.dumps(FIG1)
HOSTILE_GRAPHS = {
    "deep nesting": (_DEEP, r"nested"),
    "deep nesting inside a field": (_FIG1_TEXT.replace('"fa_fwd_fig1"', "[" * 100 + "]" * 100, 1), r"nested"),
    "5000-digit integer": (_FIG1_TEXT.replace('"cycles": 1', '"cycles": ' + "9" * 5000, 1), r"5000 digits"),
    "integer beyond 2**31-1": (fig1_op(0, cycles=2**31), r"beyond what any GPU loop has"),
    "1e18 cycles": (fig1_op(0, cycles=10**18), r"beyond what any GPU loop has"),
    "1e18 delay": (fig1(edges=[{"src": "S", "dst": "P", "delay": 10**18}]), r"delay is .*beyond"),
    "1e18 distance": (fig1(edges=[{"src": "S", "dst": "S", "distance": 10**18}]), r"distance is .*beyond"),
    "huge regs": (fig1_op(0, regs=2**40), r"beyond"),
    "huge machine capacity": (fig1(machine={"name": "m", "units": {"TC": 2**33, "SFU": 1}}), r"beyond"),
    "negative integer": (fig1_op(0, cycles=-3), r"cycles must be >= 0"),
    "float 1e400": (_FIG1_TEXT.replace('"cycles": 1', '"cycles": 1e400', 1), r"must be an integer, got Infinity"),
    "NaN": (_FIG1_TEXT.replace('"cycles": 1', '"cycles": NaN', 1), r"NaN is not a JSON number"),
    "Infinity": (_FIG1_TEXT.replace('"cycles": 1', '"cycles": -Infinity', 1), r"Infinity is not a JSON number"),
    "lone surrogate": (_FIG1_TEXT.replace('"S"', '"\\ud800"', 1), r"lone surrogate"),
    "NUL in an op name": (fig1_op(0, name="S\x00"), r"control character"),
    "newline in an op name": (fig1_op(0, name="S\nT"), r"control character"),
    "escape sequence in a name": (fig1(name="\x1b[31mred"), r"control character"),
    "C1 control in a unit": (fig1_op(0, unit="T\x85C"), r"control character"),
    "duplicate key": (_FIG1_TEXT.replace('"normalize": false', '"normalize": false, "normalize": true', 1),
                      r"duplicate key 'normalize'"),
    "duplicate op key": (_FIG1_TEXT.replace('"cycles": 1', '"cycles": 1, "cycles": 2', 1), r"duplicate key"),
    "not UTF-8": (b'{"format": "tvm-twill-graph/1", "name": "\xff\xfe"}', r"not UTF-8"),
    "UTF-16": (_FIG1_TEXT.encode("utf-16"), r"not UTF-8"),
    "empty file": ("", r"not valid JSON"),
    "top-level list": ("[]", r"graph must be a JSON object, got list"),
    "top-level string": ('"x"', r"graph must be a JSON object, got str"),
    "wrong type ops": (fig1(ops=5), r"ops must be a list"),
    "wrong type edge": (fig1(edges=[5]), r"edges\[0\] must be a JSON object"),
    "truncated": (_FIG1_TEXT[:-7], r"not valid JSON"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_GRAPHS))
@pytest.mark.parametrize("command", ["solve", "check"])
def test_every_hostile_graph_is_one_line_exit_2(case, command, tmp_path):
    content, match = HOSTILE_GRAPHS[case]
    graph = write(tmp_path, "g.json", content)
    argv = ["solve", graph] if command == "solve" else \
        ["check", graph, write(tmp_path, "s.json", schedule_doc(FIG1))]
    code, out, err = run_cli(argv)
    assert_clean(code, err, bad_input=True)
    assert __import__("re").search(match, err), err


def _sched(**over):
    d = schedule_doc(FIG1)
    d.update(over)
    return d


HOSTILE_SCHEDULES = {
    "attempts is a number": (_sched(attempts=5), r"attempts must be a list, got 5"),
    "attempt is a number": (_sched(attempts=[5]), r"attempts\[0\] must be a JSON object"),
    "attempt result unknown": (_sched(attempts=[{"ii": 1, "result": "maybe"}]), r"result must be one of"),
    "attempt ii a string": (_sched(attempts=[{"ii": "1", "result": "sat"}]), r"attempts\[0\] ii must be an integer"),
    "attempt seconds NaN": (json.dumps(_sched(attempts=[{"ii": 1, "result": "sat", "seconds": 0.5}]))
                            .replace("0.5", "NaN"), r"NaN is not a JSON number"),
    "solve_seconds a string": (_sched(solve_seconds="x"), r"solve_seconds must be a number"),
    "solve_seconds 1e400": (json.dumps(_sched(solve_seconds=1.5)).replace("1.5", "1e400"),
                            r"solve_seconds must be a number"),
    "ii past 2**53": (_sched(ii=2**53 + 1), r"ii is .*beyond what any GPU loop has"),
    "time 1e18": (json.dumps(_sched()).replace('"time": 0', '"time": 1000000000000000000', 1), r"beyond"),
    "ops a list": (_sched(ops=[]), r"schedule ops must be an object"),
    "machine of another graph": (_sched(machine="b200"), r"schedule for machine 'b200'"),
    "graph of another name": (_sched(graph="other"), r"schedule of graph 'other'"),
    "normalization U 0": (_sched(normalization={"U": 0, "distortion": 0, "mapping": {}}), r"U must be >= 1"),
    "normalization key not a count": (_sched(normalization={"U": 3, "distortion": 0, "mapping": {"\u00b2": 1}}),
                                      r"mapping key .* must be a cycle count"),
    "normalization objective": (_sched(normalization={"U": 3, "distortion": 0, "mapping": {}, "objective": "x"}),
                                r"objective must be"),
    "streaming depth huge": (_sched(streaming={"ops": [], "depth": 2**40}), r"beyond"),
    "duplicate op": (json.dumps(_sched()).replace('"S": {', '"S": {"time": 0, "stage": 0, "order": 0, "warp": 0},'
                                                   ' "S": {', 1), r"duplicate key 'S'"),
    "surrogate op name": (json.dumps(_sched()).replace('"S": {', '"\\udfff": {', 1), r"lone surrogate"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_SCHEDULES))
def test_every_hostile_schedule_is_one_line_exit_2(case, tmp_path):
    content, match = HOSTILE_SCHEDULES[case]
    graph = write(tmp_path, "g.json", FIG1)
    code, _, err = run_cli(["check", graph, write(tmp_path, "s.json", content)])
    assert_clean(code, err, bad_input=True)
    assert __import__("re").search(match, err), err


def test_a_structurally_broken_schedule_is_a_violation_not_a_crash(tmp_path):
    graph = write(tmp_path, "g.json", FIG1)
    code, out, err = run_cli(["check", graph, write(tmp_path, "s.json", _sched(ii=0))])
    assert code == cli.EXIT_VIOLATIONS and err == "" and "rule 0 (structure): ii must be an integer >= 1" in out


def test_a_schedule_of_another_machine_is_refused_with_machine_option(tmp_path):
    graph = write(tmp_path, "g.json", FIG1)
    code, _, err = run_cli(["check", graph, write(tmp_path, "s.json", schedule_doc(FIG1)), "--machine", "a100"])
    assert_clean(code, err, bad_input=True)
    assert "but --machine names machine 'a100'" in err


def test_check_exits_1_only_for_violations(tmp_path):
    graph = write(tmp_path, "g.json", FIG1)
    bad = schedule_doc(FIG1)
    bad["ii"] = 1  # resources: S and O share the TC at every slot
    for op in bad["ops"].values():
        op["stage"] = op["time"]
    code, out, err = run_cli(["check", graph, write(tmp_path, "s.json", bad)])
    assert code == cli.EXIT_VIOLATIONS and err == "" and "violation(s)" in out


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "-1", "0", "1e309", "1e300", "x", ""])
def test_hostile_time_limits(value):
    code, _, err = run_cli(["example", "fa_fwd_fig1", f"--time-limit={value}"])
    assert_clean(code, err, bad_input=True)


def test_printable_unicode_names_are_fine(tmp_path):
    d = fig1(name="注意力")
    for op, name in zip(d["ops"], ["S\u00b7\u03a9", "\U0001f600", "P\u2028"[:-1] + "\u00e9"]):
        old = op["name"]
        op["name"] = name
        for e in d["edges"]:
            e["src"] = name if e["src"] == old else e["src"]
            e["dst"] = name if e["dst"] == old else e["dst"]
    code, out, err = run_cli(["solve", write(tmp_path, "g.json", d), "--quiet"])
    assert code == 0 and "\U0001f600" in out and err == ""


def test_internal_error_and_interrupt_in_every_command(monkeypatch):
    for exc, expected in ((ZeroDivisionError("boom"), cli.EXIT_INTERNAL), (MemoryError(), cli.EXIT_INTERNAL),
                          (RecursionError("deep"), cli.EXIT_INTERNAL), (KeyboardInterrupt(), cli.EXIT_INTERRUPTED)):
        def raiser(*a, **k):
            raise exc
        monkeypatch.setattr(cli, "load_graph", raiser)
        monkeypatch.delenv("TVM_TWILL_DEBUG", raising=False)
        code, _, err = run_cli(["solve", "x.json"])
        assert code == expected and len(err.splitlines()) == 1 and "Traceback" not in err
        assert err.startswith("tvm-twill: internal error: " if expected == 4 else "tvm-twill: interrupted")


# -- hypothesis: mutations of the bundled examples -----------------------------
_HUGE = st.one_of(st.integers(2**31, 2**80), st.integers(-(2**80), -(2**31)))
_NASTY_TEXT = st.text(alphabet=st.characters(codec=None, categories=("Cc", "Cs", "Lo", "So", "Zs", "Ll")),
                      min_size=0, max_size=6)
HOSTILE_VALUES = st.one_of(
    st.integers(-5, 5), _HUGE, st.integers(0, 2**31 - 1),
    st.floats(allow_nan=True, allow_infinity=True), st.none(), st.booleans(), _NASTY_TEXT,
    st.sampled_from(["", "TC", "h100", "b200", "S", "P", "O", "tvm-twill-graph/2", "tvm-twill-schedule/1"]),
    st.lists(st.integers(0, 3), max_size=3), st.dictionaries(st.sampled_from(["TC", "x", ""]), st.integers(-1, 3),
                                                             max_size=2),
    st.integers(1, 300).map(lambda n: json.loads("[" * n + "]" * n)),
)


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, prefix + (i,))


@st.composite
def mutated(draw, doc, values=HOSTILE_VALUES):
    """``doc`` with 1-3 structural mutations, as JSON text, maybe text-mangled too."""
    doc = json.loads(json.dumps(doc))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        action = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add", "duplicate"]))
        if action == "replace":
            parent[path[-1]] = draw(values)
        elif action == "delete":
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["latency", "cycles", "delay", "\x00", "warps"]))] = draw(values)
        elif action == "duplicate" and isinstance(parent, list):
            parent.append(json.loads(json.dumps(parent[path[-1]])))
    text = json.dumps(doc, allow_nan=True, ensure_ascii=draw(st.booleans()))
    mangle = draw(st.sampled_from(["none", "none", "truncate", "insert", "dupkey"]))
    if mangle == "truncate":
        text = text[:draw(st.integers(0, len(text)))]
    elif mangle == "insert":
        i = draw(st.integers(0, len(text)))
        text = text[:i] + draw(st.sampled_from(["{", "]", ",", '"', "\\", "\x00", "\ud800", "9" * 5000, " "])) + text[i:]
    elif mangle == "dupkey":
        text = text.replace('"name": ', '"name": "dup", "name": ', 1)
    return text


def _check_mutated_graph(name, text, tmp):
    doc = example_doc(name)
    graph = write(tmp, "g.json", text)
    code, _, err = run_cli(["check", graph, write(tmp, "s.json", schedule_doc(doc))])
    assert_clean(code, err)
    assert code in (0, 1, 2), (code, err)


def _check_mutated_schedule(name, text, tmp):
    code, _, err = run_cli(["check", str(example_path(name)), write(tmp, "s.json", text)])
    assert_clean(code, err)
    assert code in (0, 1, 2), (code, err)


@st.composite
def graph_mutation(draw):
    name = draw(st.sampled_from(EXAMPLES))
    return name, draw(mutated(example_doc(name)))


@st.composite
def schedule_mutation(draw):
    name = draw(st.sampled_from(EXAMPLES))
    return name, draw(mutated(schedule_doc(example_doc(name))))


@fuzz(60)
@given(graph_mutation())
def test_fuzz_mutated_example_graphs_through_check(tmp_path_factory, case):
    _check_mutated_graph(*case, tmp_path_factory.mktemp("g"))


@fuzz(60)
@given(schedule_mutation())
def test_fuzz_mutated_schedules_through_check(tmp_path_factory, case):
    _check_mutated_schedule(*case, tmp_path_factory.mktemp("s"))


@pytest.mark.slow
@fuzz(600)
@given(graph_mutation(), schedule_mutation())
def test_fuzz_mutations_through_check_many(tmp_path_factory, g, s):
    _check_mutated_graph(*g, tmp_path_factory.mktemp("g"))
    _check_mutated_schedule(*s, tmp_path_factory.mktemp("s"))


# Mutations the solver can take in its stride (small magnitudes: the solver's own
# magnitude handling is not this file's subject), through ``solve``.
SMALL_VALUES = st.one_of(st.integers(-2, 40), st.none(), st.booleans(), st.sampled_from(["TC", "SFU", "x", ""]))


@st.composite
def solvable_mutation(draw):
    name = draw(st.sampled_from(["fa_fwd_fig1", "gemm_tma", "fa_fwd_hopper"]))
    return name, draw(mutated(example_doc(name), SMALL_VALUES))


@fuzz(12)
@given(solvable_mutation())
def test_fuzz_mutated_small_graphs_through_solve(tmp_path_factory, case):
    name, text = case
    graph = write(tmp_path_factory.mktemp("g"), "g.json", text)
    code, out, err = run_cli(["solve", graph, "--time-limit", "2"])
    assert_clean(code, err)
    assert code in (0, 2, 3), (code, err)


# -- hypothesis: hostile argument vectors --------------------------------------
_TOKENS = ["solve", "check", "example", "machines", "--machine", "--json", "--time-limit", "--cross-warp-sync",
           "--no-normalize", "--normalize-objective", "--version", "-h", "nan", "inf", "-1", "1e999", "h100",
           "z900", "fa_fwd_fig1", "fa_fig7", "\u00e9\u00e8", "\U0001f600", "/", "/nonexistent.json", "", "--", "-"]


@fuzz(60)
@given(st.lists(st.one_of(st.sampled_from(_TOKENS), _NASTY_TEXT.filter(lambda s: "\x00" not in s)), max_size=5))
def test_fuzz_argv(argv):
    # never solve for real here: a valid 'example NAME' solve is covered elsewhere
    assume(not ("example" in argv and any(a in EXAMPLES for a in argv)))
    code, out, err = run_cli(argv)
    assert code in DOCUMENTED and code != cli.EXIT_INTERNAL, (argv, code, err)
    assert "Traceback" not in err
    if code == cli.EXIT_INPUT:
        assert len(err.splitlines()) == 1 and err.startswith("tvm-twill: error: "), err


# -- subprocesses: ASCII stdout, Ctrl-C -------------------------------------------
def _limit():
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def _env(**extra):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("TVM_TWILL_DEBUG", None)
    env.update(extra)
    return env


def _proc(args, **env):
    return subprocess.run([sys.executable, "-m", "tvm_twill.cli", *args], capture_output=True, env=_env(**env),
                          cwd=REPO, timeout=300, preexec_fn=_limit)


@pytest.mark.parametrize("env", [{"PYTHONIOENCODING": "ascii"}, {"LANG": "C", "LC_ALL": "C",
                                                                  "PYTHONIOENCODING": "ascii:strict"}])
def test_unicode_names_on_an_ascii_stdout(env, tmp_path):
    d = fig1(name="\u6ce8\u610f")
    d["ops"][0]["name"] = "S\u03a9"
    for e in d["edges"]:
        e["src"] = "S\u03a9" if e["src"] == "S" else e["src"]
        e["dst"] = "S\u03a9" if e["dst"] == "S" else e["dst"]
    graph = write(tmp_path, "g.json", d)
    proc = _proc(["solve", graph, "--json", str(tmp_path / "s.json")], **env)
    assert proc.returncode == 0, proc.stderr
    assert b"S\\u03a9" in proc.stdout and b"Traceback" not in proc.stderr
    proc = _proc(["check", graph, str(tmp_path / "s.json")], **env)
    assert proc.returncode == 0 and b"\\u6ce8\\u610f" in proc.stdout, proc.stderr
    proc = _proc(["example", "\u00e9t\u00e9"], **env)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1
    assert proc.stderr.startswith(b"tvm-twill: error: unknown example '\\xe9t\\xe9'"), proc.stderr


def test_hostile_file_through_the_module_entry_point(tmp_path):
    graph = write(tmp_path, "g.json", _DEEP)
    proc = _proc(["solve", graph])
    assert proc.returncode == 2 and proc.stdout == b""
    assert len(proc.stderr.splitlines()) == 1 and b"nested" in proc.stderr


def _double_measured():
    d = example_doc("fa_fwd_hopper_measured")
    ops, edges = [], []
    for c in ("a", "b"):
        ops += [dict(o, name=c + o["name"]) for o in d["ops"]]
        edges += [dict(e, src=c + e["src"], dst=c + e["dst"]) for e in d["edges"]]
    return dict(d, name="double", ops=ops, edges=edges)


def _limit_and_hear_ctrl_c():
    """A job started in the background by a non-interactive shell inherits SIGINT ignored, and Python
    then installs no KeyboardInterrupt handler: the child gets the default disposition back, as a
    terminal user's process has."""
    _limit()
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt_after(argv, seconds, tmp_path, python=None):
    """Run the CLI in a subprocess, SIGINT it after ``seconds``: (status, stdout, stderr)."""
    cmd = [sys.executable, "-c", python] if python else [sys.executable, "-m", "tvm_twill.cli"]
    proc = subprocess.Popen(cmd + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), cwd=REPO,
                            preexec_fn=_limit_and_hear_ctrl_c)
    time.sleep(seconds)  # not an assertion: just into the work
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("tvm-twill did not stop within 150 s of Ctrl-C")
    return proc.returncode, out, err


def test_ctrl_c_exits_130_with_one_line(tmp_path):
    # a command that blocks in Python (as a solve does between solver calls)
    python = ("import sys, time; import tvm_twill.cli as c; "
              "c.cmd_machines = lambda args: time.sleep(120); sys.exit(c.main(sys.argv[1:]))")
    code, out, err = _interrupt_after(["machines"], 2, tmp_path, python=python)
    assert code == cli.EXIT_INTERRUPTED and err == b"tvm-twill: interrupted\n", (code, err)


@pytest.mark.slow
def test_ctrl_c_during_a_long_solve(tmp_path):
    graph = write(tmp_path, "g.json", _double_measured())
    code, out, err = _interrupt_after(["solve", graph, "--time-limit", "60"], 2, tmp_path)
    assert b"Traceback" not in err, err
    # 130 once z3's interruption surfaces as KeyboardInterrupt (the solvers' side);
    # until then z3 swallows SIGINT and the search reports running out of time (3);
    # 0 only if the solve finished before the signal.
    assert code in (cli.EXIT_INTERRUPTED, cli.EXIT_NO_SCHEDULE, cli.EXIT_OK), (code, err)
    if code == cli.EXIT_INTERRUPTED:
        assert err == b"tvm-twill: interrupted\n"
    elif code == cli.EXIT_NO_SCHEDULE:
        assert len(err.splitlines()) == 1 and err.startswith(b"tvm-twill: error: ")


def test_nul_in_paths_in_process(tmp_path):
    code, _, err = run_cli(["solve", "a\x00b.json"])
    assert_clean(code, err, bad_input=True)
    code, _, err = run_cli(["example", "fa_fwd_fig1", "--json", str(tmp_path / "x\x00.json")])
    assert_clean(code, err, bad_input=True)
    assert "cannot write" in err


# -- magnitudes at the documented limit, through the whole CLI ----------------------
_BIG = 2**31 - 1
_AT_LIMIT = {
    "an op of 2**31-1 cycles": {"ops": [{"name": "A", "cycles": _BIG, "unit": "TC"},
                                        {"name": "B", "cycles": 1, "unit": "ALU"}],
                                "edges": [{"src": "A", "dst": "B", "delay": 1}]},
    "a self-edge of delay 2**31-1": {"ops": [{"name": "A", "cycles": 1, "unit": "TC"}],
                                     "edges": [{"src": "A", "dst": "A", "delay": _BIG, "distance": 1}]},
    "2**31-1 warp groups": {"machine": {"name": "m", "units": {"TC": 1, "ALU": 1}, "warp_groups": _BIG},
                            "ops": [{"name": "A", "cycles": 1, "unit": "TC"},
                                    {"name": "B", "cycles": 1, "unit": "ALU"}],
                            "edges": [{"src": "A", "dst": "B", "delay": 1}]},
    "a chain of 2**31-1 delays on one unit": {
        "ops": [{"name": "A", "cycles": _BIG, "unit": "TC"}, {"name": "B", "cycles": 1, "unit": "TC"},
                {"name": "C", "cycles": 5, "unit": "SFU", "regs": 100}],
        "edges": [{"src": "A", "dst": "B", "delay": _BIG, "blocking": True}, {"src": "B", "dst": "C", "delay": _BIG},
                  {"src": "C", "dst": "A", "delay": _BIG, "distance": 1}]},
    "a delay of 2**31-1 between one-cycle ops (2**30 copies in flight)": {
        "ops": [{"name": "A", "cycles": 1, "unit": "TC"}, {"name": "B", "cycles": 1, "unit": "TC"}],
        "edges": [{"src": "A", "dst": "B", "delay": _BIG}]},
    "a unit of capacity 2**31-1": {"machine": {"name": "m", "units": {"TC": _BIG}, "warp_groups": 4},
                                   "ops": [{"name": "A", "cycles": _BIG, "unit": "TC"},
                                           {"name": "B", "cycles": _BIG, "unit": "TC"}]},
}


def _limit_memory_and_cpu():
    """2 GiB of address space and 120 s of CPU: a solve that sizes tables by a magnitude is
    killed (MemoryError, or SIGXCPU) instead of taking the machine down.  Not a timing: the
    assertions are on the exit status and the files."""
    import resource
    _limit()
    resource.setrlimit(resource.RLIMIT_CPU, (120, 120))


@pytest.mark.parametrize("case", sorted(_AT_LIMIT))
def test_magnitudes_at_the_limit_are_solved_and_checked(case, tmp_path):
    graph = write(tmp_path, "g.json", {"format": "tvm-twill-graph/1", "name": "g", "normalize": False,
                                       **_AT_LIMIT[case]})
    sched = str(tmp_path / "s.json")
    cmd = [sys.executable, "-m", "tvm_twill.cli", "solve", graph, "--time-limit", "2", "--json", sched, "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, env=_env(), cwd=REPO, timeout=300,
                          preexec_fn=_limit_memory_and_cpu)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-500:])
    assert b"Traceback" not in proc.stderr and len(proc.stdout) < 100_000  # the report lists no copy per cycle
    code, out, err = run_cli(["check", graph, sched])
    assert code == 0 and out.startswith("valid: g"), (code, out, err)
