"""`dlmcost serve`: what a fixed deployment delivers under a given load. Parsing only: the
numbers come from `api.serve_many` (dlmcost/serving/deployment.py), the tables from render/serve.py."""

# (no `from __future__ import annotations`: typer reads the annotations at run time)
import math
from typing import NamedTuple, Optional

import typer

from .. import api
from ..errors import UsageError
from .app import app
from .options import MinAccuracyOpt, TaskOpt, EfficiencyOpt, StackOpt, group, output_options, parse_list
from .output import check_finite, draw, held_output
from .plan import LATENCY_TARGETS

EXAMPLES = ("Examples:\n\n\b\n"
            "  dlmcost serve GSAI-ML/LLaDA-8B-Instruct --gpu h100 --replicas 4 --max-running 64 --concurrency 32\n"
            "  dlmcost serve --gpu h100 --scheme block --block 32 --tpf 2 --concurrency 1,8,32,128 --plot curve.png\n"
            "  dlmcost serve --gpu h100 --rate 2,4,8 --arrival gamma --cv 3\n"
            "  dlmcost serve --gpu h100 --job 10000 --parallel 128\n"
            "  dlmcost serve --gpu h100 --max-rate --p95 10 --first-block-p95 1\n"
            "  dlmcost serve --gpu h100 --trace requests.csv --time-scale 0.5")


def _finite(name: str, value: float) -> float:
    if not math.isfinite(value):
        raise UsageError(f"--{name} must be a finite number, got {value}")
    return value


def _setups(gpu, tp, ep, replicas, precision, scheme, block, tpf, steps, tpf_spread, task, min_accuracy, max_running,
            release, stack, efficiency, price, power_utilisation) -> list:
    """Every deployment asked for: one per GPU and TP size of the comma lists."""
    floor = api.parse_floor(min_accuracy) if min_accuracy is not None else None
    return [api.ServeSetup(gpu=g, tp=t, ep=ep, replicas=replicas, precision=precision, scheme=scheme, block=block,
                           tpf=tpf, steps=steps, tpf_spread=tpf_spread, task=task, min_accuracy=floor,
                           max_running=max_running, release=release,
                           stack=stack, efficiency=api.locate_example(efficiency), price=price,
                           power_utilisation=power_utilisation)
            for g in parse_list(gpu, str, "gpu") for t in parse_list(tp, int, "tp")]


deployment_options = group("setups", _setups, {
    "gpu": (str, typer.Option("h100", "--gpu", "-g", metavar="LIST", help="the GPU of every replica (a comma list compares)")),
    "tp": (str, typer.Option("1", "--tp", metavar="LIST", help="tensor-parallel GPUs per replica (a comma list compares)")),
    "ep": (int, typer.Option(1, "--ep", help="expert-parallel ways (MoE; divides --tp)")),
    "replicas": (int, typer.Option(1, "--replicas", "-R", help="data-parallel replicas")),
    "precision": (str, typer.Option("bf16", "--precision", help="weights and compute precision")),
    "scheme": (Optional[str], typer.Option(None, "--scheme", help="decoding scheme (default: the model's)")),
    "block": (Optional[int], typer.Option(None, "--block", help="block length")),
    "tpf": (Optional[float], typer.Option(None, "--tpf", help="mean tokens per forward")),
    "steps": (Optional[float], typer.Option(None, "--steps", help="total steps at the median answer (instead of --tpf)")),
    "tpf_spread": (Optional[float], typer.Option(None, "--tpf-spread", help="coefficient of variation of a request's "
                                                 "passes per block (gamma) [the published decoding's spread across its "
                                                 "mix of tasks, else 0: every request the mean]")),
    "task": (Optional[str], TaskOpt),
    "min_accuracy": (Optional[str], MinAccuracyOpt),
    "max_running": (Optional[int], typer.Option(None, "--max-running", "--batch", help="running requests per replica "
                                                "[the stack's max_running_requests, else 256]")),
    "release": (Optional[str], typer.Option(None, "--release", help="synchronous (a block lasts until the batch's "
                                            "slowest request commits) | first-done [the stack's, else synchronous]")),
    "stack": (Optional[str], StackOpt),
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
    named = [k for k, v in given.items() if v not in (None, False)]
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
    loads = []
    if kind == "concurrency":
        loads = [api.ClosedLoop(u, think) for u in parse_list(concurrency, int, "concurrency")]
    elif kind == "rate":
        loads = [api.OpenLoop(r, arrival, cv) for r in parse_list(rate, float, "rate")]
    elif kind == "job":
        loads = [api.BatchJob(job, parallel if parallel is not None else 1)]
    elif kind == "trace":
        loads = [api.read_trace(api.locate_example(trace), fmt=trace_format, time_scale=time_scale, sample=sample,
                                seed=seed)]
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
    "sample": (Optional[int], typer.Option(None, "--sample", metavar="N", help="trace: replay N requests drawn from it")),
    "requests": (int, typer.Option(2000, "--requests", help="simulated requests per synthetic load")),
    "seed": (int, typer.Option(0, "--seed", help="random seed")),
})


def _targets(**given):
    targets = api.Targets(**given)
    for k, v in targets.as_dict().items():
        if not (math.isfinite(v) and v > 0):
            raise UsageError(f"target {k} must be a positive number, got {v}")
    return targets if targets.as_dict() else None


latency_targets = group("targets", _targets, LATENCY_TARGETS)


@app.command(epilog=EXAMPLES)
@deployment_options
@load_options
@latency_targets
@output_options(charts=False)
def serve(
    model: Optional[str] = typer.Argument(None, help="bundled id, local file, or Hub id, or a comma list to "
                                          "compare (e.g. a dLLM and the AR model it replaces) [LLaDA-8B-Instruct]"),
    prompt: str = typer.Option("256", "--prompt", help="prompt tokens: N, 'p50:N,p90:M', or @FILE"),
    answer: Optional[str] = typer.Option(None, "--answer", help="answer tokens: N, 'p50:N,p90:M', or @FILE (default: the model's)"),
    max_rate: bool = typer.Option(False, "--max-rate", help="find the highest rate sustained within the targets (bisection)"),
    hardware: Optional[list[str]] = typer.Option(None, "--hardware", metavar="PATH", help="extra GPU YAML file or folder (repeatable; also $DLMCOST_HARDWARE)"),
    *, setups, load, targets, output,
):
    """What a fixed deployment delivers under a given load: throughput, latency, cost.

    One load (--concurrency, --rate, --job or --trace), a list of concurrencies or rates for a
    load curve and its Pareto front, and/or --max-rate."""
    if not load.loads and not max_rate:
        raise UsageError("give a load: --concurrency N, --rate R, --job N (--parallel P) or --trace FILE, or --max-rate")
    if output.plot and not load.loads:
        raise UsageError("--plot draws a load curve: give --concurrency or --rate")
    models = [api.locate_example(m) for m in parse_list(model, str, "model")] if model else [api.DEFAULT_MODEL]
    result = api.serve_many(models, load.loads, setups, prompt=prompt, answer=answer, targets=targets,
                            find_max_rate=max_rate, arrival=load.arrival, cv=load.cv, requests=load.requests,
                            seed=load.seed, hardware=hardware)
    record = result.record()
    check_finite(record, "serve result")
    from ..render.serve import render_serve, serve_chart

    out = held_output(output.plot)
    render_serve(record, output.fmt, out)
    draw(serve_chart(record) if output.plot else None, output.plot, out)
