"""One candidate deployment's fewest replicas, by simulation: its saturation throughput, the
fewest data-parallel replicas whose simulated service meets the targets, what they cost, and the
highest load they sustain. Each candidate's replica is served as `serve` serves the same
deployment (serving/behaviour.py: the stack's release policy, the batch limit as its
running-request limit, the same passes per block).

Open loop: a Poisson stream split at random over R replicas is R Poisson streams of rate/R, so
one replica is simulated at rate/R. Closed loop: the busiest replica serves ceil(users/R) users.
R starts at the fewest replicas whose simulated saturation throughput exceeds the load and grows
until the targets hold, then comes back down to the fewest that hold. Each step's R is read off a
queueing-shaped fit of the worst latency target against the load (below), so that a search takes a
few simulations instead of a doubling and a bisection.

The search is a function of the candidate alone (its probes never depend on other candidates),
so that the plan's pruning (search.py) can skip a candidate or stop its search without changing
any answer. It always ends: a candidate whose lone request meets the latency targets (`floor`)
meets them at some R, at the latest at `separate_replicas`, where no two requests of the sample
overlap and each is served as if alone; one whose lone request misses them cannot meet them at any
R (a miss, simulated once to say how far off it is); cost and GPU targets bound R from above.

The package, one module a part (each imports only those above it):

    candidate.py  the candidate (`Candidate`, `Pricing`), one replica's run at a load, its
                  saturation throughput, and the `Deployment` R replicas make (`Found`: a search's answer)
    floors.py     each request served alone: the latency floor, the replicas that give it
                  (`separate_replicas`), and the most the GPU and cost targets allow
    queueing.py   the worst latency ratio and the queueing shape read through simulated points
    fewest.py     the fewest replicas meeting the targets (`fewest_replicas`, `meets_within`)
    sustained.py  the highest load a found deployment sustains within the latency targets
    bands.py      the search again at the ends of the stack's error band (`band_ends`)
"""

from __future__ import annotations

from .bands import band_ends
from .candidate import (Candidate, Found, Pricing, ReplicaRun, _deployment, _run, _serve, _window, mean_window_tokens,
                        open_loop_usd_per_mtok, request_classes, saturation_rps)
from .fewest import ABSURD, COST_TARGETS, MEETS, fewest_replicas, meets_within
from .floors import LATENCY_TARGETS, _lone_latencies, floor_fails, replica_cap, separate_replicas
from .queueing import SATURATED, _latency_ratio
from .sustained import MAX_SUSTAINED_RUNS, SUSTAINED_AIM, SUSTAINED_TOLERANCE, sustained_rps

# the public names this module had before it became a package, each still importable from here (the
# private ones imported above are those the tests read through it: a test that patches a name patches
# the part that looks it up)
__all__ = ["ABSURD", "COST_TARGETS", "LATENCY_TARGETS", "MAX_SUSTAINED_RUNS", "MEETS", "SATURATED", "SUSTAINED_AIM",
           "SUSTAINED_TOLERANCE", "Candidate", "Found", "Pricing", "ReplicaRun", "band_ends", "fewest_replicas",
           "floor_fails", "mean_window_tokens", "meets_within", "open_loop_usd_per_mtok", "replica_cap",
           "request_classes", "saturation_rps", "separate_replicas", "sustained_rps"]
