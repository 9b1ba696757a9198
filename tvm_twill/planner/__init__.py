"""Planning a loop: from an extraction and a machine model to the schedule and annotation written on it.

``context`` holds what the steps pass on (the planning context, the candidate plan); ``stages`` turns a
solved schedule into TVM's stage/order annotation within the stage and shared-memory limits;
``async_copies`` puts every cp.async-capable copy in an async stage; ``plan_alternatives`` the K best
annotations; ``warpspec`` the warp-specialization decision (``ws_plan`` its typed parts); ``roofline`` the
throughput prediction; ``cache`` reuses extractions, solves and verdicts; ``plan_progress`` reports a long
plan's steps; ``arguments`` checks the public arguments; ``depth`` bounds the stage count by extra edges.
``api`` calls these; nothing here imports ``api``.  docs/planner.md.
"""
