"""`dlmcost serve`: what a fixed deployment delivers under a given load. Parsing only: the
numbers come from `api.serve_many` (dlmcost/serving/deployment/), the tables from render/serve.py."""

# (no `from __future__ import annotations`: typer reads the annotations at run time)
import math
from typing import NamedTuple, Optional

import typer

from .. import api
from ..errors import RequirementError, UsageError
from .app import app
from .options import (STACK_OPTIONS, option_flag, ApiServersOpt, EfficiencyOpt, KvDtypeCompareOpt, MemFractionOpt, MinAccuracyOpt, PrefillChunkOpt, RecvIntervalOpt,
                      TaskOpt, group, output_options, parse_list, require_option)
from .output import GATE_LINES, check_finite, draw, held_output, requirements_of
from .plan import LATENCY_TARGETS

EXAMPLES = ("Examples:\n\n\b\n"
            "  dlmcost serve GSAI-ML/LLaDA-8B-Instruct --gpu h100 --replicas 4 --max-running 64 --concurrency 32\n"
            "  dlmcost serve --gpu h100 --scheme block --block 32 --tpf 2 --concurrency 1,8,32,128 --plot curve.png\n"
            "  dlmcost serve --gpu h100 --rate 2,4,8 --arrival gamma --cv 3\n"
            "  dlmcost serve --gpu h100 --job 10000 --parallel 128\n"
            "  dlmcost serve --gpu h100 --max-rate --p95 10 --first-block-p95 1\n"
            "  dlmcost serve --gpu h100 -c 8,32 --p95 5 -r 'tokens_per_s_per_user >= 20'\n"
            "  dlmcost serve --gpu h100 --trace requests.csv --time-scale 0.5")


def _finite(name: str, value: float) -> float:
    if not math.isfinite(value):
        raise UsageError(f"--{name} must be a finite number, got {value}")
    return value


def _setups(gpu, tp, ep, replicas, precision, kv_dtype, mem_fraction, scheme, block, tpf, steps, tpf_spread, task, min_accuracy, max_running,
            release, prefill_chunk, api_servers, recv_interval, cached_prompt, stack, eager, efficiency, price,
            power_utilisation) -> list:
    """Every deployment asked for: one per combination of the comma lists (as plan searches them)."""
    if tpf is not None and steps is not None:
        raise UsageError("give --tpf or --steps, not both")
    floor = api.parse_floor(min_accuracy) if min_accuracy is not None else None
    cached = api.parse_cached_shares(cached_prompt) if cached_prompt is not None else None

    def listed(text, kind, name):
        return parse_list(text, kind, name) or [None]

    return [api.ServeSetup(gpu=g, tp=t, ep=ep, replicas=replicas, precision=p, kv_dtype=kv,
                           **({} if mem_fraction is None else dict(mem_fraction=mem_fraction)), scheme=sc, block=b, tpf=f, steps=st,
                           tpf_spread=tpf_spread, task=task, min_accuracy=floor, max_running=m, release=release,
                           prefill_chunk=prefill_chunk, api_servers=api_servers, recv_interval=recv_interval, cached_prompt=cached, stack=stack, eager=eager, efficiency=api.locate_example(efficiency),
                           price=price,
                           power_utilisation=power_utilisation)
            for g in parse_list(gpu, str, "gpu") for t in parse_list(tp, int, "tp")
            for p in parse_list(precision, str, "precision")
            for kv in (parse_list(kv_dtype, str, "kv-dtype") if kv_dtype is not None else ["bf16"])
            for sc in listed(scheme, str, "scheme")
            for b in listed(block, int, "block") for f in listed(tpf, float, "tpf") for st in listed(steps, float, "steps")
            for m in listed(max_running, int, "max-running")]


deployment_options = group("setups", _setups, {
    "gpu": (str, typer.Option("h100", "--gpu", "-g", metavar="LIST", help="the GPU of every replica (a comma list compares)")),
    "tp": (str, typer.Option("1", "--tp", metavar="LIST", help="tensor-parallel GPUs per replica (a comma list compares)")),
    "ep": (int, typer.Option(1, "--ep", help="expert-parallel ways (MoE; divides --tp)")),
    "replicas": (int, typer.Option(1, "--replicas", "-R", help="data-parallel replicas")),
    "precision": (str, typer.Option("bf16", "--precision", metavar="LIST", help="weights and compute precision (a comma list compares)")),
    "kv_dtype": (Optional[str], KvDtypeCompareOpt),
    "mem_fraction": (Optional[float], MemFractionOpt),
    "scheme": (Optional[str], typer.Option(None, "--scheme", metavar="LIST", help="decoding scheme (default: the model's; a comma list compares)")),
    "block": (Optional[str], typer.Option(None, "--block", metavar="LIST", help="block length (a comma list compares)")),
    "tpf": (Optional[str], typer.Option(None, "--tpf", metavar="LIST", help="mean tokens per forward (a comma list compares) "
                                        "[the model's published decoding's on --task]")),
    "steps": (Optional[str], typer.Option(None, "--steps", metavar="LIST", help="total steps at the median answer, instead of --tpf (a comma list compares)")),
    "tpf_spread": (Optional[float], typer.Option(None, "--tpf-spread", help="coefficient of variation of a request's "
                                                 "passes per block (gamma) [the published decoding's spread across its "
                                                 "mix of tasks, else 0: every request the mean]")),
    "task": (Optional[str], TaskOpt),
    "min_accuracy": (Optional[str], MinAccuracyOpt),
    "max_running": (Optional[str], typer.Option(None, "--max-running", "--batch", metavar="LIST",
                                                help="running requests per replica, a comma list compares "
                                                     "[the stack's max_running_requests, else 256]")),
    "release": (Optional[str], typer.Option(None, "--release", help="synchronous (a block lasts until the batch's "
                                            "slowest request commits) | first-done [the stack's, else synchronous]")),
    "prefill_chunk": (Optional[int], PrefillChunkOpt),
    "api_servers": (Optional[int], ApiServersOpt),
    "recv_interval": (Optional[int], RecvIntervalOpt),
    "cached_prompt": (Optional[str], typer.Option(None, "--cached-prompt", metavar="SHARE|@FILE|trace",
                                                  help="share of each prompt already in the engine's prefix cache "
                                                       "(vLLM's prefix caching, SGLang's radix cache): 0..1 for every "
                                                       "request, @FILE of one share a request in the order they are "
                                                       "sent, or 'trace': from a Mooncake trace's hash_ids [0]")),
    **STACK_OPTIONS,
    "efficiency": (str, EfficiencyOpt),
    "price": (Optional[float], typer.Option(None, "--price", metavar="USD", help="USD per GPU-hour [the hardware file's list price]")),
    "power_utilisation": (float, typer.Option(1.0, "--power-utilisation", help="fraction of board power drawn")),
})


class LoadChoice(NamedTuple):
    loads: list
    arrival: str
    cv: float
    requests: int
    seed: int


def _one_of(**given) -> str | None:
    named = [k for k, v in given.items() if v is not None and v is not False]  # 0 is given (--job 0), not absent
    if len(named) > 1:
        raise UsageError(f"give one load: {' or '.join('--' + k.replace('_', '-') for k in named)}, not several")
    return named[0] if named else None


def _loads(concurrency, think, rate, arrival, cv, job, parallel, trace, trace_format, time_scale, sample, requests,
           seed) -> LoadChoice:
    for name, value in (("think", think), ("cv", cv), ("time-scale", time_scale)):
        _finite(name, value)
    if not 0 <= seed < 2 ** 63:  # numpy's Generator takes a non-negative --seed
        raise UsageError("--seed must be in 0..2^63-1")
    kind = _one_of(concurrency=concurrency, rate=rate, job=job, trace=trace)
    if parallel is not None and kind != "job":
        raise UsageError("--parallel goes with --job N")
    # an option of another load than the one given would be ignored without a word
    api.check_cv_taken(arrival, cv)
    if think and kind != "concurrency":
        raise UsageError("--think goes with --concurrency (a closed loop's users)")
    trace_option = next((name for name, given in (("--trace-format", trace_format is not None),
                                                  ("--time-scale", time_scale != 1.0), ("--sample", sample is not None))
                         if given), None)
    if trace_option and kind != "trace":
        raise UsageError(f"{trace_option} goes with --trace FILE")
    loads = []
    if kind == "concurrency":
        loads = [api.ClosedLoop(u, think) for u in parse_list(concurrency, int, "concurrency")]
    elif kind == "rate":
        loads = [api.OpenLoop(r, arrival, cv) for r in parse_list(rate, float, "rate")]
    elif kind == "job":
        loads = [api.BatchJob(job, parallel if parallel is not None else 1)]
    elif kind == "trace":
        loads = [api.read_trace(api.locate_example(trace), fmt=trace_format, time_scale=time_scale,
                                sample=sample or None, seed=seed)]  # 0: the whole trace, as --limit 0
    return LoadChoice(loads, arrival, cv, requests, seed)


load_options = group("load", _loads, {
    "concurrency": (Optional[str], typer.Option(None, "--concurrency", "-c", metavar="LIST",
                                                help="closed loop: concurrent users, a comma list for a curve")),
    "think": (float, typer.Option(0.0, "--think", help="closed loop: seconds between an answer and the next request")),
    "rate": (Optional[str], typer.Option(None, "--rate", metavar="LIST", help="open loop: requests/s, a comma list for a curve")),
    "arrival": (str, typer.Option("poisson", "--arrival", help="open loop: poisson | constant | gamma")),
    "cv": (float, typer.Option(1.0, "--cv", help="gamma arrivals: coefficient of variation of the gaps (> 1: bursty)")),
    "job": (Optional[int], typer.Option(None, "--job", metavar="N", help="a finite batch job of N requests (makespan)")),
    "parallel": (Optional[int], typer.Option(None, "--parallel", metavar="P", help="batch job: requests in flight [1]")),
    "trace": (Optional[str], typer.Option(None, "--trace", metavar="FILE", help="replay a request trace (Azure, Mooncake, BurstGPT)")),
    "trace_format": (Optional[str], typer.Option(None, "--trace-format", help="azure | mooncake | burstgpt [from the file]")),
    "time_scale": (float, typer.Option(1.0, "--time-scale", help="trace: multiply its arrival times by this")),
    "sample": (Optional[int], typer.Option(None, "--sample", metavar="N", help="trace: replay N requests drawn from it (0: all)")),
    "requests": (int, typer.Option(2000, "--requests", help="simulated requests per synthetic load")),
    "seed": (int, typer.Option(0, "--seed", help="random seed")),
})


def _targets(**given):
    targets = api.Targets(**given)
    for k, v in targets.as_dict().items():
        if not (math.isfinite(v) and v > 0):
            raise UsageError(f"{option_flag(LATENCY_TARGETS[k])} must be a positive number, got {v:g}")
    return targets if targets.as_dict() else None


latency_targets = group("targets", _targets, LATENCY_TARGETS)


@app.command(epilog=EXAMPLES)
@deployment_options
@load_options
@latency_targets
@output_options()
def serve(
    model: Optional[str] = typer.Argument(None, help="bundled id, local file, or Hub id, or a comma list to "
                                          "compare (e.g. a dLLM and the AR model it replaces) [LLaDA-8B-Instruct]"),
    prompt: Optional[str] = typer.Option(None, "--prompt", help="prompt tokens: N, 'p50:N,p90:M', or @FILE [256]"),
    answer: Optional[str] = typer.Option(None, "--answer", help="answer tokens: N, 'p50:N,p90:M', or @FILE (default: the model's)"),
    max_rate: bool = typer.Option(False, "--max-rate", help="find the highest rate sustained within the targets (bisection)"),
    hardware: Optional[list[str]] = typer.Option(None, "--hardware", metavar="PATH", help="extra GPU YAML file or folder (repeatable; also $DLMCOST_HARDWARE)"),
    require: Optional[list[str]] = require_option("every load point", "'p95_latency_s <= 5', 'usd_per_mtok < 1'",
                                                  "dlmcost serve -f csv columns"),
    *, setups, load, targets, output,
):
    """What a fixed deployment delivers under a given load: throughput, latency, cost.

    One load (--concurrency, --rate, --job or --trace), a list of concurrencies or rates for a
    load curve and its Pareto front, and/or --max-rate. Exit 8 when a load point misses a target
    (--p95...) or a --require, or --max-rate finds no rate within the targets."""
    from ..render.serve import CSV_KEYS

    requirements = requirements_of(require, CSV_KEYS, {})
    if not load.loads and not max_rate:
        raise UsageError("give a load: --concurrency N, --rate R, --job N (--parallel P) or --trace FILE, or --max-rate")
    if load.arrival != "poisson" and not max_rate and not any(isinstance(ld, api.OpenLoop) for ld in load.loads):
        raise UsageError("--arrival goes with --rate or --max-rate (open-loop arrivals)")
    if output.plot and not load.loads:
        raise UsageError("--plot draws a load curve: give --concurrency or --rate")
    # an empty name given ('' from an unset shell variable) is refused, not the default model run in its place
    models = [api.locate_example(m) for m in parse_list(model, str, "model")] if model is not None else [api.DEFAULT_MODEL]
    result = api.serve_many(models, load.loads, setups, prompt=prompt, answer=answer, targets=targets,
                            find_max_rate=max_rate, arrival=load.arrival, cv=load.cv, requests=load.requests,
                            seed=load.seed, hardware=hardware)
    record = result.record()
    check_finite(record, "serve result")
    from ..render.serve import render_serve, serve_chart

    out = held_output(output.plot)
    chart = serve_chart(record) if output.charted and any(e["points"] for e in record["deployments"]) else None
    render_serve(record, output.fmt, out, charts=[chart] if chart else None)
    draw(chart if output.plot else None, output.plot, out)
    _gate(record, requirements)


def _gate(record: dict, requirements: list) -> None:
    """Exit 8 (the output printed first) when a load point misses a target or a requirement, or
    --max-rate answers none; each on its own line of stderr."""
    from ..render.serve import csv_rows, miss_text, short_load

    many = len(record["deployments"]) > 1
    missed, lines = 0, []
    for i, entry in enumerate(record["deployments"], 1):
        where = f"#{i} " if many else ""
        for p in entry["points"]:
            if p["misses"]:
                missed += 1
                lines.append(f"{where}{short_load(p)}: {'; '.join(miss_text(m) for m in p['misses'])}")
        m = entry.get("max_rate")
        if m and m["rate"] is None:
            lines.append(f"{where}--max-rate: no rate within the targets; {m['reason']}")
    failed = api.requirement_failures(requirements, csv_rows(record),
                                      lambda r: (f"#{r['deployment']} " if many else "") + short_load(r))
    if not lines and not failed:
        return
    what = [f"{missed} load point(s) miss a target" if missed else "",
            "--max-rate found no rate within the targets" if any("--max-rate" in x for x in lines) else "",
            f"{len(failed)} load point(s) miss a requirement ({'; '.join(q.text for q in requirements)})" if failed else ""]
    details = lines + failed
    more = [f"... and {len(details) - GATE_LINES:,} more"] if len(details) > GATE_LINES else []
    raise RequirementError("; ".join(w for w in what if w) + ":", details[:GATE_LINES] + more)
