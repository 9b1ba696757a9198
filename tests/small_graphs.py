"""Small hand-written graphs shared by the model and transform tests."""
from tvm_twill.model import Edge, Graph, Op


def fa_loop() -> Graph:
    """One tile of FA forward with a K/V producer: S = QK^T (TC), P = exp (SFU, waits on S), O += PV (TC)."""
    ops = (Op("load_K", 4, "TMA", variable_latency=True), Op("load_V", 4, "TMA", variable_latency=True),
           Op("S", 16, "TC", regs=64), Op("P", 16, "SFU", regs=32), Op("O", 16, "TC", regs=128))
    edges = (Edge("load_K", "S", 4), Edge("load_V", "O", 4), Edge("S", "P", 8, blocking=True),
             Edge("P", "O", 8), Edge("O", "O", 8, 1))
    return Graph("fa_tile", ops, edges, machine="h100", normalize=False)  # cycles in 64-cycle quanta
