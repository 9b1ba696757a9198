"""The ring protocol of a compiled warp-specialized kernel, read off its final TIR, and its model check.

The WS passes model check the protocol they emitted (``ws_facts``), but every
pass after them (TVM's ThreadSync and storage passes, CSE, the proxy fences, a
pass a user adds) could still change it.  ``read_protocol`` therefore walks
the PrimFunc as the last pass of the ``tvm_twill_ws`` pipeline leaves it and
rebuilds the ``RingProtocol`` from what is there, nothing from the passes:

* the role branch (an ``if`` on the broadcast warp index ``ws_warp``): the
  producer's side and the consumers' side, and the consumer warp count (the
  first warp index of the producer's side);
* the ``mbarrier.init`` calls: ring depth (slots initialised) and the arrival
  counts of the ``full`` barriers (the ones the consumers wait on) and the
  ``empty`` ones (the producer waits on);
* the producer's loop: the slot and parity of its wait on ``empty`` per
  iteration, and how it signals ``full`` (``cp.async.mbarrier.arrive.noinc``:
  cp.async, each of 32 lanes; ``arrive.expect_tx``: TMA); its tail (the loop
  that only waits on ``empty``);
* the consumers' loop: the slot and parity of the wait on ``full``, which
  statements read shared memory, where the release (``arrive`` on ``empty``)
  is and which slot it releases (this iteration's, or the previous one's:
  release lag 1, with the ``wgmma.wait_group`` count and the commit groups
  per iteration), the release after the loop, and the named-barrier turns of
  ordered consumer groups (order, threads, prologue, each section's turn and
  pass, the last pass's guard);
* the look-ahead turn (``look_ahead``): a turn in the statement after the
  loop; it must take the turn, issue and wait for its wgmma, then release
  the last slot, and its pass's guard is the one the last group skips; in
  the loop the ring's reads are told from the consumers' scratch (one shared
  pool in the final TIR) by an address that moves with the iteration, and
  the commit groups in flight at the loop's wait are those issued after the
  last statement that waits inside itself.

Slot indices must be ``i mod depth``; what the reader cannot find or
evaluate is a refusal (``UnsupportedLoopError``), as is a failed model check:
a kernel is compiled only with a protocol that was read and checked.
"""
from __future__ import annotations

from ...errors import InputError, UnsupportedLoopError
from ...frontend.ir import const_int, is_shared, scope_of, substitute, tirx, tvm, tvm_ffi
from ...model.protocol import CheckIncomplete, RingProtocol, check_ring
from .role_barriers import GROUP_BARRIER
from ..tir_util import flatten_seq, op_name, uses_var

__all__ = ["CHECK_TIME_FACTOR", "check_compiled", "read_protocol", "unchecked_protocol", "verify_compiled_protocol"]

_INIT, _ARRIVE = "tirx.ptx.mbarrier_init", "tirx.ptx.mbarrier_arrive_nocount"
_EXPECT_TX, _NOINC = "tirx.ptx.mbarrier_arrive_expect_tx", "tirx.ptx.cp_async_mbarrier_arrive"
_WAITS = {"tirx.cuda.mbarrier_wait": (0, 1), "tirx.ptx.mbarrier_test_wait_parity": (1, 2)}  # (pointer, parity)
_WG_WAIT, _WG_COMMIT = "tirx.ptx.wgmma_wait_group", "tirx.ptx.wgmma_commit_group"
_BAR_SYNC, _BAR_ARRIVE = "tirx.ptx.bar_sync_count", "tirx.ptx.bar_arrive"
_ROLE_VAR = "ws_warp"


def _fail(msg: str):
    raise UnsupportedLoopError(f"warp specialization: the compiled kernel's ring protocol: {msg}")


#: A protocol check under ``auto_pipeline`` may run this many times the plan's ``time_limit`` (the limit is per
#: solve, and a plan runs several).  At the default limit of 10 s that is 200 s, more than the state budget
#: (``model.protocol.MAX_STATES``, about 90 s) ever needs, so with the default limit the state budget alone ends a
#: check, whatever the machine's load: the largest bundled check (the d 128 wgmma attention, about a million
#: states) takes 13-80 s, by load.  A small ``time_limit`` (1 s: 20 s a check) still bounds a check in time.
CHECK_TIME_FACTOR = 20


def unchecked_protocol(proto: RingProtocol, err: CheckIncomplete, what: str = "the emitted mbarrier protocol"
                       ) -> UnsupportedLoopError:
    """The refusal of a kernel whose protocol check was cut short (no verdict, so no kernel), and what to do."""
    sizes = f"{proto.depth} ring slots, {proto.consumers} consumer warps"
    if err.reason == "deadline":
        return UnsupportedLoopError(f"warp specialization: {what} ({sizes}) could not be model checked in the "
                                    f"{err.limit:g}s a check gets ({CHECK_TIME_FACTOR} x the plan's time_limit; "
                                    f"{err.states} states explored, no verdict), so no kernel: raise time_limit, or "
                                    "plan without warp_specialize")
    return UnsupportedLoopError(f"warp specialization: {what} ({sizes}) could not be model checked: more than "
                                f"{err.limit} states, too many to explore, so no kernel: bind fewer consumer "
                                "threads around the loop, or plan without warp_specialize")


def _nodes(node, cls) -> list:
    """Every node of type ``cls`` under ``node`` (``node`` included), in walk order (parents first)."""
    out = []
    tvm_ffi.structural_walk(node, [(cls, out.append)])
    return out


def _calls(node, name: str) -> list:
    out = []
    tvm_ffi.structural_walk(node, [(tvm.ir.expr.Call, lambda c: out.append(c) if op_name(c) == name else None)])
    return out


def _barrier(ptr):
    """(buffer, index expression) of the mbarrier a pointer argument addresses (``&bars[i]``)."""
    loads = []
    tvm_ffi.structural_walk(ptr, [(tvm.ir.expr.TensorLoad, loads.append)])
    if len(loads) != 1 or len(loads[0].indices) != 1:
        _fail(f"cannot tell which mbarrier {ptr} addresses")
    return loads[0].source, loads[0].indices[0]


class _Func:
    """One PrimFunc: its let-bound values (CSE binds them), and expressions evaluated at a loop iteration."""

    def __init__(self, func):
        self.func = func
        self.lets = [(s.var, s.value) for s in _nodes(func.body, tirx.Bind)]
        self.analyzer = tvm.sym.Analyzer()

    def value(self, expr, binds=()) -> int | None:
        """``expr`` with ``binds`` ((var, int) pairs) substituted and the other lets resolved, as a constant or
        None."""
        lets = [(v, e) for v, e in self.lets if not any(v.same_as(b) for b, _ in binds)]
        for _ in range(16):
            if not any(uses_var(expr, v) for v, _ in lets):
                break
            expr = substitute(expr, lets)
        return self._fold(substitute(expr, [(v, tirx.const(i, str(v.ty))) for v, i in binds]))

    def _fold(self, e) -> int | None:
        if isinstance(e, tirx.BitwiseXor):
            a, b = self._fold(e.a), self._fold(e.b)
            return None if a is None or b is None else a ^ b
        if isinstance(e, tirx.Cast):
            return self._fold(e.value)
        return const_int(self.analyzer.simplify(e))

    def series(self, expr, loop, n: int, what: str) -> tuple:
        """``expr`` at the iterations 0 .. n - 1 of ``loop`` that it runs (a refusal when one is not a constant).

        The final TIR may be simplified with the loop's bounds (``k // depth`` for ``(k // depth) % 2``), so
        only the iterations the loop runs are evaluated."""
        trip = const_int(loop.extent)
        out = tuple(self.value(expr, [(loop.loop_var, i)]) for i in range(n if trip is None else min(n, trip)))
        if None in out:
            _fail(f"the {what} is not a constant at every iteration")
        return out


def _role_branch(func):
    """The outermost ``if`` on the warp index with both sides (the producer's may branch on it again)."""
    found = [s for s in _nodes(func.body, tirx.IfThenElse) if s.else_case is not None
             and _ROLE_VAR in {v.name for v in tirx.analysis.undefined_vars(s.condition)}]
    outer = [s for s in found if not any(o is not s and any(x.same_as(s) for x in _nodes(o, tirx.IfThenElse))
                                         for o in found)]
    return outer[0] if outer else None


def _loop_with(stmt, pred):
    """The first serial loop under ``stmt`` (walk order) whose body satisfies ``pred``."""
    return next((s for s in _nodes(stmt, tirx.For) if pred(s.body)), None)


def _waits_on(node, buf) -> list:
    """(pointer index, parity) of every mbarrier wait under ``node`` on ``buf``."""
    out = []
    for name, (p, q) in _WAITS.items():
        for c in _calls(node, name):
            b, idx = _barrier(c.args[p])
            if b.same_as(buf):
                out.append((idx, c.args[q]))
    return out


def _arrivals(node, name: str, buf) -> list:
    return [idx for c in _calls(node, name) for b, idx in [_barrier(c.args[0])] if b.same_as(buf)]


def _inits(f: _Func, buf) -> tuple[int, int]:
    """(slots initialised, their arrival count) of the mbarrier array ``buf``."""
    seen = {}
    for c in _calls(f.func.body, _INIT):
        b, idx = _barrier(c.args[0])
        if b.same_as(buf):
            seen[f.value(idx)] = f.value(c.args[1])
    counts = set(seen.values())
    if None in seen or len(counts) != 1 or None in counts or sorted(seen) != list(range(len(seen))):
        _fail(f"the mbarrier.init calls of '{buf.name}' are not one constant count per slot 0 .. n-1 ({seen})")
    return len(seen), counts.pop()


def _slots_are_ring(f: _Func, idx, loop, depth: int, lag: int, what: str) -> None:
    got = f.series(idx, loop, 2 * depth + 1, f"slot of the {what}")
    want = tuple((i - lag) % depth for i in range(len(got)))
    if got[lag:] != want[lag:]:
        _fail(f"the {what} uses slots {got[lag:]}, not (iteration - {lag}) mod {depth}")


def _buffers(branch):
    """(full, empty): the mbarrier arrays the consumers and the producer wait on."""
    found = []
    for side in (branch.else_case, branch.then_case):
        bufs = []
        for name, (p, _) in _WAITS.items():
            bufs += [_barrier(c.args[p])[0] for c in _calls(side, name)] if side is not None else []
        if not bufs:
            _fail(f"the {'consumer' if side is branch.else_case else 'producer'} side waits on no mbarrier")
        found.append(bufs[0])
    if found[0].same_as(found[1]):
        _fail("the producer and the consumers wait on the same mbarriers")
    return found[0], found[1]


def _producer(f: _Func, side, full, empty, depth: int) -> dict:
    """The producer's loop (its wait on ``empty``, its signal of ``full``) and its tail."""
    def signals(body):
        return bool(_arrivals(body, _NOINC, full) or _arrivals(body, _EXPECT_TX, full))
    loop = _loop_with(side, lambda b: bool(_waits_on(b, empty)) and signals(b))
    if loop is None:
        _fail("no producer loop both waits on an empty barrier and signals a full one")
    (idx, parity), = _waits_on(loop.body, empty)[:1]
    _slots_are_ring(f, idx, loop, depth, 0, "producer's wait on the empty barriers")
    noinc, expect = _arrivals(loop.body, _NOINC, full), _arrivals(loop.body, _EXPECT_TX, full)
    if bool(noinc) == bool(expect):
        _fail("the producer signals the full barriers with neither or both of cp.async's arrive and expect_tx")
    _slots_are_ring(f, (noinc or expect)[0], loop, depth, 0, "producer's signal of the full barriers")
    tail = _loop_with(side, lambda b: bool(_waits_on(b, empty)) and not signals(b))
    tail_acquires = 0 if tail is None else f.value(tail.extent)
    if tail_acquires is None:
        _fail("the producer's tail has no constant trip count")
    return dict(tma=bool(expect), parities=f.series(parity, loop, 2 * depth + 1, "producer's parity"),
                tail_acquires=tail_acquires)


def _shared_vars(stmt, barriers) -> bool:
    """Does ``stmt`` touch shared memory other than the mbarrier arrays ``barriers``?"""
    hit = []

    def on_var(v):
        if not isinstance(v.ty, tvm.ir.PrimType) and is_shared(scope_of(v)) and \
                not any(v.same_as(b) for b in barriers):
            hit.append(v)
    tvm_ffi.structural_walk(stmt, [(tirx.Var, on_var)])
    return bool(hit)


def _ring_access(stmt, k) -> bool:
    """Does ``stmt`` address shared memory at an index that depends on the loop variable ``k`` (a ring slot;
    the rings and the consumers' scratch share one pool in the final TIR, and only the ring's slot moves with
    the iteration)?"""
    hit = []

    def on_index(buf, indices):
        if is_shared(scope_of(buf)) and any(uses_var(i, k) for i in indices):
            hit.append(1)
    tvm_ffi.structural_walk(stmt, [(tvm.ir.expr.TensorLoad, lambda x: on_index(x.source, x.indices)),
                                   (tirx.BufferStore, lambda x: on_index(x.buffer, x.indices))])
    return bool(hit)


def _commits(stmt) -> int | None:
    """Commit groups one execution of ``stmt`` issues (a static count), or None."""
    if not _calls(stmt, _WG_COMMIT):
        return 0
    if isinstance(stmt, tirx.SeqStmt):
        counts = [_commits(s) for s in stmt.seq]
        return None if None in counts else sum(counts)
    if isinstance(stmt, tirx.Evaluate):
        return 1 if op_name(stmt.value) == _WG_COMMIT else None
    if isinstance(stmt, tirx.For):
        n, inner = const_int(stmt.extent), _commits(stmt.body)
        return None if n is None or inner is None else n * inner
    body = getattr(stmt, "body", None)
    return None if isinstance(stmt, (tirx.IfThenElse, tirx.While)) or not isinstance(body, tirx.Stmt) \
        else _commits(body)


def _consumer(f: _Func, side, full, empty, depth: int) -> dict:
    """The consumers' loop: wait on ``full``, reads, release of ``empty`` (this slot or the previous one)."""
    loop = _loop_with(side, lambda b: bool(_waits_on(b, full)))
    if loop is None:
        _fail("no consumer loop waits on a full barrier")
    k = loop.loop_var
    (idx, parity), = _waits_on(loop.body, full)[:1]
    _slots_are_ring(f, idx, loop, depth, 0, "consumers' wait on the full barriers")
    seq = flatten_seq(loop.body)
    reads = [i for i, s in enumerate(seq) if _shared_vars(s, (full, empty))]
    releases = [i for i, s in enumerate(seq) if _arrivals(s, _ARRIVE, empty)]
    waits = [i for i, s in enumerate(seq) if isinstance(s, tirx.Evaluate) and op_name(s.value) == _WG_WAIT]
    if len(releases) != 1:
        _fail(f"the consumer loop releases an empty barrier {len(releases)} times per iteration, not once")
    rel = _arrivals(seq[releases[0]], _ARRIVE, empty)[0]
    lag = 1 if f.value(rel, [(k, 1)]) == 0 and depth > 1 else 0
    _slots_are_ring(f, rel, loop, depth, lag, "consumers' release of the empty barriers")
    if lag and not (isinstance(seq[releases[0]], tirx.IfThenElse) and
                    [f.value(seq[releases[0]].condition, [(k, i)]) for i in (0, 1)] == [0, 1]):
        _fail("the release of the previous iteration's slot is not skipped in iteration 0")
    before, after = _siblings(side, loop)
    warp = next((v for v, _ in f.lets if v.name == _ROLE_VAR), None)
    ahead = any((f.value(c.args[0], [(warp, 0)] if warp is not None else []) or GROUP_BARRIER) < GROUP_BARRIER
                for st in after for c in _calls(st, _BAR_SYNC))   # a turn after the loop: the look-ahead's
    wait = (const_int(seq[waits[-1]].value.args[0]) or 0) if waits else 0
    groups = _commits(loop.body) or 0
    if ahead:   # the ring's reads are its slot's accesses; the groups in flight are the last run's, issued
        reads = [i for i in reads if _ring_access(seq[i], k)]          # one iteration late
        groups = _in_flight(seq, waits)
        wait += groups
        _epilogue_turn(after, empty)
    return dict(loop=loop, seq=seq, reads=reads, parities=f.series(parity, loop, 2 * depth + 1, "consumers' parity"),
                release_last=min(releases) > max(reads + waits, default=-1), lag=lag, groups=groups, wait=wait,
                final_release=not lag or len(_arrivals(side, _ARRIVE, empty)) > len(_arrivals(loop, _ARRIVE, empty)),
                ahead=ahead, before=before, after=after)


def _siblings(side, loop) -> tuple[list, list]:
    """The statements before and after ``loop`` in the sequence that holds it under ``side`` (flattened; a
    statement after it guarded by one ``if``, as the look-ahead's turn is by ``trip >= 1``, unwrapped)."""
    parent = next((s for s in _nodes(side, tirx.SeqStmt) if any(x.same_as(loop) for x in s.seq)), None)
    if parent is None:
        return [], []
    at = next(i for i, x in enumerate(parent.seq) if x.same_as(loop))
    after = []
    for st in parent.seq[at + 1:]:
        after += flatten_seq(st.then_case if isinstance(st, tirx.IfThenElse) and st.else_case is None
                             and isinstance(st.then_case, tirx.SeqStmt) else st)
    return [x for st in parent.seq[:at] for x in flatten_seq(st)], after


def _epilogue_turn(after, empty) -> None:
    """The look-ahead's turn after the loop (``after``: the statements after it): the turn first, then the last
    run's wgmma with its waits, then the release of the last slot (the model's final wait before its final
    release); anything else is refused."""
    gemm = [i for i, st in enumerate(after) if _calls(st, _WG_COMMIT)]
    release = [i for i, st in enumerate(after) if _arrivals(st, _ARRIVE, empty)]
    if not (after and _calls(after[0], _BAR_SYNC) and gemm and release and min(release) > max(gemm)
            and all(_calls(after[i], _WG_WAIT) for i in gemm)):
        _fail("the look-ahead's turn after the loop does not take the turn, then issue and wait for its wgmma, "
              "then release the last slot")


def _in_flight(seq, waits) -> int:
    """Commit groups the look-ahead loop leaves in flight at its wait: those of the statements after the last
    one that waits inside itself (its first run), up to the loop's own ``wgmma.wait_group`` (the last run of
    the previous iteration, under its ``if k >= 1``)."""
    top = waits[-1] if waits else len(seq)
    inner = [i for i, st in enumerate(seq[:top]) if _calls(st, _WG_WAIT)]
    total = 0
    for st in seq[inner[-1] + 1 if inner else 0:top]:
        st = st.then_case if isinstance(st, tirx.IfThenElse) and st.else_case is None else st
        n = _commits(st)
        if n is None:
            _fail("the look-ahead turn's wgmma commit groups in flight are not a static count")
        total += n
    return total


def _consumer_warps(f: _Func, branch) -> int:
    """The first warp index that takes the producer's side of the role branch."""
    warp = next(v for v in tirx.analysis.undefined_vars(branch.condition) if v.name == _ROLE_VAR)
    for w in range(1, 65):
        if f.value(branch.condition, [(warp, w)]):
            return w
    _fail("the role branch gives no warp below 65 the producer's side")


def _order(f: _Func, side, cons: dict, warps: int) -> dict:
    """The named-barrier turns of ordered consumer groups (``consumer_order``), or {} without them."""
    seq, reads, loop = cons["seq"], cons["reads"], cons["loop"]
    warp = next((v for v, _ in f.lets if v.name == _ROLE_VAR), None)
    # barriers GROUP_BARRIER + c and 15 are the consumers' own (role_barriers), not turns
    def sync_of(s):   # the bar.sync of a turn (guarded: the first turn of a wrapped body)
        s = s.then_case if isinstance(s, tirx.IfThenElse) and s.else_case is None else s
        return s.value if isinstance(s, tirx.Evaluate) and op_name(s.value) == _BAR_SYNC else None
    turns = [i for i, s in enumerate(seq) if sync_of(s) is not None
             and (f.value(sync_of(s).args[0], [(warp, 0)] if warp is not None else []) or 0) < GROUP_BARRIER]
    passes = [i for i, s in enumerate(seq) if isinstance(s, (tirx.IfThenElse, tirx.Evaluate)) and
              _calls(s, _BAR_ARRIVE)]
    if not turns:
        return {}
    sync = sync_of(seq[turns[0]])
    ids = [f.value(sync.args[0], [(warp, w)]) for w in range(warps)]
    groups = len(set(ids))
    if None in ids or groups < 2 or warps % groups or sorted(set(ids)) != list(range(min(ids), min(ids) + groups)):
        _fail(f"the consumer warps' named barriers {ids} are not one per group of consecutive warps")
    per, first_id = warps // groups, min(ids)
    prologue = [c for st in cons["before"] if isinstance(st, tirx.IfThenElse) for c in _calls(st.then_case, _BAR_ARRIVE)
                ] if passes else []
    nxt = {}
    if passes:
        arrive = _calls(seq[passes[0]], _BAR_ARRIVE)[0]
        nxt = {g: f.value(arrive.args[0], [(warp, g * per)]) - first_id for g in range(groups)}
    head = f.value(prologue[0].args[0]) - first_id if prologue else None
    order = [head if head is not None else 0]
    while len(order) < groups and nxt.get(order[-1]) is not None and nxt[order[-1]] not in order:
        order.append(nxt[order[-1]])
    if len(order) != groups:
        _fail(f"the consumer groups' turns do not form one order ({nxt})")
    skip = False
    if passes and isinstance(seq[passes[-1]], tirx.IfThenElse):
        last = tirx.Add(loop.min, loop.extent) - 1
        cond = substitute(seq[passes[-1]].condition, [(loop.loop_var, last)])
        skip = f.value(cond, [(warp, order[-1] * per)]) == 0
    if cons["ahead"]:   # the look-ahead turn: every group passes in the loop; the last skips the pass after it
        ends = [st for st in cons["after"] if _calls(st, _BAR_ARRIVE)]
        skip = not any(isinstance(seq[p], tirx.IfThenElse) for p in passes) and len(ends) == 1 and \
            isinstance(ends[0], tirx.IfThenElse) and f.value(ends[0].condition, [(warp, order[-1] * per)]) == 0
    wrap = _wraps(f, seq, turns, passes, loop, warp, order[0] * per)
    # a turn and its pass per section, in turn; every read of shared memory before the last pass (the model
    # counts the slot as read after the last section)
    paired = len(passes) == len(turns) and all(t < p for t, p in zip(turns, passes)) and \
        all(p < t for p, t in zip(passes, turns[1:]))
    return dict(order=tuple(order), bar_count=f.value(sync.args[1]) // 32, prologue_arrive=bool(prologue),
                pass_after_read=paired and bool(passes) and max(passes) > max(reads, default=-1),
                skip_last_pass=skip, sections=max(1, len(turns)), wrap=wrap, epilogue_turn=cons["ahead"])


def _wraps(f: _Func, seq, turns, passes, loop, warp, first_warp: int) -> bool:
    """Does the last turn of an iteration go on into the next one (``consumer_order``: the first turn taken in
    the loop's first iteration only, the last pass in its last only)?  A guarded turn that is not exactly
    that is refused."""
    guarded = [t for t in turns if isinstance(seq[t], tirx.IfThenElse)]
    k = loop.loop_var

    def at(cond, i, w=first_warp):
        binds = [(warp, w)] if warp is not None else []
        return f.value(substitute(cond, [(k, i)]), binds)
    if not guarded:   # every turn taken in every iteration: so must the last pass be, but in the last iteration
        if passes and isinstance(seq[passes[-1]], tirx.IfThenElse) and \
                at(seq[passes[-1]].condition, loop.min + loop.extent - 2) != 1:
            _fail("a consumer group's last pass is skipped before the last iteration, but its first turn is "
                  "taken in every iteration")
        return False
    ok = guarded == turns[:1] and len(turns) > 1 and len(passes) == len(turns) and \
        at(seq[turns[0]].condition, loop.min) == 1 and at(seq[turns[0]].condition, loop.min + 1) == 0 and \
        isinstance(seq[passes[-1]], tirx.IfThenElse) and \
        at(seq[passes[-1]].condition, loop.min + loop.extent - 2) == 0 and \
        at(seq[passes[-1]].condition, loop.min + loop.extent - 1) == 1
    if not ok:
        _fail("a consumer group's turn is guarded, but not as a turn that spans the loop's back edge (the first "
              "turn in the first iteration only, the last pass in the last only)")
    return True


def read_protocol(func) -> RingProtocol | None:
    """The ``RingProtocol`` of a compiled warp-specialized PrimFunc, None when it has no role branch."""
    branch = _role_branch(func)
    if branch is None:
        return None
    f = _Func(func)
    full, empty = _buffers(branch)
    depth, full_count = _inits(f, full)
    empty_depth, empty_count = _inits(f, empty)
    if empty_depth != depth:
        _fail(f"{depth} full barriers but {empty_depth} empty ones are initialised")
    warps = _consumer_warps(f, branch)
    prod = _producer(f, branch.then_case, full, empty, depth)
    cons = _consumer(f, branch.else_case, full, empty, depth)
    def flips(parities):   # over the iterations the loop runs
        return parities == tuple((i // depth) % 2 for i in range(len(parities)))
    return RingProtocol(depth=depth, consumers=warps, tma=prod["tma"], lanes=1 if prod["tma"] else 32,
                        full_count=full_count, empty_count=empty_count,
                        producer_flips_phase=flips(tuple(p ^ 1 for p in prod["parities"])),
                        consumer_flips_phase=flips(cons["parities"]), release_after_read=cons["release_last"],
                        producer_tail=prod["tail_acquires"] >= depth, release_lag=cons["lag"],
                        groups=max(1, cons["groups"]) if cons["lag"] else 1,
                        wait_pending=cons["wait"] if cons["lag"] else None,
                        final_release=cons["final_release"], **_order(f, branch.else_case, cons, warps))


def check_compiled(mod) -> list:
    """Read and model check the ring protocol of every warp-specialized PrimFunc of ``mod``: their reports.
    UnsupportedLoopError (one line) when one cannot be read or fails the check."""
    reports = []
    for gv, func in mod.functions_items():
        proto = read_protocol(func) if isinstance(func, tirx.PrimFunc) else None
        if proto is None:
            continue
        try:
            report = check_ring(proto)
        except CheckIncomplete as e:
            raise unchecked_protocol(proto, e, f"the mbarrier protocol of the compiled kernel '{gv.name_hint}'") \
                from None
        except InputError as e:
            _fail(f"'{gv.name_hint}' could not be model checked ({e})")
        if not report.ok:
            v = report.violations[0]
            raise UnsupportedLoopError(
                f"warp specialization: the compiled kernel '{gv.name_hint}' fails the mbarrier protocol model "
                f"check ({v.kind}): {v.message}; trace: {' -> '.join(v.trace)}")
        reports.append(report)
    return reports


@tvm.transform.module_pass(opt_level=0, name="TwillCheckCompiledProtocol")
def verify_compiled_protocol(mod, _ctx):
    """``check_compiled`` as a pass at the end of the ``tvm_twill_ws`` pipeline (module unchanged)."""
    check_compiled(mod)
    return mod
