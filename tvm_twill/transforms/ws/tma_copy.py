"""Producer copies as few copy-engine instructions as possible (sm_90+): TMA tensor copies or bulk rows.

The warp-specialization transform (``warp_specialize``) hands every
global->shared copy nest of the loop to ``plan_tile_copy``.  It evaluates
the nest's index expressions at every point (threads, loops, vector lanes)
to get the (global, slot) element pairs, asks ``model.tma.plan_copy`` for a
plan that reproduces exactly those pairs, and proves with TVM's analyzer
what depends on run-time values:

* the global offset is ``base(block indices, loop variable) + rel(point)``
  (the point part has no other variable), the slot offset depends on the
  point only;
* ``tensor``: every box coordinate stays inside its tensor-map dimension for
  every value of the block indices and the loop variable (so TMA's
  out-of-bounds fill never replaces data the nest would have read);
* ``rows``: every run starts 16-byte aligned in global memory.

A plan that cannot be proved is not used: the caller keeps its per-lane
16-byte copies.  The tensor map is encoded on the host, before the kernel
launch (``tensormap_encode_tiled``; TVM passes it to the kernel as a
``const __grid_constant__ CUtensorMap`` parameter).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...frontend.ir import T, const_int, tirx, tvm, tvm_ffi
from ...frontend.ir import substitute as _subst
from ...model.tma import CopyPlan, plan_copy

__all__ = ["TensorMapSpec", "TileCopy", "plan_tile_copy"]

#: Swizzle modes the transform may pick for a slot in the consumer's own layout: none (a swizzled box needs
#: the slot's layout to be swizzled, which only ``wgmma_swizzle`` chooses, with ``relayout``).
MODES = (0,)
#: Slot alignment the tensor path needs (TMA writes to 128-byte aligned shared addresses).
TENSOR_ALIGN = 128


@dataclass(frozen=True)
class TensorMapSpec:
    """One tensor map as the host encodes it (static values; what a launcher outside TVM needs).

    ``param``: the kernel parameter's name; ``buffer``: the global buffer's name.  Dimensions innermost
    first; ``global_strides`` in bytes for dimensions 1..rank-1."""

    param: str
    buffer: str
    dtype: str
    global_dims: tuple[int, ...]
    global_strides: tuple[int, ...]
    box: tuple[int, ...]
    swizzle: int

    @property
    def rank(self) -> int:
        return len(self.box)

    def to_json(self) -> dict:
        return {"param": self.param, "buffer": self.buffer, "dtype": self.dtype, "rank": self.rank,
                "global_dims": list(self.global_dims), "global_strides": list(self.global_strides),
                "box": list(self.box), "element_strides": [1] * self.rank, "swizzle": self.swizzle}


@dataclass
class TileCopy:
    """A planned copy: ``host`` statements to run before the launch, ``issue(slot_ptr_offset, bar_ptr)``
    builds the elected lane's statement for one slot."""

    plan: CopyPlan
    describe: str
    host: list
    tensor_map: TensorMapSpec | None
    issue: object


# ---------------------------------------------------------------------------- evaluation at every point
_BIN = {tirx.Add: lambda a, b: a + b, tirx.Sub: lambda a, b: a - b, tirx.Mul: lambda a, b: a * b,
        tirx.FloorDiv: lambda a, b: a // b, tirx.FloorMod: lambda a, b: a % b}


def _evaluate(expr, env: list):
    """Value of an integer index expression with ``env`` = [(var, numpy array or int)]; None if unsupported."""
    if isinstance(expr, tirx.IntImm):
        return int(expr.value)
    if isinstance(expr, tirx.Var):
        return next((v for k, v in env if k.same_as(expr)), None)
    if isinstance(expr, tirx.Cast):
        return _evaluate(expr.value, env)
    for cls, fn in _BIN.items():
        if isinstance(expr, cls):
            a, b = _evaluate(expr.a, env), _evaluate(expr.b, env)
            return None if a is None or b is None else fn(a, b)
    return None


def _free_vars(expr) -> list:
    out = []
    tvm_ffi.structural_walk(expr, [(tirx.Var, lambda v: out.append(v))])
    return out


def _i32(x):
    return tirx.const(int(x), "int32")


# ---------------------------------------------------------------------------- the planner
def plan_tile_copy(func, copy, point_vars: list, outer: list, ring, slot_elems: int, elem_bytes: int,
                   index: int, tensor: bool = True, relayout=None) -> TileCopy | None:
    """Plan ``copy`` (a ``warp_specialize._Copy``), or None.  ``tensor=False``, or a tensor plan whose
    coordinates cannot be proved in range: bulk rows only.

    ``point_vars``: [(var, min, extent)] the nest's thread variables, loops and vector lane; ``outer``:
    [(var, min, extent)] the block indices and the pipelined loop variable (everything else a base
    address may use); ``ring``: the ring buffer, ``slot_elems`` its slot size; ``index``: the copy's
    number (names its tensor map); ``relayout``: a ``model.wgmma_layout.SwizzledTile`` whose 128-byte
    swizzled layout the slot takes instead of the nest's own (only a tensor copy with that swizzle)."""
    import numpy as np

    src, dst = copy.store.value, copy.store.indices[0]
    src_i = src.indices[0]
    pvars = [v for v, _, _ in point_vars]
    if any(const_int(m) is None or const_int(e) is None for _, m, e in point_vars):
        return None
    base = _subst(src_i, [(v, m) for v, m, _ in point_vars])
    ana = tvm.sym.Analyzer()
    rel = ana.simplify(src_i - base)
    if any(not any(v.same_as(p) for p in pvars) for v in _free_vars(rel) + _free_vars(dst)):
        return None  # the point part of an address depends on something else
    grids = np.meshgrid(*[np.arange(const_int(m), const_int(m) + const_int(e)) for _, m, e in point_vars],
                        indexing="ij")
    env = [(v, g.ravel()) for v, g in zip(pvars, grids)]
    g, s = _evaluate(rel, env), _evaluate(dst, env)
    if g is None or s is None:
        return None
    n = grids[0].size if grids else 1
    g = np.broadcast_to(np.asarray(g), (n,)).tolist()
    s = np.broadcast_to(np.asarray(s), (n,)).tolist()
    if relayout is not None:
        s = [relayout.physical(x * elem_bytes) // elem_bytes for x in s]
    pairs = list(zip(g, s))
    plan = plan_copy(pairs, elem_bytes, slot_elems * elem_bytes, (3,) if relayout is not None else
                     MODES if tensor else ())
    if plan is None:
        return None
    for v, m, e in outer:
        if const_int(m) is not None and const_int(e) is not None:
            ana.bind(v, tvm.ir.Range.from_min_extent(m, e))
    origin = ana.simplify(base + plan.origin[0])
    if plan.kind == "tensor":
        tile = _tensor(func, copy, plan, origin, ring, ana, index)
        if tile is not None or relayout is not None:
            return tile
        plan = plan_copy(pairs, elem_bytes, slot_elems * elem_bytes, ())
        if plan is None:
            return None
        origin = ana.simplify(base + plan.origin[0])
    return _rows(copy, plan, origin, ring, ana)


def _rows(copy, plan, origin, ring, ana) -> TileCopy | None:
    eb = plan.elem_bytes
    if not ana.can_prove(tirx.floormod(origin * eb, 16) == 0):
        return None
    src_buf = copy.store.value.source
    e0 = plan.dims[0][0]

    def issue(slot_offset, bar_ptr):
        loops = [(tirx.Var(f"ws_r{i}", "int32"), e, gs, ss) for i, (e, gs, ss) in enumerate(plan.dims[1:], 1)]
        goff, soff = origin, slot_offset + plan.origin[1]
        for v, _, gs, ss in loops:
            goff, soff = goff + v * gs, soff + v * ss
        stmt = tirx.Evaluate(T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"](
            ring.ptr_to([soff]), src_buf.ptr_to([goff]), tirx.const(e0 * eb, "uint32"), bar_ptr))
        for v, e, _, _ in reversed(loops):
            stmt = tirx.For(v, _i32(0), _i32(e), tirx.ForKind.SERIAL, stmt)
        return stmt

    grid = " x ".join(str(e) for e, _, _ in plan.dims[1:]) or "1"
    return TileCopy(plan, f"{plan.instructions} bulk copies of {e0 * eb} B ({grid} rows)", [], None, issue)


def _param_of(func, flat):
    """The N-d parameter whose flat view (``DeclBuffer`` after FlattenBuffer) is ``flat``, or None."""
    found = []

    def on_decl(d):
        if d.buffer.same_as(flat) and isinstance(d.data, tvm.ir.expr.Call) and d.data.args:
            found.extend(p for p in func.params if p.same_as(d.data.args[0]))

    tvm_ffi.structural_walk(func.body, [(tirx.DeclBuffer, on_decl)])
    if not found and any(p.same_as(flat) for p in func.params):
        found.append(flat)
    return found[0] if found else None


def _tensor(func, copy, plan, origin, ring, ana, index) -> TileCopy | None:
    eb = plan.elem_bytes
    gbuf = _param_of(func, copy.store.value.source)
    if gbuf is None:
        return None
    shape = [const_int(d) for d in gbuf.shape]
    if any(d is None for d in shape) or (gbuf.strides and len(gbuf.strides)):
        return None  # symbolic shapes and strided parameters keep the bulk copies
    if const_int(gbuf.elem_offset) != 0 or const_int(copy.store.value.source.elem_offset) != 0:
        return None  # the tensor map starts at the data pointer itself
    strides = [1] * len(shape)
    for j in range(len(shape) - 2, -1, -1):
        strides[j] = strides[j + 1] * shape[j + 1]
    # each box dimension is a sub-range of one tensor dimension j, in units of q elements of it
    subs: dict[int, list] = {}
    for i, (e, gs, _) in enumerate(plan.dims):
        j = next((j for j in range(len(shape)) if gs % strides[j] == 0 and gs // strides[j] < shape[j]), None)
        if j is None:
            return None
        subs.setdefault(j, []).append((gs // strides[j], e, i))
    dims = [None] * len(plan.dims)   # box dim i -> (tensor dim j, q, size)
    for j, lst in subs.items():
        lst.sort()
        if lst[0][0] != 1:
            return None
        for a, (q, e, i) in enumerate(lst):
            if a + 1 < len(lst):
                nq = lst[a + 1][0]
                if nq % q or nq // q < e:
                    return None
                size = nq // q
            else:
                if shape[j] % q or shape[j] // q < e:
                    return None
                size = shape[j] // q
            dims[i] = (j, q, size, a + 1 == len(lst))
    box = [e for e, _, _ in plan.dims]
    extra = [j for j in range(len(shape)) if j not in subs]
    for j in extra:
        dims.append((j, 1, shape[j], True))
        box.append(1)
    if len(dims) > 5:
        return None
    gdims = [size for _, _, size, _ in dims]
    gstrides = [strides[j] * q * eb for j, q, _, _ in dims[1:]]
    if any(st % 16 for st in gstrides):
        return None
    coords = []
    for (j, q, size, last), e in zip(dims, box):
        cj = tirx.floordiv(origin, strides[j])
        if j > 0:
            cj = tirx.floormod(cj, shape[j])
        c = tirx.floordiv(cj, q) if last else tirx.floormod(tirx.floordiv(cj, q), size)
        c = ana.simplify(c)
        if not (ana.can_prove(c >= 0) and ana.can_prove(c + e <= size)):
            return None
        coords.append(c)
    name = f"{gbuf.name}_tmap{index}"
    tmap = tirx.Var(name, T.handle("tensormap").ty)
    dtype = str(gbuf.dtype)
    rank = len(dims)

    def i64(x):
        return tirx.const(int(x), "int64")

    host = [tirx.Bind(tmap, T.tvm_stack_alloca("tensormap", 1)),
            tirx.Evaluate(T.tensormap_encode_tiled(tmap, gbuf.data, *[i64(d) for d in gdims],
                                                   *[i64(s) for s in gstrides], *[i64(b) for b in box],
                                                   *[i64(1)] * rank, descriptor_dtype=dtype, rank=rank,
                                                   swizzle=plan.swizzle))]
    op = f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes"

    def issue(slot_offset, bar_ptr):
        return tirx.Evaluate(T.ptx[op](ring.ptr_to([slot_offset]), T.address_of(tmap), *coords, bar_ptr))

    spec = TensorMapSpec(name, str(gbuf.name), dtype, tuple(gdims), tuple(gstrides), tuple(box), plan.swizzle)
    return TileCopy(plan, f"1 TMA tensor copy ({rank}-d box {' x '.join(map(str, box))}, "
                    f"{plan.bytes} B{', swizzle ' + str(32 << (plan.swizzle - 1)) + ' B' if plan.swizzle else ''})",
                    host, spec, issue)
