"""Tile-level loop dependence graph: ops with reservation tables, and edges.

Pure Python: no TVM, no solver.  Values are frozen dataclasses; ``Graph``
checks its own structure on construction (``validate``) and against a machine
with ``validate_for``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..errors import GraphError

#: The largest integer any field may hold (cycles, delays, distances, registers,
#: bytes, ii, times ...): 2**31 - 1.  Nothing in a GPU loop comes near it, and
#: refusing more keeps every computation on these numbers cheap.
MAX_INT = 2**31 - 1


def show_int(v: int) -> str:
    """``v`` for a message: digits when short, else its size (str() of a huge int may fail)."""
    if -10**30 < v < 10**30:
        return str(v)
    return f"an integer of {abs(v).bit_length()} bits"


_BAD_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def bad_char(text: str) -> str | None:
    """The first control character or lone surrogate in ``text`` (None: clean).

    Names may hold any printable Unicode; a NUL, a newline or an unpaired
    surrogate would corrupt listings, annotations and files."""
    m = _BAD_CHARS.search(text)
    return m.group() if m else None


def check_name(text, what: str, error=GraphError) -> None:
    """Raise ``error`` unless ``text`` is a non-empty string without control characters."""
    if not isinstance(text, str) or not text:
        raise error(f"{what} must be a non-empty string, got {text!r}")
    ch = bad_char(text)
    if ch is not None:
        raise error(f"{what} {ascii(text)[:80]} contains the control character {ascii(ch)}: "
                    "names may hold any printable text, not control characters")

#: A reservation-table row: ((unit, instances), ...) sorted by unit name.
RRTRow = tuple[tuple[str, int], ...]


def _row(mapping: Mapping[str, int]) -> RRTRow:
    return tuple(sorted((str(k), int(v)) for k, v in mapping.items() if int(v) != 0))


@dataclass(frozen=True)
class Op:
    """One tile-level instruction of the loop body.

    ``cycles`` is its execution time; it occupies one instance of ``unit`` per
    cycle unless an explicit reservation table ``rrt`` (one row per cycle, each
    a map unit -> instances) says otherwise.  ``regs``/``smem``/``tmem`` are
    what its result holds while live; ``warps`` how many warps issue it
    together; ``spill_cost`` (None: the machine's) the cycles to hand its
    result to another warp through shared memory.
    """

    name: str
    cycles: int
    unit: str = "ALU"
    rrt: tuple[RRTRow, ...] | None = None
    regs: int = 0
    smem: int = 0
    tmem: int = 0
    variable_latency: bool = False
    warps: int = 1
    spill_cost: int | None = None
    #: Useful floating-point operations of one instance (optional; only the throughput prediction
    #: reads it: TFLOPS = flops per iteration / cycles per iteration).
    flops: int = 0

    def __post_init__(self):
        if self.rrt is not None:
            object.__setattr__(self, "rrt", tuple(_row(r) if isinstance(r, Mapping) else tuple(r)
                                                  for r in self.rrt))

    def reservation(self) -> tuple[RRTRow, ...]:
        """The reservation table, one row per cycle (explicit or from ``unit``).

        This allocates one row per cycle: the model layer itself uses
        ``reservation_runs`` (cost independent of ``cycles``)."""
        if self.rrt is not None:
            return self.rrt
        return tuple(((self.unit, 1),) for _ in range(self.cycles))

    def reservation_runs(self) -> tuple[tuple[int, int, RRTRow], ...]:
        """The reservation table run-length encoded: ``(offset, length, row)``
        for each maximal run of equal rows (empty rows left out).  An op without
        ``rrt`` is one run ``(0, cycles, ((unit, 1),))``."""
        if self.rrt is None:
            return ((0, self.cycles, ((self.unit, 1),)),) if self.cycles else ()
        runs = []
        for j, row in enumerate(self.rrt):
            if runs and runs[-1][2] == row and runs[-1][0] + runs[-1][1] == j:
                runs[-1][1] += 1
            elif row:
                runs.append([j, 1, row])
        return tuple((a, b, r) for a, b, r in runs)

    def units(self) -> set[str]:
        if self.rrt is None:
            return {self.unit}
        return {u for row in self.rrt for u, _ in row}

    def usage(self, unit: str) -> int:
        """Total unit-cycles of ``unit`` this op reserves."""
        if self.rrt is None:
            return self.cycles if unit == self.unit else 0
        return sum(n for row in self.rrt for u, n in row if u == unit)


@dataclass(frozen=True)
class Edge:
    """Dependence ``dst`` issues at least ``delay`` cycles after ``src`` of
    ``distance`` iterations earlier.  ``blocking``: ``dst`` waits synchronously
    for the value (wgmma.wait, a tensor-memory load).

    ``kind`` (in memory only, not part of the JSON format, ignored by
    equality): ``"data"``, ``dst`` reads what ``src`` produced; ``"order"``,
    no value flows but the order must be kept (a write-after-read or
    write-after-write hazard the TVM front-end found).  Scheduling treats
    both alike; only the TVM transforms look at it (an async copy is never
    the source of an order edge: nothing would wait for it).
    """

    src: str
    dst: str
    delay: int
    distance: int = 0
    blocking: bool = False
    kind: str = field(default="data", compare=False)


@dataclass(frozen=True)
class Graph:
    """A loop dependence graph G = (V, E) (section 3.1 of the Twill paper)."""

    name: str
    ops: tuple[Op, ...]
    edges: tuple[Edge, ...] = ()
    machine: object = None  # a built-in machine name, a Machine, or None
    normalize: bool = True
    #: Machine cycles per time unit of ``cycles`` and ``delay`` (1: they are machine cycles; the TVM front-end's
    #: graphs count in units of its quantum, e.g. 16 cycles).
    cycles_per_unit: int = 1
    #: Thread blocks (CTAs) of the problem, one loop each; 0: not stated.  Read only by the throughput
    #: prediction, which spreads them over the SMs in waves (docs/machines.md, "Throughput model").
    ctas: int = 0
    _index: dict = field(default=None, init=False, repr=False, compare=False, hash=False)
    _out: dict = field(default=None, init=False, repr=False, compare=False, hash=False)
    _in: dict = field(default=None, init=False, repr=False, compare=False, hash=False)

    def __post_init__(self):
        object.__setattr__(self, "ops", tuple(self.ops))
        object.__setattr__(self, "edges", tuple(self.edges))
        self.validate()
        object.__setattr__(self, "_index", {op.name: i for i, op in enumerate(self.ops)})
        out: dict = {op.name: [] for op in self.ops}
        inc: dict = {op.name: [] for op in self.ops}
        for e in self.edges:
            out[e.src].append(e)
            inc[e.dst].append(e)
        object.__setattr__(self, "_out", out)
        object.__setattr__(self, "_in", inc)

    # -- lookups ---------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return [op.name for op in self.ops]

    def op(self, name: str) -> Op:
        return self.ops[self._index[name]]

    def index(self, name: str) -> int:
        return self._index[name]

    def out_edges(self, name: str) -> list[Edge]:
        return list(self._out[name])

    def in_edges(self, name: str) -> list[Edge]:
        return list(self._in[name])

    def replace(self, **changes) -> "Graph":
        kw = dict(name=self.name, ops=self.ops, edges=self.edges, machine=self.machine,
                  normalize=self.normalize, cycles_per_unit=self.cycles_per_unit, ctas=self.ctas)
        kw.update(changes)
        return Graph(**kw)

    # -- validation ------------------------------------------------------
    def validate(self) -> None:
        """Raise GraphError (one line) on the first structural problem."""
        check_name(self.name, "graph name")
        q = self.cycles_per_unit
        if isinstance(q, bool) or not isinstance(q, int) or q < 1:
            raise GraphError(f"graph '{self.name}': cycles_per_unit must be an integer >= 1, got {q!r}")
        if isinstance(self.ctas, bool) or not isinstance(self.ctas, int) or self.ctas < 0:
            raise GraphError(f"graph '{self.name}': ctas must be an integer >= 0 (0: not stated), got {self.ctas!r}")
        if not self.ops:
            raise GraphError(f"graph '{self.name}' has no ops: a loop body needs at least one op")
        seen: set[str] = set()
        for op in self.ops:
            _check_op(op)
            if op.name in seen:
                raise GraphError(f"duplicate op name '{op.name}': op names must be unique")
            seen.add(op.name)
        for e in self.edges:
            for end in (e.src, e.dst):
                if end not in seen:
                    raise GraphError(f"edge {e.src}->{e.dst} names unknown op '{end}': "
                                     "every edge end must be an op of the graph")
            _nonneg_int(e.delay, f"edge {e.src}->{e.dst} delay")
            _nonneg_int(e.distance, f"edge {e.src}->{e.dst} distance")
            if not isinstance(e.blocking, bool):
                raise GraphError(f"edge {e.src}->{e.dst} blocking must be true or false")
            if e.kind not in ("data", "order"):
                raise GraphError(f"edge {e.src}->{e.dst} kind must be 'data' or 'order', got {e.kind!r}")
        cyc = zero_distance_cycle(self.names, self.edges)
        if cyc:
            raise GraphError("zero-distance dependence cycle " + " -> ".join(cyc + [cyc[0]])
                             + ": a value cannot depend on itself in the same iteration; "
                               "give one edge of the cycle distance >= 1")

    def validate_for(self, machine) -> None:
        """Check the graph against a machine: known units, warps that fit."""
        for op in self.ops:
            for u in sorted(op.units()):
                if u not in machine.units:
                    raise GraphError(f"op '{op.name}' uses unit '{u}', which machine "
                                     f"'{machine.name}' does not have (units: "
                                     f"{', '.join(sorted(machine.units))})")
            if op.warps > machine.warp_groups * machine.warps_per_group:
                raise GraphError(f"op '{op.name}' needs {op.warps} warps but machine "
                                 f"'{machine.name}' has {machine.warp_groups * machine.warps_per_group}")
            if op.tmem and not machine.tmem_bytes:
                raise GraphError(f"op '{op.name}' holds tensor memory but machine "
                                 f"'{machine.name}' has none: use a Blackwell machine (b200) or tmem 0")


def _nonneg_int(v, what: str) -> None:
    if isinstance(v, bool) or not isinstance(v, int):
        raise GraphError(f"{what} must be an integer, got {v!r}"[:300])
    if v > MAX_INT:
        raise GraphError(f"{what} is {show_int(v)}, beyond what any GPU loop has (at most {MAX_INT})")
    if v < 0:
        raise GraphError(f"{what} must be >= 0, got {show_int(v)}")


def _check_op(op: Op) -> None:
    check_name(op.name, "op name")
    _nonneg_int(op.cycles, f"op '{op.name}' cycles")
    for f in ("regs", "smem", "tmem", "flops"):
        _nonneg_int(getattr(op, f), f"op '{op.name}' {f}")
    _nonneg_int(op.warps, f"op '{op.name}' warps")
    if op.warps < 1:
        raise GraphError(f"op '{op.name}' warps must be an integer >= 1, got {op.warps!r}")
    if op.spill_cost is not None:
        _nonneg_int(op.spill_cost, f"op '{op.name}' spill_cost")
    if not isinstance(op.variable_latency, bool):
        raise GraphError(f"op '{op.name}' variable_latency must be true or false")
    check_name(op.unit, f"op '{op.name}' unit")
    if op.rrt is not None:
        if len(op.rrt) != op.cycles:
            raise GraphError(f"op '{op.name}' rrt has {len(op.rrt)} rows but cycles is "
                             f"{op.cycles}: give one row per cycle")
        for row in op.rrt:
            for u, n in row:
                check_name(u, f"op '{op.name}' rrt unit")
                _nonneg_int(n, f"op '{op.name}' rrt entry for unit '{u}'")


def zero_distance_cycle(names: Iterable[str], edges: Iterable[Edge]) -> list[str] | None:
    """A cycle made of distance-0 edges, or None (iterative DFS)."""
    adj: dict[str, list[str]] = {n: [] for n in names}
    for e in edges:
        if e.distance == 0:
            adj[e.src].append(e.dst)
    color = {n: 0 for n in adj}
    for root in adj:
        if color[root]:
            continue
        stack = [(root, iter(adj[root]))]
        path = [root]
        color[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                color[node] = 2
                stack.pop()
                path.pop()
            elif color[nxt] == 1:
                return path[path.index(nxt):]
            elif color[nxt] == 0:
                color[nxt] = 1
                stack.append((nxt, iter(adj[nxt])))
                path.append(nxt)
    return None
