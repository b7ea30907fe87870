"""The Python API: `analyze` one workload on some GPUs (analysis/analyze.py), `sweep` a grid of
workloads (analysis/sweep.py), `serve` a fixed deployment under load (serving/deployment/),
`run_plan` a deployment search (plan/), `calibrate` and `measure` (calibration/runs.py).

analyze and sweep validate their settings with the same `Workload` fields (engine/workload.py),
evaluate every configuration in one vectorised call of the engine (engine/frames.py; sweeps in
chunks) within the limits on work (analysis/limits.py), and return typed records (results.py,
built by analysis/records.py) that render/ draws and `--format json` dumps. This module holds the
public names; most load their module on first use, so that `dlmcost analyze` imports only its own.

    >>> from dlmcost import api
    >>> a = api.analyze("GSAI-ML/LLaDA-8B-Instruct", gpus="h100", gen=256, steps=64)
    >>> a.results[0].tokens_per_s
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .analysis.analyze import analyze
from .analysis.requests import AnalyzeRequest, Sources, SweepGrid, SweepRequest, WorkloadSettings
from .engine.schemes import SCHEMES
from .inputs.examples import locate as locate_example
from .analysis.limits import MAX_PASSES_ONE_BY_ONE
from .analysis.prepare import DEFAULT_MODEL, prepare, unsupported_reason
from .analysis.records import model_summary, workload_summary, workload_warnings
from .engine.frames import generation_numbers
from .inputs.models import ModelSpec
from .inputs.stacks import DEFAULT_STACKS, STACK_NONE, Stack, bundled_stack_names  # noqa: F401  (the CLI's choices)
from .results import AnalyzeResult, Unsupported

# The rest of the public API, from the module each lives in (the names scripts and the CLI use):
from .engine.frames import (Frame, Grids, build_grid, models_by_role, unique_rows,  # noqa: F401  (engine grids,
                     workloads_grid)  # as calibrate builds)
from .analysis.prepare import Prepared, resolve_stack, workload_for  # noqa: F401
from .analysis.limits import MAX_SWEEP_CONFIGS, check_passes  # noqa: F401  (set limits in limits.py: read there)

# ...and those of `sweep` and of `dlmcost model`/`models`, whose modules load when one of these
# names is first used, so that `dlmcost analyze` does not import them (`api.sweep` works as any
# attribute; so does `from dlmcost.api import sweep`).
_ELSEWHERE = {
    "analysis.sweep": ("check_sweeps_passes", "iter_sweep", "iter_sweep_columns", "sweep", "sweep_columns",
                       "sweep_first_pass", "sweep_passes", "sweep_rows"),
    "analysis.model_info": ("VERIFY_WARN_FRACTION", "list_models", "model_info", "verify_model"),
    "analysis.catalog": ("list_decodings", "list_gpus", "list_schemes", "list_stacks", "price_ages"),
    "analysis.published": ("parse_floor",),
    "inputs.names": ("task_key",),
    "inputs.precision": ("KV_DTYPE_BYTES",),
    "analysis.requirements": ("parse_requirements", "requirement_failures", "requirement_rows", "requirement_warnings",
                              "sweep_label"),
    "calibration.runs": ("calibrate_file", "calibrate_measured", "measure_batches", "write_measurements"),
    "plan": ("plan_record", "run_plan"),
    # `dlmcost serve`: a fixed deployment under a load
    "serving.deployment": ("serve", "serve_many", "ServeSetup", "ServeResult"),
    "serving.loads": ("ClosedLoop", "OpenLoop", "BatchJob", "TraceReplay", "check_cv_taken"),
    "serving.targets": ("Targets",),
    "serving.traffic": ("parse_cached_shares",),
}
if TYPE_CHECKING:  # for editors and type checkers, which do not run __getattr__
    from .analysis.model_info import VERIFY_WARN_FRACTION, list_models, model_info, verify_model  # noqa: F401
    from .analysis.sweep import (check_sweeps_passes, iter_sweep, iter_sweep_columns, sweep,  # noqa: F401
                                 sweep_columns, sweep_first_pass, sweep_passes, sweep_rows)
    from .serving.deployment import ServeResult, ServeSetup, serve, serve_many  # noqa: F401
    from .serving.loads import BatchJob, ClosedLoop, OpenLoop, TraceReplay, check_cv_taken  # noqa: F401
    from .serving.targets import Targets  # noqa: F401
    from .serving.traffic import parse_cached_shares  # noqa: F401
    from .inputs.names import task_key  # noqa: F401
    from .inputs.precision import KV_DTYPE_BYTES  # noqa: F401


def read_trace(path, fmt=None, time_scale: float = 1.0, sample=None, seed: int = 0):
    """A request trace file (Azure, Mooncake, BurstGPT; `serving.traces`) as a `TraceReplay` load."""
    from .serving import traces  # loaded only when a trace is read
    from .serving.loads import TraceReplay

    t = traces.read_trace(path, fmt=fmt, time_scale=time_scale, sample=sample, seed=seed)
    return TraceReplay(t.arrival_s, t.prompt_tokens, t.answer_tokens, name=str(getattr(t, "source", None) or path),
                       cached_tokens=getattr(t, "cached_tokens", None), hash_ids_unread=getattr(t, "hash_ids_unread", None))


# `from dlmcost.api import *` takes these (each lazy name loads its module, as above); without a
# list it would take only what is loaded already, and miss sweep and the model commands' names.
__all__ = sorted({"AnalyzeResult", "DEFAULT_MODEL", "Frame", "Grids", "MAX_PASSES_ONE_BY_ONE", "MAX_SWEEP_CONFIGS",
                  "ModelSpec", "Prepared", "Stack", "Unsupported", "analyze", "build_grid", "check_passes",
                  "generation_numbers", "model_summary", "models_by_role", "prepare", "read_trace", "resolve_stack",
                  "to_frame",
                  "unique_rows", "unsupported_reason", "workload_for", "workload_summary", "workload_warnings",
                  "workloads_grid", *(name for names in _ELSEWHERE.values() for name in names)})


def to_frame(result, what: str | None = None):
    """Any result as a pandas DataFrame (the `pandas` extra), no loop to write: `analyze`'s (one
    row per GPU; `what="passes"` or `"ops"`), `sweep`'s (per configuration), `serve_many`'s (per
    load point), `run_plan`'s (per deployment; `what="ar_baseline"`), or a list from
    `list_gpus`, `list_models`, `list_schemes` (per entry), or `model_info`'s dict (one row).
    Nested keys become dotted columns (`memory.total_bytes`)."""
    from .dataframes import from_records

    if hasattr(result, "to_pandas"):
        return result.to_pandas(**({"what": what} if what else {}))
    if isinstance(result, dict):
        return from_records([result])
    return from_records([r.model_dump() if hasattr(r, "model_dump") else dict(r) for r in result])


def configure_hub(*, verbose: bool = False, budget_s: float | None = None) -> None:
    """The Hub client's settings for the commands that follow (--verbose, --hub-timeout)."""
    from .inputs.models import hub

    hub.configure(verbose=verbose, budget_s=budget_s)


def resolve_model(model: str, revision: str | None = None, hub: bool = False) -> ModelSpec:
    """A model argument (bundled id, local file, Hub id) as a ModelSpec."""
    from .analysis.prepare import resolve_spec

    return resolve_spec(model, revision=revision, hub=hub)


def __getattr__(name: str):
    module = next((m for m, names in _ELSEWHERE.items() if name in names), None)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __package__), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *(name for names in _ELSEWHERE.values() for name in names)})
