"""The deployment search: for each (GPU, TP, precision, decoding, batch limit), the fewest
data-parallel replicas whose simulated service meets the targets, and what they cost. Each
candidate's replica is served as `serve` serves the same deployment (behaviour.py: the stack's
release policy, the batch limit as its running-request limit, the same passes per block).

Open loop: a Poisson stream split at random over R replicas is R Poisson streams of rate/R, so
one replica is simulated at rate/R. Closed loop: the busiest replica serves ceil(users/R) users.
R starts at the fewest replicas whose saturation throughput exceeds the load and grows until the
targets hold (or a limit is hit), then comes back down to the fewest that hold. Each step's R is
read off a queueing-shaped fit of the worst latency target against the load (below), so that a
search takes a few simulations instead of a doubling and a bisection.

Candidates are searched cheapest first by a bound on their cost that needs no simulation (an upper
bound on a replica's throughput); one whose bound is already ABSURD_RATIO x the cheapest deployment
found is not searched (it could only be absurd), unless absurd deployments are asked for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..analysis import limits
from ..inputs.hardware import GPU
from ..engine.schemes import autoregressive_scheme
from .results import (ABSURD_RATIO, Deployment, Targets, check_targets, joules_per_token, mark_absurd, pareto_front,
                      rank_key, usd_per_hour, usd_per_mtok, usd_per_mtok_range)
from ..serving import behaviour
from ..serving.behaviour import DEFAULT_REQUESTS, batch_grid
from ..inputs.error_bands import band_for
from ..serving.simulate import ClassTable, RequestPasses, in_flight_cap, scaled
from ..serving.steptime import Decoding, pass_table, table_passes
from ..serving.traffic import RequestSample, Traffic, sample_requests

MAX_REPLICA_GROWTH = 256  # search at most this many times the saturation replica count
SUSTAINED_TOLERANCE = 0.10  # the highest sustained load is bracketed to within 10% ...
MAX_SUSTAINED_RUNS = 2  # ... or as far as this many simulations get (the lower end is reported)
SUSTAINED_AIM = 0.97  # each step aims a little inside the targets, so that it tends to meet them


@dataclass(frozen=True)
class SearchSpace:
    gpus: list[GPU]
    tps: list[int]
    precisions: list[str]
    decodings: list[Decoding]
    max_batches: list[int]  # running limits searched; empty: each decoding's stack's own
    left_out: list[GPU] = field(default_factory=list)  # default GPUs the stack does not run on


@dataclass(frozen=True)
class Pricing:
    """Price per GPU-hour and board power per GPU key, with where the price came from."""

    usd: dict[str, float]
    source: dict[str, str]
    power_w: dict[str, float | None]
    power_utilisation: float = 1.0
    low: dict[str, float | None] = field(default_factory=dict)  # the price's range (costs.price_range)
    high: dict[str, float | None] = field(default_factory=dict)


@dataclass
class PlanResult:
    model: str
    traffic: dict
    targets: dict
    deployments: list[Deployment]  # meeting the targets, cheapest first (absurd ones only when asked for)
    baseline: list[Deployment]  # the AR baseline's deployments meeting the targets
    nearest_miss: Deployment | None
    evaluated: int
    skipped: dict[str, int] = field(default_factory=dict)
    search: dict = field(default_factory=dict)
    models: list[str] = field(default_factory=list)

    def to_pandas(self, what: str = "deployments"):
        """A pandas DataFrame (the `pandas` extra): one row per deployment meeting the targets,
        cheapest first (`what="ar_baseline"`: the AR baseline's), the keys of `plan --format json`."""
        from ..dataframes import from_records

        return from_records([d.record() for d in (self.baseline if what == "ar_baseline" else self.deployments)],
                            drop=("misses",))


@dataclass(frozen=True, eq=False)
class Candidate:
    """One deployment to search replicas for, served as `serve` serves it (behaviour.py): its
    request classes, release policy, and the sample's requests' passes per block."""

    gpu: GPU
    precision: str
    tp: int
    decoding: Decoding
    max_batch: int  # the running-request limit per replica
    table: ClassTable
    answer_tokens: np.ndarray  # per class
    batch_limit: int  # largest batch of the longest requests that fits, capped by max_batch
    release: str = "first-done"
    passes: RequestPasses | None = None  # each sampled request's passes per block (None: its class's)
    first_block_outside_limit: bool = False  # the stack's (behaviour.Policy)
    floors: dict = field(default_factory=dict, repr=False)  # _floor_ratio's answers, per (sample, targets)

    @property
    def in_flight_cap(self) -> int:
        """Requests a replica holds at once (behaviour.Policy.in_flight_cap)."""
        return in_flight_cap(self.max_batch, self.first_block_outside_limit)


@dataclass(frozen=True)
class ReplicaRun:
    """One replica's simulated requests at a load: their latencies, times to first block and
    tokens (the measured window), and the requests/s it served."""

    latency: np.ndarray
    ttfb: np.ndarray
    tokens: np.ndarray
    served_rps: float  # per replica
    busy_fraction: float = 1.0  # share of the time the replica runs passes (what its boards draw)


_window = behaviour.measured_window


def _run(c: Candidate, sample: RequestSample, traffic: Traffic, replicas: int, *,
         users_per_replica: int | None = None) -> ReplicaRun:
    """One replica of R under the traffic (closed loop: `users_per_replica`, when given, instead of
    the busiest replica's share of the users)."""
    cls = sample.prompt_class * len(sample.answer_values) + sample.answer_class
    n = len(cls)
    if traffic.closed_loop:
        users = users_per_replica or math.ceil(traffic.users / replicas)
        r = behaviour.run(c.table, cls, c.max_batch, c.release, c.passes, c.first_block_outside_limit,
                          users=users, think_s=traffic.think_s)
    else:
        arrivals = np.cumsum(sample.unit_gaps) / (traffic.rate / replicas)
        r = behaviour.run(c.table, cls, c.max_batch, c.release, c.passes, c.first_block_outside_limit,
                          arrivals_s=arrivals)
    w = _window(n)
    lat, ttfb = r.latency_s[w], r.ttfb_s[w]
    tokens = c.answer_tokens[cls[w]]
    if users_per_replica:
        served = _completion_rate(r.done_s)
    elif traffic.closed_loop:  # the busiest replica's rate per user, times the users of an average one
        served = _completion_rate(r.done_s) * (traffic.users / replicas) / math.ceil(traffic.users / replicas)
    else:
        served = traffic.rate / replicas
    return ReplicaRun(lat, ttfb, tokens, served, r.busy_s / r.end_s if r.end_s > 0 else 0.0)


def _saturation_rps(c: Candidate, sample: RequestSample) -> float:
    """Requests/s one replica completes when its batch is always full (a closed loop with more
    users than the batch holds and no think time): the rate beyond which queues grow without bound."""
    cls = sample.prompt_class * len(sample.answer_values) + sample.answer_class
    r = behaviour.run(c.table, cls, c.max_batch, c.release, c.passes, c.first_block_outside_limit,
                      users=2 * c.in_flight_cap + 1)
    return _completion_rate(r.done_s)


def _completion_rate(done_s: np.ndarray) -> float:
    """Completions per second inside the measurement window (`behaviour.completion_rate`, as serve's)."""
    return behaviour.completion_rate(done_s, _window(len(done_s)), float(np.max(done_s)))


def _floor_fails(c: Candidate, sample: RequestSample, targets: Targets) -> bool:
    """Latency targets a request misses even when served alone (batch 1, no queue): more
    replicas cannot help. Percentiles over the request mix."""
    return _floor_ratio(c, sample, targets) > 1


def _deployment(c: Candidate, ev: ReplicaRun, replicas: int, capacity_rps: float, pricing: Pricing,
                targets: Targets) -> Deployment:
    served = ev.served_rps * replicas
    gpus = replicas * c.tp
    price = pricing.usd.get(c.gpu.key)
    hour = usd_per_hour(gpus, price) if price is not None else None
    out_tok_s = served * float(ev.tokens.mean())
    cap_total = capacity_rps * replicas
    p50, p95, p99 = np.percentile(ev.latency, [50, 95, 99]).tolist()  # as three calls would give them
    d = Deployment(
        gpu=c.gpu.name, gpu_key=c.gpu.key, replicas=replicas, tp=c.tp, precision=c.precision,
        scheme=c.decoding.scheme, block=c.decoding.block, tpf=None if c.decoding.autoregressive else c.decoding.tpf,
        decoding=c.decoding.label, max_batch=c.batch_limit,
        p50_latency_s=p50, p95_latency_s=p95, p99_latency_s=p99, p95_first_block_s=float(np.percentile(ev.ttfb, 95)),
        tokens_per_s_per_user=float(np.median(ev.tokens / ev.latency)),
        served_rps=served, capacity_rps=cap_total, headroom=cap_total / served - 1 if served > 0 else math.inf,
        usd_per_hour=hour, usd_per_mtok=usd_per_mtok(hour, out_tok_s) if hour is not None else None,
        joules_per_token=joules_per_token(gpus, pricing.power_w.get(c.gpu.key), pricing.power_utilisation, out_tok_s,
                                          busy_fraction=ev.busy_fraction),
        gpu_busy_fraction=ev.busy_fraction,
        price_per_gpu_hour=price, price_source=pricing.source.get(c.gpu.key),
        output_tokens_per_s=out_tok_s, tokens_per_s_per_gpu=out_tok_s / gpus,
        price_per_gpu_hour_low=pricing.low.get(c.gpu.key), price_per_gpu_hour_high=pricing.high.get(c.gpu.key),
    )
    d.usd_per_mtok_low, d.usd_per_mtok_high = usd_per_mtok_range(gpus, d.price_per_gpu_hour_low,
                                                                 d.price_per_gpu_hour_high, out_tok_s)
    d.misses = check_targets(d, targets)
    return d


LATENCY_TARGETS = ("p50_latency_s", "p95_latency_s", "p99_latency_s", "p95_first_block_s")


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
    return None if x <= 0 else x / (1 + x)


def _floor_ratio(c: Candidate, sample: RequestSample, targets: Targets) -> float:
    """The worst latency ratio of a request served alone (batch 1, no queue)."""
    key = (id(sample), targets)
    if key not in c.floors:  # the sample is kept with the answer, so that its id is not reused
        c.floors[key] = (sample, _lone_ratio(c, sample, targets))
    return c.floors[key][1]


def _lone_ratio(c: Candidate, sample: RequestSample, targets: Targets) -> float:
    cls = sample.prompt_class * len(sample.answer_values) + sample.answer_class
    t1, first1 = (np.array([row[1] for row in rows])[cls] for rows in (c.table.pass_s, c.table.first_pass_s))
    # the passes the simulation runs (each request's own with a block-streaming scheme)
    nfe, first_passes = ((c.passes.nfe, c.passes.first) if c.passes is not None
                         else (np.array(c.table.nfe)[cls], np.array(c.table.first_passes)[cls]))
    latency = first1 + (nfe - 1) * t1
    first = first1 + (first_passes - 1) * t1
    values = dict(p50_latency_s=np.percentile(latency, 50), p95_latency_s=np.percentile(latency, 95),
                  p99_latency_s=np.percentile(latency, 99), p95_first_block_s=np.percentile(first, 95))
    ratios = [values[name] / getattr(targets, name) for name in LATENCY_TARGETS if getattr(targets, name)]
    if targets.min_tokens_per_s_per_user:
        ratios.append(targets.min_tokens_per_s_per_user / np.median(c.answer_tokens[cls] / latency))
    return float(max(ratios, default=0.0))


def _replica_cap(c: Candidate, traffic: Traffic, targets: Targets, pricing: Pricing, mean_tokens: float) -> int | None:
    """The most replicas the GPU and cost targets allow (both grow with R; open loop, where the
    served load is the offered one, for the cost); None: no such target."""
    caps = []
    if targets.max_gpus is not None:
        caps.append(max(targets.max_gpus // c.tp, 1))
    price = pricing.usd.get(c.gpu.key)
    if targets.max_usd_per_mtok is not None and price is not None and not traffic.closed_loop:
        # R tp price / (rate tokens 3600) 1e6 <= limit
        caps.append(max(int(targets.max_usd_per_mtok * traffic.rate * mean_tokens * 3600 / (1e6 * c.tp * price)), 1))
    return min(caps) if caps else None


ABSURD = "absurd"  # what the search returns for a candidate that could only be absurd


def _fewest_replicas(c: Candidate, sample: RequestSample, traffic: Traffic, targets: Targets,
                     pricing: Pricing, absurd_above: float = math.inf,
                     capacity_bound: float | None = None) -> tuple[Deployment, float, list] | str | None:
    """The fewest replicas meeting the targets (or the nearest this candidate gets), with one
    replica's saturation throughput and the (utilisation, worst latency ratio) points simulated;
    ABSURD as soon as it is clear that more than `absurd_above` replicas are needed.

    With `capacity_bound` (an upper bound on the saturation throughput) the search starts from
    it, and the saturation throughput is simulated only for a candidate that is not absurd; if
    that moves the fewest stable replicas above the answer, the search runs again from there."""
    if capacity_bound is None:
        capacity = _saturation_rps(c, sample)
        return _search_replicas(c, sample, traffic, targets, pricing, absurd_above, capacity) if capacity > 0 else None
    found = _search_replicas(c, sample, traffic, targets, pricing, absurd_above, capacity_bound)
    if found is None or found == ABSURD:
        return found
    capacity = _saturation_rps(c, sample)
    if not capacity > 0:
        return None
    d, _, pts = found
    if d.meets and not traffic.closed_loop and d.replicas < math.floor(traffic.rate / capacity) + 1:
        return _search_replicas(c, sample, traffic, targets, pricing, absurd_above, capacity)
    d.capacity_rps = capacity * d.replicas
    d.headroom = d.capacity_rps / d.served_rps - 1 if d.served_rps > 0 else math.inf
    return d, capacity, [(rho * capacity_bound / capacity, ratio) for rho, ratio in pts]


def _search_replicas(c: Candidate, sample: RequestSample, traffic: Traffic, targets: Targets, pricing: Pricing,
                     absurd_above: float, capacity: float) -> tuple[Deployment, float, list] | str:
    """`_fewest_replicas` at a given saturation throughput of one replica."""
    if traffic.closed_loop:
        lo, top = 1, traffic.users
    else:
        lo = max(1, math.floor(traffic.rate / capacity) + 1)  # utilisation below 1
        top = lo * MAX_REPLICA_GROWTH
    mean_tokens = float(c.answer_tokens[sample.prompt_class * len(sample.answer_values) + sample.answer_class].mean())
    cap = _replica_cap(c, traffic, targets, pricing, mean_tokens)
    if cap is not None:
        top = min(top, cap)
    top = max(top, lo)
    cache: dict[int, Deployment] = {}

    def at(r: int) -> Deployment:
        if r not in cache:
            cache[r] = _deployment(c, _run(c, sample, traffic, r), r, capacity, pricing, targets)
        return cache[r]

    def hopeless(d: Deployment) -> bool:
        # more replicas only add GPUs and dollars per token
        return any(m.target in ("max_gpus", "max_usd_per_mtok") for m in d.misses)

    def points() -> list[tuple[float, float]]:
        if traffic.closed_loop:
            return []
        return [(traffic.rate / (r * capacity), _latency_ratio(d, targets)) for r, d in cache.items()]

    floor = _floor_ratio(c, sample, targets)
    if floor > 1:  # even alone on a replica a request is too slow
        return at(min(lo * 4, top)), capacity, []
    if lo > absurd_above:
        return ABSURD

    def guess(fail: int, good: int | None) -> int:
        """The next R to simulate, strictly between `fail` and `good` (or above `fail`)."""
        if traffic.closed_loop:
            return min(fail * 2, top) if good is None else (fail + good) // 2
        rho = lambda r: traffic.rate / (r * capacity)  # noqa: E731
        pts = [(rho(r), _latency_ratio(d, targets)) for r, d in cache.items() if not hopeless(d)]
        u = _utilisation_for(pts, floor)
        r = math.ceil(traffic.rate / (capacity * u) * (1 + 1e-9)) if u else fail * 2
        if good is None and r > absurd_above:  # one look at the most replicas that are not absurd
            return min(max(math.floor(absurd_above), fail + 1), top)
        hi = min(fail * 4, top) if good is None else good - 1
        if good is not None and good - fail > 3:  # keep the bracket shrinking at least by a quarter
            hi = min(hi, fail + (good - fail) * 3 // 4)
            r = max(r, fail + (good - fail) // 4)
        return min(max(r, fail + 1), hi)

    if at(lo).meets:
        return at(lo), capacity, points()
    fail, good = lo, None
    while good is None:
        if fail >= top or hopeless(at(fail)):
            return at(fail), capacity, []  # the nearest this candidate gets (marked with its misses)
        if fail >= absurd_above:
            return ABSURD
        r = guess(fail, None)
        if at(r).meets:
            good = r
        else:
            fail = r
    while good - fail > 1:
        if fail >= absurd_above:
            return ABSURD
        r = guess(fail, good)
        if at(r).meets:
            good = r
        else:
            fail = r
    return at(good), capacity, points()


def _band_ends(c: Candidate, sample: RequestSample, traffic: Traffic, targets: Targets, pricing: Pricing,
               band, capacity: float) -> dict:
    """The deployment searched again with every step `band.low` and `band.high` times as long as
    predicted (the ends of its stack's error band): the fewest GPUs meeting the targets at each
    end, and its $/Mtok and p95 latency there; None at an end where no replica count meets them.
    A replica whose every step takes k times as long saturates at exactly 1/k of `capacity` (the
    same run in a slower clock), so that is not simulated again."""
    from dataclasses import replace

    ends = []
    for factor in (band.low, band.high):
        moved = replace(c, table=scaled(c.table, factor), floors={})
        found = _search_replicas(moved, sample, traffic, targets, pricing, math.inf, capacity / factor)
        ends.append(found[0] if isinstance(found, tuple) and found[0].meets else None)

    def pair(read):
        return [None if d is None else read(d) for d in ends]

    return dict(gpus=pair(lambda d: d.gpus), usd_per_mtok=pair(lambda d: d.usd_per_mtok),
                p95_latency_s=pair(lambda d: d.p95_latency_s), band=[band.low, band.high], band_stack=band.stack)


def _sustained_rps(c: Candidate, sample: RequestSample, traffic: Traffic, targets: Targets, d: Deployment,
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


def _throughput_bound(c: Candidate, sample: RequestSample) -> float:
    """An upper bound on one replica's requests/s, without simulating: each request costs at
    least its first pass's and its later passes' smallest per-request share over every batch
    size that can run, min_b first_s(b)/b + (NFE - 1) min_b pass_s(b)/b seconds of busy time."""
    cls = sample.prompt_class * len(sample.answer_values) + sample.answer_class
    # no batch holds more than the batch limit, nor more than the smallest requests' memory allows
    top = len(c.table.pass_s[0]) - 1
    shares = [s for s in c.table.mem_share if s > 0]
    if shares:
        top = max(1, min(top, int(math.floor(1.0 / min(shares) + 1e-6))))
    b = np.arange(1, top + 1)
    per_pass = np.array([np.min(np.asarray(row[1:top + 1]) / b) for row in c.table.pass_s])
    per_first = np.array([np.min(np.asarray(row[1:top + 1]) / b) for row in c.table.first_pass_s])
    work = per_first + (np.asarray(c.table.nfe) - 1) * per_pass
    return 1.0 / float(work[cls].mean())


def _bound(c: Candidate, sample: RequestSample, traffic: Traffic, pricing: Pricing,
           throughput: float) -> tuple[int, float, int]:
    """(0 priced / 1 not, a lower bound on $/Mtok at the offered load, or on the GPUs unpriced,
    the GPUs it is at); the $/Mtok bound grows in proportion to the GPUs."""
    cls = sample.prompt_class * len(sample.answer_values) + sample.answer_class
    tokens = float(c.answer_tokens[cls].mean())
    if traffic.closed_loop:
        gpus = c.tp
        t = np.asarray(c.table.pass_s)[:, 1:]
        fastest = min(float(t.min()), float(np.asarray(c.table.first_pass_s)[:, 1:].min()))
        served = traffic.users / (traffic.think_s + float(np.asarray(c.table.nfe)[cls].mean()) * fastest)
    else:
        gpus = (math.floor(traffic.rate / (throughput * 1.02)) + 1) * c.tp
        served = traffic.rate
    price = pricing.usd.get(c.gpu.key)
    if price is None:
        return 1, float(gpus), gpus
    return 0, usd_per_mtok(usd_per_hour(gpus, price), served * tokens), gpus


def _canvases(decoding: Decoding, sample: RequestSample) -> tuple[list[int], list[int]]:
    """The prompt classes, and the canvas each answer class runs (`behaviour.canvases`)."""
    prompts = [int(v) for v in sample.prompt_values]
    return prompts, behaviour.canvases(decoding, [int(v) for v in sample.answer_values])


def running_limits(space: SearchSpace, pol: behaviour.Policy) -> list[int]:
    """The running limits searched for a decoding: the space's, or its stack's own (the policy's)."""
    return space.max_batches or [pol.max_running]


def _table_args(space: SearchSpace, decoding: Decoding, prompts: list[int], canvases: list[int],
                pol: behaviour.Policy) -> tuple:
    """`pass_table`'s positional arguments: every GPU, precision, TP, prompt, distinct canvas and batch."""
    return (decoding, [g.name for g in space.gpus], space.precisions, space.tps, prompts, sorted(set(canvases)),
            batch_grid(pol.in_flight_cap(max(running_limits(space, pol)))))


def _candidates(model, space: SearchSpace, decoding: Decoding, sample: RequestSample, efficiency: str,
                stack: str | None, hardware: list[str] | None) -> tuple[list[Candidate], int]:
    prompts, canvases = _canvases(decoding, sample)
    answers = [int(v) for v in sample.answer_values]
    stack = behaviour.stack_name(stack, decoding)  # the decoding's engine path unless one is given
    pol = behaviour.policy(stack_profile(stack, efficiency), decoding)  # its running limit: max_batch's
    pt = pass_table(model, *_table_args(space, decoding, prompts, canvases, pol), efficiency=efficiency,
                    stack=stack, hardware=hardware, max_passes=None)  # plan checked the total of its sweeps
    tokens = np.tile(sample.answer_values.astype(float), len(prompts))  # useful tokens per request class
    cls = sample.prompt_class * len(sample.answer_values) + sample.answer_class
    out, skipped = [], 0
    for gi, g in enumerate(space.gpus):
        for pi, prec in enumerate(space.precisions):
            for ti, tp in enumerate(space.tps):
                for mb in running_limits(space, pol):
                    rt = behaviour.request_table(pt, gi, pi, ti, decoding, prompts, answers, mb, pol)
                    if rt is None:
                        skipped += 1
                        continue
                    passes = behaviour.request_passes(rt, cls)
                    out.append(Candidate(g, prec, tp, decoding, mb, rt.table, tokens, rt.batch_limit, pol.release,
                                         passes, pol.first_block_outside_limit))
    return out, skipped


def candidate_count(space: SearchSpace, baseline: bool = False) -> tuple[int, str]:
    """The candidate deployments `plan` searches in this space, counted before any is built, and
    the product they come from: GPUs x TP sizes x precisions x (decodings, plus the AR baseline
    with `baseline` when a decoding is not autoregressive) x batch limits (each decoding's stack's
    own one when none is given)."""
    decodings = len(space.decodings) + (baseline and any(not d.autoregressive for d in space.decodings))
    factors = {"GPUs": len(space.gpus), "TP sizes": len(space.tps), "precisions": len(space.precisions),
               "decodings": decodings, "batch limits": len(space.max_batches) or 1}
    return math.prod(factors.values()), " x ".join(f"{n:,} {name}" for name, n in factors.items())


def stack_profile(stack: str | None, efficiency: str):
    """The stack profile the passes are costed with (None: the bare roofline), for its serving fields."""
    from ..analysis.prepare import resolve_stack
    from ..inputs.profiles import load_profile

    return resolve_stack(stack, load_profile(efficiency))


def baseline_decoding() -> Decoding:
    """The AR baseline's decoding: one token per pass."""
    return Decoding(autoregressive_scheme(), None, 1.0)


def decoding_policy(stack: str | None, efficiency: str, decoding: Decoding) -> behaviour.Policy:
    """How a decoding is served when no option says otherwise: on its stack (the one given, else its
    kind's default), with that stack's release and running limit, as `serve` serves it."""
    return behaviour.policy(stack_profile(behaviour.stack_name(stack, decoding), efficiency), decoding)


def plan(model, traffic: Traffic, targets: Targets, space: SearchSpace, pricing: Pricing, *,
         requests: int = DEFAULT_REQUESTS, seed: int = 0, efficiency: str = "realistic",
         stack: str | None = None, hardware: list[str] | None = None, baseline: bool = False,
         absurd: bool = False, progress: Callable[[int, int], None] | None = None) -> PlanResult:
    """Every candidate's cheapest deployment; those meeting the targets ranked by $/Mtok (and
    $/Mtok at capacity). `baseline`: the same model decoded autoregressively beside it;
    `absurd`: search and keep the absurd deployments too (`results.mark_absurd`)."""
    sample = sample_requests(traffic, requests, seed)
    ar = baseline_decoding()
    sets = [("plan", space.decodings)]
    if baseline and any(not d.autoregressive for d in space.decodings):
        sets.append(("baseline", [ar]))
    # the limit on passes costed one by one holds for the whole search: its sweeps added up first
    pols = {dec: decoding_policy(stack, efficiency, dec) for _, decodings in sets for dec in decodings}
    passes = sum(table_passes(model, *_table_args(space, dec, *_canvases(dec, sample), pols[dec]),
                              efficiency=efficiency, stack=behaviour.stack_name(stack, dec), hardware=hardware)
                 for _, decodings in sets for dec in decodings)
    limits.check_passes(passes, limits.MAX_PASSES_ONE_BY_ONE, "choose fewer GPUs, TP sizes, precisions or decodings, "
                        "larger blocks, shorter answers, or a smaller --max-batch")
    candidates: list[tuple[str, Candidate]] = []
    skipped = 0
    for name, decodings in sets:
        for dec in decodings:
            found, n_skip = _candidates(model, space, dec, sample, efficiency, stack, hardware)
            candidates += [(name, c) for c in found]
            skipped += n_skip
    # cheapest bound first, so that the best deployment is known early and absurd ones are not searched
    bound_capacity = [_throughput_bound(c, sample) for _, c in candidates]
    bounds = [_bound(c, sample, traffic, pricing, cap) for (_, c), cap in zip(candidates, bound_capacity)]
    order = sorted(range(len(candidates)), key=lambda k: (bounds[k], k))
    results: dict[str, list[Deployment]] = {"plan": [], "baseline": []}
    misses: list[Deployment] = []
    best: dict[str, list[float]] = {"plan": [math.inf, math.inf], "baseline": [math.inf, math.inf]}  # $/Mtok, GPUs
    found_by: dict[int, tuple] = {}  # id(deployment) -> (candidate, capacity, simulated points)
    pruned = 0
    for done, k in enumerate(order):
        name, c = candidates[k]
        unpriced, bound, bound_gpus = bounds[k]  # a bound on $/Mtok, or on the GPUs when unpriced
        reference = best[name][1 if unpriced else 0]
        # beyond this many replicas the bound alone is over ABSURD_RATIO x the best found
        absurd_above = math.inf if absurd else ABSURD_RATIO * reference * bound_gpus / (bound * c.tp)
        found = None if absurd_above < 1 else _fewest_replicas(c, sample, traffic, targets, pricing, absurd_above,
                                                               capacity_bound=bound_capacity[k] * 1.02)
        if absurd_above < 1 or found == ABSURD:
            pruned += 1
        elif found is not None:
            d, capacity, pts = found
            d.model = getattr(model, "id", str(model))
            if d.meets:
                if d.usd_per_mtok is not None:
                    best[name][0] = min(best[name][0], d.usd_per_mtok)
                best[name][1] = min(best[name][1], d.gpus)
                results[name].append(d)
                found_by[id(d)] = (c, capacity, pts)
            else:
                misses.append(d)
        if progress:
            progress(done + 1, len(candidates))
    for name in results:
        mark_absurd(results[name])
        pruned += 0 if absurd else sum(d.absurd for d in results[name])
        results[name] = [d for d in results[name] if absurd or not d.absurd]
        for d in results[name]:  # the load each sustains, for those kept only
            c, capacity, pts = found_by[id(d)]
            d.sustained_rps = _sustained_rps(c, sample, traffic, targets, d, capacity, pts)
            if d.usd_per_hour is not None:
                d.usd_per_mtok_at_capacity = usd_per_mtok(d.usd_per_hour, d.sustained_rps * d.output_tokens_per_s
                                                          / d.served_rps)
        results[name].sort(key=rank_key)
        for d in results[name]:  # what it takes if the stack's step times are off as its error band says
            c, capacity, _ = found_by[id(d)]
            band = band_for(behaviour.stack_name(stack, c.decoding))
            if band is not None:
                d.intervals = _band_ends(c, sample, traffic, targets, pricing, band, capacity)
    pareto_front([d for d in results["plan"] if not d.absurd])
    plan_misses = [d for d in misses if d.decoding != ar.label or not sets[1:]]
    nearest = min(plan_misses or misses, key=lambda d: max(m.ratio for m in d.misses), default=None)
    return PlanResult(model=str(model), traffic={}, targets=targets.as_dict(), deployments=results["plan"],
                      baseline=results["baseline"], nearest_miss=nearest, evaluated=len(candidates),
                      skipped={"unsupported_or_not_fitting": skipped, "absurd": pruned})
