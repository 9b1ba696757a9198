"""The tile schedulers on TIR: the output-tile loops of a GEMM-class kernel, restructured (docs/tiles.md).

The kernel is an s_tir schedule whose tile loops are bound to ``blockIdx``: a perfect nest of one or more
``blockIdx.*`` loops above the GEMM block.  The nest is read as a ``rows x cols`` tile grid: the outer
bound loop's extent is the rows, the inner bound loops (fused, the innermost fastest) the columns; a single
bound loop is one row; bound loops of extent 1 (a batch of one) are left out.  ``rewrite`` replaces the nest by one ``blockIdx.x`` loop over CTAs and maps each CTA's
linear tile id through the grouped raster (``model.tiles.raster``) back to the old loop variables:

* ``data_parallel``: ``for tile_cta in blockIdx.x(tiles)``, tile = ``tile_cta``;
* ``persistent``: ``for tile_cta in blockIdx.x(grid): for tile_iter in range((tiles - tile_cta + grid - 1)
  // grid)``, tile = ``tile_iter * grid + tile_cta``: the ragged end is the loop's bound (``tiles // grid``
  when ``grid`` divides ``tiles``), not a guard, since TVM inserts no barrier under a condition.

Everything below the nest is the same statement with the old variables replaced, so the loops inside (the K
loop, the thread loops) keep their names.  ``kernel_resources`` reads what decides the CTAs per SM (threads,
shared memory) from the kernel as TVM lowers it for the target.
"""
from __future__ import annotations

import math

from ..errors import InputError, UnsupportedLoopError
from ..frontend.ir import const_int, dtype_bytes, s_tir, substitute, tirx, tvm, tvm_ffi

__all__ = ["TileNest", "blockidx_nest", "gemm_facts", "kernel_resources", "raster_expr", "rewrite"]

#: Names of the loops ``rewrite`` creates.
CTA_LOOP, ITER_LOOP = "tile_cta", "tile_iter"


class TileNest:
    """The ``blockIdx`` loops of a kernel: ``rvs`` (LoopRVs, outermost first), ``nodes``, ``rows`` x ``cols``."""

    def __init__(self, rvs, nodes, func: str):
        self.rvs, self.nodes, self.func = list(rvs), list(nodes), func
        self.extents = [const_int(n.extent) for n in nodes]
        big = [n for n, e in zip(nodes, self.extents) if e > 1]  # a loop of extent 1 (a batch of one) is no axis
        self.row_loop = big[0] if len(big) > 1 else None
        self.col_loops = big[1:] if len(big) > 1 else big
        self.rows = const_int(self.row_loop.extent) if self.row_loop is not None else 1
        self.cols = math.prod(const_int(n.extent) for n in self.col_loops)

    @property
    def tiles(self) -> int:
        return self.rows * self.cols


def _is_blockidx(node) -> bool:
    return (isinstance(node, tirx.For) and node.kind == tirx.ForKind.THREAD_BINDING
            and node.thread_binding.thread_tag.startswith("blockIdx"))


def _gemm_block(sch, block):
    """The block named ``block``, or the one block with a reduction axis (the GEMM's update)."""
    if block is not None:
        try:
            return sch.get_sblock(block)
        except Exception:  # noqa: BLE001 - TVM raises its own error for an unknown name
            raise InputError(f"tile_schedule: no block named {block!r} in the schedule") from None
    found = []
    for gv, func in sch.mod.functions_items():
        if not isinstance(func, tirx.PrimFunc):
            continue

        def visit(node, name=gv.name_hint):
            if any(int(iv.iter_type) == 2 for iv in node.iter_vars):
                found.append((name, node.name_hint))
        tvm_ffi.structural_walk(func.body, [(s_tir.SBlock, visit)])
    rvs = [sch.get_sblock(b, func_name=f) for f, b in found]
    depth = [len(sch.get_loops(rv)) for rv in rvs]
    deepest = [rv for rv, d in zip(rvs, depth) if d == max(depth, default=0)]
    if len(deepest) != 1:  # a blockized GEMM has its outer block and its update: the update is the deeper one
        raise InputError(f"tile_schedule: the schedule has {len(found)} blocks with a reduction axis "
                         f"({', '.join(b for _, b in found) or 'none'}): name the GEMM block (block=...)")
    return deepest[0]


def blockidx_nest(sch, block=None) -> TileNest:
    """The perfect nest of ``blockIdx`` loops above the GEMM block; InputError when it has none, they do not
    form one perfect nest, or an extent is not a constant."""
    rv = _gemm_block(sch, block)
    loops = sch.get_loops(rv)
    nodes = [sch.get(lp) for lp in loops]
    bound = [i for i, n in enumerate(nodes) if _is_blockidx(n)]
    name = sch.get(rv).name_hint
    if not bound:
        raise InputError(f"tile_schedule: no loop above block '{name}' is bound to blockIdx: bind the tile loops "
                         "(sch.bind(loop, 'blockIdx.x'))")
    if bound != list(range(bound[0], bound[0] + len(bound))) or any(
            not nodes[i].body.same_as(nodes[i + 1]) for i in bound[:-1]):
        raise InputError(f"tile_schedule: the blockIdx loops above block '{name}' are not one perfect nest")
    if any(const_int(nodes[i].extent) is None for i in bound):
        raise InputError(f"tile_schedule: a blockIdx loop above block '{name}' has a symbolic extent")
    func = next(gv.name_hint for gv, f in sch.mod.functions_items() if isinstance(f, tirx.PrimFunc)
                and _contains(f.body, nodes[bound[0]]))
    return TileNest([loops[i] for i in bound], [nodes[i] for i in bound], func)


def _contains(stmt, node) -> bool:
    hit = []
    tvm_ffi.structural_walk(stmt, [(tirx.For, lambda n: hit.append(True) if n.same_as(node) else None)])
    return bool(hit)


def raster_expr(tile, rows: int, cols: int, group: int, along: str):
    """``model.tiles.raster`` as a TIR expression of the linear tile id ``tile``: ``(row, col)``."""
    if along == "n":
        c, r = raster_expr(tile, cols, rows, group, "m")
        return r, c
    per = group * cols
    first = tirx.floordiv(tile, per) * group
    in_panel = group if rows % group == 0 else tirx.min(rows - first, group)  # the ragged last panel
    local = tirx.floormod(tile, per)
    return first + tirx.floormod(local, in_panel), tirx.floordiv(local, in_panel)


def _old_values(nest: TileNest, row, col) -> list:
    """(old loop var, its value) for the nest's loops, from the tile's row and column (a loop of extent 1: its
    min)."""
    pairs, rest = [], col
    cols = nest.col_loops
    for node in reversed(cols):
        ext = const_int(node.extent)
        pairs.append((node.loop_var, node.min + (tirx.floormod(rest, ext) if node is not cols[0] else rest)))
        rest = tirx.floordiv(rest, ext)
    if nest.row_loop is not None:
        pairs.append((nest.row_loop.loop_var, nest.row_loop.min + row))
    ones = [n for n in nest.nodes if n is not nest.row_loop and not any(n is c for c in cols)]
    return pairs + [(n.loop_var, n.min) for n in ones]


def _blocks(stmt) -> list:
    out = []
    tvm_ffi.structural_walk(stmt, [(s_tir.SBlock, out.append)])
    return out


def rewrite(sch, nest: TileNest, kind: str, grid: int, group: int, along: str) -> None:
    """Replace ``nest`` in ``sch`` by the ``kind`` scheduler's loops over ``grid`` CTAs (module doc)."""
    tiles = nest.tiles
    dtype = str(nest.nodes[0].loop_var.ty) if hasattr(nest.nodes[0].loop_var, "ty") else "int32"
    cta = tirx.Var(CTA_LOOP, dtype)
    if kind == "data_parallel" or grid >= tiles:
        tile, loop_of = cta, (lambda body: body)
    else:
        it = tirx.Var(ITER_LOOP, dtype)
        tile = it * grid + cta
        # the ragged end: CTA c runs ceil((tiles - c) / grid) tiles; a loop bound, not a guard (TVM puts no
        # barrier under a condition), uniform within the CTA
        iters = tiles // grid if tiles % grid == 0 else tirx.floordiv(tiles - cta + (grid - 1), grid)

        def loop_of(body):
            return tirx.For(it, 0, iters, tirx.ForKind.SERIAL, body)
    row, col = raster_expr(tile, nest.rows, nest.cols, group, along)
    old_body = nest.nodes[-1].body
    body = substitute(old_body, _old_values(nest, row, col))
    iv = nest.nodes[0].thread_binding
    binding = tirx.IterVar(None, tirx.Var("blockIdx_x", dtype), iv.iter_type, "blockIdx.x")
    new = tirx.For(cta, 0, tiles if kind == "data_parallel" else grid, tirx.ForKind.THREAD_BINDING,
                   loop_of(body), thread_binding=binding)
    reuse = {o: n for o, n in zip(_blocks(old_body), _blocks(body)) if not o.same_as(n)}
    try:
        sch.state.replace(sch.get_sref(nest.rvs[0]), new, reuse)
    except Exception as err:  # noqa: BLE001 - TVM raises its own errors
        last = next((ln for ln in reversed(str(err).strip().splitlines()) if ln.strip()), type(err).__name__)
        raise UnsupportedLoopError(f"tile_schedule: TVM refuses the restructured tile loops ({last.strip()})") from None


def kernel_resources(sch, tgt) -> tuple[int, int]:
    """(threads per CTA, shared-memory bytes per CTA) of the kernel as TVM's default pipeline lowers it for
    ``tgt`` (static and dynamic shared memory, before any software pipeline multiplies its buffers)."""
    mod = tirx.transform.BindTarget(tgt.with_host(tvm.target.Target("llvm")))(sch.mod)
    pipeline, _, _ = tirx.get_default_tir_pipeline(tgt)
    try:
        mod = pipeline(mod)
    except Exception as err:  # noqa: BLE001 - TVM raises ValueError / InternalError
        last = next((ln for ln in reversed(str(err).strip().splitlines()) if ln.strip()), type(err).__name__)
        raise UnsupportedLoopError(f"tile_schedule: TVM cannot lower the kernel for {tgt} ({last.strip()})") from None
    threads, smem = {}, [0]

    def on_attr(a):
        if a.attr_key == "thread_extent" and a.node.thread_tag.startswith("threadIdx"):
            threads[a.node.thread_tag] = const_int(a.value) or 1

    def on_alloc(a):
        if a.buffer.scope().startswith("shared"):
            smem[0] += int(math.prod(const_int(d) or 1 for d in a.buffer.shape) * dtype_bytes(a.buffer.dtype))
    for _, func in mod.functions_items():
        if isinstance(func, tirx.PrimFunc) and "tirx.kernel_launch_params" in (func.attrs or {}):
            tvm_ffi.structural_walk(func.body, [(tirx.AttrStmt, on_attr), (tirx.AllocBuffer, on_alloc)])
    return math.prod(threads.values()) or 1, smem[0]


def gemm_facts(sch, nest: TileNest, block=None) -> dict:
    """What the wave model needs of the kernel: ``k_iters`` (the extent of the outermost serial loop above the
    GEMM block that its reduction axis depends on: the K loop; 1 if none), ``k_loop`` (its name), and, from the
    function's buffer parameters read as ``A (m x k)``, ``B (k x n)`` and the output last, ``out_elems``
    (``m x n``), ``k`` (``sqrt(|A| |B| / |C|)``) and ``elem_bytes`` (A's); None where the parameters are not
    three buffers."""
    rv = _gemm_block(sch, block)
    node = sch.get(rv)
    reduce_at = [i for i, iv in enumerate(node.iter_vars) if int(iv.iter_type) == 2]
    k_iters, k_loop = 1, None
    bindings = _bindings(sch, rv)
    for lp in sch.get_loops(rv):
        f = sch.get(lp)
        if f.kind != tirx.ForKind.SERIAL or const_int(f.extent) in (None, 1):
            continue
        if any(_uses(bindings[i], f.loop_var) for i in reduce_at):
            k_iters, k_loop = const_int(f.extent), f.loop_var.name
            break
    func = sch.mod[nest.func]
    params = [p for p in func.params if getattr(p, "shape", None) is not None]
    facts = {"k_iters": k_iters, "k_loop": k_loop, "out_elems": None, "k": None, "elem_bytes": None}
    if len(params) == 3 and len(func.params) == 3:
        sizes = [math.prod(const_int(d) or 1 for d in p.shape) for p in params]
        facts.update(out_elems=sizes[2], k=max(1, round(math.sqrt(sizes[0] * sizes[1] / sizes[2]))),
                     elem_bytes=int(dtype_bytes(params[0].dtype)))
    return facts


def _bindings(sch, rv) -> list:
    """The iter values the block is realized with."""
    out = []
    block = sch.get(rv)

    def on_realize(r):
        if r.block.same_as(block):
            out.extend(r.iter_values)
    for _, f in sch.mod.functions_items():
        if isinstance(f, tirx.PrimFunc):
            tvm_ffi.structural_walk(f.body, [(s_tir.SBlockRealize, on_realize)])
    return out


def _uses(expr, var) -> bool:
    hit = []
    tvm_ffi.structural_walk(expr, [(tirx.Var, lambda v: hit.append(1) if v.same_as(var) else None)])
    return bool(hit)
