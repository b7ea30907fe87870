"""The deployment search: for each (GPU, TP, precision, K/V format, decoding, batch limit), the fewest
data-parallel replicas whose simulated service meets the targets (replicas/), and what they
cost; those meeting the targets ranked by $/Mtok, the Pareto front marked, the absurd ones left out.

The answer is what searching every candidate to the end gives (`prune=False`, the reference a
test holds the search to); the search leaves out only work that cannot change it:

- candidates are searched cheapest first by a lower bound on their cost that needs no simulation
  (the fewest replicas an upper bound on a replica's throughput allows), so that the cheapest
  deployment is known early;
- a candidate whose bound is already over ABSURD_RATIO x the cheapest deployment found is absurd
  without a simulation when its lone request meets the latency targets and no cost or GPU target
  is set: its search would end meeting the targets (replicas/), at a cost no lower than the
  bound; a search is stopped, for the same reason, once its answer is known to cost that much;
- a candidate whose lone request misses a latency target misses them at any size: once a
  deployment meets the targets it is not simulated, since the nearest miss is reported only when
  none does (with none, nothing is left out);
- the sustained load (a simulation or two per deployment) is found for the deployments an output
  shows (`ranked`: the first so many of the ranking, with every one of the same $/Mtok as the
  last of them, which $/Mtok at capacity puts in order), or for all of them; the error band's
  ends (two more replica searches) for the first so many rows after that, or for all; several
  models side by side, for the first rows of their one ranking (`defer`, `rank_rows`);
- with `ranked`, a candidate whose cost bound is over the `ranked`-th cheapest found cannot be
  among the rows shown: only whether it meets the targets short of being absurd is needed (the
  count of rows meeting them), which `meets_within` settles with one simulation at most.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..analysis import limits
from ..inputs.hardware import GPU
from ..engine.memory import DEFAULT_MEM_FRACTION
from ..engine.schemes import autoregressive_scheme
from ..inputs.error_bands import band_for
from .side_by_side import Ahead, map_rows
from .replicas import (ABSURD, MEETS, Candidate, Found, Pricing, band_ends, fewest_replicas, floor_fails,
                       mean_window_tokens, meets_within, open_loop_usd_per_mtok, request_classes, sustained_rps)
from .results import ABSURD_RATIO, Deployment, Targets, mark_absurd, pareto_front, rank_key, usd_per_hour, usd_per_mtok
from ..serving import behaviour
from ..serving.behaviour import DEFAULT_REQUESTS, batch_grid
from ..serving.simulate import SimulationWork, scaled
from ..serving.steptime import Decoding, pass_table, table_passes
from ..serving.traffic import RequestSample, Traffic, sample_requests, warn_beyond_context

BOUND_MARGIN = 1.02  # the throughput bound is taken this much higher, as its lower bound on replicas


@dataclass(frozen=True)
class SearchSpace:
    gpus: list[GPU]
    tps: list[int]
    precisions: list[str]
    decodings: list[Decoding]
    max_batches: list[int]  # running limits searched; empty: each decoding's stack's own
    left_out: list[GPU] = field(default_factory=list)  # default GPUs the stack does not run on
    prefill_chunk: int | None = None  # AR prompts' token budget a step beside the decodes (0: none; None: the stack's)
    api_servers: int | None = None  # the front end's API servers per replica (None: the stack's)
    # the K/V cache number formats searched (each candidate has one of them; the engines' default: bf16)
    kv_dtypes: list[str] = field(default_factory=lambda: ["bf16"])
    mem_fraction: float = DEFAULT_MEM_FRACTION  # the share of each GPU's memory every candidate may use
    recv_interval: int | None = None  # decode iterations between the scheduler's receives (token-streaming decodings'; None: not given, 1)
    # every candidate at its stack's error band's slower end (`plan --conservative`, `slow_end_clock`)
    conservative: bool = False


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
    unlisted: int = 0  # deployments meeting the targets past the rows asked for (`ranked`), counted only
    pending: list = field(default_factory=list)  # `defer`: the rows (Found, Setting) the caller ranks (`rank_rows`)
    cached: list[str] = field(default_factory=list)  # the decodings a prefix cache shortens (traffic.cached_prompt)

    def to_pandas(self, what: str = "deployments"):
        """A pandas DataFrame (the `pandas` extra): one row per deployment meeting the targets,
        cheapest first (`what="ar_baseline"`: the AR baseline's), the keys of `plan --format json`."""
        from ..dataframes import from_records

        return from_records([d.record() for d in (self.baseline if what == "ar_baseline" else self.deployments)],
                            drop=("misses",))


def _throughput_bound(c: Candidate, sample: RequestSample) -> float:
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


def _bound(c: Candidate, sample: RequestSample, traffic: Traffic, pricing: Pricing,
           throughput: float) -> tuple[int, float, int]:
    """(0 priced / 1 not, a lower bound on $/Mtok at the offered load, or on the GPUs unpriced,
    the GPUs it is at); the $/Mtok bound grows in proportion to the GPUs. Open loop: the $/Mtok a
    deployment of the fewest replicas the throughput bound allows would report, computed as it
    computes it (the measured window's answer tokens), so that it is a true lower bound, which
    `_Shown.past` relies on; closed loop: an ordering only."""
    price = pricing.usd.get(c.gpu.key)
    if not traffic.closed_loop:
        fewest = _fewest_by_bound(throughput, traffic)
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


def _canvases(decoding: Decoding, sample: RequestSample) -> tuple[list[int], list[int]]:
    """The prompt classes, and the canvas each answer class runs (`behaviour.canvases`)."""
    prompts = [int(v) for v in sample.prompt_values]
    return prompts, behaviour.canvases(decoding, [int(v) for v in sample.answer_values])


def caches(pol: behaviour.Policy, table) -> bool:
    """Whether a prefix cache shortens this decoding's prefill under its stack (`behaviour.cache_applies`):
    the prompt prefilled in one pass of its own or under a budget, first-done release."""
    return behaviour.cache_applies(pol.prompt_prefill if any(table.lead or []) else "none", pol.release)


def running_limits(space: SearchSpace, pol: behaviour.Policy) -> list[int]:
    """The running limits searched for a decoding: the space's, or its stack's own (the policy's)."""
    return space.max_batches or [pol.max_running]


def _table_args(space: SearchSpace, decoding: Decoding, prompts: list[int], canvases: list[int],
                pol: behaviour.Policy) -> tuple:
    """`pass_table`'s positional arguments: every GPU, precision, TP, prompt, distinct canvas and batch."""
    return (decoding, [g.name for g in space.gpus], space.precisions, space.tps, prompts, sorted(set(canvases)),
            batch_grid(pol.in_flight_cap(max(running_limits(space, pol)))))


def _candidates(model, space: SearchSpace, decoding: Decoding, sample: RequestSample, efficiency: str,
                stack: str | None, hardware: list[str] | None, eager: bool = False,
                cached_prompt: float = 0.0, work: SimulationWork | None = None) -> tuple[list[Candidate], int]:
    prompts, canvases = _canvases(decoding, sample)
    answers = [int(v) for v in sample.answer_values]
    stack = behaviour.stack_name(stack, decoding, eager)  # the decoding's engine path unless one is given
    pol = behaviour.policy(stack_profile(stack, efficiency), decoding,  # its running limit: max_batch's
                           prefill_chunk=space.prefill_chunk, api_servers=space.api_servers, layers=model.n_layers,
                           recv_interval=space.recv_interval, mla_layers=model.n_mla_layers)
    # one table per K/V format: the format changes what fits in memory and what each pass reads; its
    # batches reach the largest running limit the stack takes on any of the GPUs (vLLM's by GPU)
    widest = pol.widest_on(space.gpus)
    tables = {kv: pass_table(model, *_table_args(space, decoding, prompts, canvases, widest), efficiency=efficiency,
                             stack=stack, hardware=hardware, max_passes=None,  # plan checked the total of its sweeps
                             kv_dtype=kv, mem_fraction=space.mem_fraction) for kv in space.kv_dtypes}
    tokens = np.tile(sample.answer_values.astype(float), len(prompts))  # useful tokens per request class
    cls = request_classes(sample)
    out, skipped = [], 0
    drawn: dict[tuple, object] = {}  # the requests' passes depend on the classes' passes and blocks alone
    general = pol
    for gi, g in enumerate(space.gpus):
        pol = general.on_gpu(g.memory_bytes, g.names)  # (the stack's prefill chunk and running limit for this GPU)
        for pi, prec in enumerate(space.precisions):
            for kv, pt in tables.items():
                for ti, tp in enumerate(space.tps):
                    for mb in running_limits(space, pol):
                        rt = behaviour.request_table(pt, gi, pi, ti, decoding, prompts, answers, mb, pol)
                        if rt is None:
                            skipped += 1
                            continue
                        t = rt.table
                        key = (rt.block_streaming, tuple(t.nfe), tuple(t.lead or ()), tuple(t.blocks or ()))
                        if key not in drawn:
                            drawn[key] = behaviour.request_passes(rt, cls, answers=sample.answer_tokens)
                        clock, first_block_scale = slow_end_clock(stack, g.vendor) if space.conservative else (1.0, 1.0)
                        if clock != 1.0:
                            t = scaled(t, clock)
                        out.append(Candidate(g, prec, tp, decoding, mb, t, tokens, rt.batch_limit, pol.release,
                                             drawn[key], pol.first_block_outside_limit,
                                             uncached=1.0 - cached_prompt if caches(pol, t) else 1.0,
                                             front_end=pol.front_end.scaled(clock) if pol.front_end else None,
                                             recv_interval=pol.recv_interval, kv_dtype=kv,
                                             memory_fits=rt.memory_fits, work=work, clock=clock,
                                             first_block_scale=first_block_scale))
    return out, skipped


def slow_end_clock(stack: str, vendor: str) -> tuple[float, float]:
    """`plan --conservative`'s clock for a stack on a vendor's parts: every step as many times as
    long as predicted as its error band's slower end says (the 90th percentile of predicted /
    measured speed over the published measurements it was not fitted on: nine in ten of them ran at
    least that fast), and each first block further by the first-token band's excess there
    (`ErrorBand.first_token_scales`); (1, 1), the prediction, for a stack without a band."""
    band = band_for(stack, vendor)
    if band is None:
        return 1.0, 1.0
    return band.high, band.first_token_scales()[1]


def candidate_count(space: SearchSpace, baseline: bool = False) -> tuple[int, str]:
    """The candidate deployments `plan` searches in this space, counted before any is built, and
    the product they come from: GPUs x TP sizes x precisions (x K/V formats, named when several
    are searched) x (decodings, plus the AR baseline with `baseline` when a decoding is not
    autoregressive) x batch limits (each decoding's stack's own one when none is given)."""
    decodings = len(space.decodings) + (baseline and any(not d.autoregressive for d in space.decodings))
    factors = {"GPUs": len(space.gpus), "TP sizes": len(space.tps), "precisions": len(space.precisions),
               **({"K/V formats": len(space.kv_dtypes)} if len(space.kv_dtypes) > 1 else {}),
               "decodings": decodings, "batch limits": len(space.max_batches) or 1}
    return math.prod(factors.values()), " x ".join(f"{n:,} {name}" for name, n in factors.items())


def stack_profile(stack: str | None, efficiency: str, eager: bool = False):
    """The stack profile the passes are costed with (None: the bare roofline), for its serving
    fields; `eager`: run without CUDA graphs (refused where the stack has no eager profile)."""
    from ..analysis.prepare import resolve_stack
    from ..inputs.profiles import load_profile

    return resolve_stack(stack, load_profile(efficiency), eager=eager)


def baseline_decoding() -> Decoding:
    """The AR baseline's decoding: one token per pass."""
    return Decoding(autoregressive_scheme(), None, 1.0)


def decoding_policy(stack: str | None, efficiency: str, decoding: Decoding, eager: bool = False,
                    prefill_chunk: int | None = None, chunk_given_as: str = "option",
                    api_servers: int | None = None, servers_given_as: str = "option",
                    layers: int = 0, recv_interval: int | None = None, mla_layers: int = 0) -> behaviour.Policy:
    """How a decoding is served: on its stack (the one given, else its kind's default), with that
    stack's release and running limit, and the chunked prefill, API servers and receive interval
    given (else the stack's; the interval, 1), as `serve` serves it; `layers` and `mla_layers`: the
    model's (its front end's first-token delay)."""
    return behaviour.policy(stack_profile(behaviour.stack_name(stack, decoding), efficiency, eager), decoding,
                            prefill_chunk=prefill_chunk, prefill_chunk_given_as=chunk_given_as,
                            api_servers=api_servers, api_servers_given_as=servers_given_as, layers=layers,
                            recv_interval=recv_interval, mla_layers=mla_layers)




@dataclass
class _Cheapest:
    """The cheapest deployment meeting the targets found so far in one set (plan or AR baseline):
    its $/Mtok (of those with a price) and its GPUs (of all), what `mark_absurd` compares with."""

    usd_per_mtok: float = math.inf
    gpus: float = math.inf

    def add(self, d: Deployment) -> None:
        if d.usd_per_mtok is not None:
            self.usd_per_mtok = min(self.usd_per_mtok, d.usd_per_mtok)
        self.gpus = min(self.gpus, d.gpus)


def _absurd_from(c: Candidate, sample: RequestSample, traffic: Traffic, pricing: Pricing,
                 cheapest: _Cheapest) -> Callable[[int], bool]:
    """Whether a deployment of R or more replicas of `c` meeting the targets would be absurd
    (`mark_absurd`) whatever else is found, since the cheapest can only get cheaper: its $/Mtok
    over ABSURD_RATIO x the cheapest's (at the offered load, as the deployment will compute it;
    closed loop: a lower bound on it, from the most requests/s the users can send), or, without a
    price, its GPUs over ABSURD_RATIO x the fewest."""
    tokens = mean_window_tokens(c, sample)
    price = pricing.usd.get(c.gpu.key)
    if price is None:
        return lambda r: r * c.tp > ABSURD_RATIO * cheapest.gpus
    if not traffic.closed_loop:
        return lambda r: open_loop_usd_per_mtok(c, r, traffic, tokens, pricing) > ABSURD_RATIO * cheapest.usd_per_mtok
    # each user asks at most once per think time + its shortest request (NFE x the fastest pass);
    # a tenth more, as a margin for a rate measured over a window
    fastest = min(float(np.asarray(c.table.pass_s)[:, 1:].min()), float(np.asarray(c.table.first_pass_s)[:, 1:].min()))
    nfe = np.asarray(c.table.nfe)
    if c.uncached < 1:  # a cached prompt may take a single step of its budget, not the k it takes whole
        nfe = nfe - np.asarray(c.table.prompt_steps) + 1
    most = 1.1 * traffic.users / (traffic.think_s + float(np.min(nfe)) * fastest)
    return lambda r: usd_per_mtok(usd_per_hour(r * c.tp, price), most * tokens) > ABSURD_RATIO * cheapest.usd_per_mtok


class _Shown:
    """The `ranked` cheapest $/Mtok among the deployments found to meet the targets (a max-heap of
    their negatives), and whether a candidate is past them: its cost bound over the last of them,
    so that it ranks after every row an output shows whatever its search would find (rows found
    later only push the last one down). None: every row is shown."""

    def __init__(self, ranked: int | None):
        self.ranked = ranked
        self.costs: list[float] = []

    def add(self, d: Deployment) -> None:
        if self.ranked is None or d.usd_per_mtok is None:
            return
        heapq.heappush(self.costs, -d.usd_per_mtok)
        if len(self.costs) > self.ranked:
            heapq.heappop(self.costs)

    def past(self, bound: tuple[int, float, int]) -> bool:
        unpriced, cost, _ = bound
        return (self.ranked is not None and not unpriced and len(self.costs) == self.ranked
                and cost > -self.costs[0])


def _fewest_by_bound(throughput: float, traffic: Traffic) -> int:
    """The fewest replicas an upper bound on one replica's throughput allows (at most the fewest
    the simulated one does)."""
    return 1 if traffic.closed_loop else math.floor(traffic.rate / (throughput * BOUND_MARGIN)) + 1


def _provisional_key(d: Deployment) -> tuple:
    """`rank_key` without $/Mtok at capacity: the ranking up to its ties."""
    return (1, d.gpus, d.p95_latency_s) if d.usd_per_mtok is None else (0, d.usd_per_mtok)


@dataclass(frozen=True)
class Setting:
    """What a deployment found by one model's search is searched again under (its sustained load,
    its error band's ends): that search's requests, traffic, targets, prices and stack."""

    sample: RequestSample
    traffic: Traffic
    targets: Targets
    pricing: Pricing
    stack: str | None
    eager: bool = False


def _to_sustain(rows: list[tuple[Found, Setting]], ranked: int | None) -> list[tuple[Found, Setting]]:
    """The deployments whose sustained load the output needs: all (`ranked` None), else the first
    `ranked` of the ranking and every other one of the same $/Mtok as the last of them (their
    order is $/Mtok at capacity's)."""
    ordered = sorted(rows, key=lambda row: _provisional_key(row[0].deployment))
    if ranked is None or len(ordered) <= ranked:
        return ordered
    last = ordered[ranked - 1][0].deployment
    ties = [row for row in ordered[ranked:]
            if last.usd_per_mtok is not None and row[0].deployment.usd_per_mtok == last.usd_per_mtok]
    return ordered[:ranked] + ties


def rank_rows(rows: list[tuple[Found, Setting]], ranked: int | None, jobs: int | None = None) -> list[Deployment]:
    """The deployments ranked (`rank_key`): the sustained load of those an output shows first,
    which breaks the ties of $/Mtok, then the error band's ends of the first `ranked`. Each row's
    two searches are its own: they run on up to `jobs` cores (None: the usable ones; side_by_side.py)."""
    sustain = _to_sustain(rows, ranked)
    for (f, _), rps in zip(sustain, _each_row(_sustained, sustain, jobs)):  # the load each sustains, for those shown
        d = f.deployment
        d.sustained_rps = rps
        if d.usd_per_hour is not None:
            d.usd_per_mtok_at_capacity = usd_per_mtok(d.usd_per_hour, d.sustained_rps * d.output_tokens_per_s
                                                      / d.served_rps)
    rows = sorted(rows, key=lambda row: rank_key(row[0].deployment))
    shown = rows[:ranked]  # what the rows shown take were the step times off as far as the band says
    for (f, _), ends in zip(shown, _each_row(_band_ends, shown, jobs)):
        if ends is not None:
            f.deployment.intervals = ends
    return [f.deployment for f, _ in rows]


def _sustained(row: tuple[Found, Setting]) -> float:
    f, s = row
    return sustained_rps(f.candidate, s.sample, s.traffic, s.targets, f.deployment, f.capacity, f.points)


def _band_ends(row: tuple[Found, Setting]) -> dict | None:
    f, s = row
    band = band_for(behaviour.stack_name(s.stack, f.candidate.decoding, s.eager), f.candidate.gpu.vendor)
    return None if band is None else band_ends(f, s.sample, s.traffic, s.targets, s.pricing, band)


def _each_row(fn: Callable, rows: list[tuple[Found, Setting]], jobs: int | None) -> list:
    """fn of each row (side_by_side.map_rows), the preemptions the workers simulated counted against
    the rows' shared limit as if they had run here (one limit: else the rows run in turn)."""
    return _each_candidate(fn, rows, [f.candidate for f, _ in rows], lambda: rows[0][1].sample, jobs)


def _each_candidate(fn: Callable, rows: list, candidates: list[Candidate], sample: Callable[[], RequestSample],
                    jobs: int | None) -> list:
    """fn of each row, the row's search that of its candidate (`_each_row`; plan's rows past those
    shown); `sample()`: the requests they simulate, named where the command is refused."""
    works = {id(c.work): c.work for c in candidates if c.work is not None}
    if len(works) > 1:
        jobs = 1  # (here each row's searches count against their own limit as they run)
    work = next(iter(works.values())) if len(works) == 1 else None
    spent = None if work is None or work.limit is None else (lambda: work.limit - work.left)
    out, used = map_rows(fn, rows, jobs, spent)
    if used:
        work.spend(used)
        if work.left < 0:
            work.refuse(candidates[0].table.mem_share, request_classes(sample()))
    return out


class _Turns:
    """A plan's candidates searched in turn, cheapest bound first (`search_all`), and what they found:
    the deployments meeting the targets (`meeting`) and the misses of each set (plan, baseline),
    the cheapest of those meeting them, the candidates left out as absurd without their search's
    answer (`left_out`) and the rows past those an output shows (`past`, with their fewest replicas
    by the bound), whose verdict alone the caller finds. `prune`: skip and stop the searches whose
    answer cannot change the output (a miss once a deployment meets the targets, and unless `absurd`
    an absurd cost or a row past those shown); else every candidate is searched to the end."""

    def __init__(self, model_id: str, candidates: list[tuple[str, Candidate]], sample: RequestSample,
                 traffic: Traffic, targets: Targets, pricing: Pricing, ranked: int | None, prune: bool,
                 absurd: bool, progress: Callable[[int, int], None] | None):
        self.model_id, self.candidates, self.sample, self.traffic, self.targets, self.pricing = \
            model_id, candidates, sample, traffic, targets, pricing
        self.prune, self.progress = prune, progress
        self.give_up = prune and not absurd  # absurd costs pruned (else searched and kept: `plan`'s `absurd`)
        self.meeting: dict[str, list[Found]] = {"plan": [], "baseline": []}
        self.misses: dict[str, list[Deployment]] = {"plan": [], "baseline": []}
        self.cheapest = {"plan": _Cheapest(), "baseline": _Cheapest()}
        self.left_out = 0  # candidates known to be absurd without their search's answer
        self.capped = any(getattr(targets, name) is not None for name in ("max_gpus", "max_usd_per_mtok"))
        # the rows an output shows (`ranked`, open loop): the cheapest found so far, and the candidates
        # that cannot be among them (their cost bound over the last shown's $/Mtok)
        self.shown = {name: _Shown(ranked if not traffic.closed_loop else None) for name in self.meeting}
        self.past: dict[str, list[tuple[Candidate, int]]] = {name: [] for name in self.meeting}

    def search(self, k: int, cheapest_usd: float, cheapest_gpus: float):
        """Candidate k's search, the cheapest found before it as given (here, or in a worker: its
        answer without the candidate, which stays here)."""
        c = self.candidates[k][1]
        give_up = _absurd_from(c, self.sample, self.traffic, self.pricing, _Cheapest(cheapest_usd, cheapest_gpus)) \
            if self.give_up else None
        found = fewest_replicas(c, self.sample, self.traffic, self.targets, self.pricing, give_up)
        return (found.deployment, found.capacity, found.points) if isinstance(found, Found) else found

    def decide(self, k: int, throughput: float, bound: tuple) -> tuple[bool, object, tuple | None]:
        """(whether candidate k needs its search, else its answer, and where it is a row past those
        shown, its entry in `past`), from what was taken so far; nothing changed here."""
        name, c = self.candidates[k]
        give_up = self._give_up(k)
        lone_misses = floor_fails(c, self.sample, self.targets)
        free = give_up is not None and not self.capped and not lone_misses  # an answer known by the bound alone
        if self.prune and lone_misses and self.meeting["plan"]:
            return False, None, None  # a miss (at any size), and no miss is reported once a deployment meets the targets
        if free and give_up(_fewest_by_bound(throughput, self.traffic)):
            return False, ABSURD, None  # it would meet the targets, but at a cost over the bound
        if free and self.shown[name].past(bound):
            # a row past those shown: only whether it meets the targets is needed (the caller's)
            return False, None, (c, _fewest_by_bound(throughput, self.traffic))
        return True, None, None

    def _give_up(self, k: int) -> Callable[[int], bool] | None:
        name, c = self.candidates[k]
        return _absurd_from(c, self.sample, self.traffic, self.pricing, self.cheapest[name]) if self.give_up else None

    def _search_args(self, k: int) -> tuple[int, float, float]:
        """Candidate k's search's arguments as what was taken so far gives them."""
        cheapest = self.cheapest[self.candidates[k][0]]
        return k, cheapest.usd_per_mtok, cheapest.gpus

    def _same_path(self, k: int, answer) -> bool:
        """Whether candidate k's search, started on an older cheapest, took the path its turn's would
        have: the search asks give_up only of replica counts up to one past its answer's, and give_up
        holds from some count on, so where it does not hold one past the answer at the cheapest now,
        it held at none of them, then or now (a search stopped as absurd: not vouched for; one whose
        replica completes no request asked it nothing)."""
        if answer is None:
            return True
        if not isinstance(answer, tuple):
            return False
        give_up = self._give_up(k)
        return give_up is None or self.capped or not give_up(answer[0].replicas + 1)

    def take(self, done: int, k: int, answer) -> None:
        """Candidate k's answer, in its turn."""
        name, c = self.candidates[k]
        found = Found(c, *answer) if isinstance(answer, tuple) else answer
        if found == ABSURD:
            self.left_out += 1
        elif found is not None:
            found.deployment.model = self.model_id
            if found.deployment.meets:
                self.meeting[name].append(found)
                self.cheapest[name].add(found.deployment)
                self.shown[name].add(found.deployment)
            else:
                self.misses[name].append(found.deployment)
        if self.progress:
            self.progress(done + 1, len(self.candidates))

    def search_all(self, order: list[int], throughput: list[float], bounds: list[tuple], jobs: int | None,
                   work: SimulationWork) -> None:
        """Every candidate in `order`, each decided, searched where needed and taken in its turn on
        what was taken before it, as one after another. The searches may run on the machine's cores
        ahead of their turn (side_by_side.Ahead): a candidate whose search what was taken so far
        does not rule out starts on it; in its turn it is decided again, its answer dropped where
        its turn rules the search out (a search started ahead prunes less: what it spent is not
        counted), and run again here where its turn's cheapest could have changed its path."""
        turns: deque = deque()  # (done, k, its search's handle or None, its decision where it is its turn's)
        with Ahead(self.search, len(order), jobs, work) as ahead:
            def take_oldest() -> None:
                done, k, handle, decision = turns.popleft()
                needed, answer, past = decision or self._decision(k, throughput[k], bounds[k])
                if past is not None:
                    self.past[self.candidates[k][0]].append(past)
                if not needed:
                    ahead.drop(handle)
                elif handle is None:
                    answer = self.search(*self._search_args(k))
                else:
                    answer = ahead.take(handle, self._search_args(k), lambda found: self._same_path(k, found))
                self.take(done, k, answer)

            def take_ready() -> None:
                while turns and ahead.ready(turns[0][2]):
                    take_oldest()

            for done, k in enumerate(order):
                take_ready()
                own = not turns  # nothing before it waits for its turn: what it is decided on now is its turn's
                decision = self._decision(k, throughput[k], bounds[k])
                if decision[0]:
                    while ahead.full():  # a worker free, the oldest taken where too many wait for their turn
                        take_oldest() if ahead.backlogged() else ahead.wait()
                        take_ready()
                    handle = ahead.start(*self._search_args(k))
                else:
                    handle = None
                turns.append((done, k, handle, decision if own else None))
            while turns:
                take_oldest()

    def _decision(self, k: int, throughput: float, bound: tuple) -> tuple[bool, object, tuple | None]:
        return self.decide(k, throughput, bound) if self.prune else (True, None, None)


def plan(model, traffic: Traffic, targets: Targets, space: SearchSpace, pricing: Pricing, *,
         requests: int = DEFAULT_REQUESTS, seed: int = 0, efficiency: str = "realistic",
         stack: str | None = None, eager: bool = False, hardware: list[str] | None = None, baseline: bool = False,
         absurd: bool = False, progress: Callable[[int, int], None] | None = None,
         ranked: int | None = None, prune: bool = True, defer: bool = False,
         work: SimulationWork | None = None, jobs: int | None = None) -> PlanResult:
    """Every candidate's cheapest deployment; those meeting the targets ranked by $/Mtok (and
    $/Mtok at capacity). `baseline`: the same model decoded autoregressively beside it;
    `absurd`: search and keep the absurd deployments too (`results.mark_absurd`). `ranked`: the
    sustained load (and $/Mtok at capacity) of the first so many deployments of each ranking
    only, ties included (the others' are left unset, 0 and None: for an output that shows no more);
    `prune=False`: search every candidate to the end (the reference; the same answer, slower);
    `defer`: the deployments meeting the targets are left unranked, without their sustained load
    and band ends, for the caller to rank with other models' (`pending`, `rank_rows`), so that
    only the rows shown of them all are searched again. `work`: the preemptions its simulations may
    run, shared with other models' searches (None: its own `limits.MAX_PREEMPTIONS`, read when called).
    `jobs`: the worker processes the candidates' searches (`side_by_side.Ahead`) and the ranking's
    per-row searches (`rank_rows`) may use."""
    work = work if work is not None else SimulationWork(limits.MAX_PREEMPTIONS)
    sample = sample_requests(traffic, requests, seed)
    warn_beyond_context(model.id, model.max_context, sample.prompt_tokens, sample.answer_tokens)
    ar = baseline_decoding()
    sets = [("plan", space.decodings)]
    if baseline and any(not d.autoregressive for d in space.decodings):
        sets.append(("baseline", [ar]))
    # the limit on passes costed one by one holds for the whole search: its sweeps added up first
    pols = {dec: decoding_policy(stack, efficiency, dec, eager, space.prefill_chunk)
            for _, decodings in sets for dec in decodings}
    passes = sum(table_passes(model, *_table_args(space, dec, *_canvases(dec, sample), pols[dec]),
                              efficiency=efficiency, stack=behaviour.stack_name(stack, dec, eager), hardware=hardware,
                              kv_dtype=kv, mem_fraction=space.mem_fraction)
                 for _, decodings in sets for dec in decodings for kv in space.kv_dtypes)
    limits.check_passes(passes, limits.MAX_PASSES_ONE_BY_ONE, "choose fewer GPUs, TP sizes, precisions, K/V formats or decodings, "
                        "larger blocks, shorter answers, or a smaller --max-batch")
    candidates: list[tuple[str, Candidate]] = []
    unsupported = 0
    for name, decodings in sets:
        for dec in decodings:
            found, n_skip = _candidates(model, space, dec, sample, efficiency, stack, hardware, eager,
                                        traffic.cached_prompt, work)
            candidates += [(name, c) for c in found]
            unsupported += n_skip
    # cheapest bound first, so that the cheapest deployment is known early and absurd ones are not searched
    throughput = [_throughput_bound(c, sample) for _, c in candidates]
    bounds = [_bound(c, sample, traffic, pricing, cap) for (_, c), cap in zip(candidates, throughput)]
    order = sorted(range(len(candidates)), key=lambda k: (bounds[k], k))
    turns = _Turns(getattr(model, "id", str(model)), candidates, sample, traffic, targets, pricing, ranked, prune,
                   absurd, progress)
    turns.search_all(order, throughput, bounds, jobs, work)
    meeting, misses, cheapest, past, left_out = turns.meeting, turns.misses, turns.cheapest, turns.past, turns.left_out
    unlisted = {name: 0 for name in meeting}  # rows past those shown that meet the targets, not absurd
    rest = [(name, c, fewest) for name, rows in past.items() for c, fewest in rows]

    def verdict(row: tuple[str, Candidate, int]) -> str | None:  # against the cheapest of all, as `mark_absurd` judges
        name, c, fewest = row
        return meets_within(c, sample, traffic, targets, pricing, _absurd_from(c, sample, traffic, pricing,
                                                                                cheapest[name]), fewest)

    for (name, _, _), said in zip(rest, _each_candidate(verdict, rest, [c for _, c, _ in rest], lambda: sample, jobs)):
        unlisted[name] += said == MEETS
        left_out += said == ABSURD
    ranking, pending = {}, []
    setting = Setting(sample, traffic, targets, pricing, stack, eager)
    for name, found in meeting.items():
        mark_absurd([f.deployment for f in found])
        left_out += 0 if absurd else sum(f.deployment.absurd for f in found)
        rows = [(f, setting) for f in found if absurd or not f.deployment.absurd]
        if name == "plan" and defer:  # ranked with other models' rows by the caller
            pending, ranking[name] = rows, [f.deployment for f, _ in rows]
        else:
            ranking[name] = rank_rows(rows, ranked, jobs)
    if not defer:
        pareto_front([d for d in ranking["plan"] if not d.absurd])
    return PlanResult(model=str(model), traffic={}, targets=targets.as_dict(), deployments=ranking["plan"],
                      baseline=ranking["baseline"], nearest_miss=nearest_miss(ranking, misses), evaluated=len(candidates),
                      skipped={"unsupported_or_not_fitting": unsupported, "absurd": left_out},
                      unlisted=unlisted["plan"], pending=pending,
                      cached=sorted({c.decoding.label for _, c in candidates if c.uncached < 1}))


def nearest_miss(ranking: dict[str, list[Deployment]], misses: dict[str, list[Deployment]]) -> Deployment | None:
    """The candidate whose worst target is least far off, when no deployment meets the targets
    (the plan's own decodings first; the AR baseline's when the plan has no candidate at all)."""
    if ranking["plan"]:
        return None
    pool = misses["plan"] or (misses["baseline"] if not ranking["baseline"] else [])
    return min(pool, key=lambda d: max(m.ratio for m in d.misses), default=None)
