"""Costs of the statements of a pipelined loop: what each statement does, on which unit, for how long.

Classification and costs (per pipelined-loop iteration, for the whole thread
block, which the model treats as owning one SM)
---------------------------------------------------------------------------
Work is summed over the leaf sblocks of a statement, each weighted by its
instance count: the extents of the loops between the statement and the block
(thread-bound loops included) times the extents of the ``threadIdx`` loops
*outside* the pipelined loop that the statement does not re-bind (a statement
that does not distribute itself over those threads is run by each of them).

Each leaf is classified by ``frontend/classify.py`` (what it computes), then
costed per iteration:

==============  ====  =========================================================================
kind            unit  cycles
==============  ====  =========================================================================
``mma``         TC    2*M*N*K / tc_flops_per_clock
``sfu``         SFU   calls / mufu_per_clock
``shuffle``     ALU   shuffles / shuffle_per_clock (the chip's figure, 32)
``copy``        TMA   max(port, L2 share, DRAM share, issue): ``model.throughput.copy_cost``
``fma``         ALU   max(FMAs / fma_per_clock, shared bytes read / smem_bytes_per_clock)
``ldmatrix``    ALU   shared bytes read / smem_bytes_per_clock
``store``       ALU   elements written / fma_per_clock
``alu``         ALU   elements written / fma_per_clock
==============  ====  =========================================================================

A statement with work on several units (an inner loop of ldmatrix + mma)
gets a reservation table that holds each unit for its own cycles, all from
the first cycle: the units run in parallel, as the warps of the block
interleave them.  ``TMA`` names the copy path of the machine: cp.async in
TVM's one-role software pipeline on every arch (priced as the block's warps
issuing cp.async; ``model.throughput.unit_label`` names it so), TMA / bulk
copies only in the warp-specialized kernel on sm_90+ (its producer's issue).

Choices, stated:

* **Copies.**  A global->shared copy of B bytes per iteration occupies the
  copy path for the largest of: the shared-memory port (B / 128 B/clk), this
  CTA's share of the chip's L2 bandwidth (B x A / L2 B/clk, A = the CTAs
  running at once: min(grid, SMs), one per SM), its share of DRAM for the
  compulsory bytes (B / reuse, reuse from the raster order of the grid and
  the block coordinates the copy's address depends on,
  ``StatementAnalyzer.reuse``), and the issue of its cp.async
  instructions by the block's warps.  ``StmtInfo.copy`` keeps each term.
  With ``streaming_copies`` (the warp-specialized model) one producer
  issues every copy: on sm_90+ one TMA box per dense tile and one bulk copy
  per row of a padded tile (4 issue slots each, one elected thread), so a
  producer issuing 160 row copies is slower than one issuing 2 boxes.  The
  copy's *latency* (the delay of its outgoing edges) is
  ``DRAM_LATENCY_CYCLES + bytes / hbm_bytes_per_clock``:
  an unloaded DRAM access plus the tile's share of the per-SM DRAM
  bandwidth (any statement that reads global memory gets this latency).
  The latency is what stages hide; in TVM's s_tir pipeline there is no
  producer warp (no warp specialization), so copies are fixed-latency ops
  of the graph (``variable_latency`` False) unless ``streaming_copies``
  asks for the warp-specialized model.
* **SIMT FMA** (``x = x + a * b`` on fp32, not tensorized) runs on the CUDA
  cores; the shared-memory operands it reads go through the same port as
  ldmatrix, side by side with the FMA pipe.  An fp16/bf16/fp8/int8 one not
  marked for tensorizing (``frontend/classify.py``) is too: fp32 FMAs.
* **ldmatrix** is charged at the shared-memory bandwidth (128 B/clk/SM, the
  ``smem_bytes_per_clock`` of the machine).
* **mma.sync on Hopper** is charged at the full dense tensor rate of the
  machine; in practice mma.sync reaches less of it than wgmma.
* **Time unit.**  Cycles are quantized to ``quantum`` cycles (default
  ``DEFAULT_QUANTUM``), rounding up, and the graph is marked
  ``normalize: false``: the solver then works on small integers and
  ``evaluate_annotation`` measures a hand annotation in exactly the same
  units.


Footprints: an op's ``smem`` is the bytes of shared memory its statement writes per iteration (the tile
of all threads, with the padding of ``buffer_dim_align`` / storage_align applied), so the model's live
instances count the versions TVM allocates.  Its ``regs`` is the registers per thread of register-scope
tiles the statement writes for other statements, each element once (not once per step of a reduction);
accumulators (read-modify-write) are the same registers whatever the schedule and are not counted.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ..errors import UnsupportedLoopError
from ..model import Machine
from ..model.pipeline import PipelineAnnotation
from ..model.throughput import copy_cost, issue_cycles, unit_label, uses_bulk_copies
from .classify import LeafWork, classify, describe, leaf_work, plain_copy, predicate_fraction
from .ir import (auto_copy_bytes, branches, children, const_int, dtype_bytes, eval_int, has_block, is_register,
                 is_shared, s_tir, scope_of, substitute, thread_extents, tirx, vector_lanes)
from .cp_async import CP_ASYNC_BYTES, GUARDED_COPY, bound_store, guarded_copy, vector_layout_reason
from .stmt_info import CopyTraffic, StmtInfo
from .loops import LoopRef, pipeline_children
from .views import declared_buffers

__all__ = ["CP_ASYNC_BYTES", "CopyTraffic", "DEFAULT_QUANTUM", "DRAM_LATENCY_CYCLES", "StmtInfo", "StatementAnalyzer"]

#: Cycles per model time unit (see the module docstring).
DEFAULT_QUANTUM = 16
#: Unloaded DRAM access latency in cycles, order of magnitude from published
#: microbenchmarks of A100/H100 (about 400-600 cycles); loaded latency is higher.
DRAM_LATENCY_CYCLES = 500


@dataclass
class _Leaf:
    name: str
    count: float
    reads: list        # (buffer, bytes per instance)
    writes: list
    kind: str
    work: LeafWork = field(default_factory=LeafWork)  # per instance
    vector_bytes: float = 0.0
    plain_copy: bool = False
    global_mins: tuple = ()  # per global read: its start, in the loop variables of the kernel
    reduce_steps: int = 1    # instances that update one element (a reduction block's reduce domain)
    not_async: str | None = None  # a plain copy cp.async cannot run as TVM lowers it: why (cp_async)


def _region_bytes(region) -> float:
    n = 1
    for rg in region.region:
        e = const_int(rg.extent)
        n *= e if e is not None else 1
    return n * dtype_bytes(region.source.dtype)


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
        # Buffers the region detector may report: parameters, allocations and views (match_buffer,
        # decl_buffer: it drops an access to a buffer not in the map; ``views`` resolves them)
        bufs = list(func.params) + declared_buffers(func.body)
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
        # the grid, blockIdx.x first (the raster order), and the loop variable of each block coordinate
        self.block_vars = {a.thread_binding.thread_tag: a.loop_var for a in loop_ref.ancestors
                           if a.kind == tirx.ForKind.THREAD_BINDING
                           and a.thread_binding.thread_tag.startswith("blockIdx")}
        self.grid = {t: const_int(a.extent) or 1 for a in loop_ref.ancestors
                     if a.kind == tirx.ForKind.THREAD_BINDING
                     for t in [a.thread_binding.thread_tag] if t.startswith("blockIdx")}
        # registers per thread of the kernel's register-scope buffers (accumulators, fragments)
        local = [b for b in self.buffer_map if is_register(scope_of(b))]  # buffer variables only
        self.local_regs = math.ceil(sum(_alloc_bytes(b) for b in local) / 4 / max(1, self.threads_per_block))

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
                share = predicate_fraction(s.predicate, loops) * (outer if auto_copy_bytes(blk) is None else 1)
                lf = self.leaf(blk, mult * share, list(zip(blk.iter_vars, s.iter_values, strict=True)))
                if lf.plain_copy and auto_copy_bytes(blk) is None and lf.not_async is None:  # (LowerAutoCopy: its own)
                    lf.not_async = vector_layout_reason(bound_store(s), self.around + loops, self.aligns)
                out.append(lf)
                return
            if isinstance(s, tirx.BufferStore):  # a store outside any block (opaque IR)
                out.append(_Leaf(name=s.buffer.name, count=mult * outer, reads=[],
                                 writes=[(s.buffer, dtype_bytes(s.buffer.dtype))], kind="alu"))
                return
            for c in branches(s):  # a guard: both branches counted (an upper bound of the work)
                visit(c, mult, loops)

        visit(stmt, 1.0, ())
        return out

    def leaf(self, blk, count, bindings=None) -> _Leaf:
        if self.lowered and isinstance(blk.body, tirx.BufferStore) and not blk.match_buffers:
            # a store: its regions from its body (a block TVM's passes rewrote, e.g. the shared store
            # of a manifested local stage, keeps its old read region)
            r, w = self.regions(blk.body)
        else:  # tensor intrinsics: the regions their description declares
            r, w = blk.reads, blk.writes
        reads = [(x.source, _region_bytes(x)) for x in r]
        writes = [(x.source, _region_bytes(x)) for x in w]
        work = leaf_work(blk)
        rs = {scope_of(b) for b, _ in reads}
        ws = {scope_of(b) for b, _ in writes}
        plain, vbytes = plain_copy(blk)
        guarded = 0.0 if plain else guarded_copy(blk)  # if/else stores: costed as a copy, never a cp.async
        plain, vbytes = (True, guarded) if guarded else (plain, vbytes)
        kind = classify(blk, work, rs, ws, plain)
        bound = [(iv.var, v) for iv, v in bindings or []]
        mins = tuple(tuple(substitute(rg.min, bound) for rg in x.region) for x in r if scope_of(x.source) == "global")
        steps = math.prod(const_int(iv.dom.extent) or 1 for iv in blk.iter_vars if int(iv.iter_type) == 2)
        return _Leaf(name=blk.name_hint, count=count, reads=reads, writes=writes, kind=kind, work=work,
                     vector_bytes=vbytes, plain_copy=plain and kind == "copy", global_mins=mins,
                     reduce_steps=max(1, steps), not_async=GUARDED_COPY if guarded and kind == "copy" else None)

    def reuse(self, leaves) -> tuple[float, float]:
        """(global bytes per iteration, the compulsory part of them) of a statement's copies.

        The first wave is the first min(SMs, grid) blocks in raster order (``blockIdx.x`` fastest,
        one CTA per SM); each global read's start is evaluated at every block of the wave (other
        variables 0): a read whose start is the same for r blocks is fetched from DRAM once for
        them (reuse r, ``model.throughput.wave_reuse`` for a grid of independent coordinates).
        """
        tags = sorted(self.grid, key=lambda t: t[-1])  # blockIdx.x, .y, .z
        grid = [self.grid[t] for t in tags]
        wave = min(self.costs.sms, math.prod(grid)) if grid else 1
        blocks = []
        for linear in range(wave):
            coord, rest = [], linear
            for g in grid:
                coord.append(rest % g)
                rest //= g
            blocks.append([(self.block_vars[t], c) for t, c in zip(tags, coord, strict=True)])
        total = compulsory = 0.0
        for lf in leaves:
            if lf.kind != "copy":
                continue
            global_reads = [n for buf, n in lf.reads if scope_of(buf) == "global"]
            for n, mins in zip(global_reads, lf.global_mins, strict=True):
                tiles = {tuple(eval_int(m, b) for m in mins) for b in blocks}
                total += lf.count * n
                compulsory += lf.count * n * len(tiles) / wave
        return total, compulsory

    def analyze(self, index: int, stmt) -> StmtInfo:
        """StmtInfo of one ordinary statement (not an inner pipeline)."""
        leaves = self.leaves(stmt)
        reads, writes = self.regions(stmt)
        return self._info(index, stmt, leaves, reads, writes)

    def _info(self, index, stmt, leaves, reads, writes) -> StmtInfo:
        c = self.costs
        work, bounds, copy = self._work(leaves, stmt)
        copy_bytes = copy.nbytes if copy is not None else 0.0
        global_bytes = sum(lf.count * n for lf in leaves for buf, n in lf.reads if scope_of(buf) == "global")
        kinds = list(dict.fromkeys(lf.kind for lf in leaves))
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
                total = sum(lf.count * n / lf.reduce_steps for lf in leaves for b, n in lf.writes if b.same_as(w.source))
                reg_writes[w.source.name] = math.ceil(total / (self.threads_per_block * 4))
        moved = tuple(sorted({int(lf.vector_bytes * vector_lanes(stmt)) for lf in leaves if lf.kind == "copy"}))
        refused = next((lf.not_async for lf in leaves if lf.not_async), None)
        async_ok = (bool(leaves) and all(lf.kind == "copy" and lf.plain_copy for lf in leaves)
                    and set(moved) <= set(CP_ASYNC_BYTES) and refused is None)
        kind = kinds[0] if len(kinds) == 1 else ("mixed" if kinds else "empty")
        name = _stmt_name(stmt, leaves, index, self.lowered)
        desc = describe(kind, kinds, copy_bytes, async_ok, copy.label if copy is not None else "")
        if copy_bytes and c.chip is not None:  # what a producer warp issues when the loop is specialized
            producer = _producer_instructions(writes, self.aligns, c, copy_bytes)
            copy = replace(copy, producer=producer, producer_issue=issue_cycles(
                c.chip, producer, warps=1 if "cp.async" not in producer else 4))
        flops = sum(lf.count * (lf.work.flops if lf.kind == "mma" else 2 * lf.work.fmas if lf.kind == "fma" else 0)
                    for lf in leaves)
        return StmtInfo(index=index, name=name, kind=kind, work=work, latency=latency, reads=tuple(rnames),
                        writes=tuple(wnames), exposed=tuple(exposed), smem_writes=smem_writes, reg_writes=reg_writes,
                        smem_scopes=smem_scopes, async_capable=async_ok, description=desc, kinds=tuple(kinds),
                        leaves=tuple(lf.name for lf in leaves), flops=flops, bounds=bounds, copy=copy,
                        vector_bytes=moved, not_async=refused)

    def _work(self, leaves, stmt) -> tuple[dict, dict, CopyTraffic | None]:
        """(unit -> cycles, throughput bound -> cycles, the copy's traffic) of one iteration's leaves."""
        c = self.costs
        work = {"TC": 0.0, "TMA": 0.0, "ALU": 0.0, "SFU": 0.0}
        bounds: dict = {}

        def add(unit, bound, cycles):
            work[unit] += cycles
            bounds[bound] = bounds.get(bound, 0.0) + cycles
        copy_bytes, instructions = 0.0, 0.0
        for lf in leaves:
            n, wk = lf.count, lf.work
            smem_read = n * sum(b for buf, b in lf.reads if is_shared(scope_of(buf))) / c.smem_bytes_per_clock
            if lf.kind == "mma":
                add("TC", "tensor core", n * wk.flops / c.tc_flops_per_clock)
            elif lf.kind == "sfu":
                add("SFU", "SFU", n * wk.sfu / c.mufu_per_clock)
            elif lf.kind == "shuffle":
                add("ALU", "CUDA cores", n * wk.shuffles / (c.chip.shuffle_per_clock if c.chip else 32))
            elif lf.kind == "copy":
                b = n * sum(nb for buf, nb in lf.writes if is_shared(scope_of(buf)))
                copy_bytes += b
                instructions += b / (32 * max(4.0, lf.vector_bytes * vector_lanes(stmt)))
            elif lf.kind == "fma":  # the FMA pipe and the shared-memory port run side by side
                fma = n * wk.fmas / c.fma_per_clock
                work["ALU"] += max(fma, smem_read)
                bounds["CUDA cores"] = bounds.get("CUDA cores", 0.0) + fma
                bounds["shared memory"] = bounds.get("shared memory", 0.0) + smem_read
            elif lf.kind == "ldmatrix":
                add("ALU", "shared memory", smem_read)
            else:  # alu, store: elementwise work on the CUDA cores
                elems = n * sum(nb / dtype_bytes(buf.dtype) for buf, nb in lf.writes)
                add("ALU", "CUDA cores", elems / c.fma_per_clock)
        copy = None
        if copy_bytes:
            copy = self._copy_cycles(leaves, copy_bytes, instructions)
            work["TMA"] += copy.cycles
        return {u: v for u, v in work.items() if v > 0}, bounds, copy

    def _copy_cycles(self, leaves, nbytes: float, instructions: float) -> CopyTraffic:
        """A statement's global->shared copies: the slowest of the shared-memory port, this CTA's
        share of L2 and of DRAM (compulsory bytes, ``reuse``), and the issue of its cp.async
        instructions by the block's warps (model/throughput.py)."""
        c = self.costs
        if c.chip is None:  # a CostModel without chip figures: the shared-memory port alone
            return CopyTraffic(nbytes=nbytes, cycles=nbytes / c.smem_bytes_per_clock)
        total, compulsory = self.reuse(leaves)
        reuse = total / compulsory if compulsory else 1.0
        active = min(math.prod(self.grid.values()), c.sms)
        cc = copy_cost(c, nbytes, reuse=reuse, active=active)
        issue = issue_cycles(c.chip, {"cp.async": instructions}, warps=max(1, self.threads_per_block // 32))
        cycles = max(cc.cycles, issue)
        bound = "issue" if issue > cc.cycles else cc.bound
        label = (f"{bound}-bound on {unit_label(c, 'TMA')}: port {cc.port:.0f}, L2 {cc.l2:.0f}, DRAM {cc.dram:.0f} "
                 f"(reuse {reuse:.1f}), issue {issue:.0f} cycles")
        return CopyTraffic(nbytes=nbytes, cycles=cycles, reuse=reuse, port=cc.port, l2=cc.l2, dram=cc.dram,
                           issue=issue, bound=bound, active=active, label=label)

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
                async_capable=False, description=desc, kinds=kinds, inner=name, counts=tuple(cnt),
                flops=sum(cnt[i] * infos[i].flops for i in present),
                bounds=_sum_dicts({b: cnt[i] * v for b, v in infos[i].bounds.items()} for i in present),
                leaves=tuple(lf.name for i in present for lf in leaves[i])))
        return out


def _producer_instructions(writes, aligns, costs, nbytes: float) -> dict:
    """What the producer issues per iteration for a statement's shared tiles: on sm_90+ one elected
    thread issues one TMA box per dense tile and one bulk copy per row of a padded one
    (storage_align; ``transforms/tma_copy.py`` plans the same); before sm_90 the producer warp
    group issues 16-byte cp.async, one warp instruction per 512 bytes."""
    if not uses_bulk_copies(costs):
        return {"cp.async": nbytes / 512}
    out = {"tma": 0, "bulk": 0}
    for w in writes:
        if not is_shared(scope_of(w.source)):
            continue
        ext = [(const_int(rg.extent) or 1) for rg in w.region]
        dense = math.prod(ext) * dtype_bytes(w.source.dtype)
        if _padded_bytes(w, aligns) > dense:
            out["bulk"] += math.prod(ext[:-1])
        else:
            out["tma"] += 1
    return {k: v for k, v in out.items() if v}


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
