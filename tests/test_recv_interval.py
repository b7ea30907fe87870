"""The scheduler's receive interval (SGLang's --scheduler-recv-interval R; serving/simulate/receiving.py):
arrivals are taken in at the boundary after a prefill, at once by an idle server, else every R-th
boundary since the last receive. Schedules worked by hand, each in the one-kind loop (one class)
and the general one (two alike classes)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from dlmcost.serving.simulate import ClassTable, RequestPasses, simulate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay import replay  # noqa: E402  (the brute-force reference simulation, tests/replay.py)

FLAT = [0.0, 1.0, 1.0, 1.0]  # an iteration of 1 to 3 requests takes 1 s, a prefill's too


def _table(classes: int, nfe: int = 10) -> ClassTable:
    """NFE passes, the first token after the first (the prefill), no memory limit."""
    return ClassTable([nfe] * classes, [1] * classes, [0.0] * classes, [FLAT] * classes)


def _run(classes: int, arrivals: list[float], interval: int, cap: int = 3, nfe: int = 10):
    return simulate(_table(classes, nfe), np.arange(len(arrivals)) % classes, cap,
                    arrivals_s=np.array(arrivals), recv_interval=interval)


def _assert_schedule(r, start: list[float], first: list[float], done: list[float]) -> None:
    """Each request's admission, first token and completion, as worked by hand."""
    assert r.start_s.tolist() == pytest.approx(start)
    assert r.first_block_s.tolist() == pytest.approx(first)
    assert r.done_s.tolist() == pytest.approx(done)


LOOPS = pytest.mark.parametrize("classes", [1, 2])  # one class: the in-order loop; two alike: the general one


@LOOPS
def test_an_arrival_during_decodes_waits_for_the_rth_boundary(classes):
    """R = 4. Request 0 at 0: the idle server takes it at once, iteration 0 (0-1 s) its prefill.
    Boundary 1 (t = 1) follows a prefill: it receives (nothing), the counter restarts. Request 1
    arrives at 2.5, during decodes: boundaries 2, 3, 4 count 1, 2, 3, boundary 5 (t = 5) reaches 4
    and receives it. Its first token at 6 (TTFT 3.5 s; with R = 1 it joins at 3, first token 4),
    done after 10 passes at 15 (13); request 0 done at 10 either way."""
    r = _run(classes, [0.0, 2.5], 4)
    assert r.start_s.tolist() == pytest.approx([0.0, 5.0])
    assert r.first_block_s.tolist() == pytest.approx([1.0, 6.0])
    assert r.done_s.tolist() == pytest.approx([10.0, 15.0])
    once = _run(classes, [0.0, 2.5], 1)
    assert once.first_block_s.tolist() == pytest.approx([1.0, 4.0])
    assert once.done_s.tolist() == pytest.approx([10.0, 13.0])


@LOOPS
def test_arrivals_received_together_are_admitted_together(classes):
    """R = 4, request 0 at 0 as above; requests 1 and 2 at 1.5 and 4.5 are both received at
    boundary 5 (t = 5) and join in one prefill iteration (5-6 s): first tokens at 6, done at 15."""
    r = _run(classes, [0.0, 1.5, 4.5], 4)
    assert r.start_s.tolist() == pytest.approx([0.0, 5.0, 5.0])
    assert r.first_block_s.tolist() == pytest.approx([1.0, 6.0, 6.0])
    assert r.done_s.tolist() == pytest.approx([10.0, 15.0, 15.0])


@LOOPS
def test_after_a_prefill_an_arrival_is_taken_at_once(classes):
    """R = 4: request 1 at 0.5 arrives during request 0's prefill iteration (0-1 s), so boundary 1
    receives it as R = 1 would: it joins at 1, first token at 2. Request 2 at 1.5 arrives during
    request 1's prefill (1-2 s): boundary 2 receives it, first token at 3."""
    r = _run(classes, [0.0, 0.5, 1.5], 4)
    assert r.start_s.tolist() == pytest.approx([0.0, 1.0, 2.0])
    assert r.first_block_s.tolist() == pytest.approx([1.0, 2.0, 3.0])


@LOOPS
def test_an_idle_server_takes_an_arrival_at_once(classes):
    """R = 30, NFE 2: request 0 at 0 runs 0-2 s and leaves the server idle; request 1 at 3.7 is
    taken at once (its loop spins), first token at 4.7, done at 5.7."""
    r = _run(classes, [0.0, 3.7], 30, nfe=2)
    assert r.start_s.tolist() == pytest.approx([0.0, 3.7])
    assert r.first_block_s.tolist() == pytest.approx([1.0, 4.7])
    assert r.done_s.tolist() == pytest.approx([2.0, 5.7])


@LOOPS
def test_a_request_received_while_the_batch_is_full_waits_in_the_queue(classes):
    """R = 4, at most 2 running. Requests 0 and 1 at 0 fill the batch (prefill 0-1 s, done at 10).
    Boundary 1 receives (after the prefill); boundary 5 (t = 5) receives request 2 (at 2.5), which
    waits, the batch full; boundary 9 (t = 9) receives nothing; request 3 arrives at 9.5. At
    boundary 10 both finish, but the server is not idle (request 2 waits) and the counter is 1: it
    admits request 2 alone (first token 11, done 20) without receiving; boundary 11 follows that
    prefill and receives request 3 (first token 12, done 21). With R = 1 both would join at 10."""
    r = _run(classes, [0.0, 0.0, 2.5, 9.5], 4, cap=2)
    _assert_schedule(r, [0.0, 0.0, 10.0, 11.0], [1.0, 1.0, 11.0, 12.0], [10.0, 10.0, 20.0, 21.0])
    once = _run(classes, [0.0, 0.0, 2.5, 9.5], 1, cap=2)
    assert once.start_s.tolist() == pytest.approx([0.0, 0.0, 10.0, 10.0])


@LOOPS
def test_a_boundary_the_loop_jumped_over_received_up_to_its_own_time(classes):
    """R = 4, at most 2 running, requests 0 and 1 at 0 (done at 10): the loop jumps from boundary 1
    to the completions at 10 over the receiving boundaries 5 and 9. Request 2 arrives at 9.0, on
    boundary 9's time: boundary 9 received it. At boundary 10 the batch is empty but request 2 was
    received and waits, so the server is not idle: it admits request 2 alone without receiving;
    request 3 (9.5) is received at boundary 11, after that prefill (start 11, first token 12,
    done 21). With a queued request 2 (at 0) and request 3 at 8.5, boundary 9 received request 3:
    both join at 10."""
    r = _run(classes, [0.0, 0.0, 9.0, 9.5], 4, cap=2)
    _assert_schedule(r, [0.0, 0.0, 10.0, 11.0], [1.0, 1.0, 11.0, 12.0], [10.0, 10.0, 20.0, 21.0])
    queued = _run(classes, [0.0, 0.0, 0.0, 8.5], 4, cap=2)
    assert queued.start_s.tolist() == pytest.approx([0.0, 0.0, 10.0, 10.0])


@pytest.mark.parametrize("interval", [2, 3, 5])
@pytest.mark.parametrize("prefills", [False, True])
def test_the_first_receiving_boundary_at_or_after_a_boundary(interval, prefills):
    """Receiver.first_at_or_after, against the rule enumerated: after boundary `it` (the coming
    iteration prefills or not) the receiving boundaries are it + 1 (after a prefill) or the due
    one, then every R-th; the answer is the first of them at or after k. The loop jumps there, so
    an earlier answer only slows it and a later one skips a receive."""
    from dlmcost.serving.simulate.receiving import Receiver

    recv = Receiver(interval)
    recv.seen(0, 0.0, False, 0.0)  # boundary 0 receives: the next one due at R
    for it in range(interval):
        first = it + 1 if prefills else interval
        receiving = range(first, first + 10 * interval, interval)
        for k in range(it + 1, it + 4 * interval):
            assert recv.first_at_or_after(it, k, prefills) == next(b for b in receiving if b >= k)


def test_an_interval_of_one_changes_nothing():
    """R = 1 (the default) is today's schedule to the last bit, in both loops, open and closed."""
    rng = np.random.default_rng(3)
    arrivals = np.sort(rng.uniform(0, 40, 60))
    for classes in (1, 2):
        table, cls = _table(classes, 7), np.arange(60) % classes
        for load in (dict(arrivals_s=arrivals), dict(users=5, think_s=0.3)):
            a, b = simulate(table, cls, 3, **load), simulate(table, cls, 3, recv_interval=1, **load)
            assert a.done_s.tolist() == b.done_s.tolist() and a.first_block_s.tolist() == b.first_block_s.tolist()


def test_both_loops_agree_under_an_interval():
    """The one-kind loop and the general one give one schedule under R = 7, open and closed loop
    (two alike classes send the same requests through the general loop)."""
    rng = np.random.default_rng(5)
    arrivals = np.sort(rng.uniform(0, 400, 80))  # below capacity: arrivals meet a running batch
    every = simulate(_table(1, 9), np.zeros(80, int), 3, arrivals_s=arrivals)
    for load in (dict(arrivals_s=arrivals), dict(users=2, think_s=2.3)):
        one = simulate(_table(1, 9), np.zeros(80, int), 3, recv_interval=7, **load)
        two = simulate(_table(2, 9), np.arange(80) % 2, 3, recv_interval=7, **load)
        assert one.done_s == pytest.approx(two.done_s) and one.first_block_s == pytest.approx(two.first_block_s)
        assert one.start_s == pytest.approx(two.start_s)
        if "arrivals_s" in load:  # the interval did change this schedule
            assert one.start_s != pytest.approx(every.start_s)


def test_synchronous_release_is_refused():
    """A synchronous batch serves diffusion decodings, which SGLang receives for at every boundary."""
    with pytest.raises(ValueError, match="first-done release only"):
        simulate(_table(1), np.zeros(2, int), 2, arrivals_s=np.zeros(2), release="synchronous",
                 passes=RequestPasses.from_rows([1, 1], [[2], [2]]), recv_interval=4)


def test_a_prompt_s_pieces_under_a_budget_each_let_the_next_boundary_receive():
    """R = 4, a budget of 1,000 prompt tokens a step, 3,000-token prompts (NFE 10 + 2: three
    prefill pieces, the first token after the third). Request 0 at 0: pieces in iterations 0-2,
    first token at 3; boundaries 1, 2, 3 each follow a prefill and receive. Request 1 at 4.5: the
    counter restarted at 3, boundaries 4, 5, 6 count, boundary 7 (t = 7) receives it; its pieces
    run 7-10, first token at 10 (R = 1: joins at 5, first token at 8)."""
    from dlmcost.serving import behaviour

    table = behaviour.prompt_in_token_chunks(ClassTable([10], [1], [0.0], [FLAT], lead=[1]), [3000], 1000)
    runs = {r: simulate(table, np.zeros(2, int), 3, arrivals_s=np.array([0.0, 4.5]), recv_interval=r) for r in (1, 4)}
    assert runs[4].start_s.tolist() == pytest.approx([0.0, 7.0])
    assert runs[4].first_block_s.tolist() == pytest.approx([3.0, 10.0])
    assert runs[1].first_block_s.tolist() == pytest.approx([3.0, 8.0])


# --- the CLI -------------------------------------------------------------------------------------

SERVE = ["serve", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--scheme", "ar", "--prompt", "64", "--answer", "32",
         "--rate", "20", "--requests", "200"]


@pytest.mark.usefixtures("bundled_offline")
def test_serve_takes_the_interval_and_one_is_the_default(run):
    """--recv-interval 1 is the run without it to the last digit; 30 (InferenceX's DeepSeek-R1 SGLang
    launch at 16 and more in flight) is recorded with its source, named in the header, and makes
    arrivals wait for a receive: the median time to the first token grows."""
    import json

    (rc0, plain, _), (rc1, one, _), (rc30, thirty, _) = (
        run(*SERVE, "-f", "json"), run(*SERVE, "--recv-interval", "1", "-f", "json"),
        run(*SERVE, "--recv-interval", "30", "-f", "json"))
    assert rc0 == rc1 == rc30 == 0
    d0, d1, d30 = (json.loads(x)["deployments"][0] for x in (plain, one, thirty))
    assert d0["points"] == d1["points"]
    assert (d0["deployment"]["recv_interval"], d0["deployment"]["recv_interval_source"]) == (1, "default")
    assert (d30["deployment"]["recv_interval"], d30["deployment"]["recv_interval_source"]) == (30, "option")
    assert d30["points"][0]["ttfb_s"]["median"] > d0["points"][0]["ttfb_s"]["median"]
    rc, text, _ = run(*SERVE, "--recv-interval", "30")
    assert "new requests taken in every 30 decode iterations, at once after a prefill or when idle" in " ".join(text.split())


@pytest.mark.usefixtures("bundled_offline")
def test_a_diffusion_decoding_receives_every_iteration(run):
    """SGLang's dLLM batches weigh as prefills: the interval does nothing there, and says so."""
    import json

    rc, out, err = run("serve", "GSAI-ML/LLaDA-8B-Instruct", "--gpu", "h100", "--rate", "1", "--requests", "100",
                       "--recv-interval", "5", "-f", "json")
    assert rc == 0 and "warning: --recv-interval does nothing here" in err
    d = json.loads(out)["deployments"][0]["deployment"]
    assert (d["recv_interval"], d["recv_interval_source"]) == (1, "diffusion decoding")


@pytest.mark.usefixtures("bundled_offline")
def test_a_stack_whose_scheduler_has_no_interval_receives_every_iteration(run):
    """vLLM has no --scheduler-recv-interval (its engine takes in its queue every step): the interval
    was simulated there as SGLang's, a wrong answer without a word. Now the run is the one without
    it to the last digit, recorded so, with a warning; sglang's file declares it, vllm's does not."""
    import json

    from dlmcost.inputs.stacks import load_stack

    assert load_stack("sglang").scheduler_recv_interval and not load_stack("vllm").scheduler_recv_interval
    (rc0, plain, _), (rc30, thirty, err) = (run(*SERVE, "--stack", "vllm", "-f", "json"),
                                            run(*SERVE, "--stack", "vllm", "--recv-interval", "30", "-f", "json"))
    assert rc0 == rc30 == 0
    d0, d30 = (json.loads(x)["deployments"][0] for x in (plain, thirty))
    assert d0["points"] == d30["points"]
    assert (d30["deployment"]["recv_interval"], d30["deployment"]["recv_interval_source"]) == (1, "stack without one")
    assert err.startswith("warning: --recv-interval does nothing here: the stack's scheduler has no receive interval")


@pytest.mark.parametrize("bad", ["0", "-3", "x", "1001"])
def test_a_bad_interval_is_one_error_line(run, bad):
    rc, out, err = run(*SERVE, f"--recv-interval={bad}")
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    assert "--recv-interval" in err


# --- plan: one interval for every candidate -------------------------------------------------------

def test_a_plan_candidate_is_simulated_with_its_interval():
    """A plan candidate's replica is served with its receive interval: the engine of 1 s iterations
    above, R = 4, request 0 at 0 and request 1 at 2.5 s: request 1 is received at boundary 5 (its
    first token at 6 s, not 4 s), as the simulation's own schedule worked above; R = 1, at 3 s."""
    from dlmcost.inputs.hardware import HardwareDB
    from dlmcost.plan import replicas
    from dlmcost.serving.steptime import Decoding

    def candidate(interval):
        return replicas.Candidate(HardwareDB.load(None).get("h100"), "bf16", 1, Decoding("ar", None, 1.0), 3,
                                  _table(1), np.ones(1), 3, recv_interval=interval)

    arrivals = np.array([0.0, 2.5])
    for interval, starts, firsts in ((4, [0.0, 5.0], [1.0, 6.0]), (1, [0.0, 3.0], [1.0, 4.0])):
        r = replicas._serve(candidate(interval), np.zeros(2, int), arrivals_s=arrivals)
        assert r.start_s.tolist() == pytest.approx(starts)
        assert r.first_block_s.tolist() == pytest.approx(firsts)


@pytest.mark.usefixtures("bundled_offline")
def test_plan_s_candidates_take_the_interval_where_they_stream_tokens():
    """The search space's interval is an autoregressive candidate's; a diffusion decoding's
    candidate receives every iteration (SGLang's dLLM passes weigh as prefills)."""
    from dlmcost.inputs.hardware import HardwareDB
    from dlmcost.inputs.models import resolve_model
    from dlmcost.plan import search
    from dlmcost.serving.steptime import Decoding
    from dlmcost.serving.traffic import Traffic, parse_lengths, sample_requests

    sample = sample_requests(Traffic(parse_lengths(16, "p"), parse_lengths(32, "a"), rate=1.0), 50, 0)
    for model, decoding, taken in (("Qwen/Qwen2.5-7B", Decoding("ar", None, 1.0), 7),
                                   ("GSAI-ML/LLaDA-8B-Instruct", Decoding("mdm", 32, 2.0), 1)):
        space = search.SearchSpace([HardwareDB.load(None).get("h100")], [1], ["bf16"], [decoding], [16],
                                   recv_interval=7)
        (c,), _ = search._candidates(resolve_model(model), space, decoding, sample, "realistic", None, None)
        assert c.recv_interval == taken


PLAN = ["plan", "Qwen/Qwen2.5-7B", "--rate", "2", "--gpu", "h100", "--tp", "1", "--precision", "bf16", "--scheme", "ar",
        "--stack", "sglang", "--prompt", "256", "--answer", "256", "--max-batch", "64", "--requests", "100"]


@pytest.fixture
def simulated_intervals(monkeypatch) -> list:
    """The receive interval of every replica simulation plan runs, in order."""
    from dlmcost.serving import behaviour

    seen, real = [], behaviour.run

    def spied(*args, recv_interval=1, **kwargs):
        seen.append(recv_interval)
        return real(*args, recv_interval=recv_interval, **kwargs)

    monkeypatch.setattr(behaviour, "run", spied)
    return seen


@pytest.mark.usefixtures("bundled_offline")
def test_plan_takes_the_interval_and_one_is_the_default(run, simulated_intervals, tmp_path):
    """`plan --recv-interval 1` is the plan without it to the last digit; 10 (by option or the
    scenario's search.recv_interval) reaches every simulation of the autoregressive candidate, is
    recorded, named in the search line, and delays the first tokens of arrivals during decodes."""
    import json

    def plan(*given):
        simulated_intervals.clear()
        rc, out, err = run(*PLAN, *given, "-f", "json")
        assert rc == 0, err
        return json.loads(out), set(simulated_intervals)

    (plain, plain_runs), (one, _) = plan(), plan("--recv-interval", "1")
    assert plain["deployments"] == one["deployments"] and plain_runs == {1}
    assert plain["search"]["recv_interval"] == one["search"]["recv_interval"] == 1
    # where it came from: nothing given is the default, 1 given is the option (it had said 'option' for both)
    assert plain["search"]["recv_interval_source"] == {"ar": "default"}
    assert one["search"]["recv_interval_source"] == {"ar": "option"}
    scenario = tmp_path / "s.yaml"
    scenario.write_text("search: {recv_interval: 10}\n")
    ten, ten_runs = plan("--scenario", scenario)
    assert ten["search"]["recv_interval"] == 10 and ten_runs == {10}
    assert ten["deployments"][0]["p95_first_block_s"] > plain["deployments"][0]["p95_first_block_s"]
    rc, text, err = run(*PLAN, "--recv-interval", "10")
    words = " ".join(text.split())
    assert rc == 0 and "90% of memory; new requests taken in every 10 decode iterations, at once after a prefill " \
                       "or when idle (--recv-interval); 100 simulated requests" in words, err
    assert "new requests taken in" not in " ".join(run(*PLAN)[1].split())


@pytest.mark.usefixtures("bundled_offline")
def test_plan_s_interval_where_only_diffusion_decodings_run_warns(run):
    rc, out, err = run("plan", "GSAI-ML/LLaDA-8B-Instruct", "--rate", "1", "--gpu", "h100", "--tp", "1",
                       "--precision", "bf16", "--requests", "100", "--recv-interval", "5", "-f", "json")
    assert rc == 0 and "warning: --recv-interval does nothing here" in err


@pytest.mark.usefixtures("bundled_offline")
def test_plan_on_a_stack_without_a_receive_interval_neither_runs_nor_names_it(run, simulated_intervals):
    """vLLM's engine takes in its queue every step: `plan --stack vllm --recv-interval 10` simulates every
    candidate at 1 (the plan without the option to the last digit), records the decoding's interval as 1 from
    'stack without one', leaves the search line without it, and says why on stderr (it had named the
    interval in the header and warned about diffusion decodings)."""
    import json

    vllm = [*PLAN[:PLAN.index("--stack")], "--stack", "vllm", *PLAN[PLAN.index("--stack") + 2:]]
    rc, out, err = run(*vllm, "--recv-interval", "10", "-f", "json")
    assert rc == 0 and set(simulated_intervals) == {1}
    given = json.loads(out)
    assert given["search"]["recv_intervals"] == {"ar": 1}
    assert given["search"]["recv_interval_source"] == {"ar": "stack without one"}
    assert given["deployments"] == json.loads(run(*vllm, "-f", "json")[1])["deployments"]
    assert "warning: --recv-interval does nothing here: the stack's scheduler has no receive interval" in err
    rc, text, _ = run(*vllm, "--recv-interval", "10")
    assert rc == 0 and "new requests taken in" not in " ".join(text.split())


@pytest.mark.usefixtures("bundled_offline")
def test_plan_s_bounds_hold_under_an_interval():
    """An interval only delays admissions: the lone floor is still the simulation of each request
    alone (an idle server receives at once), and the throughput bound is still above the
    saturated replica's completions, so the pruning that rests on them stays exact."""
    from dlmcost.inputs.hardware import HardwareDB
    from dlmcost.inputs.models import resolve_model
    from dlmcost.plan import bounds, replicas, search
    from dlmcost.serving.steptime import Decoding
    from dlmcost.serving.traffic import Traffic, parse_lengths, sample_requests

    traffic = Traffic(parse_lengths(64, "p"), parse_lengths(32, "a"), rate=5.0)
    sample = sample_requests(traffic, 200, 0)
    decoding = Decoding("ar", None, 1.0)
    space = search.SearchSpace([HardwareDB.load(None).get("h100")], [1], ["bf16"], [decoding], [64], recv_interval=10)
    (c,), _ = search._candidates(resolve_model("Qwen/Qwen2.5-7B"), space, decoding, sample, "realistic", "sglang", None)
    assert c.recv_interval == 10
    latency, first = replicas._lone_latencies(c, sample)
    alone = replicas._run(c, sample, traffic, replicas.separate_replicas(c, sample, traffic))
    window = replicas._window(len(sample.unit_gaps))
    assert np.allclose(alone.latency, latency[window], rtol=1e-9)
    assert np.allclose(alone.ttfb, first[window], rtol=1e-9)
    assert bounds.throughput_bound(c, sample) >= replicas.saturation_rps(c, sample)



@pytest.mark.parametrize("interval", [2, 3, 7])
@pytest.mark.parametrize("loop", ["open", "closed"])
@LOOPS
def test_random_loads_against_a_brute_force_replay(classes, loop, interval):
    """Random arrivals (or 4 users thinking 0.2 s), batch limit 3, prefills dearer than the other passes and
    growing with the batch: the event-driven loops, which jump over runs of equal iterations, give the
    iteration-by-iteration replay's first tokens and completions at every receive interval."""
    rng = np.random.default_rng(interval * 10 + classes)
    cap = 3
    nfe, first_passes = [6, 9][:classes], [1, 2][:classes]
    first = [[0.0] + [0.7 + 0.1 * b for b in range(1, cap + 1)], [0.0] + [1.3 + 0.2 * b for b in range(1, cap + 1)]][:classes]
    steady = [[0.0] + [0.1 + 0.05 * b for b in range(1, cap + 1)], [0.0] + [0.2 + 0.02 * b for b in range(1, cap + 1)]][:classes]
    table = ClassTable(nfe, first_passes, [0.0] * classes, steady, first)
    n = 120
    cls = rng.integers(0, classes, n)
    if loop == "open":
        arrivals = np.cumsum(rng.exponential(0.5, n))
        r = simulate(table, cls, cap, arrivals_s=arrivals, recv_interval=interval)
        done, ttfb = replay(nfe, first_passes, first, steady, cls, cap, arrivals=arrivals, interval=interval)
    else:
        r = simulate(table, cls, cap, users=4, think_s=0.2, recv_interval=interval)
        done, ttfb = replay(nfe, first_passes, first, steady, cls, cap, users=4, think_s=0.2, interval=interval)
    assert r.done_s.tolist() == pytest.approx(done)
    assert r.first_block_s.tolist() == pytest.approx(ttfb)
