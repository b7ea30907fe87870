"""A planning scenario: traffic, targets, search space and prices, from a YAML file and/or options.

    model: GSAI-ML/LLaDA-8B-Instruct          # or a list, planned side by side
    traffic: {rate: 20, prompt: 256, answer: {p50: 128, p90: 256}}   # or users: 64, think_s: 2
    targets: {p95_latency_s: 5, p95_first_block_s: 1, max_usd_per_mtok: 2}
    search: {gpus: [h100, mi300x], tp: [1, 2], precisions: [bf16, fp8], kv_dtype: [bf16, fp8], mem_fraction: 0.9,
             decoding: [{scheme: block, block: 32, tpf: 2}], max_batch: [64, 256], prefill_chunk: 8192,
             recv_interval: 1, consumer: false}
    prices: {h100: 2.49}
    simulation: {requests: 2000, seed: 0}

Options given on the command line replace the file's values.
"""

import warnings
from pathlib import Path
from typing import Annotated, Optional, Union

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, Strict, StringConstraints, ValidationError
from pydantic_core import PydanticCustomError

from ..engine.memory import DEFAULT_MEM_FRACTION
from ..engine.schemes import autoregressive_scheme, get_scheme
from ..engine.workload import SCHEMES
from ..errors import DlmcostWarning, OverrideError, UsageError
from ..safe_text import shown
from ..inputs import files
from ..inputs.names import task_key
from ..inputs.hardware import MAX_USD_PER_HOUR, MIN_USD_PER_HOUR, HardwareDB
from ..inputs.models import ModelSpec
from ..inputs.stacks import MAX_RUNNING_REQUESTS
from .results import Targets
from ..serving.behaviour import DEFAULT_MAX_RUNNING
from ..serving.costs import price_range
from .replicas import Pricing
from .search import DEFAULT_REQUESTS, SearchSpace
from ..serving.decodings import choose_decodings, floor_decodings
from ..serving.deployment.request_counts import requests_out_of_range
from ..serving.steptime import Decoding
from ..serving.traffic import MAX_RATE, MAX_THINK_S, MIN_RATE, Traffic, parse_lengths

DEFAULT_TPS = [1, 2, 4, 8]
DEFAULT_PRECISIONS = ["bf16", "fp8"]
DEFAULT_KV_DTYPE = "bf16"  # the serving engines' default: the K/V cache in the model's 16-bit dtype
DEFAULT_MAX_BATCH = [DEFAULT_MAX_RUNNING]  # without a stack limit of its own
MAX_SCENARIO_BYTES = 1_000_000

Lengths = Union[int, str, dict]
# strict, as a stack file: `true` or "2.49" where a number belongs is a typo, not 1 or 2.49 (lax,
# `prices: {h100: true}` planned at $1/h and `prompt: true` at one token)
_STRICT = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


class TrafficSpec(BaseModel):
    model_config = _STRICT
    rate: Optional[float] = Field(default=None, ge=MIN_RATE, le=MAX_RATE)
    users: Optional[int] = Field(default=None, gt=0, le=10_000_000)
    think_s: float = Field(default=0.0, ge=0, le=MAX_THINK_S)
    prompt: Lengths = 256
    answer: Optional[Lengths] = None  # default: the model's sampler generation length
    # the share of each prompt already in the engine's prefix cache (serve's --cached-prompt SHARE)
    cached_prompt: float = Field(default=0.0, ge=0, le=1)


class TargetSpec(BaseModel):
    model_config = _STRICT
    p50_latency_s: Optional[float] = Field(default=None, gt=0)
    p95_latency_s: Optional[float] = Field(default=None, gt=0)
    p99_latency_s: Optional[float] = Field(default=None, gt=0)
    p95_first_block_s: Optional[float] = Field(default=None, gt=0)
    min_tokens_per_s_per_user: Optional[float] = Field(default=None, gt=0)
    max_usd_per_mtok: Optional[float] = Field(default=None, gt=0)
    max_gpus: Optional[int] = Field(default=None, gt=0, le=1_000_000)


class DecodingSpec(BaseModel):
    model_config = _STRICT
    # None: the model's own default scheme; '' is refused (as --scheme ''), not read as None
    scheme: Optional[Annotated[str, StringConstraints(min_length=1, max_length=100)]] = None
    block: Optional[int] = Field(default=None, gt=0, le=1_000_000)
    tpf: Optional[float] = Field(default=None, gt=0, le=1_000_000)
    steps: Optional[float] = Field(default=None, gt=0, le=10_000_000)


# a task named in a quality floor: a name, not blank (`dlmcost decodings MODEL --task TASK`)
TaskKey = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100)]


# a K/V cache number format's name (inputs/precision.py's table checks it)
KvDtypeName = Annotated[str, StringConstraints(min_length=1, max_length=100)]


def _one_as_list(value):
    """A scenario field that takes one value or a list of them: the one as a list of one."""
    return [value] if isinstance(value, str) else value


class SearchSpec(BaseModel):
    model_config = _STRICT
    gpus: Optional[Union[str, list[str]]] = None
    # an empty list is refused, as `gpus: []` and --tp '' are (it was read as not given: the defaults searched)
    tp: Optional[list[int]] = Field(default=None, min_length=1)
    precisions: Optional[list[str]] = Field(default=None, min_length=1)
    # the K/V cache number formats searched, one name or a list (serve's --kv-dtype; None: bf16)
    # (one name read as a list of one, so that a bad item is named as a list's)
    kv_dtype: Optional[Annotated[list[KvDtypeName], BeforeValidator(_one_as_list)]] = Field(
        default=None, min_length=1, max_length=100)
    # the share of each GPU's memory every candidate may use (serve's --mem-fraction; None: 0.9),
    # checked by `memory.check_mem_fraction` as serve's option is (a number: `true` and "0.9" are refused)
    mem_fraction: Optional[Annotated[float, Strict()]] = None
    decoding: Optional[list[DecodingSpec]] = None
    max_batch: Optional[list[int]] = Field(default=None, min_length=1)
    # the autoregressive prompts' token budget a step beside the decodes (0: none; None: the stack's),
    # checked by `behaviour.check_prefill_chunk` as serve's option is
    prefill_chunk: Optional[Annotated[int, Strict()]] = None
    # the front end's API server processes per replica (None: the stack's), checked by
    # `behaviour.check_api_servers` as serve's option is
    api_servers: Optional[Annotated[int, Strict()]] = None
    # decode iterations between the scheduler's receives of new requests, every candidate's (serve's
    # --recv-interval; None: 1), checked by `behaviour.check_recv_interval` as serve's option is
    # (a whole number: `true` and "3" are refused)
    recv_interval: Optional[Annotated[int, Strict()]] = None
    consumer: bool = False  # the default GPU set with workstation and consumer cards too
    # every candidate at its stack's error band's slower end (`plan --conservative`)
    conservative: Annotated[bool, Strict()] = False
    # whose published TPF is the default, spelt as the decoding files spell it
    task: Optional[Annotated[str, AfterValidator(task_key)]] = Field(default=None, min_length=1, max_length=100)
    # quality floor: task -> fraction; only the published decodings reaching it are searched
    # (a fraction is a number: `true` or "0.9" are refused, as a typo rather than 1 or 0.9)
    min_accuracy: Optional[dict[TaskKey, Annotated[float, Strict()]]] = Field(default=None, max_length=1)


def _requests_in_range(requests: int) -> int:
    """Refused in serve's words (pydantic's would say 'Input should be greater than or equal to 100')."""
    if (problem := requests_out_of_range(requests)) is not None:
        raise PydanticCustomError("requests_range", problem)
    return requests


class SimulationSpec(BaseModel):
    model_config = _STRICT
    requests: Annotated[int, AfterValidator(_requests_in_range)] = DEFAULT_REQUESTS
    seed: int = Field(default=0, ge=0, le=2**63 - 1)


class ScenarioSpec(BaseModel):
    model_config = _STRICT
    model: Optional[Union[str, list[str]]] = None  # several: planned side by side
    traffic: TrafficSpec = TrafficSpec()
    targets: TargetSpec = TargetSpec()
    search: SearchSpec = SearchSpec()
    prices: dict[str, float] = {}
    power_utilisation: float = Field(default=1.0, gt=0, le=1.5)
    simulation: SimulationSpec = SimulationSpec()


def _validated(model_cls, data, where: str, overrides: dict | None = None):
    try:
        return model_cls.model_validate(data)
    except ValidationError as exc:
        message = f"{where}: {files.validation_message(exc)}"
        loc = exc.errors()[0]["loc"]
        given = (overrides or {}).get(loc[0]) if loc else None
        if len(loc) >= 2 and isinstance(given, dict) and given.get(loc[1]) is not None:
            # the value came from an override, not the file: the caller may name it as it was given
            raise OverrideError(message, (loc[0], loc[1]), shown(exc.errors()[0]["msg"])) from None
        raise UsageError(message) from None


def read_scenario(path: str | None, overrides: dict) -> ScenarioSpec:
    """The scenario file (if any) with the non-None `overrides` (section -> field -> value) on top."""
    data: dict = {}
    if path is not None:  # '' is refused as an empty path, not read as no scenario
        p = Path(path)
        data = files.read_document(path, limit=MAX_SCENARIO_BYTES, error=UsageError, what="scenario file", fmt="yaml")
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise UsageError(f"scenario file {path} must be a YAML mapping, got {type(data).__name__}")
        _relative_to(p.parent, data)
    for section, values in overrides.items():
        if isinstance(values, dict):
            given = {k: v for k, v in values.items() if v is not None}
            if given:
                current = data.get(section)
                data[section] = {**(current if isinstance(current, dict) else {}), **given}
        elif values is not None:
            data[section] = values
    return _validated(ScenarioSpec, data, f"scenario {path}" if path else "scenario", overrides)


def _relative_to(folder: Path, data: dict) -> None:
    """Length files named in a scenario are found next to it (as `{file: PATH}` or '@PATH')."""
    traffic = data.get("traffic")
    if not isinstance(traffic, dict):
        return
    for key in ("prompt", "answer"):
        value = traffic.get(key)
        # (an empty path stays empty, refused as one, not joined into the scenario's folder)
        if isinstance(value, dict) and set(value) == {"file"} and isinstance(value["file"], str) and value["file"]:
            traffic[key] = {"file": str(folder / value["file"])}
        elif isinstance(value, str) and value.strip().startswith("@") and value.strip()[1:]:
            traffic[key] = "@" + str(folder / value.strip()[1:])


def build_traffic(spec: ScenarioSpec, model: ModelSpec) -> Traffic:
    t = spec.traffic
    if t.rate is None and t.users is None:
        raise UsageError("traffic: give a request rate (--rate, requests/s) or concurrent users (--users)")
    answer = t.answer if t.answer is not None else (model.sampler.gen if model.sampler else 256)
    return Traffic(parse_lengths(t.prompt, "prompt lengths"), parse_lengths(answer, "answer lengths", least=1),
                   rate=t.rate, users=t.users, think_s=t.think_s, cached_prompt=t.cached_prompt)


def build_targets(spec: ScenarioSpec) -> Targets:
    return Targets(**spec.targets.model_dump())


def quality_floor(spec: ScenarioSpec) -> tuple[str, float] | None:
    """The scenario's quality floor (task, fraction), checked; None without one."""
    floor = spec.search.min_accuracy
    if not floor:
        return None
    (task, value), = floor.items()
    if not (0 < value <= 1):
        raise UsageError(f"min_accuracy: {task} must be a fraction in (0, 1], got {value}")
    return task_key(task), value


def build_decodings(spec: ScenarioSpec, model: ModelSpec, traffic: Traffic, *,
                    side_by_side: bool = False) -> tuple[list[Decoding], str | None]:
    """The scenario's decodings for this model (serving/decodings.py), `steps` read at the median
    answer length of the traffic; with a quality floor, the model's published decodings that
    reach it, and a sentence on what was kept (None without a floor)."""
    given = spec.search.decoding
    floor = quality_floor(spec)
    if floor is not None:
        if given:
            raise UsageError("--min-accuracy chooses among the models' published decodings: give it without "
                             "--scheme, --block, --tpf or --steps (`dlmcost decodings MODEL` lists them)")
        return floor_decodings(model, floor, spec.search.task)
    median = None
    if given:
        import numpy as np

        median = float(np.median(traffic.answer.sample(np.random.default_rng(0), 1001)))
    return choose_decodings(model, given, median_answer=median, side_by_side=side_by_side, task=spec.search.task), None


def parse_price(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    try:
        usd = float(value)
    except ValueError:
        usd = float("nan")
    if not sep or not name.strip() or not (MIN_USD_PER_HOUR <= usd <= MAX_USD_PER_HOUR):
        raise UsageError(f"--price: expected NAME=USD per GPU-hour ({MIN_USD_PER_HOUR:g} <= USD <= "
                         f"{MAX_USD_PER_HOUR:g}), got '{text}'")
    return name.strip(), usd


def gpus_priced(prices: dict[str, float], db: HardwareDB, where: str) -> dict[str, str]:
    """GPU key -> the name its price was given under; two names of one GPU (`h100` and `h100sxm`,
    or one name twice) are refused: which price holds? (the last was taken without a word)"""
    named: dict[str, str] = {}
    for name in prices:
        key = db.get(name).key
        if key in named:
            raise UsageError(f"{where}: '{shown(named[key], 40)}' and '{shown(name, 40)}' name one GPU "
                             f"({db.gpus[key].name}): give its price once")
        named[key] = name
    return named


def merge_prices(file_prices: dict[str, float], option_prices: list[tuple[str, float]],
                 db: HardwareDB) -> dict[str, float]:
    """The scenario's prices with the options' (`--price NAME=USD`) on top, matched by GPU rather
    than by name: `--price h100sxm=3` replaces the file's `h100: 2`."""
    given: dict[str, float] = {}
    for name, usd in option_prices:
        if name in given:
            raise UsageError(f"--price: '{shown(name, 40)}' is given twice: give its price once")
        given[name] = usd
    replaced = gpus_priced(given, db, "--price")
    kept = {name: file_prices[name] for key, name in gpus_priced(file_prices, db, "prices").items()
            if key not in replaced}
    return {**kept, **given}


def build_space_and_pricing(spec: ScenarioSpec, decodings: list[Decoding], db: HardwareDB, *,
                            default_max_batch: int | None = None, stack=None) -> tuple[SearchSpace, Pricing]:
    """The search space and prices; the batch limit searched, when none is given, is
    `default_max_batch`, or with None each decoding's stack's running-request limit (as `serve`
    takes it: SearchSpace.max_batches empty). Without a GPU list: every priced data-centre part
    that `stack` (a Stack; None: the bare roofline) runs on, the others left out
    (`SearchSpace.left_out`)."""
    usd, source = {}, {}
    for g in db.gpus.values():
        if g.price_per_hour is not None:
            usd[g.key] = g.price_per_hour.usd
            source[g.key] = f"list price as of {g.price_per_hour.as_of} (estimate)"
    for key, name in gpus_priced(spec.prices, db, "prices").items():
        value = spec.prices[name]
        if not (MIN_USD_PER_HOUR <= value <= MAX_USD_PER_HOUR):
            raise UsageError(f"prices: {name} must be a price per GPU-hour in [{MIN_USD_PER_HOUR:g}, "
                             f"{MAX_USD_PER_HOUR:g}], got {value}")
        usd[key], source[key] = value, "user"
    ranges = {g.key: price_range(usd[g.key], source[g.key], g.price_per_hour) for g in db.gpus.values() if g.key in usd}
    s = spec.search
    left_out = []
    if s.gpus is None:  # every priced data-centre part (workstation and consumer cards on request)
        gpus = [g for g in db.gpus.values() if g.key in usd and (s.consumer or g.segment == "datacenter")]
        left_out = [g for g in gpus if stack is not None and not stack.runs(g.vendor)]
        gpus = [g for g in gpus if g not in left_out]
    else:
        gpus = db.select(s.gpus, [])
        unpriced = [g.name for g in gpus if g.key not in usd]
        if unpriced and spec.targets.max_usd_per_mtok is not None:
            raise UsageError(f"no price for {', '.join(unpriced)}, and the cost target needs one; give it with "
                             "--price NAME=USD")
    if not gpus and left_out:  # a stack file's runs_on naming no vendor of a priced part: --price would not help
        raise UsageError(f"the {shown(stack.name, 40)} stack runs on none of the priced GPUs (its runs_on: "
                         f"{shown(', '.join(stack.runs_on), 80)}): name the GPUs to plan on with --gpu")
    if not gpus:
        raise UsageError("no GPU with a price to plan on; give --price NAME=USD")
    unused = [db.gpus[key].name for key in gpus_priced(spec.prices, db, "prices") if key not in {g.key for g in gpus}]
    if unused:  # a price given for a part the search leaves out changes nothing
        warnings.warn(f"a price is given for {', '.join(unused)}, which the plan does not search: it changes nothing "
                      f"(--gpu names the GPUs searched)", DlmcostWarning, stacklevel=2)
    tps = s.tp or DEFAULT_TPS
    if any(t <= 0 or t > 1024 for t in tps):
        raise UsageError("search.tp: tensor-parallel sizes must be in 1..1024")
    max_batches = s.max_batch or ([default_max_batch] if default_max_batch is not None else [])
    if any(b <= 0 or b > MAX_RUNNING_REQUESTS for b in max_batches):
        raise UsageError(f"search.max_batch: batch limits must be in 1..{MAX_RUNNING_REQUESTS}")
    precisions = s.precisions or DEFAULT_PRECISIONS
    from ..inputs.precision import get_precision, kv_bytes

    # by the name each resolves to: 'fp8,FP8' is one precision, searched once
    precisions = list(dict.fromkeys(get_precision(p).name for p in precisions))
    kv_dtypes = s.kv_dtype or [DEFAULT_KV_DTYPE]
    for kv in kv_dtypes:
        kv_bytes(kv)
    space = SearchSpace(gpus, sorted(set(tps)), precisions, decodings, sorted(set(max_batches)),
                        left_out, s.prefill_chunk, s.api_servers, list(dict.fromkeys(kv.lower() for kv in kv_dtypes)),
                        DEFAULT_MEM_FRACTION if s.mem_fraction is None else s.mem_fraction,
                        s.recv_interval,  # None: not given (each candidate's policy: 1, from 'default')
                        conservative=s.conservative)
    power = {g.key: g.board_power_w for g in gpus}
    return space, Pricing(usd, source, power, spec.power_utilisation, low={k: lo for k, (lo, _) in ranges.items()},
                          high={k: hi for k, (_, hi) in ranges.items()})


def choose_stack(stack: str | None, spec: ScenarioSpec, db: HardwareDB) -> str | None:
    """The stack a plan runs: the one named; else, for a GPU list, the default for their vendors
    (`stacks.default_stack_for`: TPUs alone run jax-tpu); else the default (None)."""
    from ..inputs.stacks import default_stack_for

    if stack is not None or spec.search.gpus is None:
        return stack
    return default_stack_for({g.vendor for g in db.select(spec.search.gpus, [])})


def warn_off_stack(space: SearchSpace, stack) -> None:
    """A warning for each GPU asked for that the stack does not run on: its times are those of
    an engine that is not there."""
    from ..inputs.stacks import off_stack_message

    if (message := off_stack_message(stack, space.gpus)) is not None:
        warnings.warn(message, DlmcostWarning, stacklevel=2)
