"""Kernels written in s_tir for tvm_twill to pipeline: attention forward, SIMT (``attention``), on tensor
cores with mma.sync (``attention_tc``) and on Hopper warp-group MMA (``attention_wgmma``), with the wgmma tensor
intrinsics they and ``workloads`` tensorize with (``wgmma_intrinsics``).  docs/kernels.md."""
from .attention import KV_LOOP, AttentionShape, attention_reference, fa_forward
from .attention_tc import fa_forward_tc
from .attention_wgmma import fa_forward_wgmma

__all__ = ["KV_LOOP", "AttentionShape", "attention_reference", "fa_forward", "fa_forward_tc", "fa_forward_wgmma"]
