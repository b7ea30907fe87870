"""Result types of a plan and the money / energy formulas (per deployment).

    $/hour          = GPUs x price per GPU-hour
    output tok/s    = served requests/s x mean answer tokens
    $/Mtok          = $/hour / (output tok/s x 3600) x 1e6
    J/token         = GPUs x board power (W) x power utilisation / output tok/s

Costs are at the offered load: provisioned GPUs are paid for whether busy or not.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


def usd_per_hour(gpus: int, price_per_gpu_hour: float) -> float:
    return gpus * price_per_gpu_hour


def usd_per_mtok(usd_hour: float, output_tokens_per_s: float) -> float:
    return usd_hour / (output_tokens_per_s * 3600.0) * 1e6


def joules_per_token(gpus: int, board_power_w: float | None, power_utilisation: float,
                     output_tokens_per_s: float) -> float | None:
    if board_power_w is None:
        return None
    return gpus * board_power_w * power_utilisation / output_tokens_per_s


@dataclass(frozen=True)
class Targets:
    """Service-level targets; None = not constrained. Latencies in seconds."""

    p50_latency_s: float | None = None
    p95_latency_s: float | None = None
    p99_latency_s: float | None = None
    p95_first_block_s: float | None = None
    min_tokens_per_s_per_user: float | None = None
    max_usd_per_mtok: float | None = None
    max_gpus: int | None = None

    def as_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class Miss:
    """A target a deployment fails: its name, the value reached and the limit."""

    target: str
    value: float
    limit: float

    @property
    def ratio(self) -> float:
        """How far off (> 1): value / limit for maxima, limit / value for the minimum."""
        if self.target == "min_tokens_per_s_per_user":
            return self.limit / self.value if self.value > 0 else float("inf")
        return self.value / self.limit if self.limit > 0 else float("inf")

    def describe(self) -> str:
        op = "<" if self.target == "min_tokens_per_s_per_user" else ">"
        return f"{self.target} {self.value:.4g} {op} {self.limit:.4g}"


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
    usd_per_hour: float
    usd_per_mtok: float
    joules_per_token: float | None
    price_per_gpu_hour: float
    price_source: str
    misses: list[Miss] = field(default_factory=list)
    pareto: bool = False

    @property
    def gpus(self) -> int:
        return self.replicas * self.tp

    @property
    def meets(self) -> bool:
        return not self.misses

    def record(self) -> dict:
        out = {k: v for k, v in asdict(self).items() if k != "misses"}
        out["gpus"] = self.gpus
        out["meets_targets"] = self.meets
        out["misses"] = [dict(target=m.target, value=m.value, limit=m.limit) for m in self.misses]
        return out


def check_targets(d: Deployment, t: Targets) -> list[Miss]:
    checks = [("p50_latency_s", d.p50_latency_s, t.p50_latency_s), ("p95_latency_s", d.p95_latency_s, t.p95_latency_s),
              ("p99_latency_s", d.p99_latency_s, t.p99_latency_s),
              ("p95_first_block_s", d.p95_first_block_s, t.p95_first_block_s),
              ("max_usd_per_mtok", d.usd_per_mtok, t.max_usd_per_mtok), ("max_gpus", d.gpus, t.max_gpus)]
    out = [Miss(name, value, limit) for name, value, limit in checks if limit is not None and value > limit]
    if t.min_tokens_per_s_per_user is not None and d.tokens_per_s_per_user < t.min_tokens_per_s_per_user:
        out.append(Miss("min_tokens_per_s_per_user", d.tokens_per_s_per_user, t.min_tokens_per_s_per_user))
    return out


def pareto_front(deployments: list[Deployment]) -> list[Deployment]:
    """Deployments no other beats on both $/Mtok and p95 latency (marks them `pareto`)."""
    front = []
    for d in sorted(deployments, key=lambda x: (x.usd_per_mtok, x.p95_latency_s)):
        if not front or d.p95_latency_s < front[-1].p95_latency_s:
            front.append(d)
    for d in front:
        d.pareto = True
    return front
