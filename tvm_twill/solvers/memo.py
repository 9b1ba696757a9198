"""Solve once per dependence graph: a bounded, thread-safe memo of solver outcomes.

A tuning run (MetaSchedule's ``TwillPipeline``) meets the same loop again and
again: candidates that differ in tile sizes of other loops, in unroll
annotations or in names extract to the same dependence graph.
``SolveCache.solve(graph, machine, time_limit=...)`` returns what ``solve``
returned (or raises what it raised) the first time it saw that graph.

The key is a canonical serialization of everything ``solve`` reads
(``graph_key``): the graph in ``tvm-twill-graph/1`` form (``model.io``) with
the graph's name dropped and each op named by its position (the solver's
tie-breaks follow graph positions, so positions are part of the problem,
names are not), the machine in full (``machine_to_dict``) and the solve
options (time limit included: a time-limited answer is only reused under the
same limit).  Two graphs that differ in anything else never share an entry.

On a hit for a graph whose names differ from the one solved, the schedule is
renamed position by position (``Schedule.ops`` / ``cycles`` / ``streaming``
follow the op names; the graph name is the caller's); errors (``TwillError``:
infeasible, timed out) are cached too and raised again, saying which graph
they were found on.  One thing is the first graph's: the constraint families
``attempts`` name for each refuted ii come from z3's unsat-core
minimization, which may pick other (equally valid) families for a renamed
graph; the schedule, its ii and which ii were refuted are the same.  Anything else (a bug) is not cached.  ``solve`` is
deterministic for a time limit that is not reached (z3's rlimit bounds the
tie-breaks), so a cached answer is the answer a new solve would give.

Thread safety: one lock guards the table; a key being solved by one thread
makes the others wait for that result instead of solving it again.
Bounded: least-recently-used entries beyond ``maxsize`` are dropped.
"""
from __future__ import annotations

import copy
import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, fields, replace

from ..errors import InputError, TwillError
from ..model import Machine, get_machine, graph_to_dict, machine_to_dict

__all__ = ["LRU", "SolveCache", "graph_key"]

#: Default number of entries of a cache.
DEFAULT_MAXSIZE = 512


class LRU:
    """A bounded least-recently-used table of computed values and ``TwillError`` outcomes.

    ``get_or_compute(key, compute)`` returns ``(value, hit)``: the stored value
    (or raises a copy of the stored TwillError), else runs ``compute()`` once
    per key even when several threads ask at the same time.  ``hits`` /
    ``misses`` count lookups (a miss is one call of ``compute``).
    """

    def __init__(self, maxsize: int = DEFAULT_MAXSIZE):
        if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1:
            raise InputError(f"a cache needs maxsize >= 1 (entries), got {maxsize!r}")
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self._data: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self._inflight: dict = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.hits = self.misses = 0

    def get_or_compute(self, key, compute):
        while True:
            with self._lock:
                if key in self._data:
                    self._data.move_to_end(key)
                    self.hits += 1
                    return _unwrap(self._data[key]), True
                waiting = self._inflight.get(key)
                if waiting is None:
                    self._inflight[key] = threading.Event()
                    self.misses += 1
                    break
            waiting.wait()  # another thread is computing this key; then look again
        try:
            try:
                entry = ("value", compute())
            except TwillError as err:
                entry = ("error", err)
            with self._lock:
                self._data[key] = entry
                self._data.move_to_end(key)
                while len(self._data) > self.maxsize:
                    self._data.popitem(last=False)
        finally:
            with self._lock:
                self._inflight.pop(key).set()
        return _unwrap(entry), False


def _unwrap(entry):
    kind, value = entry
    if kind == "error":
        raise copy.copy(value).with_traceback(None)
    return value


def graph_key(graph, machine: Machine, options) -> str:
    """The canonical key of a solve: sha256 of the graph (ops by position, no graph name), the machine
    and the options (every field of ``SolveOptions`` but the progress callback)."""
    doc = graph_to_dict(graph)
    pos = {op["name"]: i for i, op in enumerate(doc["ops"])}
    for op in doc["ops"]:
        op["name"] = pos[op["name"]]
    for e in doc["edges"]:
        e["src"], e["dst"] = pos[e["src"]], pos[e["dst"]]
    doc.pop("name")
    doc["machine"] = machine_to_dict(machine)
    doc["options"] = {f.name: getattr(options, f.name) for f in fields(options) if f.name != "progress"}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class _Solved:
    graph: str
    names: tuple
    schedule: object


class SolveCache:
    """``solve`` with a memo: each distinct (graph, machine, options) is solved once per cache.

    ``solves`` counts the solver calls (misses), ``hits`` the answers reused.
    """

    def __init__(self, maxsize: int = DEFAULT_MAXSIZE):
        self._table = LRU(maxsize)

    @property
    def hits(self) -> int:
        return self._table.hits

    @property
    def solves(self) -> int:
        return self._table.misses

    def __len__(self) -> int:
        return len(self._table)

    def clear(self) -> None:
        self._table.clear()

    def solve(self, graph, machine=None, *, time_limit: float | None = None, options=None, solver=None):
        """Like ``solvers.solve(graph, machine, time_limit=..., options=...)``, reusing earlier answers;
        ``solver`` (``solve``'s signature) answers a miss instead, e.g. with a solve run in another process."""
        from .search import SolveOptions, solve  # the solver (z3) only on a miss

        opts = options or SolveOptions()
        if time_limit is not None:
            opts = replace(opts, time_limit=time_limit)
        m = get_machine(machine if machine is not None else (graph.machine or "h100"))
        names = tuple(graph.names)

        def compute():
            try:
                return _Solved(graph.name, names, (solver or solve)(graph, m, options=opts))
            except TwillError as err:
                err.solved_graph = (graph.name, names)  # to say where a reused error was found
                raise

        try:
            solved, _ = self._table.get_or_compute(graph_key(graph, m, opts), compute)
        except TwillError as err:
            first, first_names = getattr(err, "solved_graph", (graph.name, names))
            if (first, first_names) != (graph.name, names):
                err.args = (f"graph '{graph.name}' has the dependence graph of '{first}' (ops by position), "
                            f"solved earlier: {err}",) + err.args[1:]
            raise err from None
        return _renamed(solved, graph.name, names)


def _renamed(solved: _Solved, name: str, names: tuple):
    """The cached schedule for a graph called ``name`` whose ops are ``names`` (same positions)."""
    s = solved.schedule
    if names == solved.names:
        return s if s.graph == name else replace(s, graph=name,
                                                 alternatives=tuple(replace(a, graph=name) for a in s.alternatives))
    return _rename(s, name, dict(zip(solved.names, names)))


def _rename(s, name: str, to: dict):
    """``s`` (and its alternatives) for graph ``name``, its ops renamed by ``to``."""
    streaming = None if s.streaming is None else {**s.streaming, "ops": [to[n] for n in s.streaming["ops"]]}
    return replace(s, graph=name, ops={to[n]: p for n, p in s.ops.items()},
                   cycles={to[n]: c for n, c in s.cycles.items()}, streaming=streaming,
                   alternatives=tuple(_rename(a, name, to) for a in s.alternatives))
