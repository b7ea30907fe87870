"""The bounds plan prunes on (dlmcost/plan/bounds.py), each against its formula computed here with
plain loops over the candidate's step-time table, to the last digits: a bound that only has to stay
above the simulated rate would let a wrong one through as long as it stayed loose."""

import math

import pytest

from dlmcost.inputs.hardware import HardwareDB
from dlmcost.inputs.models import resolve_model
from dlmcost.plan import bounds, search
from dlmcost.plan.replicas import Pricing
from dlmcost.serving.steptime import Decoding
from dlmcost.serving.traffic import Traffic, parse_lengths, sample_requests


def _candidate(stack, prompt, answer, max_batch, tp=1, cached_prompt=0.0, requests=200, **load):
    """Qwen2.5-7B's AR decoding on H100s: its one candidate, and the requests sampled for it."""
    traffic = Traffic(parse_lengths(prompt, "p"), parse_lengths(answer, "a"), cached_prompt=cached_prompt,
                      **(load or dict(rate=5.0)))
    sample = sample_requests(traffic, requests, 0)
    decoding = Decoding("ar", None, 1.0)
    space = search.SearchSpace([HardwareDB.load(None).get("h100")], [tp], ["bf16"], [decoding], [max_batch])
    (c,), _ = search._candidates(resolve_model("Qwen/Qwen2.5-7B"), space, decoding, sample, "realistic", stack,
                                 None, cached_prompt=cached_prompt)
    return c, sample, traffic


def _classes(sample):
    """Each request's class in the table: its prompt class's row of answer classes."""
    answers = len(sample.answer_values)
    return [int(p) * answers + int(a) for p, a in zip(sample.prompt_class, sample.answer_class)]


def _brute_bound(c, sample):
    """1 / the mean over the requests of the least busy time each can cost: its first pass's least
    share min_b first_s(b) / b, and each later pass's min_b pass_s(b) / b, b from 1 to the batch
    limit or the most requests of the smallest memory share that fit, whichever is fewer. A prompt
    partly cached (u of it not) under a prefill budget of k chunks: its k prompt steps hold
    max(u P - 1/2, 0) / P of the prefill's lift each, at most one first pass's in all, the rest are
    later passes."""
    t = c.table
    top = len(t.pass_s[0]) - 1
    positive = [s for s in t.mem_share if s > 0]
    if positive:
        top = max(1, min(top, math.floor(1 / min(positive) + 1e-6)))
    total = 0.0
    for k in _classes(sample):
        first = min(t.first_pass_s[k][b] / b for b in range(1, top + 1))
        later = min(t.pass_s[k][b] / b for b in range(1, top + 1))
        if c.uncached < 1:
            steps, p = t.prompt_steps[k], t.prompt_tokens[k]
            lifted = min(1.0, steps * max(c.uncached * p - 0.5, 0.0) / p)
            total += (t.nfe[k] - steps) * later + (1 - lifted) * later + lifted * first
        else:
            total += first + (t.nfe[k] - 1) * later
    return len(_classes(sample)) / total


def test_the_throughput_bound_over_uneven_classes_with_memory_capping_the_batch():
    """Prompts of 2,000 tokens at the median and 30,000 at the 90th percentile: two classes of
    unequal counts, the long prompts' memory share capping the batch below the limit of 256."""
    c, sample, _ = _candidate("sglang", "p50:2000,p90:30000", 64, 256)
    counts = {k: _classes(sample).count(k) for k in set(_classes(sample))}
    assert len(counts) == 2 and len(set(counts.values())) == 2  # uneven: a plain mean over classes differs
    shares = [s for s in c.table.mem_share if s > 0]
    assert math.floor(1 / max(shares)) < math.floor(1 / min(shares)) < 256  # memory, not the limit, caps b
    assert c.front_end is None or not c.front_end.service_s  # the engine's bound, no server's rate
    assert bounds.throughput_bound(c, sample) == pytest.approx(_brute_bound(c, sample), rel=1e-12)


@pytest.mark.parametrize("prompt, chunks", [(30000, 4), (2000, 1)])
def test_the_throughput_bound_of_a_prompt_partly_cached_under_a_budget(prompt, chunks):
    """vLLM's budget of 8,192 prompt tokens a step, 60% of each prompt cached: 12,000 tokens of
    30,000 left in 4 steps (each a share of the lift past what one first pass holds: capped at one),
    800 of 2,000 in one (800 - 1/2 of 2,000: a token's half matters at 1e-12)."""
    c, sample, _ = _candidate("vllm", prompt, 64, 16, cached_prompt=0.6, requests=40)
    assert c.uncached == pytest.approx(0.4) and c.table.prefill_budget
    assert set(c.table.prompt_steps) == {chunks}
    assert bounds.throughput_bound(c, sample) == pytest.approx(_brute_bound(c, sample), rel=1e-12)


@pytest.mark.parametrize("rate, fewest", [(101.0, 1), (102.0, 2), (110.0, 2), (204.0, 3)])
def test_the_fewest_replicas_the_bound_allows_take_it_two_percent_higher(rate, fewest):
    """floor(rate / (1.02 x bound)) + 1 at a bound of 100 requests/s: 101/102 -> 1 (no margin:
    2), 110/102 -> 2 (a margin of 1.2: 1), 204/102 -> 3."""
    traffic = Traffic(parse_lengths(64, "p"), parse_lengths(64, "a"), rate=rate)
    assert bounds.fewest_by_bound(100.0, traffic) == fewest


def test_an_unpriced_candidates_cost_bound_is_its_fewest_gpus():
    """No price for the GPU: the bound orders by GPUs, the fewest replicas the throughput bound
    allows times TP: floor(25 / (10 x 1.02)) + 1 = 3 replicas of TP2, 6 GPUs."""
    c, sample, traffic = _candidate("sglang", 64, 64, 64, tp=2, rate=25.0)
    assert c.tp == 2
    unpriced = Pricing(usd={}, source={}, power_w={})
    assert bounds.cost_bound(c, sample, traffic, unpriced, 10.0) == (1, 6.0, 6)


def test_a_closed_loops_cost_bound_counts_the_users_think_time():
    """Closed loop, 8 users thinking 2 s between requests: at most users / (think + NFE x the
    fastest pass) requests a second, so at least price x TP / (that x answer tokens x 3,600) x 1e6
    dollars a million tokens."""
    c, sample, traffic = _candidate("sglang", 64, 64, 16, users=8, think_s=2.0, requests=40)
    t = c.table
    fastest = min(min(row[1:]) for row in (*t.pass_s, *t.first_pass_s))
    classes = _classes(sample)
    nfe = sum(t.nfe[k] for k in classes) / len(classes)
    answer = sum(float(c.answer_tokens[k]) for k in classes) / len(classes)
    served = 8 / (2.0 + nfe * fastest)
    priced = Pricing(usd={c.gpu.key: 2.5}, source={c.gpu.key: "test"}, power_w={c.gpu.key: 700.0})
    expected = 2.5 * c.tp / (served * answer * 3600) * 1e6
    assert bounds.cost_bound(c, sample, traffic, priced, 1.0) == (0, pytest.approx(expected, rel=1e-12), c.tp)
