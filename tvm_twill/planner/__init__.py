"""Planning a loop: from an extraction and a machine model to the schedule and annotation written on it.

``stages`` turns a solved schedule into TVM's stage/order annotation within the stage and shared-memory
limits; ``async_copies`` puts every cp.async-capable copy in an async stage; ``plan_alternatives`` the K
best annotations; ``warpspec`` the warp-specialization decision; ``roofline`` the throughput prediction;
``cache`` reuses extractions, solves and verdicts; ``plan_progress`` reports a long plan's steps;
``arguments`` checks the public arguments.  ``api`` calls these; nothing here imports ``api``.
"""
