"""A deployment's capacity: its saturation, and the highest rate it sustains within targets.

`saturation` is what it completes with every batch always full (the rate no load outruns);
`max_rate` bisects under that rate for the highest open-loop rate within the targets, and
`why_not` says why a rate fails. Each question is a few loads measured (measure.py).
`flag_memory_binds` marks and says when a load runs into the memory limit, where the K/V grows
as a request runs: the first-done release then allocates it as tokens come and preempts where
it runs out, as engines do; the synchronous release reserves each request's whole final K/V
from admission, stricter than they are.
"""

from __future__ import annotations

import math
import warnings

from ...errors import DlmcostWarning
from ...safe_text import shown
from .. import memory_binding
from ..loads import BatchJob, ClosedLoop, OpenLoop, loop_requests
from ..simulate import in_flight_cap
from ..targets import Miss, Targets
from ..traffic import MAX_RATE, MIN_RATE
from .measure import DEFAULT_REQUESTS, SUSTAIN_FRACTION, Point, evaluate
from .prepared import Prepared, memory_limit

MAX_RATE_STEPS = 14  # bisection halvings of the rate interval: 2^-14 of the saturation rate


def saturation(prep: Prepared, *, requests: int = DEFAULT_REQUESTS, seed: int = 0) -> dict:
    """What the deployment completes with every batch always full (a closed loop of more users
    than the replicas hold, no think time): no rate above it is sustained, and no load gets more
    output tokens/s. Its requests/s (`rate`), output tokens/s (in all and per GPU), and the
    requests the replicas hold at once (`in_flight`: beyond it a request waits for a place)."""
    from dataclasses import replace

    one = replace(prep, setup=replace(prep.setup, replicas=1), gpus=prep.setup.tp)  # replicas are alike
    cap = in_flight_cap(prep.max_running, prep.first_block_outside_limit)
    users = 2 * cap + 1  # always full
    p = evaluate(one, ClosedLoop(users), requests=loop_requests(requests, users), seed=seed)
    r = prep.setup.replicas
    return dict(rate=r * p.requests_per_s, output_tokens_per_s=r * p.output_tokens_per_s,
                output_tokens_per_s_per_gpu=p.output_tokens_per_s_per_gpu, in_flight=r * cap)


def saturation_rate(prep: Prepared, *, requests: int = DEFAULT_REQUESTS, seed: int = 0) -> float:
    """Requests/s the deployment completes with every batch always full (`saturation`)."""
    return saturation(prep, requests=requests, seed=seed)["rate"]


def max_rate(prep: Prepared, targets: Targets, *, arrival: str = "poisson", cv: float = 1.0,
             requests: int = DEFAULT_REQUESTS, seed: int = 0, top: float | None = None) -> dict:
    """The highest open-loop rate the deployment sustains within the targets, by bisection on
    (0, saturation]: a rate passes when at least SUSTAIN_FRACTION of it is served and no target
    is missed. The same random draws at every rate, so the arrivals are the same gaps rescaled.
    `top`: the saturation rate, when it is known already."""
    top = top if top is not None else saturation_rate(prep, requests=requests, seed=seed)

    def ok(rate: float) -> bool:
        p = evaluate(prep, OpenLoop(rate, arrival, cv), requests=requests, seed=seed, targets=targets)
        return not p.misses and not p.overloaded

    # the rates tried stay in the range a rate may be given in (RATE_RANGE): a slow deployment's
    # halvings reached 5e-7 req/s, and a fast one's saturation 2.5e9, each refused as if the user
    # had given it ("the request rate must be in ...", exit 2)
    lo, hi = 0.0, min(top, MAX_RATE)
    if hi < MIN_RATE:
        return dict(rate=None, saturation_rate=top, targets=targets.as_dict(), arrival=arrival,
                    bisection_steps=0, resolution_rps=top,
                    reason=f"it saturates at {top:.4g} req/s, under the lowest rate simulated ({MIN_RATE:g} req/s)")
    steps = 0  # the halvings run: none where the top itself is sustained (the answer is exact)
    if ok(hi):
        lo = hi
    else:
        for steps in range(1, MAX_RATE_STEPS + 1):
            mid = (lo + hi) / 2
            if mid < MIN_RATE:  # lo is 0 (every rate tried missed): none lower is simulated
                steps -= 1
                break
            lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    reason = None
    if lo <= 0:  # what the lowest rate tried missed: the answer "none" says why
        p = evaluate(prep, OpenLoop(hi, arrival, cv), requests=requests, seed=seed, targets=targets)
        reason = why_not(p, hi)
    # the sustained rate lies in [lo, hi): the last interval's width (0 where the top is met)
    return dict(rate=lo if lo > 0 else None, saturation_rate=top, targets=targets.as_dict(), arrival=arrival,
                bisection_steps=steps, resolution_rps=hi - lo, reason=reason)


def why_not(p: Point, rate: float) -> str:
    """Why a load fails: the targets it misses (value against limit), or the rate it does not keep up with."""
    missed = [Miss(m["target"], m["value"], m["limit"]).describe() for m in p.misses]
    if p.overloaded:
        missed.append(f"served {p.requests_per_s:.4g} req/s, under {SUSTAIN_FRACTION:.0%} of its arrivals (queues grow)")
    return f"at {rate:.4g} req/s: " + "; ".join(missed)


def requests_memory_holds(prep: Prepared) -> float:
    """How many of the deployment's requests one replica's memory holds at once, each at its whole
    final length (memory_binding.requests_memory_holds over the requests simulated)."""
    return memory_binding.requests_memory_holds(prep.table.mem_share, prep.classes())


def memory_binds(prep: Prepared, load, point: Point) -> bool:
    """Whether the load asks for more requests at once than memory holds at their final lengths.
    Never where the running limit holds no more than memory does (the limit binds first). Else a
    job's parallel requests or a closed loop's users per replica (without think time: every user
    always in flight) beyond it; any other load (open, trace, users that think) by what the run
    did: memory_binding.peak_binds on the most requests a replica held at once (the peak, not the
    mean, which a short run's ramp and drain pull down)."""
    held = requests_memory_holds(prep)
    cap = in_flight_cap(prep.max_running, prep.first_block_outside_limit)
    if isinstance(load, BatchJob) or (isinstance(load, ClosedLoop) and not load.think_s):
        asked = load.users if isinstance(load, ClosedLoop) else load.parallel
        return cap > held and math.ceil(asked / prep.setup.replicas) > held
    return memory_binding.peak_binds(point.most_running, held, cap)


def flag_memory_binds(prep: Prepared, loads: list, points: list[Point]) -> None:
    """Marks the points of the loads that run into memory (`Point.memory_binds`), where the K/V grows
    as a request runs (a decoding that stops after the token or block that ends the answer, not a
    whole canvas), and warns once. First-done release: the simulation allocates K/V as tokens come
    and preempts the latest admitted where it runs out, as vLLM and SGLang do (`Point.preemptions`).
    Synchronous release: it reserves each request's final length from admission, while the engines
    start more requests at once, so the times to the first token there are an upper bound."""
    if not memory_binding.grows_as_it_runs(prep.decoding.scheme):
        return
    for ld, p in zip(loads, points):
        p.memory_binds = memory_binds(prep, ld, p)
    bound = [p.load for p in points if p.memory_binds]
    if bound and prep.release == "synchronous":
        warnings.warn(f"memory binds for {deployment_words(prep)} at {', '.join(bound)}: a replica holds about "
                      f"{held_words(prep)}, each reserved at its final length from admission; vLLM and SGLang "
                      f"allocate K/V as tokens come and preempt when it runs out, so they start more at once: the "
                      f"first-token times here are an upper bound", DlmcostWarning, stacklevel=3)
    elif bound:
        preempted = sum(p.preemptions for p in points if p.memory_binds)
        warnings.warn(f"memory binds for {deployment_words(prep)} at {', '.join(bound)}: a replica holds about "
                      f"{held_words(prep)} at their final lengths; K/V is allocated as tokens come and, where it "
                      f"runs out, the latest admitted request is preempted and recomputed, as in vLLM and SGLang "
                      f"({preempted:,} preemptions of the measured requests; the growth and the recompute are "
                      f"approximate: methodology, 'When memory binds')", DlmcostWarning, stacklevel=3)


def deployment_words(prep: Prepared) -> str:
    """The deployment as serve's header names it, every setting a comparison can vary: model, GPU,
    TP (and EP), precision, K/V dtype, decoding and running limit."""
    s = prep.setup
    ep = f" EP{s.ep}" if s.ep > 1 else ""
    return (f"{shown(prep.model)} on {prep.gpu_name} TP{s.tp}{ep} {s.precision} K/V {s.kv_dtype}, "
            f"{prep.decoding.label}, running <= {prep.max_running}")


def held_words(prep: Prepared) -> str:
    """What a replica's memory holds: of requests at the mean length, and where lengths vary, beside the
    header's count of the longest (its "memory fits")."""
    held = f"{requests_memory_holds(prep):,.0f} requests of these lengths"
    longest = memory_limit(prep.table)
    if longest is None or f"{longest:,}" == f"{requests_memory_holds(prep):,.0f}":
        return held
    return f"{held} on average ({longest:,} of the longest: the header's \"memory fits\")"
