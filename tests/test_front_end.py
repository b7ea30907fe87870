"""The serving engine's front end (its API servers, serving/simulate/front_end.py): every request
needs service_s of `servers` processes before the engine's scheduler sees it, the requests sent
before the run sharing the servers' time evenly (an asyncio loop takes each request it holds a step
at a time), one sent later taking the server free first; latencies still count from sending.
Pinned by hand-worked schedules, a reference that walks every request's remaining work, a
brute-force server heap, the plan's lone floor and throughput bound, and the CLI end to end."""

from __future__ import annotations

import csv
import heapq
import io
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from dlmcost.serving.simulate import ClassTable, FrontEnd, simulate
from dlmcost.serving.simulate.front_end import shared_departures

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers_reference import shared_by_remaining_work  # noqa: E402

pytestmark = pytest.mark.usefixtures("bundled_offline")

PASS_S = 0.001  # an engine whose one pass takes 1 ms at any batch: far faster than the front end


def one_pass_table(cap: int = 64) -> ClassTable:
    return ClassTable([1], [1], [0.0], [[PASS_S] * (cap + 1)])


def test_a_burst_through_one_server_reaches_the_engine_all_at_once():
    """10 requests sent at once through 1 server of 5 ms, sharing it: each runs at 1/10 of its
    speed, so all 10 are done at 10 x 5 = 50 ms (not one 5 ms apart, as first come first served
    would have them), are admitted together and run their one 1 ms pass: first token and answer
    at 51 ms after sending."""
    r = simulate(one_pass_table(), np.zeros(10, int), 64, arrivals_s=np.zeros(10), front_end=FrontEnd(1, 0.005))
    assert r.arrival_s.tolist() == [0.0] * 10  # sent: what the latencies count from
    assert r.start_s.tolist() == pytest.approx([0.050] * 10, abs=1e-12)
    assert r.ttfb_s.tolist() == pytest.approx([0.051] * 10, abs=1e-12)
    assert r.latency_s.tolist() == pytest.approx([0.051] * 10, abs=1e-12)


def test_two_servers_take_the_burst_at_twice_the_speed():
    """The same burst through 2 servers: each of the 10 runs at 2/10, done at 10 x 5 / 2 = 25 ms,
    answered at 26 ms."""
    r = simulate(one_pass_table(), np.zeros(10, int), 64, arrivals_s=np.zeros(10), front_end=FrontEnd(2, 0.005))
    assert r.latency_s.tolist() == pytest.approx([0.026] * 10, abs=1e-12)


def test_a_request_sent_later_slows_the_one_inside():
    """1 server of 10 ms, sends at 0 and 5 ms: the first runs alone for 5 ms (5 ms left), then the
    two share it, each at half speed: the first is done 10 ms later, at 15 ms, when the second has
    had 5 of its 10 ms; alone again, it is done at 20 ms. Fewer requests than servers each run at
    full speed: three sent at once through 3 servers are done at 10 ms."""
    assert shared_departures([0.0, 0.005], 1, 0.010) == pytest.approx([0.015, 0.020], abs=1e-12)
    assert shared_departures([0.0] * 3, 3, 0.010) == pytest.approx([0.010] * 3, abs=1e-12)
    assert shared_departures([0.0, 1.0], 1, 0.5) == pytest.approx([0.5, 1.5], abs=1e-12)  # never together


@pytest.mark.parametrize("seed", range(8))
def test_shared_servers_against_every_requests_remaining_work(seed):
    """`shared_departures` (one virtual clock, requests leaving in the order sent) against the
    plain walk that keeps every request's remaining work, on random sends with ties, 1 to 4
    servers, and a service of nothing."""
    rng = np.random.default_rng(seed)
    servers, service = int(rng.integers(1, 5)), float(rng.choice([0.0, 0.001, 0.01]))
    sent = np.sort(np.round(rng.exponential(0.004, int(rng.integers(1, 60))).cumsum(), 3)).tolist()
    assert shared_departures(sent, servers, service) == pytest.approx(
        shared_by_remaining_work(sent, servers, service), abs=1e-9)


def test_a_closed_loops_first_round_shares_the_server():
    """3 users, no think time, 1 server of 5 ms, 6 requests: the first three, sent at 0, share it and
    are done at 15 ms, answered at 16 ms; each user then sends again at 16 ms, and these are
    served one after another (sent after the run began): ready at 21, 26, 31 ms, answered 1 ms
    later."""
    r = simulate(one_pass_table(), np.zeros(6, int), 64, users=3, front_end=FrontEnd(1, 0.005))
    assert r.arrival_s.tolist() == pytest.approx([0.0] * 3 + [0.016] * 3, abs=1e-12)
    assert r.done_s.tolist() == pytest.approx([0.016] * 3 + [0.022, 0.027, 0.032], abs=1e-12)


def test_a_closed_loop_user_waits_the_front_end_every_time():
    """One user, no think time, 1 server of 5 ms: each request takes 5 + 1 ms, sent when the one
    before is answered, so the k-th is sent at (k - 1) x 6 ms and answered at k x 6 ms."""
    r = simulate(one_pass_table(), np.zeros(5, int), 64, users=1, front_end=FrontEnd(1, 0.005))
    assert r.arrival_s.tolist() == pytest.approx([k * 0.006 for k in range(5)], abs=1e-12)
    assert r.done_s.tolist() == pytest.approx([k * 0.006 for k in range(1, 6)], abs=1e-12)


def test_without_a_front_end_nothing_changes():
    """A front end of no service time is the engine alone, to the last bit."""
    arrivals = np.cumsum(np.random.default_rng(0).exponential(0.002, 50))
    plain = simulate(one_pass_table(), np.zeros(50, int), 64, arrivals_s=arrivals)
    free = simulate(one_pass_table(), np.zeros(50, int), 64, arrivals_s=arrivals, front_end=FrontEnd(3, 0.0))
    assert plain.done_s.tolist() == free.done_s.tolist()


@pytest.mark.parametrize("seed", range(6))
def test_the_desk_is_a_heap_of_servers(seed):
    """`FrontEnd.desk`'s sends after the run began (the server free first is the one that took the
    request `servers` places before) against a heap of each server's free time, first come first
    served, on random sends in time order, bursts (equal times) included."""
    rng = np.random.default_rng(seed)
    servers, service = int(rng.integers(1, 5)), float(rng.choice([0.001, 0.01]))
    sent = np.sort(np.round(rng.exponential(0.004, 200).cumsum(), 3))  # rounded: ties
    desk = FrontEnd(servers, service).desk(len(sent))
    free = [0.0] * servers
    for i, t in enumerate(sent.tolist()):
        ready = max(t, heapq.heappop(free)) + service
        heapq.heappush(free, ready)
        assert desk.send(i, t) == pytest.approx(ready, abs=1e-12)
    assert desk.sent == sent.tolist()


def test_a_saturated_replica_completes_no_more_than_its_servers_pass():
    """Many users and an engine far faster than the front end: the completions come at the
    servers' rate, 2 / 5 ms = 400 req/s."""
    from dlmcost.serving.behaviour import completion_rate, measured_window

    r = simulate(one_pass_table(), np.zeros(2000, int), 64, users=129, front_end=FrontEnd(2, 0.005))
    rate = completion_rate(r.done_s, measured_window(2000), float(r.done_s.max()))
    assert rate == pytest.approx(400.0, rel=1e-3)


def test_bad_front_ends_are_refused():
    for servers, service, delay in ((0, 0.005, 0.0), (1, -1.0, 0.0), (1, math.nan, 0.0), (1, 0.005, -1e-3),
                                    (1, 0.005, math.inf)):
        with pytest.raises(ValueError):
            FrontEnd(servers, service, delay)


# --- the first-token delay: after the server, before the engine, holding neither ----------------

def test_a_lone_users_requests_each_wait_the_delay_once():
    """One user, no think time, 1 server of 5 ms, a 28.8 ms first-token delay (Qwen3-8B's 36 layers x
    0.8 ms): each request leaves the server 5 ms after it is sent, reaches the engine 28.8 ms later,
    and is answered 1 ms after that: 34.8 ms after sending; the next is sent then, so the k-th is
    sent at (k - 1) x 34.8 ms. Its one pass (the time per output token) is the engine's 1 ms still."""
    r = simulate(one_pass_table(), np.zeros(5, int), 64, users=1, front_end=FrontEnd(1, 0.005, 0.0288))
    assert r.arrival_s.tolist() == pytest.approx([k * 0.0348 for k in range(5)], abs=1e-12)
    assert r.start_s.tolist() == pytest.approx([k * 0.0348 + 0.0338 for k in range(5)], abs=1e-12)
    assert r.ttfb_s.tolist() == pytest.approx([0.0348] * 5, abs=1e-12)
    assert (r.done_s - r.start_s).tolist() == pytest.approx([PASS_S] * 5, abs=1e-12)


def test_the_delay_holds_no_server():
    """1 server of 5 ms, a 10 ms delay. A burst of 10 shares the server and leaves it at 50 ms, as
    without the delay, and reaches the engine together at 60 ms (answered at 61). Sent after the
    run began, at 0 and 1 ms: the first leaves the server at 5 ms and reaches the engine at 15; the
    second takes the server at 5 ms (the first's delay does not keep it), leaves at 10, reaches the
    engine at 20 (30 if the delay held the server)."""
    r = simulate(one_pass_table(), np.zeros(10, int), 64, arrivals_s=np.zeros(10), front_end=FrontEnd(1, 0.005, 0.010))
    assert r.start_s.tolist() == pytest.approx([0.060] * 10, abs=1e-12)
    assert r.latency_s.tolist() == pytest.approx([0.061] * 10, abs=1e-12)
    desk = FrontEnd(1, 0.005, 0.010).desk(2)
    assert [desk.send(0, 0.0), desk.send(1, 0.001)] == pytest.approx([0.015, 0.020], abs=1e-12)
    # the same when the first is sent with the run's known sends (send_together): its delay frees the server at 5
    desk = FrontEnd(1, 0.005, 0.010).desk(2)
    assert [*desk.send_together([0.0]), desk.send(1, 0.001)] == pytest.approx([0.015, 0.020], abs=1e-12)


def test_a_saturated_front_end_passes_as_many_with_the_delay():
    """Many users, an engine far faster than the servers: the delay holds no server, so the
    completions still come at the servers' rate, 2 / 5 ms = 400 req/s."""
    from dlmcost.serving.behaviour import completion_rate, measured_window

    r = simulate(one_pass_table(), np.zeros(2000, int), 64, users=129, front_end=FrontEnd(2, 0.005, 0.0288))
    assert completion_rate(r.done_s, measured_window(2000), float(r.done_s.max())) == pytest.approx(400.0, rel=1e-3)


# --- plan: the lone floor and the throughput bound stay bounds --------------------------------------

def _vllm_candidate(api_servers=None, rate=0.01, prompt=16, answer=4):
    from dlmcost.inputs.hardware import HardwareDB
    from dlmcost.inputs.models import resolve_model
    from dlmcost.plan import search
    from dlmcost.serving.steptime import Decoding
    from dlmcost.serving.traffic import Traffic, parse_lengths, sample_requests

    traffic = Traffic(parse_lengths(prompt, "p"), parse_lengths(answer, "a"), rate=rate)
    sample = sample_requests(traffic, 200, 0)
    decoding = Decoding("ar", None, 1.0)
    space = search.SearchSpace([HardwareDB.load(None).get("h100")], [1], ["bf16"], [decoding], [64],
                               api_servers=api_servers)
    (c,), _ = search._candidates(resolve_model("Qwen/Qwen2.5-7B"), space, decoding, sample, "realistic", "vllm",
                                 None)
    return c, sample, traffic


def test_plans_lone_floor_adds_one_service():
    """A request alone passes a free API server (5 ms, the vllm stack's) and waits its first-token
    delay (0.8 ms a layer, Qwen2.5-7B's 28 layers: 22.4 ms) before its passes: the lone floor is
    the simulation of each request alone, and 5 + 22.4 ms above the same candidate without a front
    end."""
    from dataclasses import replace

    from dlmcost.plan import replicas

    c, sample, traffic = _vllm_candidate()
    assert (c.front_end.servers, c.front_end.service_s) == (1, 0.005)
    assert c.front_end.first_token_delay_s == pytest.approx(28 * 0.0008, abs=1e-15)
    latency, first = replicas._lone_latencies(c, sample)
    alone = replicas._run(c, sample, traffic, replicas.separate_replicas(c, sample, traffic))
    window = replicas._window(len(sample.unit_gaps))
    assert np.allclose(alone.latency, latency[window], rtol=1e-9)
    assert np.allclose(alone.ttfb, first[window], rtol=1e-9)
    bare = replace(c, front_end=None, floors={})
    assert (latency - replicas._lone_latencies(bare, sample)[0]) == pytest.approx(0.005 + 0.0224, abs=1e-12)


@pytest.mark.parametrize("api_servers", [1, 3])
def test_plans_throughput_bound_is_the_servers_rate_and_holds(api_servers):
    """A 7B model's 16/4 requests on an H100 run far faster than a 5 ms API server passes them:
    the bound is servers / 5 ms, and a saturated replica's simulated completions stay under it."""
    from dlmcost.plan import bounds, replicas

    c, sample, _ = _vllm_candidate(api_servers)
    bound = bounds.throughput_bound(c, sample)
    assert bound == pytest.approx(api_servers / 0.005)
    assert replicas.saturation_rps(c, sample) <= bound * bounds.BOUND_MARGIN


# --- the CLI -------------------------------------------------------------------------------------

def test_serve_queues_a_burst_in_front_of_the_engine(run):
    """serve on vllm: 200 requests at once share its 1 API server of 5 ms and reach the engine
    together at 200 x 5 ms = 1 s, so the burst's makespan is at least that; 4 servers (--api-servers
    4) pass them at 200 x 5 / 4 = 0.25 s. The header says which."""
    import json

    args = ["serve", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--stack", "vllm", "--prompt", "16", "--answer", "4",
            "--job", "200", "--parallel", "200"]
    (rc1, one, _), (rc4, four, _) = run(*args, "-f", "json"), run(*args, "--api-servers", "4", "-f", "json")
    assert rc1 == rc4 == 0
    d1, d4 = json.loads(one)["deployments"][0], json.loads(four)["deployments"][0]
    assert d1["deployment"]["api_servers"] == 1 and d1["deployment"]["api_servers_source"] == "stack"
    assert d4["deployment"]["api_servers"] == 4 and d4["deployment"]["api_servers_source"] == "option"
    assert d1["deployment"]["front_end_us_per_request"] == 5000
    makespan1, makespan4 = d1["points"][0]["makespan_s"], d4["points"][0]["makespan_s"]
    assert 1.0 <= makespan1 < 1.0 + 0.2  # the last request leaves the server at 1 s, then a few passes
    assert 0.25 <= makespan4 < 0.25 + 0.2
    rc, text, _ = run(*args)
    assert "front end: 1 API server, 5 ms a request each (vllm's default, --api-servers to change)" in \
        " ".join(text.split())


def test_a_burst_at_its_bands_slower_end_waits_on_a_slower_server(run):
    """The band's slower end slows every time the prediction has, the API server's too: the burst
    of 200 through one server of 5 ms leaves it at 200 x 5 ms x high, so at most 1 / (5 ms x high)
    requests a second there (the server unscaled would let 1 / 5 ms through), and its requests wait
    at least that long."""
    import json

    rc, out, err = run("serve", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--stack", "vllm", "--prompt", "16", "--answer",
                       "4", "--job", "200", "--parallel", "200", "-f", "json")
    assert rc == 0, err
    d = json.loads(out)["deployments"][0]
    high = d["deployment"]["error_band"]["high"]
    assert high > 1.2  # a slower end far enough from the point for the server's share to show
    point = d["points"][0]
    slow_rps, fast_rps = point["intervals"]["requests_per_s"]
    assert slow_rps <= 1 / (0.005 * high) < point["requests_per_s"] < fast_rps
    assert point["intervals"]["latency_p99_s"][1] >= 200 * 0.005 * high


def test_api_servers_is_checked(run):
    for bad in ("0", "1025"):
        rc, _, err = run("serve", "Qwen/Qwen2.5-7B", "--stack", "vllm", "--api-servers", bad)
        assert rc == 2 and err.startswith("error: --api-servers: API server processes per replica"), err


def test_plan_takes_api_servers_and_names_the_front_end(run, tmp_path):
    """plan on vllm: --api-servers reaches the search (JSON search.api_servers, its source the
    option) and its header names it, and a scenario's search.api_servers too (its source the
    scenario); on sglang, whose front end takes no time a request (only a first-token delay), it
    warns that it does nothing; `dlmcost
    stacks` lists each stack's front end."""
    import json

    args = ["plan", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--tp", "1", "--precision", "bf16", "--rate", "50",
            "--prompt", "128", "--answer", "16", "--requests", "200"]
    rc, out, _ = run(*args, "--stack", "vllm", "--api-servers", "3", "-f", "json")
    search = json.loads(out)["search"]
    assert rc == 0 and search["api_servers"] == {"ar": 3} and search["api_servers_source"] == {"ar": "option"}
    assert search["front_end_us_per_request"] == {"ar": 5000}
    assert search["first_token_delay_us"] == {"ar": 28 * 800}  # Qwen2.5-7B's 28 layers x 0.8 ms
    rc, out, _ = run(*args, "--stack", "vllm")
    assert "front end: 1 API server, 5 ms a request each (vllm's default, --api-servers to change)" in " ".join(out.split())
    scenario = tmp_path / "servers.yaml"
    scenario.write_text("search: {api_servers: 2}\n")
    rc, out, _ = run(*args, "--stack", "vllm", "-s", str(scenario), "-f", "json")
    search = json.loads(out)["search"]
    assert rc == 0 and search["api_servers"] == {"ar": 2} and search["api_servers_source"] == {"ar": "scenario"}
    rc, _, err = run(*args, "--stack", "sglang", "--api-servers", "2")
    assert rc == 0 and "--api-servers does nothing here" in err
    rc, out, _ = run("stacks", "-f", "json")
    fronts = {s["name"]: (s["api_servers"], s["front_end_us_per_request"]) for s in json.loads(out)}
    # sglang's front end: a first-token delay alone, its servers untimed (0 us a request)
    assert fronts["vllm"] == fronts["vllm-dllm"] == (1, 5000) and fronts["sglang"] == (1, 0)
    assert fronts["sglang-dllm"] == (None, None)
    delays = {s["name"]: s["first_token_us_per_layer"] for s in json.loads(out)}
    assert delays["vllm"] == 800 and delays["vllm-dllm"] == 0 and delays["sglang"] == 323
    mla = {s["name"]: s["first_token_us_per_mla_layer"] for s in json.loads(out)}
    assert mla["sglang"] == mla["sglang-pcg"] == 820 and mla["vllm"] is None  # vllm: 800 for every layer
    rc, out, _ = run("stacks", "-f", "csv")  # the table's cell: servers x 5,000 us = 5 ms, + 800 us a layer
    cells = {r["stack"]: r["front end"] for r in csv.DictReader(io.StringIO(out))}
    assert rc == 0 and cells["vllm"] == "1 x 5 ms + 0.8 ms/layer" and cells["vllm-dllm"] == "1 x 5 ms"
    assert cells["sglang"] == "0.323 ms/layer (MLA 0.82)" and cells["sglang-dllm"] == "-"


def test_serve_adds_the_first_token_delay_to_each_first_token_only(run, tmp_path):
    """serve Qwen3-8B (36 layers) on vllm, one request at a time: against the same stack without
    its first_token_us_per_layer, every request's first token comes 36 x 0.8 ms = 28.8 ms later,
    its time between tokens is the same, and, the next request sent when one is answered, the job
    of 4 ends 4 x 28.8 ms later. The header and JSON say so."""
    import json

    from dlmcost.inputs.stacks import bundled_stack_dir

    text = (bundled_stack_dir() / "vllm.yaml").read_text()
    line = "  first_token_us_per_layer: 800"
    assert text.count(line) == 1
    bare = tmp_path / "vllm-nodelay.yaml"
    bare.write_text(text.replace(line, "  first_token_us_per_layer: 0").replace("\nname: vllm\n", "\nname: vllm-nodelay\n"))
    args = ["serve", "Qwen/Qwen3-8B", "--gpu", "h100", "--prompt", "233", "--answer", "16", "--job", "4",
            "--parallel", "1", "-f", "json"]
    (rc1, with_delay, _), (rc2, without, _) = run(*args, "--stack", "vllm"), run(*args, "--stack", str(bare))
    assert rc1 == rc2 == 0
    d, b = json.loads(with_delay)["deployments"][0], json.loads(without)["deployments"][0]
    assert d["deployment"]["first_token_delay_us"] == pytest.approx(28_800) and b["deployment"]["first_token_delay_us"] == 0
    p, q = d["points"][0], b["points"][0]
    assert p["ttfb_s"]["mean"] - q["ttfb_s"]["mean"] == pytest.approx(0.0288, abs=1e-9)
    assert p["ttfb_s"]["p99"] - q["ttfb_s"]["p99"] == pytest.approx(0.0288, abs=1e-9)
    assert p["inter_block_s"]["mean"] == pytest.approx(q["inter_block_s"]["mean"], rel=1e-12)
    assert p["makespan_s"] - q["makespan_s"] == pytest.approx(4 * 0.0288, abs=1e-9)
    rc, out, _ = run(*args[:-2], "--stack", "vllm")
    assert "then 28.8 ms of dispatch before the engine sees it" in " ".join(out.split())


def test_servers_that_take_no_time_pass_each_request_as_sent_and_it_waits_the_delay():
    """A front end known by its first-token delay alone (sglang's: 0 us a request): each request
    leaves the servers as it is sent, a burst together, and reaches the engine the delay later; a
    lone pass of 1 s after a 0.25 s delay: 1.25 s, and ten sent at once all at 0.25 s + one pass of ten."""
    assert shared_departures([0.0, 0.0, 0.3, 2.0], 1, 0.0) == [0.0, 0.0, 0.3, 2.0]
    table = ClassTable([1], [1], [0.0], [[0.0] + [1.0] * 16], None)
    r = simulate(table, np.zeros(1, int), 16, arrivals_s=np.zeros(1), front_end=FrontEnd(1, 0.0, 0.25))
    assert r.latency_s.tolist() == pytest.approx([1.25], abs=1e-12)
    r = simulate(table, np.zeros(10, int), 16, arrivals_s=np.zeros(10), front_end=FrontEnd(1, 0.0, 0.25))
    assert r.latency_s.tolist() == pytest.approx([1.25] * 10, abs=1e-12)


def test_a_latent_attention_layer_waits_its_own_delay():
    """first_token_us_per_mla_layer takes first_token_us_per_layer's place for a model's MLA layers
    (by hand: 61 MLA layers x 820 us = 50.02 ms; 36 other layers x 323 us = 11.628 ms; a mix of 10 and
    2 MLA layers: 8 x 323 + 2 x 820 us); unset, every layer waits first_token_us_per_layer."""
    from dlmcost.inputs.stacks import FrontEndCost
    from dlmcost.serving.behaviour import first_token_delay_s

    split = FrontEndCost(us_per_request=0.0, first_token_us_per_layer=323.0, first_token_us_per_mla_layer=820.0)
    assert first_token_delay_s(split, 61, 61) == pytest.approx(61 * 820e-6, rel=1e-12)
    assert first_token_delay_s(split, 36) == pytest.approx(36 * 323e-6, rel=1e-12)
    assert first_token_delay_s(split, 10, 2) == pytest.approx((8 * 323 + 2 * 820) * 1e-6, rel=1e-12)
    one = FrontEndCost(us_per_request=5000.0, first_token_us_per_layer=800.0)
    assert first_token_delay_s(one, 61, 61) == first_token_delay_s(one, 61) == pytest.approx(61 * 800e-6, rel=1e-12)


@pytest.mark.parametrize("model, layers, per_layer_us, shown", [("deepseek-ai/DeepSeek-V3", 61, 820, "50 ms"),
                                                                  ("Qwen/Qwen3-8B", 36, 323, "11.6 ms")])
def test_serve_names_the_delay_of_the_models_attention(run, model, layers, per_layer_us, shown):
    """sglang's first-token delay per layer: DeepSeek-V3's 61 latent-attention layers 820 us each
    (50.0 ms), Qwen3-8B's 36 grouped-query ones 323 us (11.6 ms), in serve's header and its JSON."""
    import json

    args = ("serve", model, "--gpu", "h200", "--tp", "8", "--precision", "fp8", "--stack", "sglang", "--prompt", "256", "--answer", "8",
            "--job", "1", "--parallel", "1")
    rc, out, err = run(*args, "-f", "json")
    assert rc == 0, err
    dep = json.loads(out)["deployments"][0]["deployment"]
    assert dep["first_token_delay_us"] == pytest.approx(layers * per_layer_us, rel=1e-12)
    rc, out, err = run(*args)
    assert rc == 0 and f"front end: {shown} of dispatch" in " ".join(out.split())


def test_plan_waits_the_latent_attention_delay_in_its_header_and_its_candidates(run, tmp_path):
    """plan on DeepSeek-V3 (61 MLA layers) at a light load, sglang against the same stack with no MLA
    delay: the search names 61 x 820 us = 50.02 ms against 0, and every request's first block and
    latency come that much later (no request waits for another at 0.05 req/s)."""
    import json

    bare = tmp_path / "sglang-no-mla-delay.yaml"
    bare.write_text("extends: sglang\nname: sglang-no-mla-delay\nfront_end:\n  first_token_us_per_mla_layer: 0\n")
    found = {}
    for stack in ("sglang", str(bare)):
        rc, out, err = run("plan", "deepseek-ai/DeepSeek-V3", "--gpu", "h200", "--tp", "8", "--precision", "fp8",
                           "--rate", "0.05", "--requests", "100", "--prompt", "256", "--answer", "16",
                           "--price", "h200=3", "--stack", stack, "-f", "json")
        assert rc == 0, err
        found[stack] = json.loads(out)
    delayed, undelayed = found["sglang"], found[str(bare)]
    assert delayed["search"]["first_token_delay_us"] == {"ar": pytest.approx(61 * 820, rel=1e-12)}
    assert undelayed["search"]["first_token_delay_us"] == {"ar": 0}
    a, b = delayed["deployments"][0], undelayed["deployments"][0]
    for key in ("p95_first_block_s", "p50_latency_s"):
        assert a[key] - b[key] == pytest.approx(61 * 820e-6, rel=1e-6), key
