"""The highest load a found deployment sustains within the latency targets (`sustained_rps`):
open loop, bracketed by steps aimed through the queueing shape; closed loop, the most users a
replica serves.
"""

from __future__ import annotations

import math

from ..results import Deployment, Targets
from ...serving.traffic import RequestSample, Traffic
from .candidate import Candidate, Pricing, _deployment, _run
from .floors import LATENCY_TARGETS, _floor_ratio
from .queueing import _latency_ratio, _utilisation_for

SUSTAINED_TOLERANCE = 0.10  # the highest sustained load is bracketed to within 10% ...
MAX_SUSTAINED_RUNS = 2  # ... or as far as this many simulations get (the lower end is reported)
SUSTAINED_AIM = 0.97  # each step aims a little inside the targets, so that it tends to meet them


def sustained_rps(c: Candidate, sample: RequestSample, traffic: Traffic, targets: Targets, d: Deployment,
                  capacity: float, known: list[tuple[float, float]] = ()) -> float:
    """The highest load (requests/s, all replicas) the deployment `d` serves within the latency
    targets: the saturation throughput when there are none; else bracketed between the offered
    load (met) and the saturation throughput (or the load R - 1 replicas failed at), to within
    SUSTAINED_TOLERANCE, and the met end reported. `known`: (utilisation, worst latency ratio)
    points already simulated for this candidate, which steer the first step."""
    r = d.replicas
    if not any(getattr(targets, name) for name in LATENCY_TARGETS) and not targets.min_tokens_per_s_per_user:
        return capacity * r
    ok = d.served_rps / r  # per replica
    if traffic.closed_loop:
        return _sustained_users(c, sample, traffic, targets, d, capacity) * r
    bad = capacity if r == 1 else min(capacity, traffic.rate / (r - 1))
    floor = _floor_ratio(c, sample, targets)
    pts = [(ok / capacity, _latency_ratio(d, targets)), *known]
    for _ in range(MAX_SUSTAINED_RUNS):
        if bad <= ok * (1 + SUSTAINED_TOLERANCE):
            break
        u = _utilisation_for(pts, floor, SUSTAINED_AIM)
        x = capacity * u if u else math.sqrt(ok * bad)
        x = min(max(x, ok * (1 + SUSTAINED_TOLERANCE / 2)), bad / (1 + SUSTAINED_TOLERANCE / 2))
        probe = _deployment(c, _run(c, sample, Traffic(traffic.prompt, traffic.answer, rate=x * r), r), r, capacity,
                            Pricing({}, {}, {}), targets)
        ratio = _latency_ratio(probe, targets)
        pts.append((x / capacity, ratio))
        if ratio <= 1:
            ok = x
        else:
            bad = x
    return ok * r


def _sustained_users(c: Candidate, sample: RequestSample, traffic: Traffic, targets: Targets, d: Deployment,
                     capacity: float) -> float:
    """Closed loop: the completion rate of one replica at the most users it serves within the
    latency targets (doubling, then bisecting, MAX_SUSTAINED_RUNS simulations at most)."""
    ok_users = math.ceil(traffic.users / d.replicas)
    ok_rate, bad_users = d.served_rps / d.replicas, None
    for _ in range(MAX_SUSTAINED_RUNS):
        users = ok_users * 2 if bad_users is None else (ok_users + bad_users) // 2
        if bad_users is not None and bad_users - ok_users <= max(1, ok_users * SUSTAINED_TOLERANCE):
            break
        ev = _run(c, sample, traffic, d.replicas, users_per_replica=users)
        probe = _deployment(c, ev, 1, capacity, Pricing({}, {}, {}), targets)
        if _latency_ratio(probe, targets) <= 1:
            ok_users, ok_rate = users, ev.served_rps
        else:
            bad_users = users
    return ok_rate
