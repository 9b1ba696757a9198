"""Costs of the statements of a pipelined loop: what each statement does, on which unit, for how long.

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
from dataclasses import dataclass, field

from ..errors import UnsupportedLoopError
from ..model import Machine
from ..model.pipeline import PipelineAnnotation
from .cp_async import CP_ASYNC_BYTES, bound_store, plain_copy, vector_layout_reason
from .ir import (auto_copy_bytes, children, const_int, dtype_bytes, has_block, is_register, is_shared, s_tir,
                 scope_of, thread_extents, tirx, tvm, tvm_ffi, vector_lanes)
from .loops import LoopRef, pipeline_children

__all__ = ["CP_ASYNC_BYTES", "DEFAULT_QUANTUM", "DRAM_LATENCY_CYCLES", "StmtInfo", "StatementAnalyzer"]

#: Cycles per model time unit (see the module docstring).
DEFAULT_QUANTUM = 16
#: Unloaded DRAM access latency in cycles, order of magnitude from published
#: microbenchmarks of A100/H100 (about 400-600 cycles); loaded latency is higher.
DRAM_LATENCY_CYCLES = 500

_SFU_FUNCS = {"exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "tanh", "sigmoid", "sqrt", "rsqrt",
              "erf", "sin", "cos", "tan", "pow", "fast_exp", "fast_erf", "fast_tanh"}
_SHAPE = re.compile(r"m(\d+)n(\d+)k(\d+)")
_TC_DTYPES = ("float16", "bfloat16", "float8", "int8", "uint8", "int4")

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
    details: dict = field(default_factory=dict, compare=False)

    @property
    def smem(self) -> int:
        """Bytes of shared memory written per iteration (all buffers)."""
        return sum(self.smem_writes.values())

    @property
    def units(self) -> tuple[str, ...]:
        return tuple(u for u, c in sorted(self.work.items()) if c > 0)



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
    not_async: str | None = None  # a plain copy cp.async cannot run as TVM lowers it: why (cp_async)


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
        e = const_int(rg.extent)
        n *= e if e is not None else 1
    return n * dtype_bytes(region.source.dtype)


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
            ext = const_int(stmt.extent) or 1
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
        for c in children(stmt):
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


class StatementAnalyzer:
    """Walks the statements of one loop body and turns them into StmtInfo.

    ``lowered``: ``func`` and ``loop_ref`` are the function and loop after
    TVM's passes that precede InjectSoftwarePipeline
    (``lowering.lower_to_pipeline``), where thread bindings sit above the
    loop, blocks TVM rewrote may keep stale read regions (a store's regions
    are then taken from its body) and the buffers allocated in the loop body
    are compacted to one iteration (their allocation is what TVM versions).
    """

    def __init__(self, func, loop_ref: LoopRef, machine: Machine, *, lowered: bool = False):
        self.func = func
        self.loop = loop_ref
        self.m = machine
        self.costs = machine.costs
        self.lowered = lowered
        body = loop_ref.node.body
        self.alloc_bytes = {b.name: _alloc_bytes(b) for b in body.block.alloc_buffers} \
            if lowered and isinstance(body, s_tir.SBlockRealize) else {}
        # Buffers the region detector may report: parameters and every allocation.
        bufs = list(func.params)

        def collect(stmt):
            if isinstance(stmt, s_tir.SBlock):
                bufs.extend(stmt.alloc_buffers)
            for c in children(stmt):
                collect(c)
        collect(func.body)
        # buffer variables only: TVM refuses a scalar parameter (``n: T.int32``) in this map
        self.buffer_map = {b: b for b in bufs if isinstance(getattr(b, "ty", None), tirx.buffer.BufferType)}
        self.aligns = _collect_aligns(func)
        self.around = (*(a for a in loop_ref.ancestors if isinstance(a, tirx.For)), loop_ref.node)  # their ranges
        # threadIdx extents outside the loop, and the block's thread count.
        self.outer_threads = {}
        for a in loop_ref.ancestors:
            if a.kind == tirx.ForKind.THREAD_BINDING:
                tag = a.thread_binding.thread_tag
                if tag.startswith("threadIdx"):
                    self.outer_threads[tag] = const_int(a.extent) or 1
        inner = {}
        # every thread of the kernel: warp-level intrinsics (wmma) bind no threadIdx.x of their own
        kernel = next((a for a in loop_ref.ancestors if a.kind == tirx.ForKind.THREAD_BINDING), loop_ref.node)
        thread_extents(kernel, inner)
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
        thread_extents(stmt, tags)
        outer = math.prod(e for t, e in self.outer_threads.items() if t not in tags)
        out: list[_Leaf] = []

        def visit(s, mult, loops):
            if isinstance(s, tirx.For):
                ext = const_int(s.extent)
                if ext is None:
                    raise UnsupportedLoopError(
                        f"loop '{self.loop.name}': inner loop '{s.loop_var.name}' has a dynamic extent: "
                        "tile sizes must be static to estimate costs")
                visit(s.body, mult * ext, loops + (s,))
                return
            if isinstance(s, s_tir.SBlockRealize):
                blk = s.block
                if has_block(blk.body):
                    visit(blk.body, mult, loops)
                    return
                lf = self.leaf(blk, mult * (outer if auto_copy_bytes(blk) is None else 1))  # shared out
                if lf.plain_copy and auto_copy_bytes(blk) is None:  # TVM's LowerAutoCopy lays its own out
                    lf.not_async = vector_layout_reason(bound_store(s), self.around + loops, self.aligns)
                out.append(lf)
                return
            if isinstance(s, tirx.BufferStore):  # a store outside any block (opaque IR)
                out.append(_Leaf(name=s.buffer.name, count=mult * outer, reads=[],
                                 writes=[(s.buffer, dtype_bytes(s.buffer.dtype))], kind="alu"))
                return
            for c in children(s):
                visit(c, mult, loops)

        visit(stmt, 1.0, ())
        return out

    def leaf(self, blk, count) -> _Leaf:
        if self.lowered and isinstance(blk.body, tirx.BufferStore) and not blk.match_buffers:
            # a store: its regions from its body (a block TVM's passes rewrote, e.g. the shared store
            # of a manifested local stage, keeps its old read region)
            r, w = self.regions(blk.body)
        else:  # tensor intrinsics: the regions their description declares
            r, w = blk.reads, blk.writes
        reads = [(x.source, _region_bytes(x)) for x in r]
        writes = [(x.source, _region_bytes(x)) for x in w]
        flops, sfu = _leaf_work(blk)
        rs = {scope_of(b) for b, _ in reads}
        ws = {scope_of(b) for b, _ in writes}
        plain, vbytes = plain_copy(blk)
        if flops == 0 and _is_mac_reduction(blk):
            flops = 2.0
        if flops > 0:
            kind = "mma"
        elif sfu > 0:
            kind = "sfu"
        elif plain and "global" in rs and any(is_shared(s) for s in ws):
            kind = "copy"
        elif any(is_shared(s) for s in rs) and ws and all(is_register(s) for s in ws):
            kind = "ldmatrix"
        else:
            kind = "alu"
        return _Leaf(name=blk.name_hint, count=count, reads=reads, writes=writes, kind=kind, flops=flops,
                     sfu=sfu, vector_bytes=vbytes, plain_copy=plain and kind == "copy")

    def analyze(self, index: int, stmt) -> StmtInfo:
        """StmtInfo of one ordinary statement (not an inner pipeline)."""
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
            global_bytes += lf.count * sum(n for buf, n in lf.reads if scope_of(buf) == "global")
            if lf.kind not in kinds:
                kinds.append(lf.kind)
            if lf.kind == "mma":
                work["TC"] += lf.count * lf.flops / c.tc_flops_per_clock
            elif lf.kind == "sfu":
                work["SFU"] += lf.count * lf.sfu / c.mufu_per_clock
            elif lf.kind == "copy":
                b = lf.count * sum(n for buf, n in lf.writes if is_shared(scope_of(buf)))
                copy_bytes += b
                work["TMA"] += b / c.smem_bytes_per_clock
            elif lf.kind == "ldmatrix":
                b = lf.count * sum(n for buf, n in lf.reads if is_shared(scope_of(buf)))
                work["ALU"] += b / c.smem_bytes_per_clock
            else:
                elems = lf.count * sum(n / dtype_bytes(buf.dtype) for buf, n in lf.writes)
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
        # what the statement really reads: TVM's statement regions, and (lowered) the leaves' own
        # reads, which see through the stale regions of a block TVM rewrote
        true_reads = [b for lf in leaves for b, _ in lf.reads] if self.lowered else []
        rnames = _unique_names([r.source for r in reads] + true_reads)
        wnames = _unique_names(w.source for w in writes)
        exposed = [n for n in exposed if n in rnames]
        smem_writes, smem_scopes = {}, {}
        for w in writes:
            if is_shared(scope_of(w.source)):
                # all threads' stores (the region alone is per thread when threads are bound outside
                # the loop), or the padded tile when the region covers it (storage_align padding)
                stored = sum(lf.count * n for lf in leaves for b, n in lf.writes if b.same_as(w.source))
                allocated = self.alloc_bytes.get(w.source.name, 0)  # one iteration's tile, as TVM versions it
                smem_writes[w.source.name] = int(max(stored, _padded_bytes(w, self.aligns), allocated))
                smem_scopes[w.source.name] = scope_of(w.source)
        reg_writes = {}
        for w in writes:
            if is_register(scope_of(w.source)) and w.source.name not in exposed:
                total = sum(lf.count * n for lf in leaves for b, n in lf.writes if b.same_as(w.source))
                reg_writes[w.source.name] = math.ceil(total / (self.threads_per_block * 4))
        moved = tuple(sorted({int(lf.vector_bytes * vector_lanes(stmt)) for lf in leaves if lf.kind == "copy"}))
        refused = next((lf.not_async for lf in leaves if lf.not_async), None)
        async_ok = (bool(leaves) and all(lf.kind == "copy" and lf.plain_copy for lf in leaves)
                    and set(moved) <= set(CP_ASYNC_BYTES) and refused is None)
        kind = kinds[0] if len(kinds) == 1 else ("mixed" if kinds else "empty")
        name = _stmt_name(stmt, leaves, index, self.lowered)
        desc = _describe(kind, kinds, leaves, copy_bytes, work, async_ok)
        return StmtInfo(index=index, name=name, kind=kind, work=work, latency=latency, reads=tuple(rnames),
                        writes=tuple(wnames), exposed=tuple(exposed), smem_writes=smem_writes, reg_writes=reg_writes,
                        smem_scopes=smem_scopes, async_capable=async_ok, description=desc,
                        details={"kinds": tuple(kinds), "copy_bytes": copy_bytes, "vector_bytes": moved,
                                 "not_async": refused,
                                 "leaves": tuple(lf.name for lf in leaves)})

    def analyze_nested(self, index: int, inner, ann: PipelineAnnotation, statements=None) -> list[StmtInfo]:
        """Three StmtInfo (prologue, body, epilogue) for an annotated inner loop.

        ``statements``: the inner loop's pipeline statements as (statement,
        analyzer) pairs, as InjectSoftwarePipeline will see them (default:
        the children of ``inner``, analyzed by this analyzer).
        """
        name = inner.loop_var.name
        trip = const_int(inner.extent)
        if trip is None:
            raise UnsupportedLoopError(f"nested pipeline loop '{name}' has a dynamic extent: tile loops "
                                       "must be static")
        if statements is None:
            statements = [(c, self) for c in pipeline_children(inner, name)]
        children = [c for c, _ in statements]
        if len(children) != len(ann.stages):
            raise UnsupportedLoopError(
                f"nested pipeline loop '{name}' has {len(children)} statements but its annotation has "
                f"{len(ann.stages)} stages: re-run auto_pipeline on it")
        infos = [a.analyze(i, c) for i, (c, a) in enumerate(statements)]
        leaves = [a.leaves(c) for c, a in statements]
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
                smem_scopes={b: sc for i in present for b, sc in infos[i].smem_scopes.items()},
                async_capable=False, description=desc,
                details={"kinds": kinds, "inner": name, "counts": tuple(cnt),
                         "leaves": tuple(lf.name for i in present for lf in leaves[i])}))
        return out


def _alloc_bytes(buf) -> int:
    """Bytes of a buffer's allocation (its padded strides when it has them)."""
    shape = [const_int(d) or 1 for d in buf.shape]
    strides = [const_int(d) for d in buf.strides]
    if strides and shape and strides[0] is not None:
        elems = strides[0] * shape[0]
    else:
        elems = math.prod(shape)
    return int(elems * dtype_bytes(buf.dtype))


def _sum_dicts(dicts) -> dict:
    out: dict = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return out


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
    ext = [(const_int(rg.extent) or 1) for rg in region.region]
    total = math.prod(ext)
    for axis, factor, offset in aligns.get(region.source.name, ()):
        if 0 <= axis < len(ext) - 1:
            inner = math.prod(ext[axis + 1:])
            stride = inner
            while stride % factor != offset % factor:
                stride += 1
            total = total // inner * stride
    return int(total * dtype_bytes(region.source.dtype))


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
        for c in children(stmt):
            visit(c)

    visit(func.body)
    return out


def _stmt_name(stmt, leaves, index, lowered=False) -> str:
    if isinstance(stmt, tirx.For):
        names = {lf.name for lf in leaves}
        if len(names) == 1 and next(iter(names)):
            return next(iter(names))
        if lowered and names == {""} and leaves[0].writes:
            return leaves[0].writes[0][0].name
        return stmt.loop_var.name
    if isinstance(stmt, s_tir.SBlockRealize) and stmt.block.name_hint:
        return stmt.block.name_hint
    if leaves and leaves[0].name:
        return leaves[0].name
    if lowered and leaves and leaves[0].writes:  # an unnamed block TVM made (a local stage): what it fills
        return leaves[0].writes[0][0].name
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


