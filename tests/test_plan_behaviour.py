"""`plan` serves a candidate as `serve` serves the same deployment (plan/behaviour.py): the stack's
release policy and running-request limit, the same passes per block. A plan row's numbers are
checked against `serve` of its deployment at the same load, which computes them on its own
(its own sampling, simulation and statistics), with no part of the plan's search."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from dlmcost.cli import main
from dlmcost.serving import deployment as dep
from dlmcost.serving.loads import ClosedLoop, OpenLoop

MODEL = "GSAI-ML/LLaDA-8B-Instruct"
DECODING = dict(scheme="dual-cache", block=32, tpf=2.0)  # one of the model's own schemes
# unless a test names one: SGLang's usual path, a stack with no release policy or running limit of
# its own, so that each test sets them (the dLLM path's are tested at the end)
STACK = "sglang"


pytestmark = pytest.mark.usefixtures("bundled_offline")


def plan_row(capsys, *options) -> dict:
    """The cheapest row of a plan on one H100 at TP 1, bf16, the decoding above, 256/128 tokens."""
    capsys.readouterr()
    stack = [] if "--stack" in options else ["--stack", STACK]
    rc = main(["plan", MODEL, "--gpu", "h100", "--tp", "1", "--precision", "bf16", "--scheme", "dual-cache",
               "--block", "32", "--tpf", "2", "--prompt", "256", "--answer", "128", "-f", "json", *stack,
               *map(str, options)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads(out)["deployments"][0]


def served(load, **setup) -> dep.Point:
    setup.setdefault("stack", STACK)
    return dep.serve(MODEL, load, dep.Setup(gpu="h100", **DECODING, **setup), prompt=256, answer=128).points[0]


def with_serving_fields(monkeypatch, **fields):
    """Every stack profile as resolved, with serving fields a profile may set (`release`, ...)."""
    from dlmcost.analysis import prepare as prep_mod

    real = prep_mod.resolve_stack

    class WithServing:
        def __init__(self, stack):
            self._stack = stack

        def __getattr__(self, name):
            return fields[name] if name in fields else getattr(self._stack, name)

    monkeypatch.setattr(prep_mod, "resolve_stack", lambda stack, profile, **kw: WithServing(real(stack, profile, **kw)))


def assert_same(row: dict, p: dep.Point, rel: float = 1e-9):
    assert row["replicas"] == 1
    assert row["served_rps"] == pytest.approx(p.requests_per_s, rel=rel)
    assert row["p50_latency_s"] == pytest.approx(p.latency_s["median"], rel=rel)
    assert row["p99_latency_s"] == pytest.approx(p.latency_s["p99"], rel=rel)
    assert row["tokens_per_s_per_user"] == pytest.approx(p.tokens_per_s_per_user, rel=rel)
    assert row["output_tokens_per_s"] == pytest.approx(p.output_tokens_per_s, rel=rel)


def at_measured_rate(row: dict, p: dep.Point) -> dict:
    """An open-loop row (the offered rate) at the rate serve measured."""
    return dict(row, served_rps=p.requests_per_s,
                output_tokens_per_s=row["output_tokens_per_s"] / row["served_rps"] * p.requests_per_s)


def test_closed_loop_row_is_what_serve_delivers(capsys):
    """8 users, no think time, at most 16 running: one replica, and the same simulation as serve's,
    so the numbers are equal."""
    assert_same(plan_row(capsys, "--users", 8, "--max-batch", 16), served(ClosedLoop(8), max_running=16))


def test_open_loop_row_is_what_serve_delivers(capsys):
    """2 requests/s, Poisson, one replica: serve draws its gaps as the plan does (seed 0's
    exponentials, scaled to the rate), so the latencies are equal, and the requests/s serve
    measures is the offered rate to sampling error. The default stack sets no release policy:
    both serve a synchronous batch, whose latencies are not first-done's."""
    row = plan_row(capsys, "--rate", 2, "--max-batch", 16)
    p = served(OpenLoop(2.0), max_running=16)
    assert row["served_rps"] == 2.0 and p.requests_per_s == pytest.approx(2.0, rel=0.05)
    assert_same(at_measured_rate(row, p), p)
    first_done = served(OpenLoop(2.0), max_running=16, release="first-done")
    assert first_done.latency_s["median"] < row["p50_latency_s"] * 0.95


def test_a_stack_s_release_and_running_limit_reach_the_plan(capsys, monkeypatch):
    """A stack profile with first-done release and 4 running requests: the plan's batch limit
    is 4 (no --max-batch), and its row is serve's first-done replica at 4 running."""
    with_serving_fields(monkeypatch, release="first-done", max_running_requests=4)
    row = plan_row(capsys, "--rate", 2)
    assert row["max_batch"] == 4
    p = served(OpenLoop(2.0))
    assert (p.latency_s["median"], dep.describe(dep.prepare(MODEL, (np.full(10, 256.0), np.full(10, 128.0)),
                                                            dep.Setup(gpu="h100", stack=STACK, **DECODING)))["release"]) \
        == (pytest.approx(row["p50_latency_s"], rel=1e-9), "first-done")
    assert_same(at_measured_rate(row, p), p)


def test_the_release_policy_is_shown(capsys, monkeypatch):
    """The engines line and the JSON say how the batches were released: the default stack's
    synchronous batch, a stack's first-done, and per decoding where they differ."""
    from dlmcost.render.plan import engines_line

    base = ["plan", MODEL, "--gpu", "h100", "--tp", "1", "--precision", "bf16", "--scheme", "dual-cache",
            "--rate", "2", "--requests", "200", "--stack", STACK]
    capsys.readouterr()
    assert main([*base, "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["search"]["release"] == {"dual-cache/32/1": "synchronous"}
    assert main(base) == 0
    # (sglang's front end: LLaDA-8B's 32 layers x 0.323 ms of dispatch before the engine sees a request)
    assert re.search(rf"engines: {STACK} for dual-cache/32/1 \(batch limit \d+, synchronous release\), front end: "
                     rf"10.3 ms of dispatch before the engine sees each request \({STACK}'s\) \(--stack\)",
                     " ".join(capsys.readouterr().out.split()))
    with_serving_fields(monkeypatch, release="first-done")
    assert main([*base, "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["search"]["release"] == {"dual-cache/32/1": "first-done"}
    search = dict(decodings=["block/32/1"], max_batch=[64, 256], stack_default=True,
                  stacks={"block/32/1": "x", "ar": "y"}, max_running={"block/32/1": [64], "ar": [256]},
                  release={"block/32/1": "synchronous", "ar": "first-done"})
    assert engines_line(search) == ("engines: x for block/32/1 (batch limit 64, synchronous release); y for the AR "
                                    "baseline (batch limit 256, first-done release) (each decoding's default "
                                    "engine, --stack to change)")
    same = dict(search, stacks={"block/32/1": "x", "ar": "x"}, max_running={"block/32/1": [64], "ar": [64]},
                release={"block/32/1": "synchronous", "ar": "synchronous"})
    assert engines_line(same).startswith("engines: x for block/32/1, the AR baseline (batch limit 64, synchronous")


def test_the_sglang_dllm_stack_s_first_blocks_and_chunked_prompt_reach_the_plan(capsys, monkeypatch):
    """The sglang-dllm stack run one request at a time (its latency recipe, `--max-batch 1`) lets a
    waiting request's prompt and first block run beside it (`first_block_outside_limit`; its
    `prompt_prefill: block-chunks` has no prompt pass to cut here: dual-cache's first refresh covers
    the prompt, so the deployment says "none"): a closed loop of 4
    users planned under it is serve's replica under the same stack, and serves more than the same
    stack strictly one request at a time."""
    row = plan_row(capsys, "--users", 4, "--stack", "sglang-dllm", "--max-batch", 1)
    assert row["max_batch"] == 1
    p = served(ClosedLoop(4), stack="sglang-dllm", max_running=1)
    described = dep.describe(dep.prepare(MODEL, (np.full(10, 256.0), np.full(10, 128.0)),
                                         dep.Setup(gpu="h100", stack="sglang-dllm", **DECODING)))
    assert (described["first_block_outside_limit"], described["prompt_prefill"]) == (True, "none")
    assert_same(row, p)
    with_serving_fields(monkeypatch, first_block_outside_limit=False)
    alone = plan_row(capsys, "--users", 4, "--stack", "sglang-dllm", "--max-batch", 1)
    assert alone["served_rps"] < row["served_rps"] * 0.99
    assert alone["served_rps"] == pytest.approx(served(ClosedLoop(4), stack="sglang-dllm", max_running=1).requests_per_s,
                                                rel=1e-9)
