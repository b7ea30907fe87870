"""A plan's deployments ranked (`rank_rows`): the load each sustains within the targets and its
error band's ends, searches of each row's own (`Setting`: what a row's search ran under), on the
machine's cores (side_by_side.map_rows), their simulated preemptions counted against the command's
limit (`each_row`, `each_candidate`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..inputs.error_bands import band_for
from .replicas import Candidate, Found, Pricing, band_ends, request_classes, sustained_rps
from .results import Deployment, Targets, rank_key, usd_per_mtok
from .side_by_side import map_rows
from ..serving import behaviour
from ..serving.memory_binding import requests_memory_holds
from ..serving.traffic import RequestSample, Traffic


def _provisional_key(d: Deployment) -> tuple:
    """`rank_key` without $/Mtok at capacity: the ranking up to its ties."""
    return (1, d.gpus, d.p95_latency_s) if d.usd_per_mtok is None else (0, d.usd_per_mtok)


@dataclass(frozen=True)
class Setting:
    """What a deployment found by one model's search is searched again under (its sustained load,
    its error band's ends): that search's requests, traffic, targets, prices and stack."""

    sample: RequestSample
    traffic: Traffic
    targets: Targets
    pricing: Pricing
    stack: str | None
    eager: bool = False


def _to_sustain(rows: list[tuple[Found, Setting]], ranked: int | None) -> list[tuple[Found, Setting]]:
    """The deployments whose sustained load the output needs: all (`ranked` None), else the first
    `ranked` of the ranking and every other one of the same $/Mtok as the last of them (their
    order is $/Mtok at capacity's)."""
    ordered = sorted(rows, key=lambda row: _provisional_key(row[0].deployment))
    if ranked is None or len(ordered) <= ranked:
        return ordered
    last = ordered[ranked - 1][0].deployment
    ties = [row for row in ordered[ranked:]
            if last.usd_per_mtok is not None and row[0].deployment.usd_per_mtok == last.usd_per_mtok]
    return ordered[:ranked] + ties


def rank_rows(rows: list[tuple[Found, Setting]], ranked: int | None, jobs: int | None = None) -> list[Deployment]:
    """The deployments ranked (`rank_key`): the sustained load of those an output shows first,
    which breaks the ties of $/Mtok, then the error band's ends of the first `ranked`. Each row's
    two searches are its own: they run on up to `jobs` cores (None: the usable ones; side_by_side.py)."""
    sustain = _to_sustain(rows, ranked)
    for (f, _), rps in zip(sustain, each_row(_sustained, sustain, jobs)):  # the load each sustains, for those shown
        d = f.deployment
        d.sustained_rps = rps
        if d.usd_per_hour is not None:
            d.usd_per_mtok_at_capacity = usd_per_mtok(d.usd_per_hour, d.sustained_rps * d.output_tokens_per_s
                                                      / d.served_rps)
    rows = sorted(rows, key=lambda row: rank_key(row[0].deployment))
    shown = rows[:ranked]  # what the rows shown take were the step times off as far as the band says
    for (f, _), ends in zip(shown, each_row(_band_ends, shown, jobs)):
        if ends is not None:
            f.deployment.intervals = ends
    return [f.deployment for f, _ in rows]


def _sustained(row: tuple[Found, Setting]) -> float:
    f, s = row
    return sustained_rps(f.candidate, s.sample, s.traffic, s.targets, f.deployment, f.capacity, f.points)


def _band_ends(row: tuple[Found, Setting]) -> dict | None:
    f, s = row
    band = band_for(behaviour.stack_name(s.stack, f.candidate.decoding, s.eager), f.candidate.gpu.vendor)
    return None if band is None else band_ends(f, s.sample, s.traffic, s.targets, s.pricing, band)


def each_row(fn: Callable, rows: list[tuple[Found, Setting]], jobs: int | None) -> list:
    """fn of each row (side_by_side.map_rows), the preemptions the workers simulated counted against
    the rows' shared limit as if they had run here (one limit: else the rows run in turn)."""
    return each_candidate(fn, rows, [f.candidate for f, _ in rows], lambda: rows[0][1].sample, jobs)


def each_candidate(fn: Callable, rows: list, candidates: list[Candidate], sample: Callable[[], RequestSample],
                   jobs: int | None) -> list:
    """fn of each row, the row's search that of its candidate (`each_row`; plan's rows past those
    shown); `sample()`: the requests they simulate, named where the command is refused."""
    works = {id(c.work): c.work for c in candidates if c.work is not None}
    if len(works) > 1:
        jobs = 1  # (here each row's searches count against their own limit as they run)
    work = next(iter(works.values())) if len(works) == 1 else None
    spent = None if work is None or work.limit is None else (lambda: work.limit - work.left)
    out, used = map_rows(fn, rows, jobs, spent)
    if used:
        work.spend(used)
        if work.left < 0:  # the workers' rows together: the one whose memory holds the fewest is named
            classes = request_classes(sample())
            tightest = min(candidates, key=lambda c: requests_memory_holds(c.table.mem_share, classes))
            work.refuse(tightest.table.mem_share, classes)
    return out
