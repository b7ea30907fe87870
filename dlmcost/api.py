"""The Python API: `analyze` one workload on some GPUs, `sweep` a grid of workloads.

Both validate their settings with the same `Workload` fields, evaluate every configuration in one
vectorised call of the engine (`_evaluate`, shared), and return typed records (results.py) that
`report.py` renders and `--format json` dumps.

    >>> from dlmcost import api
    >>> a = api.analyze("GSAI-ML/LLaDA-8B-Instruct", gpus="h100", gen=256, steps=64)
    >>> a.results[0].tokens_per_s
"""

from __future__ import annotations

import numpy as np

from . import limits
from .engine import knees
from .errors import UsageError
from .frames import evaluate_frame, generation_numbers, make_grids, workload_columns
from .inputs import DEFAULT_MODEL, prepare, unsupported_reason
from .limits import MAX_PASSES_ONE_BY_ONE
from .models import ModelSpec
from .records import gpu_result, model_summary, workload_summary, workload_warnings
from .results import AnalyzeResult, Unsupported
from .stacks import STACK_NONE, Stack

# The rest of the API, where each lives:
from .frames import build_grid, models_by_role, workloads_grid  # noqa: F401  (engine grids, as calibrate builds)
from .inputs import Prepared, resolve_stack, workload_for  # noqa: F401
from .limits import MAX_SWEEP_CONFIGS, check_passes  # noqa: F401
from .sweep import (check_sweeps_passes, iter_sweep, sweep, sweep_columns, sweep_first_pass,  # noqa: F401
                    sweep_passes, sweep_rows)


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


# --- models -------------------------------------------------------------------------------------


def model_info(spec: ModelSpec) -> dict:
    """Everything `dlmcost model` shows: architecture, parameter counts, K/V bytes per token."""
    from .precision import KV_DTYPE_BYTES

    info = model_summary(spec).model_dump()
    info.update(
        n_layers=spec.n_layers, d_model=spec.d_model, n_heads=spec.n_heads, n_kv_heads=spec.n_kv_heads,
        head_dim=spec.head_dim, group_size=spec.group_size, ffn_dim=spec.ffn_dim,
        mlp="gated (SwiGLU, 3 matrices)" if spec.gated_mlp else "plain (2 matrices)",
        vocab_size=spec.vocab_size, tie_embeddings=spec.tie_embeddings, qkv_bias=spec.qkv_bias,
        qk_norm=spec.qk_norm, n_dense_layers=spec.n_dense_layers, n_moe_layers=spec.n_moe_layers,
    )
    info["kv_bytes_per_token"] = {k: spec.kv_bytes_per_token(v) for k, v in KV_DTYPE_BYTES.items() if k not in ("fp16", "int4")}
    if spec.layers:  # per-layer kinds (hybrids): one line per group
        info["layers"] = {f"{i}": f"{n} x {kind.describe()}" for i, (n, kind) in enumerate(spec.layers)}
    if spec.logit_softcap:
        info["logit_softcap"] = spec.logit_softcap
    if spec.vision_params:
        info["vision_params"] = spec.vision_params  # reported apart: planning is text-only
    if spec.moe:
        info["moe"] = spec.moe.model_dump()
    if spec.mla:
        info["mla"] = spec.mla.model_dump() | {"cache_elements_per_layer": spec.mla.cache_elements_per_layer}
    if spec.sampler:
        info["sampler"] = spec.sampler.model_dump(exclude={"schemes"}) | {"schemes": ", ".join(spec.sampler.schemes)}
    return info


def list_models() -> list[dict]:
    from .models import bundled_ids, bundled_manifest, load_bundled

    out = []
    for model_id in bundled_ids():
        spec = load_bundled(model_id)
        out.append(dict(model_summary(spec).model_dump(), status=bundled_manifest()[model_id].get("status", ""),
                        default_scheme=spec.sampler.scheme if spec.sampler else "ar"))
    return out


VERIFY_WARN_FRACTION = 0.02


def verify_model(spec: ModelSpec, revision: str | None = None) -> dict:
    """Compare dlmcost's parameter count with the checkpoint's safetensors metadata (no weights
    are downloaded); a gap above 2% usually means an architecture feature the parser misses."""
    if spec.source == "local" or "/" not in spec.id:
        raise UsageError("--verify needs a Hub model id (it reads the checkpoint's safetensors metadata)")
    from .models.hub import verify_params

    found = verify_params(spec.id, revision=revision)
    checkpoint = found["checkpoint_params"]
    diff = (spec.params_total - checkpoint) / checkpoint
    out = dict(found, dlmcost_params=spec.params_total, difference_fraction=diff)
    if abs(diff) > VERIFY_WARN_FRACTION:
        out["warning"] = (f"dlmcost counts {spec.params_total:,} parameters, the checkpoint has {checkpoint:,} "
                          f"({diff:+.1%}): the config may use a feature the parser does not model")
    return out
