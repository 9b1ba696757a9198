"""What the integrations (dlight, MetaSchedule, ``plan_module``) share: an error as one reason line, and a
nest's register staging dropped."""
from __future__ import annotations

from ..errors import TwillError
from ..frontend import local_stage_blocks
from ..frontend.ir import MANIFEST_LOCAL_STAGE

__all__ = ["drop_staging", "reason_of"]


def reason_of(err, *, whole: bool = False) -> str:
    """``Type: first line`` of an error (a TwillError's message is one line by the project's rule); any other
    error (TVM's, or a bug) is marked ``unexpected``.  ``whole``: every line of the message, joined with
    `` / `` (a verifier's may take several)."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    text = " / ".join(lines) if whole else (lines[0] if lines else "")
    tag = type(err).__name__ if isinstance(err, TwillError) else f"unexpected {type(err).__name__}"
    return f"{tag}: {text}" if text else tag


def drop_staging(sch, ref) -> None:
    """Remove the register staging (``MANIFEST_LOCAL_STAGE``) of the copies in loop ``ref``'s nest: the
    copies go straight from global to shared memory (the "direct" variant dlight and ``plan_module`` try)."""
    for rv in local_stage_blocks(sch, ref):
        sch.unannotate(rv, MANIFEST_LOCAL_STAGE)
