"""`sweep`: every combination of lists of knobs, GPUs and precisions, evaluated in chunks of
`limits.SWEEP_CHUNK` configurations (one vectorised engine call each), as rows.

The lists are validated by the same `Workload` fields as analyze's settings; impossible
combinations are skipped and counted. `iter_sweep` streams the rows chunk by chunk,
`iter_sweep_columns` the same chunks as one array per key (what the CLI writes and sorts, never a
row object each), `sweep_first_pass` adds each configuration's first pass (for plan), and
`sweep_passes` counts the passes costed one by one without evaluating anything (the limit in
limits.py). The knobs not given take the defaults analyze takes (`prepare.sampler_defaults`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from pydantic import ValidationError

from . import limits
from ..engine.evaluation import first_pass
from ..errors import UsageError
from ..inputs.files import validation_message
from ..engine.frames import KNOB_COLUMNS, Frame, evaluate_frame, generation_numbers, make_grids
from ..inputs.hardware import DEFAULT_GPUS, HardwareDB
from .prepare import (DEFAULT_MODEL, rates_or_none, resolve_drafter, resolve_spec, resolve_stack, sampler_defaults,
                      workload_for)
from ..inputs.models import ModelSpec
from ..inputs.precision import get_precision, kv_bytes
from ..inputs.profiles import load_profile
from .records import model_summary
from ..results import SweepResult, SweepRow
from ..engine.schemes import REGISTRY, SCHEMES
from ..inputs.stacks import STACK_NONE, Stack
from ..engine.workload import Workload, check_parallel, make_knobs, scheme_ok


# the knobs a scheme may ignore: its rows then take one value of them (sweep evaluates it once)
IGNORABLE_KNOBS = ("steps", "block")


def _as_list(value, default: list) -> list:
    if value is None:
        return default
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _validated(name: str, values: list) -> list:
    """Each value of a sweep list checked by the Workload field of the same name."""
    for v in values:
        if v is None:
            continue
        try:
            Workload(**{name: v}, **({"gen": v} if name == "answer_tokens" else {}))
        except ValidationError as exc:
            raise UsageError(f"--{name}: {validation_message(exc, top=name)}") from None
    return values


def sweep(model: str | ModelSpec = DEFAULT_MODEL, **options) -> SweepResult:
    """Every combination of the given lists, evaluated vectorised (in chunks of
    limits.SWEEP_CHUNK).

    Impossible combinations (a block that does not divide the generation, fewer steps than
    blocks, a layout that does not split the model) are skipped and counted; GPUs without the
    precision's tensor cores likewise. A scheme is evaluated once for each knob it ignores.
    The options are in the signature (`help(api.sweep)`)."""
    meta, chunks = iter_sweep(model, **options)
    return meta.model_copy(update={"rows": [row for chunk in chunks for row in chunk]})


def iter_sweep(model: str | ModelSpec = DEFAULT_MODEL, **options) -> tuple[SweepResult, Iterator[list[SweepRow]]]:
    """`sweep` as a stream: the summary (counts, no rows) and a generator of row lists, one per
    chunk of limits.SWEEP_CHUNK configurations, so a caller writing rows out holds one chunk at a time.
    Everything is validated before the summary is returned; `max_configs=None` lifts the limit.
    The options are in the signature (`help(api.sweep)`)."""
    meta, chunks, _ = _sweep_chunks(model, **options)
    return meta, (_sweep_rows(chunk) for chunk in chunks)


def iter_sweep_columns(model: str | ModelSpec = DEFAULT_MODEL,
                       **options) -> tuple[SweepResult, Iterator[dict[str, np.ndarray]]]:
    """`iter_sweep` in columns: the summary and a generator of one array per SweepRow key for each
    chunk (knobs a scheme ignores are None in their object columns), no row object built: what
    the CLI writes csv and jsonl from, and sorts and cuts a table in.
    The options are in the signature (`help(api.sweep)`)."""
    meta, chunks, _ = _sweep_chunks(model, **options)
    return meta, (_sweep_arrays(chunk) for chunk in chunks)


def sweep_first_pass(model: str | ModelSpec = DEFAULT_MODEL, **options) -> dict[str, np.ndarray]:
    """`sweep_columns(sweep(...))` (one array per SweepRow key; empty when nothing was evaluated)
    plus, per configuration, `first_pass_s`: the time of its first pass at its batch (a prompt
    prefill, or the pass that opens the first block; `engine.first_pass`), and `prompt_passes`:
    how many of its NFE passes see only the prompt. A serving simulation times the first pass
    apart from the others, whose mean is (time_s - first_pass_s) / (nfe - 1)."""
    _, chunks, _ = _sweep_chunks(model, **options)
    parts = []
    for chunk in chunks:
        cols = _sweep_arrays(chunk)
        cols["first_pass_s"], cols["prompt_passes"] = first_pass(chunk.frame.models, chunk.frame.grid, chunk.frame.ev)
        parts.append(cols)
    if not parts:
        return {}
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def sweep_passes(model: str | ModelSpec = DEFAULT_MODEL, **options) -> int:
    """The passes a sweep of these options would cost one by one (what `max_passes` limits), its
    options validated but nothing evaluated: `plan` adds them up over its sweeps before it runs
    any of them."""
    _, _, passes = _sweep_chunks(model, **{**options, "max_passes": float("inf")})  # counted, never refused
    return passes


def check_sweeps_passes(models: list[str | ModelSpec], **options) -> None:
    """The limit on passes costed one by one for one command that sweeps several models with the
    same options: the limit is the command's, so their sweeps are added up before any runs."""
    limits.check_passes(sum(sweep_passes(m, **options) for m in models), limits.MAX_PASSES_ONE_BY_ONE,
                        f"sweep fewer models, or {limits.SWEEP_FEWER}")


@dataclass(eq=False)  # of arrays: see engine.Grid
class _SweepChunk:
    """One evaluated chunk of a sweep, with what its rows need beside the frame."""

    frame: Frame
    cols: dict
    gpu_names: list[str]
    precisions: list[str]
    pair: np.ndarray
    steps_ignored: np.ndarray
    block_ignored: np.ndarray
    cfg: bool


def _sweep_chunks(model: str | ModelSpec = DEFAULT_MODEL, *, gpus=None, schemes=None, prompts=None, gens=None,
               steps=None, tpf: float | None = None, blocks=None, batches=None, precisions=None,
               kv_dtype: str = "bf16", cfg: bool = False, store_pass: bool | None = None, logits: str = "all",
               expert_load: str = "expected", tps=None, eps=None, mla_form: str = "auto",
               efficiency: str = "realistic", stack: str | Stack | None = None, hardware: list[str] | None = None,
               revision: str | None = None, hub: bool = False, max_configs: int | None = limits.MAX_SWEEP_CONFIGS,
               max_passes: int | None = limits.MAX_PASSES_ONE_BY_ONE, defaults: str | ModelSpec | None = None,
               progress: Callable[[int, int], None] | None = None, **scheme_knobs) -> tuple[SweepResult, Iterator[_SweepChunk], int | None]:
    """The work of a sweep: the summary (counts, no rows), a generator of evaluated chunks of
    limits.SWEEP_CHUNK configurations, and the passes they cost one by one. Everything is validated
    before the summary is returned; `max_configs=None` and `max_passes=None` lift the limits (the
    passes are then not counted: None; a caller that checked a total of several sweeps already,
    as plan and a sweep of several models do, passes None so that each is counted once).
    `defaults`: the model whose sampler settings fill the knobs not given (lengths, steps, block,
    store pass; several models swept on one grid: the first's); None: this model's. The schemes
    not given are this model's own, the ones it can run. `progress(done, total)`, if given, is
    called as each chunk is evaluated with the configurations evaluated so far and in all (the
    last call: total, total)."""
    spec = resolve_spec(model, revision, hub)
    source = spec if defaults is None else resolve_spec(defaults, revision, hub)  # whose defaults the knobs take
    answer_tokens = scheme_knobs.pop("answer_tokens", None)
    task = scheme_knobs.pop("task", None)
    _validated("answer_tokens", [answer_tokens])
    # the settings shared by every row are validated by the same rules as analyze's
    shared = workload_for(source, task, kv_dtype=kv_dtype, logits=logits, expert_load=expert_load, mla_form=mla_form,
                          tpf=tpf, cfg=cfg or None, **scheme_knobs)
    drafter = resolve_drafter(shared.model_copy(update=dict(scheme="draft-verify")), spec) if shared.drafter else None
    sampler = source.sampler
    gpu_list = HardwareDB.load(hardware).select(gpus, DEFAULT_GPUS)
    profile = load_profile(efficiency)
    st = resolve_stack(stack, profile)
    runs = spec.sampler  # the schemes a model can run are its own, whoever's defaults the knobs take
    scheme_list = _as_list(schemes, list(runs.schemes) if runs and runs.schemes else list(SCHEMES))
    for sc in scheme_list:
        if sc not in REGISTRY:
            raise UsageError(f"unknown scheme '{sc}'; choose from: {', '.join(SCHEMES)}")
    precision_list = _as_list(precisions, [shared.precision])
    for p in precision_list:
        get_precision(p)
    knobs = dict(prompt=_as_list(prompts, [shared.prompt]), gen=_as_list(gens, [shared.gen]),
                 steps=_as_list(steps, [None]), block=_as_list(blocks, [None]),
                 batch=_as_list(batches, [shared.batch]), tp=_as_list(tps, [1]), ep=_as_list(eps, [1]))
    for name, values in knobs.items():
        _validated(name, values)
    if tpf is not None and max(knobs["gen"]) / tpf > 10_000_000:
        raise UsageError("--tpf gives more than 10,000,000 steps")

    # (GPU, precision) pairs that can run; the others are counted as unsupported.
    rate_rows, pairs, unsupported_pairs = [], [], 0
    for gi, g in enumerate(gpu_list):
        for pi, p in enumerate(precision_list):
            r = rates_or_none(g, p, profile)
            if r is None:
                unsupported_pairs += 1
            else:
                pairs.append((gi, pi))
                rate_rows.append(r)

    committed = logits == "committed"
    sizes = {sc: [1 if k in IGNORABLE_KNOBS and not REGISTRY[sc].uses(k, committed) else len(v)
                  for k, v in knobs.items()] for sc in scheme_list}
    per_pair = {sc: int(np.prod(s)) for sc, s in sizes.items()}
    total = len(pairs) * sum(per_pair.values())
    limits.check_configs(total, max_configs)
    unsupported = unsupported_pairs * sum(per_pair.values())
    settings = dict(kv_dtype=shared.kv_dtype, cfg=cfg, store_pass=None, logits=logits, expert_load=expert_load,
                    mla_form=mla_form, tpf=tpf, answer_tokens=answer_tokens, kv_single_tensor=shared.kv_single_tensor,
                    ring_buffer=shared.ring_buffer, quantize_head=shared.quantize_head)
    if not pairs or not scheme_list:
        return SweepResult.model_construct(model=model_summary(spec), efficiency_profile=profile.name,
                                           stack=st.name if st else STACK_NONE, evaluated=0, skipped_impossible=0,
                                           skipped_unsupported=unsupported, settings=settings), iter(()), 0

    # Per scheme, the product of the knobs it depends on (index arrays, no per-row Python loop).
    parts = [(sc, np.indices([len(pairs)] + sizes[sc]).reshape(len(knobs) + 1, -1)) for sc in scheme_list]
    scheme_idx = np.repeat(np.arange(len(scheme_list)), [idx.shape[1] for _, idx in parts])
    scheme_col = np.array(scheme_list, dtype=str)[scheme_idx]
    pair_idx = np.concatenate([idx[0] for _, idx in parts])
    gen_idx = np.concatenate([idx[1 + list(knobs).index("gen")] for _, idx in parts])
    vals = {}
    for k_i, (name, values) in enumerate(knobs.items(), start=1):
        arr = np.array([np.nan if v is None else v for v in values], dtype=float)
        vals[name] = np.concatenate([arr[idx[k_i]] for _, idx in parts])
    ignores = {k: np.array([not REGISTRY[sc].uses(k, committed) for sc in scheme_list])[scheme_idx]
               for k in IGNORABLE_KNOBS}
    gen = vals["gen"]
    # the block, steps and store pass not given take the defaults analyze takes for each scheme and
    # generation length (prepare.sampler_defaults), looked up by index; an ignored block is one
    # block of the whole generation, and steps without a default are S = Lg / tpf
    table = [[(g, sampler_defaults(source, task, scheme=sc, gen=g, tpf=tpf)) for g in knobs["gen"]] for sc in scheme_list]

    def default(key: str, otherwise) -> np.ndarray:
        return np.array([[d.get(key, otherwise(g)) for g, d in row] for row in table])[scheme_idx, gen_idx]

    default_block = default("block", lambda g: g)
    # steps: the sampler's, else the generation over the tokens per forward given or published
    default_steps = np.array([[d.get("steps", g / d.get("tpf", tpf or 1.0)) for g, d in row]
                              for row in table])[scheme_idx, gen_idx]
    default_store = default("store_pass", lambda g: False).astype(bool)
    block = np.where(ignores["block"], gen, np.where(np.isnan(vals["block"]), default_block, vals["block"]))
    steps_arr = np.where(np.isnan(vals["steps"]), default_steps, vals["steps"])
    steps_arr = np.where(np.isin(scheme_col, [s for s in scheme_list if REGISTRY[s].autoregressive]), gen, steps_arr)
    store = default_store if store_pass is None else bool(store_pass)
    settings["store_pass"] = sampler.store_pass if (store_pass is None and sampler) else bool(store_pass)
    scheme_knob_cols = {k: v for k, v in shared.knobs().items() if k in ("active_blocks", "cache_delay",
                                                                         "refresh_every", "window", "drafter")}
    knob_cols = make_knobs(prompt=vals["prompt"], gen=gen, steps=steps_arr, block=block, store_pass=store,
                           logits_committed=committed, **scheme_knob_cols)
    answer = np.minimum(gen, answer_tokens) if answer_tokens else gen
    longer = answer < (answer_tokens or 0)  # an answer longer than the generation
    ok = scheme_ok(scheme_col, knob_cols) & check_parallel(spec, vals["tp"], vals["ep"]) & ~longer
    # what each scheme runs for that answer: up to the block holding end-of-sequence, or all of it
    run = gen.copy()
    for i, sc in enumerate(scheme_list):
        rows_sc = scheme_idx == i
        run[rows_sc] = REGISTRY[sc].tokens_run(answer[rows_sc], gen[rows_sc], block[rows_sc])
    knob_cols = make_knobs(prompt=vals["prompt"], gen=run, steps=steps_arr * run / gen, block=block, store_pass=store,
                           logits_committed=committed, **scheme_knob_cols)
    no_link = (vals["tp"] > 1) & (np.array([gpu_list[gi].link_bytes_per_s for gi, _ in pairs])[pair_idx] <= 0)
    unsupported += int((ok & no_link).sum())
    impossible = int((~ok).sum())
    keep = np.flatnonzero(ok & ~no_link)

    capacity = np.array([gpu_list[gi].memory_bytes for gi, _ in pairs])
    wbytes = np.array([get_precision(precision_list[pi]).weight_bytes for _, pi in pairs])
    gpu_names, pair_precisions = [gpu_list[gi].name for gi, _ in pairs], [precision_list[p] for _, p in pairs]

    def columns(sel: np.ndarray) -> dict:
        batch = vals["batch"][sel]
        return dict(scheme=scheme_col[sel], **{k: getattr(knob_cols, k)[sel] for k in KNOB_COLUMNS},
                    answer=answer[sel], configured_gen=gen[sel], configured_steps=steps_arr[sel],
                    batch=batch * (2 if cfg else 1), ar_batch=batch, wbytes=wbytes[pair_idx[sel]],
                    kvbytes=kv_bytes(kv_dtype), all_experts=expert_load == "all", tp=vals["tp"][sel], ep=vals["ep"][sel],
                    mla_absorbed=mla_form != "expanded", mla_auto=mla_form == "auto",
                    kv_single_tensor=shared.kv_single_tensor, ring_buffer=shared.ring_buffer,
                    quantize_head=shared.quantize_head)

    size = limits.SWEEP_CHUNK
    selections = [keep[start:start + size] for start in range(0, len(keep), size)]
    def grids(sel: np.ndarray):
        cols = columns(sel)
        return cols, make_grids(cols, rate_rows, pair_idx[sel], st)

    # the grids built to count the passes are kept for the evaluation when the sweep is within
    # the limit on configurations (its memory is bounded then); a larger, streamed one builds
    # each chunk's again, so that it holds one chunk at a time
    passes, counted = None, {}
    if max_passes is not None:
        reuse = len(keep) <= limits.MAX_SWEEP_CONFIGS
        passes = 0
        for i, sel in enumerate(selections):
            built = grids(sel)
            passes += limits.count_passes(spec, drafter, built[1])
            if reuse:
                counted[i] = built
        limits.check_passes(passes, max_passes, limits.SWEEP_FEWER)

    def chunks() -> Iterator[_SweepChunk]:
        done = 0
        for i, sel in enumerate(selections):
            pi = pair_idx[sel]
            cols, g = counted.pop(i) if i in counted else grids(sel)
            frame = evaluate_frame(spec, drafter, g, capacity[pi])
            done += len(sel)
            if progress:
                progress(done, len(keep))
            yield _SweepChunk(frame, cols, gpu_names, pair_precisions, pi, ignores["steps"][sel],
                              ignores["block"][sel], cfg)

    meta = SweepResult.model_construct(model=model_summary(spec), efficiency_profile=profile.name,
                                       stack=st.name if st else STACK_NONE, evaluated=len(keep),
                                       skipped_impossible=impossible, skipped_unsupported=unsupported, settings=settings)
    return meta, chunks(), passes


# sweep, iter_sweep and sweep_first_pass take _sweep_chunks' options: show them in their
# signatures (help(), inspect, editors) rather than a bare **options
for _public in (sweep, iter_sweep, iter_sweep_columns, sweep_first_pass, sweep_passes):
    _public.__signature__ = inspect.signature(_sweep_chunks).replace(
        return_annotation=inspect.signature(_public).return_annotation)


def _sweep_arrays(chunk: _SweepChunk) -> dict[str, np.ndarray]:
    """A chunk's rows as one array per SweepRow key."""
    frame, cols, pair, cfg = chunk.frame, chunk.cols, chunk.pair, chunk.cfg
    steps_ignored, block_ignored = chunk.steps_ignored, chunk.block_ignored
    gpu_names, precisions = chunk.gpu_names, chunk.precisions
    mem = frame.memory
    batch, gen, tp = cols["ar_batch"], cols["configured_gen"], cols["tp"]
    derived = generation_numbers(frame, batch * cols["answer"], tp, cfg)  # useful tokens: up to end-of-sequence
    columns = dict(
        gpu=np.array(gpu_names)[pair], scheme=cols["scheme"], prompt=cols["prompt"].astype(int), gen=gen.astype(int),
        steps=np.where(steps_ignored, None, cols["configured_steps"]), block=np.where(block_ignored, None, cols["block"].astype(int)),
        batch=batch.astype(int), tp=tp.astype(int), ep=cols["ep"].astype(int), precision=np.array(precisions)[pair],
        **{k: derived[k] for k in ("nfe", "tokens_per_nfe", "time_s", "tokens_per_s", "tokens_per_s_per_gpu",
                                   "flops_per_token", "bytes_per_token", "arithmetic_intensity")},
        ridge_flops_per_byte=frame.grid.rates.ridge,
        **{k: derived[k] for k in ("achievable_ridge_flops_per_byte", "memory_bound_time_fraction", "verdict",
                                   "time_ratio_to_ar")},
        fits=mem["fits"], memory_total_bytes=mem["total_bytes"], max_batch=derived["max_batch"],
    )
    return columns


def _sweep_rows(chunk: _SweepChunk) -> list[SweepRow]:
    columns = _sweep_arrays(chunk)
    names = list(columns)
    return [SweepRow.model_construct(**dict(zip(names, values)))
            for values in zip(*(columns[k].tolist() for k in names))]


def sweep_rows(result: SweepResult) -> list[dict]:
    """One plain dict per row (knobs a scheme ignores are None)."""
    return [row.plain() for row in result.rows]


def sweep_columns(result: SweepResult) -> dict[str, np.ndarray]:
    """The rows as one array per key (empty when nothing was evaluated)."""
    if not result.rows:
        return {}
    names = list(SweepRow.model_fields)
    return {k: np.array(v) for k, v in zip(names, zip(*(tuple(getattr(r, k) for k in names) for r in result.rows)))}
