"""The typed records of results.py, built from what was evaluated: one GPU's analyze result (its
totals, breakdowns, passes and ops), the model and workload summaries every result starts with,
and the warnings analyze attaches.
"""

from __future__ import annotations

import numpy as np

from ..engine.cost import KINDS, OP_KINDS
from ..engine.evaluation import METRICS
from ..engine.verdict import KNEE_LIMIT, family_ridge
from ..engine.frames import Frame
from ..inputs.hardware import GPU
from ..inputs.models import ModelSpec
from ..inputs.precision import get_precision
from ..results import GPUResult, Knee, Memory, ModelSummary, OpResult, PassResult, SlowKernelsRecord, WorkloadSummary
from ..engine.roofline import verdict
from ..engine.schemes import REGISTRY
from ..engine.workload import Workload

BYTE_LABELS = dict(weight_bytes="weights", kv_read_bytes="kv_read", kv_write_bytes="kv_write",
                   activation_bytes="activations")


def ignored_knobs_warning(scheme: str, given, logits_committed: bool = False) -> str | None:
    """A line for the knobs given that the scheme does not read (`--scheme ar --block 32`): they
    change nothing, which is probably not what was meant."""
    ignored = REGISTRY[scheme].ignored(given, logits_committed)
    if not ignored:
        return None
    reads = ", ".join(REGISTRY[scheme].knobs) or "none of them"
    return (f"{', '.join('--' + k.replace('_', '-') for k in ignored)} {'does' if len(ignored) == 1 else 'do'} "
            f"nothing for the {scheme} scheme (it reads {reads}; `dlmcost schemes`)")


def steps_warning(steps: float, tokens: float) -> str | None:
    """More denoising steps than generated tokens: some steps commit no token (tokens per forward
    below 1), which a sampler would not be set to do."""
    if steps <= tokens * (1 + 1e-9):
        return None
    return (f"{steps:g} steps for {tokens:g} generated tokens: more passes than tokens, so some steps commit no "
            f"token (tokens per forward {tokens / steps:.3g}, below 1)")


def workload_warnings(spec: ModelSpec, w: Workload, given=()) -> list[str]:
    """Things that are computable but probably not what the user meant; `given`: the names of the
    knobs the caller set (the others took defaults)."""
    out = [line for line in (ignored_knobs_warning(w.scheme, given, w.logits == "committed"),
                             steps_warning(w.total_steps, w.gen) if REGISTRY[w.scheme].uses("steps") else None)
           if line]
    if spec.max_context and w.prompt + w.gen > spec.max_context:
        out.append(f"prompt + generation = {w.prompt + w.gen} tokens exceeds {spec.id}'s trained context of "
                   f"{spec.max_context}; the numbers assume the model could run it")
    scheme = REGISTRY[w.scheme]
    verified_by_ar = scheme.takes_drafter and w.drafter  # an AR verifier of a drafter's proposals
    runs = spec.sampler.schemes if spec.sampler else ()  # registered names (checked where the model was read)
    only_ar = bool(runs) and all(REGISTRY[s].autoregressive for s in runs)
    if only_ar and not scheme.autoregressive and not verified_by_ar:
        out.append(f"{spec.id} is an autoregressive model: it does not decode with '{w.scheme}'; the numbers "
                   f"are for a diffusion model of its shape")
    if not spec.verified:
        out.append(f"{spec.id}'s config is unverified (dimensions from a third-party port)")
    fewest_kv = min(k.n_kv_heads for _, k in spec.attention_groups)  # a hybrid's global layers may have fewer
    if not spec.mla and w.tp > fewest_kv:
        out.append(f"tp={w.tp} exceeds the model's {fewest_kv} K/V heads: each is replicated on "
                   f"{w.tp // fewest_kv} GPUs, so per-GPU K/V reads and cache stop shrinking beyond "
                   f"tp={fewest_kv}")
    return out


def pass_results(frame: Frame, scheme: str, row: int, mla: bool) -> list[PassResult]:
    """Each pass family the configuration runs, as its average pass; its verdict compares its
    arithmetic intensity with its achievable ridge (the rates its time is computed with)."""
    out, names = [], frame.ev.op_names
    for name in frame.ev.family_order[scheme]:
        fam = frame.ev.families.get((scheme, name))
        i = fam.index(row) if fam is not None else None
        if i is None:  # a family this configuration does not run
            continue
        count = float(fam.count[i])
        per = 1.0 / count
        flops, nbytes = float(fam.flops[i]), float(fam.bytes[i])
        ai = flops / nbytes if nbytes else 0.0
        ridge = float(family_ridge(frame.grid, fam)[i])
        by = {key: float(fam.metric(key)[i].sum()) * per for key in BYTE_LABELS}
        out.append(PassResult.model_construct(
            name=name, count=count, flops=flops * per, bytes=nbytes * per,
            q=float(fam.q_first[i]), c=float(fam.c_first[i]), q_last=float(fam.q_last[i]), c_last=float(fam.c_last[i]),
            **{f"flops_{kind}": float(fam.flops_of_kind(kind, names)[i]) * per for kind in KINDS},
            **by, arithmetic_intensity=ai, achievable_ridge_flops_per_byte=ridge, verdict=str(verdict(ai, ridge)),
            time_s=float(fam.time_s[i]) * per,
            mla_form=("absorbed" if fam.mla_absorbed[i] else "expanded") if mla else None,
        ))
    return out


def _slow_kernels(frame: Frame, i: int) -> SlowKernelsRecord | None:
    """What the stack's slow kernels added to configuration i's passes (its rates'), None where none."""
    r = frame.grid.rates
    fixed, per_token = (float(np.asarray(v, float)[i] if np.ndim(v) else v) * 1e6
                        for v in (r.slow_layer_s, r.slow_token_layer_s))
    if not (fixed or per_token):
        return None
    return SlowKernelsRecord.model_construct(us_per_layer=round(fixed, 9), us_per_token_layer=round(per_token, 9))


def gpu_result(w: Workload, gpu: GPU, rate: dict, frame: Frame, i: int, derived: dict, knee_block: float,
                knee_batch: float, ctx: float, mla: bool, ar_step_ai: float) -> GPUResult:
    """Configuration i of an analyze frame (`derived`: its generation_numbers; `ar_step_ai`: the
    FLOP/byte of its AR baseline's average decode step)."""
    t = frame.ev.total
    ridge = rate["ridge"]
    flops, nbytes, time_s = float(t.flops[i]), float(t.bytes[i]), float(t.time_s[i])
    mem = frame.memory
    ops = frame.ev.ops(i)
    op_flops, op_bytes, op_time = ops[:, 0], ops[:, 1:5].sum(axis=1), ops[:, 5]
    kinds = [OP_KINDS[name] for name in frame.ev.op_names]
    number = {k: float(derived[k]) for k in ("nfe", "tokens_per_nfe", "arithmetic_intensity",
                                             "achievable_ridge_flops_per_byte", "dominant_pass_arithmetic_intensity",
                                             "memory_bound_time_fraction",
                                             "tokens_per_s", "tokens_per_s_per_gpu", "flops_per_token", "bytes_per_token",
                                             "ar_tokens_per_s", "speedup_vs_ar", "time_ratio_to_ar")}
    return GPUResult.model_construct(
        gpu=gpu.name, gpu_key=gpu.key, gpu_status=gpu.status, ridge_flops_per_byte=ridge, peak_flops=rate["peak_linear"],
        attention_peak_flops=rate["peak_attention"], bandwidth_bytes_per_s=rate["bandwidth"], flops=flops, bytes=nbytes,
        flops_breakdown={k: float(sum(f for f, kind in zip(op_flops, kinds) if kind == k)) for k in KINDS},
        bytes_breakdown={label: float(ops[:, METRICS.index(k)].sum()) for k, label in BYTE_LABELS.items()},
        verdict=str(derived["verdict"]), time_s=time_s, time_bound_s=float(t.bound_s[i]), gpus=w.tp,
        slow_kernels=_slow_kernels(frame, i),
        ar_time_s=float(frame.ar_time_s[i]), ar_step_arithmetic_intensity=float(ar_step_ai), **number,
        knee=Knee.model_construct(block=None if knee_block < 0 else int(knee_block),
                                  batch=None if knee_batch < 0 else int(knee_batch),
                                  context_tokens=float(ctx), limit=KNEE_LIMIT),
        memory=Memory.model_construct(**{k: (bool(v[i]) if k == "fits" else float(v[i])) for k, v in mem.items()
                                         if k != "max_effective_batch"}, max_batch=int(derived["max_batch"])),
        passes=pass_results(frame, w.scheme, i, mla),
        ops=[OpResult.model_construct(name=name, flops=float(op_flops[k]), bytes=float(op_bytes[k]),
                                      arithmetic_intensity=float(op_flops[k] / op_bytes[k]) if op_bytes[k] else 0.0,
                                      time_s=float(op_time[k]), time_share=float(op_time[k]) / time_s)
             for k, name in enumerate(frame.ev.op_names)],
    )


def model_summary(spec: ModelSpec) -> ModelSummary:
    """What every result says of its model: id, source, parameters, K/V bytes per token."""
    return ModelSummary.model_construct(
        id=spec.id, family=spec.family, source=spec.source, revision=spec.revision, verified=spec.verified,
        provenance=spec.provenance,
        params_total=spec.params_total, params_nonembedding=spec.params_nonembedding,
        params_active=spec.params_active, kv_bytes_per_token=spec.kv_bytes_per_token(2.0),
        max_context=spec.max_context,
    )


def workload_summary(w: Workload, mem_fraction: float) -> WorkloadSummary:
    """The validated workload as analyze's result shows it (defaults filled in), with the share of
    each GPU's memory its memory verdict was measured against."""
    return WorkloadSummary.model_construct(
        scheme=w.scheme, prompt=w.prompt, gen=w.gen, steps=w.total_steps, block=w.block_len,
        n_blocks=w.n_blocks, batch=w.batch, effective_batch=w.effective_batch, cfg=w.cfg,
        precision=w.precision, kv_dtype=w.kv_dtype, mem_fraction=mem_fraction, store_pass=w.store_pass,
        logits=w.logits, expert_load=w.expert_load, tp=w.tp, ep=w.ep, mla_form=w.mla_form, active_blocks=w.active_blocks,
        cache_delay=w.cache_delay, refresh_every=w.refresh_every, window=w.window, drafter=w.drafter,
        answer_tokens=w.answer, stops_at_eos=REGISTRY[w.scheme].stops_at_eos, knobs=list(REGISTRY[w.scheme].knobs),
        compute_precision=get_precision(w.precision).compute,
    )
