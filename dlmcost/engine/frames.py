"""Grids and frames: the configurations `analyze` and `sweep` evaluate, as engine columns, and
what one evaluation of them holds.

A grid's columns come from validated workloads (`workload_columns`) or from a sweep's lists;
`make_grids` adds each configuration's AR decode baseline, and `evaluate_frame` costs both in one
engine call each and returns a `Frame`: the sums, the baselines' times and memory, from which
`generation_numbers` derives what both commands print per configuration.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .columns import column
from .evaluation import Evaluation, Grid, evaluate
from .verdict import generation_verdict, memory_bound_time_fraction
from .memory import DEFAULT_MEM_FRACTION, grid_memory
from ..inputs.models import ModelSpec
from ..inputs.precision import get_precision, kv_bytes
from .roofline import stack_rates
from ..inputs.stacks import Stack
from .workload import Workload, make_knobs

KNOB_COLUMNS = ("prompt", "gen", "steps", "block", "store_pass", "logits_committed", "active_blocks", "cache_delay",
                "refresh_every", "window", "drafter")
SETTING_COLUMNS = ("batch", "wbytes", "kvbytes", "all_experts", "tp", "ep", "mla_absorbed", "mla_auto",
                   "kv_single_tensor", "ring_buffer", "quantize_head")
FLAG_COLUMNS = ("all_experts", "mla_absorbed", "mla_auto", "kv_single_tensor", "ring_buffer", "quantize_head")
_W = Workload()
COLUMN_DEFAULTS = dict(tp=1.0, ep=1.0, mla_absorbed=True, mla_auto=True, logits_committed=False, store_pass=False,
                       active_blocks=_W.active_blocks, cache_delay=_W.cache_delay, refresh_every=_W.refresh_every,
                       window=_W.window, drafter=False, all_experts=False, kv_single_tensor=False, ring_buffer=True,
                       quantize_head=False)


def build_grid(cols: dict, rate_rows: list[dict], rate_index: np.ndarray, stack: Stack | None = None) -> Grid:
    """A Grid from per-configuration columns (scalars broadcast); rates looked up by index."""
    n = len(rate_index)
    cols = {**COLUMN_DEFAULTS, **cols}
    knobs = make_knobs(n, **{k: cols[k] for k in KNOB_COLUMNS})
    settings = {k: column(cols[k], n, bool if k in FLAG_COLUMNS else float) for k in SETTING_COLUMNS}
    rates = stack_rates(rate_rows)
    if stack is not None and stack.slow_kernels:  # the stack's slow kernels on each row's part and precision
        rates = replace(rates, slow_layer_s=np.array([stack.slow_layer_us(r["gpu"], r["precision"]) * 1e-6
                                                      for r in rate_rows]),
                        slow_token_layer_s=np.array([stack.slow_token_layer_us(r["gpu"], r["precision"]) * 1e-6
                                                     for r in rate_rows]))
    return Grid(scheme=column(cols["scheme"], n).astype(str), knobs=knobs, **settings,
                rates=rates.take(np.asarray(rate_index)), stack=stack)


def workloads_grid(workloads: list[Workload], rate_rows: list[dict], stack: Stack | None = None) -> Grid:
    """One grid of validated workloads (of one model, at least one): row i is workloads[i] on
    rate_rows[i]."""
    cols = [workload_columns(w) for w in workloads]
    return build_grid({k: [c[k] for c in cols] for k in cols[0]}, rate_rows, np.arange(len(cols)), stack)


def workload_columns(w: Workload) -> dict:
    """Engine columns of one validated workload."""
    return dict(scheme=w.scheme, **w.knobs(), answer=w.answer, batch=w.effective_batch, ar_batch=w.batch,
                wbytes=get_precision(w.precision).weight_bytes, kvbytes=kv_bytes(w.kv_dtype),
                all_experts=w.expert_load == "all", tp=w.tp, ep=w.ep,
                mla_absorbed=w.mla_form != "expanded", mla_auto=w.mla_form == "auto",
                kv_single_tensor=w.kv_single_tensor, ring_buffer=w.ring_buffer, quantize_head=w.quantize_head)


@dataclass(eq=False)  # of arrays: see engine.Grid
class Frame:
    """Evaluated configurations: the engine's sums, the AR decode baseline of each, memory."""

    grid: Grid
    ev: Evaluation
    ar_time_s: np.ndarray
    memory: dict
    memory_bound_fraction: np.ndarray
    models: dict[str, ModelSpec]  # by role: "main", and "drafter" for draft-verify with a drafter
    achievable_ridge: np.ndarray  # FLOP/byte: the ridge of the rates the time model uses (its longest family's)
    dominant_ai: np.ndarray  # FLOP/byte of the family taking the most time (whose ridge is achievable_ridge)
    ar: Evaluation  # the AR decode baselines' evaluation (`Grids.ar`; row i's is ar_of[i]): the chart's AR point


def _ar_grid(cols: dict, rate_rows: list[dict], rate_index: np.ndarray,
             stack: Stack | None) -> tuple[Grid, np.ndarray]:
    """The AR decode baselines of these columns (prefill + one cached step per answer token: AR
    stops at end-of-sequence) of the same model, prompt, batch (no CFG copy: AR has no guidance),
    precision, layout and GPU, under the AR path of the same software (`make_grids`): each distinct
    one once, and which one each row takes."""
    n = len(rate_index)
    keys = ("prompt", "answer", "ar_batch", "wbytes", "kvbytes", "all_experts", "tp", "ep", "mla_absorbed", "mla_auto",
            "kv_single_tensor", "ring_buffer", "quantize_head")
    table = np.column_stack([np.broadcast_to(np.asarray({**COLUMN_DEFAULTS, **cols}[k], float), (n,)) for k in keys]
                            + [np.asarray(rate_index, float)])
    unique, inverse = unique_rows(table)
    u = dict(zip(keys, unique.T))
    grid = build_grid(dict(u, scheme="ar", gen=u["answer"], steps=u["answer"], block=u["answer"], batch=u["ar_batch"]),
                      rate_rows, unique[:, -1].astype(int), stack)
    return grid, inverse.ravel()


def unique_rows(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(table, axis=0, return_inverse=True) by a lexicographic sort (np.unique imports
    numpy.ma, which costs the command line 10+ ms of start-up)."""
    if not len(table):
        return table, np.zeros(0, int)
    order = np.lexsort(table.T[::-1])
    ranked = table[order]
    new = np.r_[True, np.any(ranked[1:] != ranked[:-1], axis=1)]
    inverse = np.empty(len(table), int)
    inverse[order] = np.cumsum(new) - 1
    return ranked[new], inverse


def models_by_role(spec: ModelSpec, drafter: ModelSpec | None) -> dict[str, ModelSpec]:
    """What `engine.evaluate` takes: each family's model by its role (a drafter only if any)."""
    return {"main": spec} | ({"drafter": drafter} if drafter else {})


def generation_numbers(frame: Frame, tokens: np.ndarray, tp: np.ndarray, cfg: bool) -> dict[str, np.ndarray]:
    """What analyze and sweep derive from each configuration's totals (docs/methodology.md, "Per
    token"): `tokens` is the useful tokens (batch x answer tokens; CFG's extra copy makes none)
    and `tp` the GPUs of the group."""
    t, mem = frame.ev.total, frame.memory
    frac = frame.memory_bound_fraction
    return dict(
        nfe=t.count, tokens_per_nfe=tokens / t.count, time_s=t.time_s, tokens_per_s=tokens / t.time_s,
        tokens_per_s_per_gpu=tokens / t.time_s / tp, flops_per_token=t.flops * tp / tokens,
        bytes_per_token=t.bytes * tp / tokens, arithmetic_intensity=t.flops / t.bytes,
        memory_bound_time_fraction=frac, verdict=generation_verdict(frac),
        achievable_ridge_flops_per_byte=frame.achievable_ridge,
        dominant_pass_arithmetic_intensity=frame.dominant_ai,
        ar_tokens_per_s=tokens / frame.ar_time_s, speedup_vs_ar=frame.ar_time_s / t.time_s,
        time_ratio_to_ar=t.time_s / frame.ar_time_s,  # deprecated: speedup_vs_ar's inverse
        max_batch=np.floor(mem["max_effective_batch"] / (2 if cfg else 1)).astype(int),
    )


@dataclass(eq=False)  # of arrays: see engine.Grid
class Grids:
    """What one evaluation costs: the configurations' grid and their distinct AR baselines'
    (`ar_of[i]`: row i's), built once whether they are counted, evaluated or both."""

    grid: Grid
    ar: Grid
    ar_of: np.ndarray


_SAME = object()


def make_grids(cols: dict, rate_rows: list[dict], rate_index: np.ndarray, stack: Stack | None = None,
               ar_stack: Stack | None = _SAME) -> Grids:
    """The grid of these columns and their AR baselines' (what `evaluate_frame` takes); the
    baselines run under `ar_stack` (the AR engine's path when the diffusion decoding runs on a
    dLLM one), `stack` unless given."""
    ar_stack = stack if ar_stack is _SAME else ar_stack
    return Grids(build_grid(cols, rate_rows, rate_index, stack), *_ar_grid(cols, rate_rows, rate_index, ar_stack))


def evaluate_frame(spec: ModelSpec, drafter: ModelSpec | None, grids: Grids, capacity_bytes: np.ndarray,
                   mem_fraction: float = DEFAULT_MEM_FRACTION) -> Frame:
    """Both grids evaluated (one engine call each), and memory against `mem_fraction` of each
    row's GPU capacity."""
    grid, models = grids.grid, models_by_role(spec, drafter)
    ev = evaluate(models, grid)
    fraction, ridge, dominant_ai = memory_bound_time_fraction(ev, grid)
    ar = evaluate(spec, grids.ar)
    memory = grid_memory(spec, grid, ev, capacity_bytes, drafter, mem_fraction)
    return Frame(grid, ev, ar.total.time_s[grids.ar_of], memory,
                 fraction, models, ridge, dominant_ai, ar)


def ar_step_intensity(ar: Evaluation, grids: Grids) -> np.ndarray:
    """FLOP/byte of each configuration's AR decode baseline's repeated pass, its cached decode
    step, as the average pass (the family's FLOPs over its bytes): the AR point a roofline chart
    draws. `ar`: the baselines' evaluation (`Frame.ar`)."""
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

