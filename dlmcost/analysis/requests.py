"""What a caller asks of analyze and sweep, as typed requests (the CLI builds one per command).

A field left None takes the model's sampler default, or the `Workload` default when the model has
none (`prepare.workload_for` decides, in one place); every other field is passed as it is.

    WorkloadSettings   the workload's knobs for one configuration (analyze)
    SweepGrid          the knobs a sweep crosses, each a list (None: the model's one value)
    Sources            where the numbers come from: efficiency profile, stack, extra GPU files, Hub
    AnalyzeRequest     model + GPUs + WorkloadSettings + Sources
    SweepRequest       models + GPUs + SweepGrid + the scalar WorkloadSettings + Sources
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from . import limits
from ..errors import UsageError


def _given(obj) -> dict:
    """The fields that were set (None: left to the defaults)."""
    return {f.name: getattr(obj, f.name) for f in fields(obj) if getattr(obj, f.name) is not None}


@dataclass(frozen=True)
class WorkloadSettings:
    """One configuration's knobs (the names of `Workload`'s fields)."""

    scheme: str | None = None
    prompt: int | None = None
    gen: int | None = None
    steps: float | None = None
    tpf: float | None = None
    block: int | None = None
    batch: int | None = None
    precision: str | None = None
    kv_dtype: str | None = None
    # the share of each GPU's memory the engine may fill (engine.memory's F; not a Workload field:
    # only the memory verdict reads it)
    mem_fraction: float | None = None
    cfg_scale: float = 0.0  # classifier-free guidance scale: any scale > 0 runs the unconditional copy
    store_pass: bool | None = None
    logits: str = "all"
    expert_load: str = "expected"
    tp: int | None = None
    ep: int | None = None
    mla_form: str = "auto"
    active_blocks: float | None = None
    cache_delay: float | None = None
    refresh_every: int | None = None
    window: int | None = None
    drafter: str | None = None
    answer_tokens: int | None = None
    kv_single_tensor: bool = False
    ring_buffer: bool = True
    quantize_head: bool = False
    task: str | None = None  # the task whose published tokens per forward are the default

    def given(self) -> dict:
        """Workload's fields as set: the cost depends on whether guidance runs, not on its scale."""
        out = _given(self)
        out.pop("cfg_scale")
        if self.cfg_scale > 0:
            out["cfg"] = True
        return out


# the knobs a sweep crosses, as WorkloadSettings names them -> the sweep's list argument
GRID_KNOBS = {"scheme": "schemes", "prompt": "prompts", "gen": "gens", "steps": "steps", "tpf": "tpf",
              "block": "blocks", "batch": "batches", "precision": "precisions", "tp": "tps", "ep": "eps"}


@dataclass(frozen=True)
class SweepGrid:
    """The lists a sweep crosses; None: the model's (or the default) single value."""

    schemes: list[str] | None = None
    prompts: list[int] | None = None
    gens: list[int] | None = None
    steps: list[float] | None = None
    tpf: list[float] | None = None
    blocks: list[int] | None = None
    batches: list[int] | None = None
    precisions: list[str] | None = None
    tps: list[int] | None = None
    eps: list[int] | None = None

    def given(self) -> dict:
        return _given(self)


@dataclass(frozen=True)
class Sources:
    """Where the numbers come from."""

    efficiency: str = "realistic"
    stack: str | None = None
    eager: bool = False  # the stack run without CUDA graphs (its `eager:` host dispatch)
    hardware: list[str] | None = None
    revision: str | None = None
    hub: bool = False

    def __post_init__(self):
        # '' (an unset shell variable) was read as no revision: main, not the revision meant
        if self.revision is not None and not self.revision.strip():
            raise UsageError("--revision is empty: give a branch, tag or commit hash, or leave it out for main")

    def given(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class AnalyzeRequest:
    model: str
    gpus: str | None = None
    workload: WorkloadSettings = field(default_factory=WorkloadSettings)
    sources: Sources = field(default_factory=Sources)


@dataclass(frozen=True)
class SweepRequest:
    models: list[str]
    gpus: str | None = None
    grid: SweepGrid = field(default_factory=SweepGrid)
    workload: WorkloadSettings = field(default_factory=WorkloadSettings)  # its GRID_KNOBS are unused
    sources: Sources = field(default_factory=Sources)
    allow_large: bool = False  # no limit on configurations (a streamed sweep)
    own_defaults: bool = False  # several models: each grid from its own model's defaults

    def options(self) -> dict:
        """The keyword arguments of `sweep`/`iter_sweep` for one model of the request (the limit on
        configurations as `limits` holds it when called). Several models are swept on one grid,
        like with like: the lengths, steps, block and store pass not given take the first model's
        defaults (each model runs its own schemes), unless own_defaults."""
        scalar = {k: v for k, v in self.workload.given().items() if k not in GRID_KNOBS}
        shared = len(self.models) > 1 and not self.own_defaults
        return dict(gpus=self.gpus, **self.grid.given(), **scalar, **self.sources.given(),
                    max_configs=None if self.allow_large else limits.MAX_SWEEP_CONFIGS,
                    **({"defaults": self.models[0]} if shared else {}))
