"""`dlmcost plan`: the replica simulation against queueing closed forms and hand-worked
schedules, the money and energy formulas, a hand-checked plan, monotonicity, bad scenarios."""

from __future__ import annotations

import json
import dataclasses
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from dlmcost import api, errors
from dlmcost.cli import main
from dlmcost.inputs.hardware import GPU, HardwareDB
from dlmcost.plan import results
from dlmcost.serving.simulate import ClassTable, simulate

_simulate = simulate  # the simulator itself (tests call `simulate`, checked by Little's law)
from dlmcost.serving.traffic import parse_lengths

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay import replay  # noqa: E402  (the brute-force reference simulation, tests/replay.py)
from preemption_reference import out_of_batch  # noqa: E402

MODEL = "GSAI-ML/LLaDA-8B-Instruct"


pytestmark = pytest.mark.usefixtures("bundled_offline")


@pytest.fixture(autouse=True)
def _littles_law_on_every_run(monkeypatch):
    """Little's law on every simulation a test here runs (directly or through plan's search):
    the time integral of the batch size, from the simulator's record of every iteration, equals
    the time requests spent in the batch, from their admission and finish times."""
    from dlmcost.serving import behaviour

    def checked(*args, **kwargs):
        r = _simulate(*args, **kwargs)
        assert r.in_service_s == pytest.approx(float(np.sum(r.done_s - r.start_s - out_of_batch(r))), rel=1e-9)
        assert (r.start_s >= r.arrival_s - 1e-9).all() and (r.done_s >= r.start_s).all()
        return r

    monkeypatch.setattr(behaviour, "simulate", checked)  # plan's and serve's one way to the simulator
    monkeypatch.setitem(globals(), "simulate", checked)


def run(capsys, *args):
    capsys.readouterr()
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def one_class(nfe: int, pass_s, first: int = 1, share: float = 0.0) -> ClassTable:
    """A single request class whose pass takes pass_s(b) seconds at batch b."""
    cap = 64
    return ClassTable([nfe], [first], [share], [[0.0] + [pass_s(b) for b in range(1, cap + 1)]])


# --- the simulation against closed forms ---------------------------------------------------------


@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_batch_one_is_md1_pollaczek_khinchine(rho):
    """Batch limit 1, Poisson arrivals, deterministic service D = NFE x pass time: an M/D/1
    queue, mean wait W = rho D / (2 (1 - rho))."""
    nfe, tau = 10, 0.1
    service = nfe * tau
    n = 60_000
    rng = np.random.default_rng(7)
    arrivals = np.cumsum(rng.exponential(service / rho, n))
    r = simulate(one_class(nfe, lambda b: tau), np.zeros(n, int), 1, arrivals_s=arrivals)
    wait = (r.latency_s - service)[n // 10:]
    expected = rho * service / (2 * (1 - rho))
    assert wait.mean() == pytest.approx(expected, rel=0.06)
    assert wait.min() >= -1e-9  # nobody is served faster than D


def test_closed_loop_all_in_one_batch_is_exact():
    """N users, think time 0, batch >= N: every iteration runs N requests, so every request
    takes NFE x pass(N) exactly."""
    users, nfe = 12, 50
    r = simulate(one_class(nfe, lambda b: 0.01 + 0.002 * b), np.zeros(600, int), 64, users=users)
    assert np.allclose(r.latency_s, nfe * (0.01 + 0.002 * users))


def test_saturation_throughput_is_batch_over_generation_time():
    """Always-full batch of B: B requests per NFE x pass(B) seconds."""
    nfe, cap = 20, 8
    r = simulate(one_class(nfe, lambda b: 0.05 + 0.01 * b), np.zeros(4000, int), cap, users=100)
    done = np.sort(r.done_s)[400:]
    throughput = (len(done) - 1) / (done[-1] - done[0])
    assert throughput == pytest.approx(cap / (nfe * (0.05 + 0.01 * cap)), rel=0.01)


def test_join_at_step_boundary_by_hand():
    """A (t=0) and B (t=1.5), NFE 4, first block after 2 passes; pass 1 s alone, 1.5 s for two.
    A runs alone 0-1, 1-2; B joins at the boundary t=2; both run 2-3.5, 3.5-5 (A done at 5);
    B runs alone 5-6, 6-7. Latencies 5 and 5.5; first blocks at t=2 (A) and t=5 (B)."""
    table = ClassTable([4], [2], [0.0], [[0.0, 1.0, 1.5]])
    r = simulate(table, np.zeros(2, int), 2, arrivals_s=np.array([0.0, 1.5]))
    assert r.done_s.tolist() == pytest.approx([5.0, 7.0])
    assert r.latency_s.tolist() == pytest.approx([5.0, 5.5])
    assert r.ttfb_s.tolist() == pytest.approx([2.0, 3.5])
    assert r.busy_s == pytest.approx(7.0)


def test_an_arrival_joins_at_the_first_boundary_at_or_after_it_by_hand():
    """Passes of 2 s at any batch (not 1 s: a boundary read off in passes, not seconds, would pass
    unnoticed), NFE 5. A at 0 runs 0-2-4-6-8-10. B arrives at 3, inside A's second pass: it joins
    at the next boundary, 4 (not 6), done 10 s later at 14. C arrives at 8, exactly a boundary:
    it joins there (not at 10), done at 18. First tokens one pass after each start."""
    table = ClassTable([5], [1], [0.0], [[0.0, 2.0, 2.0, 2.0]])
    r = simulate(table, np.zeros(3, int), 3, arrivals_s=np.array([0.0, 3.0, 8.0]))
    assert r.start_s.tolist() == pytest.approx([0.0, 4.0, 8.0])
    assert r.first_block_s.tolist() == pytest.approx([2.0, 6.0, 10.0])
    assert r.done_s.tolist() == pytest.approx([10.0, 14.0, 18.0])


def two_pass_kinds(nfe: int, first: int, first_pass_s, pass_s, cap: int = 8) -> ClassTable:
    """One request class whose first pass takes first_pass_s(b) and every later pass pass_s(b)
    seconds when b requests run it together."""
    return ClassTable([nfe], [first], [0.0], [[0.0] + [pass_s(b) for b in range(1, cap + 1)]],
                      [[0.0] + [first_pass_s(b) for b in range(1, cap + 1)]])


def test_lone_request_prefill_then_steady_passes():
    """An idle replica: the first block is final after the prefill pass and the first block's
    passes at batch 1, the answer after the prefill and every later pass."""
    nfe, first, prefill, step = 9, 3, 2.0, 0.25
    table = two_pass_kinds(nfe, first, lambda b: prefill * b, lambda b: step * b)
    r = simulate(table, np.zeros(2, int), 4, arrivals_s=np.array([0.0, 100.0]))  # the second finds it idle
    assert r.ttfb_s.tolist() == pytest.approx([prefill + (first - 1) * step] * 2)
    assert r.latency_s.tolist() == pytest.approx([prefill + (nfe - 1) * step] * 2)
    assert r.busy_s == pytest.approx(2 * (prefill + (nfe - 1) * step))


def test_prefill_of_a_joining_request_lengthens_everyones_iteration():
    """A (t=0) and B (t=1.2), NFE 4, first block after 2 passes. Per request at batch b, a
    first pass costs first(b) / b and a later one step(b) / b; alone: first 2, step 1; two in
    flight: first(2) = 3, step(2) = 1.5 (a shared part counted once).
    A's prefill 0-2; B joins at t=2: A's step (1.5/2) + B's prefill (3/2) = 2.25, to 4.25 (A's
    first block; 3.5 if B's prefill cost a step); then 2 x 1.5 to 7.25 (A done, B's first block at
    5.75); B alone 7.25-8.25."""
    first = {1: 2.0, 2: 3.0}
    step = {1: 1.0, 2: 1.5}
    table = ClassTable([4], [2], [0.0], [[0.0, step[1], step[2]]], [[0.0, first[1], first[2]]])
    r = simulate(table, np.zeros(2, int), 2, arrivals_s=np.array([0.0, 1.2]))
    t1 = first[1]  # A's prefill, alone
    t2 = t1 + step[2] / 2 + first[2] / 2  # A's second pass beside B's prefill
    t4 = t2 + 2 * step[2]  # two more passes each: A is done
    t5 = t4 + step[1]  # B's last pass, alone
    assert r.done_s.tolist() == pytest.approx([t4, t5])
    assert r.ttfb_s.tolist() == pytest.approx([t2, t2 + step[2] - 1.2])
    assert r.latency_s.tolist() == pytest.approx([t4, t5 - 1.2])
    assert r.busy_s == pytest.approx(t5)


@pytest.mark.parametrize("users", [1, 5, 12])
def test_burst_admitted_together_pays_the_batch_prefill(users):
    """N requests at t = 0 in one batch: the first iteration is their prefill at batch N, then
    NFE - 1 steps at batch N: TTFB = first(N) + (first_passes - 1) step(N), latency =
    first(N) + (NFE - 1) step(N)."""
    nfe, first_passes = 30, 4
    first = lambda b: 0.5 + 0.3 * b  # noqa: E731
    step = lambda b: 0.02 + 0.001 * b  # noqa: E731
    table = two_pass_kinds(nfe, first_passes, first, step, cap=16)
    r = simulate(table, np.zeros(users, int), 16, arrivals_s=np.zeros(users))
    assert np.allclose(r.ttfb_s, first(users) + (first_passes - 1) * step(users))
    assert np.allclose(r.latency_s, first(users) + (nfe - 1) * step(users))


def test_batch_one_md1_with_a_prefill():
    """Batch limit 1 with a first pass unlike the others: still M/D/1, D = first + (NFE-1) step."""
    nfe, prefill, step, rho = 10, 0.4, 0.05, 0.7
    service = prefill + (nfe - 1) * step
    n = 60_000
    arrivals = np.cumsum(np.random.default_rng(3).exponential(service / rho, n))
    r = simulate(two_pass_kinds(nfe, 2, lambda b: prefill, lambda b: step), np.zeros(n, int), 1, arrivals_s=arrivals)
    wait = (r.latency_s - service)[n // 10:]
    assert wait.mean() == pytest.approx(rho * service / (2 * (1 - rho)), rel=0.06)
    assert wait.min() >= -1e-9
    assert np.allclose(r.ttfb_s - (r.latency_s - service), prefill + step)


@pytest.mark.parametrize("loop", ["open", "closed"])
def test_mixed_classes_against_a_brute_force_replay(loop):
    """Two classes with different prefills, batch limit 3, random arrivals (or 4 users who think
    0.3 s between answer and question): the event-driven simulation gives the brute-force replay's times."""
    rng = np.random.default_rng(11)
    cap = 3
    nfe, first_passes = [5, 8], [2, 3]
    first = [[0.0] + [0.8 + 0.1 * b for b in range(1, cap + 1)], [0.0] + [1.5 + 0.2 * b for b in range(1, cap + 1)]]
    steady = [[0.0] + [0.1 + 0.05 * b for b in range(1, cap + 1)], [0.0] + [0.2 + 0.02 * b for b in range(1, cap + 1)]]
    table = ClassTable(nfe, first_passes, [0.0, 0.0], steady, first)
    n = 200
    cls = rng.integers(0, 2, n)
    if loop == "open":
        arrivals = np.cumsum(rng.exponential(0.6, n))
        r = simulate(table, cls, cap, arrivals_s=arrivals)
        done, ttfb = replay(nfe, first_passes, first, steady, cls, cap, arrivals=arrivals)
    else:
        r = simulate(table, cls, cap, users=4, think_s=0.3)
        done, ttfb = replay(nfe, first_passes, first, steady, cls, cap, users=4, think_s=0.3)
    assert r.done_s.tolist() == pytest.approx(done)
    assert r.first_block_s.tolist() == pytest.approx(ttfb)


def test_memory_share_limits_admission():
    """Two requests whose memory shares sum above 1 never share a batch: they run one after
    the other even though the batch limit would allow both."""
    table = ClassTable([3], [1], [0.6], [[0.0, 1.0, 1.0]])
    r = simulate(table, np.zeros(2, int), 8, arrivals_s=np.array([0.0, 0.0]))
    assert r.done_s.tolist() == pytest.approx([3.0, 6.0])


def test_a_finished_request_frees_its_memory_share_by_hand():
    """Memory shares of 0.5 (two requests fit), a batch limit of 8, NFE 4, passes of 1 s. A at 0
    runs 0-4; B at 1 joins at once (0.5 + 0.5 = 1), done at 5; C at 1.5 finds the memory full and
    joins when A leaves at 4 (B's 0.5 and its own), done at 8, not when the batch empties at 5."""
    table = ClassTable([4], [1], [0.5], [[0.0, 1.0, 1.0, 1.0]])
    r = simulate(table, np.zeros(3, int), 8, arrivals_s=np.array([0.0, 1.0, 1.5]))
    assert r.start_s.tolist() == pytest.approx([0.0, 1.0, 4.0])
    assert r.done_s.tolist() == pytest.approx([4.0, 5.0, 8.0])


def test_simulation_is_deterministic(capsys):
    args = ["plan", MODEL, "--rate", "10", "--gpu", "h100", "--tp", "1", "--precision", "bf16", "-f", "json"]
    a, b = run(capsys, *args), run(capsys, *args)
    assert a[0] == 0 and a[1] == b[1]


# --- money and energy ---------------------------------------------------------------------------


def test_money_and_energy_formulas_by_hand():
    # 8 GPUs at $3.99/h serving 1000 output tokens/s: 31.92 $/h; 31.92 / 3.6e6 tokens * 1e6
    assert results.usd_per_hour(8, 3.99) == pytest.approx(31.92)
    assert results.usd_per_mtok(31.92, 1000.0) == pytest.approx(8.866666, rel=1e-6)
    # 8 x 700 W at full envelope over 1000 tok/s = 5.6 J/token; at 60% draw 3.36
    assert results.joules_per_token(8, 700.0, 1.0, 1000.0, busy_fraction=1.0) == pytest.approx(5.6)
    assert results.joules_per_token(8, 700.0, 0.6, 1000.0, busy_fraction=1.0) == pytest.approx(3.36)
    # idle boards draw 15% of 700 W = 105 W: never busy, 8 x 105 / 1000 = 0.84; half busy at the
    # full envelope, 8 x (52.5 + 350) / 1000 = 3.22
    assert results.joules_per_token(8, 700.0, 1.0, 1000.0, busy_fraction=0.0) == pytest.approx(0.84)
    assert results.joules_per_token(8, 700.0, 1.0, 1000.0, busy_fraction=0.5) == pytest.approx(3.22)
    assert results.joules_per_token(8, None, 1.0, 1000.0, busy_fraction=1.0) is None


def test_hand_checked_plan(capsys):
    """One H100 at $2/h, batch limit 8, fixed lengths, no latency target, on SGLang's usual path (a
    prompt in one prefill, as analyze costs it): the fewest replicas
    keep utilisation below 1, R = floor(rate / capacity) + 1, with the capacity of one replica
    = 8 / (time of a batch-8 generation) taken from `api.analyze` (not from plan's code)."""
    a = api.analyze(MODEL, "h100", scheme="block", block=32, tpf=2, prompt=256, gen=128, batch=8,
                    stack="sglang")["results"][0]
    capacity = 8 / a["time_s"]
    rate = 2.5 * capacity
    rc, out, _ = run(capsys, "plan", MODEL, "--rate", rate, "--gpu", "h100", "--tp", "1", "--precision", "bf16",
                     "--scheme", "block", "--block", "32", "--tpf", "2", "--prompt", "256", "--answer", "128",
                     "--max-batch", "8", "--price", "h100=2", "--max-usd-per-mtok", "1000", "--stack", "sglang",
                     "-f", "json")
    assert rc == 0
    best = json.loads(out)["deployments"][0]
    replicas = math.floor(rate / capacity) + 1
    assert best["replicas"] == replicas == 3
    assert best["capacity_rps"] == pytest.approx(replicas * capacity, rel=1e-6)
    assert best["usd_per_hour"] == pytest.approx(2.0 * replicas)
    tokens_per_s = rate * 128
    assert best["usd_per_mtok"] == pytest.approx(2.0 * replicas / (tokens_per_s * 3600) * 1e6)
    # a price given on the command line has no range: both ends are it
    assert best["usd_per_mtok_low"] == best["usd_per_mtok_high"] == best["usd_per_mtok"]
    # the boards draw 700 W while a replica runs passes and 15% of it while it waits
    busy = best["gpu_busy_fraction"]
    assert 0.3 < busy < 1
    assert best["joules_per_token"] == pytest.approx(700 * replicas * (0.15 * (1 - busy) + busy) / tokens_per_s)
    assert best["headroom"] == pytest.approx(replicas * capacity / rate - 1)
    # output tokens/s at the offered load, per GPU; with no latency target the highest load the
    # deployment sustains is its saturation throughput, so $/Mtok at capacity divides by that
    assert best["output_tokens_per_s"] == pytest.approx(tokens_per_s)
    assert best["tokens_per_s_per_gpu"] == pytest.approx(tokens_per_s / replicas)
    assert best["sustained_rps"] == pytest.approx(replicas * capacity, rel=1e-6)
    assert best["usd_per_mtok_at_capacity"] == pytest.approx(2.0 * replicas / (replicas * capacity * 128 * 3600) * 1e6,
                                                             rel=1e-6)
    # a lone request (no queue) takes NFE passes of the batch-1 pass time at least
    alone = api.analyze(MODEL, "h100", scheme="block", block=32, tpf=2, prompt=256, gen=128, batch=1,
                        stack="sglang")["results"][0]
    assert best["p50_latency_s"] >= alone["time_s"] * (1 - 1e-9)


# --- monotonicity --------------------------------------------------------------------------------

# 500 simulated requests, not 2,000: what the tests on it check (orderings, shapes) holds at any sample size
SMALL = ["plan", MODEL, "--gpu", "h100,l40s", "--tp", "1,2", "--precision", "bf16", "--scheme", "block",
         "--block", "32", "--tpf", "2", "--answer", "128", "--requests", "500", "-f", "json"]


def _best(capsys, *extra):
    rc, out, err = run(capsys, *SMALL, *extra)
    assert rc == 0, err
    return json.loads(out)["deployments"]


def test_more_traffic_never_needs_fewer_gpus(capsys):
    gpus = []
    for rate in (2, 5, 10, 20, 40):
        deployments = _best(capsys, "--rate", rate, "--p95", "3")
        gpus.append(min(d["gpus"] for d in deployments))
        # per candidate as well
    assert gpus == sorted(gpus), gpus
    assert gpus[-1] > gpus[0]


def test_looser_target_never_costs_more(capsys):
    costs = [_best(capsys, "--rate", "20", "--p95", p95)[0]["usd_per_mtok"] for p95 in (1.0, 2.0, 4.0, 16.0)]
    assert costs == sorted(costs, reverse=True), costs


# --- outputs and exit codes ----------------------------------------------------------------------


def test_example_scenario_runs(capsys):
    # (500 simulated requests, not the example's 2,000: what is checked holds at any sample size)
    rc, out, err = run(capsys, "plan", "--scenario", "examples/plan-scenario.yaml", "--requests", "500", "-f", "json")
    assert rc == 0, err
    p = json.loads(out)
    assert p["deployments"] and p["pareto"]
    for d in p["deployments"]:
        assert d["meets_targets"] and d["gpus"] <= 16 and d["p95_latency_s"] <= 4
        assert d["p95_first_block_s"] <= 1.5 and d["usd_per_mtok"] <= 5
    costs = [d["usd_per_mtok"] for d in p["deployments"]]
    assert costs == sorted(costs)
    assert any(d["price_source"] == "user" for d in p["deployments"] if d["gpu"] == "H100 SXM")
    front = p["pareto"]  # no deployment is both cheaper and faster than a front member
    for f in front:
        assert not any(d["usd_per_mtok"] < f["usd_per_mtok"] and d["p95_latency_s"] < f["p95_latency_s"]
                       for d in p["deployments"])


@pytest.mark.parametrize("fmt", ["table", "csv", "markdown"])
def test_other_formats(capsys, fmt):
    # what is checked (the format's shape) does not depend on how many requests are simulated:
    # 200, not the example's 2000 (test_example_scenario_runs runs the example as written)
    rc, out, err = run(capsys, "plan", "--scenario", "examples/plan-scenario.yaml", "--gpu", "h100", "--requests",
                       "200", "-f", fmt)
    assert rc == 0 and out and not err
    if fmt == "csv":
        assert out.splitlines()[0].startswith("set,model,gpu,replicas")
    if fmt == "table":
        assert max(len(line) for line in out.splitlines()) <= 100


def test_impossible_targets_exit_8_with_nearest_miss(capsys):
    rc, out, err = run(capsys, "plan", MODEL, "--rate", "5", "--gpu", "h100", "--tp", "1", "--p95", "0.001")
    assert rc == errors.NoDeploymentError.exit_code == 8
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no deployment meets the targets; nearest miss: H100 SXM")
    assert "p95_latency_s" in lines[0]


def test_a_request_too_slow_alone_is_shown_at_four_times_the_fewest_stable_replicas(capsys):
    """A p95 target no lone request meets cannot be met at any size: the nearest miss is simulated
    once, at 4 x the fewest replicas that keep up with the load, lo = floor(rate / capacity) + 1
    (capacity: the row's requests/s at saturation over its replicas). 5 requests/s against ~6.5
    a replica: lo = 1, the miss at 4 replicas; 20 requests/s: lo = 4, at 16."""
    for rate in (5, 20):
        rc, out, err = run(capsys, "plan", MODEL, "--rate", rate, "--gpu", "h100", "--tp", "1", "--precision", "fp8",
                           "--requests", "200", "--p95", "0.001", "-f", "json")
        assert rc == 8, err
        miss = json.loads(out)["nearest_miss"]
        lo = math.floor(rate / (miss["capacity_rps"] / miss["replicas"])) + 1
        assert miss["replicas"] == 4 * lo and lo == (1 if rate == 5 else 4), (rate, miss["replicas"], lo)


# a limit near the float maximum once made the replica search divide ~0 by ~0 (NaN replicas) or
# overflow the cost cap (exit 70); it binds nothing, so the answer is the one a loose limit gives
@pytest.mark.parametrize("option", ["--p50", "--p95", "--first-block-p95", "--max-usd-per-mtok"])
def test_a_target_near_the_float_maximum_binds_nothing(capsys, option):
    small = [MODEL, "--rate", "1", "--gpu", "h100", "--tp", "1", "--precision", "bf16", "--scheme", "dual-cache",
             "--requests", "100", "-f", "json"]
    answers = []
    for limit in ("1e6", "1e308"):
        rc, out, err = run(capsys, "plan", *small, option, limit)
        assert rc == 0, err
        best = json.loads(out)["deployments"][0]
        answers.append((best["gpus"], best["usd_per_mtok"]))
    assert answers[0] == answers[1]


@pytest.mark.parametrize("args, code, needle", [
    (["--rate", "-3"], 2, "rate"),
    (["--rate", "0"], 2, "rate"),
    (["--rate", "1e-300"], 2, "error: --rate: Input should be greater than or equal to 0.000001"),  # was 70
    (["--users", "3", "--think", "1e300"], 2, "error: --think: Input should be less than or equal to 1000000"),
    # an option's value the scenario refuses is named by the option, not the scenario's field
    (["--rate", "5", "--max-gpus", "0"], 2, "error: --max-gpus: Input should be greater than 0"),
    (["--rate", "5", "--cached-prompt", "2"], 2, "error: --cached-prompt: Input should be less than or equal to 1"),
    # serve's words for the option they share
    (["--rate", "5", "--requests", "99"], 2, "error: --requests: in 100..1,000,000, got 99\n"),
    (["--rate", "5", "--requests", "1000001"], 2, "error: --requests: in 100..1,000,000, got 1000001\n"),
    (["--users", "0"], 2, "error: --users: Input should be greater than 0"),
    (["--rate", "5", "--users", "3"], 2, "not both"),
    ([], 2, "request rate"),
    (["--rate", "5", "--gpu", "h900"], 4, "unknown GPU"),
    (["--rate", "5", "--gpu", "h20", "--max-usd-per-mtok", "3"], 2, "no price for H20"),
    (["--rate", "5", "--price", "h100"], 2, "--price"),
    (["--rate", "5", "--price", "h100=-1"], 2, "--price"),
    (["--rate", "5", "--p95", "-1"], 2, "error: --p95: Input should be greater than 0"),
    (["--rate", "5", "--prompt", "p50:300,p90:100"], 2, "must not decrease"),
    (["--rate", "5", "--prompt", "lots"], 2, "not a token count"),
    (["--rate", "5", "--answer", "@/nonexistent/lengths.txt"], 2, "lengths file /nonexistent/lengths.txt: does not exist"),
    (["--rate", "5", "--scheme", "turbo"], 2, "unknown scheme"),
    (["--rate", "5", "--scheme", "block", "--block", "4", "--tpf", "8"], 2, "exceeds the block"),
    (["--rate", "5", "--scenario", "/nonexistent.yaml"], 2, "scenario file /nonexistent.yaml: does not exist"),
    # serve's words for serve's option
    (["--rate", "5", "--prefill-chunk", "-1"], 2, "--prefill-chunk: tokens per step in 0..10,000,000 (0: each admitted prompt"),
    (["--rate", "5", "--prefill-chunk", "10000001"], 2, "--prefill-chunk: tokens per step in 0..10,000,000"),
    (["--rate", "5", "--prefill-chunk", "1.5"], 2, "Invalid value for '--prefill-chunk'"),
    (["--rate", "5", "--prefill-chunk", "lots"], 2, "Invalid value for '--prefill-chunk'"),
])
def test_bad_options_one_line(capsys, args, code, needle):
    rc, out, err = run(capsys, "plan", MODEL, *args)
    assert rc == code, err
    assert err.count("\n") == 1 and err.startswith("error: ") and needle in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("text, needle", [
    ("traffic: {rate: 5\n", "not valid YAML"),
    ("- just\n- a list\n", "must be a YAML mapping"),
    ("traffic: {rate: 5}\ntargets: {p95: 2}\n", "targets.p95"),
    ("traffic: {rate: -1}\n", "traffic.rate"),
    ("traffic: {rate: 5}\nsearch: {tp: [0]}\n", "tp"),
    ("traffic: {rate: 5}\nsimulation: {requests: 99}\n", "field 'simulation.requests': in 100..1,000,000, got 99"),
    ("traffic: {rate: 5}\nprices: {h100: abc}\n", "prices.h100"),
    ("traffic: {rate: 5}\nsearch: {prefill_chunk: -1}\n", "search.prefill_chunk: tokens per step in 0..10,000,000"),
    ("traffic: {rate: 5}\nsearch: {prefill_chunk: '8192'}\n", "search.prefill_chunk"),  # a typo, not 8192
    ("traffic: {rate: 5}\nsearch: {prefill_chunk: true}\n", "search.prefill_chunk"),  # not a 1-token chunk
    ("traffic: {rate: 5}\nsearch: {prefill_chunk: 512.5}\n", "search.prefill_chunk"),
    ("a: &a [*a, *a]\n", "scenario"),
    # a boolean or a quoted number where a number belongs is a typo: once $1/h, one token, 500 requests
    ("traffic: {rate: 5}\nprices: {h100: true}\n", "field 'prices.h100': Input should be a valid number"),
    ("traffic: {rate: 5}\nprices: {h100: '2.49'}\n", "field 'prices.h100'"),
    ("traffic: {rate: 5, prompt: true}\n", "field 'traffic.prompt"),
    ("traffic: {rate: 5, answer: {p50: true}}\n", "answer lengths: expected a token count, got True"),
    ("traffic: {users: true}\n", "field 'traffic.users'"),
    ("traffic: {rate: 5}\nsimulation: {requests: '500'}\n", "field 'simulation.requests'"),
    # the file's own value is named by its field, not by the option that would have set it
    ("traffic: {rate: 5}\ntargets: {max_gpus: 0}\n", "scenario.yaml: field 'targets.max_gpus': Input should be greater than 0"),
])
def test_bad_scenario_files(capsys, tmp_path, text, needle):
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    rc, out, err = run(capsys, "plan", MODEL, "--scenario", path, "--gpu", "h100")
    assert rc == 2, err
    assert err.count("\n") == 1 and err.startswith("error: ") and needle in err, err


def test_too_many_candidates_are_refused_before_any_work(capsys, monkeypatch):
    """2 GPUs x 4 TP sizes x 2 precisions x 6 decodings (block 8, 16, 32 at 1 or 2 tokens per
    forward) x 110 batch limits = 10,560 candidates, over the 10,000 of docs/limits.md: refused
    with the product, before the traffic is sampled or a pass table built."""
    from dlmcost.plan import search

    def no_work(*args, **kwargs):
        raise AssertionError("work started before the candidate limit was checked")

    monkeypatch.setattr(search, "sample_requests", no_work)
    monkeypatch.setattr(search, "pass_table", no_work)
    batches = ",".join(str(b) for b in range(1, 111))
    rc, out, err = run(capsys, "plan", MODEL, "--rate", "5", "--p95", "10", "--gpu", "h100,mi300x", "--tp", "1,2,4,8",
                       "--precision", "bf16,fp8", "--scheme", "block", "--block", "8,16,32", "--tpf", "1,2",
                       "--max-batch", batches)
    assert rc == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("error: the plan asks for 10,560 candidate deployments (2 GPUs x 4 TP sizes x 2 "
                          "precisions x 6 decodings x 110 batch limits); at most 10,000: shorten some lists"), err
    assert "split the search" in err


@pytest.mark.parametrize("extra, count", [
    ([], 12), (["--ar-baseline"], 16), (["--ar-baseline", "--model", "inclusionAI/LLaDA2.0-mini"], 24)])
def test_the_candidate_limit_counts_every_model_and_the_ar_baseline(capsys, monkeypatch, extra, count):
    """The README's plan: 2 GPUs x 1 TP size x 2 precisions x 3 decodings x 1 batch limit = 12
    candidates; the AR baseline is one decoding more, 16; LLaDA2.0-mini beside it adds its own
    decoding and the baseline, 2 x 1 x 2 x 2 x 1 = 8 more, 24. Under a limit of 11, each is refused."""
    from dlmcost.analysis import limits

    monkeypatch.setattr(limits, "MAX_PLAN_CANDIDATES", 11)
    models = MODEL + (",inclusionAI/LLaDA2.0-mini" if "--model" in extra else "")
    rc, out, err = run(capsys, "plan", models, "--rate", "5", "--p95", "10", "--gpu", "h100,mi300x", "--tp", "1",
                       *extra[:1])
    assert rc == 2 and f"asks for {count} candidate deployments" in err and "at most 11:" in err, err
    limits.check_candidates(11, 11, "")  # at the limit: not refused
    limits.check_candidates(10**9, None, "")  # None: no limit (the Python API's max_candidates=None)


def test_the_fewest_replicas_are_those_a_brute_force_search_finds():
    """The search's R against a brute-force search over a grid of real deployments (LLaDA-8B, H100
    and L40S, dual-cache and block decoding, batch limits 16 and 64, 5 to 60 requests/s, p95 of 2
    and 5 s): every R from the fewest stable replicas up, simulated until one meets the targets.
    Where the simulated latency falls with R (R - 1 fails whenever R does, over that range) the two
    agree; everywhere, the search's R meets and R - 1 does not. A search that stopped with a
    bracket two wide answered one too many in about one case in ten here."""
    import functools

    from dlmcost.inputs.models import resolve_model
    from dlmcost.plan import replicas, search
    from dlmcost.serving.steptime import Decoding
    from dlmcost.serving.traffic import Traffic, sample_requests

    model, db = resolve_model(MODEL), HardwareDB.load(None)
    pricing = replicas.Pricing({}, {}, {})
    compared = 0
    for rate in (5.0, 20.0, 60.0):
        traffic = Traffic(parse_lengths(256, "p"), parse_lengths(128, "a"), rate=rate)
        sample = sample_requests(traffic, 400, 0)
        for decoding in (Decoding("dual-cache", 32, 1.0), Decoding("block", 32, 2.0)):
            space = search.SearchSpace([db.get("h100"), db.get("l40s")], [1], ["bf16"], [decoding], [16, 64])
            for c in search._candidates(model, space, decoding, sample, "realistic", None, None)[0]:
                lo = math.floor(rate / replicas.saturation_rps(c, sample)) + 1  # utilisation below 1
                for p95 in (2.0, 5.0):
                    targets = results.Targets(p95_latency_s=p95)
                    d = replicas.fewest_replicas(c, sample, traffic, targets, pricing).deployment  # as plan() calls it
                    if not d.meets:  # no R within the search's range: its nearest miss
                        continue

                    @functools.cache
                    def meets(r: int) -> bool:
                        return replicas._deployment(c, replicas._run(c, sample, traffic, r), r, 1.0, pricing,
                                                    targets).meets

                    where = (rate, p95, c.gpu.name, decoding.label, c.max_batch, d.replicas)
                    assert d.replicas == lo or not meets(d.replicas - 1), where
                    if d.replicas - lo > 20:  # brute force where it takes a few simulations (not 90)
                        continue
                    fewest = next(r for r in range(lo, d.replicas + 1) if meets(r))  # brute force
                    if all(meets(r) for r in range(fewest, d.replicas + 1)):  # one switch from failing to meeting
                        assert d.replicas == fewest, (*where, fewest)
                        compared += 1
    assert compared >= 20


def test_a_row_past_those_shown_gets_the_verdict_of_a_brute_force_search():
    """`meets_within` (a candidate the table will not show: only whether it meets the targets short
    of giving up) against a brute-force search: the fewest R meeting the targets, every R from the
    fewest stable replicas up simulated. Giving up at R* + 1 it meets; at R* it is absurd; giving up
    past R_sep (each request alone) it meets without a simulation at R. Checked where the simulated
    latency falls with R over the range (R - 1 fails whenever R does), as the search assumes."""
    import functools

    from dlmcost.inputs.models import resolve_model
    from dlmcost.plan import replicas, search
    from dlmcost.serving.steptime import Decoding
    from dlmcost.serving.traffic import Traffic, sample_requests

    model, db = resolve_model(MODEL), HardwareDB.load(None)
    pricing, targets = replicas.Pricing({}, {}, {}), results.Targets(p95_latency_s=5.0)
    compared = 0
    for rate in (5.0, 20.0):
        traffic = Traffic(parse_lengths(256, "p"), parse_lengths(128, "a"), rate=rate)
        sample = sample_requests(traffic, 300, 0)
        decoding = Decoding("block", 32, 2.0)
        space = search.SearchSpace([db.get("h100"), db.get("l40s")], [1], ["bf16"], [decoding], [16, 64])
        for c in search._candidates(model, space, decoding, sample, "realistic", None, None)[0]:
            lo = math.floor(rate / replicas.saturation_rps(c, sample)) + 1

            @functools.cache
            def meets(r: int) -> bool:
                return replicas._deployment(c, replicas._run(c, sample, traffic, r), r, 1.0, pricing, targets).meets

            separate = replicas.separate_replicas(c, sample, traffic)
            fewest = next((r for r in range(lo, min(separate, lo + 20) + 1) if meets(r)), None)  # brute force
            if fewest is None or not all(meets(r) for r in range(fewest, min(separate, fewest + 4) + 1)):
                continue

            def verdict(give_up_at: int) -> str:
                return replicas.meets_within(c, sample, traffic, targets, pricing, lambda r: r >= give_up_at, 1)

            where = (rate, c.gpu.name, c.max_batch, fewest)
            assert verdict(fewest + 1) == replicas.MEETS, where
            assert verdict(fewest) == replicas.ABSURD, where
            assert verdict(separate + 1) == replicas.MEETS, where
            compared += 1
    assert compared >= 3


def test_a_search_told_to_give_up_answers_one_short_of_it():
    """`fewest_replicas` with give_up(R) = R >= G, against a brute-force search: LLaDA-8B dual-cache
    on an H100 at a batch limit of 8, 20 requests/s, a p95 of 2.4 s. Every R from the fewest stable
    replicas up simulated: the first to meet, R*, is one past the first the search simulates (so the
    search checks give_up(R*) before it simulates R*). G = R* + 1: it answers R*; G = R*: ABSURD."""
    from dlmcost.inputs.models import resolve_model
    from dlmcost.plan import replicas, search
    from dlmcost.serving.steptime import Decoding
    from dlmcost.serving.traffic import Traffic, sample_requests

    traffic = Traffic(parse_lengths(256, "p"), parse_lengths(128, "a"), rate=20.0)
    sample = sample_requests(traffic, 100, 0)
    decoding = Decoding("dual-cache", 32, 1.0)
    space = search.SearchSpace([HardwareDB.load(None).get("h100")], [1], ["bf16"], [decoding], [8])
    (c,), _ = search._candidates(resolve_model(MODEL), space, decoding, sample, "realistic", None, None)
    pricing, targets = replicas.Pricing({}, {}, {}), results.Targets(p95_latency_s=2.4)
    capacity = replicas.saturation_rps(c, sample)
    lo = math.floor(traffic.rate / capacity) + 1
    first = max(lo, math.ceil(traffic.rate / (capacity * 0.95)))  # the fewest below 95% utilisation

    def meets(r: int) -> bool:
        return replicas._deployment(c, replicas._run(c, sample, traffic, r), r, 1.0, pricing, targets).meets

    fewest = next(r for r in range(lo, lo + 20) if meets(r))  # brute force
    assert fewest == first + 1
    found = replicas.fewest_replicas(c, sample, traffic, targets, pricing, lambda r: r >= fewest + 1)
    assert found.deployment.replicas == fewest
    assert replicas.fewest_replicas(c, sample, traffic, targets, pricing, lambda r: r >= fewest) == replicas.ABSURD


def test_the_batch_limit_is_what_the_longest_requests_fit(capsys, tmp_path):
    """Prompts of 256 and 2,048 tokens (a lengths file: two classes, exactly these), answers of 128,
    no running limit below memory's: the max-batch column is the largest batch of the longest
    requests that fits, analyze's max batch at prompt 2,048, not the shorter ones' (which would
    overfill the GPU when the long ones come together)."""
    lengths = tmp_path / "prompts.txt"
    lengths.write_text("256 2048")
    p, err = _plan_json(capsys, MODEL, "--rate", "1", "--p95", "100", "--gpu", "h100", "--tp", "1", "--precision",
                        "bf16", "--scheme", "dual-cache", "--block", "32", "--tpf", "1", "--prompt", f"@{lengths}",
                        "--answer", "128", "--max-batch", "4096")
    fits = {n: api.analyze(MODEL, "h100", scheme="dual-cache", block=32, prompt=n, gen=128, steps=128).results[0]
            .memory.max_batch for n in (256, 2048)}
    assert fits[2048] < fits[256] < 4096
    assert [d["max_batch"] for d in p["deployments"]] == [fits[2048]], (p["deployments"], fits)
    assert [d["memory_fits"] for d in p["deployments"]] == [fits[2048]]


def test_lengths_from_file_and_percentiles(tmp_path):
    f = tmp_path / "lengths.txt"
    f.write_text("100\n200, 300\n")
    d = parse_lengths(f"@{f}", "answer")
    assert sorted(set(d.sample(np.random.default_rng(0), 1000).tolist())) == [100, 200, 300]
    p = parse_lengths({"p50": 100, "p90": 500}, "prompt")
    s = p.sample(np.random.default_rng(0), 100_000)
    assert np.percentile(s, 50) == pytest.approx(100, abs=2) and np.percentile(s, 90) == pytest.approx(500, abs=5)
    assert np.percentile(s, 70) == pytest.approx(300, abs=8)  # linear between the given points


def test_closed_loop_plan(capsys):
    rc, out, err = run(capsys, *SMALL, "--users", "32", "--think", "1", "--p95", "5")
    assert rc == 0, err
    best = json.loads(out)["deployments"][0]
    assert best["served_rps"] > 0 and best["p95_latency_s"] <= 5


# --- prices and power in the hardware files ------------------------------------------------------


def test_every_bundled_price_and_power_has_a_source():
    for g in HardwareDB.load().gpus.values():
        if g.price_per_hour:
            p = g.price_per_hour
            assert p.estimate and p.source and p.as_of
            assert (p.low or p.usd) <= p.usd <= (p.high or p.usd)
        if g.board_power_w:
            assert g.sources.get("board_power_w")
    db = HardwareDB.load()
    assert db.get("h100").price_per_hour.usd == 3.99 and db.get("h100").board_power_w == 700


@pytest.mark.parametrize("change, needle", [
    ({"price_per_hour": {"usd": 2.0, "low": 3.0, "as_of": "2026", "source": "x"}}, "low"),
    ({"price_per_hour": {"usd": -2.0, "as_of": "2026", "source": "x"}}, "greater than or equal to 0.01"),
    ({"price_per_hour": {"usd": 2.0, "as_of": "2026"}}, "source"),
    ({"board_power_w": 700}, "sources.board_power_w"),
    ({"board_power_w": 1e-300, "sources": {"board_power_w": "x"}}, "greater than or equal to 1"),
    ({"price_per_hour": {"usd": 2.0, "low": 1e-300, "as_of": "2026", "source": "x"}}, "greater than or equal to 0.01"),
])
def test_price_and_power_validation(change, needle):
    from pydantic import ValidationError

    base = HardwareDB.load().get("h100").model_dump()
    base.pop("price_per_hour"), base.pop("board_power_w")
    base["sources"].pop("board_power_w", None)
    with pytest.raises(ValidationError, match=needle):
        GPU.model_validate({**base, **change})


def test_no_deployment_code_is_distinct():
    codes = [c.exit_code for c in (errors.UsageError, errors.WorkloadError, errors.UnknownGPUError,
                                   errors.HardwareFileError, errors.UnknownModelError, errors.ConfigError,
                                   errors.HubError, errors.HubUnreachable)]
    assert errors.NoDeploymentError.exit_code == 8 and 8 not in codes and errors.EXIT_INTERNAL != 8


def test_closed_loop_served_rate_by_hand():
    """Closed loop, one class, everything in one batch: each user completes one request per
    NFE x pass(N) + think seconds, so the served rate is N / (that)."""
    from dlmcost.plan import replicas
    from dlmcost.serving.traffic import Traffic, sample_requests

    traffic = Traffic(parse_lengths(0, "p"), parse_lengths(10, "a"), users=8, think_s=1.0)
    sample = sample_requests(traffic, 2000, 0)
    table = one_class(10, lambda b: 0.1)
    cand = replicas.Candidate(None, "bf16", 1, None, 64, table, np.array([10.0]), 64)
    ev = replicas._run(cand, sample, traffic, replicas=1)
    assert ev.served_rps == pytest.approx(8 / (10 * 0.1 + 1.0), rel=1e-6)
    assert np.allclose(ev.latency, 1.0)
    ev3 = replicas._run(cand, sample, traffic, replicas=3)  # 3, 3 and 2 users: the busiest has 3
    assert ev3.served_rps == pytest.approx(3 / 2.0 * (8 / 3) / 3, rel=1e-6)


def test_lone_request_floor_counts_the_prefill():
    """A candidate is given up when a lone request (batch 1) misses a latency target: prefill 1 s
    + 9 steps of 0.1 s = 1.9 s end to end, first block (3 passes) at 1.2 s."""
    from dlmcost.plan import replicas
    from dlmcost.serving.targets import Targets
    from dlmcost.serving.traffic import Traffic, sample_requests

    traffic = Traffic(parse_lengths(100, "p"), parse_lengths(10, "a"), rate=1.0)
    sample = sample_requests(traffic, 100, 0)
    table = two_pass_kinds(10, 3, lambda b: 1.0 * b, lambda b: 0.1 * b)
    cand = replicas.Candidate(None, "bf16", 1, None, 8, table, np.array([10.0]), 8)
    lone, first = 1.0 + 9 * 0.1, 1.0 + 2 * 0.1
    for name, limit, fails in (("p95_latency_s", lone * 0.99, True), ("p95_latency_s", lone * 1.01, False),
                               ("p50_latency_s", lone * 0.99, True), ("p95_first_block_s", first * 0.99, True),
                               ("p95_first_block_s", first * 1.01, False)):
        assert replicas.floor_fails(cand, sample, Targets(**{name: limit})) is fails, (name, limit)
    assert replicas.floor_fails(cand, sample, Targets(min_tokens_per_s_per_user=10 / lone * 1.01))


def test_user_hardware_file_overrides_price(capsys, tmp_path):
    """A user's hardware file replaces the bundled entry, price included; --price beats both."""
    import yaml

    data = yaml.safe_load(open("hardware/nvidia-h100-sxm.yaml"))
    data["price_per_hour"]["usd"] = 1.5
    data["price_per_hour"]["low"] = None
    (tmp_path / "h100.yaml").write_text(yaml.safe_dump(data))
    base = ["plan", MODEL, "--rate", "5", "--gpu", "h100", "--tp", "1", "--precision", "bf16", "-f", "json"]
    rc, out, err = run(capsys, *base, "--hardware", tmp_path / "h100.yaml")
    assert rc == 0, err
    best = json.loads(out)["deployments"][0]
    assert best["price_per_gpu_hour"] == 1.5 and best["usd_per_hour"] == pytest.approx(1.5 * best["gpus"])
    rc, out, err = run(capsys, *base, "--hardware", tmp_path / "h100.yaml", "--price", "h100=2.25")
    assert json.loads(out)["deployments"][0]["price_per_gpu_hour"] == 2.25


def test_blockwise_scheme_without_block_takes_the_models(capsys):
    rc, out, err = run(capsys, "plan", MODEL, "--rate", "5", "--gpu", "h100", "--tp", "1", "--precision", "bf16",
                       "--scheme", "dual-cache", "--tpf", "2", "-f", "json")
    assert rc == 0, err
    assert json.loads(out)["deployments"][0]["block"] == 32  # LLaDA's sampler block
    rc, out, err = run(capsys, "plan", "Qwen/Qwen2.5-7B", "--rate", "5", "--gpu", "h100", "--scheme", "block")
    assert rc == 2 and "needs a block length" in err


def test_no_candidate_can_run_exits_8(capsys):
    rc, out, err = run(capsys, "plan", MODEL, "--rate", "5", "--gpu", "h100", "--precision", "fp4")
    assert rc == 8 and err.startswith("error: no deployment meets the targets: no candidate could run")


def test_progress_only_after_a_second(monkeypatch, capsys):
    import sys

    from dlmcost.render.progress import Progress

    clock = iter([0.0, 0.5, 1.5, 2.0])
    monkeypatch.setattr("time.monotonic", lambda: next(clock))
    p = Progress("planning", stream=sys.stderr)
    p(1, 10)  # at 0.5 s: nothing yet
    assert capsys.readouterr().err == ""
    p(5, 10)
    assert "5/10" in capsys.readouterr().err
    p.clear()
    assert capsys.readouterr().err.endswith("\r\033[1A\033[2K")  # the bar's line erased


LLADA_PREFILL_DISPATCH_S = 32 * 292e-6  # sglang's eager dispatch of a prefill: 32 layers x 292 us (stacks/sglang.yaml)


def test_passes_to_first_block_by_hand():
    """Block diffusion, prompt 256, answer 128, block 32, 2 tokens per forward, no store pass:
    1 prefill + 64 steps = 65 passes; the first of 4 blocks is final after 1 + 64/4 = 17.
    AR: prefill + 127 decode steps = 128 passes (the prefill's logits give the first token, the
    last token is never fed back); its first token after 1. mdm with 128 steps over 4 blocks of 32 (semi-autoregressive commits): 32 passes to
    the first block. multi-block (A = 2 blocks in flight, default) with a prompt prefill: 1 + 64/4.
    dual-cache: no prompt-only pass, a refresh then 15 cached steps per block: 64/4 = 16."""
    import functools

    from dlmcost.inputs.models import resolve_model
    from dlmcost.plan import search
    from dlmcost.serving.steptime import Decoding
    from dlmcost.serving.traffic import Traffic, sample_requests

    spec = resolve_model(MODEL)
    db = HardwareDB.load()
    traffic = Traffic(parse_lengths(256, "p"), parse_lengths(128, "a"), rate=1.0)
    sample = sample_requests(traffic, 200, 0)
    space = search.SearchSpace([db.get("h100")], [1], ["bf16"], [], [8])
    cases = ((Decoding("block", 32, 2.0), 65, 17, "prefill"), (Decoding("ar", None, 1.0), 128, 1, "prefill"),
             (Decoding("mdm", 32, 1.0), 128, 32, "step"), (Decoding("multi-block", 32, 2.0), 65, 17, "prefill"),
             (Decoding("dual-cache", 32, 2.0), 64, 16, "refresh"))
    for decoding, nfe, first, first_family in cases:
        (cand,), skipped = search._candidates(spec, space, decoding, sample, "realistic", "sglang", None)
        assert (cand.table.nfe, cand.table.first_passes) == ([nfe], [first]), decoding
        # at batch b: the first pass is the engine's first family's pass (every pass of these
        # families has the same shape), the others share the rest of the generation's time
        a = api.analyze(spec, "h100", scheme=decoding.scheme, block=decoding.block, prompt=256, gen=128, batch=4,
                        stack="sglang", **({} if decoding.scheme == "ar" else {"tpf": decoding.tpf}))["results"][0]
        opening = a["passes"][0]
        assert opening["name"] == first_family
        # sglang's AR prefill runs eagerly: its dispatch, LLaDA-8B's 32 x 292 us, is the iteration's once, not a share
        step = LLADA_PREFILL_DISPATCH_S if decoding.scheme == "ar" else 0.0
        steps = cand.table.prefill_step_s
        assert (steps[0][4] if steps else 0.0) == pytest.approx(step, rel=1e-9), decoding
        assert cand.table.first_pass_s[0][4] + step == pytest.approx(opening["time_s"], rel=1e-9), decoding
        rest = (a["time_s"] - opening["time_s"]) / (a["nfe"] - 1)
        assert cand.table.pass_s[0][4] == pytest.approx(rest, rel=1e-9), decoding


@pytest.mark.parametrize("batch", [1, 4])
def test_time_to_first_output_against_the_engine(batch):
    """Engine numbers through the whole plan path: `batch` requests arriving together on an
    idle H100. AR: the first token at the end of the prefill, a batch-b prefill (api.analyze's
    prefill pass); done after the generation's time at batch b. Block diffusion (prompt 256,
    answer 128, block 32, 2 tokens per forward): the first block after the prefill and 16 of the
    64 steps, whose mean is (generation - prefill) / 64."""
    import functools

    from dlmcost.inputs.models import resolve_model
    from dlmcost.plan import search
    from dlmcost.serving.steptime import Decoding
    from dlmcost.serving.traffic import Traffic, sample_requests

    spec = resolve_model(MODEL)
    traffic = Traffic(parse_lengths(256, "p"), parse_lengths(128, "a"), rate=1.0)
    sample = sample_requests(traffic, 10, 0)
    space = search.SearchSpace([HardwareDB.load().get("h100")], [1], ["bf16"], [], [8])
    for decoding, steps_to_first in ((Decoding("ar", None, 1.0), 0), (Decoding("block", 32, 2.0), 16)):
        (cand,), _ = search._candidates(spec, space, decoding, sample, "realistic", "sglang", None)
        a = api.analyze(spec, "h100", scheme=decoding.scheme, block=decoding.block, prompt=256, gen=128,
                        batch=batch, stack="sglang",
                        **({} if decoding.scheme == "ar" else {"tpf": decoding.tpf}))["results"][0]
        prefill = next(p["time_s"] for p in a["passes"] if p["name"] == "prefill")
        step = (a["time_s"] - prefill) / (a["nfe"] - 1)
        r = simulate(cand.table, np.zeros(batch, int), 8, arrivals_s=np.zeros(batch))
        assert r.ttfb_s.tolist() == pytest.approx([prefill + steps_to_first * step] * batch, rel=1e-9), decoding
        assert r.latency_s.tolist() == pytest.approx([a["time_s"]] * batch, rel=1e-9), decoding


def test_scenario_length_file_is_found_next_to_it(capsys, tmp_path, monkeypatch):
    (tmp_path / "answers.txt").write_text("64 128 256\n")
    (tmp_path / "s.yaml").write_text("traffic: {rate: 2, answer: {file: answers.txt}}\n"
                                     "search: {gpus: [h100], tp: [1], precisions: [bf16]}\n")
    monkeypatch.chdir("/")
    rc, out, err = run(capsys, "plan", MODEL, "--scenario", tmp_path / "s.yaml", "-f", "json")
    assert rc == 0, err


def test_more_traffic_never_needs_fewer_gpus_per_candidate(capsys):
    """The same candidate (GPU, TP, precision, decoding, batch limit) never needs fewer GPUs
    for more requests/s (compared where it meets the targets at both rates)."""
    need: dict[tuple, list[int]] = {}
    for rate in (2, 8, 32):
        for d in _best(capsys, "--rate", rate, "--p95", "3", "--max-batch", "16,256"):
            need.setdefault((d["gpu"], d["tp"], d["precision"], d["decoding"], d["max_batch"]), []).append(d["gpus"])
    assert sum(len(v) > 1 for v in need.values()) >= 4
    for key, gpus in need.items():
        assert gpus == sorted(gpus), (key, gpus)


def test_deployment_statistics_by_hand():
    """What a deployment reports from its simulated requests (docs/plan.md, Output; Money and
    energy): latency percentiles (numpy's linear interpolation between order statistics), p95
    time to first block, the median of answer tokens / latency per request, and $/Mtok, J/token
    at the offered load with the mean answer length. Requests here take 1, 2, ..., 100 s."""
    from dlmcost.plan import replicas
    from dlmcost.serving.steptime import Decoding
    from dlmcost.render.plan import plan_table

    gpu = HardwareDB.load().get("h100")
    latency = np.arange(1.0, 101.0)
    tokens = np.where(np.arange(100) < 90, 10.0, 1000.0)  # mean 109, median 10
    ev = replicas.ReplicaRun(latency=latency, ttfb=latency / 100, tokens=tokens, served_rps=0.5)
    cand = replicas.Candidate(gpu, "bf16", 2, Decoding("block", 32, 2.0), 64, None, np.array([109.0]), 48)
    pricing = replicas.Pricing({gpu.key: 3.0}, {gpu.key: "test"}, {gpu.key: 700.0}, power_utilisation=0.5)
    d = replicas._deployment(cand, ev, replicas=3, capacity_rps=2.0, pricing=pricing, targets=results.Targets())
    # rank p/100 * (n - 1) in the sorted list 1..100, interpolated: 1 + 0.5 * 99 = 50.5, ...
    assert d.p50_latency_s == pytest.approx(50.5)
    assert d.p95_latency_s == pytest.approx(95.05)
    assert d.p99_latency_s == pytest.approx(99.01)
    assert d.p95_first_block_s == pytest.approx(0.9505)
    # per request tokens / latency: 10/1 ... 10/90 and 1000/91 ... 1000/100 (all above 10), so
    # sorted: 10/90, 10/89, ..., 10/1, then the ten long answers; the middle two are 10/41, 10/40
    per_user = np.concatenate([10 / latency[:90], 1000 / latency[90:]])
    assert sorted(per_user)[49:51] == pytest.approx([10 / 41, 10 / 40])
    assert d.tokens_per_s_per_user == pytest.approx((10 / 41 + 10 / 40) / 2)
    # 3 replicas x tp 2 = 6 GPUs; served 3 x 0.5 req/s x 109 mean answer tokens = 163.5 tok/s
    assert (d.served_rps, d.capacity_rps) == (1.5, 6.0)
    assert d.headroom == pytest.approx(6.0 / 1.5 - 1)
    assert d.usd_per_hour == pytest.approx(18.0)
    assert d.usd_per_mtok == pytest.approx(18.0 / (163.5 * 3600) * 1e6)
    assert d.joules_per_token == pytest.approx(6 * 700 * 0.5 / 163.5)
    # the table: two significant digits, headroom in percent (capacity / load - 1 = 300%)
    _, (cells,) = plan_table([d.record()], show_decoding=False)
    # then output tokens/s (163.5) and per GPU (163.5 / 6), capacity 6 req/s, headroom 300%
    assert cells[1:11] == ["3×2 bf16", "48", "50", "95", "0.95", f"{(10 / 41 + 10 / 40) / 2:.3g}", "164", "27.2",
                           "6", "300"]


# --- what a new user tripped over (issue 22) -----------------------------------------------------


def _plan_json(capsys, *args):
    rc, out, err = run(capsys, "plan", *args, "-f", "json")
    assert rc == 0, err
    return json.loads(out), err


def test_sustained_load_is_met_and_ranks_one_gpu_deployments(capsys):
    """A one-GPU deployment at a light load: $/Mtok at the offered load is price / offered tokens,
    the same for every one-GPU deployment of that price; at capacity it divides by the load it
    sustains within the p95 target, which a plan at that rate still meets with one replica."""
    base = ["--gpu", "h100", "--tp", "1", "--precision", "bf16", "--scheme", "dual-cache", "--tpf", "2",
            "--answer", "128", "--price", "h100=2", "--p95", "3"]
    p, _ = _plan_json(capsys, MODEL, "--rate", "1", *base)
    d = p["deployments"][0]
    assert d["replicas"] == 1
    assert d["usd_per_mtok"] == pytest.approx(2.0 / (1 * 128 * 3600) * 1e6)
    assert 1 < d["sustained_rps"] <= d["capacity_rps"]
    assert d["usd_per_mtok_at_capacity"] == pytest.approx(2.0 / (d["sustained_rps"] * 128 * 3600) * 1e6)
    again, _ = _plan_json(capsys, MODEL, "--rate", d["sustained_rps"], *base)
    same = [x for x in again["deployments"] if x["precision"] == "bf16" and x["max_batch"] == d["max_batch"]]
    assert same and same[0]["replicas"] == 1 and same[0]["p95_latency_s"] <= 3


def test_gpu_without_a_price_is_planned_after_the_priced(capsys):
    p, _ = _plan_json(capsys, MODEL, "--rate", "5", "--gpu", "h20,h100", "--tp", "1", "--precision", "bf16",
                      "--scheme", "dual-cache", "--tpf", "2")
    gpus = [d["gpu"] for d in p["deployments"]]
    assert "H20" in gpus and "H100 SXM" in gpus
    h20 = [d for d in p["deployments"] if d["gpu"] == "H20"]
    assert all(d["usd_per_mtok"] is None and d["usd_per_hour"] is None and d["usd_per_mtok_at_capacity"] is None
               for d in h20)
    assert gpus.index("H20") > max(i for i, g in enumerate(gpus) if g == "H100 SXM")
    rc, out, err = run(capsys, "plan", MODEL, "--rate", "5", "--gpu", "h20,h100", "--tp", "1", "--precision", "bf16",
                       "--scheme", "dual-cache", "--tpf", "2")
    assert rc == 0, err
    row = next(line for line in out.splitlines() if line.startswith("H20"))
    assert " - " in row
    rc, out, err = run(capsys, "plan", MODEL, "--rate", "5", "--gpu", "h20,h100", "--tp", "1", "--precision", "bf16",
                       "--scheme", "dual-cache", "--tpf", "2", "--plot", "-")  # the chart draws the priced ones
    assert rc == 0 and not err, err


def test_unpriced_deployments_rank_by_their_gpus():
    """Without a price the ranking orders by GPUs, fewest first, then p95 latency, after every priced one."""
    from types import SimpleNamespace

    from dlmcost.plan.results import rank_key

    def row(gpus, p95, usd=None):
        return SimpleNamespace(usd_per_mtok=usd, usd_per_mtok_at_capacity=usd, gpus=gpus, p95_latency_s=p95, gpu="X")

    rows = [row(4, 1.0), row(1, 3.0), row(1, 2.0), row(8, 9.0, usd=5.0)]
    assert [(r.gpus, r.p95_latency_s) for r in sorted(rows, key=rank_key)] == [(8, 9.0), (1, 2.0), (1, 3.0), (4, 1.0)]


def test_models_side_by_side_each_with_its_own_scheme(capsys):
    """A diffusion model and the AR model it would replace in one table, at the same traffic (the
    first model's answer length) and targets; the AR model decodes autoregressively."""
    from dlmcost.inputs.models import resolve_model

    dllm, ar = "inclusionAI/LLaDA2.0-mini", "Qwen/Qwen3-30B-A3B"
    p, _ = _plan_json(capsys, f"{dllm},{ar}", "--rate", "2", "--gpu", "h100", "--tp", "1", "--precision", "bf16",
                      "--p95", "30")
    assert p["models"] == [dllm, ar]
    by_model = {m: {d["scheme"] for d in p["deployments"] if d["model"] == m} for m in (dllm, ar)}
    assert by_model == {dllm: {"block"}, ar: {"ar"}}
    assert p["traffic"]["answer"] == resolve_model(dllm).sampler.gen
    rc, out, err = run(capsys, "plan", f"{dllm},{ar}", "--rate", "2", "--gpu", "h100", "--tp", "1",
                       "--precision", "bf16", "--p95", "30")
    assert rc == 0 and "model" in out and "Qwen3-30B-A3B" in out and "LLaDA2.0-mini" in out


def test_default_decodings_are_the_models_own(capsys):
    """LLaDA-8B's config lists mdm, prefix-cache and dual-cache (and ar, the baseline): the plan
    searches those three at its sampler's block 32 and 128 steps for 128 tokens (1 per forward);
    --tpf alone keeps the model's default scheme; another scheme is used with a warning."""
    small = ["--rate", "2", "--gpu", "h100", "--tp", "1", "--precision", "bf16"]
    p, err = _plan_json(capsys, MODEL, *small)
    assert p["search"]["decodings"] == ["mdm/1", "prefix-cache/32/1", "dual-cache/32/1"] and not err
    # at the H100's list price, with its public range: $/Mtok is in proportion to the price per GPU-hour
    price = HardwareDB.load().get("h100").price_per_hour
    for d in p["deployments"]:
        assert (d["price_per_gpu_hour_low"], d["price_per_gpu_hour_high"]) == (price.low, price.high)
        assert d["usd_per_mtok_low"] == pytest.approx(d["usd_per_mtok"] * price.low / price.usd, rel=1e-12)
        assert d["usd_per_mtok_high"] == pytest.approx(d["usd_per_mtok"] * price.high / price.usd, rel=1e-12)
    p, err = _plan_json(capsys, MODEL, *small, "--tpf", "2")
    assert p["search"]["decodings"] == ["mdm/2"] and not err
    p, err = _plan_json(capsys, MODEL, *small, "--scheme", "block", "--block", "32", "--tpf", "2")
    assert p["search"]["decodings"] == ["block/32/2"]
    assert err.startswith("warning: ") and "not published with block" in err


@pytest.mark.parametrize("args, needle", [
    (["plan", MODEL, "--rate", "1", "--p95", "10", "--scheme", "block", "--tp", "2000"], "tensor-parallel sizes"),
    (["plan", MODEL, "--rate", "1", "--p95", "10", "--scheme", "block", "--precision", "foo"], "unknown precision"),
    (["serve", MODEL, "--rate", "1", "--scheme", "block", "--precision", "foo"], "unknown precision"),
])
def test_a_failing_command_prints_its_error_alone(capsys, args, needle):
    """A scheme the model was not published with warns, then an option fails validation: the
    failure is one error line, without the warning (docs/limits.md, "What reaches the terminal")."""
    rc, out, err = run(capsys, *args)
    assert rc == 2 and out == "" and err.count("\n") == 1 and err.startswith("error: ") and needle in err, err


def test_warnings_come_before_the_error_of_a_missed_target(capsys):
    """Exit 8: the plan ran, so its warning stands, before the error line and its details."""
    rc, out, err = run(capsys, "plan", MODEL, "--rate", "1", "--p95", "0.001", "--gpu", "h100", "--tp", "1",
                       "--precision", "bf16", "--scheme", "block", "--block", "32", "--tpf", "2")
    lines = err.splitlines()
    assert rc == 8 and lines[0].startswith("warning: ") and "not published with block" in lines[0], err
    assert lines[1].startswith("error: no deployment meets the targets"), err


def test_default_gpus_are_data_centre_parts():
    from dlmcost.plan.scenario import build_space_and_pricing, read_scenario
    from dlmcost.serving.steptime import Decoding

    db = HardwareDB.load()
    decodings = [Decoding("block", 32, 2.0)]
    space, _ = build_space_and_pricing(read_scenario(None, {}), decodings, db)
    names = {g.name for g in space.gpus}
    assert not names & {"RTX 4090", "RTX 5090", "RTX PRO 6000 Blackwell"}
    assert {"H100 SXM", "MI300X", "B200"} <= names
    space, _ = build_space_and_pricing(read_scenario(None, {"search": {"consumer": True}}), decodings, db)
    assert {"RTX 4090", "RTX 5090", "RTX PRO 6000 Blackwell"} <= {g.name for g in space.gpus}
    assert {g.name for g in db.gpus.values() if g.segment != "datacenter"} == {"RTX 4090", "RTX 5090",
                                                                              "RTX PRO 6000 Blackwell"}


def test_absurd_marks_by_hand():
    """Over 10x the cheapest $/Mtok (or, unpriced, 10x the fewest GPUs) is absurd."""
    def dep(cost, gpus):
        return results.Deployment("g", "g", gpus, 1, "bf16", "mdm", None, 1.0, "mdm", 1, 1, 1, 1, 1, 1, 1, 1, 0,
                                  None if cost is None else cost * 10, cost, None, None, None)
    ds = [dep(1.0, 1), dep(10.0, 2), dep(10.5, 3), dep(None, 10), dep(None, 11)]
    results.mark_absurd(ds)
    assert [d.absurd for d in ds] == [False, False, True, False, True]


def test_plan_pareto_front_by_hand_with_ties():
    """On the front: no other deployment at least as cheap and at least as fast, and better at one.
    By hand: A ($1, 3 s) and F ($1, 4 s): F is as cheap and slower, off; B ($2, 3 s) as fast as A and
    dearer, off; C ($2, 2 s) on; D ($3, 2 s) as fast as C and dearer, off; E ($4, 1 s) on."""
    def dep(name, cost, p95):
        d = results.Deployment(name, name, 1, 1, "bf16", "mdm", None, 1.0, "mdm", 1, 1, 1, 1, 1, 1, 1, 1, 0,
                               cost * 10, cost, None, None, None)
        d.p95_latency_s = p95
        return d
    ds = [dep("F", 1.0, 4.0), dep("B", 2.0, 3.0), dep("A", 1.0, 3.0), dep("D", 3.0, 2.0), dep("C", 2.0, 2.0),
          dep("E", 4.0, 1.0)]
    assert [d.gpu for d in results.pareto_front(ds)] == ["A", "C", "E"]
    assert [d.gpu for d in ds if d.pareto] == ["A", "C", "E"]


def test_absurd_deployments_are_left_out_unless_asked_for(capsys):
    """LLaDA-8B's full-canvas mdm costs far more per token than dual-cache: those rows are absurd,
    out of the default output (counted), listed and marked with --absurd."""
    args = [MODEL, "--rate", "20", "--p95", "5", "--gpu", "h100,mi300x", "--tp", "1,2", "--precision", "fp8",
            "--requests", "500"]
    p, _ = _plan_json(capsys, *args)
    cheapest = min(d["usd_per_mtok"] for d in p["deployments"])
    assert p["skipped"]["absurd"] > 0
    assert all(d["usd_per_mtok"] <= 10 * cheapest and not d["absurd"] for d in p["deployments"])
    q, _ = _plan_json(capsys, *args, "--absurd")
    marked = [d for d in q["deployments"] if d["absurd"]]
    assert marked and all(d["usd_per_mtok"] > 10 * cheapest for d in marked)
    assert min(d["usd_per_mtok"] for d in q["deployments"]) == pytest.approx(cheapest)
    assert len(q["deployments"]) > len(p["deployments"])
    # not searching the candidates a bound already calls absurd changes none of the others
    key = lambda d: (d["gpu"], d["tp"], d["precision"], d["decoding"], d["replicas"], d["p95_latency_s"])  # noqa: E731
    assert sorted(map(key, p["deployments"])) == sorted(key(d) for d in q["deployments"] if not d["absurd"])


def test_a_row_past_those_shown_is_simulated_once_short_of_each_request_alone(monkeypatch):
    """`meets_within` with the search's replica counts stubbed: R_sep = 5 (each request alone).
    Giving up from 5 replicas, the most short of it, 4, is one fewer than R_sep: simulated there
    (and a miss there is absurd). Giving up from 6, the most is 5 = R_sep: met without a simulation."""
    from types import SimpleNamespace

    from dlmcost.plan import replicas
    from dlmcost.plan.replicas import fewest

    simulated = []  # stubbed where meets_within looks them up (the part it is defined in)
    monkeypatch.setattr(fewest, "separate_replicas", lambda c, sample, traffic: 5)
    monkeypatch.setattr(fewest, "_run", lambda c, sample, traffic, r: simulated.append(r))
    monkeypatch.setattr(fewest, "_deployment", lambda *a: SimpleNamespace(meets=False))
    monkeypatch.setattr(fewest, "saturation_rps", lambda c, sample: 100.0)
    traffic = SimpleNamespace(rate=1.0)

    def verdict(give_up_at: int) -> str:
        return replicas.meets_within(None, None, traffic, None, None, lambda r: r >= give_up_at, 1)

    assert verdict(5) == replicas.ABSURD and simulated == [4]
    assert verdict(6) == replicas.MEETS and simulated == [4]


def test_a_row_past_those_shown_is_simulated_at_a_whole_number_of_replicas(monkeypatch):
    """`meets_within` from a lower bound of 3 replicas, giving up from 8: the most short of it is
    7, found by doubling (3, 6, 12) and bisecting (9, 7 and 8 by whole numbers), and simulated there
    (R_sep stubbed to 100). Halving with a true division instead bisects to 7.5 replicas, a lighter
    load per replica than 7 carry."""
    from types import SimpleNamespace

    from dlmcost.plan import replicas
    from dlmcost.plan.replicas import fewest

    simulated = []
    monkeypatch.setattr(fewest, "separate_replicas", lambda c, sample, traffic: 100)
    monkeypatch.setattr(fewest, "_run", lambda c, sample, traffic, r: simulated.append(r))
    monkeypatch.setattr(fewest, "_deployment", lambda *a: SimpleNamespace(meets=True))
    monkeypatch.setattr(fewest, "saturation_rps", lambda c, sample: 1.0)
    verdict = replicas.meets_within(None, None, SimpleNamespace(rate=1.0), None, None, lambda r: r >= 8, 3)
    assert verdict == replicas.MEETS and simulated == [7] and isinstance(simulated[0], int)


@pytest.mark.parametrize("where", ["fewest_replicas", "meets_within"])
def test_a_candidate_that_completes_no_request_has_no_answer(monkeypatch, where):
    """A saturation throughput of 0 requests/s (no request completes): neither search divides the
    load by it; both answer None."""
    from types import SimpleNamespace

    from dlmcost.plan import replicas
    from dlmcost.plan.replicas import fewest

    monkeypatch.setattr(fewest, "saturation_rps", lambda c, sample: 0.0)
    monkeypatch.setattr(fewest, "separate_replicas", lambda c, sample, traffic: 1)  # nothing simulated short of it
    traffic = SimpleNamespace(rate=1.0, closed_loop=False)
    if where == "fewest_replicas":
        assert replicas.fewest_replicas(None, None, traffic, results.Targets(p95_latency_s=1.0), None) is None
    else:
        assert replicas.meets_within(None, None, traffic, None, None, lambda r: r >= 8, 1) is None


def test_the_rows_whose_sustained_load_is_searched_by_hand():
    """$/Mtok 3, 1, 2, 2, 4: the first `ranked` by $/Mtok and every row tied with the last of them
    (ranked 1: the 1; ranked 2 or 3: 1, 2, 2; none: all, in order)."""
    from types import SimpleNamespace

    from dlmcost.plan.ranking import _to_sustain

    rows = [(SimpleNamespace(deployment=SimpleNamespace(usd_per_mtok=u, gpus=1, p95_latency_s=1.0)), None)
            for u in (3.0, 1.0, 2.0, 2.0, 4.0)]
    costs = lambda ranked: [f.deployment.usd_per_mtok for f, _ in _to_sustain(rows, ranked)]  # noqa: E731
    assert costs(1) == [1.0]
    assert costs(2) == costs(3) == [1.0, 2.0, 2.0]
    assert costs(None) == [1.0, 2.0, 2.0, 3.0, 4.0]


def test_rows_tied_in_cost_rank_by_their_cost_at_capacity(capsys):
    """A light load on one H100 at batch limits 2, 8 and 32: one replica each, the same $/Mtok at
    the offered load; the tie is broken by $/Mtok at the load each sustains, cheapest first (the
    largest batch limit sustains the most)."""
    rc = main(["plan", MODEL, "--rate", "0.2", "--gpu", "h100", "--tp", "1", "--precision", "bf16", "--scheme", "block",
               "--block", "32", "--tpf", "2", "--prompt", "256", "--answer", "128", "--max-batch", "2,8,32",
               "--price", "h100=2", "--requests", "100", "-f", "json"])
    assert rc == 0
    rows = json.loads(capsys.readouterr().out)["deployments"]
    assert len({d["usd_per_mtok"] for d in rows}) == 1 and [d["replicas"] for d in rows] == [1, 1, 1]
    at_capacity = [d["usd_per_mtok_at_capacity"] for d in rows]
    assert at_capacity == sorted(at_capacity) and [d["max_running"] for d in rows] == [32, 8, 2]


# --- the replica search's own arithmetic, by hand --------------------------------------------------


def test_the_worst_latency_ratio_by_hand():
    """The ratio the sustained-load search holds to 1 (and steers by): the worst over the targets
    set, value / limit for a time, limit / value for tokens/s per user. p95 3 s against 2 s: 1.5;
    p50 1 s against 4 s: 0.25; 25 tokens/s per user against a minimum of 50: 2. The worst: 2; without
    the tokens/s target, 1.5; with no target, 0."""
    from types import SimpleNamespace

    from dlmcost.plan import replicas

    d = SimpleNamespace(p50_latency_s=1.0, p95_latency_s=3.0, p99_latency_s=5.0, p95_first_block_s=0.5,
                        tokens_per_s_per_user=25.0)
    both = results.Targets(p50_latency_s=4.0, p95_latency_s=2.0, min_tokens_per_s_per_user=50.0)
    assert replicas._latency_ratio(d, both) == pytest.approx(2.0)
    assert replicas._latency_ratio(d, results.Targets(p50_latency_s=4.0, p95_latency_s=2.0)) == pytest.approx(1.5)
    assert replicas._latency_ratio(d, results.Targets(min_tokens_per_s_per_user=20.0)) == pytest.approx(0.8)
    assert replicas._latency_ratio(d, results.Targets()) == 0.0


def _hand_candidate(table: ClassTable):
    from dlmcost.plan import replicas

    return replicas.Candidate(gpu=None, precision="bf16", tp=1, decoding=None, max_batch=1, table=table,
                              answer_tokens=np.ones(len(table.nfe)), batch_limit=1)


def test_a_lone_requests_prefill_waits_its_forwards_dispatch_by_hand():
    """A request of 3 passes whose first (the prompt's) takes 2 s and waits 0.5 s of its prefill
    forward's own dispatch, the others 1 s: alone it takes 2.5 + 2 x 1 = 4.5 s, its first block
    (after its first pass) 2.5 s, as the simulation runs it; at a first-block target of 5 s and its
    first blocks twice as long as predicted (plan --conservative's first-token band), the floor
    reads 2 x 2.5 / 5 = 1."""
    from dataclasses import replace
    from types import SimpleNamespace

    from dlmcost.plan import replicas
    from dlmcost.plan.replicas.floors import _floor_ratio

    table = ClassTable([3], [1], [0.0], [[0.0, 1.0]], [[0.0, 2.0]], lead=[1], prefill_step_s=[[0.0, 0.5]])
    c = _hand_candidate(table)
    sample = SimpleNamespace(unit_gaps=np.ones(20), prompt_class=np.zeros(20, int), answer_class=np.zeros(20, int),
                             answer_values=np.array([1.0]))
    latency, first = replicas._lone_latencies(c, sample)
    assert latency.tolist() == [4.5] * 20 and first.tolist() == [2.5] * 20
    alone = simulate(table, np.zeros(1, int), 1, arrivals_s=np.zeros(1))
    assert (alone.done_s[0], alone.first_block_s[0]) == (4.5, 2.5)
    doubled = replace(c, first_block_scale=2.0, floors={})
    assert _floor_ratio(doubled, sample, results.Targets(p95_first_block_s=5.0)) == pytest.approx(1.0)


def test_each_request_alone_by_hand():
    """`separate_replicas`, the search's upper end: replicas enough that each request arrives after
    the one before it is done when served alone. Class 0 alone takes 2 s (2 passes of 1 s), class 1
    5 s (5 passes); requests of classes 0, 1, 0, 1 with unit gaps 0.3, 1, 1, 2 at 1 request/s: at R
    replicas the gaps are R, R, 2R seconds, after requests taking 2, 5 and 2 s, so R > max(2 / 1,
    5 / 1, 2 / 2) = 5: the fewest is 6 (the search adds one as its margin: 7). Read off the first
    request's 2 s alone, R would be 4, and each class-1 request would overlap the next."""
    from types import SimpleNamespace

    from dlmcost.plan import replicas

    flat = [0.0, 1.0]
    c = _hand_candidate(ClassTable([2, 5], [1, 1], [0.0, 0.0], [flat, flat]))
    sample = SimpleNamespace(unit_gaps=np.array([0.3, 1.0, 1.0, 2.0]), prompt_class=np.zeros(4, int),
                             answer_class=np.array([0, 1, 0, 1]), answer_values=np.array([2.0, 5.0]))
    traffic = SimpleNamespace(closed_loop=False, rate=1.0)
    assert replicas._lone_latencies(c, sample)[0].tolist() == pytest.approx([2.0, 5.0, 2.0, 5.0])
    r = replicas.separate_replicas(c, sample, traffic)
    assert r == 7
    gaps = np.array([1.0, 1.0, 2.0]) * r / traffic.rate
    assert (gaps > np.array([2.0, 5.0, 2.0])).all()  # each request alone
    # the gap after each request is set against that request's own life: a class-1 request first,
    # then three of class 0, unit gaps 1: R > max(5, 2, 2) = 5, so 7 (not 2 + 2 = 4, the next one's)
    first_long = SimpleNamespace(unit_gaps=np.array([0.3, 1.0, 1.0, 1.0]), prompt_class=np.zeros(4, int),
                                 answer_class=np.array([1, 0, 0, 0]), answer_values=np.array([2.0, 5.0]))
    assert replicas.separate_replicas(c, first_long, traffic) == 7


def test_the_replica_cap_by_hand():
    """The most replicas the GPU and cost targets allow. --max-gpus 5 at TP 2: floor(5 / 2) = 2
    replicas (4 GPUs; a third would take 6); --max-gpus 1 at TP 2: 1 all the same (the fewest a plan
    shows; it misses the target). $/Mtok at R replicas of TP 2 at $2 a GPU-hour, serving 40
    requests/s of 500 tokens: R x 2 x 2 / (40 x 500 x 3600) x 1e6 = R / 18 $/Mtok, so a limit of
    $0.25 allows floor(0.25 x 18) = 4 replicas, $0.04 allows 0.72: 1; a hair under 4 replicas'
    cost (4 / 18) allows 3, a hair over it (1e-4 or 1e-9) 4. Both set: the smaller. A
    closed loop's cost is not capped (its served load is not the offered one); no target: None."""
    from types import SimpleNamespace

    from dlmcost.plan import replicas

    c = SimpleNamespace(tp=2, gpu=SimpleNamespace(key="g"))
    pricing = replicas.Pricing({"g": 2.0}, {}, {})
    open_loop = SimpleNamespace(closed_loop=False, rate=40.0)

    def cap(traffic=open_loop, **targets):
        return replicas.replica_cap(c, traffic, results.Targets(**targets), pricing, 500.0)

    assert cap(max_gpus=5) == 2 and isinstance(cap(max_gpus=5), int)
    assert cap(max_gpus=1) == 1
    assert cap(max_usd_per_mtok=0.25) == 4 and cap(max_usd_per_mtok=0.04) == 1
    assert cap(max_usd_per_mtok=4 / 18 * (1 - 1e-4)) == 3 and cap(max_usd_per_mtok=4 / 18 * (1 + 1e-4)) == 4
    assert cap(max_usd_per_mtok=4 / 18 * (1 + 1e-9)) == 4  # the formula's constants exactly (1e6, not 1e6 + 1)
    assert cap(max_usd_per_mtok=0.25, max_gpus=5) == 2 and cap(max_usd_per_mtok=0.25, max_gpus=100) == 4
    assert cap(SimpleNamespace(closed_loop=True, rate=None), max_usd_per_mtok=0.25) is None
    assert cap() is None


@pytest.mark.parametrize("max_gpus, replicas, meets", [(4, 4, True), (3, 3, False), (1, 1, False)])
def test_a_gpu_cap_stops_the_search_at_the_cap(capsys, max_gpus, replicas, meets):
    """64 users on H100s at a batch limit of 8 need 4 replicas for a p95 of 5 s. Under --max-gpus 4
    the answer stands; under 3 (or 1) no count meets both: the nearest miss is the most replicas the
    cap allows, 3 (or 1), missing the latency target alone (not more replicas missing the cap)."""
    args = [MODEL, "--users", "64", "--gpu", "h100", "--tp", "1", "--precision", "bf16", "--scheme", "dual-cache",
            "--requests", "100", "--max-batch", "8", "--p95", "5"]
    if max_gpus == 4:
        free, _ = _plan_json(capsys, *args)
        assert free["deployments"][0]["replicas"] == 4  # the answer the cap is set against
    rc, out, err = run(capsys, "plan", *args, "--max-gpus", max_gpus, "-f", "json")
    p = json.loads(out)
    d = p["deployments"][0] if meets else p["nearest_miss"]
    assert (rc == 0) == meets, err
    assert (d["replicas"], d["gpus"]) == (replicas, replicas)
    assert [m["target"] for m in d.get("misses", [])] == ([] if meets else ["p95_latency_s"])


def test_an_open_loop_search_grows_no_further_than_the_gpu_cap(capsys):
    """20 requests/s on H100s at a batch limit of 8 need 12 replicas for a p95 of 1.5 s, and 6 keep
    up with the load (the first simulated, failing). Under --max-gpus 7 the search's step from 6
    (read off the queueing shape, toward 12) stops at the cap: the nearest miss is 7 replicas,
    missing the latency target alone, not a count past the cap missing both."""
    args = [MODEL, "--rate", "20", "--gpu", "h100", "--tp", "1", "--precision", "bf16", "--scheme", "dual-cache",
            "--requests", "100", "--max-batch", "8", "--p95", "1.5"]
    free, _ = _plan_json(capsys, *args)
    assert free["deployments"][0]["replicas"] == 12
    rc, out, err = run(capsys, "plan", *args, "--max-gpus", "7", "-f", "json")
    d = json.loads(out)["nearest_miss"]
    assert rc != 0 and (d["replicas"], d["gpus"]) == (7, 7), err
    assert [m["target"] for m in d["misses"]] == ["p95_latency_s"]


def test_a_closed_loop_search_bisects_a_capped_bracket_by_whole_replicas(capsys):
    """11 users, no think time, a batch limit of 1 on H100s: a replica serving u users answers each
    in about u lone latencies (0.77 s: 2.30 s at 3, 1.53 s at 2), so a p95 of 2 s needs 2 users a
    replica at most, ceil(11 / R) <= 2: R = 6. Under --max-gpus 7 the doubling search (1, 2, 4
    fail) stops at the cap, 7, and bisects (4, 7) by whole numbers: 5 fails, 6 meets. Halved with a
    true division the bracket's middle is 5.5 replicas."""
    args = [MODEL, "--users", "11", "--gpu", "h100", "--tp", "1", "--precision", "bf16", "--scheme", "dual-cache",
            "--requests", "100", "--max-batch", "1", "--p95", "2"]
    for cap in ([], ["--max-gpus", "7"]):
        d = _plan_json(capsys, *args, *cap)[0]["deployments"][0]
        assert d["replicas"] == 6 and 2 * 0.7 < d["p95_latency_s"] <= 2, (cap, d["p95_latency_s"])


def test_a_target_exactly_at_the_lone_latency_is_met_by_the_fewest_replicas():
    """8 passes of 0.25 s at any batch (a lone request: exactly 2 s, as batched ones: the batch
    limit of 8 is never reached at 0.01 requests/s) and a p95 target of exactly 2 s: one replica
    meets it, the fewest there are. A floor exactly at the target is no lone miss (the search would
    answer min(4 lo, R_sep) replicas for one)."""
    from dlmcost.plan import replicas
    from dlmcost.serving.steptime import Decoding
    from dlmcost.serving.traffic import Traffic, sample_requests

    table = ClassTable([8], [1], [0.0], [[0.0] + [0.25] * 8])
    c = replicas.Candidate(HardwareDB.load(None).get("h100"), "bf16", 1, Decoding("block", 32, 1.0), 8, table,
                           np.array([32.0]), 8)
    traffic = Traffic(parse_lengths(16, "p"), parse_lengths(32, "a"), rate=0.01)
    sample = sample_requests(traffic, 100, 0)
    assert replicas.separate_replicas(c, sample, traffic) > 1
    found = replicas.fewest_replicas(c, sample, traffic, results.Targets(p95_latency_s=2.0), replicas.Pricing({}, {}, {}))
    assert (found.deployment.replicas, found.deployment.p95_latency_s, found.deployment.meets) == (1, 2.0, True)


# Qwen2.5-7B decoded autoregressively on one H100, 1,024 + 1,024 tokens a request, no stack: its
# memory limit is worked by hand from its config (oracle.qwen7b_requests_in_memory)
QWEN_AR_PLAN = ["Qwen/Qwen2.5-7B", "--rate", "1", "--gpu", "h100", "--tp", "1", "--precision", "bf16", "--scheme", "ar",
                "--stack", "none", "--prompt", "1024", "--answer", "1024", "--max-batch", "256", "--requests", "100"]


@pytest.fixture
def costed_max_batches(monkeypatch) -> list:
    """The max_batch of every pass table plan costs, one list per table, as plan runs."""
    from dlmcost.plan import search

    costed = []
    real = search.pass_table

    def spied(*args, **kwargs):
        table = real(*args, **kwargs)
        costed.append(table.max_batch.ravel().tolist())
        return table

    monkeypatch.setattr(search, "pass_table", spied)
    return costed


def test_plan_costs_its_candidates_with_the_kv_dtype_given(capsys, costed_max_batches):
    """`plan --kv-dtype fp8` costs every candidate's passes with a 1-byte K/V cache: Qwen2.5-7B
    decoded autoregressively on an H100, 1,024 + 1,024 tokens a request, fits 325 requests in
    memory (248 with bf16's 2 bytes), each worked by hand from its config
    (oracle.qwen7b_requests_in_memory); the search's record and header name the dtype."""
    import oracle

    for given, name, kv_bytes in ((None, "bf16", 2), ("fp8", "fp8", 1)):
        costed_max_batches.clear()
        p, _ = _plan_json(capsys, *QWEN_AR_PLAN, *(["--kv-dtype", given] if given else []))
        assert p["search"]["kv_dtype"] == name
        assert costed_max_batches == [[oracle.qwen7b_requests_in_memory(kv_bytes, 1024, 1024)]]
    rc, out, err = run(capsys, "plan", *QWEN_AR_PLAN, "--kv-dtype", "fp8")
    assert rc == 0 and "K/V cache fp8, 90% of memory;" in out.replace("\n", " "), err


def test_plan_searches_each_kv_dtype_given(capsys, costed_max_batches, tmp_path):
    """`plan --kv-dtype bf16,fp8` (or the scenario's `search: {kv_dtype: [bf16, fp8]}`) searches
    each candidate once per K/V format: Qwen2.5-7B decoded autoregressively on one H100, 1,024 +
    1,024 tokens a request, batch limit 512, fits 248 requests with bf16's 2-byte cache and 325
    with fp8's 1 byte (oracle.qwen7b_requests_in_memory, worked by hand from its config); each
    row names its format, and the header and table show the formats as a factor of the search.
    Its K/V allocated as tokens come (first-done release), each runs the whole limit of 512 and
    preempts where memory runs out: memory_fits says what memory holds, max_running what runs."""
    import oracle
    from dlmcost.plan import search

    hand = {name: oracle.qwen7b_requests_in_memory(kv_bytes, 1024, 1024) for name, kv_bytes in (("bf16", 2), ("fp8", 1))}
    assert hand == {"bf16": 248, "fp8": 325}
    args = [a if a != "256" else "512" for a in QWEN_AR_PLAN]  # a limit over both formats' memory limits
    scenario = tmp_path / "s.yaml"
    scenario.write_text("search: {kv_dtype: [bf16, fp8]}\n")
    for given in (["--kv-dtype", "bf16,FP8"], ["--scenario", str(scenario)]):
        costed_max_batches.clear()
        p, _ = _plan_json(capsys, *args, *given)
        assert (p["search"]["kv_dtypes"], p["search"]["kv_dtype"], p["evaluated"]) == (["bf16", "fp8"], "bf16", 2)
        assert costed_max_batches == [[hand["bf16"]], [hand["fp8"]]]
        assert {d["kv_dtype"]: d["memory_fits"] for d in p["deployments"]} == hand
        assert [d["max_running"] for d in p["deployments"]] == [512, 512]
    rc, out, err = run(capsys, "plan", *args, "--kv-dtype", "bf16,fp8", "-f", "csv")
    assert rc == 0 and sorted(line.split(",")[7] for line in out.splitlines()[1:]) == ["bf16", "fp8"], err
    rc, out, err = run(capsys, "plan", *args, "--kv-dtype", "bf16,fp8")
    flat = " ".join(out.split())
    assert rc == 0 and "1 precision (bf16) × 2 K/V formats (bf16, fp8) × 1 decoding (ar)" in flat, err
    assert "1×1 bf16 fp8 512" in flat and "1×1 bf16 bf16 512" in flat, out
    rc, _, err = run(capsys, "plan", *args, "--kv-dtype", "bf16,fp8", "--p95", "0.001")
    # the nearest miss is fp8's: its passes read half the K/V bytes, so no step is slower than bf16's
    assert rc == 8 and "x tp1 bf16 kv fp8 ar batch<=512: p95_latency_s" in err, err
    space = search.SearchSpace([HardwareDB.load().get("h100")], [1], ["bf16"], [search.baseline_decoding()], [8])
    assert search.candidate_count(space)[1] == "1 GPUs x 1 TP sizes x 1 precisions x 1 decodings x 1 batch limits"
    space = search.SearchSpace(space.gpus, [1], ["bf16"], space.decodings, [8], kv_dtypes=["bf16", "fp8"])
    assert search.candidate_count(space) == (2, "1 GPUs x 1 TP sizes x 1 precisions x 2 K/V formats x 1 decodings "
                                                "x 1 batch limits")


def test_plan_of_one_kv_dtype_is_as_before(capsys, tmp_path):
    """The default (bf16 alone) costs as a plan of one format always did: its row is the bf16 row
    of a two-format search (each candidate's search is its own), the table has no K/V column and
    the header names the cache as one format; a scenario's single name is a list of one."""
    one, _ = _plan_json(capsys, *QWEN_AR_PLAN)
    two, _ = _plan_json(capsys, *QWEN_AR_PLAN, "--kv-dtype", "bf16,fp8")
    assert (one["search"]["kv_dtypes"], one["search"]["kv_dtype"], one["evaluated"]) == (["bf16"], "bf16", 1)
    same = ("replicas", "max_running", "p95_latency_s", "usd_per_mtok", "capacity_rps", "kv_dtype")
    bf16 = [d for d in two["deployments"] if d["kv_dtype"] == "bf16"]
    assert [{k: d[k] for k in same} for d in one["deployments"]] == [{k: d[k] for k in same} for d in bf16]
    rc, out, err = run(capsys, "plan", *QWEN_AR_PLAN)
    assert rc == 0 and "K/V" not in out.split("deployments meeting")[1] and "K/V formats" not in out, out
    scenario = tmp_path / "s.yaml"
    scenario.write_text("search: {kv_dtype: fp8}\n")
    p, _ = _plan_json(capsys, *QWEN_AR_PLAN, "--scenario", scenario)
    assert (p["search"]["kv_dtypes"], [d["kv_dtype"] for d in p["deployments"]]) == (["fp8"], ["fp8"])


@pytest.mark.parametrize("given, needle", [
    (["--kv-dtype", "fp7,bf16"], "unknown K/V dtype 'fp7'"),
    (["--kv-dtype", ","], "--kv-dtype needs at least one value"),
    (["scenario", "search: {kv_dtype: [bf16, '']}"], "search.kv_dtype.1"),
    (["scenario", "search: {kv_dtype: []}"], "search.kv_dtype"),
    (["scenario", "search: {kv_dtype: 8}"], "search.kv_dtype"),
])
def test_plan_refuses_a_bad_kv_dtype_list(capsys, tmp_path, given, needle):
    """An unknown K/V format among several, an empty list, an empty or non-text item: one error
    line, exit 2 (a usage error), before any candidate is costed."""
    if given[0] == "scenario":
        (tmp_path / "s.yaml").write_text(given[1] + "\n")
        given = ["--scenario", tmp_path / "s.yaml"]
    rc, out, err = run(capsys, "plan", *QWEN_AR_PLAN, *given)
    assert rc == 2 and err.count("\n") == 1 and err.startswith("error: ") and needle in err, err


def test_plan_fits_its_candidates_in_the_memory_fraction_given(capsys, costed_max_batches, tmp_path):
    """`plan --mem-fraction 0.95` (or the scenario's search.mem_fraction) costs every candidate
    against 95% of each GPU's memory: Qwen2.5-7B decoded autoregressively on an H100, 1,024 + 1,024
    tokens a request, fits 266 requests (248 at the default 0.9), worked by hand from its config
    (oracle.qwen7b_requests_in_memory); the search's record and header name the share."""
    import oracle

    scenario = tmp_path / "s.yaml"
    scenario.write_text("search: {mem_fraction: 0.95}\n")
    for given, fraction in (([], 0.9), (["--mem-fraction", "0.95"], 0.95), (["--scenario", str(scenario)], 0.95)):
        costed_max_batches.clear()
        p, _ = _plan_json(capsys, *QWEN_AR_PLAN, *given)
        assert p["search"]["mem_fraction"] == fraction
        assert costed_max_batches == [[oracle.qwen7b_requests_in_memory(2, 1024, 1024, fraction)]]
    rc, out, err = run(capsys, "plan", *QWEN_AR_PLAN, "--mem-fraction", "0.95")
    assert rc == 0 and "K/V cache bf16, 95% of memory;" in out.replace("\n", " "), err


def test_memory_binds_where_the_requests_in_flight_fill_what_memory_holds(capsys):
    """Qwen2.5-7B on one H100, 1,024-token prompts and 8,192-token answers at 2 req/s: memory holds
    93 of these requests at bf16 and 156 at fp8 (worked by hand, tests/oracle.py). By Little's law a
    replica holds its arrival rate x its latency: bf16's 3 replicas about 100 (over 95% of 93: memory
    binds), fp8's about 72 (under 148: it does not). The flag says so, and the warning names the
    recommendation when bf16 is the only precision searched."""
    sys.path.insert(0, str(Path(__file__).parent))
    import oracle

    held = {"bf16": oracle.qwen7b_requests_in_memory(2, 1024, 8192), "fp8": oracle.qwen7b_requests_in_memory(1, 1024, 8192)}
    assert held == {"bf16": 93, "fp8": 156}
    args = ["plan", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--tp", "1", "--scheme", "ar", "--prompt", "1024",
            "--answer", "8192", "--rate", "2"]
    code, out, err = run(capsys, *args, "-f", "json")
    assert code == 0, err
    deployments = json.loads(out)["deployments"]
    assert {d["precision"] for d in deployments} == {"bf16", "fp8"}
    for d in deployments:
        in_flight = d["served_rps"] / d["replicas"] * d["p50_latency_s"]  # Little's law, the median as the mean
        threshold = 0.95 * held[d["precision"]]
        assert abs(in_flight / threshold - 1) > 0.1  # far from the line either way
        assert d["memory_binds"] is (in_flight > threshold), d
        if not d["memory_binds"]:  # (where it binds, arrivals spread out may still never run out)
            assert d["preemptions"] == 0, d
    assert "memory binds" not in err  # the recommendation (fp8) is not bound
    code, out, err = run(capsys, *args)  # the table marks the bound one's first-block time with m
    import re

    rows = {prec: next(ln for ln in out.splitlines() if f"×1 {prec} " in ln) for prec in ("bf16", "fp8")}
    assert re.search(r"\d(\.\d+)?m ", rows["bf16"]) and not re.search(r"\dm ", rows["fp8"]), out
    code, out, err = run(capsys, *args, "--precision", "bf16")
    assert code == 0 and "memory binds for the recommended 3 x H100 SXM (TP1, bf16" in err, err


def test_plan_counts_the_preemptions_serve_counts(capsys):
    """260 users sending at once 1,024 + 1,024-token requests to one H100 (running limit 256, memory
    holding 248 at their final lengths: tests/oracle.py): they grow together and the latest admitted
    are preempted. plan's record, CSV row and warning carry the count `serve` gives for the same
    replica at the same 260 users (its own simulation path: serving/deployment/measure.py)."""
    import csv
    import io

    common = ["Qwen/Qwen2.5-7B", "--gpu", "h100", "--tp", "1", "--scheme", "ar", "--precision", "bf16", "--stack",
              "none", "--prompt", "1024", "--answer", "1024"]
    code, out, err = run(capsys, "serve", *common, "-c", "260", "-f", "json")
    served = json.loads(out)["deployments"][0]["points"][0]["preemptions"]
    assert code == 0 and served > 0, err
    code, out, err = run(capsys, "plan", *common, "--users", "260", "--think", "0", "-f", "json")
    top = json.loads(out)["deployments"][0]
    assert code == 0 and top["replicas"] == 1 and top["preemptions"] == served, (top, served)
    assert f"({served:,} preemptions of its simulated replica's measured requests;" in " ".join(err.split()), err
    code, out, err = run(capsys, "plan", *common, "--users", "260", "--think", "0", "-f", "csv")
    assert next(csv.DictReader(io.StringIO(out)))["preemptions"] == str(served)


def test_the_band_ends_are_those_a_brute_force_search_finds():
    """`band_ends` (its first guess read off the prediction's latency ratios and its bracket bounded
    by what missed at a faster clock) against a brute-force search at each end of made-up bands,
    one of them below 1: every step scaled by the end, every R from the fewest stable ones up
    simulated until one meets the targets. Where the latency falls with R over that range the two
    agree; everywhere the answer meets and one fewer does not."""
    import functools

    from dlmcost.inputs.error_bands import ErrorBand
    from dlmcost.inputs.models import resolve_model
    from dlmcost.plan import replicas, search
    from dlmcost.plan.replicas.bands import band_ends
    from dlmcost.serving.simulate import scaled
    from dlmcost.serving.steptime import Decoding
    from dlmcost.serving.traffic import Traffic, sample_requests

    model, db = resolve_model(MODEL), HardwareDB.load(None)
    pricing = replicas.Pricing({}, {}, {})
    compared = 0
    for rate in (10.0, 40.0):
        traffic = Traffic(parse_lengths(256, "p"), parse_lengths(128, "a"), rate=rate)
        sample = sample_requests(traffic, 400, 0)
        decoding = Decoding("block", 32, 2.0)
        space = search.SearchSpace([db.get("h100")], [1], ["bf16"], [decoding], [16, 64])
        for c in search._candidates(model, space, decoding, sample, "realistic", None, None)[0]:
            targets = results.Targets(p95_latency_s=4.0)
            found = replicas.fewest_replicas(c, sample, traffic, targets, pricing)
            if not found.deployment.meets:
                continue
            for low, high in ((1.3, 2.2), (0.8, 1.25)):
                ends = band_ends(found, sample, traffic, targets, pricing, ErrorBand("s", low, 1.0, high, 6, ""))
                for factor, got in zip((low, high), ends["gpus"]):
                    moved = dataclasses.replace(c, table=scaled(c.table, factor), floors={})
                    lo = math.floor(rate / (replicas.saturation_rps(c, sample) / factor)) + 1

                    @functools.cache
                    def meets(r: int, moved=moved) -> bool:
                        return replicas._deployment(moved, replicas._run(moved, sample, traffic, r), r, 1.0, pricing,
                                                    targets).meets

                    where = (rate, c.max_batch, low, high, factor, got)
                    assert got is not None and meets(got) and (got == lo or not meets(got - 1)), where
                    fewest = next(r for r in range(lo, got + 1) if meets(r))
                    if all(meets(r) for r in range(fewest, got + 1)):
                        assert got == fewest, (*where, fewest)
                        compared += 1
    assert compared >= 8


def test_a_nearest_miss_can_meet_at_the_band_s_faster_end():
    """A candidate whose lone requests miss the p95 target (its nearest miss, no replica count
    meets it) meets it at a band end that halves every step, as a brute-force search over R finds:
    the miss's replicas are no known answer there."""
    from dlmcost.inputs.error_bands import ErrorBand
    from dlmcost.inputs.models import resolve_model
    from dlmcost.plan import replicas, search
    from dlmcost.plan.replicas.bands import band_ends
    from dlmcost.plan.replicas.floors import _floor_ratio
    from dlmcost.serving.simulate import scaled
    from dlmcost.serving.steptime import Decoding
    from dlmcost.serving.traffic import Traffic, sample_requests

    model, db = resolve_model(MODEL), HardwareDB.load(None)
    pricing = replicas.Pricing({}, {}, {})
    traffic = Traffic(parse_lengths(256, "p"), parse_lengths(128, "a"), rate=10.0)
    sample = sample_requests(traffic, 400, 0)
    decoding = Decoding("block", 32, 2.0)
    space = search.SearchSpace([db.get("h100")], [1], ["bf16"], [decoding], [16])
    (c,) = search._candidates(model, space, decoding, sample, "realistic", None, None)[0]
    lone = _floor_ratio(c, sample, results.Targets(p95_latency_s=1.0))  # the lone p95, in seconds
    targets = results.Targets(p95_latency_s=lone / 1.25)  # alone 1.25x too slow; at half the step 0.625x
    found = replicas.fewest_replicas(c, sample, traffic, targets, pricing)
    assert not found.deployment.meets
    ends = band_ends(found, sample, traffic, targets, pricing, ErrorBand("s", 0.5, 0.7, 0.9, 6, ""))
    moved = dataclasses.replace(c, table=scaled(c.table, 0.5), floors={})
    lo = math.floor(10.0 / (replicas.saturation_rps(c, sample) / 0.5)) + 1
    fewest = next(r for r in range(lo, lo + 40) if replicas._deployment(
        moved, replicas._run(moved, sample, traffic, r), r, 1.0, pricing, targets).meets)
    assert ends["gpus"][0] == fewest


def test_a_closed_loop_of_more_users_than_requests_runs_four_requests_a_user(capsys, monkeypatch):
    """A closed loop simulates at least four requests a user (serving.loads.loop_requests, as serve's
    closed loop does): plan's sample repeated in order. With --requests 100 and 1,000 users, one
    replica's run was the users' first 100 requests sent at once (a burst, not a loop: a p95 of 15 s
    where the loop's is 770 s), and the plan said one GPU. Every closed-loop run of u users a replica
    now simulates max(100, 4 u) requests; with one request class a repeated sample is the sample of
    that many drawn whole, so the deployment found, 3 replicas (334 users each), is the one
    --requests 4 x 334 = 1,336 finds, run for run."""
    from dlmcost.serving import behaviour

    args = ["GSAI-ML/LLaDA-8B-Instruct", "--gpu", "h100", "--tp", "1", "--precision", "fp8", "--scheme", "dual-cache",
            "--users", "1000", "--p95", "60", "-j", "1"]
    runs, real = [], behaviour.run

    def counted(table, request_class, *a, **kw):
        if kw.get("users") is not None:
            runs.append((kw["users"], len(request_class)))
        return real(table, request_class, *a, **kw)

    monkeypatch.setattr(behaviour, "run", counted)
    few, _ = _plan_json(capsys, *args, "--requests", "100")
    saturation = 2 * 2 * 128 + 1  # its users: twice the 256 in flight (128 running, first blocks beside them) + 1
    loop_runs = [(u, n) for u, n in runs if u != saturation]
    assert (1000, 4000) in loop_runs and all(n == max(100, 4 * u) for u, n in loop_runs)
    monkeypatch.setattr(behaviour, "run", real)
    (found,) = few["deployments"]
    assert found["replicas"] == 3
    (same,) = _plan_json(capsys, *args, "--requests", str(4 * 334))[0]["deployments"]
    pick = ("gpus", "replicas", "p95_latency_s", "p50_latency_s", "served_rps", "output_tokens_per_s")
    assert {k: found[k] for k in pick} == {k: same[k] for k in pick}
