"""A parser for the PTX that nvcc 13 writes (``nvcc -ptx -lineinfo``).

``parse(text) -> Module``: the ``.entry`` kernels with their parameters,
register declarations (``%r<100>`` ranges, and registers declared inside an
inline-asm ``{ ... }`` scope, renamed per scope), ``.shared`` / ``.global`` /
``.const`` variables (alignment, size, initializer), labels, and the
instructions with their guard predicate, opcode form (in its canonical spelling: ``qualifiers``) and
operands.  Each
instruction keeps its PTX line and the CUDA source line of the last ``.loc``
naming the kernel's own source file (file 1, or the ``inlined_at`` site in
it), for findings.  Anything the parser does not understand raises
``EmulationError`` with the PTX line; nothing is skipped silently except
comments, ``.pragma`` and the debug sections.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import EmulationError
from .qualifiers import canonical

WIDTH = {"pred": 1, "b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2,
         "b32": 4, "u32": 4, "s32": 4, "f32": 4, "f16x2": 4, "bf16x2": 4,
         "b64": 8, "u64": 8, "s64": 8, "f64": 8, "b128": 16}


@dataclass(frozen=True)
class Operand:
    """One operand.  kind: 'reg', 'sreg' (special register), 'imm' (int), 'fimm' (raw float bits with width),
    'sym' (a variable or label name), 'addr' (base: Operand of kind reg/sym, offset: int),
    'vec' (items), 'sink' ('_'), 'pair' (items: two registers written as ``a|b``)."""

    kind: str
    name: str = ""
    value: int = 0
    width: int = 0
    offset: int = 0
    negated: bool = False
    items: tuple = ()
    base: Operand | None = None


@dataclass
class Instruction:
    opcode: str             # the full form with every dot modifier, e.g. 'cp.async.cg.shared.global'
    operands: tuple
    guard: str | None       # predicate register name, or None
    guard_negated: bool
    line: int               # PTX line
    cuda_line: int | None
    hints: tuple = ()       # cache / eviction hint qualifiers taken out of the opcode (``qualifiers``)
    policy: Operand | None = None   # the ``.L2::cache_hint`` cache-policy operand, taken out of the operands

    @property
    def parts(self) -> list[str]:
        return self.opcode.split(".")


@dataclass
class Variable:
    name: str
    space: str              # 'shared', 'global', 'const', 'local'
    align: int
    size: int               # bytes; 0 for an extern (dynamic) shared array
    init: bytes | None = None
    extern: bool = False


@dataclass
class Kernel:
    name: str
    params: list            # [(name, type, size_bytes)]
    regs: dict              # register name -> ptx type
    instructions: list
    labels: dict            # label -> instruction index
    variables: list         # function-scope .shared/.local variables
    line: int


@dataclass
class Module:
    kernels: dict = field(default_factory=dict)
    variables: list = field(default_factory=list)
    target: str = ""


_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_ENTRY = re.compile(r"(?:\.visible\s+|\.weak\s+)?\.(entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)\s*\(?")
_VAR = re.compile(r"(?:\.extern\s+|\.visible\s+|\.weak\s+)*\.(shared|global|const|local)\s+(.*)$", re.DOTALL)
_LINE_DIRECTIVE = re.compile(r"\.(?:loc|pragma|file)\s")
_LABEL = re.compile(r"([A-Za-z_$][\w$]*)\s*:(?!:)")
_REGRANGE = re.compile(r"^(%?[\w$]+)<(\d+)>$")
_SREGS = {"%tid", "%ntid", "%ctaid", "%nctaid", "%laneid", "%warpid", "%nwarpid", "%smid", "%nsmid",
          "%lanemask_eq", "%lanemask_lt", "%lanemask_le", "%lanemask_gt", "%lanemask_ge", "%clock",
          "%clock64", "%globaltimer", "%dynamic_smem_size", "%total_smem_size", "%gridid"}


def _strip(text: str) -> str:
    # keep newlines so that line numbers stay right
    return _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def _line_of(text: str, pos: int, starts: list[int]) -> int:
    import bisect
    return bisect.bisect_right(starts, pos)


def _match_brace(text: str, i: int, line) -> int:
    depth = 0
    for j in range(i, len(text)):
        c = text[j]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return j
    raise EmulationError(f"unbalanced braces in PTX from line {line(i)}; pass the full nvcc -ptx output")


def parse(text: str) -> Module:
    """Parse a PTX module; raises EmulationError on anything it does not understand."""
    text = _strip(text)
    starts = [m.end() for m in re.finditer(r"\n", text)]
    line = lambda pos: _line_of(text, pos, starts) + 1
    mod = Module()
    i = 0
    n = len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        rest = text[i:i + 200]
        m = _ENTRY.match(text, i)
        if m:
            i = _parse_function(text, m, mod, line)
            continue
        if rest.startswith(".section"):
            j = text.index("{", i)
            i = _match_brace(text, j, line) + 1
            continue
        if rest.startswith((".version", ".address_size", ".file")):
            i = text.find("\n", i) if text.find("\n", i) >= 0 else n
            continue
        if rest.startswith(".target"):
            end = text.find("\n", i)
            mod.target = text[i + len(".target"):end].strip().split(",")[0].strip()
            i = end
            continue
        j = text.find(";", i)
        if j < 0:
            raise EmulationError(f"unexpected text at PTX line {line(i)}: {rest.splitlines()[0]!r}")
        stmt = text[i:j].strip()
        mv = _VAR.match(stmt)
        if not mv:
            raise EmulationError(f"unknown module-level directive at PTX line {line(i)}: {stmt[:60]!r}")
        mod.variables.append(_variable(mv.group(1), mv.group(2), stmt, line(i)))
        i = j + 1
    return mod


def _variable(space: str, rest: str, stmt: str, ln: int) -> Variable:
    init = None
    if "=" in rest:
        rest, init_text = rest.split("=", 1)
    else:
        init_text = None
    toks = rest.split()
    align = 0
    typ = None
    name = None
    for k, t in enumerate(toks):
        if t == ".align":
            align = int(toks[k + 1])
        elif t.startswith(".") and t[1:] in WIDTH:
            typ = t[1:]
        elif not t.startswith(".") and not t.isdigit() and (k == 0 or toks[k - 1] != ".align"):
            name = t
    if typ is None or name is None:
        raise EmulationError(f"cannot read the variable declaration at PTX line {ln}: {stmt[:60]!r}")
    esize = WIDTH[typ]
    count = 1
    extern = False
    m = re.match(r"^([\w$]+)((?:\[\d*\])*)$", name)
    if not m:
        raise EmulationError(f"cannot read the variable name at PTX line {ln}: {name!r}")
    name = m.group(1)
    for dim in re.findall(r"\[(\d*)\]", m.group(2)):
        if dim == "":
            extern = True
            count = 0
        else:
            count *= int(dim)
    if init_text is not None:
        vals = [int(v, 0) for v in re.findall(r"-?(?:0x[0-9a-fA-F]+|\d+)", init_text)]
        init = b"".join((v % (1 << (8 * esize))).to_bytes(esize, "little") for v in vals)
        init = init.ljust(esize * count, b"\0")
    return Variable(name, space, align or esize, esize * count, init, extern)


def _parse_function(text, m, mod, line) -> int:
    kind, name = m.group(1), m.group(2)
    i = m.end()
    params = []
    if text[i - 1] == "(":
        j = text.index(")", i)
        for p in text[i:j].split(","):
            p = p.strip()
            if not p:
                continue
            toks = p.split()
            ptype = next((t[1:] for t in toks if t.startswith(".") and t[1:] in WIDTH), None)
            align = int(toks[toks.index(".align") + 1]) if ".align" in toks else 0
            pname = toks[-1]
            size = WIDTH[ptype] if ptype else 0
            mm = re.match(r"^([\w$]+)\[(\d+)\]$", pname)
            if mm:
                pname, size = mm.group(1), size * int(mm.group(2))
            params.append((pname, ptype, size, align))
        i = j + 1
    k = text.index("{", i)
    if ";" in text[i:k]:  # a prototype (.extern .func f(...);) has no body
        return text.index(";", i) + 1
    end = _match_brace(text, k, line)
    if kind == "func":
        return end + 1  # device functions: only reached through `call`, which the executor refuses
    kernel = _parse_body(text, k + 1, end, name, params, line)
    mod.kernels[name] = kernel
    return end + 1


def _parse_body(text, start, end, name, params, line) -> Kernel:
    regs: dict[str, str] = {}
    instructions: list[Instruction] = []
    labels: dict[str, int] = {}
    variables: list[Variable] = []
    scopes = [{}]                # name -> renamed name, per inline-asm scope
    scope_id = 0
    files_main = 1
    cuda_line = None
    i = start
    while i < end:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if c == "{":
            scope_id += 1
            scope = {"#": scope_id}
            close = _match_brace(text, i, line)
            for lab in re.findall(r"(?:^|[;{}\s])([A-Za-z_$][\w$]*)\s*:(?!:)", text[i + 1:close]):
                scope["label:" + lab] = f"{lab}@{scope_id}"
            scopes.append(scope)
            i += 1
            continue
        if c == "}":
            scopes.pop()
            i += 1
            continue
        if _LINE_DIRECTIVE.match(text, i):  # not .local: a directive word ends at a space
            eol = text.find("\n", i)
            eol = end if eol < 0 or eol > end else eol
            if text.startswith(".loc", i):
                cuda_line = _loc(text[i:eol], files_main, cuda_line)
            i = eol + 1
            continue
        lm = _LABEL.match(text, i)
        if lm:
            labels[_rename("label:" + lm.group(1), scopes, lm.group(1))] = len(instructions)
            i = lm.end()
            continue
        j = text.find(";", i)
        if j < 0 or j > end:
            raise EmulationError(f"statement without ';' at PTX line {line(i)} in {name}")
        stmt = " ".join(text[i:j].split())
        ln = line(i)
        i = j + 1
        if stmt.startswith(".reg"):
            _declare_regs(stmt, regs, scopes, ln)
        elif stmt.startswith((".shared", ".local", ".const", ".global")):
            mv = _VAR.match(stmt)
            variables.append(_variable(mv.group(1), mv.group(2), stmt, ln))
        elif stmt.startswith(".pragma"):
            continue
        elif stmt.startswith("."):
            raise EmulationError(f"unknown directive {stmt.split()[0]} at PTX line {ln} in {name}")
        else:
            instructions.append(_instruction(stmt, ln, cuda_line, scopes))
    return Kernel(name, params, regs, instructions, labels, variables, line(start))


def _loc(s: str, main: int, prev):
    toks = s.replace(",", " ").split()
    try:
        f, ln = int(toks[1]), int(toks[2])
        if "inlined_at" in toks:
            k = toks.index("inlined_at")
            if int(toks[k + 1]) == main:
                return int(toks[k + 2]) or prev
        if f == main:
            return ln or prev
    except (IndexError, ValueError):
        return prev
    return prev


def _declare_regs(stmt, regs, scopes, ln):
    toks = stmt.replace(",", " ").split()
    ptype = None
    for t in toks[1:]:
        if t.startswith(".") and t[1:] in WIDTH:
            ptype = t[1:]
        elif t.startswith(".v"):
            raise EmulationError(f"vector registers are not supported (PTX line {ln})")
        elif ptype is None:
            raise EmulationError(f"cannot read the register declaration at PTX line {ln}: {stmt!r}")
        else:
            m = _REGRANGE.match(t)
            names = [f"{m.group(1)}{k}" for k in range(int(m.group(2)))] if m else [t]
            for nm in names:
                if len(scopes) > 1:
                    renamed = f"{nm}@{scopes[-1]['#']}"
                    scopes[-1][nm] = renamed
                    nm = renamed
                regs[nm] = ptype


_SPLIT = re.compile(r"\s+|(?=\{)")


def _instruction(stmt, ln, cuda_line, scopes) -> Instruction:
    guard = None
    neg = False
    if stmt.startswith("@"):
        g, stmt = stmt[1:].split(None, 1)
        neg = g.startswith("!")
        guard = _rename(g.lstrip("!"), scopes)
    m = re.match(r"([a-z][\w.:]*)\s*(.*)$", stmt)
    if not m:
        raise EmulationError(f"cannot read the instruction at PTX line {ln}: {stmt[:60]!r}")
    opcode, rest = m.group(1), m.group(2)
    operands = tuple(_operand(o, ln, scopes) for o in _split_top(rest)) if rest.strip() else ()
    opcode, operands, hints, policy = canonical(opcode, operands)
    return Instruction(opcode, operands, guard, neg, ln, cuda_line, hints, policy)


def _rename(name, scopes, default=None):
    for sc in reversed(scopes[1:]):
        if name in sc:
            return sc[name]
    return name if default is None else default


def _split_top(s: str) -> list[str]:
    out, depth, cur = [], 0, []
    for c in s:
        if c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
        if c == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def _operand(s: str, ln: int, scopes) -> Operand:
    s = s.strip()
    if s.startswith("{"):
        if not s.endswith("}"):
            raise EmulationError(f"cannot read the vector operand {s!r} at PTX line {ln}")
        return Operand("vec", items=tuple(_operand(x, ln, scopes) for x in _split_top(s[1:-1])))
    if s.startswith("["):
        inner = s[1:-1].strip()
        if "," in inner:
            parts = _split_top(inner)
            return Operand("taddr", items=tuple(_operand(x, ln, scopes) for x in parts))
        m = re.match(r"^([%\w$.]+)\s*(?:\+\s*(-?\s*(?:0x[0-9a-fA-F]+|\d+)))?$", inner)
        if m:
            base = _operand(m.group(1), ln, scopes)
            off = int(m.group(2).replace(" ", ""), 0) if m.group(2) else 0
            if base.kind == "imm":
                return Operand("addr", base=None, offset=base.value + off)
            return Operand("addr", base=base, offset=off)
        raise EmulationError(f"cannot read the address operand {s!r} at PTX line {ln}")
    if "|" in s:
        a, b = s.split("|")
        return Operand("pair", items=(_operand(a, ln, scopes), _operand(b, ln, scopes)))
    if s == "_":
        return Operand("sink")
    if s.startswith("!"):
        o = _operand(s[1:], ln, scopes)
        return Operand(o.kind, o.name, negated=True)
    if s.startswith("%"):
        base = s.split(".")[0]
        if base in _SREGS:
            return Operand("sreg", s)
        return Operand("reg", _rename(s, scopes))
    m = re.match(r"^0([fFdD])([0-9a-fA-F]+)$", s)
    if m:
        return Operand("fimm", value=int(m.group(2), 16), width=4 if m.group(1) in "fF" else 8)
    m = re.match(r"^-?(?:0[xX][0-9a-fA-F]+|0[0-7]*|[1-9]\d*)U?$", s)
    if m:
        t = s.rstrip("U")
        neg = t.startswith("-")
        t = t.lstrip("-")
        v = int(t, 16) if t[:2].lower() == "0x" else (int(t, 8) if len(t) > 1 and t[0] == "0" else int(t))
        return Operand("imm", value=-v if neg else v)
    m = re.match(r"^-?\d+\.\d*(?:[eE][-+]?\d+)?$", s)
    if m:
        import struct
        return Operand("fimm", value=struct.unpack("<Q", struct.pack("<d", float(s)))[0], width=8)
    if re.match(r"^[A-Za-z_$][\w$]*$", s):
        label = _rename("label:" + s, scopes, s)
        if label != s:
            return Operand("sym", label)
        renamed = _rename(s, scopes)
        return Operand("reg", renamed) if renamed != s else Operand("sym", s)
    raise EmulationError(f"cannot read the operand {s!r} at PTX line {ln}")
