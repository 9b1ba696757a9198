"""FlashAttention forward, from an s_tir kernel to a pipelined, emulated CUDA kernel; no GPU needed.

Needs TVM and nvcc (the emulator runs the PTX nvcc writes); matplotlib for the picture (optional)::

    python tutorials/attention.py [--out DIR] [--no-plot]

1. The kernel: ``tvm_twill.kernels.fa_forward`` writes FlashAttention-2's forward pass in s_tir (one
   thread block per 32 query rows of a head, the KV loop ``j`` over a symbolic KV length ``n``; ten
   statements per iteration: two tile loads, S = Q K^T, the online softmax, O += P V).
2. The plan: ``auto_pipeline(sch, "j", "sm_80")`` extracts the loop's dependence graph (the shape of Figure 1
   of the Twill paper: two GEMMs, exp, O and the softmax state carried to the next iteration), finds the
   schedule with the smallest initiation interval and writes it back as TVM software-pipeline annotations;
   ``plan.explain()`` says why each statement is in its stage, ``plan.plot()`` draws it.
3. The CUDA: ``tvm_twill.build`` compiles the plan as planned (K and V loads in an async stage become
   cp.async with constant waits; S and O are SIMT FMA loops, so the loop is bound by the CUDA cores and
   the model may keep the loads synchronous); ptxas's register / spill line is printed.
4. The check: ``tvm_twill.emulator.run`` executes the kernel's PTX on the CPU under adversarial timings for
   a KV length that is not a multiple of the tile and compares it with numpy.
5. On tensor cores: ``tvm_twill.kernels.fa_forward_tc`` runs both GEMMs on mma.sync (TVM's sm_80 tensor
   intrinsics); its loop has the same Figure-1 shape, and the kernel as planned (the K and V loads as cp.async
   in an earlier stage than the GEMMs) is compiled and emulated against numpy too.
6. Warp-specialized on tensor cores: ``auto_pipeline(..., warp_specialize=True)`` gives a producer warp
   streaming K and V through cp.async mbarrier rings and the mma warps as consumers; the consumers' exchanges
   through shared memory (S, P, the correction) are ordered by a named barrier of the consumer threads.
7. The model's predicted throughput for a realistic problem, next to published FlashAttention figures.
8. The schedules the paper reports, on its graphs of the two loops: FA3's on the Hopper model (two consumer
   groups, each one's exponential under the other's GEMMs, the tensor core busy in every slot) and FA4's
   six roles on the Blackwell model.
9. FA3's structure on the kernel's own plan: ``tvm_twill.kernels.fa_forward_wgmma`` (both GEMMs on Hopper
   wgmma, two consumer warp groups of 64 rows) warp-specialized on sm_90a.  The plan is solved as the
   kernel runs (each group's statements in program order), and finds FA3's ping-pong by itself: two groups
   taking turns on the tensor core beat one, part of each group's exponentials runs under the other group's
   GEMMs, and with FA3's look-ahead (a group's turn issues its S GEMM of iteration k, then its O GEMM of
   k - 1, left in flight until the softmax overwrites P) each group's softmax also starts under its own O
   GEMM; the tensor core's busy fraction is printed for one group, for two with the turn across the back
   edge (O of k with S of k + 1) and for two with the look-ahead.  The kernel is compiled (the turns are
   named barriers in the CUDA, the O GEMM's wait sits after the softmax's max) and emulated against numpy.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

try:
    import tvm_twill  # noqa: F401
except ImportError:  # running from a source checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: Small enough to emulate in seconds: one head, 64 query rows in two CTAs of 32, KV tiles of 16.
SMALL = {"heads": 1, "q_len": 64, "block_m": 32, "block_n": 16}
KV = 2 * SMALL["block_n"] + 5  # three KV tiles, the last one 5 keys long
#: Published forward-pass figures (fp16, head dim 128) to read the model's prediction against.
PUBLISHED = [
    ("FlashAttention-2 on A100 (Dao, 2023, FlashAttention-2 paper, forward pass, head dim 128)", "190-230"),
    ("FlashAttention-3 on H100 (as reported in the Twill paper, Soi et al. 2025)", "645"),
    ("FlashAttention-3 on H100 (Shah et al., 2024, FlashAttention-3 paper, fp16 forward)", "740"),
]


def _inputs(shape, n, seed=0):
    import numpy as np
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((shape.heads, shape.q_len, shape.head_dim)).astype("float16")
    k = rng.standard_normal((shape.heads, n, shape.head_dim)).astype("float16")
    v = rng.standard_normal((shape.heads, n, shape.head_dim)).astype("float16")
    return q, k, v, np.zeros_like(q)


def _emulate(f, shape, label):
    import numpy as np

    from tvm_twill import emulator
    from tvm_twill.kernels import attention_reference
    q, k, v, o = _inputs(shape, KV)
    report = emulator.run(f, q, k, v, o, interleavings=2)
    err = float(np.abs(o.astype(np.float32) - attention_reference(q, k, v, shape.causal)).max())
    print(f"emulated {label}: {report}")
    ctas = shape.heads * shape.q_len // shape.block_m
    print(f"  KV length {KV} (tiles of {shape.block_n}), {ctas} CTA(s), 2 interleavings: max |kernel - numpy| = "
          f"{err:.2g}")
    if not report.ok or err > 2e-2:
        raise SystemExit(f"the {label} kernel disagrees with numpy")


def _cuda_excerpt(src: str, lines: int = 12) -> str:
    """The kernel's first cp.async call sites (TVM wraps each PTX instruction in a helper function)."""
    rows = src.splitlines()
    body = next(i for i, r in enumerate(rows) if "__global__" in r and r.rstrip().endswith("{"))
    start = next(i for i in range(body, len(rows)) if "cp_async" in rows[i])
    return "\n".join(rows[start - 2:start + lines])


def simt(out: Path, plot: bool):
    import tvm

    import tvm_twill
    from tvm_twill.kernels import KV_LOOP, AttentionShape, fa_forward
    from tvm_twill.compiler.sass import print_ptxas_report

    shape = AttentionShape(head_dim=64, causal=True, **SMALL)
    sch = tvm.s_tir.Schedule(fa_forward(shape))
    print(f"== 1. the kernel: {shape}")
    plan = tvm_twill.auto_pipeline(sch, KV_LOOP, "sm_80", quiet=True)
    print("\n== 2. the plan")
    print(plan.explain())
    if plot:
        try:
            print(f"picture: {plan.plot(out / 'attention_plan.png')}")
        except tvm_twill.errors.PlotUnavailableError as e:
            print(f"(no picture: {e})")
    f = tvm_twill.build(sch.mod, "sm_80", plan)
    src = f.mod.imports[0].inspect_source()
    waits = sorted(set(re.findall(r"cp\.async\.wait_group (\d+)", src)))
    sites = len(re.findall(r"^\s+ptx_cp_async\w*\(", src, re.M))
    print(f"\n== 3. the CUDA: {sites} cp.async call sites (16-byte copies of K and V), cp.async.wait_group "
          f"counts {waits}" + ("; an excerpt of the kernel:" if sites else ": the loop is bound by its FMA work on "
                               "the CUDA cores, and the plan keeps the loads synchronous"))
    if sites:
        print(_cuda_excerpt(src))
    print_ptxas_report(src, "sm_80")
    print("\n== 4. the check")
    _emulate(f, shape, "pipelined SIMT attention")


def tensor_cores():
    import tvm

    import tvm_twill
    from tvm_twill.frontend import extract_loop
    from tvm_twill.kernels import KV_LOOP, AttentionShape
    from tvm_twill.kernels.attention_tc import TC_PASS_CONFIG, fa_forward_tc

    shape = AttentionShape(head_dim=64, causal=True, heads=1, q_len=128, block_m=64, block_n=32)
    mod = fa_forward_tc(shape)
    print(f"\n== 5. on tensor cores: {shape}")
    ex = extract_loop(tvm.s_tir.Schedule(mod), KV_LOOP, "sm_80")
    print("statements and units:", ", ".join(f"{op.name} ({op.unit})" for op in ex.graph.ops))
    sch = tvm.s_tir.Schedule(mod)
    plan = tvm_twill.auto_pipeline(sch, KV_LOOP, "sm_80", quiet=True)
    print(f"planned: ii {plan.ii_cycles} cycles, stages {list(plan.annotation.stages)}, async stages "
          f"{list(plan.annotation.async_stages)} ({', '.join(plan.async_copies)} become cp.async)")
    with tvm.transform.PassContext(config=TC_PASS_CONFIG):
        f = tvm_twill.build(sch.mod, "sm_80", plan)
    src = f.mod.imports[0].inspect_source()
    waits = sorted(set(re.findall(r"cp\.async\.wait_group (\d+)", src)))
    print(f"pipelined build ({plan.tir_pipeline} TIR pipeline): {src.count('mma.sync.aligned')} mma.sync and "
          f"{src.count('ldmatrix.sync')} ldmatrix sites, cp.async.wait_group counts {waits} in the CUDA; the "
          "prologue's and epilogue's guards of the symbolic trip count are loops of 0 or 1 trips there "
          f"({len(re.findall(r'for [(]int guard', src))} of them), so their barriers are not under an `if`")
    _emulate(f, shape, "tensor-core attention")


def warp_specialized():
    import tvm

    import tvm_twill
    from tvm_twill.kernels import KV_LOOP, AttentionShape
    from tvm_twill.kernels.attention_tc import TC_PASS_CONFIG, fa_forward_tc
    from tvm_twill.compiler.sass import print_ptxas_report

    shape = AttentionShape(head_dim=64, causal=True, heads=1, q_len=128, block_m=64, block_n=32)
    sch = tvm.s_tir.Schedule(fa_forward_tc(shape))
    print("\n== 6. warp-specialized on tensor cores (sm_80)")
    with tvm.transform.PassContext(config=TC_PASS_CONFIG):
        plan = tvm_twill.auto_pipeline(sch, KV_LOOP, "sm_80", warp_specialize=True, quiet=True, time_limit=60)
        f = tvm_twill.build(sch, "sm_80", plan)
    ws = plan.warp_specialization
    for role, stmts in ws.roles.items():
        print(f"{role}: {', '.join(stmts)}")
    print(f"{ws.facts.consumer_threads} consumer threads, a ring of {ws.ring_depth} slots; consumer groups: "
          f"{ws.groups_note}")
    print(f"protocol model check: {'no violation' if ws.protocol.ok else 'FAILED'} in {ws.protocol.states} states")
    src = f.mod.imports[0].inspect_source()
    rows = [r.strip() for r in src.splitlines()]
    for what in ("ws_full_ptr[(ws_k", "ws_empty_ptr[(ws_k", "bar_sync_count_sync((uint)15"):  # wait, release,
        print(next(r for r in rows if what in r))                                             # named barrier
    print_ptxas_report(src, "sm_80")
    _emulate(f, shape, "warp-specialized tensor-core attention")


def prediction():
    import tvm

    import tvm_twill
    from tvm_twill.kernels import KV_LOOP, AttentionShape
    from tvm_twill.kernels.attention_tc import fa_forward_tc

    shape = AttentionShape(head_dim=128, heads=32, q_len=4096, block_m=64, block_n=32)
    plan = tvm_twill.auto_pipeline(tvm.s_tir.Schedule(fa_forward_tc(shape)), KV_LOOP, "sm_80", quiet=True,
                                   apply=False, time_limit=60)
    p = plan.prediction()
    print(f"\n== 7. predicted throughput ({shape.heads} heads x {shape.q_len} queries, head dim 128, sm_80 / A100)")
    print(p.explain())
    print(f"this kernel, by the model: {p.tflops:.0f} TFLOPS (bound: {p.bound})")
    for what, tflops in PUBLISHED:
        print(f"published: {what}: {tflops} TFLOPS")
    print("(plan.prediction() is the throughput model's figure for the schedule, not a measurement: no GPU ran "
          "this kernel.  It prices each statement's unit time, not the instructions TVM's lowering adds around "
          "them, so read it as a ceiling next to the measured FA2 / FA3 figures above)")


def structures():
    from tvm_twill.data import load_example
    from tvm_twill.solvers import prepare

    import tvm_twill

    print("\n== 8. the FA3 and FA4 structures, on the paper's graphs of the two loops")
    for name in ("fa_fwd_hopper", "fa_fwd_blackwell_fa4"):
        graph = load_example(name)
        sched = tvm_twill.solve(graph, time_limit=60)
        ops = prepare(graph).graph.ops
        named = graph.machine.roles
        roles: dict = {}
        for op in ops:
            roles.setdefault(sched.ops[op.name].warp, []).append(op.name)
        print(f"{name} ({graph.machine.name}): ii {sched.ii}, {len(roles)} roles: " + "; ".join(
            f"{named[w].name if named else f'role {w}'}: {', '.join(names)}" for w, names in sorted(roles.items())))
        busy: dict = {u: {r: [] for r in range(sched.ii)} for u in ("TC", "SFU")}
        for op in ops:
            for j, row in enumerate(op.reservation()):
                for unit, _ in row:
                    if unit in busy:
                        busy[unit][(sched.ops[op.name].time + j) % sched.ii].append(op.name)
        tc = sum(1 for names in busy["TC"].values() if names) / sched.ii
        under = [f"{e} under {'+'.join(busy['TC'][r])}" for r, names in busy["SFU"].items() for e in names
                 if busy["TC"][r]]
        print(f"  the tensor core is busy in {tc:.0%} of the steady state; exponentials under GEMMs: "
              f"{'; '.join(under) or 'none'}")


def fa3_on_the_kernel():
    import tvm

    import tvm_twill
    from tvm_twill.kernels import KV_LOOP, AttentionShape, fa_forward_wgmma
    from tvm_twill.kernels.attention_wgmma import WGMMA_PASS_CONFIG
    from tvm_twill.model import busy_share

    shape = AttentionShape(head_dim=128, causal=True, heads=1, q_len=128, block_m=128, block_n=32)
    sch = tvm.s_tir.Schedule(fa_forward_wgmma(shape))
    print(f"\n== 9. FA3's structure on the kernel's own plan: wgmma attention, {shape}, sm_90a")
    with tvm.transform.PassContext(config=WGMMA_PASS_CONFIG):
        plan = tvm_twill.auto_pipeline(sch, KV_LOOP, "sm_90a", warp_specialize=True, quiet=True, time_limit=60)
        f = tvm_twill.build(sch, "sm_90a", plan)
    ws = plan.warp_specialization
    print(ws.explain())

    def tc_busy(w):   # the tensor core's share of the steady state, on the graph the plan was solved on
        return busy_share(w.schedule, w.solved_graph, "TC")
    if ws.consumer_order is not None:
        plain = ws.no_lookahead or ws
        print(f"tensor core busy in the steady state: {tc_busy(ws):.0%} with two consumer warp groups "
              f"{'and the look-ahead turn ' if ws.lookahead else ''}(ii {ws.ii_ws_cycles} cycles), "
              f"{tc_busy(plain):.0%} with the turn across the back edge (ii {plain.ii_ws_cycles} cycles), "
              f"{tc_busy(ws.one_group):.0%} with one group (ii {ws.one_group.ii_ws_cycles} cycles); "
              "bench/fa3_gap.py sets these next to the same graph with the program order inside each group "
              "dropped, the freedom the paper's FA3 schedule (section 8) has")
    rows = [r.strip() for r in f.mod.imports[0].inspect_source().splitlines()]
    for what in ("bar_sync_count_sync(((uint)((ws_warp >> 2) + 1))", "bar_arrive_arrive(((uint)", "if (1 <= ws_k)"):
        print(next((r for r in rows if what in r), f"(no line with {what!r})"))
    _emulate(f, shape, "warp-specialized wgmma attention (two consumer warp groups)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("twill_pictures"), help="folder for the picture")
    ap.add_argument("--no-plot", action="store_true", help="no picture")
    args = ap.parse_args(argv)
    if not args.no_plot:
        args.out.mkdir(parents=True, exist_ok=True)
    simt(args.out, not args.no_plot)
    tensor_cores()
    warp_specialized()
    prediction()
    structures()
    fa3_on_the_kernel()


if __name__ == "__main__":
    main()
