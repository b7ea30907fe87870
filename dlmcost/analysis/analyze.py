"""analyze: one workload on some GPUs, evaluated in one vectorised call of the engine within the
limits on work, returned as typed records (`dlmcost.api.analyze` is this function)."""

from __future__ import annotations

import numpy as np

from . import limits
from .limits import MAX_PASSES_ONE_BY_ONE
from .prepare import DEFAULT_MODEL, prepare, unsupported_reason
from .requests import AnalyzeRequest
from .records import gpu_result, model_summary, workload_summary, workload_warnings
from ..engine.verdict import knees
from ..engine.schemes import REGISTRY
from ..engine.frames import ar_step_intensity, evaluate_frame, generation_numbers, make_grids, workload_columns
from ..engine.memory import DEFAULT_MEM_FRACTION, check_mem_fraction
from ..inputs.models import ModelSpec
from ..inputs.stacks import STACK_NONE, Stack
from ..results import AnalyzeResult, Unsupported


def analyze(model: str | ModelSpec | AnalyzeRequest = DEFAULT_MODEL, gpus: str | list[str] | None = None, *,
            efficiency: str = "realistic", stack: str | Stack | None = None, eager: bool = False,
            hardware: list[str] | None = None, revision: str | None = None, hub: bool = False, max_passes: int | None = MAX_PASSES_ONE_BY_ONE,
            mem_fraction: float = DEFAULT_MEM_FRACTION, **workload) -> AnalyzeResult:
    """Cost of one workload on each GPU, asked as arguments or as one `AnalyzeRequest` (what the
    CLI builds; keyword `workload` fields then replace the request's). Unset workload fields take the model's sampler defaults
    (or, for schemes with a reference engine of their own, that engine's). `stack`: a software
    stack name or file (default: the decoding's kind's, `stacks.default_stack`; its AR baseline runs on
    the autoregressive default; `none`: the bare hardware roofline); `eager`: that stack run without
    CUDA graphs (its `eager:` host dispatch; the stack's name then ends in ` (eager)`).
    `mem_fraction`: the share of each GPU's memory the weights, K/V cache and activations may fill
    (a serving engine's --gpu-memory-utilization): what `fits` and `max_batch` are measured against.
    `max_passes`: the passes costed one by one it may take, over all GPUs (None: no limit)."""
    if isinstance(model, AnalyzeRequest):  # a typed request (the CLI's); `workload` replaces its fields
        request = model
        return analyze(request.model, request.gpus, **request.sources.given(),
                       **{**request.workload.given(), **workload})
    check_mem_fraction(mem_fraction)
    p = prepare(model, gpus, efficiency=efficiency, stack=stack, eager=eager, hardware=hardware, revision=revision,
                hub=hub, **workload)
    spec, w, st, supported = p.spec, p.workload, p.stack, p.supported
    by_key = {}
    if supported:
        n = len(supported)
        grids = make_grids(workload_columns(w), [r for _, r in supported], np.arange(n), st, p.ar_stack)
        if max_passes is not None:  # (no limit: nothing to count, as in a sweep)
            limits.check_passes(limits.count_passes(spec, p.drafter, grids), max_passes,
                                "choose fewer GPUs, larger blocks, or fewer tokens or steps")
        frame = evaluate_frame(spec, p.drafter, grids, np.array([g.memory_bytes for g, _ in supported]),
                               mem_fraction)
        grid = frame.grid
        ctx = grid.knobs.prompt + grid.knobs.gen / 2
        decode_q = np.full(n, 1.0) if REGISTRY[w.scheme].autoregressive else grid.knobs.block
        knee_block, knee_batch = knees(spec, grid, ctx, decode_q)
        derived = generation_numbers(frame, np.float64(w.batch * w.answer), np.float64(w.tp), w.cfg)
        ar_step = ar_step_intensity(frame.ar, grids)
        for i, (gpu, rate) in enumerate(supported):
            by_key[gpu.key] = gpu_result(w, gpu, rate, frame, i, {k: v[i] for k, v in derived.items()},
                                         knee_block[i], knee_batch[i], ctx[i], spec.mla is not None, ar_step[i])
    results = [by_key.get(g.key) or Unsupported.model_construct(gpu=g.name, gpu_key=g.key,
                                                                 error=unsupported_reason(g, w.precision, w.tp))
               for g in p.selected]
    return AnalyzeResult.model_construct(model=model_summary(spec), workload=workload_summary(w, mem_fraction),
                                         efficiency_profile=p.profile.name, stack=st.name if st else STACK_NONE,
                                         ar_stack=p.ar_stack.name if p.ar_stack else STACK_NONE,
                                         stack_default=stack is None and st is not None,
                                         eager=eager,
                                         decoding_source=p.published.record() if p.published else None,
                                         warnings=workload_warnings(spec, w, given=workload), results=results)
