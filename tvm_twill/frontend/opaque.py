"""Loops written in TVM's hand-scheduled style: opaque blocks, explicit barriers, let-bindings.

TVM's LLM serving kernels (``tvm.relax.frontend.nn.llm``: prefill, decode)
keep their own structure, which the region-based front-end cannot see
through on its own:

* **Opaque blocks.**  A block written ``T.reads()`` / ``T.writes()`` (empty)
  around a guarded store declares no access at all, and TVM's region
  detector trusts the declaration: the statement would look as if it touched
  nothing.  ``filled_view`` gives an *analysis view* of a statement in which
  every block whose body loads or stores a buffer its declaration does not
  name gets those accesses added, derived from the block's own body (its
  ``BufferLoad`` / ``BufferStore``, let-bound indices substituted, both
  branches of a guard counted).  The view is only read: the program is never
  changed.  Because TVM's InjectSoftwarePipeline computes its buffer
  versions from the declared regions, a buffer seen only through a filled
  region is not versioned by it (``hidden_buffers``), and the front-end
  treats it as one storage shared by every iteration in flight.
* **Explicit barriers.**  ``T.tvm_storage_sync("shared")`` in the loop body
  is the barrier that makes one thread's shared-memory writes visible to the
  others.  It is a statement of the pipeline like any other; the front-end
  models it as a write of a pseudo-buffer ``SYNC`` that every statement
  touching shared or global memory reads.  With the hazard rule for buffers
  TVM does not version (``hazards.py``), every instance of a barrier then
  keeps its place among the instances of those statements, in every
  iteration: whatever reaches a later stage, each conflict the barrier
  separated in the original loop is still separated by a barrier instance.
* **Let-bindings.**  A ``T.let`` at the top of the body (a ``Bind``
  statement in TVM 0.27) is a pipeline statement too: InjectSoftwarePipeline
  counts it.  TVM's passes before it substitute a binding's value into its
  uses (``inlined_lets``): such a binding then orders nothing, each use
  computing its own iteration's value.  Otherwise (a binding TVM leaves in
  use, or whose value loads memory) it writes its variable, a pseudo-buffer
  ``let:<name>`` that the statements using the variable read; the same rule
  keeps each use after its iteration's binding and before the next
  iteration's one.

An explicit barrier with a symbolic trip count sits, once pipelined, under
the guards TVM puts on each iteration's statements; ``tvm_twill_swp``
compiles it when the trip count is block-uniform (``frontend.uniform``: the
sequence prefill's ``ceildiv(kv_len, 32)``, the paged and ragged prefill's
``ceildiv(kv_chunk_len[0], 32)``), and the loop's copies stay synchronous
(``BARRIER_COPY``), so each barrier orders completed copies.  Planning is
refused, with the reason (``Extraction.refusal``), where no multi-stage
pipeline of the loop is known to compile correctly: an explicit barrier with
a trip count not shown uniform (``barrier_refusal``), a let-binding TVM
does not substitute and that is not loop-invariant (``frontend.invariant``:
those ``tvm_twill_swp`` binds once before the loop) with a symbolic trip
count (``let_refusal``), a buffer
the loop owns that only opaque blocks touch (``hidden_alloc_refusal``).  Extraction itself
refuses (UnsupportedLoopError, naming the statement): control flow
that is a statement of the loop body itself, and loops of unknown length or
early exits (``While``, ``Break``, ``Continue``, ``Return``) inside a
statement.  A guard (``IfThenElse``) inside a statement is fine: the pipeline
moves whole statements.
"""
from __future__ import annotations

from ..errors import UnsupportedLoopError
from .ir import s_tir, tirx, tvm, tvm_ffi, walk_all
from .uniform import is_uniform

__all__ = ["BARRIER_COPY", "SYNC", "UNBOUNDED_FLOW", "barrier_refusal", "bound_var", "check_statement_flow",
           "filled_view", "hidden_alloc_refusal", "hidden_buffers", "inlined_lets", "is_storage_sync", "let_name",
           "let_refusal", "pseudo_accesses", "used_vars"]

#: Pseudo-buffer written by an explicit barrier and read by every statement touching shared or global memory.
SYNC = "sync:tvm_storage_sync"
#: Why the copies of a loop with explicit barriers stay synchronous.
BARRIER_COPY = ("the loop orders shared memory with explicit tvm_storage_sync barriers: a cp.async would complete "
                "after the barrier meant to publish it, so its copies stay synchronous")
#: Statements inside a pipeline statement that the front-end refuses: no trip count, or an early exit.
UNBOUNDED_FLOW = (tirx.While, tirx.Break, tirx.Continue, tirx.Return)


def let_name(var) -> str:
    """The pseudo-buffer of a let-bound variable."""
    return f"let:{var.name}"


def is_storage_sync(stmt) -> bool:
    """Is ``stmt`` a ``T.tvm_storage_sync(...)`` evaluation (an explicit barrier)?"""
    if not isinstance(stmt, tirx.Evaluate) or not isinstance(stmt.value, tvm.ir.expr.Call):
        return False
    return getattr(stmt.value.op, "name", "").endswith("tvm_storage_sync")


def bound_var(stmt):
    """The variable a top-level ``Bind`` (``T.let``) statement binds, or None."""
    return stmt.var if isinstance(stmt, tirx.Bind) else None


def used_vars(stmt) -> list:
    """Every variable ``stmt`` mentions (buffer data and index variables alike)."""
    out: list = []
    tvm_ffi.structural_walk(stmt, [(tirx.Var, out.append)])
    return out


def check_statement_flow(children, name: str):
    """Refuse the control flow the pipeline cannot move: one line naming the statement and why.

    A guard (IfThenElse) inside a statement is accepted (the statement moves as a whole and its cost counts
    both branches); a statement that *is* control flow, or that holds a loop without a trip count or an
    early exit, is refused."""
    for i, c in enumerate(children):
        if isinstance(c, (tirx.IfThenElse, *UNBOUNDED_FLOW)):
            raise UnsupportedLoopError(
                f"loop '{name}': statement {i} is control flow ({type(c).__name__}): InjectSoftwarePipeline "
                "would move the condition with its statements as one; use a block predicate (T.where) or "
                "put the condition inside a block")
        for node in walk_all(c):
            if isinstance(node, UNBOUNDED_FLOW):
                raise UnsupportedLoopError(
                    f"loop '{name}': statement {i} contains a {type(node).__name__}: its work has no trip count "
                    "(or it exits early), so no schedule can be costed or proven; move it out of the loop")


def filled_view(stmt, buffer_map):
    """``stmt`` with every block's missing accesses added to its declared regions (module docstring).

    A block keeps what it declares; a buffer its body loads (stores) and its ``reads`` (``writes``) do not
    name is added with the region TVM's detector derives from the body.  Blocks are filled innermost first,
    so an outer block sees its children's filled regions.  Returns ``(view, names)``: the view (``stmt``
    itself when nothing was missing) and the names of the buffers added."""
    added: list[str] = []

    def fill(blk):
        body_r, body_w, _opaque = s_tir.analysis.get_sblock_access_region(blk, buffer_map)
        new_r = _missing(blk.reads, body_r)
        new_w = _missing(blk.writes, body_w)
        if not new_r and not new_w:
            return blk
        added.extend(r.source.name for r in (*new_r, *new_w) if r.source.name not in added)
        return s_tir.SBlock(blk.iter_vars, [*blk.reads, *new_r], [*blk.writes, *new_w], blk.name_hint, blk.body,
                            blk.init, blk.alloc_buffers, blk.match_buffers, blk.annotations)

    view = tvm_ffi.structural_map(stmt, [(s_tir.SBlock, fill)])
    return (stmt if not added else view), tuple(added)


def _missing(declared, derived) -> list:
    names = {r.source.name for r in declared}
    return [r for r in derived if r.source.name not in names]


def hidden_buffers(stmt, buffer_map, filled: tuple) -> set:
    """Of the buffers ``filled`` into ``stmt``'s view, those its statement-level regions as TVM computes them
    (``MakeSBlock`` on the statement as written) do not name: InjectSoftwarePipeline does not see them."""
    blk = s_tir.SBlock([], [], [], "", stmt)
    reads, writes = s_tir.analysis.get_sblock_read_write_region(blk, buffer_map)
    seen = {r.source.name for r in (*reads, *writes)}
    return {b for b in filled if b not in seen}


def inlined_lets(children, lowered_children) -> set:
    """Names of the top-level let-bound variables TVM's passes before InjectSoftwarePipeline substitute into
    their uses (the lowered loop still binds them, but no other statement mentions them), whose value
    reads no buffer: every use then computes the value of its own iteration, and the binding orders
    nothing.  ``lowered_children``: the loop's statements after those passes (same count and order)."""
    out = set()
    for c, low in zip(children, lowered_children, strict=True):
        var = bound_var(c)
        if var is None or not isinstance(low, tirx.Bind):
            continue
        loads: list = []
        tvm_ffi.structural_walk(c.value, [(tvm.ir.expr.TensorLoad, loads.append)])
        if loads:
            continue
        name = low.var.name
        if not any(isinstance(u, tirx.Var) and u.same_as(low.var) for other in lowered_children
                   if other is not low for u in used_vars(other)):
            out.add(name)
    return out


def pseudo_accesses(children, memory_names, inlined=frozenset()) -> list[tuple[tuple, tuple]]:
    """``(reads, writes)`` of pseudo-buffers for each statement: barriers and let-bindings.

    ``memory_names[i]``: the shared / global buffers statement ``i`` touches.  A barrier writes ``SYNC``;
    a statement that touches shared or global memory reads it (when the loop has a barrier at all).  A
    ``Bind`` writes ``let:<var>``; a later statement that mentions the variable reads it, unless TVM
    substitutes the value into its uses (``inlined``: variable names)."""
    has_sync = any(is_storage_sync(c) for c in children)
    binds = [(i, bound_var(c)) for i, c in enumerate(children)
             if bound_var(c) is not None and bound_var(c).name not in inlined]
    out = []
    for i, c in enumerate(children):
        reads: list[str] = []
        writes: list[str] = []
        if is_storage_sync(c):
            writes.append(SYNC)
        elif has_sync and memory_names[i]:
            reads.append(SYNC)
        var = bound_var(c)
        if var is not None and var.name not in inlined:
            writes.append(let_name(var))
        mentioned = used_vars(c.value if var is not None else c)
        for j, v in binds:
            if j < i and any(v.same_as(u) for u in mentioned):
                reads.append(let_name(v))
        out.append((tuple(reads), tuple(writes)))
    return out


def barrier_refusal(children, name: str, bounds, func_body) -> str | None:
    """Why no multi-stage pipeline of this loop compiles with its barriers kept correct, or None.

    ``bounds``: the loop's min and extent when the trip count is symbolic, else None; ``func_body``: the
    lowered function the loop is in.  With a symbolic trip count InjectSoftwarePipeline guards every statement
    of the prologue, the body and the epilogue with its iteration's bound, an explicit barrier included.
    ``tvm_twill_swp`` (``plan.tir_pipeline``) lets TVM's ThreadSync place barriers under a guard that is the
    same in every thread of the block (``frontend.uniform``: the bound reads no thread index, and memory only
    where every thread reads the same value: a read-only global, a local every thread stores alike, as TVM's
    paged and ragged kernels compute their chunk length).  Where that cannot be shown, the pipeline's barriers
    would rest on an unproven guard (a barrier some threads skip deadlocks the block) and ThreadSync may
    refuse them: planning such a loop is refused."""
    if bounds is None:
        return None
    i = next((i for i, c in enumerate(children) if is_storage_sync(c)), None)
    if i is None or is_uniform(bounds, func_body):
        return None
    extent = " ".join(str(bounds[-1]).split())
    return (f"loop '{name}': statement {i} is an explicit barrier (tvm_storage_sync) and the trip count '{extent}' "
            "reads memory or a thread index: the guards of the pipelined barriers cannot be shown the same in every "
            "thread of the block (TVM's ThreadSync refuses to place barriers under such a guard: 'Cannot insert "
            "syncs inside condition'); left as written")


def let_refusal(children, lowered, name: str, symbolic: bool, hoistable=frozenset()) -> str | None:
    """Why a pipeline of this loop would not compile to valid CUDA because of a let-binding, or None.

    With a symbolic trip count InjectSoftwarePipeline puts each statement under its own guard, a ``Bind``
    included: the bound variable is then in scope only inside that guard, and a statement using it under
    another guard refers to an undefined variable (nvcc rejects the CUDA).  A binding TVM substitutes into its
    uses (``inlined_lets``) is harmless; so is a loop-invariant one (``hoistable``: statement indices,
    ``frontend.invariant.hoistable_lets``), which ``tvm_twill_swp`` binds once before the loop (TVM's ragged
    prefill binds ``L_kv_base`` from the read-only ``kv_indptr``).  Any other is refused: its value changes
    from one iteration to the next (decode's rescale factor reads the running row maximum)."""
    if not symbolic or len(lowered) != len(children):
        return None
    inlined = inlined_lets(children, lowered)
    i = next((i for i, c in enumerate(children)
              if bound_var(c) is not None and bound_var(c).name not in inlined and i not in hoistable), None)
    if i is None:
        return None
    var = bound_var(children[i]).name
    return (f"loop '{name}': statement {i} binds '{var}' (a let TVM does not substitute into its uses) whose value "
            "changes between iterations (it reads the loop's variables or memory the loop writes) and the trip "
            "count is symbolic: TVM's pipeline would guard the binding alone, leaving its uses in other guarded "
            f"statements undefined; write '{var}' into its uses; left as written")


def hidden_alloc_refusal(names, loop: str) -> str | None:
    """Why TVM cannot pipeline a loop that owns a buffer it cannot see, or None.

    InjectSoftwarePipeline versions the buffers allocated in the loop body from the statements' declared
    regions; a buffer that no statement's regions name (accessed only inside opaque blocks,
    ``hidden_buffers``) has none, and TVM 0.27 fails on it (an internal ``unordered_map::at``)."""
    if not names:
        return None
    return (f"loop '{loop}': buffer '{names[0]}' is allocated in the loop and accessed only in blocks that declare "
            "no regions: TVM 0.27's InjectSoftwarePipeline cannot version it (it fails); declare the block's "
            "T.reads/T.writes or allocate the buffer outside the loop")
