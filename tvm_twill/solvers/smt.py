"""Joint SWP + WS at a fixed ii as one z3 problem (the default encoding).

The paper (Figures 4-6) encodes the straight-line program with a boolean
``op[v, i, t]`` per op, copy and cycle, so its size grows with the cycle
counts; ``paper_smt.py`` keeps that encoding for comparison.  Here ii is a
constant and every quantity is a linear integer term whose count does not
depend on the magnitude of the cycle counts:

* ``t_v = ii*q_v + r_v`` with ``0 <= r_v < ii``: issue time, stage, slot.
* ``w_v``: the warp role, as one-hot booleans over the roles a schedule can
  use (``symmetry.role_ids``: at most one per op, whatever the machine's
  count).  Variable-latency ops go to role ``W-1`` and no other op does
  (rule 3); the other roles are symmetric, so they are filled in first-fit
  order (op k uses a role at most one above those before it).
* Dependences (rule 1): ``t_v + delta*ii >= t_u + d + (w_u != w_v ? spill_u : 0)``.
* Resources (rule 2): on a unit of capacity 1 that ops occupy for
  contiguous cycles, two ops u, v do not collide iff the slot distance
  ``m = (r_v - r_u) mod ii`` satisfies ``c_u <= m <= ii - c_v``; other units
  are exact at the starts of the occupied intervals: an op (or a run of equal
  rows of its reservation table) occupying k units for L cycles from offset j
  adds ``k * (L // ii + [(rho - r_v - j) mod ii < L mod ii])`` at slot rho, a
  step function that rises only at interval starts, so one sum per interval
  start (O(s^2) terms for s intervals) replaces one sum per slot.  Nothing is
  built per cycle of an op or per slot of ii.
* Blocking (rule 4): for a blocking edge into v and an op o on v's warp,
  ``(r_v - r_o) mod ii >= c_o``: no instance of o executes when v issues.
* Registers / memory (rules 5, 6): the value of v is live over
  ``[t_v, e_v)`` with ``e_v >= t_c + delta*ii`` for every consumer (a larger
  e_v only adds pressure, so lower bounds suffice).  Writing
  ``e_v - t_v = ii*a_v + b_v``, at slot rho the number of live instances is
  ``a_v + [(rho - r_v) mod ii < b_v]``.  The pressure of a warp is a step
  function of rho that rises only where some interval starts, so checking
  the n start slots ``rho = r_u`` is exact: O(n^2) terms instead of O(ii*n).
* Times are bounded by ``T(ii) = ii + (n-1) * max(dmax*ii, D + ii - 1)``
  (``dmax`` the largest distance, ``D`` the largest delay + spill).  Any
  valid schedule can be compressed to this span: a gap between consecutive
  issue times larger than both ``dmax*ii`` and ``D + ii - 1`` separates the
  ops into an early and a late set with edges only from early to late, and
  moving the late set earlier by a multiple of ii keeps every slot, keeps
  those edges satisfied and only shortens live ranges.  So the bound loses
  no schedule, and unsat at ii proves ii impossible.

Each constraint family (``families.Family``) sits behind an assumption
literal, so an unsat answer comes with the families that rule ii out (an
unsat core).  The core is minimized here, not by z3's ``core.minimize``
(which ran unbounded after the answer): deletion-based, each trial bounded
by ``limits.CORE_RLIMIT`` (deterministic) and by the caller's deadline.
"""
from __future__ import annotations

import time as _time
from dataclasses import dataclass

from .backends import load_z3
from ..model.families import Bound, Family
from .limits import CORE_RLIMIT, Deadline, z3_unknown
from .symmetry import role_ids

#: ``Attempt.solver`` of the schedules and refutations of this encoding.
SOLVER = "smt"
#: The constraint families, in report order (``Family.ALL``).
FAMILIES = Family.ALL
#: While building, the deadline is read every this many steps of a family's loops (``JointProblem._often``).
TICK_EVERY = 64


@dataclass(frozen=True)
class SmtResult:
    """Outcome of one query.

    ``status``: ``sat``, ``unsat``, ``timeout`` (the wall-clock limit) or
    ``budget`` (the query's rlimit, deterministic).  ``seconds``: wall time
    of the query including its core minimization.  ``unsat_proven``: a
    ``timeout`` that came after z3 proved unsat, while minimizing the core
    (``core`` then holds the unminimized core).  ``rlimit_used``: z3's
    resource count spent by the query (deterministic).
    """

    status: str
    times: dict | None = None
    warps: dict | None = None
    core: tuple = ()
    seconds: float = 0.0
    length: int | None = None
    reg_peak: int | None = None
    unsat_proven: bool = False
    rlimit_used: int = 0


def time_bound(graph, machine, ii: int) -> int:
    """Largest issue time any valid schedule needs (see the module docstring)."""
    n = len(graph.ops)
    dmax = max((e.distance for e in graph.edges), default=0)
    spill = {op.name: machine.spill_of(op) for op in graph.ops}
    dd = max((e.delay + spill[e.src] for e in graph.edges), default=0)
    return ii + (n - 1) * max(dmax * ii, dd + ii - 1)


def segments(op, unit: str) -> list:
    """``[(offset, length, k)]``: the runs of cycles in which ``op`` holds k > 0
    instances of ``unit``.  Without an explicit table that is one run, computed
    without touching the cycles one by one."""
    if op.rrt is None:
        return [(0, op.cycles, 1)] if op.unit == unit and op.cycles > 0 else []
    runs, start, cur = [], 0, 0
    for j, row in enumerate(op.rrt):
        k = sum(n for u, n in row if u == unit)
        if k != cur:
            if cur:
                runs.append((start, j - start, cur))
            start, cur = j, k
    if cur:
        runs.append((start, len(op.rrt) - start, cur))
    return runs


class JointProblem:
    """The z3 model of one (graph, machine, ii); query it with ``solve``.

    ``deadline`` (a ``limits.Deadline``) bounds building the model: past it,
    SolverTimeoutError.  ``order``: pairs (a, b) meaning time[a] <= time[b]
    (``symmetry.order_constraints``; unguarded: they remove symmetric
    schedules only, never the last of a class).
    """

    def __init__(self, graph, machine, ii: int, *, cross_warp_sync: bool = False,
                 deadline: Deadline | None = None, order=()):
        z3 = load_z3()
        self.z3, self.graph, self.machine, self.ii = z3, graph, machine, ii
        self.deadline, self._ticks = deadline, 0
        # A context of its own: z3's global context keeps state between problems,
        # which made repeated solves in one process return different (equally
        # optimal) schedules.  A fresh context makes every solve reproducible.
        self.ctx = ctx = z3.Context()
        self.Int = lambda name: z3.Int(name, ctx)
        self.Bool = lambda name: z3.Bool(name, ctx)
        self.false = z3.BoolVal(False, ctx)
        self.true = z3.BoolVal(True, ctx)
        self.solver = z3.Solver(ctx=ctx)
        self.solver.set("random_seed", 0)
        # Core minimization is ours (bounded, deterministic): z3's ran after the answer, unbounded.
        self.solver.set("core.minimize", False)
        self.lits = {f: self.Bool(f"family:{f}") for f in FAMILIES}
        ops = graph.ops
        W = machine.warp_groups
        # One boolean per role a schedule can use (at most one per op: roles are
        # interchangeable), never one per warp group of the machine.
        self.roles = roles = role_ids(graph, machine)
        Int = self.Int
        self.t = {o.name: Int(f"t:{o.name}") for o in ops}
        self.r = {o.name: Int(f"r:{o.name}") for o in ops}
        self.q = {o.name: Int(f"q:{o.name}") for o in ops}
        # Warp roles are one-hot booleans: "same warp" is then a boolean that the
        # SAT core reasons about, instead of an integer disequality to split on.
        self.on = {o.name: [self.Bool(f"w:{o.name}={k}") for k in roles] for o in ops}
        self.w = {o.name: z3.Sum([z3.If(b, k, 0) for k, b in zip(roles, self.on[o.name])]) for o in ops}
        self._same, self._mods = {}, {}
        self.length = self.Int("length")
        self.reg_peak = self.Int("reg_peak")
        s = self.solver
        self.bound = bound = time_bound(graph, machine, ii)
        for o in ops:
            n = o.name
            self._often()
            s.add(self.t[n] == ii * self.q[n] + self.r[n], self.r[n] >= 0, self.r[n] < ii,
                  self.q[n] >= 0, self.t[n] <= bound, self.length >= self.t[n] + o.cycles,
                  z3.PbEq([(b, 1) for b in self.on[n]], 1))
        # Shifting every time by ii keeps a schedule valid: let one op start in stage 0.
        s.add(z3.Or([self.q[o.name] == 0 for o in ops]))
        # (scale) Interchangeable copies in time order, ``order`` = symmetry.order_constraints:
        # it keeps one schedule of each class of symmetric ones, so it is not a family.
        for a, b in order:
            s.add(self.t[a] <= self.t[b])
        for build in (lambda: self._warps(W), lambda: self._dependences(cross_warp_sync), self._resources,
                      lambda: self._blocking(cross_warp_sync), self._pressure):
            self._tick()
            build()
        self._tick()

    # -- helpers -------------------------------------------------------------
    def _tick(self) -> None:
        """Raise SolverTimeoutError if the deadline passed while building."""
        if self.deadline is not None:
            self.deadline.check(f"while building the z3 model for ii={self.ii}")

    def _often(self) -> None:
        """``_tick`` at every ``TICK_EVERY``-th call: inside the loops of a family, whose constraints number
        O(ops^2) (a 1000-op graph: minutes of building), each call a few constraints."""
        self._ticks += 1
        if self._ticks % TICK_EVERY == 0:
            self._tick()

    def _guard(self, family: str, *constraints):
        for c in constraints:
            self.solver.add(self.z3.Implies(self.lits[family], c))

    def same(self, a: str, b: str):
        """Both ops on one warp role (cached boolean)."""
        key = (a, b) if a <= b else (b, a)
        if key not in self._same:
            self._same[key] = self.z3.Or([self.z3.And(x, y) for x, y in zip(self.on[a], self.on[b])])
        return self._same[key]

    def _mod(self, a: str, b: str, c: int = 0):
        """(r_a - r_b + c) mod ii as a linear term (any integer c; cached)."""
        key = (a, b, c % self.ii)
        if key not in self._mods:
            self._mods[key] = self._mod_term(a, b, c)
        return self._mods[key]

    def _mod_term(self, a: str, b: str, c: int):
        ii = self.ii
        d = self.r[a] - self.r[b] + (c % ii)  # in (-ii, 2*ii - 1)
        if c % ii == 0:
            return self.z3.If(d >= 0, d, d + ii)
        return self.z3.If(d < 0, d + ii, self.z3.If(d >= ii, d - ii, d))

    def _spill(self, name: str) -> int:
        op = self.graph.op(name)
        return self.machine.spill_of(op)

    # -- families ------------------------------------------------------------
    def _warps(self, W: int) -> None:
        z3 = self.z3
        vl = [o.name for o in self.graph.ops if o.variable_latency]
        fixed = [o.name for o in self.graph.ops if not o.variable_latency]
        last = len(self.roles) - 1  # the variable-latency role W - 1, when there are such ops
        if vl:
            if W < 2:
                self._guard(Family.VARIABLE_LATENCY, self.false)
            for n in vl:
                self._guard(Family.VARIABLE_LATENCY, self.on[n][last])
            for n in fixed:
                self._guard(Family.VARIABLE_LATENCY, z3.Not(self.on[n][last]))
        named = self.machine.roles
        for o in self.graph.ops:  # a named role issues only ops of its own width (Machine.role_takes)
            self._often()
            for j, k in enumerate(self.roles):
                if not self.machine.role_takes(k, o):
                    self.solver.add(z3.Not(self.on[o.name][j]))
        # First-fit symmetry breaking over the interchangeable fixed-latency
        # roles: op k takes role j > 0 only if an earlier op took role j - 1.
        for k, n in enumerate(fixed):
            self._often()
            for j in range(1, last if vl else last + 1):
                if named and named[self.roles[j - 1]].kind != named[self.roles[j]].kind:
                    continue  # two named roles of different kinds are not interchangeable
                earlier = [self.on[m][j - 1] for m in fixed[:k]]
                self.solver.add(z3.Implies(self.on[n][j], z3.Or(earlier) if earlier else self.false))

    def _dependences(self, cross_warp_sync: bool) -> None:
        z3, ii = self.z3, self.ii
        for e in self.graph.edges:
            self._often()
            sp = self._spill(e.src)
            cross = z3.Not(self.same(e.src, e.dst))
            rhs = self.t[e.src] + e.delay + (z3.If(cross, sp, 0) if sp else 0)
            self._guard(Family.DEPENDENCE, self.t[e.dst] + e.distance * ii >= rhs)

    def _resources(self) -> None:
        z3, ii = self.z3, self.ii
        for unit, cap in self.machine.units.items():
            self._tick()
            segs = [(o, seg) for o in self.graph.ops for seg in segments(o, unit)]
            if not segs:
                continue
            simple = cap == 1 and all(o.rrt is None for o, _ in segs)
            if simple:
                users = [o for o, _ in segs]
                for o in users:
                    if o.cycles > ii:
                        self._guard(Family.RESOURCES, self.false)
                for i, u in enumerate(users):
                    self._tick()   # up to one pair per op of the unit
                    for v in users[i + 1:]:
                        m = self._mod(v.name, u.name)
                        self._guard(Family.RESOURCES, m >= u.cycles, m <= ii - v.cycles)
                continue
            # Occupancy at slot rho: sum over runs of k * (L // ii + [(rho - r - j) mod ii < L mod ii]).
            base = sum(k * (length // ii) for _, (_, length, k) in segs)
            partial = [(o, (j, length % ii, k)) for o, (j, length, k) in segs if length % ii]
            if not partial:
                if base > cap:
                    self._guard(Family.RESOURCES, self.false)
                continue
            for u, (ju, _, _) in partial:  # the occupancy rises only at these starts
                self._tick()
                terms = [k * z3.If(self._mod(u.name, o.name, ju - j) < b, 1, 0) for o, (j, b, k) in partial]
                self._guard(Family.RESOURCES, z3.Sum(terms) + base <= cap)

    def _blocking(self, cross_warp_sync: bool) -> None:
        z3, ii = self.z3, self.ii
        for e in self.graph.edges:
            if not (e.blocking or cross_warp_sync):
                continue
            self._tick()
            cond = self.true if e.blocking else z3.Not(self.same(e.src, e.dst))
            v = e.dst
            for o in self.graph.ops:
                self._often()
                if o.name == v or o.cycles == 0:
                    continue
                same = self.same(o.name, v)
                if o.cycles >= ii:  # some instance of o always executes
                    self._guard(Family.BLOCKING_SYNC, z3.Implies(z3.And(cond, same), False))
                else:
                    self._guard(Family.BLOCKING_SYNC, z3.Implies(z3.And(cond, same),
                                                                 self._mod(v, o.name) >= o.cycles))

    def _pressure(self) -> None:
        z3, ii, g = self.z3, self.ii, self.graph
        holders = [o for o in g.ops if g.out_edges(o.name) and (o.regs or o.smem or o.tmem)]
        dmax = max((e.distance for e in g.edges), default=0)
        count = {}
        for o in holders:
            n = o.name
            self._often()
            e_, a, b = self.Int(f"end:{n}"), self.Int(f"a:{n}"), self.Int(f"b:{n}")
            s = self.solver
            for ed in g.out_edges(n):
                s.add(e_ >= self.t[ed.dst] + ed.distance * ii)
            # e_ never needs to exceed the latest consumer time the time bound allows;
            # bounding it (and so a) keeps z3's branch-and-bound small.
            s.add(e_ - self.t[n] == ii * a + b, a >= 0, b >= 0, b < ii, e_ <= self.bound + dmax * ii,
                  a <= (self.bound + dmax * ii) // ii)
            count[n] = (a, b)

        def live(v: str, at: str):
            a, b = count[v]
            return a + z3.If(self._mod(at, v) < b, 1, 0)

        limit = self.machine.regs_per_thread_max
        # reg_peak: the largest per-warp pressure, bounded by the limit; a
        # query may bound it further (the search's third tie-break).
        self.solver.add(self.reg_peak >= 0)
        self._guard(Family.REGISTERS, self.reg_peak <= limit)
        for u in holders:
            if not u.regs:
                continue
            self._tick()
            terms = [z3.If(self.same(v.name, u.name), v.regs * live(v.name, u.name), 0)
                     for v in holders if v.regs]
            self._guard(Family.REGISTERS, z3.Sum(terms) <= self.reg_peak)
            for j, k in enumerate(self.roles if self.machine.roles else ()):  # a named role's own budget
                if self.machine.role_regs(k) < limit:
                    self._guard(Family.REGISTERS, z3.Implies(self.on[u.name][j],
                                                             z3.Sum(terms) <= self.machine.role_regs(k)))
        for field, cap in (("smem", self.machine.smem_bytes), ("tmem", self.machine.tmem_bytes)):
            users = [v for v in holders if getattr(v, field)]
            for u in users:
                self._tick()
                self._guard(Family.MEMORY,
                            z3.Sum([getattr(v, field) * live(v.name, u.name) for v in users]) <= cap)

    # -- queries -------------------------------------------------------------
    def _rlimit_count(self) -> int:
        st = self.solver.statistics()
        try:
            return int(st.get_key_value("rlimit count"))
        except Exception:  # noqa: BLE001 - a statistic z3 did not report
            return 0

    def _check(self, assumptions, deadline: Deadline, rlimit: int):
        """One z3 check: "sat", "unsat", "timeout" or "budget" (KeyboardInterrupt on Ctrl-C)."""
        z3 = self.z3
        if deadline.expired():
            return "timeout"
        ms = deadline.z3_ms()
        self.solver.set("timeout", ms)
        self.solver.set("rlimit", rlimit)
        before, t0 = self._rlimit_count(), _time.perf_counter()
        res = self.solver.check(*assumptions)
        if res == z3.sat:
            return "sat"
        if res == z3.unsat:
            return "unsat"
        return z3_unknown(self.solver.reason_unknown(), rlimit=rlimit, rlimit_used=self._rlimit_count() - before,
                          seconds=_time.perf_counter() - t0, allowed=ms / 1000 if ms else None)

    def _minimize_core(self, core: list, deadline: Deadline, labels: dict) -> tuple[list, bool]:
        """Deletion-based minimization: drop an element when the rest is proven unsat
        within CORE_RLIMIT.  Returns (core, finished); finished is False when the
        deadline cut it (the core is then valid but maybe not minimal)."""
        order = [lit for lit in core if labels[lit.get_id()] in Bound.ALL] + \
                [lit for f in FAMILIES for lit in core if labels[lit.get_id()] == f]
        for lit in order:
            if len(core) <= 1:
                break
            if lit.get_id() not in {c.get_id() for c in core}:
                continue
            trial = [c for c in core if c.get_id() != lit.get_id()]
            status = self._check(trial, deadline, CORE_RLIMIT)
            if status == "timeout":
                return core, False
            if status == "unsat":
                kept = {c.get_id() for c in self.solver.unsat_core()}
                core = [c for c in trial if c.get_id() in kept]
        return core, True

    def solve(self, *, max_length: int | None = None, max_regs: int | None = None,
              min_time_sum: int | None = None, time_limit: float | None = None,
              deadline: Deadline | None = None, rlimit: int = 0, minimize_core: bool = True) -> SmtResult:
        """Is there a schedule (of length <= max_length, per-warp register peak
        <= max_regs, sum of issue times >= min_time_sum)?

        Wall clock: ``deadline`` and/or ``time_limit`` seconds (the sooner; none:
        unlimited); past it the result is ``timeout``.  ``rlimit`` (0: none) caps
        z3's deterministic resource counter, so a capped query gives the same
        answer on every machine; its exhaustion reads as ``budget``.  An unsat
        core is minimized (``minimize_core``) within ``limits.CORE_RLIMIT`` per
        trial.  Ctrl-C while z3 runs raises KeyboardInterrupt.
        """
        z3 = self.z3
        start = _time.perf_counter()
        dl = deadline if deadline is not None else Deadline(time_limit)
        if deadline is not None and time_limit is not None and time_limit < deadline.left():
            dl = Deadline(time_limit)
        assumptions = [self.lits[f] for f in FAMILIES]
        labels = {lit.get_id(): f for f, lit in self.lits.items()}
        extra = []
        if max_length is not None:
            extra.append((Bound.LENGTH, f"{Bound.LENGTH}<={max_length}", self.length <= max_length))
        if min_time_sum is not None:
            extra.append((Bound.TIME_SUM, f"{Bound.TIME_SUM}>={min_time_sum}",
                          z3.Sum(list(self.t.values())) >= min_time_sum))
        if max_regs is not None:
            extra.append((Bound.REG_PEAK, f"{Bound.REG_PEAK}<={max_regs}", self.reg_peak <= max_regs))
        for label, name, constraint in extra:
            lit = self.Bool(name)
            self.solver.add(z3.Implies(lit, constraint))
            assumptions.append(lit)
            labels[lit.get_id()] = label
        before = self._rlimit_count()
        status = self._check(assumptions, dl, rlimit)

        def result(st, **kw):
            return SmtResult(st, seconds=_time.perf_counter() - start,
                             rlimit_used=max(0, self._rlimit_count() - before), **kw)

        if status == "sat":
            m = self.solver.model()
            ev = lambda x: m.eval(x, model_completion=True).as_long()  # noqa: E731
            names = self.graph.names
            return result("sat", times={n: ev(self.t[n]) for n in names}, warps={n: ev(self.w[n]) for n in names},
                          length=ev(self.length), reg_peak=ev(self.reg_peak))
        if status != "unsat":
            return result(status)
        wanted = {c.get_id() for c in self.solver.unsat_core()}
        core = [lit for lit in assumptions if lit.get_id() in wanted]
        finished = True
        if minimize_core:
            core, finished = self._minimize_core(core, dl, labels)
        names = {labels[c.get_id()] for c in core}
        named = tuple(f for f in FAMILIES if f in names) + tuple(b for b in Bound.ALL if b in names)
        if not finished:
            return result("timeout", core=named, unsat_proven=True)
        return result("unsat", core=named)
