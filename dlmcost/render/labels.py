"""Words a table and a chart share, from the result alone: the knee's label, the knobs a
scheme reads, a number with an SI prefix. One function each, so that the two can never disagree
("b=367" on the chart where the table said "all")."""

from __future__ import annotations

import math


def si(x: float | None, digits: int = 3) -> str:
    """1.23e12 -> '1.23T' (SI prefixes; the unit is in the column header or the axis label)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if x == 0:
        return "0"
    for div, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.{digits}g}{prefix}"
    return f"{x:.{digits}g}"


def knee_label(block: int | None, workload: dict) -> str:
    """The knee block as the tables show it: '-' for a scheme without a cached block step (mdm,
    AR: no block to grow), '>limit' past the search limit, 'all' when every block up to the
    generation length stays memory-bound, else the block."""
    if not uses(workload, "block"):
        return "-"
    if block is None:
        return ">limit"
    return "all" if block >= workload["gen"] else str(block)


def uses(workload: dict, knob: str) -> bool:
    """Whether the workload's scheme reads `knob` (steps, block...): a knob it ignores is not
    shown (a masked-diffusion run has no block)."""
    return knob in workload["knobs"]
