"""The tensor-parallel all-reduce's bandwidth against its message size (docs/methodology.md,
"Collectives"): expected values worked by hand from the published figures, not from the code."""

import math

import numpy as np
import pytest

from dlmcost.engine.roofline import gpu_rates, link_share, link_time, stack_rates
from dlmcost.inputs.hardware import HardwareDB
from dlmcost.inputs.precision import PRECISIONS
from dlmcost.inputs.profiles import load_profile


def _rates(gpu: str, profile: str = "realistic"):
    return stack_rates([gpu_rates(HardwareDB.load().get(gpu), PRECISIONS["bf16"], load_profile(profile))])


def test_the_curve_is_the_scaling_books_two_figures():
    # an 8-GPU ring all-reduce of B bytes sends 2 x 7/8 x B per GPU: 58 MB -> 101.5 MB at
    # 150 GB/s of bus bandwidth, 10 GB -> 17.5 GB at 370: shares 150/370 and 1
    assert link_share(101.5e6, 1.0) == pytest.approx(150 / 370, abs=5e-4)
    assert link_share(17.5e9, 1.0) == pytest.approx(1.0)
    assert link_share(1e3, 1.0) == pytest.approx(0.405)  # flat below the smallest figure
    assert link_share(1e12, 1.0) == pytest.approx(1.0)
    # halfway in log bytes: halfway in share
    assert link_share(math.sqrt(101.5e6 * 17.5e9), 1.0) == pytest.approx((0.405 + 1.0) / 2)
    assert link_share(1e6, 0.0) == 1.0  # rates that do not scale the link by size


def test_tp2_allreduces_of_a_diffusiongemma_step_on_h200_by_hand():
    # TP2 on H200 SXM (450 GB/s per direction, link 0.80, 10 us per collective): a step of 8
    # canvases of 256 tokens, d = 2816, bf16: each all-reduce sends 2 x 1/2 x 2048 x 2816 x 2 B
    # = 11.53 MB per GPU, below the curve's first point: 0.405 of the link. 60 of them:
    sent = 2048 * 2816 * 2.0
    expected = 60 * (sent / (450e9 * 0.80 * 0.405) + 10e-6)  # 60 x (79.1 + 10) us = 5.34 ms
    got = float(link_time(np.array([60 * sent]), np.array([60.0]), _rates("h200"))[0])
    assert got == pytest.approx(expected, rel=1e-9)
    assert got == pytest.approx(5.344e-3, rel=1e-3)


def test_ideal_profile_and_other_vendors_keep_the_flat_link():
    sent = 1e6
    ideal = float(link_time(np.array([sent]), np.array([1.0]), _rates("h200", "ideal"))[0])
    assert ideal == pytest.approx(sent / 450e9)  # link 1, no latency, no size curve
    mi300x = float(link_time(np.array([sent]), np.array([1.0]), _rates("mi300x"))[0])
    assert mi300x == pytest.approx(sent / (448e9 * 0.80) + 10e-6)
