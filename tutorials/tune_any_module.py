"""Tune your own module with MetaSchedule, tvm_twill re-planning every candidate's pipelines.

Runs without a GPU up to the measurement (MetaSchedule generates and
post-processes candidates on the CPU; only measuring them needs the GPU)::

    python tutorials/tune_any_module.py                      # sm_80, 4 candidates
    python tutorials/tune_any_module.py --arch sm_90a --candidates 2
    python tutorials/tune_any_module.py --tune               # also measure: needs an NVIDIA GPU

The module is a user's, not one of tvm_twill's workloads: a linear layer
``Y = X W`` (fp16 in, fp32 out, the weight stored [in, out]), written in TE.  ``tvm_twill.metaschedule.
tune_context(mod, target)`` builds MetaSchedule's tuning context for any
module and CUDA target: the "cuda-tensorcore" schedule rules with the
tensor-core rule that software-pipelines (TVM's defaults give fp16 GEMMs to
a wmma rule that writes no pipeline), MetaSchedule's postprocessors, and
``TwillPipeline`` last, which re-plans each candidate's pipelines for the
target and keeps the rule's annotation, saying why, where it cannot.
``sample_candidates`` draws candidates the way the search does (random
tile decisions, every postprocessor applied); each is summarized in one
line per loop nest.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import tvm_twill  # noqa: F401
except ImportError:  # running from a source checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TUNE_CALL = """\
    ctx = tune_context(mod, "sm_80")                    # your module, your target; TwillPipeline last
    database = ms.tune_tir(ctx.mod, ctx.target, work_dir, max_trials_global=64, space=ctx.space_generator)
    sch = ms.tir_integration.compile_tir(database, ctx.mod, ctx.target)   # the best, with tvm_twill's pipelines
"""


def linear(tokens: int, d_in: int, d_out: int):
    """The user's module: Y[m, n] = sum_k X[m, k] * W[k, n], fp16 inputs accumulated in fp32."""
    import tvm
    from tvm import te

    x = te.placeholder((tokens, d_in), "float16", name="X")
    w = te.placeholder((d_in, d_out), "float16", name="W")
    k = te.reduce_axis((0, d_in), name="k")
    y = te.compute((tokens, d_out), lambda m, n: te.sum(x[m, k].astype("float32") * w[k, n].astype("float32"),
                                                        axis=k), name="Y")
    return tvm.IRModule({"main": te.create_prim_func([x, w, y])})


def have_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=30, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def summarize(i: int, replan) -> list[str]:
    """One line per loop nest of a candidate: what tvm_twill wrote, or why it kept the rule's annotation."""
    lines = [f"candidate {i}: {len(replan.nests)} pipeline nest(s)"]
    for nest in replan.nests:
        rule = "; ".join(f"{name} stages {list(a.stages)}" for name, a in zip(nest.loops, nest.before) if a)
        if nest.kept:
            lines.append(f"  {', '.join(nest.loops) or '(no loops)'}: kept the rule's ({rule}): {nest.reason}")
            continue
        plan = nest.plan
        ours = "; ".join(f"{p.loop} stages {list(p.annotation.stages)}" if p.applied else f"{p.loop} no pipeline"
                         for p in (plan, *plan.inner))
        lines.append(f"  {', '.join(nest.loops)}: re-planned, model II {plan.ii_cycles} cycles "
                     f"({'optimal' if plan.schedule.optimal else 'best found'}): {ours}  (rule: {rule})")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="MetaSchedule on your own module, with tvm_twill's pipelines")
    ap.add_argument("--arch", default="sm_80", help="the tuning target (sm_80, sm_90a, or a TVM tag)")
    ap.add_argument("--tokens", type=int, default=256, help="rows of X (the batch of tokens)")
    ap.add_argument("--d-in", type=int, default=1024, help="input features")
    ap.add_argument("--d-out", type=int, default=1024, help="output features")
    ap.add_argument("--candidates", type=int, default=4, help="candidates to sample")
    ap.add_argument("--seed", type=int, default=1, help="MetaSchedule's random seed")
    ap.add_argument("--tune", action="store_true", help="also run ms.tune_tir, measuring on this machine's GPU")
    ap.add_argument("--trials", type=int, default=32, help="--tune: measured candidates")
    args = ap.parse_args(argv)

    from tvm.s_tir import meta_schedule as ms

    from tvm_twill.metaschedule import TwillPipeline, sample_candidates, tune_context

    # 1. Your module and MetaSchedule's tuning context for it, TwillPipeline last among the postprocessors.
    mod = linear(args.tokens, args.d_in, args.d_out)
    twill = TwillPipeline()
    ctx = tune_context(mod, args.arch, twill=twill, seed=args.seed)
    post = [type(p).__name__ for p in ctx.space_generator.postprocs]
    print(f"linear layer Y = X W: X {args.tokens}x{args.d_in}, W {args.d_in}x{args.d_out} (fp16 -> fp32) for "
          f"{ctx.target.attrs['arch']}; postprocessors: {', '.join(post[:-1])}, then TwillPipeline")

    # 2. Candidates as the search makes them; the one-line summary of what tvm_twill did to each.
    candidates = sample_candidates(ctx, args.candidates)
    planned = kept = 0
    for i, cand in enumerate(candidates):
        replan = next(r for r in twill.history if r.mod.same_as(cand.mod))
        planned += sum(1 for n in replan.nests if not n.kept)
        kept += len(replan.kept)
        print("\n".join(summarize(i, replan)))
    print(f"{len(candidates)} candidate(s): {planned} pipeline nest(s) re-planned, {kept} kept the rule's annotation "
          "(reasons in full above, in TwillPipeline.history and in the 'tvm_twill.metaschedule' log)")

    # 3. Measuring: the same space in ms.tune_tir, on a GPU.
    print("\nIn a tuning run (ms.tune_tir measures each candidate on the GPU):\n")
    print(TUNE_CALL)
    if not args.tune:
        print("(pass --tune to measure here: it needs an NVIDIA GPU)")
        return 0
    if not have_gpu():
        print("--tune: no NVIDIA GPU answers nvidia-smi on this machine; everything up to measuring ran above")
        return 0
    with tempfile.TemporaryDirectory() as work_dir:
        database = ms.tune_tir(ctx.mod, ctx.target, work_dir, max_trials_global=args.trials,
                               space=ctx.space_generator, num_trials_per_iter=min(args.trials, 16))
        sch = ms.tir_integration.compile_tir(database, ctx.mod, ctx.target)
    print("best candidate:", sch.mod.script()[:2000] if sch is not None else "none measured")
    return 0


if __name__ == "__main__":
    sys.exit(main())
