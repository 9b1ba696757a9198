"""The warp-specialization transform: a lowered s_tir kernel -> producer warp + consumer warps on mbarrier rings.

Runs inside ``tvm.compile`` as a pass of the ``tvm_twill_ws`` TIR pipeline
(``transforms.ws_lowering``), right after FlattenBuffer: at that point the s_tir
schedule's loops, thread bindings and flat buffers are fixed, software
pipelines of inner loops are already injected, and nothing has inserted
synchronisation yet.  It rewrites the one loop that carries the
``tvm_twill.ws_depth`` annotation (written by ``auto_pipeline(...,
warp_specialize=...)``):

* every statement of the loop body that copies global memory into a shared
  buffer allocated in the body is a **producer** statement; its buffer becomes
  a ring of ``depth`` slots; the rest of the body is the **consumer**;
* the block gets extra threads for the producer (one warp, or one warp group
  where the arch has ``setmaxnreg`` and the plan gives register budgets:
  sm_90a, sm_100a, sm_120a, ...; its other three warps only give registers back);
  every arch decision reads ``model.arch.parse_arch`` (one capability table);
  the role branch tests a warp index broadcast with ``shfl.sync``, so it is
  warp-uniform by construction;
* producer (one warp): for each iteration, wait ``empty[s]`` at ``phase ^ 1``,
  issue its copies into slot ``s`` and signal ``full[s]``: ``cp.async``
  re-distributed over the warp's 32 lanes + ``cp.async.mbarrier.arrive.noinc``
  (``full`` counts 32 lanes), or on sm_90a TMA copies completing by bytes
  (``mbarrier::complete_tx``; ``full`` counts 1) after one elected lane's
  ``arrive.expect_tx`` of the iteration's bytes: that lane issues one
  ``cp.async.bulk.tensor`` per tile or one ``cp.async.bulk`` per contiguous
  row where ``tma_copy`` finds and proves such a plan, the warp's lanes one
  16-byte ``cp.async.bulk`` per vector otherwise (a ring read only by wgmma
  descriptors takes the 128-byte swizzle, ``wgmma_swizzle``); then a
  producer tail that acquires every slot once more, so the warp exits only
  after every consumer released every slot;
* consumers: wait ``full[s]`` at ``phase``, run the original body reading
  slot ``s``, ``__syncwarp`` and one lane per warp arrives on ``empty[s]``
  (``empty`` counts the consumer warps); a wgmma body (sm_90a) instead keeps
  its groups in flight for one iteration (``transforms.wgmma_overlap``,
  ``WsKernelFacts.release_lag`` 1): no ``wait_group 0`` per group, one
  ``wgmma.wait_group G`` per iteration, then the release of the previous
  iteration's slot, and after the loop ``wait_group 0`` and the last
  release (off with the loop annotation ``tvm_twill.ws_wgmma_overlap = 0``
  or ``overlap=False``; never on a one-slot ring, which would deadlock);
* with ``tvm_twill.ws_consumer_order`` (``consumer_order``): the consumer
  warps as groups taking turns through named barriers around the body;
* archs with ``setmaxnreg``: one per role from the plan's register budgets, with
  ``__launch_bounds__(threads, 1)`` so ptxas honours them.

Slot and phase are functions of the iteration ``i``: ``s = i mod depth``,
``phase = (i div depth) mod 2``, the CUTLASS ``PipelineState`` without mutable
state.  The protocol (state-transition table in ``model/protocol.py``) is
read off the emitted statements (``WsKernelFacts.ring_protocol``) and model
checked before ``auto_pipeline`` returns (``ws_lowering.emit_and_check``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from ..errors import UnsupportedLoopError
from ..frontend.ir import T, const_int, tirx, tvm, tvm_ffi
from ..frontend.ir import substitute as _subst
from ..model.pipeline import WS_DEPTH, WS_REGISTERS, WS_SWIZZLE, WS_WGMMA_OVERLAP
from ..model.arch import parse_arch
from ..model.wgmma_layout import ATOM_BYTES
from . import wgmma_overlap as _ov
from . import wgmma_swizzle as _sw
from .consumer_order import Ordering, read_order
from .proxy_fence import consumer_fence
from .tma_copy import TENSOR_ALIGN, plan_tile_copy
from .ws_facts import WsKernelFacts, barrier_slots

__all__ = ["WsKernelFacts", "warp_specialize_func"]

_THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


def _static_shared(body) -> bool:
    """Does the kernel allocate static shared memory (which would shift the dynamic pool's alignment)?"""
    hit = []
    tvm_ffi.structural_walk(body, [(tirx.AllocBuffer, lambda a: hit.append(1) if a.buffer.scope() == "shared"
                                    else None)])
    return bool(hit)


def _u32(x):
    return tirx.const(x, "uint32")


def _i32(x):
    return tirx.const(x, "int32")


def _fail(msg: str):
    raise UnsupportedLoopError(f"warp specialization: {msg}")


# ---------------------------------------------------------------------------- finding the loop
def _path_to(stmt, pred, path=()):
    """Ancestors (outermost first) + the first node satisfying ``pred``, or None."""
    path = path + (stmt,)
    if pred(stmt):
        return path
    kids = []
    if isinstance(stmt, tirx.SeqStmt):
        kids = list(stmt.seq)
    elif isinstance(stmt, tirx.IfThenElse):
        kids = [s for s in (stmt.then_case, stmt.else_case) if s is not None]
    else:
        body = getattr(stmt, "body", None)
        kids = [body] if isinstance(body, tirx.Stmt) else []
    for k in kids:
        found = _path_to(k, pred, path)
        if found:
            return found
    return None


def _flatten(stmt):
    if isinstance(stmt, tirx.SeqStmt):
        out = []
        for s in stmt.seq:
            out += _flatten(s)
        return out
    return [stmt]


def _uses_var(node, var) -> bool:
    hit = []
    tvm_ffi.structural_walk(node, [(tirx.Var, lambda v: hit.append(1) if v.same_as(var) else None)])
    return bool(hit)


def _stores(stmt) -> list:
    out = []
    tvm_ffi.structural_walk(stmt, [(tirx.BufferStore, lambda s: out.append(s))])
    return out


# ---------------------------------------------------------------------------- copies
@dataclass
class _Copy:
    stmt: object          # the statement (a loop nest down to one BufferStore)
    dst: object           # the shared buffer written
    loops: list           # [(var, min, extent)] non-vector loops, outermost first
    vec: tuple | None     # (var, extent) of the innermost vectorized loop
    guards: list          # conditions on the path
    store: object


def _parse_copy(stmt, shared_bufs) -> _Copy | None:
    """A global->shared copy nest: For* / If* down to ``X[i] = G[j]``; None if ``stmt`` writes no ring buffer."""
    stores = _stores(stmt)
    if not any(any(s.buffer.same_as(b) for b in shared_bufs) for s in stores):
        return None
    loops, guards, vec, node = [], [], None, stmt
    while True:
        if isinstance(node, tirx.For):
            if node.kind == tirx.ForKind.VECTORIZED:
                if vec is not None:
                    _fail("a copy has two vectorized loops")
                vec = (node.loop_var, node.min, node.extent)
            elif node.kind in (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED):
                if vec is not None:
                    _fail("a copy has a loop inside its vectorized loop")
                loops.append((node.loop_var, node.min, node.extent))
            else:
                _fail(f"a copy has a {node.kind} loop; only serial, unrolled and vectorized loops are supported")
            node = node.body
        elif isinstance(node, tirx.IfThenElse) and node.else_case is None:
            guards.append(node.condition)
            node = node.then_case
        elif isinstance(node, tirx.BufferStore):
            break
        else:
            _fail(f"a statement that writes a shared tile is not a plain copy nest ({type(node).__name__})")
    dst = node.buffer
    if not any(dst.same_as(b) for b in shared_bufs):
        _fail("a copy nest writes a buffer that is not a shared tile of the loop")
    val = node.value
    if not isinstance(val, tvm.ir.expr.TensorLoad) or val.source.scope() not in ("", "global"):
        _fail(f"the statement writing '{dst.name}' is not a copy from global memory")
    if len(node.indices) != 1 or len(val.indices) != 1:
        _fail("expected flat (1-D) buffer accesses after FlattenBuffer")
    if vec is not None:
        ana = tvm.sym.Analyzer()
        v = vec[0]
        for idx in (node.indices[0], val.indices[0]):
            step = ana.simplify(_subst(idx, [(v, v + 1)]) - idx)
            if const_int(step) != 1:
                _fail(f"the vectorized copy into '{dst.name}' is not proven contiguous (TVM's analyzer does not "
                      "reduce its index step per vector lane to 1)")
    return _Copy(stmt=stmt, dst=dst, loops=loops, vec=vec, guards=guards, store=node)


# ---------------------------------------------------------------------------- ring remapping
def _is_data_of(expr, buf) -> bool:
    """``expr`` is ``buf.data`` (in TVM 0.27 a ``tirx.buffer_data`` call on the buffer)."""
    return (isinstance(expr, tvm.ir.expr.Call) and getattr(expr.op, "name", "") == "tirx.buffer_data"
            and expr.args[0].same_as(buf))


def _remap(stmt, rings: dict, slot):
    """Accesses to each shared tile X -> its ring at ``slot * slot_elems``."""
    def key(buf):
        return next((k for k in rings if k.same_as(buf)), None)

    def on_store(s):
        k = key(s.buffer)
        if k is None:
            return s
        ring, n = rings[k]
        return tirx.BufferStore(ring, s.value, [s.indices[0] + slot * n])

    def on_load(ld):
        k = key(ld.source)
        if k is None:
            return ld
        ring, n = rings[k]
        return tirx.BufferLoad(ring, [ld.indices[0] + slot * n])

    def on_call(c):
        if getattr(c.op, "name", "") == "tirx.tvm_access_ptr":
            k = next((b for b in rings if _is_data_of(c.args[1], b)), None)
            if k is not None:
                ring, n = rings[k]
                args = list(c.args)
                args[1] = ring.data
                args[2] = args[2] + slot * n
                return tvm.ir.expr.Call(c.op, args, c.attrs, ret_ty=c.ty)
        return c

    out = tvm_ffi.structural_map(stmt, [(tirx.BufferStore, on_store), (tvm.ir.expr.TensorLoad, on_load),
                                        (tvm.ir.expr.Call, on_call)], order="post")
    for buf in rings:
        if _uses_var(out, buf):
            _fail(f"'{buf.name}' is used other than by loads, stores and tvm_access_ptr")
    return out


def _flag(loop, key: str) -> bool:
    """A 0 / 1 loop annotation (absent: 1); anything else is refused in one line."""
    v = loop.annotations.get(key, 1)
    if const_int(v) not in (0, 1):
        _fail(f"the loop annotation {key} must be 0 or 1, got {v!r}")
    return bool(const_int(v))


# ---------------------------------------------------------------------------- barriers
def _wait(bar_ptr, parity, try_wait: bool, done):
    if try_wait:
        return tirx.Evaluate(T.cuda.mbarrier_wait(bar_ptr, parity))
    # sm_80: try_wait is sm_90-only; spin on test_wait.parity
    return tirx.SeqStmt([
        tirx.BufferStore(done, _u32(0), [0]),
        tirx.While(tirx.BufferLoad(done, [0]) == _u32(0),
                   tirx.Evaluate(T.ptx.mbarrier.test_wait.parity.shared.b64(
                       tirx.BufferLoad(done, [0]), bar_ptr, tirx.Cast("uint32", parity)))),
    ])


# ---------------------------------------------------------------------------- the rewrite
def warp_specialize_func(func, arch: str, overlap: bool | None = None):
    """Rewrite the annotated loop of one lowered PrimFunc; returns (new func, WsKernelFacts) or (func, None).

    ``overlap``: keep wgmma groups in flight across consumer iterations where safe (``wgmma_overlap``);
    None reads the loop's ``tvm_twill.ws_wgmma_overlap`` annotation (default 1)."""
    path = _path_to(func.body, lambda s: isinstance(s, tirx.For) and WS_DEPTH in (s.annotations or {}))
    if path is None:
        return func, None
    loop = path[-1]
    depth = int(loop.annotations[WS_DEPTH])
    regs = loop.annotations.get(WS_REGISTERS)
    regs = tuple(int(r) for r in regs) if regs is not None else None
    if depth < 1:
        _fail(f"ring depth {depth} < 1")
    caps = parse_arch(arch)
    if const_int(loop.extent) is None:
        trip = loop.extent
    else:
        trip = _i32(const_int(loop.extent))

    # thread bindings on the path; nothing but sequences / allocations / attrs between them and the loop
    attrs = [(i, s) for i, s in enumerate(path) if isinstance(s, tirx.AttrStmt) and s.attr_key == "thread_extent"
             and s.node.thread_tag in _THREAD_TAGS]
    if not attrs:
        _fail("the loop is not inside a threadIdx binding (the producer warp is carved out of the block's "
              "threads): bind threadIdx around it, or plan without warp_specialize")
    inner_i = attrs[-1][0]
    for s in path[inner_i + 1:-1]:
        if not isinstance(s, (tirx.SeqStmt, tirx.AttrStmt)):
            _fail(f"the loop is nested in a {type(s).__name__} inside the kernel; only a loop at the top of "
                  "the thread block can be warp-specialized")
    ext = {s.node.thread_tag: const_int(s.value) for _, s in attrs}
    if any(v is None for v in ext.values()):
        _fail("thread extents must be constant")
    tvars = {s.node.thread_tag: s.node.var for _, s in attrs}
    X, Y, Z = (ext.get(t, 1) for t in _THREAD_TAGS)
    n_threads = X * Y * Z
    if n_threads % 32:
        _fail(f"{n_threads} threads per block is not a whole number of warps")

    # the loop body: shared tiles, producer copies, consumer statements
    body = _flatten(loop.body)
    tiles = [s.buffer for s in body if isinstance(s, tirx.AllocBuffer) and s.buffer.scope().startswith("shared")]
    copies, consumer = [], []
    for s in body:
        if isinstance(s, tirx.AllocBuffer) and any(s.buffer.same_as(b) for b in tiles):
            continue
        c = _parse_copy(s, tiles)
        (copies if c is not None else consumer).append(c if c is not None else s)
    if not copies:
        _fail("the loop has no global->shared copy to hand to a producer warp")
    written = [c.dst for c in copies]
    for s in consumer:
        for st in _stores(s):
            if any(st.buffer.same_as(b) for b in written):
                _fail(f"'{st.buffer.name}' is written by a copy and by the loop's compute")
    tiles = [b for b in tiles if any(b.same_as(w) for w in written)]
    tile_allocs = [s for s in body if isinstance(s, tirx.AllocBuffer) and any(s.buffer.same_as(b) for b in tiles)]

    # copy engine: TMA bulk copies need 16-byte contiguous vectors and thread-invariant guards
    thread_vars = list(tvars.values())
    bulk = caps.bulk_copy and caps.expect_tx   # TMA copies completing an arrive.expect_tx phase
    for c in copies:
        vbytes = (const_int(c.vec[2]) if c.vec else 1) * tvm_ffi.dtype(str(c.dst.dtype)).bits // 8
        inner = thread_vars + [v for v, _, _ in c.loops] + ([c.vec[0]] if c.vec else [])
        if vbytes != 16 or any(_uses_var(g, v) for g in c.guards for v in inner):
            bulk = False
        if vbytes not in (4, 8, 16):
            _fail(f"the copy into '{c.dst.name}' moves {vbytes} bytes per vector; cp.async needs 4, 8 or 16")

    # rings: one per tile, slots padded to 16 bytes (128 for TMA); a ring whose tile only wgmma descriptors
    # read may take the 128-byte swizzle (wgmma_swizzle): 1024 bytes longer, used from a 1024-byte boundary
    rings = {}
    ring_allocs = []
    ring_bytes = static_ring_bytes = 0
    slot_align = TENSOR_ALIGN if bulk else 16
    tensor_ok = bulk and not _static_shared(func.body) and all(a.buffer.scope() == "shared.dyn" for a in tile_allocs)

    def geometry(b):
        eb = tvm_ffi.dtype(str(b.dtype)).bits // 8
        return -(-math.prod(const_int(d) for d in b.shape) * eb // slot_align) * slot_align // eb, eb
    sw, sw_why = {}, {}
    if tensor_ok and caps.wgmma:
        sw, sw_why = _sw.candidates(consumer, [(a.buffer, *geometry(a.buffer)) for a in tile_allocs], _uses_var)
        for b in list(sw):
            if sum(c.dst.same_as(b) for c in copies) != 1:
                sw_why[b] = "written by more than one copy"
            elif not _flag(loop, WS_SWIZZLE):
                sw_why[b] = f"{WS_SWIZZLE} = 0"
            else:
                continue
            del sw[b]
    pads = {}
    for a in tile_allocs:
        b = a.buffer
        n, eb = geometry(b)
        extra = ATOM_BYTES // eb if b in sw else 0
        ring = tirx.decl_buffer((depth * n + extra,), b.dtype, name=f"{b.name}_ring", scope=b.scope())
        rings[b] = (ring, n)
        if extra:
            pads[b] = (tirx.Var(f"ws_pad{len(pads)}", "int32"), ring, eb)
        ring_allocs.append(tirx.AllocBuffer(ring, {"buffer_data_alignment": 128}))
        ring_bytes += (depth * n + extra) * eb
        static_ring_bytes += (depth * n + extra) * eb if b.scope() == "shared" else 0
    # barrier arrays padded to 64 bytes each: the static shared memory before the dynamic pool stays a
    # multiple of 128 bytes, so the rings of the pool keep the 128-byte alignment TMA tensor copies need
    nbar = barrier_slots(depth)
    full = tirx.decl_buffer((nbar,), "uint64", name="ws_full", scope="shared")
    empty = tirx.decl_buffer((nbar,), "uint64", name="ws_empty", scope="shared")
    done = tirx.decl_buffer((1,), "uint32", name="ws_ready", scope="local")

    use_setmaxnreg = regs is not None and caps.setmaxnreg and n_threads % 128 == 0
    if regs is not None and not use_setmaxnreg:
        _fail(f"register budgets need setmaxnreg (sm_90a, sm_100a, sm_120a, ...) and a multiple of 128 consumer threads (arch {arch}, "
              f"{n_threads} threads)")
    producer_threads = 128 if use_setmaxnreg else 32
    # grow the outermost thread dimension in use
    dims = [t for t in _THREAD_TAGS if t in ext]
    grow = dims[-1]
    inner_size = n_threads // ext[grow]
    if producer_threads % inner_size:
        _fail(f"cannot add a producer warp: the inner thread dimensions hold {inner_size} threads")
    new_ext = ext[grow] + producer_threads // inner_size

    tx = tvars.get("threadIdx.x", _i32(0))
    lin = tx
    if "threadIdx.y" in tvars:
        lin = lin + tvars["threadIdx.y"] * X
    if "threadIdx.z" in tvars:
        lin = lin + tvars["threadIdx.z"] * (X * Y)
    warp = tirx.Var("ws_warp", "int32")
    lane = tirx.floormod(lin, 32)
    n_cwarps = n_threads // 32

    def slot_phase(i):
        return tirx.floormod(i, depth), tirx.floormod(tirx.floordiv(i, depth), 2)

    # ---- producer
    full_count = 1 if bulk else 32
    it = tirx.Var("ws_p", "int32")
    slot, phase = slot_phase(it)
    kval = loop.min + it
    prod_parity = tirx.bitwise_xor(phase, 1)
    prod_iter = [_wait(empty.ptr_to([slot]), prod_parity, caps.try_wait, done)]
    issue, elected, plans, host, tensor_maps, aligned = [], [], [], [], [], []
    total_bytes = _i32(0)
    block_vars = [(s.node.var, _i32(0), s.value) for s in path if isinstance(s, tirx.AttrStmt)
                  and s.attr_key == "thread_extent" and s.node.thread_tag.startswith("blockIdx")]
    for ci, c in enumerate(copies):
        j = tirx.Var(f"ws_c{ci}", "int32")
        c_lin = j * 32 + lane
        tsub = []
        if "threadIdx.x" in tvars:
            tsub.append((tvars["threadIdx.x"], tirx.floormod(c_lin, X)))
        if "threadIdx.y" in tvars:
            tsub.append((tvars["threadIdx.y"], tirx.floormod(tirx.floordiv(c_lin, X), Y)))
        if "threadIdx.z" in tvars:
            tsub.append((tvars["threadIdx.z"], tirx.floordiv(c_lin, X * Y)))
        key = next(k for k in rings if k.same_as(c.dst))
        ring, n = rings[key]
        eb = tvm_ffi.dtype(str(c.dst.dtype)).bits // 8
        vlen = const_int(c.vec[2]) if c.vec else 1
        vsub = [(c.vec[0], c.vec[1])] if c.vec else []
        dst_i = c.store.indices[0] + slot * n
        src = c.store.value
        dst_ptr = ring.ptr_to([_subst(dst_i, vsub)])
        src_ptr = src.source.ptr_to([_subst(src.indices[0], vsub)])
        tile = None
        if bulk:
            pvars = [(tvars[t], _i32(0), _i32(ext[t])) for t in _THREAD_TAGS if t in tvars] + c.loops + \
                ([c.vec] if c.vec else [])
            outer = block_vars + [(loop.loop_var, loop.min, loop.extent)]
            tile = plan_tile_copy(func, c, pvars, outer, ring, n, eb, ci, tensor=tensor_ok,
                                  relayout=sw[key].tile if key in sw else None)
            if key in sw and (tile is None or tile.plan.kind != "tensor" or tile.plan.swizzle != 3):
                sw_why[key] = "no 128-byte swizzled TMA box reproduces the copy"
                del sw[key]
                tile = plan_tile_copy(func, c, pvars, outer, ring, n, eb, ci, tensor=tensor_ok)
        if tile is not None:
            op = None
            stmt = tile.issue(slot * n + (pads[key][0] if key in sw else 0), full.ptr_to([slot]))
            for g in reversed(c.guards):
                stmt = tirx.IfThenElse(g, stmt, None)
            elected.append(stmt)
            plans.append(f"{c.dst.name}: {tile.describe}")
            host += tile.host
            if tile.tensor_map is not None:
                tensor_maps.append(tile.tensor_map)
                aligned.append((ring, pads[key][0], ATOM_BYTES) if key in sw else (ring, 0, TENSOR_ALIGN))
        elif bulk:
            plans.append(f"{c.dst.name}: {n_threads * math.prod(const_int(e) for _, _, e in c.loops)} bulk copies of "
                         f"{vlen * eb} B (one per lane and vector)")
            op = T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"](
                dst_ptr, src_ptr, _u32(vlen * eb), full.ptr_to([slot]))
        else:
            plans.append(f"{c.dst.name}: cp.async of {vlen * eb} B per lane and vector")
            kind = "cp.async.cg.shared.global" if vlen * eb == 16 else "cp.async.ca.shared.global"
            op = T.ptx[kind](dst_ptr, src_ptr, _i32(vlen * eb))
        if op is not None:
            inner = tirx.Evaluate(op)
            for g in reversed(c.guards):
                inner = tirx.IfThenElse(g, inner, None)
            for v, mn, ex in reversed(c.loops):
                inner = tirx.For(v, mn, ex, tirx.ForKind.SERIAL, inner)
            issue.append(tirx.For(j, _i32(0), _i32(n_threads // 32), tirx.ForKind.SERIAL, _subst(inner, tsub)))
        if bulk:
            nbytes = n_threads * math.prod(const_int(e) for _, _, e in c.loops) * vlen * eb
            guard = None
            for g in c.guards:
                guard = g if guard is None else tirx.And(guard, g)
            total_bytes = total_bytes + (tirx.Select(guard, _i32(nbytes), _i32(0)) if guard is not None
                                         else _i32(nbytes))
    if bulk:
        lead = [tirx.Evaluate(T.ptx.mbarrier.arrive.expect_tx.shared.b64(
            full.ptr_to([slot]), tirx.Cast("uint32", total_bytes))), *elected]
        prod_iter.append(tirx.IfThenElse(T.cuda.elect_sync() != _u32(0),
                                         tirx.SeqStmt(lead) if len(lead) > 1 else lead[0], None))
        if issue:
            prod_iter.append(tirx.Evaluate(T.cuda.warp_sync()))
            prod_iter += issue
    else:
        prod_iter += issue
        prod_iter.append(tirx.Evaluate(T.ptx["cp.async.mbarrier.arrive.noinc.shared.b64"](full.ptr_to([slot]))))
    prod_iter = _subst(tirx.SeqStmt(prod_iter), [(loop.loop_var, kval)])
    prod_loop = tirx.For(it, _i32(0), trip, tirx.ForKind.SERIAL, prod_iter)
    it_t = tirx.Var("ws_t", "int32")
    slot_t, phase_t = slot_phase(it_t)
    tail = tirx.For(it_t, trip, _i32(depth), tirx.ForKind.SERIAL,
                    _wait(empty.ptr_to([slot_t]), tirx.bitwise_xor(phase_t, 1), caps.try_wait, done))
    # TMA writes 128-byte aligned slots (1024 swizzled): the layout above makes them so; a kernel where it
    # did not hold traps at once rather than reading shifted tiles
    producer = [tirx.Evaluate(T.cuda.trap_when_assert_failed(tirx.floormod(
        T.cuda.cvta_generic_to_shared(r.ptr_to([off])), _u32(al)) == _u32(0))) for r, off, al in aligned]
    producer += [prod_loop, tail]
    if use_setmaxnreg:
        producer = [tirx.Evaluate(T.ptx.setmaxnreg.dec.sync.aligned.u32(regs[0])),
                    tirx.IfThenElse(warp == n_cwarps, tirx.SeqStmt(producer), None)]

    # ---- consumer
    it_c = tirx.Var("ws_k", "int32")
    slot_c, phase_c = slot_phase(it_c)
    chosen = {b: (sw[b], pads[b][0]) for b in sw}
    cons_stmts = [_subst(_remap(_sw.rewrite(s, chosen) if chosen else s, rings, slot_c),
                         [(loop.loop_var, loop.min + it_c)]) for s in consumer]

    def release_of(s):
        return tirx.SeqStmt([tirx.Evaluate(T.cuda.warp_sync()), tirx.IfThenElse(
            lane == 0, tirx.Evaluate(T.ptx.mbarrier.arrive.shared.b64(empty.ptr_to([s]))), None)])
    head = [_wait(full.ptr_to([slot_c]), phase_c, caps.try_wait, done)]
    if not bulk and _ov.has_wgmma(cons_stmts):   # cp.async writes in the generic proxy, wgmma reads in the async
        head.append(consumer_fence())             # one: the reader fences after the acquire (proxy_fence)
    if overlap is None:
        overlap = _flag(loop, WS_WGMMA_OVERLAP)
    ov = _ov.overlap_groups(cons_stmts, depth) if overlap else None
    order = read_order(loop)
    od = None if order is None else Ordering.build(order, warp, n_cwarps, cons_stmts, _ov.has_wgmma(cons_stmts))
    section = list(cons_stmts if ov is None else ov[0])
    if od is not None:  # ordered consumer groups: my turn, the section, the next group's turn (consumer_order)
        head.append(od.turn())
        section.append(od.pass_on(it_c, trip))
    if ov is None:   # synchronous: release slot k at the end of iteration k
        cons_body = tirx.SeqStmt([*head, *section, release_of(slot_c)])
        cons_loop = tirx.For(it_c, _i32(0), trip, tirx.ForKind.SERIAL, cons_body)
    else:            # wgmma groups of iteration k in flight while k+1 issues: release slot k-1 (wgmma_overlap)
        cons_loop = _ov.overlapped_loop(it_c, trip, tirx.SeqStmt(head) if len(head) > 1 else head[0], section,
                                        ov[1], release_of, lambda i: slot_phase(i)[0])
        cons_body = cons_loop.seq[0].body
    placed = cons_loop if od is None else tirx.SeqStmt([od.prologue(), cons_loop])

    # ---- reassemble: the innermost thread attr's body, loop replaced, becomes the consumer branch
    inner_attr = path[inner_i]
    cons_branch = tvm_ffi.structural_map(inner_attr.body, [(tirx.For, lambda f: placed if f.same_as(loop) else f)],
                                         order="post")
    if use_setmaxnreg:
        cons_branch = tirx.SeqStmt([tirx.Evaluate(T.ptx.setmaxnreg.inc.sync.aligned.u32(regs[1])), cons_branch])
    init = [tirx.Evaluate(T.ptx.mbarrier.init.shared.b64(full.ptr_to([s]), _u32(full_count))) for s in range(depth)]
    init += [tirx.Evaluate(T.ptx.mbarrier.init.shared.b64(empty.ptr_to([s]), _u32(n_cwarps))) for s in range(depth)]
    if caps.clusters:
        init.append(tirx.Evaluate(T.ptx.fence.mbarrier_init.release.cluster()))
    new_body = tirx.SeqStmt([
        *ring_allocs,
        tirx.AllocBuffer(full, {"buffer_data_alignment": 8}),
        tirx.AllocBuffer(empty, {"buffer_data_alignment": 8}),
        tirx.AllocBuffer(done, {}),
        *[tirx.Bind(v, tirx.Cast("int32", tirx.floordiv(tirx.floormod(_u32(ATOM_BYTES) - tirx.floormod(
            T.cuda.cvta_generic_to_shared(r.ptr_to([0])), _u32(ATOM_BYTES)), _u32(ATOM_BYTES)), _u32(eb))))
          for v, r, eb in pads.values()],
        tirx.Bind(warp, T.tvm_warp_shuffle(_u32(0xFFFFFFFF), tirx.floordiv(lin, 32), _i32(0), _i32(32), _i32(32))),
        tirx.IfThenElse(lin == 0, tirx.SeqStmt(init), None),
        tirx.Evaluate(T.tvm_storage_sync("shared")),
        tirx.IfThenElse(warp >= n_cwarps, tirx.SeqStmt(producer), cons_branch),
    ])
    # rebuild the chain of attrs down to the innermost thread binding
    grow_attr = next(s for _, s in attrs if s.node.thread_tag == grow)

    def rebuild(node):
        """Post order: the innermost thread attr gets the new body before the grown one (maybe itself) is
        widened to the producer's extra threads."""
        if node.same_as(inner_attr):
            b = new_body
            if use_setmaxnreg:
                b = tirx.AttrStmt(_i32(0), "tirx.launch_bounds_min_blocks_per_sm", tirx.IntImm("int64", 1), b)
            node = tirx.AttrStmt(node.node, node.attr_key, node.value, b)
        if node.attr_key == "thread_extent" and node.node.same_as(grow_attr.node):
            iv = grow_attr.node
            niv = tirx.IterVar(tvm.ir.Range(0, new_ext), iv.var, iv.iter_type, iv.thread_tag)
            return tirx.AttrStmt(niv, "thread_extent", _i32(new_ext), node.body)
        return node

    new_fbody = tvm_ffi.structural_map(func.body, [(tirx.AttrStmt, rebuild)], order="post")
    if host:  # tensor maps: encoded on the host before the launch (SplitHostDevice keeps them there)
        new_fbody = tirx.SeqStmt([*host, new_fbody])

    def parities(expr, var):
        def ev(e):
            if isinstance(e, tirx.BitwiseXor):
                a, b = ev(e.a), ev(e.b)
                return None if a is None or b is None else a ^ b
            if isinstance(e, tirx.Cast):
                return ev(e.value)
            return const_int(e)
        return tuple(ev(_subst(expr, [(var, _i32(i))])) for i in range(2 * depth + 1))

    cons_seq = _flatten(cons_body)
    reads = [i for i, st in enumerate(cons_seq) if any(_uses_var(st, r) for r, _ in rings.values())]
    releases = [i for i, st in enumerate(cons_seq) if _uses_var(st, empty)]
    waits = [i for i, st in enumerate(cons_seq) if _ov.is_wait_group(st)]   # lag 1: the release follows it
    after = list(cons_loop.seq[1:]) if ov is not None else []

    tail_n = const_int(tail.extent)
    facts = WsKernelFacts(depth=depth, consumer_threads=n_threads, producer_threads=producer_threads,
                          copy="bulk" if bulk else "cp.async", full_count=full_count, empty_count=n_cwarps,
                          ring_bytes=ring_bytes, static_ring_bytes=static_ring_bytes,
                          registers=regs if use_setmaxnreg else None,
                          producer_statements=len(copies),
                          producer_parities=parities(prod_parity, it),
                          consumer_parities=parities(phase_c, it_c), tail_acquires=tail_n,
                          release_last=bool(releases) and min(releases) > max(reads + waits, default=-1),
                          release_lag=0 if ov is None else 1, wgmma_groups=0 if ov is None else ov[1],
                          wgmma_wait=_ov.wait_group_count(cons_seq[waits[-1]]) if waits else 0,
                          final_release=ov is None or any(_uses_var(st, empty) for st in after),
                          copy_plans=tuple(plans), tensor_maps=tuple(tensor_maps),
                          operand_layouts=_sw.describe(sw, sw_why),
                          **(od.facts(cons_seq, reads, it_c, trip, placed) if od is not None else {}))
    return func.with_body(new_fbody), facts
