"""Do a loop's explicit barriers still separate what they separated, after TVM pipelined it?  Read on the TIR.

``barrier_violations(original, pipelined, loop, extent_var, lengths)`` takes two modules after TVM's passes up to
InjectSoftwarePipeline: ``original`` with the loop as written, ``pipelined`` with the loop annotated.  It runs
both loops' statement sequences for each value of ``extent_var`` (the sequence length; the pipelined one as TVM emitted it: prologue, body and
epilogue, each statement instance under its guard ``T.where(X < extent)``, where ``X`` is the iteration it
belongs to) and returns, as lines, every pair of statement instances that touch one shared buffer, one writing
it, and that the emitted code runs in the other order, or without a barrier between them where the original
had one.  Instances are named by their blocks' names (the k-th statement of that name in an iteration is the
k-th one of the original: its shared accesses must match).  Only explicit ``tvm_storage_sync`` barriers
count (TVM's ThreadSync, which adds its own, runs later); buffers are compared by name (conservative).
"""
from tvm_twill.frontend.ir import branches, children, eval_int, s_tir, scope_of, tirx, tvm, tvm_ffi
from tvm_twill.frontend.loops import pipeline_children


def _is_sync(stmt) -> bool:
    found = []
    tvm_ffi.structural_walk(stmt, [(tvm.ir.expr.Call, lambda c: found.append(
        getattr(c.op, "name", "").endswith("tvm_storage_sync")))])
    return any(found)


def _facts(stmt):
    """(key, shared reads, shared writes): key 'sync' for a barrier, else the names of its blocks."""
    if _is_sync(stmt):
        return "sync", frozenset(), frozenset()
    names, reads, writes = [], set(), set()

    def on_block(b):
        if b.name_hint:
            names.append(b.name_hint)

    def on_store(s):
        if scope_of(s.buffer).startswith("shared"):
            writes.add(s.buffer.name)

    def on_load(ld):
        if scope_of(ld.source).startswith("shared"):
            reads.add(ld.source.name)

    tvm_ffi.structural_walk(stmt, [(s_tir.SBlock, on_block), (tirx.BufferStore, on_store),
                                   (tvm.ir.expr.TensorLoad, on_load)])
    return tuple(names), frozenset(reads), frozenset(writes)


def _find_loop(stmt, name):
    if isinstance(stmt, tirx.For) and stmt.loop_var.name == name:
        return stmt
    return next((f for c in branches(stmt) for f in [_find_loop(c, name)] if f is not None), None)


def _original(mod, loop, n):
    stmts = [_facts(c) for c in pipeline_children(_find_loop(mod["main"].body, loop), loop)]
    return [(f, i) for i in range(n) for f in stmts]


def _emitted(mod, loop, extent, env):
    func = mod["main"]
    region = _find_loop(func.body, loop)
    out = []

    def iteration(pred):
        """The iteration a guard ``... and X < extent`` names, or None when ``pred`` is no such guard."""
        lts = []
        tvm_ffi.structural_walk(pred, [(tirx.LT, lts.append)])
        x = [lt.a for lt in lts if tvm_ffi.structural_equal(lt.b, extent, map_free_vars=True)]
        return x[-1] if x else None

    def visit(stmt):
        if isinstance(stmt, s_tir.SBlockRealize) and not stmt.block.name_hint:
            x = iteration(stmt.predicate)
            if x is not None:
                if _bind(stmt.predicate, env):
                    out.append((_facts(stmt.block.body), _bind(x, env)))
                return
        if isinstance(stmt, tirx.For) and stmt.loop_var.name == loop:
            for v in range(_bind(stmt.extent, env)):
                env.append((stmt.loop_var, v))
                visit(stmt.body)
                env.pop()
            return
        for c in children(stmt):
            visit(c)

    visit(_pipeline_region(func.body, region))
    return out


def _pipeline_region(body, loop):
    """The nearest sequence of statements holding ``loop``: the prologue, the loop, the epilogue."""
    def path(node):
        if node.same_as(loop):
            return [node]
        for c in branches(node):
            p = path(c)
            if p:
                return [node, *p]
        return []

    return next(n for n in reversed(path(body)) if isinstance(n, tirx.SeqStmt))


def _named(seq):
    """Each instance as (key, rank, iteration) with its shared reads / writes; barriers as None."""
    seen: dict = {}
    out = []
    for (key, r, w), it in seq:
        if key == "sync":
            out.append(None)
            continue
        rank = seen.get((key, it), 0)
        seen[(key, it)] = rank + 1
        out.append(((key, rank, it), r, w))
    return out


def _bind(expr, env):
    """``expr`` with each (variable or buffer name, int) of ``env`` put in: a buffer name stands for its loads."""
    names = {k: v for k, v in env if isinstance(k, str)}

    def load(ld):
        return tirx.const(names[ld.source.name], ld.ty.dtype) if ld.source.name in names else ld

    if names:
        expr = tvm_ffi.structural_map(expr, [(tvm.ir.expr.TensorLoad, load)])
    return eval_int(expr, [(k, v) for k, v in env if not isinstance(k, str)])


def named_var(func, name):
    """The variable of ``func`` named ``name`` (a shape variable such as the sequence length)."""
    found = []
    tvm_ffi.structural_walk(func.body, [(tirx.Var, lambda v: found.append(v) if v.name == name else None)])
    return found[0]


def trip_count(mod, loop, extent_var, length) -> int:
    """The loop's trip count when ``extent_var`` (the sequence length: a variable, or the name of a buffer
    whose loads give it) is ``length``."""
    return _bind(_find_loop(mod["main"].body, loop).extent, [(extent_var, length)])


def barrier_violations(original, pipelined, loop, extent_var, lengths):
    """The violations (module docstring) for each value of ``extent_var`` in ``lengths``; [] when none."""
    bad = []
    for length in lengths:
        n = trip_count(original, loop, extent_var, length)
        env = [(extent_var, length)]
        extent = _find_loop(original["main"].body, loop).extent
        orig, emit = _named(_original(original, loop, n)), _named(_emitted(pipelined, loop, extent, env))
        pos = {x[0]: k for k, x in enumerate(emit) if x is not None}
        acc = {x[0]: (x[1], x[2]) for x in orig if x is not None}
        if sorted(pos) != sorted(acc) or len(pos) != sum(x is not None for x in emit):
            bad.append(f"n={n}: the emitted statement instances differ from the original's")
            continue
        bad += [f"n={n}: {x[0]} emitted with other shared accesses" for x in emit
                if x is not None and (x[1], x[2]) != acc[x[0]]]
        syncs = [k for k, x in enumerate(emit) if x is None]
        for a in range(len(orig)):
            for b in range(a + 1, len(orig)):
                p, q = orig[a], orig[b]
                if p is None or q is None or not (p[2] & (q[1] | q[2]) or q[2] & p[1]):
                    continue
                pa, pb = pos[p[0]], pos[q[0]]
                if pa > pb:
                    bad.append(f"n={n}: {p[0]} now runs after {q[0]}")
                elif any(x is None for x in orig[a:b]) and not any(pa < k < pb for k in syncs):
                    bad.append(f"n={n}: no barrier left between {p[0]} and {q[0]}")
    return bad
