"""Service-level targets a deployment is held to, and a target it misses: the one definition
that `serve` marks its load points with and `plan` searches against."""

from __future__ import annotations

from dataclasses import asdict, dataclass


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
