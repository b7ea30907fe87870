"""`dlmcost plan`: the fewest GPUs and replicas meeting latency and cost targets at a traffic."""

import inspect
from typing import Optional

import typer

from .. import api
from ..errors import NoDeploymentError, OverrideError, UsageError
from ..render.plan import PLAN_CSV_KEYS, plan_csv_rows, render_plan
from .app import app, examples
from .options import (ApiServersOpt, EfficiencyOpt, HardwareOpt, KvDtypesOpt, MemFractionOpt, MinAccuracyOpt, PrefillChunkOpt,
                      RecvIntervalOpt, TaskOpt, group, option_flag, output_options, parse_list, require_option,
                      stack_options)
from .output import draw, gate, held_output, progress_bar, requirements_of

# --- option groups (the traffic and the targets: what a deployment is asked to serve) -----------

TRAFFIC_OPTIONS = {
    "rate": (Optional[float], typer.Option(None, "--rate", help="requests/s, Poisson arrivals")),
    "users": (Optional[int], typer.Option(None, "--users", help="concurrent users (closed loop) instead of --rate")),
    "think_s": (Optional[float], typer.Option(None, "--think", help="closed loop: seconds a user waits between requests [0]")),
    "prompt": (Optional[str], typer.Option(None, "--prompt", help="prompt tokens: N, 'p50:N,p90:M', or @FILE [256]")),
    "answer": (Optional[str], typer.Option(None, "--answer", help="answer tokens: N, 'p50:N,p90:M', or @FILE (default: the model's)")),
    "cached_prompt": (Optional[float], typer.Option(None, "--cached-prompt", metavar="SHARE",
                                                    help="share of each prompt already in the engine's prefix cache "
                                                         "(vLLM's prefix caching, SGLang's radix cache), 0..1, for the "
                                                         "decodings that prefill a prompt in one pass or under a "
                                                         "budget [0]")),
}
traffic_options = group("traffic", lambda **t: t, TRAFFIC_OPTIONS)

# the latency targets `plan` and `serve` share (serve's --max-rate holds a deployment to them)
BASELINE_SHOWN = 3  # AR baseline deployments a table, a page and a chart show (render.report's)
LATENCY_TARGETS = {
    "p50_latency_s": (Optional[float], typer.Option(None, "--p50", help="target: p50 end-to-end latency, s")),
    "p95_latency_s": (Optional[float], typer.Option(None, "--p95", help="target: p95 end-to-end latency, s")),
    "p99_latency_s": (Optional[float], typer.Option(None, "--p99", help="target: p99 end-to-end latency, s")),
    "p95_first_block_s": (Optional[float], typer.Option(None, "--first-block-p95", help="target: p95 time to first block (AR: first token), s")),
    "min_tokens_per_s_per_user": (Optional[float], typer.Option(None, "--min-user-tps", help="target: median answer tokens/s per user")),
}

TARGET_OPTIONS = {
    **LATENCY_TARGETS,
    "max_usd_per_mtok": (Optional[float], typer.Option(None, "--max-usd-per-mtok", help="target: $ per million output tokens")),
    "max_gpus": (Optional[int], typer.Option(None, "--max-gpus", help="target: GPUs in total")),
}
targets_options = group("targets", lambda **t: t, TARGET_OPTIONS)


def _search(gpu, consumer, tp, precision, kv_dtype, mem_fraction, scheme, block, tpf, steps, max_batch, prefill_chunk, api_servers,
            recv_interval, task, min_accuracy, conservative) -> dict:
    decoding = _decodings(scheme, block, tpf, steps) if any(v is not None for v in (scheme, block, tpf, steps)) else None
    floor = dict([api.parse_floor(min_accuracy)]) if min_accuracy is not None else None
    return dict(gpus=gpu, tp=parse_list(tp, int, "tp"), precisions=parse_list(precision, str, "precision"),
                kv_dtype=parse_list(kv_dtype, str, "kv-dtype"), mem_fraction=mem_fraction, decoding=decoding, max_batch=parse_list(max_batch, int, "max-batch"),
                prefill_chunk=prefill_chunk, api_servers=api_servers, recv_interval=recv_interval, consumer=consumer or None, task=task, min_accuracy=floor,
                conservative=conservative or None)


SEARCH_OPTIONS = {
    "gpu": (Optional[str], typer.Option(None, "--gpu", "-g", metavar="LIST", help="comma list or 'all' (default: every data-centre GPU with a price)")),
    "consumer": (bool, typer.Option(False, "--consumer", help="add the priced workstation and consumer cards (RTX PRO, RTX 4090/5090) to the default GPUs")),
    "tp": (Optional[str], typer.Option(None, "--tp", metavar="LIST", help="comma list of tensor-parallel sizes [1,2,4,8]")),
    "precision": (Optional[str], typer.Option(None, "--precision", metavar="LIST", help="comma list [bf16,fp8]")),
    "kv_dtype": (Optional[str], KvDtypesOpt),
    "mem_fraction": (Optional[float], MemFractionOpt),
    "scheme": (Optional[str], typer.Option(None, "--scheme", metavar="LIST", help="comma list of schemes (default: the model's)")),
    "block": (Optional[str], typer.Option(None, "--block", metavar="LIST", help="comma list of block lengths")),
    "tpf": (Optional[str], typer.Option(None, "--tpf", metavar="LIST", help="comma list of tokens per forward")),
    "steps": (Optional[str], typer.Option(None, "--steps", metavar="LIST", help="comma list of total steps at the median answer")),
    "max_batch": (Optional[str], typer.Option(None, "--max-batch", metavar="LIST",
                                              help="comma list of batch limits (running requests) per replica "
                                                   "[the stack's max_running_requests, else 256]")),
    "prefill_chunk": (Optional[int], PrefillChunkOpt),
    "api_servers": (Optional[int], ApiServersOpt),
    "recv_interval": (Optional[int], RecvIntervalOpt),
    "task": (Optional[str], TaskOpt),
    "min_accuracy": (Optional[str], MinAccuracyOpt),
    "conservative": (bool, typer.Option(False, "--conservative",
                                        help="plan at the slower end of each stack's error band (`dlmcost stacks`): "
                                             "every step, and each first token further by its own band, as much "
                                             "slower than predicted as one in ten of the published measurements "
                                             "the band rests on ran, so that the GPU count and $/Mtok hold where the "
                                             "predictions have been optimistic; the search, ranking and Pareto front "
                                             "all at that clock")),
}
search_options = group("search", _search, SEARCH_OPTIONS)


def _decodings(scheme, block, tpf, steps) -> list[dict]:
    """--scheme/--block/--tpf/--steps comma lists -> every combination; without --scheme, the
    model's own scheme (the plan picks it and drops block and tpf for an autoregressive one)."""
    schemes = parse_list(scheme, str, "scheme") or [None]
    blocks = parse_list(block, int, "block") or [None]
    if tpf is not None and steps is not None:
        raise UsageError("give --tpf or --steps, not both")
    speeds = [("tpf", v) for v in parse_list(tpf, float, "tpf") or []] or \
        [("steps", v) for v in parse_list(steps, float, "steps") or []] or [(None, None)]
    out = []
    for sc in schemes:
        for b in blocks:
            for kind, v in speeds:
                out.append(dict(scheme=sc, block=b, **({kind: v} if kind else {})))
    return out


# the scenario's field each option sets, where its name differs; --scheme, --block, --tpf and --steps
# make `decoding` together: no one option to name
SEARCH_FIELDS = {"gpu": "gpus", "precision": "precisions"}
DECODING_OPTIONS = frozenset(inspect.signature(_decodings).parameters)
# (section, field) -> the option that gave it: a value the scenario refuses is named as it was typed
OPTION_OF_FIELD = {
    **{("traffic", k): option_flag(o) for k, o in TRAFFIC_OPTIONS.items()},
    **{("targets", k): option_flag(o) for k, o in TARGET_OPTIONS.items()},
    **{("search", SEARCH_FIELDS.get(k, k)): option_flag(o) for k, o in SEARCH_OPTIONS.items()
       if k not in DECODING_OPTIONS},
    ("simulation", "requests"): "--requests",
    ("simulation", "seed"): "--seed",
}


MAX_JOBS = 1024  # --jobs at most (side_by_side.py starts no more than its MAX_WORKERS anyway)


# --- the command ---------------------------------------------------------------------------------

@app.command(epilog=examples("dlmcost plan --rate 5 --p95 10 --gpu h100,b200",
                             "dlmcost plan --rate 5 --p95 10 -r 'usd_per_mtok <= 0.5' -r 'gpus <= 4'",
                             "dlmcost plan inclusionAI/LLaDA2.0-mini,Qwen/Qwen3-30B-A3B --rate 5 --p95 20",
                             "dlmcost plan --scenario examples/plan-scenario.yaml --plot plan.png"))
@traffic_options
@targets_options
@search_options
@stack_options
@output_options()
def plan(
    model: Optional[str] = typer.Argument(None, help="bundled id, local file, or Hub id; a comma list plans several side by side (default: the scenario's, else LLaDA-8B-Instruct)"),
    scenario: Optional[str] = typer.Option(None, "--scenario", "-s", help="scenario YAML (options below override it)"),
    price: Optional[list[str]] = typer.Option(None, "--price", metavar="NAME=USD", help="NAME=USD per GPU-hour, e.g. h100=2.49 (repeatable)"),
    power_utilisation: Optional[float] = typer.Option(None, "--power-utilisation", help="fraction of board power drawn [1.0]"),
    requests: Optional[int] = typer.Option(None, "--requests", help="simulated requests per run [2000]"),
    seed: Optional[int] = typer.Option(None, "--seed", help="random seed [0]"),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="worker processes for the candidates' searches and the rows' sustained loads and band ends (default: the usable cores; 1: none; the answer is the same)"),
    top: int = typer.Option(15, "--limit", "--top", metavar="N", help="rows of the table (0: all; json, csv and html list all)"),
    absurd: bool = typer.Option(False, "--absurd", help="search and list absurd deployments too (over 10x the cheapest $/Mtok of their model)"),
    ar_baseline: bool = typer.Option(False, "--ar-baseline", help="also plan the same model decoded autoregressively"),
    efficiency: str = EfficiencyOpt,
    hardware: Optional[list[str]] = HardwareOpt,
    require: Optional[list[str]] = require_option("the recommended (first) deployment", "'usd_per_mtok <= 0.5'",
                                                  "dlmcost plan -f csv columns"),
    *, traffic, targets, search, stack_choice, output,
):
    """Fewest GPUs and replicas meeting latency / cost targets at a given traffic, ranked by $/Mtok.

    Exit 0 when a deployment meets the targets, 8 when none does (nearest miss on stderr) or the
    recommended one misses a --require."""
    from ..documents import PLAN_DEPRECATED_KEYS

    if top < 0:
        raise UsageError("--limit must be 0 (all rows) or positive")
    if jobs is not None and not 1 <= jobs <= MAX_JOBS:
        raise UsageError(f"--jobs must be 1 to {MAX_JOBS:,} (worker processes)")
    requirements = requirements_of(require, PLAN_CSV_KEYS, PLAN_DEPRECATED_KEYS)
    top = top or None  # 0: every row, as sweep's --limit 0
    if traffic["rate"] is not None and traffic["users"] is None:
        traffic["users"] = None  # a rate given on the command line replaces the scenario's users
    overrides = dict(traffic=traffic, targets=targets, search=search, simulation=dict(requests=requests, seed=seed),
                     power_utilisation=power_utilisation)
    # a table or Markdown shows the first rows only: their sustained load and band ends are all it
    # needs (json, csv, the HTML page and a chart list every row; a requirement is checked on the CSV row)
    every_row = output.fmt in ("json", "csv", "html") or top is None or bool(requirements) or output.charted
    ranked = None if every_row else max(top, BASELINE_SHOWN)
    result = _run(scenario, overrides, model, price, hardware, efficiency, stack_choice, ar_baseline, absurd, ranked,
                  jobs)
    record = api.plan_record(result)
    out = held_output(output.plot)
    chart = _chart(record) if output.charted else None
    render_plan(record, output.fmt, out, top=top, charts=[chart] if chart else None)
    draw(chart, output.plot, out)
    _exit_unless_met(result)
    if requirements:  # the deployment the plan recommends: the first row (a requirement on any row: sweep)
        best = [r for r in plan_csv_rows(record) if r["set"] == "plan"][:1]
        gate(api.requirement_failures(requirements, best, lambda r: f"{r['gpu']} {r['replicas']}x tp{r['tp']} "
                                      f"{r['precision']} {r['decoding']}"), requirements)


def _run(scenario, overrides, model, price, hardware, efficiency, stack_choice, baseline, absurd, ranked, jobs):
    """The search, with a progress bar on a terminal."""
    with progress_bar("planning: candidate deployments") as progress:
        # an empty name given ('' from an unset shell variable) is refused, not the scenario's model planned in its place
        models = [api.locate_example(m) for m in parse_list(model, str, "model")] if model is not None else None
        try:
            return api.run_plan(api.locate_example(scenario), overrides, model=models, prices=price or [],
                                hardware=hardware, efficiency=api.locate_example(efficiency),
                                stack=stack_choice.stack, eager=stack_choice.eager,
                                baseline=baseline, absurd=absurd, progress=progress, ranked=ranked, jobs=jobs)
        except OverrideError as exc:  # an option's value: named as typed, not as the scenario's field
            if exc.field not in OPTION_OF_FIELD:
                raise
            raise UsageError(f"{OPTION_OF_FIELD[exc.field]}: {exc.detail}") from None


def _exit_unless_met(result) -> None:
    if result.deployments:
        return
    miss = result.nearest_miss
    if miss is None:
        raise NoDeploymentError("no deployment meets the targets: no candidate could run (unsupported precision, "
                                "a layout that does not split the model, or weights that do not fit)")
    failed = "; ".join(m.describe() for m in miss.misses)
    cache = f" kv {miss.kv_dtype}" if len(result.search.get("kv_dtypes", [])) > 1 else ""  # several searched: which
    raise NoDeploymentError(f"no deployment meets the targets; nearest miss: {miss.gpu} {miss.replicas}x tp{miss.tp} "
                            f"{miss.precision}{cache} {miss.decoding} batch<={miss.max_batch}: {failed}")


def _chart(record: dict):
    """$/Mtok against p95 latency: the deployments meeting the targets and the AR baseline
    (None when there is nothing to draw: the command then exits 8 with the nearest miss)."""
    from ..render import charts

    rows = [dict(r, is_ar_baseline=False) for r in record["deployments"] if r["usd_per_mtok"] is not None]
    # the AR baseline as the table shows it: its cheapest deployments (a GPU without a price has no cost to draw)
    rows += [dict(r, is_ar_baseline=True, pareto=False) for r in record["ar_baseline"][:BASELINE_SHOWN]
             if r["usd_per_mtok"] is not None]
    return charts.plan_front(rows, title=f"plan: {record['model']}, cost against p95 latency") if rows else None
