"""What ptxas says about a kernel (``nvcc -cubin -Xptxas -v``), as typed facts.

Pure text processing; ``ptxas_output`` runs nvcc.  ptxas reports, besides the
register and spill figures, the places where it undoes what the machine model
counts on.  The ones read here (nvcc 13.0, sm_90a; the text of each, as ptxas
prints it, is in tests/transforms/test_ptxas_messages.py):

* "Potential Performance Loss: wgmma.mma_async instructions are serialized
  due to <reason> in the function '<f>'" (one code per reason): every wgmma
  of the function waits for its own completion before the warp goes on, so
  it overlaps nothing the warp issues after it.  Reasons seen: non-wgmma
  instructions reading accumulator registers of a wgmma between start and
  end of the pipeline stage (C7514: an accumulator passed to a call between
  the wgmma and its wait); insufficient register resources for the wgmma
  pipeline (C7511: an accumulator written between the wgmma and its
  commit); program dependence on compiler-inserted WG.AR in divergent path
  (C7520: a wgmma under a per-thread branch).  Any other reason parses the
  same way.
* ``(C7517)`` "warpgroup.wait is injected in around line N ... to allow use of
  registers defined by GMMA" and ``(C7519)`` "warpgroup.arrive is injected
  ...": ptxas added a wait (or an arrive) the source did not have; they come
  with the serialization message.

``parse_ptxas(text)`` -> ``PtxasMessage`` per line that carries a message
code; ``wgmma_serialized(messages)`` -> the serialization messages;
``kernel_registers(text)`` -> registers per thread of each entry function
("Compiling entry function 'f' for 'sm_90a'" ... "Used N registers").
"""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import ToolchainError

__all__ = ["PtxasMessage", "find_nvcc", "kernel_registers", "parse_ptxas", "ptxas_messages", "ptxas_output",
           "wgmma_serialized"]

_CODED = re.compile(r"ptxas\s+(info|warning|error)\s*:\s*\((C\d{4})\)\s*(.*)$")
_SERIALIZED = re.compile(r"wgmma\.mma_async instructions are serialized due to (.*?)"
                         r"(?: in the function '([^']*)')?\.?$")
_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_USED = re.compile(r"Used (\d+) registers")
_INJECTED = re.compile(r"(warpgroup\.(?:wait|arrive)) is injected in around line (\d+)(.*?)"
                       r"(?: in function '([^']*)')?\.?$")

#: The kinds of message ``parse_ptxas`` tells apart.
KINDS = ("wgmma serialized", "wait injected", "arrive injected", "other")


@dataclass(frozen=True)
class PtxasMessage:
    """One coded ptxas message: ``code`` ('C7514'), ``severity`` ('info', 'warning', 'error'),
    ``kind`` (one of ``KINDS``), ``reason`` (a serialization's cause, an injection's purpose, else
    the message), ``function`` (the kernel named, '' when none), ``line`` (the PTX line of an
    injection, else None) and ``text`` (the line as ptxas printed it)."""

    code: str
    severity: str
    kind: str
    reason: str
    function: str
    line: int | None
    text: str

    def describe(self) -> str:
        where = f" in '{self.function}'" if self.function else ""
        if self.kind == "wgmma serialized":
            return f"ptxas {self.code}: wgmma serialized{where} due to {self.reason}"
        if self.kind in ("wait injected", "arrive injected"):
            return f"ptxas {self.code}: {self.kind} near PTX line {self.line}{where}"
        return f"ptxas {self.code}: {self.reason}"


def _one(line: str) -> PtxasMessage | None:
    m = _CODED.search(line)
    if m is None:
        return None
    severity, code, body = m.group(1), m.group(2), " ".join(m.group(3).split())
    if (s := _SERIALIZED.search(body)) is not None:
        return PtxasMessage(code, severity, "wgmma serialized", s.group(1).strip(), s.group(2) or "", None,
                            line.strip())
    if (i := _INJECTED.search(body)) is not None:
        kind = "wait injected" if i.group(1).endswith("wait") else "arrive injected"
        reason = i.group(3).strip().removeprefix("by compiler").strip()
        return PtxasMessage(code, severity, kind, reason, i.group(4) or "", int(i.group(2)), line.strip())
    return PtxasMessage(code, severity, "other", body, "", None, line.strip())


def parse_ptxas(text: str) -> tuple[PtxasMessage, ...]:
    """Every coded message (``ptxas info : (Cnnnn) ...``) of ptxas's output, in order; lines without a
    code (the register and spill figures) are not messages."""
    return tuple(m for line in text.splitlines() if (m := _one(line)) is not None)


def wgmma_serialized(messages) -> tuple[PtxasMessage, ...]:
    """The messages that say ptxas serialized wgmma."""
    return tuple(m for m in messages if m.kind == "wgmma serialized")


def kernel_registers(text: str) -> dict[str, int]:
    """Entry function -> registers per thread, from ptxas's ``-v`` output: each "Used N registers" line
    belongs to the last "Compiling entry function 'f'" before it (device functions are not entries)."""
    out: dict[str, int] = {}
    entry = None
    for line in text.splitlines():
        if (e := _ENTRY.search(line)) is not None:
            entry = e.group(1)
        elif entry is not None and (u := _USED.search(line)) is not None:
            out[entry] = int(u.group(1))
            entry = None
    return out


def find_nvcc() -> str | None:
    """The nvcc ptxas runs through (``PATH``); None when the CUDA toolkit is not installed."""
    return shutil.which("nvcc")


def ptxas_output(src: str, arch: str) -> str | None:
    """What ``nvcc -arch=ARCH -cubin -Xptxas -v`` prints for CUDA source ``src`` (stdout and stderr);
    None when nvcc is not installed.  Raises ToolchainError when nvcc rejects the source."""
    nvcc = find_nvcc()
    if nvcc is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        cu = Path(d) / "kernel.cu"
        cu.write_text(src)
        r = subprocess.run([nvcc, f"-arch={arch}", "-cubin", "-o", str(Path(d) / "kernel.cubin"), str(cu),
                            "-Xptxas", "-v"], check=False, capture_output=True, text=True)
    if r.returncode != 0:
        raise ToolchainError(f"nvcc -arch={arch} failed on the kernel: {r.stderr.strip()[-300:]}")
    return r.stdout + r.stderr


def ptxas_messages(src: str, arch: str) -> tuple[PtxasMessage, ...] | None:
    """``parse_ptxas(ptxas_output(src, arch))``; None when nvcc is not installed."""
    out = ptxas_output(src, arch)
    return None if out is None else parse_ptxas(out)
