"""One load measured: the replicas simulated, and what serving benchmarks report (`Point`).

`evaluate` deals the load's requests to the replicas (an open load's all to one of its alike
replicas), runs each replica (behaviour.py), and measures the window after the warm-up:
throughput, latency percentiles, cost, energy and the targets missed. `mark_pareto` marks the front of tokens/s per GPU against tokens/s per user over
a set of points. The capacity questions (capacity.py) and the error band's ends (bands.py) are
loads measured here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from .. import behaviour
from ..costs import joules_per_token, usd_per_hour, usd_per_mtok, usd_per_mtok_range
from ..loads import BatchJob, ClosedLoop, OpenLoop, TraceReplay, in_order, loop_requests
from ..memory_binding import most_in_batch
from ..simulate import SimResult
from ..targets import Targets
from .prepared import Prepared

DEFAULT_REQUESTS = behaviour.DEFAULT_REQUESTS
SUSTAIN_FRACTION = 0.95  # a rate is sustained when at least this share of it is served


@dataclass
class Point:
    """What the deployment delivers under one load (times in seconds; rates per second)."""

    load: str
    concurrency: int | None
    rate: float | None
    requests: int  # measured (after the warm-up and cool-down of a synthetic load; an open load's: its one replica's)
    output_tokens_per_s: float
    total_tokens_per_s: float
    output_tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float  # median over requests of answer tokens / end-to-end latency
    requests_per_s: float
    ttfb_s: dict
    inter_block_s: dict
    latency_s: dict
    gpu_busy_fraction: float
    mean_running: float  # time average of the requests in a replica's batch
    usd_per_mtok: float | None
    joules_per_token: float | None
    makespan_s: float | None = None  # batch job and trace: first arrival to last answer
    overloaded: bool = False  # open loop: under SUSTAIN_FRACTION of the arrivals served (queues grow)
    # more requests at once than memory holds at their final lengths, for K/V that grows as a request
    # runs (capacity.memory_binds): the simulation allocated it as tokens came and preempted where it ran out
    memory_binds: bool = False
    preemptions: int = 0  # times the measured requests were preempted (K/V on demand ran out) and recomputed
    # the most requests a replica held in its batch as a measured request joined it: what an open
    # load's, a trace's and a thinking closed loop's `memory_binds` reads; not an output (record() leaves it out)
    most_running: int = 0
    pareto: bool = False
    misses: list = field(default_factory=list)
    usd_per_mtok_low: float | None = None  # $/Mtok at the low and high ends of the price range
    usd_per_mtok_high: float | None = None
    meets_targets: bool | None = None  # None: no targets given
    # metric -> [low, high]: the same load with every step time at the ends of the stack's error band
    intervals: dict = field(default_factory=dict)

    def record(self) -> dict:
        out = asdict(self)
        del out["most_running"]
        return out


def stats(values: np.ndarray) -> dict:
    """Mean, median, p90, p95, p99 (numpy's linear interpolation between order statistics, as the
    targets are checked); NaNs ignored."""
    v = np.asarray(values, float)
    v = v[~np.isnan(v)]
    if not len(v):
        return dict(mean=None, median=None, p90=None, p95=None, p99=None)
    p50, p90, p95, p99 = np.percentile(v, [50, 90, 95, 99])
    return dict(mean=float(v.mean()), median=float(p50), p90=float(p90), p95=float(p95), p99=float(p99))


def _window(n: int, synthetic: bool) -> slice:
    return behaviour.measured_window(n) if synthetic else slice(0, n)


def _split(total: int, parts: int) -> list[int]:
    """total as evenly as whole numbers allow over parts (the first ones get the remainder)."""
    return [total // parts + (1 if r < total % parts else 0) for r in range(parts)]


@dataclass
class _Replica:
    result: SimResult
    index: np.ndarray  # the requests (of the load) this replica served
    units: np.ndarray | None = None  # each one's streamed pieces, its own answer's (None: its class's)


def _simulate_replicas(prep: Prepared, load, cls: np.ndarray, arrivals: np.ndarray | None,
                       rng: np.random.Generator, answers: np.ndarray | None = None) -> list[_Replica]:
    setup = prep.setup
    n, R = len(cls), setup.replicas
    passes_all = behaviour.request_passes(prep.requests, cls, prep.spread, rng, answers)
    out = []
    if isinstance(load, (ClosedLoop, BatchJob)):
        users = load.users if isinstance(load, ClosedLoop) else load.parallel
        per_users = _split(users, R)
        per_requests = [round(n * u / users) for u in per_users]
        per_requests[0] += n - sum(per_requests)
        bounds = np.cumsum([0] + per_requests)
        think = load.think_s if isinstance(load, ClosedLoop) else 0.0
        keep = [r for r in range(R) if per_users[r] > 0 and per_requests[r] > 0]
        groups = [np.arange(bounds[r], bounds[r + 1]) for r in keep]
        kinds = [dict(users=per_users[r], think_s=think) for r in keep]
    elif isinstance(load, OpenLoop):  # one replica of R alike, every request its own (evaluate)
        groups, kinds = [np.arange(n)], [dict(arrivals_s=arrivals)]
    else:
        groups = [np.arange(r, n, R) for r in range(min(R, n))]
        kinds = [dict(arrivals_s=arrivals[g]) for g in groups]
    if isinstance(load, OpenLoop):  # its one replica sends every R-th request of the stream: their cache shares
        shares = _uncached(prep, n * R)
        uncached = None if shares is None else shares[::R]
    else:
        uncached = _uncached(prep, n)
    for g, kind in zip(groups, kinds):
        sub = passes_all.subset(g) if passes_all is not None else None
        r = behaviour.run(prep.table, cls[g], prep.max_running, prep.release, sub, prep.first_block_outside_limit,
                          uncached=None if uncached is None else uncached[g], front_end=prep.front_end,
                          recv_interval=prep.recv_interval, work=prep.work, **kind)
        out.append(_Replica(r, g, _own_units(prep, sub, None if answers is None else answers[g])))
    return out


def _own_units(prep: Prepared, passes, answers: np.ndarray | None) -> np.ndarray | None:
    """Each request's streamed pieces where it runs its own answer: its blocks (a canvas cut into
    blocks), its tokens (a token-streaming scheme); None: its class's."""
    if answers is None:
        return None
    if prep.block_streaming:
        return passes.n_blocks.astype(float) if prep.requests.block else None
    return np.asarray(answers, float)


def _uncached(prep: Prepared, n: int) -> np.ndarray | None:
    """Each of the n requests' share of its prompt outside the prefix cache (None: every prompt
    whole), from --cached-prompt's shares (a trace's own: `serve`'s `_with_trace_cache`)."""
    uncached = behaviour.uncached_shares(prep.setup.cached_prompt, n)
    if uncached is not None:
        behaviour.check_cache_applies(prep.prompt_prefill, prep.release, prep.stack)
    return uncached


def evaluate(prep: Prepared, load, *, requests: int = DEFAULT_REQUESTS, seed: int = 0,
             classes: np.ndarray | None = None, targets: Targets | None = None) -> Point:
    """Simulate every replica under `load`; the measured window's statistics."""
    rng = np.random.default_rng(seed)
    cls = prep.classes() if classes is None else classes
    answers = prep.sample.answer_tokens if classes is None else None  # each request's own answer
    synthetic = isinstance(load, (ClosedLoop, OpenLoop))
    if isinstance(load, BatchJob):
        cls, answers = _resample(cls, load.requests), _resample(answers, load.requests)
    elif synthetic:  # a closed loop: every user's first request is in the warm-up
        n = loop_requests(requests, load.users) if isinstance(load, ClosedLoop) else requests
        cls, answers = _resample(cls, n), _resample(answers, n)
    n = len(cls)
    arrivals = None
    if isinstance(load, OpenLoop):
        # replicas are alike, each taking every R-th arrival of the stream (round robin): one is simulated,
        # with all n requests its own, so that a replica's run reaches its steady state however many there are
        # (n / R each left a few hundred a replica at overload inside its first wave)
        R = prep.setup.replicas
        arrivals = np.cumsum(load.gaps(rng, n * R))[::R]
    elif isinstance(load, TraceReplay):
        arrivals = load.arrival_s
    replicas = _simulate_replicas(prep, load, cls, arrivals, rng, answers)
    return _measure(prep, load, replicas, synthetic, targets)


def _resample(values: np.ndarray | None, n: int) -> np.ndarray | None:
    """n requests' classes (or lengths): the prepared ones repeated in order (a prepared sample of
    n: itself)."""
    if values is None or len(values) == n:
        return values
    return in_order(values, n)


def _measure(prep: Prepared, load, replicas: list[_Replica], synthetic: bool, targets: Targets | None) -> Point:
    lat, ttfb, gap, tokens, prompts = [], [], [], [], []
    rps = offered = 0.0
    busy = span = in_service = 0.0
    makespan = None
    preemptions = 0
    units = np.asarray(prep.table.units, float)
    for rep in replicas:
        r = rep.result
        w = _window(len(r.done_s), synthetic)
        c = r.request_class[w]
        if r.preempted is not None:
            preemptions += int(r.preempted[w].sum())
        lat.append(r.latency_s[w])
        ttfb.append(r.ttfb_s[w])
        u = units[c] if rep.units is None else rep.units[w]
        with np.errstate(invalid="ignore", divide="ignore"):
            gap.append(np.where(u > 1, (r.done_s[w] - r.first_block_s[w]) / np.maximum(u - 1, 1), np.nan))
        tokens.append(prep.answer_tokens[c])
        prompts.append(prep.prompt_tokens[c])
        rps += _rate(r, w, synthetic)
        # arrivals per second by the same estimator over the same window: a sample's own rate, which
        # differs from the nominal one by its draws (at 500 requests by a few percent either way)
        offered += behaviour.completion_rate(r.arrival_s, w, r.end_s) if isinstance(load, OpenLoop) else 0.0
        busy += r.busy_s
        span += r.end_s
        in_service += r.in_service_s
    lat, ttfb, gap = np.concatenate(lat), np.concatenate(ttfb), np.concatenate(gap)
    tokens, prompts = np.concatenate(tokens), np.concatenate(prompts)
    if isinstance(load, OpenLoop):  # one replica of R alike was simulated (evaluate)
        rps, offered = rps * prep.setup.replicas, offered * prep.setup.replicas
    if not synthetic:
        makespan = max(float(rep.result.end_s) for rep in replicas)
        rps = len(lat) / makespan if makespan > 0 else 0.0
    out_tps = rps * float(tokens.mean())
    total_tps = rps * float((tokens + prompts).mean())
    gpus = prep.gpus
    hour = usd_per_hour(gpus, prep.price) if prep.price is not None else None
    s = prep.setup
    p = Point(load=load.label, concurrency=getattr(load, "users", None) or getattr(load, "parallel", None),
              rate=getattr(load, "rate", None), requests=len(lat), output_tokens_per_s=out_tps,
              total_tokens_per_s=total_tps, output_tokens_per_s_per_gpu=out_tps / gpus,
              tokens_per_s_per_user=float(np.median(tokens / lat)), requests_per_s=rps,
              ttfb_s=stats(ttfb), inter_block_s=stats(gap), latency_s=stats(lat),
              gpu_busy_fraction=busy / span if span > 0 else 0.0, mean_running=in_service / span if span > 0 else 0.0,
              usd_per_mtok=usd_per_mtok(hour, out_tps) if hour is not None and out_tps > 0 else None,
              joules_per_token=joules_per_token(gpus, prep.power_w, s.power_utilisation, out_tps,
                                                busy_fraction=busy / span if span > 0 else 0.0) if out_tps > 0 else None,
              makespan_s=makespan,
              overloaded=isinstance(load, OpenLoop) and rps < SUSTAIN_FRACTION * offered, preemptions=preemptions,
              most_running=max(most_in_batch(rep.result.start_s, rep.result.done_s,
                                               _window(len(rep.result.done_s), synthetic))
                                for rep in replicas))
    p.usd_per_mtok_low, p.usd_per_mtok_high = usd_per_mtok_range(gpus, prep.price_low, prep.price_high, out_tps)
    if targets is not None and targets.as_dict():
        p.misses = _misses(p, lat, ttfb, targets)
        p.meets_targets = not p.misses
    return p


def _rate(r: SimResult, w: slice, synthetic: bool) -> float:
    """Completions per second of one replica over the window's share of its completions
    (`behaviour.completion_rate`, as plan's)."""
    return behaviour.completion_rate(r.done_s, w, r.end_s)


def _misses(p: Point, lat: np.ndarray, ttfb: np.ndarray, t: Targets) -> list:
    checks = [("p50_latency_s", float(np.percentile(lat, 50)), t.p50_latency_s),
              ("p95_latency_s", float(np.percentile(lat, 95)), t.p95_latency_s),
              ("p99_latency_s", float(np.percentile(lat, 99)), t.p99_latency_s),
              ("p95_first_block_s", float(np.percentile(ttfb, 95)), t.p95_first_block_s)]
    out = [dict(target=k, value=v, limit=lim) for k, v, lim in checks if lim is not None and v > lim]
    if t.min_tokens_per_s_per_user is not None and p.tokens_per_s_per_user < t.min_tokens_per_s_per_user:
        out.append(dict(target="min_tokens_per_s_per_user", value=p.tokens_per_s_per_user,
                        limit=t.min_tokens_per_s_per_user))
    return out


def mark_pareto(points: list[Point]) -> None:
    """A point is on the front when no other has at least its tokens/s per GPU and per user,
    and more of one."""
    for p in points:
        a, b = p.output_tokens_per_s_per_gpu, p.tokens_per_s_per_user
        p.pareto = not any((q.output_tokens_per_s_per_gpu >= a and q.tokens_per_s_per_user >= b)
                           and (q.output_tokens_per_s_per_gpu > a or q.tokens_per_s_per_user > b) for q in points)
