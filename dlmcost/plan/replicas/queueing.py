"""The queueing shape the searches steer by: a deployment's worst latency ratio against the
targets, and the utilisation at which it reaches a given ratio, read off
ratio = a + b rho / (1 - rho) through simulated points.
"""

from __future__ import annotations

import math

from ..results import Deployment, Targets
from .floors import LATENCY_TARGETS

def _latency_ratio(d: Deployment, targets: Targets) -> float:
    """The worst latency-type target's value / limit (limit / value for tokens/s per user): at
    most 1 when they all hold; 0 when none is set."""
    ratios = [getattr(d, name) / getattr(targets, name) for name in LATENCY_TARGETS if getattr(targets, name)]
    if targets.min_tokens_per_s_per_user:
        ratios.append(targets.min_tokens_per_s_per_user / max(d.tokens_per_s_per_user, 1e-300))
    return max(ratios, default=0.0)


def _queue_shape(rho: float) -> float:
    """rho / (1 - rho): how a queue's waiting grows with the utilisation (M/M/1, M/D/1 alike)."""
    rho = min(max(rho, 0.0), 0.999)
    return rho / (1 - rho)


def _utilisation_for(ratio_points: list[tuple[float, float]], floor: float, aim: float = 1.0) -> float | None:
    """The utilisation at which the worst latency ratio reaches `aim`, from ratio = a + b rho/(1-rho)
    through the two points nearest 1 (or one point and the lone-request floor at rho = 0)."""
    pts = sorted(ratio_points, key=lambda p: abs(p[1] - 1.0))[:2]
    if len(pts) == 1:
        pts.append((0.0, floor))
    (r1, m1), (r2, m2) = pts
    x1, x2 = _queue_shape(r1), _queue_shape(r2)
    if x1 == x2 or (m1 - m2) * (x1 - x2) <= 0:
        return None
    slope = (m1 - m2) / (x1 - x2)
    x = x1 + (aim - m1) / slope
    return None if not 0 < x < math.inf else x / (1 + x)  # inf: ratios a target ~1e308 flattens to ~0


SATURATED = 0.95  # beyond this utilisation a finite run's latency follows no queueing shape


def _crossing(points: list[tuple[float, float]], floor: float) -> float | None:
    """The utilisation at which the worst latency ratio crosses 1, in the queueing shape
    x = rho / (1 - rho): interpolated between the highest ratio that meets (the lone-request floor
    at rho = 0 among them) and the lowest that fails; with none failing, extrapolated through the
    two highest that meet. Points past SATURATED are left out; None: no crossing to read."""
    pts = [(_queue_shape(rho), m) for rho, m in points if rho <= SATURATED] + [(0.0, floor)]
    below = sorted((p for p in pts if p[1] <= 1), key=lambda p: (p[1], p[0]))
    above = sorted((p for p in pts if p[1] > 1), key=lambda p: (p[1], -p[0]))
    if above:
        (x1, m1), (x2, m2) = below[-1], above[0]
    elif len(below) > 1:
        (x1, m1), (x2, m2) = below[-2], below[-1]
    else:
        return None
    if x1 == x2 or (m2 - m1) * (x2 - x1) <= 0:  # no rise with the load to follow
        return None
    x = x1 + (1 - m1) * (x2 - x1) / (m2 - m1)
    return None if not 0 < x < math.inf else x / (1 + x)  # inf: ratios a target ~1e308 flattens to ~0
