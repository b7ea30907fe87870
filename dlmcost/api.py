"""The Python API: `analyze` one workload on some GPUs (here), `sweep` a grid of workloads (sweep.py).

Both validate their settings with the same `Workload` fields (inputs.py), evaluate every
configuration in one vectorised call of the engine (frames.py, shared; sweeps in chunks, sweep.py)
within the limits on work (limits.py), and return typed records (results.py, built by records.py)
that `report.py` renders and `--format json` dumps. This module is analyze itself and the public
names of the others; `dlmcost model` and `dlmcost models` read model_info.py.

    >>> from dlmcost import api
    >>> a = api.analyze("GSAI-ML/LLaDA-8B-Instruct", gpus="h100", gen=256, steps=64)
    >>> a.results[0].tokens_per_s
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

import numpy as np

from .analysis import limits
from .engine.evaluation import knees
from .engine.frames import evaluate_frame, generation_numbers, make_grids, workload_columns
from .analysis.prepare import DEFAULT_MODEL, prepare, unsupported_reason
from .analysis.limits import MAX_PASSES_ONE_BY_ONE
from .inputs.models import ModelSpec
from .analysis.records import gpu_result, model_summary, workload_summary, workload_warnings
from .results import AnalyzeResult, Unsupported
from .inputs.stacks import STACK_NONE, Stack

# The rest of the public API, from the module each lives in (the names scripts and the CLI use):
from .engine.frames import (Frame, Grids, build_grid, models_by_role, unique_rows,  # noqa: F401  (engine grids,
                     workloads_grid)  # as calibrate builds)
from .analysis.prepare import Prepared, resolve_stack, workload_for  # noqa: F401
from .analysis.limits import MAX_SWEEP_CONFIGS, check_passes  # noqa: F401  (set limits in limits.py: read there)

# ...and those of `sweep` and of `dlmcost model`/`models`, whose modules load when one of these
# names is first used, so that `dlmcost analyze` does not import them (`api.sweep` works as any
# attribute; so does `from dlmcost.api import sweep`).
_ELSEWHERE = {
    "analysis.sweep": ("check_sweeps_passes", "iter_sweep", "sweep", "sweep_columns", "sweep_first_pass", "sweep_passes",
              "sweep_rows"),
    "analysis.model_info": ("VERIFY_WARN_FRACTION", "list_models", "model_info", "verify_model"),
}
if TYPE_CHECKING:  # for editors and type checkers, which do not run __getattr__
    from .analysis.model_info import VERIFY_WARN_FRACTION, list_models, model_info, verify_model  # noqa: F401
    from .analysis.sweep import (check_sweeps_passes, iter_sweep, sweep, sweep_columns, sweep_first_pass,  # noqa: F401
                        sweep_passes, sweep_rows)


# `from dlmcost.api import *` takes these (each lazy name loads its module, as above); without a
# list it would take only what is loaded already, and miss sweep and the model commands' names.
__all__ = sorted({"AnalyzeResult", "DEFAULT_MODEL", "Frame", "Grids", "MAX_PASSES_ONE_BY_ONE", "MAX_SWEEP_CONFIGS",
                  "ModelSpec", "Prepared", "Stack", "Unsupported", "analyze", "build_grid", "check_passes",
                  "generation_numbers", "model_summary", "models_by_role", "prepare", "resolve_stack",
                  "unique_rows", "unsupported_reason", "workload_for", "workload_summary", "workload_warnings",
                  "workloads_grid", *(name for names in _ELSEWHERE.values() for name in names)})


def __getattr__(name: str):
    module = next((m for m, names in _ELSEWHERE.items() if name in names), None)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __package__), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *(name for names in _ELSEWHERE.values() for name in names)})


# --- analyze ------------------------------------------------------------------------------------


def analyze(model: str | ModelSpec = DEFAULT_MODEL, gpus: str | list[str] | None = None, *,
            efficiency: str = "realistic", stack: str | Stack | None = None, hardware: list[str] | None = None,
            revision: str | None = None, hub: bool = False, max_passes: int | None = MAX_PASSES_ONE_BY_ONE,
            **workload) -> AnalyzeResult:
    """Cost of one workload on each GPU. Unset workload fields take the model's sampler defaults
    (or, for schemes with a reference engine of their own, that engine's). `stack`: a software
    stack name or file (default `stacks.DEFAULT_STACK`; `none`: the bare hardware roofline).
    `max_passes`: the passes costed one by one it may take, over all GPUs (None: no limit)."""
    p = prepare(model, gpus, efficiency=efficiency, stack=stack, hardware=hardware, revision=revision, hub=hub,
                **workload)
    spec, w, st, supported = p.spec, p.workload, p.stack, p.supported
    by_key = {}
    if supported:
        n = len(supported)
        grids = make_grids(workload_columns(w), [r for _, r in supported], np.arange(n), st)
        if max_passes is not None:  # (no limit: nothing to count, as in a sweep)
            limits.check_passes(limits.count_passes(spec, p.drafter, grids), max_passes,
                                "choose fewer GPUs, larger blocks, or fewer tokens or steps")
        frame = evaluate_frame(spec, p.drafter, grids, np.array([g.memory_bytes for g, _ in supported]))
        grid = frame.grid
        ctx = grid.knobs.prompt + grid.knobs.gen / 2
        decode_q = np.full(n, 1.0) if w.scheme == "ar" else grid.knobs.block
        knee_block, knee_batch = knees(spec, grid, ctx, decode_q)
        derived = generation_numbers(frame, np.float64(w.batch * w.answer), np.float64(w.tp), w.cfg)
        for i, (gpu, rate) in enumerate(supported):
            by_key[gpu.key] = gpu_result(w, gpu, rate, frame, i, {k: v[i] for k, v in derived.items()},
                                         knee_block[i], knee_batch[i], ctx[i], spec.mla is not None)
    results = [by_key.get(g.key) or Unsupported.model_construct(gpu=g.name, gpu_key=g.key,
                                                                 error=unsupported_reason(g, w.precision, w.tp))
               for g in p.selected]
    return AnalyzeResult.model_construct(model=model_summary(spec), workload=workload_summary(w),
                                         efficiency_profile=p.profile.name, stack=st.name if st else STACK_NONE,
                                         warnings=workload_warnings(spec, w), results=results)
