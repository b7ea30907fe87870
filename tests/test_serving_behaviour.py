"""Serving behaviours of a stack that the simulator models, each against a schedule worked by hand:
a waiting request's first block beside a full batch (`first_block_outside_limit`, SGLang's dLLM
path)."""

from __future__ import annotations

import numpy as np
import pytest

from dlmcost.serving import behaviour
from dlmcost.serving import deployment as dep
from dlmcost.serving.simulate import ClassTable, RequestPasses, simulate


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv("DLMCOST_HARDWARE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def little(r):
    """Little's law for the requests in service, and arrival <= admission <= first block <= done."""
    assert r.in_service_s == pytest.approx(float(np.sum(r.done_s - r.start_s)), rel=1e-9)
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
