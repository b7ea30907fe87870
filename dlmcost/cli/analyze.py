"""`dlmcost analyze`: the cost of one workload on one or more GPUs."""

from typing import Optional

import typer

from .. import api
from ..render.analyze import render_analyze
from .app import app, examples
from .options import RequireOpt, output_options, source_options, workload_options
from .output import check_finite, draw, gate, held_output, requirements_of, stderr


@app.command(epilog=examples("dlmcost analyze --gpu h100 --gen 256 --tpf 3 --scheme dual-cache",
                             "dlmcost analyze --gpu h100 -r 'tokens_per_s >= 300' -r fits -f json"))
@workload_options
@source_options
@output_options()
def analyze(
    model: str = typer.Argument(api.DEFAULT_MODEL, help="bundled id, local .json/.yaml, or Hub id"),
    gpu: Optional[str] = typer.Option(None, "--gpu", "-g", help="GPU name/alias, comma list, or 'all' (default: H100, H200, B200, B300, MI300X, MI355X, MI455X)"),
    ops: bool = typer.Option(False, "--ops", help="also print per-pass and per-op tables"),
    require: Optional[list[str]] = RequireOpt,
    *, workload, sources, output,
):
    """Cost of one workload on one or more GPUs."""
    requirements = requirements_of(require)
    request = api.AnalyzeRequest(api.locate_example(model), gpu, workload, sources)
    result = api.analyze(request)
    data = result.plain()
    check_finite(data)
    for warning in result.warnings:
        stderr(f"warning: {warning}")
    chart = None
    if output.charted:  # everything it draws (peaks, bandwidth, the AR point) is in the result
        from ..render import charts

        chart = charts.roofline(data, show_ops=ops)
    out = held_output(output.plot)
    render_analyze(data, output.fmt, out, show_ops=ops, charts=[chart] if chart else None)
    draw(chart, output.plot, out)
    if requirements:
        gate(api.requirement_failures(requirements, api.requirement_rows(data), lambda r: r["gpu"]), requirements)
