"""Per-op FLOPs and bytes against hand-computed values, and the back-of-envelope closed forms as limits."""

import numpy as np
import pytest

from dlmcost.engine.cost import PassInput, attention, expected_experts, experts, lm_head, mlp, o_proj, pass_ops, qkv_proj
from dlmcost.inputs.models import ModelSpec, load_bundled

TINY = ModelSpec(id="tiny", family="custom", n_layers=2, d_model=64, n_heads=8, n_kv_heads=2, head_dim=8,
                 ffn_dim=128, vocab_size=1000)


def inp(B=1, q=16, c=0, kv_write=0, logits=None, causal=False, wbytes=2.0, kvbytes=2.0, all_experts=False):
    a = lambda x: np.array([float(x)])  # noqa: E731
    return PassInput(B=a(B), q=a(q), c=a(c), kv_write=a(kv_write), logits=a(q if logits is None else logits),
                     causal=np.array([causal]), wbytes=a(wbytes), kvbytes=a(kvbytes), all_experts=np.array([all_experts]))


def test_qkv_projection_by_hand():
    p = inp(B=3, q=16)
    op = qkv_proj(TINY, p)
    w = 64 * (8 + 2 * 2) * 8  # d x (H + 2 Hkv) hd
    assert op.flops[0] == 2 * 3 * 16 * w * 2  # 2 FLOPs/MAC x T x weights x layers
    assert op.weight_bytes[0] == w * 2 * 2  # bf16, 2 layers
    assert op.activation_bytes[0] == 2 * 3 * 16 * (64 + 96) * 2


def test_attention_bidirectional_and_causal():
    bi = attention(TINY, inp(B=2, q=16, c=100))
    assert bi.flops[0] == 2 * 4 * 2 * 16 * (100 + 16) * 8 * 8  # layers x 4 B q (c+q) H hd
    assert bi.kv_read_bytes[0] == 2 * 2 * 100 * (2 * 2 * 8) * 2  # layers x B c x (K+V per layer) x bytes
    causal = attention(TINY, inp(B=1, q=16, c=100, causal=True))
    assert causal.flops[0] == 2 * 4 * 1 * 16 * (100 + 17 / 2) * 8 * 8  # kbar = c + (q+1)/2


def test_kv_write_and_fp8_cache():
    op = attention(TINY, inp(q=4, c=10, kv_write=4, kvbytes=1.0))
    assert op.kv_write_bytes[0] == 2 * 4 * 32 * 1.0


def test_lm_head_and_store_pass_without_logits():
    assert lm_head(TINY, inp(B=2, q=16)).flops[0] == 2 * 2 * 16 * 64 * 1000
    none = lm_head(TINY, inp(q=16, logits=0))
    assert none.flops[0] == 0 and none.weight_bytes[0] == 0 and none.kernels[0] == 0


def test_weight_only_quantisation_shrinks_bytes_not_flops():
    bf16, w4 = o_proj(TINY, inp(wbytes=2.0)), o_proj(TINY, inp(wbytes=0.5))
    assert w4.flops[0] == bf16.flops[0]
    assert w4.weight_bytes[0] == bf16.weight_bytes[0] / 4


def test_pass_weight_bytes_equal_the_parameter_count():
    m = load_bundled("GSAI-ML/LLaDA-8B-Instruct")
    p = inp(q=1, wbytes=2.0)
    total = sum(op.weight_bytes[0] for op in pass_ops(m, p))
    # every matrix once (embedding: only the gathered row), norms in bf16
    assert total == pytest.approx(2 * (m.params_nonembedding + m.lm_head_weights) + 2 * m.d_model, rel=1e-12)


def test_attention_intensity_limit_b_times_G():
    """AI_attn -> b*G for a block of b queries over a long cache."""
    m = load_bundled("Dream-org/Dream-v0-Instruct-7B")  # G = 28/4 = 7
    for b in (1, 4, 32):
        op = attention(m, inp(B=8, q=b, c=10_000_000))
        assert op.flops[0] / op.bytes[0] == pytest.approx(b * m.group_size, rel=1e-3)


def test_moe_intensity_B_b_k_over_E_when_all_experts_read():
    """AI_moe = B*b*k/E (weights only) when every expert's weights are read."""
    m = load_bundled("inclusionAI/LLaDA2.0-mini")  # E = 256, k = 8
    for B, b in [(64, 1), (64, 32), (4, 8)]:
        op = experts(m, inp(B=B, q=b, all_experts=True))
        assert op.flops[0] / op.weight_bytes[0] == pytest.approx(B * b * 8 / 256)


@pytest.mark.parametrize("E,k", [(256, 8), (64, 2), (8, 8), (128, 1)])
def test_expected_experts_summed_over_a_family_equals_each_pass_added_up(E, k):
    """The closed form of sum_j E (1 - (1 - k/E)^(T0 + dT j)) against the terms added one by one,
    with T growing, shrinking and fixed, one pass and many, few tokens and many."""
    from dlmcost.engine.cost import expected_experts_sum

    cases = [(1, 3, 0), (5, 40, 7), (12, 2048, -128), (30, 1, 1), (3, 100000, -30000), (64, 7, 0)]
    for n, T0, dT in cases:
        brute = sum(E * (1 - (1 - k / E) ** (T0 + dT * j)) for j in range(n))
        got = expected_experts_sum(E, k, np.array([float(T0)]), np.array([float(dT)]), np.array([float(n)]))[0]
        assert got == pytest.approx(brute, rel=1e-12), (n, T0, dT)


def test_expected_distinct_experts():
    E, k = 256, 8
    assert expected_experts(E, k, np.array([1.0]))[0] == pytest.approx(k)
    assert expected_experts(E, k, np.array([1e6]))[0] == pytest.approx(E)
    # direct: an expert is missed by one token with probability C(E-1,k)/C(E,k) = 1-k/E
    from math import comb
    T = 37
    miss = comb(E - 1, k) / comb(E, k)
    assert expected_experts(E, k, np.array([float(T)]))[0] == pytest.approx(E * (1 - miss**T))


def test_mlp_gated_three_matrices():
    op = mlp(TINY, inp(q=1))
    assert op.weight_bytes[0] == 2 * 3 * 64 * 128 * 2
