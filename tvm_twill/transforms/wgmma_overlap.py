"""wgmma groups in flight across iterations of a warp-specialized consumer loop (sm_90a).

The wgmma tensor intrinsic (``kernels.wgmma_intrinsics``) is one synchronous
group per call: ``wgmma.fence``, ``mma_async``, ``commit_group``,
``wait_group 0``.  In the consumer loop of ``transforms.ws.rewrite``
that idles the tensor cores while each group drains, and the consumer
releases slot ``s`` only after all of its MMAs finished.  This module
rewrites the consumer to CUTLASS's Hopper mainloop (``release_lag`` 1)::

    for k in range(trip):
        wait full[k mod depth]
        <the body, every wgmma.wait_group 0 dropped: fences, MMAs, commits>
        wgmma.wait_group G        # G = commit groups per iteration: iteration k-1's groups are done
        if k >= 1: release slot (k-1) mod depth
    wgmma.wait_group 0
    release slot (trip-1) mod depth

``overlap_groups`` decides whether that is safe and counts ``G`` statically
(commits times the constant trip counts of the loops around them); it
returns None (the transform keeps the synchronous form, ``release_lag`` 0)
when the body has no wgmma wait, a wait other than ``wait_group 0``, a
commit under a branch, a ``while`` or a loop of unknown trip count, ``G``
outside [1, 7] (``wgmma.wait_group`` takes 0-7), a ring of fewer than 2
slots (with one slot the producer cannot refill it before the consumer
releases it, which it does only after the next iteration's data arrived:
a deadlock, see ``model/protocol.py``), or an in-flight register operand
of an MMA (the accumulator) that another statement of the body reads or
writes.  ``overlapped_loop`` builds the loop above.
"""
from __future__ import annotations

from ..frontend.ir import T, const_int, tirx, tvm, tvm_ffi
from .tir_util import op_name

__all__ = ["MAX_WAIT", "commits", "drop_waits", "has_wgmma", "is_wait_group", "overlap_groups", "overlapped_loop",
           "wait_calls", "wait_group_count"]

#: ``wgmma.wait_group N`` takes N in [0, 7].
MAX_WAIT = 7

_WAIT, _COMMIT, _FENCE = "tirx.ptx.wgmma_wait_group", "tirx.ptx.wgmma_commit_group", "tirx.ptx.wgmma_fence"


def _is_mma(call) -> bool:
    name = op_name(call)
    return name.startswith("tirx.ptx.wgmma_") and name not in (_WAIT, _COMMIT, _FENCE)


def has_wgmma(stmts) -> bool:
    """Does any of ``stmts`` issue a wgmma MMA?"""
    found = []
    for s in stmts:
        tvm_ffi.structural_walk(s, [(tvm.ir.expr.Call, lambda c: found.append(1) if _is_mma(c) else None)])
    return bool(found)


def is_wait_group(stmt) -> bool:
    """``stmt`` is one ``wgmma.wait_group N`` statement."""
    return isinstance(stmt, tirx.Evaluate) and op_name(stmt.value) == _WAIT


def wait_group_count(stmt) -> int | None:
    """N of a ``wgmma.wait_group N`` statement, else None."""
    return const_int(stmt.value.args[0]) if is_wait_group(stmt) else None


def _calls(node, name) -> list:
    out = []
    tvm_ffi.structural_walk(node, [(tvm.ir.expr.Call, lambda c: out.append(c) if op_name(c) == name else None)])
    return out


def _commits(stmt) -> int | None:
    """Commit groups one execution of ``stmt`` issues, or None when it is not a static count."""
    if not _calls(stmt, _COMMIT):
        return 0
    if isinstance(stmt, tirx.SeqStmt):
        counts = [_commits(s) for s in stmt.seq]
        return None if None in counts else sum(counts)
    if isinstance(stmt, tirx.Evaluate):
        return 1 if op_name(stmt.value) == _COMMIT else None
    if isinstance(stmt, tirx.For):
        n, inner = const_int(stmt.extent), _commits(stmt.body)
        return None if n is None or inner is None else n * inner
    if isinstance(stmt, (tirx.IfThenElse, tirx.While)):
        return None
    body = getattr(stmt, "body", None)
    return _commits(body) if isinstance(body, tirx.Stmt) else None


def wait_calls(stmt) -> list:
    """Every ``wgmma.wait_group`` call under ``stmt``."""
    return _calls(stmt, _WAIT)


def _drop_waits(stmt):
    """``stmt`` without its ``wgmma.wait_group 0`` statements (as no-op evaluates, which RemoveNoOp drops)."""
    return tvm_ffi.structural_map(stmt, [(tirx.Evaluate, lambda e: tirx.Evaluate(tirx.const(0, "int32"))
                                          if is_wait_group(e) else e)], order="post")


def _in_flight_registers_private(stmts) -> bool:
    """Every register operand of an MMA (not a uint64 descriptor) is touched by MMAs only."""
    mmas = []
    for s in stmts:
        tvm_ffi.structural_walk(s, [(tvm.ir.expr.Call, lambda c: mmas.append(c) if _is_mma(c) else None)])
    args = [a for c in mmas for a in c.args if isinstance(a, tvm.ir.expr.TensorLoad)]
    regs = []
    for a in args:
        if str(a.ty) != "uint64" and not any(a.source.same_as(r) for r in regs):
            regs.append(a.source)
    if not regs:
        return True
    loads, stores = [], []
    for s in stmts:
        tvm_ffi.structural_walk(s, [
            (tvm.ir.expr.TensorLoad, lambda ld: loads.append(1) if any(ld.source.same_as(r) for r in regs) else None),
            (tirx.BufferStore, lambda st: stores.append(1) if any(st.buffer.same_as(r) for r in regs) else None)])
    in_mma = sum(1 for a in args if any(a.source.same_as(r) for r in regs))
    return not stores and len(loads) == in_mma


def overlap_groups(stmts, depth: int) -> tuple[list, int] | None:
    """(the consumer statements without their ``wait_group 0``, commit groups per iteration), or None when
    the overlapped form does not apply (module docstring)."""
    waits = [c for s in stmts for c in _calls(s, _WAIT)]
    if not waits or depth < 2 or any(const_int(c.args[0]) != 0 for c in waits):
        return None
    counts = [_commits(s) for s in stmts]
    if None in counts or not 1 <= sum(counts) <= MAX_WAIT:
        return None
    if not _in_flight_registers_private(stmts):
        return None
    return [_drop_waits(s) for s in stmts], sum(counts)


def overlapped_loop(it, trip, head, body, groups: int, release_of, slot_of):
    """The consumer loop over ``it`` in ``[0, trip)`` with one iteration's groups left in flight (module
    docstring); ``head``: the wait on ``full``; ``release_of(slot)``: the release statement of a slot;
    ``slot_of(i)``: the slot of iteration ``i``."""
    zero = tirx.const(0, "int32")
    loop = tirx.For(it, zero, trip, tirx.ForKind.SERIAL, tirx.SeqStmt([
        head, *body,
        tirx.Evaluate(T.ptx.wgmma.wait_group.sync.aligned(groups)),
        tirx.IfThenElse(it >= 1, release_of(slot_of(it - 1)), None)]))
    last = release_of(slot_of(trip - 1))
    n = const_int(trip)
    if n is None:
        last = tirx.IfThenElse(trip >= 1, last, None)
    tail = [tirx.Evaluate(T.ptx.wgmma.wait_group.sync.aligned(0))] + ([last] if n is None or n >= 1 else [])
    return tirx.SeqStmt([loop, *tail])


#: Public names of the helpers ``look_ahead`` shares.
commits = _commits
drop_waits = _drop_waits
