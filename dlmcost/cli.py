"""The `dlmcost` command: parse options, call `api`, render with `report`. No arithmetic here."""

from __future__ import annotations

import math
import os
import sys
from typing import Optional

# dlmcost defines no pydantic plugins, and the CLI is a process of its own: spare pydantic its
# scan of every installed distribution's entry points when the first model class is built.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

import typer  # noqa: E402
from rich.console import Console  # noqa: E402

from . import __version__, api, examples, gates, report  # noqa: E402
from .errors import EXIT_INTERNAL, EXIT_USAGE, DlmcostError, RequirementError, UsageError  # noqa: E402
from .hardware import HardwareDB  # noqa: E402
from .schemes import REGISTRY, SCHEMES  # noqa: E402

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
SCHEME_CHOICES = " | ".join(SCHEMES)
RequireOpt = typer.Option(None, "--require", "-r", metavar="EXPR",
                          help="fail (exit 8) unless every row meets EXPR, e.g. 'tokens_per_s >= 300', 'fits', "
                               "'time_s < 2' (repeatable; keys: dlmcost sweep -f csv columns)")
GATE_LINES = 20  # failing rows listed on stderr; the rest are counted


PIPE_WIDTH = 100  # tables written to a pipe or file fit this many columns unless $COLUMNS says otherwise


def _console() -> Console:
    """Width: $COLUMNS if set (also when piped), else the terminal's, else PIPE_WIDTH. No colour
    and no bold/dim at all under NO_COLOR (https://no-color.org) or TERM=dumb; no highlighting
    of digits inside text."""
    width = None
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) >= 20:
        width = int(columns)
    elif not sys.stdout.isatty():
        width = PIPE_WIDTH
    plain = "NO_COLOR" in os.environ and os.environ["NO_COLOR"] != "" or os.environ.get("TERM") == "dumb"
    return Console(soft_wrap=False, width=width, highlight=False, color_system=None if plain else "auto",
                   no_color=plain)


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
    from . import plot as plotting  # matplotlib itself only when a file is drawn

    if plot == "-" and fmt not in ("table", "markdown"):
        raise UsageError("--plot - draws on stdout after the table; with --format json/csv/html write a file")
    if (plot and plot != "-") or fmt == "html":
        plotting.require("--plot" if plot else "--format html")
    if plot and plot != "-":
        plotting.check_path(plot)


def _draw(chart, plot: Optional[str], console: Console) -> None:
    if plot == "-":
        from .termplot import render

        console.file.write(render(chart))
    elif plot:
        from .plot import save

        save(chart, plot)


def _check_cfg(cfg: float) -> None:
    if not math.isfinite(cfg) or cfg < 0:
        raise UsageError("--cfg must be a non-negative number")


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
    gpu: Optional[str] = typer.Option(None, "--gpu", "-g", help="GPU name/alias, comma list, or 'all' (default: h100,h200,b200,b300,mi300x,mi355x,mi455x)"),
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
    efficiency: str = EfficiencyOpt,
    ops: bool = typer.Option(False, "--ops", help="also print per-pass and per-op tables"),
    fmt: str = FormatOpt,
    revision: Optional[str] = RevisionOpt,
    hub: bool = HubOpt,
    hardware: Optional[list[str]] = HardwareOpt,
    plot: Optional[str] = PlotOpt,
    require: Optional[list[str]] = RequireOpt,
):
    """Cost of one workload on one or more GPUs."""
    _check_format(fmt, charts=True)
    _check_cfg(cfg)
    _check_plot(plot, fmt)
    requirements = gates.parse_all(require)
    model, efficiency = examples.locate(model), examples.locate(efficiency)
    options = dict(
        efficiency=efficiency, hardware=hardware, revision=revision, hub=hub,
        scheme=scheme, prompt=prompt, gen=gen, steps=steps, tpf=tpf, block=block, batch=batch,
        precision=precision, kv_dtype=kv_dtype, cfg=cfg > 0 or None, store_pass=store_pass,
        logits=logits, expert_load=expert_load, tp=tp, ep=ep, mla_form=mla_form, active_blocks=active_blocks,
        cache_delay=cache_delay, refresh_every=refresh_every, window=window, drafter=drafter,
    )
    result = api.analyze(model, gpu, **options)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    data = result.model_dump()
    chart = None
    if plot or fmt == "html":
        from . import charts

        ar = api.analyze(model, gpu, **{**options, **charts.AR_WORKLOAD})  # for the AR decode step's point
        chart = charts.roofline(data, ar.model_dump(), show_ops=ops, db=HardwareDB.load(hardware))
    console = _console()
    report.render_analyze(data, fmt, console, show_ops=ops, charts=[chart] if chart else None)
    _draw(chart, plot, console)
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
    efficiency: str = EfficiencyOpt,
    sort: Optional[str] = typer.Option(None, "--sort", metavar="KEY", help="column to sort by, e.g. tokens_per_s, time_s (prefix - to reverse)"),
    limit: Optional[int] = typer.Option(None, "--limit", "--top", metavar="N", help="table rows to show (0: all; default: what fits a terminal, all when piped)"),
    require: Optional[list[str]] = RequireOpt,
    allow_large: bool = typer.Option(False, "--allow-large", help=f"stream a grid above {api.MAX_SWEEP_CONFIGS:,} configurations (csv or jsonl, no --sort)"),
    fmt: str = typer.Option("table", "--format", "-f", metavar="FORMAT", help="table | json | jsonl (one row per line, streamed) | csv (streamed) | markdown | html"),
    revision: Optional[str] = RevisionOpt,
    hub: bool = HubOpt,
    hardware: Optional[list[str]] = HardwareOpt,
    plot: Optional[str] = PlotOpt,
    x: Optional[str] = typer.Option(None, "--x", metavar="KNOB", help="chart: knob on the x axis (default: the first varied of block, batch, gen...)"),
    y: Optional[str] = typer.Option(None, "--y", metavar="KEY", help="chart: metric on the y axis (default: tokens_per_s)"),
    color: Optional[str] = typer.Option(None, "--color", metavar="KNOB", help="chart: knob drawn as one line per value (default: scheme)"),
    facet: Optional[str] = typer.Option(None, "--facet", metavar="KNOB", help="chart: knob drawn as one panel per value (default: gpu)"),
):
    """Evaluate every combination of comma-separated knobs (vectorised).

    csv and jsonl are written chunk by chunk, so memory stays bounded however large the grid."""
    if fmt != "jsonl":
        _check_format(fmt, charts=True)
    _check_cfg(cfg)
    _check_plot(plot, fmt)
    if (x or y or color or facet) and not (plot or fmt == "html"):
        raise UsageError("--x/--y/--color/--facet shape the chart: add --plot FILE or --format html")
    if limit is not None and limit < 0:
        raise UsageError("--limit must be 0 (all rows) or positive")
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
        mla_form=mla_form, efficiency=efficiency, hardware=hardware, revision=revision, hub=hub,
        active_blocks=active_blocks, cache_delay=cache_delay, refresh_every=refresh_every, window=window,
        drafter=drafter, max_configs=None if allow_large else api.MAX_SWEEP_CONFIGS,
    )
    console = _console()
    if streaming:
        failed = _stream_sweep(models, options, fmt, console, requirements)
    else:
        failed, documents = [], []
        for m in models:
            meta, chunks = api.iter_sweep(m, **options)
            rows = [row.model_dump() for chunk in chunks for row in chunk]
            if sort:
                key = sort.lstrip("-")
                if rows and key not in rows[0]:
                    raise UsageError(f"--sort: unknown column '{key}'; choose from: {', '.join(rows[0])}")
                rows.sort(key=lambda r: (r[key] is None, r[key]), reverse=sort.startswith("-"))
            label = gates.sweep_label if len(models) == 1 else (lambda r, m=m: f"{m}: {gates.sweep_label(r)}")
            failed += gates.failures(requirements, rows, label)
            documents.append((meta, rows))
        if fmt == "json" and len(documents) > 1:
            console.file.write(report.to_json([dict(**meta.model_dump(exclude={"rows"}), rows=rows)
                                               for meta, rows in documents]) + "\n")
        else:
            for meta, rows in documents:
                _render_sweep(meta, rows, fmt, console, limit, plot, dict(x=x, y=y, color=color, facet=facet))
    _gate(failed, requirements)


def _render_sweep(meta, rows: list[dict], fmt: str, console: Console, limit: Optional[int], plot: Optional[str],
                  axes: dict) -> None:
    if limit is None and fmt == "table" and sys.stdout.isatty():
        limit = max(5, console.height - 12)  # what fits under the header, the notes and the caption
    shown = rows[:limit] if limit else rows
    chart = None
    if plot or fmt == "html":
        from . import charts

        chart = charts.sweep(rows, meta.model.id, **axes)
    report.render_sweep(meta.model_dump(exclude={"rows"}), rows, fmt, console, shown, charts=[chart] if chart else None)
    _draw(chart, plot, console)


def _stream_sweep(models: list[str], options: dict, fmt: str, console: Console, requirements) -> list[str]:
    """csv / jsonl one chunk at a time (with a leading `model` column when several models are
    swept); returns the requirement failures."""
    import csv
    import json

    failed, writer = [], None
    for m in models:
        _, chunks = api.iter_sweep(m, **options)
        for chunk in chunks:
            rows = [row.model_dump() for row in chunk]
            if len(models) > 1:
                rows = [dict(model=m, **r) for r in rows]
            failed += gates.failures(requirements, rows, gates.sweep_label)
            if fmt == "jsonl":
                console.file.write("".join(json.dumps(r, allow_nan=False) + "\n" for r in rows))
            else:
                if writer is None and rows:
                    writer = csv.DictWriter(console.file, fieldnames=list(rows[0]), lineterminator="\n")
                    writer.writeheader()
                writer.writerows(rows)
    return failed


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
                                stops_at_eos=s.stops_at_eos) for s in REGISTRY.values()], fmt, _console())


@app.command(epilog="Examples:\n\n\b\n  dlmcost schema sweep > sweep.schema.json")
def schema(which: str = typer.Argument("analyze", help="analyze | sweep")):
    """Print the JSON Schema of `--format json` output (generated from the result types)."""
    from .results import SCHEMAS

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
    report.render_gpus(HardwareDB.load(hardware).gpus.values(), fmt, _console())


@app.command(epilog="Examples:\n\n\b\n  dlmcost models")
def models(fmt: str = FormatOpt):
    """List the bundled model ids (usable offline)."""
    _check_format(fmt)
    report.render_models(api.list_models(), fmt, _console())


@app.command(epilog="Examples:\n\n\b\n  dlmcost model examples/tiny-dlm.yaml\n  dlmcost model GSAI-ML/LLaDA-8B-Instruct -f json")
def model(
    model_id: str = typer.Argument(..., metavar="MODEL", help="bundled id, local .json/.yaml, or Hub id"),
    fmt: str = FormatOpt,
    revision: Optional[str] = RevisionOpt,
    hub: bool = HubOpt,
    verify: bool = typer.Option(False, "--verify", help="compare with the checkpoint's safetensors parameter count (Hub)"),
):
    """Show the parsed spec of one model: shapes, parameters, K/V bytes per token."""
    _check_format(fmt)
    from .models import resolve_model

    spec = resolve_model(examples.locate(model_id), revision=revision, hub=hub)
    info = api.model_info(spec)
    if verify:
        info["verify"] = api.verify_model(spec, revision=revision)
    report.render_model(info, fmt, _console())
    if verify and info["verify"].get("warning"):
        print(f"warning: {info['verify']['warning']}", file=sys.stderr)


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
    from . import plan as planner
    from .errors import NoDeploymentError

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
                             efficiency=efficiency, progress=progress)
    finally:
        if progress:
            progress.clear()
    record = planner.to_record(result)
    console = _console()
    chart = _plan_chart(record) if plot or fmt == "html" else None
    if fmt == "html":
        from .html import plan_page

        console.file.write(plan_page(record, [chart] if chart else [], top))
    else:
        report.render_plan(record, fmt, console, top=top)
    if chart:
        _draw(chart, plot, console)
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
    from . import charts

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
    """User input quoted in a message (a GPU name with a newline...) must not break the one line."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


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
        print("error: aborted", file=sys.stderr)
        return 130
    if "ClickException" in kind:
        print(f"error: {_one_line(exc.format_message())}", file=sys.stderr)
        return EXIT_USAGE
    return None


def main(argv: list[str] | None = None) -> int:
    """Entry point: one line on stderr and a distinct exit code for every failure."""
    command = typer.main.get_command(app)
    try:
        command.main(args=argv, prog_name="dlmcost", standalone_mode=False)
    except DlmcostError as exc:
        print(f"error: {_one_line(exc.message)}", file=sys.stderr)
        for line in getattr(exc, "details", ()):
            print(f"  {_one_line(line)}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001
        code = _click_exit(exc)
        if code is not None:
            return code
        # a bug: still one line, never a traceback
        print(f"internal error: {exc.__class__.__name__}: {_one_line(str(exc))} (please report)", file=sys.stderr)
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
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        code = _reader_left(code)
    sys.exit(code)


def _reader_left(code: int) -> int:
    """The reader of a pipe stopped early (`dlmcost sweep | head`): what it read is what it wanted,
    so this is success, as for csv and json; point stdout at /dev/null so the interpreter's own
    final flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return code


if __name__ == "__main__":
    run()
