"""`dlmcost sweep`: every combination of comma-separated knobs, evaluated in one vectorised grid."""

import sys
from typing import Optional

import typer

from .. import api
from ..errors import UsageError
from ..render import report
from ..render.output import Output
from .app import app, examples
from .options import RequireOpt, grid_options, knob_options, output_options, source_options
from .output import check_finite, draw, gate, held_output

CHART_AXES = ("x", "y", "color", "facet")


@app.command(epilog=examples("dlmcost sweep --gpu h100,b200 --block 8,32 --batch 1,16 --sort -tokens_per_s --limit 10",
                             "dlmcost sweep -m GSAI-ML/LLaDA-8B-Instruct,meta-llama/Meta-Llama-3-8B --gpu h100 -f csv > rows.csv"))
@grid_options
@knob_options
@source_options
@output_options(extra_formats=("jsonl",),
                formats_help="table | json | jsonl (one row per line, streamed) | csv (streamed) | markdown | html")
def sweep(
    model: str = typer.Option(api.DEFAULT_MODEL, "--model", "-m", metavar="ID[,ID...]", help="bundled id, local file, or Hub id; a comma list sweeps each (e.g. a dLLM and an AR model)"),
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
    requirements = api.parse_requirements(require)
    models = [api.locate_example(m.strip()) for m in model.split(",") if m.strip()] or [model]
    if len(models) > 1 and output.charted:
        raise UsageError("charts show one model: give one --model with --plot or --format html")
    streaming = output.fmt in ("csv", "jsonl") and not sort
    if allow_large and not streaming:
        raise UsageError("--allow-large streams rows: use it with --format csv or jsonl and without --sort")
    request = api.SweepRequest(models, gpu, grid, workload, sources, allow_large=allow_large)
    options = request.options()
    if len(models) > 1:  # the limit is the command's: checked on the total, so each sweep need not count again
        api.check_sweeps_passes(models, **options)
        options["max_passes"] = None
    out = held_output(output.plot, streaming)
    if streaming:
        failed = _stream(models, options, output.fmt, out, requirements)
    else:
        failed = _whole(models, options, sort, requirements, out, output, limit, axes)
    gate(failed, requirements)


def _sorted(rows: list[dict], sort: Optional[str]) -> list[dict]:
    if sort:
        key = sort.lstrip("-")
        if rows and key not in rows[0]:
            raise UsageError(f"--sort: unknown column '{key}'; choose from: {', '.join(rows[0])}")
        rows.sort(key=lambda r: (r[key] is None, r[key]), reverse=sort.startswith("-"))
    return rows


def _whole(models, options, sort, requirements, out, output, limit, axes) -> list[str]:
    """Every row held, sorted and drawn (a table, json, markdown or html); the requirement failures."""
    failed, documents = [], []
    for m in models:
        meta, chunks = api.iter_sweep(m, **options)
        rows = [row.plain() for chunk in chunks for row in chunk]
        check_finite(rows, "sweep")
        rows = _sorted(rows, sort)
        label = api.sweep_label if len(models) == 1 else (lambda r, m=m: f"{m}: {api.sweep_label(r)}")
        failed += api.requirement_failures(requirements, rows, label)
        documents.append((meta, rows))
    if output.fmt == "json" and len(documents) > 1:
        out.write(report.to_json([dict(**meta.model_dump(exclude={"rows"}), rows=rows) for meta, rows in documents]) + "\n")
        return failed
    for meta, rows in documents:
        _render(meta, rows, output, out, limit, axes)
    return failed


def _render(meta, rows: list[dict], output, out: Output, limit: Optional[int], axes: dict) -> None:
    if limit is None and output.fmt == "table" and sys.stdout.isatty():
        limit = max(5, out.height - 12)  # what fits under the header, the notes and the caption
    shown = rows[:limit] if limit else rows
    chart = None
    if output.charted:
        from ..render import charts

        chart = charts.sweep(rows, meta.model.id, **axes)
    report.render_sweep(meta.model_dump(exclude={"rows"}), rows, output.fmt, out, shown, charts=[chart] if chart else None)
    draw(chart, output.plot, out)


def _stream(models: list[str], options: dict, fmt: str, out: Output, requirements) -> list[str]:
    """csv / jsonl one chunk at a time (with a leading `model` column when several models are
    swept); returns the requirement failures."""
    import csv
    import json

    failed, writer = [], None
    for m in models:
        _, chunks = api.iter_sweep(m, **options)
        for chunk in chunks:
            rows = [row.plain() for row in chunk]
            check_finite(rows, "sweep")
            # names from users' files (a GPU's) reach the terminal too: control characters escaped
            rows = [{k: report.safe(v) if isinstance(v, str) else v for k, v in r.items()} for r in rows]
            if len(models) > 1:
                rows = [dict(model=m, **r) for r in rows]
            failed += api.requirement_failures(requirements, rows, api.sweep_label)
            if fmt == "jsonl":
                out.write("".join(json.dumps(r, allow_nan=False) + "\n" for r in rows))
            else:
                if writer is None and rows:
                    writer = csv.DictWriter(out.stream, fieldnames=list(rows[0]), lineterminator="\n")
                    writer.writeheader()
                writer.writerows(rows)
    return failed
