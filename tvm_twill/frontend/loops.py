"""Finding loops in a schedule, and the statements InjectSoftwarePipeline will see in them.

``resolve_loop`` turns a LoopRV or a loop name into a ``LoopRef`` (its For
node, function and enclosing loops); ``pipeline_children`` lists the direct
children of a loop body the way TVM's pass does (a predicate-free child
``SBlockRealize`` whose body is a ``SeqStmt`` is flattened);
``read_annotation`` reads the pipeline annotation already on a loop.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..errors import InputError, UnsupportedLoopError
from ..model.pipeline import ASYNC_STAGES, ORDER, STAGE, PipelineAnnotation
from .ir import (MANIFEST_LOCAL_STAGE, branches, children, const_int, dtype_bytes, is_shared, is_true, prim_functions,
                 s_tir, tirx, walk_stmts)

__all__ = ["LoopRef", "annotated_pipeline_loops", "kernel_shared_buffers", "local_stage_blocks",
           "loop_body_allocations", "loop_rv", "pipeline_children", "pipeline_nests", "read_annotation",
           "resolve_loop", "schedule_loops", "scratch_schedule"]


@dataclass(frozen=True)
class LoopRef:
    """A loop of a schedule: its LoopRV, its For node, name, function and enclosing loops."""

    rv: object
    node: object
    name: str
    func: str
    ancestors: tuple = ()


def find_loops(stmt, name, out):
    """Append to ``out`` every loop named ``name`` in ``stmt``."""
    if isinstance(stmt, tirx.For) and stmt.loop_var.name == name:
        out.append(stmt)
    for c in branches(stmt):  # a loop under a guard too (TVM's tile-walk kernels nest their KV loop so)
        find_loops(c, name, out)


def _loop_names(stmt, out):
    if isinstance(stmt, tirx.For):
        out.append(stmt.loop_var.name)
    for c in branches(stmt):
        _loop_names(c, out)


def _first_named_block(stmt):
    if isinstance(stmt, s_tir.SBlock) and stmt.name_hint:
        return stmt
    for c in children(stmt):
        b = _first_named_block(c)
        if b is not None:
            return b
    return None


def resolve_loop(sch, loop) -> LoopRef:
    """A LoopRef for a LoopRV or a loop name of ``sch``."""
    if isinstance(loop, str):
        hits = []
        for fname, func in prim_functions(sch):
            found = []
            find_loops(func.body, loop, found)
            hits += [(fname, f) for f in found]
        if not hits:
            names = []
            for _, func in prim_functions(sch):
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
        fname = next((f for f, func in prim_functions(sch) if _contains(func.body, node)), "main")
    return LoopRef(rv=rv, node=node, name=node.loop_var.name, func=fname, ancestors=tuple(reversed(ancestors)))


def _contains(stmt, node) -> bool:
    if stmt.same_as(node):
        return True
    return any(_contains(c, node) for c in branches(stmt))


def pipeline_children(loop_node, name: str) -> list:
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
        if isinstance(c, s_tir.SBlockRealize) and is_true(c.predicate) and isinstance(c.block.body, tirx.SeqStmt):
            children.extend(c.block.body.seq)  # TVM flattens these (its nested-pipeline rule)
        else:
            children.append(c)
    return children


def loop_body_allocations(loop_node) -> list:
    """The buffers allocated in a loop's body block and in the child blocks TVM flattens (what
    InjectSoftwarePipeline multi-versions, once TVM's earlier passes have placed the allocations)."""
    body = loop_node.body
    allocs = []
    if isinstance(body, s_tir.SBlockRealize):
        allocs.extend(body.block.alloc_buffers)
        body = body.block.body
    if isinstance(body, tirx.SeqStmt):
        for c in body.seq:
            if isinstance(c, s_tir.SBlockRealize) and is_true(c.predicate) and isinstance(c.block.body, tirx.SeqStmt):
                allocs.extend(c.block.alloc_buffers)
    return allocs


def kernel_shared_buffers(body, loop_node) -> tuple:
    """``(name, scope, bytes)`` of every shared buffer of the kernel that holds ``loop_node`` (a loop of
    ``body``, as TVM's passes before InjectSoftwarePipeline leave it): the allocations under its outermost
    ``blockIdx`` loop and in the blocks above it.  ``bytes`` is 0 for a shape that is not constant."""
    path: list = []

    def find(stmt, stack):
        if stmt.same_as(loop_node):
            path.extend(stack)
            return True
        return any(find(c, stack + [stmt]) for c in children(stmt))

    find(body, [])
    root = next((n for n in path if isinstance(n, tirx.For) and n.kind == tirx.ForKind.THREAD_BINDING
                 and n.thread_binding.thread_tag.startswith("blockIdx")), body)
    above = path[:next((i for i, n in enumerate(path) if n.same_as(root)), len(path))]
    allocs = [b for n in above if isinstance(n, s_tir.SBlock) for b in n.alloc_buffers]
    for n in walk_stmts(root):
        allocs += list(n.alloc_buffers) if isinstance(n, s_tir.SBlock) else []
        allocs += [n.buffer] if isinstance(n, tirx.AllocBuffer) else []
    out = []
    for b in allocs:
        if is_shared(b.scope()) and all(o[0] != b.name for o in out):
            dims = [const_int(d) for d in b.shape]
            nbytes = 0 if None in dims else int(math.prod(dims) * dtype_bytes(b.dtype))
            out.append((b.name, b.scope(), nbytes))
    return tuple(out)


def scratch_schedule(sch):
    """A new Schedule over the same (immutable) IR: annotating it leaves ``sch`` untouched.

    (``Schedule.copy`` fails on TVM 0.27 schedules built by ``mma_schedule``.)
    """
    return s_tir.Schedule(sch.mod)


def schedule_loops(sch) -> list:
    """``(function name, LoopRV, For node)`` of every loop of ``sch`` that holds a block, by reference:
    from each function's root block down through ``get_child_blocks`` / ``get_loops``, so loops that share
    a name stay apart.  Raises UnsupportedLoopError when a function's root block cannot be found by its
    name (another block has it)."""
    out, seen = [], []
    for fname, func in prim_functions(sch):
        body = func.body
        if not isinstance(body, s_tir.SBlockRealize):
            continue
        try:
            stack = [sch.get_sblock(body.block.name_hint, func_name=fname)]
        except Exception as err:  # noqa: BLE001 - TVM raises its own error types for an ambiguous name
            raise UnsupportedLoopError(f"function '{fname}': its root block '{body.block.name_hint}' cannot be "
                                       f"found by name ({type(err).__name__}): rename the other block") from None
        while stack:
            blk = stack.pop()
            for rv in sch.get_loops(blk):
                node = sch.get(rv)
                if not any(node.same_as(n) for n in seen):
                    seen.append(node)
                    out.append((fname, rv, node))
            stack.extend(reversed(sch.get_child_blocks(blk)))
    return out


def loop_rv(sch, node):
    """The LoopRV of the For ``node`` in ``sch`` (a schedule over IR that contains that very node, such as a
    ``scratch_schedule``), found by reference; UnsupportedLoopError when ``sch`` has no such loop."""
    rv = next((r for _, r, n in schedule_loops(sch) if n.same_as(node)), None)
    if rv is None:
        raise UnsupportedLoopError(f"loop '{node.loop_var.name}' is not a loop of this schedule's IR")
    return rv


def annotated_pipeline_loops(sch) -> list:
    """LoopRefs of every loop of ``sch`` that carries a software-pipeline annotation,
    outermost first (the loops MetaSchedule's tensor-core rule annotated), found by reference
    (``schedule_loops``): loops that share a name are told apart."""
    refs = [replace(resolve_loop(sch, rv), func=fname) for fname, rv, node in schedule_loops(sch)
            if read_annotation(node) is not None]
    return sorted(refs, key=lambda r: len(r.ancestors))  # stable: outer before inner, program order within




def pipeline_nests(sch) -> list[list[LoopRef]]:
    """The annotated pipeline loops of ``sch`` grouped into nests, each outermost first: a loop joins
    the nest of its annotated ancestor (they are re-planned together, innermost first)."""
    nests: list[list] = []
    for ref in annotated_pipeline_loops(sch):  # outermost first
        nest = next((n for n in nests if any(a.same_as(n[0].node) for a in ref.ancestors)), None)
        if nest is None:
            nests.append([ref])
        else:
            nest.append(ref)
    return nests


def local_stage_blocks(sch, ref: LoopRef) -> list:
    """SBlockRVs of the copies in loop ``ref`` that carry ``tirx.manifest_shared_memory_local_stage``
    (ManifestSharedMemoryLocalStage stages them through registers; dlight's tensor-core rules set it)."""
    names = [n.name_hint for n in walk_stmts(ref.node)
             if isinstance(n, s_tir.SBlock) and MANIFEST_LOCAL_STAGE in n.annotations]
    return [sch.get_sblock(n, func_name=ref.func) for n in names]


def read_annotation(loop_node) -> PipelineAnnotation | None:
    """The pipeline annotation on a ``tirx.For`` node, or None when it has none."""
    ann = loop_node.annotations
    if STAGE not in ann and ORDER not in ann:
        return None
    if STAGE not in ann or ORDER not in ann:
        missing = ORDER if STAGE in ann else STAGE
        raise InputError(f"loop '{loop_node.loop_var.name}' has only one of the pipeline annotations: "
                         f"add '{missing}' (InjectSoftwarePipeline needs both)")
    asyncs = tuple(int(s) for s in ann[ASYNC_STAGES]) if ASYNC_STAGES in ann else ()
    return PipelineAnnotation(tuple(int(s) for s in ann[STAGE]), tuple(int(o) for o in ann[ORDER]), asyncs)
