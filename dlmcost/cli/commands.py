"""The `dlmcost` command: parse options, call `api`, render with `report`. No arithmetic here."""

# (no `from __future__ import annotations`: typer would evaluate every option's annotation string
# on each run, a compile() each)
import codecs
import copy
import errno
import gc
import math
import os
import sys
import warnings
from typing import Optional

# dlmcost defines no pydantic plugins, and the CLI is a process of its own: spare pydantic its
# scan of every installed distribution's entry points when the first model class is built.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

import typer  # noqa: E402

from .. import __version__, api  # noqa: E402
from ..inputs import examples
from ..analysis import limits
from ..render import report
from ..errors import (  # noqa: E402
    EXIT_INTERNAL,
    EXIT_OUTPUT,
    EXIT_USAGE,
    DlmcostError,
    DlmcostWarning,
    RequirementError,
    UsageError,
    WorkloadError,
)
from ..inputs.hardware import HardwareDB  # noqa: E402
from ..render.output import Output  # noqa: E402
from ..engine.schemes import REGISTRY, SCHEMES  # noqa: E402
from ..safe_text import shown  # noqa: E402

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Capacity planner for diffusion language model inference.",
                  epilog="Exit codes: 0 ok; 2 bad usage; 3-7 bad workload, GPU, hardware file, model or config; "
                         "8 ran fine but a result missed --require (plan: no deployment meets the targets); "
                         "9 missing extra; 10-15 Hugging Face Hub; 70 internal error.")


def _version(value: bool) -> None:
    if value:
        print(f"dlmcost {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                       help="print the version and exit")):
    """Capacity planner for diffusion language model inference."""

FormatOpt = typer.Option("table", "--format", "-f", metavar="FORMAT", help="table | json | csv | markdown | html (analyze, sweep)")
PlotOpt = typer.Option(None, "--plot", metavar="FILE", help="draw the chart to FILE.png / FILE.svg, or - for the terminal (needs dlmcost[plot] for files)")
HardwareOpt = typer.Option(None, "--hardware", metavar="PATH", help="extra GPU YAML file or folder (repeatable; also $DLMCOST_HARDWARE)")
# Options analyze and sweep share (sweep's size knobs take comma lists instead).
CfgOpt = typer.Option(0.0, "--cfg", help="classifier-free guidance scale; > 0 doubles the batch")
StorePassOpt = typer.Option(None, "--store-pass/--no-store-pass", help="block scheme: extra K/V store pass per block")
LogitsOpt = typer.Option("all", "--logits", help="all: logits for every query position; committed: only the block's")
ExpertLoadOpt = typer.Option("expected", "--expert-load", help="MoE: expected distinct experts, or all")
MlaFormOpt = typer.Option("auto", "--mla-form", help="MLA attention: auto | absorbed | expanded")
EfficiencyOpt = typer.Option("realistic", "--efficiency", help="realistic | ideal | path to an efficiency YAML")
StackOpt = typer.Option(None, "--stack", help="software stack: hf-eager | compiled | sglang (default) | none | a stack YAML")
RevisionOpt = typer.Option(None, "--revision", metavar="REV", help="Hub revision (branch, tag or commit)")
HubOpt = typer.Option(False, "--hub", help="fetch from the Hub even if the id is bundled")
TpfOpt = typer.Option(None, "--tpf", help="tokens per forward (S = Lg / tpf) when --steps is not given; "
                      "draft-verify: mean accepted tokens per iteration")
# Knobs of the newer schemes (see `dlmcost schemes`).
ActiveBlocksOpt = typer.Option(None, "--active-blocks", help="multi-block: blocks in flight A [2]")
CacheDelayOpt = typer.Option(None, "--cache-delay", help="multi-block: passes before a finished block's K/V is cached [1]")
RefreshOpt = typer.Option(None, "--refresh-every", help="multi-block, windowed-refresh: full refresh every R passes [0: never]")
WindowOpt = typer.Option(None, "--window", help="windowed-refresh: tokens recomputed either side of the block [16]")
DrafterOpt = typer.Option(None, "--drafter", help="draft-verify: the drafter model (default: self-speculative)")
KvSingleOpt = typer.Option(False, "--kv-single-tensor",
                           help="layers whose values are their keys (K = V) cache one tensor (default: two, as engines do)")
RingBufferOpt = typer.Option(False, "--no-ring-buffer",
                             help="sliding-window layers keep their whole context (default: at most their window)")
QuantizeHeadOpt = typer.Option(False, "--quantize-head",
                               help="quantise the LM head and embedding with the weights (default: bf16, as checkpoints)")
AnswerOpt = typer.Option(None, "--answer-tokens", help="expected tokens until end-of-sequence; throughput counts "
                         "these, and schemes that stop at the end-of-sequence block run only that far [the whole generation]")
SCHEME_CHOICES = " | ".join(SCHEMES)
HubTimeoutOpt = typer.Option(None, "--hub-timeout", help="seconds all Hub requests of the command may take "
                             "together [30; also $DLMCOST_HUB_TIMEOUT]")
VerboseOpt = typer.Option(False, "--verbose", help="show the Hub client's own retries and warnings on stderr")


RequireOpt = typer.Option(None, "--require", "-r", metavar="EXPR",
                          help="fail (exit 8) unless every row meets EXPR, e.g. 'tokens_per_s >= 300', 'fits', "
                               "'time_s < 2' (repeatable; keys: dlmcost sweep -f csv columns)")
GATE_LINES = 20  # failing rows listed on stderr; the rest are counted


def _hub_options(verbose: bool, hub_timeout: Optional[float]) -> None:
    if not (verbose or hub_timeout is not None or "dlmcost.inputs.models.hub" in sys.modules):
        return  # the defaults, which the Hub client module starts with when a Hub id first loads it
    from ..inputs.models import hub

    hub.configure(verbose=verbose, budget_s=hub_timeout)


def _check_finite(result, where: str = "result") -> None:
    """Every number printed is finite: an overflow anywhere is a clear error, never `inf` in a
    table or a JSON encoder's exception (iterative: results are a few levels deep)."""
    stack = [(where, result)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise WorkloadError(f"the {path} came out as {value} (an overflow): inputs at the edge of their ranges?")
        if getattr(value, "dtype", None) is not None and value.dtype.kind == "f" and value.size:
            import numpy as np  # already loaded by api; sweep columns hold NaN for ignored knobs

            if np.isinf(value).any():
                raise WorkloadError(f"the {path} came out as inf (an overflow): inputs at the edge of their ranges?")
        if isinstance(value, dict):
            stack += [(f"{path}.{k}", v) for k, v in value.items()]
        elif isinstance(value, (list, tuple)):
            stack += [(path, v) for v in value]


def _check_format(fmt: str, charts: bool = False) -> str:
    formats = [f for f in report.FORMATS if charts or f not in report.CHART_FORMATS]
    if fmt not in formats:
        raise UsageError(f"unknown format '{fmt}'; choose one of: {', '.join(formats)}")
    return fmt


def _check_plot(plot: Optional[str], fmt: str) -> None:
    """Before any work: a missing extra or a bad path fails first, with nothing else printed."""
    if plot == "":
        raise UsageError("--plot needs a file name (.png, .svg) or - for the terminal")
    if not plot and fmt != "html":
        return
    from ..render import plot as plotting  # matplotlib itself only when a file is drawn

    if plot == "-" and fmt not in ("table", "markdown"):
        raise UsageError("--plot - draws on stdout after the table; with --format json/csv/html write a file")
    if (plot and plot != "-") or fmt == "html":
        plotting.require("--plot" if plot else "--format html")
    if plot and plot != "-":
        plotting.check_path(plot)


def _draw(chart, plot: Optional[str], out: Output) -> None:
    if plot == "-":
        from ..render.termplot import render

        out.write(render(chart))
    elif plot:
        from ..render.plot import save

        save(chart, plot)


def _check_cfg(cfg: float) -> None:
    if not math.isfinite(cfg):
        raise UsageError(f"--cfg must be a finite number, got {cfg}")
    if cfg < 0:
        raise UsageError(f"--cfg must be >= 0 (0 turns classifier-free guidance off), got {cfg:g}")


def _parse_list(text: Optional[str], kind, name: str) -> Optional[list]:
    """'1,8,32' -> [1, 8, 32] with a clear message for junk."""
    if text is None:
        return None
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            value = kind(part)
        except ValueError:
            raise UsageError(f"--{name}: '{part}' is not a valid {kind.__name__}") from None
        if kind is float and not math.isfinite(value):
            raise UsageError(f"--{name}: '{part}' is not a finite number")
        out.append(value)
    if not out:
        raise UsageError(f"--{name} needs at least one value")
    return out


@app.command(epilog="Examples:\n\n\b\n  dlmcost analyze --gpu h100 --gen 256 --tpf 3 --scheme dual-cache\n  dlmcost analyze --gpu h100 -r 'tokens_per_s >= 300' -r fits -f json")
def analyze(
    model: str = typer.Argument("GSAI-ML/LLaDA-8B-Instruct", help="bundled id, local .json/.yaml, or Hub id"),
    gpu: Optional[str] = typer.Option(None, "--gpu", "-g", help="GPU name/alias, comma list, or 'all' (default: H100, H200, B200, B300, MI300X, MI355X, MI455X)"),
    scheme: Optional[str] = typer.Option(None, "--scheme", help=f"{SCHEME_CHOICES} (default: the model's)"),
    prompt: Optional[int] = typer.Option(None, "--prompt", help="prompt tokens Lp [256]"),
    gen: Optional[int] = typer.Option(None, "--gen", help="generated tokens Lg (default: the model's sampler)"),
    steps: Optional[float] = typer.Option(None, "--steps", help="total denoising steps S"),
    tpf: Optional[float] = TpfOpt,
    block: Optional[int] = typer.Option(None, "--block", help="block length b"),
    batch: Optional[int] = typer.Option(None, "--batch", help="sequences per batch B [1]"),
    precision: Optional[str] = typer.Option(None, "--precision", help="bf16 | fp8 | fp4 | w8a16 | w4a16"),
    kv_dtype: Optional[str] = typer.Option(None, "--kv-dtype", help="K/V cache dtype: bf16 | fp8 | int8 | fp4"),
    cfg: float = CfgOpt,
    store_pass: Optional[bool] = StorePassOpt,
    logits: str = LogitsOpt,
    expert_load: str = ExpertLoadOpt,
    tp: Optional[int] = typer.Option(None, "--tp", help="tensor-parallel GPUs [1]"),
    ep: Optional[int] = typer.Option(None, "--ep", help="expert-parallel ways, dividing --tp (MoE) [1]"),
    mla_form: str = MlaFormOpt,
    active_blocks: Optional[float] = ActiveBlocksOpt,
    cache_delay: Optional[float] = CacheDelayOpt,
    refresh_every: Optional[int] = RefreshOpt,
    window: Optional[int] = WindowOpt,
    drafter: Optional[str] = DrafterOpt,
    answer_tokens: Optional[int] = AnswerOpt,
    kv_single_tensor: bool = KvSingleOpt,
    no_ring_buffer: bool = RingBufferOpt,
    quantize_head: bool = QuantizeHeadOpt,
    efficiency: str = EfficiencyOpt,
    stack: Optional[str] = StackOpt,
    ops: bool = typer.Option(False, "--ops", help="also print per-pass and per-op tables"),
    fmt: str = FormatOpt,
    revision: Optional[str] = RevisionOpt,
    hub: bool = HubOpt,
    hardware: Optional[list[str]] = HardwareOpt,
    plot: Optional[str] = PlotOpt,
    hub_timeout: Optional[float] = HubTimeoutOpt,
    verbose: bool = VerboseOpt,
    require: Optional[list[str]] = RequireOpt,
):
    """Cost of one workload on one or more GPUs."""
    _hub_options(verbose, hub_timeout)
    _check_format(fmt, charts=True)
    _check_cfg(cfg)
    _check_plot(plot, fmt)
    requirements = _requirements(require)
    model, efficiency = examples.locate(model), examples.locate(efficiency)
    options = dict(
        efficiency=efficiency, stack=stack, hardware=hardware, revision=revision, hub=hub,
        scheme=scheme, prompt=prompt, gen=gen, steps=steps, tpf=tpf, block=block, batch=batch,
        precision=precision, kv_dtype=kv_dtype, cfg=cfg > 0 or None, store_pass=store_pass,
        logits=logits, expert_load=expert_load, tp=tp, ep=ep, mla_form=mla_form, active_blocks=active_blocks,
        cache_delay=cache_delay, refresh_every=refresh_every, window=window, drafter=drafter,
        answer_tokens=answer_tokens, kv_single_tensor=kv_single_tensor or None,
        ring_buffer=False if no_ring_buffer else None, quantize_head=quantize_head or None,
    )
    result = api.analyze(model, gpu, **options)
    data = result.plain()
    _check_finite(data)
    for warning in result.warnings:
        _stderr(f"warning: {warning}")
    chart = None
    if plot or fmt == "html":
        from ..render import charts

        ar = api.analyze(model, gpu, **{**options, **charts.AR_WORKLOAD})  # for the AR decode step's point
        chart = charts.roofline(data, ar.plain(), show_ops=ops, db=HardwareDB.load(hardware))
    out = Output.stdout()
    report.render_analyze(data, fmt, out, show_ops=ops, charts=[chart] if chart else None)
    _draw(chart, plot, out)
    if requirements:
        from ..analysis import requirements as gates

        _gate(gates.failures(requirements, gates.analyze_rows(data), lambda r: r["gpu"]), requirements)


@app.command(epilog="Examples:\n\n\b\n  dlmcost sweep --gpu h100,b200 --block 8,32 --batch 1,16 --sort -tokens_per_s --limit 10\n  dlmcost sweep -m GSAI-ML/LLaDA-8B-Instruct,meta-llama/Meta-Llama-3-8B --gpu h100 -f csv > rows.csv")
def sweep(
    model: str = typer.Option("GSAI-ML/LLaDA-8B-Instruct", "--model", "-m", metavar="ID[,ID...]", help="bundled id, local file, or Hub id; a comma list sweeps each (e.g. a dLLM and an AR model)"),
    gpu: Optional[str] = typer.Option(None, "--gpu", "-g", metavar="LIST", help="comma list or 'all'"),
    scheme: Optional[str] = typer.Option(None, "--scheme", metavar="LIST", help="comma list (default: every scheme the model can run)"),
    prompt: Optional[str] = typer.Option(None, "--prompt", metavar="LIST", help="comma list of prompt lengths"),
    gen: Optional[str] = typer.Option(None, "--gen", metavar="LIST", help="comma list of generation lengths"),
    steps: Optional[str] = typer.Option(None, "--steps", metavar="LIST", help="comma list of total steps (default: S = Lg / tpf)"),
    tpf: Optional[float] = TpfOpt,
    block: Optional[str] = typer.Option(None, "--block", metavar="LIST", help="comma list of block lengths"),
    batch: Optional[str] = typer.Option(None, "--batch", metavar="LIST", help="comma list of batch sizes"),
    precision: Optional[str] = typer.Option(None, "--precision", metavar="LIST", help="comma list of precisions"),
    kv_dtype: str = typer.Option("bf16", "--kv-dtype", help="K/V cache dtype: bf16 | fp8 | int8 | fp4"),
    cfg: float = CfgOpt,
    store_pass: Optional[bool] = StorePassOpt,
    logits: str = LogitsOpt,
    expert_load: str = ExpertLoadOpt,
    tp: Optional[str] = typer.Option(None, "--tp", metavar="LIST", help="comma list of tensor-parallel sizes"),
    ep: Optional[str] = typer.Option(None, "--ep", metavar="LIST", help="comma list of expert-parallel sizes (each dividing tp)"),
    mla_form: str = MlaFormOpt,
    active_blocks: Optional[float] = ActiveBlocksOpt,
    cache_delay: Optional[float] = CacheDelayOpt,
    refresh_every: Optional[int] = RefreshOpt,
    window: Optional[int] = WindowOpt,
    drafter: Optional[str] = DrafterOpt,
    answer_tokens: Optional[int] = AnswerOpt,
    kv_single_tensor: bool = KvSingleOpt,
    no_ring_buffer: bool = RingBufferOpt,
    quantize_head: bool = QuantizeHeadOpt,
    efficiency: str = EfficiencyOpt,
    stack: Optional[str] = StackOpt,
    sort: Optional[str] = typer.Option(None, "--sort", metavar="KEY", help="column to sort by, e.g. tokens_per_s, time_s (prefix - to reverse)"),
    limit: Optional[int] = typer.Option(None, "--limit", "--top", metavar="N", help="table rows to show (0: all; default: what fits a terminal, all when piped)"),
    require: Optional[list[str]] = RequireOpt,
    allow_large: bool = typer.Option(False, "--allow-large", help=f"stream a grid above {limits.MAX_SWEEP_CONFIGS:,} configurations (csv or jsonl, no --sort)"),
    fmt: str = typer.Option("table", "--format", "-f", metavar="FORMAT", help="table | json | jsonl (one row per line, streamed) | csv (streamed) | markdown | html"),
    revision: Optional[str] = RevisionOpt,
    hub: bool = HubOpt,
    hardware: Optional[list[str]] = HardwareOpt,
    plot: Optional[str] = PlotOpt,
    x: Optional[str] = typer.Option(None, "--x", metavar="KNOB", help="chart: knob on the x axis (default: the first varied of block, batch, gen...)"),
    y: Optional[str] = typer.Option(None, "--y", metavar="KEY", help="chart: metric on the y axis (default: tokens_per_s)"),
    color: Optional[str] = typer.Option(None, "--color", metavar="KNOB", help="chart: knob drawn as one line per value (default: scheme)"),
    facet: Optional[str] = typer.Option(None, "--facet", metavar="KNOB", help="chart: knob drawn as one panel per value (default: gpu)"),
    hub_timeout: Optional[float] = HubTimeoutOpt,
    verbose: bool = VerboseOpt,
):
    """Evaluate every combination of comma-separated knobs (vectorised).

    csv and jsonl are written chunk by chunk, so memory stays bounded however large the grid."""
    _hub_options(verbose, hub_timeout)
    if fmt != "jsonl":
        _check_format(fmt, charts=True)
    _check_cfg(cfg)
    _check_plot(plot, fmt)
    if (x or y or color or facet) and not (plot or fmt == "html"):
        raise UsageError("--x/--y/--color/--facet shape the chart: add --plot FILE or --format html")
    if limit is not None and limit < 0:
        raise UsageError("--limit must be 0 (all rows) or positive")
    from ..analysis import requirements as gates

    requirements = gates.parse_all(require)
    models = [examples.locate(m.strip()) for m in model.split(",") if m.strip()] or [model]
    efficiency = examples.locate(efficiency)
    if len(models) > 1 and (plot or fmt == "html"):
        raise UsageError("charts show one model: give one --model with --plot or --format html")
    streaming = fmt in ("csv", "jsonl") and not sort
    if allow_large and not streaming:
        raise UsageError("--allow-large streams rows: use it with --format csv or jsonl and without --sort")
    options = dict(
        gpus=gpu, schemes=_parse_list(scheme, str, "scheme"), prompts=_parse_list(prompt, int, "prompt"),
        gens=_parse_list(gen, int, "gen"), steps=_parse_list(steps, float, "steps"), tpf=tpf,
        blocks=_parse_list(block, int, "block"), batches=_parse_list(batch, int, "batch"),
        precisions=_parse_list(precision, str, "precision"), kv_dtype=kv_dtype, cfg=cfg > 0, store_pass=store_pass,
        logits=logits, expert_load=expert_load, tps=_parse_list(tp, int, "tp"), eps=_parse_list(ep, int, "ep"),
        mla_form=mla_form, efficiency=efficiency, stack=stack, hardware=hardware, revision=revision, hub=hub,
        active_blocks=active_blocks, cache_delay=cache_delay, refresh_every=refresh_every, window=window,
        drafter=drafter, answer_tokens=answer_tokens, kv_single_tensor=kv_single_tensor or None,
        ring_buffer=False if no_ring_buffer else None, quantize_head=quantize_head or None, max_configs=None if allow_large else limits.MAX_SWEEP_CONFIGS,
    )
    if len(models) > 1:  # the limit is the command's: checked on the total, so each sweep need not count again
        api.check_sweeps_passes(models, **options)
        options["max_passes"] = None
    out = Output.stdout()
    if streaming:
        failed = _stream_sweep(models, options, fmt, out, requirements)
    else:
        failed, documents = [], []
        for m in models:
            meta, chunks = api.iter_sweep(m, **options)
            rows = [row.plain() for chunk in chunks for row in chunk]
            _check_finite(rows, "sweep")
            if sort:
                key = sort.lstrip("-")
                if rows and key not in rows[0]:
                    raise UsageError(f"--sort: unknown column '{key}'; choose from: {', '.join(rows[0])}")
                rows.sort(key=lambda r: (r[key] is None, r[key]), reverse=sort.startswith("-"))
            label = gates.sweep_label if len(models) == 1 else (lambda r, m=m: f"{m}: {gates.sweep_label(r)}")
            failed += gates.failures(requirements, rows, label)
            documents.append((meta, rows))
        if fmt == "json" and len(documents) > 1:
            out.write(report.to_json([dict(**meta.model_dump(exclude={"rows"}), rows=rows)
                                      for meta, rows in documents]) + "\n")
        else:
            for meta, rows in documents:
                _render_sweep(meta, rows, fmt, out, limit, plot, dict(x=x, y=y, color=color, facet=facet))
    _gate(failed, requirements)


def _render_sweep(meta, rows: list[dict], fmt: str, out: Output, limit: Optional[int], plot: Optional[str],
                  axes: dict) -> None:
    if limit is None and fmt == "table" and sys.stdout.isatty():
        limit = max(5, out.height - 12)  # what fits under the header, the notes and the caption
    shown = rows[:limit] if limit else rows
    chart = None
    if plot or fmt == "html":
        from ..render import charts

        chart = charts.sweep(rows, meta.model.id, **axes)
    report.render_sweep(meta.model_dump(exclude={"rows"}), rows, fmt, out, shown, charts=[chart] if chart else None)
    _draw(chart, plot, out)


def _stream_sweep(models: list[str], options: dict, fmt: str, out: Output, requirements) -> list[str]:
    """csv / jsonl one chunk at a time (with a leading `model` column when several models are
    swept); returns the requirement failures."""
    import csv
    import json

    from ..analysis import requirements as gates

    failed, writer = [], None
    for m in models:
        _, chunks = api.iter_sweep(m, **options)
        for chunk in chunks:
            rows = [row.plain() for row in chunk]
            _check_finite(rows, "sweep")
            # names from users' files (a GPU's) reach the terminal too: control characters escaped
            rows = [{k: report.safe(v) if isinstance(v, str) else v for k, v in r.items()} for r in rows]
            if len(models) > 1:
                rows = [dict(model=m, **r) for r in rows]
            failed += gates.failures(requirements, rows, gates.sweep_label)
            if fmt == "jsonl":
                out.write("".join(json.dumps(r, allow_nan=False) + "\n" for r in rows))
            else:
                if writer is None and rows:
                    writer = csv.DictWriter(out.stream, fieldnames=list(rows[0]), lineterminator="\n")
                    writer.writeheader()
                writer.writerows(rows)
    return failed


def _requirements(require: list[str] | None) -> list:
    """--require's expressions, parsed (the parser is imported only when there are some: most
    commands have none, and analyze's start-up counts)."""
    if not require:
        return []
    from ..analysis import requirements as gates

    return gates.parse_all(require)


def _gate(failed: list[str], requirements) -> None:
    """Exit 8 (EXIT_REQUIREMENT) when a row misses a --require; the rows go to stderr."""
    if not failed:
        return
    shown = failed[:GATE_LINES]
    more = [f"... and {len(failed) - len(shown):,} more"] if len(failed) > len(shown) else []
    raise RequirementError(f"{len(failed):,} result row(s) miss a requirement "
                           f"({'; '.join(q.text for q in requirements)}):", shown + more)


@app.command(epilog="Examples:\n\n\b\n  dlmcost schemes -f markdown")
def schemes(fmt: str = FormatOpt):
    """List the decoding schemes: what each runs and the knobs it reads."""
    _check_format(fmt)
    report.render_schemes([dict(name=s.name, summary=s.summary, knobs=", ".join(s.knobs) or "-",
                                stops_at_eos=s.stops_at_eos) for s in REGISTRY.values()], fmt, Output.stdout())


@app.command(epilog="Examples:\n\n\b\n  dlmcost schema sweep > sweep.schema.json")
def schema(which: str = typer.Argument("analyze", help="analyze | sweep")):
    """Print the JSON Schema of `--format json` output (generated from the result types)."""
    from ..results import SCHEMAS

    if which not in SCHEMAS:
        raise UsageError(f"unknown schema '{which}'; choose one of: {', '.join(SCHEMAS)}")
    print(report.to_json(SCHEMAS[which].model_json_schema()))


@app.command(epilog="Examples:\n\n\b\n  dlmcost gpus -f csv")
def gpus(
    fmt: str = FormatOpt,
    hardware: Optional[list[str]] = HardwareOpt,
):
    """List the accelerators with their dense peaks and ridge points."""
    _check_format(fmt)
    report.render_gpus(HardwareDB.load(hardware).gpus.values(), fmt, Output.stdout())


@app.command(epilog="Examples:\n\n\b\n  dlmcost models")
def models(fmt: str = FormatOpt):
    """List the bundled model ids (usable offline)."""
    _check_format(fmt)
    report.render_models(api.list_models(), fmt, Output.stdout())


@app.command(epilog="Examples:\n\n\b\n  dlmcost model examples/tiny-dlm.yaml\n  dlmcost model GSAI-ML/LLaDA-8B-Instruct -f json")
def model(
    model_id: str = typer.Argument(..., metavar="MODEL", help="bundled id, local .json/.yaml, or Hub id"),
    fmt: str = FormatOpt,
    revision: Optional[str] = RevisionOpt,
    hub: bool = HubOpt,
    verify: bool = typer.Option(False, "--verify", help="compare with the checkpoint's safetensors parameter count (Hub)"),
    hub_timeout: Optional[float] = HubTimeoutOpt,
    verbose: bool = VerboseOpt,
):
    """Show the parsed spec of one model: shapes, parameters, K/V bytes per token."""
    _hub_options(verbose, hub_timeout)
    _check_format(fmt)
    from ..inputs.models import resolve_model

    spec = resolve_model(examples.locate(model_id), revision=revision, hub=hub)
    info = api.model_info(spec)
    if verify:
        info["verify"] = api.verify_model(spec, revision=revision)
    report.render_model(info, fmt, Output.stdout())
    if verify and info["verify"].get("warning"):
        _stderr(f"warning: {info['verify']['warning']}")


MESSAGE_LIMIT = 1000  # characters of one error line: user text inside is cut shorter still


@app.command()
def calibrate(
    measurements: str = typer.Argument(..., help="measurements YAML (points: model, gpu, workload, measured)"),
    stack: Optional[str] = typer.Option(None, "--stack", help="stack to start from: name or file (default: the default stack)"),
    fit: str = typer.Option("fixed,gemm", "--fit", help="parameters to fit: host, fixed, gemm, attention, elementwise"),
    out: str = typer.Option(..., "--out", "-o", help="stack YAML to write"),
    name: Optional[str] = typer.Option(None, "--name", help="name of the written stack [calibrated]"),
    only: Optional[str] = typer.Option(None, "--only", help="use only the points whose `stack:` is this name"),
    fmt: str = FormatOpt,
    hardware: Optional[list[str]] = HardwareOpt,
):
    """Fit a stack profile's free parameters to measured times (least squares on log time)."""
    _check_format(fmt)
    from pathlib import Path

    from ..calibration import calibrate as cal
    from ..calibration.measurements import load_points
    from ..inputs.stacks import load_stack

    points, base_dir = load_points(measurements)
    if only is not None:
        points = [p for p in points if p.stack == only]
        if not points:
            raise UsageError(f"--only {only}: no point of {measurements} has stack '{only}'")
    result = cal.calibrate(points, base_dir, load_stack(stack), cal.parse_fit(fit), name or "calibrated", hardware)
    cal.write_stack(result["data"], Path(out))
    from ..render.report_stacks import render_calibration

    render_calibration(result, out, fmt, Output.stdout())


@app.command()
def measure(
    model: str = typer.Argument(..., help="bundled id or local model file (random weights; nothing is downloaded)"),
    gpu: str = typer.Option(..., "--gpu", "-g", help="hardware entry to predict against (a GPU, or your own file for a CPU)"),
    scheme: Optional[str] = typer.Option(None, "--scheme", help="decoding scheme (default: the model's)"),
    prompt: Optional[int] = typer.Option(None, "--prompt", help="prompt tokens"),
    gen: Optional[int] = typer.Option(None, "--gen", help="generated tokens"),
    steps: Optional[float] = typer.Option(None, "--steps", help="total denoising steps"),
    tpf: Optional[float] = TpfOpt,
    block: Optional[int] = typer.Option(None, "--block", help="block length"),
    batch: str = typer.Option("1", "--batch", help="comma list of batch sizes (one measurement each)"),
    stack: Optional[str] = typer.Option(None, "--stack", help="stack to predict with and to calibrate from"),
    backend: str = typer.Option("numpy", "--backend", help="numpy (CPU) | torch (pip install 'dlmcost[measure]')"),
    device: Optional[str] = typer.Option(None, "--device", help="torch device: cuda | cpu (default: cuda if present)"),
    warmup: int = typer.Option(1, "--warmup", help="untimed runs per pass shape"),
    repeats: int = typer.Option(3, "--repeats", help="timed runs per pass shape (median)"),
    layers: Optional[int] = typer.Option(None, "--layers", help="build only N layers and scale to the model's depth"),
    out: Optional[str] = typer.Option(None, "--out", "-o", help="write the measurements (a file `calibrate` reads)"),
    profile_out: Optional[str] = typer.Option(None, "--profile-out", help="write a stack calibrated to these measurements"),
    fmt: str = FormatOpt,
    hardware: Optional[list[str]] = HardwareOpt,
):
    """Time the forward passes of a schedule on this machine and compare with the prediction."""
    _check_format(fmt)
    from pathlib import Path

    import yaml

    from ..calibration import calibrate as cal
    from ..calibration import measure as ms
    from ..calibration.measurements import MeasurementFile
    from ..inputs.models import resolve_model
    from ..render.report_stacks import render_calibration, render_measure
    from ..inputs.stacks import load_stack

    spec = resolve_model(model)
    base = load_stack(stack)
    be = ms.get_backend(backend, device)
    results = []
    for b in _parse_list(batch, int, "batch"):
        wl = dict(scheme=scheme, prompt=prompt, gen=gen, steps=steps, tpf=tpf, block=block, batch=b)
        res = ms.measure_workload(spec, gpu, {k: v for k, v in wl.items() if v is not None}, base, be,
                                  warmup=warmup, repeats=repeats, layers=layers, hardware=hardware)
        results.append(res)
        render_measure(res, fmt, Output.stdout())
    model_ref = str(Path(model).resolve()) if Path(model).is_file() else model
    doc = ms.as_points(results, model_ref, gpu)
    if out:
        MeasurementFile.model_validate(doc)
        Path(out).write_text("# Written by `dlmcost measure`.\n" + yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    if profile_out:
        points = MeasurementFile.model_validate(doc).points
        result = cal.calibrate_what_data_pins(points, Path.cwd(), base, f"{base.name}-measured", hardware)
        cal.write_stack(result["data"], Path(profile_out))
        render_calibration(result, profile_out, fmt, Output.stdout())


@app.command(epilog="Examples:\n\n\b\n  dlmcost plan --rate 5 --p95 10 --gpu h100,b200\n  dlmcost plan --scenario examples/plan-scenario.yaml --plot plan.png")
def plan(
    model: Optional[str] = typer.Argument(None, help="bundled id, local file, or Hub id (default: the scenario's, else LLaDA-8B-Instruct)"),
    scenario: Optional[str] = typer.Option(None, "--scenario", "-s", help="scenario YAML (options below override it)"),
    rate: Optional[float] = typer.Option(None, "--rate", help="requests/s, Poisson arrivals"),
    users: Optional[int] = typer.Option(None, "--users", help="concurrent users (closed loop) instead of --rate"),
    think: Optional[float] = typer.Option(None, "--think", help="closed loop: seconds a user waits between requests [0]"),
    prompt: Optional[str] = typer.Option(None, "--prompt", help="prompt tokens: N, 'p50:N,p90:M', or @FILE [256]"),
    answer: Optional[str] = typer.Option(None, "--answer", help="answer tokens: N, 'p50:N,p90:M', or @FILE (default: the model's)"),
    p50: Optional[float] = typer.Option(None, "--p50", help="target: p50 end-to-end latency, s"),
    p95: Optional[float] = typer.Option(None, "--p95", help="target: p95 end-to-end latency, s"),
    p99: Optional[float] = typer.Option(None, "--p99", help="target: p99 end-to-end latency, s"),
    first_block: Optional[float] = typer.Option(None, "--first-block-p95", help="target: p95 time to first block (AR: first token), s"),
    min_user_tps: Optional[float] = typer.Option(None, "--min-user-tps", help="target: median answer tokens/s per user"),
    max_usd_mtok: Optional[float] = typer.Option(None, "--max-usd-per-mtok", help="target: $ per million output tokens"),
    max_gpus: Optional[int] = typer.Option(None, "--max-gpus", help="target: GPUs in total"),
    gpu: Optional[str] = typer.Option(None, "--gpu", "-g", metavar="LIST", help="comma list or 'all' (default: every GPU with a price)"),
    tp: Optional[str] = typer.Option(None, "--tp", metavar="LIST", help="comma list of tensor-parallel sizes [1,2,4,8]"),
    precision: Optional[str] = typer.Option(None, "--precision", metavar="LIST", help="comma list [bf16,fp8]"),
    scheme: Optional[str] = typer.Option(None, "--scheme", metavar="LIST", help="comma list of schemes (default: the model's)"),
    block: Optional[str] = typer.Option(None, "--block", metavar="LIST", help="comma list of block lengths"),
    tpf: Optional[str] = typer.Option(None, "--tpf", metavar="LIST", help="comma list of tokens per forward"),
    steps: Optional[str] = typer.Option(None, "--steps", metavar="LIST", help="comma list of total steps at the median answer"),
    max_batch: Optional[str] = typer.Option(None, "--max-batch", metavar="LIST", help="comma list of batch limits per replica [256]"),
    price: Optional[list[str]] = typer.Option(None, "--price", metavar="NAME=USD", help="NAME=USD per GPU-hour, e.g. h100=2.49 (repeatable)"),
    power_utilisation: Optional[float] = typer.Option(None, "--power-utilisation", help="fraction of board power drawn [1.0]"),
    requests: Optional[int] = typer.Option(None, "--requests", help="simulated requests per run [2000]"),
    seed: Optional[int] = typer.Option(None, "--seed", help="random seed [0]"),
    top: int = typer.Option(15, "--limit", "--top", metavar="N", help="rows of the table (json/csv list all)"),
    efficiency: str = EfficiencyOpt,
    stack: Optional[str] = StackOpt,
    fmt: str = FormatOpt,
    hardware: Optional[list[str]] = HardwareOpt,
    plot: Optional[str] = PlotOpt,
):
    """Fewest GPUs and replicas meeting latency / cost targets at a given traffic, ranked by $/Mtok.

    Exit 0 when a deployment meets the targets, 8 when none does (nearest miss on stderr)."""
    _check_format(fmt, charts=True)
    _check_plot(plot, fmt)
    if top <= 0:
        raise UsageError("--limit must be positive")
    from .. import plan as planner
    from ..errors import NoDeploymentError

    decoding = None
    if any(v is not None for v in (scheme, block, tpf, steps)):
        decoding = _plan_decodings(scheme, block, tpf, steps)
    overrides = dict(
        traffic=dict(rate=rate, users=users, think_s=think, prompt=prompt, answer=answer),
        targets=dict(p50_latency_s=p50, p95_latency_s=p95, p99_latency_s=p99, p95_first_block_s=first_block,
                     min_tokens_per_s_per_user=min_user_tps, max_usd_per_mtok=max_usd_mtok, max_gpus=max_gpus),
        search=dict(gpus=gpu, tp=_parse_list(tp, int, "tp"), precisions=_parse_list(precision, str, "precision"),
                    decoding=decoding, max_batch=_parse_list(max_batch, int, "max-batch")),
        simulation=dict(requests=requests, seed=seed), power_utilisation=power_utilisation,
    )
    if rate is not None and users is None:
        overrides["traffic"]["users"] = None
    efficiency = examples.locate(efficiency)
    progress = _Progress() if sys.stderr.isatty() else None
    try:
        result = planner.run(examples.locate(scenario), overrides, model=examples.locate(model), prices=price or [], hardware=hardware,
                             efficiency=efficiency, stack=stack, progress=progress)
    finally:
        if progress:
            progress.clear()
    record = planner.to_record(result)
    out = Output.stdout()
    chart = _plan_chart(record) if plot or fmt == "html" else None
    if fmt == "html":
        from ..render.html import plan_page

        out.write(plan_page(record, [chart] if chart else [], top))
    else:
        report.render_plan(record, fmt, out, top=top)
    if chart:
        _draw(chart, plot, out)
    if not result.deployments:
        miss = result.nearest_miss
        if miss is None:
            raise NoDeploymentError("no deployment meets the targets: no candidate could run (unsupported precision, "
                                    "a layout that does not split the model, or weights that do not fit)")
        failed = "; ".join(m.describe() for m in miss.misses)
        raise NoDeploymentError(f"no deployment meets the targets; nearest miss: {miss.gpu} {miss.replicas}x tp{miss.tp} "
                                f"{miss.precision} {miss.decoding} batch<={miss.max_batch}: {failed}")


def _plan_chart(record: dict):
    """$/Mtok against p95 latency: the deployments meeting the targets and the AR baseline
    (None when there is nothing to draw: the command then exits 8 with the nearest miss)."""
    from ..render import charts

    rows = [dict(r, is_ar_baseline=False) for r in record["deployments"]]
    # the AR baseline as the table shows it: its three cheapest deployments
    rows += [dict(r, is_ar_baseline=True, pareto=False) for r in record["ar_baseline"][:3]]
    return charts.plan_front(rows, title=f"plan: {record['model']}, cost against p95 latency") if rows else None


def _plan_decodings(scheme, block, tpf, steps) -> list[dict]:
    """--scheme/--block/--tpf/--steps comma lists -> every combination (AR ignores block and tpf)."""
    schemes = _parse_list(scheme, str, "scheme") or [None]
    blocks = _parse_list(block, int, "block") or [None]
    if tpf is not None and steps is not None:
        raise UsageError("give --tpf or --steps, not both")
    speeds = [("tpf", v) for v in _parse_list(tpf, float, "tpf") or []] or \
        [("steps", v) for v in _parse_list(steps, float, "steps") or []] or [(None, None)]
    out = []
    for sc in schemes:
        if sc is None:
            raise UsageError("--block/--tpf/--steps need --scheme")
        if sc == "ar":
            out.append(dict(scheme="ar"))
            continue
        for b in blocks:
            for kind, v in speeds:
                out.append(dict(scheme=sc, block=b, **({kind: v} if kind else {})))
    return out


class _Progress:
    """'planning 12/80' on a terminal's stderr, from the first second on; erased at the end."""

    def __init__(self):
        import time

        self._clock = time.monotonic
        self._start = self._clock()
        self._shown = False

    def __call__(self, done: int, total: int) -> None:
        if self._clock() - self._start >= 1.0:
            sys.stderr.write(f"\rplanning: {done}/{total} candidate deployments simulated")
            sys.stderr.flush()
            self._shown = True

    def clear(self) -> None:
        if self._shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


plot_app = typer.Typer(no_args_is_help=True, help="Draw a chart in the terminal (the arguments of analyze or sweep).")
app.add_typer(plot_app, name="plot")
FORWARD = dict(allow_extra_args=True, ignore_unknown_options=True, help_option_names=[])


@plot_app.command("roofline", context_settings=FORWARD)
def plot_roofline(ctx: typer.Context):
    """`dlmcost analyze ARGS --plot -`: the table, then the roofline drawn in text."""
    typer.main.get_command(app).main(args=["analyze", *ctx.args, "--plot", "-"], standalone_mode=False)


@plot_app.command("sweep", context_settings=FORWARD)
def plot_sweep(ctx: typer.Context):
    """`dlmcost sweep ARGS --plot -`: the table, then the chart drawn in text."""
    typer.main.get_command(app).main(args=["sweep", *ctx.args, "--plot", "-"], standalone_mode=False)


def _one_line(text: str) -> str:
    """A message as one safe line: control characters (a newline, ESC...) escaped, length bounded."""
    return shown(text, MESSAGE_LIMIT)


def _stderr(line: str) -> None:
    """One line on stderr; nowhere if stderr is closed (never on stdout instead)."""
    stream = sys.stderr
    if stream is None:
        return
    try:
        stream.write(_one_line(line) + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


_GLYPHS = {"\u00b7": ".", "\u2014": "-", "\u2013": "-", "\u00d7": "x", "\u2026": "...", "\u2500": "-",
           "\u2502": "|", "\u2501": "="}


def _ascii_fallback(exc: UnicodeError) -> tuple[str, int]:
    """Codec error handler: the glyphs dlmcost prints, as ASCII; anything else as an escape."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    bad = exc.object[exc.start:exc.end]
    return "".join(_GLYPHS.get(c, f"\\u{ord(c):04x}") for c in bad), exc.end


codecs.register_error("dlmcost-ascii", _ascii_fallback)


def _prepare_streams() -> None:
    """A stdout that cannot encode UTF-8 (LANG=C, PYTHONIOENCODING=ascii) gets ASCII glyphs
    instead of an encoding error; stderr gets escapes."""
    for stream, handler in ((sys.stdout, "dlmcost-ascii"), (sys.stderr, "backslashreplace")):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors=handler)
            except (OSError, ValueError):
                pass


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    if issubclass(category, DlmcostWarning):
        _stderr(f"warning: {message}")


def _click_exit(exc: BaseException) -> int | None:
    """Exit code for click's own exceptions (typer may vendor click, so match by class name)."""
    kind = {c.__name__ for c in type(exc).__mro__}
    if "NoArgsIsHelpError" in kind:  # bare `dlmcost` (or `dlmcost plot`): the help, and success
        try:
            print(exc.format_message())
        except BrokenPipeError:
            pass
        return 0
    if "Exit" in kind:
        return int(getattr(exc, "exit_code", 0) or 0)
    if "Abort" in kind:
        _stderr("error: aborted")
        return 130
    if "ClickException" in kind:
        _stderr(f"error: {exc.format_message()}")
        return EXIT_USAGE
    return None


_OUTPUT_ERRNOS = {getattr(errno, n) for n in ("ENOSPC", "EDQUOT", "EFBIG", "EIO", "EBADF") if hasattr(errno, n)}


def _output_failed(exc: OSError) -> int:
    _stderr(f"error: cannot write the output: {exc.strerror or type(exc).__name__}")
    return EXIT_OUTPUT


def _silence_stdout() -> None:
    """After a failed write or a closed pipe, point stdout at /dev/null so the interpreter's final
    flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _command_tree(args: list[str]):
    """The click command to run. typer builds every command's parameters from its signature up
    front (about a millisecond each); when the first argument names a command, only that one is
    built: same group, same callback, same help and errors for that command."""
    name = args[0] if args else None
    chosen = [c for c in app.registered_commands if name and (c.name or typer.main.get_command_name(c.callback.__name__)) == name]
    if not chosen:  # a plot subcommand, --help, --version, completion, a typo: the whole tree
        return typer.main.get_command(app)
    one = copy.copy(app)
    one.registered_commands, one.registered_groups = chosen, []
    return typer.main.get_command(one)


def main(argv: list[str] | None = None) -> int:
    """Entry point: one line on stderr and a distinct exit code for every failure."""
    if sys.stdout is None:  # started with stdout closed: nowhere to print a result
        _stderr("error: standard output is closed: nowhere to write the result")
        return EXIT_OUTPUT
    _prepare_streams()
    command = _command_tree(sys.argv[1:] if argv is None else argv)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            warnings.simplefilter("always", DlmcostWarning)
            command.main(args=argv, prog_name="dlmcost", standalone_mode=False)
            sys.stdout.flush()  # a full disk shows up here, not at exit
    except DlmcostError as exc:
        _stderr(f"error: {exc.message}")
        for line in getattr(exc, "details", ()):
            _stderr(f"  {line}")
        return exc.exit_code
    except BrokenPipeError:  # the reader went away (`| head`): nothing more to say
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        if exc.errno in _OUTPUT_ERRNOS:  # file reads raise DlmcostErrors: this is the output
            _silence_stdout()
            return _output_failed(exc)
        _stderr(f"internal error: {exc.__class__.__name__}: {exc} (please report)")
        return EXIT_INTERNAL
    except Exception as exc:  # noqa: BLE001
        code = _click_exit(exc)
        if code is not None:
            return code
        # a bug: still one line, never a traceback
        _stderr(f"internal error: {exc.__class__.__name__}: {exc} (please report)")
        return EXIT_INTERNAL
    return 0


def run() -> None:
    try:
        code = main()
    except SystemExit as exc:
        # click answers EPIPE on stdout with exit 1 after wrapping stdout in its PacifyFlushWrapper
        if type(sys.stdout).__name__ != "PacifyFlushWrapper":
            raise
        code = _reader_left(0) if exc.code == 1 else exc.code
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        code = _reader_left(code)
    # The process ends here: the interpreter's final collection would trace every live object
    # (a quarter of a short command's time) only for the exit to free them anyway.
    gc.freeze()
    sys.exit(code)


def _reader_left(code: int) -> int:
    """The reader of a pipe stopped early (`dlmcost sweep | head`): what it read is what it wanted,
    so this is success, as for csv and json; stdout goes to /dev/null so the interpreter's own
    final flush stays quiet."""
    _silence_stdout()
    return code


if __name__ == "__main__":
    run()
from . import serve as _serve  # noqa: E402,F401  (registers `dlmcost serve`, dlmcost/cli/serve.py)
