"""What the front-end found in one pipeline statement (``StmtInfo``) and the traffic of its copies
(``CopyTraffic``): the values ``costs.StatementAnalyzer`` fills in and the planner, the throughput model and
``extract`` read.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CopyTraffic:
    """A statement's global->shared copies per iteration, each term of their cost (``costs``, "Copies").

    ``nbytes``: the shared bytes written; ``cycles``: the copy path's cycles, the largest of ``port`` (the
    shared-memory port), ``l2`` / ``dram`` (this CTA's share of L2 and of DRAM for the compulsory bytes,
    ``reuse`` the DRAM reuse of the first wave of ``active`` CTAs) and ``issue`` (the cp.async instructions of
    the block's warps); ``bound``: which of them ("port", "L2", "DRAM", "issue"); ``label``: all of it in words.
    Without chip figures only ``nbytes`` / ``cycles`` (the port) are set.  ``producer``: what a producer warp
    issues when the loop is specialized (instruction kind -> count), ``producer_issue`` its cycles.
    """

    nbytes: float
    cycles: float
    reuse: float = 1.0
    port: float = 0.0
    l2: float = 0.0
    dram: float = 0.0
    issue: float = 0.0
    bound: str = ""
    active: int = 0
    label: str = ""
    producer: dict[str, float] = field(default_factory=dict)
    producer_issue: float = 0.0


@dataclass(frozen=True)
class StmtInfo:
    """What the front-end found in one pipeline statement.

    ``work`` maps unit -> cycles (unquantized) per pipelined-loop iteration;
    ``latency`` is the delay (cycles) of its outgoing edges; ``reads`` /
    ``writes`` are buffer names (TVM's statement-level regions); ``exposed``
    the reads that see a value from before the statement; ``smem_writes``
    bytes of each shared tile written per iteration (with padding);
    ``smem_scopes`` their scopes ("shared": static arrays, "shared.dyn": the dynamic pool);
    ``reg_writes`` registers per thread of each register-scope tile it
    writes (accumulators excluded); ``async_capable``: a plain
    global->shared copy that cp.async can run (4/8/16-byte vectors).

    How the costs came about (not compared): ``kinds`` / ``leaves`` the kinds and names of its leaf sblocks;
    ``flops`` its floating-point operations and ``bounds`` throughput bound -> cycles ("tensor core", "CUDA
    cores", "shared memory", ...) per iteration; ``copy`` the traffic of its copies (None: it copies nothing);
    ``vector_bytes`` the bytes per thread its copies move; ``not_async``: why a plain copy cannot be a
    cp.async as TVM lowers it (a transposing or misaligned vector, ``cp_async``; None: nothing stops it).
    A part of an annotated inner loop (prologue, body, epilogue): ``inner`` the loop's name, ``counts`` the
    runs of each of its statements.
    """

    index: int
    name: str
    kind: str
    work: dict
    latency: float
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    exposed: tuple[str, ...]
    smem_writes: dict = field(default_factory=dict)
    reg_writes: dict = field(default_factory=dict)
    smem_scopes: dict = field(default_factory=dict)
    async_capable: bool = False
    description: str = ""
    kinds: tuple[str, ...] = field(default=(), compare=False)
    leaves: tuple[str, ...] = field(default=(), compare=False)
    flops: float = field(default=0.0, compare=False)
    bounds: dict[str, float] = field(default_factory=dict, compare=False)
    copy: CopyTraffic | None = field(default=None, compare=False)
    vector_bytes: tuple[int, ...] = field(default=(), compare=False)
    not_async: str | None = field(default=None, compare=False)
    inner: str | None = field(default=None, compare=False)
    counts: tuple[int, ...] = field(default=(), compare=False)

    @property
    def smem(self) -> int:
        """Bytes of shared memory written per iteration (all buffers)."""
        return sum(self.smem_writes.values())

    @property
    def units(self) -> tuple[str, ...]:
        return tuple(u for u, c in sorted(self.work.items()) if c > 0)
