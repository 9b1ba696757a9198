"""plan_module on a whole (tiny) Llama-class model: every pipeline nest accounted for, the solves in worker
processes giving exactly the serial result, identical loops solved once, planned kernels that compile.

The model is ``tvm_twill.workloads.llama`` at its smallest tensor-core size (dlight tensorizes a matmul only when
every extent exceeds 64): one layer, hidden 128, one head, MLP width 128, 128 tokens.
"""
import json
import multiprocessing
import os
import pathlib
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

import pytest

from tvm_twill.errors import InputError, UnsupportedTargetError
from tvm_twill.integrations.module_report import LoopOutcome, ModulePlan, reason_group, reason_of

ROOT = pathlib.Path(__file__).resolve().parents[2]
TINY_ARGS = ["--layers", "1", "--hidden", "128", "--heads", "1", "--ffn", "128", "--seq", "128"]


# -- the report, pure Python ---------------------------------------------------------------
def _report(*loops):
    return ModulePlan(mod=None, arch="sm_80", kernels=3, loops=tuple(loops), workers=1, rounds=1, solves=0,
                      solve_s=0.0, wall_s=0.0, cache={})


def test_refusals_are_grouped_by_reason_without_names_and_numbers():
    kept = [LoopOutcome("f", ("k0",), "kept", reason="UnsupportedLoopError: loop 'k0' has 3 statements"),
            LoopOutcome("g", ("k1",), "kept", reason="UnsupportedLoopError: loop 'k1' has 5 statements"),
            LoopOutcome("h", ("k2",), "kept", reason="InfeasibleError: registers")]
    plan = _report(*kept, LoopOutcome("p", ("k",), "planned", ii_before=10, ii_after=8, trip_count=4))
    assert plan.refusals() == [("UnsupportedLoopError: loop '…' has N statements", 2), ("InfeasibleError: registers", 1)]
    assert reason_group("a 'x' 12") == reason_group("a 'yy' 3")
    assert reason_of(InputError("bad")) == "InputError: bad"
    assert reason_of(KeyError("k")) == "unexpected KeyError: 'k'"  # not a refusal tvm_twill meant
    reused = "InfeasibleError: graph 'k1' has the dependence graph of 'k0' (ops by position), solved earlier: "
    assert reason_group(reused + "graph 'k1' has no schedule") == reason_group("InfeasibleError: graph 'k0' has no "
                                                                              "schedule")
    assert len(plan.planned) + len(plan.kept) == len(plan.loops) == 4


def test_predicted_change_sums_ii_times_trips_over_the_nests_known_both_ways():
    plan = _report(LoopOutcome("a", ("k",), "planned", ii_before=100, ii_after=60, trip_count=4),
                   LoopOutcome("b", ("k",), "kept", reason="r", ii_before=50, ii_after=50, trip_count=2),
                   LoopOutcome("c", ("k",), "kept", reason="r"))  # its annotation could not be evaluated
    p = plan.predicted()
    assert (p["before"], p["after"], p["compared"], p["unknown"]) == (500, 340, 2, 1)
    assert p["change"] == pytest.approx(-0.32)
    assert "not a measurement" in plan.summary()


def test_a_worker_solves_without_tvm_and_its_answer_pickles():
    code = ("import pickle, sys\n"
            "from tvm_twill.model import get_machine, load_graph\n"
            "from tvm_twill.solvers import SolveOptions\n"
            "from tvm_twill.integrations.workers import solve_job\n"
            "g = load_graph('tvm_twill/data/graphs/fa_fwd_fig1.json')\n"
            "job = pickle.loads(pickle.dumps((g, get_machine('h100'), SolveOptions())))\n"
            "kind, s, secs = pickle.loads(pickle.dumps(solve_job(*job)))\n"
            "print(kind, s.ii, s.optimal, 'tvm' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], check=False, cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["schedule", "2", "True", "False"]  # Figure 1's II, and no TVM in the worker


# -- on TVM ------------------------------------------------------------------------------------
tvm = pytest.importorskip("tvm")
import tvm_twill
from tvm_twill.planner.cache import PlanCache
from tvm_twill.frontend import compile_cuda, read_annotation
from tvm_twill.frontend.ir import children
from tvm_twill.workloads.llama import LlamaConfig, scheduled_module
from tvm_twill.model import get_machine

TINY = LlamaConfig(layers=1, hidden=128, heads=1, ffn=128, seq=128)
CACHE = PlanCache()  # shared by the serial plan and the re-run that must solve nothing


@pytest.fixture(scope="module")
def tiny():
    mod = scheduled_module(TINY, "sm_80")
    return mod, mod.script()


@pytest.fixture(scope="module")
def serial(tiny):
    return tvm_twill.plan_module(tiny[0], "sm_80", max_workers=1, cache=CACHE)


def _nests(func) -> list:
    """Outermost annotated loops of a PrimFunc (each starts one pipeline nest), found by walking the IR."""
    out = []

    def walk(stmt, annotated_above):
        if isinstance(stmt, tvm.tirx.For):
            mine = read_annotation(stmt) is not None
            if mine and not annotated_above:
                out.append(stmt)
            annotated_above = annotated_above or mine
        for c in children(stmt):
            walk(c, annotated_above)

    walk(func.body, False)
    return out


def test_every_nest_is_accounted_for_and_the_input_is_unchanged(tiny, serial):
    mod, script = tiny
    funcs = {gv.name_hint: f for gv, f in mod.functions_items() if isinstance(f, tvm.tirx.PrimFunc)}
    expected = sorted((name, n.loop_var.name) for name, f in funcs.items() for n in _nests(f))
    assert len(expected) >= 4  # projections, attention and MLP matmuls are on tensor cores
    assert sorted((lo.func, lo.loops[0]) for lo in serial.loops) == expected
    assert serial.kernels == len(funcs)
    assert len(serial.planned) + len(serial.kept) == len(serial.loops)
    assert sum(n for _, n in serial.refusals()) == len(serial.kept)
    assert mod.script() == script  # plan_module returns a new module
    planned = {lo.func for lo in serial.planned}
    for lo in serial.planned:
        assert lo.ii_after <= lo.ii_before  # dlight's annotation evaluated under the same model
    for name, func in funcs.items():  # exactly the planned functions changed, and each that got a better ii
        changed = serial.mod[name].script() != func.script()
        if name not in planned:
            assert not changed, name
        elif any(lo.ii_after < lo.ii_before for lo in serial.planned if lo.func == name):
            assert changed, name


def test_planned_kernels_compile_for_cuda(serial):
    names = sorted({lo.func for lo in serial.planned})
    assert names
    for name in names:
        func = serial.mod[name].with_attr("global_symbol", name)
        _, src = compile_cuda(tvm.IRModule({name: func}), "sm_80")
        assert "wmma" in src or "mma" in src, name


class CountingPool(ProcessPoolExecutor):
    """A process pool that counts what it is given (the solves really run in the workers)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.submitted = 0

    def submit(self, fn, /, *args, **kwargs):
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


def test_two_worker_processes_give_exactly_the_serial_result(tiny, serial):
    with CountingPool(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        par = tvm_twill.plan_module(tiny[0], "sm_80", executor=pool)
        assert pool.submitted == par.solves > 0
    assert par.to_dict(timings=False) == serial.to_dict(timings=False)
    assert par.mod.script() == serial.mod.script()
    own = tvm_twill.plan_module(tiny[0], "sm_80", max_workers=2)  # the default local pool
    assert own.workers == 2 and own.mod.script() == serial.mod.script()


def test_identical_loops_are_solved_once(tiny, serial):
    asked = sum(lo.solves + lo.reused for lo in serial.loops)
    assert serial.solves == sum(lo.solves for lo in serial.loops) < asked  # same-shape kernels share solves
    again = tvm_twill.plan_module(tiny[0], "sm_80", max_workers=1, cache=CACHE)
    assert again.solves == 0 and again.rounds == 1
    assert again.mod.script() == serial.mod.script()


def test_nests_that_cannot_be_planned_keep_their_annotations_and_say_why(tiny):
    # 8 registers per thread: no schedule of any loop fits (the solver's error comes back from a worker)
    machine = replace(get_machine("a100"), name="few-registers", regs_per_thread_max=8)
    plan = tvm_twill.plan_module(tiny[0], "sm_80", max_workers=2, machine=machine)
    assert plan.loops and not plan.planned
    ((group, n),) = plan.refusals()  # one reason, said once for both staging variants, for every nest
    assert n == len(plan.loops) and group.startswith("InfeasibleError:") and "registers" in group
    assert "direct:" not in group
    assert plan.mod.script() == tiny[0].script()  # nothing written
    assert all(lo.ii_after == lo.ii_before for lo in plan.loops)


def test_outcomes_the_time_limit_cut_short_are_flagged(tiny, serial):
    assert not any(lo.time_limited for lo in serial.loops)  # 10 s per solve: every answer proven
    plan = tvm_twill.plan_module(tiny[0], "sm_80", max_workers=1, time_limit=1e-6)
    limited = [lo for lo in plan.loops if lo.time_limited]
    assert limited, plan.summary()  # no proof fits in a microsecond: each nest is an anytime answer or none
    assert all(lo.time_limited for lo in plan.kept if "SolverTimeoutError" in lo.reason)
    assert "met the time limit" in plan.summary()


def test_bad_input_is_refused_with_one_line(tiny):
    mod = tiny[0]
    with pytest.raises(InputError, match="takes a tvm.IRModule"):
        tvm_twill.plan_module(mod["matmul"], "sm_80")
    with pytest.raises(InputError, match="max_workers must be an int >= 1"):
        tvm_twill.plan_module(mod, "sm_80", max_workers=0)
    with pytest.raises(InputError, match="concurrent.futures.Executor"):
        tvm_twill.plan_module(mod, "sm_80", executor=object())
    with pytest.raises(InputError, match="both executor and max_workers"):
        tvm_twill.plan_module(mod, "sm_80", executor=ProcessPoolExecutor(1), max_workers=2)
    with pytest.raises(InputError, match="software pipelines only"):
        tvm_twill.plan_module(mod, "sm_80", warp_specialize=True)
    with pytest.raises(InputError, match="staging must be one of"):
        tvm_twill.plan_module(mod, "sm_80", staging="shared")
    with pytest.raises(UnsupportedTargetError, match="predates sm_80"):
        tvm_twill.plan_module(mod, "sm_75")


def test_plan_model_command_counts_add_up_and_records_only_where_asked(tmp_path):
    folder = ROOT / "bench" / "results"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "bench/plan_model.py", "--arch", "sm_80", *TINY_ARGS, "--compile",
                        "--out", str(tmp_path)], check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "model's estimate (not a measurement)" in r.stdout
    (row,) = json.loads((tmp_path / "plan_model.json").read_text())["rows"]
    assert row["planned"] + row["kept"] == row["nests"] == len(row["loops"]) > 0
    assert sum(n for _, n in row["refusals"]) == row["kept"]
    assert sorted(row["compiled"]) == sorted({lo["func"] for lo in row["loops"] if lo["status"] == "planned"})
    assert set(row["compiled"].values()) == {"ok"}
    assert "| sm_80 |" in (tmp_path / "plan_model.md").read_text()
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
