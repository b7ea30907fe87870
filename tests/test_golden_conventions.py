"""Hand-checked numbers for two conventions the brute-force oracle (oracle.py) follows, and a
self-check of its busiest-GPU table against enumeration of every touched set.

1. The LM head and the embedding table stay bf16 under every precision: the head's V x d weights
   and the T gathered embedding rows at 2 bytes per element, the head's GEMM at the bf16 peak
   and bf16 GEMM efficiency.
2. Expert parallelism is costed at the busiest GPU: it reads E[max | d] experts (of the d
   distinct ones a pass touches) and computes E[max] * T*k/d token copies.

Each expected value below is worked out by hand from the model's config and the GPU's file, and
checked against both `api.analyze` and the oracle.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest

import oracle
from dlmcost import api
from dlmcost.inputs.models import load_bundled

LLADA = "GSAI-ML/LLaDA-8B-Instruct"  # d 4096, 32 layers, 32 heads of 128 (no GQA), ffn 12288, V 126464
MIXTRAL = "mistralai/Mixtral-8x7B-Instruct-v0.1"  # d 4096, 32 layers, 8 experts of ffn 14336, top 2

# nvidia-h100-sxm.yaml: GEMM efficiencies (bf16 0.80, fp8 0.72) x the sustained_compute of whole forwards (0.68)
H100_BF16, H100_FP8 = 989.5e12, 1979e12
H100_SUSTAINED = 0.68
H100_EFF_BF16, H100_EFF_FP8, H100_EFF_MEM = 0.80 * H100_SUSTAINED, 0.72 * H100_SUSTAINED, 0.80
H100_BW, H100_LINK, OVERHEAD = 3.35e12, 450e9, 3e-6


def _result(model, **kw) -> dict:
    res = api.analyze(model, "h100", stack="none", **kw)["results"][0]
    return res.model_dump() if hasattr(res, "model_dump") else res


def _op(res: dict, name: str) -> dict:
    return next(o for o in res["ops"] if o["name"] == name)


# --- 1. the bf16 LM head and embedding ---------------------------------------------------------


def _llada_mdm_one_pass(precision: str) -> tuple[dict, dict]:
    """One full-canvas pass of 8 sequences x 128 tokens, logits at every position."""
    kw = dict(scheme="mdm", prompt=64, gen=64, steps=1, block=64, batch=8, precision=precision,
              kv_dtype="bf16", logits="all")
    res = _result(LLADA, **kw)
    expected = oracle.generation(load_bundled(LLADA), "nvidia-h100-sxm.yaml", **kw)
    return res, expected


@pytest.mark.parametrize("precision,weight_bytes", [("fp8", 1.0), ("w8a16", 1.0), ("w4a16", 0.5)])
def test_the_lm_head_and_embedding_stay_bf16(precision, weight_bytes):
    res, expected = _llada_mdm_one_pass(precision)
    V, d, L, T = 126464, 4096, 32, 8 * 128
    n_logits = T
    head_flops = 2 * n_logits * d * V
    head_bytes = V * d * 2 + n_logits * (d + V) * 2  # bf16 weights, whatever the precision
    # compute-bound at the bf16 GEMM rate (not fp8's 1979 TFLOP/s at 0.72)
    head_time = max(head_flops / (H100_BF16 * H100_EFF_BF16), head_bytes / (H100_BW * H100_EFF_MEM)) + OVERHEAD
    assert head_flops / (H100_BF16 * H100_EFF_BF16) > head_bytes / (H100_BW * H100_EFF_MEM)
    head = _op(res, "lm_head")
    for got in (head, expected["ops"]["lm_head"]):
        assert got["flops"] == pytest.approx(head_flops, rel=1e-12)
        assert got["bytes"] == pytest.approx(head_bytes, rel=1e-12)
        assert got["time_s"] == pytest.approx(head_time, rel=1e-12)
    # the pass's weights: the linear layers at the precision's bytes, the norms, the T gathered
    # embedding rows and the head at 2 bytes
    per_layer = 4 * d * d + 3 * d * 12288  # q, k, v, o (32 heads x 128 = d); gate, up, down
    assert L * per_layer == 6_979_321_856  # the non-embedding weights of LLaDA-8B
    weights = L * per_layer * weight_bytes + (L * 2 * d + d) * 2 + T * d * 2 + V * d * 2
    step = next(p for p in res["passes"] if p["name"] == "step")
    assert step["weight_bytes"] == pytest.approx(weights, rel=1e-12)
    assert expected["passes"]["step"]["weight_bytes"] == pytest.approx(weights, rel=1e-12)


def test_self_conditioning_reads_the_bf16_embedding_at_bf16_rates():
    """DiffusionGemma's self-conditioning GEMM (softmax(logits) x embedding table, as large as
    the head) under fp8: the V x d table at 2 bytes, the GEMM at the bf16 rate. One 256-token
    canvas of 16 steps for 4 sequences: the 15 steps after the first self-condition, each over
    4 x 256 logits (enough for the GEMM to be compute-bound, so its rate shows)."""
    dg = "google/diffusiongemma-26B-A4B-it"
    m = load_bundled(dg)
    V, d, n, passes = m.vocab_size, m.d_model, 4 * 256, 15
    res = _result(dg, scheme="diffgemma", prompt=300, gen=256, steps=16, block=256, batch=4, precision="fp8")
    op = _op(res, "self_condition")
    flops = 2 * n * V * d
    nbytes = V * d * 2 + n * V * (4 + 2 * 2) + n * d * 2  # bf16 table; fp32 logits in, bf16 probabilities out and in
    time = max(flops / (H100_BF16 * H100_EFF_BF16), nbytes / (H100_BW * H100_EFF_MEM)) + 2 * OVERHEAD
    assert flops / (H100_BF16 * H100_EFF_BF16) > nbytes / (H100_BW * H100_EFF_MEM)
    assert op["flops"] == pytest.approx(passes * flops, rel=1e-12)
    assert op["bytes"] == pytest.approx(passes * nbytes, rel=1e-12)
    assert op["time_s"] == pytest.approx(passes * time, rel=1e-12)


# --- 2. expert parallelism at the busiest GPU --------------------------------------------------


def _enumerated_busiest(E: int, M: int, d: int) -> Fraction:
    """E[max experts on one GPU] over every d-subset of E experts, GPU g holding experts
    g*s .. g*s+s-1: the definition, by brute force."""
    s = E // M
    total, count = 0, 0
    for subset in itertools.combinations(range(E), d):
        per_gpu = [0] * M
        for e in subset:
            per_gpu[e // s] += 1
        total += max(per_gpu)
        count += 1
    return Fraction(total, count)


@pytest.mark.parametrize("E,M", [(8, 2), (8, 4), (8, 8), (12, 3), (12, 4), (12, 6), (16, 4), (10, 5)])
def test_the_oracles_busiest_table_matches_enumeration(E, M):
    table = oracle.busiest_given_touched(E, M)
    assert len(table) == E + 1
    for d in range(E + 1):
        assert table[d] == pytest.approx(float(_enumerated_busiest(E, M, d)), abs=1e-12), d


def test_busiest_by_hand_and_interpolated():
    # 8 experts on 4 GPUs (2 each). d = 2: same GPU with probability 4/C(8,2) = 1/7 -> 8/7.
    # d = 3: all on different GPUs in C(4,3)*2^3 = 32 of C(8,3) = 56 sets -> 1 + 24/56 = 10/7.
    assert oracle.expected_busiest(8, 4, 2.0) == pytest.approx(8 / 7, rel=1e-12)
    assert oracle.expected_busiest(8, 4, 3.0) == pytest.approx(10 / 7, rel=1e-12)
    assert oracle.expected_busiest(8, 4, 2.5) == pytest.approx(9 / 7, rel=1e-12)  # linear in between
    # one expert per GPU: the busiest holds one as soon as anything is touched; every GPU full at d = E
    assert oracle.expected_busiest(8, 8, 2.0) == 1.0
    assert oracle.expected_busiest(256, 8, 256.0) == pytest.approx(32.0, rel=1e-12)
    # a single "GPU" holds every touched expert
    assert oracle.expected_busiest(16, 1, 5.5) == pytest.approx(5.5, rel=1e-12)


def test_mixtral_tp8_ep8_decode_reads_one_whole_expert_on_the_busiest_gpu():
    """AR decode at batch 1 touches 2 of 8 experts; with one expert per GPU the busiest GPU holds
    exactly one (E[max | 2] = 1, not the average 2/8) and reads all of it (tp/ep = 1: whole
    experts), computes its one token copy and sends/receives it."""
    gen = 4
    kw = dict(scheme="ar", prompt=0, gen=gen, batch=1, precision="bf16", kv_dtype="bf16", tp=8, ep=8)
    res = _result(MIXTRAL, efficiency="ideal", **kw)
    expected = oracle.generation(load_bundled(MIXTRAL), "nvidia-h100-sxm.yaml", profile="ideal", **kw)
    L, d, f = 32, 4096, 14336
    expert = 3 * d * f  # gate, up, down
    copies = 1 * 2 / 2 * 1  # E[max] * T*k/d = 1 * 1*2/2
    flops = gen * L * 2 * copies * expert
    nbytes = gen * (L * 1 * expert * 2 + L * 2 * copies * (d + 3 * f) * 2)
    assert L * expert * 2 == 11_274_289_152  # 11.27 GB per step (2.82 GB at the average 2/8 experts)
    time = max(flops / H100_BF16, nbytes / H100_BW)  # ideal profile; every step alike
    link = gen * L * 2 * copies * (8 - 1) / 8 * d * 2
    for got in (_op(res, "experts"), expected["ops"]["experts"]):
        assert got["flops"] == pytest.approx(flops, rel=1e-12)
        assert got["bytes"] == pytest.approx(nbytes, rel=1e-12)
        assert got["time_s"] == pytest.approx(time, rel=1e-12)
    for got in (_op(res, "ep_all_to_all"), expected["ops"]["ep_all_to_all"]):
        assert got["time_s"] == pytest.approx(link / H100_LINK, rel=1e-12)


def test_expert_parallel_batch_two_decode_by_hand():
    """Mixtral decoding two sequences (T = 2, k = 2, E = 8): d = 8*(1 - (6/8)^2) = 3.5 distinct
    experts on average, and with one expert
    per GPU E[max | d] = 1 for any d >= 1, so the busiest GPU reads one whole expert and computes
    1 * T*k/d = 4/3.5 token copies per MoE layer (the average GPU: T*k/8 = 0.5)."""
    kw = dict(scheme="ar", prompt=0, gen=2, batch=2, precision="bf16", kv_dtype="bf16", tp=8, ep=8)
    res = _result(MIXTRAL, efficiency="ideal", **kw)
    expected = oracle.generation(load_bundled(MIXTRAL), "nvidia-h100-sxm.yaml", profile="ideal", **kw)
    L, d, f, gen = 32, 4096, 14336, 2
    assert 8 * (1 - (1 - 2 / 8) ** 2) == 3.5
    copies = 4 / 3.5
    flops = gen * L * 2 * copies * 3 * d * f
    link = gen * L * 2 * copies * 7 / 8 * d * 2
    for got in (_op(res, "experts"), expected["ops"]["experts"]):
        assert got["flops"] == pytest.approx(flops, rel=1e-12)
    for got in (_op(res, "ep_all_to_all"), expected["ops"]["ep_all_to_all"]):
        assert got["time_s"] == pytest.approx(link / H100_LINK, rel=1e-12)
    assert math.isclose(copies, 8 / 7)
