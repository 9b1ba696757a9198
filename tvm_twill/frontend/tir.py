"""Extract a tile-level dependence graph from an s_tir loop (TVM 0.27).

This is the only module that touches TVM's moving namespaces (``tvm.s_tir``,
``tvm.tirx``, ``tvm.sym``); TVM renames them between releases, so every use is
kept here.

What a graph op is
------------------
One op per statement that ``InjectSoftwarePipeline`` will see, in the same
order: the direct children of the loop body (the body may be wrapped in an
``SBlockRealize`` that carries allocations).  Two cases mirror what TVM does
when it builds the pipeline:

* a child ``SBlockRealize`` without predicate whose block body is a
  ``SeqStmt`` is flattened into its statements;
* a child loop that itself carries ``software_pipeline_stage`` (a nested
  pipeline, pipelined first because TVM rewrites inner loops first) becomes
  three statements, its prologue, body and epilogue, whose work is counted
  from the inner annotation (``<loop>.prologue`` ...).

Classification and costs (per pipelined-loop iteration, for the whole thread
block, which the model treats as owning one SM)
---------------------------------------------------------------------------
Work is summed over the leaf sblocks of a statement, each weighted by its
instance count: the extents of the loops between the statement and the block
(thread-bound loops included) times the extents of the ``threadIdx`` loops
*outside* the pipelined loop that the statement does not re-bind (a statement
that does not distribute itself over those threads is run by each of them).

==================  ========================================  ====  ==================================
kind                recognised by                             unit  cycles
==================  ========================================  ====  ==================================
``copy``            a plain load->store from global to shared  TMA   bytes / smem_bytes_per_clock
``ldmatrix``        reads shared, writes a register scope      ALU   bytes / smem_bytes_per_clock
``mma``             mma / wgmma intrinsic, or a reduction      TC    2*M*N*K / tc_flops_per_clock
                    block multiply-accumulating fp16/bf16/
                    fp8/int8 inputs
``sfu``             exp, exp2, log, tanh, rsqrt ... calls      SFU   calls / mufu_per_clock
``alu``             anything else                              ALU   elements written / fma_per_clock
==================  ========================================  ====  ==================================

A statement with work on several units (an inner loop of ldmatrix + mma)
gets a reservation table that holds each unit for its own cycles, all from
the first cycle: the units run in parallel, as the warps of the block
interleave them.

Choices, stated:

* **Copies.**  A global->shared copy occupies the copy engine for
  ``bytes / smem_bytes_per_clock`` (every byte is written into shared memory,
  128 B/clk/SM): in a tiled GEMM most tiles hit L2, so DRAM bandwidth is not
  what limits the issue rate.  The copy's *latency* (the delay of its
  outgoing edges) is ``DRAM_LATENCY_CYCLES + bytes / hbm_bytes_per_clock``:
  an unloaded DRAM access plus the tile's share of the per-SM DRAM
  bandwidth (any statement that reads global memory gets this latency).
  The latency is what stages hide; in TVM's s_tir pipeline there is no
  producer warp (no warp specialization), so copies are fixed-latency ops
  of the graph (``variable_latency`` False) unless ``streaming_copies``
  asks for the warp-specialized model.
* **ldmatrix** is charged at the shared-memory bandwidth (128 B/clk/SM, the
  ``smem_bytes_per_clock`` of the machine).
* **mma.sync on Hopper** is charged at the full dense tensor rate of the
  machine; in practice mma.sync reaches less of it than wgmma.
* **Time unit.**  Cycles are quantized to ``quantum`` cycles (default
  ``DEFAULT_QUANTUM``), rounding up, and the graph is marked
  ``normalize: false``: the solver then works on small integers and
  ``evaluate_annotation`` measures a hand annotation in exactly the same
  units.

Edges come from the statement-level read/write regions that TVM itself
computes (``get_sblock_read_write_region`` of the statement wrapped in a
block, as ``MakeSBlock`` does): a read of buffer X by a later statement of
what an earlier one writes is a same-iteration RAW edge (distance 0); a read
that is *exposed* (no earlier leaf of the same statement wrote X, e.g. an
accumulator read-modify-write) of what the same or a later statement writes
is a loop-carried RAW edge (distance 1).  Write-after-read and
write-after-write hazards are left out on purpose: TVM gives every buffer
allocated inside the pipeline ``use - def + 1`` versions, which removes them,
and its legality check is RAW only.

Footprints: an op's ``smem`` is the bytes of shared memory its statement
writes per iteration (the tile of all threads, with the padding of
``buffer_dim_align`` / storage_align applied), so the model's live instances
count the versions TVM allocates.  Its ``regs`` is the registers per thread
of register-scope tiles the statement writes for other statements;
accumulators (read-modify-write) are the same registers whatever the
schedule and are not counted.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from ..errors import InputError, UnsupportedLoopError, UnsupportedTargetError
from ..model import Edge, Graph, Machine, Op, get_machine, machine_for_arch
from ..transforms.annotate import ASYNC_COPY_CONFIG, Dependence, PipelineAnnotation, read_annotation

#: Cycles per model time unit (see the module docstring).
DEFAULT_QUANTUM = 16
#: Unloaded DRAM access latency in cycles, order of magnitude from published
#: microbenchmarks of A100/H100 (about 400-600 cycles); loaded latency is higher.
DRAM_LATENCY_CYCLES = 500

_SFU_FUNCS = {"exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "tanh", "sigmoid", "sqrt", "rsqrt",
              "erf", "sin", "cos", "tan", "pow", "fast_exp", "fast_erf", "fast_tanh"}
_CONTROL_FLOW = (tirx.IfThenElse, tirx.While, tirx.Break, tirx.Continue, tirx.Return)
_SHAPE = re.compile(r"m(\d+)n(\d+)k(\d+)")
_TC_DTYPES = ("float16", "bfloat16", "float8", "int8", "uint8", "int4")


# -- small helpers -----------------------------------------------------------
def _const(expr) -> int | None:
    """The integer value of an expression, or None when it is not constant."""
    if isinstance(expr, int):
        return expr
    if isinstance(expr, tirx.IntImm):
        return int(expr.value)
    try:
        e = tvm.sym.Analyzer().simplify(expr)
    except Exception:  # noqa: BLE001 - anything non-simplifiable is "not constant"
        return None
    return int(e.value) if isinstance(e, tirx.IntImm) else None


def _dtype_bytes(dtype) -> float:
    d = tvm_ffi.dtype(str(dtype))
    return d.bits * d.lanes / 8


def _scope(buf) -> str:
    s = buf.scope()
    return "global" if s in ("", "global") else s


def _is_shared(scope: str) -> bool:
    return scope.startswith("shared") and scope != "shared.barrier"


def _is_register(scope: str) -> bool:
    return scope not in ("global",) and not scope.startswith("shared")


def _is_true(expr) -> bool:
    return isinstance(expr, tirx.IntImm) and int(expr.value) == 1


def _stmts_of(stmt):
    """Direct structured children of a statement (for walking)."""
    if isinstance(stmt, tirx.SeqStmt):
        return list(stmt.seq)
    if isinstance(stmt, s_tir.SBlockRealize):
        return [stmt.block]
    if isinstance(stmt, s_tir.SBlock):
        return [s for s in (stmt.init, stmt.body) if s is not None]
    body = getattr(stmt, "body", None)
    return [body] if isinstance(body, tirx.Stmt) else []


# -- target and loop resolution ----------------------------------------------
def parse_target(target) -> tuple[str, object]:
    """(arch, tvm Target) for a ``tvm.target.Target`` or an arch string such as ``"sm_90a"``.

    Raises UnsupportedTargetError for non-CUDA targets, targets without an
    arch, and archs before sm_80 (no cp.async, no machine model).
    """
    if isinstance(target, str):
        arch = target.strip()
        if not re.fullmatch(r"sm_\d+[a-z]?", arch):
            raise UnsupportedTargetError(
                f"target '{target}' is not a CUDA arch string: pass 'sm_80', 'sm_90a' ... or "
                "tvm.target.Target({'kind': 'cuda', 'arch': 'sm_90a'})")
        tgt = tvm.target.Target({"kind": "cuda", "arch": arch})
    elif isinstance(target, tvm.target.Target):
        tgt = target
        if tgt.kind.name != "cuda":
            raise UnsupportedTargetError(
                f"target kind '{tgt.kind.name}' is not supported: auto_pipeline targets CUDA "
                "(tvm.target.Target({'kind': 'cuda', 'arch': 'sm_80'}))")
        arch = str(tgt.attrs["arch"]) if "arch" in tgt.attrs else ""
        if not arch:
            raise UnsupportedTargetError("CUDA target has no 'arch': give one, e.g. "
                                         "tvm.target.Target({'kind': 'cuda', 'arch': 'sm_90a'})")
    else:
        raise UnsupportedTargetError(f"target must be a tvm.target.Target or an arch string like 'sm_90a', "
                                     f"got {type(target).__name__}")
    cc = int(re.sub(r"\D", "", arch) or 0)
    if cc < 80:
        raise UnsupportedTargetError(f"target arch '{arch}' predates sm_80: software pipelining with "
                                     "cp.async and the machine models need sm_80 or newer")
    return arch, tgt


def machine_for(arch: str, machine=None) -> Machine:
    """The machine model: the given one (name or Machine) or the built-in for ``arch``."""
    m = machine_for_arch(arch) if machine is None else get_machine(machine)
    if m.costs is None:
        raise UnsupportedTargetError(f"machine '{m.name}' has no cost model (tile shapes cannot be turned "
                                     "into cycles): use a built-in machine (a100, h100, b200)")
    return m


@dataclass(frozen=True)
class LoopRef:
    """A loop of a schedule: its LoopRV, its For node, name, function and enclosing loops."""

    rv: object
    node: object
    name: str
    func: str
    ancestors: tuple = ()


def _functions(sch):
    for gv, func in sch.mod.functions_items():
        if isinstance(func, tirx.PrimFunc):
            yield gv.name_hint, func


def _find_loops(stmt, name, out):
    if isinstance(stmt, tirx.For) and stmt.loop_var.name == name:
        out.append(stmt)
    for c in _stmts_of(stmt):
        _find_loops(c, name, out)


def _loop_names(stmt, out):
    if isinstance(stmt, tirx.For):
        out.append(stmt.loop_var.name)
    for c in _stmts_of(stmt):
        _loop_names(c, out)


def _first_named_block(stmt):
    if isinstance(stmt, s_tir.SBlock) and stmt.name_hint:
        return stmt
    for c in _stmts_of(stmt):
        b = _first_named_block(c)
        if b is not None:
            return b
    return None


def resolve_loop(sch, loop) -> LoopRef:
    """A LoopRef for a LoopRV or a loop name of ``sch``."""
    if isinstance(loop, str):
        hits = []
        for fname, func in _functions(sch):
            found = []
            _find_loops(func.body, loop, found)
            hits += [(fname, f) for f in found]
        if not hits:
            names = []
            for _, func in _functions(sch):
                _loop_names(func.body, names)
            raise UnsupportedLoopError(f"no loop named '{loop}' in the schedule: pass a LoopRV from "
                                       f"sch.get_loops(...) or one of {sorted(set(names))}")
        if len(hits) > 1:
            raise UnsupportedLoopError(f"{len(hits)} loops are named '{loop}': pass the LoopRV from "
                                       "sch.get_loops(...) instead of the name")
        fname, node = hits[0]
        blk = _first_named_block(node.body)
        if blk is None:
            raise UnsupportedLoopError(f"loop '{loop}' contains no named sblock to locate it by: pass its LoopRV")
        rvs = sch.get_loops(sch.get_sblock(blk.name_hint, func_name=fname))
        rv = next((r for r in rvs if sch.get(r).same_as(node)), None)
        if rv is None:  # pragma: no cover - a named block inside the loop always has it as an ancestor
            raise UnsupportedLoopError(f"cannot locate loop '{loop}': pass its LoopRV")
    else:
        rv = loop
        try:
            node = sch.get(rv)
        except Exception as err:  # noqa: BLE001 - TVM raises its own error types
            raise UnsupportedLoopError(f"{loop!r} is not a loop of this schedule: pass a LoopRV from "
                                       f"sch.get_loops(...) or a loop name ({err.__class__.__name__})") from None
        if not isinstance(node, tirx.For):
            raise UnsupportedLoopError(f"expected a loop (LoopRV), got a {type(node).__name__}: "
                                       "pass a LoopRV from sch.get_loops(...)")
    ancestors = []
    sref = sch.get_sref(rv).parent
    while sref is not None:
        if isinstance(sref.stmt, tirx.For):
            ancestors.append(sref.stmt)
        sref = sref.parent
    fname = sch.func_working_on.name_hint if sch.func_working_on is not None else None
    if fname is None:
        fname = next((f for f, func in _functions(sch) if _contains(func.body, node)), "main")
    return LoopRef(rv=rv, node=node, name=node.loop_var.name, func=fname, ancestors=tuple(reversed(ancestors)))


def _contains(stmt, node) -> bool:
    if stmt.same_as(node):
        return True
    return any(_contains(c, node) for c in _stmts_of(stmt))


# -- extraction results ------------------------------------------------------
@dataclass(frozen=True)
class StmtInfo:
    """What the front-end found in one pipeline statement.

    ``work`` maps unit -> cycles (unquantized) per pipelined-loop iteration;
    ``latency`` is the delay (cycles) of its outgoing edges; ``reads`` /
    ``writes`` are buffer names (TVM's statement-level regions); ``exposed``
    the reads that see a value from before the statement; ``smem_writes``
    bytes of each shared tile written per iteration (with padding);
    ``reg_writes`` registers per thread of each register-scope tile it
    writes (accumulators excluded); ``async_capable``: a plain
    global->shared copy that cp.async can run (4/8/16-byte vectors).
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
    async_capable: bool = False
    description: str = ""
    details: dict = field(default_factory=dict, compare=False)

    @property
    def smem(self) -> int:
        """Bytes of shared memory written per iteration (all buffers)."""
        return sum(self.smem_writes.values())

    @property
    def units(self) -> tuple[str, ...]:
        return tuple(u for u, c in sorted(self.work.items()) if c > 0)


@dataclass(frozen=True)
class Extraction:
    """The graph of one loop and how it maps back to the loop's statements.

    ``graph.ops[i]`` is statement ``stmts[i]``; ``op_index`` maps op name ->
    statement index; ``deps`` are the RAW dependences between statement
    indices (what annotation legality is checked against); ``quantum`` is
    the number of cycles per time unit of the graph.
    """

    graph: Graph
    stmts: tuple[StmtInfo, ...]
    op_index: dict
    deps: tuple[Dependence, ...]
    loop: str
    func: str
    trip_count: int
    quantum: int
    machine: Machine
    arch: str
    annotation: PipelineAnnotation | None = None
    nested: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.stmts]

    def describe(self) -> str:
        """A table of the statements: kind, units, cycles, latency, footprints."""
        q = self.quantum
        lines = [f"loop '{self.loop}' in '{self.func}': trip count {self.trip_count}, {len(self.stmts)} "
                 f"statements, machine {self.machine.name} ({self.arch}), 1 time unit = {q} cycles"]
        for s in self.stmts:
            op = self.graph.ops[s.index]
            work = ", ".join(f"{u} {c:.0f}" for u, c in sorted(s.work.items()) if c > 0) or "none"
            lines.append(f"  [{s.index}] {s.name:28s} {s.kind:9s} cycles {work} -> {op.cycles} units; "
                         f"latency {s.latency:.0f}; smem {s.smem} B; regs {op.regs}"
                         + ("; async-capable" if s.async_capable else ""))
        for e in self.graph.edges:
            lines.append(f"  edge {e.src} -> {e.dst}: delay {e.delay} units, distance {e.distance}")
        return "\n".join(lines)


# -- the leaf walk -----------------------------------------------------------
@dataclass
class _Leaf:
    name: str
    count: float
    reads: list        # (buffer, bytes per instance)
    writes: list
    kind: str
    flops: float = 0.0  # per instance
    sfu: float = 0.0    # per instance
    vector_bytes: float = 0.0
    plain_copy: bool = False


def _calls(node):
    out = []
    tvm_ffi.structural_walk(node, [(tvm.ir.expr.Call, lambda c: out.append(c))])
    return out


def _op_name(call) -> str:
    op = call.op
    return getattr(op, "name", "") or ""


def _mma_flops(call) -> float | None:
    """FLOPs of one warp/warpgroup-level mma call, or None if it is not one."""
    name = _op_name(call)
    short = name.split(".")[-1]
    if "mma" not in name or any(w in short for w in ("fill", "store", "load", "ldmatrix")):
        return None
    for a in call.args:
        if isinstance(a, tvm.ir.expr.StringImm):
            m = _SHAPE.fullmatch(str(a.value))
            if m:
                return 2.0 * int(m.group(1)) * int(m.group(2)) * int(m.group(3))
    return 2.0 * 16 * 16 * 16  # wmma (tvm_mma_sync) fragments are 16x16x16


def _region_bytes(region) -> float:
    n = 1
    for rg in region.region:
        e = _const(rg.extent)
        n *= e if e is not None else 1
    return n * _dtype_bytes(region.source.dtype)


def _leaf_work(block) -> tuple[float, float]:
    """(tensor-core flops, SFU calls) of one instance of a leaf block.

    Loops inside the block multiply the calls they enclose, except thread-bound
    loops around a warp-level intrinsic: the warp issues it together.
    """
    flops = 0.0
    sfu = 0.0

    def visit(stmt, mult, in_threads):
        nonlocal flops, sfu
        if isinstance(stmt, tirx.For):
            ext = _const(stmt.extent) or 1
            if stmt.kind == tirx.ForKind.THREAD_BINDING:
                visit(stmt.body, mult, in_threads * ext)
            else:
                visit(stmt.body, mult * ext, in_threads)
            return
        if isinstance(stmt, (tirx.Evaluate, tirx.BufferStore)):
            for c in _calls(stmt):
                f = _mma_flops(c)
                if f is not None:
                    flops += mult * f
                elif _op_name(c).split(".")[-1] in _SFU_FUNCS:
                    sfu += mult * in_threads
            return
        for c in _stmts_of(stmt):
            visit(c, mult, in_threads)

    visit(block.body, 1.0, 1)
    return flops, sfu


def _is_mac_reduction(block) -> bool:
    """A reduction block whose update multiplies low-precision inputs (a GEMM element)."""
    if not any(int(iv.iter_type) == 2 for iv in block.iter_vars):  # 2 = CommReduce
        return False
    if not isinstance(block.body, tirx.BufferStore):
        return False
    muls = []
    tvm_ffi.structural_walk(block.body.value, [(tvm.ir.prim.expr.Mul, lambda m: muls.append(m))])
    if not muls:
        return False
    return any(str(r.source.dtype).startswith(_TC_DTYPES) for r in block.reads)


def _plain_copy(block) -> tuple[bool, float]:
    """(is a plain load->store copy, bytes per vector) for cp.async eligibility."""
    body = block.body
    if not isinstance(body, tirx.BufferStore):
        return False, 0.0
    if not isinstance(body.value, tvm.ir.expr.TensorLoad):  # a cast or arithmetic is not a cp.async
        return False, 0.0
    return True, _dtype_bytes(body.buffer.dtype)


class _Analyzer:
    """Walks the statements of one loop body and turns them into StmtInfo."""

    def __init__(self, func, loop_ref: LoopRef, machine: Machine):
        self.func = func
        self.loop = loop_ref
        self.m = machine
        self.costs = machine.costs
        # Buffers the region detector may report: parameters and every allocation.
        bufs = list(func.params)

        def collect(stmt):
            if isinstance(stmt, s_tir.SBlock):
                bufs.extend(stmt.alloc_buffers)
            for c in _stmts_of(stmt):
                collect(c)
        collect(func.body)
        self.buffer_map = {b: b for b in bufs if isinstance(b, tvm.ir.expr.Var)}
        self.aligns = _collect_aligns(func)
        # threadIdx extents outside the loop, and the block's thread count.
        self.outer_threads = {}
        for a in loop_ref.ancestors:
            if a.kind == tirx.ForKind.THREAD_BINDING:
                tag = a.thread_binding.thread_tag
                if tag.startswith("threadIdx"):
                    self.outer_threads[tag] = _const(a.extent) or 1
        inner = {}
        _thread_extents(loop_ref.node.body, inner)
        merged = dict(inner)
        for t, e in self.outer_threads.items():
            merged[t] = max(e, merged.get(t, 1))
        self.threads_per_block = math.prod(merged.values()) if merged else 1

    # statement-level regions, exactly as TVM's MakeSBlock computes them
    def regions(self, stmt):
        blk = s_tir.SBlock([], [], [], "", stmt)
        reads, writes = s_tir.analysis.get_sblock_read_write_region(blk, self.buffer_map)
        return list(reads), list(writes)

    def leaves(self, stmt) -> list[_Leaf]:
        tags: dict = {}
        _thread_extents(stmt, tags)
        outer = math.prod(e for t, e in self.outer_threads.items() if t not in tags)
        out: list[_Leaf] = []

        def visit(s, mult):
            if isinstance(s, tirx.For):
                ext = _const(s.extent)
                if ext is None:
                    raise UnsupportedLoopError(
                        f"loop '{self.loop.name}': inner loop '{s.loop_var.name}' has a dynamic extent: "
                        "tile sizes must be static to estimate costs")
                visit(s.body, mult * ext)
                return
            if isinstance(s, s_tir.SBlockRealize):
                blk = s.block
                if _has_block(blk.body):
                    visit(blk.body, mult)
                    return
                out.append(self.leaf(blk, mult * outer))
                return
            if isinstance(s, tirx.BufferStore):  # a store outside any block (opaque IR)
                out.append(_Leaf(name=s.buffer.name, count=mult * outer, reads=[],
                                 writes=[(s.buffer, _dtype_bytes(s.buffer.dtype))], kind="alu"))
                return
            for c in _stmts_of(s):
                visit(c, mult)

        visit(stmt, 1.0)
        return out

    def leaf(self, blk, count) -> _Leaf:
        reads = [(r.source, _region_bytes(r)) for r in blk.reads]
        writes = [(w.source, _region_bytes(w)) for w in blk.writes]
        flops, sfu = _leaf_work(blk)
        rs = {_scope(b) for b, _ in reads}
        ws = {_scope(b) for b, _ in writes}
        plain, vbytes = _plain_copy(blk)
        if flops == 0 and _is_mac_reduction(blk):
            flops = 2.0
        if flops > 0:
            kind = "mma"
        elif sfu > 0:
            kind = "sfu"
        elif plain and "global" in rs and any(_is_shared(s) for s in ws):
            kind = "copy"
        elif any(_is_shared(s) for s in rs) and ws and all(_is_register(s) for s in ws):
            kind = "ldmatrix"
        else:
            kind = "alu"
        return _Leaf(name=blk.name_hint, count=count, reads=reads, writes=writes, kind=kind, flops=flops,
                     sfu=sfu, vector_bytes=vbytes, plain_copy=plain and kind == "copy")

    def analyze(self, index: int, stmt) -> StmtInfo:
        """StmtInfo of one ordinary statement (not an inner pipeline)."""
        for node in _walk_stmts(stmt):
            if isinstance(node, _CONTROL_FLOW):
                raise UnsupportedLoopError(
                    f"loop '{self.loop.name}': statement {index} contains control flow "
                    f"({type(node).__name__}): tvm_twill pipelines straight-line bodies; use a block "
                    "predicate (T.where) or move the condition out of the loop")
        leaves = self.leaves(stmt)
        reads, writes = self.regions(stmt)
        return self._info(index, stmt, leaves, reads, writes)

    def _info(self, index, stmt, leaves, reads, writes) -> StmtInfo:
        c = self.costs
        work = {"TC": 0.0, "TMA": 0.0, "ALU": 0.0, "SFU": 0.0}
        copy_bytes = 0.0
        global_bytes = 0.0
        kinds = []
        for lf in leaves:
            global_bytes += lf.count * sum(n for buf, n in lf.reads if _scope(buf) == "global")
            if lf.kind not in kinds:
                kinds.append(lf.kind)
            if lf.kind == "mma":
                work["TC"] += lf.count * lf.flops / c.tc_flops_per_clock
            elif lf.kind == "sfu":
                work["SFU"] += lf.count * lf.sfu / c.mufu_per_clock
            elif lf.kind == "copy":
                b = lf.count * sum(n for buf, n in lf.writes if _is_shared(_scope(buf)))
                copy_bytes += b
                work["TMA"] += b / c.smem_bytes_per_clock
            elif lf.kind == "ldmatrix":
                b = lf.count * sum(n for buf, n in lf.reads if _is_shared(_scope(buf)))
                work["ALU"] += b / c.smem_bytes_per_clock
            else:
                elems = lf.count * sum(n / _dtype_bytes(buf.dtype) for buf, n in lf.writes)
                work["ALU"] += elems / c.fma_per_clock
        work = {u: v for u, v in work.items() if v > 0}
        busy = max(work.values(), default=0.0)
        latency = busy
        if global_bytes:  # its result waits for global memory, whatever unit computes it
            latency = max(busy, DRAM_LATENCY_CYCLES + global_bytes / c.hbm_bytes_per_clock)
        # exposed reads: read before any earlier leaf of this statement wrote the buffer
        written: list = []
        exposed: list[str] = []
        for lf in leaves:
            for b, _ in lf.reads:
                if not any(b.same_as(w) for w in written) and b.name not in exposed:
                    exposed.append(b.name)
            written += [b for b, _ in lf.writes]
        rnames = _unique_names(r.source for r in reads)
        wnames = _unique_names(w.source for w in writes)
        exposed = [n for n in exposed if n in rnames]
        smem_writes = {}
        for w in writes:
            if _is_shared(_scope(w.source)):
                # all threads' stores (the region alone is per thread when threads are bound outside
                # the loop), or the padded tile when the region covers it (storage_align padding)
                stored = sum(lf.count * n for lf in leaves for b, n in lf.writes if b.same_as(w.source))
                smem_writes[w.source.name] = int(max(stored, _padded_bytes(w, self.aligns)))
        reg_writes = {}
        for w in writes:
            if _is_register(_scope(w.source)) and w.source.name not in exposed:
                total = sum(lf.count * n for lf in leaves for b, n in lf.writes if b.same_as(w.source))
                reg_writes[w.source.name] = math.ceil(total / (self.threads_per_block * 4))
        async_ok = bool(leaves) and all(lf.kind == "copy" and lf.plain_copy and lf.vector_bytes * _vec_lanes(stmt)
                                        in (4, 8, 16) for lf in leaves)
        kind = kinds[0] if len(kinds) == 1 else ("mixed" if kinds else "empty")
        name = _stmt_name(stmt, leaves, index)
        desc = _describe(kind, kinds, leaves, copy_bytes, work, async_ok)
        return StmtInfo(index=index, name=name, kind=kind, work=work, latency=latency, reads=tuple(rnames),
                        writes=tuple(wnames), exposed=tuple(exposed), smem_writes=smem_writes, reg_writes=reg_writes,
                        async_capable=async_ok, description=desc,
                        details={"kinds": tuple(kinds), "copy_bytes": copy_bytes,
                                 "leaves": tuple(lf.name for lf in leaves)})

    def analyze_nested(self, index: int, inner, ann: PipelineAnnotation) -> list[StmtInfo]:
        """Three StmtInfo (prologue, body, epilogue) for an annotated inner loop."""
        name = inner.loop_var.name
        trip = _const(inner.extent)
        if trip is None:
            raise UnsupportedLoopError(f"nested pipeline loop '{name}' has a dynamic extent: tile loops "
                                       "must be static")
        children = _pipeline_children(inner, name)
        if len(children) != len(ann.stages):
            raise UnsupportedLoopError(
                f"nested pipeline loop '{name}' has {len(children)} statements but its annotation has "
                f"{len(ann.stages)} stages: re-run auto_pipeline on it")
        infos = [self.analyze(i, c) for i, c in enumerate(children)]
        leaves = [self.leaves(c) for c in children]
        S = ann.num_stages - 1
        counts = {
            "prologue": [max(0, min(S - s, trip)) if s < S else 0 for s in ann.stages],
            "body": [max(0, trip - S)] * len(children),
            "epilogue": [len([i for i in range(max(trip, S), trip + S) if s <= i < s + trip]) for s in ann.stages],
        }
        out = []
        for k, part in enumerate(("prologue", "body", "epilogue")):
            cnt = counts[part]
            present = [i for i in sorted(range(len(children)), key=lambda i: ann.orders[i]) if cnt[i] > 0]
            work: dict = {}
            for i in present:
                for u, v in infos[i].work.items():
                    work[u] = work.get(u, 0.0) + cnt[i] * v
            reads, writes, exposed, written = [], [], [], []
            for i in present:
                reads += [r for r in infos[i].reads if r not in reads]
                writes += [w for w in infos[i].writes if w not in writes]
                exposed += [r for r in infos[i].exposed if r not in written and r not in exposed]
                written += list(infos[i].writes)
            busy = max(work.values(), default=0.0)
            latency = max([busy] + [infos[i].latency for i in present])
            kinds = tuple(dict.fromkeys(infos[i].kind for i in present))
            desc = (f"{part} of the pipelined inner loop '{name}' (stages {list(ann.stages)}): "
                    + (", ".join(f"{cnt[i]}x {infos[i].name}" for i in present) if present else "empty"))
            out.append(StmtInfo(
                index=index + k, name=f"{name}.{part}", kind=f"nested_{part}", work=work, latency=latency,
                reads=tuple(reads), writes=tuple(writes), exposed=tuple(exposed),
                smem_writes=_sum_dicts({b: cnt[i] * v for b, v in infos[i].smem_writes.items()} for i in present),
                reg_writes=_sum_dicts({b: cnt[i] * r for b, r in infos[i].reg_writes.items()} for i in present),
                async_capable=False, description=desc,
                details={"kinds": kinds, "inner": name, "counts": tuple(cnt),
                         "leaves": tuple(lf.name for i in present for lf in leaves[i])}))
        return out


def _sum_dicts(dicts) -> dict:
    out: dict = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return out


def _vec_lanes(stmt) -> int:
    """Lanes of the vectorized loop around a copy (1 when not vectorized)."""
    lanes = [1]

    def visit(s):
        if isinstance(s, tirx.For) and s.kind == tirx.ForKind.VECTORIZED:
            lanes[0] = max(lanes[0], _const(s.extent) or 1)
        for c in _stmts_of(s):
            visit(c)

    visit(stmt)
    return lanes[0]


def _thread_extents(stmt, out: dict) -> None:
    if isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.THREAD_BINDING:
        tag = stmt.thread_binding.thread_tag
        if tag.startswith("threadIdx"):
            out[tag] = max(out.get(tag, 1), _const(stmt.extent) or 1)
    for c in _stmts_of(stmt):
        _thread_extents(c, out)


def _has_block(stmt) -> bool:
    if isinstance(stmt, s_tir.SBlockRealize):
        return True
    return any(_has_block(c) for c in _stmts_of(stmt))


def _walk_stmts(stmt):
    yield stmt
    for c in _stmts_of(stmt):
        yield from _walk_stmts(c)


def _unique_names(bufs) -> list[str]:
    out = []
    for b in bufs:
        if b.name not in out:
            out.append(b.name)
    return out


def _padded_bytes(region, aligns: dict) -> int:
    """Bytes of a shared tile, with the row padding storage_align adds.

    ``buffer_dim_align`` = [[write index, axis, factor, offset], ...] on the
    writing block: the stride of ``axis`` becomes the smallest value >= the
    natural stride that is ``offset`` modulo ``factor``.
    """
    ext = [(_const(rg.extent) or 1) for rg in region.region]
    total = math.prod(ext)
    for axis, factor, offset in aligns.get(region.source.name, ()):
        if 0 <= axis < len(ext) - 1:
            inner = math.prod(ext[axis + 1:])
            stride = inner
            while stride % factor != offset % factor:
                stride += 1
            total = total // inner * stride
    return int(total * _dtype_bytes(region.source.dtype))


def _collect_aligns(func) -> dict:
    """buffer name -> [(axis, factor, offset)] from the ``buffer_dim_align`` block attrs."""
    out: dict = {}

    def visit(stmt):
        if isinstance(stmt, s_tir.SBlock) and "buffer_dim_align" in stmt.annotations:
            for entry in stmt.annotations["buffer_dim_align"]:
                widx, axis, factor, offset = (int(x) for x in entry)
                if widx < len(stmt.writes):
                    name = stmt.writes[widx].source.name
                    if (axis, factor, offset) not in out.setdefault(name, []):
                        out[name].append((axis, factor, offset))
        for c in _stmts_of(stmt):
            visit(c)

    visit(func.body)
    return out


def _stmt_name(stmt, leaves, index) -> str:
    if isinstance(stmt, tirx.For):
        names = {lf.name for lf in leaves}
        if len(names) == 1 and next(iter(names)):
            return next(iter(names))
        return stmt.loop_var.name
    if isinstance(stmt, s_tir.SBlockRealize) and stmt.block.name_hint:
        return stmt.block.name_hint
    if leaves and leaves[0].name:
        return leaves[0].name
    return f"stmt{index}"


def _describe(kind, kinds, leaves, copy_bytes, work, async_ok) -> str:
    what = {"copy": "global->shared copy", "ldmatrix": "shared->register load (ldmatrix)",
            "mma": "tensor-core compute", "sfu": "special-function work", "alu": "ALU work",
            "empty": "no work"}
    if kind == "mixed":
        text = "loop of " + " + ".join(what[k] for k in kinds)
    else:
        text = what.get(kind, kind)
    if copy_bytes:
        text += f", {copy_bytes:.0f} B per iteration" + (" (cp.async-capable)" if async_ok else "")
    return text


def _pipeline_children(loop_node, name: str) -> list:
    """The statements InjectSoftwarePipeline will see in ``loop_node``'s body (one level)."""
    body = loop_node.body
    if isinstance(body, s_tir.SBlockRealize):
        body = body.block.body
    if not isinstance(body, tirx.SeqStmt):
        raise UnsupportedLoopError(
            f"loop '{name}' has a single statement in its body: there is nothing to overlap; split it "
            "into producer and consumer statements first (cache_read + compute_at)")
    children = []
    for c in body.seq:
        if isinstance(c, s_tir.SBlockRealize) and _is_true(c.predicate) and isinstance(c.block.body, tirx.SeqStmt):
            children.extend(c.block.body.seq)  # TVM flattens these (its nested-pipeline rule)
        else:
            children.append(c)
    return children


# -- the public entry point --------------------------------------------------
def extract_loop(sch, loop, target, *, machine=None, quantum: int | None = None,
                 streaming_copies: bool = False) -> Extraction:
    """The dependence graph of ``loop`` (a LoopRV or loop name) of ``sch`` on ``target``.

    ``target``: a ``tvm.target.Target`` or an arch string ("sm_80", "sm_90a").
    ``machine``: a Machine or built-in name (default: the model of the arch).
    ``quantum``: cycles per time unit (default ``DEFAULT_QUANTUM``).
    ``streaming_copies``: mark copies ``variable_latency`` (the warp-specialized
    model, in which a producer warp hides their latency); off for TVM's s_tir
    pipeline, where stages must hide it.

    Raises UnsupportedLoopError for loops that cannot be pipelined: dynamic
    extent, a body that is a single statement, control flow in the body, a
    thread-bound or vectorized loop.
    """
    arch, _ = parse_target(target)
    m = machine_for(arch, machine)
    q = DEFAULT_QUANTUM if quantum is None else int(quantum)
    if q < 1:
        raise InputError(f"quantum must be an integer >= 1 (cycles per time unit), got {quantum!r}")
    ref = resolve_loop(sch, loop)
    node = ref.node
    func = sch.mod[ref.func]
    if node.kind not in (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED):
        kind = tirx.ForKind(int(node.kind)).name.lower()
        raise UnsupportedLoopError(f"loop '{ref.name}' is a {kind} loop: only serial loops are software-pipelined")
    trip = _const(node.extent)
    if trip is None:
        raise UnsupportedLoopError(f"loop '{ref.name}' has a dynamic extent: its trip count must be static "
                                   "to schedule it (split it by a constant tile first)")
    children = _pipeline_children(node, ref.name)
    for i, c in enumerate(children):
        if isinstance(c, _CONTROL_FLOW):
            raise UnsupportedLoopError(
                f"loop '{ref.name}': statement {i} is control flow ({type(c).__name__}): tvm_twill pipelines "
                "straight-line bodies; use a block predicate (T.where) or move the condition out of the loop")
    an = _Analyzer(func, ref, m)
    stmts: list[StmtInfo] = []
    nested = []
    for c in children:
        inner_ann = read_annotation(c) if isinstance(c, tirx.For) else None
        if inner_ann is not None:
            stmts += an.analyze_nested(len(stmts), c, inner_ann)
            nested.append(c.loop_var.name)
        else:
            stmts.append(an.analyze(len(stmts), c))
    if len(stmts) < 2:
        raise UnsupportedLoopError(f"loop '{ref.name}' has a single statement: there is nothing to overlap")
    stmts = _dedupe_names(stmts)
    graph, deps = _build_graph(stmts, ref.name, m, q, streaming_copies)
    return Extraction(graph=graph, stmts=tuple(stmts), op_index={s.name: s.index for s in stmts},
                      deps=tuple(deps), loop=ref.name, func=ref.func, trip_count=trip, quantum=q, machine=m,
                      arch=arch, annotation=read_annotation(node), nested=tuple(nested))


def _dedupe_names(stmts):
    seen: dict = {}
    out = []
    for s in stmts:
        n = s.name
        if n in seen:
            seen[n] += 1
            n = f"{n}#{seen[s.name]}"
        else:
            seen[n] = 1
        out.append(replace(s, name=n))
    return out


def _units(cycles: float, q: int) -> int:
    return 0 if cycles <= 0 else max(1, math.ceil(cycles / q - 1e-9))


def _build_graph(stmts, loop_name, m, q, streaming) -> tuple[Graph, list[Dependence]]:
    ops = []
    for s in stmts:
        units = {u: _units(c, q) for u, c in s.work.items() if c > 0}
        cycles = max(units.values(), default=0)
        # registers count only while another statement still needs them
        regs = sum(r for b, r in s.reg_writes.items()
                   if any(b in t.reads for t in stmts if t.index != s.index))
        common = dict(regs=regs, smem=s.smem, spill_cost=0,
                      variable_latency=bool(streaming and s.kind == "copy"))
        if len(units) <= 1:
            unit = next(iter(units), "ALU")
            ops.append(Op(name=s.name, cycles=cycles, unit=unit, **common))
        else:
            rrt = tuple({u: 1 for u, n in units.items() if j < n} for j in range(cycles))
            ops.append(Op(name=s.name, cycles=cycles, unit=max(units, key=units.get), rrt=rrt, **common))
    edges, deps = [], []
    for i, a in enumerate(stmts):
        delay = _units(a.latency, q)  # >= 1 for a statement with work: its consumer issues later
        for j, b in enumerate(stmts):
            if i < j and set(a.writes) & set(b.reads):
                edges.append(Edge(a.name, b.name, delay=delay, distance=0))
                deps.append(Dependence(i, j, 0))
            elif i >= j and set(a.writes) & set(b.exposed):
                edges.append(Edge(a.name, b.name, delay=delay, distance=1))
                deps.append(Dependence(i, j, 1))
    graph = Graph(name=f"{loop_name}", ops=tuple(ops), edges=tuple(edges), machine=m, normalize=False)
    return graph, deps


def scratch_schedule(sch):
    """A new Schedule over the same (immutable) IR: annotating it leaves ``sch`` untouched.

    (``Schedule.copy`` fails on TVM 0.27 schedules built by ``mma_schedule``.)
    """
    return s_tir.Schedule(sch.mod)


# -- compiling (for tests, tutorials and benchmarks) --------------------------
def pipeline_prefix_passes():
    """TVM's default s_tir passes up to and including InjectSoftwarePipeline (0.27 order)."""
    t = s_tir.transform
    return [t.CanonicalizeLoop(), t.LowerCrossThreadReduction(), t.LowerInitBlock(),
            t.PlanAndUpdateBufferAllocationLocation(), t.ConvertBlocksToOpaque(), t.LiftThreadBinding(),
            t.ManifestSharedMemoryLocalStage(), t.CompactBufferAllocation(), t.LowerAutoCopy(),
            t.UnifyThreadBinding(), t.LowerMatchBuffer(), t.StmtSimplify(), t.InjectPermutedLayout(),
            t.AnnotateIrregularLoop(), t.InjectSoftwarePipeline()]


def inject_pipeline(mod):
    """Run the s_tir passes through InjectSoftwarePipeline; TVM's rejection becomes UnsupportedLoopError."""
    try:
        return tvm.transform.Sequential(pipeline_prefix_passes())(mod)
    except Exception as err:  # noqa: BLE001 - TVM raises ValueError / InternalError
        msg = str(err).strip().splitlines()
        line = next((ln for ln in reversed(msg) if ln.strip()), type(err).__name__)
        raise UnsupportedLoopError(f"InjectSoftwarePipeline rejects the annotated loop: {line.strip()}") from None


def compile_cuda(mod_or_sch, target, *, async_copy: bool = True):
    """Compile with ``tvm.compile`` for a CUDA target; returns (module, CUDA source).

    ``async_copy`` sets the PassContext key that lowers async stages to cp.async.
    """
    _, tgt = parse_target(target)
    mod = mod_or_sch.mod if hasattr(mod_or_sch, "mod") and not isinstance(mod_or_sch, tvm.IRModule) else mod_or_sch
    with tvm.transform.PassContext(config={ASYNC_COPY_CONFIG: int(async_copy)}):
        f = tvm.compile(mod, target=tgt)
    return f, f.mod.imports[0].inspect_source()


@dataclass(frozen=True)
class KernelInfo:
    """Launch facts of a compiled s_tir kernel: name, grid, block, dynamic shared memory bytes."""

    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dyn_smem: int


def kernel_info(mod_or_sch, target, *, async_copy: bool = True) -> KernelInfo:
    """Run TVM's default pipeline (as ``tvm.compile`` does) and read the device kernel's launch facts.

    Used to check the model's shared-memory prediction against what TVM
    allocates, and to launch exported kernels without TVM.
    """
    _, tgt = parse_target(target)
    mod = mod_or_sch.mod if not isinstance(mod_or_sch, tvm.IRModule) else mod_or_sch
    mod = tirx.transform.BindTarget(tgt.with_host(tvm.target.Target("llvm")))(mod)
    pipeline, _, _ = tirx.get_default_tir_pipeline(tgt)
    with tvm.transform.PassContext(config={ASYNC_COPY_CONFIG: int(async_copy)}):
        mod = pipeline(mod)
    kernels = [(gv.name_hint, f) for gv, f in mod.functions_items()
               if isinstance(f, tirx.PrimFunc) and "tirx.kernel_launch_params" in (f.attrs or {})]
    if len(kernels) != 1:
        raise InputError(f"expected one device kernel, found {len(kernels)}: kernel_info reads single-kernel modules")
    name, func = kernels[0]
    ext = {}
    smem = [0]

    def on_attr(a):
        if a.attr_key == "thread_extent":
            ext[a.node.thread_tag] = _const(a.value) or 1

    def on_alloc(a):
        if a.buffer.scope() == "shared.dyn":
            smem[0] += int(math.prod(_const(d) or 1 for d in a.buffer.shape) * _dtype_bytes(a.buffer.dtype))

    tvm_ffi.structural_walk(func.body, [(tirx.AttrStmt, on_attr), (tirx.AllocBuffer, on_alloc)])
    grid = tuple(ext.get(f"blockIdx.{d}", 1) for d in "xyz")
    block = tuple(ext.get(f"threadIdx.{d}", 1) for d in "xyz")
    return KernelInfo(name=name, grid=grid, block=block, dyn_smem=smem[0])


# -- reference workload --------------------------------------------------------
#: TVM's own hand annotations of the tensor-core GEMM below, from apache/tvm's
#: tests/python/s_tir/transform/test_s_tir_transform_inject_software_pipeline.py
#: (the simple and the nested "ideal annotation" tests), per loop: k0 is the
#: outer k_0_0 loop (copies + inner loop), k1 the inner k_0_1 loop (ldmatrix + mma).
TVM_HAND_ANNOTATIONS = {
    "simple": {"k0": {"software_pipeline_stage": [0, 0, 3], "software_pipeline_order": [0, 1, 2],
                      "software_pipeline_async_stages": [0]}},
    "nested": {"k0": {"software_pipeline_stage": [0, 0, 2, 3, 3], "software_pipeline_order": [0, 1, 3, 2, 4],
                      "software_pipeline_async_stages": [0]},
               "k1": {"software_pipeline_stage": [0, 0, 1], "software_pipeline_order": [0, 1, 2]}},
}


def tensorcore_gemm(n: int = 4096, hand: str | None = None):
    """TVM's tensor-core GEMM schedule, the kernel of TVM's pipeline tests.

    ``tvm.testing.tir.mma_schedule`` on an n^3 fp16 -> fp32 matmul, tensorized
    with ldmatrix + mma.sync m16n8k16, 128x256 block tiles.  Returns
    ``(sch, k0, k1)``: the outer loop k_0_0 (A/B global->shared copies and
    the inner loop) and the inner loop k_0_1 (ldmatrix + mma).  ``hand``
    (``"simple"`` or ``"nested"``) applies TVM's hand annotation of that test.
    """
    from tvm import te
    from tvm.s_tir.meta_schedule.testing import te_workload
    from tvm.s_tir.tensor_intrin.cuda import (LDMATRIX_f16_A_DYN_INTRIN, LDMATRIX_f16_B_DYN_INTRIN,
                                              MMA_f16f16f32_INTRIN, MMA_fill_16x16_f32_INTRIN,
                                              MMA_store_16x16_f32_global_INTRIN,
                                              shared_16x16_to_ldmatrix_32x8_layout)
    from tvm.testing.tir import mma_schedule

    def index_map(i, j):
        return (i // 16, j // 16, *shared_16x16_to_ldmatrix_32x8_layout(i % 16, j % 16))

    workload = te.create_prim_func(te_workload.matmul(n, n, n, in_dtype="float16", out_dtype="float32"))
    sch = mma_schedule(workload, 16, "float16", False, [1, 32, 1, 4, 2], [16, 2, 4, 1, 2], [128, 2, 1],
                       index_map, index_map, index_map, LDMATRIX_f16_A_DYN_INTRIN, LDMATRIX_f16_B_DYN_INTRIN,
                       MMA_f16f16f32_INTRIN, MMA_fill_16x16_f32_INTRIN, MMA_store_16x16_f32_global_INTRIN,
                       "shared.dyn")
    loops = sch.get_loops(sch.get_sblock("C_o_update"))
    k0, k1 = loops[3], loops[4]
    if hand is not None:
        for key, loop in (("k0", k0), ("k1", k1)):
            for ann, value in TVM_HAND_ANNOTATIONS[hand].get(key, {}).items():
                sch.annotate(loop, ann, value)
    return sch, k0, k1


# -- MetaSchedule ----------------------------------------------------------------
def annotated_pipeline_loops(sch) -> list:
    """LoopRefs of every loop of ``sch`` that carries a software-pipeline annotation,
    outermost first (the loops MetaSchedule's tensor-core rule annotated)."""
    found: list = []

    def walk(stmt):
        if isinstance(stmt, tirx.For) and read_annotation(stmt) is not None:
            found.append(stmt.loop_var.name)
        for c in _stmts_of(stmt):
            walk(c)

    for _, func in _functions(sch):
        walk(func.body)
    return [resolve_loop(sch, name) for name in found]


def meta_schedule_postproc_base():
    """(PyPostproc, derived_object) of TVM's MetaSchedule, for tvm_twill.metaschedule."""
    from tvm.s_tir.meta_schedule.postproc import PyPostproc
    from tvm.ir.utils import derived_object
    return PyPostproc, derived_object
