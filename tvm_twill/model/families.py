"""Names of the constraint families and of the query bounds that can appear in an unsat core.

One definition for the whole package: the checker's rule names, the
solvers' assumption literals and unsat cores, ``Attempt.reason``,
``InfeasibleError.family`` and ``evaluate_annotation``'s "what binds" all
use these strings.
"""
from __future__ import annotations


class Family:
    """The constraint families of the joint model (rules 1-6 of docs/formats.md)."""

    DEPENDENCE = "dependence"
    RESOURCES = "resources"
    VARIABLE_LATENCY = "variable latency"
    BLOCKING_SYNC = "blocking sync"
    REGISTERS = "registers"
    MEMORY = "memory"
    #: Every family, in the order cores and reports list them.
    ALL = (DEPENDENCE, RESOURCES, VARIABLE_LATENCY, BLOCKING_SYNC, REGISTERS, MEMORY)
    #: The order in which ``InfeasibleError.family`` picks the most specific family of a core.
    MOST_SPECIFIC_FIRST = (REGISTERS, MEMORY, VARIABLE_LATENCY, BLOCKING_SYNC, RESOURCES, DEPENDENCE)
    #: The checker's rule number of each family (rule 0 is the schedule's own structure).
    BY_RULE = {1: DEPENDENCE, 2: RESOURCES, 3: VARIABLE_LATENCY, 4: BLOCKING_SYNC, 5: REGISTERS, 6: MEMORY}


class Bound:
    """Query bounds (not families) that an unsat core may contain."""

    LENGTH = "length"
    REG_PEAK = "reg_peak"
    TIME_SUM = "time_sum"
    ALL = (LENGTH, REG_PEAK, TIME_SUM)
