"""A load point's intervals: its metrics at the two ends of its stack's error band.

The same load is simulated again at each end, with every step time scaled by the band's ratio
(`intervals`); `serve` gives them to every load point whose stack has a band.
"""

from __future__ import annotations

import math

from ..simulate import scaled
from .measure import evaluate
from .prepared import Prepared


# What an interval is given for: a speed (more is faster) or a time or cost (less is faster)
INTERVAL_METRICS = {
    "output_tokens_per_s": lambda p: p.output_tokens_per_s,
    "output_tokens_per_s_per_gpu": lambda p: p.output_tokens_per_s_per_gpu,
    "tokens_per_s_per_user": lambda p: p.tokens_per_s_per_user,
    "requests_per_s": lambda p: p.requests_per_s,
    "ttfb_p50_s": lambda p: p.ttfb_s["median"],
    "latency_p50_s": lambda p: p.latency_s["median"],
    "latency_p99_s": lambda p: p.latency_s["p99"],
    "usd_per_mtok": lambda p: p.usd_per_mtok,
    "joules_per_token": lambda p: p.joules_per_token,
}
# the times to the first token among them: scaled further at each end by the first-token band
FIRST_TOKEN_INTERVALS = frozenset({"ttfb_p50_s"})


def intervals(prep: Prepared, load, band, *, requests: int, seed: int) -> dict[str, list[float]]:
    """Each metric at the two ends of the stack's error band: the same load simulated with every
    step `band.low` and `band.high` times as long as predicted (the measured speeds the band was
    taken from ran at predicted / ratio). Queueing is not linear in the step time: near saturation
    the latency interval widens faster than the band. A time to the first token at each end is
    scaled further by the first-token band's end / the band's (`ErrorBand.first_token_scales`)."""
    from dataclasses import replace

    ends = []
    for factor in (band.low, band.high):
        table = scaled(prep.requests.table, factor)
        front = prep.front_end.scaled(factor) if prep.front_end else None  # its first-token delay a time too
        moved = replace(prep, requests=replace(prep.requests, table=table), front_end=front)
        ends.append(evaluate(moved, load, requests=requests, seed=seed))
    out, first_token = {}, band.first_token_scales()
    for name, read in INTERVAL_METRICS.items():
        values = [read(p) for p in ends]
        if name in FIRST_TOKEN_INTERVALS and all(v is not None for v in values):
            values = [v * k for v, k in zip(values, first_token)]
        if all(v is not None and math.isfinite(v) for v in values):
            out[name] = sorted(values)
    return out
