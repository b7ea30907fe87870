"""Edges of the step-time tables, a deployment's capacity and the request tables that no other
test pinned (a mutation-testing survey of serving/steptime.py, serving/deployment/capacity.py and
serving/simulate/tables.py): each expected number is worked by hand from the formula in the
docstring or docs/plan.md, never read back from the code under test."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from dlmcost.serving import deployment as dep
from dlmcost.serving.deployment import capacity
from dlmcost.serving.simulate import ClassTable, RequestPasses, token_passes
from dlmcost.serving.targets import Targets
from dlmcost.serving.traffic import MIN_RATE

MISS = dict(target="p95_latency_s", value=12.5, limit=10.0)


def _point(served: float = 0.0, overloaded: bool = False, misses=()) -> dep.Point:
    return dep.Point("", None, None, 1, 0, 0, 0, 0, served, {}, {}, {}, 0, 0, None, None,
                     overloaded=overloaded, misses=list(misses))


@pytest.fixture
def fake_evaluate(monkeypatch):
    """max_rate's loads measured by a rule instead of a simulation: `rule(rate)` gives the Point a
    rate gets; every call's load and keywords are kept in `calls`."""
    calls, box = [], {}

    def evaluate(prep, load, **kw):
        calls.append((load, kw))
        return box["rule"](load.rate)

    def saturation(prep, *, requests, seed):
        calls.append(("saturation", dict(requests=requests, seed=seed)))
        return dict(rate=1.0)

    monkeypatch.setattr(capacity, "evaluate", evaluate)
    monkeypatch.setattr(capacity, "saturation", saturation)
    return calls, box


def test_max_rate_bisects_to_the_last_dyadic_rate_within_the_targets(fake_evaluate):
    """Rates up to 0.3 of a saturation of 1 req/s meet the targets: 14 halvings of (0, 1] end at the
    largest multiple of 2^-14 not above 0.3, floor(0.3 x 16384) / 16384 = 4915 / 16384 (0.29999...),
    a resolution of 1 / 16384, and no reason (a rate was found). The saturation given (`top`) is
    not simulated again; every load is an open loop of the arrival and cv asked for, and every
    evaluation gets the requests, seed and targets asked for."""
    calls, box = fake_evaluate
    box["rule"] = lambda rate: _point(served=rate, misses=[] if rate <= 0.3 else [MISS])
    targets = Targets(p95_latency_s=10.0)
    m = capacity.max_rate(None, targets, arrival="gamma", cv=2.5, requests=123, seed=7, top=1.0)
    assert m["rate"] == 4915 / 16384
    assert m["saturation_rate"] == 1.0 and m["bisection_steps"] == 14
    assert m["resolution_rps"] == 1 / 16384 and m["reason"] is None and m["arrival"] == "gamma"
    assert len(calls) == 1 + 14  # the top, then 14 halvings; no saturation run
    for load, kw in calls:
        assert (load.arrival, load.cv) == ("gamma", 2.5)
        assert kw == dict(requests=123, seed=7, targets=targets)


def test_max_rate_without_a_top_simulates_the_saturation_with_its_requests_and_seed(fake_evaluate):
    """No `top`: the saturation is measured first, with the same requests and seed (a seed the
    user gave changes every draw); every rate meets, so the answer is that saturation, 1 req/s."""
    calls, box = fake_evaluate
    box["rule"] = lambda rate: _point(served=rate)
    m = capacity.max_rate(None, Targets(), requests=321, seed=5)
    assert calls[0] == ("saturation", dict(requests=321, seed=5)) and m["rate"] == 1.0
    calls.clear()
    assert capacity.saturation_rate(None) == 1.0
    assert calls == [("saturation", dict(requests=dep.measure.DEFAULT_REQUESTS, seed=0))]


def test_max_rate_that_no_rate_meets_says_why_at_the_lowest_rate_tried(fake_evaluate):
    """Every rate misses the p95 and is overloaded: the 14 halvings of (0, 1] reach 2^-14 =
    6.104e-05 req/s (above the lowest rate simulated, 1e-6), the answer is none (not 0) and its
    reason the last rate tried, every miss and the overload joined by '; ' (capacity.why_not, the
    miss as targets.Miss.describe prints it): 'p95_latency_s 12.5 > 10'."""
    calls, box = fake_evaluate
    box["rule"] = lambda rate: _point(served=0.5 * rate, overloaded=True, misses=[MISS])
    targets = Targets(p95_latency_s=10.0)
    m = capacity.max_rate(None, targets, requests=77, seed=3, top=1.0)
    assert m["rate"] is None and m["bisection_steps"] == 14
    assert m["reason"] == ("at 6.104e-05 req/s: p95_latency_s 12.5 > 10; served 3.052e-05 req/s, "
                           "under 95% of its arrivals (queues grow)")
    assert calls[-1][0].rate == 2.0 ** -14  # the reason's rate is the one measured, as every other
    assert all(kw == dict(requests=77, seed=3, targets=targets) for _, kw in calls)


def test_max_rate_that_halves_below_the_lowest_rate_stops_there_and_says_why(fake_evaluate):
    """A saturation of 1e-5 req/s that no rate meets: halvings 5e-6, 2.5e-6, 1.25e-6, then 6.25e-7
    is under the lowest rate simulated (1e-6) and not tried: none, for the last rate tried, 1.25e-6."""
    calls, box = fake_evaluate
    box["rule"] = lambda rate: _point(served=rate, misses=[MISS])
    m = capacity.max_rate(None, Targets(p95_latency_s=10.0), top=1e-5)
    assert [load.rate for load, _ in calls] == [1e-5, 5e-6, 2.5e-6, 1.25e-6, 1.25e-6]
    assert m["rate"] is None and m["reason"] == "at 1.25e-06 req/s: p95_latency_s 12.5 > 10"


def test_max_rate_stops_halving_below_the_lowest_rate_and_tries_it_exactly():
    """A saturation of exactly 2e-6 req/s: the first halving is 1e-6, the lowest rate simulated,
    which is tried (only a rate under it is not); rates up to 0.8 of the saturation meet, so the
    answer is floor(0.8 x 16384) / 16384 of it = 13107 / 16384 x 2e-6."""
    tried = []

    def evaluate(prep, load, **kw):
        tried.append(load.rate)
        return _point(served=load.rate, misses=[] if load.rate <= 0.8 * 2e-6 else [MISS])

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(capacity, "evaluate", evaluate)
        m = capacity.max_rate(None, Targets(p95_latency_s=10.0), top=2e-6)
    assert tried[1] == MIN_RATE
    assert m["rate"] == pytest.approx(13107 / 16384 * 2e-6, rel=1e-12)


def test_max_rate_at_the_lowest_rate_is_simulated_and_under_it_is_not(fake_evaluate):
    """A saturation of exactly the lowest rate simulated (1e-6 req/s) is tried, and met, it is the
    answer; one of 5e-7 is under the range: none, no bisection, a resolution of the saturation
    itself and the reason docs/plan.md gives ('a bisection that reaches its bottom')."""
    calls, box = fake_evaluate
    box["rule"] = lambda rate: _point(served=rate)
    assert capacity.max_rate(None, Targets(), top=MIN_RATE)["rate"] == MIN_RATE
    calls.clear()
    targets = Targets(p95_latency_s=3.0)
    m = capacity.max_rate(None, targets, arrival="gamma", top=5e-7)
    assert calls == []
    assert m == dict(rate=None, saturation_rate=5e-7, targets=targets.as_dict(), arrival="gamma",
                     bisection_steps=0, resolution_rps=5e-7,
                     reason="it saturates at 5e-07 req/s, under the lowest rate simulated (1e-06 req/s)")


def test_a_deployment_s_words_name_its_expert_parallel_size_from_two():
    """serve's header names EP only where it is above 1: 'EP2' for two experts' GPUs, nothing for 1."""
    def prep(ep):
        setup = SimpleNamespace(ep=ep, tp=2, precision="fp8", kv_dtype="bf16")
        return SimpleNamespace(setup=setup, model="M", gpu_name="H100 SXM",
                               decoding=SimpleNamespace(label="block/32/2"), max_running=64)

    assert capacity.deployment_words(prep(2)) == "M on H100 SXM TP2 EP2 fp8 K/V bf16, block/32/2, running <= 64"
    assert capacity.deployment_words(prep(1)) == "M on H100 SXM TP2 fp8 K/V bf16, block/32/2, running <= 64"


def test_a_prefill_step_of_classes_with_their_own_rows_is_the_largest_and_none_adds_nothing():
    """Classes whose prefill dispatch rows differ (no common row): an iteration that prefills
    classes 0 and 1 at b = 1 adds the larger, 3 s; one that prefills none adds 0."""
    t = ClassTable([2, 2], [1, 1], [0.0, 0.0], [[0.0, 1.0]] * 2, lead=[1, 1],
                   prefill_step_s=[[0.0, 2.0], [0.0, 3.0]])
    assert t.common_prefill_step is None
    assert t.prefill_step([0, 1], 1) == 3.0 and t.prefill_step([0], 1) == 2.0
    assert t.prefill_step([], 1) == 0.0


def test_a_block_s_counts_are_read_from_the_requests_that_have_it():
    """Requests of 3, 1 and 2 blocks, counts [1, 2, 3], [4], [5, 6]: block 0 is [1, 4, 5], block 1
    [2, 6] (the one-block request has none), block 2 [3]."""
    p = RequestPasses.from_rows([0, 0, 0], [[1, 2, 3], [4], [5, 6]])
    assert p.block(0).tolist() == [1, 4, 5]
    assert p.block(1).tolist() == [2, 6]
    assert p.block(2).tolist() == [3]


def test_token_passes_without_a_lead_run_no_prompt_pass():
    """A class without `lead` (None: no pass over the prompt alone) of NFE 10, its first output
    after 1 pass: scales 1 and 0.3 give round(10) = 10 and round(3) = 3 passes, none of them over
    the prompt alone (a lead of 1 would give 1 + round(2.7) = 4)."""
    t = ClassTable([10], [1], [0.0], [[0.0, 1.0]])
    p = token_passes(t, np.zeros(2, int), np.array([1.0, 0.3]))
    assert p.lead.tolist() == [0, 0] and p.nfe.tolist() == [10, 3] and p.first.tolist() == [1, 1]


def test_a_decoding_s_label_names_the_knobs_its_scheme_reads():
    """'scheme/block/tpf' with tpf to 3 significant digits and '-' for a block of the whole answer;
    masked diffusion (no block read) 'mdm/tpf'; an autoregressive one its scheme alone."""
    from dlmcost.serving.steptime import Decoding

    assert Decoding("block", 32, 2.0).label == "block/32/2"
    assert Decoding("block", None, 2.0).label == "block/-/2"
    assert Decoding("mdm", None, 1.23456).label == "mdm/1.23"
    assert Decoding("ar", None, 1.0).label == "ar"


def test_a_block_of_the_whole_answer_streams_its_first_output_at_the_last_pass():
    """A block of None is one block of the whole canvas: P + (NFE - P) / (canvas / canvas) = NFE,
    42 passes of a 64-token canvas (8 over the prompt) all run before the first output."""
    from dlmcost.serving.steptime import Decoding, passes_to_first_output

    assert passes_to_first_output(Decoding("block", None, 2.0), 42, 8, 64) == 42
    assert passes_to_first_output(Decoding("block", 64, 2.0), 42, 8, 64) == 42
    assert passes_to_first_output(Decoding("block", 16, 2.0), 42, 8, 64) == 17  # 8 + 34 / 4 = 16.5, up


@pytest.mark.usefixtures("bundled_offline")
def test_a_one_pass_answer_s_later_pass_is_its_first_again():
    """An AR answer of one token is one pass (its prompt's prefill): with no later passes, the pass
    table's mean later pass is the first pass again (PassTable's docstring), not (time - first) / 1 = 0."""
    from dlmcost.serving.steptime import Decoding, pass_table

    pt = pass_table("Qwen/Qwen2.5-7B", Decoding("ar", None, 1.0), ["H100 SXM"], ["bf16"], [1], [64], [1], [1, 8])
    assert pt.nfe[0, 0, 0, 0, 0] == 1
    assert pt.first_s[0, 0, 0, 0, 0, 0] > 0
    assert pt.pass_s[0, 0, 0, 0, 0].tolist() == pt.first_s[0, 0, 0, 0, 0].tolist()


@pytest.mark.usefixtures("bundled_offline")
@pytest.mark.parametrize("outside, requests, cap, users, run", [
    (False, 50, 8, 17, 68),    # a running limit of 8: 2 x 8 + 1 users, at least 4 x 17 requests
    (False, 100, 8, 17, 100),  # more requests asked for than 4 x 17: those
    (True, 50, 16, 33, 132),   # first blocks beside a full batch: 16 in flight, 33 users, 4 x 33 requests
])
def test_saturation_is_a_closed_loop_of_twice_the_in_flight_plus_one_on_one_replica(monkeypatch, outside, requests,
                                                                                     cap, users, run):
    """docs/plan.md's saturation: one replica (TP GPUs, replicas alike) under a closed loop of
    2 x in-flight + 1 users without think time, max(requests, 4 x users) requests; its rate and
    output tokens/s times the 3 replicas, per GPU as measured, in flight 3 x the in-flight cap."""
    import dataclasses
    import warnings

    from dlmcost.serving.loads import ClosedLoop

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prep = dep.prepare("GSAI-ML/LLaDA-8B-Instruct", (np.full(20, 256.0), np.full(20, 128.0)),
                           dep.Setup(gpu="h100", tp=2, replicas=3, scheme="block", block=32, tpf=2.0,
                                     stack="sglang", release="first-done"))
    prep = dataclasses.replace(prep, max_running=8, first_block_outside_limit=outside)
    seen = []

    def evaluate(one, load, *, requests, seed):
        seen.append((one.setup.replicas, one.gpus, load, requests, seed))
        return dataclasses.replace(_point(served=2.0), output_tokens_per_s=100.0, output_tokens_per_s_per_gpu=50.0)

    monkeypatch.setattr(capacity, "evaluate", evaluate)
    s = capacity.saturation(prep, requests=requests, seed=4)
    assert seen == [(1, 2, ClosedLoop(users), run, 4)]
    assert s == dict(rate=6.0, output_tokens_per_s=300.0, output_tokens_per_s_per_gpu=50.0, in_flight=3 * cap)


@pytest.mark.parametrize("load, cap, binds", [
    ("job 200 x 100", 10, False),   # a running limit of 10 = what memory holds (10): the limit binds first
    ("job 200 x 100", 11, True),    # 11 > 10, 100 / 2 = 50 a replica > 10
    ("job 200 x 20", 16, False),    # 20 / 2 = 10 a replica: exactly what memory holds
    ("job 200 x 21", 16, True),     # 21 / 2 = 10.5, 11 a replica (rounded up) > 10
    ("users 20", 16, False),        # 10 users a replica, none thinking
    ("users 21", 16, True),         # 11 a replica
    ("users 40 think 1", 16, False),  # users that think: the run's peak, 9 < 95% of 10
])
def test_memory_binds_at_its_edges(monkeypatch, load, cap, binds):
    """capacity.memory_binds over 2 replicas whose memory holds 10 requests at their final lengths
    (docstring): never where the running limit (in flight) holds no more than 10; a job's parallel
    requests or an unthinking closed loop's users per replica, rounded up, beyond 10; otherwise the
    run's peak (9 here) against 95% of 10 = 9.5."""
    from dlmcost.serving.loads import BatchJob, ClosedLoop

    monkeypatch.setattr(capacity, "requests_memory_holds", lambda prep: 10.0)
    prep = SimpleNamespace(max_running=cap, first_block_outside_limit=False, setup=SimpleNamespace(replicas=2))
    words = load.split()
    ld = (BatchJob(int(words[1]), int(words[3])) if words[0] == "job" else
          ClosedLoop(int(words[1]), float(words[3]) if len(words) > 2 else 0.0))
    point = dataclasses.replace(_point(), most_running=9)
    assert capacity.memory_binds(prep, ld, point) is binds


def test_draw_passes_refuses_only_more_blocks_than_its_limit(monkeypatch):
    """MAX_BLOCKS is the most blocks simulated (refused: 'more than'): under a limit of 6, three
    requests of two blocks (6) are drawn, a fourth (8) is refused."""
    from dlmcost.errors import UsageError
    from dlmcost.serving.simulate import tables

    monkeypatch.setattr(tables, "MAX_BLOCKS", 6)
    t = ClassTable([4], [2], [0.0], [[0.0, 1.0]], blocks=[2])
    assert tables.draw_passes(t, np.zeros(3, int), 0.0, np.random.default_rng(0)).nfe.tolist() == [4, 4, 4]
    with pytest.raises(UsageError, match="8 blocks to simulate"):
        tables.draw_passes(t, np.zeros(4, int), 0.0, np.random.default_rng(0))


def test_the_sweep_a_pass_table_reads_is_every_setting_asked_for(monkeypatch):
    """pass_table and table_passes ask the sweep for exactly the combinations given: the decoding's
    scheme, its TPF (None for AR, which reads none), its block (None for a block of the whole answer),
    the K/V dtype and memory fraction, and an expert-parallel size only where it is not 1;
    pass_table with its limit on passes costed one by one."""
    from dlmcost.analysis import limits
    from dlmcost.serving import steptime
    from dlmcost.serving.steptime import Decoding, pass_table, table_passes

    seen = []
    monkeypatch.setattr(steptime, "sweep_passes", lambda model, **kw: seen.append((model, kw)) or 7)
    monkeypatch.setattr(steptime, "sweep_first_pass", lambda model, **kw: seen.append((model, kw)) or {})
    common = dict(gpus=["H100 SXM"], precisions=["fp8"], tps=[2], prompts=[64, 128], answers=[256], batches=[1, 4])
    assert table_passes("m", Decoding("block", 32, 2.0), **common, efficiency="peak", stack="sglang",
                        hardware=["h.yaml"], ep=2, kv_dtype="fp8", mem_fraction=0.8) == 7
    assert seen.pop() == ("m", dict(gpus=["H100 SXM"], schemes=["block"], prompts=[64, 128], gens=[256],
                                    kv_dtype="fp8", mem_fraction=0.8, tpf=2.0, blocks=[32], batches=[1, 4],
                                    precisions=["fp8"], tps=[2], efficiency="peak", stack="sglang",
                                    hardware=["h.yaml"], eps=[2]))
    pt = pass_table("m", Decoding("ar", None, 1.0), **common)
    assert seen.pop() == ("m", dict(max_passes=limits.MAX_PASSES_ONE_BY_ONE, gpus=["H100 SXM"], schemes=["ar"],
                                    prompts=[64, 128], gens=[256], kv_dtype="bf16", mem_fraction=0.9, tpf=None,
                                    blocks=None, batches=[1, 4], precisions=["fp8"], tps=[2],
                                    efficiency="realistic", stack=None, hardware=None))
    # nothing costed: every entry NaN (first dispatch 0), shaped [gpu, precision, tp, prompt, answer, batch]
    assert pt.first_s.shape == pt.pass_s.shape == (1, 1, 1, 2, 1, 2) and pt.max_batch.shape == (1, 1, 1, 2, 1)
    assert np.isnan(pt.first_s).all() and np.isnan(pt.max_batch).all() and not pt.first_dispatch_s.any()
    pass_table("m", Decoding("block", 32, 2.0), **common, max_passes=None)
    assert seen.pop()[1]["max_passes"] is None


def test_max_rate_says_the_halvings_it_ran_and_the_interval_it_left(fake_evaluate):
    """bisection_steps and resolution_rps are what the run did: a saturation of 1 req/s met whole is
    the answer with no halving and nothing left (0); one whose every rate misses and whose halvings
    reach the lowest rate simulated stops there (top 1e-5: 5e-6, 2.5e-6, 1.25e-6 tried, 3 halvings,
    the answer under 1.25e-6); one above the largest rate simulated (1e7 req/s) is bisected from that
    top, so its last interval is 1e7 / 2^14, not the saturation's 2^-14."""
    from dlmcost.serving.traffic import MAX_RATE

    calls, box = fake_evaluate
    box["rule"] = lambda rate: _point(served=rate)
    m = capacity.max_rate(None, Targets(), top=1.0)
    assert (m["rate"], m["bisection_steps"], m["resolution_rps"]) == (1.0, 0, 0.0)
    box["rule"] = lambda rate: _point(served=rate, misses=[MISS])
    m = capacity.max_rate(None, Targets(p95_latency_s=10.0), top=1e-5)
    assert (m["rate"], m["bisection_steps"], m["resolution_rps"]) == (None, 3, 1.25e-6)
    box["rule"] = lambda rate: _point(served=rate, misses=[] if rate <= 0.3 * MAX_RATE else [MISS])
    m = capacity.max_rate(None, Targets(p95_latency_s=10.0), top=4 * MAX_RATE)
    assert m["bisection_steps"] == 14 and m["resolution_rps"] == MAX_RATE / 2 ** 14
    assert m["rate"] == 4915 / 16384 * MAX_RATE and m["saturation_rate"] == 4 * MAX_RATE
