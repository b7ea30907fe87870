"""`dlmcost serve` and the simulator under it, held to queueing theory and to hand-worked schedules.

Every simulation here is checked against Little's law (`little`); the closed loops against the
interactive response-time law; batch-1 Poisson service against Pollaczek-Khinchine; the
synchronous release against a schedule worked by hand; the reported statistics against the
engine's own pass times (`api.analyze`) and their formulas."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import oracle

from dlmcost import api
from dlmcost.cli import main
from dlmcost.inputs.hardware import HardwareDB
from dlmcost.serving import deployment as dep
from dlmcost.serving.loads import BatchJob, ClosedLoop, OpenLoop, TraceReplay
from dlmcost.serving.targets import Targets
from dlmcost.serving.simulate import ClassTable, RequestPasses, draw_passes, simulate
from preemption_reference import out_of_batch  # noqa: E402

MODEL = "GSAI-ML/LLaDA-8B-Instruct"
# not one of LLaDA's published schemes: serve warns. On SGLang's usual path: these tests check the
# simulation's arithmetic against analyze's pass times, and analyze costs a prompt in one pass (the
# dLLM path's block-chunked prompt is tests/test_serving_behaviour.py's)
BLOCK = dict(scheme="block", block=32, tpf=2.0, stack="sglang")


def foreign_scheme_warning():
    """The warning a deployment of BLOCK gets, worded for any command (not only plan)."""
    from dlmcost.errors import DlmcostWarning

    return pytest.warns(DlmcostWarning, match=r"was not published with block \(its config lists mdm, "
                                              r"prefix-cache, dual-cache\): the answers' quality there is not known")


pytestmark = pytest.mark.usefixtures("bundled_offline")


@pytest.fixture(autouse=True)
def _littles_law_on_every_run(monkeypatch):
    """Every simulation a test here runs, directly or through serve, is checked by `little`."""
    from dlmcost.serving import behaviour, simulate as sim

    real = sim.simulate

    def checked(*args, **kwargs):
        return little(real(*args, **kwargs))

    monkeypatch.setattr(behaviour, "simulate", checked)  # serve's and plan's one way to the simulator
    monkeypatch.setitem(globals(), "simulate", checked)


def run(capsys, *args):
    capsys.readouterr()
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def little(r):
    """Little's law for the requests in service, L = lambda W: the time average of the batch
    size (from the simulator's own record of the batch in every iteration) times the run's length
    equals the total time requests spent in the batch (from their admission and finish times).
    Also arrival <= admission <= first block <= done for every request."""
    assert r.in_service_s == pytest.approx(float(np.sum(r.done_s - r.start_s - out_of_batch(r))), rel=1e-9)
    assert (r.start_s >= r.arrival_s - 1e-9).all() and (r.first_block_s >= r.start_s - 1e-9).all()
    assert (r.done_s >= r.first_block_s - 1e-9).all()
    return r


def table(nfe=(10,), first=(1,), step=lambda c, b: 0.1, lead=None, blocks=None, cap=16, first_step=None):
    k = len(nfe)
    rows = [[0.0] + [step(c, b) for b in range(1, cap + 1)] for c in range(k)]
    first_rows = None if first_step is None else [[0.0] + [first_step(c, b) for b in range(1, cap + 1)]
                                                  for c in range(k)]
    return ClassTable(list(nfe), list(first), [0.0] * k, rows, first_rows, lead=lead, blocks=blocks)


# --- queueing theory ------------------------------------------------------------------------------


@pytest.mark.parametrize("release", ["first-done", "synchronous"])
def test_interactive_response_time_law(release):
    """N users thinking Z s between answer and question, batch limit below N (requests queue),
    two classes, passes per block drawn with a spread: N = X (R + Z), X the completion rate,
    R the mean response time, over the measured window (Denning & Buzen 1978)."""
    rng = np.random.default_rng(5)
    t = table(nfe=(1 + 4 * 6, 1 + 2 * 8), first=(7, 9), lead=[1, 1], blocks=[4, 2],
              step=lambda c, b: (0.02 + 0.004 * b) * (1 + c))
    n, users, think = 6000, 24, 1.5
    cls = rng.integers(0, 2, n)
    passes = draw_passes(t, cls, 0.6, rng)
    r = little(simulate(t, cls, 8, users=users, think_s=think, passes=passes, release=release))
    w = slice(n // 5, n)
    done = r.done_s[w]
    x = (len(done) - 1) / (done.max() - done.min())
    assert users == pytest.approx(x * (r.latency_s[w].mean() + think), rel=0.02)


@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_poisson_load_at_batch_one_is_md1(rho):
    """The serve path end to end: one replica, one running request, fixed lengths, Poisson
    arrivals from loads.OpenLoop: an M/D/1 queue. D is a lone request's time (a closed loop of
    one user); the mean wait must be Pollaczek-Khinchine's rho D / (2 (1 - rho)). Evenly spaced
    arrivals would wait 0. The stack's first-token wait d holds nothing: every request reaches the
    queue d late, so D is the lone request's latency less d, and the latency is d + wait + D."""
    prep = _prepared(max_running=1)
    service = dep.evaluate(prep, ClosedLoop(1), requests=200).latency_s["mean"]
    d = service - _delay()  # the server's own time a request
    p = dep.evaluate(prep, OpenLoop(rho / d), requests=40_000, seed=3)
    wait = p.latency_s["mean"] - service
    assert wait == pytest.approx(rho * d / (2 * (1 - rho)), rel=0.07)
    even = dep.evaluate(prep, OpenLoop(rho / service, "constant"), requests=2000)
    assert even.latency_s["mean"] == pytest.approx(service, rel=1e-9)  # D/D/1: nobody waits


def test_arrival_gaps_have_the_coefficient_of_variation_of_their_law():
    rng = np.random.default_rng(0)
    for load, cv in ((OpenLoop(4.0), 1.0), (OpenLoop(4.0, "gamma", 3.0), 3.0), (OpenLoop(4.0, "gamma", 0.5), 0.5)):
        g = load.gaps(rng, 400_000)
        assert g.mean() == pytest.approx(0.25, rel=0.02)
        assert g.std() / g.mean() == pytest.approx(cv, rel=0.03)
    g = OpenLoop(4.0, "constant").gaps(rng, 10)
    assert np.allclose(g, 0.25)


def test_plans_poisson_arrivals_are_poisson():
    """plan's request sample: exponential gaps (CV 1), and at batch 1 its replica waits as
    M/D/1 says; evenly spaced gaps would fail both."""
    from dlmcost.plan import replicas
    from dlmcost.serving.traffic import Traffic, parse_lengths, sample_requests

    rho, nfe, tau = 0.7, 10, 0.1
    traffic = Traffic(parse_lengths(0, "p"), parse_lengths(10, "a"), rate=rho / (nfe * tau))
    sample = sample_requests(traffic, 40_000, 1)
    assert sample.unit_gaps.std() / sample.unit_gaps.mean() == pytest.approx(1.0, rel=0.03)
    t = ClassTable([nfe], [1], [0.0], [[0.0, tau, tau]])
    cand = replicas.Candidate(None, "bf16", 1, None, 1, t, np.array([10.0]), 1)
    ev = replicas._run(cand, sample, traffic, replicas=1)
    service = nfe * tau
    assert (ev.latency - service).mean() == pytest.approx(rho * service / (2 * (1 - rho)), rel=0.07)


# --- the synchronous batch by hand ----------------------------------------------------------------


def _hand_table():
    # per request at batch b a pass costs pass(b) / b: the iteration is pass(b) when all run one
    return ClassTable([6], [3], [0.0], [[0.0, 1.0, 1.5, 2.1]], lead=[1], blocks=[2])


def _hand_passes():
    # A: a prompt pass, then blocks of 2 and 3 passes; B: 1, then 4 and 2; C: 1, then 1 and 1
    return RequestPasses.from_rows([1, 1, 1], [[2, 3], [4, 2], [1, 1]])


def test_synchronous_batch_by_hand():
    """A and B at t = 0, C at t = 1; batch limit 3; an iteration of b requests takes 1, 1.5,
    2.1 s for b = 1, 2, 3.
    Round 1 (A, B): A needs 1 + 2 passes, B 1 + 4: five iterations of 1.5 s, to 7.5 (C waits
    for the round). Round 2 (A, B, C): A 3, B 2, C 1 + 1: three of 2.1 s, to 13.8: A and B
    are done, C has its first block. Round 3 (C alone): one pass of 1 s, to 14.8."""
    r = little(simulate(_hand_table(), np.zeros(3, int), 3, arrivals_s=np.array([0.0, 0.0, 1.0]),
                        passes=_hand_passes(), release="synchronous"))
    r1 = 5 * 1.5
    r2 = r1 + 3 * 2.1
    r3 = r2 + 1.0
    assert r.done_s.tolist() == pytest.approx([r2, r2, r3])
    assert r.first_block_s.tolist() == pytest.approx([r1, r1, r2])
    assert r.start_s.tolist() == pytest.approx([0.0, 0.0, r1])
    assert r.busy_s == pytest.approx(r3)


def test_first_done_release_of_the_same_requests_by_hand():
    """The same requests released first-done: C joins at the first iteration boundary (1.5).
    0-1.5 A, B; C joins: 1.5-3.6-5.7-7.8 three of 2.1 (C done after its 3 passes, at 7.8; A's
    first block, its 3rd pass, at 5.7); A, B: 7.8-9.3-10.8 (A done after 6 passes, B's first
    block, its 5th, at 9.3); B alone 10.8-11.8."""
    r = little(simulate(_hand_table(), np.zeros(3, int), 3, arrivals_s=np.array([0.0, 0.0, 1.0]),
                        passes=_hand_passes(), release="first-done"))
    assert r.done_s.tolist() == pytest.approx([10.8, 11.8, 7.8])
    assert r.first_block_s.tolist() == pytest.approx([5.7, 9.3, 5.7])
    assert r.busy_s == pytest.approx(11.8)


def test_synchronous_wave_waits_for_the_slowest_member():
    """B requests at t = 0, batch limit B, random passes per block: every one finishes after
    sum over blocks of the slowest member's passes (its prompt pass in the first), each
    iteration tau(B) (brute force over the drawn passes)."""
    rng = np.random.default_rng(2)
    b, blocks, tau = 8, 5, 0.3
    t = ClassTable([1 + 5 * 6], [7], [0.0], [[0.0] + [tau] * 16], lead=[1], blocks=[blocks])
    passes = draw_passes(t, np.zeros(b, int), 0.8, rng, [32])
    r = little(simulate(t, np.zeros(b, int), b, arrivals_s=np.zeros(b), passes=passes, release="synchronous"))
    rounds = [1 + passes.block(0).max()] + [passes.block(k).max() for k in range(1, blocks)]
    assert np.allclose(r.done_s, tau * sum(rounds))
    assert np.allclose(r.first_block_s, tau * rounds[0])
    fd = little(simulate(t, np.zeros(b, int), b, arrivals_s=np.zeros(b), passes=passes, release="first-done"))
    assert fd.done_s.max() <= r.done_s.max() + 1e-9 and fd.done_s.mean() < r.done_s.mean()


def test_drawn_passes_keep_the_mean_and_the_spread():
    t = ClassTable([1 + 4 * 16], [17], [0.0], [[0.0, 1.0]], lead=[1], blocks=[4])
    cls = np.zeros(50_000, int)
    x = draw_passes(t, cls, 0.5, np.random.default_rng(0)).flat.astype(float)
    assert x.mean() == pytest.approx(16.0, rel=0.005)  # the random rounding keeps the mean
    assert x.std() / x.mean() == pytest.approx(0.5, rel=0.03)  # gamma CV 0.5 (rounding adds under 1%)
    capped = draw_passes(t, cls, 0.5, np.random.default_rng(0), [32]).flat
    assert capped.min() >= 1 and capped.max() == 32  # a pass commits one token at least
    even = draw_passes(t, cls[:3], 0.0, np.random.default_rng(0))
    assert even.nfe.tolist() == [65] * 3 and even.first.tolist() == [17] * 3


# --- the deployment's statistics against the engine -----------------------------------------------


def _prepared(**setup):
    lengths = (np.full(200, 256.0), np.full(200, 128.0))
    with foreign_scheme_warning():
        return dep.prepare(MODEL, lengths, dep.Setup(gpu="h100", **{**BLOCK, "release": "first-done", **setup}))


def _delay() -> float:
    """The sglang stack's wait before each request's first token, which holds neither its server nor
    the GPU: LLaDA-8B's 32 layers x the stack file's first_token_us_per_layer."""
    import yaml

    stack = yaml.safe_load((Path(__file__).resolve().parent.parent / "stacks" / "sglang.yaml").read_text("utf-8"))
    return 32 * stack["front_end"]["first_token_us_per_layer"] * 1e-6


def _engine(batch: int):
    a = api.analyze(MODEL, "h100", prompt=256, gen=128, batch=batch, **BLOCK)["results"][0]
    prefill = a["passes"][0]["time_s"]
    step = (a["time_s"] - prefill) / (a["nfe"] - 1)
    return a["time_s"], prefill, step


@pytest.mark.parametrize("release", ["first-done", "synchronous"])
def test_one_user_per_replica_by_hand(release):
    """Two replicas of one H100, two users without think time: each replica serves one request
    at a time, as `api.analyze` times it at batch 1: latency T = prefill + 64 steps, the first
    of 4 blocks after the prefill and 16 steps, then a block every 16 steps. Two requests per T
    seconds, 128 tokens each; dollars and joules per token from the list price and board power. Each
    request first waits the stack's first-token delay d (the GPU idle): T = d + the engine's time."""
    prep = _prepared(replicas=2, release=release)
    p = dep.evaluate(prep, ClosedLoop(2), requests=400)
    engine, prefill, step = _engine(1)
    total = engine + _delay()
    assert p.latency_s["median"] == pytest.approx(total, rel=1e-9)
    assert p.latency_s["p99"] == pytest.approx(total, rel=1e-9)
    assert p.ttfb_s["mean"] == pytest.approx(_delay() + prefill + 16 * step, rel=1e-9)
    assert p.inter_block_s["median"] == pytest.approx(16 * step, rel=1e-9)
    assert p.requests_per_s == pytest.approx(2 / total, rel=1e-9)
    assert p.output_tokens_per_s == pytest.approx(2 * 128 / total, rel=1e-9)
    assert p.total_tokens_per_s == pytest.approx(2 * (128 + 256) / total, rel=1e-9)
    assert p.output_tokens_per_s_per_gpu == pytest.approx(128 / total, rel=1e-9)
    assert p.tokens_per_s_per_user == pytest.approx(128 / total, rel=1e-9)
    assert p.gpu_busy_fraction == pytest.approx(engine / total) and p.mean_running == pytest.approx(engine / total)
    h100 = HardwareDB.load().get("h100")
    price, watts = h100.price_per_hour.usd, h100.board_power_w
    assert p.usd_per_mtok == pytest.approx(2 * price / (2 * 128 / total * 3600) * 1e6, rel=1e-9)
    busy = engine / total  # board power while busy, 15% of it while the GPU waits out the delay
    assert p.joules_per_token == pytest.approx(2 * watts * (busy + 0.15 * (1 - busy)) / (2 * 128 / total), rel=1e-9)


@pytest.mark.parametrize("release", ["first-done", "synchronous"])
def test_batch_job_makespan_by_hand(release):
    """100 requests, 10 in parallel, one replica: ten waves of ten requests run side by side,
    each wave the stack's first-token delay and the engine's batch-10 generation time."""
    prep = _prepared(release=release)
    p = dep.evaluate(prep, BatchJob(100, 10))
    total = _engine(10)[0] + _delay()
    assert p.makespan_s == pytest.approx(10 * total, rel=1e-9)
    assert p.requests_per_s == pytest.approx(100 / (10 * total), rel=1e-9)
    assert p.requests == 100 and p.latency_s["median"] == pytest.approx(total, rel=1e-9)


def test_trace_replay_of_requests_that_never_meet():
    """Requests 100 s apart never share a batch: each takes its own class's lone time; the trace
    is sorted by arrival and dealt round-robin over the replicas."""
    arrivals = np.array([300.0, 0.0, 100.0, 200.0])
    trace = TraceReplay(arrivals, np.full(4, 256.0), np.array([128.0, 128.0, 64.0, 64.0]))
    assert trace.arrival_s.tolist() == [0.0, 100.0, 200.0, 300.0]
    with foreign_scheme_warning():
        r = api.serve(MODEL, trace, dep.Setup(gpu="h100", replicas=2, **BLOCK))
    p = r.points[0]
    d = _delay()  # each request's wait before the engine sees it (the GPU idle)
    long_t = _engine(1)[0]
    short_t = api.analyze(MODEL, "h100", prompt=256, gen=64, batch=1, **BLOCK)["results"][0]["time_s"]
    assert sorted([p.latency_s["p99"], p.latency_s["mean"] * 2 - p.latency_s["p99"]]) == \
        pytest.approx(sorted([d + long_t, d + short_t]), rel=1e-6)
    assert p.makespan_s == pytest.approx(300.0 + d + long_t, rel=1e-9)
    assert p.requests == 4 and p.requests_per_s == pytest.approx(4 / (300.0 + d + long_t), rel=1e-9)
    # sorted: t=0 long, 100 short, 200 short, 300 long; replica 0 serves t=0 and 200 (to 200 +
    # short), replica 1 t=100 and 300 (to 300 + long); each runs one long and one short request
    busy, span = 2 * (long_t + short_t), (200 + d + short_t) + (300 + d + long_t)
    assert p.gpu_busy_fraction == pytest.approx(busy / span, rel=1e-9)
    assert p.mean_running == pytest.approx(busy / span, rel=1e-9)  # one request at a time
    assert p.output_tokens_per_s == pytest.approx(p.requests_per_s * (128 + 64) / 2, rel=1e-9)


def test_trace_option_reads_through_the_trace_reader(capsys, monkeypatch, tmp_path):
    """--trace FILE asks serving.traces.read_trace for the arrays (with the format, time scale,
    sample and seed given) and replays them."""
    import sys
    import types

    import dlmcost.serving

    seen = {}

    def read_trace(path, fmt=None, time_scale=1.0, sample=None, seed=0):
        seen.update(path=str(path), fmt=fmt, time_scale=time_scale, sample=sample, seed=seed)
        return types.SimpleNamespace(arrival_s=np.array([0.0, 50.0]), prompt_tokens=np.array([256, 256]),
                                     answer_tokens=np.array([128, 128]), source="t.csv")

    fake = types.ModuleType("dlmcost.serving.traces")
    fake.read_trace = read_trace
    monkeypatch.setitem(sys.modules, "dlmcost.serving.traces", fake)
    monkeypatch.setattr(dlmcost.serving, "traces", fake, raising=False)
    path = tmp_path / "t.csv"
    path.write_text("x\n")
    rc, out, err = run(capsys, "serve", MODEL, "--gpu", "h100", "--scheme", "block", "--block", "32", "--tpf", "2", "--stack", "sglang",
                       "--trace", path, "--trace-format", "azure", "--time-scale", "0.5", "--sample", "2",
                       "--seed", "3", "-f", "json")
    assert rc == 0, err
    assert seen == dict(path=str(path), fmt="azure", time_scale=0.5, sample=2, seed=3)
    p = json.loads(out)["deployments"][0]["points"][0]
    lone = _delay() + _engine(1)[0]
    assert p["requests"] == 2 and p["latency_s"]["median"] == pytest.approx(lone, rel=1e-9)
    assert p["makespan_s"] == pytest.approx(50.0 + lone, rel=1e-9)


def test_stats_by_hand():
    s = dep.stats(np.arange(1.0, 101.0))
    # numpy's default: rank p (n - 1) interpolated in 1..100
    assert s == pytest.approx(dict(mean=50.5, median=50.5, p90=90.1, p95=95.05, p99=99.01))
    assert dep.stats(np.array([np.nan]))["mean"] is None


def test_pareto_front_by_hand():
    pts = [dep.Point("", None, None, 1, 0, 0, per_gpu, per_user, 0, {}, {}, {}, 0, 0, None, None)
           for per_gpu, per_user in ((100, 50), (200, 20), (150, 20), (90, 60), (200, 10))]
    dep.mark_pareto(pts)
    assert [p.pareto for p in pts] == [True, True, False, True, False]


def test_max_rate_is_the_edge_of_the_targets():
    """The bisection's answer meets the targets and a rate 1% above it does not (the arrivals are
    the same gaps rescaled, so latency rises with the rate; within a few resolutions of the edge
    the p95 jitters by a few tenths of a percent as requests trade places, so the step is 1%)."""
    prep = _prepared(max_running=8)
    targets = Targets(p95_latency_s=1.5 * _engine(8)[0])
    m = dep.max_rate(prep, targets, requests=1000)
    assert 0 < m["rate"] < m["saturation_rate"]
    ok = dep.evaluate(prep, OpenLoop(m["rate"]), requests=1000, targets=targets)
    over = dep.evaluate(prep, OpenLoop(1.01 * m["rate"]), requests=1000, targets=targets)
    assert not ok.misses and not ok.overloaded
    assert over.misses or over.overloaded
    # its resolution, 2^-14 of the saturation rate: the bisection's last interval, whose top it tried
    assert m["bisection_steps"] == 14 and m["resolution_rps"] == pytest.approx(m["saturation_rate"] / 2 ** 14,
                                                                              rel=1e-12)
    above = dep.evaluate(prep, OpenLoop(m["rate"] + m["resolution_rps"]), requests=1000, targets=targets)
    assert above.misses or above.overloaded


def test_a_rate_served_under_95_percent_is_overloaded():
    """Waves of 16 in step (synchronous, batch limit 16): offered its saturation rate, a replica's
    1,000 requests are served at 93% of it (the run's last waves drain), under the 95% that counts
    as sustained, so the queue grows; offered 1/1.05 of it, 96% are: sustained."""
    prep = _prepared(release="synchronous", max_running=16)
    s = dep.saturation_rate(prep, requests=1000)
    assert s == pytest.approx(16 / _engine(16)[0], rel=1e-9)
    at, below = (dep.evaluate(prep, OpenLoop(rate), requests=1000) for rate in (s, s / 1.05))
    assert 0.9 < at.requests_per_s / s < 0.95 and at.overloaded
    assert dep.why_not(at, s).endswith("under 95% of its arrivals (queues grow)")
    assert below.requests_per_s / (s / 1.05) > 0.95 and not below.overloaded


def test_each_latency_target_is_checked_at_its_own_percentile():
    """Latencies 1, 2 and 10 s: the median is 2 s (meets a p50 of 5 s), the 95th percentile 2 + 0.9 x 8
    = 9.2 s (misses a p95 of 9 s), the 99th 2 + 0.98 x 8 = 9.84 s (meets a p99 of 9.9 s)."""
    from dlmcost.serving.deployment.measure import _misses

    lat = np.array([1.0, 2.0, 10.0])
    point = dep.Point("", None, None, 1, 0, 0, 0, 0, 0, {}, {}, {}, 0, 0, None, None)
    assert _misses(point, lat, np.zeros(3), Targets(p50_latency_s=5.0, p99_latency_s=9.9)) == []
    (miss,) = _misses(point, lat, np.zeros(3), Targets(p95_latency_s=9.0))
    assert miss == dict(target="p95_latency_s", value=pytest.approx(9.2), limit=9.0)


def test_synchronous_release_costs_throughput_when_steps_vary():
    """With a spread of passes per block, a synchronous batch runs at its slowest member's pace:
    fewer requests/s than first-done release at the same concurrency; without a spread, and
    every user in step, the two agree."""
    sync = dep.evaluate(_prepared(release="synchronous", tpf_spread=0.8, max_running=32), ClosedLoop(32))
    fd = dep.evaluate(_prepared(release="first-done", tpf_spread=0.8, max_running=32), ClosedLoop(32))
    assert sync.requests_per_s < 0.9 * fd.requests_per_s
    a = dep.evaluate(_prepared(release="synchronous"), ClosedLoop(16))
    b = dep.evaluate(_prepared(release="first-done"), ClosedLoop(16))
    # waves of 16, each the first-token delay and the engine's batch-16 generation: 16 requests per wave
    assert a.requests_per_s == pytest.approx(16 / (_delay() + _engine(16)[0]), rel=1e-9)
    assert b.requests_per_s == pytest.approx(16 / (_delay() + _engine(16)[0]), rel=1e-9)


@pytest.mark.parametrize("replicas", [1, 2])
def test_saturation_by_hand(replicas):
    """Every batch always full: each replica runs waves of 16 requests (its batch limit) in step,
    each wave the engine's batch-16 generation time T16, so R replicas complete 16 R / T16
    requests/s and 128 times that in output tokens, and hold 16 R requests at once. The record
    carries it for every serve; --max-rate bisects below the same rate."""
    prep = _prepared(release="synchronous", max_running=16, replicas=replicas)
    s = dep.saturation(prep, requests=400)
    t16 = _engine(16)[0]
    assert s["rate"] == pytest.approx(16 * replicas / t16, rel=1e-9)
    assert s["output_tokens_per_s"] == pytest.approx(16 * replicas * 128 / t16, rel=1e-9)
    assert s["output_tokens_per_s_per_gpu"] == pytest.approx(16 * 128 / t16, rel=1e-9)
    assert s["in_flight"] == 16 * replicas
    assert dep.saturation_rate(prep, requests=400) == s["rate"]


def test_usd_per_mtok_over_the_price_range_by_hand(capsys):
    """One user on one H100: $/Mtok = price / (128 tokens / T x 3600) x 1e6 (T: the first-token delay
    and the engine's time), at the hardware file's list, low and high prices; a price given with
    --price has no range (both ends are it)."""
    p = dep.evaluate(_prepared(), ClosedLoop(1), requests=200)
    total = _delay() + _engine(1)[0]
    h100 = HardwareDB.load().get("h100").price_per_hour
    assert h100.low < h100.usd < h100.high

    def by_hand(price):
        return price / (128 / total * 3600) * 1e6

    assert (p.usd_per_mtok, p.usd_per_mtok_low, p.usd_per_mtok_high) == pytest.approx(
        (by_hand(h100.usd), by_hand(h100.low), by_hand(h100.high)), rel=1e-9)
    rc, out, err = run(capsys, "serve", MODEL, "--gpu", "h100", "--concurrency", "1", "--answer", "64", "--price",
                       "2.5", "-f", "json")
    assert rc == 0, err
    (point,) = json.loads(out)["deployments"][0]["points"]
    assert point["usd_per_mtok_low"] == point["usd_per_mtok_high"] == pytest.approx(point["usd_per_mtok"], rel=1e-12)


def test_table_cells_from_the_record():
    """Three significant digits, whole numbers from 1,000 on, busy in percent; the load's short
    name; * on the front, ! when overloaded, m where memory binds (a record without the key: no m)."""
    from dlmcost.render.serve import curve_table, latency_table

    st = dict(mean=0.123456, median=1234.56, p90=12.3456, p99=None)
    point = dict(load="2 req/s (Poisson)", concurrency=None, rate=2.0, requests=100, requests_per_s=1.98765,
                 output_tokens_per_s=1234.6, output_tokens_per_s_per_gpu=617.3, tokens_per_s_per_user=45.678,
                 ttfb_s=st, inter_block_s=st, latency_s=st, gpu_busy_fraction=0.876, mean_running=3.456,
                 usd_per_mtok=None, joules_per_token=0.5, pareto=True, overloaded=True, makespan_s=None, misses=[])
    record = dict(deployments=[dict(points=[point, dict(point, rate=None, concurrency=8, pareto=False,
                                                        overloaded=False, memory_binds=True)])])
    headers, rows = curve_table(record)
    assert rows[1][0] == "c=8m"
    assert rows[0] == ["2 req/s*!", "1.99", "1235", "617", "45.7", "1235", "1235", "1235", "-", "88", "3.46", "-",
                       "0.5"]
    _, lat = latency_table(record)
    assert lat[0] == ["2 req/s", "time to first block", "0.123", "1235", "12.3", "-"]


# --- plan's replica search ------------------------------------------------------------------------


def test_plan_returns_the_fewest_replicas(capsys):
    """The deployment plan returns meets the targets with R replicas, and the same candidate
    with at most R - 1 replicas' GPUs does not (the search bisects down to the fewest)."""
    base = ["plan", MODEL, "--gpu", "h100", "--tp", "1", "--precision", "bf16", "--scheme", "block", "--block", "32",
            "--tpf", "2", "--answer", "128", "--max-batch", "16", "-f", "json"]
    rc, out, err = run(capsys, *base, "--rate", "60", "--p95", "1.2")
    assert rc == 0, err
    best = [d for d in json.loads(out)["deployments"] if d["decoding"] == "block/32/2"][0]
    r = best["replicas"]
    assert r >= 3
    rc, out, err = run(capsys, *base, "--rate", "60", "--p95", "1.2", "--max-gpus", r - 1)
    assert rc == 8, (r, out)


# --- the command -----------------------------------------------------------------------------------


def test_serve_table_json_csv(capsys):
    args = ["serve", MODEL, "--gpu", "h100", "--scheme", "block", "--block", "32", "--tpf", "2", "--answer", "128",
            "--concurrency", "1,8,32", "--max-running", "32"]
    rc, out, err = run(capsys, *args)
    assert rc == 0, err
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "c=8" in out and "time to first block" in out
    rc, out, err = run(capsys, *args, "-f", "json")
    (rec,) = json.loads(out)["deployments"]
    assert [p["concurrency"] for p in rec["points"]] == [1, 8, 32]
    assert rec["deployment"]["max_running"] == 32 and rec["deployment"]["max_running_source"] == "option"
    assert rec["pareto"]
    rc, out, err = run(capsys, *args, "-f", "csv")
    assert out.splitlines()[0].startswith("deployment,model,gpu,replicas,tp,ep") and len(out.splitlines()) == 4


def test_unpriced_gpu_is_served_without_a_cost(capsys):
    rc, out, err = run(capsys, "serve", MODEL, "--gpu", "h20", "--concurrency", "4", "--answer", "64", "-f", "json")
    assert rc == 0, err
    p = json.loads(out)["deployments"][0]["points"][0]
    assert p["usd_per_mtok"] is None and p["output_tokens_per_s"] > 0
    rc, out, err = run(capsys, "serve", MODEL, "--gpu", "h20", "--price", "1.5", "--concurrency", "4", "--answer",
                       "64", "-f", "json")
    p = json.loads(out)["deployments"][0]["points"][0]
    assert p["usd_per_mtok"] == pytest.approx(1.5 / (p["output_tokens_per_s"] * 3600) * 1e6)


def test_max_rate_from_the_command(capsys):
    rc, out, err = run(capsys, "serve", MODEL, "--gpu", "h100", "--scheme", "block", "--block", "32", "--tpf", "2", "--stack", "sglang",
                       "--answer", "128", "--max-running", "16", "--max-rate", "--p95", "2", "--requests", "500")
    assert rc == 0, err
    assert "highest sustained poisson rate within targets (p95_latency_s=2)" in out
    assert "none" not in out  # 500 requests' own arrival rate, not the nominal one, is what must be served


@pytest.mark.parametrize("requests", [200, 500, 2000])
def test_a_light_open_loop_is_never_overloaded(requests):
    """At a rate far below saturation every arrival is served: the served rate is compared with the
    sample's own arrival rate (the same estimator, the same window), not with the nominal rate, from
    which a few hundred Poisson draws stray by several percent. (It was compared with the nominal
    one, so that at 500 requests no rate at all passed --max-rate: the same draws, rescaled, at
    every rate.)"""
    prep = dep.prepare(MODEL, (np.full(requests, 256.0), np.full(requests, 128.0)),
                       dep.Setup(gpu="h100", scheme="dual-cache", block=32, tpf=2, max_running=16))
    for rate in (0.01, 0.3, 1.0):
        p = dep.evaluate(prep, api.OpenLoop(rate), requests=requests, seed=0)
        assert not p.overloaded, (rate, p.requests_per_s)


@pytest.mark.parametrize("args, code, needle", [
    (["--concurrency", "0"], 2, "concurrency"),
    (["--rate", "-1"], 2, "rate"),
    (["--concurrency", "4", "--rate", "2"], 2, "give one load"),
    (["--concurrency", "4", "--release", "sometimes"], 2, "--release"),
    (["--rate", "2", "--arrival", "lumpy"], 2, "arrivals"),
    (["--rate", "2", "--arrival", "gamma", "--cv", "0"], 2, "--cv"),
    (["--concurrency", "4", "--tpf-spread", "-1"], 2, "--tpf-spread"),
    (["--concurrency", "4", "--parallel", "3"], 2, "--parallel goes with --job"),
    ([], 2, "give a load"),
    (["--job", "0"], 2, "--job: the number of requests must be in 1..2,000,000, got 0"),  # not "give a load"
    (["--rate", "1e308"], 2, "the request rate must be in 0.000001..10,000,000 requests/s, got 1e+308"),
    (["--rate", "1e-300"], 2, "the request rate must be in 0.000001..10,000,000 requests/s, got 1e-300"),  # was 3
    (["--concurrency", "4", "--think", "1e300"], 2, "think time must be in 0..1,000,000 seconds, got 1e+300"),
    (["--concurrency", "4", "--gpu", "h900"], 4, "unknown GPU"),
    (["--concurrency", "4", "--max-running", "0"], 2, "--max-running"),
    (["--concurrency", "4", "--prefill-chunk", "-1"], 2, "--prefill-chunk: tokens per step in 0..10,000,000"),
    (["--concurrency", "4", "--p95", "-2"], 2, "error: --p95 must be a positive number, got -2"),
    (["--concurrency", "4", "--min-user-tps", "0"], 2, "error: --min-user-tps must be a positive number, got 0"),
    (["--concurrency", "4", "-f", "xml"], 2, "unknown format"),
    (["--concurrency", "4", "--tp", "3"], 3, "cannot run"),
])
def test_bad_options_one_line(capsys, args, code, needle):
    rc, out, err = run(capsys, "serve", MODEL, "--answer", "64", *args)
    assert rc == code, err
    assert err.count("\n") == 1 and err.startswith("error: ") and needle in err, err


def test_chart_marks_the_saturation_and_names_the_model(capsys, tmp_path):
    """Issue 29: the load curve's legend named no model, and nothing marked where the deployment
    saturates. Three panels: throughput against interactivity, throughput against the load with
    the saturation throughput (a dashed line) and point (the saturation rate), and latency p50 and
    p99 against the load with the saturation rate; every number is the JSON record's."""
    pytest.importorskip("matplotlib")
    from dlmcost.render.serve import serve_chart

    args = ["serve", MODEL, "--answer", "64", "--rate", "1,4,16", "--requests", "200"]
    rc, out, err = run(capsys, *args, "-f", "json", "--plot", tmp_path / "curve.svg")
    assert rc == 0, err
    (entry,) = json.loads(out)["deployments"]
    sat, points = entry["saturation"], sorted(entry["points"], key=lambda p: p["rate"])
    chart = serve_chart(json.loads(out))
    assert [p.title for p in chart.panels] == ["throughput against interactivity", "throughput against load",
                                               "latency against load"]
    series = {s.gid: s for p in chart.panels for s in p.series}
    assert series["serve:saturation:1"].y == [sat["output_tokens_per_s"]] * 2
    assert series["serve:saturation-point:1"].x == [sat["rate"]]
    assert series["serve:saturation-line:1"].x == [sat["rate"]] * 2
    assert series["serve:latency-median:1"].y == [p["latency_s"]["median"] for p in points]
    assert series["serve:latency-p99:1"].y == [p["latency_s"]["p99"] for p in points]
    assert series["serve:curve:1"].x == [1.0, 4.0, 16.0]
    named = [s.label for s in chart.panels[0].series if s.gid.startswith("serve:points")]
    assert named == ["LLaDA-8B-Instruct"]
    text = (tmp_path / "curve.svg").read_text()
    assert all(f'id="{gid}"' in text for gid in ("serve:pareto", "serve:curve:1", "serve:saturation:1",
                                                 "serve:latency-p99:1"))


def test_a_dllm_beside_the_ar_model_it_would_replace(capsys):
    """Several models, the same loads and lengths, one table; the AR model decodes AR although a
    diffusion decoding was asked for; the Pareto front is over every deployment's points, and each
    deployment's numbers are those it has alone."""
    both = ["serve", f"{MODEL},Qwen/Qwen2.5-7B", "--gpu", "h100", "--scheme", "block", "--block", "32", "--tpf", "2",
            "--answer", "128", "--concurrency", "1,16", "--max-running", "32", "-f", "json"]
    rc, out, err = run(capsys, *both)
    assert rc == 0, err
    rec = json.loads(out)
    dllm, ar = rec["deployments"]
    assert (dllm["deployment"]["decoding"], ar["deployment"]["decoding"]) == ("block/32/2", "ar")
    everyone = [p for d in rec["deployments"] for p in d["points"]]
    front = [p for p in everyone if p["pareto"]]
    for f in front:
        assert not any(q["output_tokens_per_s_per_gpu"] > f["output_tokens_per_s_per_gpu"]
                       and q["tokens_per_s_per_user"] > f["tokens_per_s_per_user"] for q in everyone)
    assert rec["pareto"] == [[i, j] for i, d in enumerate(rec["deployments"]) for j, p in enumerate(d["points"])
                             if p["pareto"]]
    rc, out, err = run(capsys, "serve", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--answer", "128", "--concurrency", "1,16",
                       "--max-running", "32", "-f", "json")
    alone = json.loads(out)["deployments"][0]["points"]
    assert [p["output_tokens_per_s"] for p in alone] == [p["output_tokens_per_s"] for p in ar["points"]]
    rc, out, err = run(capsys, *both[:-2])
    assert rc == 0 and "#1 GSAI-ML/LLaDA-8B-Instruct" in out and "#2 Qwen/Qwen2.5-7B" in out
    assert max(len(line) for line in out.splitlines()) <= 100


def test_stack_fields_set_the_defaults(monkeypatch):
    """A stack profile's `max_running_requests` and `release` are the defaults; the options win."""
    from dlmcost.analysis import prepare as prep_mod

    real = prep_mod.resolve_stack

    class WithServing:
        max_running_requests = 1
        release = "first-done"

        def __init__(self, stack):
            self._stack = stack

        def __getattr__(self, name):
            return getattr(self._stack, name)

    monkeypatch.setattr(prep_mod, "resolve_stack", lambda stack, profile, **kw: WithServing(real(stack, profile, **kw)))
    lengths = (np.full(50, 256.0), np.full(50, 128.0))
    with foreign_scheme_warning():
        p = dep.prepare(MODEL, lengths, dep.Setup(gpu="h100", **BLOCK))
    assert (p.max_running, p.max_running_source, p.release, p.release_source) == (1, "stack", "first-done", "stack")
    with foreign_scheme_warning():
        p = dep.prepare(MODEL, lengths, dep.Setup(gpu="h100", max_running=4, release="synchronous", **BLOCK))
    assert (p.max_running, p.max_running_source, p.release, p.release_source) == (4, "option", "synchronous", "option")
    monkeypatch.setattr(prep_mod, "resolve_stack", real)
    with foreign_scheme_warning():
        p = dep.prepare(MODEL, lengths, dep.Setup(gpu="h100", **BLOCK))
    assert (p.max_running, p.max_running_source, p.release) == (2048, "stack", "synchronous")  # sglang's own
    with foreign_scheme_warning():  # a stack without a limit of its own: the default
        p = dep.prepare(MODEL, lengths, dep.Setup(gpu="h100", **(BLOCK | dict(stack="compiled"))))
    assert (p.max_running, p.max_running_source, p.release) == (dep.DEFAULT_MAX_RUNNING, "default", "synchronous")


@pytest.mark.parametrize("release", ["first-done", "synchronous"])
def test_reported_numbers_obey_the_response_time_law(release):
    """The printed requests/s and mean latency of a closed loop (24 users thinking 1 s, at most 8
    running, passes per block spread): N = X (R + Z)."""
    prep = _prepared(max_running=8, release=release, tpf_spread=0.5)
    p = dep.evaluate(prep, ClosedLoop(24, think_s=1.0), requests=6000)
    assert 24 == pytest.approx(p.requests_per_s * (p.latency_s["mean"] + 1.0), rel=0.02)


# --- the K/V cache's number format (--kv-dtype) --------------------------------------------------

def test_an_fp8_kv_cache_fits_the_requests_its_bytes_allow(run):
    """An AR deployment of Qwen2.5-7B whose K/V cache, 1,024 + 1,024 tokens a request, limits its
    running requests below the 256 asked for: 248 fit with a bf16 cache (2 bytes an element), 325
    with fp8 (1 byte), as worked by hand; the header and the JSON name the dtype (FP8 given as fp8)."""
    assert (oracle.qwen7b_requests_in_memory(2, 1024, 1024), oracle.qwen7b_requests_in_memory(1, 1024, 1024)) == (248, 325)
    args = ["serve", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--scheme", "ar", "--stack", "none", "--prompt", "1024",
            "--answer", "1024", "--job", "1", "--max-running", "256"]
    for given, name, kv_bytes in ((None, "bf16", 2), ("FP8", "fp8", 1)):
        rc, out, err = run(*args, *(["--kv-dtype", given] if given else []), "-f", "json")
        assert rc == 0, err
        d = json.loads(out)["deployments"][0]["deployment"]
        assert (d["kv_dtype"], d["memory_limit"]) == (name, oracle.qwen7b_requests_in_memory(kv_bytes, 1024, 1024))
    rc, out, err = run(*args, "--kv-dtype", "fp8")
    assert rc == 0 and "TP1 bf16 K/V fp8 " in out.replace("\n", " "), err


def test_a_comma_list_of_kv_dtypes_compares_deployments(run):
    """`--kv-dtype bf16,FP8` compares the two caches as `--precision bf16,fp8` compares weights: one
    deployment each, in the order given, with the memory limits worked by hand above (248, 325)."""
    args = ["serve", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--scheme", "ar", "--stack", "none", "--prompt", "1024",
            "--answer", "1024", "--job", "1", "--max-running", "256", "--kv-dtype", "bf16,FP8", "-f", "json"]
    rc, out, err = run(*args)
    assert rc == 0, err
    compared = [r["deployment"] for r in json.loads(out)["deployments"]]
    assert [(d["kv_dtype"], d["memory_limit"]) for d in compared] == [
        ("bf16", oracle.qwen7b_requests_in_memory(2, 1024, 1024)), ("fp8", oracle.qwen7b_requests_in_memory(1, 1024, 1024))]


# --- the engine's share of each GPU's memory (--mem-fraction) -------------------------------------

def test_a_larger_memory_fraction_fits_the_requests_its_bytes_allow(run):
    """The deployment above with 95% of the H100's 80 GiB for the engine (SGLang's
    --mem-fraction-static 0.95) in place of vLLM's default 90%: floor((0.95 x 80 GiB - weights) /
    a request's bytes) = 266 requests fit, 248 at 0.9, worked by hand; JSON and header name the share."""
    assert [oracle.qwen7b_requests_in_memory(2, 1024, 1024, f) for f in (0.9, 0.95)] == [248, 266]
    args = ["serve", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--scheme", "ar", "--stack", "none", "--prompt", "1024",
            "--answer", "1024", "--job", "1", "--max-running", "256"]
    for given, fraction in ((None, 0.9), ("0.95", 0.95)):
        rc, out, err = run(*args, *(["--mem-fraction", given] if given else []), "-f", "json")
        assert rc == 0, err
        d = json.loads(out)["deployments"][0]["deployment"]
        assert (d["mem_fraction"], d["memory_limit"]) == (fraction, oracle.qwen7b_requests_in_memory(2, 1024, 1024, fraction))
    rc, out, err = run(*args, "--mem-fraction", "0.95")
    assert rc == 0 and "95% of memory fits 266)" in out.replace("\n", " "), err


# --- a load that runs into the memory limit says the first tokens are an upper bound ----------------

QWEN7B_1K1K = ["serve", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--stack", "none", "--prompt", "1024", "--answer", "1024",
               "--max-running", "256"]


@pytest.mark.parametrize("replicas, parallel, warned", [(1, 248, False), (1, 249, True), (2, 496, False), (2, 497, True)])
def test_a_job_beyond_what_memory_holds_warns_and_preempts(run, replicas, parallel, warned):
    """Memory holds 248 of these requests at their final lengths (worked by hand above): 248 in
    parallel a replica run without a word or a preemption, 249 (497 over two replicas: 249 on one)
    warn once, naming the load and what a replica's memory holds, and all start at once, their
    K/V growing as tokens come, so that near their ends the latest admitted is preempted."""
    assert oracle.qwen7b_requests_in_memory(2, 1024, 1024) == 248
    rc, out, err = run(*QWEN7B_1K1K, "--scheme", "ar", "--replicas", str(replicas), "--job", str(parallel),
                       "--parallel", str(parallel), "-f", "json")
    assert rc == 0, err
    lines = [ln for ln in err.splitlines() if "memory binds" in ln]
    assert len(lines) == int(warned), err
    point = json.loads(out)["deployments"][0]["points"][0]
    assert point["memory_binds"] is warned and (point["preemptions"] > 0) is warned
    if warned:
        assert f"{parallel} in parallel: a replica holds about 248 requests" in lines[0]
        assert "preempted and recomputed" in lines[0] and "upper bound" not in lines[0]


def test_memory_does_not_bind_under_a_running_limit_it_holds(run):
    """300 in parallel under a running limit of 248 (what memory holds): the limit, not memory, holds
    them back, so no warning; with the running limit at 249 it binds."""
    args = [a if a != "256" else "248" for a in QWEN7B_1K1K]
    rc, out, err = run(*args, "--scheme", "ar", "--job", "300", "--parallel", "300")
    assert rc == 0 and "memory binds" not in err, err
    rc, out, err = run(*[a if a != "256" else "249" for a in QWEN7B_1K1K], "--scheme", "ar", "--job", "300", "--parallel", "300")
    assert rc == 0 and "memory binds" in err, err


def test_an_open_load_warns_when_its_running_requests_fill_memory(run):
    """At 100 req/s the mean running requests (about 237) reach 95% of the 248 memory holds: a
    warning names that rate alone, not 1 req/s beside it."""
    rc, out, err = run(*QWEN7B_1K1K, "--scheme", "ar", "--rate", "1,100", "-f", "json")
    assert rc == 0, err
    running = [p["mean_running"] for p in json.loads(out)["deployments"][0]["points"]]
    assert running[0] < 0.95 * 248 <= running[1]
    lines = [ln for ln in err.splitlines() if "memory binds" in ln]
    assert len(lines) == 1 and "at 100 req/s" in lines[0] and "1 req/s" not in lines[0], err
    assert [p["memory_binds"] for p in json.loads(out)["deployments"][0]["points"]] == [False, True]


def test_a_whole_canvas_diffusion_decoding_does_not_warn(run):
    """A masked-diffusion canvas holds its whole length from its first pass: reserving it at
    admission is what the engine does (no K/V on demand, no preemption), so a job beyond memory
    gives no warning."""
    rc, out, err = run("serve", "GSAI-ML/LLaDA-8B-Instruct", "--gpu", "h100", "--stack", "none", "--scheme", "mdm",
                       "--prompt", "4096", "--answer", "4096", "--block", "4096", "--steps", "8", "--job", "400",
                       "--parallel", "400", "-f", "json")
    assert rc == 0, err
    d = json.loads(out)["deployments"][0]["deployment"]
    assert d["memory_limit"] < 400 and "memory binds" not in err
    rc, out, err = run("serve", "GSAI-ML/LLaDA-8B-Instruct", "--gpu", "h100", "--stack", "none", "--scheme", "mdm",
                       "--prompt", "4096", "--answer", "4096", "--block", "4096", "--steps", "8", "--job", "40",
                       "--parallel", "40", "--release", "first-done", "-f", "json")
    point = json.loads(out)["deployments"][0]["points"][0]
    assert rc == 0 and point["preemptions"] == 0 and point["mean_running"] <= d["memory_limit"], err


def test_an_open_load_under_a_running_limit_memory_holds_does_not_warn(run):
    """A running limit of 247 under the 248 memory holds: the limit fills first, so 100 req/s (far
    past what the replica serves) runs into it, never into memory: no warning, memory_binds false."""
    assert oracle.qwen7b_requests_in_memory(2, 1024, 1024) == 248
    args = [a if a != "256" else "247" for a in QWEN7B_1K1K]
    rc, out, err = run(*args, "--scheme", "ar", "--rate", "100", "-f", "json")
    assert rc == 0 and "memory binds" not in err, err
    assert json.loads(out)["deployments"][0]["points"][0]["memory_binds"] is False


@pytest.mark.parametrize("replicas, rate, requests", [(1, 1000, 300), (2, 200, 600)])
def test_an_overloaded_open_load_binds_whatever_the_number_of_requests(run, replicas, rate, requests):
    """An overloaded open load (its queue grows: the point's own `overloaded`) under a running limit of
    256 above the 248 memory holds waits on memory, however few requests are simulated (a few hundred a
    replica, whose ramp and drain pull the mean running requests under 95% of 248)."""
    rc, out, err = run(*QWEN7B_1K1K, "--scheme", "ar", "--rate", str(rate), "--replicas", str(replicas),
                       "--requests", str(requests), "-f", "json")
    assert rc == 0, err
    point = json.loads(out)["deployments"][0]["points"][0]
    assert point["overloaded"] and point["mean_running"] < 0.95 * 248
    assert point["memory_binds"] is True and "memory binds" in err


def test_most_running_counts_the_batch_a_measured_request_joined():
    """Three requests join at 0, 0 and 0.5 s and leave at 1, 2 and 3 s: the third joins a batch of
    two (three with itself); a fourth joining at 1 s, as the first leaves, makes three, not four."""
    from dlmcost.serving.memory_binding import most_in_batch

    def most(start, done, window):
        return most_in_batch(np.array(start, float), np.array(done, float), window)

    assert most([0, 0, 0.5], [1, 2, 3], slice(0, 3)) == 3
    assert most([0, 0, 0.5], [1, 2, 3], slice(0, 2)) == 2  # the measured ones joined a batch of 2
    assert most([0, 0, 0.5, 1], [1, 2, 3, 4], slice(3, 4)) == 3
    # a run that recorded no joining times, or a window of no measured request, met no batch
    assert most_in_batch(None, np.array([1.0, 2.0]), slice(0, 2)) == 0
    assert most([0, 0], [1, 2], slice(1, 1)) == 0


def test_requests_memory_holds_is_one_over_the_mean_share():
    """Shares 0.1 and 0.4 of memory, requests of classes 0, 1, 1, 1: the mean share is
    (0.1 + 3 * 0.4) / 4 = 0.325, so memory holds 1 / 0.325 of them; no requests (or no share) are
    never limited by memory, and say so without numpy's empty-mean warning."""
    import warnings

    from dlmcost.serving.memory_binding import requests_memory_holds

    assert requests_memory_holds([0.1, 0.4], np.array([0, 1, 1, 1])) == pytest.approx(1 / 0.325)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert requests_memory_holds([0.1, 0.4], np.array([], int)) == float("inf")
    assert requests_memory_holds([0.0, 0.4], np.array([0, 0])) == float("inf")


def test_memory_binds_at_its_two_edges():
    """Memory holds 20 requests: a running limit of 20 binds first (never memory), one of 21 lets
    memory bind from 95% of 20 = 19 requests held at once, not 18."""
    from dlmcost.serving.memory_binding import peak_binds

    assert not peak_binds(20, 20.0, 20)
    assert peak_binds(19, 20.0, 21)
    assert not peak_binds(18, 20.0, 21)


def test_memory_warnings_of_a_comparison_name_their_deployment(run):
    """Comparing K/V dtypes, each deployment's warning names its own (bf16 holds 248 of these
    requests, fp8 325: worked by hand), so neither reads as the other's."""
    held = {kv: oracle.qwen7b_requests_in_memory(b, 1024, 1024) for kv, b in (("bf16", 2), ("fp8", 1))}
    assert held == {"bf16": 248, "fp8": 325}
    args = [a if a != "256" else "512" for a in QWEN7B_1K1K]
    rc, out, err = run(*args, "--scheme", "ar", "--job", "400", "--parallel", "400", "--kv-dtype", "bf16,fp8")
    assert rc == 0, err
    lines = [ln for ln in err.splitlines() if "memory binds" in ln]
    assert len(lines) == 2, err
    for line, (kv, n) in zip(lines, held.items()):
        assert f"H100 SXM TP1 bf16 K/V {kv}, ar, running <= 512 at" in line and f"holds about {n} requests" in line
        assert "on average" not in line  # one length: the mean request is the longest


def test_memory_warning_over_varied_lengths_gives_the_headers_count_beside_its_mean(run):
    """With prompts of two lengths the warning's "about N" (the mean request) is more than the
    header's "memory fits M" (the longest); the warning quotes M beside N so the two do not clash."""
    rc, out, err = run(*QWEN7B_1K1K, "--scheme", "ar", "--prompt", "p50:1024,p90:3000", "--job", "400",
                       "--parallel", "400", "-f", "json")
    assert rc == 0, err
    fits = json.loads(out)["deployments"][0]["deployment"]["memory_limit"]
    line = next(ln for ln in err.splitlines() if "memory binds" in ln)
    about = int(line.split("holds about ")[1].split(" ")[0].replace(",", ""))
    assert about > fits and f"on average ({fits} of the longest" in line


def test_few_requests_a_replica_past_saturation_serve_no_more_than_many():
    """Two replicas given 250 requests each at 1000 req/s: the measured window sits inside the first
    wave (248 admitted at once, finishing as they arrived, a millisecond apart), whose spread is no
    rate: they serve about what one replica given 2,000 requests serves, twice over, and far less
    than arrives (the queue grows)."""
    def served(replicas, requests):
        setup = dep.Setup(gpu="h100", stack="none", scheme="ar", max_running=256, replicas=replicas)
        return dep.serve("Qwen/Qwen2.5-7B", [OpenLoop(1000)], setup, prompt="1024", answer="1024",
                         requests=requests).points[0]

    from dlmcost.errors import DlmcostWarning

    with pytest.warns(DlmcostWarning, match="memory binds"):
        one, two = served(1, 2000), served(2, 500)
    assert two.overloaded and two.requests_per_s < 0.1 * 1000
    assert two.requests_per_s == pytest.approx(2 * one.requests_per_s, rel=0.1)


# --- an open load over several replicas: each replica reaches its steady state --------------------

@pytest.mark.parametrize("rate, overloaded", [(200.0, False), (800.0, True)])
def test_an_open_load_over_replicas_serves_what_they_sustain(run, rate, overloaded):
    """Eight replicas of Qwen2.5-7B on an H100: below their saturation (the closed loop that keeps
    every batch full, one replica times eight) they serve what arrives, within the sample's few
    percent; past it they serve the saturation rate and say they are overloaded. Dealing 2,000
    requests over eight replicas left each a few hundred, inside its first wave at 800 req/s, and
    read 2,297 req/s served, not overloaded, against a saturation of 426. At a running limit of 256:
    at SGLang's own 2,048 the closed loop keeps batches larger than a few hundred requests a replica
    reach before the sample ends."""
    rc, out, err = run("serve", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--replicas", "8", "--rate", str(rate),
                       "--max-running", "256", "-f", "json")
    assert rc == 0, err
    d = json.loads(out)["deployments"][0]
    served, saturation = d["points"][0]["requests_per_s"], d["saturation"]["rate"]
    assert d["points"][0]["overloaded"] is overloaded
    assert served == pytest.approx(min(rate, saturation), rel=0.03)
