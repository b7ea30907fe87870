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


def test_the_curve_is_the_measured_nccl_shares():
    # aiconfigurator's 8-GPU all-reduces: a message of B bytes sends 2 x 7/8 x B per GPU; 4 MiB
    # -> 7,340,032 bytes at 0.43 of the largest message's bandwidth, 512 MiB -> 939,524,096 at 1
    assert link_share(7340032.0, 1.0) == pytest.approx(0.43)
    assert link_share(939524096.0, 1.0) == pytest.approx(1.0)
    assert link_share(1e3, 1.0) == pytest.approx(0.43)  # flat below the smallest message
    assert link_share(1e12, 1.0) == pytest.approx(1.0)
    # halfway in log bytes between the 64 and 128 MiB messages: halfway between 0.85 and 0.92
    assert link_share(math.sqrt(117440512.0 * 234881024.0), 1.0) == pytest.approx((0.85 + 0.92) / 2)
    assert link_share(1e6, 0.0) == 1.0  # rates that do not scale the link by size


def test_every_point_of_the_curve_is_a_ring_allreduces_bytes_sent_at_its_measured_share():
    # the source's shares of the 8-GPU all-reduces of 4, 8, ... 512 MiB (aiconfigurator's nccl
    # tables, averaged over the H200, H100 and A100), each message of B bytes sending 2 x 7/8 x B
    # per GPU in a ring: every point, not only the ends and one midpoint
    shares = {4: 0.43, 8: 0.50, 16: 0.60, 32: 0.70, 64: 0.85, 128: 0.92, 256: 0.97, 512: 1.0}
    for mib, share in shares.items():
        sent = 2 * 7 / 8 * mib * 2**20
        assert link_share(sent, 1.0) == pytest.approx(share, rel=1e-12), mib
        # a third of the way (in log bytes) to the next message's point: a third of the step
        if mib < 512:
            assert link_share(sent * 2 ** (1 / 3), 1.0) == pytest.approx(share + (shares[2 * mib] - share) / 3), mib


def test_tp2_allreduces_of_a_diffusiongemma_step_on_h200_by_hand():
    # TP2 on H200 SXM (450 GB/s per direction, link 0.80, 10 us per collective): a step of 8
    # canvases of 256 tokens, d = 2816, bf16: each all-reduce sends 2 x 1/2 x 2048 x 2816 x 2 B
    # = 11.53 MB per GPU, between the 4 and 8 MiB messages' 7.34 and 14.68 MB sent:
    # 0.43 + 0.07 x log2(11.53 / 7.34) = 0.4757 of the link. 60 of them:
    sent = 2048 * 2816 * 2.0
    share = 0.43 + 0.07 * math.log2(sent / 7340032.0)
    expected = 60 * (sent / (450e9 * 0.80 * share) + 10e-6)  # 60 x (67.4 + 10) us = 4.64 ms
    got = float(link_time(np.array([60 * sent]), np.array([60.0]), _rates("h200"))[0])
    assert got == pytest.approx(expected, rel=1e-9)
    assert got == pytest.approx(4.642e-3, rel=1e-3)


def test_a_deepseek_prefill_chunks_allreduce_on_8_h200s_by_hand():
    # 8,192 tokens x 7,168 x 2 B = 117,440,512 bytes (112 MiB), 2 x 7/8 of it sent per GPU =
    # 205,520,896, between the 64 and 128 MiB messages: 0.85 + 0.07 x log2(1.75) = 0.9065 of the
    # link: 205.5 MB / (450 GB/s x 0.80 x 0.9065) + 10 us = 640 us (the table measures about 506 us
    # there, between 320 us at 64 MiB and 565 us at 128 MiB: NVLink SHARP lifts 8-GPU all-reduces
    # above the hardware file's large-message 0.80)
    sent = 2 * 7 / 8 * 8192 * 7168 * 2.0
    share = 0.85 + 0.07 * math.log2(1.75)
    got = float(link_time(np.array([sent]), np.array([1.0]), _rates("h200"))[0])
    assert got == pytest.approx(sent / (450e9 * 0.80 * share) + 10e-6, rel=1e-9)
    assert got == pytest.approx(639.8e-6, rel=1e-3)


def test_ideal_profile_and_other_vendors_keep_the_flat_link():
    sent = 1e6
    ideal = float(link_time(np.array([sent]), np.array([1.0]), _rates("h200", "ideal"))[0])
    assert ideal == pytest.approx(sent / 450e9)  # link 1, no latency, no size curve
    mi300x = float(link_time(np.array([sent]), np.array([1.0]), _rates("mi300x"))[0])
    # flat 0.80 of 448 GB/s, plus the MI300X's measured 7.4 us a collective (hardware/amd-mi300x.yaml)
    assert mi300x == pytest.approx(sent / (448e9 * 0.80) + 7.4e-6)
