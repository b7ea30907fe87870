"""Bounds a plan's search reads before it simulates a candidate: an upper bound on one replica's
throughput (`throughput_bound`), the fewest replicas it allows (`fewest_by_bound`) and a lower
bound on the candidate's cost (`cost_bound`), by which the candidates are searched cheapest first
and pruned (search.py).
"""

from __future__ import annotations

import math

import numpy as np

from .replicas import Candidate, Pricing, mean_window_tokens, open_loop_usd_per_mtok, request_classes
from .results import usd_per_hour, usd_per_mtok
from ..serving.traffic import RequestSample, Traffic

BOUND_MARGIN = 1.02  # the throughput bound is taken this much higher, as its lower bound on replicas


def throughput_bound(c: Candidate, sample: RequestSample) -> float:
    """An upper bound on one replica's requests/s, without simulating: each request costs at
    least its first pass's and its later passes' smallest per-request share over every batch
    size that can run, min_b first_s(b)/b + (NFE - 1) min_b pass_s(b)/b seconds of busy time; and
    no more requests reach the engine than its front end's servers pass, servers / service."""
    cls = request_classes(sample)
    # no batch holds more than the batch limit, nor more than the smallest requests' memory allows
    top = len(c.table.pass_s[0]) - 1
    shares = [s for s in c.table.mem_share if s > 0]
    if shares:
        top = max(1, min(top, int(math.floor(1.0 / min(shares) + 1e-6))))
    b = np.arange(1, top + 1)
    per_pass = np.array([np.min(np.asarray(row[1:top + 1]) / b) for row in c.table.pass_s])
    per_first = np.array([np.min(np.asarray(row[1:top + 1]) / b) for row in c.table.first_pass_s])
    work = per_first + (np.asarray(c.table.nfe) - 1) * per_pass
    if c.uncached < 1:  # a prompt partly cached: fewer prompt steps, and a share of the first pass's lift
        k = np.asarray(c.table.prompt_steps)
        lifted = _cached_lift_bound(c, k)
        work = (np.asarray(c.table.nfe) - k) * per_pass + (1 - lifted) * per_pass + lifted * per_first
    engine = 1.0 / float(work[cls].mean())
    if c.front_end is None or not c.front_end.service_s:
        return engine
    return min(engine, c.front_end.servers / c.front_end.service_s)


def _cached_lift_bound(c: Candidate, k: np.ndarray) -> np.ndarray:
    """Per class, at least how many first passes' lift a request whose prompt is partly cached
    still adds (at most one counted, as the bound counts one): u without a budget (the simulation
    scales the lift by u); under one, its P' = max(1, round(u P)) >= u P - 1/2 tokens carry P'/P of
    the k chunks' lift."""
    if not c.table.prefill_budget:
        return np.full(len(k), c.uncached)
    p = np.asarray(c.table.prompt_tokens, float)
    share = np.divide(np.maximum(c.uncached * p - 0.5, 0.0), p, out=np.ones_like(p), where=p > 0)
    return np.minimum(1.0, k * share)


def cost_bound(c: Candidate, sample: RequestSample, traffic: Traffic, pricing: Pricing,
               throughput: float) -> tuple[int, float, int]:
    """(0 priced / 1 not, a lower bound on $/Mtok at the offered load, or on the GPUs unpriced,
    the GPUs it is at); the $/Mtok bound grows in proportion to the GPUs. Open loop: the $/Mtok a
    deployment of the fewest replicas the throughput bound allows would report, computed as it
    computes it (the measured window's answer tokens), so that it is a true lower bound, which
    `Shown.past` relies on; closed loop: an ordering only."""
    price = pricing.usd.get(c.gpu.key)
    if not traffic.closed_loop:
        fewest = fewest_by_bound(throughput, traffic)
        if price is None:
            return 1, float(fewest * c.tp), fewest * c.tp
        return 0, open_loop_usd_per_mtok(c, fewest, traffic, mean_window_tokens(c, sample), pricing), fewest * c.tp
    cls = request_classes(sample)
    t = np.asarray(c.table.pass_s)[:, 1:]
    fastest = min(float(t.min()), float(np.asarray(c.table.first_pass_s)[:, 1:].min()))
    served = traffic.users / (traffic.think_s + float(np.asarray(c.table.nfe)[cls].mean()) * fastest)
    if price is None:
        return 1, float(c.tp), c.tp
    return 0, usd_per_mtok(usd_per_hour(c.tp, price), served * float(c.answer_tokens[cls].mean())), c.tp


def fewest_by_bound(throughput: float, traffic: Traffic) -> int:
    """The fewest replicas an upper bound on one replica's throughput allows (at most the fewest
    the simulated one does)."""
    return 1 if traffic.closed_loop else math.floor(traffic.rate / (throughput * BOUND_MARGIN)) + 1
