"""The highest load a found deployment sustains within its targets (dlmcost/plan/replicas/sustained.py),
its bracketing followed by hand on a replica whose p95 latency is its load over a constant: the
simulations stand in as one line each, so each step's number is known."""

from types import SimpleNamespace

import pytest

from dlmcost.plan.replicas import sustained
from dlmcost.plan.results import Targets
from dlmcost.serving.traffic import Traffic, parse_lengths

TARGETS = Targets(p95_latency_s=1.0)


def _replica(monkeypatch, k: float):
    """A replica whose p95 latency is its load / k: open loop, the requests/s it is offered; closed
    loop, its users (each served at one request a second)."""
    def run(c, sample, traffic, replicas, users_per_replica=None):
        load = users_per_replica if users_per_replica is not None else traffic.rate / replicas
        return SimpleNamespace(served_rps=load)

    monkeypatch.setattr(sustained, "_run", run)
    monkeypatch.setattr(sustained, "_deployment",
                        lambda c, ev, r, capacity, pricing, targets: SimpleNamespace(p95_latency_s=ev.served_rps / k))
    monkeypatch.setattr(sustained, "_floor_ratio", lambda c, sample, targets: 0.5)


def test_an_open_loop_is_bracketed_below_the_load_one_replica_fewer_failed_at(monkeypatch):
    """Two replicas serving 10 requests/s (5 each, p95 5 / 9.9 s), a saturation rate of 20 each: the
    load R - 1 = 1 replica failed at, 10 a replica, bounds it; the first step aims at 97% of the
    targets through the queueing shape (near 19.4 a replica) and is held to 10 / 1.05 = 9.524, whose
    p95 9.524 / 9.9 s meets them; 10 is then within 10% of it: 2 x 9.524 = 20 / 1.05 requests/s."""
    _replica(monkeypatch, 9.9)
    traffic = Traffic(parse_lengths(128, "p"), parse_lengths(128, "a"), rate=10.0)
    d = SimpleNamespace(replicas=2, served_rps=10.0, p95_latency_s=5 / 9.9)
    assert sustained.sustained_rps(None, None, traffic, TARGETS, d, 20.0) == pytest.approx(20 / 1.05, rel=1e-12)


@pytest.mark.parametrize("k, users", [(6.0, 4), (2.5, 2)])
def test_a_closed_loop_doubles_the_users_then_bisects(monkeypatch, k, users):
    """4 users on 2 replicas (2 each, served at 2 a second): doubling to 4 a replica meets a p95 of
    4 / 6 s, then 8 misses (8 / 6): 4 users a replica, 4 requests/s each, 8 in all; where 4 misses
    (4 / 2.5 s) the bisection's 3 misses too: the 2 it had, 4 in all."""
    _replica(monkeypatch, k)
    traffic = Traffic(parse_lengths(128, "p"), parse_lengths(128, "a"), users=4)
    d = SimpleNamespace(replicas=2, served_rps=4.0, p95_latency_s=2 / k)
    assert sustained.sustained_rps(None, None, traffic, TARGETS, d, 100.0) == pytest.approx(2 * users)


def test_the_first_step_aims_inside_the_targets_through_the_queueing_shape(monkeypatch):
    """One replica at 5 requests/s (p95 5 / 9.9 s, utilisation 5 / 20), its lone requests at 0.2 of
    the target: the line through (x 1/3, 0.505) and (x 0, 0.2), x = rho / (1 - rho), reaches 97% of
    the target at x1; that step meets (its p95 under 1 s), and the next aims short of 5% above it, so
    it is taken 5% above: 1.05 x 20 x x1 / (1 + x1)."""
    _replica(monkeypatch, 9.9)
    monkeypatch.setattr(sustained, "_floor_ratio", lambda c, sample, targets: 0.2)
    traffic = Traffic(parse_lengths(128, "p"), parse_lengths(128, "a"), rate=5.0)
    d = SimpleNamespace(replicas=1, served_rps=5.0, p95_latency_s=5 / 9.9)
    slope = (5 / 9.9 - 0.2) / (1 / 3)
    x1 = 1 / 3 + (0.97 - 5 / 9.9) / slope
    first = 20 * x1 / (1 + x1)
    assert first / 9.9 < 1
    assert sustained.sustained_rps(None, None, traffic, TARGETS, d, 20.0) == pytest.approx(1.05 * first, rel=1e-12)
