"""Accelerator specs: the YAML database under `hardware/`, validation, aliases.

One YAML file per accelerator, every number with its source (see `hardware/README.md`). The
database ships inside the wheel (`dlmcost/_hardware`); in a source checkout the top-level
`hardware/` folder is read. Users add or override accelerators with their own file or folder
(`--hardware PATH` or `DLMCOST_HARDWARE=PATH[:PATH...]`); an entry with the same name replaces
the bundled one.
"""

import os
import warnings
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Annotated, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, Strict, StringConstraints, ValidationError, field_validator, model_validator

from . import files
from .bundled import bundled_hardware_dir  # noqa: F401  (the database's folder; importers read it here)
from ..errors import DlmcostWarning, HardwareFileError, UnknownGPUError, UsageError
from ..safe_text import shown

# Precisions a peak can be given for. `fp32` is the non-tensor-core (vector) rate, used for
# elementwise work; the others are dense tensor-core rates (no 2:4 sparsity).
PEAK_KEYS = ("bf16", "fp8", "fp4", "int8", "fp32")

HARDWARE_ENV = "DLMCOST_HARDWARE"

# A number in a hardware or efficiency file: an int or a float, never a boolean (`true` is not
# 1 TB/s) nor a string. The ranges below are plausible for any accelerator, so that a typo or a
# tiny value like 5e-324 cannot overflow the arithmetic to inf.
Number = Annotated[float, Strict()]
MIN_FRACTION = 0.01  # an achievable fraction of a peak below 1% is a typo
# a GPU's name or alias: something to type after --gpu and to print in a table's column (a name of
# spaces alone printed blank, one of 500,000 characters filled every table and warning)
MAX_GPU_NAME_CHARS = 100
GpuName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_GPU_NAME_CHARS)]


class MeasuredStreaming(BaseModel):
    """A memory-bound kernel's time as measured, latency = overhead + bytes / (bandwidth x peak):
    GEMMs with their weights read once (decode's) at one weight precision, or decode's attention
    reading the K/V cache, where published."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    memory_bandwidth: Number = Field(ge=MIN_FRACTION, le=1)
    overhead_us_per_op: Number = Field(ge=0, le=1000)


class Efficiency(BaseModel):
    """Achievable fractions of the peaks, for the `realistic` profile (from published measurements)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    memory_bandwidth: Number = Field(ge=MIN_FRACTION, le=1)
    gemm: dict[str, Number]  # precision -> achievable fraction of the dense peak
    overhead_us_per_op: Number = Field(ge=0, le=1000)
    link: Number = Field(default=0.8, ge=MIN_FRACTION, le=1)
    collective_latency_us: Number = Field(default=10.0, ge=0, le=10000)
    # How many times the rows of a software stack's GEMM curve this GPU's GEMMs need to reach the
    # curve's efficiency (the curve is read at M / gemm_rows_scale): fitted to published
    # per-forward times where they exist, 1 elsewhere. Only passes under a stack read it; large
    # GEMMs reach `gemm` (the maximum achievable matmul FLOPS) whatever it is.
    gemm_rows_scale: Number = Field(default=1.0, ge=0.05, le=20)
    # The fraction of `gemm` a board-power-limited part sustains under continuous tensor-core load
    # (its clocks settle below boost; a maximum-achievable-matmul benchmark is a short burst):
    # multiplies the GEMM and attention efficiencies of the realistic profile. 1 unless a published
    # sustained measurement on the part says otherwise (sources.sustained_compute then).
    sustained_compute: Number = Field(default=1.0, ge=0.05, le=1)
    # The GEMMs' (linear ops') bandwidth and time per op at each weight precision measured
    # (`weight_streaming.fp8`...), in place of memory_bandwidth and overhead_us_per_op, which every
    # other op and an unlisted precision take
    weight_streaming: dict[str, MeasuredStreaming] = Field(default_factory=dict)
    # Decode's attention (one query a sequence, the K/V cache read once) as measured on this GPU,
    # in place of memory_bandwidth and overhead_us_per_op; other passes' attention keeps those
    decode_attention: Optional[MeasuredStreaming] = None
    # A fused MoE block's grouped expert GEMMs (the `experts` op) at each weight precision, where
    # whole fused blocks were measured and stream otherwise than the dense GEMMs; an unlisted
    # precision takes weight_streaming's (then the generic pair)
    experts_streaming: dict[str, MeasuredStreaming] = Field(default_factory=dict)

    @field_validator("weight_streaming", "experts_streaming")
    @classmethod
    def _precisions(cls, v: dict) -> dict:
        for key in v:
            if key not in PEAK_KEYS:
                raise ValueError(f"unknown precision {key!r} (known: {', '.join(PEAK_KEYS)})")
        return v

    def streaming(self, precision: str) -> tuple[float, float]:
        """(bandwidth fraction, us per op) of the GEMMs whose weights are in `precision`."""
        w = self.weight_streaming.get(precision)
        return (w.memory_bandwidth, w.overhead_us_per_op) if w is not None else (self.memory_bandwidth,
                                                                                  self.overhead_us_per_op)

    def experts_rate(self, precision: str) -> tuple[float, float]:
        """(bandwidth fraction, us per kernel) of a fused MoE block's expert GEMMs in `precision`."""
        w = self.experts_streaming.get(precision)
        return (w.memory_bandwidth, w.overhead_us_per_op) if w is not None else self.streaming(precision)

    def decode_attention_rate(self) -> tuple[float, float]:
        """(bandwidth fraction, us per op) of decode's attention."""
        a = self.decode_attention
        return (a.memory_bandwidth, a.overhead_us_per_op) if a is not None else (self.memory_bandwidth,
                                                                                  self.overhead_us_per_op)

    @field_validator("gemm")
    @classmethod
    def _fractions(cls, v: dict[str, float]) -> dict[str, float]:
        for key, frac in v.items():
            if key not in PEAK_KEYS:
                raise ValueError(f"unknown precision {key!r} (known: {', '.join(PEAK_KEYS)})")
            if not (MIN_FRACTION <= frac <= 1):
                raise ValueError(f"gemm.{key} must be a fraction in [{MIN_FRACTION}, 1], got {frac}")
        return v


# a GPU-hour's price, USD: no GPU rents for under a cent an hour (1e-300 would print every $/Mtok as 0.00)
MIN_USD_PER_HOUR, MAX_USD_PER_HOUR = 0.01, 1000.0


class Price(BaseModel):
    """Rental price of one GPU for one hour, USD: a dated public on-demand list price, an estimate.

    `usd` is the planner's default (a typical on-demand rate); `low`/`high` bracket the public
    range seen for the same part (cheapest credible on-demand, hyperscaler list)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    usd: Number = Field(ge=MIN_USD_PER_HOUR, le=MAX_USD_PER_HOUR)
    low: Number | None = Field(default=None, ge=MIN_USD_PER_HOUR, le=MAX_USD_PER_HOUR)
    high: Number | None = Field(default=None, ge=MIN_USD_PER_HOUR, le=MAX_USD_PER_HOUR)
    as_of: str = Field(min_length=4)  # date of the source snapshot, e.g. 2026-09-25
    source: str = Field(min_length=1)
    estimate: bool = True  # list prices move often (2025-2026 saw cuts and rises): never a constant

    @property
    def dated(self):
        """The date `as_of` starts with, as a `datetime.date`: a year or a month alone counts from its
        first day ('2026 (catalog v8)' is 2026-01-01); None when it starts with no date."""
        import datetime
        import re

        m = re.match(r"(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?", self.as_of.strip())
        try:
            return datetime.date(int(m.group(1)), int(m.group(2) or 1), int(m.group(3) or 1)) if m else None
        except ValueError:  # 2026-13-40
            return None

    @model_validator(mode="after")
    def _ordered(self) -> "Price":
        if self.low is not None and self.low > self.usd:
            raise ValueError(f"low ({self.low}) is above the typical price ({self.usd})")
        if self.high is not None and self.high < self.usd:
            raise ValueError(f"high ({self.high}) is below the typical price ({self.usd})")
        return self


class GPU(BaseModel):
    """One accelerator. Units are in the field names; derived SI values are properties."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: GpuName
    aliases: list[GpuName] = Field(default=[], max_length=64)
    vendor: str
    status: Literal["verified", "corroborated", "estimated", "provisional"]
    memory_gb: Number | None = Field(default=None, ge=0.1, le=100_000)  # vendor GB (1e9 bytes)
    memory_gib: Number | None = Field(default=None, ge=0.1, le=100_000)  # GiB (2^30 bytes)
    bandwidth_tb_s: Number = Field(ge=0.01, le=1000)  # decimal TB/s
    peak_tflops: dict[str, Number]  # precision -> dense TFLOP/s (TOPS for int8)
    scale_up_gb_s: Number = Field(default=0.0, ge=0, le=100_000)  # per direction, per GPU
    efficiency: Efficiency
    sources: dict[str, str]
    notes: str = ""
    price_per_hour: Price | None = None  # per GPU; None: no public price (plan needs --price)
    # vendor envelope (TDP/TBP); no accelerator draws under a watt, so 1e-300 W is a typo, not a part
    board_power_w: Number | None = Field(default=None, ge=1, le=100_000)
    # the market the vendor sells the card in: `plan` searches data-centre parts unless asked
    segment: Literal["datacenter", "workstation", "consumer"] = "datacenter"
    # what one is called in a sentence ("4 chips"): TPUs and Trainium are chips, Gaudi an accelerator
    unit: Literal["GPU", "chip", "accelerator"] = "GPU"
    # efficiency numbers set by fitting them to published measurements: field -> the validation
    # points they were fitted on (a same-die part that takes a fitted value names the same points)
    fitted: dict[str, list[Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[a-z0-9:._-]+$")]]] = \
        Field(default_factory=dict, max_length=16)

    @property
    def names(self) -> tuple[str, ...]:
        """Every name `--gpu` takes for it: the file's name, its key and its aliases."""
        return (self.name, self.key, *self.aliases)

    @field_validator("fitted")
    @classmethod
    def _fitted_fields(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        unknown = [k for k in v if k not in Efficiency.model_fields]
        if unknown:
            raise ValueError(f"fitted: unknown efficiency field {', '.join(map(repr, unknown))}")
        if any(not points for points in v.values()):
            raise ValueError("fitted: every field names the points it was fitted on")
        return v

    @field_validator("peak_tflops")
    @classmethod
    def _peaks(cls, v: dict[str, float]) -> dict[str, float]:
        if "bf16" not in v:
            raise ValueError("peak_tflops needs at least bf16")
        for key, tflops in v.items():
            if key not in PEAK_KEYS:
                raise ValueError(f"unknown precision {key!r} (known: {', '.join(PEAK_KEYS)})")
            if not (0.01 <= tflops < 1e6):
                raise ValueError(f"peak_tflops.{key} must be a TFLOP/s figure in [0.01, 1e6), got {tflops}")
        return v

    @field_validator("scale_up_gb_s")
    @classmethod
    def _link(cls, v: float) -> float:
        if 0 < v < 0.1:
            raise ValueError(f"must be 0 (no scale-up link) or at least 0.1 GB/s, got {v}")
        return v

    @model_validator(mode="after")
    def _memory_and_sources(self) -> "GPU":
        if (self.memory_gb is None) == (self.memory_gib is None):
            raise ValueError("give exactly one of memory_gb (vendor GB) or memory_gib")
        for needed in ("memory", "bandwidth", "peak_tflops", "efficiency"):
            if not self.sources.get(needed):
                raise ValueError(f"sources.{needed} is missing: every number needs its source")
        if self.efficiency.sustained_compute != 1 and not self.sources.get("sustained_compute"):
            raise ValueError("sources.sustained_compute is missing: every number needs its source")
        return self

    @model_validator(mode="after")
    def _power_source(self) -> "GPU":
        if self.board_power_w is not None and not self.sources.get("board_power_w"):
            raise ValueError("sources.board_power_w is missing: every number needs its source")
        return self

    # --- derived SI quantities -------------------------------------------------------------
    @property
    def memory_bytes(self) -> float:
        return self.memory_gb * 1e9 if self.memory_gb is not None else self.memory_gib * 2**30

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.bandwidth_tb_s * 1e12

    @cached_property
    def peak_flops(self) -> dict[str, float]:
        return {k: v * 1e12 for k, v in self.peak_tflops.items()}

    @cached_property
    def ridge_flops_per_byte(self) -> dict[str, float]:
        """Ridge point per precision: peak FLOP/s over bandwidth (AI* of the roofline model)."""
        return {k: ridge_flops_per_byte(v, self.bandwidth_bytes_per_s) for k, v in self.peak_flops.items()}

    @property
    def link_bytes_per_s(self) -> float:
        return self.scale_up_gb_s * 1e9

    def supports(self, compute_precision: str) -> bool:
        return compute_precision in self.peak_flops

    @property
    def key(self) -> str:
        return normalise(self.name)


def ridge_flops_per_byte(peak_flops_per_s: float, bandwidth_bytes_per_s: float) -> float:
    """AI* = peak / bandwidth: below it a kernel cannot use the full peak (memory-bound)."""
    return peak_flops_per_s / bandwidth_bytes_per_s


def normalise(name: str) -> str:
    return "-".join(name.lower().replace("_", " ").split())


# --- loading -------------------------------------------------------------------------------


def read_gpu_file(path: Path) -> dict:
    """The raw mapping of a hardware YAML (parsed, not yet validated)."""
    data = files.read_document(path, limit=files.HARDWARE_LIMIT, error=HardwareFileError, what="hardware file",
                               fmt="yaml")
    if not isinstance(data, dict):
        raise HardwareFileError(f"hardware file {shown(path)} must be a YAML mapping, got {type(data).__name__}")
    return data


def validate_gpu(data: dict, path: Path) -> GPU:
    try:
        return GPU.model_validate(data)
    except ValidationError as exc:
        raise HardwareFileError(f"hardware file {shown(path)}: {files.validation_message(exc)}") from None


def load_gpu_file(path: Path) -> GPU:
    return validate_gpu(read_gpu_file(path), path)


def _yaml_files(path: Path) -> list[Path]:
    """The hardware files a path names: itself, or the .yaml/.yml regular files of a folder."""
    return files.yaml_files(path, error=HardwareFileError, what="hardware path")


def user_hardware_paths(extra: list[str] | None = None) -> list[Path]:
    paths = [Path(p) for p in os.environ.get(HARDWARE_ENV, "").split(os.pathsep) if p]
    for given in extra or []:  # Path('') is the current folder: its YAML files would be read as hardware
        files.expand(given, HardwareFileError, "hardware path")
    return paths + [Path(p) for p in (extra or [])]


@lru_cache(maxsize=1)
def bundled_gpus() -> tuple[GPU, ...]:
    """The shipped database, read and validated once per process."""
    return tuple(load_gpu_file(f) for f in _yaml_files(bundled_hardware_dir()))


class HardwareDB:
    """All known accelerators, by normalised name, with alias lookup. A user's GPU with the name
    of a bundled one replaces it; an alias that already names another GPU keeps naming that one
    (with a warning, so that the shadowed alias does not go unnoticed)."""

    def __init__(self, gpus: list[GPU], bundled: tuple[GPU, ...] = ()):
        self.gpus: dict[str, GPU] = {}
        for gpu in (*bundled, *gpus):  # later entries (user files) replace earlier ones
            self.gpus[gpu.key] = gpu
        self._lookup: dict[str, str] = {key: key for key in self.gpus}  # a name beats an alias
        for user, gpu in [(False, g) for g in bundled] + [(True, g) for g in gpus]:
            for alias in gpu.aliases:
                owner = self._lookup.setdefault(normalise(alias), gpu.key)
                if user and owner != gpu.key:
                    other = shown(self.gpus[owner].name)
                    warnings.warn(f"alias '{shown(alias)}' of GPU '{shown(gpu.name)}' already names {other}; "
                                  f"--gpu {shown(alias)} keeps meaning {other}", DlmcostWarning, stacklevel=3)

    @classmethod
    def load(cls, extra_paths: list[str] | None = None) -> "HardwareDB":
        user = [load_gpu_file(f) for path in user_hardware_paths(extra_paths) for f in _yaml_files(path)]
        return cls(user, bundled_gpus())

    def get(self, name: str) -> GPU:
        key = self._lookup.get(normalise(name))
        if key is None:
            from .names import close_matches, hint  # only on the error path

            close = close_matches(normalise(name), list(self._lookup))
            raise UnknownGPUError(f"unknown GPU '{shown(name)}'{hint(close, '`dlmcost gpus` lists them')}")
        return self.gpus[key]

    def select(self, spec: str | list[str] | None, default: list[str]) -> list[GPU]:
        """`all`, a comma list, a list, or None for the default set; duplicates removed."""
        if spec is None:
            names = default
        elif isinstance(spec, str):
            if spec.strip().lower() == "all":
                return list(self.gpus.values())
            names = [s for s in (p.strip() for p in spec.split(",")) if s]
        else:
            names = spec
        if not names:
            raise UsageError("--gpu names no GPU; give a name, a comma list, or 'all'")
        out: dict[str, GPU] = {}
        for n in names:
            gpu = self.get(n)
            out[gpu.key] = gpu
        return list(out.values())


# The default GPU set of `analyze` and `sweep`: current NVIDIA and AMD datacentre parts.
DEFAULT_GPUS = ["h100", "h200", "b200", "b300", "mi300x", "mi355x", "mi455x"]
