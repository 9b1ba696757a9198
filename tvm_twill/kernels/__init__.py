"""Kernels written in s_tir for tvm_twill to pipeline: attention forward (``attention``)."""
from .attention import KV_LOOP, AttentionShape, attention_reference, fa_forward

__all__ = ["KV_LOOP", "AttentionShape", "attention_reference", "fa_forward"]
