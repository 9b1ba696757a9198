"""WS pass 1, the role split: find the annotated loop, read the block's threads, split the body into roles.

``find_ws_loop(func, arch)`` returns a frozen ``WsLoop`` (or None when no loop
carries ``tvm_twill.ws_depth``): the loop, its ring depth and register
budgets, the thread bindings around it, and the loop body split into
**producer** copies (every global->shared copy nest into a shared tile
allocated in the body, parsed into a ``Copy``) and **consumer** statements
(the rest), plus the copy engine the producer can use (``bulk``: TMA copies
completing an ``arrive.expect_tx`` phase, which need 16-byte vectors and
thread-invariant guards; cp.async otherwise).  Nothing is rewritten here.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...frontend.ir import const_int, tirx, tvm, tvm_ffi
from ...frontend.ir import substitute as _subst
from ...model.arch import ArchCaps, parse_arch
from ...model.pipeline import WS_DEPTH, WS_REGISTERS
from ..proxy_fence import is_proxy_fence
from ..tir_util import flatten_seq, i32, path_to, stores, uses_var, ws_fail

__all__ = ["THREAD_TAGS", "Copy", "WsLoop", "find_ws_loop", "parse_copy", "split_roles"]

THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


@dataclass(frozen=True)
class Copy:
    """One producer statement: a global->shared copy nest For* / If* down to ``X[i] = G[j]``."""

    stmt: object          # the statement (a loop nest down to one BufferStore)
    dst: object           # the shared buffer written
    loops: tuple          # ((var, min, extent), ...) non-vector loops, outermost first
    vec: tuple | None     # (var, min, extent) of the innermost vectorized loop
    guards: tuple         # conditions on the path
    store: object         # ``X[i] = G[j]`` (a zero-filling copy's store with its load alone)
    fill: object = None   # a zero-filling copy ``X[i] = if_then_else(c, G[j], 0)``: ``c`` (else None)


@dataclass(frozen=True, eq=False)
class WsLoop:
    """The annotated loop of one kernel and its roles (the value every later WS pass reads)."""

    func: object          # the PrimFunc
    path: tuple           # ancestors of the loop, outermost first, the loop last
    depth: int            # ring depth: slots per ring
    regs: tuple | None    # setmaxnreg budgets (producer, consumer) from the plan, None when absent
    arch: str
    caps: ArchCaps
    trip: object          # the loop's trip count (int32)
    attrs: tuple          # ((index in path, AttrStmt), ...) of the threadIdx bindings around the loop
    ext: dict             # thread tag -> extent
    tvars: dict           # thread tag -> thread variable
    copies: tuple         # Copy of each producer statement, in body order
    consumer: tuple       # the other statements of the body, in order
    tile_allocs: tuple    # AllocBuffer of each shared tile a copy writes
    bulk: bool            # the producer issues TMA bulk copies (else cp.async)

    @property
    def loop(self):
        return self.path[-1]

    @property
    def inner_i(self) -> int:
        """Index in ``path`` of the innermost thread binding."""
        return self.attrs[-1][0]

    @property
    def n_threads(self) -> int:
        """Consumer threads: the block's threads before the producer is added."""
        x, y, z = (self.ext.get(t, 1) for t in THREAD_TAGS)
        return x * y * z


def find_ws_loop(func, arch: str) -> WsLoop | None:
    """The loop carrying ``tvm_twill.ws_depth`` with its threads and roles; None when there is none."""
    path = path_to(func.body, lambda s: isinstance(s, tirx.For) and WS_DEPTH in (s.annotations or {}))
    if path is None:
        return None
    loop = path[-1]
    depth = int(loop.annotations[WS_DEPTH])
    regs = loop.annotations.get(WS_REGISTERS)
    regs = tuple(int(r) for r in regs) if regs is not None else None
    if depth < 1:
        ws_fail(f"ring depth {depth} < 1")
    caps = parse_arch(arch)
    trip = loop.extent if const_int(loop.extent) is None else i32(const_int(loop.extent))
    attrs, ext, tvars = _thread_bindings(path)
    copies, consumer, tile_allocs = split_roles(loop.body)
    return WsLoop(func=func, path=tuple(path), depth=depth, regs=regs, arch=arch, caps=caps, trip=trip,
                  attrs=attrs, ext=ext, tvars=tvars, copies=copies, consumer=consumer, tile_allocs=tile_allocs,
                  bulk=_copy_engine(caps, copies, list(tvars.values())))


def _thread_bindings(path):
    """The threadIdx bindings on the path; nothing but sequences / allocations / attrs between them and the loop."""
    attrs = tuple((i, s) for i, s in enumerate(path) if isinstance(s, tirx.AttrStmt)
                  and s.attr_key == "thread_extent" and s.node.thread_tag in THREAD_TAGS)
    if not attrs:
        ws_fail("the loop is not inside a threadIdx binding (the producer warp is carved out of the block's "
                "threads): bind threadIdx around it, or plan without warp_specialize")
    for s in path[attrs[-1][0] + 1:-1]:
        if not isinstance(s, (tirx.SeqStmt, tirx.AttrStmt)):
            ws_fail(f"the loop is nested in a {type(s).__name__} inside the kernel; only a loop at the top of "
                    "the thread block can be warp-specialized")
    ext = {s.node.thread_tag: const_int(s.value) for _, s in attrs}
    if any(v is None for v in ext.values()):
        ws_fail("thread extents must be constant")
    tvars = {s.node.thread_tag: s.node.var for _, s in attrs}
    n = 1
    for v in ext.values():
        n *= v
    if n % 32:
        ws_fail(f"{n} threads per block is not a whole number of warps")
    return attrs, ext, tvars


def split_roles(loop_body):
    """The loop body -> (producer Copy tuple, consumer statements, AllocBuffers of the copied shared tiles).

    A statement that writes a shared tile of the loop and loads from global memory is a producer copy (or
    refused when it is not a plain copy nest); one that only computes into a shared tile (scratch such as
    a score tile exchanged between the consumer threads) stays with the consumer, its tile too."""
    body = flatten_seq(loop_body)
    tiles = [s.buffer for s in body if isinstance(s, tirx.AllocBuffer) and s.buffer.scope().startswith("shared")]
    copies, consumer = [], []
    for s in body:
        if isinstance(s, tirx.AllocBuffer) and any(s.buffer.same_as(b) for b in tiles):
            consumer.append(s)     # a copied tile's allocation is taken out below
            continue
        c = parse_copy(s, tiles) if _loads_global(s) else None
        (copies if c is not None else consumer).append(c if c is not None else s)
    if not copies:
        ws_fail("the loop has no global->shared copy to hand to a producer warp")
    written = [c.dst for c in copies]
    for s in consumer:
        for st in stores(s):
            if any(st.buffer.same_as(b) for b in written):
                ws_fail(f"'{st.buffer.name}' is written by a copy and by the loop's compute")
    tile_allocs = [s for s in consumer if isinstance(s, tirx.AllocBuffer) and any(s.buffer.same_as(b) for b in written)]
    consumer = [s for s in consumer if not any(s.same_as(a) for a in tile_allocs)]
    return tuple(copies), tuple(consumer), tuple(tile_allocs)


def _loads_global(stmt) -> bool:
    """Does ``stmt`` load from a global buffer?"""
    hit = []
    tvm_ffi.structural_walk(stmt, [(tvm.ir.expr.TensorLoad, lambda x: hit.append(1) if x.source.scope() in
                                    ("", "global") else None)])
    return bool(hit)


def _copy_engine(caps: ArchCaps, copies, thread_vars) -> bool:
    """TMA bulk copies need the arch's bulk copy + expect_tx, 16-byte vectors and thread-invariant guards."""
    bulk = caps.bulk_copy and caps.expect_tx
    for c in copies:
        vbytes = (const_int(c.vec[2]) if c.vec else 1) * tvm_ffi.dtype(str(c.dst.dtype)).bits // 8
        inner = thread_vars + [v for v, _, _ in c.loops] + ([c.vec[0]] if c.vec else [])
        if vbytes != 16 or c.fill is not None or any(uses_var(g, v) for g in c.guards for v in inner):
            bulk = False
        if vbytes not in (4, 8, 16):
            ws_fail(f"the copy into '{c.dst.name}' moves {vbytes} bytes per vector; cp.async needs 4, 8 or 16")
    return bulk


def parse_copy(stmt, shared_bufs) -> Copy | None:
    """A global->shared copy nest: For* / If* down to ``X[i] = G[j]``; None if ``stmt`` writes no ring buffer."""
    if not any(any(s.buffer.same_as(b) for b in shared_bufs) for s in stores(stmt)):
        return None
    loops, guards, vec, node = [], [], None, stmt
    while not isinstance(node, tirx.BufferStore):
        if isinstance(node, tirx.For):
            if node.kind == tirx.ForKind.VECTORIZED:
                if vec is not None:
                    ws_fail("a copy has two vectorized loops")
                vec = (node.loop_var, node.min, node.extent)
            elif node.kind in (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED):
                if vec is not None:
                    ws_fail("a copy has a loop inside its vectorized loop")
                loops.append((node.loop_var, node.min, node.extent))
            else:
                ws_fail(f"a copy has a {node.kind} loop; only serial, unrolled and vectorized loops are supported")
            node = node.body
        elif isinstance(node, tirx.IfThenElse) and node.else_case is None:
            guards.append(node.condition)
            node = node.then_case
        elif isinstance(node, tirx.SeqStmt) and len(rest := [x for x in node.seq if not _fence_only(x)]) == 1:
            node = rest[0]   # the kernel's own proxy fence after its stores: the producer's copies replace them
        else:
            ws_fail(f"a statement that writes a shared tile is not a plain copy nest ({type(node).__name__})")
    node, fill = _zero_fill(node, vec)
    _check_copy_store(node, shared_bufs, vec)
    return Copy(stmt=stmt, dst=node.buffer, loops=tuple(loops), vec=vec, guards=tuple(guards), store=node, fill=fill)


def _fence_only(stmt) -> bool:
    """``fence.proxy.async``, alone or under a guard: what a kernel written for TVM's own pipeline puts after
    its generic-proxy stores into a wgmma operand (``kernels.attention_wgmma``).  A producer copy drops it:
    TMA writes through the async proxy, and a cp.async ring's consumers fence after their full-barrier wait
    (``proxy_fence.consumer_fence``)."""
    if isinstance(stmt, tirx.IfThenElse) and stmt.else_case is None:
        stmt = stmt.then_case
    return is_proxy_fence(stmt)


def _zero_fill(node, vec):
    """``X[i] = if_then_else(c, G[j], 0)`` -> (``X[i] = G[j]``, ``c``): a copy that writes zeros where ``c``
    fails (a guarded tail load); ``c`` must hold for a whole vector.  Any other store: (node, None)."""
    val = node.value
    if not (isinstance(val, tvm.ir.expr.Call) and getattr(val.op, "name", "").endswith("if_then_else")):
        return node, None
    cond, load, zero = val.args
    if not isinstance(load, tvm.ir.expr.TensorLoad) or getattr(zero, "value", None) != 0:
        return node, None
    if vec is not None and uses_var(cond, vec[0]):
        ana = tvm.sym.Analyzer()
        ana.bind(vec[0], tvm.ir.Range.from_min_extent(vec[1], vec[2]))
        cond = ana.simplify(cond)
        if uses_var(cond, vec[0]):
            ws_fail(f"the zero-filling copy into '{node.buffer.name}' has a condition that varies within a "
                    "vector (TVM's analyzer does not prove it uniform per vector); cp.async fills whole vectors")
    return tirx.BufferStore(node.buffer, load, node.indices), cond


def _check_copy_store(node, shared_bufs, vec) -> None:
    dst = node.buffer
    if not any(dst.same_as(b) for b in shared_bufs):
        ws_fail("a copy nest writes a buffer that is not a shared tile of the loop")
    val = node.value
    if not isinstance(val, tvm.ir.expr.TensorLoad) or val.source.scope() not in ("", "global"):
        ws_fail(f"the statement writing '{dst.name}' is not a copy from global memory")
    if len(node.indices) != 1 or len(val.indices) != 1:
        ws_fail("expected flat (1-D) buffer accesses after FlattenBuffer")
    if vec is not None:
        ana = tvm.sym.Analyzer()
        v = vec[0]
        for idx in (node.indices[0], val.indices[0]):
            step = ana.simplify(_subst(idx, [(v, v + 1)]) - idx)
            if const_int(step) != 1:
                ws_fail(f"the vectorized copy into '{dst.name}' is not proven contiguous (TVM's analyzer does not "
                        "reduce its index step per vector lane to 1)")
