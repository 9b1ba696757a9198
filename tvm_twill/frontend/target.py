"""Target and machine selection: which CUDA arch, which machine model."""
from __future__ import annotations

from ..errors import MachineError, UnsupportedTargetError
from ..model import Machine, get_machine, machine_for_arch
from ..model.arch import parse_arch
from .ir import tvm

__all__ = ["dlight_arch", "dlight_target", "machine_for", "parse_target"]


def _check_arch(arch: str, target) -> None:
    """Refuse, before any expensive work, an arch string that is malformed, older than sm_80 or unmodelled."""
    try:
        caps = parse_arch(arch)
    except MachineError:
        raise UnsupportedTargetError(
            f"target '{target}' is not a CUDA arch string: pass 'sm_80', 'sm_86', 'sm_90a', 'sm_100a', "
            "'sm_120' ... or tvm.target.Target({'kind': 'cuda', 'arch': 'sm_90a'})") from None
    if not caps.cp_async:
        raise UnsupportedTargetError(f"target arch '{arch}' predates sm_80: software pipelining with "
                                     "cp.async and the machine models need sm_80 or newer")
    try:
        machine_for_arch(arch)
    except MachineError as e:
        raise UnsupportedTargetError(str(e)) from None


def parse_target(target) -> tuple[str, object]:
    """(arch, tvm Target) for a ``tvm.target.Target``, an arch string such as ``"sm_90a"`` or a TVM target
    tag such as ``"nvidia/nvidia-a100"``.

    Raises UnsupportedTargetError for non-CUDA targets, targets without an
    arch, archs before sm_80 (no cp.async), malformed arch strings
    ("sm_80x") and archs without a machine model ("sm_999"); an arch string
    is checked before TVM builds a Target from it.
    """
    if isinstance(target, str) and "/" in target:  # a TVM target tag: "nvidia/nvidia-a100"
        try:
            target = tvm.target.Target(target.strip())
        except Exception as err:  # noqa: BLE001 - TVM raises ValueError / TVMError for an unknown tag
            raise UnsupportedTargetError(f"unknown TVM target tag '{target}': pass a tag TVM lists "
                                         "(tvm.target.list_tags()), e.g. 'nvidia/nvidia-a100', or an arch string "
                                         f"like 'sm_80' ({type(err).__name__})") from None
    if isinstance(target, str):
        arch = target.strip()
        _check_arch(arch, target)
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
        _check_arch(arch, arch)
    else:
        raise UnsupportedTargetError(f"target must be a tvm.target.Target or an arch string like 'sm_90a', "
                                     f"got {type(target).__name__}")
    return arch, tgt


def machine_for(arch: str, machine=None) -> Machine:
    """The machine model: the given one (name or Machine) or the built-in for ``arch``."""
    m = machine_for_arch(arch) if machine is None else get_machine(machine)
    if m.costs is None:
        raise UnsupportedTargetError(f"machine '{m.name}' has no cost model (tile shapes cannot be turned "
                                     "into cycles): use a built-in machine (tvm-twill machines lists them)")
    return m



def dlight_arch(arch: str) -> str:
    """The arch dlight schedules for: ``arch`` without an arch-specific suffix ("sm_90a" -> "sm_90").

    dlight's ``Matmul`` rule reads the arch with ``check_sm_version``, which
    takes only digits: for "sm_90a" it gets -1 and gives no matmul to tensor
    cores (no pipelines at all).  The suffix only adds instructions
    (wgmma, setmaxnreg) that dlight's schedules do not use, so the sm_90
    schedule is the one to plan and compile for sm_90a."""
    return arch[:-1] if arch[-1:] in ("a", "f") and arch[:-1].replace("sm_", "").isdigit() else arch


def dlight_target(target) -> tuple[object, str | None]:
    """(the target dlight's rules should read, the arch it replaces or None): a CUDA target whose arch has a
    suffix dlight cannot read (``dlight_arch``) becomes the same target with the plain arch; any other
    target is returned as it is."""
    if not isinstance(target, tvm.target.Target) or target.kind.name != "cuda" or "arch" not in target.attrs:
        return target, None
    arch = str(target.attrs["arch"])
    plain = dlight_arch(arch)
    if plain == arch:
        return target, None
    config = dict(target.export())
    config["arch"] = plain
    return tvm.target.Target(config), arch
