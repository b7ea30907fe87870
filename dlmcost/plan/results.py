"""Result types of a plan, its checks against the targets, ranking and Pareto front (per
deployment); the money / energy formulas are serving/costs.py's, applied here as:

    $/hour          = GPUs x price per GPU-hour
    output tok/s    = served requests/s x mean answer tokens
    tok/s per GPU   = output tok/s / GPUs
    $/Mtok          = $/hour / (output tok/s x 3600) x 1e6
    $/Mtok at capacity = $/hour / (sustained requests/s x mean answer tokens x 3600) x 1e6
    J/token         = GPUs x board power (W) x (idle x (1 - busy) + power utilisation x busy) / output tok/s
    $/Mtok low, high = $/Mtok at the low and high ends of the price's range (costs.price_range)

$/Mtok is at the offered load: provisioned GPUs are paid for whether busy or not. At capacity it
is at the highest load the same deployment sustains within the latency targets (`sustained_rps`),
which ranks how efficiently it uses its GPUs. A GPU without a price has no costs (None).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from ..serving.costs import (joules_per_token, usd_per_hour, usd_per_mtok,  # noqa: F401  (plan's names for them)
                             usd_per_mtok_range)
from ..serving.targets import Miss, Targets


@dataclass
class Deployment:
    gpu: str
    gpu_key: str
    replicas: int
    tp: int
    precision: str
    scheme: str
    block: int | None
    tpf: float | None
    decoding: str
    max_batch: int
    p50_latency_s: float
    p95_latency_s: float
    p99_latency_s: float
    p95_first_block_s: float
    tokens_per_s_per_user: float
    served_rps: float
    capacity_rps: float
    headroom: float  # capacity / served - 1
    usd_per_hour: float | None  # None: no price for this GPU
    usd_per_mtok: float | None
    joules_per_token: float | None
    price_per_gpu_hour: float | None
    price_source: str | None
    kv_dtype: str = "bf16"  # the K/V cache's number format (--kv-dtype)
    output_tokens_per_s: float = 0.0
    tokens_per_s_per_gpu: float = 0.0
    sustained_rps: float = 0.0  # the highest load (requests/s) it serves within the latency targets
    usd_per_mtok_at_capacity: float | None = None
    gpu_busy_fraction: float = 1.0  # share of the time a replica runs passes (the simulated one)
    model: str = ""
    misses: list[Miss] = field(default_factory=list)
    pareto: bool = False
    absurd: bool = False
    price_per_gpu_hour_low: float | None = None  # the price's range: public low and high list prices
    price_per_gpu_hour_high: float | None = None
    usd_per_mtok_low: float | None = None  # $/Mtok at them
    usd_per_mtok_high: float | None = None
    # more requests at once than memory holds at their final lengths, for K/V that grows as a request
    # runs (serving/memory_binding.py): allocated as tokens come and preempted where it runs out (under
    # a synchronous release, held at final lengths: first-token times and replica count upper bounds)
    memory_binds: bool = False
    preemptions: int = 0  # times the simulated replica's measured requests were preempted and recomputed
    memory_fits: int = 0  # the longest requests a replica's memory holds at their final lengths
    # its steps as simulated / as predicted (1; `plan --conservative`: its stack's error band's slower end)
    step_time_scale: float = 1.0
    # the search again at the two ends of the stack's error band: gpus, usd_per_mtok, p95_latency_s
    # -> [at the faster end, at the slower end] (None: no replica count meets the targets there)
    intervals: dict = field(default_factory=dict)

    @property
    def gpus(self) -> int:
        return self.replicas * self.tp

    @property
    def meets(self) -> bool:
        return not self.misses

    def record(self) -> dict:
        # (all plain values; the intervals' dict copied, so that a record is the caller's own)
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "misses"}
        out["intervals"] = {k: list(v) if isinstance(v, list) else v for k, v in self.intervals.items()}
        # the batch limit under serve's name for it (sweep's max_batch is the largest batch that fits
        # in memory); max_batch stays for one release (documents.PlanDeployment)
        out["max_running"] = self.max_batch
        out["gpus"] = self.gpus
        out["meets_targets"] = self.meets
        out["misses"] = [dict(target=m.target, value=m.value, limit=m.limit) for m in self.misses]
        return out


def check_targets(d: Deployment, t: Targets) -> list[Miss]:
    checks = [("p50_latency_s", d.p50_latency_s, t.p50_latency_s), ("p95_latency_s", d.p95_latency_s, t.p95_latency_s),
              ("p99_latency_s", d.p99_latency_s, t.p99_latency_s),
              ("p95_first_block_s", d.p95_first_block_s, t.p95_first_block_s),
              ("max_usd_per_mtok", d.usd_per_mtok, t.max_usd_per_mtok), ("max_gpus", d.gpus, t.max_gpus)]
    out = [Miss(name, value, limit) for name, value, limit in checks
           if limit is not None and value is not None and value > limit]
    if t.min_tokens_per_s_per_user is not None and d.tokens_per_s_per_user < t.min_tokens_per_s_per_user:
        out.append(Miss("min_tokens_per_s_per_user", d.tokens_per_s_per_user, t.min_tokens_per_s_per_user))
    return out


def pareto_front(deployments: list[Deployment]) -> list[Deployment]:
    """Priced deployments no other matches or beats on both $/Mtok and p95 latency while beating on one
    (marks them `pareto`): in order of $/Mtok, then p95, each faster than the last kept (of exact
    twins, the first)."""
    front = []
    priced = [d for d in deployments if d.usd_per_mtok is not None]
    for d in sorted(priced, key=lambda x: (x.usd_per_mtok, x.p95_latency_s)):
        if not front or d.p95_latency_s < front[-1].p95_latency_s:
            front.append(d)
    for d in front:
        d.pareto = True
    return front


ABSURD_RATIO = 10.0  # a deployment this many times dearer (or, unpriced, larger) than its model's best


def mark_absurd(deployments: list[Deployment], ratio: float = ABSURD_RATIO) -> None:
    """Marks (`absurd`) the deployments meeting the targets that cost more than `ratio` x the
    cheapest $/Mtok among them, or, without a price, use more than `ratio` x the fewest GPUs."""
    costs = [d.usd_per_mtok for d in deployments if d.usd_per_mtok is not None]
    fewest = min((d.gpus for d in deployments), default=None)
    for d in deployments:
        if d.usd_per_mtok is not None:
            d.absurd = d.usd_per_mtok > ratio * min(costs)
        else:
            d.absurd = d.gpus > ratio * fewest


def rank_key(d: Deployment) -> tuple:
    """Cheapest $/Mtok first, ties (every one-GPU deployment at a light load) broken by $/Mtok at
    capacity, then p95 latency; deployments without a price after the priced ones, fewest GPUs first."""
    if d.usd_per_mtok is None:
        return (1, d.gpus, 0.0, d.p95_latency_s, d.gpu)
    return (0, d.usd_per_mtok, d.usd_per_mtok_at_capacity or 0.0, d.p95_latency_s, d.gpu)
