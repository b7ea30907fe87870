"""The loads `dlmcost serve` puts on a fixed deployment, and the arrival times they generate.

    ClosedLoop(users, think_s)    N users; each sends its next request think_s after its answer
    OpenLoop(rate, arrival, cv)   requests/s: "poisson" (exponential gaps, CV 1), "constant"
                                  (equal gaps, CV 0) or "gamma" (gamma gaps with the given CV:
                                  CV > 1 is bursty)
    BatchJob(requests, parallel)  a finite batch job: N requests, P in flight at a time, from t = 0
                                  (a closed loop of P users without think time); its makespan
    TraceReplay(arrival_s, prompt_tokens, answer_tokens)   a request trace, replayed as recorded

Lengths of the synthetic loads are drawn from `traffic.LengthDist`; a trace brings its own. All
draws come from one seeded generator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import UsageError
from .traffic import check_rate, check_think

ARRIVALS = ("poisson", "constant", "gamma")
MAX_REQUESTS = 2_000_000
REQUESTS_PER_USER = 4  # a closed loop runs at least so many requests a user: the first round, then a loop


def in_order(values: np.ndarray, n: int) -> np.ndarray:
    """n of the values, taken in order and from the first again once they run out (a sample's
    classes, lengths or cached shares for more requests than it holds)."""
    return values[np.arange(n) % len(values)]


def loop_requests(requests: int, users: int) -> int:
    """The requests a closed loop of `users` simulates: `requests`, or REQUESTS_PER_USER a user where
    that is more (with fewer, the users' first round is the whole run: a burst, not a loop)."""
    return max(requests, REQUESTS_PER_USER * users)


@dataclass(frozen=True)
class ClosedLoop:
    users: int
    think_s: float = 0.0

    def __post_init__(self):
        if not (isinstance(self.users, int) and 0 < self.users <= 100_000):
            raise UsageError(f"concurrency must be a whole number of users in 1..100,000, got {self.users}")
        check_think(self.think_s)

    @property
    def label(self) -> str:
        return f"{self.users} users" + (f", think {self.think_s:g} s" if self.think_s else "")


def check_cv_taken(arrival: str, cv: float) -> None:
    """--cv (1 unless given) shapes gamma gaps only: Poisson's and constant gaps have their own spread,
    so another value beside them would be ignored without a word."""
    if arrival != "gamma" and cv != 1.0:
        raise UsageError(f"--cv goes with --arrival gamma (the {arrival} arrivals' gaps take none), got {cv:g}")


@dataclass(frozen=True)
class OpenLoop:
    rate: float
    arrival: str = "poisson"
    cv: float = 1.0  # of the inter-arrival gaps, for "gamma"

    def __post_init__(self):
        check_rate(self.rate)
        if self.arrival not in ARRIVALS:
            raise UsageError(f"arrivals: choose one of {', '.join(ARRIVALS)}, got '{self.arrival}'")
        if self.arrival == "gamma" and not (math.isfinite(self.cv) and 0 < self.cv <= 100):
            raise UsageError(f"--cv: the inter-arrival coefficient of variation must be in (0, 100], got {self.cv}")
        check_cv_taken(self.arrival, self.cv)

    @property
    def label(self) -> str:
        kind = {"poisson": "Poisson", "constant": "constant", "gamma": f"gamma, CV {self.cv:g}"}[self.arrival]
        return f"{self.rate:g} req/s ({kind})"

    def gaps(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """n inter-arrival gaps with mean 1 / rate."""
        mean = 1.0 / self.rate
        if self.arrival == "constant":
            return np.full(n, mean)
        if self.arrival == "poisson":
            return rng.exponential(mean, n)
        shape = 1.0 / self.cv ** 2  # gamma: CV^2 = 1 / shape
        return rng.gamma(shape, mean / shape, n)


@dataclass(frozen=True)
class BatchJob:
    requests: int
    parallel: int

    def __post_init__(self):
        if not (isinstance(self.requests, int) and 0 < self.requests <= MAX_REQUESTS):
            raise UsageError(f"--job: the number of requests must be in 1..{MAX_REQUESTS:,}, got {self.requests}")
        if not (isinstance(self.parallel, int) and 0 < self.parallel <= 100_000):
            raise UsageError(f"--parallel must be a whole number in 1..100,000, got {self.parallel}")

    @property
    def label(self) -> str:
        return f"batch job of {self.requests:,} requests, {self.parallel} in parallel"


@dataclass(frozen=True, eq=False)
class TraceReplay:
    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    answer_tokens: np.ndarray
    name: str = "trace"
    cached_tokens: np.ndarray | None = None  # each prompt's tokens in the prefix cache (Mooncake's hash_ids)
    hash_ids_unread: str | None = None  # why the trace's hash_ids were not read, where it has some that were not

    def __post_init__(self):
        a, p, g = (np.asarray(x, float) for x in (self.arrival_s, self.prompt_tokens, self.answer_tokens))
        if not (len(a) == len(p) == len(g)) or len(a) == 0:
            raise UsageError("trace: arrival, prompt and answer columns must have the same, non-zero length")
        if len(a) > MAX_REQUESTS:
            raise UsageError(f"trace: more than {MAX_REQUESTS:,} requests; sample it")
        if not (np.isfinite(a).all() and np.isfinite(p).all() and np.isfinite(g).all()):
            raise UsageError("trace: arrival times and token counts must be finite numbers")
        if (p < 0).any() or (g < 0).any():
            raise UsageError("trace: token counts must be >= 0")
        if self.cached_tokens is not None:
            h = np.asarray(self.cached_tokens, float)
            if len(h) != len(p) or not (np.isfinite(h).all() and (h >= 0).all() and (h <= p).all()):
                raise UsageError("trace: cached tokens must be one a request, 0..its prompt")
        order = np.argsort(a, kind="stable")
        if self.cached_tokens is not None:
            object.__setattr__(self, "cached_tokens", np.round(np.asarray(self.cached_tokens, float)[order]))
        object.__setattr__(self, "arrival_s", a[order] - a[order][0])
        object.__setattr__(self, "prompt_tokens", np.round(p[order]))
        object.__setattr__(self, "answer_tokens", np.maximum(np.round(g[order]), 1.0))

    @property
    def cached_share(self) -> np.ndarray | None:
        """Each request's share of its prompt in the prefix cache (None: the trace says nothing)."""
        if self.cached_tokens is None:
            return None
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.prompt_tokens > 0, self.cached_tokens / np.maximum(self.prompt_tokens, 1), 0.0)

    @property
    def label(self) -> str:
        span = float(self.arrival_s[-1])
        return f"{self.name}: {len(self.arrival_s):,} requests over {span:,.0f} s"
