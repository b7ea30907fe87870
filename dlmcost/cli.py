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

from . import api, report  # noqa: E402
from .errors import EXIT_INTERNAL, EXIT_USAGE, DlmcostError, UsageError  # noqa: E402
from .hardware import HardwareDB  # noqa: E402
from .schemes import REGISTRY, SCHEMES  # noqa: E402

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Capacity planner for diffusion language model inference.")

FormatOpt = typer.Option("table", "--format", "-f", help="table | json | csv | markdown")
HardwareOpt = typer.Option(None, "--hardware", help="extra GPU YAML file or folder (repeatable; also $DLMCOST_HARDWARE)")
# Options analyze and sweep share (sweep's size knobs take comma lists instead).
CfgOpt = typer.Option(0.0, "--cfg", help="classifier-free guidance scale; > 0 doubles the batch")
StorePassOpt = typer.Option(None, "--store-pass/--no-store-pass", help="block scheme: extra K/V store pass per block")
LogitsOpt = typer.Option("all", "--logits", help="all: logits for every query position; committed: only the block's")
ExpertLoadOpt = typer.Option("expected", "--expert-load", help="MoE: expected distinct experts, or all")
MlaFormOpt = typer.Option("auto", "--mla-form", help="MLA attention: auto | absorbed | expanded")
EfficiencyOpt = typer.Option("realistic", "--efficiency", help="realistic | ideal | path to an efficiency YAML")
RevisionOpt = typer.Option(None, "--revision", help="Hub revision (branch, tag or commit)")
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


def _console() -> Console:
    return Console(soft_wrap=False, width=None if sys.stdout.isatty() else 100)


def _check_format(fmt: str) -> str:
    if fmt not in report.FORMATS:
        raise UsageError(f"unknown format '{fmt}'; choose one of: {', '.join(report.FORMATS)}")
    return fmt


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


@app.command()
def analyze(
    model: str = typer.Argument("GSAI-ML/LLaDA-8B-Instruct", help="bundled id, local .json/.yaml, or Hub id"),
    gpu: Optional[str] = typer.Option(None, "--gpu", "-g", help="GPU name/alias, comma list, or 'all' (default: the seed table's GPUs)"),
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
):
    """Cost of one workload on one or more GPUs."""
    _check_format(fmt)
    _check_cfg(cfg)
    result = api.analyze(
        model, gpu, efficiency=efficiency, hardware=hardware, revision=revision, hub=hub,
        scheme=scheme, prompt=prompt, gen=gen, steps=steps, tpf=tpf, block=block, batch=batch,
        precision=precision, kv_dtype=kv_dtype, cfg=cfg > 0 or None, store_pass=store_pass,
        logits=logits, expert_load=expert_load, tp=tp, ep=ep, mla_form=mla_form, active_blocks=active_blocks,
        cache_delay=cache_delay, refresh_every=refresh_every, window=window, drafter=drafter,
    )
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    report.render_analyze(result.model_dump(), fmt, _console(), show_ops=ops)


@app.command()
def sweep(
    model: str = typer.Option("GSAI-ML/LLaDA-8B-Instruct", "--model", "-m", help="bundled id, local file, or Hub id"),
    gpu: Optional[str] = typer.Option(None, "--gpu", "-g", help="comma list or 'all'"),
    scheme: Optional[str] = typer.Option(None, "--scheme", help="comma list (default: every scheme the model can run)"),
    prompt: Optional[str] = typer.Option(None, "--prompt", help="comma list of prompt lengths"),
    gen: Optional[str] = typer.Option(None, "--gen", help="comma list of generation lengths"),
    steps: Optional[str] = typer.Option(None, "--steps", help="comma list of total steps (default: S = Lg / tpf)"),
    tpf: Optional[float] = TpfOpt,
    block: Optional[str] = typer.Option(None, "--block", help="comma list of block lengths"),
    batch: Optional[str] = typer.Option(None, "--batch", help="comma list of batch sizes"),
    precision: Optional[str] = typer.Option(None, "--precision", help="comma list of precisions"),
    kv_dtype: str = typer.Option("bf16", "--kv-dtype"),
    cfg: float = CfgOpt,
    store_pass: Optional[bool] = StorePassOpt,
    logits: str = LogitsOpt,
    expert_load: str = ExpertLoadOpt,
    tp: Optional[str] = typer.Option(None, "--tp", help="comma list of tensor-parallel sizes"),
    ep: Optional[str] = typer.Option(None, "--ep", help="comma list of expert-parallel sizes (each dividing tp)"),
    mla_form: str = MlaFormOpt,
    active_blocks: Optional[float] = ActiveBlocksOpt,
    cache_delay: Optional[float] = CacheDelayOpt,
    refresh_every: Optional[int] = RefreshOpt,
    window: Optional[int] = WindowOpt,
    drafter: Optional[str] = DrafterOpt,
    efficiency: str = EfficiencyOpt,
    sort: Optional[str] = typer.Option(None, "--sort", help="column to sort by, e.g. tokens_per_s, time_s (prefix - to reverse)"),
    top: Optional[int] = typer.Option(None, "--top", help="show only the first N rows of the table"),
    fmt: str = FormatOpt,
    revision: Optional[str] = RevisionOpt,
    hub: bool = HubOpt,
    hardware: Optional[list[str]] = HardwareOpt,
):
    """Evaluate every combination of comma-separated knobs (vectorised)."""
    _check_format(fmt)
    _check_cfg(cfg)
    if top is not None and top <= 0:
        raise UsageError("--top must be positive")
    result = api.sweep(
        model, gpus=gpu, schemes=_parse_list(scheme, str, "scheme"), prompts=_parse_list(prompt, int, "prompt"),
        gens=_parse_list(gen, int, "gen"), steps=_parse_list(steps, float, "steps"), tpf=tpf,
        blocks=_parse_list(block, int, "block"), batches=_parse_list(batch, int, "batch"),
        precisions=_parse_list(precision, str, "precision"), kv_dtype=kv_dtype, cfg=cfg > 0, store_pass=store_pass,
        logits=logits, expert_load=expert_load, tps=_parse_list(tp, int, "tp"), eps=_parse_list(ep, int, "ep"),
        mla_form=mla_form, efficiency=efficiency, hardware=hardware, revision=revision, hub=hub,
        active_blocks=active_blocks, cache_delay=cache_delay, refresh_every=refresh_every, window=window,
        drafter=drafter,
    )
    rows = api.sweep_rows(result)
    if sort:
        key = sort.lstrip("-")
        if rows and key not in rows[0]:
            raise UsageError(f"--sort: unknown column '{key}'; choose from: {', '.join(rows[0])}")
        rows.sort(key=lambda r: (r[key] is None, r[key]), reverse=sort.startswith("-"))
    meta = result.model_dump(exclude={"rows"})
    report.render_sweep(meta, rows, fmt, _console(), rows[:top] if top else rows)


@app.command()
def schemes(fmt: str = FormatOpt):
    """List the decoding schemes: what each runs and the knobs it reads."""
    _check_format(fmt)
    report.render_schemes([dict(name=s.name, summary=s.summary, knobs=", ".join(s.knobs) or "-",
                                stops_at_eos=s.stops_at_eos) for s in REGISTRY.values()], fmt, _console())


@app.command()
def schema(which: str = typer.Argument("analyze", help="analyze | sweep")):
    """Print the JSON Schema of `--format json` output (generated from the result types)."""
    from .results import SCHEMAS

    if which not in SCHEMAS:
        raise UsageError(f"unknown schema '{which}'; choose one of: {', '.join(SCHEMAS)}")
    print(report.to_json(SCHEMAS[which].model_json_schema()))


@app.command()
def gpus(
    fmt: str = FormatOpt,
    hardware: Optional[list[str]] = HardwareOpt,
):
    """List the accelerators with their dense peaks and ridge points."""
    _check_format(fmt)
    report.render_gpus(HardwareDB.load(hardware).gpus.values(), fmt, _console())


@app.command()
def models(fmt: str = FormatOpt):
    """List the bundled model ids (usable offline)."""
    _check_format(fmt)
    report.render_models(api.list_models(), fmt, _console())


@app.command()
def model(
    model_id: str = typer.Argument(..., metavar="MODEL", help="bundled id, local .json/.yaml, or Hub id"),
    fmt: str = FormatOpt,
    revision: Optional[str] = typer.Option(None, "--revision"),
    hub: bool = typer.Option(False, "--hub"),
    verify: bool = typer.Option(False, "--verify", help="compare with the checkpoint's safetensors parameter count (Hub)"),
):
    """Show the parsed spec of one model: shapes, parameters, K/V bytes per token."""
    _check_format(fmt)
    from .models import resolve_model

    spec = resolve_model(model_id, revision=revision, hub=hub)
    info = api.model_info(spec)
    if verify:
        info["verify"] = api.verify_model(spec, revision=revision)
    report.render_model(info, fmt, _console())
    if verify and info["verify"].get("warning"):
        print(f"warning: {info['verify']['warning']}", file=sys.stderr)


def _one_line(text: str) -> str:
    """User input quoted in a message (a GPU name with a newline...) must not break the one line."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _click_exit(exc: BaseException) -> int | None:
    """Exit code for click's own exceptions (typer may vendor click, so match by class name)."""
    kind = {c.__name__ for c in type(exc).__mro__}
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
    sys.exit(main())


if __name__ == "__main__":
    run()
