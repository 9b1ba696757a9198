"""What ``transforms.ws.rewrite`` emitted for one kernel, and its ring protocol for the model checker."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["WsKernelFacts", "barrier_slots"]


def barrier_slots(depth: int) -> int:
    """Entries of each mbarrier array (full, empty) for a ``depth``-slot ring: padded to 8 (64 bytes), so the
    static shared memory before the dynamic pool stays a multiple of 128 bytes."""
    return -(-depth // 8) * 8


@dataclass(frozen=True)
class WsKernelFacts:
    """What the transform emitted for one kernel (the protocol checker and the plan read these)."""

    depth: int
    consumer_threads: int
    producer_threads: int
    copy: str                      # "cp.async" or "bulk" (TMA bulk copies)
    full_count: int                # mbarrier.init count of every full barrier
    empty_count: int               # mbarrier.init count of every empty barrier (consumer warps)
    ring_bytes: int                # shared bytes of all rings
    static_ring_bytes: int         # of those, in static __shared__ arrays (tiles of scope "shared")
    registers: tuple[int, int] | None   # setmaxnreg (producer, consumer), None when not emitted
    producer_statements: int
    producer_parities: tuple[int, ...] = ()   # parity the producer waits on empty[s], iterations 0..2*depth
    consumer_parities: tuple[int, ...] = ()   # parity the consumers wait on full[s]
    tail_acquires: int = 0                    # producer-tail waits after the last iteration
    release_last: bool = True                 # the consumers' arrive on empty[s] follows every read of the slot
    copy_plans: tuple[str, ...] = ()          # how each producer statement is issued, per slot
    tensor_maps: tuple = ()                   # tma_copy.TensorMapSpec of each TMA tensor copy
    operand_layouts: tuple[str, ...] = ()     # each wgmma-read ring's layout (wgmma_swizzle), or why not
    release_lag: int = 0                      # 1: iteration k releases slot k-1 after its wgmma.wait_group
    wgmma_groups: int = 0                     # lag 1: wgmma commit groups per consumer iteration
    wgmma_wait: int = 0                       # lag 1: N of the wgmma.wait_group N ending each iteration (look-
    #                                           ahead: N + wgmma_groups, pending in the model's count)
    final_release: bool = True                # lag 1: wait_group 0 + release of the last slot after the loop
    order: tuple[int, ...] = ()               # ordered consumer groups: their token order (consumer_order)
    order_threads: int = 0                    # threads per phase of each group's named barrier
    order_prologue: bool = True               # the last group's arrive before the loop was emitted
    pass_after_read: bool = True              # each iteration's bar.arrive follows the group's reads
    skip_last_pass: bool = True               # the last group does not arrive in the last iteration
    order_sections: int = 1                   # turns per consumer iteration (runs of tensor-core statements)
    order_wrap: bool = False                  # the last run's turn goes on into the next iteration's first run
    order_lookahead: bool = False             # look-ahead turn: last run of k-1 in k's turn, one more after
    swizzle_pad_bytes: int = 0                # of ring_bytes, the 1024-byte alignment pads of swizzled rings

    @property
    def shared_bytes(self) -> int:
        """Shared memory the kernel's rings and mbarrier arrays take."""
        return self.ring_bytes + 2 * 8 * barrier_slots(self.depth)

    @property
    def static_bytes(self) -> int:
        """Of ``shared_bytes``, what lives in static ``__shared__`` arrays (static rings, the mbarrier arrays):
        ptxas's ``smem`` figure for the kernel when it has no other static shared memory."""
        return self.static_ring_bytes + 2 * 8 * barrier_slots(self.depth)

    def ring_protocol(self):
        """The emitted protocol as the model checker's ``RingProtocol`` (phase flips read off the parities)."""
        from ...model.protocol import RingProtocol
        n = len(self.producer_parities)
        want = tuple((i // self.depth) % 2 for i in range(n))
        return RingProtocol(depth=self.depth, consumers=self.consumer_threads // 32, tma=self.copy == "bulk",
                            lanes=1 if self.copy == "bulk" else 32, full_count=self.full_count,
                            empty_count=self.empty_count,
                            producer_flips_phase=tuple(p ^ 1 for p in self.producer_parities) == want,
                            consumer_flips_phase=self.consumer_parities == want,
                            release_after_read=self.release_last, producer_tail=self.tail_acquires >= self.depth,
                            release_lag=self.release_lag, groups=max(1, self.wgmma_groups),
                            wait_pending=self.wgmma_wait if self.release_lag else None,
                            final_release=self.final_release, **self._order_fields())

    def _order_fields(self) -> dict:
        if not self.order:
            return {}
        return dict(order=tuple(self.order), bar_count=self.order_threads // 32,
                    prologue_arrive=self.order_prologue, pass_after_read=self.pass_after_read,
                    skip_last_pass=self.skip_last_pass, sections=self.order_sections + self.order_wrap,
                    wrap=self.order_wrap, epilogue_turn=self.order_lookahead)
