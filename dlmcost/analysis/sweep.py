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
from ..engine.evaluation import first_pass, later_pass_q
from ..engine.memory import DEFAULT_MEM_FRACTION, budget_terms, check_mem_fraction
from ..errors import UsageError
from ..inputs.files import validation_message
from ..engine.frames import KNOB_COLUMNS, Frame, evaluate_frame, generation_numbers, make_grids
from ..inputs.hardware import DEFAULT_GPUS, GPU, HardwareDB
from .prepare import (DEFAULT_MODEL, rates_or_none, resolve_drafter, resolve_spec, resolve_stack, sampler_defaults,
                      stack_for_parts, workload_for)
from ..inputs.models import ModelSpec
from ..inputs.precision import get_precision, kv_bytes
from ..inputs.profiles import Profile, load_profile
from .records import ignored_knobs_warning, model_summary
from ..results import SweepResult, SweepRow
from ..engine.schemes import REGISTRY, SCHEMES, Knobs, scheme_name
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
    prefill, or the pass that opens the first block; `engine.first_pass`), `prompt_passes`:
    how many of its NFE passes see only the prompt, `first_pass_dispatch_s`: the part of the
    first pass that is a prefill forward's own dispatch (an engine whose graphs cover decode only
    pays it once per prefill forward), and what a prefill token budget's memory share reads
    (`engine.memory.budget_terms`: `resident_bytes`, `free_bytes`, `prefill_bytes_per_token`).
    A serving simulation times the first pass apart from the others, whose mean is
    (time_s - first_pass_s) / (nfe - 1)."""
    _, chunks, _ = _sweep_chunks(model, **options)
    parts = []
    for chunk in chunks:
        cols = _sweep_arrays(chunk)
        frame = chunk.frame
        cols["first_pass_s"], cols["prompt_passes"], cols["first_pass_dispatch_s"] = first_pass(
            frame.models, frame.grid, frame.ev, with_dispatch=True)
        cols.update(budget_terms(frame.models["main"], frame.memory, frame.ev.q_max, later_pass_q(frame.grid),
                                 frame.grid.tp, 2 if chunk.cfg else 1))
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


@dataclass(eq=False)
class _Asked:
    """What a sweep asks for, validated: the model, whose defaults fill the knobs not given, the
    settings every row shares, the GPUs, the stack, and the lists it combines."""

    spec: ModelSpec
    source: ModelSpec  # whose sampler defaults the knobs not given take
    shared: Workload  # the settings every row shares, validated as analyze's
    drafter: ModelSpec | None
    gpus: list[GPU]
    profile: Profile
    stack: Stack | None  # the diffusion rows' (all rows' when given)
    ar_stack: Stack | None  # the autoregressive rows' and every AR baseline's: the stack given, else the AR default
    schemes: list[str]
    precisions: list[str]
    knobs: dict[str, list]  # prompt, gen, steps, tpf, block, batch, tp, ep
    options: dict  # the remaining options, as _sweep_chunks was given them


def _asked(model, gpus, schemes, prompts, gens, steps, tpf, blocks, batches, precisions, tps, eps, efficiency, stack,
           hardware, revision, hub, defaults, scheme_knobs, options) -> _Asked:
    """The sweep's request, every list checked before any work."""
    spec = resolve_spec(model, revision, hub)
    source = spec if defaults is None else resolve_spec(defaults, revision, hub)
    _validated("answer_tokens", [options["answer_tokens"]])
    tpfs = _as_list(tpf, [None])  # tokens per forward: a list, as steps (S = Lg / tpf where steps are not given)
    _validated("tpf", tpfs)
    if steps is not None and tpf is not None:
        raise UsageError("give --steps or --tpf, not both")
    o = options
    check_mem_fraction(o["mem_fraction"])
    shared = workload_for(source, o["task"], kv_dtype=o["kv_dtype"], logits=o["logits"], expert_load=o["expert_load"],
                          mla_form=o["mla_form"], tpf=tpfs[0], cfg=o["cfg"] or None, **scheme_knobs)
    drafter = resolve_drafter(shared.model_copy(update=dict(scheme="draft-verify")), spec) if shared.drafter else None
    gpu_list = HardwareDB.load(hardware).select(gpus, DEFAULT_GPUS)
    profile = load_profile(efficiency)
    runs = spec.sampler  # the schemes a model can run are its own, whoever's defaults the knobs take
    scheme_list = [scheme_name(sc) for sc in _as_list(schemes, list(runs.schemes) if runs and runs.schemes
                                                       else list(SCHEMES))]
    for sc in scheme_list:
        if sc not in REGISTRY:
            raise UsageError(f"unknown scheme '{sc}'; choose from: {', '.join(SCHEMES)}")
    # without --stack each row runs on its decoding's engine path (stacks.default_stack)
    diffusion = next((sc for sc in scheme_list if not REGISTRY[sc].autoregressive), scheme_list[0])
    stack = stack_for_parts(stack, gpu_list)
    st = resolve_stack(stack, profile, scheme=diffusion, eager=o["eager"])
    ar_st = st if stack is not None else resolve_stack(None, profile, eager=o["eager"])
    precision_list = _as_list(precisions, [shared.precision])
    for p in precision_list:
        get_precision(p)
    knobs = dict(prompt=_as_list(prompts, [shared.prompt]), gen=_as_list(gens, [shared.gen]),
                 steps=_as_list(steps, [None]), tpf=tpfs, block=_as_list(blocks, [None]),
                 batch=_as_list(batches, [shared.batch]), tp=_as_list(tps, [1]), ep=_as_list(eps, [1]))
    for name, values in knobs.items():
        _validated(name, values)
    given_tpfs = [t for t in tpfs if t is not None]  # (None in the list: the decoding's own)
    if given_tpfs and max(knobs["gen"]) / min(given_tpfs) > 10_000_000:
        raise UsageError("--tpf gives more than 10,000,000 steps")
    given = [k for k, v in dict(steps=steps, tpf=tpf, block=blocks, store_pass=options["store_pass"],
                                **scheme_knobs).items() if v is not None and k != "drafter"]
    return _Asked(spec, source, shared, drafter, gpu_list, profile, st, ar_st, scheme_list, precision_list, knobs,
                  dict(options, tpf=tpf, given=given))


def _pairs(a: _Asked) -> tuple[list, list[tuple[int, int]], int]:
    """The rates of each (GPU, precision) pair that can run, the pairs, and how many cannot."""
    rate_rows, pairs, unsupported = [], [], 0
    for gi, g in enumerate(a.gpus):
        for pi, p in enumerate(a.precisions):
            r = rates_or_none(g, p, a.profile)
            if r is None:
                unsupported += 1
            else:
                pairs.append((gi, pi))
                rate_rows.append(r)
    return rate_rows, pairs, unsupported


def _settings(a: _Asked) -> dict:
    """The settings every row shares, as the summary reports them (store_pass: None until the
    sweep has rows)."""
    o, s = a.options, a.shared
    return dict(kv_dtype=s.kv_dtype, mem_fraction=o["mem_fraction"], cfg=o["cfg"], store_pass=None, logits=o["logits"], expert_load=o["expert_load"],
                mla_form=o["mla_form"], tpf=o["tpf"], answer_tokens=o["answer_tokens"],
                kv_single_tensor=s.kv_single_tensor, ring_buffer=s.ring_buffer, quantize_head=s.quantize_head)


@dataclass(eq=False)  # of arrays
class _Combinations:
    """Every combination a sweep asks for, as one array per knob (no per-row Python loop): per
    scheme, the product of the knobs it reads (one value of a knob it ignores) over the pairs."""

    scheme_idx: np.ndarray  # index into the scheme list
    scheme: np.ndarray
    pair: np.ndarray  # index into the (GPU, precision) pairs
    gen_idx: np.ndarray  # index into the generation lengths
    values: dict[str, np.ndarray]  # each knob's value (nan: not given)
    ignores: dict[str, np.ndarray]  # per IGNORABLE_KNOBS knob: the row's scheme ignores it


def _combinations(a: _Asked, n_pairs: int, sizes: dict[str, list[int]]) -> _Combinations:
    parts = [np.indices([n_pairs] + sizes[sc]).reshape(len(a.knobs) + 1, -1) for sc in a.schemes]
    scheme_idx = np.repeat(np.arange(len(a.schemes)), [idx.shape[1] for idx in parts])
    values = {}
    for k_i, (name, given) in enumerate(a.knobs.items(), start=1):
        arr = np.array([np.nan if v is None else v for v in given], dtype=float)
        values[name] = np.concatenate([arr[idx[k_i]] for idx in parts])
    committed = a.options["logits"] == "committed"
    ignores = {k: np.array([not REGISTRY[sc].uses(k, committed) for sc in a.schemes])[scheme_idx]
               for k in IGNORABLE_KNOBS}
    return _Combinations(scheme_idx, np.array(a.schemes, dtype=str)[scheme_idx],
                         np.concatenate([idx[0] for idx in parts]),
                         np.concatenate([idx[1 + list(a.knobs).index("gen")] for idx in parts]), values, ignores)


@dataclass(eq=False)  # of arrays
class _Knobbed:
    """The combinations' knobs with the defaults filled in, what each runs for its answer, and
    which can run."""

    steps: np.ndarray  # as configured (before the answer cuts the run short)
    answer: np.ndarray
    knobs: Knobs  # engine knob columns, for the tokens each runs
    ok: np.ndarray  # a possible combination
    store_pass: bool | None  # the store pass of the summary's settings
    warnings: list[str]  # what the grid probably did not mean (_grid_warnings)


def _filled(a: _Asked, c: _Combinations) -> tuple[np.ndarray, np.ndarray, np.ndarray | bool]:
    """(block, steps, store pass) of each combination: those not given take the defaults analyze
    takes for its scheme and generation length (prepare.sampler_defaults), looked up by index; an
    ignored block is one block of the whole generation, and steps without a default are
    S = Lg / tpf (an autoregressive scheme's: one per token)."""
    gen, v = c.values["gen"], c.values
    first_tpf = a.knobs["tpf"][0]
    table = [[(g, sampler_defaults(a.source, a.options["task"], scheme=sc, gen=g, tpf=first_tpf))
              for g in a.knobs["gen"]] for sc in a.schemes]

    def default(key: str, otherwise) -> np.ndarray:
        return np.array([[d.get(key, otherwise(g)) for g, d in row] for row in table])[c.scheme_idx, c.gen_idx]

    block = np.where(c.ignores["block"], gen, np.where(np.isnan(v["block"]), default("block", lambda g: g), v["block"]))
    # steps: the sampler's, else the generation over the row's tokens per forward (given, else the
    # model's published one for the scheme, else 1)
    sampler_steps = default("steps", lambda g: np.nan)
    published = np.array([[d.get("tpf", 1.0) for g, d in row] for row in table])[c.scheme_idx, c.gen_idx]
    tpf = np.where(np.isnan(v["tpf"]), published, v["tpf"])
    steps = np.where(np.isnan(sampler_steps) | ~np.isnan(v["tpf"]), gen / tpf, sampler_steps)
    steps = np.where(np.isnan(v["steps"]), steps, v["steps"])
    steps = np.where(np.isin(c.scheme, [s for s in a.schemes if REGISTRY[s].autoregressive]), gen, steps)
    store_pass = a.options["store_pass"]
    store = default("store_pass", lambda g: False).astype(bool) if store_pass is None else bool(store_pass)
    return block, steps, store


def _knobbed(a: _Asked, c: _Combinations) -> _Knobbed:
    """The combinations' knobs, which of them can run, and the tokens each runs for its answer."""
    gen, v = c.values["gen"], c.values
    block, steps, store = _filled(a, c)
    committed = a.options["logits"] == "committed"
    scheme_knobs = {name: value for name, value in a.shared.knobs().items()
                    if name in ("active_blocks", "cache_delay", "refresh_every", "window", "drafter")}
    knobs = make_knobs(prompt=v["prompt"], gen=gen, steps=steps, block=block, store_pass=store,
                       logits_committed=committed, **scheme_knobs)
    answer_tokens = a.options["answer_tokens"]
    answer = np.minimum(gen, answer_tokens) if answer_tokens else gen
    longer = answer < (answer_tokens or 0)  # an answer longer than the generation
    ok = scheme_ok(c.scheme, knobs) & check_parallel(a.spec, v["tp"], v["ep"]) & ~longer
    run = gen.copy()  # what each scheme runs for that answer: up to the block holding end-of-sequence, or all of it
    for i, sc in enumerate(a.schemes):
        rows_sc = c.scheme_idx == i
        run[rows_sc] = REGISTRY[sc].tokens_run(answer[rows_sc], gen[rows_sc], block[rows_sc])
    knobs = make_knobs(prompt=v["prompt"], gen=run, steps=steps * run / gen, block=block, store_pass=store,
                       logits_committed=committed, **scheme_knobs)
    store_pass, sampler = a.options["store_pass"], a.source.sampler
    warnings = _grid_warnings(a.schemes, a.options["given"], committed, (steps > gen * (1 + 1e-9)) & ~c.ignores["steps"])
    return _Knobbed(steps, answer, knobs, ok, sampler.store_pass if (store_pass is None and sampler) else bool(store_pass),
                    warnings)


def _grid_warnings(schemes: list[str], given: list[str], committed: bool, too_many_steps: np.ndarray) -> list[str]:
    """What a sweep's grid probably did not mean: knobs given that no scheme swept reads, and
    configurations with more steps than generated tokens (before the impossible ones are skipped)."""
    out = []
    unread = [k for k in given if all(REGISTRY[sc].ignored([k], committed) for sc in schemes)]
    if unread:
        out.append(ignored_knobs_warning(schemes[0], unread, committed) if len(schemes) == 1 else
                   f"{', '.join('--' + k.replace('_', '-') for k in unread)} {'does' if len(unread) == 1 else 'do'} "
                   f"nothing for the schemes swept ({', '.join(schemes)}; `dlmcost schemes`)")
    if too_many_steps.any():
        out.append(f"{int(too_many_steps.sum()):,} configuration(s) have more steps than generated tokens: some "
                   f"steps commit no token (tokens per forward below 1)")
    return out


@dataclass(eq=False)  # of arrays
class _Runnable:
    """The combinations a sweep evaluates (`keep`, in chunks of limits.SWEEP_CHUNK) and the counts
    of those it skips."""

    rates: list  # per (GPU, precision) pair that can run
    pairs: list[tuple[int, int]]  # (GPU index, precision index)
    combinations: _Combinations | None  # None: no pair or no scheme, nothing to evaluate
    knobbed: _Knobbed | None
    keep: np.ndarray
    impossible: int
    unsupported: int
    split: np.ndarray | None = None  # True where a kept row starts a run of the other kind of decoding

    @property
    def selections(self) -> list[np.ndarray]:
        """Chunks of the kept rows, in order; a chunk holds one kind of decoding (autoregressive
        or diffusion) where the two run on different stacks."""
        runs = np.split(self.keep, np.flatnonzero(self.split)) if self.split is not None else [self.keep]
        return [run[start:start + limits.SWEEP_CHUNK] for run in runs for start in range(0, len(run), limits.SWEEP_CHUNK)
                if len(run)]


def _runnable(a: _Asked, max_configs: int | None) -> _Runnable:
    """Every combination, within the limit on configurations; those that cannot run counted:
    impossible (a block not dividing the generation...), or unsupported (a GPU without the
    precision, tensor parallelism on a GPU without a link)."""
    rates, pairs, unsupported_pairs = _pairs(a)
    committed = a.options["logits"] == "committed"
    sizes = {sc: [1 if REGISTRY[sc].ignored([k], committed) else len(v) for k, v in a.knobs.items()]
             for sc in a.schemes}
    per_pair = sum(int(np.prod(s)) for s in sizes.values())
    limits.check_configs(len(pairs) * per_pair, max_configs)
    unsupported = unsupported_pairs * per_pair
    if not pairs or not a.schemes:
        return _Runnable(rates, pairs, None, None, np.zeros(0, np.int64), 0, unsupported)
    c = _combinations(a, len(pairs), sizes)
    k = _knobbed(a, c)
    no_link = (c.values["tp"] > 1) & (np.array([a.gpus[gi].link_bytes_per_s for gi, _ in pairs])[c.pair] <= 0)
    keep = np.flatnonzero(k.ok & ~no_link)
    split = None
    if a.stack is not a.ar_stack:  # the kinds of decoding run on different stacks: chunk them apart
        ar = np.isin(c.scheme[keep], [sc for sc in a.schemes if REGISTRY[sc].autoregressive])
        split = np.r_[False, ar[1:] != ar[:-1]]
    return _Runnable(rates, pairs, c, k, keep, int((~k.ok).sum()), unsupported + int((k.ok & no_link).sum()), split)


def _summary(a: _Asked, r: _Runnable) -> SweepResult:
    """The sweep's summary: counts and settings, no rows."""
    settings = _settings(a)
    if r.knobbed is not None:
        settings["store_pass"] = r.knobbed.store_pass
    return SweepResult.model_construct(model=model_summary(a.spec), efficiency_profile=a.profile.name,
                                       stack=a.stack.name if a.stack else STACK_NONE,
                                       ar_stack=a.ar_stack.name if a.ar_stack else STACK_NONE,
                                       stack_default=a.options.get("stack_given") is False and a.stack is not None,
                                       eager=a.options["eager"],
                                       evaluated=len(r.keep),
                                       skipped_impossible=r.impossible, skipped_unsupported=r.unsupported,
                                       warnings=r.knobbed.warnings if r.knobbed is not None else [],
                                       settings=settings)


def _grids(a: _Asked, r: _Runnable, sel: np.ndarray) -> tuple[dict, object]:
    """The engine's columns of the selected combinations, and their grids."""
    c, k, o = r.combinations, r.knobbed, a.options
    wbytes = np.array([get_precision(a.precisions[pi]).weight_bytes for _, pi in r.pairs])
    batch = c.values["batch"][sel]
    cols = dict(scheme=c.scheme[sel], **{name: getattr(k.knobs, name)[sel] for name in KNOB_COLUMNS},
                answer=k.answer[sel], configured_gen=c.values["gen"][sel], configured_steps=k.steps[sel],
                batch=batch * (2 if o["cfg"] else 1), ar_batch=batch, wbytes=wbytes[c.pair[sel]],
                kvbytes=kv_bytes(o["kv_dtype"]), all_experts=o["expert_load"] == "all", tp=c.values["tp"][sel],
                ep=c.values["ep"][sel], mla_absorbed=o["mla_form"] != "expanded", mla_auto=o["mla_form"] == "auto",
                kv_single_tensor=a.shared.kv_single_tensor, ring_buffer=a.shared.ring_buffer,
                quantize_head=a.shared.quantize_head)
    autoregressive = len(sel) and REGISTRY[str(c.scheme[sel[0]])].autoregressive  # a chunk holds one kind
    return cols, make_grids(cols, r.rates, c.pair[sel], a.ar_stack if autoregressive else a.stack, a.ar_stack)


def _counted_passes(a: _Asked, r: _Runnable, max_passes: int | None) -> tuple[int | None, dict]:
    """The passes the chunks cost one by one (None: not counted), checked against the limit, and
    the grids built to count them, kept for the evaluation when the sweep is within the limit on
    configurations (its memory is bounded then); a larger, streamed one builds each chunk's again,
    so that it holds one chunk at a time."""
    if max_passes is None:
        return None, {}
    reuse, passes, counted = len(r.keep) <= limits.MAX_SWEEP_CONFIGS, 0, {}
    for i, sel in enumerate(r.selections):
        built = _grids(a, r, sel)
        passes += limits.count_passes(a.spec, a.drafter, built[1])
        if reuse:
            counted[i] = built
    limits.check_passes(passes, max_passes, limits.SWEEP_FEWER)
    return passes, counted


def _chunks(a: _Asked, r: _Runnable, counted: dict, progress: Callable[[int, int], None] | None
            ) -> Iterator[_SweepChunk]:
    """Each chunk evaluated in one vectorised engine call, as it is asked for."""
    capacity = np.array([a.gpus[gi].memory_bytes for gi, _ in r.pairs])
    names, precisions = [a.gpus[gi].name for gi, _ in r.pairs], [a.precisions[p] for _, p in r.pairs]
    ignores, done = r.combinations.ignores, 0
    for i, sel in enumerate(r.selections):
        pi = r.combinations.pair[sel]
        cols, g = counted.pop(i) if i in counted else _grids(a, r, sel)
        frame = evaluate_frame(a.spec, a.drafter, g, capacity[pi], a.options["mem_fraction"])
        done += len(sel)
        if progress:
            progress(done, len(r.keep))
        yield _SweepChunk(frame, cols, names, precisions, pi, ignores["steps"][sel], ignores["block"][sel],
                          a.options["cfg"])


def _sweep_chunks(model: str | ModelSpec = DEFAULT_MODEL, *, gpus=None, schemes=None, prompts=None, gens=None,
                  steps=None, tpf: float | list[float] | None = None, blocks=None, batches=None, precisions=None,
                  kv_dtype: str = "bf16", cfg: bool = False, store_pass: bool | None = None, logits: str = "all",
                  expert_load: str = "expected", tps=None, eps=None, mla_form: str = "auto",
                  efficiency: str = "realistic", stack: str | Stack | None = None, eager: bool = False,
                  hardware: list[str] | None = None, revision: str | None = None, hub: bool = False, max_configs: int | None = limits.MAX_SWEEP_CONFIGS,
                  max_passes: int | None = limits.MAX_PASSES_ONE_BY_ONE, defaults: str | ModelSpec | None = None,
                  progress: Callable[[int, int], None] | None = None, mem_fraction: float = DEFAULT_MEM_FRACTION,
                  **scheme_knobs) -> tuple[SweepResult, Iterator[_SweepChunk], int | None]:
    """The work of a sweep: the summary (counts, no rows), a generator of evaluated chunks of
    limits.SWEEP_CHUNK configurations, and the passes they cost one by one. Everything is validated
    before the summary is returned; `max_configs=None` and `max_passes=None` lift the limits (the
    passes are then not counted: None; a caller that checked a total of several sweeps already,
    as plan and a sweep of several models do, passes None so that each is counted once).
    `defaults`: the model whose sampler settings fill the knobs not given (lengths, steps, block,
    store pass; several models swept on one grid: the first's); None: this model's. The schemes
    not given are this model's own, the ones it can run. `progress(done, total)`, if given, is
    called as each chunk is evaluated with the configurations evaluated so far and in all (the
    last call: total, total). `mem_fraction`: the share of each GPU's memory the weights, K/V cache
    and activations may use (a serving engine's --gpu-memory-utilization).

    The ladder: what is asked (_asked) -> the combinations that can run (_runnable) -> their
    passes counted (_counted_passes) -> evaluated chunk by chunk (_chunks)."""
    options = dict(kv_dtype=kv_dtype, cfg=cfg, store_pass=store_pass, logits=logits, expert_load=expert_load,
                   mla_form=mla_form, answer_tokens=scheme_knobs.pop("answer_tokens", None),
                   task=scheme_knobs.pop("task", None), stack_given=stack is not None, eager=eager,
                   mem_fraction=mem_fraction)
    a = _asked(model, gpus, schemes, prompts, gens, steps, tpf, blocks, batches, precisions, tps, eps, efficiency,
               stack, hardware, revision, hub, defaults, scheme_knobs, options)
    r = _runnable(a, max_configs)
    if r.combinations is None:
        return _summary(a, r), iter(()), 0
    passes, counted = _counted_passes(a, r, max_passes)
    return _summary(a, r), _chunks(a, r, counted, progress), passes


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
        **{k: derived[k] for k in ("achievable_ridge_flops_per_byte", "dominant_pass_arithmetic_intensity",
                                   "memory_bound_time_fraction", "verdict",
                                   "speedup_vs_ar", "time_ratio_to_ar")},
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
