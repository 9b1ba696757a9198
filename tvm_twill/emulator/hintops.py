"""Instructions that only hint or order across grids; none changes what a single launch computes.

* ``prefetch{.global|.local}.L1|.L2``, ``prefetch.global.L2::evict_last|evict_normal``, ``prefetchu.L1``,
  ``prefetch{.const|.param}.tensormap`` (PTX ISA, prefetch / prefetchu): bring a line into a cache; no
  value is read by the program, so nothing happens and the address is not checked.
* ``createpolicy.fractional``, ``createpolicy.range`` and ``createpolicy.cvt.L2`` (PTX ISA, createpolicy):
  write an opaque 64-bit cache policy for ``.L2::cache_hint`` operands, which the parser sets aside
  (``qualifiers``); the value written is a fixed encoding of the form, only so that the register is
  defined.
* ``nanosleep.u32 t`` (PTX ISA, nanosleep): suspends the thread for up to about t ns; here it ends the
  warp's time slice so that the scheduler runs another warp.
* ``griddepcontrol.launch_dependents`` / ``griddepcontrol.wait`` (PTX ISA, griddepcontrol, sm_90):
  programmatic dependent launch.  Launches are run one after the other, each to completion, so the grid a
  ``wait`` depends on has always completed and its memory is visible, and ``launch_dependents`` has
  nothing to start early: both are no-ops.
"""
from __future__ import annotations

import zlib

import numpy as np

from ..errors import EmulationError
from .values import LANES, YIELD

_PRIORITY = {"L2::evict_last", "L2::evict_normal", "L2::evict_first", "L2::evict_unchanged"}


def _bad(ins):
    return EmulationError(f"unsupported opcode {ins.opcode} at PTX line {ins.line}")


def compile_prefetch(ins, cc):
    p = ins.parts
    rest = p[1:]
    levels = {"L1", "L2", "L2::evict_last", "L2::evict_normal", "tensormap"}
    spaces = {"global", "local", "const", "param"}
    if p[0] == "prefetchu" and rest != ["L1"] or len(rest) not in (1, 2) or rest[-1] not in levels or \
            len(rest) == 2 and rest[0] not in spaces or len(ins.operands) != 1 or ins.operands[0].kind != "addr":
        raise _bad(ins)
    return lambda w: None


def compile_createpolicy(ins, cc):
    p = ins.parts
    kind, quals = (p[1] if len(p) > 1 else ""), p[2:-1]
    ok = p[-1] == "b64" and (
        kind == "fractional" and 1 <= len(quals) <= 2 and set(quals) <= _PRIORITY and len(ins.operands) in (1, 2)
        or kind == "range" and 1 <= len([q for q in quals if q != "global"]) <= 2
        and set(quals) <= _PRIORITY | {"global"} and len(ins.operands) == 4
        or kind == "cvt" and quals == ["L2"] and len(ins.operands) == 2)
    if not ok:
        raise _bad(ins)
    value = np.uint64(zlib.crc32(ins.opcode.encode()) | 1 << 40)
    put = cc.write(ins.operands[0], "b64", ins)
    vals = np.full(LANES, value, np.uint64)
    return lambda w: put(w, vals, None)


def compile_nanosleep(ins, cc):
    if ins.parts != ["nanosleep", "u32"] or len(ins.operands) != 1:
        raise _bad(ins)
    cc.read(ins.operands[0], "u32", ins)
    return lambda w: YIELD


def compile_griddepcontrol(ins, cc):
    if ins.parts not in (["griddepcontrol", "launch_dependents"], ["griddepcontrol", "wait"]) or ins.operands:
        raise _bad(ins)
    return lambda w: None


HANDLERS = {"prefetch": compile_prefetch, "prefetchu": compile_prefetch, "createpolicy": compile_createpolicy,
            "nanosleep": compile_nanosleep, "griddepcontrol": compile_griddepcontrol}
