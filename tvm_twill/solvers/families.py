"""Names of the constraint families (unsat cores, ``InfeasibleError.family``,
attempt reasons) and of the query bounds that can appear in a core."""
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


class Bound:
    """Query bounds (not families) that an unsat core may contain."""

    LENGTH = "length"
    REG_PEAK = "reg_peak"
    TIME_SUM = "time_sum"
    ALL = (LENGTH, REG_PEAK, TIME_SUM)
