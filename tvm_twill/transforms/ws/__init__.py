"""The warp-specialization rewrite: a lowered s_tir kernel -> a producer warp and consumer warps on mbarrier rings.

``rewrite`` drives the passes in order: ``roles`` (split the body), ``rings`` (slots and mbarriers),
``registers`` (budgets), ``copies`` (producer copies, ``tma_copy`` on sm_90+), ``barriers`` (full/empty
waits and arrives; ``consumer_order``, ``look_ahead``, ``role_barriers`` and ``group_scratch`` for ordered
consumer groups; ``wgmma_swizzle`` for 128-byte swizzled wgmma rings).  ``facts`` is what was emitted;
``compiled`` reads the ring protocol back off the final TIR and model-checks it; ``lowering`` holds the
passes ``tvm_twill_ws`` (``transforms.pipelines``) runs around the rewrite.  Modules are imported by name,
nothing is re-exported.  docs/ws-rewrite.md.
"""
