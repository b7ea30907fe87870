"""A plan's candidates searched in turn, cheapest bound first, and ahead of their turn on the
machine's cores (`Turns`): what the searches before a candidate found (`Cheapest`, the rows shown:
`Shown`) decides whether its search is needed and where it may stop (`absurd_from`).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .bounds import fewest_by_bound
from .replicas import (ABSURD, Candidate, Found, Pricing, fewest_replicas, floor_fails, mean_window_tokens,
                       open_loop_usd_per_mtok)
from .results import ABSURD_RATIO, Deployment, Targets, usd_per_hour, usd_per_mtok
from .side_by_side import Ahead
from ..serving.simulate import SimulationWork
from ..serving.traffic import RequestSample, Traffic


@dataclass
class Cheapest:
    """The cheapest deployment meeting the targets found so far in one set (plan or AR baseline):
    its $/Mtok (of those with a price) and its GPUs (of all), what `mark_absurd` compares with."""

    usd_per_mtok: float = math.inf
    gpus: float = math.inf

    def add(self, d: Deployment) -> None:
        if d.usd_per_mtok is not None:
            self.usd_per_mtok = min(self.usd_per_mtok, d.usd_per_mtok)
        self.gpus = min(self.gpus, d.gpus)


def absurd_from(c: Candidate, sample: RequestSample, traffic: Traffic, pricing: Pricing,
                cheapest: Cheapest) -> Callable[[int], bool]:
    """Whether a deployment of R or more replicas of `c` meeting the targets would be absurd
    (`mark_absurd`) whatever else is found, since the cheapest can only get cheaper: its $/Mtok
    over ABSURD_RATIO x the cheapest's (at the offered load, as the deployment will compute it;
    closed loop: a lower bound on it, from the most requests/s the users can send), or, without a
    price, its GPUs over ABSURD_RATIO x the fewest."""
    tokens = mean_window_tokens(c, sample)
    price = pricing.usd.get(c.gpu.key)
    if price is None:
        return lambda r: r * c.tp > ABSURD_RATIO * cheapest.gpus
    if not traffic.closed_loop:
        return lambda r: open_loop_usd_per_mtok(c, r, traffic, tokens, pricing) > ABSURD_RATIO * cheapest.usd_per_mtok
    # each user asks at most once per think time + its shortest request (NFE x the fastest pass);
    # a tenth more, as a margin for a rate measured over a window
    fastest = min(float(np.asarray(c.table.pass_s)[:, 1:].min()), float(np.asarray(c.table.first_pass_s)[:, 1:].min()))
    nfe = np.asarray(c.table.nfe)
    if c.uncached < 1:  # a cached prompt may take a single step of its budget, not the k it takes whole
        nfe = nfe - np.asarray(c.table.prompt_steps) + 1
    most = 1.1 * traffic.users / (traffic.think_s + float(np.min(nfe)) * fastest)
    return lambda r: usd_per_mtok(usd_per_hour(r * c.tp, price), most * tokens) > ABSURD_RATIO * cheapest.usd_per_mtok


class Shown:
    """The `ranked` cheapest $/Mtok among the deployments found to meet the targets (a max-heap of
    their negatives), and whether a candidate is past them: its cost bound over the last of them,
    so that it ranks after every row an output shows whatever its search would find (rows found
    later only push the last one down). None: every row is shown."""

    def __init__(self, ranked: int | None):
        self.ranked = ranked
        self.costs: list[float] = []

    def add(self, d: Deployment) -> None:
        if self.ranked is None or d.usd_per_mtok is None:
            return
        heapq.heappush(self.costs, -d.usd_per_mtok)
        if len(self.costs) > self.ranked:
            heapq.heappop(self.costs)

    def past(self, bound: tuple[int, float, int]) -> bool:
        unpriced, cost, _ = bound
        return (self.ranked is not None and not unpriced and len(self.costs) == self.ranked
                and cost > -self.costs[0])


class Turns:
    """A plan's candidates searched in turn, cheapest bound first (`search_all`), and what they found:
    the deployments meeting the targets (`meeting`) and the misses of each set (plan, baseline),
    the cheapest of those meeting them, the candidates left out as absurd without their search's
    answer (`left_out`) and the rows past those an output shows (`past`, with their fewest replicas
    by the bound), whose verdict alone the caller finds. `prune`: skip and stop the searches whose
    answer cannot change the output (a miss once a deployment meets the targets, and unless `absurd`
    an absurd cost or a row past those shown); else every candidate is searched to the end."""

    def __init__(self, model_id: str, candidates: list[tuple[str, Candidate]], sample: RequestSample,
                 traffic: Traffic, targets: Targets, pricing: Pricing, ranked: int | None, prune: bool,
                 absurd: bool, progress: Callable[[int, int], None] | None):
        self.model_id, self.candidates, self.sample, self.traffic, self.targets, self.pricing = \
            model_id, candidates, sample, traffic, targets, pricing
        self.prune, self.progress = prune, progress
        self.give_up = prune and not absurd  # absurd costs pruned (else searched and kept: `plan`'s `absurd`)
        self.meeting: dict[str, list[Found]] = {"plan": [], "baseline": []}
        self.misses: dict[str, list[Deployment]] = {"plan": [], "baseline": []}
        self.cheapest = {"plan": Cheapest(), "baseline": Cheapest()}
        self.left_out = 0  # candidates known to be absurd without their search's answer
        self.capped = any(getattr(targets, name) is not None for name in ("max_gpus", "max_usd_per_mtok"))
        # the rows an output shows (`ranked`, open loop): the cheapest found so far, and the candidates
        # that cannot be among them (their cost bound over the last shown's $/Mtok)
        self.shown = {name: Shown(ranked if not traffic.closed_loop else None) for name in self.meeting}
        self.past: dict[str, list[tuple[Candidate, int]]] = {name: [] for name in self.meeting}

    def search(self, k: int, cheapest_usd: float, cheapest_gpus: float):
        """Candidate k's search, the cheapest found before it as given (here, or in a worker: its
        answer without the candidate, which stays here)."""
        c = self.candidates[k][1]
        give_up = absurd_from(c, self.sample, self.traffic, self.pricing, Cheapest(cheapest_usd, cheapest_gpus)) \
            if self.give_up else None
        found = fewest_replicas(c, self.sample, self.traffic, self.targets, self.pricing, give_up)
        return (found.deployment, found.capacity, found.points) if isinstance(found, Found) else found

    def decide(self, k: int, throughput: float, bound: tuple) -> tuple[bool, object, tuple | None]:
        """(whether candidate k needs its search, else its answer, and where it is a row past those
        shown, its entry in `past`), from what was taken so far; nothing changed here."""
        name, c = self.candidates[k]
        give_up = self._give_up(k)
        lone_misses = floor_fails(c, self.sample, self.targets)
        free = give_up is not None and not self.capped and not lone_misses  # an answer known by the bound alone
        if self.prune and lone_misses and self.meeting["plan"]:
            return False, None, None  # a miss (at any size), and no miss is reported once a deployment meets the targets
        if free and give_up(fewest_by_bound(throughput, self.traffic)):
            return False, ABSURD, None  # it would meet the targets, but at a cost over the bound
        if free and self.shown[name].past(bound):
            # a row past those shown: only whether it meets the targets is needed (the caller's)
            return False, None, (c, fewest_by_bound(throughput, self.traffic))
        return True, None, None

    def _give_up(self, k: int) -> Callable[[int], bool] | None:
        name, c = self.candidates[k]
        return absurd_from(c, self.sample, self.traffic, self.pricing, self.cheapest[name]) if self.give_up else None

    def _search_args(self, k: int) -> tuple[int, float, float]:
        """Candidate k's search's arguments as what was taken so far gives them."""
        cheapest = self.cheapest[self.candidates[k][0]]
        return k, cheapest.usd_per_mtok, cheapest.gpus

    def _same_path(self, k: int, answer) -> bool:
        """Whether candidate k's search, started on an older cheapest, took the path its turn's would
        have: the search asks give_up only of replica counts up to one past its answer's, and give_up
        holds from some count on, so where it does not hold one past the answer at the cheapest now,
        it held at none of them, then or now (a search stopped as absurd: not vouched for; one whose
        replica completes no request asked it nothing)."""
        if answer is None:
            return True
        if not isinstance(answer, tuple):
            return False
        give_up = self._give_up(k)
        return give_up is None or self.capped or not give_up(answer[0].replicas + 1)

    def take(self, done: int, k: int, answer) -> None:
        """Candidate k's answer, in its turn."""
        name, c = self.candidates[k]
        found = Found(c, *answer) if isinstance(answer, tuple) else answer
        if found == ABSURD:
            self.left_out += 1
        elif found is not None:
            found.deployment.model = self.model_id
            if found.deployment.meets:
                self.meeting[name].append(found)
                self.cheapest[name].add(found.deployment)
                self.shown[name].add(found.deployment)
            else:
                self.misses[name].append(found.deployment)
        if self.progress:
            self.progress(done + 1, len(self.candidates))

    def search_all(self, order: list[int], throughput: list[float], bounds: list[tuple], jobs: int | None,
                   work: SimulationWork) -> None:
        """Every candidate in `order`, each decided, searched where needed and taken in its turn on
        what was taken before it, as one after another. The searches may run on the machine's cores
        ahead of their turn (side_by_side.Ahead): a candidate whose search what was taken so far
        does not rule out starts on it; in its turn it is decided again, its answer dropped where
        its turn rules the search out (a search started ahead prunes less: what it spent is not
        counted), and run again here where its turn's cheapest could have changed its path."""
        turns: deque = deque()  # (done, k, its search's handle or None, its decision where it is its turn's)
        with Ahead(self.search, len(order), jobs, work) as ahead:
            def take_oldest() -> None:
                done, k, handle, decision = turns.popleft()
                needed, answer, past = decision or self._decision(k, throughput[k], bounds[k])
                if past is not None:
                    self.past[self.candidates[k][0]].append(past)
                if not needed:
                    ahead.drop(handle)
                elif handle is None:
                    answer = self.search(*self._search_args(k))
                else:
                    answer = ahead.take(handle, self._search_args(k), lambda found: self._same_path(k, found))
                self.take(done, k, answer)

            def take_ready() -> None:
                while turns and ahead.ready(turns[0][2]):
                    take_oldest()

            for done, k in enumerate(order):
                take_ready()
                own = not turns  # nothing before it waits for its turn: what it is decided on now is its turn's
                decision = self._decision(k, throughput[k], bounds[k])
                if decision[0]:
                    while ahead.full():  # a worker free, the oldest taken where too many wait for their turn
                        take_oldest() if ahead.backlogged() else ahead.wait()
                        take_ready()
                    handle = ahead.start(*self._search_args(k))
                else:
                    handle = None
                turns.append((done, k, handle, decision if own else None))
            while turns:
                take_oldest()

    def _decision(self, k: int, throughput: float, bound: tuple) -> tuple[bool, object, tuple | None]:
        return self.decide(k, throughput, bound) if self.prune else (True, None, None)
