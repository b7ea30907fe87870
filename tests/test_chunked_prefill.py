"""Autoregressive prompts prefilled under a token budget a step beside the running decodes (the
stack's `prefill_chunk_tokens`: vLLM V1's max_num_batched_tokens, SGLang's --chunked-prefill-size;
the prompts one stream, first come first served), each against a schedule worked by hand."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from dlmcost.serving import behaviour
from dlmcost.serving import deployment as dep
from dlmcost.serving.simulate import ClassTable, simulate
from dlmcost.serving.steptime import Decoding

pytestmark = pytest.mark.usefixtures("bundled_offline")

AR_MODEL = "Qwen/Qwen2.5-7B"


def _one_pass_table() -> ClassTable:
    """Class 0 (A): 3 passes, no prefill of its own to speak of. Class 1 (B): a 3,000-token prompt
    prefilled in one pass (lead 1), then 2 decodes (NFE 3, first token after the prefill). An
    iteration of b requests takes 1 s whatever b (pass_s 1); B's prefill pass adds 9 s per
    request to its iteration (first_pass_s[b] = 1 + 9 b)."""
    flat = [0.0, 1.0, 1.0]
    return ClassTable([3, 3], [1, 1], [0.0, 0.0], [flat, flat], [flat, [0.0, 10.0, 19.0]], lead=[0, 1])


def test_prompt_in_token_chunks_by_hand():
    """In chunks of 1,000 tokens B's prompt takes ceil(3000 / 1000) = 3 passes in place of one:
    NFE 3 - 1 + 3 = 5, first token after the 3rd, each chunk adding a third of the prefill's 9 s
    per request (first_pass_s[b] = 1 + 3 b). A (no prompt-only pass) is left alone; so is a prompt
    no longer than a chunk, and a chunk of 999 tokens takes ceil(3000 / 999) = 4."""
    c = behaviour.prompt_in_token_chunks(_one_pass_table(), [3000, 3000], 1000)
    assert (c.nfe, c.first_passes, c.lead, c.lift_passes) == ([3, 5], [1, 3], [0, 3], [1, 3])
    assert c.first_pass_s[1] == pytest.approx([0.0, 4.0, 7.0]) and c.first_pass_s[0] == [0.0, 1.0, 1.0]
    # a prompt no longer than the budget keeps its one pass, and the table the budget it shares
    fits = behaviour.prompt_in_token_chunks(_one_pass_table(), [3000, 3000], 3000)
    assert fits == replace(_one_pass_table(), prompt_tokens=[0, 3000], prefill_budget=3000)
    assert (c.prompt_tokens, c.prefill_budget) == ([0, 3000], 1000)
    assert behaviour.prompt_in_token_chunks(_one_pass_table(), [3000, 3000], 999).lift_passes == [1, 4]


def test_only_a_prompt_prefilled_in_one_pass_of_its_own_is_chunked():
    """A class whose prompt takes two passes of its own (lead 2) is not a one-pass prefill: left
    alone beside class B (lead 1), which takes its ceil(3000 / 1000) = 3 chunks."""
    t = _one_pass_table()
    two = ClassTable(t.nfe, t.first_passes, t.mem_share, t.pass_s, t.first_pass_s, lead=[2, 1])
    c = behaviour.prompt_in_token_chunks(two, [3000, 3000], 1000)
    assert (c.nfe, c.first_passes, c.lead, c.lift_passes) == ([3, 5], [1, 3], [2, 3], [1, 3])


def _a_then_b(table: ClassTable):
    return simulate(table, np.array([0, 1]), 2, arrivals_s=np.array([0.0, 0.5]))


def test_a_decode_beside_a_long_prompt_is_not_stalled_by_hand():
    """A arrives at 0, B at 0.5; both fit. One pass: A's first pass alone (1 s), then B joins and
    its prefill iteration takes 1 + 9 = 10 s (A waits in it), to 11: B's first token; A's last
    pass to 12 (A done), B's last to 13. In 3 chunks: from 1 s, A and B run iterations of
    1 + 3 = 4 s (B's chunk beside A's decode) to 9: A done after its 3 passes, so it is held 8 s,
    not 10; B's last chunk alone, 1 + 3 s, to 13: its first token; two decodes of 1 s, to 15."""
    one = _a_then_b(_one_pass_table())
    assert one.done_s.tolist() == pytest.approx([12.0, 13.0])
    assert one.first_block_s.tolist() == pytest.approx([1.0, 11.0])
    chunked = _a_then_b(behaviour.prompt_in_token_chunks(_one_pass_table(), [3000, 3000], 1000))
    assert chunked.done_s.tolist() == pytest.approx([9.0, 15.0])
    assert chunked.first_block_s.tolist() == pytest.approx([1.0, 13.0])
    assert chunked.busy_s == pytest.approx(15.0) and chunked.start_s.tolist() == pytest.approx([0.0, 1.0])


def test_prompts_arriving_together_share_the_steps_prefill_budget_by_hand():
    """Two B requests at 0 (room for both): the chunk is the step's prefill budget, so the second
    prompt waits for the first one's last chunk. B1 alone: 3 chunk iterations of 1 + 3 = 4 s, to 12:
    its first token. B2 joins: B1's 2 decodes beside B2's chunks, iterations of (1 + 1) / 2 +
    (7 - 1) / 2 = 4 s, to 20: B1 done; B2's last chunk alone, 4 s, to 24: its first token; its 2
    decodes, to 26. Side by side (each prompt a chunk per step, twice the budget) both would take
    iterations of 1 + 6 = 7 s to 21, and end at 23."""
    chunked = behaviour.prompt_in_token_chunks(_one_pass_table(), [3000, 3000], 1000)
    r = simulate(chunked, np.array([1, 1]), 2, arrivals_s=np.array([0.0, 0.0]))
    assert r.first_block_s.tolist() == pytest.approx([12.0, 24.0])
    assert r.done_s.tolist() == pytest.approx([20.0, 26.0])
    assert r.start_s.tolist() == pytest.approx([0.0, 12.0]) and r.busy_s == pytest.approx(26.0)


def _b_prompts(prompt: int, budget: int):
    """Two B requests (the one-pass table's class 1, a prompt of `prompt` tokens) at 0, room for
    both, under a prefill budget of `budget` tokens a step."""
    table = behaviour.prompt_in_token_chunks(_one_pass_table(), [prompt, prompt], budget)
    return simulate(table, np.array([1, 1]), 2, arrivals_s=np.array([0.0, 0.0]))


def test_short_prompts_share_one_step_s_budget_by_hand():
    """Two 600-token prompts, a budget of 1,000: B1's 600 tokens and B2's first 400 in the first
    step, 1 + 9 + 9 x 400 / 600 = 16 s: B1's first token at 16; B2's last 200 beside B1's first
    decode, 1 + 9 x 200 / 600 = 4 s, to 20: B2's first token; then one-second decodes: B1 done at
    21, B2 at 22. Without a budget both prompts fill the first step, 1 + 18 = 19 s, and both first
    tokens come at 19."""
    r = _b_prompts(600, 1000)
    assert r.first_block_s.tolist() == pytest.approx([16.0, 20.0])
    assert r.done_s.tolist() == pytest.approx([21.0, 22.0])
    assert r.start_s.tolist() == pytest.approx([0.0, 0.0]) and r.busy_s == pytest.approx(22.0)
    whole = simulate(_one_pass_table(), np.array([1, 1]), 2, arrivals_s=np.array([0.0, 0.0]))
    assert whole.first_block_s.tolist() == pytest.approx([19.0, 19.0])


def test_a_long_prompt_s_last_piece_leaves_its_budget_to_the_next_by_hand():
    """Two 1,500-token prompts, a budget of 1,000: B1's first 1,000 tokens alone, 1 + 9 x 1000 /
    1500 = 7 s; B2 waits for budget. Then B1's last 500 and B2's first 500 in one step,
    1 + 3 + 3 = 7 s, to 14: B1's first token; B2's last 1,000 beside B1's decode, 1 + 6 = 7 s, to
    21: B2's first token; decodes of 1 s: B1 done at 22, B2 at 23. B2 joins at 7, with the budget
    its prompt is first given."""
    r = _b_prompts(1500, 1000)
    assert r.first_block_s.tolist() == pytest.approx([14.0, 21.0])
    assert r.done_s.tolist() == pytest.approx([22.0, 23.0])
    assert r.start_s.tolist() == pytest.approx([0.0, 7.0])


def test_a_request_without_a_prompt_pass_joins_beside_a_chunked_prompt():
    """A (no prompt pass of its own) arriving while B is in its chunks joins at once: only prompts
    share the budget. B at 0: chunk iterations of 4 s; A at 0.5 joins at 4, iterations of
    (1 + 1) / 2 + 6 / 2 = 4 s: A's first pass to 8, B's last chunk to 12 (its first token) beside
    A's second; then 1 s steps: A's third pass ends at 13, B's last decode at 14 (the replica busy
    14 s; it was 13 when A's end, due before B's, was read after it and time ran back)."""
    chunked = behaviour.prompt_in_token_chunks(_one_pass_table(), [3000, 3000], 1000)
    r = simulate(chunked, np.array([1, 0]), 2, arrivals_s=np.array([0.0, 0.5]))
    assert r.start_s.tolist() == pytest.approx([0.0, 4.0])
    assert r.first_block_s.tolist() == pytest.approx([12.0, 8.0])
    assert r.done_s.tolist() == pytest.approx([14.0, 13.0])
    assert r.busy_s == pytest.approx(14.0) and r.end_s == pytest.approx(14.0)


def test_a_request_without_a_prompt_pass_beside_a_chunked_prompt_leaves_first_by_hand():
    """B (3 chunks) and A at 0, a second A waiting for room (limit 2); A and B have the same
    passes (3) once B's prompt is one pass, so only the chunks put B's end after A's. B and A1:
    iterations of (1 + 1) / 2 + 18 / 3 / 2 = 4 s to 12: A1's 3 passes done, B's first token. A2
    joins at 12 in A1's place: 1 s steps, A2's first at 13, B done at 14, A2 at 15. A2 waited to
    14 (B's end) when the requests in flight were taken to end in the order they joined."""
    chunked = behaviour.prompt_in_token_chunks(_one_pass_table(), [3000, 3000], 1000)
    r = simulate(chunked, np.array([1, 0, 0]), 2, arrivals_s=np.zeros(3))
    assert r.start_s.tolist() == pytest.approx([0.0, 0.0, 12.0])
    assert r.first_block_s.tolist() == pytest.approx([12.0, 4.0, 13.0])
    assert r.done_s.tolist() == pytest.approx([14.0, 12.0, 15.0])
    assert r.busy_s == pytest.approx(15.0)


@pytest.mark.timeout(10)  # the bug it pins was a loop without end
def test_a_request_done_before_its_last_chunk_does_not_hold_the_queue():
    """A table where a class ends before its chunks do (NFE 2 < 3 chunk iterations; no table
    dlmcost builds has one, but `simulate` takes any): the request leaves at 2, and the next prompt
    must not wait forever on a chunk of a request no longer in flight. A at 0: 2 iterations of
    1 + 3 = 4 s, done at 8; B (waiting: a prompt while A's chunks last) then runs alone from 8."""
    flat = [0.0, 1.0, 1.0]
    table = ClassTable([2, 3], [1, 1], [0.0, 0.0], [flat, flat], [[0.0, 4.0, 7.0], [0.0, 4.0, 7.0]], lead=[3, 1],
                       lift_passes=[3, 1], prompt_tokens=[3, 1], prefill_budget=1)
    r = simulate(table, np.array([0, 1]), 2, arrivals_s=np.array([0.0, 0.0]))
    assert r.done_s[0] == pytest.approx(8.0) and r.start_s[1] == pytest.approx(8.0)


def test_a_chunked_prefill_runs_first_done_only():
    chunked = behaviour.prompt_in_token_chunks(_one_pass_table(), [3000, 3000], 1000)
    with pytest.raises(ValueError, match="first-done"):
        simulate(chunked, np.array([0, 1]), 2, arrivals_s=np.array([0.0, 0.5]), release="synchronous")


def _lone(chunk: int | None):
    """Qwen2.5-7B on vLLM, one request at a time: a 3,000-token prompt, 64 answer tokens."""
    lengths = (np.full(20, 3000.0), np.full(20, 64.0))
    p = dep.prepare(AR_MODEL, lengths, dep.Setup(gpu="h100", stack="vllm", prefill_chunk=chunk))
    return p, dep.evaluate(p, dep.BatchJob(3, 1))


def test_a_lone_request_takes_its_chunks_passes():
    """Alone, a one-pass request's first token comes after its prefill (TTFT_0) and each of its 63
    decodes (the prefill samples the first of the 64 tokens) takes d = (E2E_0 - TTFT_0) / 63. In chunks of 1,000 tokens its prompt takes 3 steps
    carrying the prefill's work and two more decode shares: TTFT = TTFT_0 + 2 d (and E2E the
    same 2 d later); in chunks of 999, 4 steps: 3 d."""
    p0, one = _lone(0)
    assert (p0.prefill_chunk, p0.prefill_chunk_source) == (None, "option")
    d = (one.latency_s["mean"] - one.ttfb_s["mean"]) / 63
    for chunk, extra in ((1000, 2), (999, 3), (3000, 0)):
        p, r = _lone(chunk)
        assert p.prefill_chunk == chunk
        assert r.ttfb_s["mean"] == pytest.approx(one.ttfb_s["mean"] + extra * d, rel=1e-9)
        assert r.latency_s["mean"] == pytest.approx(one.latency_s["mean"] + extra * d, rel=1e-9)


def test_the_stacks_say_who_chunks():
    """vLLM's budget is its max_num_batched_tokens default, 8192 (a 3,000-token prompt: one
    chunk); SGLang's its --chunked-prefill-size default on H100-class parts, 8192 (a prefill batch
    holds at most that many prompt tokens); a diffusion decoding has none on any stack, the option
    included."""
    p, _ = _lone(None)
    assert (p.prefill_chunk, p.prefill_chunk_source) == (8192, "stack")
    assert p.table.lift_passes is None  # 3,000 <= 8,192: one pass
    assert dep.describe(p)["prefill_chunk_tokens"] == 8192
    from dlmcost.inputs.stacks import load_stack

    ar, block = Decoding("ar", None, 1.0), Decoding("block", 32, 2.0)
    assert behaviour.policy(load_stack("sglang"), ar).prefill_chunk == 8192
    assert behaviour.policy(load_stack("sglang"), ar, prefill_chunk=0).prefill_chunk is None
    assert behaviour.policy(load_stack("vllm"), ar, prefill_chunk=0).prefill_chunk is None
    for stack in ("vllm", "vllm-dllm", "sglang-dllm"):
        pol = behaviour.policy(load_stack(stack), block, prefill_chunk=512)
        assert (pol.prefill_chunk, pol.prefill_chunk_source) == (None, "diffusion decoding")


def test_the_header_says_so(run):
    args = ["serve", AR_MODEL, "--stack", "vllm", "--prompt", "64", "--answer", "16", "--job", "2"]
    rc, out, err = run(*args)
    assert rc == 0, err
    assert "prompts prefilled 8,192 tokens a step beside the decodes (vllm's default, --prefill-chunk to change)" \
        in " ".join(out.split())
    rc, out, err = run(*args, "--prefill-chunk", "0")
    assert rc == 0 and "tokens a step" not in out


@pytest.mark.parametrize("stack, chunk, uncached", [("vllm", None, 1.0), ("sglang", None, 1.0), ("sglang", None, 0.5),
                                                    ("sglang", 0, 1.0), ("sglang", 0, 0.5)])
def test_plan_reads_a_chunked_prompt_s_lone_latency_as_the_simulation_runs_it(stack, chunk, uncached):
    """plan's lone-request floor (what it rules candidates out by, and the replicas at which each
    request is served alone) for an AR model on vLLM with prompts of 30,000 tokens, four chunks of
    8,192: equal to the simulated latency and time to first token at those replicas. Counting the
    chunked prompt's first pass once left out three quarters of the prefill (1.17 s to the first
    token, read as 0.31 s). On SGLang, whose prefills run eagerly, each of the four chunk
    iterations also waits its forward's dispatch (28 layers x 28 us = 0.784 ms): leaving it out
    read the first token 3.1 ms early. The same with half of each prompt in the prefix cache (two
    chunk iterations), and without a budget (one prefill iteration, whole or half cached)."""
    from dataclasses import replace

    from dlmcost.inputs.hardware import HardwareDB
    from dlmcost.inputs.models import resolve_model
    from dlmcost.plan import replicas, search
    from dlmcost.serving.steptime import Decoding
    from dlmcost.serving.traffic import Traffic, parse_lengths, sample_requests

    traffic = Traffic(parse_lengths(30000, "p"), parse_lengths(64, "a"), rate=0.01)
    sample = sample_requests(traffic, 40, 0)
    decoding = Decoding("ar", None, 1.0)
    space = search.SearchSpace([HardwareDB.load(None).get("h100")], [1], ["bf16"], [decoding], [16], prefill_chunk=chunk)
    (c,), _ = search._candidates(resolve_model("Qwen/Qwen2.5-7B"), space, decoding, sample, "realistic", stack, None)
    c = replace(c, uncached=uncached)
    assert c.table.lift_passes == ([4] if chunk is None else None)  # ceil(30,000 / 8,192)
    assert (c.table.prefill_step_s is not None) == (stack == "sglang")
    latency, first = replicas._lone_latencies(c, sample)
    alone = replicas._run(c, sample, traffic, replicas.separate_replicas(c, sample, traffic))
    window = replicas._window(len(sample.unit_gaps))
    assert np.allclose(alone.latency, latency[window], rtol=1e-9)
    assert np.allclose(alone.ttfb, first[window], rtol=1e-9)


def test_a_prefill_chunk_for_a_diffusion_decoding_is_said_to_do_nothing(run):
    """--prefill-chunk chunks autoregressive prompts only: given for a diffusion decoding alone it
    changes nothing, and a warning says so; with an AR model, or 0 (one pass), there is none."""
    base = ["serve", "--gpu", "h100", "-c", "1", "--requests", "100", "--answer", "64"]
    rc, _, err = run(*base[:1], "inclusionAI/LLaDA2.0-mini", *base[1:], "--prefill-chunk", "4096")
    assert rc == 0 and "warning: --prefill-chunk does nothing here" in err
    for model, chunk in (("Qwen/Qwen2.5-7B", "4096"), ("inclusionAI/LLaDA2.0-mini", "0")):
        rc, _, err = run(*base[:1], model, *base[1:], "--prefill-chunk", chunk)
        assert rc == 0 and "--prefill-chunk does nothing" not in err, (model, chunk, err)


# --- plan --prefill-chunk: the same chunked prefill, searched -----------------------------------

PLAN_AR = ["plan", AR_MODEL, "--users", "1", "--prompt", "20000", "--answer", "64", "--gpu", "h100", "--tp", "1",
           "--precision", "bf16", "--stack", "vllm", "--requests", "100"]


def _plan_json(run, *args) -> dict:
    import json

    rc, out, err = run(*PLAN_AR, "-f", "json", *args)
    assert rc == 0, err
    return json.loads(out)


def _lone_times(record: dict) -> tuple[float, float]:
    """(time to first token, latency) of the plan's deployment: one user, so every request alone."""
    (d,) = record["deployments"]
    assert d["p50_latency_s"] == pytest.approx(d["p95_latency_s"], rel=1e-9)  # every request the same
    return d["p95_first_block_s"], d["p95_latency_s"]


def test_plan_searches_the_chunk_it_is_given_by_hand(run):
    """One user on vLLM, 20,000-token prompts, 64 answer tokens: alone, a one-pass request (0)
    has its first token after its prefill (TTFT_0) and each of its 63 decodes (the prefill samples
    the first token) takes d = (E2E_0 - TTFT_0) / 63. In chunks of C its prompt takes k = ceil(20000 / C) steps: TTFT and
    E2E are k - 1 decode shares later. vllm's own 8,192: k = 3, + 2 d; --prefill-chunk 3000:
    k = 7, + 6 d. The JSON names each chunk and its source, as serve's does."""
    one = _plan_json(run, "--prefill-chunk", "0")
    ttft0, e2e0 = _lone_times(one)
    d = (e2e0 - ttft0) / 63
    assert (one["search"]["prefill_chunk_tokens"], one["search"]["prefill_chunk_source"]) == ({"ar": None},
                                                                                              {"ar": "option"})
    for given, chunk, source, k in ((None, 8192, "stack", 3), ("3000", 3000, "option", 7)):
        record = _plan_json(run, *(["--prefill-chunk", given] if given else []))
        assert (record["search"]["prefill_chunk_tokens"], record["search"]["prefill_chunk_source"]) == (
            {"ar": chunk}, {"ar": source})
        ttft, e2e = _lone_times(record)
        assert ttft == pytest.approx(ttft0 + (k - 1) * d, rel=1e-9), (given, k)
        assert e2e == pytest.approx(e2e0 + (k - 1) * d, rel=1e-9), (given, k)


def test_plan_s_answer_moves_with_the_chunk_by_hand(run):
    """The lone request's floor (what plan rules a candidate out by) takes the chunks too: with a
    first-token target of TTFT_0 + 6.5 d, chunks of 3,000 (k = 7: + 6 d) meet it and chunks of
    2,500 (k = 8: + 7 d) miss it at any size (exit 8, the nearest miss on its first token)."""
    ttft0, e2e0 = _lone_times(_plan_json(run, "--prefill-chunk", "0"))
    target = ttft0 + 6.5 * (e2e0 - ttft0) / 64
    rc, _, err = run(*PLAN_AR, "--first-block-p95", f"{target:.9f}", "--prefill-chunk", "3000")
    assert rc == 0, err
    rc, _, err = run(*PLAN_AR, "--first-block-p95", f"{target:.9f}", "--prefill-chunk", "2500")
    assert rc == 8 and "nearest miss" in err and "p95_first_block_s" in err, err


def test_plan_s_header_names_the_chunk_as_serve_s_does(run):
    rc, out, err = run(*PLAN_AR)
    assert rc == 0, err
    assert ("vllm for ar (batch limit 1024, first-done release), prompts prefilled 8,192 tokens a step beside the "
            "decodes (vllm's default, --prefill-chunk to change)") in " ".join(out.split())
    rc, out, err = run(*PLAN_AR, "--prefill-chunk", "0")
    assert rc == 0 and "tokens a step" not in out


def test_a_scenario_gives_the_chunk_and_the_option_overrides_it(run, tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("search: {prefill_chunk: 3000}\n")
    record = _plan_json(run, "--scenario", scenario)
    assert record["search"]["prefill_chunk_tokens"] == {"ar": 3000}
    assert record["search"]["prefill_chunk_source"] == {"ar": "scenario"}  # the file's, not an option
    overridden = _plan_json(run, "--scenario", scenario, "--prefill-chunk", "0")["search"]
    assert (overridden["prefill_chunk_tokens"], overridden["prefill_chunk_source"]) == ({"ar": None}, {"ar": "option"})


def test_plan_warns_when_the_chunk_does_nothing(run):
    """As serve: a diffusion decoding alone takes no chunk, and a warning says so; with the AR
    baseline beside it, the baseline takes it (and the diffusion decoding says why it has none)."""
    import json

    base = ["plan", "inclusionAI/LLaDA2.0-mini", "--users", "1", "--answer", "64", "--gpu", "h100", "--tp", "1",
            "--precision", "bf16", "--requests", "100", "--prefill-chunk", "4096", "-f", "json"]
    rc, out, err = run(*base)
    assert rc == 0 and "warning: --prefill-chunk does nothing here" in err, err
    rc, out, err = run(*base, "--ar-baseline")
    assert rc == 0 and "--prefill-chunk does nothing" not in err, err
    s = json.loads(out)["search"]
    (diffusion,) = s["decodings"]
    assert s["prefill_chunk_tokens"] == {diffusion: None, "ar": 4096}
    assert s["prefill_chunk_source"] == {diffusion: "diffusion decoding", "ar": "option"}


def test_lone_prefill_passes_without_a_budget_are_refused():
    """`lift_passes` says what a lone prompt runs under a budget; without the budget and the prompts'
    tokens the simulation could not place the pieces, so it says so rather than guess."""
    t = _one_pass_table()
    for pieces in (3, 2):  # two pieces are already pieces
        bare = ClassTable(t.nfe, t.first_passes, t.mem_share, t.pass_s, t.first_pass_s, lead=[0, pieces],
                          lift_passes=[1, pieces])
        with pytest.raises(ValueError, match="prefill_budget"):
            simulate(bare, np.array([1]), 1, arrivals_s=np.array([0.0]))


def test_the_budget_s_limits_are_inclusive():
    """0 (none) and MAX_PREFILL_CHUNK itself are budgets one may give; one token more is refused
    (tests/test_plan.py: the CLI's words for it)."""
    from dlmcost.errors import UsageError

    for given in (0, 1, behaviour.MAX_PREFILL_CHUNK, None):
        behaviour.check_prefill_chunk(given)
    for given in (-1, behaviour.MAX_PREFILL_CHUNK + 1, 1.5, True):
        with pytest.raises(UsageError, match="--prefill-chunk: tokens per step in 0..10,000,000"):
            behaviour.check_prefill_chunk(given)


@pytest.mark.timeout(10)
def test_a_first_token_outside_the_limit_waits_for_its_prompt_s_pieces_by_hand():
    """SGLang's dLLM stack lets a newcomer join a full batch when, by its first output, fewer than
    the limit of the others are still running (first_block_outside_limit); an AR decoding served
    there under a prefill budget (--prefill-chunk) has its first token after its prompt's pieces.
    Limit 1, two 1,500-token prompts at 0, a budget of 1,000; B's prefill work is 9 s a prompt
    (9 / 1500 s a token), a decode 1 s. R1 (2 pieces, then 2 decodes: iterations 0-3) joins at 0:
    its first 1,000 tokens, 1 + 6 = 7 s; R2 waits (the budget is R1's). Iteration 1, from 7: R1's
    last 500, 1 + 3 = 4 s, to 11 (R1's first token). R2 could take the 500 left, but its first
    token would come at iteration 1 + 2 = 3, R1 still running: it waits. Iteration 2, from 11: its
    first token would come at 2 + 2 = 4, when R1 ends: R2 joins, its 1,000 tokens beside R1's
    decode, 1 + 6 = 7 s, to 18; its last 500 beside R1's last decode, 4 s, to 22 (R1 done, R2's
    first token); R2's two decodes alone, 1 s each, to 24. Read without its pieces (its first
    token at iteration k + 1), R2 would wait one iteration too long, to 12."""
    flat = [0.0, 1.0, 1.0]
    table = behaviour.prompt_in_token_chunks(ClassTable([3], [1], [0.0], [flat], [[0.0, 10.0, 19.0]], lead=[1]),
                                             [1500], 1000)
    r = simulate(table, np.zeros(2, int), 1, arrivals_s=np.zeros(2), first_block_outside_limit=True)
    assert r.start_s.tolist() == pytest.approx([0.0, 11.0])
    assert r.first_block_s.tolist() == pytest.approx([11.0, 22.0])
    assert r.done_s.tolist() == pytest.approx([22.0, 24.0])


# --- memory under a prefill budget: one workspace of the budget's tokens, not every prompt at once --

DSV3 = ["serve", "deepseek-ai/DeepSeek-V3", "--gpu", "h200", "--tp", "8", "--precision", "fp8", "--stack", "sglang",
        "--prompt", "8192", "--answer", "1024", "--job", "2"]


def _dsv3_free_bytes() -> float:
    """Usable memory less resident weights per GPU, from analyze's breakdown (pinned by the memory
    tests): 0.9 x 141 GiB - DeepSeek-V3's fp8 weights over 8 GPUs."""
    from dlmcost import api

    mem = api.analyze("deepseek-ai/DeepSeek-V3", "h200", scheme="ar", prompt=8192, gen=1024, tp=8, precision="fp8",
                      stack="sglang")["results"][0]["memory"]
    return mem["usable_bytes"] - mem["weights_bytes"]


def test_a_prefill_budget_reserves_one_workspace_not_every_prompt_by_hand(run):
    """DeepSeek-V3 on 8 H200s (fp8 weights, bf16 K/V), SGLang, 8,192-token prompts, 1,024-token
    answers. A request holds its K/V: (8,192 + 1,024) tokens x 61 layers x 576 (MLA's 512 latent +
    64 rope, not split by TP) x 2 B = 647,626,752 B; its logits: 129,280 x 6 B (bf16 + fp32) =
    775,680 B; and a decode's activations: 1 token x (2 x 7,168 + (128 + 2 x 128) x 192 / 8) x 2 B
    = 47,104 B; 648,449,536 B in all. SGLang's 8,192-token budget holds one workspace,
    8,192 x 47,104 = 385,875,968 B, beside them: fits floor((free - 385,875,968) / 648,449,536)
    = 78 (free = 51,244,928,921.6 B). Without a budget (--prefill-chunk 0) every request's prompt is
    counted at once: floor(free / (648,449,536 - 47,104 + 385,875,968)) = 49, today's rule."""
    free = _dsv3_free_bytes()
    resident = 9216 * 61 * 576 * 2 + 129_280 * 6 + (2 * 7168 + 384 * 192 / 8) * 2
    per_token = (2 * 7168 + 384 * 192 / 8) * 2
    fits = math.floor((free - 8192 * per_token) / resident)
    one_pass = math.floor(free / (resident - per_token + 8192 * per_token))
    assert (fits, one_pass) == (78, 49)
    for extra, expected in (((), fits), (("--prefill-chunk", "0"), one_pass)):
        rc, out, err = run(*DSV3, *extra)
        assert rc == 0, err
        assert f"memory fits {expected})" in " ".join(out.split()), (extra, out)
        # plan's count of what memory holds is the same (its batch limit is the running limit: the
        # K/V of an autoregressive decoding is allocated as tokens come, preempted where it runs out)
        rc, out, err = run("plan", *DSV3[1:-2], "--users", "64", "--requests", "100", "-f", "json", *extra)
        assert rc == 0, err
        assert [d["memory_fits"] for d in json.loads(out)["deployments"]] == [expected], extra


def test_a_budget_past_every_prompt_at_once_keeps_the_one_pass_fits_by_hand():
    """No step holds more prompt tokens than the budget, nor more than every running prompt: the
    fits are the more of the two rules. DeepSeek-V3 as above: a budget of 100,000 tokens leaves
    floor((free - 100,000 x 47,104) / 648,449,536) = 71; one of 1,000,000 would leave 6 beside
    its workspace, but 49 whole prompts at once (the one-pass rule) hold fewer tokens, so 49."""
    from dlmcost.serving.steptime import pass_table

    free = _dsv3_free_bytes()
    resident, per_token = 648_449_536, 47_104
    assert math.floor((free - 100_000 * per_token) / resident) == 71
    assert math.floor((free - 1_000_000 * per_token) / resident) == 6
    pt = pass_table("deepseek-ai/DeepSeek-V3", Decoding("ar", None, 1.0), ["H200 SXM"], ["fp8"], [8], [8192], [1024], [1],
                    stack="sglang")
    got = [float(pt.memory_fits(0, 0, 0, budget)[0, 0]) for budget in (None, 0, 8192, 100_000, 1_000_000)]
    assert got == [49, 49, 78, 71, 49]  # a budget of 0: none


def test_the_budgets_memory_terms_by_hand():
    """DeepSeek-V3 as above: a request's resident bytes 648,449,536 (its decode's 1-token
    activations, not its prompt's 8,192), a token of the workspace 47,104 B. A workspace larger
    than the free memory leaves no request, not a negative count: free 10, 20 tokens of 1 B -> 0."""
    from dlmcost.engine.memory import budgeted_max_batch
    from dlmcost.serving.steptime import pass_table

    pt = pass_table("deepseek-ai/DeepSeek-V3", Decoding("ar", None, 1.0), ["H200 SXM"], ["fp8"], [8], [8192], [1024], [1],
                    stack="sglang")
    assert (pt.resident_bytes[0, 0, 0, 0, 0], pt.prefill_bytes_per_token[0, 0, 0, 0, 0]) == (648_449_536, 47_104)
    assert float(budgeted_max_batch(10.0, 1.0, 1.0, 20)) == 0.0


def test_a_later_pass_s_peak_q_skips_the_prompt_and_unused_families():
    """Later passes' largest q, families by hand (prompt 8): the prompt-only prefill (q 8) does not
    count, nor a family that runs no pass (q 50, n 0); a family of 4 passes from q 2 growing 3 a
    pass peaks at 2 + 3 x (4 - 1) = 11."""
    from types import SimpleNamespace

    from dlmcost.engine.schemes import PassFamily, later_peak_q

    def fam(n, q0, dq):
        a = lambda x: np.array([float(x)])  # noqa: E731
        return PassFamily("f", a(n), a(1), a(q0), a(dq), a(0), a(0), a(0), a(0), a(0), a(0), np.array([True]))

    k = SimpleNamespace(gen=np.zeros(1), prompt=np.array([8.0]))
    assert later_peak_q([fam(1, 8, 0), fam(0, 50, 0), fam(4, 2, 3)], k).tolist() == [11.0]


def test_with_cfg_a_request_holds_two_sequences():
    """LLaDA-8B (d_model 4,096, 3 FFN matrices of 12,288, vocab 126,464), mdm over a 512-token
    canvas (256 + 256) on an H100: every pass is the whole canvas (no prompt-only pass), so a
    request's resident bytes are its 512 tokens' activations, (2 x 4,096 + 3 x 12,288) x 2 B =
    90,112 B each, and logits, 126,464 x 6 B: 512 x (90,112 + 758,784) = 434,634,752 B; with
    classifier-free guidance it runs two sequences, 869,269,504 B."""
    from dlmcost.analysis.sweep import sweep_first_pass

    got = [sweep_first_pass("GSAI-ML/LLaDA-8B-Instruct", gpus=["h100"], schemes=["mdm"], prompts=[256], gens=[256],
                            batches=[1], cfg=cfg)["resident_bytes"].tolist() for cfg in (False, True)]
    assert got == [[512 * (90_112 + 126_464 * 6)], [2 * 512 * (90_112 + 126_464 * 6)]]


def test_sglang_s_chunk_follows_the_gpu_s_memory_by_hand():
    """SGLang's --chunked-prefill-size, unset, by the GPU's memory (the stack's
    prefill_chunk_by_memory): 2,048 under 35 GiB, 4,096 under 60, 8,192 (its prefill_chunk_tokens)
    under 160, 16,384 from 160; each bound's side as its server_args.py compares (`<`). A chunk given
    as an option is the same on every GPU."""
    from dlmcost.inputs.stacks import load_stack

    pol = behaviour.policy(load_stack("sglang"), Decoding("ar", None, 1.0))
    gib = 2**30
    got = {x: pol.on_gpu(x * gib).prefill_chunk for x in (24, 34.99, 35, 59.99, 60, 80, 159.99, 160, 192)}
    assert got == {24: 2048, 34.99: 2048, 35: 4096, 59.99: 4096, 60: 8192, 80: 8192, 159.99: 8192, 160: 16384,
                   192: 16384}
    given = behaviour.policy(load_stack("sglang"), Decoding("ar", None, 1.0), prefill_chunk=1000)
    assert given.on_gpu(192 * gib).prefill_chunk == 1000 and given.prefill_chunk_source == "option"
    assert behaviour.policy(load_stack("vllm"), Decoding("ar", None, 1.0)).on_gpu(192 * gib).prefill_chunk == 8192


def test_serve_and_plan_take_the_chunk_of_the_gpu(run):
    """serve on a B200 (180 GB) prefills 16,384 tokens a step on SGLang, on an A100 40GB 4,096;
    plan names the GPUs whose chunk is not the stack's 8,192."""
    for gpu, chunk in (("b200", 16384), ("a100-40gb", 4096), ("h100", 8192)):
        rc, out, err = run("serve", AR_MODEL, "--gpu", gpu, "--rate", "1", "--requests", "100", "-f", "json")
        assert rc == 0, err
        assert json.loads(out)["deployments"][0]["deployment"]["prefill_chunk_tokens"] == chunk, gpu
    rc, out, err = run("plan", AR_MODEL, "--gpu", "h100,b200,a100-40gb", "--rate", "1", "--requests", "100",
                       "--tp", "1", "--precision", "bf16", "-f", "json")
    assert rc == 0, err
    search = json.loads(out)["search"]
    assert search["prefill_chunk_tokens"] == {"ar": 8192}
    assert search["prefill_chunk_by_gpu"] == {"ar": {"B200": 16384, "A100 40GB SXM": 4096}}
    rc, out, err = run("plan", AR_MODEL, "--gpu", "h100,b200", "--rate", "1", "--requests", "100", "--tp", "1",
                       "--precision", "bf16")
    assert "(16,384 tokens a step on B200)" in " ".join(out.split())


@pytest.mark.parametrize("tier, says", [({"tokens": 4096}, "from_gib, below_gib or gpus_named"),
                                        ({"from_gib": 60, "below_gib": 35, "tokens": 4096}, "below its below_gib"),
                                        ({"below_gib": 35, "tokens": 0}, "greater than or equal to 1")])
def test_a_chunk_tier_needs_a_range_and_tokens(tier, says):
    _refused(_stack_file("sglang", prefill_chunk_by_memory=[tier]), says)
    _refused(_stack_file("sglang", prefill_chunk_by_memory=[{"below_gib": 35, "tokens": 2048}],
                         prefill_chunk_tokens=None), "needs the prefill_chunk_tokens")


def _stack_file(name: str, **fields) -> dict:
    """A bundled stack file's data with these fields replaced."""
    from pathlib import Path

    import yaml

    data = yaml.safe_load((Path(__file__).resolve().parent.parent / "stacks" / f"{name}.yaml").read_text())
    data.update(fields)
    return data


def _refused(data: dict, says: str) -> None:
    from dlmcost.inputs.stacks import StackFileError, validate_stack

    with pytest.raises(StackFileError, match=says):
        validate_stack(data)


def test_plan_s_candidates_run_the_chunk_of_their_gpu(run):
    """A 16,000-token prompt on a B200 under SGLang: one piece at its 16,384-token default, two at
    8,192. The B200 candidate's first tokens are those of --prefill-chunk 16384, not of 8192."""
    def p95_first(*extra):
        rc, out, err = run("plan", AR_MODEL, "--gpu", "b200", "--rate", "1", "--requests", "100", "--tp", "1",
                           "--precision", "bf16", "--prompt", "16000", "--answer", "64", *extra, "-f", "json")
        assert rc == 0, err
        return json.loads(out)["deployments"][0]["p95_first_block_s"]

    default = p95_first()
    assert default == p95_first("--prefill-chunk", "16384") and default < p95_first("--prefill-chunk", "8192")


def test_vllm_s_defaults_follow_the_gpu_by_hand():
    """vLLM's get_batch_defaults (v0.10-0.12, the OpenAI API server): max_num_seqs 1024 and
    max_num_batched_tokens 8192 on a GPU of at least 70 GiB whose name does not hold "a100"; 256 and
    2048 on the others. By the hardware files: H100 SXM (80 GB = 74.5 GiB), H20 (96 GB), MI300X
    (192 GB) large; A100 80GB SXM (74.5 GiB, but an A100), A100 40GB and L40S (48 GB = 44.7 GiB) small.
    Either given as an option holds on every GPU."""
    from dlmcost.inputs.hardware import HardwareDB
    from dlmcost.inputs.stacks import load_stack

    db = HardwareDB.load()
    pol = behaviour.policy(load_stack("vllm"), Decoding("ar", None, 1.0))
    got = {}
    for key in ("h100", "h20", "mi300x", "a100", "a100-40gb", "l40s"):
        g = db.get(key)
        on = pol.on_gpu(g.memory_bytes, g.names)
        got[key] = (on.max_running, on.prefill_chunk)
    assert got == {"h100": (1024, 8192), "h20": (1024, 8192), "mi300x": (1024, 8192),
                   "a100": (256, 2048), "a100-40gb": (256, 2048), "l40s": (256, 2048)}
    a100 = db.get("a100")
    given = behaviour.policy(load_stack("vllm"), Decoding("ar", None, 1.0), max_running=64, prefill_chunk=512)
    assert (given.on_gpu(a100.memory_bytes, a100.names).max_running, given.max_running_source) == (64, "option")
    assert given.on_gpu(a100.memory_bytes, a100.names).prefill_chunk == 512


def test_a_gpu_tier_by_memory_and_by_name_by_hand():
    """A tier holds a GPU when every condition it gives holds: memory from from_gib (inclusive) to
    below below_gib, and a name holding one of gpus_named, in any case."""
    from dlmcost.inputs.stacks import RunningTier

    by_name = RunningTier(gpus_named=["A100"], requests=256)
    assert by_name.holds(74.5, ("A100 80GB SXM", "a100")) and by_name.holds(500, ("nvidia a100-sxm4",))
    assert not by_name.holds(74.5, ("H100 SXM", "h100")) and not by_name.holds(10, ())
    both = RunningTier(below_gib=70, gpus_named=["l40"], requests=8)
    assert both.holds(44.7, ("L40S",)) and not both.holds(44.7, ("RTX 4090",)) and not both.holds(80, ("L40S",))
    assert RunningTier(from_gib=70, requests=8).holds(70, ()) and not RunningTier(below_gib=70, requests=8).holds(70, ())


def test_serve_and_plan_run_vllm_s_running_limit_of_the_gpu(run):
    """serve on vLLM: 1,024 requests at once on an H100, 256 on an A100, each in its JSON; plan
    searches each GPU's own (its candidates' max_running) and names the GPUs whose limit differs."""
    for gpu, limit, chunk in (("h100", 1024, 8192), ("a100", 256, 2048)):
        rc, out, err = run("serve", AR_MODEL, "--gpu", gpu, "--stack", "vllm", "--rate", "1", "--requests", "100",
                           "-f", "json")
        assert rc == 0, err
        d = json.loads(out)["deployments"][0]["deployment"]
        assert (d["max_running"], d["prefill_chunk_tokens"]) == (limit, chunk), gpu
    args = ("plan", AR_MODEL, "--gpu", "h100,a100", "--stack", "vllm", "--rate", "1", "--requests", "100", "--tp", "1",
            "--precision", "bf16")
    rc, out, err = run(*args, "-f", "json")
    assert rc == 0, err
    p = json.loads(out)
    assert p["search"]["max_running"] == {"ar": [1024]}
    assert p["search"]["max_running_by_gpu"] == {"ar": {"A100 80GB SXM": 256}}
    assert {d["gpu"]: d["max_running"] for d in p["deployments"]} == {"H100 SXM": 1024, "A100 80GB SXM": 256}
    rc, out, err = run(*args)
    assert rc == 0 and "(batch limit 1024 (256 on A100 80GB SXM), first-done release)" in " ".join(out.split())
    rc, out, err = run(*args, "--max-batch", "64", "-f", "json")
    p = json.loads(out)
    assert p["search"]["max_running_by_gpu"] == {} and {d["max_running"] for d in p["deployments"]} == {64}


@pytest.mark.parametrize("tier, says", [({"requests": 8}, "from_gib, below_gib or gpus_named"),
                                        ({"gpus_named": [], "requests": 8}, "at least 1 item"),
                                        ({"gpus_named": [""], "requests": 8}, "at least 1 character"),
                                        ({"below_gib": 70, "requests": 0}, "greater than or equal to 1")])
def test_a_running_tier_needs_gpus_and_a_limit(tier, says):
    _refused(_stack_file("vllm", max_running_by_gpu=[tier]), says)
    data = _stack_file("vllm", max_running_by_gpu=[{"below_gib": 70, "requests": 256}], max_running_requests=None)
    del data["sources"]["max_running_requests"]
    _refused(data, "needs the max_running_requests")
    data = _stack_file("vllm")
    del data["sources"]["max_running_by_gpu"]
    _refused(data, "needs a source for: max_running_by_gpu")


def test_plan_s_pass_table_reaches_the_largest_limit_of_its_gpus(run, tmp_path):
    """A stack whose tier gives one GPU a larger running limit than its own (64 here, 512 on an H100):
    the plan's shared pass table reaches 512, so the H100 candidate runs its 512 at a load that keeps
    more than 64 running, as the same plan with --max-batch 512 runs it."""
    stack = tmp_path / "vllm-tiered.yaml"
    stack.write_text("extends: vllm\nname: vllm-tiered\nmax_running_requests: 64\nmax_running_by_gpu:\n"
                     "  - {gpus_named: [H100], requests: 512}\nsources:\n  max_running_requests: a test\n"
                     "  max_running_by_gpu: a test\n")
    load = ("--rate", "40", "--requests", "300", "--prompt", "256", "--answer", "256")
    rc, out, err = run("plan", "Qwen/Qwen3-8B", "--gpu", "h100,a100", "--stack", str(stack), "--tp", "1",
                       "--precision", "bf16", *load, "-f", "json")
    assert rc == 0, err
    rows = {d["gpu"]: d for d in json.loads(out)["deployments"]}
    h100 = rows["H100 SXM"]
    assert h100["max_running"] == 512 and rows["A100 80GB SXM"]["max_running"] == 64
    rc, out, err = run("plan", "Qwen/Qwen3-8B", "--gpu", "h100", "--stack", str(stack), "--tp", "1", "--precision",
                       "bf16", "--max-batch", "512", *load, "-f", "json")
    assert rc == 0, err
    (given,) = [d for d in json.loads(out)["deployments"] if d["replicas"] == h100["replicas"]]
    assert given["max_running"] == 512 and given["p50_latency_s"] == h100["p50_latency_s"]
    assert given["p95_first_block_s"] == h100["p95_first_block_s"]


def test_the_stacks_list_names_the_defaults_by_gpu(run):
    """`dlmcost stacks`: each stack's tiers in its JSON as its file gives them, and in the table's running
    limit and prefills cells after the stack's own value, the values by the GPUs they hold on."""
    import csv
    import io

    rc, out, err = run("stacks", "-f", "json")
    assert rc == 0, err
    entries = {e["name"]: e for e in json.loads(out)}
    assert entries["vllm"]["max_running_by_gpu"] == [{"below_gib": 70, "requests": 256},
                                                     {"gpus_named": ["A100"], "requests": 256}]
    assert entries["vllm"]["prefill_chunk_by_memory"] == [{"below_gib": 70, "tokens": 2048},
                                                          {"gpus_named": ["A100"], "tokens": 2048}]
    assert entries["sglang"]["max_running_by_gpu"] == [] and len(entries["sglang"]["prefill_chunk_by_memory"]) == 3
    rc, out, err = run("stacks", "-f", "csv")
    cells = {r["stack"]: (r["running limit"], r["prefills"]) for r in csv.DictReader(io.StringIO(out))}
    assert cells["vllm"] == ("1024 (256: <70 GiB, A100)", "8,192/step beside (2,048: <70 GiB, A100)")
    assert cells["sglang"] == ("2048", "8,192/step before (2,048: <35 GiB; 4,096: <60 GiB; 16,384: >=160 GiB)")
    assert cells["vllm-dllm"] == ("1024 (256: <70 GiB, A100)", "-")


def test_the_requests_beside_a_prefill_workspace_by_hand():
    """floor((free - budget x bytes a token) / resident): 100 bytes free, a workspace of one token of
    10 bytes, 10 bytes a request: 9 fit, not 10; none where the workspace alone does not fit."""
    from dlmcost.engine.memory import budgeted_max_batch

    assert budgeted_max_batch(100.0, 10.0, 10.0, 1) == 9
    assert budgeted_max_batch(100.0, 10.0, 10.0, 3) == 7
    assert budgeted_max_batch(100.0, 10.0, 10.0, 11) == 0


def test_the_prefill_budget_phrase_counts_one_token_as_one():
    """'prompts prefilled 1 token a step', not '1 tokens' (a budget of one token is allowed)."""
    from dlmcost.render.evidence import prefill_chunk_phrase

    assert prefill_chunk_phrase(1, "option", "sglang", before=True) == (
        "prompts prefilled 1 token a step before the decodes, which wait for them (option, --prefill-chunk to change)")
    assert prefill_chunk_phrase(8192, "stack", "vllm").startswith("prompts prefilled 8,192 tokens a step beside")
