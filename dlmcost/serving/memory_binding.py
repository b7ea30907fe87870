"""When a load runs into the memory limit, and what that says about the simulated times.

The simulation reserves each request's whole final length (the K/V of its prompt and answer)
from admission. A whole canvas (masked diffusion) does hold its length from its first pass; a
decoding whose K/V grows as it runs (autoregressive, draft-verify, block diffusion with a cache)
does not: vLLM and SGLang allocate K/V as tokens come and preempt (or retract) one when the pool
runs out, so they start more requests at once, and where memory binds the simulated times to the
first token are an upper bound. `serve` (deployment/capacity.py) and `plan` (plan/replicas) flag
such loads with the pieces here.
"""

from __future__ import annotations

import math

import numpy as np

from ..engine.schemes import get_scheme
from .simulate.tables import held_as_each_joins

# A load binds when the most requests a replica held at once reach this share of what memory holds
MEMORY_BINDS_FRACTION = 0.95


def grows_as_it_runs(scheme: str) -> bool:
    """The decoding's K/V grows as a request runs: it stops after the token or block that ends the
    answer (not a whole canvas, which holds its length from its first pass)."""
    return get_scheme(scheme).stops_at_eos


def requests_memory_holds(mem_share, classes: np.ndarray) -> float:
    """How many of these requests one replica's memory holds at once, each at its whole final
    length: 1 / the mean memory share (its class's) over the requests."""
    shares = np.asarray(mem_share, float)[classes]
    mean = float(shares.mean()) if len(shares) else 0.0
    return 1.0 / mean if mean > 0 else math.inf


def most_in_batch(start_s: np.ndarray | None, done_s: np.ndarray, window: slice) -> int:
    """The most requests in a replica's batch as a measured request (`window`) joined it, itself
    counted: each request in from joining the batch to its last answer, one that leaves at the
    instant another joins counted out first. A closed loop's users all ask at once in the warm-up;
    what the measured requests met is what their times show."""
    if start_s is None or not len(start_s[window]):
        return 0
    return int(held_as_each_joins(start_s, done_s)[window].max())


def peak_binds(most: int, held: float, in_flight_cap: int) -> bool:
    """Memory binds a run whose replica held at most `most` requests: never where the running limit
    holds no more than memory does (the limit binds first), else where the peak reaches
    MEMORY_BINDS_FRACTION of what memory holds."""
    return in_flight_cap > held and most >= MEMORY_BINDS_FRACTION * held
