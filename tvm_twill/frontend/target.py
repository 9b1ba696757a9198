"""Target and machine selection: which CUDA arch, which machine model."""
from __future__ import annotations

import re

from ..errors import UnsupportedTargetError
from ..model import Machine, get_machine, machine_for_arch
from .ir import tvm

__all__ = ["machine_for", "parse_target"]


def parse_target(target) -> tuple[str, object]:
    """(arch, tvm Target) for a ``tvm.target.Target`` or an arch string such as ``"sm_90a"``.

    Raises UnsupportedTargetError for non-CUDA targets, targets without an
    arch, and archs before sm_80 (no cp.async, no machine model).
    """
    if isinstance(target, str):
        arch = target.strip()
        if not re.fullmatch(r"sm_\d+[a-z]?", arch):
            raise UnsupportedTargetError(
                f"target '{target}' is not a CUDA arch string: pass 'sm_80', 'sm_90a' ... or "
                "tvm.target.Target({'kind': 'cuda', 'arch': 'sm_90a'})")
        tgt = tvm.target.Target({"kind": "cuda", "arch": arch})
    elif isinstance(target, tvm.target.Target):
        tgt = target
        if tgt.kind.name != "cuda":
            raise UnsupportedTargetError(
                f"target kind '{tgt.kind.name}' is not supported: auto_pipeline targets CUDA "
                "(tvm.target.Target({'kind': 'cuda', 'arch': 'sm_80'}))")
        arch = str(tgt.attrs["arch"]) if "arch" in tgt.attrs else ""
        if not arch:
            raise UnsupportedTargetError("CUDA target has no 'arch': give one, e.g. "
                                         "tvm.target.Target({'kind': 'cuda', 'arch': 'sm_90a'})")
    else:
        raise UnsupportedTargetError(f"target must be a tvm.target.Target or an arch string like 'sm_90a', "
                                     f"got {type(target).__name__}")
    cc = int(re.sub(r"\D", "", arch) or 0)
    if cc < 80:
        raise UnsupportedTargetError(f"target arch '{arch}' predates sm_80: software pipelining with "
                                     "cp.async and the machine models need sm_80 or newer")
    return arch, tgt


def machine_for(arch: str, machine=None) -> Machine:
    """The machine model: the given one (name or Machine) or the built-in for ``arch``."""
    m = machine_for_arch(arch) if machine is None else get_machine(machine)
    if m.costs is None:
        raise UnsupportedTargetError(f"machine '{m.name}' has no cost model (tile shapes cannot be turned "
                                     "into cycles): use a built-in machine (a100, h100, b200)")
    return m

