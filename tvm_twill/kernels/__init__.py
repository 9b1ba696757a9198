"""Kernels written in s_tir for tvm_twill to pipeline: attention forward, SIMT (``attention``) and on tensor
cores (``attention_tc``)."""
from .attention import KV_LOOP, AttentionShape, attention_reference, fa_forward
from .attention_tc import fa_forward_tc

__all__ = ["KV_LOOP", "AttentionShape", "attention_reference", "fa_forward", "fa_forward_tc"]
