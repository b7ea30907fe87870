"""plan's lone-request floor (dlmcost/plan/replicas/floors.py: the worst latency ratio no number
of replicas gets below, which rules candidates out and steers the replica search) against its
brute-force reference: the simulation at replicas enough that each request is served alone."""

from __future__ import annotations

import numpy as np
import pytest

from dlmcost.inputs.hardware import HardwareDB
from dlmcost.inputs.models import resolve_model
from dlmcost.plan import replicas, search
from dlmcost.plan.replicas import floors
from dlmcost.plan.results import Targets
from dlmcost.serving.steptime import Decoding
from dlmcost.serving.traffic import Traffic, length_classes, parse_lengths, sample_requests

pytestmark = pytest.mark.usefixtures("bundled_offline")

LATENCIES = ("p50_latency_s", "p95_latency_s", "p99_latency_s", "p95_first_block_s")


def _alone(sample, traffic):
    """LLaDA-8B, block decoding on an H100 (each request runs its own answer's blocks), built for
    this sample, and its deployment simulated at R_sep replicas (each request alone)."""
    decoding = Decoding("block", 32, 2.0)
    with pytest.MonkeyPatch.context() as mp:  # bundled_offline's settings, for a fixture built once
        mp.delenv("DLMCOST_HARDWARE", raising=False)
        mp.setenv("HF_HUB_OFFLINE", "1")
        space = search.SearchSpace([HardwareDB.load(None).get("h100")], [1], ["bf16"], [decoding], [16])
        (c,), _ = search._candidates(resolve_model("GSAI-ML/LLaDA-8B-Instruct"), space, decoding, sample,
                                     "realistic", None, None)
    assert c.passes is not None  # each request's own passes, not its class's
    r = replicas.separate_replicas(c, sample, traffic)
    alone = replicas._deployment(c, replicas._run(c, sample, traffic, r), r, 1.0, replicas.Pricing({}, {}, {}),
                                 Targets())
    return c, sample, alone


def _drawn():
    """Prompts and answers drawn from wide distributions (two classes each; answers of many lengths,
    each request its own number of blocks): the lone latencies differ request by request."""
    traffic = Traffic(parse_lengths({"p50": 256, "p99": 2048}, "p"), parse_lengths({"p50": 64, "p99": 1024}, "a"),
                      rate=0.05)
    return _alone(sample_requests(traffic, 100, 0), traffic)


def _levels():
    """100 requests of four (prompt, answer) kinds, lone latencies A < B < C < D, placed so that
    the measured window's 85 (requests 10 to 94) sort as 43 A, 37 B, 4 C and 1 D: numpy's
    percentile at position q/100 x 84 then falls between two different values for the 50th, 51st,
    95th, 96th and 99th (positions 42 / 42.8 / 79.8 / 80.6 / 83.2) and the 100th is D alone; the
    first blocks (80 short prompts, 4 of 1,024 tokens, 1 of 8,192) likewise split the 95th from
    the 96th."""
    rng = np.random.default_rng(0)
    kinds = np.array([(128, 64), (128, 256), (1024, 512), (8192, 512)], float)
    window = rng.permutation(np.repeat(np.arange(4), [43, 37, 4, 1]))
    which = np.concatenate([np.zeros(10, int), window, np.zeros(5, int)])
    sample = length_classes(kinds[which, 0], kinds[which, 1], rng.exponential(1.0, 100))
    return _alone(sample, Traffic(parse_lengths(128, "p"), parse_lengths(64, "a"), rate=0.05))


@pytest.fixture(scope="module", params=["drawn", "levels"])
def lone(request):
    return {"drawn": _drawn, "levels": _levels}[request.param]()


def test_each_percentile_of_the_floor_is_the_simulated_one_with_each_request_alone(lone):
    """Each latency target alone, at a limit of 1 s (the ratio is then the value): the floor's p50,
    p95, p99 and p95 first block equal the simulation's at R_sep, and its tokens/s per user (the
    median of each request's tokens over its latency) too. On these samples a wrong percentile (51
    for 50, 96 for 95, 100 for 99), one request's value taken for all, or each request's class's
    passes taken for its own give another number."""
    c, sample, alone = lone
    assert alone.p50_latency_s < alone.p95_latency_s < alone.p99_latency_s  # spread, not one value
    for name in LATENCIES:
        assert floors._floor_ratio(c, sample, Targets(**{name: 1.0})) == pytest.approx(getattr(alone, name),
                                                                                     rel=1e-9), name
    assert floors._floor_ratio(c, sample, Targets(min_tokens_per_s_per_user=1.0)) == \
        pytest.approx(1 / alone.tokens_per_s_per_user, rel=1e-9)


@pytest.mark.parametrize("name", LATENCIES)
def test_a_floor_exactly_at_the_target_meets_it(lone, name):
    """A target equal to the lone value is met (a deployment misses only a value over its limit,
    results.check_targets), a hair under it is not: the floor fails only past a ratio of 1."""
    c, sample, _ = lone
    value = floors._floor_ratio(c, sample, Targets(**{name: 1.0}))
    assert not replicas.floor_fails(c, sample, Targets(**{name: value}))
    assert replicas.floor_fails(c, sample, Targets(**{name: value * (1 - 1e-9)}))


@pytest.mark.parametrize("stack", ["vllm", "sglang"])
def test_a_prompt_without_tokens_beside_a_prefix_cache(stack):
    """Prompts of 0 tokens (no prompt pass: nothing for the cache to hold) beside prompts of 3,000
    tokens, 60% of each in the prefix cache, under the stack's prefill budget of 8,192 (SGLang also
    waits each prefill forward's dispatch): the lone latencies and first tokens the floor reads equal
    the simulation's with each request alone. The empty prompt's floor is its whole first pass, as
    without a cache (the simulation runs it 0.2-0.3 us longer: the tolerance is 1 us)."""
    traffic = Traffic(parse_lengths(3000, "p"), parse_lengths(64, "a"), rate=0.01, cached_prompt=0.6)
    gaps = np.random.default_rng(0).exponential(1.0, 40)
    sample = length_classes(np.array([0.0, 3000.0] * 20), np.full(40, 64.0), gaps)
    decoding = Decoding("ar", None, 1.0)
    space = search.SearchSpace([HardwareDB.load(None).get("h100")], [1], ["bf16"], [decoding], [16])
    (c,), _ = search._candidates(resolve_model("Qwen/Qwen2.5-7B"), space, decoding, sample, "realistic", stack, None,
                                 cached_prompt=0.6)
    assert c.uncached == pytest.approx(0.4) and c.table.prefill_budget == 8192 and 0 in c.table.prompt_tokens
    latency, first = replicas._lone_latencies(c, sample)
    alone = replicas._run(c, sample, traffic, replicas.separate_replicas(c, sample, traffic))
    window = replicas._window(len(sample.unit_gaps))
    assert np.allclose(alone.latency, latency[window], rtol=0, atol=1e-6)
    assert np.allclose(alone.ttfb, first[window], rtol=0, atol=1e-6)
