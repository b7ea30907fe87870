"""`dlmcost serve`: what a fixed deployment delivers under a given load.

A deployment is a model on R replicas of TP (x EP) GPUs, at a precision, with a decoding (scheme,
block, tokens per forward and its spread), a limit on running requests per replica, a release
policy and a software stack. `prepare` costs its passes once (steptime.py, the engine through
the API) for the request length classes of the load; `evaluate` simulates every replica under a
load (loads.py) as `plan` simulates its candidates (behaviour.py) and reports what serving
benchmarks report. `curve` does that for a list of loads and marks the Pareto front of tokens/s
per GPU against tokens/s per user; `max_rate` bisects for the highest rate within targets.

Replicas: open-loop arrivals and traces are dealt round-robin (a load balancer's default); the
users of a closed loop (and the parallel slots of a batch job) are split as evenly as whole
numbers allow, each replica its share of the requests.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from ..analysis import limits
from ..engine.schemes import get_scheme
from ..errors import NoDeploymentError, UsageError, WorkloadError
from ..inputs.error_bands import band_for
from ..inputs.stacks import MAX_RUNNING_REQUESTS
from .loads import ClosedLoop, BatchJob, OpenLoop, TraceReplay
from .costs import IDLE_POWER_FRACTION, joules_per_token, price_range, usd_per_hour, usd_per_mtok, usd_per_mtok_range
from .targets import Miss, Targets
from . import behaviour
from .behaviour import DEFAULT_MAX_RUNNING, DEFAULT_RELEASE  # noqa: F401  (serve's defaults, documented here)
from .simulate import RELEASES, ClassTable, FrontEnd, SimResult, in_flight_cap, scaled
from .steptime import Decoding, pass_table, table_passes
from .traffic import CACHED_FROM_TRACE, MAX_RATE, MIN_RATE, LengthDist, RequestSample, length_classes, parse_lengths

DEFAULT_REQUESTS = behaviour.DEFAULT_REQUESTS
MAX_RATE_STEPS = 14  # bisection halvings of the rate interval: 2^-14 of the saturation rate
SUSTAIN_FRACTION = 0.95  # a rate is sustained when at least this share of it is served


@dataclass(frozen=True)
class Setup:
    """The fixed deployment, as given (None: the model's, the stack's or the default)."""

    gpu: str = "h100"
    tp: int = 1
    ep: int = 1
    replicas: int = 1
    precision: str = "bf16"
    scheme: str | None = None
    block: int | None = None
    tpf: float | None = None
    steps: float | None = None
    tpf_spread: float | None = None  # coefficient of variation of a request's passes per block (None: the
    # published decoding's spread across its mix of tasks, else 0)
    task: str | None = None  # the task whose published tokens per forward the decoding takes
    min_accuracy: tuple[str, float] | None = None  # (task, fraction): the published decoding must reach it
    max_running: int | None = None
    release: str | None = None
    prefill_chunk: int | None = None  # token-streaming prompts' budget a step beside the decodes (0: none)
    api_servers: int | None = None  # the front end's API server processes per replica (None: the stack's)
    # the share of each prompt found in the prefix cache, request after request in the order they are
    # sent (cycled); one value: every request's (None or 0: no prompt token is cached)
    cached_prompt: tuple[float, ...] | None = None
    stack: str | None = None
    eager: bool = False  # the stack run without CUDA graphs (its `eager:` host dispatch)
    efficiency: str = "realistic"
    price: float | None = None  # USD per GPU-hour; None: the hardware file's list price, if any
    power_utilisation: float = 1.0

    def __post_init__(self):
        for name, hi in (("tp", 1024), ("ep", 1024), ("replicas", 100_000)):
            v = getattr(self, name)
            if not (isinstance(v, int) and 1 <= v <= hi):
                raise UsageError(f"--{name}: a whole number in 1..{hi:,}, got {v}")
        if self.max_running is not None and not (isinstance(self.max_running, int)
                                                 and 1 <= self.max_running <= MAX_RUNNING_REQUESTS):
            raise UsageError(f"--max-running: a whole number in 1..{MAX_RUNNING_REQUESTS}, got {self.max_running}")
        if self.tpf_spread is not None and not (math.isfinite(self.tpf_spread) and 0 <= self.tpf_spread <= 4):
            raise UsageError(f"--tpf-spread: a coefficient of variation in 0..4, got {self.tpf_spread}")
        behaviour.check_prefill_chunk(self.prefill_chunk)
        behaviour.check_api_servers(self.api_servers)
        if self.cached_prompt is not None:
            behaviour.check_cached_prompt(self.cached_prompt)
        if self.release is not None and self.release not in RELEASES:
            raise UsageError(f"--release: choose {' or '.join(RELEASES)}, got '{self.release}'")
        if self.price is not None and not (math.isfinite(self.price) and 0 < self.price <= 1000):
            raise UsageError(f"--price: USD per GPU-hour in (0, 1000], got {self.price}")
        if not (math.isfinite(self.power_utilisation) and 0 < self.power_utilisation <= 1.5):
            raise UsageError(f"--power-utilisation: in (0, 1.5], got {self.power_utilisation}")


ServeSetup = Setup  # the name the API exports


@dataclass(frozen=True, eq=False)
class Prepared:
    """A deployment costed for some length classes: what every load's simulation needs."""

    model: str
    gpu_name: str
    unit: str  # what one accelerator is called: GPU, chip...
    gpus: int  # per deployment: replicas x TP
    setup: Setup
    decoding: Decoding
    release: str
    max_running: int
    first_block_outside_limit: bool  # the stack's: newcomers' first blocks beside a full batch
    # "one-pass", or "block-chunks": the prompt one block per forward (the stack's); "none" where the
    # decoding runs no pass over the prompt alone (mdm, an uncached block: the prompt is in every pass)
    prompt_prefill: str
    prefill_chunk: int | None  # AR prompts' budget a step beside the decodes, tokens (None: one pass each)
    prefill_chunk_source: str
    front_end: FrontEnd | None  # the API servers every request passes before the engine (the stack's)
    api_servers_source: str
    release_source: str
    max_running_source: str
    requests: behaviour.RequestTable  # the request classes' passes and pass times
    sample: RequestSample
    answer_tokens: np.ndarray  # useful tokens per class
    prompt_tokens: np.ndarray  # per class
    price: float | None
    price_source: str | None
    power_w: float | None
    price_low: float | None = None  # the ends of the price's range (costs.price_range)
    price_high: float | None = None
    stack: str = ""  # the stack's name (or file) the passes were costed under
    stack_default: bool = False  # no --stack: the decoding's kind's default

    @property
    def spread(self) -> float:
        """The spread of a request's passes per block: the option, else the published decoding's."""
        return self.setup.tpf_spread if self.setup.tpf_spread is not None else self.decoding.spread

    @property
    def table(self) -> ClassTable:
        return self.requests.table

    @property
    def block_streaming(self) -> bool:
        return self.requests.block_streaming

    def classes(self) -> np.ndarray:
        return self.sample.prompt_class * len(self.sample.answer_values) + self.sample.answer_class


@dataclass
class Point:
    """What the deployment delivers under one load (times in seconds; rates per second)."""

    load: str
    concurrency: int | None
    rate: float | None
    requests: int  # measured (after the warm-up and cool-down of a synthetic load)
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
    pareto: bool = False
    misses: list = field(default_factory=list)
    usd_per_mtok_low: float | None = None  # $/Mtok at the low and high ends of the price range
    usd_per_mtok_high: float | None = None
    meets_targets: bool | None = None  # None: no targets given
    # metric -> [low, high]: the same load with every step time at the ends of the stack's error band
    intervals: dict = field(default_factory=dict)

    def record(self) -> dict:
        return asdict(self)


@dataclass
class ServeResult:
    deployment: dict
    points: list[Point]
    max_rate: dict | None = None
    saturation: dict | None = None  # `saturation()`: what it delivers with every batch always full

    def record(self) -> dict:
        return dict(deployment=self.deployment, points=[p.record() for p in self.points],
                    pareto=[i for i, p in enumerate(self.points) if p.pareto], max_rate=self.max_rate,
                    saturation=self.saturation)


@dataclass
class Comparison:
    """Several deployments under the same loads; the Pareto front is over all their points."""

    results: list[ServeResult]

    def record(self) -> dict:
        return dict(deployments=[r.record() for r in self.results],
                    pareto=[[i, j] for i, r in enumerate(self.results) for j, p in enumerate(r.points) if p.pareto])

    def to_pandas(self):
        """A pandas DataFrame (the `pandas` extra): one row per load point of every deployment,
        its deployment's settings as `deployment.*` columns and each statistic dotted (`latency_s.p99`)."""
        from ..dataframes import from_records

        return from_records([dict(number=i, deployment=r.deployment, **p.record())
                             for i, r in enumerate(self.results, 1) for p in r.points], drop=("misses",))


def stats(values: np.ndarray) -> dict:
    """Mean, median, p90, p95, p99 (numpy's linear interpolation between order statistics, as the
    targets are checked); NaNs ignored."""
    v = np.asarray(values, float)
    v = v[~np.isnan(v)]
    if not len(v):
        return dict(mean=None, median=None, p90=None, p95=None, p99=None)
    p50, p90, p95, p99 = np.percentile(v, [50, 90, 95, 99])
    return dict(mean=float(v.mean()), median=float(p50), p90=float(p90), p95=float(p95), p99=float(p99))


# --- preparing the deployment --------------------------------------------------------------------


def _decoding(spec, setup: Setup, answers: np.ndarray) -> Decoding:
    from .decodings import choose_decodings, floor_decodings

    given = None
    if any(v is not None for v in (setup.scheme, setup.block, setup.tpf, setup.steps)):
        if setup.min_accuracy is not None:
            raise UsageError("--min-accuracy chooses among the model's published decodings: give it without "
                             "--scheme, --block, --tpf or --steps (`dlmcost decodings MODEL` lists them)")
        scheme = setup.scheme or (spec.sampler.scheme if spec.sampler else "ar")  # plan's default for no sampler
        given = [Setup(scheme=scheme, block=setup.block, tpf=setup.tpf, steps=setup.steps)]
    if setup.min_accuracy is not None:
        found, note = floor_decodings(spec, setup.min_accuracy, setup.task)
        if not found:
            raise NoDeploymentError(f"no published decoding meets --min-accuracy: {note}")
        return max(found, key=lambda d: d.tpf)  # the fastest that is good enough
    median = None
    if given and setup.steps is not None:  # steps over the median answer, drawn as plan draws it
        dist = LengthDist("file", tuple(float(a) for a in answers[:10_001]))
        median = float(np.median(dist.sample(np.random.default_rng(0), 1001)))
    return choose_decodings(spec, given, median_answer=median, task=setup.task)[0]


def prepare(model, lengths: tuple[np.ndarray, np.ndarray], setup: Setup, *, hardware: list[str] | None = None) -> Prepared:
    """Cost the deployment's passes for requests of these (prompt, answer) lengths."""
    from ..analysis.prepare import resolve_stack
    from ..inputs.hardware import HardwareDB
    from ..inputs.models import resolve_model
    from ..inputs.profiles import load_profile

    spec = resolve_model(model) if isinstance(model, str) else model
    db = HardwareDB.load(hardware)
    gpu = db.get(setup.gpu)
    prompts, answers = lengths
    sample = length_classes(prompts, answers)
    decoding = _decoding(spec, setup, np.asarray(answers, float))
    stack = resolve_stack(behaviour.stack_name(setup.stack, decoding), load_profile(setup.efficiency), eager=setup.eager)
    stack_name = behaviour.stack_name(setup.stack, decoding, setup.eager)  # what the passes are costed under
    pol = behaviour.policy(stack, decoding, release=setup.release, max_running=setup.max_running,
                           prefill_chunk=setup.prefill_chunk, api_servers=setup.api_servers, layers=spec.n_layers)
    prompt_vals = [int(v) for v in sample.prompt_values]
    answer_vals = [int(v) for v in sample.answer_values]
    distinct = sorted(set(behaviour.canvases(decoding, answer_vals)))
    args = (decoding, [gpu.name], [setup.precision], [setup.tp], prompt_vals, distinct, behaviour.batch_grid(pol.in_flight_cap()))
    opts = dict(efficiency=setup.efficiency, stack=stack_name, hardware=hardware, ep=setup.ep)
    limits.check_passes(table_passes(spec, *args, **opts), limits.MAX_PASSES_ONE_BY_ONE,
                        "choose larger blocks, shorter answers, or a smaller --max-running")
    pt = pass_table(spec, *args, **opts, max_passes=None)
    rt = behaviour.request_table(pt, 0, 0, 0, decoding, prompt_vals, answer_vals, pol.max_running, pol)
    if rt is None:
        raise WorkloadError(f"{spec.id} cannot run on {gpu.name} at tp {setup.tp}, ep {setup.ep}, {setup.precision} "
                            f"with {decoding.label} (unsupported precision, a layout that does not split, or weights "
                            "that do not fit)")
    n_p = len(prompt_vals)
    price, price_source = setup.price, "user" if setup.price is not None else None
    if price is None and gpu.price_per_hour is not None:
        price, price_source = gpu.price_per_hour.usd, f"list price as of {gpu.price_per_hour.as_of} (estimate)"
    price_low, price_high = price_range(price, price_source, gpu.price_per_hour)
    return Prepared(model=spec.id, gpu_name=gpu.name, unit=gpu.unit, gpus=setup.replicas * setup.tp, setup=setup,
                    decoding=decoding,
                    release=pol.release, max_running=pol.max_running,
                    first_block_outside_limit=pol.first_block_outside_limit,
                    prompt_prefill=pol.prompt_prefill if any(rt.table.lead or []) else "none",
                    prefill_chunk=pol.prefill_chunk, prefill_chunk_source=pol.prefill_chunk_source,
                    front_end=pol.front_end, api_servers_source=pol.api_servers_source,
                    release_source=pol.release_source,
                    max_running_source=pol.max_running_source, requests=rt, sample=sample,
                    answer_tokens=np.tile(sample.answer_values.astype(float), n_p),
                    prompt_tokens=np.repeat(sample.prompt_values.astype(float), len(answer_vals)),
                    price=price, price_source=price_source, power_w=gpu.board_power_w,
                    price_low=price_low, price_high=price_high, stack=stack_name, stack_default=setup.stack is None)


# --- one load --------------------------------------------------------------------------------------


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
    else:
        groups = [np.arange(r, n, R) for r in range(min(R, n))]
        kinds = [dict(arrivals_s=arrivals[g]) for g in groups]
    uncached = _uncached(prep, n)
    for g, kind in zip(groups, kinds):
        sub = passes_all.subset(g) if passes_all is not None else None
        r = behaviour.run(prep.table, cls[g], prep.max_running, prep.release, sub, prep.first_block_outside_limit,
                          uncached=None if uncached is None else uncached[g], front_end=prep.front_end, **kind)
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
    whole), from --cached-prompt's shares (a trace's own: `_with_trace_cache`)."""
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
        n = max(requests, 4 * load.users) if isinstance(load, ClosedLoop) else requests
        cls, answers = _resample(cls, n), _resample(answers, n)
    n = len(cls)
    arrivals = None
    if isinstance(load, OpenLoop):
        arrivals = np.cumsum(load.gaps(rng, n))
    elif isinstance(load, TraceReplay):
        arrivals = load.arrival_s
    replicas = _simulate_replicas(prep, load, cls, arrivals, rng, answers)
    return _measure(prep, load, replicas, synthetic, targets)


def _resample(values: np.ndarray | None, n: int) -> np.ndarray | None:
    """n requests' classes (or lengths): the prepared ones repeated in order (a prepared sample of
    n: itself)."""
    if values is None or len(values) == n:
        return values
    return values[np.arange(n) % len(values)]


def _measure(prep: Prepared, load, replicas: list[_Replica], synthetic: bool, targets: Targets | None) -> Point:
    lat, ttfb, gap, tokens, prompts = [], [], [], [], []
    rps = offered = 0.0
    busy = span = in_service = 0.0
    makespan = None
    units = np.asarray(prep.table.units, float)
    for rep in replicas:
        r = rep.result
        w = _window(len(r.done_s), synthetic)
        c = r.request_class[w]
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
              overloaded=isinstance(load, OpenLoop) and rps < SUSTAIN_FRACTION * offered)
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


# --- curves, the Pareto front, the highest sustained rate ---------------------------------------


def mark_pareto(points: list[Point]) -> None:
    """A point is on the front when no other has at least its tokens/s per GPU and per user,
    and more of one."""
    for p in points:
        a, b = p.output_tokens_per_s_per_gpu, p.tokens_per_s_per_user
        p.pareto = not any((q.output_tokens_per_s_per_gpu >= a and q.tokens_per_s_per_user >= b)
                           and (q.output_tokens_per_s_per_gpu > a or q.tokens_per_s_per_user > b) for q in points)


def saturation(prep: Prepared, *, requests: int = DEFAULT_REQUESTS, seed: int = 0) -> dict:
    """What the deployment completes with every batch always full (a closed loop of more users
    than the replicas hold, no think time): no rate above it is sustained, and no load gets more
    output tokens/s. Its requests/s (`rate`), output tokens/s (in all and per GPU), and the
    requests the replicas hold at once (`in_flight`: beyond it a request waits for a place)."""
    from dataclasses import replace

    one = replace(prep, setup=replace(prep.setup, replicas=1), gpus=prep.setup.tp)  # replicas are alike
    cap = in_flight_cap(prep.max_running, prep.first_block_outside_limit)
    users = 2 * cap + 1  # always full
    p = evaluate(one, ClosedLoop(users), requests=max(requests, 4 * users), seed=seed)
    r = prep.setup.replicas
    return dict(rate=r * p.requests_per_s, output_tokens_per_s=r * p.output_tokens_per_s,
                output_tokens_per_s_per_gpu=p.output_tokens_per_s_per_gpu, in_flight=r * cap)


def saturation_rate(prep: Prepared, *, requests: int = DEFAULT_REQUESTS, seed: int = 0) -> float:
    """Requests/s the deployment completes with every batch always full (`saturation`)."""
    return saturation(prep, requests=requests, seed=seed)["rate"]


def max_rate(prep: Prepared, targets: Targets, *, arrival: str = "poisson", cv: float = 1.0,
             requests: int = DEFAULT_REQUESTS, seed: int = 0, top: float | None = None) -> dict:
    """The highest open-loop rate the deployment sustains within the targets, by bisection on
    (0, saturation]: a rate passes when at least SUSTAIN_FRACTION of it is served and no target
    is missed. The same random draws at every rate, so the arrivals are the same gaps rescaled.
    `top`: the saturation rate, when it is known already."""
    top = top if top is not None else saturation_rate(prep, requests=requests, seed=seed)

    def ok(rate: float) -> bool:
        p = evaluate(prep, OpenLoop(rate, arrival, cv), requests=requests, seed=seed, targets=targets)
        return not p.misses and not p.overloaded

    # the rates tried stay in the range a rate may be given in (RATE_RANGE): a slow deployment's
    # halvings reached 5e-7 req/s, and a fast one's saturation 2.5e9, each refused as if the user
    # had given it ("the request rate must be in ...", exit 2)
    lo, hi = 0.0, min(top, MAX_RATE)
    if hi < MIN_RATE:
        return dict(rate=None, saturation_rate=top, targets=targets.as_dict(), arrival=arrival,
                    bisection_steps=0, resolution_rps=top,
                    reason=f"it saturates at {top:.4g} req/s, under the lowest rate simulated ({MIN_RATE:g} req/s)")
    if ok(hi):
        lo = hi
    else:
        for _ in range(MAX_RATE_STEPS):
            mid = (lo + hi) / 2
            if mid < MIN_RATE:  # lo is 0 (every rate tried missed): none lower is simulated
                break
            lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    reason = None
    if lo <= 0:  # what the lowest rate tried missed: the answer "none" says why
        p = evaluate(prep, OpenLoop(hi, arrival, cv), requests=requests, seed=seed, targets=targets)
        reason = why_not(p, hi)
    return dict(rate=lo if lo > 0 else None, saturation_rate=top, targets=targets.as_dict(), arrival=arrival,
                bisection_steps=MAX_RATE_STEPS, resolution_rps=top / 2 ** MAX_RATE_STEPS, reason=reason)


def why_not(p: Point, rate: float) -> str:
    """Why a load fails: the targets it misses (value against limit), or the rate it does not keep up with."""
    missed = [Miss(m["target"], m["value"], m["limit"]).describe() for m in p.misses]
    if p.overloaded:
        missed.append(f"served {p.requests_per_s:.4g} req/s, under {SUSTAIN_FRACTION:.0%} of its arrivals (queues grow)")
    return f"at {rate:.4g} req/s: " + "; ".join(missed)


def _memory_limit(table: ClassTable) -> int | None:
    """The most requests of the longest class that fit in memory (None: no memory limit)."""
    shares = [x for x in table.mem_share if x > 0]
    return int(round(1 / max(shares))) if shares else None


def _cached_share(s: Setup) -> float | None:
    """The mean share of a prompt in the prefix cache over the shares given (None: none given)."""
    return float(np.mean(s.cached_prompt)) if s.cached_prompt else None


def describe(prep: Prepared) -> dict:
    s = prep.setup
    return dict(model=prep.model, gpu=prep.gpu_name, unit=prep.unit, tp=s.tp, ep=s.ep, replicas=s.replicas, gpus=prep.gpus,
                precision=s.precision, decoding=prep.decoding.label, scheme=prep.decoding.scheme,
                block=prep.decoding.block, tpf=prep.decoding.tpf, tpf_spread=prep.spread,
                published=prep.decoding.published.record() if prep.decoding.published else None,
                max_running=prep.max_running, max_running_source=prep.max_running_source,
                first_block_outside_limit=prep.first_block_outside_limit, prompt_prefill=prep.prompt_prefill,
                prefill_chunk_tokens=prep.prefill_chunk, prefill_chunk_source=prep.prefill_chunk_source,
                api_servers=prep.front_end.servers if prep.front_end else None,
                front_end_us_per_request=prep.front_end.service_s * 1e6 if prep.front_end else None,
                first_token_delay_us=prep.front_end.first_token_delay_s * 1e6 if prep.front_end else None,
                api_servers_source=prep.api_servers_source,
                cached_prompt_share=_cached_share(s), cached_prompt_given=len(s.cached_prompt or ()),
                memory_limit=_memory_limit(prep.table),
                release=prep.release, release_source=prep.release_source, stack=prep.stack, stack_default=prep.stack_default,
                eager=s.eager,
                price_per_gpu_hour=prep.price, price_source=prep.price_source,
                price_per_gpu_hour_low=prep.price_low, price_per_gpu_hour_high=prep.price_high, board_power_w=prep.power_w,
                idle_power_fraction=IDLE_POWER_FRACTION, power_utilisation=s.power_utilisation)


def serve(model, loads, setup: Setup | None = None, *, prompt=256, answer=None, targets: Targets | None = None,
          find_max_rate: bool = False, arrival: str = "poisson", cv: float = 1.0, requests: int = DEFAULT_REQUESTS,
          seed: int = 0, hardware: list[str] | None = None) -> ServeResult:
    """What a fixed deployment delivers under each load (a `loads` object or a list of them).

    Lengths: `prompt` / `answer` as `plan` takes them (a count, percentiles, '@FILE'; answer
    default: the model's sampler length), except for a `TraceReplay`, which brings its own."""
    from ..inputs.models import resolve_model

    setup = setup or Setup()
    loads = list(loads) if isinstance(loads, (list, tuple)) else [loads]
    if not loads and not find_max_rate:
        raise UsageError("serve: give a load (--concurrency, --rate, --job or --trace)")
    check_simulations(1, loads, requests, find_max_rate)
    spec = resolve_model(model) if isinstance(model, str) else model
    replays = [ld for ld in loads if isinstance(ld, TraceReplay)]
    if replays and len(loads) > 1:
        raise UsageError("serve: a trace is replayed alone, not in a list of loads")
    from_trace = setup.cached_prompt == CACHED_FROM_TRACE
    if from_trace:
        setup = _with_trace_cache(setup, replays)
    if replays:
        lengths = (replays[0].prompt_tokens, replays[0].answer_tokens)
    else:
        rng = np.random.default_rng(seed)
        answer = answer if answer is not None else (spec.sampler.gen if spec.sampler else 256)
        n = max([requests] + [ld.requests for ld in loads if isinstance(ld, BatchJob)])
        p_d, a_d = parse_lengths(prompt, "prompt lengths"), parse_lengths(answer, "answer lengths")
        lengths = (p_d.sample(rng, n), np.maximum(a_d.sample(rng, n), 1.0))
    prep = prepare(spec, lengths, setup, hardware=hardware)
    points = [evaluate(prep, ld, requests=requests, seed=seed, targets=targets) for ld in loads]
    band = band_for(prep.stack)
    if band is not None:
        for point, ld in zip(points, loads):
            point.intervals = intervals(prep, ld, band, requests=requests, seed=seed)
    mark_pareto(points)
    full = saturation(prep, requests=requests, seed=seed)
    found = max_rate(prep, targets or Targets(), arrival=arrival, cv=cv, requests=requests, seed=seed,
                     top=full["rate"]) if find_max_rate else None
    described = describe(prep)
    described["cached_prompt_from_trace"] = from_trace
    described["error_band"] = None if band is None else band.record()
    return ServeResult(described, points, found, full)


def _with_trace_cache(setup: Setup, replays: list) -> Setup:
    """--cached-prompt trace: the replayed trace's own shares, request by request in arrival order
    (the order every load of the deployment sends them in, saturation's included)."""
    from dataclasses import replace

    share = replays[0].cached_share if replays else None
    if share is None:
        raise UsageError("--cached-prompt trace: give a --trace whose rows carry hash_ids (a Mooncake trace)")
    return replace(setup, cached_prompt=tuple(share.tolist()))


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
        moved = replace(prep, requests=replace(prep.requests, table=table))
        ends.append(evaluate(moved, load, requests=requests, seed=seed))
    out, first_token = {}, band.first_token_scales()
    for name, read in INTERVAL_METRICS.items():
        values = [read(p) for p in ends]
        if name in FIRST_TOKEN_INTERVALS and all(v is not None for v in values):
            values = [v * k for v, k in zip(values, first_token)]
        if all(v is not None and math.isfinite(v) for v in values):
            out[name] = sorted(values)
    return out


def check_requests(requests: int) -> None:
    if not (isinstance(requests, int) and 100 <= requests <= 1_000_000):
        raise UsageError(f"--requests: in 100..1,000,000, got {requests}")


def simulated_requests(loads, requests: int, find_max_rate: bool = False) -> int:
    """The requests one deployment's `serve` simulates in all, from its options alone: each load
    point's (a job's or a trace's own, a closed loop's at least four per user) three times, at the
    prediction and at its error band's two ends; the saturation run's; each rate --max-rate tries."""
    def of(load) -> int:
        if isinstance(load, BatchJob):
            return load.requests
        if isinstance(load, TraceReplay):
            return len(load.arrival_s)
        return max(requests, 4 * load.users) if isinstance(load, ClosedLoop) else requests

    points = sum(of(ld) for ld in loads)
    return 3 * points + requests + ((MAX_RATE_STEPS + 2) * requests if find_max_rate else 0)


def check_simulations(deployments: int, loads, requests: int, find_max_rate: bool) -> None:
    """`--requests` in its range, and the deployments' load points and the requests their runs
    simulate in all within `limits.MAX_LOAD_POINTS` and `limits.MAX_SIMULATED_REQUESTS` (read when
    called), refused before any is simulated."""
    check_requests(requests)
    loads = list(loads) if isinstance(loads, (list, tuple)) else [loads]
    if limits.MAX_LOAD_POINTS is not None and deployments * len(loads) > limits.MAX_LOAD_POINTS:
        raise UsageError(f"serve: {deployments} deployment(s) x {len(loads):,} load points; at most "
                         f"{limits.MAX_LOAD_POINTS:,} in one call (each takes some 10 ms however few its requests): "
                         "fewer load points or deployments")
    limits.check_simulated(
        deployments * simulated_requests(loads, requests, find_max_rate), limits.MAX_SIMULATED_REQUESTS,
        f"{deployments} deployment(s) x {len(loads)} load point(s) of {requests:,} requests, or a job's or trace's own, "
        "each simulated three times for its error band" + (", and --max-rate's bisection" if find_max_rate else ""),
        "fewer load points, deployments or --requests")


def own_decoding_is_ar(spec) -> bool:
    """The model's own decoding streams tokens (autoregressive), or it has no sampler settings."""
    return spec.sampler is None or get_scheme(spec.sampler.scheme).stops == "token"


def serve_many(models: list, loads, setups: list[Setup], *, answer=None, **options) -> Comparison:
    """Every model on every setup under the same loads and lengths, side by side (a diffusion
    model and the AR model it would replace). The answer length defaults to the first model's;
    beside other models, a model whose own decoding is AR decodes AR whatever the decoding
    options say (they describe the diffusion models)."""
    from dataclasses import replace

    from ..inputs.models import resolve_model

    specs = [resolve_model(m) if isinstance(m, str) else m for m in models]
    if not specs or not setups:
        raise UsageError("serve: give a model and a deployment")
    if len(specs) * len(setups) > 64:
        raise UsageError(f"serve: {len(specs) * len(setups)} deployments; compare at most 64 at once")
    check_simulations(len(specs) * len(setups), loads, options.get("requests", DEFAULT_REQUESTS),
                      options.get("find_max_rate", False))
    from .decodings import check_floor_task

    for floor in dict.fromkeys(s.min_accuracy for s in setups if s.min_accuracy is not None):
        check_floor_task(specs, floor[0])
    if answer is None and not any(isinstance(ld, TraceReplay) for ld in (loads if isinstance(loads, list) else [loads])):
        answer = specs[0].sampler.gen if specs[0].sampler else 256
    results = []
    for spec in specs:
        for setup in setups:
            if len(specs) > 1 and own_decoding_is_ar(spec):
                setup = replace(setup, scheme=None, block=None, tpf=None, steps=None, tpf_spread=None)
            results.append(serve(spec, loads, setup, answer=answer, **options))
    behaviour.warn_if_no_chunks(max((s.prefill_chunk or 0 for s in setups), default=None),
                                [r.deployment.get("prefill_chunk_tokens") for r in results])
    behaviour.warn_if_no_front_end(next((s.api_servers for s in setups if s.api_servers is not None), None),
                                   [r.deployment.get("api_servers") for r in results])
    mark_pareto([p for r in results for p in r.points])
    return Comparison(results)
