"""Grounding the model on this machine: `measure` times real passes, `calibrate` fits a stack."""

from typing import Optional

import typer

from .. import api
from ..render.output import Output
from .app import app
from .options import FormatOpt, HardwareOpt, TpfOpt, check_format, parse_list
from .output import progress_bar
from .output_paths import check_not_the_same, check_output_file

FITTING = "calibrating: fit iterations"


@app.command()
def calibrate(
    measurements: str = typer.Argument(..., help="measurements YAML (points: model, gpu, workload, measured); the format, with published points: examples/measurements.yaml"),
    stack: Optional[str] = typer.Option(None, "--stack", help="stack to start from: name or file (default: the default stack)"),
    fit: str = typer.Option("fixed,gemm", "--fit", help="parameters to fit: host, fixed, gemm, attention, elementwise"),
    out: str = typer.Option(..., "--out", "-o", help="stack YAML to write"),
    name: Optional[str] = typer.Option(None, "--name", help="name of the written stack [calibrated]"),
    only: Optional[str] = typer.Option(None, "--only", help="use only the points whose `stack:` is this name"),
    fmt: str = FormatOpt,
    hardware: Optional[list[str]] = HardwareOpt,
):
    """Fit a stack profile's free parameters to measured times (least squares on log time)."""
    check_format(fmt)
    check_output_file(out, "--out", own_only=True)
    measurements = api.locate_example(measurements)
    check_not_the_same(out, "--out", measurements, "the measurements file it reads")
    from ..render.report_stacks import render_calibration

    with progress_bar(FITTING) as bar:
        result = api.calibrate_file(measurements, stack=stack, fit=fit, name=name, only=only,
                                    hardware=hardware, out=out, progress=bar)
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
    backend: str = typer.Option("numpy", "--backend", help="numpy (CPU) | torch (the measure extra: PyTorch)"),
    device: Optional[str] = typer.Option(None, "--device", help="torch device: cuda | cpu (default: cuda if present)"),
    warmup: int = typer.Option(1, "--warmup", help="untimed runs per pass shape, at most (fewer once they add up to 0.5 s)"),
    repeats: int = typer.Option(3, "--repeats", help="timed runs per pass shape, at most (median; fewer once they add up to 0.5 s)"),
    layers: Optional[int] = typer.Option(None, "--layers", help="layers of each kind built and timed together (default 1), scaled to that kind's count"),
    out: Optional[str] = typer.Option(None, "--out", "-o", help="write the measurements (a file `calibrate` reads)"),
    profile_out: Optional[str] = typer.Option(None, "--profile-out", help="write a stack calibrated to these measurements"),
    fmt: str = FormatOpt,
    hardware: Optional[list[str]] = HardwareOpt,
):
    """Time the forward passes of a schedule on this machine and compare with the prediction."""
    check_format(fmt)
    for path, option in ((out, "--out"), (profile_out, "--profile-out")):
        if path is not None:
            check_output_file(path, option, own_only=True)
    if out is not None and profile_out is not None:
        check_not_the_same(profile_out, "--profile-out", out, "the --out file the measurements go to")
    from ..render.report_stacks import render_calibration, render_measure, render_measurements

    workload = dict(scheme=scheme, prompt=prompt, gen=gen, steps=steps, tpf=tpf, block=block)
    results = []
    one_document = fmt in ("json", "csv")  # every batch at the end; a table or Markdown as each is taken
    with progress_bar("measuring: timings (head, layer kinds)") as bar:
        for res in api.measure_batches(model, gpu, workload, parse_list(batch, int, "batch"), stack=stack,
                                       backend=backend, device=device, warmup=warmup, repeats=repeats, layers=layers,
                                       hardware=hardware, progress=bar):
            results.append(res)
            if one_document:
                continue
            if bar:
                bar.clear()  # off the screen while the table is printed; back with the next timing
            render_measure(res, fmt, Output.stdout())
    doc = api.write_measurements(results, model, gpu, out)
    calibrated = None
    if profile_out:
        with progress_bar(FITTING) as bar:
            calibrated = api.calibrate_measured(doc, stack, hardware, profile_out, progress=bar)
    if one_document:
        render_measurements(results, fmt, Output.stdout(), calibrated, profile_out)
    elif calibrated is not None:
        render_calibration(calibrated, profile_out, fmt, Output.stdout())
