"""The Python API: `analyze` one workload on some GPUs, `sweep` a grid of workloads.

Both build a `Grid` of configurations (numpy arrays), run it through `engine.evaluate` once,
and return plain dictionaries (units in the key names) that `report.py` renders and that
`--format json` prints as they are.

    >>> from dlmcost import api
    >>> a = api.analyze("GSAI-ML/LLaDA-8B-Instruct", gpus="h100", gen=256, steps=64)
    >>> a["results"][0]["tokens_per_s"]
"""

from __future__ import annotations

import math

import numpy as np

from .engine import KNEE_LIMIT, Grid, Sums, evaluate, generation_verdict, knee, memory_bound_time_fraction
from pydantic import ValidationError

from .errors import UsageError, WorkloadError
from .files import validation_message
from .hardware import GPU, SEED_TABLE_GPUS, HardwareDB
from .memory import grid_memory
from .models import ModelSpec, resolve_model
from .precision import get_precision, kv_bytes
from .profiles import Profile, load_profile
from .roofline import gpu_rates, stack_rates, verdict
from .workload import MAX_TOKENS, SCHEMES, Workload, check_parallel, check_workload

BYTE_LABELS = dict(weight_bytes="weights", kv_read_bytes="kv_read", kv_write_bytes="kv_write",
                   activation_bytes="activations")


GRID_COLUMNS = ("scheme", "prompt", "gen", "steps", "block", "batch", "store_pass", "logits_committed",
                "wbytes", "kvbytes", "all_experts", "tp", "ep", "mla_absorbed", "mla_auto")
BOOL_COLUMNS = ("store_pass", "logits_committed", "all_experts", "mla_absorbed", "mla_auto")
COLUMN_DEFAULTS = dict(tp=1.0, ep=1.0, mla_absorbed=True, mla_auto=True)  # single GPU; MLA form chosen per pass


def build_grid(cols: dict, rate_rows: list[dict], rate_index: np.ndarray) -> Grid:
    """A Grid from per-configuration columns; rates are looked up by (GPU, precision) index."""
    n = len(rate_index)
    cols = {**COLUMN_DEFAULTS, **cols}
    arr = {k: np.broadcast_to(np.asarray(cols[k]), (n,)).copy() for k in GRID_COLUMNS}
    arr["scheme"] = arr["scheme"].astype(str)
    for k in BOOL_COLUMNS:
        arr[k] = arr[k].astype(bool)
    for k in GRID_COLUMNS[1:]:
        if arr[k].dtype != bool:
            arr[k] = arr[k].astype(float)
    return Grid(**arr, rates=stack_rates(rate_rows).take(np.asarray(rate_index)))


def with_ar_baseline(cols: dict, n: int) -> dict:
    """Columns for n configurations -> 2n: rows n..2n-1 are AR decode (prefill + Lg cached steps)
    of the same model, prompt, generation, batch, precision, layout and GPU, the baseline every
    result is compared with."""
    out = {k: np.concatenate([np.broadcast_to(np.asarray(v), (n,))] * 2) for k, v in cols.items()}
    gen = out["gen"][n:].astype(float)
    out["scheme"] = out["scheme"].astype(object)
    out["scheme"][n:] = "ar"
    out["steps"] = out["steps"].astype(float)
    out["block"] = out["block"].astype(float)
    out["steps"][n:], out["block"][n:], out["store_pass"][n:] = gen, gen, False
    return out


def _f(x) -> float:
    return float(x)


def _pass_entries(ev_fams: dict[str, Sums], i: int, ridge: float) -> list[dict]:
    out = []
    for name, s in ev_fams.items():
        count = _f(s.count[i])
        if count <= 0:
            continue
        per = 1.0 / count  # entries report one average pass of the family
        flops = _f(s.total_flops[i])
        nbytes = _f(s.total_bytes[i])
        ai = flops / nbytes if nbytes else 0.0
        out.append(dict(
            name=name, count=count, flops=flops * per, bytes=nbytes * per,
            q=_f(s.q_first[i]), c=_f(s.c_first[i]), q_last=_f(s.q_last[i]), c_last=_f(s.c_last[i]),
            flops_linear=_f(s.flops["linear"][i]) * per, flops_attention=_f(s.flops["attention"][i]) * per,
            flops_lm_head=_f(s.flops["lm_head"][i]) * per, flops_other=_f(s.flops["other"][i]) * per,
            weight_bytes=_f(s.bytes["weight_bytes"][i]) * per, kv_read_bytes=_f(s.bytes["kv_read_bytes"][i]) * per,
            kv_write_bytes=_f(s.bytes["kv_write_bytes"][i]) * per,
            activation_bytes=_f(s.bytes["activation_bytes"][i]) * per,
            arithmetic_intensity=ai, verdict=str(verdict(ai, ridge)), time_s=_f(s.time_s[i]) * per,
            total_time_s=_f(s.time_s[i]),
        ))
        if s.mla_absorbed is not None:
            out[-1]["mla_form"] = "absorbed" if s.mla_absorbed[i] else "expanded"
    return out


def _op_entry(name: str, flops: float, nbytes: float, time_s: float, total_time_s: float) -> dict:
    return dict(name=name, flops=flops, bytes=nbytes, arithmetic_intensity=flops / nbytes if nbytes else 0.0,
                time_s=time_s, time_share=time_s / total_time_s)


# --- analyze ------------------------------------------------------------------------------------


def _rates_or_none(gpu: GPU, precision: str, profile: Profile, tp: int = 1):
    if tp > 1 and gpu.link_bytes_per_s <= 0:
        return None
    return gpu_rates(gpu, get_precision(precision), profile)


def unsupported_reason(gpu: GPU, precision: str, tp: int = 1) -> str:
    compute = get_precision(precision).compute
    if not gpu.supports(compute):
        return f"{gpu.name} has no {compute} tensor cores (precision {precision} unsupported)"
    return f"{gpu.name} has no scale-up link in its hardware file (tp={tp} needs one)"


def analyze(model: str | ModelSpec = "GSAI-ML/LLaDA-8B-Instruct", gpus: str | list[str] | None = None, *,
            efficiency: str = "realistic", hardware: list[str] | None = None, revision: str | None = None,
            hub: bool = False, **workload) -> dict:
    """Cost of one workload on each GPU. Unset workload fields take the model's sampler defaults."""
    spec = model if isinstance(model, ModelSpec) else resolve_model(model, revision=revision, hub=hub)
    w = workload_for(spec, **workload)
    db = HardwareDB.load(hardware)
    selected = db.select(gpus, SEED_TABLE_GPUS)
    profile = load_profile(efficiency)
    problem = check_workload(w.scheme, w.gen, w.block_len, w.total_steps) or check_parallel(spec, w.tp, w.ep)
    if problem:
        raise WorkloadError(problem)

    supported = [(g, r) for g in selected if (r := _rates_or_none(g, w.precision, profile, w.tp)) is not None]
    results = []
    if supported:
        n = len(supported)
        cols = dict(scheme=w.scheme, prompt=w.prompt, gen=w.gen, steps=w.total_steps, block=w.block_len,
                    batch=w.effective_batch, store_pass=w.store_pass, logits_committed=w.logits == "committed",
                    wbytes=get_precision(w.precision).weight_bytes, kvbytes=kv_bytes(w.kv_dtype),
                    all_experts=w.expert_load == "all", tp=w.tp, ep=w.ep,
                    mla_absorbed=w.mla_form != "expanded", mla_auto=w.mla_form == "auto")
        grid = build_grid(with_ar_baseline(cols, n), [r for _, r in supported], np.r_[np.arange(n), np.arange(n)])
        ev = evaluate(spec, grid)
        memory_fraction = memory_bound_time_fraction(ev, grid.rates.ridge)
        ctx = grid.prompt[:n] + grid.gen[:n] / 2
        sub = grid.take(np.arange(n))
        knee_block = knee(spec, sub, ctx, sub.block, "block")
        decode_q = np.full(n, 1.0) if w.scheme == "ar" else sub.block
        knee_batch = knee(spec, sub, ctx, decode_q, "batch")
        mem = grid_memory(spec, sub, np.array([g.memory_bytes for g, _ in supported]))
        for i, (gpu, rate) in enumerate(supported):
            results.append(_result(spec, w, gpu, rate, ev, i, i + n, knee_block[i], knee_batch[i], mem, ctx[i],
                                   memory_fraction[i]))
    by_key = {r["gpu_key"]: r for r in results}
    ordered = []
    for g in selected:
        if g.key in by_key:
            ordered.append(by_key[g.key])
        else:
            ordered.append(dict(gpu=g.name, gpu_key=g.key, supported=False,
                                error=unsupported_reason(g, w.precision, w.tp)))
    return dict(model=model_summary(spec), workload=workload_summary(w), efficiency_profile=profile.name,
                warnings=workload_warnings(spec, w), results=ordered)


def workload_warnings(spec: ModelSpec, w: Workload) -> list[str]:
    """Things that are computable but probably not what the user meant."""
    out = []
    if spec.max_context and w.prompt + w.gen > spec.max_context:
        out.append(f"prompt + generation = {w.prompt + w.gen} tokens exceeds {spec.id}'s trained context of "
                   f"{spec.max_context}; the numbers assume the model could run it")
    if not spec.verified:
        out.append(f"{spec.id}'s config is unverified (dimensions from a third-party port)")
    if not spec.mla and w.tp > spec.n_kv_heads:
        out.append(f"tp={w.tp} exceeds the model's {spec.n_kv_heads} K/V heads: each is replicated on "
                   f"{w.tp // spec.n_kv_heads} GPUs, so per-GPU K/V reads and cache stop shrinking beyond "
                   f"tp={spec.n_kv_heads}")
    return out


def _result(spec: ModelSpec, w: Workload, gpu: GPU, rate: dict, ev, i: int, i_ar: int,
            knee_block: float, knee_batch: float, mem: dict, ctx: float, memory_fraction: float) -> dict:
    t = ev.total
    ridge = rate["ridge"]
    flops, nbytes, time_s = _f(t.total_flops[i]), _f(t.total_bytes[i]), _f(t.time_s[i])
    tokens = w.batch * w.gen
    nfe = _f(t.count[i])
    passes = _pass_entries(ev.families, i, ridge)
    mem_frac = _f(memory_fraction)
    ai = flops / nbytes
    ar_time = _f(t.time_s[i_ar])
    return dict(
        gpu=gpu.name, gpu_key=gpu.key, supported=True, gpu_status=gpu.status,
        ridge_flops_per_byte=ridge,
        nfe=nfe, tokens_per_nfe=tokens / nfe,
        flops=flops, bytes=nbytes,
        flops_breakdown={k: _f(t.flops[k][i]) for k in ("linear", "attention", "lm_head", "other")},
        bytes_breakdown={label: _f(t.bytes[k][i]) for k, label in BYTE_LABELS.items()},
        arithmetic_intensity=ai,
        verdict=str(generation_verdict(mem_frac)),
        memory_bound_time_fraction=mem_frac,
        time_s=time_s, time_bound_s=_f(t.bound_s[i]),
        gpus=w.tp, tokens_per_s=tokens / time_s, tokens_per_s_per_gpu=tokens / time_s / w.tp,
        flops_per_token=flops * w.tp / tokens, bytes_per_token=nbytes * w.tp / tokens,
        ar_time_s=ar_time, ar_tokens_per_s=tokens / ar_time, time_ratio_to_ar=time_s / ar_time,
        knee=dict(block=None if knee_block < 0 else int(knee_block), batch=None if knee_batch < 0 else int(knee_batch),
                  context_tokens=float(ctx), limit=KNEE_LIMIT),
        memory={k: (bool(v[i]) if k == "fits" else _f(v[i])) for k, v in mem.items() if k != "max_effective_batch"}
        | dict(max_batch=int(mem["max_effective_batch"][i] // (2 if w.cfg else 1))),
        passes=[{k: v for k, v in p.items() if k != "total_time_s"} for p in passes],
        ops=[_op_entry(op, _f(t.op_flops[op][i]), _f(t.op_bytes[op][i]), _f(t.op_time_s[op][i]), time_s)
             for op in t.op_time_s],
    )


# --- workload defaults and summaries --------------------------------------------------------------


def workload_for(spec: ModelSpec, **given) -> Workload:
    """A Workload whose unset fields come from the model's sampler defaults."""
    given = {k: v for k, v in given.items() if v is not None}
    sampler = spec.sampler
    if sampler:
        given.setdefault("scheme", sampler.scheme)
        given.setdefault("gen", sampler.gen)
        if sampler.block and "block" not in given and given["gen"] % sampler.block == 0:
            given["block"] = sampler.block
        if given.get("scheme") == "block":
            given.setdefault("store_pass", sampler.store_pass)
        if sampler.steps and "steps" not in given and "tpf" not in given and given["gen"] == sampler.gen:
            given["steps"] = sampler.steps
    if given.get("scheme") == "block" and "block" not in given:
        raise WorkloadError("the block scheme needs --block")
    try:
        w = Workload(**given)
    except ValidationError as exc:  # -> one readable line, by the shared formatter
        raise UsageError(f"invalid workload: {validation_message(exc, top='workload')}") from None
    get_precision(w.precision)  # unknown names -> one clear UsageError each
    kv_bytes(w.kv_dtype)
    if w.total_steps > MAX_TOKENS:
        raise UsageError(f"{w.total_steps:.3g} steps is absurd (tokens per forward too small?); at most {MAX_TOKENS:,}")
    return w


def model_summary(spec: ModelSpec) -> dict:
    return dict(
        id=spec.id, family=spec.family, source=spec.source, revision=spec.revision, verified=spec.verified,
        params_total=spec.params_total, params_nonembedding=spec.params_nonembedding,
        params_active=spec.params_active,
        kv_bytes_per_token=spec.kv_bytes_per_token(2.0),
        max_context=spec.max_context,
    )


def workload_summary(w: Workload) -> dict:
    return dict(
        scheme=w.scheme, prompt=w.prompt, gen=w.gen, steps=w.total_steps, block=w.block_len,
        n_blocks=w.n_blocks, batch=w.batch, effective_batch=w.effective_batch, cfg=w.cfg,
        precision=w.precision, kv_dtype=w.kv_dtype, store_pass=w.store_pass, logits=w.logits,
        expert_load=w.expert_load, tp=w.tp, ep=w.ep, mla_form=w.mla_form,
    )


# --- sweep --------------------------------------------------------------------------------------

# Knobs a scheme's cost does not depend on: sweep evaluates it once for them (shown as None).
MAX_SWEEP = 200_000  # configurations in one sweep: rows take about 7 KB each (arrays, then dicts)

IGNORED_KNOBS = {"ar": ("steps", "block"), "mdm": ("block",)}


def _as_list(value, default: list) -> list:
    if value is None:
        return default
    return value if isinstance(value, (list, tuple)) else [value]


def sweep(model: str | ModelSpec = "GSAI-ML/LLaDA-8B-Instruct", *, gpus=None, schemes=None, prompts=None,
          gens=None, steps=None, tpf: float | None = None, blocks=None, batches=None, precisions=None,
          kv_dtype: str = "bf16", cfg: bool = False, store_pass: bool | None = None, logits: str = "all",
          expert_load: str = "expected", tps=None, eps=None, mla_form: str = "auto", efficiency: str = "realistic",
          hardware: list[str] | None = None, revision: str | None = None, hub: bool = False) -> dict:
    """Every combination of the given lists, evaluated in one vectorised pass.

    Impossible combinations (a block that does not divide the generation, fewer steps than
    blocks) are skipped and counted; GPUs without the precision's tensor cores likewise."""
    spec = model if isinstance(model, ModelSpec) else resolve_model(model, revision=revision, hub=hub)
    # the settings shared by every row are validated by the same rules as analyze's
    defaults = workload_for(spec, kv_dtype=kv_dtype, logits=logits, expert_load=expert_load, mla_form=mla_form)
    sampler = spec.sampler
    db = HardwareDB.load(hardware)
    gpu_list = db.select(gpus, SEED_TABLE_GPUS)
    profile = load_profile(efficiency)
    scheme_list = _as_list(schemes, list(sampler.schemes) if sampler and sampler.schemes else list(SCHEMES))
    for sc in scheme_list:
        if sc not in SCHEMES:
            raise UsageError(f"unknown scheme '{sc}'; choose from: {', '.join(SCHEMES)}")
    precision_list = _as_list(precisions, [defaults.precision])
    for p in precision_list:
        get_precision(p)
    knobs = dict(prompt=_as_list(prompts, [defaults.prompt]), gen=_as_list(gens, [defaults.gen]),
                 steps=_as_list(steps, [None]), block=_as_list(blocks, [defaults.block]),
                 batch=_as_list(batches, [defaults.batch]), tp=_as_list(tps, [1]), ep=_as_list(eps, [1]))
    for name, values in knobs.items():
        for v in values:
            if v is not None and (not np.isfinite(v) or v <= 0 or v > 10_000_000) and not (name == "prompt" and v == 0):
                raise UsageError(f"--{name} values must be positive, got {v}")
    if tpf is not None and not (np.isfinite(tpf) and 0 < tpf and max(knobs["gen"]) / tpf <= MAX_TOKENS):
        raise UsageError(f"--tpf must be positive and give at most {MAX_TOKENS:,} steps")

    # (GPU, precision) pairs that can run; the others are counted as unsupported.
    rate_rows, pairs = [], []
    unsupported = 0
    for gi, g in enumerate(gpu_list):
        for pi, p in enumerate(precision_list):
            r = _rates_or_none(g, p, profile)
            if r is None:
                unsupported += 1
            else:
                pairs.append((gi, pi))
                rate_rows.append(r)

    # Per scheme, the product of the knobs it depends on (index arrays, no per-row Python loop).
    def ignored(sc: str) -> tuple:
        # with logits limited to the committing block, mdm's cost does depend on the block
        return () if (sc == "mdm" and logits == "committed") else IGNORED_KNOBS.get(sc, ())

    n_grid = sum(len(pairs) * math.prod(1 if k in ignored(sc) else len(v) for k, v in knobs.items())
                 for sc in scheme_list)
    if n_grid > MAX_SWEEP:  # checked before numpy is asked for the arrays
        raise UsageError(f"the sweep asks for {n_grid:,} configurations; at most {MAX_SWEEP:,}: shorten some lists")
    parts = []
    for sc in scheme_list:
        sizes = [len(pairs)] + [1 if k in ignored(sc) else len(v) for k, v in knobs.items()]
        idx = np.indices(sizes).reshape(len(sizes), -1)
        parts.append((sc, idx))
    unsupported *= sum(int(np.prod([1 if k in ignored(sc) else len(v) for k, v in knobs.items()]))
                       for sc, _ in parts)
    if not pairs or not parts:
        return dict(model=model_summary(spec), efficiency_profile=profile.name, columns={}, evaluated=0,
                    skipped_impossible=0, skipped_unsupported=unsupported)
    scheme_col = np.concatenate([np.full(idx.shape[1], sc, dtype=object) for sc, idx in parts]).astype(str)
    pair_idx = np.concatenate([idx[0] for _, idx in parts])
    vals = {}
    for k_i, (name, values) in enumerate(knobs.items(), start=1):
        arr = np.array([np.nan if v is None else v for v in values], dtype=float)
        vals[name] = np.concatenate([arr[idx[k_i]] for _, idx in parts])
    gen = vals["gen"]
    block_ignored = np.array([("block" in ignored(sc)) for sc in scheme_col], dtype=bool) if len(scheme_col) else np.zeros(0, bool)
    steps_ignored = scheme_col == "ar"
    # an ignored block is one block of the whole generation; default steps: S = Lg / tpf
    block = np.where(np.isnan(vals["block"]) | block_ignored, gen, vals["block"])
    steps_arr = np.where(np.isnan(vals["steps"]) | steps_ignored, gen / (tpf or 1.0), vals["steps"])
    steps_arr = np.where(steps_ignored, gen, steps_arr)
    ok = check_workload(scheme_col, gen, block, steps_arr) & check_parallel(spec, vals["tp"], vals["ep"])
    no_link = (vals["tp"] > 1) & (np.array([gpu_list[gi].link_bytes_per_s for gi, _ in pairs])[pair_idx] <= 0)
    unsupported += int((ok & no_link).sum())
    impossible = int((~ok).sum())
    ok &= ~no_link
    keep = np.flatnonzero(ok)
    scheme_col, pair_idx, gen, block, steps_arr = scheme_col[keep], pair_idx[keep], gen[keep], block[keep], steps_arr[keep]
    prompt, batch, tp, ep = vals["prompt"][keep], vals["batch"][keep], vals["tp"][keep], vals["ep"][keep]
    steps_ignored, block_ignored = steps_ignored[keep], block_ignored[keep]
    n = len(keep)
    prec_w = np.array([get_precision(precision_list[pi]).weight_bytes for _, pi in pairs])
    store = sampler.store_pass if (store_pass is None and sampler) else bool(store_pass)
    cols = dict(scheme=scheme_col, prompt=prompt, gen=gen, steps=steps_arr, block=block, batch=batch * (2 if cfg else 1),
                store_pass=store, logits_committed=logits == "committed", wbytes=prec_w[pair_idx],
                kvbytes=kv_bytes(kv_dtype), all_experts=expert_load == "all", tp=tp, ep=ep,
                mla_absorbed=mla_form != "expanded", mla_auto=mla_form == "auto")
    grid = build_grid(with_ar_baseline(cols, n), rate_rows, np.r_[pair_idx, pair_idx])
    ev = evaluate(spec, grid)
    t = ev.total
    time_s, ar_time = t.time_s[:n], t.time_s[n:]
    flops, nbytes = t.total_flops[:n], t.total_bytes[:n]
    tokens = batch * gen
    ai = flops / nbytes
    ridge = grid.rates.ridge[:n]
    capacity = np.array([gpu_list[gi].memory_bytes for gi, _ in pairs])[pair_idx]
    mem = grid_memory(spec, grid.take(np.arange(n)), capacity)
    mem_frac = memory_bound_time_fraction(ev, grid.rates.ridge)[:n]
    columns = dict(
        gpu=np.array([gpu_list[gi].name for gi, _ in pairs])[pair_idx],
        scheme=scheme_col, prompt=prompt, gen=gen,
        steps=np.where(steps_ignored, np.nan, steps_arr),
        block=np.where(block_ignored, np.nan, block),
        batch=batch, tp=tp, ep=ep, precision=np.array([precision_list[pi] for _, pi in pairs])[pair_idx],
        nfe=t.count[:n], tokens_per_nfe=tokens / t.count[:n], time_s=time_s, tokens_per_s=tokens / time_s,
        tokens_per_s_per_gpu=tokens / time_s / tp,
        flops_per_token=flops * tp / tokens, bytes_per_token=nbytes * tp / tokens, arithmetic_intensity=ai,
        ridge_flops_per_byte=ridge, memory_bound_time_fraction=mem_frac,
        verdict=generation_verdict(mem_frac),
        time_ratio_to_ar=time_s / ar_time, fits=mem["fits"], memory_total_bytes=mem["total_bytes"],
        max_batch=np.floor(mem["max_effective_batch"] / (2 if cfg else 1)),
    )
    return dict(model=model_summary(spec), efficiency_profile=profile.name, columns=columns, evaluated=n,
                skipped_impossible=impossible, skipped_unsupported=unsupported,
                settings=dict(kv_dtype=kv_dtype, cfg=cfg, store_pass=store, logits=logits, expert_load=expert_load,
                              mla_form=mla_form, tpf=tpf))


def sweep_rows(result: dict) -> list[dict]:
    """Column arrays -> one dict per row (NaN knobs the scheme ignores become None)."""
    cols = result.get("columns") or {}
    names = list(cols)
    out = []
    for values in zip(*(cols[k].tolist() for k in names)):
        row = {}
        for k, v in zip(names, values):
            if isinstance(v, float) and math.isnan(v):
                v = None
            elif k in ("prompt", "gen", "block", "batch", "tp", "ep", "max_batch") and v is not None:
                v = int(v)
            row[k] = v
        out.append(row)
    return out


# --- models -------------------------------------------------------------------------------------


def model_info(spec: ModelSpec) -> dict:
    """Everything `dlmcost model` shows: architecture, parameter counts, K/V bytes per token."""
    from .precision import KV_DTYPE_BYTES

    info = dict(model_summary(spec))
    info.update(
        n_layers=spec.n_layers, d_model=spec.d_model, n_heads=spec.n_heads, n_kv_heads=spec.n_kv_heads,
        head_dim=spec.head_dim, group_size=spec.group_size, ffn_dim=spec.ffn_dim,
        mlp="gated (SwiGLU, 3 matrices)" if spec.gated_mlp else "plain (2 matrices)",
        vocab_size=spec.vocab_size, tie_embeddings=spec.tie_embeddings, qkv_bias=spec.qkv_bias,
        qk_norm=spec.qk_norm, n_dense_layers=spec.n_dense_layers, n_moe_layers=spec.n_moe_layers,
    )
    info["kv_bytes_per_token"] = {k: spec.kv_bytes_per_token(v) for k, v in KV_DTYPE_BYTES.items() if k not in ("fp16", "int4")}
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
        out.append(dict(model_summary(spec), status=bundled_manifest()[model_id].get("status", ""),
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
