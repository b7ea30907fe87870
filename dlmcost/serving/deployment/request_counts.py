"""The requests a `serve` simulates, counted from its options and refused over their limits.

`simulated_requests` counts them from the options alone; `check_simulations` refuses a call
over `--requests`' range, the load points' limit or the simulated requests' before any request
is simulated (analysis/limits.py holds the limits).
"""

from __future__ import annotations

from ...analysis import limits
from ...errors import UsageError
from ..loads import BatchJob, ClosedLoop, TraceReplay, loop_requests
from .capacity import MAX_RATE_STEPS


MIN_REQUESTS, MAX_REQUESTS = 100, 1_000_000  # --requests' range (plan's and serve's)


def requests_out_of_range(requests) -> str | None:
    """What is wrong with a --requests value, in the words plan and serve both say; None: nothing."""
    if isinstance(requests, int) and not isinstance(requests, bool) and MIN_REQUESTS <= requests <= MAX_REQUESTS:
        return None
    return f"in {MIN_REQUESTS}..{MAX_REQUESTS:,}, got {requests}"


def check_requests(requests: int) -> None:
    if (problem := requests_out_of_range(requests)) is not None:
        raise UsageError(f"--requests: {problem}")


def simulated_requests(loads, requests: int, find_max_rate: bool = False) -> int:
    """The requests one deployment's `serve` simulates in all, from its options alone: each load
    point's (a job's or a trace's own, a closed loop's at least four per user) three times, at the
    prediction and at its error band's two ends; the saturation run's; each rate --max-rate tries."""
    def of(load) -> int:
        if isinstance(load, BatchJob):
            return load.requests
        if isinstance(load, TraceReplay):
            return len(load.arrival_s)
        return loop_requests(requests, load.users) if isinstance(load, ClosedLoop) else requests

    points = sum(of(ld) for ld in loads)
    return 3 * points + requests + ((MAX_RATE_STEPS + 2) * requests if find_max_rate else 0)


def check_simulations(deployments: int, loads, requests: int, find_max_rate: bool) -> None:
    """`--requests` in its range, and the deployments' load points and the requests their runs
    simulate in all within `limits.MAX_LOAD_POINTS` and `limits.MAX_SIMULATED_REQUESTS` (read when
    called), refused before any is simulated."""
    check_requests(requests)
    loads = list(loads) if isinstance(loads, (list, tuple)) else [loads]
    if limits.MAX_LOAD_POINTS is not None and deployments * len(loads) > limits.MAX_LOAD_POINTS:
        raise UsageError(f"serve: {deployments} deployment(s) x {len(loads):,} load points; at most "
                         f"{limits.MAX_LOAD_POINTS:,} in one call (each takes some 10 ms however few its requests): "
                         "fewer load points or deployments")
    limits.check_simulated(
        deployments * simulated_requests(loads, requests, find_max_rate), limits.MAX_SIMULATED_REQUESTS,
        f"{deployments} deployment(s) x {len(loads)} load point(s) of {requests:,} requests, or a job's or trace's own, "
        "each simulated three times for its error band" + (", and --max-rate's bisection" if find_max_rate else ""),
        "fewer load points, deployments or --requests")
