"""The DiffusionGemma scheme against pass lists written out by hand from its decoding loop
(transformers' `diffusion_gemma` reference; README, "Per-layer kinds" and the scheme table).

Expected totals add, over the hand-written passes, the per-op costs of one pass (cost.pass_ops,
pinned on its own in test_layer_kinds.py), so a test fails if the scheme builds the wrong passes
or the engine adds them up wrongly (closed-form sums included)."""

from __future__ import annotations

import numpy as np
import pytest

from dlmcost import api
from dlmcost.inputs.models import load_bundled

import passlist  # noqa: E402  (tests/passlist.py)

DG = "google/diffusiongemma-26B-A4B-it"


def check(result, passes, m):
    """passes: (q, c, kv_write, logits, causal, self_condition, count) of model m."""
    passlist.check(result, [(m, q, c, kvw, logits, causal, count, sc) for q, c, kvw, logits, causal, sc, count in passes])


def run(**w):
    return api.analyze(DG, "h100", **w)["results"][0]


def test_one_canvas_pass_list():
    m = load_bundled(DG)
    # prompt 300: causal encoder prefill, no logits; one 256-token canvas, 16 steps: the first
    # without self-conditioning, 15 with; the last canvas is not stored (reference engines)
    passes = [
        (300, 0, 300, 0, True, False, 1),
        (256, 300, 0, 256, False, False, 1),
        (256, 300, 0, 256, False, True, 15),
    ]
    r = run(prompt=300, gen=256, steps=16)
    check(r, passes, m)
    assert [(f["name"], f["count"]) for f in r["passes"] if f["count"]] == [("prefill", 1), ("step", 1), ("step-sc", 15)]
    # vLLM stores every canvas, the last one too: one causal q = 256 pass writing its K/V
    vllm = run(prompt=300, gen=256, steps=16, store_pass=True)
    check(vllm, passes + [(256, 300, 256, 0, True, False, 1)], m)


def test_two_canvases_cross_the_sliding_window():
    m = load_bundled(DG)
    # prompt 900 + canvas 0 stored = 1156 cached tokens for canvas 1: past the 1024 window
    passes = [
        (900, 0, 900, 0, True, False, 1),
        (256, 900, 0, 256, False, False, 1), (256, 900, 0, 256, False, True, 23),
        (256, 900, 256, 0, True, False, 1),  # canvas 0 stored, canvas 1 not
        (256, 1156, 0, 256, False, False, 1), (256, 1156, 0, 256, False, True, 23),
    ]
    r = run(prompt=900, gen=512, steps=48)
    check(r, passes, m)
    assert r["memory"]["kv_cache_bytes"] == pytest.approx(  # prompt + canvas 0 resident, sliding layers capped
        (25 * 1024 * 2 * 8 * 256 + 5 * 1156 * 2 * 2 * 512) * 2)
    # storing every canvas (vLLM): canvas 1's K/V stays resident too, written by a pass named "store"
    stored = run(prompt=900, gen=512, steps=48, store_pass=True)
    assert [f["name"] for f in stored["passes"] if f["count"]] == ["prefill", "step", "step-sc", "store"]
    assert stored["memory"]["kv_cache_bytes"] == pytest.approx((25 * 1024 * 2 * 8 * 256 + 5 * 1412 * 2 * 2 * 512) * 2)


def test_defaults_come_from_generation_config_and_the_published_decoding():
    """The canvas (256) and the store pass from the generation config; the tokens per forward from
    the published decoding (vLLM's DiffusionGemma benchmark: 16.02 tokens per denoising step at 16
    steps per canvas), not the config's ceiling of 48 steps; --steps 48 gives the ceiling."""
    w = api.analyze(DG, "h100")["workload"]
    assert (w["scheme"], w["gen"], w["block"], w["store_pass"]) == ("diffgemma", 256, 256, False)
    assert w["steps"] == pytest.approx(256 / 16.02)
    w = api.analyze(DG, "h100", steps=48)["workload"]
    assert (w["block"], w["steps"]) == (256, 48)


def test_three_canvases_and_ar_decode_across_the_window_sum_pass_by_pass():
    """Families whose cache crosses a sliding window are not affine in j: three canvases (c =
    600, 856, 1112 around W = 1024) and AR decode over Gemma 3's 512 window."""
    m = load_bundled(DG)
    passes = [(600, 0, 600, 0, True, False, 1)]
    for i in range(3):
        c = 600 + 256 * i
        passes += [(256, c, 0, 256, False, False, 1), (256, c, 0, 256, False, True, 7)]
        if i < 2:
            passes.append((256, c, 256, 0, True, False, 1))
    check(run(prompt=600, gen=768, steps=24), passes, m)
    g3 = load_bundled("google/gemma-3-1b-it")
    # the prefill samples the first of the 40 tokens; steps feed tokens 0..38
    ar = [(500, 0, 500, 1, True, False, 1)] + [(1, 500 + t, 1, 1, True, False, 1) for t in range(39)]
    check(api.analyze(g3, "h100", scheme="ar", prompt=500, gen=40)["results"][0], ar, g3)


def test_self_conditioning_all_reduce_under_tensor_parallelism():
    """With tp = N the self-conditioning GEMM's output (n = B*logits rows of d, vocabulary-split)
    is all-reduced like any row-split product: a ring sends 2(N-1)/N of it per GPU, one more
    collective; nothing at tp = 1 or on a pass without self-conditioning."""
    from dlmcost.engine.cost import PassInput, tp_collectives
    from dlmcost.inputs.models import load_bundled

    m = load_bundled("google/diffusiongemma-26B-A4B-it")
    B, logits, d = 3, 256, m.d_model

    def link(tp, sc, logits=logits):
        a = lambda x: np.array([float(x)])  # noqa: E731
        p = PassInput(B=a(B), q=a(256), c=a(100), kv_write=a(0), logits=a(logits), causal=np.array([False]),
                      wbytes=a(2), kvbytes=a(2), all_experts=np.array([False]), tp=a(tp), ep=a(1),
                      self_condition=np.array([sc]))
        op = tp_collectives(m, p)
        return float(op.link_bytes[0]), float(op.collectives[0])

    for tp in (2, 4):
        (with_sc, n_with), (without, n_without) = link(tp, True), link(tp, False)
        assert with_sc - without == 2 * (tp - 1) / tp * B * logits * d * 2
        assert n_with - n_without == 1
    assert link(1, True) == link(1, False) == (0.0, 0.0)
    # one logit position still self-conditions (and is all-reduced); a pass without logits does not
    assert link(4, True, logits=1)[0] - link(4, False, logits=1)[0] == 2 * 3 / 4 * B * 1 * d * 2
    assert link(4, True, logits=0) == link(4, False, logits=0)
