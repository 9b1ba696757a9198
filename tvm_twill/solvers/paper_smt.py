"""The Twill paper's joint SWP + WS constraint system (Figures 4-6), on z3, and Algorithm 1.

This is the paper-faithful baseline: the constraints are stated over the
straight-line program Q of overlapped copies of one iteration, one boolean
per (op, copy, cycle), exactly as in sections 4.1-4.3.  It is meant for
comparison with tvm_twill's default encoding, not for speed.

The straight-line program Q
---------------------------
For an initiation interval ``ii`` and a length bound ``L``, Q holds copies
i in [0, C) of the iteration, copy i issued ii*i cycles after copy 0, over
cycles t in [0, T] with T = (C-1)*ii + L.  The paper takes C = ceil(L/ii);
we take C = ceil(L/ii) + dmax, dmax the largest edge distance (see
"Differences" below for why).  Variables::

    op[v,i,t]   copy i of op v issues at cycle t             t in [0, T]
    live[v,i,t] the value of copy i of v is live at cycle t  t in [0, H], H = max(T, C*ii)
    opw[v,w]    v is issued by warp (group) w                w in [0, warp_groups)

Figure 4 (modulo schedule), with out-of-range op[...] read as false and
constraints on copies outside [0, C) not emitted::

    sum_t op[v,i,t] = 1                                           Uniqueness
    op[v,0,t] => op[v,i,t+i*ii]                                   Consistency
    t + cycles(v) > T => not op[v,i,t]                            Completion
    op[u,i,t] => not op[v,i+delta,t'] for t' < t+d                Dependence
    sum_{v,i,c} op[v,i,t-c]*RRT[v][c][f] <= cap(f)                Capacity

Figure 5 (liveness, a backward dataflow over Q; only for ops whose value
holds registers or memory and has a consumer, the others never count), with
use(t) = OR_(v,u,_,delta) op[u,i+delta,t] and not op[v,i,t]::

    live[v,i,H] <=> some edge (v,u,_,delta) has i+delta >= C      Init
    live[v,i,t] and op[v,i,t] => not live[v,i,t-1]                LiveProp-1
    live[v,i,t] and not op[v,i,t] => live[v,i,t-1]                LiveProp-2
    not live[v,i,t] and use(t) => live[v,i,t-1]                   DeadProp-1
    not live[v,i,t] and not use(t) => not live[v,i,t-1]           DeadProp-2
    sum_{v,i} live[v,i,t]*smem(v) <= smem_bytes, same for tmem    Memory Capacity (t < C*ii)

Figure 6 (warps)::

    sum_w opw[v,w] = 1                                            Warp Uniqueness
    variable_latency(v) <=> opw[v,W_vl]   (W_vl = warp_groups-1)  Variable Latency
    sum_{v,i} live[v,i,t]*opw[v,w]*regs(v)
        <= regs_per_thread_max                                    Register Limit (t < C*ii)
    op[u,i,t] and apart(u,v) => not op[v,i+delta,t+d+s],
        s in [0, spill_cost(u))                                   Cross-Warp Spills
    op[v,i,t] and together(v,o) and blocking(u,v)
        => not op[o,i',t'] for all i', t' in [t-cycles(o)+1, t]   Concurrency (o != v)

where together(v,o) = OR_w (opw[v,w] and opw[o,w]) and apart = not together:
the paper quantifies over w and w' != w, which says the same with one
literal per pair instead of warp_groups^2 clauses.  All of it is pure
boolean plus pseudo-boolean sums, solved by z3's QF_FD engine with a fixed
random seed.  The schedule read back is M(v) = the t with op[v,0,t].

Differences from the paper, and why (the checker is the reference)
------------------------------------------------------------------
Read literally, Q with C = ceil(L/ii) copies is looser than the checker
(``docs/formats.md``, rules 1-6) in two ways and stricter in three:

* Looser: an edge of distance delta >= C has no pair of copies in Q, so the
  paper drops it (a real dependence lost); and a value live for longer than
  about C*ii cycles (a loop-carried lifetime) has instances from iterations
  before copy 0 live in the steady state, which Q does not hold (registers
  and memory undercounted).  Fix: C = ceil(L/ii) + dmax copies.  Every edge
  then has a copy pair, and the window [L + (dmax-1)*ii, C*ii) -- at least ii
  consecutive cycles -- sees every live instance of the steady state.
* Stricter: Init marks only the last copy live at the end, while a value
  whose consumer lies beyond Q may belong to an earlier copy (delta >= 2);
  and such values stay live up to the end of Q although the loop ends them
  at their consumer, so the epilogue of Q overcounts.  Fix: Init as above,
  with the live horizon H = max(T, C*ii) so that the whole window has live
  variables, and the capacity sums (registers, memory) for t < C*ii only.
  In the window a value whose consumer is beyond Q is truly live (that
  consumer issues at C*ii or later); before the window, Q holds a subset of
  the instances live at the same slot of the steady state, so those sums are
  implied by the window's.
* Stricter: DeadProp-1 makes a value whose consumer issues in the cycle of
  its definition (delay 0) live before it is defined.  Fix: a use in the
  defining cycle does not count (``use(t)`` above); the checker's interval
  [time, time) is empty too.
* Stricter: ops issue in [0, T), so a zero-cycle op (a streaming load,
  section 5.3) of the last copy cannot issue at T = its end; the checker's
  length max(time + cycles) allows it.  Fix: t in [0, T].
* The paper reserves W_vl even when no op has variable latency, which wastes
  a warp; rule 3 constrains only graphs that have such ops, so the constraint
  is emitted only then.  Pinning them to the last warp loses nothing: warp
  roles are interchangeable.
* The concurrency constraint for cross-warp hand-offs, elided in the paper,
  is not modelled (the checker's default, ``cross_warp_sync=False``).

With these, for a given (ii, L) the system is satisfiable exactly when some
schedule of length <= L passes rules 1-6: dependence, capacity and
concurrency over the copies are rules 1, 2 and 4 (every pair of instances
that can interact appears in Q), and the window's sums are rules 5 and 6.
``tests/solvers/test_paper_smt.py`` cross-checks this against the default encoding.
What remains of the paper is Algorithm 1's search, which is incomplete (see
``paper_search``).

Size.  The encoding is time-indexed, so ``paper_smt_solve`` refuses (one
``InputError`` line) a program of more than ``MAX_CELLS`` op/live booleans,
and its modulo ILP has the bound of ``modulo_ilp``; warp variables exist only
for the roles a schedule can use (``symmetry.role_ids``), not for every warp
group of the machine.

Warps in the result are renamed by first use in graph order (the
variable-latency warp stays last), so equal answers print the same.
"""
from __future__ import annotations

import time as _time
from math import ceil

from ..errors import InfeasibleError, InputError, SolverTimeoutError
from .backends import load_z3
from ..model.families import Family
from .limits import Deadline, z3_unknown
from .modulo_ilp import modulo_schedule_ilp
from .symmetry import role_ids

SOLVER = "paper-smt"


def copies_and_horizon(graph, ii: int, length: int) -> tuple[int, int]:
    """(C, T) of Q: C = ceil(L/ii) + max edge distance copies, T = (C-1)*ii + L cycles."""
    dmax = max((e.distance for e in graph.edges), default=0)
    copies = ceil(length / ii) + dmax
    return copies, (copies - 1) * ii + length


#: The largest straight-line program encoded: op[v,i,t] and live[v,i,t] booleans
#: together.  Past it ``paper_smt_solve`` refuses with InputError (the encoding is
#: time-indexed: normalize the costs, or use the default encoding).
MAX_CELLS = 1_000_000


def cells(graph, ii: int, length: int) -> int:
    """How many op[v,i,t] and live[v,i,t] booleans Figures 4-6 need at (ii, L)."""
    C, T = copies_and_horizon(graph, ii, length)
    holders = sum(1 for o in graph.ops if graph.out_edges(o.name) and (o.regs or o.smem or o.tmem))
    return len(graph.ops) * C * (T + 1) + holders * C * (max(T, C * ii) + 1)


def _check_size(graph, ii: int, length: int) -> None:
    n = cells(graph, ii, length)
    if n > MAX_CELLS:
        raise InputError(f"the paper encoding of '{graph.name}' at ii={ii}, L={length} needs {n} booleans (one per "
                         f"op, copy and cycle; at most {MAX_CELLS}): normalize the costs or use the default "
                         "encoding (--encoding joint)")


def paper_smt_solve(graph, machine, ii: int, length: int, *, time_limit: float = 60.0,
                    deadline: Deadline | None = None) -> tuple[dict[str, int], dict[str, int]] | None:
    """Solve Figures 4-6 for (ii, L); return (times, warps) or None when unsat.

    ``times`` are the copy-0 issue cycles M(v) (every op ends by ``length``),
    ``warps`` the warp (group) of each op.  Raises SolverTimeoutError when
    ``time_limit`` seconds (building the constraints included; or the
    ``limits.Deadline`` ``deadline``) run out before z3 answers, and
    KeyboardInterrupt on Ctrl-C while z3 runs.
    """
    from ..model import get_machine

    for what, v in (("ii", ii), ("length", length)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InputError(f"{what} must be an integer >= 1, got {v!r}")
    machine = get_machine(machine)
    graph.validate_for(machine)
    z3 = load_z3("solver 'paper-smt'")
    enc = _PaperEncoding(z3, graph, machine, ii, length, Deadline.of(deadline, time_limit))
    enc.figure4()
    enc.warp_variables()
    enc.liveness()
    enc.figure6()
    return enc.solve()


class _PaperEncoding:
    """Figures 4-6 of the paper for one (ii, L), added to one z3 solver in the paper's order
    (``paper_smt_solve``): ``op[n, i, t]`` (copy i of op n issues at cycle t), ``opw[n, w]`` (op n on
    warp role w), ``live[n, i, t]`` (copy i of n's value is live at t)."""

    def __init__(self, z3, graph, machine, ii: int, length: int, deadline: Deadline):
        self.z3, self.graph, self.machine, self.deadline = z3, graph, machine, deadline
        self.ii, self.length = ii, length
        self.names = graph.names
        self.ops = {n: graph.op(n) for n in self.names}
        self.C, self.T = copies_and_horizon(graph, ii, length)
        _check_size(graph, ii, length)
        self.W = machine.warp_groups
        self.roles = role_ids(graph, machine)  # at most one role per op: roles are interchangeable
        self.copies = range(self.C)
        self.cycles = range(self.T + 1)  # [0, T]: a zero-cycle op of the last copy may issue at T
        self.s = z3.SolverFor("QF_FD")
        self.s.set("random_seed", 0)

    def Or(self, lits):
        """z3.Or of a list, built by one C call: z3.Or's per-argument coercion
        in Python was 80% of the time on graphs with ii near 100."""
        z3 = self.z3
        if not lits:
            return z3.BoolVal(False)
        return z3.BoolRef(z3.Z3_mk_or(lits[0].ctx_ref(), len(lits),
                                      (z3.Ast * len(lits))(*[x.as_ast() for x in lits])), lits[0].ctx)

    def overdue(self, stage: str) -> None:
        if self.deadline.expired():
            raise SolverTimeoutError(f"paper SMT for '{self.graph.name}' at ii={self.ii}, L={self.length}: "
                                     f"{self.deadline.limit:.1f} s ran out while building the {stage} constraints: "
                                     "raise the time limit")

    def at(self, n, i, t):
        """op[n,i,t], false outside Q (the paper's guard)."""
        return self.op[n, i, t] if 0 <= i < self.C and 0 <= t <= self.T else self.z3.BoolVal(False)

    def together(self, a, b):
        return self.Or([self.z3.And(self.opw[a, w], self.opw[b, w]) for w in self.roles])

    def figure4(self) -> None:
        """Uniqueness, Consistency, Completion, Dependence, Capacity."""
        z3, s, graph, ops, ii, T, C = self.z3, self.s, self.graph, self.ops, self.ii, self.T, self.C
        names, copies, cycles, Or, at = self.names, self.copies, self.cycles, self.Or, self.at
        Implies, Not = z3.Implies, z3.Not
        op = self.op = {(n, i, t): z3.Bool(f"op[{n},{i},{t}]") for n in names for i in copies for t in cycles}
        for n in names:
            for i in copies:
                s.add(z3.PbEq([(op[n, i, t], 1) for t in cycles], 1))                      # Uniqueness
                for t in cycles:
                    if i:
                        s.add(Implies(op[n, 0, t], at(n, i, t + i * ii)))                # Consistency
                    if t + ops[n].cycles > T:
                        s.add(Not(op[n, i, t]))                                          # Completion
        for e in graph.edges:
            self.overdue("Figure 4")
            for i in range(C - e.distance):
                for t in cycles:
                    early = [op[e.dst, i + e.distance, t2] for t2 in range(min(t + e.delay, T + 1))]
                    if early:
                        s.add(Implies(op[e.src, i, t], Not(Or(early))))                  # Dependence
        rows = {n: ops[n].reservation() for n in names}
        for unit, cap in sorted(self.machine.units.items()):
            for t in cycles:
                terms = [(op[n, i, t - c], k) for n in names for i in copies
                         for c, row in enumerate(rows[n]) if t - c >= 0
                         for u, k in row if u == unit]
                if sum(k for _, k in terms) > cap:
                    s.add(z3.PbLe(terms, cap))                                            # Capacity
        self.overdue("Figure 4")

    def warp_variables(self) -> None:
        """Figure 6's warp variables (needed by the register limit): Warp Uniqueness, Variable Latency."""
        z3, s, ops, names, roles = self.z3, self.s, self.ops, self.names, self.roles
        opw = self.opw = {(n, w): z3.Bool(f"opw[{n},{w}]") for n in names for w in roles}
        for n in names:
            s.add(z3.PbEq([(opw[n, w], 1) for w in roles], 1))                           # Warp Uniqueness
        if any(o.variable_latency for o in ops.values()):
            for n in names:
                s.add(opw[n, self.W - 1] == z3.BoolVal(ops[n].variable_latency))           # Variable Latency

    def liveness(self) -> None:
        """Figure 5.  Live variables run to H = max(T, C*ii) so that the whole steady-state window [.., C*ii)
        has them; no op issues in (T, H].  Capacities are enforced for t < C*ii: the epilogue after it adds
        nothing (module docstring)."""
        z3, s, graph, ops, C, ii, at, Or = self.z3, self.s, self.graph, self.ops, self.C, self.ii, self.at, self.Or
        And, Not, Implies, copies = z3.And, z3.Not, z3.Implies, self.copies
        H = max(self.T, C * ii)
        holders = self.holders = [n for n in self.names if graph.out_edges(n)
                                  and (ops[n].regs or ops[n].smem or ops[n].tmem)]
        live = self.live = {(n, i, t): z3.Bool(f"live[{n},{i},{t}]") for n in holders for i in copies
                            for t in range(H + 1)}
        for n in holders:
            outs = graph.out_edges(n)
            for i in copies:
                s.add(live[n, i, H] == z3.BoolVal(any(i + e.distance >= C for e in outs)))  # Init
                for t in range(H, 0, -1):
                    here = at(n, i, t)
                    # A use in the cycle of the definition itself (delay 0) reads nothing older.
                    used = And(Or([at(e.dst, i + e.distance, t) for e in outs]), Not(here))
                    s.add(Implies(And(live[n, i, t], here), Not(live[n, i, t - 1])))      # LiveProp-1
                    s.add(Implies(And(live[n, i, t], Not(here)), live[n, i, t - 1]))      # LiveProp-2
                    s.add(Implies(And(Not(live[n, i, t]), used), live[n, i, t - 1]))      # DeadProp-1
                    s.add(Implies(And(Not(live[n, i, t]), Not(used)), Not(live[n, i, t - 1])))  # DeadProp-2
        for field, cap in (("smem", self.machine.smem_bytes), ("tmem", self.machine.tmem_bytes)):
            users = [n for n in holders if getattr(ops[n], field)]
            if sum(getattr(ops[n], field) for n in users) * C <= cap:
                continue  # can never be exceeded: skip the (true) constraint
            for t in range(C * ii):
                s.add(z3.PbLe([(live[n, i, t], getattr(ops[n], field)) for n in users for i in copies],
                              cap))                                                       # Memory Capacity
        self.overdue("Figure 5")

    def figure6(self) -> None:
        """Register Limit, Cross-Warp Spills, Concurrency."""
        z3, s, graph, ops, machine, op = self.z3, self.s, self.graph, self.ops, self.machine, self.op
        And, Not, Implies, Or, T, C = z3.And, z3.Not, z3.Implies, self.Or, self.T, self.C
        copies, cycles, live, opw = self.copies, self.cycles, self.live, self.opw
        reg_users = [n for n in self.holders if ops[n].regs]
        if sum(ops[n].regs for n in reg_users) * C > machine.regs_per_thread_max:
            for t in range(C * self.ii):
                for w in self.roles:
                    s.add(z3.PbLe([(And(live[n, i, t], opw[n, w]), ops[n].regs)
                                   for n in reg_users for i in copies],
                                  machine.regs_per_thread_max))                           # Register Limit
        for e in graph.edges:
            cost = machine.spill_of(ops[e.src])
            if not cost or e.src == e.dst:
                continue
            self.overdue("Figure 6")
            apart = Not(self.together(e.src, e.dst))
            for i in range(C - e.distance):
                for t in cycles:
                    late = [op[e.dst, i + e.distance, t + e.delay + k] for k in range(cost)
                            if t + e.delay + k <= T]
                    if late:
                        s.add(Implies(And(op[e.src, i, t], apart), Not(Or(late))))       # Cross-Warp Spills
        for v in sorted({e.dst for e in graph.edges if e.blocking}, key=graph.index):
            for o in self.names:
                if o == v or not ops[o].cycles:
                    continue
                self.overdue("Figure 6")
                same = self.together(v, o)
                for i in copies:
                    for t in cycles:
                        busy = [op[o, i2, t2] for i2 in copies
                                for t2 in range(max(0, t - ops[o].cycles + 1), t + 1)]
                        s.add(Implies(And(op[v, i, t], same), Not(Or(busy))))             # Concurrency
        self.overdue("Figure 6")

    def solve(self):
        """(times, warps) of z3's model, None when unsat; SolverTimeoutError when z3 answers unknown."""
        z3, s = self.z3, self.s
        ms = self.deadline.z3_ms()
        s.set("timeout", ms)
        t0 = _time.monotonic()
        result = s.check()
        if result == z3.unknown:
            reason = s.reason_unknown()
            # KeyboardInterrupt on Ctrl-C
            z3_unknown(reason, seconds=_time.monotonic() - t0, allowed=ms / 1000 if ms else None)
            raise SolverTimeoutError(f"paper SMT for '{self.graph.name}' at ii={self.ii}, L={self.length}: z3 "
                                     f"answered unknown ({reason}) within {self.deadline.limit:.1f} s: "
                                     "raise the time limit")
        if result == z3.unsat:
            return None
        model = s.model()
        times = {n: next(t for t in self.cycles if z3.is_true(model.eval(self.op[n, 0, t]))) for n in self.names}
        warps = {n: next(w for w in self.roles if z3.is_true(model.eval(self.opw[n, w]))) for n in self.names}
        return times, _canonical_warps(warps, self.graph, self.W)


def _canonical_warps(warps: dict[str, int], graph, n_warps: int) -> dict[str, int]:
    """Rename warps by first use in graph order, the variable-latency warp kept last.

    A permutation of warp ids preserves every rule (they only compare warps
    for equality), so this only makes equal answers print the same."""
    vl = {warps[op.name] for op in graph.ops if op.variable_latency}
    rename = {w: n_warps - 1 for w in vl}
    for n in graph.names:
        if warps[n] not in rename:
            rename[warps[n]] = len(rename) - len(vl)
    return {n: rename[w] for n, w in warps.items()}


def paper_search(graph, machine, *, time_limit: float = 300.0, max_ii: int | None = None,
                 deadline: Deadline | None = None):
    """Algorithm 1 of the Twill paper; return a Schedule (``optimal=False``).

    ::

        for ii = max(ResMII, RecMII), ...:         # the paper starts at 1; below this
            M = modulo_schedule_ilp(G, ii)          #   bound the ILP is infeasible anyway
            if M is None: continue                  # attempt (ii, None, 'infeasible')
            L = Len(M)
            while ceil(L/ii) == ceil(Len(M)/ii):
                if paper_smt_solve(G, ii, L) is sat: return it
                L += 1                              # attempt (ii, L, 'unsat')

    The graph's cycles are used as they are: for the problem ``solve`` sees,
    pass ``tvm_twill.solvers.prepare(graph, machine).graph`` (normalized, with
    streaming loads at zero latency).  The paper's loop has no end; this one
    stops after ``max_ii`` (default ``default_max_ii``: one iteration runs
    alone) with InfeasibleError.  ``optimal`` is False: when every L with the same
    ceil(L/ii) is unsat, the search moves on to ii+1 without proving that no
    longer L works at ii, so a smaller ii is not ruled out.  ``lower_bound.ii``
    is the first ii whose modulo ILP is feasible (every smaller one is proved
    impossible: an ii equal to it is optimal, ``Schedule.ii_optimal``; ``tie_breaks``: length
    and registers not minimized), verified by the independent checker.  Raises SolverTimeoutError (with the attempts so far) when ``time_limit`` seconds
    (or the ``limits.Deadline`` ``deadline``) run out.
    """
    from ..model import Attempt, LowerBound, get_machine, make_schedule, rec_mii, res_mii, verify
    from .search import default_max_ii, untried_tie_breaks

    machine = get_machine(machine)
    graph.validate_for(machine)
    start = _time.monotonic()
    deadline = Deadline.of(deadline, time_limit)
    attempts: list = []
    res, rec = res_mii(graph, machine), rec_mii(graph)
    cycles = {op.name: op.cycles for op in graph.ops}
    lower = None
    first_ii = max(res, rec)
    last_ii = max(first_ii, max_ii or default_max_ii(graph, machine))
    for ii in range(first_ii, last_ii + 1):
        t0 = _time.monotonic()
        try:
            M = modulo_schedule_ilp(graph, machine, ii, deadline=deadline)
        except SolverTimeoutError:
            attempts.append(Attempt(ii, None, "timeout", round(_time.monotonic() - t0, 3), solver=SOLVER))
            raise SolverTimeoutError(f"paper search for '{graph.name}' ran out of time "
                                     f"({deadline.limit:.0f} s) in the modulo ILP at ii={ii}: raise the time "
                                     "limit", attempts) from None
        if M is None:
            # The modulo ILP proved ii impossible (spill costs 0: a bound for any warps).
            attempts.append(Attempt(ii, None, "infeasible", round(_time.monotonic() - t0, 3),
                                    reason=f"{Family.DEPENDENCE} + {Family.RESOURCES}", solver=SOLVER))
            continue
        lower = lower or LowerBound(ii=ii, resource=res, recurrence=rec)
        first = max(1, max(M[n] + cycles[n] for n in graph.names))
        length = first
        while ceil(length / ii) == ceil(first / ii):
            t0 = _time.monotonic()
            try:
                found = paper_smt_solve(graph, machine, ii, length, deadline=deadline)
            except SolverTimeoutError:
                attempts.append(Attempt(ii, length, "timeout", round(_time.monotonic() - t0, 3), solver=SOLVER))
                raise SolverTimeoutError(f"paper search for '{graph.name}' ran out of time "
                                         f"({deadline.limit:.0f} s) at ii={ii}, L={length}: raise the time "
                                         "limit", attempts) from None
            seconds = round(_time.monotonic() - t0, 3)
            if found is None:
                attempts.append(Attempt(ii, length, "unsat", seconds, solver=SOLVER))
                length += 1
                continue
            attempts.append(Attempt(ii, length, "sat", seconds, solver=SOLVER))
            times, warps = found
            schedule = make_schedule(graph, machine.name, ii, times, warps, cycles, optimal=False, lower_bound=lower,
                                     attempts=attempts, solve_seconds=round(_time.monotonic() - start, 3),
                                     tie_breaks=untried_tie_breaks(graph, ii, times, warps))
            verify(schedule, graph, machine)
            return schedule
    raise InfeasibleError(f"paper search found no schedule for '{graph.name}' on '{machine.name}' with ii in "
                          f"[{first_ii}, {last_ii}] (Algorithm 1 tries only the lengths L with "
                          "ceil(L/ii) = ceil(Len(M)/ii), so this is no proof)", attempts=attempts)
