"""Mutation kill rate of the emulator: which synchronization bugs planted in real kernels' PTX it catches.

Kernels (``SUBJECTS``): TVM-built SWP sm_80 GEMM (cp.async ring), WS sm_80 GEMM (producer warp, cp.async +
mbarrier), WS sm_90a GEMM (TMA + wgmma + mbarrier), each 256^3, one CTA (blocks=[(0, 0, 0)]); and the frozen
foreign PTX of tests/emulator/foreign/: Triton's tutorial matmul for sm_80 (cp.async, 128 x 64 x CP_K, two
CTAs), for sm_90 (cp.async + wgmma, the same shape) and Triton's TMA matmul for sm_90a (TMA loads and store,
wgmma, mbarrier; 256 x 128 x TMA_K, two CTAs).

Operators (``OPERATORS``), each applied to every site of the PTX text (a site is one statement; no sampling
unless ``--sample N`` is given, which keeps a seeded sample of N sites per kernel and operator): delete a
``cp.async.wait_group`` / ``wait_all``, raise a wait_group count by one, delete a ``cp.async.commit_group``,
delete a ``bar.sync`` / ``barrier.sync`` / ``bar.arrive`` (``bar.warp.sync`` is not mutated), delete a fence
(``fence.proxy.async``, ``fence.mbarrier_init``, ``membar``, ``fence.acq_rel`` / ``fence.sc``), flip the parity
operand of an ``mbarrier.test_wait/try_wait.parity`` (xor 1 into a fresh register, or invert an immediate),
halve or add 16 to an ``expect_tx`` byte count, delete an ``mbarrier.arrive`` (any form, ``cp.async.mbarrier
.arrive`` included), raise or lower an ``mbarrier.init`` count by one, delete ``wgmma.fence`` /
``wgmma.commit_group`` / ``wgmma.wait_group``, raise a ``wgmma.wait_group`` count, delete a
``cp.async.bulk.commit_group`` / ``cp.async.bulk.wait_group``.

Each mutant runs under up to 8 interleavings (``SCHEDULES``: seeds and policy knobs, the default policy's
checks only) until one kills it: a finding (``Report.ok`` false), output values that differ from numpy's,
or an ``EmulationError`` (the mutant does not load, or runs past 10x the original's instructions).  The
original kernel must run clean with numpy's values under every schedule.  A mutant that is provably the
original's behaviour is classified ``equivalent`` by a rule of ``equivalent`` (static, on the PTX's control-flow
graph) before it runs; the survivors' analysis is ``ANALYSIS``.

    python bench/emulator_mutants.py                 # print the table
    python bench/emulator_mutants.py --save          # and write bench/results/emulator_mutants.md
    python bench/emulator_mutants.py --kernels triton_matmul_sm80 --sample 3
"""
from __future__ import annotations

import argparse
import dataclasses
import platform
import random
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MUT = "%mut0"          # the fresh register a value mutation computes into (declared by _declare)

# --- the mutation operators ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Operator:
    name: str           # what the mutant does
    group: str          # the operator class of the table
    pattern: str        # regex of the opcode at the start of a statement (after its guard)
    action: str         # "delete", "count+1", "count-1", "parity", "tx/2", "tx+16"


_WAIT_CP = r"cp\.async\.wait_group\b"
OPERATORS = [
    Operator("delete cp.async.wait_group/wait_all", "cp.async wait", r"cp\.async\.wait_(group|all)\b", "delete"),
    Operator("raise cp.async.wait_group count by 1", "cp.async wait", _WAIT_CP, "count+1"),
    Operator("delete cp.async.commit_group", "cp.async commit", r"cp\.async\.commit_group\b", "delete"),
    Operator("delete bar.sync/barrier.sync/bar.arrive", "CTA barrier", r"(bar|barrier)\.(sync|arrive)\b", "delete"),
    Operator("delete fence", "fence",
             r"(fence\.proxy\.async|fence\.mbarrier_init|membar\.|fence\.(acq_rel|sc)\b)", "delete"),
    Operator("flip mbarrier wait parity", "mbarrier parity", r"mbarrier\.(test_wait|try_wait)\.parity\b", "parity"),
    Operator("halve expect_tx bytes", "mbarrier expect_tx", r"mbarrier\.(arrive\.)?expect_tx\b", "tx/2"),
    Operator("expect_tx bytes + 16", "mbarrier expect_tx", r"mbarrier\.(arrive\.)?expect_tx\b", "tx+16"),
    Operator("delete mbarrier arrive", "mbarrier arrive", r"(cp\.async\.)?mbarrier\.arrive\b", "delete"),
    Operator("mbarrier.init count + 1", "mbarrier init count", r"mbarrier\.init\b", "count+1"),
    Operator("mbarrier.init count - 1", "mbarrier init count", r"mbarrier\.init\b", "count-1"),
    Operator("delete wgmma.fence", "wgmma", r"wgmma\.fence\b", "delete"),
    Operator("delete wgmma.commit_group", "wgmma", r"wgmma\.commit_group\b", "delete"),
    Operator("delete wgmma.wait_group", "wgmma", r"wgmma\.wait_group\b", "delete"),
    Operator("raise wgmma.wait_group count by 1", "wgmma", r"wgmma\.wait_group\b", "count+1"),
    Operator("delete cp.async.bulk.commit_group", "bulk async-group", r"cp\.async\.bulk\.commit_group\b", "delete"),
    Operator("delete cp.async.bulk.wait_group", "bulk async-group", r"cp\.async\.bulk\.wait_group\b", "delete"),
]

_STMT = re.compile(r"(@!?%?[\w.]+\s+)?([a-z][\w.:]*)([^;]*);")


@dataclass(frozen=True)
class Site:
    line: int           # 1-based line of the PTX text
    start: int          # the statement's span in that line (guard included, ';' included)
    end: int
    opcode: str
    operands: str


@dataclass(frozen=True)
class Mutant:
    kernel: str
    operator: Operator
    site: Site
    ptx: str
    original: str = dataclasses.field(repr=False, default="")


def sites(ptx: str, pattern: str) -> list[Site]:
    """Every statement whose opcode matches ``pattern`` (comments and directives skipped)."""
    rx = re.compile(pattern)
    out = []
    for n, text in enumerate(ptx.splitlines(), 1):
        code = text.split("//", 1)[0]
        if not code.strip() or code.lstrip().startswith("."):
            continue
        for m in _STMT.finditer(code):
            if rx.match(m.group(2)):
                out.append(Site(n, m.start(), m.end(), m.group(2), m.group(3)))
    return out


def _operands(text: str) -> list[str]:
    """Top-level comma-separated operands (brackets and braces kept whole)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "[{" and 1 or (ch in "]}" and -1 or 0)
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + ([cur.strip()] if cur.strip() else [])


def _with_value(site: Site, text: str, index: int, action: str) -> str | None:
    """The statement with operand ``index`` changed by ``action``: an immediate is changed in place, a register
    is copied into %mut0 by an instruction inserted just before the statement (same line, same scope)."""
    ops = _operands(site.operands)
    if not ops or index >= len(ops) or index < -len(ops):
        return None
    old = ops[index]
    stmt = text[site.start:site.end]
    guard = stmt[:stmt.index(site.opcode)]
    if re.fullmatch(r"-?\d+", old):
        v = int(old)
        new = {"parity": v ^ 1, "tx/2": v // 2, "tx+16": v + 16, "count+1": v + 1, "count-1": v - 1}[action]
        pre = ""
    else:
        pre = {"parity": f"xor.b32 {MUT}, {old}, 1; ", "tx/2": f"shr.u32 {MUT}, {old}, 1; ",
               "tx+16": f"add.u32 {MUT}, {old}, 16; ", "count+1": f"add.u32 {MUT}, {old}, 1; ",
               "count-1": f"sub.u32 {MUT}, {old}, 1; "}[action]
        new = MUT
    ops[index] = str(new)
    return f"{pre}{guard}{site.opcode} {', '.join(ops)};"


def _mutated_statement(op: Operator, site: Site, text: str) -> str | None:
    if op.action == "delete":
        return ""
    if op.action in ("parity",):
        return _with_value(site, text, 2, op.action)        # test_wait/try_wait: pred, [addr], parity{, hint}
    if op.action.startswith("tx"):
        return _with_value(site, text, -1, op.action)       # [expect_tx | arrive.expect_tx state,] [addr], tx
    if op.action.startswith("count") and "wait_group" in site.opcode:
        m = re.fullmatch(r"\s*(\d+)\s*", site.operands)
        if not m:
            return None
        stmt = text[site.start:site.end]
        return stmt.replace(site.operands, f" {int(m.group(1)) + 1}")
    return _with_value(site, text, -1, op.action)           # mbarrier.init [addr], count


def _declare(lines: list[str]) -> list[str]:
    """Declare %mut0 (b32) with the kernel's first register declaration."""
    for i, ln in enumerate(lines):
        if ln.strip().startswith(".reg"):
            return lines[:i] + ["\t.reg .b32 \t%mut0;"] + lines[i:]
    raise ValueError("no .reg declaration in the PTX")


def mutants(kernel: str, ptx: str, sample: int | None = None, seed: int = 0) -> list[Mutant]:
    """Every mutant of ``ptx`` (or, with ``sample``, a seeded sample of that many sites per operator)."""
    lines = ptx.splitlines()
    out = []
    for op in OPERATORS:
        found = sites(ptx, op.pattern)
        if op.action == "count+1" and "wait_group" in op.pattern:
            found = [s for s in found if re.fullmatch(r"\s*\d+\s*", s.operands)]
        if sample is not None and len(found) > sample:
            found = sorted(random.Random(f"{seed}:{kernel}:{op.name}").sample(found, sample), key=lambda s: s.line)
        for s in found:
            text = lines[s.line - 1]
            new = _mutated_statement(op, s, text)
            if new is None:
                continue
            changed = list(lines)
            changed[s.line - 1] = text[:s.start] + new + text[s.end:]
            if MUT in new:
                changed = _declare(changed)
            out.append(Mutant(kernel, op, s, "\n".join(changed) + "\n", ptx))
    return out


# --- equivalent mutants: a control-flow graph of the PTX and five rules ------------------------------------

_LABEL = re.compile(r"^\s*([$\w]+):")


@dataclass
class _Stmt:
    line: int
    guard: str          # "" or the guard ("%p1", "!%p1")
    opcode: str
    operands: str
    succ: list = dataclasses.field(default_factory=list)
    pred: list = dataclasses.field(default_factory=list)


def _tokens(ptx: str):
    """(line, token) over the kernel body: "{" / "}" opening / closing a scope, "name:" a label, else a statement
    (braces inside a statement are vector operands)."""
    lines = ptx.splitlines()
    start = next(i for i, ln in enumerate(lines) if ".entry" in ln)
    start = next(i for i in range(start, len(lines)) if lines[i].strip() == "{") + 1
    buf, first = "", 0
    for n in range(start, len(lines)):
        code = lines[n].split("//", 1)[0]
        if code.lstrip().startswith("."):
            continue
        for ch in code + "\n":
            if not buf.strip():
                first = n + 1
                if ch in "{}":
                    yield n + 1, ch
                    buf = ""
                    continue
            if ch == ":" and re.fullmatch(r"\s*[$\w]+", buf):
                yield first, buf.strip() + ":"
                buf = ""
            elif ch == ";":
                yield first, " ".join(buf.split()) + ";"
                buf = ""
            else:
                buf += ch


def cfg(ptx: str) -> list[_Stmt] | None:
    """The kernel's statements with successors and predecessors (labels in inline-asm ``{ }`` scopes resolved in
    their scope); None where a branch target cannot be resolved."""
    stmts, labels, pending, scopes, nscope = [], {}, [], [0], 0
    for n, tok in _tokens(ptx):
        if tok == "{":
            nscope += 1
            scopes.append(nscope)
        elif tok == "}":
            if len(scopes) == 1:
                break
            scopes.pop()
        elif tok.endswith(":"):
            labels[(scopes[-1], tok[:-1])] = len(stmts)
        else:
            m = _STMT.match(tok)
            if m:
                g = (m.group(1) or "").strip().lstrip("@")
                stmts.append(_Stmt(n, g, m.group(2), m.group(3).strip()))
                pending.append(tuple(scopes))
    for i, (st, sc) in enumerate(zip(stmts, pending)):
        nxt = [i + 1] if i + 1 < len(stmts) else []
        if st.opcode.startswith("bra"):
            tgt = next((labels[(s_, st.operands)] for s_ in reversed(sc) if (s_, st.operands) in labels), None)
            if tgt is None:
                return None
            st.succ = [tgt] + (nxt if st.guard else [])
        elif st.opcode in ("ret", "exit"):
            st.succ = nxt if st.guard else []
        elif st.opcode.startswith(("brx", "call")):
            return None
        else:
            st.succ = nxt
    for i, st in enumerate(stmts):
        for j in st.succ:
            stmts[j].pred.append(i)
    return stmts


def _at(stmts: list[_Stmt], site: Site) -> int | None:
    return next((i for i, s in enumerate(stmts) if s.line == site.line and s.opcode == site.opcode), None)


def _cp_event(st: _Stmt) -> str | None:
    if st.opcode.startswith("cp.async.wait_group") or st.opcode.startswith("cp.async.wait_all"):
        return "wait"
    if st.opcode.startswith("cp.async.commit_group"):
        return "commit"
    if st.opcode.startswith("cp.async.") and not st.opcode.startswith(("cp.async.bulk", "cp.async.mbarrier")):
        return "issue"
    return None


def _count(st: _Stmt) -> int:
    return 0 if "wait_all" in st.opcode else int(st.operands)


def _redundant_wait(stmts, i) -> str | None:
    """Every path into the wait meets, before any cp.async issue or commit, a wait allowing no more pending
    groups (or the kernel's start: nothing pending): this one completes nothing (PTX ISA, cp.async.wait_group
    waits until at most N of the thread's most recent groups are pending; none was committed since).  Or every
    path out of it reaches such a wait before any memory access or synchronization: that one does its work."""
    n, seen, todo = _count(stmts[i]), set(), list(stmts[i].succ)
    while todo:
        j = todo.pop()
        if j in seen:
            continue
        seen.add(j)
        ev, st = _cp_event(stmts[j]), stmts[j]
        if ev == "wait" and not st.guard and _count(st) <= n:
            continue
        if ev is not None or _access(st) or not st.succ:
            break
        todo.extend(st.succ)
    else:
        return "every path out of it reaches a wait allowing no more pending groups before any access"
    seen, todo = set(), list(stmts[i].pred)
    if not stmts[i].pred and i != 0:
        return None
    while todo:
        j = todo.pop()
        if j in seen:
            continue
        seen.add(j)
        ev = _cp_event(stmts[j])
        if ev == "wait" and not stmts[j].guard and _count(stmts[j]) <= n:
            continue
        if ev is not None:
            return None
        todo.extend(stmts[j].pred)
    return "every path into it passes a wait allowing no more pending groups, and no commit since"


def _group_ops(kind: str):
    if kind == "wgmma":
        return (lambda st: st.opcode.startswith("wgmma.commit_group")), \
            (lambda st: st.opcode.startswith("wgmma.wait_group"))
    return (lambda st: _cp_event(st) == "commit"), (lambda st: _cp_event(st) == "wait")


def _idle_wait(stmts, i, kind: str) -> str | None:
    """Count the committed, not yet waited-for groups on every path from the start: where at most N are ever
    pending at this wait_group N, it completes nothing, and neither does the mutant (deleted, or N + 1)."""
    commit, wait = _group_ops(kind)
    n = _count(stmts[i]) if kind != "wgmma" else int(stmts[i].operands)
    todo, seen = [(0, 0)], set()
    while todo:
        j, k = todo.pop()
        if (j, k) in seen:
            continue
        seen.add((j, k))
        st = stmts[j]
        if j == i and k > n:
            return None
        if commit(st):
            k = min(k + 1, 64)
        elif wait(st) and not st.guard:
            k = min(k, 0 if "wait_all" in st.opcode else int(st.operands))
        todo.extend((s_, k) for s_ in st.succ)
    return f"at most {n} groups are ever pending here: the wait completes nothing"


def _merged_commit(stmts, i, kind: str) -> str | None:
    """Deleting commit C adds its operations to the group the next commit closes.  Follow every path from the
    start with the original's pending groups ("c" for one C closed, "g" for any other): a wait_group N completes
    all but the N most recent; in the mutant, C's operations complete with the group after it (the same wait
    must complete both, or neither).  Equivalent when no wait on any path tells them apart."""
    commit, wait = _group_ops(kind)
    todo, seen = [(0, ())], set()
    while todo:
        j, groups = todo.pop()
        if (j, groups) in seen:
            continue
        seen.add((j, groups))
        st = stmts[j]
        if (commit(st) or wait(st)) and st.guard:
            return None
        if commit(st):
            groups += ("c" if j == i else "g",)
        elif wait(st):
            n = 0 if "wait_all" in st.opcode else int(st.operands)
            done = set(range(max(len(groups) - n, 0)))
            kept = [k for k, g in enumerate(groups) if g != "c"]
            mut = set(kept[:max(len(kept) - n, 0)])
            for k, g in enumerate(groups):
                with_mut = (k + 1 < len(groups) and k + 1 in mut) if g == "c" else k in mut
                if n and (k in done) != with_mut:
                    return None
            groups = groups[len(done):]
        if len(groups) > 24:
            return None
        todo.extend((s_, groups) for s_ in st.succ)
    return "the deleted commit's operations join the next group, and no wait on any path tells the two apart"


_NEUTRAL = ("bar.warp.sync", "ld.param", "prefetch", "nanosleep", "shfl", "vote", "elect", "match", "mma.sync",
            "bra", "ret", "exit", "createpolicy")
_READS = ("ld.", "ldu.", "ldmatrix")
_OTHER = ("st.", "atom", "red.", "cp.", "mbarrier", "fence", "membar", "wgmma", "stmatrix", "tensormap", "bar.",
          "barrier.", "setmaxnreg", "griddepcontrol", "trap", "tcgen05", "wmma")


def _access(st: _Stmt) -> str | None:
    """"read", "other" (a write, an async op, a wait or fence: anything ordering or touching memory) or None."""
    if st.opcode.startswith(_NEUTRAL):
        return None
    if st.opcode.startswith(_READS):
        return "read"
    return "other" if st.opcode.startswith(_OTHER) else None


def _full_barrier(st: _Stmt) -> bool:
    return (not st.guard and re.fullmatch(r"(bar|barrier)\.sync(\.aligned)?", st.opcode) is not None
            and re.fullmatch(r"0", st.operands) is not None)


def _known(*xs) -> bool:
    return all(x is not None for x in xs)


def _thread_sets(stmts, block):
    """For each predicate register, (may, must): where it may / must be true over the CTA's threads, from the
    straight-line arithmetic on %tid it is computed from (a register defined twice, or from anything else, is
    unknown: may everywhere, must nowhere)."""
    tx, ty, tz = np.meshgrid(np.arange(block[0]), np.arange(block[1]), np.arange(block[2]), indexing="ij")
    sreg = {"%tid.x": tx.T.reshape(-1), "%tid.y": ty.T.reshape(-1), "%tid.z": tz.T.reshape(-1)}
    ndef: dict = {}
    for st in stmts:
        for d in st.operands.split(",")[0].split("|"):
            ndef[d.strip()] = ndef.get(d.strip(), 0) + 1
    val, pred = {}, {}
    nthreads = tx.size
    unknown = (np.ones(nthreads, bool), np.zeros(nthreads, bool))

    def num(o):
        o = o.strip()
        if re.fullmatch(r"-?\d+", o):
            return np.full(nthreads, int(o), np.int64)
        return sreg.get(o, val.get(o))

    def pr(o):
        o = o.strip()
        if o.startswith("!"):
            may, must = pr(o[1:])
            return ~must, ~may
        return pred.get(o, unknown)
    ops = {"shr": lambda a, b: a >> b, "shl": lambda a, b: a << b, "and": lambda a, b: a & b, "or": lambda a, b: a | b,
           "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "xor": lambda a, b: a ^ b}
    cmp = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
           "ge": np.greater_equal}
    for st in stmts:
        args = [a.strip() for a in st.operands.split(",")]
        head = st.opcode.split(".")
        if st.guard or not args or ndef.get(args[0], 0) != 1:
            continue
        if head[0] == "mov" and len(args) == 2 and num(args[1]) is not None:
            val[args[0]] = num(args[1])
        elif head[0] in ops and head[-1] != "pred" and len(args) == 3 and _known(num(args[1]), num(args[2])):
            val[args[0]] = ops[head[0]](num(args[1]), num(args[2]))
        elif head[0] == "setp" and head[1] in cmp and len(args) == 3 and _known(num(args[1]), num(args[2])):
            r = cmp[head[1]](num(args[1]), num(args[2]))
            pred[args[0]] = (r, r)
        elif head[0] in ("and", "or") and head[-1] == "pred" and len(args) == 3:
            (a1, a2), (b1, b2) = pr(args[1]), pr(args[2])
            pred[args[0]] = (a1 & b1, a2 & b2) if head[0] == "and" else (a1 | b1, a2 | b2)
    return pred, pr


def _redundant_barrier(stmts, i, block) -> str | None:
    """The barrier orders only pairs (A, B) of different warps with A after the previous CTA barrier (or the
    start) and B before the next one (or the end); every other pair a neighbouring barrier orders.  So it is
    redundant when one of these two windows touches no memory, both only read, or every access in both comes
    from one warp (its guard may be true in one warp only: program order)."""
    if not _full_barrier(stmts[i]):
        return None
    _, pr = _thread_sets(stmts, block)
    warps = np.arange(int(np.prod(block))) // 32
    sides = []
    for step in ("pred", "succ"):
        seen, todo, acc = set(), list(getattr(stmts[i], step)), []
        while todo:
            j = todo.pop()
            if j in seen:
                continue
            seen.add(j)
            st = stmts[j]
            if _full_barrier(st):
                continue
            if st.opcode.startswith(("bar.", "barrier.")) and not st.opcode.startswith("bar.warp"):
                return None
            kind = _access(st)
            if kind:
                may = pr(st.guard)[0] if st.guard else np.ones(warps.size, bool)
                acc.append((kind, frozenset(np.unique(warps[may]).tolist())))
            todo.extend(getattr(st, step))
        sides.append(acc)
    before, after = sides
    if not before or not after:
        return "one side of it, up to the neighbouring barrier, touches no memory"
    if all(k == "read" for k, _ in before + after):
        return "between its neighbouring barriers both sides only read"
    who = frozenset().union(*(w for _, w in before + after))
    if len(who) == 1:
        return f"between its neighbouring barriers every access is by warp {min(who)} alone"
    return None


def _walk(stmts, starts, step, stop):
    """Statements reachable from ``starts`` along ``step`` ("succ" / "pred") without passing one where ``stop``
    holds (those are not entered); and whether a path ran off the kernel's start."""
    seen, todo, off = set(), list(starts), False
    while todo:
        j = todo.pop()
        if j in seen or stop(stmts[j]):
            continue
        seen.add(j)
        nxt = getattr(stmts[j], step)
        off |= step == "pred" and not nxt
        todo.extend(nxt)
    return seen, off


def _redundant_wgmma_fence(stmts, i) -> str | None:
    """A wgmma.fence orders a thread's accesses to a wgmma's accumulator / A registers before that wgmma (PTX ISA,
    wgmma.fence; accesses by the wgmma chain itself are exempt; shared memory operands need a proxy fence, not
    this one).  Deleting it changes nothing when a wgmma.fence comes before it on every path and no other
    instruction touches the registers of the wgmmas it guards between that fence and those wgmmas."""
    fence = lambda st: st.opcode.startswith("wgmma.fence")       # noqa: E731
    mma = lambda st: st.opcode.startswith("wgmma.mma_async")     # noqa: E731
    after, _ = _walk(stmts, stmts[i].succ, "succ", fence)
    guarded = [j for j in after if mma(stmts[j])]
    if not guarded:
        return None
    regs = set()
    for j in guarded:
        for group in re.findall(r"\{([^}]*)\}", stmts[j].operands):
            regs |= {r.strip() for r in group.split(",")}
    lead, _ = _walk(stmts, guarded, "pred", lambda st: fence(st) or not st.succ)
    before, off = _walk(stmts, stmts[i].pred, "pred", fence)
    if off:
        return None
    touch = re.compile(r"(?<![\w%])(" + "|".join(re.escape(r) for r in regs) + r")(?!\w)")
    for j in (before | (lead & after)) - set(guarded):
        if not mma(stmts[j]) and touch.search(stmts[j].operands):
            return None
    return "an earlier wgmma.fence covers the wgmmas it guards: no other instruction touches their registers between"


def equivalent(m: Mutant, block=(32, 1, 1)) -> str | None:
    """Why the mutant provably behaves as the original (``_redundant_wait``, ``_idle_wait``, ``_merged_commit``,
    ``_redundant_barrier``, ``_redundant_wgmma_fence``), or None."""
    stmts = cfg(m.original)
    i = _at(stmts, m.site) if stmts else None
    if i is None:
        return None
    if m.operator.group == "cp.async wait":
        return _redundant_wait(stmts, i) or _idle_wait(stmts, i, "cp.async")
    if m.operator.name in ("delete wgmma.wait_group", "raise wgmma.wait_group count by 1"):
        return _idle_wait(stmts, i, "wgmma")
    if m.operator.name == "delete cp.async.commit_group":
        return _merged_commit(stmts, i, "cp.async")
    if m.operator.name == "delete wgmma.commit_group":
        return _merged_commit(stmts, i, "wgmma")
    if m.operator.group == "CTA barrier":
        return _redundant_barrier(stmts, i, block)
    if m.operator.name == "delete wgmma.fence":
        return _redundant_wgmma_fence(stmts, i)
    return None


# --- the kernels ---------------------------------------------------------------------------------------------


@dataclass
class Subject:
    name: str
    label: str
    ptx: str
    launches: list
    args: tuple             # pristine arrays (copied for each run)
    out: int                # which array is the output
    want: np.ndarray | None = None  # numpy's values where the run's CTAs write, NaN elsewhere
    blocks: list | None = None
    tol: float = 0.0
    instructions: int = 0   # the original's warp instructions (schedule 0)
    seconds: float = 0.0    # the original's wall time per run (schedule 0)
    strict_clean: tuple = ()  # Policy strict_* knobs under which the original is clean


def _bench_emulator():
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_emulator_speed", ROOT / "bench" / "emulator.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _wgmma_n():
    """bench/emulator.py's WS sm_90a GEMM (workloads.wgmma_gemm, TMA + wgmma) at WGMMA_N^3 (256: 4 K blocks on
    a 3-stage ring, stage 0 refilled once; at 512 the plan takes 7 stages and still refills one)."""
    sys.path.insert(0, str(ROOT / "tests" / "emulator"))
    from tvm_kernels import compile_module, gemm_inputs

    import tvm_twill
    from tvm_twill.workloads import wgmma_gemm
    sch, k0, _ = wgmma_gemm(WGMMA_N)
    plan = tvm_twill.auto_pipeline(sch, k0, "sm_90a", warp_specialize=True)
    f = compile_module(sch.mod, "sm_90a", plan.tir_pipeline, async_copy=True)
    return f, gemm_inputs(WGMMA_N), None, None


WGMMA_N = 256


def _tvm_gemm(name: str) -> Subject:
    """bench/emulator.py's TVM-built GEMMs (SWP and WS sm_80 at 256^3, WS sm_90a at WGMMA_N^3); C starts as NaN
    and only CTA (0, 0, 0) runs: the expected values are numpy's where the original writes (checked against
    numpy), NaN elsewhere."""
    from tvm_twill.emulator.launch import launches
    bench = _bench_emulator()
    f, (a, b, c0), _, _ = {"swp_sm80": lambda: bench._gemm(False), "ws_sm80": lambda: bench._gemm(True),
                           "ws_sm90a": _wgmma_n}[name]()
    c = np.full(c0.shape, np.nan, np.float32)
    ptx, launch_list = launches(f, (a, b, c))
    ref = a.astype(np.float32) @ (b.astype(np.float32).T if name == "ws_sm90a" else b.astype(np.float32))
    n = a.shape[0]
    label = {"swp_sm80": "TVM SWP sm_80 GEMM (cp.async)", "ws_sm80": "TVM WS sm_80 GEMM (cp.async + mbarrier)",
             "ws_sm90a": "TVM WS sm_90a GEMM (TMA + wgmma + mbarrier)"}[name]
    return Subject(name, f"{label} {n}^3, CTA (0, 0, 0)", ptx, launch_list, (a, b, c), 2, ref, [(0, 0, 0)], 1e-4)


CP_K, TMA_K = 144, 208  # 4.5 and 3.25 K tiles: the rings wrap, the in-loop loads run, the last tile is masked


def _triton(name: str, m: int | None = None, n: int | None = None, k: int | None = None) -> Subject:
    """A frozen Triton kernel, launched as tests/emulator/test_foreign_kernels.py launches it (every CTA):
    by default 256 x 128 x TMA_K (TMA) or 128 x 64 x CP_K."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("foreign_kernels", ROOT / "tests" / "emulator" /
                                                  "test_foreign_kernels.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tma = name == "triton_tma_matmul_sm90"
    m, n, k = m or (256 if tma else 128), n or (128 if tma else 64), k or (TMA_K if tma else CP_K)
    if tma:
        ptx, launch, a, b, c = mod._triton_tma(m, n, k)
        ref = a.astype(np.float32) @ b.astype(np.float32).T
        what = "TMA matmul sm_90a", "TMA + wgmma + mbarrier"
    else:
        ptx, launch, a, b, c = mod._triton_matmul(name, m, n, k)
        ref = a.astype(np.float32) @ b.astype(np.float32)
        what = f"matmul {name[-4:]}", "cp.async" + (" + wgmma" if "90" in name else "")
    label = f"Triton {what[0]} {m}x{n}x{k} ({what[1]}), {launch.grid[0]} CTA{'s' if launch.grid[0] > 1 else ''}"
    return Subject(name, label, ptx, [launch], (a, b, c), 2, ref.astype(np.float16), None, 0.0)


SUBJECTS = {"swp_sm80": lambda: _tvm_gemm("swp_sm80"), "ws_sm80": lambda: _tvm_gemm("ws_sm80"),
            "ws_sm90a": lambda: _tvm_gemm("ws_sm90a"), "triton_matmul_sm80": lambda: _triton("triton_matmul_sm80"),
            "triton_matmul_sm90": lambda: _triton("triton_matmul_sm90"),
            "triton_tma_matmul_sm90": lambda: _triton("triton_tma_matmul_sm90")}

# --- running -------------------------------------------------------------------------------------------------

SCHEDULES = (("seed 0", 0, {}), ("seed 1", 1, {}), ("seed 2, completion=random", 2, {"completion": "random"}),
             ("seed 3, slice=4", 3, {"slice": 4}),
             ("seed 4, completion=random, slice=8", 4, {"completion": "random", "slice": 8}),
             ("seed 5, spurious=0.75", 5, {"spurious": 0.75}),
             ("seed 6, dispatch=random, completion=random", 6, {"dispatch": "random", "completion": "random"}),
             ("seed 7, slice=1, elect=highest", 7, {"slice": 1, "elect": "highest"}))
STRICT = ("strict_mbarrier_init_fence", "strict_exit", "strict_uninitialized", "strict_cp_async_proxy",
          "strict_wgmma_fence")


@dataclass
class Outcome:
    kernel: str
    operator: str
    group: str
    line: int
    statement: str
    outcome: str            # killed / survived / equivalent
    how: str = ""           # finding kinds, "wrong values", "load error", "instruction cap", or the rule
    at: int | None = None   # the schedule index that killed it
    detail: str = ""        # the first finding or error, shortened
    strict: tuple = ()      # for a survivor: the strict_* knobs that catch it


def run_once(subject: Subject, ptx: str, seed: int, knobs: dict, cap: int | None = None):
    """(report or None, the error or None, the output array) of one run of ``ptx`` with fresh inputs."""
    from tvm_twill import emulator as E
    args = tuple(a.copy() for a in subject.args)
    policy = E.Policy(**knobs, **({"max_instructions": cap} if cap else {}))
    try:
        report = E.run_ptx(ptx, subject.launches, *args, seed=seed, blocks=subject.blocks, policy=policy)
    except E.EmulationError as e:
        return None, e, args[subject.out]
    return report, None, args[subject.out]


def values_ok(subject: Subject, got: np.ndarray) -> bool:
    if subject.want is None:
        return True
    return bool(np.allclose(got.astype(np.float64), subject.want.astype(np.float64), rtol=subject.tol,
                            atol=subject.tol, equal_nan=True))


def calibrate(subject: Subject) -> Subject:
    """Run the original under every schedule: clean with numpy's values, or an AssertionError.  Fixes the
    expected output (numpy's values where the original's CTAs write) and the strict knobs it passes."""
    for i, (label, seed, knobs) in enumerate(SCHEDULES):
        t = time.perf_counter()
        report, err, got = run_once(subject, subject.ptx, seed, knobs)
        assert err is None and report.ok, f"{subject.name} original, schedule {label}: {err or report}"
        if i == 0:
            subject.seconds, subject.instructions = time.perf_counter() - t, report.instructions
            if subject.blocks is not None:          # only some CTAs run: compare where they write
                written = ~np.isnan(got)
                assert written.any(), f"{subject.name}: the original wrote nothing"
                subject.want = np.where(written, subject.want, np.nan).astype(subject.want.dtype)
        assert values_ok(subject, got), f"{subject.name} original, schedule {label}: values differ from numpy"
    subject.strict_clean = tuple(k for k in STRICT if _clean(subject, subject.ptx, {k: True}))
    return subject


def _clean(subject: Subject, ptx: str, knobs: dict, cap: int | None = None) -> bool:
    report, err, got = run_once(subject, ptx, 0, knobs, cap)
    return err is None and report.ok and values_ok(subject, got)


def _kinds(report) -> str:
    return ", ".join(sorted({f.kind for f in report.findings if not type(f).__name__ == "BenignRace"}))


def judge(subject: Subject, m: Mutant, schedules=SCHEDULES) -> Outcome:
    """Classify one mutant: equivalent (by rule), else run it under ``schedules`` until one kills it."""
    from tvm_twill import emulator as E
    text = " ".join(m.original.splitlines()[m.site.line - 1][m.site.start:m.site.end].split())
    out = Outcome(m.kernel, m.operator.name, m.operator.group, m.site.line, text, "survived")
    why = equivalent(m, subject.launches[0].block)
    if why:
        out.outcome, out.how = "equivalent", why
        return out
    try:
        E.load_ptx(m.ptx)
    except E.EmulationError as e:
        out.outcome, out.how, out.detail = "killed", "load error", str(e).splitlines()[0][:160]
        return out
    cap = 10 * max(subject.instructions, 1)
    for i, (_, seed, knobs) in enumerate(schedules):
        report, err, got = run_once(subject, m.ptx, seed, knobs, cap)
        if err is not None:
            how = "instruction cap (livelock)" if "ran over" in str(err) else "EmulationError"
            out.outcome, out.how, out.at, out.detail = "killed", how, i, str(err).splitlines()[0][:160]
            return out
        if not report.ok:
            first = next(f for f in report.findings if type(f).__name__ != "BenignRace")
            out.outcome, out.how, out.at, out.detail = "killed", _kinds(report), i, str(first)[:160]
            return out
        if not values_ok(subject, got):
            out.outcome, out.how, out.at = "killed", "wrong values", i
            return out
    out.strict = tuple(k for k in subject.strict_clean if not _clean(subject, m.ptx, {k: True}, cap))
    return out


# --- the table -----------------------------------------------------------------------------------------------

_PARITY, _INIT, _FENCE = "flip mbarrier wait parity", "mbarrier.init count - 1", "delete wgmma.fence"
_COMMIT, _WAIT, _RAISE = "delete wgmma.commit_group", "delete wgmma.wait_group", "raise wgmma.wait_group count by 1"
_BAR, _CPRAISE = "delete bar.sync/barrier.sync/bar.arrive", "raise cp.async.wait_group count by 1"
_DRAIN = ("no bug: the producer's drain wait before it exits; the other parity names a phase already "
          "complete, so it passes at once and the warp exits sooner; nothing follows it")
_NO_REFILL = ("not exercised: at 256^3, 4 K blocks on a 3-stage ring refill stage 0 only; the stage these "
              "wgmmas read is never overwritten, so keeping them in flight longer has no effect to catch")
_EXIT = ("in flight at exit: the last group (a masked zero-fill of a stage nobody reads again) still writes "
         "shared memory when the CTA exits; the default lets it finish, strict_exit reports it")
#: one line per survivor, by (kernel, operator, PTX line of the original): why it survives
ANALYSIS: dict[tuple[str, str, int], str] = {
    ("ws_sm80", _PARITY, 527): _DRAIN,
    ("ws_sm80", _PARITY, 541): _DRAIN,
    ("ws_sm90a", _PARITY, 378): _DRAIN,
    ("ws_sm90a", _PARITY, 389): _DRAIN,
    ("ws_sm90a", "delete fence", 92): "by design: the PTX ISA leaves the proxy of complete-tx open and a CTA barrier "
    "after the init is accepted by default (Triton relies on it); only the strict policy asks for the fence",
    ("ws_sm90a", _INIT, 81): "not exercised: at 256^3 this is the empty barrier of stage 1, never refilled; the "
    "early phase only lets the producer's drain wait pass sooner",
    ("ws_sm90a", _INIT, 87): "not exercised: as line 81, for stage 2",
    ("ws_sm90a", _FENCE, 533): "by design: nvcc zeroes the accumulators between the first wgmma.fence and "
    "the first wgmma, so this fence is the first one after those writes; the default accepts the placement "
    "(strict_wgmma_fence flags the original itself)",
    **{("ws_sm90a", _COMMIT, ln): _NO_REFILL for ln in (761, 783, 805, 827, 891, 908, 925)},
    **{("ws_sm90a", op, ln): _NO_REFILL for op in (_WAIT, _RAISE) for ln in (831, 946)},
    ("triton_matmul_sm80", _CPRAISE, 622): _EXIT,
    ("triton_matmul_sm90", _CPRAISE, 439): _EXIT,
    ("triton_matmul_sm80", _BAR, 375): "redundant (by hand): the wait before it completes nothing (equivalent, "
    "line 374) and up to the neighbouring barriers both sides only read shared memory (ldmatrix, mma)",
    ("triton_matmul_sm90", _BAR, 440): "no conflicting pair found (not proven): the one warp group's "
    "wait_group 0 is .aligned, so its wgmmas are complete for all four warps before any C store",
    ("triton_matmul_sm90", "delete fence", 329): "by design: cp.async writes read by wgmma are exempt from the proxy "
    "rule by default (the PTX ISA leaves it open; CUTLASS fences nothing there); under strict_cp_async_proxy the "
    "original itself is flagged (the rule asks for the writer's fence, Triton fences after the bar.sync)",
    ("triton_tma_matmul_sm90", _BAR, 183): "redundant (by hand): warp 0's expect_tx / TMA issue for stage 1 before it "
    "and the other warps' first try_wait (stage 0) after it touch different mbarriers",
    ("triton_tma_matmul_sm90", _BAR, 362): "redundant (by hand): every warp acquires the stage's TMA data with its own "
    "try_wait; warp 0's TMA issues before it write other stages",
    ("triton_tma_matmul_sm90", _BAR, 436): "redundant (by hand): the barrier at line 445 still orders every warp's "
    "wait_group 1 before warp 0's TMA refill; only thread 0's expect_tx lies between",
    ("triton_tma_matmul_sm90", _BAR, 455): "redundant (by hand): warp 0's TMA issues before it and the next "
    "iteration's try_waits after it use different mbarriers and stages",
    ("triton_tma_matmul_sm90", _BAR, 475): "redundant (by hand): after its own .aligned wait_group 0 each warp "
    "group's stmatrix overwrites only its own rows of A; warp 0's mbarrier.inval follows every warp's last "
    "try_wait through the loop's barriers",
    ("triton_tma_matmul_sm90", "delete cp.async.bulk.commit_group", 568): "in flight at exit (gap): the TMA store is left "
    "uncommitted and unwaited, still reading shared memory when the CTA exits; reported only under strict_exit",
    ("triton_tma_matmul_sm90", "delete cp.async.bulk.wait_group", 569): "in flight at exit (gap): the TMA store still reads "
    "shared memory when the CTA exits (CUDA waits with cp.async.bulk.wait_group.read 0 before exit); reported only "
    "under strict_exit",
}


def _rate(killed: int, survived: int) -> str:
    return f"{100.0 * killed / (killed + survived):.1f}%" if killed + survived else "-"


def table(outcomes: list[Outcome]) -> list[str]:
    """The per-operator table and the overall line."""
    rows = ["| operator | class | mutants | killed | survived | equivalent | kill rate (excl. equivalent) |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for op in OPERATORS:
        mine = [o for o in outcomes if o.operator == op.name]
        if not mine:
            rows.append(f"| {op.name} | {op.group} | 0 | - | - | - | no site |")
            continue
        k, s, e = (sum(o.outcome == x for o in mine) for x in ("killed", "survived", "equivalent"))
        rows.append(f"| {op.name} | {op.group} | {len(mine)} | {k} | {s} | {e} | {_rate(k, s)} |")
    k, s, e = (sum(o.outcome == x for o in outcomes) for x in ("killed", "survived", "equivalent"))
    rows.append(f"| **all** | | **{len(outcomes)}** | **{k}** | **{s}** | **{e}** | **{_rate(k, s)}** |")
    return rows


def report(subjects: list[Subject], outcomes: list[Outcome], wall: float, command: str) -> str:
    from collections import Counter

    sys.path.insert(0, str(ROOT / "bench"))
    from common import cpu_name, git_commit
    k, s = sum(o.outcome == "killed" for o in outcomes), sum(o.outcome == "survived" for o in outcomes)
    out = ["# Emulator mutation kill rate", "",
           "Synchronization bugs planted one at a time in the PTX of real kernels (`bench/emulator_mutants.py`); each "
           "mutant runs on the emulator under up to 8 interleavings and its output is compared with numpy.", "",
           f"- command: `{command}`", f"- commit: `{git_commit()}`",
           f"- machine: {cpu_name()}, 2 cores shared, no GPU; Python {platform.python_version()}, numpy "
           f"{np.__version__}; one process", f"- wall time: {wall:.0f} s", "",
           f"**Overall: {k} of {k + s} non-equivalent mutants killed ({_rate(k, s)})**, "
           f"{sum(o.outcome == 'equivalent' for o in outcomes)} equivalent, {len(outcomes)} mutants in all.", "",
           "## Per operator", ""] + table(outcomes)
    out += ["", "## Kernels", "", "| kernel | mutants | killed | survived | equivalent | original: warp instructions, "
            "s per run | strict knobs the original passes |", "| --- | ---: | ---: | ---: | ---: | --- | --- |"]
    for sub in subjects:
        mine = [o for o in outcomes if o.kernel == sub.name]
        c = Counter(o.outcome for o in mine)
        out.append(f"| {sub.label} | {len(mine)} | {c['killed']} | {c['survived']} | {c['equivalent']} | "
                   f"{sub.instructions}, {sub.seconds:.2f} | {', '.join(sub.strict_clean) or '-'} |")
    out += ["", "## Interleavings", "", "Schedule i of each mutant (stop at the first kill; default policy checks):", ""]
    out += [f"{i}. {label}" for i, (label, _, _) in enumerate(SCHEDULES)]
    caught = Counter(o.at for o in outcomes if o.outcome == "killed")
    out += ["", "Killed at schedule: " + ", ".join(f"{i}: {caught[i]}" for i in sorted(caught, key=lambda x: (x is None, x)))
            + " (None: the mutant did not load)."]
    hows = Counter(kind for o in outcomes if o.outcome == "killed" for kind in o.how.split(", "))
    out += ["", "How killed (a mutant can show several kinds): " + ", ".join(f"{h} {n}" for h, n in hows.most_common()) + "."]
    return "\n".join(out + _survivors(outcomes) + _equivalents(outcomes) + _all(outcomes)) + "\n"


def _survivors(outcomes):
    from collections import Counter
    alive = [o for o in outcomes if o.outcome == "survived"]
    why = [ANALYSIS.get((o.kernel, o.operator, o.line), "not analysed: new survivor") for o in alive]
    kinds = Counter(w.split(":", 1)[0] for w in why)
    out = ["", "## Survivors", "", "Each analysed by hand (`ANALYSIS`); the strict policy knobs that catch one are "
           "named (tried only where the original passes them).  By kind: " +
           "; ".join(f"{k} {n}" for k, n in kinds.most_common()) + ".", ""]
    for o, w in zip(alive, why):
        strict = f" Caught with `Policy({'=True, '.join(o.strict)}=True)`." if o.strict else ""
        out.append(f"- {o.kernel} line {o.line}, {o.operator} (`{o.statement}`): {w.rstrip('.')}.{strict}")
    return out if alive else out + ["None."]


def _equivalents(outcomes):
    out = ["", "## Equivalent mutants", "",
           "Classified before running, by a rule on the PTX's control-flow graph (`equivalent`); each rule is a proof "
           "that the mutant's executions are the original's:", "",
           "- *redundant wait* (`_redundant_wait`): every path into the cp.async.wait_group meets, before any cp.async "
           "issue or commit, a wait allowing no more pending groups, or every path out of it reaches one before any "
           "memory access (PTX ISA, cp.async.wait_group).",
           "- *idle wait* (`_idle_wait`): counting committed groups on every path from the start, at most N are ever "
           "pending at this wait_group N (cp.async or wgmma): it completes nothing, deleted or raised.",
           "- *merged group* (`_merged_commit`): following the original's pending groups on every path, no wait_group "
           "completes the deleted commit's group without the next one or the other way round.",
           "- *redundant barrier* (`_redundant_barrier`): a `bar.sync 0` only orders pairs of accesses of different "
           "warps between the previous and the next CTA barrier; it is redundant when one side touches no memory, both "
           "only read, or every access on both sides is guarded by a predicate true in one warp only (from %tid).",
           "- *redundant wgmma.fence* (`_redundant_wgmma_fence`): another wgmma.fence precedes it on every path and no "
           "instruction other than a wgmma touches the accumulator / A registers of the wgmmas it guards in between "
           "(PTX ISA, wgmma.fence: it orders register accesses; a wgmma chain on the same accumulators is exempt).", ""]
    out += [f"- {o.kernel} line {o.line}, {o.operator}: {o.how}" for o in outcomes if o.outcome == "equivalent"]
    return out


def _all(outcomes):
    out = ["", "## Every mutant", "", "| kernel | operator | line | statement | outcome | how | schedule |",
           "| --- | --- | ---: | --- | --- | --- | ---: |"]
    for o in outcomes:
        how = o.how if o.outcome != "equivalent" else "rule"
        st = o.statement.replace("|", "\\|")
        out.append(f"| {o.kernel} | {o.operator} | {o.line} | `{st}` | {o.outcome} | {how.replace('|', '/')} | "
                   f"{'' if o.at is None else o.at} |")
    return out


def run_all(names, sample=None, log=print) -> tuple[list[Subject], list[Outcome]]:
    subjects, outcomes = [], []
    for name in names:
        sub = calibrate(SUBJECTS[name]())
        subjects.append(sub)
        muts = mutants(name, sub.ptx, sample)
        log(f"{sub.label}: {len(muts)} mutants, original {sub.instructions} warp instructions, {sub.seconds:.2f} s")
        for m in muts:
            o = judge(sub, m)
            outcomes.append(o)
            log(f"  {o.line:5d} {o.operator:42s} {o.outcome:10s} {'' if o.at is None else o.at} {o.how[:70]}")
    return subjects, outcomes


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", nargs="*", default=list(SUBJECTS), choices=list(SUBJECTS))
    ap.add_argument("--sample", type=int, default=None, help="a seeded sample of N sites per kernel and operator")
    ap.add_argument("--save", action="store_true", help="write bench/results/emulator_mutants.md")
    args = ap.parse_args()
    t = time.perf_counter()
    subjects, outcomes = run_all(args.kernels, args.sample, log=lambda s: print(s, flush=True))
    wall = time.perf_counter() - t
    print("\n".join(table(outcomes)))
    print(f"wall {wall:.0f} s")
    command = "python " + " ".join(["bench/emulator_mutants.py"] + sys.argv[1:])
    if args.save:
        out = ROOT / "bench" / "results" / "emulator_mutants.md"
        out.write_text(report(subjects, outcomes, wall, command))
        print(f"saved {out}")


if __name__ == "__main__":
    main()
