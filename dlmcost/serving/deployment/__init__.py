"""`dlmcost serve`: what a fixed deployment delivers under a given load.

A deployment is a model on R replicas of TP (x EP) GPUs, at a precision, with a decoding (scheme,
block, tokens per forward and its spread), a limit on running requests per replica, a release
policy and a software stack. `prepare` costs its passes once (steptime.py, the engine through
the API) for the request length classes of the load; `evaluate` simulates every replica under a
load (loads.py) as `plan` simulates its candidates (behaviour.py) and reports what serving
benchmarks report. `serve` does that for a list of loads and marks the Pareto front of tokens/s
per GPU against tokens/s per user; `max_rate` bisects for the highest rate within targets.

Replicas: open-loop arrivals and traces are dealt round-robin (a load balancer's default); the
users of a closed loop (and the parallel slots of a batch job) are split as evenly as whole
numbers allow, each replica its share of the requests. An open load's replicas are alike: one is
simulated with all the requests its own (measure.evaluate).

The package, one module a part (each imports only those above it):

    prepared.py        the deployment as given (Setup) and as costed for its length classes (Prepared)
    measure.py         one load: every replica simulated, and what benchmarks report (Point)
    capacity.py        saturation (every batch always full) and the highest rate within targets
    bands.py           a load point's metrics at the two ends of its stack's error band
    request_counts.py  the requests a call simulates, refused over their limits before any runs
    __init__.py        `serve` and `serve_many`, putting the parts together, and their results
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ...analysis import limits
from ...engine.schemes import get_scheme
from ...errors import DlmcostWarning, TraceError, UsageError
from ...inputs.error_bands import band_for
from ...safe_text import shown
from .. import behaviour
from ..behaviour import DEFAULT_MAX_RUNNING, DEFAULT_RELEASE  # serve's defaults, documented here
from ..loads import ARRIVALS, BatchJob, ClosedLoop, OpenLoop, TraceReplay, check_cv_taken
from ..simulate import SimulationWork
from ..targets import Targets
from ..traffic import CACHED_FROM_TRACE, parse_lengths, warn_beyond_context
from .bands import FIRST_TOKEN_INTERVALS, INTERVAL_METRICS, intervals
from .capacity import MAX_RATE_STEPS, max_rate, saturation, saturation_rate, flag_memory_binds, why_not
from .measure import DEFAULT_REQUESTS, SUSTAIN_FRACTION, Point, evaluate, mark_pareto, stats
from .prepared import Prepared, ServeSetup, Setup, describe, prepare
from .request_counts import check_requests, check_simulations, simulated_requests

# the names this module had before it became a package, each still importable from here
__all__ = ["DEFAULT_MAX_RUNNING", "DEFAULT_RELEASE", "DEFAULT_REQUESTS", "FIRST_TOKEN_INTERVALS", "INTERVAL_METRICS",
           "MAX_RATE_STEPS", "SUSTAIN_FRACTION", "BatchJob", "ClosedLoop", "Comparison", "OpenLoop", "Point",
           "Prepared", "ServeResult", "ServeSetup", "Setup", "TraceReplay", "check_requests", "check_simulations",
           "describe", "evaluate", "intervals", "mark_pareto", "max_rate", "own_decoding_is_ar", "prepare",
           "saturation", "saturation_rate", "serve", "serve_many", "simulated_requests", "stats", "why_not"]


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
        from ...dataframes import from_records

        return from_records([dict(number=i, deployment=r.deployment, **p.record())
                             for i, r in enumerate(self.results, 1) for p in r.points], drop=("misses",))


def serve(model, loads, setup: Setup | None = None, *, prompt=None, answer=None, targets: Targets | None = None,
          find_max_rate: bool = False, arrival: str = "poisson", cv: float = 1.0, requests: int = DEFAULT_REQUESTS,
          seed: int = 0, hardware: list[str] | None = None, work: SimulationWork | None = None) -> ServeResult:
    """What a fixed deployment delivers under each load (a `loads` object or a list of them).
    `work`: the preemptions its simulations may run, shared with other deployments' (None: its own
    `limits.MAX_PREEMPTIONS`, read when called).

    Lengths: `prompt` / `answer` as `plan` takes them (a count, percentiles, '@FILE'; prompt default
    256, answer default: the model's sampler length), except for a `TraceReplay`, which brings its
    own (lengths given beside it are refused: they would be ignored)."""
    from ...inputs.models import resolve_model

    setup = setup or Setup()
    loads = _first_of_each(list(loads) if isinstance(loads, (list, tuple)) else [loads])
    if not loads and not find_max_rate:
        raise UsageError("serve: give a load (--concurrency, --rate, --job or --trace)")
    check_simulations(1, loads, requests, find_max_rate)
    _check_arrivals(arrival, cv, loads, find_max_rate)
    spec = resolve_model(model) if isinstance(model, str) else model
    replays = [ld for ld in loads if isinstance(ld, TraceReplay)]
    if replays and len(loads) > 1:
        raise UsageError("serve: a trace is replayed alone, not in a list of loads")
    if replays and (prompt is not None or answer is not None):
        raise UsageError("a trace brings its own prompt and answer lengths: give --prompt and --answer without --trace")
    from_trace = setup.cached_prompt == CACHED_FROM_TRACE
    if from_trace:
        setup = _with_trace_cache(setup, replays)
    elif replays and replays[0].hash_ids_unread:  # (unused here: said, not refused)
        warnings.warn(f"{replays[0].hash_ids_unread}: the trace's hash_ids are not read (--cached-prompt trace "
                      "cannot use them)", DlmcostWarning, stacklevel=2)
    if replays:
        lengths = (replays[0].prompt_tokens, replays[0].answer_tokens)
    else:
        rng = np.random.default_rng(seed)
        answer = answer if answer is not None else (spec.sampler.gen if spec.sampler else 256)
        n = max([requests] + [ld.requests for ld in loads if isinstance(ld, BatchJob)])
        prompt = prompt if prompt is not None else 256
        p_d, a_d = parse_lengths(prompt, "prompt lengths"), parse_lengths(answer, "answer lengths", least=1)
        lengths = (p_d.sample(rng, n), np.maximum(a_d.sample(rng, n), 1.0))
    warn_beyond_context(spec.id, spec.max_context, *lengths)
    work = work if work is not None else SimulationWork(limits.MAX_PREEMPTIONS)
    prep = prepare(spec, lengths, setup, hardware=hardware, work=work)
    points = [evaluate(prep, ld, requests=requests, seed=seed, targets=targets) for ld in loads]
    flag_memory_binds(prep, loads, points)
    band = band_for(prep.stack, prep.vendor)
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
    if share is None and replays and replays[0].hash_ids_unread:
        raise TraceError(f"{replays[0].hash_ids_unread}: --cached-prompt trace needs them")
    if share is None:
        raise UsageError("--cached-prompt trace: give a --trace whose rows carry hash_ids (a Mooncake trace)")
    return replace(setup, cached_prompt=tuple(share.tolist()))



def own_decoding_is_ar(spec) -> bool:
    """The model's own decoding streams tokens (autoregressive), or it has no sampler settings."""
    return spec.sampler is None or get_scheme(spec.sampler.scheme).stops == "token"


def _check_arrivals(arrival: str, cv: float, loads: list, find_max_rate: bool) -> None:
    """`arrival` and `cv` shape the open-loop arrivals of the maximum-rate search (each OpenLoop carries
    its own): refused where nothing would take them, as the command line refuses --arrival and --cv."""
    if arrival not in ARRIVALS:
        raise UsageError(f"arrivals: choose one of {', '.join(ARRIVALS)}, got {shown(repr(arrival), 40)}")
    check_cv_taken(arrival, cv)
    if (arrival != "poisson" or cv != 1.0) and not find_max_rate and not any(isinstance(ld, OpenLoop) for ld in loads):
        raise UsageError("--arrival goes with --rate or --max-rate (open-loop arrivals)")


def _first_of_each(items: list) -> list:
    """Each item once, in the order first given: a model, setup or load named twice (two spellings
    of one model id, two aliases of one GPU, a rate repeated) is simulated and listed once."""
    out: list = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def _distinct_setups(setups: list[Setup], hardware) -> list[Setup]:
    """The setups told apart by the GPU each names (its key: 'h100' and 'h100-sxm' are one part)."""
    from dataclasses import replace

    from ...inputs.hardware import HardwareDB

    db = HardwareDB.load(hardware)
    keyed = {}
    for setup in setups:
        keyed.setdefault(replace(setup, gpu=db.get(setup.gpu).key), setup)
    return list(keyed.values())


def serve_many(models: list, loads, setups: list[Setup], *, answer=None, **options) -> Comparison:
    """Every model on every setup under the same loads and lengths, side by side (a diffusion
    model and the AR model it would replace). The answer length defaults to the first model's;
    beside other models, a model whose own decoding is AR decodes AR whatever the decoding
    options say (they describe the diffusion models)."""
    from dataclasses import replace

    from ...inputs.models import resolve_model

    specs = _first_of_each([resolve_model(m) if isinstance(m, str) else m for m in models])
    setups = _distinct_setups(setups, options.get("hardware"))
    if not specs or not setups:
        raise UsageError("serve: give a model and a deployment")
    if len(specs) * len(setups) > 64:
        raise UsageError(f"serve: {len(specs) * len(setups)} deployments; compare at most 64 at once")
    check_simulations(len(specs) * len(setups), loads, options.get("requests", DEFAULT_REQUESTS),
                      options.get("find_max_rate", False))
    from ..decodings import check_floor_task

    for floor in dict.fromkeys(s.min_accuracy for s in setups if s.min_accuracy is not None):
        check_floor_task(specs, floor[0])
    if answer is None and not any(isinstance(ld, TraceReplay) for ld in (loads if isinstance(loads, list) else [loads])):
        answer = specs[0].sampler.gen if specs[0].sampler else 256
    results = []
    work = SimulationWork(limits.MAX_PREEMPTIONS)  # one count for every deployment's simulations
    for spec in specs:
        for setup in setups:
            if len(specs) > 1 and own_decoding_is_ar(spec):
                setup = replace(setup, scheme=None, block=None, tpf=None, steps=None, tpf_spread=None)
            results.append(serve(spec, loads, setup, answer=answer, work=work, **options))
    behaviour.warn_if_no_chunks(max((s.prefill_chunk or 0 for s in setups), default=None),
                                [r.deployment.get("prefill_chunk_tokens") for r in results])
    behaviour.warn_if_no_front_end(next((s.api_servers for s in setups if s.api_servers is not None), None),
                                   [r.deployment.get("front_end_us_per_request") for r in results])
    behaviour.warn_if_no_recv_interval(max((s.recv_interval or 1 for s in setups), default=None),
                                       [r.deployment.get("recv_interval", 1) for r in results],
                                       [r.deployment.get("recv_interval_source") for r in results])
    behaviour.warn_if_no_spread(max((s.tpf_spread or 0.0 for s in setups), default=0.0),
                                [r.deployment["tpf_spread"] for r in results])
    from ..decodings import warn_if_task_unread

    warn_if_task_unread(next((s.task for s in setups if s.task is not None), None),
                        [(r.deployment.get("published") or {}).get("tpf_task") for r in results])
    mark_pareto([p for r in results for p in r.points])
    return Comparison(results)
