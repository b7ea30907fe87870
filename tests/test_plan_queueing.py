"""The queueing shape plan's replica search steers by (dlmcost/plan/replicas/queueing.py):
ratio = a + b x, x = rho / (1 - rho), read through simulated points, by hand."""

import pytest

from dlmcost.plan.replicas.queueing import SATURATED, _crossing, _utilisation_for

# (utilisation, worst latency ratio): one point meeting the targets, one missing them
MEETS, MISSES = (0.5, 0.8), (0.8, 2.0)  # x = 1 and x = 4


def test_the_crossing_between_the_highest_meeting_and_the_lowest_missing_by_hand():
    """From (x 1, ratio 0.8) to (x 4, ratio 2.0), the ratio reaches 1 at x = 1 + 0.2 x 3 / 1.2 = 1.5,
    rho = 1.5 / 2.5 = 0.6; the lone-request floor (0.5 at rho 0) is a lower point that meets."""
    assert _crossing([MEETS, MISSES], 0.5) == pytest.approx(0.6, rel=1e-12)
    assert _crossing([MISSES, MEETS], 0.5) == pytest.approx(0.6, rel=1e-12)  # in any order


def test_a_point_past_saturation_is_left_out():
    """A finite run at 97% utilisation follows no queueing shape (its ratio 1.5 would put the
    crossing near 0.91): the crossing stays 0.6."""
    assert 0.97 > SATURATED
    assert _crossing([MEETS, MISSES, (0.97, 1.5)], 0.5) == pytest.approx(0.6, rel=1e-12)


def test_with_none_missing_the_crossing_is_extrapolated_through_the_two_highest():
    """(x 1, 0.6) and (x 4, 0.9) both meet: the line through them reaches 1 at x = 1 + 0.4 x 3 / 0.3
    = 5, rho = 5/6; with the floor alone meeting there is nothing to read."""
    assert _crossing([(0.5, 0.6), (0.8, 0.9)], 0.3) == pytest.approx(5 / 6, rel=1e-12)
    assert _crossing([], 0.3) is None


def test_the_utilisation_for_a_ratio_short_of_one_by_hand():
    """The two points nearest a ratio of 1, (x 1, 0.8) and (x 4, 2.0): slope 0.4 a unit of x, so a
    ratio of 0.97 at x = 1 + 0.17 / 0.4 = 1.425, rho = 1.425 / 2.425; the floor stands in for a
    second point: (x 0, 0.5) and (x 1, 0.8) reach 0.97 at x = 1.5667, rho = 0.6104."""
    assert _utilisation_for([MEETS, MISSES], 0.5, 0.97) == pytest.approx(1.425 / 2.425, rel=1e-12)
    x = 0.47 / 0.3
    assert _utilisation_for([MEETS], 0.5, 0.97) == pytest.approx(x / (1 + x), rel=1e-12)
