"""The statement-level view of a modulo schedule: TVM's software-pipeline annotation.

TVM's ``InjectSoftwarePipeline`` reads three loop annotations: one stage and
one order per direct child statement of the loop body, and the stages whose
statements run asynchronously.  ``PipelineAnnotation`` is that triple as
plain data (pure Python): the front-end reads it off a loop, the transforms
derive it from a ``Schedule`` and write it, ``evaluate`` measures it.  The
key strings are spelled here and nowhere else.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..errors import InputError

__all__ = ["ANNOTATION_KEYS", "ASYNC_STAGES", "ORDER", "PipelineAnnotation", "STAGE", "WS_CONSUMER_ORDER", "WS_DEPTH", "WS_KEYS",
           "WS_LOOKAHEAD",
           "WS_REGISTERS", "WS_SWIZZLE", "WS_WGMMA_OVERLAP"]

#: Loop annotation keys read by InjectSoftwarePipeline (the one place they are spelled).
STAGE = "software_pipeline_stage"
ORDER = "software_pipeline_order"
ASYNC_STAGES = "software_pipeline_async_stages"
ANNOTATION_KEYS = (STAGE, ORDER, ASYNC_STAGES)

#: Loop annotation keys of a warp-specialized loop, read by tvm_twill's own pass
#: (``transforms.ws.rewrite``) in the ``tvm_twill_ws`` TIR pipeline: the ring
#: depth, and the (producer, consumer) per-thread register budgets for setmaxnreg.
WS_DEPTH = "tvm_twill.ws_depth"
WS_REGISTERS = "tvm_twill.ws_registers"
#: The token order of ordered consumer groups (a permutation of 0..G-1; G groups of consumer warps take
#: turns through named barriers, ``transforms.ws.consumer_order``); absent: one consumer group.
WS_CONSUMER_ORDER = "tvm_twill.ws_consumer_order"
#: 1: ordered wgmma consumer groups take the look-ahead turn (each turn issues the first tensor-core run of
#: iteration k, then the last run of k - 1 left in flight, ``transforms.ws.look_ahead``); absent or 0: not.
WS_LOOKAHEAD = "tvm_twill.ws_lookahead"
WS_KEYS = (WS_DEPTH, WS_REGISTERS, WS_CONSUMER_ORDER, WS_LOOKAHEAD)
#: Optional (a user's, not written by auto_pipeline): 0 keeps the consumer's wgmma groups synchronous
#: (``wait_group 0`` after each); absent or 1: one iteration's groups stay in flight where safe
#: (``transforms.wgmma_overlap``).
WS_WGMMA_OVERLAP = "tvm_twill.ws_wgmma_overlap"
#: Optional (a user's): 0 keeps every ring in the consumer's own layout; absent or 1: a ring read only
#: through wgmma descriptors is stored with TMA's and wgmma's 128-byte swizzle where that is proved
#: equivalent (``transforms.ws.wgmma_swizzle``).
WS_SWIZZLE = "tvm_twill.ws_swizzle"


@dataclass(frozen=True)
class PipelineAnnotation:
    """The three annotations of one loop, one stage/order entry per statement."""

    stages: tuple[int, ...]
    orders: tuple[int, ...]
    async_stages: tuple[int, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "stages", tuple(int(s) for s in self.stages))
        object.__setattr__(self, "orders", tuple(int(o) for o in self.orders))
        object.__setattr__(self, "async_stages", tuple(sorted({int(s) for s in self.async_stages})))
        n = len(self.stages)
        if len(self.orders) != n:
            raise InputError(f"annotation has {n} stages but {len(self.orders)} orders: "
                             "give one stage and one order per statement")
        if any(s < 0 for s in self.stages):
            raise InputError(f"stages must be >= 0, got {list(self.stages)}")
        if sorted(self.orders) != list(range(n)):
            raise InputError(f"orders {list(self.orders)} are not a permutation of 0..{n - 1}: "
                             "InjectSoftwarePipeline needs a unique order per statement")

    @property
    def num_stages(self) -> int:
        """max stage + 1: how many loop iterations are in flight."""
        return 1 + max(self.stages, default=0)

    def to_dict(self) -> dict[str, list[int]]:
        """The annotations as ``sch.annotate`` takes them (async key only when non-empty)."""
        d = {STAGE: list(self.stages), ORDER: list(self.orders)}
        if self.async_stages:
            d[ASYNC_STAGES] = list(self.async_stages)
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> "PipelineAnnotation":
        return cls(tuple(d[STAGE]), tuple(d[ORDER]), tuple(d.get(ASYNC_STAGES, ())))
