"""What dlmcost knows: `schemes`, `schema`, `gpus`, `models` and one `model`."""

from typing import Optional

import typer

from .. import api
from ..errors import UsageError
from ..render import catalog as listing
from ..render.formats import to_json
from ..render.output import Output
from .app import app, examples
from .options import DecodingProfilesOpt, FormatOpt, HardwareOpt, check_format, hub_options
from .output import warn


@app.command(epilog=examples("dlmcost schemes -f markdown"))
def schemes(fmt: str = FormatOpt):
    """List the decoding schemes: what each runs and the knobs it reads."""
    check_format(fmt)
    listing.render_schemes(api.list_schemes(), fmt, Output.stdout())


@app.command(epilog=examples("dlmcost schema sweep > sweep.schema.json", "dlmcost schema serve"))
def schema(which: str = typer.Argument("analyze", metavar="COMMAND",
                                       help="analyze | sweep | serve | plan | gpus | models | model | schemes | "
                                            "calibrate | measure")):
    """Print the JSON Schema of a command's `--format json` output (generated from its typed records)."""
    from ..documents import SCHEMAS, json_schema

    if which not in SCHEMAS:
        raise UsageError(f"unknown schema '{which}'; choose one of: {', '.join(SCHEMAS)}")
    print(to_json(json_schema(which)))


@app.command(epilog=examples("dlmcost gpus -f csv"))
def gpus(fmt: str = FormatOpt, hardware: Optional[list[str]] = HardwareOpt):
    """List the accelerators with their dense peaks, ridge points and list prices (with their date;
    a price over a year old is warned about)."""
    check_format(fmt)
    gpus = api.list_gpus(hardware)
    listing.render_gpus(gpus, fmt, Output.stdout(), api.price_ages(gpus))


@app.command(epilog=examples("dlmcost stacks", "dlmcost stacks -f json"))
def stacks(fmt: str = FormatOpt):
    """List the software stacks: the engine each describes, its defaults, what was fitted on which
    published measurements, and how far off it has been from the others."""
    check_format(fmt)
    listing.render_stacks(api.list_stacks(), fmt, Output.stdout())


@app.command(epilog=examples("dlmcost models"))
def models(fmt: str = FormatOpt):
    """List the bundled model ids (usable offline)."""
    check_format(fmt)
    listing.render_models(api.list_models(), fmt, Output.stdout())


@app.command(epilog=examples("dlmcost model examples/tiny-dlm.yaml", "dlmcost model GSAI-ML/LLaDA-8B-Instruct -f json"))
@hub_options
def model(
    model_id: str = typer.Argument(..., metavar="MODEL", help="bundled id, local .json/.yaml, or Hub id"),
    fmt: str = FormatOpt,
    verify: bool = typer.Option(False, "--verify", help="compare with the checkpoint's safetensors parameter count (Hub)"),
    *, hub_source,
):
    """Show the parsed spec of one model: shapes, parameters, K/V bytes per token."""
    check_format(fmt)
    spec = api.resolve_model(api.locate_example(model_id), revision=hub_source.revision, hub=hub_source.hub)
    info = api.model_info(spec)
    if verify:
        info["verify"] = api.verify_model(spec, revision=hub_source.revision)
    listing.render_model(info, fmt, Output.stdout())
    if verify and info["verify"].get("warning"):
        warn(info["verify"]["warning"])



# --- published decodings --------------------------------------------------------------------------


@app.command(epilog=examples("dlmcost decodings inclusionAI/LLaDA2.0-mini --task general",
                             "dlmcost decodings --task gsm8k -f csv"))
def decodings(
    model_id: Optional[str] = typer.Argument(None, metavar="MODEL",
                                             help="a model id or a checkpoint that shares its config; all when omitted"),
    task: Optional[str] = typer.Option(None, "--task", metavar="TASKS",
                                       help="only these tasks (comma list): gsm8k, humaneval, general..."),
    fmt: str = FormatOpt,
    profiles: Optional[list[str]] = DecodingProfilesOpt,
):
    """List published decodings: tokens per forward and accuracy per checkpoint, setting and task."""
    from ..render.decodings import render_decodings

    check_format(fmt)
    tasks = [api.task_key(t) for t in task.split(",") if t.strip()] if task is not None else None
    if tasks is not None and not tasks:
        raise UsageError("--task names no task")
    records = api.list_decodings(model_id, tasks, profiles)
    title = None
    if model_id is not None and records:
        title = f"{records[0]['architecture']}: published decodings"
    render_decodings(records, fmt, Output.stdout(), title=title)
