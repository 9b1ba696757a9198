"""Preparing a kernel launch: memory layout, parameters, special registers, and compiling every instruction.

``prepare(module, launch, gmem, buffers)`` lays out the kernel's shared
variables (static ones first, each at its alignment, then the dynamic
``extern .shared`` array at its alignment, sized by the launch), writes the
parameters (a buffer parameter is its argument's fake global address plus
the byte offset; a scalar is its value in the PTX type) and turns every
instruction into a closure through the handler tables.  An opcode with no
handler raises ``EmulationError`` naming it and its PTX line.
"""
from __future__ import annotations

import numpy as np

from ..errors import EmulationError
from . import alu, asyncops, atomics, control, convert, memops, sync, tensor, wgmma
from . import wmma as wmma_
from .globalrace import GlobalShadow
from .values import LANE_IDS, LANES, TYPED, WIDTH, Compiler

HANDLERS = {}
for _mod in (alu, convert, memops, atomics, asyncops, sync, tensor, wgmma, wmma_, control):
    HANDLERS.update(_mod.HANDLERS)


def _align(x, a):
    return (x + a - 1) // a * a


class Prepared:
    """One kernel launch, compiled.  ``cta`` is the CTA running now (the closures read it)."""

    def __init__(self, module, launch, gmem, buffers):
        if launch.kernel not in module.kernels:
            raise EmulationError(f"kernel {launch.kernel} is not in the PTX (it has {sorted(module.kernels)})")
        k = self.kernel = module.kernels[launch.kernel]
        self.grid, self.block, self.dyn_smem = tuple(launch.grid), tuple(launch.block), int(launch.dyn_smem)
        self.nthreads = int(np.prod(self.block))
        self.gmem = gmem
        self.gshadow = GlobalShadow(gmem, self.grid, (self.nthreads + LANES - 1) // LANES)
        self.gshadow.owner = self
        self.cta = None
        self.cooperative = bool(getattr(launch, "cooperative", False))
        self.dispatch_rank = {}             # CTA serial -> its place in the dispatch order (engine.run_grid)
        symbols = {}
        for v in module.variables:
            if v.space in ("global", "const") and v.name not in gmem.symbols:
                gmem.symbols[v.name] = gmem.add(np.frombuffer(bytearray(v.init or bytes(v.size)), np.uint8), v.name)
            if v.space in ("global", "const"):
                symbols[v.name] = ("global", gmem.symbols[v.name])
        off = 0
        self.shared_inits = []
        shared_vars = [v for v in module.variables + k.variables if v.space == "shared"]
        for v in [v for v in shared_vars if not v.extern]:
            off = _align(off, v.align)
            symbols[v.name] = ("shared", off)
            if v.init:
                self.shared_inits.append((off, v.init))
            off += v.size
        for v in [v for v in shared_vars if v.extern]:
            off = _align(off, v.align)
            symbols[v.name] = ("shared", off)
        self.shared_size = off + self.dyn_smem
        loc = 0
        for v in [v for v in k.variables if v.space == "local"]:
            loc = _align(loc, v.align)
            symbols[v.name] = ("local", loc)
            loc += v.size
        self.local_size = loc
        self.param_bytes = self._params(k, launch.params, buffers, symbols)
        self.cuda_line_of = {ins.line: ins.cuda_line for ins in k.instructions}
        self.cc = Compiler(k, symbols, self._sreg)
        self.cc.launch = self
        self.dtypes = self.cc.dtypes
        self.program = [self._compile(ins) for ins in k.instructions]

    def _params(self, k, params, buffers, symbols):
        if len(params) != len(k.params):
            raise EmulationError(f"kernel {k.name} takes {len(k.params)} parameters, the launch gives {len(params)}")
        chunks = bytearray()
        self.tensormaps = {}
        self.buffers = buffers
        for (name, ptype, size, align), prm in zip(k.params, params):
            off = _align(len(chunks), align or max(WIDTH.get(ptype, 1), 1))
            chunks.extend(bytes(off - len(chunks)))
            symbols[name] = ("param", off)
            if prm[0] == "buffer":
                value = buffers[prm[1]] + int(prm[2])
                chunks.extend(int(value).to_bytes(8, "little"))
            elif prm[0] == "tensormap":
                off = _align(len(chunks), max(align, 64))
                chunks.extend(bytes(off - len(chunks)))
                symbols[name] = ("param", off)
                self.tensormaps[off] = prm[1]
                chunks.extend(bytes(size or 128))
            elif prm[0] == "scalar":
                arr = np.array([prm[2]]).astype(TYPED[prm[1]])
                chunks.extend(arr.tobytes().ljust(size, b"\0"))
            elif prm[0] == "struct":
                chunks.extend(self._struct(name, size, prm[1], buffers))
            else:
                raise EmulationError(f"unknown parameter kind {prm[0]!r} for {name}")
        return np.frombuffer(bytes(chunks) + bytes(8), np.uint8).copy()

    @staticmethod
    def _struct(name, size, fields, buffers) -> bytes:
        """The bytes of a ``.b8`` array parameter (a struct passed by value, a ``__grid_constant__`` object):
        ``fields`` are ``(byte_offset, item)`` with item ``("buffer", arg_index, byte_offset)`` (a pointer),
        ``("scalar", ptx_type, value)`` or ``("bytes", raw)``; bytes no field names are zero."""
        out = bytearray(size)
        for at, item in fields:
            if item[0] == "buffer":
                raw = int(buffers[item[1]] + int(item[2])).to_bytes(8, "little")
            elif item[0] == "scalar":
                raw = np.array([item[2]]).astype(TYPED[item[1]]).tobytes()
            elif item[0] == "bytes":
                raw = bytes(item[1])
            else:
                raise EmulationError(f"unknown field kind {item[0]!r} in the struct parameter {name}")
            if not 0 <= at <= size - len(raw):
                raise EmulationError(f"a field of {len(raw)} bytes at offset {at} lies outside the {size}-byte "
                                     f"parameter {name}")
            out[at:at + len(raw)] = raw
        return bytes(out)

    def buffer_view(self, arg_index):
        """The bytes of argument ``arg_index`` (a tensor map's global tensor)."""
        return self.buffer_of(arg_index)[1]

    def buffer_of(self, arg_index):
        """(global buffer index, bytes) of argument ``arg_index`` (a tensor map's global tensor)."""
        if arg_index not in self.buffers:
            raise EmulationError(f"argument {arg_index} is not an array; a tensor map needs one")
        k, view, _ = self.gmem.locate(np.array([self.buffers[arg_index]], np.uint64), 0)
        return k, view

    def _sreg(self, name, ins):
        base, _, comp = name.partition(".")
        dim = "xyz".index(comp) if comp else 0
        bx, by, _bz = self.block
        if base == "%tid":
            def tid(w):
                t = LANE_IDS + np.uint32(w.idx * LANES)
                return (t % bx, (t // bx) % by, t // (bx * by))[dim].astype(np.uint32)
            return tid
        consts = {"%ntid": lambda: self.block[dim], "%nctaid": lambda: self.grid[dim],
                  "%dynamic_smem_size": lambda: self.dyn_smem, "%total_smem_size": lambda: self.shared_size}
        if base in consts:
            c = np.full(LANES, consts[base](), np.uint32)
            return lambda w: c
        if base == "%ctaid":
            return lambda w: np.full(LANES, self.cta.ctaid[dim], np.uint32)
        if base == "%laneid":
            return lambda w: LANE_IDS
        if base == "%warpid":
            return lambda w: np.full(LANES, w.idx, np.uint32)
        if base == "%nwarpid":
            return lambda w: np.full(LANES, self.cta.nwarps, np.uint32)
        if base.startswith("%lanemask_"):
            rel = base[len("%lanemask_"):]
            op = {"eq": np.equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
                  "ge": np.greater_equal}[rel]
            masks = np.array([sum(1 << j for j in range(LANES) if op(j, lane)) for lane in range(LANES)],
                             np.uint32)
            return lambda w: masks
        if base in ("%clock", "%clock64", "%globaltimer"):
            return lambda w: np.full(LANES, self.cta.instructions, np.uint32)
        raise EmulationError(f"unsupported special register {name} at PTX line {ins.line}")

    def _compile(self, ins):
        h = HANDLERS.get(ins.parts[0])
        if h is None:
            raise EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")
        fn = h(ins, self.cc)
        gi = self.cc.index[ins.guard] if ins.guard is not None else -1
        if ins.guard is not None and ins.guard not in self.cc.index:
            raise EmulationError(f"unknown guard predicate {ins.guard} at PTX line {ins.line}")
        kind = 1 if ins.parts[0] in control.CONTROL else 0
        return (kind, fn, gi, ins.guard_negated, ins)

    def ctas(self, blocks=None):
        gx, gy, gz = self.grid
        allb = [(x, y, z) for z in range(gz) for y in range(gy) for x in range(gx)]
        if blocks is None:
            return allb
        out = []
        for b in blocks:
            b = tuple(b) + (0,) * (3 - len(tuple(b))) if not isinstance(b, int) else (b, 0, 0)
            if b not in allb:
                raise EmulationError(f"block {b} is outside the grid {self.grid}")
            out.append(b)
        return out
