"""Read SASS (``cuobjdump -sass``) of a warp-specialized kernel: is the role dispatch warp-uniform?

Pure text processing, no TVM: the checker of what ``warp_specialize`` asks of ptxas (issue #8: the warp
index broadcast with ``shfl.sync``, single-thread issue under ``elect.sync``, ``setmaxnreg``).

``parse_sass(text)`` -> one ``SassFunction`` per kernel (instructions with address, guard predicate,
opcode, operands); ``role_report(fn)`` -> ``RoleReport``:

* the warp index: registers holding it, by a forward must-dataflow over the control-flow graph.  Seeds
  are ``SHFL.IDX`` (the broadcast), ``REDUX`` (a warp reduction), ``S2R``/``S2UR`` of ``SR_TID.Y`` /
  ``SR_TID.Z`` (a warp index when blockDim.x is a multiple of 32, as in the pass's kernels) and
  ``SR_TID.X`` shifted right by 5 or more; plain moves (``MOV``, ``IMAD.MOV``, ``IMAD.U32 Rd, RZ, RZ,
  x``, ``R2UR``, ``UMOV``) carry it.
* role branches: predicated ``BRA`` / ``EXIT`` whose guard was set, in the same basic block, by an
  integer compare (``ISETP`` / ``UISETP``) of a warp-index register with an immediate;
* a branch is uniform when its guard is a uniform predicate (``@UPx``) or its opcode has the ``.U``
  modifier (``BRA.U``, ``BRA.U.ANY``); ``RoleReport.uniform`` is True iff there is a role branch and
  every role branch is uniform;
* counts of ``ELECT``, ``USETMAXREG``, ``R2UR``, ``VOTEU``, ``SHFL``, ``REDUX``, branches, and the
  ``BRA.U.ANY`` loops ptxas wraps around an instruction whose operands must be uniform but are per-lane
  (``@P0 ELECT P1`` / ``@P1 R2UR`` / ``BRA.U.ANY`` back: one iteration per distinct value): their
  ``ELECT`` s are not ``elect.sync``.

``find_cuobjdump()`` looks on PATH, then in the ``nvidia-cuda-cuobjdump`` wheel of the running Python
(``pip install tvm-twill[sass]``); ``disassemble(cubin)`` runs it (cuobjdump needs ``nvdisasm``: the
``nvidia-cuda-nvdisasm`` wheel, found the same way and passed on PATH).
"""
from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Instr", "ptxas_report", "SassFunction", "RoleBranch", "RoleReport", "parse_sass", "role_report", "find_tool",
           "find_cuobjdump", "tool_version", "disassemble"]

_FUNC = re.compile(r"^\s*Function\s*:\s*(\S+)")
_INSTR = re.compile(r"^\s*/\*([0-9a-fA-F]{4,})\*/\s+(.*?)\s*;")
_GUARD = re.compile(r"^@(!?)(U?P[0-6T])\s+")
_HEX = re.compile(r"^-?(0x[0-9a-fA-F]+|\d+)$")
_MOVES = ("MOV", "IMAD.MOV", "IMAD.MOV.U32", "R2UR", "UMOV", "MOV.U32")
_COMPARES = ("ISETP", "UISETP")
_BRANCHES = ("BRA", "BRX", "JMP", "JMX")


@dataclass(frozen=True)
class Instr:
    """One SASS instruction: ``addr`` (bytes), ``guard`` ('' or e.g. '!P0', 'UP1'), ``opcode`` with its
    modifiers ('ISETP.GT.AND'), ``operands`` (text, '.reuse' dropped), ``text`` (as printed)."""

    addr: int
    guard: str
    opcode: str
    operands: tuple[str, ...]
    text: str

    @property
    def base(self) -> str:
        return self.opcode.split(".")[0]

    @property
    def guard_pred(self) -> str:
        return self.guard.lstrip("!")

    @property
    def is_branch(self) -> bool:
        return self.base in _BRANCHES

    @property
    def ends_block(self) -> bool:
        return self.is_branch or self.base in ("EXIT", "RET")

    @property
    def target(self) -> int | None:
        if self.base == "BRA" and self.operands and _HEX.match(self.operands[-1]):
            return int(self.operands[-1], 0)
        return None

    @property
    def uniform_branch(self) -> bool:
        """Guarded by a uniform predicate, or a ``.U`` branch (the hardware takes it warp-wide)."""
        return self.guard_pred.startswith("UP") or "U" in self.opcode.split(".")[1:]


@dataclass(frozen=True)
class SassFunction:
    name: str
    instrs: tuple[Instr, ...]

    def count(self, base: str) -> int:
        return sum(1 for i in self.instrs if i.base == base)

    def lines(self, base: str) -> list[str]:
        return [i.text for i in self.instrs if i.base == base]


def _split_operands(rest: str) -> tuple[str, ...]:
    parts, depth, cur = [], 0, []
    for ch in rest:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return tuple(p.replace(".reuse", "") for p in parts)


def parse_instr(addr: int, body: str) -> Instr:
    """``body``: the text between the address comment and ';' (e.g. '@P0 BRA 0x280')."""
    guard = ""
    m = _GUARD.match(body)
    rest = body
    if m:
        guard = m.group(1) + m.group(2)
        rest = body[m.end():]
    opcode, _, ops = rest.strip().partition(" ")
    return Instr(addr, guard, opcode, _split_operands(ops), body.strip())


def parse_sass(text: str) -> list[SassFunction]:
    """The functions of a ``cuobjdump -sass`` (or ``nvdisasm``-style) listing, in order.  Lines before
    the first ``Function :`` header go to a function named ''."""
    funcs: list[SassFunction] = []
    name, cur = "", []
    for line in text.splitlines():
        if (m := _FUNC.match(line)):
            if cur:
                funcs.append(SassFunction(name, tuple(cur)))
            name, cur = m.group(1), []
        elif (m := _INSTR.match(line)):
            cur.append(parse_instr(int(m.group(1), 16), m.group(2)))
    if cur:
        funcs.append(SassFunction(name, tuple(cur)))
    return funcs


# ---- the warp index, by dataflow over basic blocks

def _blocks(instrs: tuple[Instr, ...]) -> tuple[list[tuple[int, int]], dict[int, list[int]]]:
    """Basic blocks as [start, end) index ranges and their successor block ids."""
    index = {ins.addr: k for k, ins in enumerate(instrs)}
    leaders = {0}
    for k, ins in enumerate(instrs):
        if ins.ends_block:
            leaders.add(k + 1)
        if ins.target is not None and ins.target in index:
            leaders.add(index[ins.target])
    starts = sorted(s for s in leaders if s < len(instrs))
    blocks = [(s, e) for s, e in zip(starts, starts[1:] + [len(instrs)])]
    block_of = {s: b for b, (s, _) in enumerate(blocks)}
    succ: dict[int, list[int]] = {}
    for b, (s, e) in enumerate(blocks):
        last = instrs[e - 1]
        out = []
        if last.target is not None and last.target in index:
            out.append(block_of[index[last.target]])
        unconditional = not last.guard or last.guard == "PT"
        falls = not (last.ends_block and unconditional) and e < len(instrs)
        if falls:
            out.append(block_of[e])
        succ[b] = out
    return blocks, succ


def _transfer(ins: Instr, warp: frozenset, tidx: frozenset) -> tuple[frozenset, frozenset]:
    if not ins.operands:
        return warp, tidx
    dst = ins.operands[0]
    if ins.base == "SHFL":  # SHFL.IDX PT, Rd, Rs, lane, clamp: Rd is operand 1
        dst = ins.operands[1] if len(ins.operands) > 1 else dst
    srcs = ins.operands[1:]
    is_warp = is_tid = False
    if ins.opcode.startswith("SHFL.IDX"):
        is_warp = True
    elif ins.base == "REDUX":
        is_warp = True
    elif ins.base in ("S2R", "S2UR") and srcs:
        is_warp = srcs[0] in ("SR_TID.Y", "SR_TID.Z")
        is_tid = srcs[0] == "SR_TID.X"
    elif ins.base in ("SHF", "USHF") and ".R." in ins.opcode + "." and len(srcs) >= 3:
        shift = srcs[1]
        is_warp = srcs[2] in tidx and bool(_HEX.match(shift)) and int(shift, 0) >= 5 or srcs[2] in warp \
            and shift in ("0x0", "0")
    elif ins.opcode in _MOVES:
        src = srcs[-1] if srcs else ""
        is_warp, is_tid = src in warp, src in tidx
    elif ins.opcode == "IMAD.U32" and len(srcs) == 3 and srcs[0] == "RZ" and srcs[1] == "RZ":
        is_warp, is_tid = srcs[2] in warp, srcs[2] in tidx
    if ins.guard and ins.guard != "PT":  # a guarded write may not happen: the old value may stay
        keep_w, keep_t = dst in warp, dst in tidx
        is_warp, is_tid = is_warp and keep_w, is_tid and keep_t
    warp = warp | {dst} if is_warp else warp - {dst}
    tidx = tidx | {dst} if is_tid else tidx - {dst}
    return warp, tidx


def _warp_regs_at_blocks(fn: SassFunction):
    """For each basic block, the registers holding the warp index on entry (must: on every path)."""
    instrs = fn.instrs
    blocks, succ = _blocks(instrs)
    top = None  # "every register" (not yet reached)
    state_in = {b: top for b in range(len(blocks))}
    state_in[0] = (frozenset(), frozenset())
    work = [0]
    while work:
        b = work.pop()
        w, t = state_in[b]
        s, e = blocks[b]
        for ins in instrs[s:e]:
            w, t = _transfer(ins, w, t)
        for nb in succ[b]:
            old = state_in[nb]
            new = (w, t) if old is None else (old[0] & w, old[1] & t)
            if new != old:
                state_in[nb] = new
                work.append(nb)
    return blocks, state_in


@dataclass(frozen=True)
class RoleBranch:
    """A branch on the warp index: the branch and the compare that set its guard."""

    branch: Instr
    compare: Instr

    @property
    def uniform(self) -> bool:
        return self.branch.uniform_branch

    @property
    def value_in_uniform_register(self) -> bool:
        """The compare read the warp index from a uniform register (URx)."""
        return any(op.startswith("UR") for op in self.compare.operands[2:4])


@dataclass(frozen=True)
class RoleReport:
    function: str
    role_branches: tuple[RoleBranch, ...]
    branches: int               # BRA / BRX / JMP / JMX
    uniform_branches: int       # of those: @UPx guard or .U
    elect: int
    usetmaxreg: int
    r2ur: int
    voteu: int
    shfl: int
    redux: int
    waterfalls: int             # BRA.U.ANY: ptxas's loops that make a per-lane operand uniform (R2UR)
    warp_index_sources: tuple[str, ...] = field(default=())

    @property
    def uniform(self) -> bool:
        """True iff there is a role branch and every role branch is uniform."""
        return bool(self.role_branches) and all(rb.uniform for rb in self.role_branches)

    def lines(self) -> list[str]:
        return [f"{rb.compare.text} ; {rb.branch.text}" for rb in self.role_branches]


def _is_imm(op: str) -> bool:
    return bool(_HEX.match(op))


def role_report(fn: SassFunction) -> RoleReport:
    """The role dispatch of ``fn`` (see the module docstring) and the counts."""
    instrs = fn.instrs
    blocks, state_in = _warp_regs_at_blocks(fn)
    roles = []
    for b, (s, e) in enumerate(blocks):
        if state_in[b] is None:
            continue  # unreachable
        w, t = state_in[b]
        seen: list[tuple[Instr, frozenset]] = []  # (instr, warp regs before it)
        for ins in instrs[s:e]:
            seen.append((ins, w))
            w, t = _transfer(ins, w, t)
        for k, (ins, _) in enumerate(seen):
            if not (ins.base in ("BRA", "EXIT") and ins.guard_pred not in ("", "PT")):
                continue
            for prev, w_before in reversed(seen[:k]):  # the last write of the guard in this block
                if ins.guard_pred in prev.operands[:2 if prev.base in _COMPARES else 1]:
                    if prev.base in _COMPARES and len(prev.operands) >= 4:
                        a, c = prev.operands[2], prev.operands[3]
                        if (a in w_before and _is_imm(c)) or (c in w_before and _is_imm(a)):
                            roles.append(RoleBranch(ins, prev))
                    break
    branches = [i for i in instrs if i.is_branch]
    sources = tuple(i.text for i in instrs if i.opcode.startswith("SHFL.IDX") or i.base == "REDUX"
                    or (i.base in ("S2R", "S2UR") and any(o.startswith("SR_TID") for o in i.operands)))
    return RoleReport(function=fn.name, role_branches=tuple(roles), branches=len(branches),
                      uniform_branches=sum(1 for i in branches if i.uniform_branch), elect=fn.count("ELECT"),
                      usetmaxreg=fn.count("USETMAXREG"), r2ur=fn.count("R2UR"), voteu=fn.count("VOTEU"),
                      shfl=fn.count("SHFL"), redux=fn.count("REDUX"),
                      waterfalls=sum(1 for i in branches if i.opcode == "BRA.U.ANY"), warp_index_sources=sources)


# ---- the tools

def _site_dirs() -> list[Path]:
    dirs = []
    try:
        dirs += site.getsitepackages()
    except AttributeError:  # some virtualenvs
        pass
    try:
        dirs.append(site.getusersitepackages())
    except AttributeError:
        pass
    dirs += [p for p in sys.path if p.endswith("site-packages")]
    out = []
    for d in dirs:
        p = Path(d)
        if p.is_dir() and p not in out:
            out.append(p)
    return out


def find_tool(name: str) -> str | None:
    """``name`` (cuobjdump, nvdisasm) on PATH, then in an NVIDIA wheel of the running Python
    (``site-packages/nvidia/*/bin``, ``site-packages/nvidia/*/*/bin``); None when absent."""
    if (p := shutil.which(name)):
        return p
    for d in _site_dirs():
        for cand in sorted(d.glob(f"nvidia/*/bin/{name}")) + sorted(d.glob(f"nvidia/*/*/bin/{name}")):
            if cand.is_file() and os.access(cand, os.X_OK):
                return str(cand)
    return None


def find_cuobjdump() -> str | None:
    return find_tool("cuobjdump")


def tool_version(path: str) -> str:
    """The 'release X, VY' line of ``path --version``."""
    r = subprocess.run([path, "--version"], capture_output=True, text=True)
    m = re.search(r"release [^\n]*", r.stdout)
    return m.group(0).strip() if m else r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "unknown"


def disassemble(cubin: str | os.PathLike, cuobjdump: str | None = None) -> str:
    """``cuobjdump -sass cubin``; raises FileNotFoundError when cuobjdump is absent and RuntimeError
    when it fails (e.g. no nvdisasm)."""
    tool = cuobjdump or find_cuobjdump()
    if tool is None:
        raise FileNotFoundError("cuobjdump not found: pip install 'tvm-twill[sass]' (nvidia-cuda-cuobjdump)")
    env = dict(os.environ)
    nvd = find_tool("nvdisasm")
    if nvd is not None:
        env["PATH"] = os.path.dirname(nvd) + os.pathsep + env.get("PATH", "")
    r = subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"cuobjdump failed: {r.stderr.strip()[-500:]}")
    return r.stdout


def ptxas_report(src: str, arch: str) -> list[str] | None:
    """The register, spill and setmaxnreg (C7508) lines of ``nvcc -arch=ARCH -cubin -Xptxas -v`` on CUDA
    source ``src``, and the wgmma serialization lines (``compiler.ptxas``); None when nvcc is not
    installed.  Raises ToolchainError (a RuntimeError) when nvcc fails."""
    from .ptxas import ptxas_output

    out = ptxas_output(src, arch)
    if out is None:
        return None
    return [line.strip() for line in out.splitlines()
            if "registers" in line or "spill" in line or "C7508" in line or "are serialized" in line]


def print_ptxas_report(src: str, arch: str, skip: bool = False) -> None:
    """Print ``ptxas_report`` as the tutorials show it: one ``ptxas:`` line each, or why there is none."""
    if skip:
        print("(--no-nvcc: skipping the register/spill report)")
        return
    lines = ptxas_report(src, arch)
    if lines is None:
        print("(nvcc not found: skipping the register/spill report)")
    for line in lines or []:
        print("ptxas:", line)
