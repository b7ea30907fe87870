"""Per-op costs at the edges the other tests do not reach, from the formulas in cost.py's
docstrings and docs/methodology.md: a self-conditioning pass with one logit position, soft-capped
logits counted as vector ("other") work, and the expected number of distinct experts (F4) when
every token runs every expert; and, worked by hand on small models whose widths all differ
(so that a swapped term changes the answer), what a mutation run found no test pinned: MLA's
projections, attention and activations at TP 2, the experts' slices when TP exceeds EP, the
GEMMs' weights under TP, the elementwise op, and the collectives of MoE-only layers."""

from __future__ import annotations

import numpy as np
import pytest

from dlmcost import api
from dlmcost.engine.cost import (PassInput, attention, elementwise, ep_all_to_all, expected_experts, experts, gemm_depths,
                                  keys_per_query, mla_kv_up, o_proj, qkv_proj, self_condition, tp_collectives)
from dlmcost.inputs.models import ModelSpec
from dlmcost.inputs.models.spec import LayerKind, MLASpec, MoESpec

TINY = ModelSpec(id="tiny", family="custom", n_layers=2, d_model=64, n_heads=8, n_kv_heads=2, head_dim=8,
                 ffn_dim=128, vocab_size=1000)
DG = "google/diffusiongemma-26B-A4B-it"


def one(x):
    return np.array([float(x)])


def test_self_conditioning_a_single_logit_position():
    """softmax(previous logits) @ embedding for n = B*l positions: 2*n*V*d FLOPs, the V x d table
    read (bf16 head), two kernels; it runs whenever the pass has logits, even one."""
    p = PassInput(B=one(3), q=one(1), c=one(10), kv_write=one(1), logits=one(1), causal=np.array([True]),
                  wbytes=one(1), kvbytes=one(2), all_experts=np.array([False]), self_condition=np.array([True]))
    op = self_condition(TINY, p)
    n, V, d = 3 * 1, 1000, 64
    assert op.flops[0] == 2 * n * V * d
    assert op.weight_bytes[0] == V * d * 2  # the head and embedding stay bf16 under a 1-byte precision
    assert op.activation_bytes[0] == n * V * (4 + 2 * 2) + n * d * 2  # fp32 logits in, bf16 probs out and in, n x d out
    assert op.kernels[0] == 2
    off = self_condition(TINY, PassInput(**{**p.__dict__, "logits": one(0)}))
    assert off.flops[0] == 0 and off.weight_bytes[0] == 0 and off.kernels[0] == 0


def test_soft_capped_logits_count_as_vector_work():
    """The soft cap (divide, tanh, multiply in fp32) runs on the vector units: its FLOPs are in
    the `other` breakdown with the elementwise op's, not in the LM head's."""
    r = api.analyze(DG, "h100", prompt=32, gen=64)["results"][0]
    ops = {o["name"]: o for o in r["ops"]}
    assert ops["logit_softcap"]["flops"] > 0
    assert r["flops_breakdown"]["other"] == pytest.approx(ops["elementwise"]["flops"] + ops["logit_softcap"]["flops"],
                                                          rel=1e-12)
    assert ops["logit_softcap"]["time_s"] > 0


def test_every_expert_is_touched_when_each_token_runs_all_of_them():
    """(F4) with k = E: 1 - (1 - k/E)^T = 1 for any T >= 1."""
    T = np.array([1.0, 7.0, 1000.0])
    assert expected_experts(8, 8, T).tolist() == [8.0, 8.0, 8.0]


# A small MLA model whose every width differs, so that a swapped or dropped term changes the
# answer: 8 heads (4 on each of 2 GPUs), q latent 32, K/V latent r_kv = 16, rope 8, nope 20, v 12.
TINY_MLA = ModelSpec(id="tiny-mla", family="custom", n_layers=2, d_model=64, n_heads=8, n_kv_heads=8, head_dim=28,
                     ffn_dim=128, vocab_size=1000,
                     mla=MLASpec(q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=20, qk_rope_head_dim=8, v_head_dim=12))


def mla_pass(absorbed):
    """B = 3 sequences of q = 4 new tokens over c = 10 cached, writing 5, at TP 2, 2-byte K/V."""
    return PassInput(B=one(3), q=one(4), c=one(10), kv_write=one(5), logits=one(4), causal=np.array([False]),
                     wbytes=one(1), kvbytes=one(2), all_experts=np.array([False]), tp=one(2),
                     mla_absorbed=np.array([absorbed]))


def test_mla_kv_up_by_hand_at_tp2():
    """W_kvb = r_kv x H(nope + v) = 16 x 8 x 32 weights, half on each GPU. Absorbed: applied to the
    T = 12 new tokens, its activations per token and GPU head the queries' nope part in, the
    latent-wide query out, the latent-wide output in and v out; expanded: applied to the
    B(c + q) = 42 keys, each reading its latent and writing every GPU head's nope and v."""
    L, T, keys, H, w = 2, 12, 42, 4, 16 * 8 * 32 / 2
    absorbed, expanded = mla_kv_up(TINY_MLA, mla_pass(True)), mla_kv_up(TINY_MLA, mla_pass(False))
    assert absorbed.weight_bytes[0] == expanded.weight_bytes[0] == L * w * 1
    assert absorbed.flops[0] == L * 2 * T * w
    assert expanded.flops[0] == L * 2 * keys * w
    assert absorbed.activation_bytes[0] == L * T * H * (20 + 2 * 16 + 12) * 2
    assert expanded.activation_bytes[0] == L * keys * (16 + H * (20 + 12)) * 2


def test_mla_attention_by_hand_at_tp2():
    """Absorbed: MQA over the latent, QK width r_kv + rope = 24, AV width r_kv = 16; expanded: QK
    nope + rope = 28, AV v = 12; both over k-bar = c + q = 14 keys (bidirectional), reading the
    c = 10 cached latents + rope keys (24 elements) and writing 5, per sequence and layer. Their
    activations: each new token's per-head queries and outputs, plus (absorbed) its latent or
    (expanded) every key's per-head K_nope and V."""
    L, B, q, T, H, kbar, latent = 2, 3, 4, 12, 4, 14, 24
    for absorbed, qk, av, keys_act in ((True, 24, 16, T * latent), (False, 28, 12, B * 14 * H * (20 + 12))):
        op = attention(TINY_MLA, mla_pass(absorbed))
        per_key = L * 2 * B * q * H * (qk + av)
        assert op.flops_per_key[0] == per_key
        assert op.flops[0] == per_key * kbar
        assert op.weight_bytes[0] == 0
        assert op.kv_read_bytes[0] == L * B * 10 * latent * 2
        assert op.kv_write_bytes[0] == L * B * 5 * latent * 2
        assert op.activation_bytes[0] == L * (T * H * (qk + av) + keys_act) * 2


# Every token runs all 4 experts (k = E), so the experts touched are certain: d = E, and under
# expert parallelism each of the ep ranks holds E/ep of them, all touched (no expectation to take).
ALL_EXPERTS = ModelSpec(id="tiny-moe", family="custom", n_layers=2, d_model=64, n_heads=8, n_kv_heads=2, head_dim=8,
                        ffn_dim=128, vocab_size=1000,
                        moe=MoESpec(n_experts=4, experts_per_token=4, expert_ffn_dim=16, n_moe_layers=2))


def moe_pass(B, tp, ep):
    return PassInput(B=one(B), q=one(3), c=one(0), kv_write=one(0), logits=one(3), causal=np.array([False]),
                     wbytes=one(1), kvbytes=one(2), all_experts=np.array([False]), tp=one(tp), ep=one(ep))


@pytest.mark.parametrize("tp, ep", [(4, 2), (2, 1)])
def test_expert_flops_and_activations_when_every_token_runs_every_expert(tp, ep):
    """T = 6 tokens, each routed to all k = 4 experts (3 x 64 x 16 weights each, gated). A GPU holds
    E/ep = 4/ep experts, each an ep/tp slice, and computes the T*k/ep token copies they receive: 2
    FLOPs per weight it holds per copy; each copy reads and writes d_model and the slice's three
    f-wide intermediates. TP 4 over EP 2: half of each of 2 experts; TP 2 alone: half of all 4."""
    L, T, k, E, W = 2, 6, 4, 4, 3 * 64 * 16
    share, copies = ep / tp, T * k / ep
    op = experts(ALL_EXPERTS, moe_pass(2, tp, ep))
    assert op.flops[0] == pytest.approx(L * 2 * copies * W * share, rel=1e-12)
    assert op.weight_bytes[0] == pytest.approx(L * (E / ep) * W * share * 1, rel=1e-12)
    assert op.activation_bytes[0] == pytest.approx(L * 2 * copies * (64 + 3 * 16 * share) * 2, rel=1e-12)


def test_a_pass_without_tokens_sends_no_expert_work_under_expert_parallelism():
    """B = 0 with k = 2 of E = 4: no expert touched (d = 0) and no token copies on any rank (the
    busiest rank's copies are T*k*busiest/d, 0/0 here)."""
    two_of_four = ALL_EXPERTS.model_copy(update={"moe": ALL_EXPERTS.moe.model_copy(update={"experts_per_token": 2})})
    for op in (experts(two_of_four, moe_pass(0, 2, 2)), ep_all_to_all(two_of_four, moe_pass(0, 2, 2))):
        assert op.flops[0] == 0 and op.weight_bytes[0] == 0 and op.activation_bytes[0] == 0 and op.link_bytes[0] == 0


def test_gemms_of_a_gqa_and_mla_hybrid_by_hand_at_tp2():
    """Each GEMM's weights on one of 2 GPUs and its depth, for one GQA layer (8 heads of 8 on
    d_model 64, 4 K/V heads: 2 on each GPU) and one MLA layer (TINY_MLA's widths), a 1000-word
    vocabulary, self-conditioning. qkv_proj: GQA's Q (8 x 8 x 64) and K, V (2 x 4 x 8 x 64) split,
    depth d_model; MLA's down-projections replicated (Q 64 x 32 + its norm's 32, K/V 64 x (16 + 8)
    + its norm's 16), depth d_model, and Q's up-projection 32 x 8 x (20 + 8) split, depth the q
    latent 32. o_proj: the GPU's 4 heads x their width (8; MLA's v 12) by d_model, depth 4 x width.
    W_kvb: the latent 16 x the GPU's 4 heads x nope 20 (W_UK, depth nope absorbed) and x v 12
    (W_UV, depth the latent). The LM head and self-conditioning: the GPU's 500 words x d_model."""
    hybrid = ModelSpec(id="tiny-hybrid", family="custom", n_layers=2, d_model=64, n_heads=8, n_kv_heads=4, head_dim=8,
                       ffn_dim=128, vocab_size=1000, mla=TINY_MLA.mla, self_conditioning=True,
                       layers=((1, LayerKind(attention="full", head_dim=8, n_kv_heads=4)),
                               (1, LayerKind(attention="mla", head_dim=28, n_kv_heads=8))))
    got = {name: [(float(w), float(k)) for w, k in matrices]
           for name, matrices in gemm_depths(hybrid, tp=2.0, ep=1.0).items()}
    assert got["qkv_proj"] == [(8 * 8 * 64 / 2 + 2 * 4 * 8 * 64 / 2, 64), (64 * 32 + 32 + 64 * 24 + 16, 64),
                               (32 * 8 * 28 / 2, 32)]
    assert got["o_proj"] == [(8 * 8 * 64 / 2, 4 * 8), (8 * 12 * 64 / 2, 4 * 12)]
    assert got["mla_kv_up"] == [(16 * 4 * 20, 20), (16 * 4 * 12, 16)]
    assert got["lm_head"] == [(500 * 64, 64)]
    assert got["self_condition"] == [(500 * 64, 500)]


def test_elementwise_by_hand_at_tp2():
    """TINY (GQA: 8 heads of 8, 2 K/V heads) and TINY_MLA (rope 8) share every other width, and
    their rope widths agree at TP 2: GQA ropes the GPU's 4 query heads and 1 K/V head of 8, MLA the
    4 query heads' and the one shared key's 8 rope columns. Per layer and token of the T = 12: 2
    RMSNorms (4 FLOPs per element of 64), 2 residual adds, rope (3 FLOPs per element); the gated
    FFN's 4 FLOPs per column (128, half per GPU); softmax 5 FLOPs per score over k-bar = 14 keys
    and 4 heads; the final norm. Bytes: the norms' weights and the final norm's (bf16), the
    gathered embedding rows (bf16, the head's precision), and (2 x 2 + 6) x d per layer and token
    plus 3 x d per token of activations. One kernel per layer."""
    L, B, q, T, d, kbar, H = 2, 3, 4, 12, 64, 14, 4
    flops = (L * T * (4 * 2 * d + 2 * d + 3 * (H + 1) * 8) + 4 * T * L * 128 / 2 + L * 5 * B * q * kbar * H
             + 4 * T * d)
    for m in (TINY, TINY_MLA):
        op = elementwise(m, mla_pass(True))
        assert op.flops[0] == flops
        assert op.weight_bytes[0] == (L * 2 * d + d) * 2 + T * d * 2
        assert op.activation_bytes[0] == (L * (2 * 2 + 6) * T * d + 3 * T * d) * 2
        assert op.kernels[0] == L


def test_mla_projections_by_hand_at_tp2():
    """qkv_proj: the replicated down-projections (Q 64 x 32 + 32, K/V 64 x 24 + 16) and half of Q's
    up-projection (32 x 8 x 28) per layer; each token reads d_model 64 and writes its GPU's 4 query
    heads of nope + rope = 28 and the 24-wide latent + rope key. o_proj: half of the 8 heads' v = 12
    columns by d_model, reading 4 x 12 and writing 64 per token."""
    L, T = 2, 12
    w = 64 * 32 + 32 + 64 * 24 + 16 + 32 * 8 * 28 / 2
    qkv = qkv_proj(TINY_MLA, mla_pass(True))
    assert (qkv.flops[0], qkv.weight_bytes[0]) == (L * 2 * T * w, L * w * 1)
    assert qkv.activation_bytes[0] == L * T * (64 + 4 * 28 + 24) * 2
    out = o_proj(TINY_MLA, mla_pass(True))
    assert (out.flops[0], out.weight_bytes[0]) == (L * 2 * T * 8 * 12 * 64 / 2, L * 8 * 12 * 64 / 2 * 1)
    assert out.activation_bytes[0] == L * T * (4 * 12 + 64) * 2


def test_tp_collectives_of_moe_only_layers_by_hand():
    """2 MoE-only layers at TP 2, T = 6 tokens of 64: an all-reduce after attention in each layer,
    and after its FFN unless expert parallelism combines it by all-to-all; each sends 2(N-1)/N of T
    x d. The logits all-gather, (N-1)/N of B x logits x V, runs when the pass has logits, even one."""
    reduce_bytes, gather_bytes = 2 * (1 / 2) * 6 * 64 * 2, (1 / 2) * 2 * 1000 * 2  # gather per logit position
    for ep, reduces in ((1, 4), (2, 2)):
        p = moe_pass(2, 2, ep)
        for logits, gathers in ((3, 1), (1, 1), (0, 0)):
            op = tp_collectives(ALL_EXPERTS, PassInput(**{**p.__dict__, "logits": one(logits)}))
            assert op.link_bytes[0] == reduces * reduce_bytes + gathers * logits * gather_bytes
            assert op.collectives[0] == reduces + gathers


def test_a_sliding_layer_pass_without_queries_attends_to_no_keys():
    """k-bar is a mean over the pass's queries: with q = 0 there are none, and the closed form's 0/0
    is 0 (causal or not), not NaN."""
    sliding = LayerKind(attention="sliding", window=4, head_dim=8, n_kv_heads=2)
    for causal in (True, False):
        p = PassInput(B=one(1), q=np.array([0.0, 3.0]), c=np.array([10.0, 10.0]), kv_write=one(0), logits=one(0),
                      causal=np.array([causal]), wbytes=one(1), kvbytes=one(2), all_experts=np.array([False]))
        # q = 3 after 10 cached: each query sees 3 earlier keys (W - 1) and itself; bidirectional
        # adds the later ones in the pass: 2, 1, 0 of them
        assert keys_per_query(sliding, p).tolist() == [0.0, 4.0 if causal else 5.0]
