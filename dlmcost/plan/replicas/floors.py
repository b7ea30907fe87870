"""Each request served alone: the latency floor no number of replicas gets below (`floor_fails`),
the replicas at which every request is served alone (`separate_replicas`), and the most the GPU
and cost targets allow (`replica_cap`).
"""

from __future__ import annotations

import math

import numpy as np

from ..results import Targets
from ...serving.simulate import uncached_prompt_tokens
from ...serving.traffic import RequestSample, Traffic
from .candidate import Candidate, Pricing, _window, request_classes

LATENCY_TARGETS = ("p50_latency_s", "p95_latency_s", "p99_latency_s", "p95_first_block_s")


def _floor_ratio(c: Candidate, sample: RequestSample, targets: Targets) -> float:
    """The worst latency ratio of the measured window's requests each served alone (batch 1, no
    queue): what every simulation reports once no two requests overlap."""
    key = (id(sample), targets)
    if key not in c.floors:  # the sample is kept with the answer, so that its id is not reused
        c.floors[key] = (sample, _lone_ratio(c, sample, targets))
    return c.floors[key][1]


def floor_fails(c: Candidate, sample: RequestSample, targets: Targets) -> bool:
    """Latency targets the window's requests miss even when each is served alone: more replicas
    cannot help."""
    return _floor_ratio(c, sample, targets) > 1


def _lone_latencies(c: Candidate, sample: RequestSample) -> tuple[np.ndarray, np.ndarray]:
    """Each sampled request's latency and time to first block when served alone: its front end's
    service (a free API server's time on it) and first-token delay, its first pass (a chunked prompt: its k chunk passes)
    at batch 1, each prefill iteration with its forward's own dispatch (`ClassTable.prefill_step_s`),
    then its other passes at batch 1 (each request's own passes, its own answer's, as the
    simulation runs them)."""
    cls = request_classes(sample)
    t1, first1 = (np.array([row[1] for row in rows])[cls] for rows in (c.table.pass_s, c.table.first_pass_s))
    nfe, first_passes = ((c.passes.nfe, c.passes.first) if c.passes is not None
                         else (np.array(c.table.nfe)[cls], np.array(c.table.first_passes)[cls]))
    # a prompt prefilled in k chunks (ClassTable.lift_passes) runs k passes at its first pass's cost
    k = np.array(c.table.prompt_steps)[cls]
    front = c.front_end.service_s + c.front_end.first_token_delay_s if c.front_end else 0.0
    steps = c.table.prefill_step_s
    step1 = np.array([row[1] for row in steps])[cls] if steps is not None else np.zeros(len(cls))
    prefill = _lone_prefill(c, cls, k, t1, first1, step1) + front
    return prefill + (nfe - k) * t1, prefill + (first_passes - k) * t1


def _lone_prefill(c: Candidate, cls: np.ndarray, k: np.ndarray, t1: np.ndarray, first1: np.ndarray,
                  step1: np.ndarray) -> np.ndarray:
    """A lone request's passes over its prompt, at batch 1: k first passes (k * first1), or, with a
    share u of the prompt outside the prefix cache, the k' = ceil(P' / C) steps its P' =
    max(1, round(u P)) prompt tokens take under a budget C, each a pass t1, plus P' / P of the whole
    prefill's lift L = k (first1 - t1) (the simulation's per-token lift); without a budget, t1 + u L.
    Each of those iterations is a prefill forward that also waits its own dispatch once, `step1`."""
    if c.uncached >= 1:
        return k * (first1 + step1)
    lift = k * (first1 - t1)
    budget, prompt = c.table.prefill_budget, c.table.prompt_tokens
    if not budget:
        return t1 + c.uncached * lift + step1
    p = np.array(prompt, float)[cls]
    own = np.array([uncached_prompt_tokens(int(x), c.uncached) for x in prompt], float)[cls]  # per class
    steps = np.where(p > 0, np.ceil(own / budget), k)
    return np.where(p > 0, steps * t1 + np.divide(own, p, out=np.ones_like(p), where=p > 0) * lift, k * first1) \
        + steps * step1


def _percentiles(x: np.ndarray, qs: list[float]) -> list[float]:
    """np.percentile(x, qs), at once where every value is the same (requests of one length
    class alone: the usual plan), which numpy's interpolation between equal values gives exactly."""
    if x.min() == x.max():
        return [float(x[0])] * len(qs)
    return np.percentile(x, qs).tolist()


def _lone_ratio(c: Candidate, sample: RequestSample, targets: Targets) -> float:
    latency, first = _lone_latencies(c, sample)
    w = _window(len(latency))
    latency, first = latency[w], first[w]
    p50, p95, p99 = _percentiles(latency, [50, 95, 99])
    values = dict(p50_latency_s=p50, p95_latency_s=p95, p99_latency_s=p99,
                  p95_first_block_s=_percentiles(first, [95])[0] * c.first_block_scale)
    ratios = [values[name] / getattr(targets, name) for name in LATENCY_TARGETS if getattr(targets, name)]
    if targets.min_tokens_per_s_per_user:
        tokens = c.answer_tokens[request_classes(sample)[w]]
        ratios.append(targets.min_tokens_per_s_per_user / _percentiles(tokens / latency, [50])[0])
    return float(max(ratios, default=0.0))


def separate_replicas(c: Candidate, sample: RequestSample, traffic: Traffic) -> int:
    """Open loop: replicas enough that every request arrives after the one before it is done
    when served alone (arrival gaps scale with R), so that each is served alone: the simulated
    latencies are then the lone ones. Closed loop: one user per replica."""
    if traffic.closed_loop:
        return traffic.users
    latency, _ = _lone_latencies(c, sample)
    gaps = np.maximum(sample.unit_gaps[1:], 1e-300)
    need = float(np.max(traffic.rate * latency[:-1] / gaps)) if len(gaps) else 0.0
    return max(1, math.ceil(need * (1 + 1e-9)) + 1)


def replica_cap(c: Candidate, traffic: Traffic, targets: Targets, pricing: Pricing, mean_tokens: float) -> int | None:
    """The most replicas the GPU and cost targets allow (both grow with R; open loop, where the
    served load is the offered one, for the cost); None: no such target."""
    caps = []
    if targets.max_gpus is not None:
        caps.append(max(targets.max_gpus // c.tp, 1))
    price = pricing.usd.get(c.gpu.key)
    if targets.max_usd_per_mtok is not None and price is not None and not traffic.closed_loop:
        # R tp price / (rate tokens 3600) 1e6 <= limit; a limit near the float maximum caps nothing
        most = targets.max_usd_per_mtok * traffic.rate * mean_tokens * 3600 / (1e6 * c.tp * price)
        if math.isfinite(most):
            caps.append(max(int(most), 1))
    return min(caps) if caps else None
