"""Checks of a plan by execution: ``verify`` runs the original and the planned loop on TVM's llvm backend and
compares them (``plan.check_on_cpu()``); ``gpu_check`` builds a plan's kernel and runs it on the PTX
emulator, or on a GPU when there is one.  docs/planner.md ("Checking a plan"), docs/emulator.md."""
