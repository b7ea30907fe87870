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

def band_ends(found: Found, sample: RequestSample, traffic: Traffic, targets: Targets, pricing: Pricing,
              band) -> dict:
    """The deployment searched again with every step `band.low` and `band.high` times as long as
    predicted (the ends of its stack's error band): the fewest GPUs meeting the targets at each
    end, and its $/Mtok and p95 latency there; None at an end where no replica count meets them.
    A replica whose every step takes k times as long saturates at exactly 1/k of the capacity (the
    same run in a slower clock), so that is not simulated again. A first-block target is held
    against the first blocks scaled further by the first-token band (`first_token_scales`): the
    target divided by that scale is the same check."""
    from dataclasses import replace

    ends = []
    for factor, first_token in zip((band.low, band.high), band.first_token_scales()):
        moved = replace(found.candidate, table=scaled(found.candidate.table, factor), floors={})
        held = targets if targets.p95_first_block_s is None else \
            replace(targets, p95_first_block_s=targets.p95_first_block_s / first_token)
        # first guess: the replicas that keep each one's utilisation where it was
        guess = math.ceil(found.deployment.replicas * factor - 1e-9)
        at_end = _search_replicas(moved, sample, traffic, held, pricing, found.capacity / factor, None, guess)
        ends.append(at_end.deployment if isinstance(at_end, Found) and at_end.deployment.meets else None)

    def pair(read):
        return [None if d is None else read(d) for d in ends]

    return dict(gpus=pair(lambda d: d.gpus), usd_per_mtok=pair(lambda d: d.usd_per_mtok),
                p95_latency_s=pair(lambda d: d.p95_latency_s), band=[band.low, band.high], band_stack=band.label)
