"""Software-stack profiles: what the inference software adds on top of the hardware's roofline.

A stack is a YAML file (bundled ones live in the repository's top-level `stacks/`, shipped in the
wheel as `dlmcost/_stacks`), every number with its source. `--stack NAME|FILE` selects one; the
default is `DEFAULT_STACK`. How a stack combines with a hardware file is `stack_time.py`'s job
(docs/stacks.md, "The time of a pass").

Hostile files: the text is size-capped before parsing, parsed with the safe loader only, and
every field is range-checked; a bad file is one `error:` line (exit code 5, like a bad hardware
file).
"""

from pathlib import Path
from typing import Annotated, Literal, Optional, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from . import files
from .bundled import bundled_stack_dir
from .hardware import normalise
from .precision import PRECISIONS
from .published_bands import published_names
from ..safe_text import shown
from ..errors import DlmcostError, UsageError

# A serving engine is what a capacity plan buys GPUs for (research code is `hf-eager`): SGLang, as
# it is run. Its diffusion models run on its dLLM path (`--dllm-algorithm`: every denoising step
# synchronous with the host, its own running-request limit), autoregressive decoding on its usual
# path (overlap scheduling, continuous batching). Without --stack, each decoding takes its kind's.
DEFAULT_STACKS = {"diffusion": "sglang-dllm", "autoregressive": "sglang"}
DEFAULT_STACK = DEFAULT_STACKS["autoregressive"]
# The serving engine of the vendors whose parts SGLang does not run on, where one is bundled: a
# plan on TPUs alone runs sglang's JAX port (`runs_on` in each file says where it runs).
DEFAULT_STACK_BY_VENDOR = {"google": "jax-tpu"}


def default_stack(autoregressive: bool) -> str:
    """The stack a decoding runs on when none is given (DEFAULT_STACKS)."""
    return DEFAULT_STACKS["autoregressive" if autoregressive else "diffusion"]
STACK_NONE = "none"  # --stack none: the bare hardware roofline, no software stack
MAX_STACK_FILE_BYTES = 256 * 1024
MAX_CURVE_POINTS = 64
MAX_NAME_CHARS = 100  # a stack's name
MAX_EXTENDS_DEPTH = 4  # stacks one file's `extends:` may pass through (a bundled one extending another)
# requests one replica runs at once, wherever the limit comes from (serve's --max-running, plan's
# --max-batch and `search.max_batch`, a stack's `max_running_requests`): the serving simulation's
# tables hold one row per batch size up to twice it
MAX_RUNNING_REQUESTS = 4096
# API server processes in front of one replica's engine (a stack's front_end.api_servers, serve's and
# plan's --api-servers)
MAX_API_SERVERS = 1024
# a validation point's id ("serving:" before the ids of points under load); a trailing "*" stands for
# every point whose id begins with what precedes it (a fit over a whole published corpus)
# an efficiency's floor: a time is divided by it, and 5e-324 made every pass take inf seconds (exit 3,
# "the result.results.ops.time_share came out as nan") where the file's field should be named; as low
# as a calibration's fit can go (its log-parameters stop at -20: e^-20 = 2e-9 of the start)
MIN_EFFICIENCY = 1e-12
PointId = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[a-z0-9:._-]+\*?$")]


# Every model of a stack file: unknown keys refused, no inf or NaN, and strict types: `true` is no
# number of tokens nor a ratio, and "0.9" is text, not a number (YAML gives numbers as numbers).
_FILE = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=True)


class StackFileError(DlmcostError):
    """An unknown stack name, or a stack YAML that is unreadable or fails validation."""

    exit_code = 5


class HostCost(BaseModel):
    """CPU time the framework spends per forward pass."""

    model_config = _FILE

    us_per_layer: float = Field(ge=0, le=1e6)  # dispatch and launches of one decoder layer
    overlaps_gpu: bool = True  # async launches: pass = max(GPU, host); else GPU + host
    fixed_us_per_forward: float = Field(ge=0, le=1e7)  # sampler, host sync, step loop
    # the scheduler's and sampler's host work per running sequence per step (batch metadata,
    # per-request commit of the decoded tokens): a step's host time grows with the batch
    us_per_sequence: float = Field(default=0.0, ge=0, le=1e6)
    # host work per step that grows with the square of the running batch (a scheduler or runtime
    # whose per-request work scans the other requests): us_per_sequence_squared x batch^2
    us_per_sequence_squared: float = Field(default=0.0, ge=0, le=1e4)
    # a reference MoE block's Python loop over its experts: host time per expert per MoE layer
    us_per_expert: float = Field(default=0.0, ge=0, le=1e6)
    # an MoE layer's dispatch beyond a dense layer's us_per_layer (its router, top-k, sort and
    # fused-expert kernels launched from Python); 0 where a graph replays them
    us_per_moe_layer: float = Field(default=0.0, ge=0, le=1e6)
    # a multi-head latent attention (MLA) layer's dispatch beyond us_per_layer (its latent projections,
    # norms and absorbed products launched from Python); 0 where a graph replays them
    us_per_mla_layer: float = Field(default=0.0, ge=0, le=1e6)
    # the GPU's wait per tensor-parallel collective beyond its link time, for launching it from
    # Python (an eager all-reduce's host path); 0 where a graph replays it
    us_per_collective: float = Field(default=0.0, ge=0, le=1e6)


class FrontEndCost(BaseModel):
    """The engine's front end: the OpenAI-compatible API server processes that take each request
    (chat template, tokenization, per-request bookkeeping, streaming its answer out) before the
    engine's scheduler sees it, one request at a time each (serving/simulate/front_end.py, FrontEnd)."""

    model_config = _FILE

    us_per_request: float = Field(ge=0, le=1e7)  # CPU time one API server spends on a request (0: not timed)
    api_servers: int = Field(default=1, ge=1, le=MAX_API_SERVERS)  # processes, per replica
    # a latency before each request's first token, per decoder layer, that holds neither the API
    # servers nor the GPU (the engine's host-side dispatch of a new request; FrontEnd.first_token_delay_s)
    first_token_us_per_layer: float = Field(default=0.0, ge=0, le=1e6)
    # the same delay per multi-head latent attention (MLA) layer, in place of first_token_us_per_layer
    # for those layers (None: first_token_us_per_layer for every layer)
    first_token_us_per_mla_layer: Optional[float] = Field(default=None, ge=0, le=1e6)


class EagerHost(BaseModel):
    """The host's dispatch when the engine runs without CUDA graphs (`--eager`: vLLM
    --enforce-eager, SGLang --disable-cuda-graph): its fused kernels launched one by one from Python."""

    model_config = _FILE

    us_per_layer: float = Field(ge=0, le=1e6)  # replaces host.us_per_layer
    # replaces host.us_per_moe_layer: an MoE layer's wait beyond us_per_layer, for the router, top-k,
    # sort and fused-expert kernels it launches from Python (measured the same way)
    us_per_moe_layer: float = Field(default=0.0, ge=0, le=1e6)
    # replaces host.us_per_mla_layer: an MLA layer's wait beyond us_per_layer (measured the same way)
    us_per_mla_layer: float = Field(default=0.0, ge=0, le=1e6)
    # replaces host.us_per_collective: each tensor-parallel collective's wait for its launch from
    # Python, measured as the eager collective's time minus the graphed one's
    us_per_collective: float = Field(default=0.0, ge=0, le=1e6)
    # replaces host.overlaps_gpu: false when us_per_layer is the GPU's idle time measured as the
    # eager pass minus the graphed one (added to every pass, not hidden behind the GPU's work)
    overlaps_gpu: bool


class GemmCurve(BaseModel):
    """GEMM efficiency against the GEMM's row count M = batch x q, interpolated linearly in log M
    and held flat beyond the end points. A fraction of the hardware file's GEMM efficiency.

    A GEMM of another depth K (inner dimension) than the curve's runs at q(K) / q(reference_depth)
    of it, q(K) = K / (K + K0), K0 = depth_overhead x the GPU's achievable ridge (stack_time.py,
    depth_factor); depth_overhead 0: no depth term."""

    model_config = _FILE

    rows: list[float] = Field(min_length=1, max_length=MAX_CURVE_POINTS)
    efficiency: list[float] = Field(min_length=1, max_length=MAX_CURVE_POINTS)
    reference_depth: float | None = Field(default=None, ge=1, le=1e9)  # K of the GEMMs the curve was measured on
    depth_overhead: float = Field(default=0.0, ge=0, le=100)  # write-back exposed per output, in ridges

    @field_validator("rows")
    @classmethod
    def _rows(cls, v: list[float]) -> list[float]:
        if any(not (1 <= r <= 1e9) for r in v):
            raise ValueError("rows must lie in [1, 1e9]")
        if any(b <= a for a, b in zip(v, v[1:])):
            raise ValueError("rows must be strictly increasing")
        return v

    @field_validator("efficiency")
    @classmethod
    def _fractions(cls, v: list[float]) -> list[float]:
        if any(not (MIN_EFFICIENCY <= e <= 1) for e in v):
            raise ValueError(f"every efficiency must be in [{MIN_EFFICIENCY:g}, 1]")
        return v

    @model_validator(mode="after")
    def _same_length(self) -> "GemmCurve":
        if len(self.rows) != len(self.efficiency):
            raise ValueError("rows and efficiency must have the same length")
        if self.depth_overhead and self.reference_depth is None:
            raise ValueError("depth_overhead needs the reference_depth the curve was measured at")
        return self


class FusedMoE(BaseModel):
    """The routed experts' fused MoE kernel (SGLang's and vLLM's fused_moe: one tile loop per expert
    over the token copies routed to it, gathered by index and written back scattered): what its two
    grouped GEMMs reach against the dense GEMM curve (stack_time.py, expert_factor; evaluation's
    depth factors)."""

    model_config = _FILE

    # the depth term of its GEMMs, in ridges, in place of the curve's depth_overhead: the tiles of the
    # second GEMM loop over the expert's width on this GPU, the first's over d_model
    depth_overhead: float = Field(ge=0, le=100)
    # its rate with fp8 weights (block-scaled: scales applied inside the loop over K) as a share of the
    # hardware's fp8 GEMM rate
    fp8_rate: float = Field(default=1.0, ge=MIN_EFFICIENCY, le=1)


class GpuTier(BaseModel):
    """The GPUs a stack's default differs on: those whose memory lies in a range, from `from_gib`
    (inclusive) to below `below_gib`, either open, and, with `gpus_named`, whose name holds one of
    those words (any case: vLLM tells an A100 by "a100" in its device name); every condition given
    must hold."""

    model_config = _FILE

    from_gib: float | None = Field(default=None, gt=0, le=1e6)
    below_gib: float | None = Field(default=None, gt=0, le=1e6)
    gpus_named: list[Annotated[str, Field(min_length=1, max_length=40)]] | None = Field(default=None, min_length=1,
                                                                                       max_length=16)

    @model_validator(mode="after")
    def _a_range(self) -> "GpuTier":
        if self.from_gib is None and self.below_gib is None and self.gpus_named is None:
            raise ValueError("a GPU tier needs from_gib, below_gib or gpus_named")
        if self.from_gib is not None and self.below_gib is not None and self.from_gib >= self.below_gib:
            raise ValueError("a GPU tier's from_gib must be below its below_gib")
        return self

    def holds(self, memory_gib: float, names: Sequence[str] = ()) -> bool:
        """Whether a GPU with this much memory, known by these names, is in the tier."""
        return ((self.from_gib is None or memory_gib >= self.from_gib)
                and (self.below_gib is None or memory_gib < self.below_gib)
                and (self.gpus_named is None
                     or any(word.lower() in name.lower() for word in self.gpus_named for name in names)))


class ChunkTier(GpuTier):
    """A prefill token budget for the GPUs of a tier (`prefill_chunk_by_memory`)."""

    tokens: int = Field(ge=1, le=10_000_000)


class RunningTier(GpuTier):
    """A running-request limit for the GPUs of a tier (`max_running_by_gpu`)."""

    requests: int = Field(ge=1, le=MAX_RUNNING_REQUESTS)


class SlowKernels(BaseModel):
    """Kernels a release ran slower on some parts than the hardware file's kernel times say (those
    describe the tuned kernels): GPU time each decoder layer adds to every pass on those parts at
    those precisions, a fixed part and a part for each token the pass runs
    (stack_time.slow_kernel_time)."""

    model_config = _FILE

    gpus: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(min_length=1, max_length=64)
    precisions: list[Annotated[str, Field(min_length=1, max_length=20)]] = Field(min_length=1, max_length=16)
    us_per_layer: float = Field(ge=0, le=1e6)
    # and for each token the pass runs (batch x query tokens: a prefill's prompt, a decode step's
    # requests): an untuned kernel's time grows with the rows it is given, as the tuned one's does
    us_per_token_layer: float = Field(default=0.0, ge=0, le=1e6)

    @field_validator("gpus")
    @classmethod
    def _parts(cls, v: list[str]) -> list[str]:
        if any(not name.strip() for name in v):
            raise ValueError("gpus: a GPU's name, key or alias (not blank)")
        return v

    @field_validator("precisions")
    @classmethod
    def _precisions(cls, v: list[str]) -> list[str]:
        names = [name.strip().lower() for name in v]
        unknown = [name for name in names if name not in PRECISIONS]
        if unknown:  # it would apply to nothing, silently
            raise ValueError(f"precisions: unknown precision '{shown(unknown[0])}'; choose from: {', '.join(PRECISIONS)}")
        return names

    def applies(self, gpu: str | Sequence[str], precision: str) -> bool:
        """Whether this GPU (any of its names: the hardware file's name, its key and aliases, as
        `--gpu` takes them, in any case) at this precision (any case) runs these kernels."""
        names = {normalise(gpu)} if isinstance(gpu, str) else {normalise(g) for g in gpu}
        return bool(names & {normalise(g) for g in self.gpus}) and precision.strip().lower() in self.precisions


# predicted / measured speed at least this: the band's ends scale the step times, and one of 5e-324
# made a pass take 0 s (the simulation divided by it: an internal error)
MIN_RATIO = 1e-6


class PublishedBand(BaseModel):
    """A stack's published error band (error_bands.json) as a calibration found it."""

    model_config = _FILE

    stack: str = Field(min_length=1, max_length=100)
    # the vendor whose parts it was taken on, where the published bands have one there (None: every vendor's)
    vendor: Optional[str] = Field(default=None, min_length=1, max_length=100)
    low: float = Field(ge=MIN_RATIO, le=1e6)
    median: float = Field(ge=MIN_RATIO, le=1e6)
    high: float = Field(ge=MIN_RATIO, le=1e6)
    numbers: int = Field(ge=0, le=1_000_000)

    @model_validator(mode="after")
    def _ordered(self) -> "PublishedBand":
        # the output compares the calibrated band's width with this one's (ErrorBand.narrowing):
        # a band of no width, or upside down, has nothing to compare with
        if not (self.low <= self.median <= self.high and self.low < self.high):
            raise ValueError("needs low <= median <= high, and low below high")
        # its stack and vendor name a band this release publishes: the first-token band is read off
        # that band by name (an unknown one fell back to another, the header naming the unknown)
        names = published_names()
        if names and self.stack not in names:
            raise ValueError(f"stack {shown(self.stack, 40)} has no published band (those with one: "
                             f"{', '.join(sorted(names))})")
        if names and self.vendor is not None and self.vendor.lower() not in names[self.stack]:
            vendors = ", ".join(names[self.stack]) or "none"
            raise ValueError(f"{self.stack} has no published band on vendor {shown(self.vendor, 40)}'s parts "
                             f"(its vendors: {vendors})")
        return self


class HeldOutError(BaseModel):
    """What `dlmcost calibrate` writes: each measurement's measured / predicted time per forward
    under a fit that did not see it, and the band `serve` and `plan` draw their ranges from
    (calibration/held_out.py; docs/methodology.md, "Error bands")."""

    model_config = _FILE

    ratios: list[Annotated[float, Field(ge=MIN_RATIO, le=1e6)]] = Field(max_length=10_000)
    low: float = Field(ge=MIN_RATIO, le=1e6)
    median: float = Field(ge=MIN_RATIO, le=1e6)
    high: float = Field(ge=MIN_RATIO, le=1e6)
    basis: str = Field(min_length=1, max_length=1000)
    published: PublishedBand | None = None  # the stack's published band it stands in for

    @model_validator(mode="after")
    def _ordered(self) -> "HeldOutError":
        if not self.low <= self.median <= self.high:
            raise ValueError("held_out_error: needs low <= median <= high")
        return self


class Stack(BaseModel):
    """One software stack. Every number needs a line in `sources`."""

    model_config = _FILE

    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    description: str = Field(default="", max_length=1000)
    host: HostCost
    gemm_efficiency: GemmCurve
    attention_efficiency: float = Field(ge=MIN_EFFICIENCY, le=1)  # fraction of the hardware's bf16 GEMM efficiency
    # keys' worth of work each query row costs its attention kernel beyond the keys it reads (its
    # tiles' prologue and epilogue, the masked diagonal): attention runs at attention_efficiency x
    # k / (k + attention_keys_overhead) for k keys per query (stack_time.keys_term); 0: no such term
    attention_keys_overhead: float = Field(default=0.0, ge=0, le=1e6)
    elementwise_bytes_factor: float = Field(gt=0, le=16)  # x the engine's bf16 elementwise traffic
    sampler_logits_bytes: float = Field(ge=0, le=64)  # bytes per logit the head and the sampler hold at once
    # bytes per logit the sampler's kernels read and write in a step (its time at the achievable
    # bandwidth); None: sampler_logits_bytes, one pass over what it holds
    sampler_traffic_bytes: float | None = Field(default=None, ge=0, le=1000)
    # MoE expert GEMMs read the GEMM curve at the rows each expert receives (B q k / d experts
    # touched: a grouped GEMM runs one tile loop per expert) or, "pass", at the pass's B q rows
    expert_rows: Literal["routed", "pass"] = "routed"
    # the routed experts' fused MoE kernel against the dense GEMM curve (None: as the dense GEMMs)
    fused_moe: FusedMoE | None = None
    # requests the engine runs at once unless told otherwise (None: no limit of its own); the
    # serving simulation reads it as the default batch cap
    max_running_requests: int | None = Field(default=None, ge=1, le=MAX_RUNNING_REQUESTS)
    # how a batch of diffusion requests releases them (None: the serving simulation's default,
    # synchronous): all at once when the slowest finishes its block, or each when its own does
    release: Literal["synchronous", "first-done"] | None = None
    # a waiting request's prompt passes and first block run beside the running requests' last
    # passes, outside max_running_requests (the serving simulation: serving/simulate/)
    first_block_outside_limit: bool = False
    # how a block-diffusion request's prompt is prefilled: one pass over all of it, or one block of
    # it per forward (SGLang's dLLM path: a request's extend is cut to the block size each round)
    prompt_prefill: Literal["one-pass", "block-chunks"] = "one-pass"
    # autoregressive prompts prefilled under a token budget a step, shared with the running decodes
    # (vLLM V1's max_num_batched_tokens, SGLang's --chunked-prefill-size): the prompts are one
    # stream, first come first served, so a prompt of P tokens takes ceil(P / budget) steps alone
    # and a burst of short ones shares steps, beside the decodes instead of one step that stalls
    # them; None: each admitted prompt in one pass
    prefill_chunk_tokens: int | None = Field(default=None, ge=1, le=10_000_000)
    # prefills before the decodes (SGLang's scheduler: a prefill batch whenever one can be formed,
    # the running requests' decodes only when none can): an iteration that prefills holds only the
    # prompts it prefills, under the budget above, and the decodes wait for the next one without;
    # false: prefills run beside the decodes in one iteration (vLLM V1). Token-streaming decodings only
    prefill_first: bool = False
    # the budget on GPUs whose memory lies in a tier's range, in place of prefill_chunk_tokens (SGLang
    # sets --chunked-prefill-size by the GPU's memory); the first tier that holds the GPU's memory wins
    prefill_chunk_by_memory: list[ChunkTier] = Field(default_factory=list, max_length=16)
    # the running limit on the GPUs of a tier, in place of max_running_requests (vLLM's max_num_seqs
    # default by the GPU); the first tier that holds the GPU wins
    max_running_by_gpu: list[RunningTier] = Field(default_factory=list, max_length=16)
    # the API server processes every request passes before the engine sees it (None: no front-end
    # cost: the requests reach the scheduler as they are sent)
    front_end: FrontEndCost | None = None
    # the scheduler takes a receive interval (SGLang's --scheduler-recv-interval: it takes in new
    # requests only every R decode iterations, `serve --recv-interval`); false: it receives every step
    scheduler_recv_interval: bool = False
    # the vendors of the accelerators the engine runs on (a hardware file's `vendor`, any case;
    # None: any): `plan` searches only those unless --gpu names others
    runs_on: list[str] | None = Field(default=None, min_length=1, max_length=16)
    # the host's dispatch without CUDA graphs (`--eager`); None: the stack has no eager way to run
    # (it runs without graphs already, or no eager measurement of it is published)
    eager: EagerHost | None = None
    # whether CUDA graphs cover an autoregressive model's prompt prefill: false where the engine
    # captures graphs for decode only and runs each prefill eagerly, dispatched as the
    # `prefill_eager` block says, else as the `eager` one (SGLang 0.5: its piecewise prefill graphs
    # are off by default)
    prefill_graphs: bool = True
    # the host's dispatch of a prompt prefill launched eagerly, where it was measured apart from the
    # `eager` block's decode (None: the `eager` block's)
    prefill_eager: EagerHost | None = None
    # kernels the release ran slower on some parts than the hardware files' kernel times (which
    # describe tuned kernels): their GPU time per decoder layer, added to every pass there
    slow_kernels: list[SlowKernels] = Field(default_factory=list, max_length=16)
    version: str = Field(default="", max_length=100)  # the software release the numbers describe
    as_of: str = Field(default="", max_length=40)  # when they were checked (a date)
    sources: dict[str, str]
    # the numbers set by fitting them to published measurements: field -> the validation points
    # (ids in validation/*.yaml) they were fitted on; validation scores a point only against
    # numbers fitted on other sources, and `dlmcost stacks` lists them
    fitted: dict[str, list[PointId]] = Field(default_factory=dict, max_length=64)
    # a calibrated stack's held-out error (written by `dlmcost calibrate`): its error band
    held_out_error: HeldOutError | None = None

    @field_validator("fitted")
    @classmethod
    def _fitted_fields(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        unknown = [k for k in v if k not in FITTABLE_FIELDS]
        if unknown:
            raise ValueError(f"fitted: unknown field {', '.join(map(repr, unknown))} "
                             f"(known: {', '.join(FITTABLE_FIELDS)})")
        if any(not points for points in v.values()):
            raise ValueError("fitted: every field names the points it was fitted on")
        return v

    @field_validator("name")
    @classmethod
    def _not_marked_eager(cls, v: str) -> str:
        # the mark the outputs give a stack run with --eager (`run_eagerly`): a file's own name
        # carrying it would print "(eager)" on a stack run with CUDA graphs; and one printable line
        if marked_eager(v):
            raise ValueError(f"ends in '{EAGER_SUFFIX.strip()}', the mark --eager gives a stack's name "
                             "(an eager profile is the file's `eager:` block)")
        if not v.isprintable():
            raise ValueError("holds a control character: a stack's name is one printable line")
        return v

    @field_validator("runs_on")
    @classmethod
    def _vendors(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and any(not (0 < len(name.strip()) <= 40) for name in v):
            raise ValueError("runs_on: vendor names of 1 to 40 characters")
        return None if v is None else [name.strip().lower() for name in v]

    def slow_layer_us(self, gpu: str | Sequence[str], precision: str) -> float:
        """The slow kernels' microseconds per decoder layer on this GPU (a name, or all its names:
        SlowKernels.applies) at this precision (0: none)."""
        return sum(k.us_per_layer for k in self.slow_kernels if k.applies(gpu, precision))

    def slow_kernels_on(self, gpu: str | Sequence[str], precision: str) -> dict | None:
        """What its slow kernels add on this GPU at this precision, {us_per_layer, us_per_token_layer}
        (None where none apply): what the outputs say a run of this stack assumes there."""
        fixed, per_token = self.slow_layer_us(gpu, precision), self.slow_token_layer_us(gpu, precision)
        return dict(us_per_layer=fixed, us_per_token_layer=per_token) if fixed or per_token else None

    def slow_token_layer_us(self, gpu: str | Sequence[str], precision: str) -> float:
        """The slow kernels' microseconds per decoder layer for each token a pass runs on this GPU at
        this precision (0: none)."""
        return sum(k.us_per_token_layer for k in self.slow_kernels if k.applies(gpu, precision))

    def runs(self, vendor: str) -> bool:
        """Whether the engine runs on an accelerator of this vendor."""
        return self.runs_on is None or vendor.strip().lower() in self.runs_on

    def prefill_dispatch(self) -> "Stack":
        """The stack an autoregressive prompt prefill is costed under: itself where CUDA graphs
        cover prefills, else its `prefill_eager` host dispatch, or its `eager` one where it has no
        prefill's own (the name unchanged: the same engine)."""
        if self.prefill_graphs:
            return self
        return self.model_copy(update=dict(host=self._eager_host(self.prefill_eager or self.eager)))

    def run_eagerly(self) -> "Stack":
        """The same engine without CUDA graphs: its `eager` host dispatch, its name marked (the
        name the outputs print, and that `load_stack` reads back)."""
        if self.eager is None:
            raise UsageError(eager_refusal(self.name))
        return self.model_copy(update=dict(name=stack_label(self.name, True), host=self._eager_host(self.eager),
                                           prefill_graphs=False))

    def _eager_host(self, eager: EagerHost) -> HostCost:
        """The host block with an eager profile's dispatch in place of the graphed one."""
        return self.host.model_copy(update=eager.model_dump())

    @model_validator(mode="after")
    def _sourced(self) -> "Stack":
        wanted = list(SOURCED_FIELDS)
        # optional fields need a source only where the file sets them away from their default
        wanted += [name for name, default in OPTIONAL_SOURCED.items() if _value(self, name) != default]
        missing = [k for k in wanted if not self.sources.get(k, "").strip()]
        if missing:
            raise ValueError(f"sources: needs a source for: {', '.join(missing)}")
        if self.prefill_chunk_by_memory and not self.prefill_chunk_tokens:
            raise ValueError("prefill_chunk_by_memory: needs the prefill_chunk_tokens it stands in for on other GPUs")
        if self.max_running_by_gpu and not self.max_running_requests:
            raise ValueError("max_running_by_gpu: needs the max_running_requests it stands in for on other GPUs")
        if not self.prefill_graphs and self.eager is None and self.prefill_eager is None:
            raise ValueError("prefill_graphs: false needs the `prefill_eager:` (or `eager:`) block its prefills "
                             "are dispatched with")
        if self.fused_moe and self.fused_moe.depth_overhead and self.gemm_efficiency.reference_depth is None:
            raise ValueError("fused_moe: depth_overhead needs the reference_depth the GEMM curve was measured at")
        return self


SOURCED_FIELDS = ("host", "fixed", "gemm_efficiency", "attention_efficiency", "elementwise_bytes_factor",
                  "sampler_logits_bytes")
# fields with a neutral default, and that default: sourced when set otherwise
OPTIONAL_SOURCED = {"us_per_sequence": 0.0, "us_per_sequence_squared": 0.0, "us_per_expert": 0.0, "us_per_moe_layer": 0.0,
                    "us_per_mla_layer": 0.0, "us_per_collective": 0.0, "prefill_eager": None,
                    "max_running_requests": None, "release": None, "sampler_traffic_bytes": None,
                    "expert_rows": "routed", "first_block_outside_limit": False, "prompt_prefill": "one-pass",
                    "prefill_chunk_tokens": None, "front_end": None,
                    "depth_overhead": 0.0, "attention_keys_overhead": 0.0, "runs_on": None, "eager": None,
                    "fused_moe": None, "prefill_graphs": True, "scheduler_recv_interval": False, "slow_kernels": [],
                    "prefill_first": False, "prefill_chunk_by_memory": [], "max_running_by_gpu": []}


# the numbers of a stack a fit can set (host terms, the GEMM curve, the other efficiencies and behaviours)
FITTABLE_FIELDS = ("us_per_layer", "fixed_us_per_forward", "us_per_sequence", "us_per_sequence_squared", "us_per_expert", "gemm_efficiency",
                   "depth_overhead", "attention_efficiency", "elementwise_bytes_factor", "sampler_logits_bytes",
                   "sampler_traffic_bytes",
                   "max_running_requests", "first_block_outside_limit", "eager", "first_token_us_per_layer",
                   "first_token_us_per_mla_layer", "prefill_eager", "slow_kernels")
# how an eagerly run stack's name ends: `vllm (eager)`
EAGER_SUFFIX = " (eager)"


def check_stack_name(name: str, option: str = "--name") -> None:
    """A name given for a stack to be written (`calibrate --name`), held to the file's own rules
    before any work, so that a fit is not run only for its stack to be refused."""
    if not 1 <= len(name) <= MAX_NAME_CHARS:
        raise UsageError(f"{option}: a stack's name has 1 to {MAX_NAME_CHARS} characters, got {len(name):,}")
    if marked_eager(name):
        raise UsageError(f"{option}: '{shown(name)}' ends in '{EAGER_SUFFIX.strip()}', the mark --eager gives a "
                         "stack's name")
    if not name.isprintable():  # a line break or a terminal's control code, written into the file and every output
        raise UsageError(f"{option}: '{shown(name)}' holds a control character: a stack's name is one printable line")
    if name in bundled_stack_names() or name == STACK_NONE:  # its outputs would pass for the bundled stack's
        raise UsageError(f"{option}: '{shown(name)}' is a bundled stack's name: the fitted stack needs one of its own")


def marked_eager(name: str) -> bool:
    """Whether a name ends in the --eager mark, spaces after it too (`mine (eager) ` printed as a
    stack run eagerly: "stack": "mine (eager) " in the JSON)."""
    return name.rstrip().endswith(EAGER_SUFFIX)


def stack_label(name: str, eager: bool) -> str:
    """A stack's name as the outputs print it: `NAME (eager)` when run without CUDA graphs."""
    return name if not eager or name.endswith(EAGER_SUFFIX) else name + EAGER_SUFFIX


def eager_refusal(name: str) -> str:
    """Why --eager cannot apply to a stack without an `eager:` profile."""
    with_eager = [n for n in bundled_stack_names() if _bundled_has_eager(n)]
    return (f"--eager: the {shown(name)} stack has no eager profile (an `eager:` block): it runs without CUDA graphs "
            f"already, or no eager measurement of it is published; the stacks that have one: {', '.join(with_eager)}")


def _bundled_has_eager(name: str) -> bool:
    return read_stack_file(bundled_stack_dir() / f"{name}.yaml").eager is not None


def _value(stack: "Stack", name: str):
    for part in (stack.host, stack.gemm_efficiency):
        if name in type(part).model_fields:
            return getattr(part, name)
    return getattr(stack, name)


def bundled_stack_names() -> list[str]:
    d = bundled_stack_dir()
    return sorted(p.stem for p in d.glob("*.yaml")) if d.is_dir() else []


def read_stack_file(path: Path) -> Stack:
    """A stack YAML, read by the one bounded reader and validated; one that `extends:` a bundled
    stack is that stack with the file's fields over it (`extended`)."""
    return validate_stack(_stack_data(path), shown(str(path)))


def _read_yaml(path: Path):
    """A stack file's YAML as read, by the one bounded reader."""
    return files.read_document(path, limit=MAX_STACK_FILE_BYTES, error=StackFileError, what="stack file", fmt="yaml")


def _stack_data(path: Path, seen: tuple[str, ...] = ()) -> dict:
    data = _read_yaml(path)
    if not isinstance(data, dict):
        raise StackFileError(f"stack file {shown(str(path))} must be a YAML mapping, got {type(data).__name__}")
    if "extends" not in data:
        _refuse_a_bundled_name(data, path, "a stack file")
        return data
    base = data["extends"]
    names = bundled_stack_names()
    if not isinstance(base, str) or base not in names:
        raise StackFileError(f"stack file {shown(str(path))}: extends: '{shown(str(base))}' is no bundled stack "
                             f"(one of {', '.join(names)})")
    if base in seen or len(seen) >= MAX_EXTENDS_DEPTH:
        raise StackFileError(f"stack file {shown(str(path))}: extends: {' -> '.join((*seen, base))} goes round "
                             f"or deeper than {MAX_EXTENDS_DEPTH} stacks")
    # of its own: not the base's, nor another bundled stack's (`extends: sglang`, `name: vllm` printed
    # "stack": "vllm" for sglang's numbers and the file's)
    if not isinstance(data.get("name"), str) or data["name"] == base:
        raise StackFileError(f"stack file {shown(str(path))}: a stack that extends {base} needs a name of its own "
                             f"(`name:`), or its outputs and error band would pass for {base}'s")
    _refuse_a_bundled_name(data, path, f"a stack that extends {base}")
    parent = _stack_data(bundled_stack_dir() / f"{base}.yaml", (*seen, base))
    return extended(parent, {k: v for k, v in data.items() if k != "extends"})


def _refuse_a_bundled_name(data: dict, path: Path, what: str) -> None:
    """A file's `name:` that is a bundled stack's (or `none`, the bare roofline's), unless the file is
    that bundled file itself, is refused: a copy of sglang.yaml with one's own numbers, or a file
    extending sglang, called `vllm`, printed "stack": "vllm" for numbers that are not vllm's."""
    name = data.get("name")
    if not isinstance(name, str):
        return  # validation names what is wrong with it
    own_file = bundled_stack_dir() / f"{name}.yaml"
    if name == STACK_NONE or (name in bundled_stack_names() and Path(path).resolve() != own_file.resolve()):
        raise StackFileError(f"stack file {shown(str(path))}: {what} needs a name of its own (`name:`), not "
                             f"'{shown(name, 40)}', which names a bundled stack (`none`: the bare roofline): its "
                             "outputs would pass for that one's")


def bundled_base(name: str) -> str:
    """The bundled stack a bundled stack extends at the root (`extends:`, followed), else itself:
    the engine whose published measurements its error band is drawn from."""
    for _ in range(MAX_EXTENDS_DEPTH):
        data = _read_yaml(bundled_stack_dir() / f"{name}.yaml")
        base = data.get("extends") if isinstance(data, dict) else None
        if not isinstance(base, str):
            return name
        name = base
    return name


def extended(base: dict, over: dict) -> dict:
    """A stack's fields over the stack it extends: a mapping (`host`, `eager`, `sources`...) merged
    key by key, anything else (numbers, lists, names) replaced whole."""
    out = dict(base)
    for key, value in over.items():
        both_maps = isinstance(value, dict) and isinstance(base.get(key), dict)
        out[key] = extended(base[key], value) if both_maps else value
    return out


def validate_stack(data: dict, where: str = "stack") -> Stack:
    try:
        return Stack.model_validate(data)
    except ValidationError as exc:
        raise StackFileError(f"stack file {where}: {files.validation_message(exc)}") from None


def stack_file_named(spec: str) -> bool:
    """`--stack` names a stack file (a .yaml or .yml path that is no bundled stack's name)."""
    return spec not in bundled_stack_names() and Path(spec).suffix in (".yaml", ".yml")


def load_stack(spec: str | Stack | None = None, eager: bool = False) -> Stack:
    """A bundled stack by name, or a stack YAML by path; None gives the default. `eager`, or a
    name ending in ` (eager)` (as the outputs print it): the stack run without CUDA graphs
    (`Stack.run_eagerly`)."""
    if isinstance(spec, Stack):
        return spec.run_eagerly() if eager else spec
    spec = DEFAULT_STACK if spec is None else spec
    if spec.endswith(EAGER_SUFFIX):
        return load_stack(spec[:-len(EAGER_SUFFIX)], eager=True)
    if eager:
        return load_stack(spec).run_eagerly()
    names = bundled_stack_names()
    if spec in names:
        return read_stack_file(bundled_stack_dir() / f"{spec}.yaml")
    if spec == STACK_NONE:  # the commands that take it (analyze...) resolve it before calling here
        raise StackFileError(f"--stack {STACK_NONE} (the bare roofline) has no parameters to fit or predict with: "
                             f"calibrate and measure start from a stack, one of {', '.join(names)}, or a stack "
                             "YAML file")
    path = Path(spec)
    if path.suffix in (".yaml", ".yml"):  # a file, meant as one: read (or refused) as one
        return read_stack_file(path)
    raise StackFileError(f"unknown stack '{shown(spec)}': use one of {', '.join(names)}, "
                         f"{STACK_NONE}, or a stack YAML file")


def off_stack_message(stack: "Stack | None", gpus) -> str | None:
    """What to warn where a stack is asked to run on parts it does not run on (`gpus`: each with a
    name and a vendor): their times are an absent engine's. None where it runs on every one."""
    off = [g for g in gpus if stack is not None and not stack.runs(g.vendor)]
    if not off:
        return None
    names = ", ".join(f"{g.name} ({g.vendor})" for g in off)
    return (f"the {stack.name} stack does not run on {names}: its times there are those of an engine that "
            f"is not there (--stack names another)")


def default_stack_for(vendors: set[str]) -> str | None:
    """The stack a plan on parts of these vendors uses when none is named: None (each decoding
    its kind's default, DEFAULT_STACKS), unless SGLang runs on none of them and they all have the
    same serving engine of their own (DEFAULT_STACK_BY_VENDOR)."""
    vendors = {v.strip().lower() for v in vendors}
    if not vendors or any(load_stack(DEFAULT_STACK).runs(v) for v in vendors):
        return None
    own = {DEFAULT_STACK_BY_VENDOR.get(v) for v in vendors}
    return own.pop() if len(own) == 1 and None not in own else None
