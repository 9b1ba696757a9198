"""Optimal modulo scheduling at a fixed ii as an integer LP (pulp + CBC).

This is the "Optimal-Modulo-Schedule" step of Algorithm 1 in the Twill paper
(section 4, after Stoutchinin and Eichenberger et al.): dependences and modulo
resource capacity only.  Warps play no part, so every op may share a warp and
the cross-warp spill cost is 0; registers, memory and blocking sync are the
joint SMT's business (``paper_smt``).

Encoding, for each op v (n ops, ``ii`` slots)::

    x[v,r] in {0,1}, r in [0, ii)      sum_r x[v,r] = 1          (issue slot, one-hot)
    k[v]   integer >= 0                                           (stage)
    time[v] = ii*k[v] + sum_r r*x[v,r] <= max_time
    time[dst] + distance*ii >= time[src] + delay                  (every edge)
    sum_{v,j} rrt[v][j][f] * x[v,(r-j) mod ii] <= cap(f)          (every unit f, slot r)
    L >= time[v] + cycles[v]                                      (schedule length)

The resource rows are rule 2 of ``docs/formats.md`` verbatim: row j of
v's reservation table lands on slot (time[v] + j) mod ii, which is
(r_v + j) mod ii because ii*k[v] vanishes mod ii.  A run of equal rows of L
cycles is written as L // ii (every slot, since sum_r x[v,r] = 1) plus one
term per remaining cycle, so nothing is built per cycle beyond ii.

Size.  The model is time-indexed (a variable per op and slot of ii), so it
is refused, with ``InputError``, past ``MAX_SLOT_VARIABLES`` slot variables
or ``MAX_RESOURCE_TERMS`` resource terms: normalize the costs first (the
default solver, ``smt``, does not depend on magnitudes).

Objective, lexicographic and solved in two CBC runs so that no big-M weight
can blur it: first minimize L; then, with L fixed at its optimum, minimize
sum(time) (as-soon-as-possible among the shortest schedules).  Ties left after
that are broken by CBC itself, which is deterministic here: its serial search
with fixed options and its default seed.

Default ``max_time`` (no optimal schedule is cut off).  Fix the slots r_v of an
optimal schedule.  The stages that satisfy the dependences are then the
solutions of the difference constraints
``k[dst] - k[src] >= w_e = ceil((delay + r_src - r_dst) / ii) - distance``,
and the least solution (longest paths from a virtual source, k >= 0) is
pointwise smallest, so it is at least as good in L and in sum(time): an
optimal schedule may be assumed to use it.  A feasible system has no positive
cycle, so its longest paths are simple and
``k[v] <= K = sum_e max(0, ceil((delay + ii - 1) / ii) - distance)``, hence
``time[v] <= ii*K + ii - 1``.  That is the default bound.
"""
from __future__ import annotations

import warnings
from math import ceil

from ..errors import InputError, SolverTimeoutError
from .backends import load_pulp
from .limits import Deadline

#: CBC's outcomes as this module reports them.
OPTIMAL, INFEASIBLE = "optimal", "infeasible"
#: The largest model built: ops x ii one-hot slot variables, and terms of the
#: resource rows (ii rows per unit, one term per op cycle that does not fill
#: a whole ii).  Past either the problem is refused with InputError (CBC would
#: not answer such a model within any time limit anyway).
MAX_SLOT_VARIABLES = 100_000
MAX_RESOURCE_TERMS = 2_000_000


def solve_cbc(prob, deadline: Deadline, what: str) -> str:
    """Run CBC on ``prob`` with fixed options until ``deadline``; return OPTIMAL or INFEASIBLE.

    Raise SolverTimeoutError when CBC stops before it proved either (with or
    without an incumbent: an unproven answer would make results depend on
    machine speed)."""
    pulp = load_pulp(what)
    if deadline.expired():
        raise SolverTimeoutError(f"{what}: no time left (time limit {deadline.limit:g} s reached before CBC "
                                 "started): raise the time limit")
    time_limit = deadline.left()
    with warnings.catch_warnings():
        # The CBC binary bundled with the pinned pulp is the solver we test against;
        # pulp 3.3 warns that pulp 4 will ship it separately (pulp[cbc]).
        warnings.simplefilter("ignore", DeprecationWarning)
        # CBC's default serial search with fixed options is reproducible, tie-breaks
        # included.  No "-threads 1": with it the bundled binary stalled for 10 s in
        # about 1 run in 1000 on a loaded machine (none in 5000 runs without).
        cbc = pulp.PULP_CBC_CMD(msg=False, timeLimit=None if time_limit == float("inf") else time_limit)
    status = prob.solve(cbc)
    if status == pulp.LpStatusInfeasible:
        return INFEASIBLE
    if status == pulp.LpStatusOptimal and prob.sol_status == pulp.LpSolutionOptimal:
        return OPTIMAL
    raise SolverTimeoutError(f"{what}: CBC stopped after {time_limit:.1f} s without proving optimality "
                             f"(status '{pulp.LpStatus[status]}'): raise the time limit")


def _check_size(graph, machine, ii: int) -> None:
    """Refuse (InputError, one line) a model past ``MAX_SLOT_VARIABLES`` or ``MAX_RESOURCE_TERMS``."""
    slots = len(graph.ops) * ii
    terms = ii * sum(length % ii for op in graph.ops for _, length, row in op.reservation_runs() for _ in row)
    if slots > MAX_SLOT_VARIABLES or terms > MAX_RESOURCE_TERMS:
        raise InputError(f"the modulo ILP of '{graph.name}' at ii={ii} would have {slots} slot variables and "
                         f"{terms} resource terms (at most {MAX_SLOT_VARIABLES} and {MAX_RESOURCE_TERMS}): it has "
                         "a variable per op and slot of ii; normalize the costs or use the default solver")


def default_max_time(graph, ii: int) -> int:
    """``ii*K + ii - 1`` with K = sum_e max(0, ceil((delay + ii - 1)/ii) - distance): an
    upper bound on the issue times of some optimal schedule (module docstring)."""
    k = sum(max(0, ceil((e.delay + ii - 1) / ii) - e.distance) for e in graph.edges)
    return ii * k + ii - 1


def _resource_rows(pulp, prob, x, graph, machine, ii: int, tick) -> bool:
    """Add rule 2's rows, one per unit and slot of ii (``tick(r)`` at each); False when a unit's whole runs
    alone overload every slot (no row is needed: infeasible)."""
    names = graph.names
    for unit, cap in sorted(machine.units.items()):
        users = [(i, off, length, k) for i, n in enumerate(names)
                 for off, length, row in graph.op(n).reservation_runs() for u, k in row if u == unit and k]
        if not users:
            continue
        # A run of L cycles covers every slot L // ii times (sum_r x = 1) and the
        # slots of its first L mod ii cycles once more: no term per cycle.
        base = sum(k * (length // ii) for _, _, length, k in users)
        if base > cap:
            return False
        for r in range(ii):
            tick(r)
            terms = [(k, x[i, (r - j) % ii]) for i, off, length, k in users for j in range(off, off + length % ii)]
            if terms:
                prob += pulp.lpSum(c * var for c, var in terms) <= cap - base, f"res_{unit}_{r}"
    return True


def modulo_schedule_ilp(graph, machine, ii: int, *, time_limit: float = 10.0,
                        max_time: int | None = None, deadline: Deadline | None = None) -> dict[str, int] | None:
    """Issue times of a modulo schedule at ``ii`` of minimum length, or None.

    Parameters
    ----------
    graph, machine
        The dependence graph (its cycles used as they are) and a Machine or a
        built-in machine name.
    ii
        The initiation interval, an integer >= 1.
    time_limit
        Seconds for both CBC runs together.
    deadline
        A ``limits.Deadline`` to use instead of ``time_limit``.
    max_time
        Largest issue time allowed; default ``default_max_time(graph, ii)``,
        which never cuts off an optimal schedule.  With a smaller bound, None
        means "none with times <= max_time".

    Returns
    -------
    ``{op: time}`` minimizing L = max(time + cycles), then sum(time); None
    when no schedule satisfies the dependences and modulo resource capacity at
    this ii (proved infeasible).  Raises SolverTimeoutError when CBC runs out
    of time first, so None always means a proof.
    """
    from ..model import get_machine

    if isinstance(ii, bool) or not isinstance(ii, int) or ii < 1:
        raise InputError(f"ii must be an integer >= 1, got {ii!r}")
    machine = get_machine(machine)
    graph.validate_for(machine)
    if max_time is None:
        max_time = default_max_time(graph, ii)
    elif isinstance(max_time, bool) or not isinstance(max_time, int) or max_time < 0:
        raise InputError(f"max_time must be an integer >= 0, got {max_time!r}")
    _check_size(graph, machine, ii)
    pulp = load_pulp("solver 'ilp'")
    deadline = Deadline.of(deadline, time_limit)
    what = f"modulo schedule of '{graph.name}' at ii={ii}"

    def tick(i: int) -> None:   # building reads the deadline too: up to MAX_RESOURCE_TERMS terms take seconds
        if i and i % 64 == 0:
            deadline.check(f"while building the {what}")

    prob = pulp.LpProblem("modulo_schedule", pulp.LpMinimize)
    names = graph.names
    x = {(i, r): prob.add_variable(f"x_{i}_{r}", cat="Binary") for i in range(len(names)) for r in range(ii)}
    k = {i: prob.add_variable(f"k_{i}", lowBound=0, upBound=max_time // ii, cat="Integer")
         for i in range(len(names))}
    length = prob.add_variable("L", lowBound=0, cat="Integer")
    time = {}
    for i, n in enumerate(names):
        tick(i)
        prob += pulp.lpSum(x[i, r] for r in range(ii)) == 1, f"slot_{i}"
        time[n] = ii * k[i] + pulp.lpSum(r * x[i, r] for r in range(ii))
        prob += time[n] <= max_time, f"horizon_{i}"
        prob += length >= time[n] + graph.op(n).cycles, f"length_{i}"
    for j, e in enumerate(graph.edges):
        tick(j)
        prob += time[e.dst] + e.distance * ii >= time[e.src] + e.delay, f"dep_{j}"
    if not _resource_rows(pulp, prob, x, graph, machine, ii, tick):
        return None  # the whole runs alone overload every slot: proved infeasible

    prob.setObjective(length)
    if solve_cbc(prob, deadline, what) == INFEASIBLE:
        return None
    best = round(length.value())
    prob += length <= best, "length_optimal"
    prob.setObjective(pulp.lpSum(time.values()))
    if solve_cbc(prob, deadline, what + " (tie-break)") == INFEASIBLE:
        raise AssertionError("fixing L at its optimum made the modulo ILP infeasible")
    return {n: round(pulp.value(time[n])) for n in names}
