"""serve's and plan's per-GPU and cost numbers on tensor-parallel deployments, by hand.

The other hand-worked serve and plan tests run one GPU a replica, where replicas and GPUs are one
number: a formula dividing by replicas where it should divide by replicas x TP passes them. Here
each replica is two GPUs (TP2), so GPUs = 2 x replicas and every per-GPU and per-GPU-hour number
is checked against its documented formula (docs/plan.md, "Money and energy")."""

from __future__ import annotations

import pytest

from dlmcost import api
from dlmcost.inputs.hardware import HardwareDB
from dlmcost.serving import deployment as dep
from dlmcost.serving.loads import ClosedLoop

from test_serve import BLOCK, MODEL, _delay, foreign_scheme_warning

pytestmark = pytest.mark.usefixtures("bundled_offline")


def test_one_user_per_tp2_replica_by_hand():
    """Two TP2 replicas of H100s (4 GPUs), two users without think time: each replica serves one
    request at a time, T = d + the engine's batch-1 TP2 time (`api.analyze`); 2 requests of 128
    tokens per T. tok/s/GPU = 2 x 128 / T / 4; $/Mtok = 4 x price / (2 x 128 / T x 3600) x 1e6;
    J/token = 4 x W x (busy + 0.15 (1 - busy)) / (2 x 128 / T), busy = engine / T."""
    import numpy as np
    lengths = (np.full(200, 256.0), np.full(200, 128.0))
    with foreign_scheme_warning():
        prep = dep.prepare(MODEL, lengths, dep.Setup(gpu="h100", tp=2, replicas=2,
                                                     **{**BLOCK, "release": "first-done"}))
    p = dep.evaluate(prep, ClosedLoop(2), requests=400)
    engine = api.analyze(MODEL, "h100", prompt=256, gen=128, batch=1, tp=2, **BLOCK)["results"][0]["time_s"]
    total = engine + _delay()
    out = 2 * 128 / total
    assert p.output_tokens_per_s == pytest.approx(out, rel=1e-9)
    assert p.output_tokens_per_s_per_gpu == pytest.approx(out / 4, rel=1e-9)
    h100 = HardwareDB.load().get("h100")
    price, watts = h100.price_per_hour.usd, h100.board_power_w
    assert p.usd_per_mtok == pytest.approx(4 * price / (out * 3600) * 1e6, rel=1e-9)
    busy = engine / total
    assert p.gpu_busy_fraction == pytest.approx(busy, rel=1e-9)
    assert p.joules_per_token == pytest.approx(4 * watts * (busy + 0.15 * (1 - busy)) / out, rel=1e-9)


def test_trace_of_lone_requests_percentiles_and_per_user_speed_by_hand():
    """Three requests 100 s apart on one replica never share a batch: each takes d + its own answer
    length's lone time (`api.analyze` at batch 1). From those three latencies L_i and answers A_i:
    the median, p90, p95 and p99 by linear interpolation between order statistics (rank
    q/100 x 2 in the sorted list: p90 = L_2 + 0.8 (L_3 - L_2), p95 = L_2 + 0.9 (L_3 - L_2)), and
    tok/s/user the *median* of A_i / L_i (not their mean)."""
    import numpy as np
    from dlmcost.serving.loads import TraceReplay

    answers = [64.0, 128.0, 192.0]
    trace = TraceReplay(np.array([0.0, 100.0, 200.0]), np.full(3, 256.0), np.array(answers))
    with foreign_scheme_warning():
        r = api.serve(MODEL, trace, dep.Setup(gpu="h100", replicas=1, **BLOCK))
    p = r.points[0]
    d = _delay()
    lat = [d + api.analyze(MODEL, "h100", prompt=256, gen=int(a), batch=1, **BLOCK)["results"][0]["time_s"]
           for a in answers]
    s = sorted(lat)

    def pct(q):  # rank q/100 x (n - 1), interpolated
        k = q / 100 * 2
        i = int(k)
        return s[i] + (k - i) * (s[min(i + 1, 2)] - s[i])

    assert p.latency_s["median"] == pytest.approx(s[1], rel=1e-9)
    assert p.latency_s["p90"] == pytest.approx(pct(90), rel=1e-9)
    assert p.latency_s["p95"] == pytest.approx(pct(95), rel=1e-9)
    assert p.latency_s["p99"] == pytest.approx(pct(99), rel=1e-9)
    assert p.latency_s["mean"] == pytest.approx(sum(lat) / 3, rel=1e-9)
    speed = sorted(a / t for a, t in zip(answers, lat))
    assert p.tokens_per_s_per_user == pytest.approx(speed[1], rel=1e-9)
    assert abs(speed[1] - sum(speed) / 3) > 1e-3 * speed[1]  # the median, which the mean is not


def test_saturation_per_gpu_of_tp2_replicas_by_hand():
    """serve's saturation (JSON `saturation`, the charts' dashed line) of two TP2 replicas: each
    replica runs waves of 16 requests (its batch limit) in step, each wave the engine's batch-16
    TP2 generation time T16, so the replicas complete 2 x 16 / T16 requests/s, 128 output tokens
    each, over 2 x 2 = 4 GPUs: 2 x 16 x 128 / T16 / 4 tokens/s a GPU (one replica's tokens/s over
    its 2 GPUs, not over 1)."""
    import numpy as np

    lengths = (np.full(200, 256.0), np.full(200, 128.0))
    with foreign_scheme_warning():
        prep = dep.prepare(MODEL, lengths, dep.Setup(gpu="h100", tp=2, replicas=2, max_running=16,
                                                     **{**BLOCK, "release": "synchronous"}))
    s = dep.saturation(prep, requests=400)
    t16 = api.analyze(MODEL, "h100", prompt=256, gen=128, batch=16, tp=2, **BLOCK)["results"][0]["time_s"]
    assert s["rate"] == pytest.approx(2 * 16 / t16, rel=1e-9)
    assert s["output_tokens_per_s"] == pytest.approx(2 * 16 * 128 / t16, rel=1e-9)
    assert s["output_tokens_per_s_per_gpu"] == pytest.approx(2 * 16 * 128 / t16 / 4, rel=1e-9)
    assert s["in_flight"] == 2 * 16


def test_plan_table_money_energy_and_gpu_cells_by_hand():
    """The plan table's columns after the headroom, for test_plan's hand-worked deployment (3
    replicas x TP2 H100 at $3/GPU-hour, 700 W at power utilisation 0.5, 1.5 req/s served of 109
    mean answer tokens: 163.5 tok/s) and a sustained load of 6 req/s set by hand:
    $/h = 6 x 3 = 18; $/Mtok = 18 / (163.5 x 3600) x 1e6 = 30.58 -> '31'; $/Mtok @cap =
    18 / (6 x 109 x 3600) x 1e6 = 7.645 -> '7.6'; J/tok = 6 x 700 x 0.5 / 163.5 = 12.84 -> '13';
    GPUs = 3 x 2 = 6, no band ('-')."""
    import numpy as np
    from dlmcost.plan import replicas, results
    from dlmcost.render.plan import plan_table
    from dlmcost.serving.steptime import Decoding

    gpu = HardwareDB.load().get("h100")
    latency = np.arange(1.0, 101.0)
    tokens = np.where(np.arange(100) < 90, 10.0, 1000.0)  # mean 109
    ev = replicas.ReplicaRun(latency=latency, ttfb=latency / 100, tokens=tokens, served_rps=0.5)
    cand = replicas.Candidate(gpu, "bf16", 2, Decoding("block", 32, 2.0), 64, None, np.array([109.0]), 48)
    pricing = replicas.Pricing({gpu.key: 3.0}, {gpu.key: "test"}, {gpu.key: 700.0}, power_utilisation=0.5)
    d = replicas._deployment(cand, ev, replicas=3, capacity_rps=2.0, pricing=pricing, targets=results.Targets())
    d.sustained_rps = 6.0
    d.usd_per_mtok_at_capacity = 18.0 / (6.0 * 109 * 3600) * 1e6
    assert 18.0 / (163.5 * 3600) * 1e6 == pytest.approx(30.58, abs=0.01)
    headers, (cells,) = plan_table([d.record()], show_decoding=False)
    names = [h.replace("\n", " ") for h in headers]
    at = dict(zip(names, cells))
    assert (at["$/h"], at["$/Mtok"], at["$/Mtok @cap"], at["J/tok"]) == ("18", "31", "7.6", "13")
    assert (at["GPUs (band)"], at["$/Mtok band"], at["p95 s band"]) == ("6", "-", "-")


def test_plan_gpus_at_the_band_ends_of_tp2_replicas_by_hand(capsys):
    """test_intervals' band-ends check on TP2 replicas: no latency target, fixed lengths, batch
    limit 8, so the fewest replicas keep utilisation below 1, R = floor(rate / capacity) + 1, with
    a replica's capacity 8 / T8 (T8: `api.analyze` at batch 8, TP2) divided by the band's end k;
    the GPUs at each end are 2 x R (GPUs, not replicas)."""
    import json
    import math

    from dlmcost.cli import main
    from test_intervals import on_nvidia

    band = on_nvidia("sglang")
    a = api.analyze(MODEL, "h100", scheme="block", block=32, tpf=2, prompt=256, gen=128, batch=8, tp=2,
                    stack="sglang")["results"][0]
    capacity = 8 / a["time_s"]
    rate = 2.5 * capacity
    capsys.readouterr()
    rc = main([str(x) for x in ("plan", MODEL, "--rate", rate, "--gpu", "h100", "--tp", "2", "--precision",
                                "bf16", "--scheme", "block", "--block", "32", "--tpf", "2", "--prompt", "256",
                                "--answer", "128", "--max-batch", "8", "--price", "h100=2",
                                "--max-usd-per-mtok", "1000", "--stack", "sglang", "-f", "json")])
    (d,) = json.loads(capsys.readouterr().out)["deployments"]
    assert rc == 0 and d["tp"] == 2
    assert d["gpus"] == 2 * (math.floor(rate / capacity) + 1)
    assert d["intervals"]["gpus"] == [2 * (math.floor(rate / (capacity / k)) + 1) for k in (band["low"], band["high"])]


def test_serve_pareto_front_by_hand_with_a_tie():
    """serve's '*': a point is on the front when no other has at least its tok/s/GPU and tok/s/user
    and more of one. Points (tok/s/GPU, tok/s/user): a = (100, 10) and its twin b = (100, 10) tie,
    neither beats the other: both on the front; c = (50, 20) on it; d = (50, 10) beaten by a."""
    from types import SimpleNamespace

    from dlmcost.serving.deployment.measure import mark_pareto

    pts = [SimpleNamespace(output_tokens_per_s_per_gpu=g, tokens_per_s_per_user=u, pareto=None)
           for g, u in ((100, 10), (100, 10), (50, 20), (50, 10))]
    mark_pareto(pts)
    assert [p.pareto for p in pts] == [True, True, True, False]
