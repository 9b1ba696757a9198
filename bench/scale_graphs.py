"""Generated graphs of 10 to 40 ops for the solver's scale benchmark.

Deterministic (no clock, fixed seeds), so the benchmark and the tests see the
same graphs:

* ``copies(g, k)``: k copies of a graph side by side (k sub-tiles of the
  tile, or k heads / CTAs per loop iteration).  Copy c renames op ``X`` to
  ``X_c``; each copy is a 1/k sub-tile, so the registers, shared and tensor
  memory its values hold are divided by k (rounded up), which keeps the
  per-warp register budget of the original graph; cycles are kept.
* ``subtiled(g, k, shared)``: the ops in ``shared`` (the K/V or Q/dO loads)
  stay single and feed k copies of the rest (sub-tiles of the M dimension
  that reuse one load, as in FlashAttention 3/4); the copies' registers and
  memory are divided by k.
* ``random_graph(n, seed)``: n ops with the unit mix of the FlashAttention
  graphs (about 1/5 variable-latency TMA loads, 2/5 TC, 1/5 SFU, 1/5 ALU),
  raw cycle counts in 64..1100, forward edges plus a loop-carried
  accumulation per TC op, registers that fit three warp roles; seeded
  ``random.Random(seed)``.

* ``tight_graph(n, seed)``: ``random_graph`` with three times the
  registers on an H100 with two warp roles (one producer, one consumer):
  register pressure and blocking waits then decide ii, often above the
  resource and recurrence bounds, so the exact search has refutations to
  prove (and some of these graphs have no schedule at all).

``scale_suite()`` is the benchmark's list: (name, family, graph).
"""
from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path

from tvm_twill.model import Edge, Graph, Op, get_machine, load_graph

GRAPHS = Path(__file__).resolve().parents[1] / "tvm_twill" / "data" / "graphs"


def _scaled(op: Op, k: int, name: str) -> Op:
    return replace(op, name=name, regs=math.ceil(op.regs / k), smem=math.ceil(op.smem / k),
                   tmem=math.ceil(op.tmem / k))


def copies(g: Graph, k: int, name: str | None = None) -> Graph:
    """k copies of ``g`` side by side, each a 1/k sub-tile (see the module docstring)."""
    ops = tuple(_scaled(op, k, f"{op.name}_{c}") for c in range(k) for op in g.ops)
    edges = tuple(replace(e, src=f"{e.src}_{c}", dst=f"{e.dst}_{c}") for c in range(k) for e in g.edges)
    return Graph(name or f"{g.name}_x{k}", ops, edges, machine=g.machine, normalize=g.normalize)


def subtiled(g: Graph, k: int, shared: tuple, name: str | None = None) -> Graph:
    """``shared`` ops once, the rest in k sub-tile copies (see the module docstring)."""
    def nm(n, c):
        return n if n in shared else f"{n}_{c}"
    ops = tuple(op for op in g.ops if op.name in shared)
    ops += tuple(_scaled(op, k, nm(op.name, c)) for c in range(k) for op in g.ops if op.name not in shared)
    edges = []
    for c in range(k):
        for e in g.edges:
            if e.src in shared and e.dst in shared:
                if c == 0:
                    edges.append(e)
                continue
            edges.append(replace(e, src=nm(e.src, c), dst=nm(e.dst, c)))
    return Graph(name or f"{g.name}_sub{k}", ops, tuple(edges), machine=g.machine, normalize=g.normalize)


def random_graph(n: int, seed: int, machine: str = "h100") -> Graph:
    """n ops with the FlashAttention unit mix (see the module docstring)."""
    rnd = random.Random(seed)
    n_load = max(1, n // 5)
    kinds = ["TMA"] * n_load + ["TC"] * (2 * n // 5) + ["SFU"] * (n // 5)
    kinds += ["ALU"] * (n - len(kinds))
    body = kinds[n_load:]
    rnd.shuffle(body)
    kinds = kinds[:n_load] + body
    ops = []
    for i, unit in enumerate(kinds):
        if unit == "TMA":
            ops.append(Op(f"load{i}", rnd.choice([256, 512, 533]), "TMA", smem=16384 // max(1, n // 10),
                          variable_latency=True, spill_cost=0))
        else:
            cyc = {"TC": rnd.choice([512, 1024, 1037]), "SFU": rnd.choice([512, 1090]),
                   "ALU": rnd.choice([64, 137, 256])}[unit]
            regs = rnd.choice([0, 16, 32, 64]) // max(1, n // 10)
            ops.append(Op(f"{unit.lower()}{i}", cyc, unit, regs=regs, warps=4,
                          spill_cost=rnd.choice([0, 128, 256, 541])))
    edges = []
    for j in range(n_load, n):
        # one or two producers among the earlier ops (a load feeds at least one op)
        for i in sorted(rnd.sample(range(j), min(j, rnd.choice([1, 1, 2])))):
            edges.append(Edge(ops[i].name, ops[j].name, ops[i].cycles if not ops[i].variable_latency else 0,
                              blocking=ops[i].unit == "TC" and rnd.random() < 0.3))
        if ops[j].unit == "TC" and rnd.random() < 0.5:  # an accumulator
            edges.append(Edge(ops[j].name, ops[j].name, ops[j].cycles, distance=1))
    fed = {e.src for e in edges}
    for i in range(n_load):
        if ops[i].name not in fed:
            edges.append(Edge(ops[i].name, ops[rnd.randrange(n_load, n)].name, 0))
    return Graph(f"random{n}_s{seed}", tuple(ops), tuple(edges), machine=machine, normalize=True)


def tight_graph(n: int, seed: int) -> Graph:
    """``random_graph`` with 3x the registers on a two-role H100 (see the module docstring)."""
    g = random_graph(n, seed)
    m = replace(get_machine("h100"), name="h100_2roles", warp_groups=2)
    return g.replace(name=f"tight{n}_s{seed}", ops=tuple(replace(o, regs=3 * o.regs) for o in g.ops), machine=m)


def scale_suite(sizes=(10, 20, 30, 40)) -> list[tuple[str, str, Graph]]:
    """(name, family, graph) of the scale benchmark, in a fixed order."""
    fwd = load_graph(GRAPHS / "fa_fwd_hopper_measured.json")
    bw = load_graph(GRAPHS / "fa_fwd_blackwell_raw.json")
    bwd = load_graph(GRAPHS / "fa_bwd_raw.json")
    out = []
    for n in sizes:
        k = max(1, n // 10)
        if k == 1:
            out.append((fwd.name, "fa copies", fwd))
            out.append((bw.name, "fa copies", bw))
            out.append((bwd.name, "fa copies", bwd))
        else:
            for g in (fwd, bw):
                c = copies(g, k)
                out.append((c.name, "fa copies", c))
            # FA backward: Q/dO loads shared by k sub-tiles (3 + 8k ops: 19, 27, 35)
            s = subtiled(bwd, k, ("load_Q", "load_dO", "dQ_reduce"))
            out.append((s.name, "fa sub-tiled", s))
            # FA forward, K/V loads shared by k sub-tiles of each head (2 + 8k: 18, 26, 34)
            s = subtiled(fwd, k, ("load_K", "load_V"))
            out.append((s.name, "fa sub-tiled", s))
        r = random_graph(n, seed=n)
        out.append((r.name, "random", r))
        for seed in (1, 2):
            t = tight_graph(n, seed)
            out.append((t.name, "tight", t))
    return out


# -- the generated suite: every bundled graph, 2-4 copies, jittered ----------------------------
#: Machine cycles per unit given to the bundled graphs written in time units (normalize: false),
#: so every generated graph is in machine cycles: 128 puts their 1-4 unit ops at 128-512 cycles,
#: the magnitude of the raw graphs (a 64x128x64 wgmma is about 256 cycles on an H100 SM).
UNIT_CYCLES = 128
JITTER = 0.15           #: each op's cycles times uniform(1 - JITTER, 1 + JITTER)
GENERATED_SEED = 20261125
MAX_OPS = 60


def in_cycles(g: Graph, q: int = UNIT_CYCLES) -> Graph:
    """``g`` in machine cycles: a graph written in time units is scaled by ``q``."""
    if g.normalize:
        return g
    if any(op.rrt is not None for op in g.ops):
        raise ValueError(f"{g.name}: reservation tables are not scaled")
    ops = tuple(replace(op, cycles=op.cycles * q) for op in g.ops)
    edges = tuple(replace(e, delay=e.delay * q) for e in g.edges)
    return g.replace(ops=ops, edges=edges, normalize=True)


def jittered(g: Graph, rnd: random.Random, jitter: float = JITTER) -> Graph:
    """Each op's cycles times its own factor in [1 - jitter, 1 + jitter]; an edge's delay
    follows its source's factor (a delay equal to the source's cycles stays equal)."""
    factor = {op.name: rnd.uniform(1 - jitter, 1 + jitter) for op in g.ops}
    ops = tuple(replace(op, cycles=max(1, round(op.cycles * factor[op.name]))) if op.rrt is None else op
                for op in g.ops)
    new = {op.name: op for op in ops}
    edges = []
    for e in g.edges:
        src = g.op(e.src)
        if e.delay == src.cycles:
            d = new[e.src].cycles
        else:
            d = max(0, round(e.delay * factor[e.src])) if e.delay else 0
        edges.append(replace(e, delay=d))
    return g.replace(ops=ops, edges=tuple(edges))


#: join -> name suffix.  "heads of 2 sub-tiles": k heads, each split in two sub-tiles sharing its loads.
JOINS = {"heads": "x", "sub-tiles": "sub", "heads of 2 sub-tiles": "x2sub_x"}


def _join(base: Graph, join: str, k: int, loads: tuple) -> Graph:
    if join == "heads":
        return copies(base, k)
    if join == "sub-tiles":
        return subtiled(base, k, loads)
    return copies(subtiled(base, 2, loads), k)


def generated_suite(seed: int = GENERATED_SEED, ks=(2, 3, 4), max_ops: int = MAX_OPS):
    """(name, source, join, k, graph) for every bundled graph, k in ``ks``, joined as heads
    (``copies``: k independent copies) and as sub-tiles (``subtiled``: the variable-latency
    loads shared, the rest copied) and as k heads of two sub-tiles each, in machine cycles, jittered; graphs over ``max_ops`` ops are
    left out.  One ``random.Random(seed)`` draws every jitter in this fixed order."""
    rnd = random.Random(seed)
    out = []
    for path in sorted(GRAPHS.glob("*.json")):
        base = in_cycles(load_graph(path))
        loads = tuple(op.name for op in base.ops if op.variable_latency)
        for k in ks:
            for join in JOINS:
                if join != "heads" and not loads:
                    continue
                joined = _join(base, join, k, loads)
                g = jittered(joined, rnd)
                if len(g.ops) > max_ops:
                    continue
                name = f"{path.stem}_{JOINS[join]}{k}"
                out.append((name, path.stem, join, k, g.replace(name=name)))
    return out
