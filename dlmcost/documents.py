"""The JSON of every command beyond analyze and sweep (whose records are results.py's), as typed
records: serve, plan, gpus, models, model, schemes, calibrate, measure. Each command's `--format
json` goes through its record here (`typed`), so the keys it prints are the keys its schema
(`dlmcost schema NAME`, `SCHEMAS`) documents; a key the record lacks is a bug that fails loudly,
never a silent difference. Objects start with `schema_version` (results.SCHEMA_VERSION); the
catalog commands (gpus, models, schemes) print a list of records, as they always have.
"""

from __future__ import annotations

from typing import Annotated, Optional, Union

from pydantic import Field, TypeAdapter

from .results import AnalyzeResult, ModelSummary, Record, SlowKernelsRecord, SweepResult, Versioned

Number = Union[int, float]
# a GPU's price range, as serve's deployment and plan's deployments both carry it
PriceLow = Annotated[Optional[float], Field(description="the low end of the price's public range (the hardware "
                                                        "file's; --price: the price itself)")]
PriceHigh = Annotated[Optional[float], Field(description="the high end of that range")]


# --- serve -------------------------------------------------------------------------------------------


class PublishedDecoding(Record):
    """The model's published decoding a deployment runs (docs/decoding.md)."""

    checkpoint: str
    setting: str = Field(description="its key in the model's decoding file")
    name: str
    label: str
    scheme: str
    block: Optional[int]
    task: str
    tpf: float = Field(description="tokens per forward the cost model runs (a mix of benchmarks: their harmonic mean)")
    tpf_task: str = Field(description="the task the tokens per forward are from (the setting's mix where the task "
                                      "has none published)")
    tpf_published: float = Field(description="the tokens per forward as the source prints them")
    accuracy: Optional[float] = Field(description="published accuracy on the task, a fraction (null: not published)")
    spread: float = Field(description="coefficient of variation of a request's passes per block across the mix")
    source: str
    source_title: str


class PublishedBand(Record):
    """A stack's published error band, as a calibration found it (error_bands.json)."""

    stack: str = Field(description="the stack the band is of ('pooled': every stack's)")
    vendor: Optional[str] = Field(None, description="the vendor whose parts it was taken on (null: every vendor's)")
    low: float
    median: float
    high: float
    numbers: int = Field(description="the out-of-source validation numbers it rests on")


class FirstTokenBand(Record):
    """The band of the times to the first token (a speed being 1 / TTFT), kept apart from the
    speed band: a fixed cost per request that no step time describes moves them alone."""

    low: float = Field(description="10th percentile of measured / predicted time to the first token")
    median: float
    high: float = Field(description="90th percentile")
    numbers: int = Field(description="the out-of-source validation numbers it rests on")
    basis: str = Field(description="which numbers: the stack's own first-token ones, every stack's, or (too few "
                                   "of those) the stack's band over all its numbers; for a calibrated stack, the "
                                   "published first-token band's excess over the published speed band, on its band")


class ErrorBand(Record):
    """How far the stack's predictions were from measurements they were not fitted on: published
    ones (the validation), or the user's own (a calibrated stack file's held-out error)."""

    stack: str = Field(description="the stack the band is of ('pooled': every stack's)")
    vendor: Optional[str] = Field(description="the vendor whose parts its measurements ran on, where the validation "
                                              "has a band there (the stack runs other kernels on each vendor's "
                                              "parts); null: every vendor's")
    label: str = Field(description="how the output names it: the stack, and the vendor's parts where it is one "
                                   "vendor's ('sglang on AMD parts')")
    low: float = Field(description="10th percentile of predicted / measured speed (above 1: optimistic)")
    median: float
    high: float = Field(description="90th percentile")
    numbers: int = Field(description="the numbers it rests on: out-of-source validation numbers, or a "
                                     "calibration's held-out measurements")
    basis: str
    source: str = Field(description="validation (published measurements) or calibration (the held-out error "
                                    "`dlmcost calibrate` wrote into the stack file)")
    published: Optional[PublishedBand] = Field(
        description="a calibration's band: the published band of the stack it was calibrated from (null otherwise)")
    narrowing: Optional[float] = Field(
        description="the published band's width / this band's, a width being ln(high / low): above 1 narrower, "
                    "below 1 wider; null for a published band, or a held-out band of no width")
    first_token: Optional[FirstTokenBand] = Field(
        description="the band the times to the first token take: at each end of the band above they are scaled "
                    "further by this band's end / that band's (null: the band above serves them too)")


class Stats(Record):
    """A distribution over the measured requests (numpy's linear interpolation between order
    statistics); null when no request had the quantity (a one-block answer has no gap)."""

    mean: Optional[float]
    median: Optional[float]
    p90: Optional[float]
    p95: Optional[float]
    p99: Optional[float]


class TargetMiss(Record):
    target: str = Field(description="the target's name (p95_latency_s...); min_tokens_per_s_per_user is a floor")
    value: float
    limit: float


class SlowKernelsOn(SlowKernelsRecord):
    stack: str
    gpu: str
    precision: str


class ServeDeployment(Record):
    model: str
    gpu: str
    unit: str = Field(description="what one of these accelerators is called: GPU, or chip (TPU, Trainium)")
    tp: int
    ep: int
    replicas: int
    gpus: int = Field(description="accelerators in all: replicas x tp")
    precision: str
    kv_dtype: str = Field(description="the K/V cache's number format (--kv-dtype): bf16, fp8, int8 or fp4")
    mem_fraction: float = Field(description="the share of each GPU's memory the engine may use for weights, K/V cache "
                                            "and activations (--mem-fraction; vLLM's default 0.9)")
    decoding: str
    scheme: str
    block: Optional[int]
    tpf: Optional[float]
    tpf_spread: float = Field(description="coefficient of variation of a request's passes per block")
    max_running: int = Field(description="running requests per replica (the batch limit)")
    max_running_source: str
    first_block_outside_limit: bool
    prompt_prefill: str = Field(description="how the prompt is prefilled: one-pass, block-chunks (one block per "
                                            "forward, the stack's), or none (no pass over the prompt alone: mdm, "
                                            "dual-cache)")
    prefill_chunk_tokens: Optional[int] = Field(
        description="the autoregressive prompts' token budget per step beside the running decodes (chunked "
                    "prefill: the prompts one stream, first come first served), tokens; null: each admitted prompt "
                    "in one pass")
    prefill_chunk_source: str = Field(description="where it came from: option, stack, default, or diffusion decoding")
    prefill_first: bool = Field(False, description="true where the stack runs prefills before the decodes (SGLang's "
                                                   "scheduler): an iteration that prefills runs no decodes, so a "
                                                   "burst's first answers wait for the prompts sent with them; false: "
                                                   "the budget's prompts run beside the decodes (vLLM)")
    api_servers: Optional[int] = Field(
        None, description="the API server processes per replica every request passes before the engine sees it "
                          "(the stack's front_end; --api-servers); null: the stack has no front-end cost")
    front_end_us_per_request: Optional[float] = Field(
        None, description="one API server's CPU time per request, microseconds (the stack's front_end); null: none")
    first_token_delay_us: Optional[float] = Field(
        None, description="each request's wait after the API server before the engine sees it, holding neither a "
                          "server nor the GPU (the stack's front_end.first_token_us_per_layer x the model's layers, "
                          "first_token_us_per_mla_layer for its MLA layers where the stack sets one), "
                          "microseconds; null: the stack has no front-end cost")
    api_servers_source: str = Field("none", description="where the number of API servers came from: option, "
                                                        "stack, or none")
    slow_kernels: Optional[SlowKernelsRecord] = Field(
        None, description="what the stack's release adds to every pass on this GPU at this precision, where it ran "
                          "kernels slower than the hardware file's tuned times (the stack's slow_kernels); null: none")
    recv_interval: int = Field(1, description="decode iterations between the scheduler's receives of new requests "
                                              "(SGLang's --scheduler-recv-interval; --recv-interval): after a "
                                              "prefill, or on an idle server, it receives at once; 1: every iteration")
    recv_interval_source: str = Field("default", description="where it came from: option, default, diffusion "
                                                             "decoding, or stack without one (both always 1)")
    cached_prompt_share: Optional[float] = Field(
        None, description="the mean share of a prompt found in the engine's prefix cache over the shares given "
                          "(--cached-prompt: one for every request, or one a request in the order they are sent); "
                          "null: none given, every prompt prefilled whole")
    cached_prompt_given: int = Field(0, description="how many shares --cached-prompt gave (0: none)")
    cached_prompt_from_trace: bool = Field(False, description="true with --cached-prompt trace: each request's "
                                           "cached prefix from the replayed trace's hash_ids")
    memory_limit: Optional[int]
    release: str
    release_source: str
    stack: str
    stack_default: bool = Field(description="true when no --stack was given: the decoding's kind's default")
    eager: bool = Field(description="true when the stack ran without CUDA graphs (--eager; its name then ends in "
                                    "' (eager)')")
    published: Optional[PublishedDecoding] = Field(
        description="the model's published decoding it runs (its tokens per forward and accuracy); null when the "
                    "decoding was given")
    error_band: Optional[ErrorBand] = Field(description="the stack's error band the intervals come from (a "
                                                        "calibrated stack file's: its held-out error)")
    price_per_gpu_hour: Optional[float]
    price_source: Optional[str]
    price_per_gpu_hour_low: PriceLow
    price_per_gpu_hour_high: PriceHigh
    board_power_w: Optional[float]
    idle_power_fraction: float = Field(description="share of board power drawn while idle (docs/plan.md, Money and energy)")
    power_utilisation: float


class ServePoint(Record):
    load: str
    concurrency: Optional[int]
    rate: Optional[float]
    requests: int = Field(description="measured requests (after the warm-up and cool-down of a synthetic load; an open load's: the one replica simulated, its replicas being alike)")
    output_tokens_per_s: float
    total_tokens_per_s: float
    output_tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float = Field(description="median over requests of answer tokens / end-to-end latency")
    requests_per_s: float
    ttfb_s: Stats = Field(description="arrival to the first streamed block (AR: token)")
    inter_block_s: Stats
    latency_s: Stats = Field(description="end to end")
    gpu_busy_fraction: float = Field(description="share of the time a replica runs passes")
    mean_running: float
    usd_per_mtok: Optional[float]
    usd_per_mtok_low: Optional[float] = Field(description="$/Mtok at the low end of the price's range")
    usd_per_mtok_high: Optional[float] = Field(description="$/Mtok at the high end of the price's range")
    joules_per_token: Optional[float] = Field(description="board power at the busy fraction (idle share while idle) / output tok/s")
    makespan_s: Optional[float]
    overloaded: bool
    memory_binds: bool = Field(
        description="more requests at once than memory holds at their final lengths, for a decoding whose K/V grows "
                    "as it runs: the simulation allocates K/V as tokens come and, where it runs out, preempts the "
                    "latest admitted request and recomputes it on readmission (preemptions; first-done release; "
                    "the synchronous release reserves each request's final length from admission, and its "
                    "first-token times are then an upper bound)")
    preemptions: int = Field(
        0, description="times the measured requests were preempted where K/V allocated as tokens come ran out "
                       "(each one recomputed on readmission; docs/methodology.md, 'When memory binds')")
    pareto: bool
    misses: list[TargetMiss] = Field(description="the targets (--p95...) this load misses; empty: it meets them")
    meets_targets: Optional[bool] = Field(description="null when no target was given")
    intervals: dict[str, list[float]] = Field(
        description="metric -> [low, high]: the load simulated again with every step time at the two ends of the "
                    "stack's error band, ttfb_p50_s scaled further by its first-token band's ends / the band's "
                    "(docs/plan.md)")


class MaxRate(Record):
    rate: Optional[float] = Field(description="requests/s; null: even the lowest rate tried misses the targets")
    saturation_rate: float
    targets: dict[str, float]
    arrival: str
    bisection_steps: int = Field(description="halvings of (0, saturation] run: 0 where the saturation rate itself "
                                             "is sustained")
    resolution_rps: float = Field(description="requests/s: the highest sustained rate lies in [rate, rate + this), "
                                              "under this where rate is null; 0 where the saturation rate itself "
                                              "is sustained")
    reason: Optional[str] = Field(description="why the lowest rate tried failed (null when a rate was found)")


class Saturation(Record):
    """What the deployment completes with every batch always full (docs/plan.md, saturation)."""

    rate: float = Field(description="requests/s: the saturation rate, above which no rate is sustained")
    output_tokens_per_s: float
    output_tokens_per_s_per_gpu: float
    in_flight: int = Field(description="requests the replicas hold at once (beyond it a request waits)")


class ServeEntry(Record):
    deployment: ServeDeployment
    points: list[ServePoint]
    pareto: list[int]
    max_rate: Optional[MaxRate]
    saturation: Optional[Saturation]


class ServeDocument(Versioned):
    deployments: list[ServeEntry]
    pareto: list[list[int]] = Field(description="[deployment, point] pairs on the Pareto front of tok/s per GPU "
                                                "against tok/s per user")


# --- plan --------------------------------------------------------------------------------------------


class PlanDeployment(Record):
    gpu: str
    gpu_key: str
    replicas: int
    tp: int
    precision: str
    kv_dtype: str = Field(description="the K/V cache's number format (--kv-dtype; one of the search's kv_dtypes)")
    scheme: str
    block: Optional[int]
    tpf: Optional[float]
    decoding: str
    max_running: int = Field(description="the batch limit: the most requests a replica runs at once (serve's "
                                         "--max-running), the running limit searched, no more than memory_fits where "
                                         "each request is held at its final length from admission")
    max_batch: int = Field(deprecated=True, description="deprecated alias of max_running, kept for one release "
                                                          "(sweep's max_batch is the largest batch that fits in memory)")
    p50_latency_s: float
    p95_latency_s: float
    p99_latency_s: float
    p95_first_block_s: float
    tokens_per_s_per_user: float
    served_rps: float
    capacity_rps: float
    headroom: float = Field(description="capacity / served - 1")
    usd_per_hour: Optional[float]
    usd_per_mtok: Optional[float]
    usd_per_mtok_low: Optional[float] = Field(description="$/Mtok at the low end of the price's public range")
    usd_per_mtok_high: Optional[float] = Field(description="$/Mtok at the high end of the price's public range")
    joules_per_token: Optional[float]
    price_per_gpu_hour: Optional[float]
    price_per_gpu_hour_low: PriceLow
    price_per_gpu_hour_high: PriceHigh
    price_source: Optional[str]
    output_tokens_per_s: float
    tokens_per_s_per_gpu: float = Field(description="output tokens/s per accelerator")
    sustained_rps: float
    usd_per_mtok_at_capacity: Optional[float]
    gpu_busy_fraction: float = Field(description="share of the time a replica runs passes (what J/token is drawn at)")
    model: str
    pareto: bool
    absurd: bool
    memory_binds: bool = Field(
        description="its simulated replica held more requests at once than memory holds at their final lengths, for a "
                    "decoding whose K/V grows as it runs: its K/V is allocated as tokens come and the latest admitted "
                    "preempted where it runs out (first-done release; under a synchronous release each is held at "
                    "its final length, and its first-token times and replica count are upper bounds; serve's "
                    "memory_binds)")
    memory_fits: int = Field(
        0, description="the most of the longest requests a replica's memory holds at their final lengths (the "
                       "running limit max_running is no more than it where each is held at its final length from "
                       "admission; K/V allocated as tokens come runs the whole limit and preempts)")
    preemptions: int = Field(
        0, description="times its simulated replica's measured requests were preempted where K/V allocated as "
                       "tokens come ran out, each recomputed on readmission (serve's preemptions)")
    step_time_scale: float = Field(
        1.0, description="its steps as simulated / as predicted: 1, or under --conservative its stack's error band's "
                         "slower end (intervals' band[1]), every number of the row at that clock")
    intervals: dict[str, Union[list[Optional[float]], str]] = Field(
        description="the search again at the two ends of the stack's error band: gpus, usd_per_mtok, "
                    "p95_latency_s -> [faster end, slower end] (null: no replica count meets the targets there); "
                    "band, band_stack")
    gpus: int
    meets_targets: bool
    misses: list[TargetMiss]


# plan's renamed keys (`--require` accepts them with a warning), as results.DEPRECATED_KEYS
PLAN_DEPRECATED_KEYS = {"max_batch": ("max_running", "the batch limit per replica, serve's --max-running; sweep's "
                                                     "max_batch is the largest batch that fits in memory")}

Lengths = Union[int, str, dict[str, Union[Number, str]]]  # N, 'p50:N,...', @FILE, {p50: N} or {file: PATH}


class PlanTraffic(Record):
    rate: Optional[float]
    users: Optional[int]
    think_s: Optional[float]
    prompt: Lengths
    answer: Lengths
    cached_prompt: float = Field(0.0, description="the share of each prompt already in the engine's prefix cache "
                                                  "(--cached-prompt; 0: every prompt prefilled whole)")


class LeftOutGPU(Record):
    gpu: str
    vendor: str
    stack: Optional[str] = Field(description="the bundled stack of the accelerator's vendor (null: none)")


class PlanSearch(Record):
    gpus: list[str]
    tp: list[int]
    precisions: list[str]
    kv_dtypes: list[str] = Field(description="the K/V cache number formats searched (--kv-dtype), each candidate "
                                             "one of them (deployments' kv_dtype)")
    kv_dtype: str = Field(description="the first of kv_dtypes (a search of one format: every candidate's), kept "
                                      "for readers of a one-format search")
    mem_fraction: float = Field(description="the share of each GPU's memory every candidate may use for weights, "
                                            "K/V cache and activations (--mem-fraction)")
    recv_interval: int = Field(1, description="decode iterations between the scheduler's receives of new requests "
                                              "as given (--recv-interval; SGLang's --scheduler-recv-interval; 1: every "
                                              "iteration); recv_intervals holds what each decoding ran with")
    decodings: list[str]
    max_batch: list[int]
    release: dict[str, str]
    requests: int
    seed: int
    power_utilisation: float
    absurd_shown: bool
    ar_baseline: bool
    stack: str = Field(description="the serving stack named ('default': each decoding its kind's, `stacks`)")
    stacks: dict[str, str] = Field(description="decoding -> the stack it runs on")
    stack_default: bool = Field(description="true when no --stack was given")
    eager: bool = Field(description="true when every decoding's stack ran without CUDA graphs (--eager)")
    conservative: bool = Field(False, description="true when every candidate was searched at its stack's error band's "
                                                  "slower end (--conservative; deployments' step_time_scale)")
    max_running: dict[str, list[int]] = Field(description="decoding -> the running limits searched")
    prefill_chunk_tokens: dict[str, Optional[int]] = Field(
        description="decoding -> its autoregressive prompts' token budget per step beside the running decodes "
                    "(chunked prefill), tokens; null: each admitted prompt in one pass (serve's "
                    "prefill_chunk_tokens)")
    prefill_chunk_source: dict[str, str] = Field(description="decoding -> where its budget came from: option, "
                                                             "scenario, stack, default, or diffusion decoding")
    prefill_first: dict[str, bool] = Field(default_factory=dict,
                                           description="decoding -> whether its stack runs prefills before the "
                                                       "decodes (serve's prefill_first)")
    prefill_chunk_by_gpu: dict[str, dict[str, Optional[int]]] = Field(
        default_factory=dict, description="decoding -> GPU -> its prompts' token budget per step on that GPU, where "
                                          "it is not prefill_chunk_tokens' (a stack that sets it by the GPU's memory, "
                                          "as SGLang does); a decoding or GPU not listed: prefill_chunk_tokens")
    max_running_by_gpu: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="decoding -> GPU -> its running limit on that GPU, where it is not "
                                          "max_running's (a stack that sets it by the GPU, as vLLM does, and no "
                                          "--max-batch given); a decoding or GPU not listed: max_running")
    recv_intervals: dict[str, int] = Field(
        default_factory=dict, description="decoding -> the receive interval it runs with (1: every iteration): the "
                                          "one given where its stack's scheduler has one (sglang, sglang-dllm) and "
                                          "the decoding streams tokens, else 1 (serve's recv_interval)")
    recv_interval_source: dict[str, str] = Field(
        default_factory=dict, description="decoding -> where its interval came from: option, default, diffusion "
                                          "decoding, or stack without one (serve's recv_interval_source)")
    api_servers: dict[str, Optional[int]] = Field(
        default_factory=dict, description="decoding -> the API server processes per replica every request passes "
                                          "before the engine (its stack's front_end; --api-servers); null: its "
                                          "stack has no front-end cost (serve's api_servers)")
    front_end_us_per_request: dict[str, Optional[float]] = Field(
        default_factory=dict, description="decoding -> one API server's CPU time per request, microseconds (null: none)")
    first_token_delay_us: dict[str, Optional[float]] = Field(
        default_factory=dict, description="decoding -> each request's wait before the engine sees it that holds no "
                                          "server or GPU, microseconds (serve's first_token_delay_us; null: none)")
    api_servers_source: dict[str, str] = Field(
        default_factory=dict, description="decoding -> where the number of API servers came from: option, scenario, "
                                          "stack, or none")
    slow_kernels: list[SlowKernelsOn] = Field(
        default_factory=list, description="each searched stack, GPU and precision where the stack's release ran "
                                          "kernels slower than the hardware file's tuned times, and what that adds to "
                                          "every pass there (serve's slow_kernels; none listed: none apply)")
    cached_prompt_decodings: list[str] = Field(
        default_factory=list, description="the decodings whose prefill the prefix cache shortens (traffic."
                                          "cached_prompt > 0): those that prefill a prompt in one pass or under a "
                                          "budget, with first-done release")
    published: dict[str, PublishedDecoding] = Field(
        description="'MODEL DECODING' -> the model's published decoding it is (its tokens per forward and accuracy)")
    task: Optional[str] = Field(description="the task whose published tokens per forward the decodings take")
    min_accuracy: Optional[dict[str, float]] = Field(description="the quality floor: task -> fraction")
    quality: list[str] = Field(description="with a floor: per model, which published decodings reach it")
    left_out: list[LeftOutGPU] = Field(description="default accelerators the stack does not run on (--gpu NAME "
                                                   "plans one)")
    runs_on: Optional[list[str]] = Field(description="the vendors the stack runs on (null: any)")
    error_bands: dict[str, ErrorBand] = Field(
        description="stack (as `stacks` names it), with ' on VENDOR parts' where its band there is that vendor's "
                    "-> the error band its deployments' intervals come from (their intervals' band_stack is its label)")


class PlanDocument(Versioned):
    model: str
    models: list[str]
    traffic: PlanTraffic
    targets: dict[str, Number]
    search: PlanSearch
    all_autoregressive: bool
    evaluated: int
    skipped: dict[str, int]
    deployments: list[PlanDeployment]
    deployments_unlisted: int = Field(0, description="deployments meeting the targets past the rows the output "
                                      "asked for, counted but not listed (0 in json, csv and html, which list every one)")
    pareto: list[PlanDeployment]
    ar_baseline: list[PlanDeployment]
    nearest_miss: Optional[PlanDeployment]


# --- gpus, models, model, schemes ------------------------------------------------------------------


class ListPrice(Record):
    """A hardware file's price per GPU-hour: a dated public on-demand list price, an estimate."""

    usd: float = Field(description="the typical on-demand rate the planner uses, USD per GPU-hour")
    low: Optional[float] = Field(description="the low end of the public range seen for the part (null: none given)")
    high: Optional[float] = Field(description="the high end of that range (null: none given)")
    as_of: str = Field(description="the date of the source snapshot, as the file gives it")
    source: str
    estimate: bool


class GPUEntry(Record):
    name: str
    key: str
    aliases: list[str]
    vendor: str
    unit: str = Field(description="what one of these is called: GPU, or chip (TPU, Trainium)")
    status: str
    memory_bytes: float
    memory_as_listed: str
    bandwidth_bytes_per_s: float
    peak_flops: dict[str, float]
    ridge_flops_per_byte: dict[str, float]
    scale_up_bytes_per_s: float
    # fractions and times per op; `gemm` per precision; `weight_streaming` and `experts_streaming` per precision and `decode_attention`
    # (where measured): {memory_bandwidth, overhead_us_per_op}
    efficiency: dict[str, Union[float, dict[str, float], dict[str, dict[str, float]]]]
    notes: str
    price_per_hour: Optional[ListPrice] = Field(description="null: no public price (plan needs --price)")
    price_age_days: Optional[int] = Field(description="days from the price's date to today (null: no price or no date)")
    price_stale: bool = Field(description="the price is over a year old (a warning names it)")


class ModelEntry(ModelSummary):
    provenance: str = Field(description="where the bundled config comes from: verbatim (the Hub's file), "
                                        "reconstructed (the upstream architecture and published dimensions) or "
                                        "unverified (a third-party port's dimensions)")
    status: str = Field(deprecated=True, description="deprecated alias of provenance, kept for one release")
    default_scheme: str


class ModelInfo(ModelSummary, Versioned):  # (fields: Versioned's first, then ModelSummary's)
    kv_bytes_per_token: dict[str, float] = Field(description="K/V cache bytes per token, all layers, per K/V dtype")
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    group_size: float
    ffn_dim: int
    mlp: str
    vocab_size: int
    tie_embeddings: bool
    qkv_bias: bool
    qk_norm: bool
    n_dense_layers: int
    n_moe_layers: int
    layers: Optional[dict[str, str]] = None
    logit_softcap: Optional[float] = None
    vision_params: Optional[int] = None
    moe: Optional[dict[str, Union[int, bool]]] = None
    mla: Optional[dict[str, Optional[int]]] = None
    sampler: Optional[dict[str, Union[str, int, bool, None]]] = None
    verify: Optional[dict[str, Union[int, float, bool, str, dict[str, int], None]]] = None


class SchemeEntry(Record):
    name: str
    summary: str
    knobs: str = Field(description="the knobs its cost depends on, comma-separated ('-': none)")
    stops_at_eos: bool


# --- calibrate, measure ------------------------------------------------------------------------------


class CalibrationPoint(Record):
    id: str
    gpu: str
    measured_ms: float
    before_ms: float
    before_error: float
    after_ms: float
    after_error: float
    held_out_ratio: Optional[float] = Field(description="measured / predicted time per forward under a fit without "
                                                        "this point (null: that refit could not pin the parameters)")


class HeldOut(Record):
    """The fit's held-out error and the band serve and plan take for the written stack."""

    ratios: int = Field(description="the measurements with a held-out ratio")
    low: float = Field(description="the band's low end (10th percentile of the ratios, or the published band's, "
                                   "widened, with fewer than 6)")
    median: float
    high: float
    basis: str
    published: Optional[PublishedBand] = Field(description="the starting stack's published band")
    narrowing: Optional[float] = Field(description="the published band's width / this band's (widths ln(high / "
                                                   "low)): above 1 narrower")


class CalibrationFit(Record):
    """A stack fitted to measured points: what `calibrate` writes (and `measure --profile-out`)."""

    stack: str
    written: str
    fitted: dict[str, float]
    rms_log_error: float
    points: list[CalibrationPoint]
    held_out: Optional[HeldOut] = Field(description="the held-out error written into the stack file (null: too "
                                                    "few held-out measurements and no published band)")


class CalibrateDocument(CalibrationFit, Versioned):
    pass


class LayerKind(Record):
    kind: str
    count: int
    built: int


class MeasuredFamily(Record):
    name: str
    q: Number
    c: Number
    q_last: Number
    c_last: Number
    count: Number
    causal: bool
    logits: int = Field(description="positions the LM head and sampler run on")
    kv_write: int = Field(description="tokens whose K/V the pass keeps in the cache")
    self_condition: bool
    measured_ms: float
    predicted_ms: float


class MeasuredBatch(Record):
    """One batch's measured pass families, and the model's prediction for each."""

    model: str
    gpu: str
    device: str
    backend: str
    stack: str
    workload: dict[str, Union[str, int, float, bool]]
    warmup: int
    repeats: int
    layers_built: int
    layer_kinds: list[LayerKind]
    memory_bytes: float
    families: list[MeasuredFamily]
    nfe: float
    measured_ms_per_forward: float
    predicted_ms_per_forward: float


class MeasureDocument(Versioned):
    measurements: list[MeasuredBatch] = Field(description="one per --batch value")
    calibrated: CalibrationFit | None = Field(description="the stack fitted to them (--profile-out), else null")


# --- stacks, decodings --------------------------------------------------------------------------------


class StackEntry(Record):
    name: str
    description: str
    version: str
    as_of: str
    default_for: list[str] = Field(description="the kinds of decoding that run on it without --stack")
    max_running_requests: Optional[int] = Field(description="requests at once per replica (null: no limit of its own)")
    release: Optional[str] = Field(description="how a batch of diffusion requests lets them go (null: synchronous)")
    prefill_chunk_tokens: Optional[int] = Field(None, description="autoregressive prompt tokens a step prefills "
                                                                  "(chunked prefill; null: each prompt in one pass)")
    max_running_by_gpu: list[dict] = Field(default_factory=list, description="the running limit on some GPUs in place "
                                           "of max_running_requests: tiers {from_gib, below_gib, gpus_named, requests}, "
                                           "the first that holds a GPU winning")
    prefill_chunk_by_memory: list[dict] = Field(default_factory=list, description="the prefill budget on some GPUs in "
                                                "place of prefill_chunk_tokens: tiers {from_gib, below_gib, "
                                                "gpus_named, tokens}, the first that holds a GPU winning")
    prefill_first: bool = Field(False, description="true where an iteration that prefills runs no decodes (SGLang's "
                                                   "scheduler); false: the prefills run beside the decodes")
    api_servers: Optional[int] = Field(None, description="the API server processes per replica every request passes "
                                                         "before the engine sees it (null: no front-end cost)")
    front_end_us_per_request: Optional[float] = Field(None, description="one API server's CPU time per request, "
                                                                        "microseconds (null: no front-end cost)")
    first_token_us_per_layer: Optional[float] = Field(None, description="each request's wait before the engine sees it "
                                                                        "(holding no server or GPU), microseconds per "
                                                                        "model layer (null: no front-end cost)")
    first_token_us_per_mla_layer: Optional[float] = Field(
        None, description="the same wait per multi-head latent attention layer, in place of first_token_us_per_layer "
                          "for those layers (null: first_token_us_per_layer for every layer)")
    fitted: dict[str, list[str]] = Field(description="field -> the validation points it was fitted on")
    error_band: Optional[ErrorBand] = Field(description="predicted / measured speed over the published measurements "
                                                        "it was not fitted on (docs/validation.md), on every vendor's parts")
    error_bands_by_vendor: list[ErrorBand] = Field(
        default_factory=list, description="its band on each vendor's parts the validation has a band on (the same "
                                          "engine runs other kernels on another runtime there); empty: none")
    sources: dict[str, str]


class DecodingEntry(Record):
    """One published result: a checkpoint's decoding setting on a task (docs/decoding.md)."""

    architecture: str
    checkpoint: str
    setting: str
    name: str
    label: str
    scheme: str
    block: Optional[int]
    steps: Optional[int]
    steps_per_block: Optional[int]
    threshold: Optional[float]
    mode: Optional[str]
    gen_length: Optional[int]
    task: str
    accuracy: Optional[float] = Field(description="the benchmark's own metric, a fraction (null: not published)")
    tpf: Optional[float] = Field(description="tokens per forward as the source counts them (null: not published)")
    tpf_cv: Optional[float] = Field(description="a mix's spread of TPF across its benchmarks (std / mean)")
    verified: bool = Field(description="false: read in a secondary copy, not the primary source")
    default: bool = Field(description="the model's own decoding on its default task")
    source: str
    source_title: str
    source_ref: str
    source_url: str
    tpf_counting: str
    location: str
    note: str


# --- every command's ----------------------------------------------------------------------------------

SCHEMAS = {"analyze": AnalyzeResult, "sweep": SweepResult, "serve": ServeDocument, "plan": PlanDocument,
           "gpus": list[GPUEntry], "models": list[ModelEntry], "model": ModelInfo, "schemes": list[SchemeEntry],
           "calibrate": CalibrateDocument, "measure": MeasureDocument, "stacks": list[StackEntry],
           "decodings": list[DecodingEntry]}


def json_schema(name: str) -> dict:
    """The JSON Schema of command `name`'s `--format json` (KeyError: no such command)."""
    return TypeAdapter(SCHEMAS[name]).json_schema()


def typed(name: str, document):
    """`document` (plain data) as command `name`'s record, checked against it: what `--format json`
    dumps. A missing or unknown key raises (a bug, never a silent difference from the schema)."""
    return TypeAdapter(SCHEMAS[name]).validate_python(document)


def plain(name: str, document):
    """`document` through its record and back to plain data, in the record's key order."""
    value = typed(name, document)
    return TypeAdapter(SCHEMAS[name]).dump_python(value)
