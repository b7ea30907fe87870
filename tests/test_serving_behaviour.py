"""Serving behaviours of a stack that the simulator models, each against a schedule worked by hand:
a waiting request's first block beside a full batch (`first_block_outside_limit`, SGLang's dLLM
path)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dlmcost.serving import behaviour
from dlmcost.serving import deployment as dep
from dlmcost.serving.simulate import ClassTable, RequestPasses, simulate
from dlmcost.serving.steptime import Decoding
from preemption_reference import out_of_batch  # noqa: E402


pytestmark = pytest.mark.usefixtures("bundled_offline")


def little(r):
    """Little's law for the requests in service, and arrival <= admission <= first block <= done."""
    assert r.in_service_s == pytest.approx(float(np.sum(r.done_s - r.start_s - out_of_batch(r))), rel=1e-9)
    assert (r.start_s >= r.arrival_s - 1e-9).all() and (r.first_block_s >= r.start_s - 1e-9).all()
    assert (r.done_s >= r.first_block_s - 1e-9).all()
    return r


def _two_requests(release: str, ahead: bool):
    # one class: a prompt pass, blocks of 2 and 3 passes (NFE 6, first block after 3); an
    # iteration of b requests takes 1 s (b = 1) or 1.5 s (b = 2); A and B at t = 0, limit 1
    table = ClassTable([6], [3], [0.0], [[0.0, 1.0, 1.5]], lead=[1], blocks=[2])
    passes = RequestPasses.from_rows([1, 1], [[2, 3], [2, 3]])
    return little(simulate(table, np.zeros(2, int), 1, arrivals_s=np.zeros(2), passes=passes, release=release,
                           first_block_outside_limit=ahead))


def test_first_block_outside_limit_first_done_by_hand():
    """First-done. Without it: A runs 6 passes of 1 s (first block at 3, done at 6), then B
    (first block at 9, done at 12). With it: B may join at iteration k once A (finishing at
    iteration 6) ends by k + 3, its first block: k = 3. A alone for 3 s; then A and B together,
    3 iterations of 1.5 s to 7.5: A done, B's first block (its 3rd pass); then B alone for 3 s to 10.5."""
    r = _two_requests("first-done", False)
    assert r.done_s.tolist() == pytest.approx([6.0, 12.0]) and r.first_block_s.tolist() == pytest.approx([3.0, 9.0])
    r = _two_requests("first-done", True)
    assert r.start_s.tolist() == pytest.approx([0.0, 3.0])
    assert r.first_block_s.tolist() == pytest.approx([3.0, 7.5])
    assert r.done_s.tolist() == pytest.approx([7.5, 10.5])
    assert r.busy_s == pytest.approx(10.5)


def test_first_block_outside_limit_synchronous_by_hand():
    """Synchronous rounds. Round 1: A alone, its prompt pass and first block, 3 passes of 1 s.
    Round 2: A is in its last block, so B joins (the limit counts the members that go on): A's
    3 passes and B's 1 + 2 run together, 3 iterations of 1.5 s, to 7.5. Round 3: B alone, 3 s, to
    10.5 (as first-done, since both rounds end together here)."""
    r = _two_requests("synchronous", True)
    assert r.start_s.tolist() == pytest.approx([0.0, 3.0])
    assert r.first_block_s.tolist() == pytest.approx([3.0, 7.5])
    assert r.done_s.tolist() == pytest.approx([7.5, 10.5])
    r = _two_requests("synchronous", False)
    assert r.done_s.tolist() == pytest.approx([6.0, 12.0])


def test_first_block_outside_limit_at_a_limit_of_three_by_hand():
    """First-done, limit 3, five requests at t = 0 with 10, 4, 6, 5 and 3 passes, each streaming its
    first block after 2; every iteration takes 1 s (so times are iteration numbers). A newcomer
    may join at iteration k when fewer than 3 of the requests in flight finish after k + 2, i.e.
    when the 3rd-latest finish (the one at the running limit, not the latest) is by k + 2.
    k = 0: A, B, C join (finishing at 10, 4, 6). D: the 3rd-latest of {10, 4, 6} is 4 > 0 + 2, so
    D waits to k = 4 - 2 = 2 and joins (finishing at 2 + 5 = 7, first block at 4). E: the
    3rd-latest of {10, 4, 6, 7} is 6 > 2 + 2, so E waits to k = 6 - 2 = 4, when B is done; the
    3rd-latest of {10, 6, 7} is 6 <= 4 + 2: E joins (finishing at 4 + 3 = 7, first block at 6).
    Waiting for the latest finish (A's, 10) instead would hold D and E until B and C leave:
    both done at 9."""
    table = ClassTable([10], [2], [0.0], [[0.0] + [1.0] * 6])
    nfe = [10, 4, 6, 5, 3]
    passes = RequestPasses.from_rows([0] * 5, [[2, n - 2] for n in nfe])
    r = little(simulate(table, np.zeros(5, int), 3, arrivals_s=np.zeros(5), passes=passes, release="first-done",
                        first_block_outside_limit=True))
    assert r.start_s.tolist() == [0.0, 0.0, 0.0, 2.0, 4.0]
    assert r.first_block_s.tolist() == [2.0, 2.0, 2.0, 4.0, 6.0]
    assert r.done_s.tolist() == [10.0, 4.0, 6.0, 7.0, 7.0]
    assert r.busy_s == 10.0


def test_a_tokens_per_forward_spread_never_takes_more_passes_than_the_block_has_tokens():
    """SDAR-4B's block decoding on SGLang's usual path (a prompt in one prefill), blocks of 4 at 2
    tokens per forward (its engine count: a prefill,
    then 3 passes per block, the store pass included), drawn with a spread of 4: a block takes at
    least 1 pass and at most 4, its length (a pass commits a token at least; docs/plan.md), and
    the cap is reached, not only respected, at this spread. What serve and plan simulate."""
    n = 200
    prep = dep.prepare("JetLM/SDAR-4B-Chat", (np.full(n, 256.0), np.full(n, 128.0)),
                       dep.Setup(scheme="block", block=4, tpf=2.0, tpf_spread=4.0, max_running=8, stack="sglang"))
    assert prep.table.nfe == [1 + 32 * 3] and prep.requests.max_per_block == [4]
    drawn = behaviour.request_passes(prep.requests, prep.classes(), 4.0, np.random.default_rng(0)).flat
    assert drawn.min() == 1 and drawn.max() == 4


def test_an_answer_runs_whole_blocks_rounded_up():
    """A block-streaming scheme decodes the block that holds the answer's last token: ceil(a / 32)
    blocks of 32 (1 and 31 tokens: one block; 33 and 40: two; 100: four), never the nearest
    number of blocks; a token-streaming scheme runs the answer itself. In a deployment of answers
    of 40 tokens: 2 blocks a request, streamed as 2 pieces."""
    block = Decoding("block", 32, 2.0)
    assert behaviour.canvases(block, [1, 16, 31, 32, 33, 40, 48, 100]) == [32, 32, 32, 32, 64, 64, 64, 128]
    assert behaviour.canvases(Decoding("ar", None, 1.0), [1, 33, 100]) == [1, 33, 100]
    prep = dep.prepare("JetLM/SDAR-4B-Chat", (np.full(10, 256.0), np.full(10, 40.0)), dep.Setup(scheme="block",
                                                                                                   block=32, tpf=2.0))
    assert prep.table.blocks == [2] and prep.table.units == [2]
    # its first block is final after the prompt's passes (SDAR's default stack: one per block of
    # 32, ceil(256 / 32) = 8) and one of the 2 blocks' share of the others, not 32 / 40 of them
    t = prep.table
    assert t.lead == [8] and t.first_passes == [math.ceil(8 + (t.nfe[0] - 8) / 2)]


def test_the_measured_window_by_hand():
    """The first 10% and the last 5% of a synthetic load's requests are left out: of 2,000, the
    200th to the 1,899th (0-based); of 100, the 10th to the 94th; one request is kept alone."""
    assert behaviour.measured_window(2000) == slice(200, 1900)
    assert behaviour.measured_window(100) == slice(10, 95)
    assert behaviour.measured_window(1) == slice(0, 1)


def test_the_completion_rate_by_hand():
    """Completions per second between the first and the last of the window's completion times
    (those after the first, up to the last, over the time between): completions at 1, 2, 4, 8
    and 9 s, the window the 2nd to the 4th (2, 4, 8): 2 completions (4, 8) in 6 s, 1/3 a second.
    All of the window at one time: every completion over the run's length, 5 in 10 s."""
    done = np.array([9.0, 1.0, 4.0, 2.0, 8.0])  # in any order
    assert behaviour.completion_rate(done, slice(1, 4), 10.0) == pytest.approx(1 / 3)
    assert behaviour.completion_rate(np.array([1.0, 3.0, 3.0, 3.0, 9.0]), slice(1, 4), 10.0) == pytest.approx(0.5)


def test_a_window_inside_one_wave_is_not_read_as_a_rate():
    """Six requests finish 10 ms apart from 20 s (one wave: they arrived 10 ms apart and ran 20 s),
    two more at 40 s; the window (the 2nd to the 5th) spans 30 ms, less than the 20 s the earliest
    took: not 3 completions in 30 ms (100 a second) but the 5 up to 20.04 s over 20.04 s."""
    done = np.array([20.0, 20.01, 20.02, 20.03, 20.04, 20.05, 40.0, 40.0])
    assert behaviour.completion_rate(done, slice(1, 5), 40.0) == pytest.approx(5 / 20.04)


def test_a_window_as_long_as_the_earliest_life_is_read_as_a_rate():
    """Completions at 2, 3, 4, 5, 6 s, the window the 2nd to the 4th: they span 2 s, as long as the
    earliest request's life (2 s), not shorter: a steady rate, 2 completions (4, 5) in 2 s; at
    4.5, 5, 5.5 s after one at 4 s they span 1 s, under its 4 s: one wave, the 4 up to 5.5 s over 5.5 s."""
    assert behaviour.completion_rate(np.array([2.0, 3.0, 4.0, 5.0, 6.0]), slice(1, 4), 6.0) == pytest.approx(1.0)
    assert behaviour.completion_rate(np.array([4.0, 4.5, 5.0, 5.5, 6.0]), slice(1, 4), 6.0) == pytest.approx(4 / 5.5)


AR_MODEL = "Qwen/Qwen2.5-7B"


@pytest.mark.parametrize("prompt, fits", [(8000, 4), (30000, 1)])
def test_memory_holds_as_many_requests_as_fit(prompt, fits):
    """Each request holds 1 / (the largest batch of its length that fits) of the memory: with more
    users than that and a running limit far above it (vLLM's 256), as many requests run at once as
    analyze says fit on an L4 (Qwen2.5-7B, 8,000- or 30,000-token prompts: 4, or 1 alone, one
    after the other), prompts in one pass each so that all of them start together."""
    from dlmcost import api

    analysed = api.analyze(AR_MODEL, "l4", scheme="ar", prompt=prompt, gen=64, stack="vllm").results[0]
    assert analysed.memory.max_batch == fits
    p = dep.prepare(AR_MODEL, (np.full(10, float(prompt)), np.full(10, 64.0)),
                    dep.Setup(gpu="l4", stack="vllm", prefill_chunk=0))
    assert p.requests.memory_fits == fits and p.max_running == 256
    r = little(behaviour.run(p.table, np.zeros(3 * fits, int), p.max_running, p.release, None, users=2 * fits))
    assert int(np.sum(r.start_s == 0.0)) == fits
    ends = np.sort(r.done_s)
    assert np.sort(r.start_s)[fits:].tolist() == pytest.approx(ends[:2 * fits].tolist())  # each in one's place


def test_first_block_outside_limit_holds_at_most_twice_the_limit():
    """Many requests at once, limit 3: never more than 6 in flight, and never more than 3 of them
    past their first block (checked at every admission and first block, from the record)."""
    rng = np.random.default_rng(1)
    n, cap = 60, 3
    table = ClassTable([9], [3], [0.0], [[0.0] + [0.1 + 0.01 * b for b in range(1, 2 * cap + 1)]], lead=[1], blocks=[4])
    passes = RequestPasses.from_rows([1] * n, [list(rng.integers(1, 4, 4)) for _ in range(n)])
    for release in ("first-done", "synchronous"):
        r = little(simulate(table, np.zeros(n, int), cap, arrivals_s=np.sort(rng.uniform(0, 2, n)), passes=passes,
                            release=release, first_block_outside_limit=True))
        for t in np.concatenate([r.start_s, r.first_block_s]):
            in_flight = np.count_nonzero((r.start_s <= t + 1e-12) & (r.done_s > t + 1e-12))
            past_first = np.count_nonzero((r.first_block_s <= t + 1e-12) & (r.done_s > t + 1e-12))
            assert in_flight <= 2 * cap and past_first <= cap


@pytest.mark.filterwarnings("ignore:.*was not published with block")  # plain block decoding: the hand count
def test_the_sglang_dllm_stack_sets_it():
    """The sglang-dllm stack's `first_block_outside_limit` reaches the deployment, whose pass
    table then runs to twice its limit on running requests (the newcomer beside a full batch)."""
    lengths = (np.full(20, 256.0), np.full(20, 64.0))
    setup = dict(gpu="h100", scheme="block", block=32, tpf=2.0)
    p = dep.prepare("GSAI-ML/LLaDA-8B-Instruct", lengths, dep.Setup(stack="sglang-dllm", max_running=1, **setup))
    assert (p.max_running, p.first_block_outside_limit) == (1, True)
    assert len(p.table.pass_s[0]) == 2 + 1
    assert dep.describe(p)["first_block_outside_limit"] is True
    p = dep.prepare("GSAI-ML/LLaDA-8B-Instruct", lengths, dep.Setup(stack="sglang", max_running=4, **setup))
    assert p.first_block_outside_limit is False and len(p.table.pass_s[0]) == 4 + 1


def test_the_header_says_so(capsys):
    from dlmcost.cli import main

    args = ["serve", "inclusionAI/LLaDA2.0-mini", "--gpu", "b200", "--tpf", "2.1", "--prompt", "64", "--answer", "64",
            "--job", "4", "--parallel", "2"]
    assert main([*args, "--stack", "sglang-dllm"]) == 0
    assert "running ≤ 128 (+ first blocks) per replica (sglang-dllm's default, --max-running to change;" \
        in " ".join(capsys.readouterr().out.split())
    assert main([*args, "--stack", "sglang-dllm", "--max-running", "1"]) == 0
    assert "running ≤ 1 (+ first blocks) per replica (option;" in " ".join(capsys.readouterr().out.split())
    assert main([*args, "--stack", "sglang"]) == 0
    assert "(+ first blocks)" not in capsys.readouterr().out


# --- the prompt prefilled one block per forward (prompt_prefill: block-chunks) ----------------------


def test_prompt_in_block_chunks_by_hand():
    """Class 0: a 100-token prompt prefilled in one pass, then 3 blocks of 4 passes (NFE 13, first
    block after 5). In blocks of 32 the prompt takes ceil(100 / 32) = 4 passes: NFE 16, first block
    after 8, and the first pass costs what the others do. Class 1: a full-canvas class with no
    prompt-only pass (lead 0) is left alone."""
    t = ClassTable([13, 10], [5, 10], [0.0, 0.0], [[0.0, 1.0], [0.0, 2.0]], [[0.0, 3.0], [0.0, 2.5]],
                   lead=[1, 0], blocks=[3, 1], units=[3, 1])
    c = behaviour.prompt_in_block_chunks(t, [100, 100], 32)
    assert (c.nfe, c.first_passes, c.lead) == ([16, 10], [8, 10], [4, 0])
    assert c.first_pass_s == [[0.0, 1.0], [0.0, 2.5]] and c.pass_s == t.pass_s and c.blocks == [3, 1]


@pytest.mark.filterwarnings("ignore:.*was not published with block")  # plain block decoding: the hand count
def test_the_sglang_dllm_stack_prefills_one_block_per_forward(monkeypatch):
    """LLaDA-8B, a 500-token prompt, blocks of 32 at 2 tokens per forward: sglang-dllm prefills the
    prompt in ceil(500 / 32) = 16 passes in place of one, so a lone request's first block comes
    after 16 + 16 passes of one block step each (no pass costs more): TTFB = 32 x pass_s[1]."""
    lengths = (np.full(20, 500.0), np.full(20, 64.0))
    setup = dict(gpu="h100", scheme="block", block=32, tpf=2.0)
    p = dep.prepare("GSAI-ML/LLaDA-8B-Instruct", lengths, dep.Setup(stack="sglang-dllm", **setup))
    t = p.table
    assert (t.lead, t.first_passes, t.nfe, p.prompt_prefill) == ([16], [32], [16 + 32], "block-chunks")
    assert t.first_pass_s == t.pass_s
    one = dep.evaluate(p, dep.BatchJob(3, 1))
    assert one.ttfb_s["mean"] == pytest.approx(32 * t.pass_s[0][1], rel=1e-9)
    assert one.latency_s["mean"] == pytest.approx(48 * t.pass_s[0][1], rel=1e-9)
    plain = dep.prepare("GSAI-ML/LLaDA-8B-Instruct", lengths, dep.Setup(stack="sglang", **setup))
    assert (plain.table.lead, plain.table.first_passes, plain.prompt_prefill) == ([1], [17], "one-pass")


def test_an_autoregressive_decoding_on_the_sglang_dllm_stack_prefills_in_one_pass():
    """The stack's block-chunked prompt needs blocks: an autoregressive decoding (no blocks, tokens
    streamed) served on sglang-dllm prefills its prompt in one pass, as on any stack."""
    lengths = (np.full(10, 500.0), np.full(10, 8.0))
    p = dep.prepare("Qwen/Qwen2.5-7B", lengths, dep.Setup(gpu="h100", stack="sglang-dllm"))
    assert (p.prompt_prefill, p.table.lead) == ("one-pass", [1])


def test_a_replica_runs_its_first_blocks_outside_the_limit_when_told():
    """`behaviour.run` passes the stack's first_block_outside_limit on. Two requests at once, a
    limit of 1, 6 passes each with the first block after 3, a pass 1 s alone and 1.5 s beside
    another: in turn, 6 and 12 s (the second's first block at 9 s); with the first block outside
    the limit, the second's first block runs beside the first's last 3 passes (3 + 3 x 1.5 = 7.5 s
    for both), then its last 3 alone: 10.5 s."""
    table = ClassTable([6], [3], [0.0], [[0.0, 1.0, 1.5]], lead=[1], blocks=[2])
    two = dict(arrivals_s=np.zeros(2))
    in_turn = behaviour.run(table, np.zeros(2, int), 1, "first-done", None, False, **two)
    beside = behaviour.run(table, np.zeros(2, int), 1, "first-done", None, True, **two)
    assert in_turn.done_s.tolist() == [6.0, 12.0] and in_turn.first_block_s.tolist() == [3.0, 9.0]
    assert beside.done_s.tolist() == [7.5, 10.5] and beside.first_block_s.tolist() == [3.0, 7.5]


def test_a_synchronous_cohort_takes_the_next_first_block_as_the_last_block_starts():
    """The general synchronous loop (a prefill dispatch row sends it there) with the first block
    outside a limit of 1: two requests of 2 + 3 passes (a lead pass, then blocks), 1 s a pass alone,
    1.5 s beside another: the second joins as the first starts its last block, at 3 s, both then at
    1.5 s a pass to 7.5 s, the second's last block alone to 10.5 s, as the one-kind loop runs it."""
    table = ClassTable([6], [3], [0.0], [[0.0, 1.0, 1.5]], lead=[1], blocks=[2], prefill_step_s=[[0.0, 0.0, 0.0]])
    passes = RequestPasses.from_rows([1, 1], [[2, 3], [2, 3]])
    r = simulate(table, np.zeros(2, int), 1, passes=passes, release="synchronous", first_block_outside_limit=True,
                 arrivals_s=np.zeros(2))
    assert (r.start_s.tolist(), r.first_block_s.tolist(), r.done_s.tolist()) == ([0.0, 3.0], [3.0, 7.5], [7.5, 10.5])


@pytest.mark.parametrize("release", ["synchronous", "first-done"])
@pytest.mark.parametrize("dispatch", [False, True])
def test_two_requests_whose_memory_holds_one_run_in_turn(release, dispatch):
    """Each request's memory share 0.6: two do not fit (1.2 > 1), so under a limit of 2 the second
    waits for the first: 4 passes of 1 s each, 4 and 8 s, under either release and either loop."""
    steps = dict(prefill_step_s=[[0.0, 0.0, 0.0]]) if dispatch else {}
    table = ClassTable([4], [4], [0.6], [[0.0, 1.0, 1.5]], **steps)
    r = simulate(table, np.zeros(2, int), 2, release=release, arrivals_s=np.zeros(2))
    assert (r.start_s.tolist(), r.done_s.tolist()) == ([0.0, 4.0], [4.0, 8.0])


def test_drawn_passes_round_at_random_to_keep_the_mean():
    """64 passes over 4 blocks after a lead pass: 16.25 a block, drawn with (next to) no spread as 16
    or 17, 17 one time in four, so the mean stays 16.25 (20,000 requests: 80,000 blocks, a standard
    error of 0.0015)."""
    from dlmcost.serving.simulate import draw_passes

    table = ClassTable([66], [17], [0.0], [[0.0, 1.0]], lead=[1], blocks=[4])
    flat = draw_passes(table, np.zeros(20000, int), 1e-6, np.random.default_rng(0)).flat
    assert set(np.unique(flat).tolist()) == {16, 17}
    assert flat.mean() == pytest.approx(16.25, abs=0.01)
