"""Kernels written in s_tir for tvm_twill to pipeline: attention forward (``attention``)."""
from .attention import AttentionShape, attention_reference, fa_forward

__all__ = ["AttentionShape", "attention_reference", "fa_forward"]
