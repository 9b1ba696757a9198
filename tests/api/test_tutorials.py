"""Every tutorial runs headless, exits 0 and prints what it promises (subprocess, no GPU).

Each runs as in the README's quick-start venv: the test-only packages (pytest, hypothesis) cannot be
imported (``quickstart_env``).  Tutorials that need TVM are skipped without it.  Nothing here is timed.
"""
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import quickstart_env

ROOT = pathlib.Path(__file__).resolve().parents[2]
TUTORIALS = ROOT / "tutorials"
HAVE_TVM = importlib.util.find_spec("tvm") is not None
needs_tvm = pytest.mark.skipif(not HAVE_TVM, reason="the tutorial needs TVM (pip install -e '.[tvm]')")


def run(script, *args, blocked=()):
    env = quickstart_env.env(pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / f"twill-quickstart-{os.getpid()}",
                             blocked=(*quickstart_env.TEST_ONLY, *blocked))
    r = subprocess.run([sys.executable, str(TUTORIALS / script), *args], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"{script} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def test_every_tutorial_is_tested():
    tested = {"solve_paper_graphs.py", "auto_pipeline_gemm.py", "dlight_gemm.py", "metaschedule_tuning.py",
              "warp_specialized_gemm.py", "check_without_gpu.py", "attention.py", "tune_any_module.py"}
    assert {p.name for p in TUTORIALS.glob("*.py")} <= tested


def test_solve_paper_graphs(tmp_path):
    pytest.importorskip("matplotlib")
    mpimg = pytest.importorskip("matplotlib.image")
    out = run("solve_paper_graphs.py", "--out", str(tmp_path))
    for name, ii, length in (("fa_fwd_fig1", 2, 4), ("fa_fwd_hopper", 4, 4), ("fa_bwd_hopper", 5, 7)):
        assert f"summary: {name} ii = {ii}, length = {length}, optimal" in out
        picture = tmp_path / f"{name}.png"
        assert f"picture: {picture}" in out
        img = mpimg.imread(picture)
        assert img.shape[0] > 400 and img.shape[1] > 1000 and img[..., :3].std() > 0.05
    assert "pipeline: 2 copies of the schedule" in out and "warp group 1 (warps 4-7)" in out
    assert list(tmp_path.iterdir()) and not list(ROOT.glob("twill_pictures*"))


def test_solve_paper_graphs_without_pictures():
    out = run("solve_paper_graphs.py", "--graphs", "fa_fwd_fig1", "--no-plot")
    assert "summary: fa_fwd_fig1 ii = 2, length = 4, optimal" in out and "picture:" not in out


def test_solve_paper_graphs_without_matplotlib_gives_the_reports():
    """The quick-start install has no matplotlib: the tutorial says how to get the pictures and goes on."""
    out = run("solve_paper_graphs.py", "--graphs", "fa_fwd_fig1", blocked=("matplotlib",))
    assert out.startswith("no pictures: plotting needs matplotlib, which is not installed: pip install "
                          "'tvm-twill[plot]'")
    assert "summary: fa_fwd_fig1 ii = 2, length = 4, optimal" in out and "picture:" not in out


@needs_tvm
def test_auto_pipeline_gemm():
    out = run("auto_pipeline_gemm.py", "--no-nvcc")
    assert "auto_pipeline: loop 'k_0_0'" in out
    assert "model II per k_0_0 iteration: auto_pipeline" in out
    assert "cp.async.wait_group counts in the kernel:" in out


@needs_tvm
def test_warp_specialized_gemm():
    out = run("warp_specialized_gemm.py", "--no-nvcc", "--n", "1024")
    assert "warp_specialize='auto': not specialized" in out or "warp_specialize='auto': specialized" in out
    assert "protocol model check: no deadlock" in out and "tir_pipeline='tvm_twill_ws'" in out
    assert "const __grid_constant__ CUtensorMap A_tmap0" in out
    counts = dict(re.findall(r"^    (\S.*?)\s+(\d+) call sites$", out, re.M))
    assert counts["TMA tensor copies"] == "2" and counts["elect.sync"] == "1" and counts["setmaxnreg"] == "2"
    assert counts["wgmma.mma_async"] == "1" and counts["bulk copies"] == "0"


@needs_tvm
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="the emulator runs the PTX nvcc writes")
def test_check_without_gpu():
    out = run("check_without_gpu.py")
    assert re.search(r"^emulated: ok: 0 findings, \d+ warp instructions", out, re.M), out
    err = float(re.search(r"32768 elements of C computed by 2 CTAs, max \|C - A @ B\| = (\S+)", out).group(1))
    assert err < 1e-3
    assert re.search(r"^verify: .* seeds \[0, 1\] x 2 interleavings: ok, .* 0 findings", out, re.M), out
    assert "planted bug (cp.async waits removed): caught" in out
    assert re.search(r"^  AsyncReadBeforeWait: .* PTX line \d+ \(CUDA line \d+\)$", out, re.M), out


@needs_tvm
def test_dlight_gemm():
    out = run("dlight_gemm.py", "--no-nvcc")
    assert "dlight's outer loop 'ax3_0_0': 7 pipeline statements" in out
    ii = re.search(r"model II per outer iteration: dlight (\d+) cycles, tvm_twill (\d+) cycles", out)
    assert ii and int(ii.group(2)) <= int(ii.group(1))
    # dlight's copy of B transposes: TVM would make it a wrong cp.async, so it stays a plain copy, said why
    assert ("B_reindex_shared.dyn stays a synchronous copy: TVM would lower it to a wrong cp.async: its 4-lane "
            "vectors read global source B with a stride of") in out
    assert re.search(r"cp\.async in the kernel: (True|False); wait_group counts", out)
def test_metaschedule_tuning():
    pytest.importorskip("psutil")  # MetaSchedule's TuneContext needs it
    out = run("metaschedule_tuning.py", "--candidates", "4")
    assert "TwillPipeline" in out and "candidate 3:" in out and "candidate 4:" not in out
    assert out.count("    rule       model II of ") == 4
    assert "tvm_twill  model II of " in out  # at least one candidate re-planned
    assert "loop nest(s) re-planned" in out and "solver calls:" in out
    assert "ms.tune_tir(ctx.mod, ctx.target, work_dir" in out and "(pass --tune to run it here" in out


@needs_tvm
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="the emulator runs the PTX nvcc writes")
def test_attention(tmp_path):
    pytest.importorskip("matplotlib")
    out = run("attention.py", "--out", str(tmp_path))
    assert "result: applied to loop 'j'" in out and (tmp_path / "attention_plan.png").stat().st_size > 10000
    assert re.search(r"== 3\. the CUDA: \d+ cp\.async call sites", out)
    assert "0 bytes spill stores, 0 bytes spill loads" in out
    for label in ("pipelined SIMT attention", "tensor-core attention", "warp-specialized tensor-core attention",
                  r"warp-specialized wgmma attention \(two consumer warp groups\)"):
        assert re.search(rf"emulated {label}: ok: 0 findings", out)
    assert out.count("max |kernel - numpy| = ") == 4
    assert re.search(r"pipelined build \(tvm_twill_swp TIR pipeline\): \d+ mma\.sync", out)  # the planned TC kernel
    assert "protocol model check: " in out and "bar_sync_count_sync((uint)15, (uint)64)" in out
    assert re.search(r"this kernel, by the model: \d+ TFLOPS", out)
    assert "FlashAttention-2 on A100" in out and "740 TFLOPS" in out and "645 TFLOPS" in out
    # the paper's schedules on its graphs: FA3's two consumer groups on h100, each exp under the other's GEMMs
    fa3 = re.search(r"fa_fwd_hopper \(h100\): ii \d+, 3 roles: (.*)\n(.*)\n", out)
    assert fa3 and {"S_a, P_a, O_a", "S_b, P_b, O_b", "load_K, load_V"} <= {
        part.split(": ", 1)[1] for part in fa3.group(1).split("; ")}
    assert "busy in 100%" in fa3.group(2) and re.search(r"P_a under \w+_b", fa3.group(2))
    assert re.search(r"P_b under \w+_a", fa3.group(2))
    # FA4's split on b200: two softmax groups, a correction group, one MMA issuer, the loads
    assert re.search(r"fa_fwd_blackwell_fa4 \(b200\): .*softmax0: R_a, P_a; softmax1: R_b, P_b; "
                     r"correction: C_a, C_b; mma: S_a, O_a, S_b, O_b; load: load_K, load_V", out)
    # FA3's ping-pong on the wgmma kernel's own plan: two consumer warp groups, one look-ahead turn per iteration
    nine = out[out.index("== 9."):]
    assert "2 groups of 4 warps taking turns on the tensor core with a look-ahead (1 turn per iteration: " \
           "S_mma_o of iteration k, then O_mma_o of k - 1 left in flight" in nine
    busy = re.search(r"tensor core busy in the steady state: (\d+)% with two consumer warp groups and the "
                     r"look-ahead turn \(ii (\d+) cycles\), (\d+)% with the turn across the back edge \(ii (\d+) "
                     r"cycles\), (\d+)% with one group \(ii (\d+) cycles\)", nine)
    assert busy and int(busy.group(1)) == 100
    assert int(busy.group(1)) > int(busy.group(3)) > int(busy.group(5))
    assert int(busy.group(2)) < int(busy.group(4)) < int(busy.group(6))
    assert "bar_sync_count_sync(((uint)((ws_warp >> 2) + 1)), (uint)256)" in nine and "if (1 <= ws_k)" in nine


@needs_tvm
def test_tune_any_module():
    out = run("tune_any_module.py", "--candidates", "2")
    assert "linear layer Y = X W:" in out and "then TwillPipeline" in out
    assert "candidate 0: " in out and re.search(r"^  \S.*: (re-planned, model II \d+ cycles|kept the rule's)", out, re.M)
    assert "pipeline nest(s) re-planned" in out and "(pass --tune to measure here: it needs an NVIDIA GPU)" in out
