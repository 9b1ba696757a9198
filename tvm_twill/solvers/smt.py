"""Joint SWP + WS at a fixed ii as one z3 problem (the default encoding).

The paper (Figures 4-6) encodes the straight-line program with a boolean
``op[v, i, t]`` per op, copy and cycle, so its size grows with the cycle
counts; ``paper_smt.py`` keeps that encoding for comparison.  Here ii is a
constant and every quantity is a linear integer term whose count does not
depend on the magnitude of the cycle counts:

* ``t_v = ii*q_v + r_v`` with ``0 <= r_v < ii``: issue time, stage, slot.
* ``w_v``: the warp role, as one-hot booleans.  Variable-latency ops go to role ``W-1`` and no
  other op does (rule 3); the other roles are symmetric, so they are filled
  in first-fit order (op k uses a role at most one above those before it).
* Dependences (rule 1): ``t_v + delta*ii >= t_u + d + (w_u != w_v ? spill_u : 0)``.
* Resources (rule 2): on a unit of capacity 1 that ops occupy for
  contiguous cycles, two ops u, v do not collide iff the slot distance
  ``m = (r_v - r_u) mod ii`` satisfies ``c_u <= m <= ii - c_v``; other units
  use one pseudo-boolean sum per slot over one-hot slot indicators.
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

Each constraint family sits behind an assumption literal, so an unsat
answer comes with the families that rule ii out (an unsat core).
"""
from __future__ import annotations

import time as _time
from dataclasses import dataclass

from ..errors import SolverUnavailableError

FAMILIES = ("dependence", "resources", "variable latency", "blocking sync", "registers", "memory")


def _z3():
    try:
        import z3
    except ImportError:  # pragma: no cover - exercised only without z3
        raise SolverUnavailableError("the default solver needs z3-solver: pip install z3-solver==5.4.0.0") from None
    return z3


@dataclass(frozen=True)
class SmtResult:
    """Outcome of one query: ``status`` is sat/unsat/timeout."""

    status: str
    times: dict | None = None
    warps: dict | None = None
    core: tuple = ()
    seconds: float = 0.0
    length: int | None = None
    reg_peak: int | None = None


def time_bound(graph, machine, ii: int) -> int:
    """Largest issue time any valid schedule needs (see the module docstring)."""
    n = len(graph.ops)
    dmax = max((e.distance for e in graph.edges), default=0)
    spill = {op.name: machine.spill_cost if op.spill_cost is None else op.spill_cost for op in graph.ops}
    dd = max((e.delay + spill[e.src] for e in graph.edges), default=0)
    return ii + (n - 1) * max(dmax * ii, dd + ii - 1)


class JointProblem:
    """The z3 model of one (graph, machine, ii); query it with ``solve``."""

    def __init__(self, graph, machine, ii: int, *, cross_warp_sync: bool = False):
        z3 = _z3()
        self.z3, self.graph, self.machine, self.ii = z3, graph, machine, ii
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
        self.solver.set("core.minimize", True)
        self.lits = {f: self.Bool(f"family:{f}") for f in FAMILIES}
        ops = graph.ops
        W = machine.warp_groups
        Int = self.Int
        self.t = {o.name: Int(f"t:{o.name}") for o in ops}
        self.r = {o.name: Int(f"r:{o.name}") for o in ops}
        self.q = {o.name: Int(f"q:{o.name}") for o in ops}
        # Warp roles are one-hot booleans: "same warp" is then a boolean that the
        # SAT core reasons about, instead of an integer disequality to split on.
        self.on = {o.name: [self.Bool(f"w:{o.name}={k}") for k in range(W)] for o in ops}
        self.w = {o.name: z3.Sum([z3.If(b, k, 0) for k, b in enumerate(self.on[o.name])]) for o in ops}
        self._same = {}
        self.length = self.Int("length")
        self.reg_peak = self.Int("reg_peak")
        s = self.solver
        self.bound = bound = time_bound(graph, machine, ii)
        for o in ops:
            n = o.name
            s.add(self.t[n] == ii * self.q[n] + self.r[n], self.r[n] >= 0, self.r[n] < ii,
                  self.q[n] >= 0, self.t[n] <= bound, self.length >= self.t[n] + o.cycles,
                  z3.PbEq([(b, 1) for b in self.on[n]], 1))
        # Shifting every time by ii keeps a schedule valid: let one op start in stage 0.
        s.add(z3.Or([self.q[o.name] == 0 for o in ops]))
        self._warps(W)
        self._dependences(cross_warp_sync)
        self._resources()
        self._blocking(cross_warp_sync)
        self._pressure()

    # -- helpers -------------------------------------------------------------
    def _guard(self, family: str, *constraints):
        for c in constraints:
            self.solver.add(self.z3.Implies(self.lits[family], c))

    def same(self, a: str, b: str):
        """Both ops on one warp role (cached boolean)."""
        key = (a, b) if a <= b else (b, a)
        if key not in self._same:
            self._same[key] = self.z3.Or([self.z3.And(x, y) for x, y in zip(self.on[a], self.on[b])])
        return self._same[key]

    def _mod(self, a: str, b: str):
        """(r_a - r_b) mod ii as a linear term."""
        d = self.r[a] - self.r[b]
        return self.z3.If(d >= 0, d, d + self.ii)

    def _spill(self, name: str) -> int:
        op = self.graph.op(name)
        return self.machine.spill_cost if op.spill_cost is None else op.spill_cost

    # -- families ------------------------------------------------------------
    def _warps(self, W: int) -> None:
        z3 = self.z3
        vl = [o.name for o in self.graph.ops if o.variable_latency]
        fixed = [o.name for o in self.graph.ops if not o.variable_latency]
        if vl:
            if W < 2:
                self._guard("variable latency", self.false)
            for n in vl:
                self._guard("variable latency", self.on[n][W - 1])
            for n in fixed:
                self._guard("variable latency", z3.Not(self.on[n][W - 1]))
        # First-fit symmetry breaking over the interchangeable fixed-latency
        # roles: op k takes role j > 0 only if an earlier op took role j - 1.
        for k, n in enumerate(fixed):
            for j in range(1, W - 1 if vl else W):
                earlier = [self.on[m][j - 1] for m in fixed[:k]]
                self.solver.add(z3.Implies(self.on[n][j], z3.Or(earlier) if earlier else self.false))

    def _dependences(self, cross_warp_sync: bool) -> None:
        z3, ii = self.z3, self.ii
        for e in self.graph.edges:
            sp = self._spill(e.src)
            cross = z3.Not(self.same(e.src, e.dst))
            rhs = self.t[e.src] + e.delay + (z3.If(cross, sp, 0) if sp else 0)
            self._guard("dependence", self.t[e.dst] + e.distance * ii >= rhs)

    def _resources(self) -> None:
        z3, ii = self.z3, self.ii
        for unit, cap in self.machine.units.items():
            users = [o for o in self.graph.ops if o.usage(unit) > 0]
            simple = cap == 1 and all(o.rrt is None and o.unit == unit for o in users)
            if simple:
                for o in users:
                    if o.cycles > ii:
                        self._guard("resources", self.false)
                for i, u in enumerate(users):
                    for v in users[i + 1:]:
                        m = self._mod(v.name, u.name)
                        self._guard("resources", m >= u.cycles, m <= ii - v.cycles)
                continue
            onehot = {o.name: [self.r[o.name] == k for k in range(ii)] for o in users}
            for rho in range(ii):
                terms = []
                for o in users:
                    for j, row in enumerate(o.reservation()):
                        k = dict(row).get(unit, 0)
                        if k:
                            terms.append((onehot[o.name][(rho - j) % ii], k))
                if terms:
                    self._guard("resources", z3.PbLe(terms, cap))

    def _blocking(self, cross_warp_sync: bool) -> None:
        z3, ii = self.z3, self.ii
        for e in self.graph.edges:
            if not (e.blocking or cross_warp_sync):
                continue
            cond = self.true if e.blocking else z3.Not(self.same(e.src, e.dst))
            v = e.dst
            for o in self.graph.ops:
                if o.name == v or o.cycles == 0:
                    continue
                same = self.same(o.name, v)
                if o.cycles >= ii:  # some instance of o always executes
                    self._guard("blocking sync", z3.Implies(z3.And(cond, same), False))
                else:
                    self._guard("blocking sync", z3.Implies(z3.And(cond, same),
                                                            self._mod(v, o.name) >= o.cycles))

    def _pressure(self) -> None:
        z3, ii, g = self.z3, self.ii, self.graph
        holders = [o for o in g.ops if g.out_edges(o.name) and (o.regs or o.smem or o.tmem)]
        dmax = max((e.distance for e in g.edges), default=0)
        count = {}
        for o in holders:
            n = o.name
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
        self._guard("registers", self.reg_peak <= limit)
        for u in holders:
            if not u.regs:
                continue
            terms = [z3.If(self.same(v.name, u.name), v.regs * live(v.name, u.name), 0)
                     for v in holders if v.regs]
            self._guard("registers", z3.Sum(terms) <= self.reg_peak)
        for field, cap in (("smem", self.machine.smem_bytes), ("tmem", self.machine.tmem_bytes)):
            users = [v for v in holders if getattr(v, field)]
            for u in users:
                self._guard("memory", z3.Sum([getattr(v, field) * live(v.name, u.name) for v in users]) <= cap)

    # -- queries -------------------------------------------------------------
    def solve(self, *, max_length: int | None = None, max_regs: int | None = None,
              min_time_sum: int | None = None, timeout: float = 10.0, rlimit: int = 0, families=FAMILIES) -> SmtResult:
        """Is there a schedule (of length <= max_length, per-warp register peak
        <= max_regs)?  ``families`` are enforced.  ``rlimit`` (0: none) caps z3's
        deterministic resource counter, so a capped query gives the same answer
        on every machine; its exhaustion reads as ``timeout``."""
        z3 = self.z3
        start = _time.perf_counter()
        self.solver.set("timeout", max(1, int(timeout * 1000)))
        self.solver.set("rlimit", rlimit)
        assumptions = [self.lits[f] for f in families]
        if max_length is not None:
            bound_lit = self.Bool(f"length<={max_length}")
            self.solver.add(z3.Implies(bound_lit, self.length <= max_length))
            assumptions.append(bound_lit)
        if min_time_sum is not None:
            late_lit = self.Bool(f"time_sum>={min_time_sum}")
            self.solver.add(z3.Implies(late_lit, z3.Sum(list(self.t.values())) >= min_time_sum))
            assumptions.append(late_lit)
        if max_regs is not None:
            regs_lit = self.Bool(f"reg_peak<={max_regs}")
            self.solver.add(z3.Implies(regs_lit, self.reg_peak <= max_regs))
            assumptions.append(regs_lit)
        res = self.solver.check(*assumptions)
        secs = _time.perf_counter() - start
        if res == z3.sat:
            m = self.solver.model()
            ev = lambda x: m.eval(x, model_completion=True).as_long()  # noqa: E731
            names = self.graph.names
            return SmtResult("sat", {n: ev(self.t[n]) for n in names}, {n: ev(self.w[n]) for n in names},
                             seconds=secs, length=ev(self.length), reg_peak=ev(self.reg_peak))
        if res == z3.unsat:
            names = {str(c) for c in self.solver.unsat_core()}
            core = tuple(f for f in FAMILIES if f"family:{f}" in names)
            core += tuple(x for x in ("length", "reg_peak") if any(c.startswith(x + "<=") for c in names))
            return SmtResult("unsat", core=core, seconds=secs)
        return SmtResult("timeout", seconds=secs)
