"""How far the warp-specialized wgmma attention is from FA3's schedule, on the Hopper model.

The warp-specialized plan of ``tvm_twill.kernels.fa_forward_wgmma`` (block_m 128: two consumer warp groups)
is solved as the kernel runs it (``model.groups``): each group's statements in program order, and the two
groups taking turns on the tensor core, one turn per iteration (a group's O GEMM of iteration k and its S GEMM
of k + 1, as FA3 groups them).  FA3's schedule (the Twill paper's, section 8) has two more
freedoms: each group pipelines its own softmax under its next GEMM (intra-warpgroup pipelining), and the
groups' GEMMs are not bound to alternate.  This script solves the same split graph, on the same machine,
with those freedoms given back one at a time, and prints the ii and the tensor core's busy share in the
steady state of each:

- one group / two groups: the schedules the kernel compiles to (the planner's own, ``plan.warp_specialization``);
- two groups, S before O in the turn, O's wait deferred (``lookahead``, not compiled): the turn issues the
  S GEMM of iteration k + 1 first and the O GEMM of k after it, left in flight until a statement overwrites
  what it reads (P), so a group's softmax starts under its own O GEMM: the next step for the kernel;
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

KINDS = ("one group (compiled)", "two groups (compiled)", "two groups, S before O in the turn, O's wait deferred",
         "two groups, in-group overlap", "two groups, free")


def _group(name: str):
    return name.rpartition("@")[2] if "@" in name else None


def lookahead(graph, sections, groups: int = 2):
    """The compiled split ``graph`` (turn ``sections[0]`` = the last run of iteration k, then the first run of
    k + 1, retimed into one iteration) as the kernel would run it with the turn's order flipped: the first run
    (S) issued first and waited for, the last run (O, of the previous iteration) issued after it and left in
    flight, the group's next statement starting once O is issued (delay 1), and O waited for only before a
    statement that overwrites what it reads (for each dependence ``x -> O`` of distance d >= 1 between
    consumers: ``O -> x`` of distance d - 1, O's cycles).  The groups' turns go S .. O of group 0, of group
    1, ...  None when the plan's turn does not span the back edge."""
    from tvm_twill.model import Edge

    order = list(dict.fromkeys(n.rpartition("@")[0] for n in graph.names if "@" in n))   # program order
    turn = sections[0] if sections else ()
    first = []                                      # the body's first run (S): the turn's ops the body starts with
    for n in order:
        if n not in turn:
            break
        first.append(n)
    last = [n for n in turn if n not in first]
    if not first or not last or len(order) <= len(first):
        return None
    after = order[len(first)]                       # the statement after the first run (S_store)
    at = lambda n, g: f"{n}@{g}"                    # noqa: E731
    drop = set()
    for g in range(groups):
        drop |= {(at(last[-1], g), at(first[0], g)), (at(first[-1], g), at(after, g))}
    keep = [e for e in graph.edges if not (e.kind == "order" and ((e.src, e.dst) in drop or
                                                                 _group(e.src) != _group(e.dst)))]
    add = []
    for g in range(groups):
        o = at(last[-1], g)
        add += [Edge(at(first[-1], g), at(last[0], g), delay=graph.op(at(first[-1], g)).cycles, kind="order"),
                Edge(o, at(after, g), delay=1, kind="order")]
        add += [Edge(o, e.src, delay=graph.op(o).cycles, distance=e.distance - 1, kind="order")
                for e in graph.edges if e.kind == "data" and e.dst in {at(n, g) for n in last}
                and e.distance >= 1 and _group(e.src) == str(g) and e.src != e.dst]
        nxt = (g + 1) % groups
        add.append(Edge(o, at(first[0], nxt), delay=graph.op(o).cycles, distance=int(nxt == 0), kind="order"))
    return graph.replace(edges=tuple(keep + add))


def rows_for(head_dim: int, block_n: int, time_limit: float) -> list[dict]:
    import tvm

    import tvm_twill
    from tvm_twill.kernels import KV_LOOP, AttentionShape, fa_forward_wgmma
    from tvm_twill.kernels.attention_wgmma import WGMMA_PASS_CONFIG
    from tvm_twill.model import busy_share

    shape = AttentionShape(head_dim=head_dim, causal=True, heads=1, q_len=128, block_m=128, block_n=block_n)
    with tvm.transform.PassContext(config=WGMMA_PASS_CONFIG):
        plan = tvm_twill.auto_pipeline(tvm.s_tir.Schedule(fa_forward_wgmma(shape)), KV_LOOP, "sm_90a",
                                       warp_specialize=True, quiet=True, time_limit=time_limit, apply=False)
    ws = plan.warp_specialization
    if ws is None or ws.consumer_order is None:
        raise SystemExit(f"fa3_gap: head dim {head_dim}: the plan has no two ordered consumer groups "
                         f"({getattr(ws, 'groups_note', 'no warp specialization')})")
    q = ws.ii_ws_cycles // ws.schedule.ii  # cycles per model unit
    one = ws.one_group
    graph, machine = ws.solved_graph, ws.solved_machine
    out = [(KINDS[0], one.schedule, one.solved_graph), (KINDS[1], ws.schedule, graph)]
    keeps = {KINDS[3]: lambda e: not (e.kind == "order" and _group(e.src) == _group(e.dst)),
             KINDS[4]: lambda e: e.kind != "order"}
    relaxed = {KINDS[2]: lookahead(graph, ws.turn_sections)}
    relaxed.update({kind: graph.replace(edges=tuple(e for e in graph.edges if keep(e)))
                    for kind, keep in keeps.items()})
    for kind, g in relaxed.items():
        if g is not None:
            sched = tvm_twill.solve(g, machine, time_limit=time_limit)
            out.append((kind, sched, g))
    return [{"head_dim": head_dim, "block_n": block_n, "schedule": kind, "ii_cycles": s.ii * q,
             "tc_busy": busy_share(s, g, "TC"), "optimal": s.ii_optimal} for kind, s, g in out]


def table(rows: list[dict]) -> str:
    lines = ["| head dim | block_n | schedule | ii (cycles) | tensor core busy | proven optimal |",
             "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {r['head_dim']} | {r['block_n']} | {r['schedule']} | {r['ii_cycles']} | {r['tc_busy']:.0%} | "
              f"{'yes' if r['optimal'] else 'no'} |" for r in rows]
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
                "Model figures, not measurements.  'compiled': the schedules the kernel runs; 'S before O': "
                "the turn's GEMMs issued in the other order, O's wait deferred to the first statement that "
                "overwrites what it reads; 'in-group overlap' and 'free': the same split graph with the program "
                "order inside each group (and then the turns) dropped; the last three the kernel does not "
                "compile to.  'proven optimal' depends on the time "
                "limit and the machine's load (the planner gives the two-group solve at most 10 s), and so may "
                "an ii that is not proven.\n\n")
        (out / "fa3_gap.md").write_text(head + text + "\n")
        print(f"wrote {out / 'fa3_gap.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
