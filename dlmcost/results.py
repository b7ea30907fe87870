"""What dlmcost returns, as typed records: `--format json` is their dump and `dlmcost schema`
prints their JSON Schema, so the documented keys and the output cannot disagree.

Units are in the key names (`_bytes`, `_s`, `_per_s`); counts of FLOPs and bytes are per GPU of a
tensor-parallel group unless the key says `_per_token` (whole group). Records also read like
mappings (`result["time_s"]`) for scripts written against plain dictionaries.
"""

from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 2
"""The version of every JSON document dlmcost prints (`schema_version`, its first key). 2: the
speed-up over AR is `speedup_vs_ar` (above 1 = faster than AR); 1 (no `schema_version` key) had
only `time_ratio_to_ar`, its inverse, which stays for one release as a deprecated alias."""

# A renamed key -> (the key that replaces it, how the two relate): the old key is still printed
# (and accepted by `--require`, with a warning) for one release, marked `"deprecated": true` in the
# schema.
DEPRECATED_KEYS = {"time_ratio_to_ar": ("speedup_vs_ar", "its inverse, above 1 = faster than AR")}
_OLD_RATIO = ("deprecated alias of 1 / speedup_vs_ar, kept for one release: latency over AR decode "
              "latency (above 1 is SLOWER than AR)")
SPEEDUP = "AR decode latency / this latency (same model, GPU, prompt, gen, batch): above 1 is faster than AR"


def version_field():
    """`schema_version`, the first key of every JSON document."""
    return Field(default=SCHEMA_VERSION, description="the version of this JSON layout (`dlmcost schema`)")


class Record(BaseModel):
    # dlmcost builds these from its own computed values (`model_construct`: no validation, so a
    # table never pays for building validators it does not use); their schema is built when
    # first needed: a JSON dump, `dlmcost schema`, or the tests that validate every kind of
    # result strictly against it (tests/test_results.py).
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    def __getitem__(self, key: str):
        field = type(self).model_fields.get(key)
        if field is None:
            raise KeyError(key)
        if field.deprecated:  # (attribute access warns too, once pydantic has built the model)
            import warnings

            warnings.warn(f"'{key}' is deprecated: {field.description}", DeprecationWarning, stacklevel=2)
        return self.__dict__[key]

    def __contains__(self, key: object) -> bool:
        return key in type(self).model_fields

    def get(self, key: str, default=None):
        return self[key] if key in type(self).model_fields else default

    def keys(self):
        return type(self).model_fields.keys()

    def plain(self) -> dict:
        """The record as plain Python data: what `model_dump()` returns for these records (no
        aliases, no custom serializers; tests/test_results.py checks that they agree), without
        building pydantic's serializer, which takes longer than a whole table takes to compute."""
        return {key: _plain(value) for key, value in self.__dict__.items()}


def _plain(value):
    if isinstance(value, Record):
        return value.plain()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


class Versioned(Record):
    """A JSON document: `schema_version` first."""

    schema_version: Literal[SCHEMA_VERSION] = version_field()


class ModelSummary(Record):
    id: str
    family: str
    source: str = Field(description="bundled | local | schema | cache | hub")
    revision: str | None
    verified: bool = Field(description="false when the config's dimensions come from a third-party port "
                                       "(provenance unverified)")
    provenance: str = Field(description="where the config comes from: verbatim (the Hub's own file, bundled or "
                                        "fetched), reconstructed (the upstream architecture and published dimensions), "
                                        "unverified (a third-party port's dimensions) or local (your file)")
    params_total: int
    params_nonembedding: int
    params_active: int = Field(description="parameters one token touches (MoE: the routed experts it is sent to)")
    kv_bytes_per_token: float = Field(description="bf16 K/V cache bytes per token, all layers")
    max_context: int | None


class WorkloadSummary(Record):
    scheme: str
    prompt: int
    gen: int
    steps: float = Field(description="S: forward passes of the denoising loop (draft-verify: iterations)")
    block: int
    n_blocks: float
    batch: int
    effective_batch: int = Field(description="batch with the classifier-free-guidance copy")
    cfg: bool
    precision: str
    kv_dtype: str
    mem_fraction: float = Field(default=0.9, description="the share of each GPU's memory the weights, K/V cache "
                                "and activations may fill (--mem-fraction): what fits and max_batch are measured against")
    store_pass: bool
    logits: str
    expert_load: str
    tp: int
    ep: int
    mla_form: str
    active_blocks: float
    cache_delay: float
    refresh_every: int
    window: int
    drafter: str | None
    answer_tokens: int = Field(description="useful tokens per sequence (up to end-of-sequence); throughput counts these")
    stops_at_eos: bool = Field(description="whether the scheme stops after the block holding end-of-sequence")
    knobs: list[str] = Field(description="the workload knobs the scheme's cost depends on "
                                                     "(`dlmcost schemes`); the others are shown as given but unused")
    compute_precision: str = Field(description="the precision the weight GEMMs run at "
                                                               "(w8a16, w4a16: bf16)")


class PassResult(Record):
    """One pass family, reported as its average pass (count x time_s = its share of the total)."""

    name: str
    count: float
    flops: float
    bytes: float
    q: float = Field(description="query tokens per sequence of the family's first pass")
    c: float = Field(description="cached tokens read by the family's first pass")
    q_last: float
    c_last: float
    flops_linear: float
    flops_attention: float
    flops_lm_head: float
    flops_other: float
    weight_bytes: float
    kv_read_bytes: float
    kv_write_bytes: float
    activation_bytes: float
    arithmetic_intensity: float
    achievable_ridge_flops_per_byte: float = Field(description="FLOP/byte at which the time model's compute and memory times meet: the GEMM rate reached at the pass's rows over the achievable bandwidth; below it, memory-bound")
    verdict: str
    time_s: float
    mla_form: str | None = Field(default=None, description="MLA models: absorbed or expanded")


class OpResult(Record):
    """One op over the whole generation."""

    name: str
    flops: float
    bytes: float
    arithmetic_intensity: float
    time_s: float
    time_share: float


class Knee(Record):
    block: int | None = Field(description="largest block whose cached step stays memory-bound (null: beyond limit)")
    batch: int | None
    context_tokens: float
    limit: int


class Memory(Record):
    weights_bytes: float
    kv_cache_bytes: float
    activation_bytes: float
    logits_bytes: float
    total_bytes: float
    capacity_bytes: float
    usable_bytes: float
    fits: bool
    per_sequence_bytes: float
    max_batch: int = Field(description="largest batch (CFG copy not counted) that fits")


class SlowKernelsRecord(Record):
    us_per_layer: float = Field(description="GPU time each decoder layer adds to every pass, microseconds")
    us_per_token_layer: float = Field(description="and each decoder layer for each token the pass runs (its batch x "
                                                  "query tokens), microseconds")


class GPUResult(Record):
    gpu: str
    gpu_key: str
    supported: Literal[True] = True
    gpu_status: str
    ridge_flops_per_byte: float
    peak_flops: float = Field(description="dense peak FLOP/s at the workload's compute precision")
    attention_peak_flops: float = Field(description="dense peak FLOP/s of attention and the LM "
                                                                 "head, which run in bf16")
    bandwidth_bytes_per_s: float = Field(description="memory bandwidth (the roofline's slope)")
    slow_kernels: Optional[SlowKernelsRecord] = Field(
        None, description="what the stack's release adds to every pass on this GPU at this precision, where it ran "
                          "kernels slower than the hardware file's tuned times (the stack's slow_kernels); null: none")
    nfe: float
    tokens_per_nfe: float
    flops: float
    bytes: float
    flops_breakdown: dict[str, float]
    bytes_breakdown: dict[str, float]
    arithmetic_intensity: float
    achievable_ridge_flops_per_byte: float = Field(description="the achievable ridge of the pass family taking the "
                                                               "most time (the verdict compares each family's own)")
    dominant_pass_arithmetic_intensity: float = Field(
        description="FLOP/byte of the pass family taking the most time, whose ridge is achievable_ridge_flops_per_byte: "
                    "the AI the tables show beside the verdict (arithmetic_intensity is the whole generation's average)")
    verdict: str
    memory_bound_time_fraction: float
    time_s: float
    time_bound_s: float
    gpus: int
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    flops_per_token: float
    bytes_per_token: float
    ar_time_s: float
    ar_tokens_per_s: float
    speedup_vs_ar: float = Field(description=SPEEDUP)
    time_ratio_to_ar: float = Field(deprecated=True, description=_OLD_RATIO)
    ar_step_arithmetic_intensity: float = Field(
        description="FLOP/byte of the AR decode baseline's average cached step (the roofline's AR point)")
    knee: Knee
    memory: Memory
    passes: list[PassResult]
    ops: list[OpResult]


class Unsupported(Record):
    gpu: str
    gpu_key: str
    supported: Literal[False] = False
    error: str


class AnalyzeResult(Versioned):
    model: ModelSummary
    workload: WorkloadSummary
    efficiency_profile: str
    stack: str = Field(description="software stack applied (docs/stacks.md); none: the bare hardware roofline")
    ar_stack: str = Field(default="", description="software stack of the AR decode baseline (the speed-up's denominator): "
                          "the stack given, else the autoregressive default")
    stack_default: bool = Field(default=False, description="true when no stack was given: the decoding's kind's default")
    eager: bool = Field(default=False, description="true when the stack ran without CUDA graphs (--eager; its name "
                        "then ends in ' (eager)')")
    decoding_source: dict | None = Field(
        default=None, description="where the tokens per forward come from when none was given: the model's published "
        "decoding (checkpoint, setting, task, tpf, accuracy, source; docs/decoding.md); null otherwise")
    warnings: list[str]
    results: list[Union[GPUResult, Unsupported]]

    def to_pandas(self, what: Literal["results", "passes", "ops"] = "results"):
        """A pandas DataFrame (the `pandas` extra): one row per GPU (nested keys dotted:
        `memory.total_bytes`), or per pass family or op of every supported GPU (a `gpu` column)."""
        from .dataframes import from_records

        plain = self.plain()
        if what == "results":
            return from_records(plain["results"], drop=("passes", "ops"), model=self.model.id)
        return from_records([dict(gpu=r["gpu"], **item) for r in plain["results"] if r["supported"] for item in r[what]],
                            model=self.model.id)


class SweepRow(Record):
    gpu: str
    scheme: str
    prompt: int
    gen: int
    steps: float | None = Field(description="null where the scheme does not depend on it")
    block: int | None = Field(description="null where the scheme does not depend on it")
    batch: int
    tp: int
    ep: int
    precision: str
    nfe: float
    tokens_per_nfe: float
    time_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    flops_per_token: float
    bytes_per_token: float
    arithmetic_intensity: float
    ridge_flops_per_byte: float
    achievable_ridge_flops_per_byte: float
    dominant_pass_arithmetic_intensity: float = Field(
        description="FLOP/byte of the pass family taking the most time, whose ridge is achievable_ridge_flops_per_byte: "
                    "the AI the tables show beside the verdict (arithmetic_intensity is the whole generation's average)")
    memory_bound_time_fraction: float
    verdict: str
    speedup_vs_ar: float = Field(description=SPEEDUP)
    time_ratio_to_ar: float = Field(deprecated=True, description=_OLD_RATIO)
    fits: bool
    memory_total_bytes: float
    max_batch: int


class SweepResult(Versioned):
    model: ModelSummary
    efficiency_profile: str
    stack: str = Field(description="software stack applied (docs/stacks.md); none: the bare hardware roofline")
    ar_stack: str = Field(default="", description="software stack of the autoregressive rows and of every AR baseline: "
                          "the stack given, else the autoregressive default")
    stack_default: bool = Field(default=False, description="true when no stack was given: each decoding's kind's default")
    eager: bool = Field(default=False, description="true when the stacks ran without CUDA graphs (--eager; their "
                        "names then end in ' (eager)')")
    evaluated: int
    skipped_impossible: int
    skipped_unsupported: int
    warnings: list[str] = Field(default=[], description="what the grid probably did not mean (printed on stderr)")
    settings: dict[str, object] = {}
    rows: list[SweepRow] = []

    def to_pandas(self):
        """A pandas DataFrame (the `pandas` extra), one row per configuration, the columns of
        `sweep --format csv` (None where a scheme ignores the knob)."""
        from .dataframes import from_columns

        names = list(SweepRow.model_fields)
        return from_columns({k: [row.__dict__[k] for row in self.rows] for k in names})


SCHEMAS = {"analyze": AnalyzeResult, "sweep": SweepResult}
