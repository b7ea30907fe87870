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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..inputs.hardware import GPU
from .results import Deployment, Targets, check_targets, joules_per_token, usd_per_hour, usd_per_mtok, usd_per_mtok_range
from ..serving import behaviour
from ..serving.simulate import ClassTable, FrontEnd, RequestPasses, in_flight_cap, scaled, uncached_prompt_tokens
from ..serving.steptime import Decoding
from ..serving.traffic import RequestSample, Traffic

SUSTAINED_TOLERANCE = 0.10  # the highest sustained load is bracketed to within 10% ...
MAX_SUSTAINED_RUNS = 2  # ... or as far as this many simulations get (the lower end is reported)
SUSTAINED_AIM = 0.97  # each step aims a little inside the targets, so that it tends to meet them
LATENCY_TARGETS = ("p50_latency_s", "p95_latency_s", "p99_latency_s", "p95_first_block_s")
COST_TARGETS = ("max_gpus", "max_usd_per_mtok")  # more replicas only add GPUs and dollars per token


@dataclass(frozen=True)
class Pricing:
    """Price per GPU-hour and board power per GPU key, with where the price came from."""

    usd: dict[str, float]
    source: dict[str, str]
    power_w: dict[str, float | None]
    power_utilisation: float = 1.0
    low: dict[str, float | None] = field(default_factory=dict)  # the price's range (costs.price_range)
    high: dict[str, float | None] = field(default_factory=dict)


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
    # each prompt's share outside the prefix cache where the decoding's prefill can use one (1: whole)
    uncached: float = 1.0
    front_end: FrontEnd | None = None  # the API servers before the engine (behaviour.Policy's)
    recv_interval: int = 1  # decode iterations between the scheduler's receives (behaviour.Policy's)
    floors: dict = field(default_factory=dict, repr=False)  # _floor_ratio's answers, per (sample, targets)

    @property
    def in_flight_cap(self) -> int:
        """Requests a replica holds at once (behaviour.Policy.in_flight_cap)."""
        return in_flight_cap(self.max_batch, self.first_block_outside_limit)

    def uncached_shares(self, n: int) -> np.ndarray | None:
        """The simulation's `uncached` for n requests (None: every prompt whole)."""
        return None if self.uncached >= 1 else np.full(n, self.uncached)


@dataclass(frozen=True)
class ReplicaRun:
    """One replica's simulated requests at a load: their latencies, times to first block and
    tokens (the measured window), and the requests/s it served."""

    latency: np.ndarray
    ttfb: np.ndarray
    tokens: np.ndarray
    served_rps: float  # per replica
    busy_fraction: float = 1.0  # share of the time the replica runs passes (what its boards draw)


@dataclass
class Found:
    """What a candidate's search found: the fewest replicas meeting the targets (or, if it meets
    none, the nearest it gets, marked with its misses), one replica's saturation throughput, and
    the (utilisation, worst latency ratio) points simulated on the way."""

    candidate: Candidate
    deployment: Deployment
    capacity: float
    points: list[tuple[float, float]]


ABSURD = "absurd"  # what the search returns when told to give up: the answer needs more replicas than that
_window = behaviour.measured_window


def request_classes(sample: RequestSample) -> np.ndarray:
    """Each sampled request's class (prompt class x answer class, in that order)."""
    return sample.prompt_class * len(sample.answer_values) + sample.answer_class


def _serve(c: Candidate, cls: np.ndarray, **load):
    """One replica of the candidate serving requests of these classes (`load`: as `behaviour.run`'s),
    as `serve` serves it."""
    return behaviour.run(c.table, cls, c.max_batch, c.release, c.passes, c.first_block_outside_limit,
                         uncached=c.uncached_shares(len(cls)), front_end=c.front_end,
                         recv_interval=c.recv_interval, **load)


def _run(c: Candidate, sample: RequestSample, traffic: Traffic, replicas: int, *,
         users_per_replica: int | None = None) -> ReplicaRun:
    """One replica of R under the traffic (closed loop: `users_per_replica`, when given, instead of
    the busiest replica's share of the users)."""
    cls = request_classes(sample)
    n = len(cls)
    if traffic.closed_loop:
        users = users_per_replica or math.ceil(traffic.users / replicas)
        r = _serve(c, cls, users=users, think_s=traffic.think_s)
    else:
        arrivals = np.cumsum(sample.unit_gaps) / (traffic.rate / replicas)
        r = _serve(c, cls, arrivals_s=arrivals)
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


def saturation_rps(c: Candidate, sample: RequestSample) -> float:
    """Requests/s one replica completes when its batch is always full (a closed loop with more
    users than the batch holds and no think time): the rate beyond which queues grow without bound.
    No more than the front end's servers / service_s: its servers do service_s of work a request,
    and the users' first round, sent together, shares them and leaves in one burst whose
    completions a window can catch at a rate no steady state keeps."""
    cls = request_classes(sample)
    r = _serve(c, cls, users=2 * c.in_flight_cap + 1)
    rate = _completion_rate(r.done_s)
    if c.front_end is not None and c.front_end.service_s > 0:
        rate = min(rate, c.front_end.servers / c.front_end.service_s)
    return rate


def _completion_rate(done_s: np.ndarray) -> float:
    """Completions per second inside the measurement window (`behaviour.completion_rate`, as serve's)."""
    return behaviour.completion_rate(done_s, _window(len(done_s)), float(np.max(done_s)))


def mean_window_tokens(c: Candidate, sample: RequestSample) -> float:
    """The mean answer tokens of the measured window's requests: what a deployment's output
    tokens/s, and so its $/Mtok, are computed with."""
    return float(c.answer_tokens[request_classes(sample)[_window(len(sample.unit_gaps))]].mean())


def open_loop_usd_per_mtok(c: Candidate, replicas: int, traffic: Traffic, tokens: float,
                           pricing: Pricing) -> float | None:
    """$/Mtok of R replicas at the offered Poisson load, `tokens` mean answer tokens (the measured
    window's), computed as `_deployment` computes it from a simulation, to the last bit; None: no
    price for the GPU."""
    price = pricing.usd.get(c.gpu.key)
    if price is None:
        return None
    served = traffic.rate / replicas * replicas  # each replica's share, times the replicas (as _run, _deployment)
    return usd_per_mtok(usd_per_hour(replicas * c.tp, price), served * tokens)


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
                  p95_first_block_s=_percentiles(first, [95])[0])
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


def fewest_replicas(c: Candidate, sample: RequestSample, traffic: Traffic, targets: Targets, pricing: Pricing,
                    give_up: Callable[[int], bool] | None = None) -> Found | str | None:
    """The fewest replicas meeting the targets, or the nearest this candidate gets; None when it
    completes no request at all. `give_up(R)`: whether an answer of R replicas or more no longer
    matters to the caller; the search then returns ABSURD as soon as the answer is known to be at
    least such an R (only where the targets set no cost or GPU cap, so that the answer is certain
    to meet them: otherwise the search might end in a miss, which the caller must see)."""
    capacity = saturation_rps(c, sample)
    if not capacity > 0:
        return None
    return _search_replicas(c, sample, traffic, targets, pricing, capacity,
                            give_up if not any(getattr(targets, name) is not None for name in COST_TARGETS) else None)


def _search_replicas(c: Candidate, sample: RequestSample, traffic: Traffic, targets: Targets, pricing: Pricing,
                     capacity: float, give_up: Callable[[int], bool] | None, start: int | None = None) -> Found | str:
    """`fewest_replicas` at a given saturation throughput of one replica; `start`: the R to
    simulate first, where a guess is known (the band's ends), instead of the fewest below SATURATED."""
    lo = 1 if traffic.closed_loop else math.floor(traffic.rate / capacity) + 1  # utilisation below 1
    top = separate_replicas(c, sample, traffic)
    cap = replica_cap(c, traffic, targets, pricing, mean_window_tokens(c, sample))
    if cap is not None:
        top = min(top, cap)
    top = max(top, lo)
    cache: dict[int, Deployment] = {}

    def at(r: int) -> Deployment:
        if r not in cache:
            cache[r] = _deployment(c, _run(c, sample, traffic, r), r, capacity, pricing, targets)
        return cache[r]

    def hopeless(d: Deployment) -> bool:
        return any(m.target in COST_TARGETS for m in d.misses)

    def found(d: Deployment, points: bool = True) -> Found:
        pts = [] if traffic.closed_loop or not points else \
            [(traffic.rate / (r * capacity), _latency_ratio(d, targets)) for r, d in cache.items()]
        return Found(c, d, capacity, pts)

    floor = _floor_ratio(c, sample, targets)
    if floor > 1:  # even alone on a replica a request is too slow
        return found(at(min(lo * 4, top)), points=False)
    if give_up is not None and give_up(lo):
        return ABSURD

    if start is not None:
        first = min(max(lo, start), top)
    elif traffic.closed_loop:
        first = lo
    else:  # a point past SATURATED says little but that it fails: start at the fewest below it
        first = max(lo, math.ceil(traffic.rate / (capacity * SATURATED) * (1 + 1e-9)))
    if at(first).meets:
        fail, good = lo - 1, first  # fewer than lo replicas cannot keep up with the load
    else:
        fail, good = first, None
    steps = _Steps(traffic, capacity, floor, top)
    while good is None:
        if fail >= top or hopeless(at(fail)):
            return found(at(fail), points=False)  # the nearest this candidate gets (marked with its misses)
        if give_up is not None and give_up(fail + 1):
            return ABSURD
        r = steps.grow(fail, _ratios(cache, targets, hopeless))
        if at(r).meets:
            good = r
        else:
            fail = r
    while good - fail > 1:
        if give_up is not None and give_up(fail + 1):
            return ABSURD
        r = steps.narrow(fail, good, _ratios(cache, targets, hopeless))
        if at(r).meets:
            good = r
        else:
            fail = r
    return found(at(good))


MEETS = "meets"  # what `meets_within` returns for a candidate whose fewest replicas meet the targets in time


def meets_within(c: Candidate, sample: RequestSample, traffic: Traffic, targets: Targets, pricing: Pricing,
                 give_up: Callable[[int], bool], fewest: int) -> str | None:
    """What `fewest_replicas` would answer for an open-loop candidate whose lone requests meet the
    latency targets, when only its verdict matters (a row past those an output shows): MEETS when
    its fewest replicas meeting the targets are fewer than the first R with give_up(R), ABSURD
    when they are not, None when it completes no request. `fewest`: a lower bound on the replicas
    that keep up with the load (`_search_replicas`' lo, below which nothing is an answer).

    Meeting the targets only gets easier with more replicas (the search's bracketing rests on the
    same), and R_sep replicas, each request served alone, meet them (its lone requests do); so one
    simulation at R_max, the most replicas short of giving up, settles it, and none is needed when
    R_max >= R_sep. The saturation run, for lo, only where the answer may be MEETS."""
    if give_up(fewest):
        return ABSURD
    most, over = fewest, fewest * 2  # the most replicas short of giving up, and the fewest that give up
    while not give_up(over):
        most, over = over, over * 2
    while over - most > 1:
        mid = (most + over) // 2
        most, over = (mid, over) if not give_up(mid) else (most, mid)
    if most < separate_replicas(c, sample, traffic):
        d = _deployment(c, _run(c, sample, traffic, most), most, 0.0, pricing, targets)
        if not d.meets:
            return ABSURD
    capacity = saturation_rps(c, sample)
    if not capacity > 0:
        return None
    return ABSURD if give_up(math.floor(traffic.rate / capacity) + 1) else MEETS


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
                p95_latency_s=pair(lambda d: d.p95_latency_s), band=[band.low, band.high], band_stack=band.stack)


def _ratios(cache: dict[int, Deployment], targets: Targets, hopeless) -> dict[int, float]:
    """The worst latency ratio of each R simulated (those missing a cost or GPU target left out)."""
    return {r: _latency_ratio(d, targets) for r, d in cache.items() if not hopeless(d)}


@dataclass
class _Steps:
    """The R a replica search simulates next. Open loop: read off the queueing shape (`_crossing`)
    through the simulated points nearest the target, never past 4x the last failing R while
    growing, and bisecting whenever two steps in a row left more than half of the bracket; closed
    loop: doubling the users' share, then bisecting."""

    traffic: Traffic
    capacity: float
    floor: float
    top: int
    widths: list[int] = field(default_factory=list)

    def _rho(self, r: int) -> float:
        return self.traffic.rate / (r * self.capacity)

    def _replicas(self, u: float) -> int:
        """The fewest replicas at a utilisation of `u` or less."""
        return math.ceil(self.traffic.rate / (self.capacity * u) * (1 + 1e-9))

    def grow(self, fail: int, ratios: dict[int, float]) -> int:
        if self.traffic.closed_loop:
            return min(fail * 2, self.top)
        u = _crossing([(self._rho(r), m) for r, m in ratios.items()], self.floor)
        r = self._replicas(u) if u else fail * 2
        return min(max(r, fail + max(1, fail // 4)), fail * 4, self.top)

    def narrow(self, fail: int, good: int, ratios: dict[int, float]) -> int:
        self.widths.append(good - fail)
        if self.traffic.closed_loop or (len(self.widths) > 2 and self.widths[-1] * 2 > self.widths[-3]):
            return (fail + good) // 2
        u = _crossing([(self._rho(r), m) for r, m in ratios.items()], self.floor)
        r = self._replicas(u) if u else (fail + good) // 2
        return min(max(r, fail + 1), good - 1)


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
