"""WS pass 3, register budgets and the producer's threads.

``assign_threads(ws)`` returns a frozen ``WsThreads``: whether the plan's
register budgets become ``setmaxnreg`` (archs with it, a multiple of 128
consumer threads), the producer's size (one warp group where setmaxnreg is
used: its other three warps only give registers back; one warp otherwise),
the thread dimension grown to hold it, and the role geometry: the linear
thread index, its lane, and ``warp``, the warp index broadcast with
``shfl.sync`` so the role branch is warp-uniform by construction.

``producer_role`` / ``consumer_role`` / ``launch_bounds`` wrap the roles'
statements: ``setmaxnreg.dec`` then only the first producer warp works,
``setmaxnreg.inc`` for the consumers, and ``__launch_bounds__(threads, 1)``
so ptxas honours the budgets.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...frontend.ir import T, tirx, tvm
from ..tir_util import i32, ws_fail
from .roles import THREAD_TAGS, WsLoop

__all__ = ["WsThreads", "assign_threads", "consumer_role", "launch_bounds", "producer_role"]


@dataclass(frozen=True, eq=False)
class WsThreads:
    """The block's threads split into roles."""

    registers: tuple | None   # setmaxnreg (producer, consumer) when emitted, else None
    producer_threads: int     # 128 with setmaxnreg, else 32
    consumer_warps: int
    grow: str                 # the thread tag whose extent grows by the producer
    new_extent: int           # its extent with the producer
    lin: object               # linear thread index (expression)
    lane: object              # lin mod 32
    warp: object              # Var: the warp index, broadcast from lane 0

    @property
    def setmaxnreg(self) -> bool:
        return self.registers is not None


def assign_threads(ws: WsLoop) -> WsThreads:
    """Register budgets and the producer's threads; refuses budgets the arch or the block cannot honour."""
    n_threads = ws.n_threads
    use = ws.regs is not None and ws.caps.setmaxnreg and n_threads % 128 == 0
    if ws.regs is not None and not use:
        ws_fail(f"register budgets need setmaxnreg (sm_90a, sm_100a, sm_120a, ...) and a multiple of 128 consumer "
                f"threads (arch {ws.arch}, {n_threads} threads)")
    producer_threads = 128 if use else 32
    grow = [t for t in THREAD_TAGS if t in ws.ext][-1]   # the outermost thread dimension in use
    inner_size = n_threads // ws.ext[grow]
    if producer_threads % inner_size:
        ws_fail(f"cannot add a producer warp: the inner thread dimensions hold {inner_size} threads")
    x, y = ws.ext.get("threadIdx.x", 1), ws.ext.get("threadIdx.y", 1)
    lin = ws.tvars.get("threadIdx.x", i32(0))
    if "threadIdx.y" in ws.tvars:
        lin = lin + ws.tvars["threadIdx.y"] * x
    if "threadIdx.z" in ws.tvars:
        lin = lin + ws.tvars["threadIdx.z"] * (x * y)
    return WsThreads(registers=ws.regs if use else None, producer_threads=producer_threads,
                     consumer_warps=n_threads // 32, grow=grow,
                     new_extent=ws.ext[grow] + producer_threads // inner_size, lin=lin,
                     lane=tirx.floormod(lin, 32), warp=tirx.Var("ws_warp", "int32"))


def producer_role(th: WsThreads, producer: list) -> list:
    """With setmaxnreg: give registers back, then only the first producer warp runs ``producer``."""
    if not th.setmaxnreg:
        return producer
    return [tirx.Evaluate(T.ptx.setmaxnreg.dec.sync.aligned.u32(th.registers[0])),
            tirx.IfThenElse(th.warp == th.consumer_warps, tirx.SeqStmt(producer), None)]


def consumer_role(th: WsThreads, branch):
    """With setmaxnreg: the consumers take their budget first."""
    if not th.setmaxnreg:
        return branch
    return tirx.SeqStmt([tirx.Evaluate(T.ptx.setmaxnreg.inc.sync.aligned.u32(th.registers[1])), branch])


def launch_bounds(th: WsThreads, body):
    """With setmaxnreg: ``__launch_bounds__(threads, 1)`` (ptxas ignores setmaxnreg without it)."""
    if not th.setmaxnreg:
        return body
    return tirx.AttrStmt(i32(0), "tirx.launch_bounds_min_blocks_per_sm", tirx.IntImm("int64", 1), body)


def grow_binding(th: WsThreads, node):
    """The thread binding of ``th.grow`` widened to the producer's extra threads."""
    iv = node.node
    niv = tirx.IterVar(tvm.ir.Range(0, th.new_extent), iv.var, iv.iter_type, iv.thread_tag)
    return tirx.AttrStmt(niv, "thread_extent", i32(th.new_extent), node.body)
