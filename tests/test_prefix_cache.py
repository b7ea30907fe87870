"""Prompts whose first tokens are in the engine's prefix cache (`--cached-prompt`: vLLM's automatic
prefix caching, SGLang's radix cache): only the rest of the prompt is prefilled, each against a
schedule worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from dlmcost.errors import UsageError
from dlmcost.serving import behaviour
from dlmcost.serving import deployment as dep
from dlmcost.serving.simulate import ClassTable, simulate, uncached_prompt_tokens
from dlmcost.serving.traffic import parse_cached_shares

pytestmark = pytest.mark.usefixtures("bundled_offline")


def _one_pass_table() -> ClassTable:
    """Class 0 (A): 3 passes, no prefill of its own. Class 1 (B): a 3,000-token prompt prefilled in
    one pass (lead 1), then 2 decodes. An iteration takes 1 s whatever its batch b (pass_s 1); B's
    prefill pass adds 9 s per request to its iteration (first_pass_s[b] = 1 + 9 b)."""
    flat = [0.0, 1.0, 1.0]
    return ClassTable([3, 3], [1, 1], [0.0, 0.0], [flat, flat], [flat, [0.0, 10.0, 19.0]], lead=[0, 1])


def test_uncached_prompt_tokens_by_hand():
    """round(P u), at least the last token (its logits are the first answer token), none without a prompt pass."""
    assert uncached_prompt_tokens(3000, 0.5) == 1500
    assert uncached_prompt_tokens(3000, 1.0) == 3000
    assert uncached_prompt_tokens(3000, 0.0) == 1
    assert uncached_prompt_tokens(3000, 0.0001) == 1
    assert uncached_prompt_tokens(0, 0.5) == 0


def test_a_cached_prefix_shortens_a_one_pass_prefill_by_hand():
    """A arrives at 0, B at 0.5 with two thirds of its prompt cached. A's first pass alone to 1; B
    joins: its prefill adds 9 x 1/3 = 3 s, an iteration of 1 + 3 = 4 s, to 5 (B's first token); A's
    last pass to 6, B's two decodes to 7. Uncached: B's prefill iteration is 1 + 9 = 10 s, to 11;
    A done at 12, B at 13."""
    table, cls, arrivals = _one_pass_table(), np.array([0, 1]), np.array([0.0, 0.5])
    cached = simulate(table, cls, 2, arrivals_s=arrivals, uncached=np.array([1.0, 1 / 3]))
    assert cached.first_block_s.tolist() == pytest.approx([1.0, 5.0])
    assert cached.done_s.tolist() == pytest.approx([6.0, 7.0])
    whole = simulate(table, cls, 2, arrivals_s=arrivals, uncached=np.array([1.0, 1.0]))
    assert whole.done_s.tolist() == pytest.approx([12.0, 13.0])
    assert whole.done_s.tolist() == pytest.approx(simulate(table, cls, 2, arrivals_s=arrivals).done_s.tolist())


def test_a_cached_prefix_of_one_kind_of_request_by_hand():
    """One class whose requests all run the same passes (the plan's usual replica, which has a loop
    of its own without a cache): 4 passes, 1 s each, a prefill adding 0.4 s. Two requests sent at
    0, half of request 0's prompt cached: iteration 0 takes 1 + (0.4 x 0.5 + 0.4) / 2 = 1.3 s, and
    both end 3 passes later, at 4.3."""
    table = ClassTable([4], [1], [0.25], [[0.0, 1.0, 1.0]], [[0.0, 1.4, 1.4]])
    r = simulate(table, np.zeros(2, int), 2, arrivals_s=np.zeros(2), uncached=np.array([0.5, 1.0]))
    np.testing.assert_allclose(r.done_s, [4.3, 4.3])
    np.testing.assert_allclose(r.first_block_s, [1.3, 1.3])


def test_a_cached_prompt_leaves_its_budget_to_the_next_by_hand():
    """Budget 1,000 tokens a step, two B prompts of 3,000 at 0, the first wholly cached: it puts one
    token (its last) in the stream, the second takes the 999 left and three more steps (1,000, 1,000,
    1). A token adds 3 x 3 b / 3000 = 9 b / 3000 s (the chunked pass's lift, 3 b, times its 3 chunks,
    over 3,000 tokens), so a full budget 3 s over b. Steps 1-3: 1 + 3 = 4 s each, to 12; B1's first
    token after step 1 (4 s), its 2 decodes end at 12; B2's last token of prompt alone, 1 + 0.003 s,
    to 13.003 (its first token), then 2 decodes, to 15.003. Uncached, B1's first token is at 12 and
    B2's at 24 (test_chunked_prefill)."""
    table = behaviour.prompt_in_token_chunks(_one_pass_table(), [3000, 3000], 1000)
    r = simulate(table, np.array([1, 1]), 2, arrivals_s=np.array([0.0, 0.0]), uncached=np.array([0.0, 1.0]))
    assert r.first_block_s.tolist() == pytest.approx([4.0, 13.003])
    assert r.done_s.tolist() == pytest.approx([12.0, 15.003])


def test_shares_are_taken_in_the_order_requests_are_sent():
    """A file of shares is cycled over the requests in the order they are sent; one share is every
    request's; nothing cached (or all zeros) is no cache at all."""
    assert behaviour.uncached_shares((0.25, 1.0), 5).tolist() == [0.75, 0.0, 0.75, 0.0, 0.75]
    assert behaviour.uncached_shares((0.4,), 3).tolist() == pytest.approx([0.6, 0.6, 0.6])
    assert behaviour.uncached_shares((0.0, 0.0), 3) is None
    assert behaviour.uncached_shares(None, 3) is None


def test_parse_cached_shares(tmp_path):
    f = tmp_path / "shares.txt"
    f.write_text("1, 0.5\n0\n")
    assert parse_cached_shares(f"@{f}") == (1.0, 0.5, 0.0)
    assert parse_cached_shares("0.3") == (0.3,)
    for bad in ("1.5", "-0.1", "nan", "inf", "x", "@" + str(tmp_path / "missing.txt")):
        with pytest.raises(UsageError):
            parse_cached_shares(bad)
    f.write_text("0.5 \x1b[31mhf_secret")
    with pytest.raises(UsageError, match="value 2 is not a share") as e:
        parse_cached_shares(f"@{f}")
    assert "\x1b" not in str(e.value) and "secret" not in str(e.value)  # a file's value is named by position
    with pytest.raises(UsageError, match="'1.5' is not a share"):
        parse_cached_shares("1.5")
    f.write_text("0.5\n1.5\n")  # a number out of range is shown (it is no word of a secret): 'value 2' alone read as 2
    with pytest.raises(UsageError, match=r"value 2 is not a share of the prompt in 0\.\.1, got 1\.5$"):
        parse_cached_shares(f"@{f}")


def test_serve_with_a_wholly_cached_prompt_prefills_one_token():
    """A lone request of a 4,000-token prompt on an AR model: its time to first token is its prefill
    step; with every prompt cached it is one step of one prompt token, so at most the time of the
    next decode step and far below the whole prefill's. Both after the stack's front end: a free API
    server's time on the request (the vllm stack's 5 ms) and its first-token delay (0.8 ms a layer,
    Qwen2.5-7B's 28: 22.4 ms), before the engine sees it."""
    setup = dep.Setup(gpu="h100", tp=1, stack="vllm")
    cached = dep.Setup(gpu="h100", tp=1, stack="vllm", cached_prompt=(1.0,))
    load = dep.BatchJob(4, 1)
    served = dep.serve("Qwen/Qwen2.5-7B", load, setup, prompt=4000, answer=64)
    whole = served.points[0]
    part = dep.serve("Qwen/Qwen2.5-7B", load, cached, prompt=4000, answer=64).points[0]
    front = (served.deployment["front_end_us_per_request"] + served.deployment["first_token_delay_us"]) * 1e-6
    assert front == pytest.approx(0.005 + 0.0224, abs=1e-12)
    gap = part.inter_block_s["mean"]
    assert part.ttfb_s["mean"] - front < 1.5 * gap < (whole.ttfb_s["mean"] - front) / 5


def test_a_cache_is_refused_where_it_is_not_modelled():
    """The sglang-dllm stack prefills a prompt a block per forward: --cached-prompt is refused there."""
    with pytest.raises(UsageError, match="block per forward"):
        dep.serve("inclusionAI/LLaDA2.0-mini", dep.BatchJob(2, 1),
                  dep.Setup(gpu="h100", stack="sglang-dllm", cached_prompt=(0.5,)), prompt=256, answer=64)
    with pytest.raises(UsageError, match="0..1"):
        dep.Setup(cached_prompt=(1.5,))


# --- a Mooncake trace's hash_ids -----------------------------------------------------------------

def _mooncake(tmp_path, rows) -> str:
    import json

    f = tmp_path / "trace.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(f)


def test_prefix_hits_by_hand():
    """The trace README's two requests share their first 12 blocks (ids 46-57): the second finds 12 x 512 =
    6,144 of its 6,472 tokens cached; a third whose first block is 46 and second new finds 512; a block
    seen before but after a new one does not count (a prefix cache matches from the start); a hit is at
    most the prompt."""
    from dlmcost.serving.traces import prefix_hits

    shared = list(range(46, 58))
    counts = [14, 13, 2, 2, 1]
    ids = shared + [2353, 2354] + shared + [2366] + [46, 99] + [7, 46] + [46]
    assert prefix_hits(counts, ids, [6955, 6472, 900, 900, 300]).tolist() == [0, 6144, 512, 0, 300]


def test_a_traces_hits_follow_arrival_order_and_its_sample(tmp_path):
    """Rows written out of arrival order are sorted first: the cache fills in arrival order. The
    later of two requests with the same blocks finds them, whichever row of the file it is."""
    from dlmcost.serving.traces import read_trace

    path = _mooncake(tmp_path, [
        {"timestamp": 2000, "input_length": 1024, "output_length": 8, "hash_ids": [1, 2]},
        {"timestamp": 1000, "input_length": 1100, "output_length": 8, "hash_ids": [1, 2, 3]},
        {"timestamp": 3000, "input_length": 600, "output_length": 8, "hash_ids": [1, 9]},
    ])
    t = read_trace(path)
    assert t.prompt_tokens.tolist() == [1100, 1024, 600]
    assert t.cached_tokens.tolist() == [0, 1024, 512]
    # replayed alone, the last request finds nothing: the rows left out never filled the cache
    one = read_trace(path, sample=1, seed=3)
    assert one.cached_tokens.tolist() == [0]


@pytest.mark.parametrize("bad", ['"1, 2"', "[1, true]", "[1, 2.5]", "[1, 9223372036854775808]", '{"a": 1}'])
def test_hash_ids_that_are_not_block_ids_leave_the_trace_without_them(tmp_path, bad):
    """hash_ids are optional: where a row's are not block ids the trace has none and says which row
    (its requests are replayed as ever; serve warns, and refuses --cached-prompt trace in one line)."""
    from dlmcost.serving.traces import read_trace

    f = tmp_path / "t.jsonl"
    f.write_text('{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]}\n'
                 '{"timestamp": 1, "input_length": 10, "output_length": 2, "hash_ids": ' + bad + "}\n")
    t = read_trace(str(f))
    assert t.cached_tokens is None and t.prompt_tokens.tolist() == [10, 10]
    assert t.hash_ids_unread.endswith("row 2, column hash_ids: " + ("not a list of block ids" if bad[0] in '"{'
                                                                    else "not all whole numbers within 64 bits"))


def test_too_many_hash_ids_leave_the_trace_without_them(tmp_path, monkeypatch):
    from dlmcost.serving import traces

    monkeypatch.setattr(traces, "MAX_HASH_IDS", 3)
    path = _mooncake(tmp_path, [{"timestamp": 0, "input_length": 2000, "output_length": 2, "hash_ids": [1, 2, 3, 4]}])
    t = traces.read_trace(path)
    assert t.cached_tokens is None and t.hash_ids_unread.endswith("more than 3 hash_ids in the trace")


def test_serve_replays_a_traces_cache(tmp_path, run):
    """Two requests with the same 4,096-token prompt, the second a minute after the first is done: with
    the trace's cache the second's time to first token is a step of one prompt token (under a tenth of
    a whole prefill), so the mean is just over half the uncached one; the share is 0.5 (all of the
    second prompt, none of the first); a trace without hash_ids cannot say what is cached."""
    import json

    rows = [{"timestamp": t, "input_length": 4096, "output_length": 16, "hash_ids": list(range(8))}
            for t in (0, 60_000)]
    path = _mooncake(tmp_path, rows)
    base = ["serve", "Qwen/Qwen2.5-7B", "--gpu", "h100", "--stack", "vllm", "--trace", path, "-f", "json"]
    whole = json.loads(run(*base)[1])
    cached = json.loads(run(*base, "--cached-prompt", "trace")[1])
    assert cached["deployments"][0]["deployment"]["cached_prompt_share"] == pytest.approx(0.5)
    assert cached["deployments"][0]["deployment"]["cached_prompt_from_trace"] is True
    # each request alone: the mean of two whole prefills, against one whole and one of a single token,
    # each after a free API server's time on it and its first-token delay (the vllm stack's front end:
    # 5 ms, then 0.8 ms x Qwen2.5-7B's 28 layers)
    d = whole["deployments"][0]["deployment"]
    front = (d["front_end_us_per_request"] + d["first_token_delay_us"]) * 1e-6
    assert front == pytest.approx(0.005 + 0.0224, abs=1e-12)
    whole_mean = whole["deployments"][0]["points"][0]["ttfb_s"]["mean"] - front
    cached_mean = cached["deployments"][0]["points"][0]["ttfb_s"]["mean"] - front
    assert 0.5 * whole_mean < cached_mean < 0.55 * whole_mean
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "hash_ids"}) + "\n" for r in rows))
    rc, _, err = run("serve", "Qwen/Qwen2.5-7B", "--trace", str(plain), "--cached-prompt", "trace")
    assert rc == 2 and "hash_ids" in err and len(err.strip().splitlines()) == 1


# --- plan --cached-prompt: the same cache, searched ----------------------------------------------

@pytest.mark.parametrize("stack, share, prompt, users, whole_bound_fails", [
    ("vllm", 0.6, 30000, None, False), ("vllm", 1.0, 30000, 1, True), ("vllm", 0.6, 2000, None, True),
    ("hf-eager", 0.6, 30000, 1, True)])
def test_plans_lone_floor_is_the_simulated_lone_request(stack, share, prompt, users, whole_bound_fails):
    """The lone-request floor that bounds plan's search (`_lone_latencies`) against the simulation of
    each request alone (open loop: replicas enough; closed loop: one user a replica), prompts partly
    cached: equal, under vLLM's budget of 8,192 (the cached prompt's own steps, ceil(P' / C), each with
    P'/P of the prefill's lift) and without one (hf-eager: the prefill pass's lift times u). The
    throughput bound stays above a saturated replica's requests per busy second (it is an upper
    bound the search prunes on)."""
    from dlmcost.inputs.hardware import HardwareDB
    from dlmcost.inputs.models import resolve_model
    from dlmcost.plan import bounds, replicas, search
    from dlmcost.serving.steptime import Decoding
    from dlmcost.serving.traffic import Traffic, parse_lengths, sample_requests

    load = dict(users=users) if users else dict(rate=0.01)
    traffic = Traffic(parse_lengths(prompt, "p"), parse_lengths(64, "a"), **load, cached_prompt=share)
    sample = sample_requests(traffic, 40, 0)
    decoding = Decoding("ar", None, 1.0)
    space = search.SearchSpace([HardwareDB.load(None).get("h100")], [1], ["bf16"], [decoding], [16])
    (c,), _ = search._candidates(resolve_model("Qwen/Qwen2.5-7B"), space, decoding, sample, "realistic", stack,
                                 None, cached_prompt=share)
    assert c.uncached == pytest.approx(1 - share)
    latency, first = replicas._lone_latencies(c, sample)
    alone = replicas._run(c, sample, traffic, replicas.separate_replicas(c, sample, traffic))
    window = replicas._window(len(sample.unit_gaps))
    assert np.allclose(alone.latency, latency[window], rtol=1e-9)
    assert np.allclose(alone.ttfb, first[window], rtol=1e-9)
    whole = replace_uncached(c, 1.0)
    assert first[window].max() < replicas._lone_latencies(whole, sample)[1][window].min()
    # the bound is on busy time per request: a saturated replica's requests over its busy seconds; the
    # uncached bound would be under it but for a long prompt's chunks (whose lift it mostly leaves out)
    cls = replicas.request_classes(sample)
    full = behaviour.run(c.table, cls, c.max_batch, c.release, c.passes, c.first_block_outside_limit,
                         uncached=c.uncached_shares(len(cls)), users=2 * c.in_flight_cap + 1)
    busy_rate = len(cls) / full.busy_s
    assert bounds.throughput_bound(c, sample) >= busy_rate
    assert (busy_rate > bounds.throughput_bound(whole, sample)) == whole_bound_fails


def replace_uncached(c, u):
    from dataclasses import replace

    return replace(c, uncached=u, floors={})


def test_plan_takes_the_cache_for_the_decodings_it_shortens(run):
    """A dLLM and an AR model side by side with nine tenths of each prompt cached: the AR rows' prefill
    shrinks (its p95 falls), the diffusion decoding on SGLang's dLLM path (a block of the prompt per
    forward) is left as it was, and the header and JSON say which."""
    import json

    base = ["plan", "inclusionAI/LLaDA2.0-mini,Qwen/Qwen3-30B-A3B", "--rate", "2", "--prompt", "8000",
            "--answer", "64", "--gpu", "h100", "--tp", "1", "--precision", "bf16", "--requests", "200", "-f", "json"]
    rc, out, _ = run(*base)
    rc_c, out_c, _ = run(*base, "--cached-prompt", "0.9")
    assert rc == rc_c == 0
    whole, cached = json.loads(out), json.loads(out_c)
    assert cached["traffic"]["cached_prompt"] == 0.9 and cached["search"]["cached_prompt_decodings"] == ["ar"]

    def row(rec, label):
        return next(d for d in rec["deployments"] if d["decoding"] == label)

    assert row(cached, "ar")["p95_latency_s"] < 0.9 * row(whole, "ar")["p95_latency_s"]
    dllm = next(d["decoding"] for d in whole["deployments"] if d["decoding"] != "ar")
    assert row(cached, dllm)["p95_latency_s"] == row(whole, dllm)["p95_latency_s"]
    rc, text, _ = run(*base[:-2], "--cached-prompt", "0.9")
    assert "90% of each prompt in the prefix cache (for ar; not" in " ".join(text.split())


def test_serve_refuses_a_traces_unread_hash_ids_in_one_line_where_it_needs_them(tmp_path, run):
    """A Mooncake trace whose row 2's hash_ids are not block ids: under --cached-prompt trace, one line
    naming the row (exit 16, a trace's error), where a warning naming it and then a request for hash_ids
    came; without it, the requests are replayed and the warning says the ids are not read."""
    path = _mooncake(tmp_path, [{"timestamp": 0, "input_length": 1000, "output_length": 20, "hash_ids": [1, 2]},
                                {"timestamp": 100, "input_length": 1000, "output_length": 20, "hash_ids": [1.5]}])
    base = ["serve", "Qwen/Qwen3-8B", "--gpu", "h100", "--trace", path]
    rc, out, err = run(*base, "--cached-prompt", "trace")
    assert rc == 16 and err == (f"error: trace {path} row 2, column hash_ids: not all whole numbers within 64 bits: "
                                "--cached-prompt trace needs them\n")
    rc, out, err = run(*base, "-f", "json")
    assert rc == 0 and err == (f"warning: trace {path} row 2, column hash_ids: not all whole numbers within 64 bits: "
                               "the trace's hash_ids are not read (--cached-prompt trace cannot use them)\n")
