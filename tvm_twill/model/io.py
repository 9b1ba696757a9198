"""Read and write the JSON formats of docs/formats.md, strictly.

Unknown keys, wrong types, wrong format versions and truncated files raise
``FormatError`` with one line naming the field; structural rules are then
checked by ``Graph`` and ``Machine`` themselves.  Files are read as UTF-8
and refused, with one line, when hostile rather than merely wrong (the
"Limits" of docs/formats.md): duplicate keys, NaN/Infinity, integers beyond
2**31-1, nesting deeper than any format needs, control characters or lone
surrogates in strings, files over ``MAX_FILE_BYTES``.  Schedules may hold
times, stages, ii and lengths up to ``MAX_SCHEDULE_INT`` (sums of graph
integers).
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

from ..errors import FormatError, GraphError, MachineError
from .canonical import MAX_TOP_K
from .graph import MAX_INT, Edge, Graph, Op, bad_char, show_int
from .machine import MACHINE_FORMAT, Machine, WarpRole, get_machine
from .schedule import SCHEDULE_FORMAT, Attempt, LowerBound, Placement, Schedule

GRAPH_FORMAT = "tvm-twill-graph/1"

_OP_KEYS = {"name", "cycles", "unit", "rrt", "regs", "smem", "tmem", "variable_latency", "warps", "spill_cost",
            "flops"}
_EDGE_KEYS = {"src", "dst", "delay", "distance", "blocking"}
_GRAPH_KEYS = {"format", "name", "machine", "normalize", "cycles_per_unit", "ctas", "ops", "edges"}
_MACHINE_KEYS = {"format", "name", "units", "warp_groups", "warps_per_group", "regs_per_thread_max",
                 "regs_per_sm", "smem_bytes", "tmem_bytes", "spill_cost", "roles"}
_ROLE_KEYS = {"name", "warps", "regs", "streams", "in_loop"}


def _where(ctx: str) -> str:
    return f"{ctx}: " if ctx else ""


def _obj(x, what: str, keys: set, required: set, ctx: str) -> dict:
    if not isinstance(x, dict):
        raise FormatError(f"{_where(ctx)}{what} must be a JSON object, got {type(x).__name__}")
    unknown = sorted(set(x) - keys)
    if unknown:
        raise FormatError(f"{_where(ctx)}{what} has unknown field '{unknown[0]}' "
                          f"(allowed: {', '.join(sorted(keys))})")
    missing = sorted(required - set(x))
    if missing:
        raise FormatError(f"{_where(ctx)}{what} is missing required field '{missing[0]}'")
    return x


def _show(x) -> str:
    """A JSON value for a one-line message, kept short."""
    if isinstance(x, int) and not isinstance(x, bool):
        return show_int(x)
    try:
        text = json.dumps(x)
    except (TypeError, ValueError):
        text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


#: Schedule times, stages, ii and lengths are sums of graph integers (at most
#: MAX_INT each), so they may exceed MAX_INT; they stay exact in every JSON reader
#: (a double holds integers up to 2**53 exactly).
MAX_SCHEDULE_INT = 2**53


def _int(x, what: str, ctx: str, limit: int = MAX_INT) -> int:
    if isinstance(x, bool) or not isinstance(x, int):
        raise FormatError(f"{_where(ctx)}{what} must be an integer, got {_show(x)}")
    if not -limit <= x <= limit:
        raise FormatError(f"{_where(ctx)}{what} is {show_int(x)}, beyond what any GPU loop has "
                          f"(integers are at most {limit})")
    return x


def _time_int(x, what: str, ctx: str) -> int:
    """A schedule's time, stage, ii or length: at most MAX_SCHEDULE_INT."""
    return _int(x, what, ctx, MAX_SCHEDULE_INT)


def _num(x, what: str, ctx: str) -> float:
    """A finite number >= 0 (seconds, ratios)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or \
            (isinstance(x, float) and not math.isfinite(x)) or x < 0 or x > 1e15:
        raise FormatError(f"{_where(ctx)}{what} must be a number >= 0, got {_show(x)}")
    return float(x)


def _opt_str(x, what: str, ctx: str):
    return None if x is None else _str(x, what, ctx)


def _list(x, what: str, ctx: str) -> list:
    if not isinstance(x, list):
        raise FormatError(f"{_where(ctx)}{what} must be a list, got {_show(x)}")
    return x


def _bool(x, what: str, ctx: str) -> bool:
    if not isinstance(x, bool):
        raise FormatError(f"{_where(ctx)}{what} must be true or false, got {_show(x)}")
    return x


def _str(x, what: str, ctx: str) -> str:
    if not isinstance(x, str) or not x:
        raise FormatError(f"{_where(ctx)}{what} must be a non-empty string, got {_show(x)}")
    ch = bad_char(x)
    if ch is not None:
        raise FormatError(f"{_where(ctx)}{what} {ascii(x)[:60]} contains the control character {ascii(ch)}: "
                          "names may hold any printable text, not control characters")
    return x


def _format(doc: dict, expected: str, ctx: str, required: bool = True) -> None:
    fmt = doc.get("format")
    if fmt is None and not required:
        return
    if fmt != expected:
        raise FormatError(f"{_where(ctx)}format is {_show(fmt)}, expected \"{expected}\" "
                          "(this tvm_twill reads version 1 only)")


# -- machine ---------------------------------------------------------------
def machine_from_dict(doc, ctx: str = "", inline: bool = False) -> Machine:
    d = _obj(doc, "machine", _MACHINE_KEYS, {"name", "units"}, ctx)
    _format(d, MACHINE_FORMAT, ctx, required=not inline)
    units = d["units"]
    if not isinstance(units, dict) or not units:
        raise FormatError(f"{_where(ctx)}machine units must be a non-empty object unit -> capacity")
    kw = {"name": _str(d["name"], "machine name", ctx),
          "units": {_str(u, "unit name", ctx): _int(c, f"capacity of unit '{u}'", ctx) for u, c in units.items()}}
    for k in _MACHINE_KEYS - {"format", "name", "units", "roles"}:
        if k in d:
            kw[k] = _int(d[k], f"machine {k}", ctx)
    if "roles" in d:
        kw["roles"] = _roles_from_list(d["roles"], ctx)
    try:
        return Machine(**kw)
    except MachineError as e:
        raise MachineError(f"{_where(ctx)}{e}") from None


def _roles_from_list(roles, ctx: str) -> tuple:
    """Named warp roles (``WarpRole``) from their JSON list."""
    if not isinstance(roles, list):
        raise FormatError(f"{_where(ctx)}machine roles must be a list of objects (name, warps, regs)")
    out = []
    for i, r in enumerate(roles):
        r = _obj(r, f"roles[{i}]", _ROLE_KEYS, {"name", "warps", "regs"}, ctx)
        out.append(WarpRole(_str(r["name"], f"roles[{i}] name", ctx), _int(r["warps"], f"roles[{i}] warps", ctx),
                            _int(r["regs"], f"roles[{i}] regs", ctx),
                            _bool(r.get("streams", False), f"roles[{i}] streams", ctx),
                            _bool(r.get("in_loop", True), f"roles[{i}] in_loop", ctx)))
    return tuple(out)


def machine_to_dict(m: Machine) -> dict:
    d = {"format": MACHINE_FORMAT, "name": m.name, "units": dict(m.units),
         "warp_groups": m.warp_groups, "warps_per_group": m.warps_per_group,
         "regs_per_thread_max": m.regs_per_thread_max, "regs_per_sm": m.regs_per_sm,
         "smem_bytes": m.smem_bytes, "tmem_bytes": m.tmem_bytes, "spill_cost": m.spill_cost}
    if m.roles:
        d["roles"] = [{"name": r.name, "warps": r.warps, "regs": r.regs, "streams": r.streams, "in_loop": r.in_loop}
                      for r in m.roles]
    return d


# -- graph -----------------------------------------------------------------
def _op_from_dict(d, i: int, ctx: str) -> Op:
    d = _obj(d, f"ops[{i}]", _OP_KEYS, {"name", "cycles"}, ctx)
    name = _str(d["name"], f"ops[{i}] name", ctx)
    where = f"op '{name}'"
    kw = {"name": name, "cycles": _int(d["cycles"], f"{where} cycles", ctx)}
    if "unit" in d:
        kw["unit"] = _str(d["unit"], f"{where} unit", ctx)
    for k in ("regs", "smem", "tmem", "warps", "flops"):
        if k in d:
            kw[k] = _int(d[k], f"{where} {k}", ctx)
    if "spill_cost" in d:
        kw["spill_cost"] = _int(d["spill_cost"], f"{where} spill_cost", ctx)
    if "variable_latency" in d:
        kw["variable_latency"] = _bool(d["variable_latency"], f"{where} variable_latency", ctx)
    if "rrt" in d:
        rrt = d["rrt"]
        if not isinstance(rrt, list):
            raise FormatError(f"{_where(ctx)}{where} rrt must be a list of objects unit -> instances")
        if len(rrt) > MAX_RRT_ROWS:
            raise FormatError(f"{_where(ctx)}{where} rrt has {len(rrt)} rows, more than {MAX_RRT_ROWS}: a table "
                              "lists one row per cycle; describe a longer op by unit and cycles")
        rows = []
        for j, row in enumerate(rrt):
            if not isinstance(row, dict):
                raise FormatError(f"{_where(ctx)}{where} rrt[{j}] must be an object unit -> instances")
            rows.append({_str(u, "unit name", ctx): _int(n, f"{where} rrt[{j}]['{u}']", ctx) for u, n in row.items()})
        kw["rrt"] = rows
    return Op(**kw)


def graph_from_dict(doc, ctx: str = "") -> Graph:
    """A Graph from a ``tvm-twill-graph/1`` object (delays default to the source's cycles)."""
    d = _obj(doc, "graph", _GRAPH_KEYS, {"format", "name", "ops"}, ctx)
    _format(d, GRAPH_FORMAT, ctx)
    name = _str(d["name"], "graph name", ctx)
    if not isinstance(d["ops"], list):
        raise FormatError(f"{_where(ctx)}ops must be a list")
    ops = [_op_from_dict(o, i, ctx) for i, o in enumerate(d["ops"])]
    cycles = {}
    for op in ops:
        if op.name in cycles:
            raise GraphError(f"{_where(ctx)}duplicate op name '{op.name}': op names must be unique")
        cycles[op.name] = op.cycles
    edges_doc = d.get("edges", [])
    if not isinstance(edges_doc, list):
        raise FormatError(f"{_where(ctx)}edges must be a list")
    edges = []
    for i, e in enumerate(edges_doc):
        e = _obj(e, f"edges[{i}]", _EDGE_KEYS, {"src", "dst"}, ctx)
        src, dst = _str(e["src"], f"edges[{i}] src", ctx), _str(e["dst"], f"edges[{i}] dst", ctx)
        for end in (src, dst):
            if end not in cycles:
                raise GraphError(f"{_where(ctx)}edge {src}->{dst} names unknown op '{end}': "
                                 "every edge end must be an op of the graph")
        where = f"edge {src}->{dst}"
        edges.append(Edge(src=src, dst=dst,
                          delay=_int(e.get("delay", cycles[src]), f"{where} delay", ctx),
                          distance=_int(e.get("distance", 0), f"{where} distance", ctx),
                          blocking=_bool(e.get("blocking", False), f"{where} blocking", ctx)))
    machine = d.get("machine")
    if isinstance(machine, dict):
        machine = machine_from_dict(machine, ctx, inline=True)
    elif machine is not None:
        try:
            machine = get_machine(_str(machine, "graph machine", ctx))
        except MachineError as err:
            raise MachineError(f"{_where(ctx)}{err}") from None
    normalize = _bool(d.get("normalize", True), "normalize", ctx)
    per_unit = _int(d.get("cycles_per_unit", 1), "cycles_per_unit", ctx)
    if per_unit < 1:
        raise FormatError(f"{_where(ctx)}cycles_per_unit must be an integer >= 1, got {per_unit}")
    ctas = _int(d.get("ctas", 0), "ctas", ctx)
    if "ctas" in d and ctas < 1:
        raise FormatError(f"{_where(ctx)}ctas must be an integer >= 1 (the problem's thread blocks), got {ctas}")
    try:
        return Graph(name=name, ops=tuple(ops), edges=tuple(edges), machine=machine, normalize=normalize,
                     cycles_per_unit=per_unit, ctas=ctas)
    except GraphError as err:
        raise GraphError(f"{_where(ctx)}{err}") from None


def graph_to_dict(g: Graph) -> dict:
    ops = []
    for op in g.ops:
        o = {"name": op.name, "cycles": op.cycles}
        if op.rrt is not None:
            o["rrt"] = [dict(row) for row in op.rrt]
        else:
            o["unit"] = op.unit
        for k in ("regs", "smem", "tmem", "flops"):
            if getattr(op, k):
                o[k] = getattr(op, k)
        if op.variable_latency:
            o["variable_latency"] = True
        if op.warps != 1:
            o["warps"] = op.warps
        if op.spill_cost is not None:
            o["spill_cost"] = op.spill_cost
        ops.append(o)
    edges = []
    for e in g.edges:
        ed = {"src": e.src, "dst": e.dst, "delay": e.delay, "distance": e.distance}
        if e.blocking:
            ed["blocking"] = True
        edges.append(ed)
    doc = {"format": GRAPH_FORMAT, "name": g.name}
    if isinstance(g.machine, Machine):
        doc["machine"] = g.machine.name if g.machine.name in _builtin_names() and \
            get_machine(g.machine.name) == g.machine else machine_to_dict(g.machine)
    elif g.machine is not None:
        doc["machine"] = str(g.machine)
    doc["normalize"] = g.normalize
    if g.cycles_per_unit != 1:  # the time unit of cycles and delays: without it they read as machine cycles
        doc["cycles_per_unit"] = g.cycles_per_unit
    if g.ctas:
        doc["ctas"] = g.ctas
    doc["ops"] = ops
    doc["edges"] = edges
    return doc


def _builtin_names():
    from .machine import BUILTIN_MACHINES
    return BUILTIN_MACHINES


# -- schedule --------------------------------------------------------------
def schedule_to_dict(s: Schedule) -> dict:
    doc = {"format": SCHEDULE_FORMAT, "graph": s.graph, "machine": s.machine, "ii": s.ii,
           "length": s.length, "optimal": s.optimal}
    if s.lower_bound is not None:
        doc["lower_bound"] = {"ii": s.lower_bound.ii, "resource": s.lower_bound.resource,
                              "recurrence": s.lower_bound.recurrence}
    doc["cycles"] = dict(s.cycles)
    doc["ops"] = {n: {"time": p.time, "stage": p.stage, "order": p.order, "warp": p.warp}
                  for n, p in s.ops.items()}
    doc["solve_seconds"] = round(s.solve_seconds, 4)
    doc["attempts"] = []
    for a in s.attempts:
        ad = {"ii": a.ii, "length": a.length, "result": a.result, "seconds": round(a.seconds, 4)}
        if a.reason:
            ad["reason"] = a.reason
        if a.solver:
            ad["solver"] = a.solver
        doc["attempts"].append(ad)
    if s.normalization is not None:
        doc["normalization"] = s.normalization
    if s.streaming is not None:
        doc["streaming"] = s.streaming
    if s.alternatives:  # the next best schedules (--top K), each a schedule document of its own
        doc["alternatives"] = [schedule_to_dict(a) for a in s.alternatives]
    return doc


_RESULTS = ("sat", "unsat", "timeout", "skipped")
_SCHED_KEYS = {"format", "graph", "machine", "ii", "length", "optimal", "lower_bound", "cycles", "ops",
               "solve_seconds", "attempts", "normalization", "streaming", "prediction", "alternatives"}


def schedule_from_dict(doc, ctx: str = "") -> Schedule:
    d = _obj(doc, "schedule", _SCHED_KEYS, {"format", "graph", "machine", "ii", "length", "ops"}, ctx)
    _format(d, SCHEDULE_FORMAT, ctx)
    ops = {}
    if not isinstance(d["ops"], dict):
        raise FormatError(f"{_where(ctx)}schedule ops must be an object name -> placement")
    for n, p in d["ops"].items():
        p = _obj(p, f"ops['{n}']", {"time", "stage", "order", "warp"}, {"time", "stage", "order", "warp"}, ctx)
        ops[n] = Placement(**{k: (_time_int if k in ("time", "stage") else _int)(p[k], f"op '{n}' {k}", ctx)
                              for k in ("time", "stage", "order", "warp")})
    lb = d.get("lower_bound")
    if lb is not None:
        lb = _obj(lb, "lower_bound", {"ii", "resource", "recurrence"}, {"ii", "resource", "recurrence"}, ctx)
        lb = LowerBound(**{k: _time_int(lb[k], f"lower_bound {k}", ctx) for k in ("ii", "resource", "recurrence")})
    attempts = []
    for i, a in enumerate(_list(d.get("attempts", []), "attempts", ctx)):
        a = _obj(a, f"attempts[{i}]", {"ii", "length", "result", "seconds", "reason", "solver"},
                 {"ii", "result"}, ctx)
        result = _str(a["result"], f"attempts[{i}] result", ctx)
        if result not in _RESULTS:
            raise FormatError(f"{_where(ctx)}attempts[{i}] result must be one of {', '.join(_RESULTS)}, "
                              f"got {_show(result)}")
        length = a.get("length")
        attempts.append(Attempt(ii=_time_int(a["ii"], f"attempts[{i}] ii", ctx),
                                length=None if length is None else _time_int(length, f"attempts[{i}] length", ctx),
                                result=result,
                                seconds=_num(a.get("seconds", 0.0), f"attempts[{i}] seconds", ctx),
                                reason=_opt_str(a.get("reason"), f"attempts[{i}] reason", ctx),
                                solver=_opt_str(a.get("solver"), f"attempts[{i}] solver", ctx)))
    cycles = d.get("cycles", {})
    if not isinstance(cycles, dict):
        raise FormatError(f"{_where(ctx)}schedule cycles must be an object name -> cycles")
    norm = d.get("normalization")
    if norm is not None:
        norm = _obj(norm, "normalization", {"U", "objective", "distortion", "max_ratio_error", "mapping"},
                    {"U", "distortion", "mapping"}, ctx)
        if _int(norm["U"], "normalization U", ctx) < 1:
            raise FormatError(f"{_where(ctx)}normalization U must be >= 1, got {norm['U']}")
        if _int(norm["distortion"], "normalization distortion", ctx) < 0:
            raise FormatError(f"{_where(ctx)}normalization distortion must be >= 0, got {norm['distortion']}")
        if "objective" in norm and norm["objective"] not in ("relative", "paper", "rounding"):
            raise FormatError(f"{_where(ctx)}normalization objective must be \"relative\", \"paper\" or "
                              f"\"rounding\", got {_show(norm['objective'])}")
        if "max_ratio_error" in norm:
            _num(norm["max_ratio_error"], "normalization max_ratio_error", ctx)
        if not isinstance(norm["mapping"], dict):
            raise FormatError(f"{_where(ctx)}normalization mapping must be an object cycles -> cycles")
        for k, v in norm["mapping"].items():
            if not re.fullmatch(r"[0-9]{1,10}", k) or int(k) > MAX_INT:
                raise FormatError(f"{_where(ctx)}normalization mapping key {_show(k)} must be a cycle count")
            _int(v, f"normalization of {k}", ctx)
    stream = d.get("streaming")
    if stream is not None:
        stream = _obj(stream, "streaming", {"ops", "depth"}, {"ops", "depth"}, ctx)
        if not isinstance(stream["ops"], list) or not all(isinstance(x, str) for x in stream["ops"]):
            raise FormatError(f"{_where(ctx)}streaming ops must be a list of op names")
        if _int(stream["depth"], "streaming depth", ctx) < 1:
            raise FormatError(f"{_where(ctx)}streaming depth must be >= 1")
    return Schedule(graph=_str(d["graph"], "schedule graph", ctx), machine=_str(d["machine"], "machine", ctx),
                    ii=_time_int(d["ii"], "ii", ctx), length=_time_int(d["length"], "length", ctx), ops=ops,
                    cycles={n: _int(c, f"cycles of '{n}'", ctx) for n, c in cycles.items()},
                    optimal=_bool(d.get("optimal", False), "optimal", ctx), lower_bound=lb,
                    solve_seconds=_num(d.get("solve_seconds", 0.0), "solve_seconds", ctx), attempts=tuple(attempts),
                    normalization=norm, streaming=stream, alternatives=_alternatives(d, ctx))


def _alternatives(d: dict, ctx: str) -> tuple:
    """The ``alternatives`` of a schedule document (docs/formats.md): schedules of the same graph and
    machine, none with alternatives of its own, at most ``MAX_TOP_K - 1``."""
    items = _list(d.get("alternatives", []), "alternatives", ctx)
    if len(items) > MAX_TOP_K - 1:
        raise FormatError(f"{_where(ctx)}alternatives has {len(items)} schedules; at most {MAX_TOP_K - 1} "
                          f"(--top {MAX_TOP_K})")
    out = []
    for i, item in enumerate(items):
        if isinstance(item, dict) and "alternatives" in item:
            raise FormatError(f"{_where(ctx)}alternatives[{i}] has alternatives of its own: list every "
                              "schedule in the top-level alternatives")
        a = schedule_from_dict(item, f"{_where(ctx)}alternatives[{i}]")
        if (a.graph, a.machine) != (d["graph"], d["machine"]):
            raise FormatError(f"{_where(ctx)}alternatives[{i}] is a schedule of graph '{a.graph}' on "
                              f"'{a.machine}', not of '{d['graph']}' on '{d['machine']}'")
        out.append(a)
    return tuple(out)


# -- files -----------------------------------------------------------------
#: The largest file read (a 60k-op graph is about 6 MB).  Parsed JSON takes up to
#: about 27 bytes of memory per byte of file (a list of empty objects), so this
#: bounds what reading any file can cost to about 1 GB.
MAX_FILE_BYTES = 32 * 2**20
#: JSON nesting deeper than this is refused (the formats need 4 levels).
MAX_DEPTH = 64
_MAX_DIGITS = 30  # longer integer literals are refused while parsing (no field to name yet)
#: The longest explicit reservation table (rows are cycles, so the solver's and the
#: checker's passes over a table are bounded by this, not by a cycle count).
MAX_RRT_ROWS = 4096


class _Refused(Exception):
    """A hostile construct found while decoding (re-raised as FormatError with the file)."""


def _pairs(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise _Refused(f"duplicate key {ascii(k)[:60]} in one object: each field may appear once")
        d[k] = v
    return d


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_DIGITS:
        raise _Refused(f"an integer of {len(text.lstrip('-'))} digits is beyond what any GPU loop has "
                       f"(integers are at most {MAX_INT})")
    return int(text)


def _parse_constant(name: str):
    raise _Refused(f"{name} is not a JSON number: give a finite number")


def _screen(doc) -> None:
    """Refuse nesting deeper than MAX_DEPTH and strings (keys too) with
    control characters or lone surrogates.  Iterative: no recursion limit."""
    stack = [(doc, 1)]
    while stack:
        x, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _Refused(f"JSON nested deeper than {MAX_DEPTH} levels: no tvm-twill format is nested like that")
        if isinstance(x, dict):
            items = list(x.keys()) + list(x.values())
        elif isinstance(x, list):
            items = x
        else:
            items = [x]
        for y in items:
            if isinstance(y, str):
                ch = bad_char(y)
                if ch is not None:
                    what = "a lone surrogate" if 0xD800 <= ord(ch) < 0xE000 else "the control character"
                    raise _Refused(f"string {ascii(y)[:60]} contains {what} {ascii(ch)}: strings must be "
                                   "printable Unicode text")
            elif isinstance(y, (dict, list)) and y is not x:
                stack.append((y, depth + 1))


def _load(path) -> object:
    p = Path(path)
    try:
        with open(p, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise FormatError(f"{p}: no such file") from None
    except (OSError, ValueError) as e:  # a directory, no permission, a NUL in the path ...
        raise FormatError(f"{p}: cannot read ({e.__class__.__name__})") from None
    if len(data) > MAX_FILE_BYTES:
        raise FormatError(f"{p}: larger than {MAX_FILE_BYTES // 2**20} MiB, far beyond any loop body; "
                          "is it the right file?")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(f"{p}: not UTF-8 text (byte {e.start}); JSON files must be UTF-8") from None
    try:
        doc = json.loads(text, object_pairs_hook=_pairs, parse_int=_parse_int, parse_constant=_parse_constant)
        _screen(doc)
        return doc
    except json.JSONDecodeError as e:
        raise FormatError(f"{p}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno}); "
                          "is the file truncated?") from None
    except _Refused as e:
        raise FormatError(f"{p}: {e}") from None
    except RecursionError:
        raise FormatError(f"{p}: JSON nested too deeply to read: no tvm-twill format is nested like that") from None
    except (ValueError, OverflowError) as e:  # e.g. a float literal Python cannot hold
        raise FormatError(f"{p}: not valid JSON ({str(e)[:100]})") from None


def load_graph(path) -> Graph:
    return graph_from_dict(_load(path), ctx=str(path))


def load_machine(path) -> Machine:
    return machine_from_dict(_load(path), ctx=str(path))


def load_schedule(path) -> Schedule:
    return schedule_from_dict(_load(path), ctx=str(path))


def dump(doc: dict, path=None) -> str:
    text = json.dumps(doc, indent=2) + "\n"
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text
