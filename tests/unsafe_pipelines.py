"""Annotations TVM 0.27 compiles unsafely, shared by the guard's test and the emulator's evidence for it."""
import tvm

from tvm_twill.model.pipeline import PipelineAnnotation

#: The SIMT attention (``kernels.fa_forward``) with K and V copied in stage 0 and read in stages 1 (S) and 2
#: (O), O ordered before S: TVM 0.27 puts the prologue's wait on O, which the prologue's iteration 1 skips,
#: so S reads K with no cp.async wait before it.
MISSING_WAIT = PipelineAnnotation(stages=(0, 0, 1, 2, 2, 2, 3, 2, 2, 2), orders=(0, 1, 9, 2, 5, 3, 4, 7, 6, 8),
                                  async_stages=(0,))


def simt_attention():
    """(shape, schedule, KV loop name) of the small SIMT attention the missing wait is shown on."""
    from tvm_twill.kernels import KV_LOOP, AttentionShape, fa_forward
    shape = AttentionShape(head_dim=64, causal=True, heads=1, q_len=64, block_m=32, block_n=16)
    return shape, tvm.s_tir.Schedule(fa_forward(shape)), KV_LOOP
