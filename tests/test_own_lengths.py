"""Each simulated request runs its own answer's passes (its class gives only the pass times): the
pass counts by hand, a closed loop of two answer lengths worked by hand, and a deployment's
requests served one at a time against the engine's own pass times."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dlmcost import api
from dlmcost.errors import DlmcostWarning
from dlmcost.serving import behaviour
from dlmcost.serving import deployment as dep
from dlmcost.serving.loads import BatchJob, ClosedLoop
from dlmcost.serving.simulate import ClassTable, draw_passes, simulate, token_passes

pytestmark = pytest.mark.usefixtures("bundled_offline")


def test_a_token_streaming_requests_passes_by_hand():
    """A class of answers of 10 tokens: 1 prompt pass, 10 later ones, its first token after the
    prompt pass. Answers of 5, 15 and 0.1 times its length: 1 + 5, 1 + 15 and 1 + 0 passes (the
    later ones rounded, none below what the first token needs), the first token after 1 pass."""
    t = ClassTable([11], [1], [0.0], [[0.0, 1.0]], lead=[1])
    p = token_passes(t, np.zeros(3, int), np.array([0.5, 1.5, 0.01]))
    assert p.nfe.tolist() == [6, 16, 1] and p.first.tolist() == [1, 1, 1]
    assert p.subset(np.array([1])).first.tolist() == [1]  # a replica's share keeps its first passes


def test_a_token_streaming_requests_later_passes_round_to_nearest_and_cover_its_first_output():
    """A class of 1 prompt pass and 10 later ones whose first output needs 3 passes (2 after the
    prompt's): scales 0.36 and 0.34 give 3.6 -> 4 and 3.4 -> 3 later passes (to nearest, NFE 5 and
    4); a scale of 0.01 (0.1 -> 0) still runs the 2 its first output needs, NFE 3."""
    t = ClassTable([11], [3], [0.0], [[0.0, 1.0]], lead=[1])
    p = token_passes(t, np.zeros(3, int), np.array([0.36, 0.34, 0.01]))
    assert p.nfe.tolist() == [5, 4, 3] and p.first.tolist() == [3, 3, 3]


def test_a_block_streaming_request_runs_its_own_answers_blocks():
    """Blocks of 4 tokens, a class of answers of 8 (2 blocks of 5 passes, after 2 prompt passes):
    answers of 3, 8 and 13 tokens run 1, 2 and 4 blocks of 5 passes, NFE 7, 12, 22, the first
    block after 2 + 5 = 7 passes; without their answers, every one the class's 12."""
    t = ClassTable([12], [7], [0.0], [[0.0, 1.0]], lead=[2], blocks=[2])
    rt = behaviour.RequestTable(t, 1, [4], True, answers=[8], block=4)
    cls = np.zeros(3, int)
    own = behaviour.request_passes(rt, cls, answers=np.array([3.0, 8.0, 13.0]))
    assert own.n_blocks.tolist() == [1, 2, 4] and own.nfe.tolist() == [7, 12, 22] and own.first.tolist() == [7] * 3
    assert behaviour.request_passes(rt, cls).nfe.tolist() == [12] * 3
    drawn = draw_passes(t, cls, 0.0, np.random.default_rng(0), None, np.array([3, 1, 2]))
    assert drawn.flat.tolist() == [5] * 6 and drawn.nfe.tolist() == [17, 7, 12]


def test_a_class_s_passes_spread_over_its_blocks_by_hand():
    """NFE 14, 2 prompt passes, 5 blocks: a mean of 2.4 a block, block k gets round(2.4 (k + 1))
    - round(2.4 k): 2 - 0, 5 - 2, 7 - 5, 10 - 7, 12 - 10 = 2, 3, 2, 3, 2; the first block final
    after 2 + 2 = 4 passes."""
    t = ClassTable([14], [4], [0.0], [[0.0, 1.0]], lead=[2], blocks=[5])
    drawn = draw_passes(t, np.zeros(1, int), 0.0, np.random.default_rng(0))
    assert drawn.flat.tolist() == [2, 3, 2, 3, 2] and drawn.first.tolist() == [4]


@pytest.mark.parametrize("budget", [None, 100])
def test_a_closed_loop_of_two_answer_lengths_by_hand(budget):
    """Two users without think time, answers of 2 and 4 tokens in a class of 3 (AR: a prompt pass
    that gives the first token, then a pass per answer token), every iteration 1 s. Each runs its
    own passes: 3 and 5. Request 0 ends at 3 and its user's next (an answer of 2) joins at once,
    first token at 4, done at 6; request 1 ends at 5, the next (4 tokens) first token at 6, done
    at 10. With the class's 4 passes each, both users' requests would end together at 4 and 8:
    the bursts this keeps apart. Under a prefill budget that holds every prompt (100 tokens a step,
    10-token prompts) the same."""
    extra = dict(prompt_tokens=[10], prefill_budget=budget) if budget else {}
    t = ClassTable([4], [1], [0.0], [[0.0] + [1.0] * 4], lead=[1], **extra)
    cls = np.zeros(4, int)
    passes = token_passes(t, cls, np.array([2, 4, 2, 4]) / 3)
    r = simulate(t, cls, 2, users=2, think_s=0.0, passes=passes, release="first-done")
    assert r.done_s.tolist() == pytest.approx([3, 5, 6, 10])
    assert r.first_block_s.tolist() == pytest.approx([1, 1, 4, 6])
    assert r.arrival_s.tolist() == pytest.approx([0, 0, 3, 5])
    alike = simulate(t, cls, 2, users=2, think_s=0.0, passes=None, release="first-done")
    assert alike.done_s.tolist() == pytest.approx([4, 4, 8, 8])


def test_a_deployments_requests_one_at_a_time_run_their_own_answers():
    """Answers of 10..15 tokens, three classes (10-11, 12-13, 14-15: 11, 13 and 15 tokens), served
    one at a time: request i takes its class's time alone, T(a_c) from `api.analyze`, plus (a_i - a_c)
    of its decode steps, (T - prefill) / (NFE - 1), after SGLang's first-token delay (Qwen2.5-7B's 28
    layers x the stack file's first_token_us_per_layer): the makespan is their sum, not six class times."""
    import yaml

    stack = yaml.safe_load((Path(__file__).resolve().parent.parent / "stacks" / "sglang.yaml").read_text("utf-8"))
    delay = 28 * stack["front_end"]["first_token_us_per_layer"] * 1e-6
    model, answers = "Qwen/Qwen2.5-7B", [10, 11, 12, 13, 14, 15]
    prep = dep.prepare(model, (np.full(6, 256.0), np.array(answers, float)), dep.Setup(gpu="h100", scheme="ar",
                                                                                        stack="sglang"))
    assert prep.sample.answer_values.tolist() == [11, 13, 15]
    alone, steps = [], []
    for a in answers:
        a_c = 11 if a <= 11 else 13 if a <= 13 else 15
        r = api.analyze(model, "h100", scheme="ar", prompt=256, gen=a_c, batch=1, stack="sglang")["results"][0]
        step = (r["time_s"] - r["passes"][0]["time_s"]) / (r["nfe"] - 1)
        alone.append(delay + r["time_s"] + (a - a_c) * step)
        steps.append(step)
    expected = sum(alone)
    point = dep.evaluate(prep, BatchJob(6, 1))
    assert point.makespan_s == pytest.approx(expected, rel=1e-9)
    # after its first token (the prefill's) come its a_i - 1 decode steps (NFE = 1 + a_i - 1), one
    # step between two of its a_i tokens (over its class's a_c it would be (a_i - 1) x step / (a_c - 1))
    gaps = [(a - 1) * step / (a - 1) for a, step in zip(answers, steps)]
    assert point.inter_block_s["mean"] == pytest.approx(np.mean(gaps), rel=1e-9)
    # twelve requests repeat the six in order, each with its own answer: twice the makespan
    assert dep.evaluate(prep, BatchJob(12, 1)).makespan_s == pytest.approx(2 * expected, rel=1e-9)
    # one user without think time sends the twelve one after another: each latency its own alone,
    # the mean over the measured window
    window = np.array(alone * 2)[behaviour.measured_window(12)]
    point = dep.evaluate(prep, ClosedLoop(1), requests=12)
    assert point.latency_s["mean"] == pytest.approx(window.mean(), rel=1e-9)


def test_a_lone_three_token_ar_answer_is_a_prefill_and_two_decode_steps():
    """AR, a 256-token prompt, a 3-token answer (the bare roofline): the prefill's logits give the
    first token, two decode steps the second and third (the third is sampled, never fed back), so
    NFE = 3. Served one at a time, a request's first token comes after the prefill, its answer two
    decode steps later, one step between tokens."""
    r = api.analyze("Qwen/Qwen2.5-7B", "h100", scheme="ar", prompt=256, gen=3, batch=1, stack="none")["results"][0]
    passes = {p["name"]: p for p in r["passes"]}
    assert r["nfe"] == 3
    assert (passes["prefill"]["count"], passes["step"]["count"]) == (1, 2)
    prefill, step = passes["prefill"]["time_s"], passes["step"]["time_s"]
    assert r["time_s"] == pytest.approx(prefill + 2 * step, rel=1e-12)
    prep = dep.prepare("Qwen/Qwen2.5-7B", (np.full(4, 256.0), np.full(4, 3.0)),
                       dep.Setup(gpu="h100", scheme="ar", stack="none"))
    point = dep.evaluate(prep, BatchJob(4, 1))
    assert point.ttfb_s["mean"] == pytest.approx(prefill, rel=1e-9)
    assert point.latency_s["mean"] == pytest.approx(prefill + 2 * step, rel=1e-9)
    assert point.inter_block_s["mean"] == pytest.approx(step, rel=1e-9)
    assert point.makespan_s == pytest.approx(4 * (prefill + 2 * step), rel=1e-9)


def test_a_lone_draft_verify_answer_is_a_prefill_and_its_verify_passes():
    """Self-speculative draft-verify, a 256-token prompt, a 9-token answer, 4 tokens a verify pass
    (blocks of 4 drafts, the bare roofline): the prefill's logits give the first token, two verify
    passes the other (9 - 1) / 4 = 2 x 4, so NFE = 3, not 1 + 9 / 4. Served one at a time, a
    request's first token comes after the prefill, its answer two verify passes later, the 8 gaps
    between its 9 tokens sharing those two passes."""
    r = api.analyze("Qwen/Qwen2.5-7B", "h100", scheme="draft-verify", prompt=256, gen=9, block=4, tpf=4,
                    stack="none")["results"][0]
    passes = {p["name"]: p for p in r["passes"]}
    assert r["nfe"] == 3
    assert (passes["prefill"]["count"], passes["verify"]["count"]) == (1, 2)
    prefill, verify = passes["prefill"]["time_s"], passes["verify"]["time_s"]
    with pytest.warns(DlmcostWarning, match="not published with draft-verify"):
        prep = dep.prepare("Qwen/Qwen2.5-7B", (np.full(4, 256.0), np.full(4, 9.0)),
                           dep.Setup(gpu="h100", scheme="draft-verify", block=4, tpf=4.0, stack="none"))
    point = dep.evaluate(prep, BatchJob(4, 1))
    assert point.ttfb_s["mean"] == pytest.approx(prefill, rel=1e-9)
    assert point.latency_s["mean"] == pytest.approx(prefill + 2 * verify, rel=1e-9)
    assert point.inter_block_s["mean"] == pytest.approx(2 * verify / 8, rel=1e-9)
    assert point.makespan_s == pytest.approx(4 * (prefill + 2 * verify), rel=1e-9)


def test_a_block_streaming_requests_gap_is_over_its_own_blocks():
    """LLaDA-8B, blocks of 32 tokens, answers 40, 64, 64, 100, 128, 128 in classes of 40, 76 and
    128 tokens (2, 3 and 4 blocks of 32 passes after 8 prompt passes: NFE 72, 104, 136), served
    one at a time: request i streams its ceil(a_i / 32) blocks 32 passes apart, so its gap
    between blocks is 32 x its class's pass time at batch 1, whatever its count of blocks (the
    64-token answers' 2 blocks, not their class's 3: counting 3 would halve their gap)."""
    with pytest.warns(DlmcostWarning, match="not published with block"):  # its quality unknown; its timing is
        prep = dep.prepare("GSAI-ML/LLaDA-8B-Instruct", (np.full(6, 256.0), np.array([40, 64, 64, 100, 128, 128], float)),
                           dep.Setup(gpu="h100", scheme="block", block=32))
    t = prep.table
    assert (t.nfe, t.lead, t.units) == ([72, 104, 136], [8, 8, 8], [2, 3, 4])
    gaps = [32 * t.pass_s[c][1] for c in prep.classes()]
    assert dep.evaluate(prep, BatchJob(6, 1)).inter_block_s["mean"] == pytest.approx(np.mean(gaps), rel=1e-9)
