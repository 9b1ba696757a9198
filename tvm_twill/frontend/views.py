"""Views: buffers that name another buffer's storage, resolved to the buffer that owns it.

Why
---
A buffer of a TIR function may be a *view* of another one's storage:

* a block's ``Gv = T.match_buffer(G[tx, 0:72], (72,))``, at any level: the
  statement's own block, the pipelined loop's body block, a block around the
  loop, the root block;
* a ``T.decl_buffer(shape, data=G.data, elem_offset=...)`` anywhere in the
  function (TVMScript prints one of the same size as ``G.view(...)``);
* a buffer bound to another (``Bind`` / ``LetStmt`` of a buffer variable);
* a view of a view.

TVM's statement regions name the view (``Gv[i]``), so a read of ``G`` and a
write of ``Gv`` look like two buffers to every rule that compares buffers by
name: the write-after-read between them was missed (issue #38: a plan let
iteration i + 1 write a row of a parameter through a match_buffer view before
iteration i read it, 268 wrong elements on llvm).  ``extract`` therefore
resolves every access to its *root* (a parameter or an allocation: a buffer
that is no view) before any edge or hazard is computed (``Views.resolve``).
A ``T.Buffer(..., data=G.data)`` used without a declaration is not a case:
TVM's schedule refuses such a function (it is not well-formed).

Coordinates
-----------
An access through a view becomes an access to the root in the root's
coordinates, so that ``hazards`` compares it with the root's other accesses
exactly as before:

* a match_buffer maps index for index: ``Gv[i + 1]`` of ``G[tx, 0:72]`` is
  ``G[tx, i + 1]`` (TVM accepts a view whose shape is the region's trailing
  extents, the leading ones 1, and binds its strides and offset to the
  parent's); one that is not of this form would be taken as the whole region
  it matches (every access through it lies inside);
* a root with a ``decl_buffer`` view anywhere has every access (its own and
  its views') compared as the one-dimensional interval of addresses it spans,
  ``elem_offset + sum(index * stride)`` from the first to the last element of
  the box, in elements of the root (in bytes when the views' element sizes
  differ): the interval holds every element the box touches, so disjoint
  intervals prove disjoint accesses and an overlap is never missed;
* a view whose storage cannot be placed (a ``decl_buffer`` over an address
  expression, a bound buffer expression) is taken as the whole root.

Names follow: a statement that reads or writes a view reads or writes its
root (``StmtInfo.reads`` / ``writes`` / ``exposed``), so the same-iteration
read-after-write edges of ``extract`` see through views too.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .ir import branches, const_int, s_tir, substitute, tirx, tvm, tvm_ffi

__all__ = ["Views", "ViewRegion", "declared_buffers"]

_BUFFER_DATA = "tirx.buffer_data"


def _is_buffer(v) -> bool:
    return isinstance(v, tirx.Var) and isinstance(getattr(v, "ty", None), tirx.buffer.BufferType)


def declared_buffers(body) -> list:
    """Every buffer ``body`` allocates (a block's ``alloc_buffers``), matches (a block's ``match_buffers``) or
    declares (``DeclBuffer``): with the parameters, every buffer a region of the function may name."""
    out: list = []

    def on_block(blk):
        out.extend(blk.alloc_buffers)
        out.extend(m.buffer for m in blk.match_buffers)

    tvm_ffi.structural_walk(body, [(s_tir.SBlock, on_block), (tirx.DeclBuffer, lambda d: out.append(d.buffer))])
    return out


@dataclass(frozen=True)
class ViewRegion:
    """A region of a root buffer: ``source`` the root, ``region`` one range per dimension (one range, an
    interval of addresses, when the root is compared flat)."""

    source: object
    region: tuple


@dataclass(frozen=True)
class _View:
    buffer: object
    parents: tuple       # the buffers whose storage it names
    kind: str            # "match", "decl" (elem_offset from the data pointer), "same" (an alias), "unknown"
    region: tuple = ()   # match: the matched ranges of the parent (block variables substituted)
    offset: object = None  # decl: the elem_offset (block variables substituted)


def _bits(buf) -> int:
    d = tvm_ffi.dtype(str(buf.ty.dtype))
    return d.bits * d.lanes


def _strides(buf) -> list:
    """Elements between neighbours of each dimension: the declared strides, else the compact ones."""
    t = buf.ty
    if len(t.strides):
        return list(t.strides)
    out, acc = [], 1
    for s in reversed(list(t.shape)):
        out.append(acc)
        acc = acc * s
    return out[::-1]


class Views:
    """The views of the buffers of a function (or of several: their union) and the buffers that own them."""

    def __init__(self, *funcs):
        self._views: dict = {}
        self._plain: set = set()  # names of buffers that are not views
        for func in funcs:
            self._plain.update(p.name for p in func.params if _is_buffer(p))
            self._collect(func.body, [])
        self._an = tvm.sym.Analyzer()
        groups: dict = {}
        for v in self._views:
            for r in self.roots(v):
                groups.setdefault(r, []).append(v)
        #: roots compared as address intervals (a decl_buffer view somewhere) -> their unit, in bits
        self._flat: dict = {}
        for r, members in groups.items():
            if any(self._views[m].kind == "decl" for m in members):
                sizes = {_bits(b) for b in (r, *members)}
                self._flat[r] = _bits(r) if len(sizes) == 1 else 1
        self._names: dict = {}
        for v in self._views:
            self._names.setdefault(v.name, set()).update(r.name for r in self.roots(v))

    # -- collection ---------------------------------------------------------------------------
    def _collect(self, stmt, vmap) -> None:
        if isinstance(stmt, s_tir.SBlockRealize):
            blk = stmt.block
            inner = vmap + [(iv.var, substitute(val, vmap)) for iv, val in zip(blk.iter_vars, stmt.iter_values,
                                                                                 strict=True)]
            self._plain.update(b.name for b in blk.alloc_buffers)
            for mb in blk.match_buffers:
                region = tuple(tvm.ir.Range.from_min_extent(substitute(r.min, inner), substitute(r.extent, inner))
                               for r in mb.source.region)
                self._add(_View(mb.buffer, (mb.source.source,), "match", region=region))
            for c in branches(blk):
                self._collect(c, inner)
            return
        if isinstance(stmt, tirx.DeclBuffer):
            self._decl(stmt, vmap)
        elif isinstance(stmt, (tirx.Bind, tirx.LetStmt)) and _is_buffer(stmt.var):
            parents = _buffer_vars(stmt.value, stmt.var)
            if parents:
                self._add(_View(stmt.var, tuple(parents), "same" if _is_buffer(stmt.value) else "unknown"))
        for c in branches(stmt):
            self._collect(c, vmap)

    def _decl(self, stmt, vmap) -> None:
        buf, data = stmt.buffer, stmt.data
        parents = _buffer_vars(data, buf) if data is not None else []
        if not parents:
            self._plain.add(buf.name)  # its own storage
            return
        direct = (isinstance(data, tvm.ir.expr.Call) and getattr(data.op, "name", "") == _BUFFER_DATA
                  and len(data.args) == 1 and _is_buffer(data.args[0]))
        self._add(_View(buf, tuple(parents), "decl" if direct else "unknown",
                        offset=substitute(buf.ty.elem_offset, vmap)))

    def _add(self, view: _View) -> None:
        if view.buffer not in self._views:  # the function as written and as lowered share buffers
            self._views[view.buffer] = view

    # -- roots --------------------------------------------------------------------------------
    def roots(self, buf, _seen=()) -> list:
        """The buffers that own ``buf``'s storage (``[buf]`` for a buffer that is no view)."""
        v = self._views.get(buf)
        if v is None or any(buf.same_as(s) for s in _seen):
            return [buf]
        out: list = []
        for p in v.parents:
            out += [r for r in self.roots(p, (*_seen, buf)) if not any(r.same_as(o) for o in out)]
        return out

    def names(self, names) -> list[str]:
        """``names`` with every view's name replaced by its roots' (a name that is also a plain buffer's stays)."""
        out: list[str] = []
        for n in names:
            mapped = sorted(self._names.get(n, ()))
            if n not in self._names or n in self._plain:
                mapped = [n, *mapped]
            out += [m for m in mapped if m not in out]
        return out

    # -- regions ------------------------------------------------------------------------------
    def region(self, reg):
        """``reg`` (a BufferRegion) as a region of the root of its buffer (``ViewRegion``; ``reg`` itself for
        a buffer that is no view and is compared in its own coordinates)."""
        buf = reg.source
        if buf not in self._views and buf not in self._flat:
            return reg
        return self._to_root(buf, list(reg.region))

    def _to_root(self, buf, ranges) -> ViewRegion:
        cur = buf
        while cur in self._views:
            v = self._views[cur]
            roots = self.roots(cur)
            if v.kind == "match":
                ranges, cur = _match_ranges(v, ranges), v.parents[0]
            elif v.kind == "same":
                cur = v.parents[0]
            elif v.kind == "decl" and len(roots) == 1 and self._same_pointer(v.parents[0]):
                return ViewRegion(roots[0], (self._interval(cur, v.offset, ranges, roots[0]),))
            else:  # storage not placed (an address expression, a pointer of a match_buffer view): the whole root
                return self._whole(roots[0])
        if cur in self._flat:
            return ViewRegion(cur, (self._interval(cur, cur.ty.elem_offset, ranges, cur),))
        return ViewRegion(cur, tuple(ranges))

    def _same_pointer(self, buf) -> bool:
        """Is ``buf.data`` its root's data pointer (no match_buffer between, whose offset it would drop)?"""
        while buf in self._views:
            v = self._views[buf]
            if v.kind not in ("decl", "same"):
                return False
            buf = v.parents[0]
        return True

    def _whole(self, root) -> ViewRegion:
        full = [tvm.ir.Range.from_min_extent(0, s) for s in root.ty.shape]
        if root in self._flat:
            return ViewRegion(root, (self._interval(root, root.ty.elem_offset, full, root),))
        return ViewRegion(root, tuple(full))

    def _interval(self, buf, offset, ranges, root):
        """The addresses, in units of ``self._flat[root]`` bits from the data pointer, from the first to the
        last element of the box ``ranges`` of ``buf``, whose element 0 lies ``offset`` elements after it."""
        lo, span = offset, 0
        for r, s in zip(ranges, _strides(buf), strict=True):
            lo = lo + r.min * s
            span = span + (r.extent - 1) * s
        k = _bits(buf) // self._flat[root]  # the unit divides every element size (one bit when they differ)
        return tvm.ir.Range.from_min_extent(self._an.simplify(lo * k), self._an.simplify((span + 1) * k))

    def resolve_regions(self, regs: dict, local: dict, fallback=None) -> dict:
        """(name -> [BufferRegion]) of a statement, keyed by root names, every region in root coordinates;
        ``local`` gets, for each name, the root names its regions resolve to.  An empty list (regions not
        known) stays empty, under the roots ``fallback.names`` gives: it absorbs what it is merged with."""
        out: dict = {}
        unknown: list = []
        for name, lst in regs.items():
            if not lst:
                unknown.append(name)
            for reg in lst:
                r = self.region(reg)
                local.setdefault(name, set()).add(r.source.name)
                out.setdefault(r.source.name, []).append(r)
        for n in unknown:
            for m in sorted(local.get(n, ())) or (self if fallback is None else fallback).names([n]):
                out[m] = []
        return out

    def refusal(self, owned, loop: str) -> str | None:
        """Why TVM cannot pipeline a loop whose own buffer is accessed through a view it does not rewrite.

        InjectSoftwarePipeline versions the buffers allocated in the loop body (``owned``, names) by
        rewriting their accesses; a ``decl_buffer`` over the data of one (a match_buffer is lowered to
        its source before the pass) keeps addressing the first version, whatever the iteration."""
        for view, v in self._views.items():
            if v.kind == "match":
                continue
            hit = [r.name for r in self.roots(view) if r.name in owned]
            if hit:
                return (f"loop '{loop}': buffer '{hit[0]}' is allocated in the loop and accessed through the view "
                        f"'{view.name}' (a decl_buffer over its data): TVM 0.27's InjectSoftwarePipeline versions "
                        f"'{hit[0]}' but not the view; access '{hit[0]}' itself, or allocate it outside the loop")
        return None

    def resolve(self, stmts, regions, fallback=None) -> tuple[list, list]:
        """The statements (``StmtInfo``) with root names, and their (reads, writes) regions resolved.

        A statement's names are resolved through its own regions (the buffer each region names, so two
        views that share a name, as tensor intrinsics' do, stay apart); a name without a region (a
        statement TVM's passes rewrote: its regions are not known) through ``fallback.names`` (the
        ``Views`` of the function those statements come from; default: this one)."""
        fallback = self if fallback is None else fallback
        if not self._views and not self._flat and not fallback._views:
            return list(stmts), list(regions)
        out_s, out_r = [], []
        for s, (r, w) in zip(stmts, regions, strict=True):
            local: dict = {}
            regs = (self.resolve_regions(r, local, fallback), self.resolve_regions(w, local, fallback))

            def names(ns, local=local):
                out: list[str] = []
                for n in ns:
                    out += [m for m in (sorted(local[n]) if n in local else fallback.names([n])) if m not in out]
                return tuple(out)

            out_s.append(replace(s, reads=names(s.reads), writes=names(s.writes), exposed=names(s.exposed)))
            out_r.append(regs)
        return out_s, out_r


def _buffer_vars(expr, me) -> list:
    found: list = []

    def on_var(v):
        if _is_buffer(v) and not v.same_as(me) and not any(v.same_as(f) for f in found):
            found.append(v)

    tvm_ffi.structural_walk(expr, [(tirx.Var, on_var)])
    return found


def _match_ranges(v: _View, ranges) -> list:
    """Ranges of a match_buffer view ``v`` as ranges of its parent: index for index when the view's shape is
    the region's trailing extents and the leading ones are 1 (what TVM accepts: its LowerMatchBuffer binds
    the view's strides and offset to the parent's), else the whole region."""
    reg, shape = list(v.region), list(v.buffer.ty.shape)
    lead = len(reg) - len(shape)
    an = tvm.sym.Analyzer()
    exact = (lead >= 0 and len(ranges) == len(shape)
             and all(const_int(r.extent) == 1 for r in reg[:lead])
             and all(const_int(an.simplify(reg[lead + d].extent - s)) == 0 for d, s in enumerate(shape)))
    if not exact:
        return reg
    return [tvm.ir.Range.from_min_extent(r.min, 1) for r in reg[:lead]] + [
        tvm.ir.Range.from_min_extent(an.simplify(reg[lead + d].min + rg.min), rg.extent)
        for d, rg in enumerate(ranges)]
