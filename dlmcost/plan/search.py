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

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..analysis import limits
from ..inputs.hardware import GPU
from ..engine.memory import DEFAULT_MEM_FRACTION
from ..engine.schemes import autoregressive_scheme
from ..inputs.error_bands import band_for
from .bounds import cost_bound, throughput_bound
from .ranking import Setting, each_candidate, rank_rows
from .replicas import ABSURD, MEETS, Candidate, Pricing, meets_within, request_classes
from .results import Deployment, Targets, mark_absurd, pareto_front
from .turns import Turns, absurd_from
from ..serving import behaviour
from ..serving.behaviour import DEFAULT_REQUESTS, batch_grid
from ..serving.simulate import SimulationWork, scaled
from ..serving.steptime import Decoding, pass_table, table_passes
from ..serving.traffic import RequestSample, Traffic, sample_requests, warn_beyond_context



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
    throughput = [throughput_bound(c, sample) for _, c in candidates]
    bounds = [cost_bound(c, sample, traffic, pricing, cap) for (_, c), cap in zip(candidates, throughput)]
    order = sorted(range(len(candidates)), key=lambda k: (bounds[k], k))
    turns = Turns(getattr(model, "id", str(model)), candidates, sample, traffic, targets, pricing, ranked, prune,
                   absurd, progress)
    turns.search_all(order, throughput, bounds, jobs, work)
    meeting, misses, cheapest, past, left_out = turns.meeting, turns.misses, turns.cheapest, turns.past, turns.left_out
    unlisted = {name: 0 for name in meeting}  # rows past those shown that meet the targets, not absurd
    rest = [(name, c, fewest) for name, rows in past.items() for c, fewest in rows]

    def verdict(row: tuple[str, Candidate, int]) -> str | None:  # against the cheapest of all, as `mark_absurd` judges
        name, c, fewest = row
        return meets_within(c, sample, traffic, targets, pricing, absurd_from(c, sample, traffic, pricing,
                                                                                cheapest[name]), fewest)

    for (name, _, _), said in zip(rest, each_candidate(verdict, rest, [c for _, c, _ in rest], lambda: sample, jobs)):
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
