"""A found deployment at its stack's error band's ends (`band_ends`): the replica search run again
with every step as much slower or faster as the band says.
"""

from __future__ import annotations

import math

from ..results import Targets
from ...serving.simulate import scaled
from ...serving.traffic import RequestSample, Traffic
from .candidate import Found, Pricing
from .fewest import _search_replicas
from .floors import _floor_ratio
from .queueing import _crossing

def band_ends(found: Found, sample: RequestSample, traffic: Traffic, targets: Targets, pricing: Pricing,
              band) -> dict:
    """The deployment searched again with every step `band.low` and `band.high` times as long as
    predicted (the ends of its stack's error band; a candidate already at another clock, as under
    `plan --conservative`, is moved by the ratio): the fewest GPUs meeting the targets at each
    end, and its $/Mtok and p95 latency there; None at an end where no replica count meets them.
    A replica whose every step takes k times as long saturates at exactly 1/k of the capacity (the
    same run in a slower clock), so that is not simulated again. A first-block target is held
    against the first blocks scaled further by the first-token band (`first_token_scales`): the
    target divided by that scale is the same check."""
    from dataclasses import replace

    ends = []
    c = found.candidate  # its steps `c.clock` times as long as predicted, its first blocks `c.first_block_scale` further
    replicas = found.deployment.replicas  # the fewest meeting the targets at the candidate's clock: one fewer misses
    for factor, first_token in zip((band.low, band.high), band.first_token_scales()):
        if ends and ends[0] is None:  # none met them at the faster end: none meets them at the slower
            ends.append(None)
            continue
        step, first = factor / c.clock, first_token / c.first_block_scale  # against the found's own clock
        moved = replace(c, table=scaled(c.table, step), floors={}, clock=factor, first_block_scale=1.0,
                        front_end=c.front_end.scaled(step) if c.front_end else None)
        held = targets if targets.p95_first_block_s is None else \
            replace(targets, p95_first_block_s=targets.p95_first_block_s / first_token)
        guess = _first_guess(found, moved, sample, traffic, held, step)
        # meeting the targets only gets harder as every step and first token slows: what missed at a
        # faster clock (the found's, the faster end) misses here, what met at a slower one meets
        slower, faster = step >= 1 and step * first >= 1, step <= 1 and step * first <= 1
        known_fail = max(replicas - 1 if slower else 0, ends[0].replicas - 1 if ends else 0)
        at_end = _search_replicas(moved, sample, traffic, held, pricing, found.capacity / step, None, guess,
                                  known_fail, replicas if faster and found.deployment.meets else None)
        ends.append(at_end.deployment if isinstance(at_end, Found) and at_end.deployment.meets else None)

    def pair(read):
        return [None if d is None else read(d) for d in ends]

    return dict(gpus=pair(lambda d: d.gpus), usd_per_mtok=pair(lambda d: d.usd_per_mtok),
                p95_latency_s=pair(lambda d: d.p95_latency_s), band=[band.low, band.high], band_stack=band.label)


def _first_guess(found: Found, moved, sample: RequestSample, traffic: Traffic, targets: Targets, factor: float) -> int:
    """The replicas to simulate first at a band end: where the latency ratios the prediction's search
    simulated, each `factor` times as long, cross 1. A run whose every step is k times as long, at
    per-replica rate r, is the same run at rate k r in a clock k times slower: its latency ratio at
    utilisation u is k times the prediction's at u, and u = rate k / (R capacity) at R replicas.
    Where that reads no crossing, the replicas that keep each one's utilisation where it was."""
    keep = math.ceil(found.deployment.replicas * factor - 1e-9)
    floor = _floor_ratio(moved, sample, targets)
    if traffic.closed_loop or not found.points or floor > 1:  # (a lone request too slow: the search needs no guess)
        return keep
    u = _crossing([(rho, factor * m) for rho, m in found.points], floor)
    return keep if u is None else max(1, math.ceil(traffic.rate * factor / (found.capacity * u) * (1 + 1e-9)))

