"""MetaSchedule with optimal software pipelines: ``TwillPipeline`` among the postprocessors.

Runs without a GPU (MetaSchedule generates and post-processes candidates on
the CPU; only measuring them needs the GPU)::

    python tutorials/metaschedule_tuning.py                 # sm_80, 6 candidates
    python tutorials/metaschedule_tuning.py --arch sm_90a --candidates 4
    python tutorials/metaschedule_tuning.py --tune          # a real tuning run: needs a GPU

MetaSchedule's tensor-core rule with software pipelining
(``MultiLevelTilingTensorCore(use_software_pipeline=True)``, the mma.sync rule
of TVM's "cuda-tensorcore" defaults) annotates every candidate of a GEMM
with the same fixed pattern: stages [0, 0, 1, 2, 2] on the outer k loop
(two cp.async copies and the inner loop's prologue / body / epilogue) and
[0, 0, 1] on the inner one (ldmatrix, ldmatrix, mma), whatever the tile
sizes.  Put last among the postprocessors, ``TwillPipeline`` re-plans each
candidate's pipelines for the tuning target with ``auto_pipeline`` (the
smallest initiation interval under the machine model, within the target's
shared-memory limit), and keeps the rule's annotation, saying why, where it
cannot.  This tutorial samples candidates the way MetaSchedule's search does
(``ReplayTrace``: random tile decisions, the postprocessors run on each) and
shows, for each, the rule's annotation and tvm_twill's with the model II of
each, in cycles per outer-loop iteration.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

try:
    import tvm_twill  # noqa: F401
except ImportError:  # running from a source checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TUNE_CALL = """\
    from tvm.s_tir import meta_schedule as ms
    from tvm_twill.metaschedule import TwillPipeline
    from tvm_twill.metaschedule import tensorcore_tune_context

    postprocs = [*ms.postproc.Postproc.create("cuda-tensorcore"), TwillPipeline()]   # tvm_twill last
    ctx = tensorcore_tune_context(512, "sm_80", postprocs=postprocs)   # the GEMM, the pipelining rule
    # (for your own module: space=ms.space_generator.PostOrderApply(sch_rules=..., postprocs=postprocs, ...))
    database = ms.tune_tir(ctx.mod, ctx.target, work_dir, max_trials_global=64, space=ctx.space_generator)
    sch = ms.tir_integration.compile_tir(database, ctx.mod, ctx.target)   # the best, with tvm_twill's pipelines
"""


def model_ii(sch, loop: str, arch: str, machine) -> str:
    """The model II (cycles per iteration) of the annotation on ``loop``, or why there is none."""
    import tvm_twill
    from tvm_twill.errors import TwillError

    try:
        return f"{tvm_twill.evaluate_annotation(sch, loop, arch, machine=machine).ii_cycles} cycles"
    except TwillError as err:
        return f"n/a ({err})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="TwillPipeline in MetaSchedule's tensor-core design space")
    ap.add_argument("--arch", default="sm_80", choices=("sm_80", "sm_90a"), help="the tuning target")
    ap.add_argument("--size", type=int, default=512, help="GEMM size n (n^3, fp16 -> fp32)")
    ap.add_argument("--candidates", type=int, default=6, help="candidates to sample")
    ap.add_argument("--tune", action="store_true", help="also run ms.tune_tir on this machine's GPU")
    ap.add_argument("--trials", type=int, default=32, help="--tune: measured candidates")
    args = ap.parse_args(argv)

    import tvm
    from tvm.s_tir import meta_schedule as ms

    from tvm_twill.frontend import resolve_loop
    from tvm_twill.metaschedule import TwillPipeline, target_machine
    from tvm_twill.transforms import restore_annotation
    from tvm_twill.metaschedule import sample_candidates, tensorcore_tune_context

    # 1. MetaSchedule's design space for the GEMM, TwillPipeline last among the postprocessors.
    twill = TwillPipeline()
    postprocs = [*ms.postproc.Postproc.create("cuda-tensorcore"), twill]
    ctx = tensorcore_tune_context(args.size, args.arch, intrinsics="mma", postprocs=postprocs, seed=1)
    machine = target_machine(ctx.target)
    print(f"{args.size}^3 fp16 GEMM for {args.arch} ({ctx.target.attrs['max_shared_memory_per_block']} B of shared "
          f"memory per block): MetaSchedule's tensor-core rule with software pipelining; postprocessors: "
          f"{', '.join(type(p).__name__ for p in postprocs[:-1])}, TwillPipeline")

    # 2. Candidates as the search makes them: random decisions, every postprocessor applied.
    candidates = sample_candidates(ctx, args.candidates)
    planned = kept = 0
    for i, cand in enumerate(candidates):
        replan = next(r for r in twill.history if r.mod.same_as(cand.mod))
        rule = tvm.s_tir.Schedule(replan.mod)  # the candidate as the rule annotated it
        for nest in replan.nests:
            for name, ann in zip(nest.loops, nest.before):
                restore_annotation(rule, resolve_loop(rule, name).rv, ann)
        print(f"\ncandidate {i}:")
        for nest in replan.nests:
            outer = nest.loops[0]
            trips = int(resolve_loop(cand, outer).node.extent)
            print(f"  loop nest {', '.join(nest.loops)} (outer loop: {trips} iterations)")
            for name, ann in zip(nest.loops, nest.before):
                print(f"    rule       {name}: stages {list(ann.stages)}, orders {list(ann.orders)}"
                      + (f", async {list(ann.async_stages)}" if ann.async_stages else ""))
            print(f"    rule       model II of {outer}: {model_ii(rule, outer, args.arch, machine)}")
            if nest.kept:
                kept += 1
                print(f"    tvm_twill  keeps the rule's annotation: {nest.reason}")
                continue
            planned += 1
            plan = nest.plan
            for p in (*plan.inner, plan):
                ann = p.annotation
                text = (f"stages {list(ann.stages)}, orders {list(ann.orders)}"
                        + (f", async {list(ann.async_stages)}" if ann.async_stages else "")) if p.applied \
                    else "no pipeline (the optimal schedule keeps one stage in program order)"
                print(f"    tvm_twill  {p.loop}: {text}")
            print(f"    tvm_twill  model II of {outer}: {plan.ii_cycles} cycles "
                  f"({'optimal' if plan.schedule.optimal else 'best found'}; shared memory {plan.smem_bytes} B)")
    print(f"\n{planned} loop nest(s) re-planned, {kept} kept the rule's annotation (each reason is logged by "
          "the 'tvm_twill.metaschedule' logger and kept in TwillPipeline.history)")
    print(f"solver calls: {twill.cache.solves.solves}, answers reused: {twill.cache.solves.hits} "
          "(a tuning run solves each distinct loop once: tvm_twill.cache.SHARED)")

    # 3. Tuning: the same postprocessors in ms.tune_tir.  Measuring needs a GPU.
    print("\nIn a tuning run (ms.tune_tir measures each candidate on the GPU):\n")
    print(TUNE_CALL)
    if not args.tune:
        print("(pass --tune to run it here: it needs an NVIDIA GPU)")
        return 0
    with tempfile.TemporaryDirectory() as work_dir:
        database = ms.tune_tir(ctx.mod, ctx.target, work_dir, max_trials_global=args.trials, space=ctx.space_generator,
                               num_trials_per_iter=min(args.trials, 16))
        sch = ms.tir_integration.compile_tir(database, ctx.mod, ctx.target)
    print("best candidate:", sch.mod.script()[:2000] if sch is not None else "none measured")
    return 0


if __name__ == "__main__":
    sys.exit(main())
