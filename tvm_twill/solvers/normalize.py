"""Cost normalization (section 5.2 of the Twill paper) as an integer LP on CBC.

Scaling every cycle count of a scheduling problem by the same positive
factor gives an isomorphic problem, so only the ratios between costs matter,
while the solvers' work grows with the size of the costs.  Normalization
finds small integers C' whose ratios are as close as possible to those of the
original costs C (the distinct positive values, sorted)::

    C'[i] integer >= 1
    -F <= C[i]*C'[j] - C[j]*C'[i] <= F      for all i < j
    1 <= sum_i C'[i] <= U
    minimize F

F (the ``distortion``) is 0 exactly when every ratio is kept.  Tie-break:
among the solutions with the optimal F, a second CBC run minimizes sum C' (the
coarsest costs with the same distortion, which keeps the scheduling problems
small); with F and sum C' fixed, CBC's own deterministic serial search (fixed
options) picks the rest.  For example [1024, 1024, 512] becomes
{512: 1, 1024: 2} with F = 0.

F is the paper's measure (``objective="paper"``): it is in units of C*C',
so it does not reward resolution and the optimum leans towards coarse costs.
Twelve costs between 919 and 997 all become 1 (F = 78, ratios off by up to
8.5%); measured FlashAttention costs (137 ... 1090 cycles) get F = 380 with
sum C' = 93 of the U = 300 allowed and ratios off by 15.7%.

So the default (``objective="relative"``) minimizes the largest *relative*
ratio error e instead, with the same integer variables and the same bound U::

    |C'[i]*C[j] - C[i]*C'[j]| <= e * C[i]*C'[j]     for all i != j

which is linear for a fixed e: bisection on e with one feasibility ZLP per
step (CBC), started from the best scaled rounding (a cheap upper bound) and
stopped at a relative width of 1e-3; then the coarsest C' (smallest sum)
with that error.  The FlashAttention costs above then keep every ratio
within 3% (sum C' = 286).  The report gives both ``distortion`` (the paper's
F of the chosen C') and ``max_ratio_error``.

The paper uses SCIP; CBC solves these small problems (a dozen distinct costs)
in well under a second.  A zero cost (a streaming op, section 5.3) stays 0.

``objective="rounding"``: that best scaled rounding alone (the start of the
relative bisection), without CBC.  ``search.prepare`` falls back to it when
the time limit ends the ZLP before its optimum (with ``SolveOptions.fallback``),
so a short limit still gets a schedule; the report then says ``rounding``
and ``tvm-twill check`` re-derives the same costs from it.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from ..errors import GraphError, InputError
from .backends import load_pulp
from .limits import Deadline
from .modulo_ilp import INFEASIBLE, solve_cbc


@dataclass(frozen=True)
class Normalization:
    """The result of ``normalize_costs``.

    ``mapping``: original value -> normalized value (0 -> 0, positive -> >= 1);
    ``distortion``: the optimal F; ``max_ratio_error``: the largest relative
    change of a ratio, max over pairs of |C[i]/C[j] - C'[i]/C'[j]| / (C[i]/C[j])
    (a report: 0.0 when every ratio is exact); ``U``: the bound on sum C'.
    """

    mapping: dict[int, int]
    distortion: int
    max_ratio_error: float
    U: int
    objective: str = "relative"


OBJECTIVES = ("relative", "paper", "rounding")


def _ratio_error(costs, scaled) -> float:
    n = len(costs)
    return max((abs(1 - (scaled[i] * costs[j]) / (scaled[j] * costs[i]))
                for i in range(n) for j in range(n) if i != j), default=0.0)


def _distortion(costs, scaled) -> int:
    n = len(costs)
    return max((abs(costs[i] * scaled[j] - costs[j] * scaled[i]) for i in range(n) for j in range(n)),
               default=0)


def normalize_costs(values: Sequence[int], U: int = 300, time_limit: float = 10.0,
                    objective: str = "relative", *, deadline: Deadline | None = None) -> Normalization:
    """Map cycle counts to small integers with the least ratio distortion (module docstring).

    Raises InputError for a negative or non-integer value, a bad U, or more
    distinct positive values than U (each needs at least 1);
    SolverTimeoutError when CBC does not prove the optimum within
    ``time_limit`` seconds (every CBC run together), or before ``deadline``
    (a ``limits.Deadline``; it replaces ``time_limit``).
    """
    if objective not in OBJECTIVES:
        raise InputError(f"normalization objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    if isinstance(U, bool) or not isinstance(U, int) or U < 1:
        raise InputError(f"U must be an integer >= 1, got {U!r}")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise InputError(f"costs to normalize must be integers >= 0, got {v!r}")
    costs = sorted({v for v in values if v > 0})
    mapping = {0: 0} if 0 in values else {}
    if not costs:
        return Normalization(mapping=mapping, distortion=0, max_ratio_error=0.0, U=U, objective=objective)
    n = len(costs)
    if n > U:
        raise InputError(f"cannot normalize {n} distinct costs with U={U}: each needs at least 1, "
                         f"so U must be at least {n}")
    if objective == "rounding":
        scaled = _rounding(costs, U)[1]
        mapping.update(zip(costs, scaled))
        return Normalization(mapping=mapping, distortion=_distortion(costs, scaled),
                             max_ratio_error=_ratio_error(costs, scaled), U=U, objective=objective)
    pulp = load_pulp("cost normalization")
    deadline = Deadline.of(deadline, time_limit)
    if objective == "relative":
        scaled = _relative(pulp, costs, U, deadline)
        mapping.update(zip(costs, scaled))
        return Normalization(mapping=mapping, distortion=_distortion(costs, scaled),
                             max_ratio_error=_ratio_error(costs, scaled), U=U, objective=objective)

    prob = pulp.LpProblem("cost_normalization", pulp.LpMinimize)
    c = [prob.add_variable(f"c_{i}", lowBound=1, upBound=U - (n - 1), cat="Integer") for i in range(n)]
    f = prob.add_variable("F", lowBound=0)
    for i in range(n):
        for j in range(i + 1, n):
            diff = costs[i] * c[j] - costs[j] * c[i]
            prob += diff <= f, f"hi_{i}_{j}"
            prob += diff >= -f, f"lo_{i}_{j}"
    prob += pulp.lpSum(c) <= U, "resolution"  # sum >= 1 holds since every C' >= 1

    what = f"cost normalization of {n} values with U={U}"
    prob.setObjective(f)
    if solve_cbc(prob, deadline, what) == INFEASIBLE:
        raise AssertionError("normalization ZLP infeasible although C' = 1 is feasible")
    # F is a maximum of integers at the optimum; round away LP noise.
    distortion = round(f.value())
    prob += f <= distortion, "distortion_optimal"
    prob.setObjective(pulp.lpSum(c))
    if solve_cbc(prob, deadline, what + " (tie-break)") == INFEASIBLE:
        raise AssertionError("fixing F at its optimum made the normalization ZLP infeasible")
    scaled = [round(v.value()) for v in c]
    mapping.update(zip(costs, scaled))
    return Normalization(mapping=mapping, distortion=distortion, max_ratio_error=_ratio_error(costs, scaled),
                         U=U, objective=objective)


def _rounding(costs, U: int) -> tuple:
    """(error, C'): the best rounding of a common scale (largest cost -> k, k = 1..U, sum C' <= U),
    least relative ratio error, the smallest k on ties.  No CBC: deterministic and quick."""
    best = None
    for k in range(1, U + 1):
        scaled = [max(1, round(k * c / costs[-1])) for c in costs]
        if sum(scaled) <= U:
            # the largest |1 - r_i / r_j| over pairs (r = C'/C) is max(r) / min(r) - 1: O(n), not O(n^2)
            r = [a / c for a, c in zip(scaled, costs)]
            err = max(r) / min(r) - 1
            if best is None or err < best[0] - 1e-12:
                best = (err, scaled)
    return best


def _relative(pulp, costs, U: int, deadline: Deadline) -> list:
    """C' minimizing the largest relative ratio error (module docstring), coarsest on ties."""
    n = len(costs)
    # Upper bound: the best rounding of a common scale (largest cost -> k).
    hi, hi_scaled = _rounding(costs, U)
    what = f"cost normalization of {n} values with U={U}"

    def feasible(eps: float, minimize_sum: bool):
        prob = pulp.LpProblem("relative_normalization", pulp.LpMinimize)
        c = [prob.add_variable(f"c_{i}", lowBound=1, upBound=U - (n - 1), cat="Integer") for i in range(n)]
        for i in range(n):
            for j in range(n):
                if i != j:
                    diff = costs[j] * c[i] - costs[i] * c[j]
                    prob += diff <= eps * costs[i] * c[j], f"hi_{i}_{j}"
                    prob += diff >= -eps * costs[i] * c[j], f"lo_{i}_{j}"
        prob += pulp.lpSum(c) <= U, "resolution"
        prob.setObjective(pulp.lpSum(c) if minimize_sum else pulp.lpSum([]))
        if solve_cbc(prob, deadline, what) == INFEASIBLE:
            return None
        return [round(v.value()) for v in c]

    lo = 0.0
    if hi > 0 and feasible(0.0, False) is not None:
        hi = 0.0
    while hi - lo > 1e-3 * max(hi, 1e-9):
        mid = (lo + hi) / 2
        got = feasible(mid, False)
        if got is None:
            lo = mid
        else:  # the model may be better than mid: tighten to what it achieves
            hi = min(mid, _ratio_error(costs, got))
    # The coarsest C' within the error found (a hair of slack for float noise).
    final = feasible(hi * (1 + 1e-9) + 1e-12, True)
    return final if final is not None else hi_scaled


def normalize_graph(graph, machine, U: int = 300, time_limit: float = 10.0, objective: str = "relative", *,
                    deadline: Deadline | None = None):
    """Normalize every cost of ``graph`` together; return ``(new_graph, normalization)``.

    The costs are op cycles, edge delays and spill costs (an op's own, or the
    machine's for an op without one).  The new graph has ``normalize=False``,
    the mapped cycles and delays, and every op's spill cost written explicitly
    in normalized units (the machine's ``spill_cost`` stays in raw units, so it
    must no longer be used for these ops).  regs/smem/tmem are unchanged.

    Raises GraphError for an op with an explicit reservation table: its rows
    are cycles and cannot be rescaled.  ``time_limit`` / ``deadline``: as in
    ``normalize_costs``.
    """
    from ..model import get_machine

    machine = get_machine(machine)
    for op in graph.ops:
        if op.rrt is not None:
            raise GraphError(f"op '{op.name}' has an explicit rrt, which cannot be rescaled: "
                             "set \"normalize\": false or describe it with unit and cycles")
    spill = {op.name: machine.spill_of(op) for op in graph.ops}
    values = [op.cycles for op in graph.ops] + [e.delay for e in graph.edges] + list(spill.values())
    norm = normalize_costs(values, U=U, time_limit=time_limit, objective=objective, deadline=deadline)
    m = norm.mapping
    ops = tuple(replace(op, cycles=m[op.cycles], spill_cost=m[spill[op.name]]) for op in graph.ops)
    edges = tuple(replace(e, delay=m[e.delay]) for e in graph.edges)
    return graph.replace(ops=ops, edges=edges, normalize=False), norm
