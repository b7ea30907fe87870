"""The deployment search: for each (GPU, TP, precision, decoding, batch limit), the fewest
data-parallel replicas whose simulated service meets the targets, and what they cost.

Open loop: a Poisson stream split at random over R replicas is R Poisson streams of rate/R, so
one replica is simulated at rate/R. Closed loop: the busiest replica serves ceil(users/R) users.
R starts at the fewest replicas whose saturation throughput exceeds the load, doubles until the
targets hold (or a limit is hit), then bisects back down.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..analysis import limits
from ..inputs.hardware import GPU
from .results import Deployment, Targets, check_targets, joules_per_token, pareto_front, usd_per_hour, usd_per_mtok
from .simulate import ClassTable, simulate
from .steptime import Decoding, PassTable, pass_table, passes_to_first_output, table_passes
from .traffic import RequestSample, Traffic, sample_requests

WARMUP_FRACTION = 0.10  # requests discarded at the start (empty server) ...
COOLDOWN_FRACTION = 0.05  # ... and at the end (arrivals have stopped)
MAX_REPLICA_GROWTH = 256  # search at most this many times the saturation replica count
DEFAULT_REQUESTS = 2000


@dataclass(frozen=True)
class SearchSpace:
    gpus: list[GPU]
    tps: list[int]
    precisions: list[str]
    decodings: list[Decoding]
    max_batches: list[int]


@dataclass(frozen=True)
class Pricing:
    """Price per GPU-hour and board power per GPU key, with where the price came from."""

    usd: dict[str, float]
    source: dict[str, str]
    power_w: dict[str, float | None]
    power_utilisation: float = 1.0


@dataclass
class PlanResult:
    model: str
    traffic: dict
    targets: dict
    deployments: list[Deployment]  # meeting the targets, cheapest first
    baseline: list[Deployment]  # the AR baseline's deployments meeting the targets
    nearest_miss: Deployment | None
    evaluated: int
    skipped: dict[str, int] = field(default_factory=dict)
    search: dict = field(default_factory=dict)


def batch_grid(cap: int) -> list[int]:
    """Batch sizes the engine is evaluated at (every size to 16, then ~24 geometric points);
    the pass time between them is interpolated linearly."""
    small = list(range(1, min(cap, 16) + 1))
    if cap <= 16:
        return small
    return sorted(set(small) | {int(round(x)) for x in np.geomspace(16, cap, 24)})


@dataclass(frozen=True)
class Candidate:
    gpu: GPU
    precision: str
    tp: int
    decoding: Decoding
    max_batch: int
    table: ClassTable
    answer_tokens: np.ndarray  # per class
    batch_limit: int  # largest batch of the longest requests that fits, capped by max_batch


def _class_tables(pt: PassTable, gi: int, pi: int, ti: int, decoding: Decoding, prompts: list[int],
                  answers: list[int], answer_col: list[int], max_batch: int) -> tuple[ClassTable, int] | None:
    """Flatten (prompt class, answer class) -> request class; None if it cannot run or fit.
    `answers[k]` is answer class k's canvas, at column `answer_col[k]` of the pass table."""
    nfe = pt.nfe[gi, pi, ti]
    mem = pt.max_batch[gi, pi, ti]
    if np.isnan(nfe).any() or (mem < 1).any():
        return None
    grid = pt.batches
    b = np.arange(max_batch + 1)
    rows_nfe, rows_first, rows_share, rows_first_s, rows_pass = [], [], [], [], []
    for lp_i in range(len(prompts)):
        for lg, col in zip(answers, answer_col):
            n = float(nfe[lp_i, col])
            rows_nfe.append(int(round(n)))
            rows_first.append(passes_to_first_output(decoding, n, float(pt.prompt_passes[gi, pi, ti, lp_i, col]), lg))
            rows_share.append(1.0 / float(mem[lp_i, col]))
            rows_first_s.append(np.interp(b, grid, pt.first_s[gi, pi, ti, lp_i, col]).tolist())
            rows_pass.append(np.interp(b, grid, pt.pass_s[gi, pi, ti, lp_i, col]).tolist())
    limit = int(min(max_batch, float(mem.min())))
    return ClassTable(rows_nfe, rows_first, rows_share, rows_pass, rows_first_s), limit


@dataclass(frozen=True)
class Evaluation:
    latency: np.ndarray
    ttfb: np.ndarray
    tokens: np.ndarray
    served_rps: float  # per replica


def _window(n: int) -> slice:
    return slice(int(n * WARMUP_FRACTION), max(int(n * (1 - COOLDOWN_FRACTION)), int(n * WARMUP_FRACTION) + 1))


def _run(c: Candidate, sample: RequestSample, traffic: Traffic, replicas: int) -> Evaluation:
    cls = sample.prompt_class * len(sample.answer_values) + sample.answer_class
    n = len(cls)
    if traffic.closed_loop:
        users = math.ceil(traffic.users / replicas)
        r = simulate(c.table, cls, c.max_batch, users=users, think_s=traffic.think_s)
    else:
        arrivals = np.cumsum(sample.unit_gaps) / (traffic.rate / replicas)
        r = simulate(c.table, cls, c.max_batch, arrivals_s=arrivals)
    w = _window(n)
    lat, ttfb = r.latency_s[w], r.ttfb_s[w]
    tokens = c.answer_tokens[cls[w]]
    if traffic.closed_loop:  # the busiest replica's rate per user, times the users of an average one
        served = _completion_rate(r.done_s) * (traffic.users / replicas) / math.ceil(traffic.users / replicas)
    else:
        served = traffic.rate / replicas
    return Evaluation(lat, ttfb, tokens, served)


def _saturation_rps(c: Candidate, sample: RequestSample) -> float:
    """Requests/s one replica completes when its batch is always full (a closed loop with more
    users than the batch holds and no think time): the rate beyond which queues grow without bound."""
    cls = sample.prompt_class * len(sample.answer_values) + sample.answer_class
    r = simulate(c.table, cls, c.max_batch, users=2 * c.max_batch + 1)
    return _completion_rate(r.done_s)


def _completion_rate(done_s: np.ndarray) -> float:
    """Completions per second inside the measurement window: those after the window's first
    completion time up to its last, over that interval (exact when requests finish in groups)."""
    done = np.sort(done_s)
    w = _window(len(done))
    t0, t1 = done[w][0], done[w][-1]
    if not t1 > t0:  # everything in the window finished together: count from time 0
        return float(len(done) / done[-1])
    return float(np.count_nonzero((done > t0) & (done <= t1)) / (t1 - t0))


def _floor_fails(c: Candidate, sample: RequestSample, targets: Targets) -> bool:
    """Latency targets a request misses even when served alone (batch 1, no queue): more
    replicas cannot help. Percentiles over the request mix."""
    cls = sample.prompt_class * len(sample.answer_values) + sample.answer_class
    table = c.table
    t1, first1 = (np.array([row[1] for row in rows])[cls] for rows in (table.pass_s, table.first_pass_s))
    latency = first1 + (np.array(table.nfe)[cls] - 1) * t1
    first = first1 + (np.array(table.first_passes)[cls] - 1) * t1
    checks = [(targets.p50_latency_s, np.percentile(latency, 50)), (targets.p95_latency_s, np.percentile(latency, 95)),
              (targets.p99_latency_s, np.percentile(latency, 99)), (targets.p95_first_block_s, np.percentile(first, 95))]
    if any(limit is not None and value > limit for limit, value in checks):
        return True
    floor_tps = np.median(c.answer_tokens[cls] / latency)
    return targets.min_tokens_per_s_per_user is not None and floor_tps < targets.min_tokens_per_s_per_user


def _deployment(c: Candidate, ev: Evaluation, replicas: int, capacity_rps: float, pricing: Pricing,
                targets: Targets) -> Deployment:
    served = ev.served_rps * replicas
    gpus = replicas * c.tp
    price = pricing.usd[c.gpu.key]
    hour = usd_per_hour(gpus, price)
    out_tok_s = served * float(ev.tokens.mean())
    cap_total = capacity_rps * replicas
    d = Deployment(
        gpu=c.gpu.name, gpu_key=c.gpu.key, replicas=replicas, tp=c.tp, precision=c.precision,
        scheme=c.decoding.scheme, block=c.decoding.block, tpf=None if c.decoding.scheme == "ar" else c.decoding.tpf,
        decoding=c.decoding.label, max_batch=c.batch_limit,
        p50_latency_s=float(np.percentile(ev.latency, 50)), p95_latency_s=float(np.percentile(ev.latency, 95)),
        p99_latency_s=float(np.percentile(ev.latency, 99)), p95_first_block_s=float(np.percentile(ev.ttfb, 95)),
        tokens_per_s_per_user=float(np.median(ev.tokens / ev.latency)),
        served_rps=served, capacity_rps=cap_total, headroom=cap_total / served - 1 if served > 0 else math.inf,
        usd_per_hour=hour, usd_per_mtok=usd_per_mtok(hour, out_tok_s),
        joules_per_token=joules_per_token(gpus, pricing.power_w.get(c.gpu.key), pricing.power_utilisation, out_tok_s),
        price_per_gpu_hour=price, price_source=pricing.source[c.gpu.key],
    )
    d.misses = check_targets(d, targets)
    return d


def _fewest_replicas(c: Candidate, sample: RequestSample, traffic: Traffic, targets: Targets,
                     pricing: Pricing) -> Deployment | None:
    capacity = _saturation_rps(c, sample)
    if not capacity > 0:
        return None
    if traffic.closed_loop:
        lo, top = 1, traffic.users
    else:
        lo = max(1, math.floor(traffic.rate / capacity) + 1)  # utilisation below 1
        top = lo * MAX_REPLICA_GROWTH
    if targets.max_gpus is not None:
        top = min(top, max(targets.max_gpus // c.tp, 1))
    top = max(top, lo)
    cache: dict[int, Deployment] = {}

    def at(r: int) -> Deployment:
        if r not in cache:
            cache[r] = _deployment(c, _run(c, sample, traffic, r), r, capacity, pricing, targets)
        return cache[r]

    def hopeless(d: Deployment) -> bool:
        # more replicas only add GPUs and dollars per token
        return any(m.target in ("max_gpus", "max_usd_per_mtok") for m in d.misses)

    if _floor_fails(c, sample, targets):  # even alone on a replica a request is too slow
        return at(min(lo * 4, top))
    r = lo
    if at(r).meets:
        return at(r)
    last_fail = r
    while r < top and not hopeless(at(r)):
        r = min(r * 2, top)
        if at(r).meets:
            break
        last_fail = r
    if not at(r).meets:
        return at(r)  # the nearest this candidate gets (marked with its misses)
    good = r
    while good - last_fail > 1:
        mid = (good + last_fail) // 2
        if at(mid).meets:
            good = mid
        else:
            last_fail = mid
    return at(good)


def _canvases(decoding: Decoding, sample: RequestSample) -> tuple[list[int], list[int]]:
    """The prompt classes, and the canvas each answer class runs."""
    prompts = [int(v) for v in sample.prompt_values]
    if decoding.scheme == "ar" or not decoding.block:
        return prompts, [int(v) for v in sample.answer_values]
    # the canvas is a whole number of blocks (the padding costs time but yields no tokens)
    return prompts, [int(math.ceil(v / decoding.block) * decoding.block) for v in sample.answer_values]


def _table_args(space: SearchSpace, decoding: Decoding, prompts: list[int], canvases: list[int]) -> tuple:
    """`pass_table`'s positional arguments: every GPU, precision, TP, prompt, distinct canvas and batch."""
    return (decoding, [g.name for g in space.gpus], space.precisions, space.tps, prompts, sorted(set(canvases)),
            batch_grid(max(space.max_batches)))


def _candidates(model, space: SearchSpace, decoding: Decoding, sample: RequestSample, efficiency: str,
                stack: str | None, hardware: list[str] | None) -> tuple[list[Candidate], int]:
    prompts, answers = _canvases(decoding, sample)
    distinct = sorted(set(answers))
    answer_col = [distinct.index(a) for a in answers]
    pt = pass_table(model, *_table_args(space, decoding, prompts, answers), efficiency=efficiency, stack=stack,
                    hardware=hardware, max_passes=None)  # plan checked the total of its sweeps
    tokens = np.tile(sample.answer_values.astype(float), len(prompts))  # useful tokens per request class
    out, skipped = [], 0
    for gi, g in enumerate(space.gpus):
        for pi, prec in enumerate(space.precisions):
            for ti, tp in enumerate(space.tps):
                for mb in space.max_batches:
                    built = _class_tables(pt, gi, pi, ti, decoding, prompts, answers, answer_col, mb)
                    if built is None:
                        skipped += 1
                        continue
                    table, limit = built
                    out.append(Candidate(g, prec, tp, decoding, mb, table, tokens, limit))
    return out, skipped


def plan(model, traffic: Traffic, targets: Targets, space: SearchSpace, pricing: Pricing, *,
         requests: int = DEFAULT_REQUESTS, seed: int = 0, efficiency: str = "realistic",
         stack: str | None = None, hardware: list[str] | None = None, baseline: bool = True,
         progress: Callable[[int, int], None] | None = None) -> PlanResult:
    """Every candidate's cheapest deployment; those meeting the targets ranked by $/Mtok."""
    sample = sample_requests(traffic, requests, seed)
    ar = Decoding("ar", None, 1.0)
    sets = [("plan", space.decodings)]
    if baseline and any(d.scheme != "ar" for d in space.decodings):
        sets.append(("baseline", [ar]))
    # the limit on passes costed one by one holds for the whole search: its sweeps added up first
    passes = sum(table_passes(model, *_table_args(space, dec, *_canvases(dec, sample)), efficiency=efficiency,
                              stack=stack, hardware=hardware) for _, decodings in sets for dec in decodings)
    limits.check_passes(passes, limits.MAX_PASSES_ONE_BY_ONE, "choose fewer GPUs, TP sizes, precisions or decodings, "
                        "larger blocks, shorter answers, or a smaller --max-batch")
    candidates: list[tuple[str, Candidate]] = []
    skipped = 0
    for name, decodings in sets:
        for dec in decodings:
            found, n_skip = _candidates(model, space, dec, sample, efficiency, stack, hardware)
            candidates += [(name, c) for c in found]
            skipped += n_skip
    results: dict[str, list[Deployment]] = {"plan": [], "baseline": []}
    misses: list[Deployment] = []
    for k, (name, c) in enumerate(candidates):
        d = _fewest_replicas(c, sample, traffic, targets, pricing)
        if d is not None:
            (results[name] if d.meets else misses).append(d)
        if progress:
            progress(k + 1, len(candidates))
    for name in results:
        results[name].sort(key=lambda d: (d.usd_per_mtok, d.p95_latency_s, d.gpu))
    pareto_front(results["plan"])
    plan_misses = [d for d in misses if d.decoding != ar.label or not sets[1:]]
    nearest = min(plan_misses or misses, key=lambda d: max(m.ratio for m in d.misses), default=None)
    return PlanResult(model=str(model), traffic={}, targets=targets.as_dict(), deployments=results["plan"],
                      baseline=results["baseline"], nearest_miss=nearest, evaluated=len(candidates),
                      skipped={"unsupported_or_not_fitting": skipped})
