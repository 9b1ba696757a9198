"""Hypothesis strategies: random loop dependence graphs and small machines."""
from __future__ import annotations

from hypothesis import strategies as st

from tvm_twill.model import Edge, Graph, Machine, Op

UNITS = ("TC", "SFU", "ALU", "TMA")


def machine(warp_groups=2, regs=255):
    return Machine(name=f"test{warp_groups}", units={u: 1 for u in UNITS}, warp_groups=warp_groups,
                   warps_per_group=4, regs_per_thread_max=regs, smem_bytes=1 << 16, tmem_bytes=0,
                   spill_cost=1)


@st.composite
def graphs(draw, min_ops=2, max_ops=6, max_cycles=3, pressure=True, vl=True, blocking=True, spill=True):
    n = draw(st.integers(min_ops, max_ops))
    ops = []
    for i in range(n):
        is_vl = vl and draw(st.booleans()) and draw(st.booleans())
        ops.append(Op(
            name=f"v{i}", cycles=draw(st.integers(0 if is_vl else 1, max_cycles)),
            unit="TMA" if is_vl else draw(st.sampled_from(UNITS[:3])),
            regs=draw(st.sampled_from([0, 32, 64, 128])) if pressure and not is_vl else 0,
            smem=draw(st.sampled_from([0, 16384])) if pressure and is_vl else 0,
            variable_latency=is_vl,
            spill_cost=draw(st.integers(0, 2)) if spill else 0))
    edges = []
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=2 * n))
    for a, b in pairs:
        # distance-0 edges only forward, so no zero-distance cycle
        distance = draw(st.integers(1, 2)) if a >= b else draw(st.integers(0, 1))
        edges.append(Edge(f"v{a}", f"v{b}", delay=draw(st.integers(0, max_cycles)), distance=distance,
                          blocking=blocking and draw(st.booleans()) and draw(st.booleans())))
    return Graph(name="random", ops=tuple(ops), edges=tuple(edges), normalize=False)
