"""How far the warp-specialized wgmma attention is from FA3's schedule, on the Hopper model.

The warp-specialized plan of ``tvm_twill.kernels.fa_forward_wgmma`` (block_m 128: two consumer warp groups)
is solved as the kernel runs it (``model.groups``): each group's statements in program order, and the two
groups taking turns on the tensor core, one turn per iteration.  FA3's schedule (the Twill paper's, section
8) has two more freedoms: each group pipelines its own softmax under its next GEMM (intra-warpgroup
pipelining), and the groups' GEMMs are not bound to alternate.  This script solves the same split graph, on
the same machine, with those freedoms given back one at a time, and prints the ii and the tensor core's busy
share in the steady state of each, and which one the kernel compiles to:

- one group: the plan's fallback without ordered groups (``ws.one_group``);
- two groups, turn across the back edge: a group's O GEMM of iteration k and its S GEMM of k + 1 in one turn
  (``model.groups.rotate_turns``; the plan's fallback when the transform refuses the look-ahead);
- two groups, look-ahead turn (``model.groups.look_ahead``, ``transforms.ws.look_ahead``): the turn issues the S
  GEMM of iteration k first and the O GEMM of k - 1 after it, left in flight until a statement depends on it
  (P overwrites what it reads), so a group's softmax starts under its own O GEMM: what the kernel compiles to
  on a wgmma body;
- two groups, in-group overlap: program order inside a group dropped, the turns kept (not compiled);
- two groups, free: program order and turns dropped, which is the freedom FA3's schedule uses (not compiled).

These are model figures (no GPU runs here).  Only with ``--save`` (or ``--out DIR``) it writes
``fa3_gap.md`` (default folder ``bench/results/``) with the host, the commit and the command line.

    python bench/fa3_gap.py                      # head dims 64 and 128, print only
    python bench/fa3_gap.py --head-dims 128 --save
"""
from __future__ import annotations

import argparse
import platform
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from common import cpu_name, git_commit  # noqa: E402

KINDS = ("one group", "two groups, turn across the back edge", "two groups, look-ahead turn",
         "two groups, in-group overlap", "two groups, free")


def _group(name: str):
    return name.rpartition("@")[2] if "@" in name else None


def rows_for(head_dim: int, block_n: int, time_limit: float) -> list[dict]:
    import tvm

    import tvm_twill
    from tvm_twill.kernels import KV_LOOP, AttentionShape, fa_forward_wgmma
    from tvm_twill.kernels.attention_wgmma import WGMMA_PASS_CONFIG
    from tvm_twill.model import busy_share
    from tvm_twill.model.groups import look_ahead

    shape = AttentionShape(head_dim=head_dim, causal=True, heads=1, q_len=128, block_m=128, block_n=block_n)
    with tvm.transform.PassContext(config=WGMMA_PASS_CONFIG):
        plan = tvm_twill.auto_pipeline(tvm.s_tir.Schedule(fa_forward_wgmma(shape)), KV_LOOP, "sm_90a",
                                       warp_specialize=True, quiet=True, time_limit=time_limit, apply=False)
    ws = plan.warp_specialization
    if ws is None or ws.consumer_order is None:
        raise SystemExit(f"fa3_gap: head dim {head_dim}: the plan has no two ordered consumer groups "
                         f"({getattr(ws, 'groups_note', 'no warp specialization')})")
    q = ws.ii_ws_cycles // ws.schedule.ii  # cycles per model unit
    plain = ws.no_lookahead or ws             # the turn across the back edge
    graph, machine = plain.solved_graph, plain.solved_machine
    out = [(KINDS[0], ws.one_group.schedule, ws.one_group.solved_graph, False),
           (KINDS[1], plain.schedule, graph, not ws.lookahead)]
    if ws.lookahead:
        out.append((KINDS[2], ws.schedule, ws.solved_graph, True))
    keeps = {KINDS[3]: lambda e: not (e.kind == "order" and _group(e.src) == _group(e.dst)),
             KINDS[4]: lambda e: e.kind != "order"}
    relaxed = {} if ws.lookahead else {KINDS[2]: look_ahead(graph, ws.turn_sections, 2)}
    relaxed.update({kind: graph.replace(edges=tuple(e for e in graph.edges if keep(e)))
                    for kind, keep in keeps.items()})
    for kind, g in relaxed.items():
        if g is not None:
            sched = tvm_twill.solve(g, machine, time_limit=time_limit)
            out.append((kind, sched, g, False))
    out.sort(key=lambda row: KINDS.index(row[0]))
    return [{"head_dim": head_dim, "block_n": block_n, "schedule": kind, "compiled": compiled,
             "ii_cycles": s.ii * q, "tc_busy": busy_share(s, g, "TC"), "optimal": s.ii_optimal}
            for kind, s, g, compiled in out]


def table(rows: list[dict]) -> str:
    lines = ["| head dim | block_n | schedule | the kernel's | ii (cycles) | tensor core busy | proven optimal |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {r['head_dim']} | {r['block_n']} | {r['schedule']} | {'yes' if r['compiled'] else 'no'} | "
              f"{r['ii_cycles']} | {r['tc_busy']:.0%} | {'yes' if r['optimal'] else 'no'} |" for r in rows]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--head-dims", type=int, nargs="+", default=[64, 128], choices=[64, 128])
    ap.add_argument("--block-n", type=int, default=32, help="keys per KV tile (default 32)")
    ap.add_argument("--time-limit", type=float, default=60.0, help="seconds per solve (default 60)")
    ap.add_argument("--save", action="store_true", help="write bench/results/fa3_gap.md")
    ap.add_argument("--out", type=Path, help="write fa3_gap.md into this folder instead")
    args = ap.parse_args(argv)
    from tvm_twill.errors import TwillError

    try:
        rows = [r for d in args.head_dims for r in rows_for(d, args.block_n, args.time_limit)]
    except TwillError as e:
        print(f"fa3_gap: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    text = table(rows)
    print(text)
    out = args.out or (ROOT / "bench" / "results" if args.save else None)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        cmd = "python bench/fa3_gap.py " + shlex.join(sys.argv[1:] if argv is None else argv)
        head = (f"# fa3_gap: the warp-specialized wgmma attention against FA3's freedoms, Hopper model (sm_90a)\n\n"
                f"Command: `{cmd.strip()}`  \nHost: {cpu_name()} ({platform.platform()}); commit {git_commit()}\n\n"
                "Model figures, not measurements.  'the kernel's': the schedule the plan compiles to (the "
                "others are its fallbacks or not compiled); 'look-ahead turn': the turn's GEMMs issued S of "
                "iteration k, then O of k - 1 left in flight to the first statement that depends on it; "
                "'in-group overlap' and 'free': the turn across the back edge's split graph with the program "
                "order inside each group (and then the turns) dropped.  'proven optimal' depends on the time "
                "limit and the machine's load (the planner gives the two-group solve at most 10 s), and so may "
                "an ii that is not proven.\n\n")
        (out / "fa3_gap.md").write_text(head + text + "\n")
        print(f"wrote {out / 'fa3_gap.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
