"""Option groups, declared once and shared by the commands that take them.

A group is a decorator (as sqlite-utils' `cli.py` shares its click decorators): it adds its
options to the command's signature, which is what typer reads, and hands the command one typed
object built from them instead of a dozen arguments:

    @app.command()
    @workload_options(lists=False)   # -> workload: WorkloadSettings
    @source_options                  # -> sources: Sources (and configures the Hub client)
    def analyze(model: str = ..., *, workload, sources): ...

Parsing and checks of single options (comma lists, --cfg, --format, --plot) live here too, so
that each command reads as what it does.
"""

import functools
import inspect
import math
import sys
from typing import Any, Callable, NamedTuple, Optional

import typer

from .. import api
from ..errors import UsageError
from .output_paths import check_output_file

KV_DTYPES = " | ".join(api.KV_DTYPE_BYTES)  # every K/V cache number format the engine costs (inputs/precision.py)


def group(into: str, build: Callable[..., Any], options: dict[str, tuple[Any, Any]]):
    """A decorator adding `options` (name -> (annotation, typer.Option)) to a command and passing
    `build(**their values)` to it as the keyword argument `into`."""

    def decorate(command):
        signature = inspect.signature(command)
        kept = [p for name, p in signature.parameters.items() if name != into]
        added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation)
                 for name, (annotation, option) in options.items()]
        parameters = kept + added

        @functools.wraps(command)
        def wrapper(**values):
            mine = {name: values.pop(name) for name in options}
            return command(**values, **{into: build(**mine)})

        wrapper.__signature__ = signature.replace(parameters=parameters)
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        return wrapper

    return decorate


def option_flag(option: tuple[Any, Any]) -> str:
    """An option group's entry (annotation, typer.Option) -> the flag a user types (its first name)."""
    return option[1].param_decls[0]


# --- single options ------------------------------------------------------------------------------

SCHEME_CHOICES = " | ".join(api.SCHEMES)

# --format of the commands without a page of their own (the listings, measure, calibrate); those
# with charts take `output_options`, whose help adds html
FormatOpt = typer.Option("table", "--format", "-f", metavar="FORMAT", help="table | json | csv | markdown")
PlotOpt = typer.Option(None, "--plot", metavar="FILE", help="draw the chart to FILE.png / FILE.svg, or - for the terminal (files need the plot extra: matplotlib)")
HardwareOpt = typer.Option(None, "--hardware", metavar="PATH", help="extra GPU YAML file or folder (repeatable; also $DLMCOST_HARDWARE)")
EfficiencyOpt = typer.Option("realistic", "--efficiency", help="realistic | ideal | path to an efficiency YAML")
STACK_HELP = (f"software stack: {' | '.join(api.bundled_stack_names())} | {api.STACK_NONE} | a stack YAML (default: "
              + ", ".join(f"{name} for {kind} decoding" for kind, name in api.DEFAULT_STACKS.items())
              + "; `dlmcost stacks` lists them)")
StackOpt = typer.Option(None, "--stack", help=STACK_HELP)
EagerOpt = typer.Option(False, "--eager", help="run the stack without CUDA graphs (vLLM --enforce-eager, SGLang "
                        "--disable-cuda-graph): its kernels launched one by one, at the host cost of its `eager:` "
                        "profile (`dlmcost stacks`; stacks without one refuse it)")
# the software stack and how it runs: every command that costs passes takes both
STACK_OPTIONS = {"stack": (Optional[str], StackOpt), "eager": (bool, EagerOpt)}
TpfOpt = typer.Option(None, "--tpf", help="tokens per forward (S = Lg / tpf) when --steps is not given; "
                      "draft-verify: mean accepted tokens per iteration")
def require_option(what: str, example: str, keys: str):
    """--require EXPR (repeatable): exit 8 unless `what` meets every expression."""
    return typer.Option(None, "--require", "-r", metavar="EXPR",
                        help=f"fail (exit 8) unless {what} meets EXPR, e.g. {example} (repeatable; keys: {keys})")


RequireOpt = require_option("every row", "'tokens_per_s >= 300', 'fits', 'time_s < 2'", "dlmcost sweep -f csv columns")


def parse_list(text: Optional[str], kind, name: str) -> Optional[list]:
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


def check_format(fmt: str, charts: bool = False, extra: tuple[str, ...] = ()) -> str:
    from ..render.formats import CHART_FORMATS, FORMATS

    formats = [f for f in FORMATS if charts or f not in CHART_FORMATS] + list(extra)
    if fmt not in formats:
        raise UsageError(f"unknown format '{fmt}'; choose one of: {', '.join(formats)}")
    return fmt


def check_plot(plot: Optional[str], fmt: str) -> None:
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
        check_output_file(plot, "--plot")


def _check_cfg(cfg: float) -> float:
    if not math.isfinite(cfg):
        raise UsageError(f"--cfg must be a finite number, got {cfg}")
    if cfg < 0:
        raise UsageError(f"--cfg must be >= 0 (0 turns classifier-free guidance off), got {cfg:g}")
    return cfg


def configure_hub(verbose: bool, hub_timeout: Optional[float]) -> None:
    """The Hub client's settings for this command. Left alone when they are the defaults and the
    client is not loaded: it starts with them when a Hub id first loads it (a bundled model's
    analyze never imports it)."""
    if verbose or hub_timeout is not None or "dlmcost.inputs.models.hub" in sys.modules:
        api.configure_hub(verbose=verbose, budget_s=hub_timeout)


# --- groups --------------------------------------------------------------------------------------

def _sources(efficiency, stack, eager, hardware, revision, hub, hub_timeout, verbose) -> api.Sources:
    configure_hub(verbose, hub_timeout)
    return api.Sources(efficiency=api.locate_example(efficiency), stack=stack, eager=eager, hardware=hardware,
                       revision=revision, hub=hub)


HUB_OPTIONS = {
    "revision": (Optional[str], typer.Option(None, "--revision", metavar="REV", help="Hub revision (branch, tag or commit)")),
    "hub": (bool, typer.Option(False, "--hub", help="fetch from the Hub even if the id is bundled")),
    "hub_timeout": (Optional[float], typer.Option(None, "--hub-timeout", help="seconds all Hub requests of the command may take "
                                                  "together [30; also $DLMCOST_HUB_TIMEOUT]")),
    "verbose": (bool, typer.Option(False, "--verbose", help="show the Hub client's own retries and warnings on stderr")),
}

source_options = group("sources", _sources, {
    "efficiency": (str, EfficiencyOpt),
    **STACK_OPTIONS,
    "hardware": (Optional[list[str]], HardwareOpt),
    **HUB_OPTIONS,
})


class StackChoice(NamedTuple):
    """--stack and --eager, as `stack_options` passes them."""

    stack: Optional[str]
    eager: bool


# for a command that takes the stack options alone (plan): passes `stack_choice: StackChoice`
stack_options = group("stack_choice", StackChoice, STACK_OPTIONS)


def hub_options(command):
    """--revision, --hub, --hub-timeout, --verbose for a command that only reads a model: passes
    `hub_source: Sources`."""
    def build(revision, hub, hub_timeout, verbose):
        configure_hub(verbose, hub_timeout)
        return api.Sources(revision=revision, hub=hub)

    return group("hub_source", build, HUB_OPTIONS)(command)


TaskOpt = typer.Option(None, "--task", metavar="TASK", callback=lambda v: None if v is None else api.task_key(v),
                       help="the task whose published tokens per forward set the default when neither --tpf nor "
                            "--steps is given (`dlmcost decodings MODEL` lists them) [the model's: a general mix "
                            "where one is published]")

MinAccuracyOpt = typer.Option(None, "--min-accuracy", metavar="TASK=FRACTION",
                              help="quality floor: only decodings whose published accuracy on TASK reaches it, e.g. "
                                   "gsm8k=0.85 (`dlmcost decodings MODEL --task TASK` lists them)")

# The scheme's own knobs, one value each in analyze and in sweep (see `dlmcost schemes`).
KNOB_OPTIONS = {
    "tpf": (Optional[float], TpfOpt),
    "task": (Optional[str], TaskOpt),
    "cfg": (float, typer.Option(0.0, "--cfg", help="classifier-free guidance scale; > 0 doubles the batch")),
    "store_pass": (Optional[bool], typer.Option(None, "--store-pass/--no-store-pass", help="block scheme: extra K/V store pass per block")),
    "logits": (str, typer.Option("all", "--logits", help="all: logits for every query position; committed: only the block's")),
    "expert_load": (str, typer.Option("expected", "--expert-load", help="MoE: expected distinct experts, or all")),
    "mla_form": (str, typer.Option("auto", "--mla-form", help="MLA attention: auto | absorbed | expanded")),
    "active_blocks": (Optional[float], typer.Option(None, "--active-blocks", help="multi-block: blocks in flight A [2]")),
    "cache_delay": (Optional[float], typer.Option(None, "--cache-delay", help="multi-block: passes before a finished block's K/V is cached [1]")),
    "refresh_every": (Optional[int], typer.Option(None, "--refresh-every", help="multi-block, windowed-refresh: full refresh every R passes [0: never]")),
    "window": (Optional[int], typer.Option(None, "--window", help="windowed-refresh: tokens recomputed either side of the block [16]")),
    "drafter": (Optional[str], typer.Option(None, "--drafter", help="draft-verify: the drafter model (default: self-speculative)")),
    "answer_tokens": (Optional[int], typer.Option(None, "--answer-tokens", help="expected tokens until end-of-sequence; throughput counts "
                      "these, and schemes that stop at the end-of-sequence block run only that far [the whole generation]")),
    "kv_single_tensor": (bool, typer.Option(False, "--kv-single-tensor",
                         help="layers whose values are their keys (K = V) cache one tensor (default: two, as engines do)")),
    "no_ring_buffer": (bool, typer.Option(False, "--no-ring-buffer",
                       help="sliding-window layers keep their whole context (default: at most their window)")),
    "quantize_head": (bool, typer.Option(False, "--quantize-head",
                      help="quantise the LM head and embedding with the weights (default: bf16, as checkpoints)")),
}


# the share of each GPU's memory the engine may use (one for every configuration): analyze's and
# sweep's memory verdicts, serve's deployment and plan's search take it
MemFractionOpt = typer.Option(None, "--mem-fraction", metavar="F",
                              help="share of each GPU's memory for weights, K/V cache and activations, in (0, 1] "
                                   "(vLLM's --gpu-memory-utilization, SGLang's --mem-fraction-static) [0.9]")


def _workload(**values) -> api.WorkloadSettings:
    values["cfg_scale"] = _check_cfg(values.pop("cfg"))
    values["ring_buffer"] = not values.pop("no_ring_buffer")
    return api.WorkloadSettings(**values)


# analyze's sizes: one value each
SIZE_OPTIONS = {
    "scheme": (Optional[str], typer.Option(None, "--scheme", help=f"{SCHEME_CHOICES} (default: the model's)")),
    "prompt": (Optional[int], typer.Option(None, "--prompt", help="prompt tokens Lp [256]")),
    "gen": (Optional[int], typer.Option(None, "--gen", help="generated tokens Lg (default: the model's sampler)")),
    "steps": (Optional[float], typer.Option(None, "--steps", help="total denoising steps S")),
    "block": (Optional[int], typer.Option(None, "--block", help="block length b")),
    "batch": (Optional[int], typer.Option(None, "--batch", help="sequences per batch B [1]")),
    "precision": (Optional[str], typer.Option(None, "--precision", help="bf16 | fp8 | fp4 | w8a16 | w4a16")),
    "kv_dtype": (Optional[str], typer.Option(None, "--kv-dtype", help=f"K/V cache dtype: {KV_DTYPES}")),
    "mem_fraction": (Optional[float], MemFractionOpt),
    "tp": (Optional[int], typer.Option(None, "--tp", help="tensor-parallel GPUs [1]")),
    "ep": (Optional[int], typer.Option(None, "--ep", help="expert-parallel ways, dividing --tp (MoE) [1]")),
}

workload_options = group("workload", _workload, {**SIZE_OPTIONS, **KNOB_OPTIONS})


# sweep's sizes: comma lists (name -> (SweepGrid field, element type, option))
GRID_OPTIONS = {
    "scheme": ("schemes", str, typer.Option(None, "--scheme", metavar="LIST", help="comma list (default: every scheme the model can run)")),
    "prompt": ("prompts", int, typer.Option(None, "--prompt", metavar="LIST", help="comma list of prompt lengths")),
    "gen": ("gens", int, typer.Option(None, "--gen", metavar="LIST", help="comma list of generation lengths")),
    "steps": ("steps", float, typer.Option(None, "--steps", metavar="LIST", help="comma list of total steps (default: S = Lg / tpf)")),
    "tpf": ("tpf", float, typer.Option(None, "--tpf", metavar="LIST", help="comma list of tokens per forward (S = Lg / tpf) "
                                       "when --steps is not given; draft-verify: mean accepted tokens per iteration")),
    "block": ("blocks", int, typer.Option(None, "--block", metavar="LIST", help="comma list of block lengths")),
    "batch": ("batches", int, typer.Option(None, "--batch", metavar="LIST", help="comma list of batch sizes")),
    "precision": ("precisions", str, typer.Option(None, "--precision", metavar="LIST", help="comma list of precisions")),
    "tp": ("tps", int, typer.Option(None, "--tp", metavar="LIST", help="comma list of tensor-parallel sizes")),
    "ep": ("eps", int, typer.Option(None, "--ep", metavar="LIST", help="comma list of expert-parallel sizes (each dividing tp)")),
}


def _grid(**texts) -> api.SweepGrid:
    return api.SweepGrid(**{field: parse_list(texts[name], kind, name.replace("_", "-"))
                            for name, (field, kind, _) in GRID_OPTIONS.items()})


grid_options = group("grid", _grid, {name: (Optional[str], option) for name, (_, _, option) in GRID_OPTIONS.items()})
knob_options = group("workload", _workload, {  # sweep's: its --tpf is a list, among the grid's
    "kv_dtype": (Optional[str], typer.Option(None, "--kv-dtype", help=f"K/V cache dtype: {KV_DTYPES} [bf16]")),
    "mem_fraction": (Optional[float], MemFractionOpt),
    **{k: v for k, v in KNOB_OPTIONS.items() if k != "tpf"}})


def output_options(extra_formats: tuple[str, ...] = (), formats_help: str | None = None):
    """--format (with html: a page with the command's charts) and --plot, both checked before
    any work: passes `output: OutputChoice`."""
    formats_help = formats_help or "table | json | csv | markdown | html (one self-contained page with the charts)"
    fmt_option = typer.Option("table", "--format", "-f", metavar="FORMAT", help=formats_help)

    def build(fmt, plot):
        check_format(fmt, charts=True, extra=extra_formats)
        check_plot(plot, fmt)
        return OutputChoice(fmt, plot)

    return group("output", build, {"fmt": (str, fmt_option), "plot": (Optional[str], PlotOpt)})


class OutputChoice(NamedTuple):
    fmt: str
    plot: Optional[str]

    @property
    def charted(self) -> bool:
        """A chart is drawn: to a file or the terminal, or into the HTML page."""
        return bool(self.plot) or self.fmt == "html"


# an AR prompt's chunked prefill beside the decodes: serve's deployment and plan's search take it
PrefillChunkOpt = typer.Option(None, "--prefill-chunk", metavar="TOKENS",
                               help="autoregressive prompts prefilled this many tokens a step beside the running "
                                    "decodes, first come first served (chunked prefill, vLLM's "
                                    "max_num_batched_tokens); 0: each admitted prompt in one pass [the stack's "
                                    "prefill_chunk_tokens, else 0]")
# the front end's API server processes per replica: serve's deployment and plan's search take it
ApiServersOpt = typer.Option(None, "--api-servers", metavar="N",
                             help="API server processes per replica every request passes before the engine sees it "
                                  "(vLLM's --api-server-count), on a stack with a front-end cost per request "
                                  "(`dlmcost stacks`) [the stack's front_end.api_servers]")

# the K/V cache's number format: serve compares a comma list (each deployment one), plan searches one
KV_DTYPE_MEANING = "(vLLM's and SGLang's --kv-cache-dtype): the bytes each cached K/V element holds and each pass reads"
KvDtypeCompareOpt = typer.Option(None, "--kv-dtype", metavar="LIST",
                                 help=f"K/V cache dtype (a comma list compares): {KV_DTYPES} {KV_DTYPE_MEANING} [bf16]")
KvDtypesOpt = typer.Option(None, "--kv-dtype", metavar="LIST",
                           help=f"comma list of K/V cache dtypes searched, each candidate one: {KV_DTYPES} "
                                f"{KV_DTYPE_MEANING} [bf16]")


# the scheduler's receive interval (SGLang's --scheduler-recv-interval): serve's deployment, every plan candidate
RecvIntervalOpt = typer.Option(None, "--recv-interval", metavar="R",
                               help="the scheduler takes in new requests once every R decode iterations (SGLang's "
                                    "--scheduler-recv-interval), at once after a prefill or when idle; "
                                    "autoregressive and draft-verify decodings, 1..1000 [1: every iteration]")


# --- published decodings ------------------------------------------------------------------------

DecodingProfilesOpt = typer.Option(None, "--decoding-profiles", metavar="PATH",
                                   help="extra decoding-profile YAML file or folder (repeatable; replaces the bundled "
                                        "file of the same architecture)")
