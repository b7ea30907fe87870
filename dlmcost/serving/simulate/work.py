"""The work one command's simulations do that no count made before they start can bound: the
preemptions of K/V on demand (first_done.py). Where memory holds few requests at their final
lengths, a request may be preempted and recomputed over and over, each time at many times the cost
of a request simulated plainly; so `serve` and `plan` hand every simulation they run one
`SimulationWork`, which counts the preemptions as they happen and ends the command with one line
once they pass its limit (analysis/limits.py, MAX_PREEMPTIONS). Counting changes no schedule: a
command within the limit answers as it would without it.
"""

from __future__ import annotations

import math

from ...errors import UsageError


class SimulationWork:
    """The preemptions a command's simulations may still run (None: no limit), shared by all of them."""

    __slots__ = ("limit", "left")

    def __init__(self, limit: int | None):
        self.limit = limit
        self.left = math.inf if limit is None else limit

    def spend(self, preemptions: int) -> None:
        """Count a finished simulation's preemptions (it stayed within what was left)."""
        self.left -= preemptions

    def refuse(self, mem_share, request_class) -> None:
        """End the command: a simulation of requests of these classes (`mem_share`: each class's share
        of the memory at its final length) preempted more than what was left."""
        shares = [mem_share[c] for c in request_class]
        held = len(shares) / math.fsum(shares) if any(shares) else math.inf
        raise UsageError(
            f"this call's simulations preempted more than {self.limit:,} running requests, at most {self.limit:,} "
            f"in one call: a replica's memory holds about {held:,.0f} of these requests at their final lengths"
            f"{'' if held >= 0.5 else ' (less than one)'}, so requests are preempted and recomputed over and over "
            "(K/V is allocated as tokens come); give it more memory (--mem-fraction, a larger GPU, an fp8 K/V cache, "
            "more TP), shorter answers, or fewer --requests")
