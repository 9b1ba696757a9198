"""One canonical spelling per opcode form: the parser passes every instruction through ``canonical``.

* Cache and eviction hints do not change what a memory instruction computes (PTX ISA, "Cache Operators"
  / "Cache Eviction Priority Hints" and the ``ld``, ``st`` and ``cp.async`` syntax:
  ``.level::eviction_priority``, ``.level::cache_hint``, ``.level::prefetch_size``): they are taken out of
  the opcode of ``ld``, ``st`` and ``cp`` instructions and kept in ``Instruction.hints``.  With
  ``.L2::cache_hint`` the last operand is the 64-bit cache policy (a ``createpolicy`` result); it is
  taken out of the operands and kept in ``Instruction.policy``.
* ptxas takes the qualifiers of an instruction in any order (CuTe writes
  ``ldmatrix.sync.aligned.x4.m8n8.shared.b16``); those of ``ldmatrix`` / ``stmatrix``
  (``.sync.aligned.shape.num{.trans}.ss.type``), ``mma`` (``.sync.aligned.shape.row.col{.satfinite}``
  then the types in their written order) and ``cp.async.ca|cg`` (``.async.ca|cg.shared.global``) are put
  in the order of the ISA's syntax line.
"""
from __future__ import annotations

HINTS = frozenset({
    "L2::64B", "L2::128B", "L2::256B", "L2::cache_hint", "L1::no_allocate",
    "L1::evict_normal", "L1::evict_unchanged", "L1::evict_first", "L1::evict_last",
    "L2::evict_normal", "L2::evict_first", "L2::evict_last",
})
_HINTED = frozenset({"ld", "st", "cp"})
_SHAPES = frozenset({"m8n8", "m16n16", "m8n16", "m16n8", "m16n8k8", "m16n8k16", "m16n8k32", "m16n8k4", "m8n8k4"})
_TYPES = frozenset({"f16", "bf16", "tf32", "f32", "f64", "s8", "u8", "s4", "u4", "b1", "s32", "e4m3", "e5m2",
                    "b16", "b8"})


def _rank(q: str) -> int:
    """Position class of a qualifier of ldmatrix, stmatrix, mma and cp.async (ca / cg): classes in the
    order of the ISA's syntax lines; a stable sort keeps the order within a class (``.row.col``, the
    types ``.dtype.atype.btype.ctype``)."""
    order = {"async": 0, "sync": 0, "aligned": 1, "ca": 1, "cg": 1, "x1": 3, "x2": 3, "x4": 3, "trans": 4,
             "row": 3, "col": 3, "satfinite": 5, "global": 7}
    if q in order:
        return order[q]
    if q in _SHAPES:
        return 2
    if q.split("::")[0] == "shared":
        return 6
    return 8 if q in _TYPES else 5


def _reorderable(head: str, quals: list) -> bool:
    if head in ("ldmatrix", "stmatrix", "mma"):
        return True
    return head == "cp" and set(quals) <= {"async", "ca", "cg", "shared", "shared::cta", "global"} and \
        bool({"ca", "cg"} & set(quals))


def canonical(opcode: str, operands: tuple) -> tuple[str, tuple, tuple, object]:
    """(canonical opcode, operands, hints, cache-policy operand or None) of one written instruction."""
    parts = opcode.split(".")
    head, quals = parts[0], parts[1:]
    hints: tuple = ()
    policy = None
    if head in _HINTED:
        hints = tuple(q for q in quals if q in HINTS)
        if hints:
            quals = [q for q in quals if q not in HINTS]
            if "L2::cache_hint" in hints and operands:
                operands, policy = operands[:-1], operands[-1]
    if _reorderable(head, quals):
        quals = sorted(quals, key=_rank)
    return ".".join([head, *quals]), operands, hints, policy
