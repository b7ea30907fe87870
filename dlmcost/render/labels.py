"""Words a table and a chart share, from the result alone: the knee's label, the knobs a
scheme reads. One function each, so that the two can never disagree ("b=367" on the chart
where the table said "all")."""

from __future__ import annotations


def knee_label(block: int | None, gen: int) -> str:
    """The knee block as the tables show it: '>limit' past the search limit, 'all' when every
    block up to the generation length stays memory-bound, else the block."""
    if block is None:
        return ">limit"
    return "all" if block >= gen else str(block)


def uses(workload: dict, knob: str) -> bool:
    """Whether the workload's scheme reads `knob` (steps, block...): a knob it ignores is not
    shown (a masked-diffusion run has no block)."""
    return knob in workload["knobs"]
