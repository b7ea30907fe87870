"""analyze: one workload on some GPUs, evaluated in one vectorised call of the engine within the
limits on work, returned as typed records (`dlmcost.api.analyze` is this function)."""

from __future__ import annotations

import numpy as np

from . import limits
from .limits import MAX_PASSES_ONE_BY_ONE
from .prepare import DEFAULT_MODEL, prepare, unsupported_reason
from .records import gpu_result, model_summary, workload_summary, workload_warnings
from ..engine.evaluation import Evaluation, evaluate, knees, memory_bound_time_fraction
from ..engine.frames import Frame, Grids, generation_numbers, make_grids, models_by_role, workload_columns
from ..engine.memory import grid_memory
from ..inputs.models import ModelSpec
from ..inputs.stacks import STACK_NONE, Stack
from ..results import AnalyzeResult, Unsupported


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
        frame, ar = _frame(spec, p.drafter, grids, np.array([g.memory_bytes for g, _ in supported]))
        grid = frame.grid
        ctx = grid.knobs.prompt + grid.knobs.gen / 2
        decode_q = np.full(n, 1.0) if w.scheme == "ar" else grid.knobs.block
        knee_block, knee_batch = knees(spec, grid, ctx, decode_q)
        derived = generation_numbers(frame, np.float64(w.batch * w.answer), np.float64(w.tp), w.cfg)
        ar_step = ar_step_intensity(ar, grids)
        for i, (gpu, rate) in enumerate(supported):
            by_key[gpu.key] = gpu_result(w, gpu, rate, frame, i, {k: v[i] for k, v in derived.items()},
                                         knee_block[i], knee_batch[i], ctx[i], spec.mla is not None, ar_step[i])
    results = [by_key.get(g.key) or Unsupported.model_construct(gpu=g.name, gpu_key=g.key,
                                                                 error=unsupported_reason(g, w.precision, w.tp))
               for g in p.selected]
    return AnalyzeResult.model_construct(model=model_summary(spec), workload=workload_summary(w),
                                         efficiency_profile=p.profile.name, stack=st.name if st else STACK_NONE,
                                         warnings=workload_warnings(spec, w), results=results)


def _frame(spec: ModelSpec, drafter: ModelSpec | None, grids: Grids, capacity_bytes: np.ndarray) -> tuple[Frame, Evaluation]:
    """engine.frames.evaluate_frame, keeping the AR baselines' evaluation (their pass families
    give the chart's AR point; evaluate_frame keeps only their times, and costing them again
    would double analyze's engine time)."""
    grid, models = grids.grid, models_by_role(spec, drafter)
    ev = evaluate(models, grid)
    ar = evaluate(spec, grids.ar)
    frame = Frame(grid, ev, ar.total.time_s[grids.ar_of], grid_memory(spec, grid, ev, capacity_bytes, drafter),
                  memory_bound_time_fraction(ev, grid.rates.ridge), models)
    return frame, ar


def ar_step_intensity(ar: Evaluation, grids: Grids) -> np.ndarray:
    """FLOP/byte of each configuration's AR decode baseline's repeated pass, its cached decode
    step, as the average pass (the family's FLOPs over its bytes): the AR point a roofline
    chart draws. `ar`: the baselines' evaluation (`grids.ar`)."""
    scheme = str(grids.ar.scheme[0]) if len(grids.ar_of) else None
    out = np.zeros(len(grids.ar_of))
    for i, row in enumerate(grids.ar_of):
        most = 0.0
        for name in ar.family_order[scheme]:  # the family with the most passes (the later of equals)
            fam = ar.families.get((scheme, name))
            k = fam.index(int(row)) if fam is not None else None
            if k is not None and fam.count[k] >= most and fam.bytes[k]:
                most, out[i] = fam.count[k], fam.flops[k] / fam.bytes[k]
    return out
