"""`dlmcost sweep`: every combination of comma-separated knobs, evaluated in one vectorised grid."""

import sys
from typing import Optional

import numpy as np
import typer

from .. import api
from ..errors import UsageError
from ..render import columns
from ..render.formats import to_json
from ..render.sweep import render_sweep
from ..render.output import Output
from .app import app, examples
from .options import RequireOpt, grid_options, knob_options, output_options, source_options
from .output import draw, gate, held_output, progress_bar, requirements_of, stderr

CHART_AXES = ("x", "y", "color", "facet")
SWEEPING = "sweeping: configurations"  # what the progress bar counts


@app.command(epilog=examples("dlmcost sweep --gpu h100,b200 --block 8,32 --batch 1,16 --sort -tokens_per_s --limit 10",
                             "dlmcost sweep -m GSAI-ML/LLaDA-8B-Instruct,meta-llama/Meta-Llama-3-8B --gpu h100 -f csv > rows.csv"))
@grid_options
@knob_options
@source_options
@output_options(extra_formats=("jsonl",),
                formats_help="table | json | jsonl (one row per line, streamed) | csv (streamed) | markdown | html (one "
                             "self-contained page with the chart)")
def sweep(
    model: str = typer.Option(api.DEFAULT_MODEL, "--model", "-m", metavar="ID[,ID...]", help="bundled id, local file, or Hub id; a comma list sweeps each on one grid (lengths, steps, block and store pass not given: the first model's defaults; schemes: each its own) into one table with a model column"),
    own_defaults: bool = typer.Option(False, "--own-defaults", help="several models: each model's grid from its own defaults (generation length, steps, block, store pass) instead of the first model's"),
    gpu: Optional[str] = typer.Option(None, "--gpu", "-g", metavar="LIST", help="comma list or 'all'"),
    sort: Optional[str] = typer.Option(None, "--sort", metavar="KEY", help="column to sort by, e.g. tokens_per_s, time_s (prefix - to reverse)"),
    limit: Optional[int] = typer.Option(None, "--limit", "--top", metavar="N", help="table rows to show (0: all; default: what fits a terminal, all when piped)"),
    require: Optional[list[str]] = RequireOpt,
    allow_large: bool = typer.Option(False, "--allow-large", help=f"stream a grid above {api.MAX_SWEEP_CONFIGS:,} configurations (csv or jsonl, no --sort)"),
    x: Optional[str] = typer.Option(None, "--x", metavar="KNOB", help="chart: knob on the x axis (default: the first varied of block, batch, gen...)"),
    y: Optional[str] = typer.Option(None, "--y", metavar="KEY", help="chart: metric on the y axis (default: tokens_per_s)"),
    color: Optional[str] = typer.Option(None, "--color", metavar="KNOB", help="chart: knob drawn as one line per value (default: scheme)"),
    facet: Optional[str] = typer.Option(None, "--facet", metavar="KNOB", help="chart: knob drawn as one panel per value (default: gpu)"),
    *, grid, workload, sources, output,
):
    """Evaluate every combination of comma-separated knobs (vectorised).

    csv and jsonl are written chunk by chunk, so memory stays bounded however large the grid."""
    axes = dict(x=x, y=y, color=color, facet=facet)
    if any(axes.values()) and not output.charted:
        raise UsageError("--x/--y/--color/--facet shape the chart: add --plot FILE or --format html")
    if limit is not None and limit < 0:
        raise UsageError("--limit must be 0 (all rows) or positive")
    if sort is not None and not sort.lstrip("-"):  # '' was read as no --sort (and streamed with --allow-large)
        raise UsageError("--sort needs a column name, e.g. tokens_per_s (prefix - to reverse)")
    requirements = requirements_of(require)
    models = [api.locate_example(m.strip()) for m in model.split(",") if m.strip()] or [model]
    if len(models) > 1 and output.charted:
        raise UsageError("charts show one model: give one --model with --plot or --format html")
    streaming = output.fmt in ("csv", "jsonl") and not sort
    if allow_large and not streaming:
        raise UsageError("--allow-large streams rows: use it with --format csv or jsonl and without --sort")
    request = api.SweepRequest(models, gpu, grid, workload, sources, allow_large=allow_large, own_defaults=own_defaults)
    options = request.options()
    if len(models) > 1:  # the limit is the command's: checked on the total, so each sweep need not count again
        api.check_sweeps_passes(models, **options)
        options["max_passes"] = None
    out = held_output(output.plot, streaming)
    if streaming:  # no bar between rows streamed to the same terminal
        with progress_bar(SWEEPING, shows=not _stdout_is_terminal()) as bar:
            failed = _stream(models, options, output.fmt, out, requirements, bar)
    else:
        with progress_bar(SWEEPING) as bar:  # erased before the table is drawn
            metas, parts = _evaluated(models, options, bar)
        failed = _whole(metas, parts, models, options, sort, requirements, out, output, limit, axes)
    gate(failed, requirements)


def _stdout_is_terminal() -> bool:
    try:
        return bool(sys.stdout.isatty())
    except (AttributeError, ValueError):
        return False


def _reporting(options: dict, bar, i: int, n: int) -> dict:
    """The sweep options of model i of n with the progress bar to call as each chunk is evaluated
    (several models: the bar says which one is being swept; their counts start again)."""
    if bar is None:
        return options
    what = SWEEPING if n == 1 else f"sweeping model {i + 1}/{n}: configurations"
    return dict(options, progress=lambda done, total: bar(done, total, what))


def _sorted(cols: dict, sort: Optional[str]) -> dict:
    if sort and cols:
        key = sort.lstrip("-")
        if key not in cols:
            raise UsageError(f"--sort: unknown column '{key}'; choose from: {', '.join(cols)}")
        cols = columns.sort(cols, key, reverse=sort.startswith("-"))
    return cols


def _with_model(cols: dict, model: str, several: bool) -> dict:
    """A leading `model` column when several models share one output."""
    if not several or not cols:
        return cols
    return {"model": np.full(len(cols["gpu"]), model), **cols}


def _failures(requirements, cols: dict) -> list[str]:
    """The requirement failures of these rows, checked in columns: only the rows that fail one
    become dictionaries, to be labelled (all of them where a requirement compares what numpy
    cannot compare as Python does)."""
    if not requirements or not cols:
        return []
    held = [q.holds_columns(cols) for q in requirements]
    failing = None if any(h is None for h in held) else np.flatnonzero(~np.logical_and.reduce(held))
    return api.requirement_failures(requirements, columns.rows(cols, failing), api.sweep_label)


def _warn(meta, i: int) -> None:
    """The grid's warnings on stderr (several models share one grid: the first model's say it)."""
    if i == 0:
        for line in meta.warnings:
            stderr(f"warning: {line}")


def _evaluated(models, options, bar) -> tuple[list, list[dict]]:
    """Each model's summary and its rows in columns (several models: with a `model` column)."""
    several = len(models) > 1
    metas, parts = [], []
    for i, m in enumerate(models):
        meta, chunks = api.iter_sweep_columns(m, **_reporting(options, bar, i, len(models)))
        _warn(meta, i)
        cols = columns.concatenate(list(chunks))
        columns.check_finite(cols, "sweep")
        metas.append(meta)
        parts.append(_with_model(cols, m, several))
    return metas, parts


def _whole(metas, parts, models, options, sort, requirements, out, output, limit, axes) -> list[str]:
    """Every row held in columns, sorted together (several models: one table with a `model`
    column, their grid the first model's unless --own-defaults) and drawn; only the rows a table
    shows become dictionaries. Returns the requirement failures."""
    several = len(models) > 1
    if output.fmt == "json":  # one document per model, as before
        docs = [(meta, _sorted(cols, sort)) for meta, cols in zip(metas, parts)]
        failed = sum((_failures(requirements, cols) for _, cols in docs), [])
        rows = [[{k: v for k, v in r.items() if k != "model"} for r in columns.rows(cols)] for _, cols in docs]
        if several:
            out.write(to_json([dict(**meta.model_dump(exclude={"rows"}), rows=r)
                                      for (meta, _), r in zip(docs, rows)]) + "\n")
        else:
            _render(metas[0].model_dump(exclude={"rows"}), rows[0], output, out, limit, axes)
        return failed
    cols = _sorted(columns.concatenate(parts), sort)
    failed = _failures(requirements, cols)
    meta = _summary(metas, models, options) if several else metas[0].model_dump(exclude={"rows"})
    if output.fmt == "csv":
        columns.write_csv(cols, out.stream, header=True)
    elif output.fmt == "jsonl":  # sorted: held, then written as a stream would be
        columns.write_jsonl(cols, out.stream)
    elif output.fmt in ("table", "markdown"):
        _render(meta, columns.ColumnRows(cols), output, out, limit, axes)
    else:
        _render(meta, columns.rows(cols), output, out, limit, axes)
    return failed


def _summary(metas, models: list[str], options: dict) -> dict:
    """One header for several models swept into one table: their counts added up, and whose
    defaults the grid took."""
    first = metas[0].model_dump(exclude={"rows"})
    grid = (f"one grid for every model: the lengths, steps, block and store pass not given take {models[0]}'s "
            f"defaults, each model runs its own schemes" if options.get("defaults")
            else "each model's grid from its own defaults")
    return dict(first, model=dict(first["model"], id=", ".join(models)), grid=grid,
                **{k: sum(getattr(m, k) for m in metas) for k in ("evaluated", "skipped_impossible",
                                                                  "skipped_unsupported")})


def _render(meta: dict, rows, output, out: Output, limit: Optional[int], axes: dict) -> None:
    if limit is None and output.fmt == "table" and sys.stdout.isatty():
        limit = max(5, out.height - 12)  # what fits under the header, the notes and the caption
    if isinstance(rows, columns.ColumnRows):  # shown as columns too: a table formats them column by column
        shown = rows.head(limit)
    else:
        shown = rows[:limit] if limit else rows
    chart = None
    if output.charted:
        from ..render import charts

        chart = charts.sweep(rows, meta["model"]["id"], **axes)
    render_sweep(meta, rows, output.fmt, out, shown, charts=[chart] if chart else None)
    draw(chart, output.plot, out)


def _stream(models: list[str], options: dict, fmt: str, out: Output, requirements, bar=None) -> list[str]:
    """csv / jsonl one chunk at a time, written from its columns (with a leading `model` column
    when several models are swept); returns the requirement failures."""
    failed, header = [], True
    for i, m in enumerate(models):
        meta, chunks = api.iter_sweep_columns(m, **_reporting(options, bar, i, len(models)))
        _warn(meta, i)
        for cols in chunks:
            columns.check_finite(cols, "sweep")
            cols = _with_model(cols, m, len(models) > 1)
            failed += _failures(requirements, cols)
            if fmt == "jsonl":
                columns.write_jsonl(cols, out.stream)
            elif cols and len(cols["gpu"]):
                columns.write_csv(cols, out.stream, header)
                header = False
    return failed
