"""One candidate deployment (`Candidate`, priced by `Pricing`) and its simulated runs: one
replica at a load (`ReplicaRun`), its saturation throughput, the `Deployment` R replicas make
and what it costs, and what a search found (`Found`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...inputs.hardware import GPU
from ..results import Deployment, Targets, check_targets, joules_per_token, usd_per_hour, usd_per_mtok, usd_per_mtok_range
from ...serving import behaviour, memory_binding
from ...serving.simulate import ClassTable, FrontEnd, RequestPasses, SimulationWork, in_flight_cap
from ...serving.loads import in_order, loop_requests
from ...serving.steptime import Decoding
from ...serving.traffic import RequestSample, Traffic

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
    batch_limit: int  # the most requests it runs at once (behaviour.batch_limit)
    release: str = "first-done"
    passes: RequestPasses | None = None  # each sampled request's passes per block (None: its class's)
    first_block_outside_limit: bool = False  # the stack's (behaviour.Policy)
    # each prompt's share outside the prefix cache where the decoding's prefill can use one (1: whole)
    uncached: float = 1.0
    front_end: FrontEnd | None = None  # the API servers before the engine (behaviour.Policy's)
    recv_interval: int = 1  # decode iterations between the scheduler's receives (behaviour.Policy's)
    kv_dtype: str = "bf16"  # the K/V cache's number format its table was costed with
    memory_fits: int = 0  # the longest requests its memory holds at their final lengths
    floors: dict = field(default_factory=dict, repr=False)  # _floor_ratio's answers, per (sample, targets)
    # the preemptions its simulations may still run, shared by the plan's candidates (None: no limit)
    work: SimulationWork | None = field(default=None, repr=False)
    # how many times as long as predicted its table's steps are (1: the prediction; `plan --conservative`:
    # its stack's error band's slower end), and its first blocks further (the first-token band's excess)
    clock: float = 1.0
    first_block_scale: float = 1.0

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
    # the most requests in the batch as a measured one joined, and how many memory holds at their
    # final lengths (serving/memory_binding.py): whether memory binds the run
    most_running: int = 0
    memory_held: float = math.inf
    preemptions: int = 0  # times the measured requests were preempted (K/V on demand ran out) and recomputed


@dataclass
class Found:
    """What a candidate's search found: the fewest replicas meeting the targets (or, if it meets
    none, the nearest it gets, marked with its misses), one replica's saturation throughput, and
    the (utilisation, worst latency ratio) points simulated on the way."""

    candidate: Candidate
    deployment: Deployment
    capacity: float
    points: list[tuple[float, float]]


_window = behaviour.measured_window


def request_classes(sample: RequestSample) -> np.ndarray:
    """Each sampled request's class (prompt class x answer class, in that order)."""
    return sample.prompt_class * len(sample.answer_values) + sample.answer_class


def _serve(c: Candidate, cls: np.ndarray, passes: RequestPasses | None = None, **load):
    """One replica of the candidate serving requests of these classes (`load`: as `behaviour.run`'s),
    as `serve` serves it; `passes`: theirs, where they are not the sample's (`c.passes`)."""
    return behaviour.run(c.table, cls, c.max_batch, c.release, c.passes if passes is None else passes,
                         c.first_block_outside_limit,
                         uncached=c.uncached_shares(len(cls)), front_end=c.front_end,
                         recv_interval=c.recv_interval, work=c.work, **load)


def _run(c: Candidate, sample: RequestSample, traffic: Traffic, replicas: int, *,
         users_per_replica: int | None = None) -> ReplicaRun:
    """One replica of R under the traffic (closed loop: `users_per_replica`, when given, instead of
    the busiest replica's share of the users; the sample repeated in order to as many requests as
    `serve` runs for that many users, `loop_requests`: with fewer, the users' first round would be
    the whole run, a burst, not a loop)."""
    cls = request_classes(sample)
    if traffic.closed_loop:
        users = users_per_replica or math.ceil(traffic.users / replicas)
        looped = in_order(np.arange(len(cls)), loop_requests(len(cls), users))
        passes = c.passes.subset(looped) if c.passes is not None and len(looped) > len(cls) else None
        cls = cls[looped]
        r = _serve(c, cls, passes, users=users, think_s=traffic.think_s)
    else:
        arrivals = np.cumsum(sample.unit_gaps) / (traffic.rate / replicas)
        r = _serve(c, cls, arrivals_s=arrivals)
    n = len(cls)
    w = _window(n)
    lat, ttfb = r.latency_s[w], r.ttfb_s[w]
    tokens = c.answer_tokens[cls[w]]
    if users_per_replica:
        served = _completion_rate(r.done_s)
    elif traffic.closed_loop:  # the busiest replica's rate per user, times the users of an average one
        served = _completion_rate(r.done_s) * (traffic.users / replicas) / math.ceil(traffic.users / replicas)
    else:
        served = traffic.rate / replicas
    return ReplicaRun(lat, ttfb, tokens, served, r.busy_s / r.end_s if r.end_s > 0 else 0.0,
                      memory_binding.most_in_batch(r.start_s, r.done_s, w),
                      memory_binding.requests_memory_holds(c.table.mem_share, cls),
                      0 if r.preempted is None else int(r.preempted[w].sum()))


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
        p50_latency_s=p50, p95_latency_s=p95, p99_latency_s=p99, p95_first_block_s=float(np.percentile(ev.ttfb, 95)) * c.first_block_scale,
        tokens_per_s_per_user=float(np.median(ev.tokens / ev.latency)),
        served_rps=served, capacity_rps=cap_total, headroom=cap_total / served - 1 if served > 0 else math.inf,
        usd_per_hour=hour, usd_per_mtok=usd_per_mtok(hour, out_tok_s) if hour is not None else None,
        joules_per_token=joules_per_token(gpus, pricing.power_w.get(c.gpu.key), pricing.power_utilisation, out_tok_s,
                                          busy_fraction=ev.busy_fraction),
        gpu_busy_fraction=ev.busy_fraction,
        price_per_gpu_hour=price, price_source=pricing.source.get(c.gpu.key),
        output_tokens_per_s=out_tok_s, tokens_per_s_per_gpu=out_tok_s / gpus, kv_dtype=c.kv_dtype,
        price_per_gpu_hour_low=pricing.low.get(c.gpu.key), price_per_gpu_hour_high=pricing.high.get(c.gpu.key),
    )
    d.usd_per_mtok_low, d.usd_per_mtok_high = usd_per_mtok_range(gpus, d.price_per_gpu_hour_low,
                                                                 d.price_per_gpu_hour_high, out_tok_s)
    d.memory_binds = (memory_binding.grows_as_it_runs(c.decoding.scheme)
                      and memory_binding.peak_binds(ev.most_running, ev.memory_held, c.in_flight_cap))
    d.preemptions = ev.preemptions
    d.memory_fits = c.memory_fits
    d.step_time_scale = c.clock
    d.misses = check_targets(d, targets)
    return d
