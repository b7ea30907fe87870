"""The fewest replicas meeting the targets, or the nearest a candidate gets (`fewest_replicas`: a
bracket grown and narrowed by steps read off the queueing shape), and that verdict alone against
a caller's limit (`meets_within`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from ..results import Deployment, Targets
from ...serving.traffic import RequestSample, Traffic
from .candidate import Candidate, Found, Pricing, _deployment, _run, mean_window_tokens, saturation_rps
from .floors import _floor_ratio, replica_cap, separate_replicas
from .queueing import SATURATED, _crossing, _latency_ratio

COST_TARGETS = ("max_gpus", "max_usd_per_mtok")  # more replicas only add GPUs and dollars per token
ABSURD = "absurd"  # what the search returns when told to give up: the answer needs more replicas than that


def fewest_replicas(c: Candidate, sample: RequestSample, traffic: Traffic, targets: Targets, pricing: Pricing,
                    give_up: Callable[[int], bool] | None = None) -> Found | str | None:
    """The fewest replicas meeting the targets, or the nearest this candidate gets; None when it
    completes no request at all. `give_up(R)`: whether an answer of R replicas or more no longer
    matters to the caller; the search then returns ABSURD as soon as the answer is known to be at
    least such an R (only where the targets set no cost or GPU cap, so that the answer is certain
    to meet them: otherwise the search might end in a miss, which the caller must see)."""
    capacity = saturation_rps(c, sample)
    if not capacity > 0:
        return None
    return _search_replicas(c, sample, traffic, targets, pricing, capacity,
                            give_up if not any(getattr(targets, name) is not None for name in COST_TARGETS) else None)


def _search_replicas(c: Candidate, sample: RequestSample, traffic: Traffic, targets: Targets, pricing: Pricing,
                     capacity: float, give_up: Callable[[int], bool] | None, start: int | None = None,
                     known_fail: int = 0, known_good: int | None = None) -> Found | str:
    """`fewest_replicas` at a given saturation throughput of one replica; `start`: the R to
    simulate first, where a guess is known (the band's ends), instead of the fewest below SATURATED;
    `known_fail` / `known_good`: replicas already known to miss / to meet the targets (the band's
    ends, from the same deployment at a faster or slower clock: meeting them only gets harder as
    every step slows), which bound the bracket without simulating them."""
    lo = 1 if traffic.closed_loop else math.floor(traffic.rate / capacity) + 1  # utilisation below 1
    top = separate_replicas(c, sample, traffic)
    cap = replica_cap(c, traffic, targets, pricing, mean_window_tokens(c, sample))
    if cap is not None:
        top = min(top, cap)
    top = max(top, lo)
    cache: dict[int, Deployment] = {}

    def at(r: int) -> Deployment:
        if r not in cache:
            cache[r] = _deployment(c, _run(c, sample, traffic, r), r, capacity, pricing, targets)
        return cache[r]

    def hopeless(d: Deployment) -> bool:
        return any(m.target in COST_TARGETS for m in d.misses)

    def found(d: Deployment, points: bool = True) -> Found:
        pts = [] if traffic.closed_loop or not points else \
            [(traffic.rate / (r * capacity), _latency_ratio(d, targets)) for r, d in cache.items()]
        return Found(c, d, capacity, pts)

    floor = _floor_ratio(c, sample, targets)
    if floor > 1:  # even alone on a replica a request is too slow
        return found(at(min(lo * 4, top)), points=False)
    if give_up is not None and give_up(lo):
        return ABSURD

    below = max(lo - 1, known_fail)  # fewer than lo replicas cannot keep up with the load
    if known_good is not None and known_good <= below + 1:
        return found(at(max(known_good, lo)))
    if start is not None:
        first = min(max(below + 1, start), top)
    elif traffic.closed_loop:
        first = lo
    else:  # a point past SATURATED says little but that it fails: start at the fewest below it
        first = max(lo, math.ceil(traffic.rate / (capacity * SATURATED) * (1 + 1e-9)))
    if known_good is not None and first >= known_good:
        fail, good = below, known_good
    elif at(first).meets:
        fail, good = below, first
    else:
        fail, good = first, known_good
    steps = _Steps(traffic, capacity, floor, top)
    while good is None:
        if fail >= top or hopeless(at(fail)):
            return found(at(fail), points=False)  # the nearest this candidate gets (marked with its misses)
        if give_up is not None and give_up(fail + 1):
            return ABSURD
        r = steps.grow(fail, _ratios(cache, targets, hopeless))
        if at(r).meets:
            good = r
        else:
            fail = r
    while good - fail > 1:
        if give_up is not None and give_up(fail + 1):
            return ABSURD
        r = steps.narrow(fail, good, _ratios(cache, targets, hopeless))
        if at(r).meets:
            good = r
        else:
            fail = r
    return found(at(good))


MEETS = "meets"  # what `meets_within` returns for a candidate whose fewest replicas meet the targets in time


def meets_within(c: Candidate, sample: RequestSample, traffic: Traffic, targets: Targets, pricing: Pricing,
                 give_up: Callable[[int], bool], fewest: int) -> str | None:
    """What `fewest_replicas` would answer for an open-loop candidate whose lone requests meet the
    latency targets, when only its verdict matters (a row past those an output shows): MEETS when
    its fewest replicas meeting the targets are fewer than the first R with give_up(R), ABSURD
    when they are not, None when it completes no request. `fewest`: a lower bound on the replicas
    that keep up with the load (`_search_replicas`' lo, below which nothing is an answer).

    Meeting the targets only gets easier with more replicas (the search's bracketing rests on the
    same), and R_sep replicas, each request served alone, meet them (its lone requests do); so one
    simulation at R_max, the most replicas short of giving up, settles it, and none is needed when
    R_max >= R_sep. The saturation run, for lo, only where the answer may be MEETS."""
    if give_up(fewest):
        return ABSURD
    most, over = fewest, fewest * 2  # the most replicas short of giving up, and the fewest that give up
    while not give_up(over):
        most, over = over, over * 2
    while over - most > 1:
        mid = (most + over) // 2
        most, over = (mid, over) if not give_up(mid) else (most, mid)
    if most < separate_replicas(c, sample, traffic):
        d = _deployment(c, _run(c, sample, traffic, most), most, 0.0, pricing, targets)
        if not d.meets:
            return ABSURD
    capacity = saturation_rps(c, sample)
    if not capacity > 0:
        return None
    return ABSURD if give_up(math.floor(traffic.rate / capacity) + 1) else MEETS


def _ratios(cache: dict[int, Deployment], targets: Targets, hopeless) -> dict[int, float]:
    """The worst latency ratio of each R simulated (those missing a cost or GPU target left out)."""
    return {r: _latency_ratio(d, targets) for r, d in cache.items() if not hopeless(d)}


@dataclass
class _Steps:
    """The R a replica search simulates next. Open loop: read off the queueing shape (`_crossing`)
    through the simulated points nearest the target, never past 4x the last failing R while
    growing, and bisecting whenever two steps in a row left more than half of the bracket; closed
    loop: doubling the users' share, then bisecting."""

    traffic: Traffic
    capacity: float
    floor: float
    top: int
    widths: list[int] = field(default_factory=list)

    def _rho(self, r: int) -> float:
        return self.traffic.rate / (r * self.capacity)

    def _replicas(self, u: float) -> int:
        """The fewest replicas at a utilisation of `u` or less."""
        return math.ceil(self.traffic.rate / (self.capacity * u) * (1 + 1e-9))

    def grow(self, fail: int, ratios: dict[int, float]) -> int:
        if self.traffic.closed_loop:
            return min(fail * 2, self.top)
        u = _crossing([(self._rho(r), m) for r, m in ratios.items()], self.floor)
        r = self._replicas(u) if u else fail * 2
        return min(max(r, fail + max(1, fail // 4)), fail * 4, self.top)

    def narrow(self, fail: int, good: int, ratios: dict[int, float]) -> int:
        self.widths.append(good - fail)
        if self.traffic.closed_loop or (len(self.widths) > 2 and self.widths[-1] * 2 > self.widths[-3]):
            return (fail + good) // 2
        u = _crossing([(self._rho(r), m) for r, m in ratios.items()], self.floor)
        r = self._replicas(u) if u else (fail + good) // 2
        return min(max(r, fail + 1), good - 1)
