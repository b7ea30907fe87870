"""Prefills before the decodes (SGLang's scheduler: `get_next_batch_to_run` runs a prefill batch
whenever one can be formed, and the running requests' decode batch only when none can): the
simulation's schedule against a brute-force replay of the rule (tests/replay.py) and against
schedules worked by hand, and its two loops against each other to the last bit."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from dlmcost.serving import behaviour
from dlmcost.serving.simulate import ClassTable, simulate

sys.path.insert(0, str(Path(__file__).parent))
from replay import replay_prefill_first  # noqa: E402  (the brute-force reference)


def _table(answers, prompts, steady, whole_lift, budget=None, step=None) -> ClassTable:
    """Token-streaming classes: a one-pass prefill (lead 1) whose first pass adds whole_lift to
    the steady pass, the first token after it, answers[c] tokens in all; under a budget, the
    prompts one stream of tokens; prefills before the decodes."""
    first_s = [[s + w for s, w in zip(sr, wr)] for sr, wr in zip(steady, whole_lift)]
    k = len(answers)
    t = ClassTable(list(answers), [1] * k, [0.0] * k, steady, first_s, lead=[1] * k,
                   prefill_step_s=None if step is None else [list(step)] * k)
    if budget is not None:
        t = behaviour.prompt_in_token_chunks(t, list(prompts), budget)
    return replace(t, prefill_first=True)


@pytest.mark.parametrize("seed", range(40))
def test_prefill_first_against_a_brute_force_replay(seed):
    """One class (the loop of its own) or two (the general loop), a budget that cuts prompts into
    pieces or none, a prefill forward's dispatch or none, open or closed loop: the replay's
    completion and first-token times."""
    rng = np.random.default_rng(7000 + seed)
    classes = 1 + seed % 2
    cap = int(rng.integers(1, 9))
    answers = [int(rng.integers(1, 12)) for _ in range(classes)]
    budget = [None, 8, 64][seed % 3]
    prompts = [int(rng.integers(1, 3 * (budget or 30))) for _ in range(classes)]
    steady = [[0.0] + [0.01 + rng.uniform(0.001, 0.004) * b for b in range(1, cap + 1)] for _ in range(classes)]
    whole_lift = [[0.0] + [rng.uniform(0.02, 0.2) * b for b in range(1, cap + 1)] for _ in range(classes)]
    step = [0.0] + [0.003 + 0.0002 * b for b in range(1, cap + 1)] if seed % 4 == 1 else None
    table = _table(answers, prompts, steady, whole_lift, budget, step)
    n = int(rng.integers(1, 80))
    cls = rng.integers(0, classes, n)
    if seed % 2 == 0 or seed % 5 == 0:
        load = dict(arrivals=np.cumsum(rng.exponential(float(rng.choice([0.005, 0.05, 0.3])), n)))
        r = simulate(table, cls, cap, arrivals_s=load["arrivals"])
    else:
        load = dict(users=int(rng.integers(1, 2 * cap + 2)), think_s=float(rng.choice([0.0, 0.1])))
        r = simulate(table, cls, cap, **{"users": load["users"], "think_s": load["think_s"]})
    done, ttfb = replay_prefill_first(answers, prompts, steady, whole_lift, cls.tolist(), cap, budget, step=step,
                                      **load)
    assert r.done_s.tolist() == pytest.approx(done, rel=1e-9, abs=1e-12)
    assert r.first_block_s.tolist() == pytest.approx(ttfb, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("seed", range(24))
def test_prefill_first_one_kind_loop_is_the_general_loop(seed, monkeypatch):
    """One class, prefills before the decodes: the loop of its own gives the general loop's
    schedule to the last bit, under a budget (prompts in pieces or several to an iteration) or
    not, a prefill forward's dispatch or not, a receive interval or not, memory that binds or not,
    a front end or not, open or closed loop."""
    from test_plan_speed import _assert_one_kind_loop_is_the_general_loop, _one_kind_load

    rng = np.random.default_rng(8000 + seed)
    cap = int(rng.integers(1, 24))
    budget = [None, 8, 64, 512][seed % 4]
    prompt = int(rng.integers(1, 6 * (budget or 100)))
    steady = [[0.0] + [0.01 + 0.001 * b for b in range(1, cap + 1)]]
    whole_lift = [[0.0] + [0.02 + 0.002 * b for b in range(1, cap + 1)]]
    step = [0.0] + [0.004 + 0.0001 * b for b in range(1, cap + 1)] if seed % 3 == 0 else None
    table = _table([int(rng.integers(1, 40))], [prompt], steady, whole_lift, budget, step)
    table = replace(table, mem_share=[float(rng.choice([0.0, 1 / 8, 0.3]))])
    n = int(rng.integers(1, 200))
    _assert_one_kind_loop_is_the_general_loop(monkeypatch, table, np.zeros(n, int), cap, cap,
                                              recv_interval=1 if seed % 3 == 2 else 3,
                                              **_one_kind_load(rng, seed, n, cap, 700))


def _b_prompts(prompt: int, budget: int, first: bool = True):
    """Two requests at 0 with room for both, each a `prompt`-token prompt under a budget of
    `budget` tokens an iteration, 3 tokens of answer; an iteration of b requests 1 s whatever b,
    a whole prompt's prefill adding 9 s per request (first_pass_s[b] = 1 + 9 b)."""
    table = _table([3], [prompt], [[0.0, 1.0, 1.0]], [[0.0, 9.0, 18.0]], budget)
    return simulate(replace(table, prefill_first=first), np.zeros(2, int), 2, arrivals_s=np.zeros(2))


def test_short_prompts_prefilled_before_the_decodes_by_hand():
    """Two 600-token prompts, a budget of 1,000: R1's 600 tokens and R2's first 400 in the first
    iteration, 1 + (600 + 400) x 18 / 600 / 2 = 16 s: R1's first token at 16. R2's last 200 alone
    (R1's decode waits): 1 + 200 x 9 / 600 = 4 s, to 20: R2's first token. Then decodes of 1 s for
    both: done at 21 + 1 = 22, both. Beside the decodes (the other engines), R1's first decode
    runs with R2's last piece: R1 done at 21."""
    r = _b_prompts(600, 1000)
    assert r.first_block_s.tolist() == pytest.approx([16.0, 20.0])
    assert r.done_s.tolist() == pytest.approx([22.0, 22.0])
    assert r.busy_s == pytest.approx(22.0)
    beside = _b_prompts(600, 1000, first=False)
    assert beside.done_s.tolist() == pytest.approx([21.0, 22.0])


def test_a_long_prompt_s_pieces_stall_the_decodes_by_hand():
    """Two 1,500-token prompts, a budget of 1,000: R1's first 1,000 tokens alone, 1 + 9 x 1000 /
    1500 = 7 s; R1's last 500 and R2's first 500, 1 + (500 + 500) x 18 / 1500 / 2 = 7 s, to 14:
    R1's first token; R2's last 1,000 alone, 1 + 6 = 7 s, to 21: R2's first token, R1's first
    decode not yet run; then decodes of 1 s: both done at 23."""
    r = _b_prompts(1500, 1000)
    assert r.first_block_s.tolist() == pytest.approx([14.0, 21.0])
    assert r.done_s.tolist() == pytest.approx([23.0, 23.0])
    assert r.start_s.tolist() == pytest.approx([0.0, 7.0])


def test_a_burst_s_time_per_output_token_is_the_prefills_after_its_own_by_hand():
    """Four requests at once, a budget of one prompt an iteration (100 tokens), 3 tokens each: four
    prefill iterations of 1 + 9 = 10 s (first tokens at 10, 20, 30, 40), then two decodes of all
    four, 1 s each: all done at 42. The first request's time per output token is (42 - 10) / 2 =
    16 s, the last's (42 - 40) / 2 = 1 s. Beside the decodes each decode would ride on the next
    prefill's iteration: the first request done at 30."""
    table = _table([3], [100], [[0.0] + [1.0] * 4], [[0.0] + [9.0 * b for b in range(1, 5)]], 100)
    r = simulate(table, np.zeros(4, int), 4, arrivals_s=np.zeros(4))
    assert r.first_block_s.tolist() == pytest.approx([10.0, 20.0, 30.0, 40.0])
    assert r.done_s.tolist() == pytest.approx([42.0] * 4)
    beside = simulate(replace(table, prefill_first=False), np.zeros(4, int), 4, arrivals_s=np.zeros(4))
    assert beside.done_s[0] == pytest.approx(30.0)


def test_a_request_whose_one_token_is_its_prefill_s_leaves_with_it():
    """One token of answer: done when its prefill ends (10 s, 20 s), nothing decoded."""
    table = _table([1], [100], [[0.0, 1.0, 1.0]], [[0.0, 9.0, 18.0]], 100)
    r = simulate(table, np.zeros(2, int), 2, arrivals_s=np.zeros(2))
    assert r.done_s.tolist() == pytest.approx([10.0, 20.0]) and r.first_block_s.tolist() == r.done_s.tolist()


def test_prefill_first_is_refused_where_it_is_not_simulated():
    table = _table([3], [100], [[0.0, 1.0, 1.0]], [[0.0, 9.0, 18.0]], 100)
    with pytest.raises(ValueError, match="first-done release only"):
        simulate(table, np.zeros(2, int), 2, arrivals_s=np.zeros(2), release="synchronous")
    with pytest.raises(ValueError, match="first blocks outside the limit"):
        simulate(table, np.zeros(2, int), 2, arrivals_s=np.zeros(2), first_block_outside_limit=True)
    late = replace(table, first_passes=[2])  # a first output after a pass past the prefill
    with pytest.raises(ValueError, match="first output after the prefill"):
        simulate(late, np.zeros(2, int), 2, arrivals_s=np.zeros(2))


@pytest.mark.parametrize("budget", [False, True])
def test_prefill_first_with_kv_on_demand_is_the_iteration_by_iteration_reference(budget):
    """K/V on demand, memory that binds: preemptions by the latest admitted, recomputed on
    readmission, the K/V growing only in decode iterations; several classes, each request its own
    passes, open and closed loop: the reference walked iteration by iteration."""
    from preemption_reference import prefill_first_by_iteration
    from test_preemption import _random_case

    preempted = 0
    for seed in range(150):
        table, cls, cap, passes, nfe, first, load = _random_case(seed, budget)
        if budget:  # every class's prompt in the stream
            table = replace(table, prompt_tokens=[max(1, p) for p in table.prompt_tokens])
        table = replace(table, prefill_first=True)
        ones = np.ones(len(cls), np.int64)  # its first output its prefill's
        passes = type(passes)(passes.lead, passes.flat, passes.n_blocks, ones)
        r = simulate(table, cls, cap, passes=passes, **load)
        done, first_out, pre = prefill_first_by_iteration(table, cls, cap, nfe.tolist(), load.get("arrivals_s"),
                                                          load.get("users"), load.get("think_s", 0.0))
        assert r.preemptions == pre, seed
        np.testing.assert_allclose(r.done_s, done, rtol=1e-9, err_msg=str(seed))
        np.testing.assert_allclose(r.first_block_s, first_out, rtol=1e-9, err_msg=str(seed))
        preempted += pre > 0
    assert preempted > 30  # the cases do preempt


@pytest.mark.usefixtures("bundled_offline")
@pytest.mark.parametrize("stack, before", [("sglang", True), ("sglang-pcg", True), ("vllm", False)])
def test_serve_says_where_the_prefills_run_and_the_json_records_it(run, stack, before):
    """SGLang's stacks run the prefills before the decodes, vLLM's beside them: the header says
    which, and the JSON's prefill_first records it."""
    import json

    args = ("serve", "Qwen/Qwen3-8B", "--gpu", "h100", "--rate", "1", "--requests", "200", "--stack", stack)
    rc, out, err = run(*args)
    assert rc == 0, err
    assert ("before the decodes, which wait for them" if before else "beside the decodes") in " ".join(out.split())
    rc, out, err = run(*args, "-f", "json")
    assert json.loads(out)["deployments"][0]["deployment"]["prefill_first"] is before


@pytest.mark.usefixtures("bundled_offline")
def test_a_diffusion_decoding_on_sglang_does_not_run_its_prefills_first(run):
    """Only decodings that stream tokens: a block-diffusion request's prompt pass is its first
    block's, which SGLang's dLLM batches weigh as every other pass."""
    import json

    rc, out, err = run("serve", "GSAI-ML/LLaDA-8B-Instruct", "--gpu", "h100", "--rate", "1", "--requests", "200",
                       "--stack", "sglang-dllm", "-f", "json")
    assert rc == 0, err
    assert json.loads(out)["deployments"][0]["deployment"]["prefill_first"] is False


@pytest.mark.usefixtures("bundled_offline")
def test_plan_records_each_decoding_s_prefills(run):
    import json

    rc, out, err = run("plan", "Qwen/Qwen3-8B", "--gpu", "h100", "--rate", "2", "--tp", "1", "--precision", "bf16",
                       "--requests", "200", "-f", "json")
    assert rc == 0, err
    assert json.loads(out)["search"]["prefill_first"] == {"ar": True}


@pytest.mark.usefixtures("bundled_offline")
def test_a_request_without_a_prompt_pass_keeps_the_decodes_beside(run):
    """A 0-token prompt has no prompt pass: such a request would start decoding at the next decode
    batch, a time its admission cannot fix, so its table runs the decodes beside the prefills, and
    the header and the JSON say so."""
    import json

    args = ("serve", "Qwen/Qwen3-8B", "--gpu", "h100", "--rate", "1", "--requests", "200", "--prompt", "0",
            "--answer", "64", "--stack", "sglang")
    rc, out, err = run(*args, "-f", "json")
    assert rc == 0, err
    assert json.loads(out)["deployments"][0]["deployment"]["prefill_first"] is False
    rc, out, err = run(*args)
    assert "beside the decodes" in " ".join(out.split())


def test_stacks_list_where_each_engine_runs_its_prefills(run):
    """`dlmcost stacks` says each engine's prompt tokens a step and whether its decodes wait for
    the prefills (SGLang's) or run beside them (vLLM's), from the stack files."""
    import csv
    import io
    import json

    rc, out, err = run("stacks", "-f", "json")
    assert rc == 0, err
    entries = {e["name"]: e for e in json.loads(out)}
    assert (entries["sglang"]["prefill_first"], entries["sglang-pcg"]["prefill_first"]) == (True, True)
    assert (entries["vllm"]["prefill_first"], entries["sglang-dllm"]["prefill_first"]) == (False, False)
    assert entries["sglang"]["prefill_chunk_tokens"] == entries["vllm"]["prefill_chunk_tokens"] == 8192
    rc, out, err = run("stacks", "-f", "csv")
    cells = {row["stack"]: row["prefills"] for row in csv.DictReader(io.StringIO(out))}
    # (each then with its budgets on other GPUs: tests/test_chunked_prefill.py)
    assert cells["sglang"].startswith("8,192/step before (") and cells["vllm"].startswith("8,192/step beside (")
    assert cells["hf-eager"] == "-"
