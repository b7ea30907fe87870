"""Files of measured times (published or from `dlmcost measure`) and the model's prediction for each.

A measurements file is YAML: `points:`, a list of

    id: short-name
    model: bundled id, or a model file (a relative path is taken from the measurements file's folder)
    gpu: GPU name or alias
    stack: stack the measurement ran on (validation; `calibrate` fits one stack to all points)
    workload: {scheme, prompt, gen, steps, block, batch, tp, ep, precision, ...}  (analyze keywords)
    measured: exactly one of {ms_per_forward, tokens_per_s, latency_s}
    tokens_per_forward: tokens/s -> time per forward (default 1, as in AR decode)
    answer_tokens: the published tokens/s counts N useful tokens per sequence (up to end-of-sequence)
        while the schedule runs its whole canvas: time = batch x N / (tokens/s), per forward / passes
    source / assumes / case / in_sample: provenance, shown on the validation page

Time per forward is the compared quantity: measured = 1000 x tokens_per_forward / tokens_per_s
(or as given; with answer_tokens, the generation's time / its passes), predicted = the workload's total
predicted time / its forward passes.
"""

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..inputs import files
from ..safe_text import shown
from ..errors import UnknownModelError, UsageError
from ..inputs.models import resolve_model

MAX_FILE_BYTES = 1024 * 1024
# a measured time per forward (given, or from tokens/s or a latency) outside these, ms: no pass
# takes under a nanosecond or over `latency_s`'s own limit, and one of ~1e-300 ms (or ~1e300)
# put an infinite ratio into the fit (exit 70)
MIN_MEASURED_MS, MAX_MEASURED_MS = 1e-6, 1e12
MAX_POINTS = 10_000
WORKLOAD_KEYS = ("scheme", "prompt", "gen", "steps", "block", "batch", "tp", "ep", "precision", "kv_dtype",
                 "cfg", "store_pass", "logits", "expert_load", "mla_form", "tpf")
NUMERIC_WORKLOAD_KEYS = ("prompt", "gen", "steps", "block", "batch", "tp", "ep", "tpf")
BOOLEAN_WORKLOAD_KEYS = ("cfg", "store_pass")


# strict, as stack and scenario files: `true` or "20" where a number belongs is a typo, not 1 or 20
_STRICT = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=True)


class Measured(BaseModel):
    model_config = _STRICT

    ms_per_forward: float | None = Field(default=None, gt=0, le=1e9)
    tokens_per_s: float | None = Field(default=None, gt=0, le=1e12)
    latency_s: float | None = Field(default=None, gt=0, le=1e9)

    @model_validator(mode="after")
    def _one(self) -> "Measured":
        given = [k for k in ("ms_per_forward", "tokens_per_s", "latency_s") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of ms_per_forward, tokens_per_s, latency_s")
        return self


class Point(BaseModel):
    model_config = _STRICT

    id: str = Field(min_length=1, max_length=100)
    model: str = Field(min_length=1, max_length=500)
    gpu: str = Field(min_length=1, max_length=100)
    stack: str | None = Field(default=None, max_length=500)
    workload: dict[str, float | int | str | bool]
    measured: Measured
    tokens_per_forward: float = Field(default=1.0, gt=0, le=1e6)
    answer_tokens: float | None = Field(default=None, gt=0, le=1e7)  # tokens/s counted up to EOS
    case: Literal["dense dLLM", "AR baseline", "cached/block dLLM", "MoE", "other"] = "other"
    source: str = ""
    assumes: str = ""
    in_sample: bool = False  # this point set a profile number (not an independent check)
    # the publication the point comes from (a key of the file's header): validation scores a point
    # only against numbers fitted on other publications' points
    origin: str = Field(default="", max_length=40)
    # points whose fit set one of this point's assumptions (an answer length, tokens per forward)
    leans_on: list[str] = Field(default_factory=list, max_length=100)

    @model_validator(mode="after")
    def _keys(self) -> "Point":
        unknown = sorted(set(self.workload) - set(WORKLOAD_KEYS))
        if unknown:
            raise ValueError(f"unknown workload keys: {', '.join(unknown)} (known: {', '.join(WORKLOAD_KEYS)})")
        # strict as the rest of the point: `prompt: true` or `gen: "64"` is a typo, not 1 or 64
        for key, value in self.workload.items():
            if key in NUMERIC_WORKLOAD_KEYS and isinstance(value, (bool, str)):
                raise ValueError(f"workload {key}: expected a number, got {value!r}")
            if key in BOOLEAN_WORKLOAD_KEYS and not isinstance(value, bool):
                raise ValueError(f"workload {key}: expected true or false, got {value!r}")
        return self


class MeasurementFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    points: list[Point] = Field(min_length=1, max_length=MAX_POINTS)


def load_points(path: str | Path) -> tuple[list[Point], Path]:
    """The points of a measurements file, and the folder relative model paths are taken from."""
    path = Path(path)
    data = files.read_document(path, limit=MAX_FILE_BYTES, error=UsageError, what="measurements file", fmt="yaml")
    if not isinstance(data, dict):
        raise UsageError(f"measurements file {shown(str(path))} must be a mapping with a `points:` list")
    try:
        return MeasurementFile.model_validate(data).points, path.resolve().parent
    except ValidationError as exc:
        raise UsageError(f"measurements file {shown(str(path))}: {files.validation_message(exc)}") from None


def measured_ms_per_forward(p: Point) -> float:
    m = p.measured
    if m.ms_per_forward is not None:
        return m.ms_per_forward
    if m.tokens_per_s is not None:
        return 1e3 * p.tokens_per_forward / m.tokens_per_s
    return None  # latency: needs the workload's pass count (see compare)


MODEL_SUFFIXES = (".yaml", ".yml", ".json")


def resolve_point_model(p: Point, base: Path):
    """A point's model. A relative path is taken from the measurements file's folder `base`,
    never from the current one: the path there when anything is there (a FIFO or a folder is
    then named for what it is); a model file's name with nothing there is an error that says
    where it was looked for; any other name is an id (bundled, or the Hub)."""
    given = p.model
    if given.startswith("~") or Path(given).is_absolute():
        return resolve_model(given)
    local = base / given
    if os.path.lexists(local):
        return resolve_model(str(local))
    if local.suffix.lower() in MODEL_SUFFIXES:
        raise UnknownModelError(f"point {shown(p.id)}: no model file {shown(given)} in the measurements file's "
                                f"folder ({shown(str(base))}), where a relative path is taken from")
    return resolve_model(given, local=False)


def analysis_for(p: Point, base: Path, hardware: list[str] | None = None, stack=None, spec=None):
    """The analysis of a point's workload under a stack (name, file, Stack, or `none`)."""
    from ..analysis.analyze import analyze

    spec = spec or resolve_point_model(p, base)
    return analyze(spec, gpus=p.gpu, hardware=hardware, stack=stack, **dict(p.workload)), spec


def check_answer_tokens(p: Point, gen: float) -> None:
    """`answer_tokens` counts the useful tokens of a generation of `gen` (the workload's, the
    model's default when not given): never more than it generates."""
    if p.answer_tokens is not None and p.answer_tokens > gen:
        given = f"{p.answer_tokens:,.0f}" if p.answer_tokens == int(p.answer_tokens) else f"{p.answer_tokens:g}"
        raise UsageError(f"point {shown(p.id)}: answer_tokens {given} is more than the {gen:,.0f} tokens its "
                         f"workload generates (gen); it counts the useful tokens of that generation")


def cannot_run(p: Point) -> UsageError:
    return UsageError(f"point {p.id}: {p.gpu} cannot run this workload")


def compare(p: Point, analysis, roofline=None) -> dict:
    """Measured vs predicted time per forward for one point; `roofline`: the same workload's
    analysis without a stack, for comparison."""
    check_answer_tokens(p, analysis["workload"]["gen"])
    r = next((x for x in analysis["results"] if x.get("supported")), None)
    if r is None:
        raise cannot_run(p)
    roof = next((x for x in roofline["results"] if x.get("supported")), None) if roofline else None
    return comparison(p, r["gpu"], analysis["stack"], r["nfe"], r["time_s"], float(analysis["workload"]["batch"]),
                      roofline_ms=1e3 * roof["time_s"] / roof["nfe"] if roof else None)


def comparison(p: Point, gpu: str, stack: str, nfe: float, time_s: float, batch: float,
               roofline_ms: float | None = None) -> dict:
    """`compare` from the predicted totals of the point's workload on `gpu`: `nfe` forward passes
    taking `time_s` in all; `batch`: the workload's batch (without a CFG copy)."""
    meas_ms = measured_ms_per_forward(p)
    if p.measured.latency_s is not None:
        meas_ms = 1e3 * p.measured.latency_s / nfe
    elif p.answer_tokens is not None and p.measured.tokens_per_s is not None:
        meas_ms = 1e3 * batch * p.answer_tokens / p.measured.tokens_per_s / nfe
    if not MIN_MEASURED_MS <= meas_ms <= MAX_MEASURED_MS:
        raise UsageError(f"point {shown(p.id)}: its measurement gives {meas_ms:.3g} ms per forward pass; a time "
                         f"per forward is in [{MIN_MEASURED_MS:g}, {MAX_MEASURED_MS:g}] ms")
    pred_ms = 1e3 * time_s / nfe

    def tokens_per_s(ms: float) -> float:
        if p.answer_tokens is not None:
            return batch * p.answer_tokens / (ms * nfe / 1e3)
        return 1e3 * p.tokens_per_forward / ms

    return dict(id=p.id, gpu=gpu, stack=stack, measured_ms=meas_ms, predicted_ms=pred_ms, roofline_ms=roofline_ms,
                measured_tokens_per_s=tokens_per_s(meas_ms), predicted_tokens_per_s=tokens_per_s(pred_ms),
                ratio=pred_ms / meas_ms, error=max(pred_ms / meas_ms, meas_ms / pred_ms))
