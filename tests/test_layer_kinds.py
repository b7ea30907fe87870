"""Per-layer kinds: sliding-window and full attention, K = V, dense + MoE in parallel, the new
families' parameter counts and bad configs, EP at the busiest GPU and the bf16 head.

Expected values are computed by hand here (or by brute force over an explicit mask / every
subset), never by calling the formula under test."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from dlmcost import api
from dlmcost.engine.cost import (
    PassInput, attention, busiest_rank_experts, ep_all_to_all, experts, kv_cache_elements_per_gpu,
    lm_head, logit_softcap, pass_ops, qkv_proj, self_condition, tp_collectives,
    weight_bytes_per_gpu,
)
from dlmcost.errors import ConfigError
from dlmcost.inputs.models import ModelSpec, load_bundled, resolve_model, spec_from_mapping
from dlmcost.inputs.models.load import CONFIG_DIR

DG = "google/diffusiongemma-26B-A4B-it"
W = 8  # window of the toy sliding layer
SLIDING = dict(attention="sliding", window=W, head_dim=8, n_kv_heads=2)
FULL = dict(attention="full", head_dim=16, n_kv_heads=1, k_eq_v=True)


def toy(groups) -> ModelSpec:
    n = sum(c for c, _ in groups)
    return ModelSpec(id="toy", family="custom", n_layers=n, d_model=64, n_heads=4, n_kv_heads=2, head_dim=8,
                     ffn_dim=128, vocab_size=1000, layers=[[c, k] for c, k in groups])


def inp(B=1, q=16, c=0, kv_write=0, logits=None, causal=False, wbytes=2.0, kvbytes=2.0, tp=1, ep=1, **kw):
    a = lambda x: np.array([float(x)])  # noqa: E731
    return PassInput(B=a(B), q=a(q), c=a(c), kv_write=a(kv_write), logits=a(q if logits is None else logits),
                     causal=np.array([causal]), wbytes=a(wbytes), kvbytes=a(kvbytes), all_experts=np.array([False]),
                     tp=a(tp), ep=a(ep), **kw)


def keys_seen(q, c, window, causal):
    """Brute force: the mask over c cached + q new positions, |i - j| < window (j <= i if causal)."""
    i = np.arange(c, c + q)[:, None]
    j = np.arange(c + q)[None, :]
    mask = np.abs(i - j) < window
    if causal:
        mask &= j <= i
    return mask.sum(), np.flatnonzero(mask[:, :c].any(axis=0)).size  # keys over all queries; cached keys read


# --- one sliding and one full layer, prompt shorter and longer than the window ----------------------


@pytest.mark.parametrize("prompt", [5, 20])  # shorter and longer than W = 8
def test_prefill_flops_and_bytes_of_a_sliding_and_a_full_layer(prompt):
    sliding, full = toy([(1, SLIDING)]), toy([(1, FULL)])
    # causal prefill: query i sees min(i, 7) earlier keys and itself
    keys_sliding = {5: 1 + 2 + 3 + 4 + 5, 20: (1 + 2 + 3 + 4 + 5 + 6 + 7 + 8) + 12 * 8}[prompt]
    keys_full = prompt * (prompt + 1) // 2
    assert keys_sliding == keys_seen(prompt, 0, W, True)[0]
    p = inp(B=3, q=prompt, c=0, kv_write=prompt, causal=True)
    # 4 FLOPs per (query, key, head, dim): QK^T and AV
    assert attention(sliding, p).flops[0] == pytest.approx(3 * 4 * keys_sliding * 4 * 8)
    assert attention(full, p).flops[0] == pytest.approx(3 * 4 * keys_full * 4 * 16)
    # writes: K and V (2 tensors; 2 heads x 8 dims sliding, 1 x 16 full, two tensors by default)
    assert attention(sliding, p).kv_write_bytes[0] == 3 * prompt * 2 * 2 * 8 * 2
    assert attention(full, p).kv_write_bytes[0] == 3 * prompt * 2 * 1 * 16 * 2
    assert attention(full, inp(B=3, q=prompt, kv_write=prompt, causal=True, kv_single_tensor=True)
                     ).kv_write_bytes[0] == 3 * prompt * 1 * 16 * 2
    if prompt <= W:  # within the window the two masks agree: c + (q+1)/2 keys on average
        assert keys_sliding == keys_full


@pytest.mark.parametrize("cache", [5, 20])
def test_decode_and_canvas_steps_over_a_cache_shorter_and_longer_than_the_window(cache):
    sliding, full = toy([(1, SLIDING)]), toy([(1, FULL)])
    # AR decode: one query sees min(c, 7) cached keys and itself; the full layer c + 1
    step = inp(B=2, q=1, c=cache, kv_write=1, causal=True)
    seen = min(cache, W - 1)
    assert attention(sliding, step).flops[0] == pytest.approx(2 * 4 * (seen + 1) * 4 * 8)
    assert attention(full, step).flops[0] == pytest.approx(2 * 4 * (cache + 1) * 4 * 16)
    assert attention(sliding, step).kv_read_bytes[0] == 2 * seen * 2 * 2 * 8 * 2
    assert attention(full, step).kv_read_bytes[0] == 2 * cache * 2 * 1 * 16 * 2
    # bidirectional canvas of 4 over the cache: query c+t sees min(c+t, 7) earlier, itself,
    # 3-t later (all within the window): c = 20 -> 4*7 + 4 + (3+2+1) = 38 keys
    canvas = inp(B=1, q=4, c=cache, causal=False)
    by_hand = {5: (5 + 6 + 7 + 7) + 4 + 6, 20: 4 * 7 + 4 + 6}[cache]
    keys, cached = keys_seen(4, cache, W, False)
    assert (keys, cached) == (by_hand, min(cache, W - 1))
    assert attention(sliding, canvas).flops[0] == pytest.approx(4 * by_hand * 4 * 8)
    assert attention(sliding, canvas).kv_read_bytes[0] == min(cache, W - 1) * 2 * 2 * 8 * 2
    assert attention(full, canvas).flops[0] == pytest.approx(4 * 4 * (cache + 4) * 4 * 16)


def test_windowed_mask_against_brute_force_grid():
    m = toy([(1, SLIDING)])
    for q, c, causal in itertools.product([1, 3, 8, 13], [0, 2, 7, 9, 30], [True, False]):
        keys, cached = keys_seen(q, c, W, causal)
        op = attention(m, inp(q=q, c=c, causal=causal))
        assert op.flops[0] == pytest.approx(4 * keys * 4 * 8), (q, c, causal)
        assert op.kv_read_bytes[0] == cached * 2 * 2 * 8 * 2, (q, c, causal)


def test_k_eq_v_layer_has_no_v_projection():
    full = toy([(1, FULL)])
    op = qkv_proj(full, inp(q=10))
    w = 64 * (4 * 16 + 1 * 16)  # Q (4 heads x 16) and K only (1 head x 16): values reuse K
    assert op.weight_bytes[0] == w * 2
    assert op.flops[0] == 2 * 10 * w
    assert full.params_nonembedding == w + 4 * 16 * 64 + 2 * 64 + 3 * 64 * 128 + 64  # + o_proj, norms, MLP, final norm


# --- the K/V cache: one tensor or two, ring buffer or not ---------------------------------------------


def test_cache_size_with_and_without_one_tensor_and_ring_buffer():
    m = load_bundled(DG)
    tokens = 3000
    sliding = 2 * 8 * 256  # per token per layer: K and V, 8 heads x 256
    full_two, full_one = 2 * 2 * 512, 1 * 2 * 512
    expect = {
        (False, True): 25 * 1024 * sliding + 5 * tokens * full_two,
        (True, True): 25 * 1024 * sliding + 5 * tokens * full_one,
        (False, False): 25 * tokens * sliding + 5 * tokens * full_two,
        (True, False): 25 * tokens * sliding + 5 * tokens * full_one,
    }
    for (single, ring), want in expect.items():
        assert kv_cache_elements_per_gpu(m, tokens, 1.0, single, ring) == want
    assert kv_cache_elements_per_gpu(m, tokens, 1.0) == expect[False, True]  # by default: two tensors, ring buffer
    assert kv_cache_elements_per_gpu(m, 600, 1.0) == 600 * (25 * sliding + 5 * full_two)  # below the window
    assert m.kv_bytes_per_token(2.0) == (25 * sliding + 5 * full_two) * 2  # 220 KiB, every token kept
    assert kv_cache_elements_per_gpu(m, 1, 2.0) == 25 * 2 * 4 * 256 + 5 * 2 * 1 * 512  # tp=2: heads split
    assert kv_cache_elements_per_gpu(m, 1, 4.0) == 25 * 2 * 2 * 256 + 5 * 2 * 1 * 512  # 2 global heads replicate


def test_cache_memory_of_an_analysis_uses_the_ring_buffer():
    r = api.analyze(DG, "h100", scheme="block", block=256, prompt=2000, gen=256, batch=2)["results"][0]
    per_seq = (25 * 1024 * 2 * 8 * 256 + 5 * 2256 * 2 * 2 * 512) * 2  # block keeps prompt + generation
    assert r["memory"]["kv_cache_bytes"] == pytest.approx(2 * per_seq)


# --- dense MLP + MoE branch in parallel -------------------------------------------------------------


def test_dense_plus_moe_layer():
    m = ModelSpec(id="hybrid", family="custom", n_layers=2, d_model=64, n_heads=4, n_kv_heads=2, head_dim=16,
                  ffn_dim=96, vocab_size=1000,
                  moe=dict(n_experts=4, experts_per_token=2, expert_ffn_dim=32, n_moe_layers=2),
                  layers=[[2, dict(head_dim=16, n_kv_heads=2, dense_mlp=True, moe=True)]])
    assert (m.n_dense_layers, m.n_moe_layers) == (2, 2)
    attn = 64 * 16 * (4 + 2 * 2) + 4 * 16 * 64
    ffn = 3 * 64 * 96 + 4 * 3 * 64 * 32 + 64 * 4  # dense MLP + 4 experts + router
    assert m.params_total == 2 * (attn + ffn + 2 * 64) + 64 + 2 * 1000 * 64
    assert m.params_active == m.params_total - 2 * 2 * 3 * 64 * 32  # 2 idle experts per layer
    p = inp(B=1, q=100)  # 100 tokens touch all 4 experts (up to 1e-12)
    ops = {o.name: o for o in pass_ops(m, p)}
    assert {"mlp", "router", "experts"} <= set(ops)
    assert ops["mlp"].flops[0] == 2 * 2 * 100 * 3 * 64 * 96
    assert ops["experts"].flops[0] == 2 * 2 * 100 * 2 * 3 * 64 * 32
    assert ops["experts"].weight_bytes[0] == pytest.approx(2 * 4 * 3 * 64 * 32 * 2)
    # under TP the two branches add up before one all-reduce per FFN (plus one per attention)
    tp = tp_collectives(m, inp(B=1, q=100, tp=2))
    assert tp.collectives[0] == 2 + 2 + 1  # attention, FFN, logits gather


# --- parameter counts of the new families, by hand ----------------------------------------------------


def test_diffusion_gemma_parameters_by_hand():
    m = load_bundled(DG)
    d, V = 2816, 262144
    sliding = d * (16 * 256 + 2 * 8 * 256) + 16 * 256 * d + 2 * 256  # Q, K, V, O + q/k norms
    full = d * (16 * 512 + 2 * 512) + 16 * 512 * d + 2 * 512  # Q, K (= V), O + q/k norms
    ffn = 3 * d * 2112 + 128 * 3 * d * 704 + d * 128  # dense GeGLU + 128 experts + router
    total = V * d + 25 * sliding + 5 * full + 30 * (ffn + 4 * d) + d  # tied head
    assert m.params_total == total == 25_232_800_000
    assert m.params_active == total - 30 * 120 * 3 * d * 704
    assert round(m.params_total / 1e9, 1) == 25.2 and round(m.params_active / 1e9, 1) == 3.8
    vision = 27 * (4 * 1152**2 + 3 * 1152 * 4304 + 2 * 1152) + 3 * 16 * 16 * 1152
    assert m.vision_params == vision
    assert (m.params_total + m.vision_params) / 1e9 == pytest.approx(26, rel=0.01)  # published: 26B total
    assert m.params_active / 1e9 == pytest.approx(4, rel=0.05)  # ~4B active
    assert m.tie_embeddings and m.logit_softcap == 30.0 and m.vocab_size == 262144


@pytest.mark.parametrize("model_id, total, nonembedding, active", [
    # Qwen3-8B card: 8.2B total, 6.95B non-embedding
    ("Qwen/Qwen3-8B", 2 * 151936 * 4096 + 36 * (4096 * 128 * (32 + 16) + 32 * 128 * 4096 + 256 + 3 * 4096 * 12288
                                                 + 2 * 4096) + 4096, None, None),
    # Qwen3-30B-A3B card: 30.5B total, 3.3B active, 29.9B non-embedding
    ("Qwen/Qwen3-30B-A3B", None, 48 * (2048 * 128 * (32 + 8) + 32 * 128 * 2048 + 256 + 128 * 3 * 2048 * 768
                                       + 2048 * 128 + 2 * 2048) + 2048, None),
    # Gemma 2 report Table 2: 8,324,201,984 non-embedding, 917,962,752 embedding (tied)
    ("google/gemma-2-9b", 917_962_752 + 8_324_201_984, 8_324_201_984, None),
])
def test_new_family_parameter_totals(model_id, total, nonembedding, active):
    m = load_bundled(model_id)
    if total is not None:
        assert m.params_total == total
    if nonembedding is not None:
        assert m.params_nonembedding == nonembedding


def test_published_totals_of_the_new_configs():
    q8, q30, g3 = load_bundled("Qwen/Qwen3-8B"), load_bundled("Qwen/Qwen3-30B-A3B"), load_bundled("google/gemma-3-1b-it")
    assert round(q8.params_total / 1e9, 1) == 8.2 and round(q8.params_nonembedding / 1e9, 2) == 6.95
    assert round(q30.params_total / 1e9, 1) == 30.5 and round(q30.params_active / 1e9, 1) == 3.4  # card: 3.3B
    assert round(q30.params_nonembedding / 1e9, 1) == 29.9
    assert round(g3.params_nonembedding / 1e6) == 698 and round(g3.embedding_weights / 1e6) == 302
    # Gemma 3: 5 sliding (window 512) : 1 global, 26 layers -> 22 sliding, 4 global
    assert [(n, k.attention, k.window) for n, k in g3.layer_groups] == [(22, "sliding", 512), (4, "full", None)]
    g2 = load_bundled("google/gemma-2-9b")
    assert [(n, k.attention) for n, k in g2.layer_groups] == [(21, "sliding"), (21, "full")]


# --- bad configs of the new families: one clear line ---------------------------------------------------


def _dg_config():
    return json.loads((CONFIG_DIR / "google__diffusiongemma-26B-A4B-it.json").read_text())


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.update(layer_types=t["layer_types"][:29]), "'layer_types' must list one of .* 30 layers, got 29"),
    (lambda t: t.update(sliding_window=0), "'sliding_window' must be >= 1, got 0"),
    (lambda t: t.update(layer_types=["sliding_attention"] * 29 + ["chunked_attention"]), "unknown kind.*chunked"),
    (lambda t: t.pop("global_head_dim"), "missing required field.*global_head_dim"),
    (lambda t: t.update(final_logit_softcapping=-1), "'final_logit_softcapping' must be a positive number"),
    (lambda t: t.update(top_k_experts=200), "experts_per_token cannot exceed n_experts"),
    (lambda t: t.update(num_global_key_value_heads=3), "multiple of n_kv_heads \\(3\\)"),
])
def test_bad_diffusion_gemma_configs_get_one_clear_line(edit, message):
    cfg = _dg_config()
    edit(cfg["text_config"])
    with pytest.raises(ConfigError, match=message) as err:
        spec_from_mapping(cfg, model_id="bad", source="local")
    assert "\n" not in str(err.value)


def test_bad_gemma_and_qwen3_moe_configs(tmp_path, capsys):
    base = json.loads((CONFIG_DIR / "google__gemma-2-9b.json").read_text())
    with pytest.raises(ConfigError, match="'layer_types' must list"):
        spec_from_mapping({**base, "layer_types": ["full_attention"] * 3}, model_id="bad", source="local")
    with pytest.raises(ConfigError, match="'sliding_window'"):
        spec_from_mapping({k: v for k, v in base.items() if k != "sliding_window"}, model_id="bad", source="local")
    qwen = json.loads((CONFIG_DIR / "Qwen__Qwen3-30B-A3B.json").read_text())
    for bad in ([99], 0, ""):  # 0 and "" were read as no list (falsy), not refused
        with pytest.raises(ConfigError, match="'mlp_only_layers'"):
            spec_from_mapping({**qwen, "mlp_only_layers": bad}, model_id="bad", source="local")
    assert spec_from_mapping({**qwen, "mlp_only_layers": None}, model_id="ok", source="local").n_moe_layers == 48
    for bad in (0, "", False):  # as architectures: "x" is refused, so is a falsy non-list
        with pytest.raises(ConfigError, match="'architectures' must be a list"):
            spec_from_mapping({**qwen, "architectures": bad}, model_id="bad", source="local")
    from dlmcost.cli import main
    cfg = _dg_config()
    cfg["text_config"]["sliding_window"] = 0
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(cfg))
    assert main(["model", str(path)]) == ConfigError.exit_code
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1 and "sliding_window" in err


def test_sliding_layer_needs_a_window():
    with pytest.raises(ValueError, match="needs a window"):
        toy([(1, dict(attention="sliding", head_dim=8, n_kv_heads=2))])
    with pytest.raises(ValueError, match="layer groups hold 3 layers"):
        ModelSpec(id="x", family="custom", n_layers=2, d_model=64, n_heads=4, n_kv_heads=2, head_dim=8, ffn_dim=8,
                  vocab_size=10, layers=[[3, dict(head_dim=8, n_kv_heads=2)]])


# --- logits: soft-capping, self-conditioning, a bf16 head under quantised weights ------------------------


def test_softcap_and_self_conditioning_by_hand():
    m = load_bundled(DG)
    V, d = 262144, 2816
    p = inp(B=2, q=256, c=1000, logits=256, self_condition=np.array([True]))
    cap = logit_softcap(m, p)
    assert cap.flops[0] == 3 * 2 * 256 * V  # divide, tanh, multiply per logit
    assert cap.activation_bytes[0] == 2 * 256 * V * (2 + 4)  # read bf16, write fp32
    sc = self_condition(m, p)
    assert sc.flops[0] == 2 * 2 * 256 * V * d  # as large as the LM head
    assert sc.flops[0] == lm_head(m, p).flops[0]
    assert sc.weight_bytes[0] == V * d * 2  # the embedding table, read again
    assert sc.activation_bytes[0] == 2 * 256 * V * (4 + 2 + 2) + 2 * 256 * d * 2
    off = inp(B=2, q=256, c=1000, logits=256)
    assert {o.name: o for o in pass_ops(m, off)}["self_condition"].flops[0] == 0  # a canvas's first step
    assert self_condition(m, off).weight_bytes[0] == 0
    assert "self_condition" not in {o.name for o in pass_ops(load_bundled("Qwen/Qwen3-8B"), p)}
    assert "logit_softcap" in {o.name for o in pass_ops(m, off)}
    assert "logit_softcap" not in {o.name for o in pass_ops(load_bundled("Qwen/Qwen3-8B"), off)}


@pytest.mark.parametrize("tp", [1, 4])
def test_self_conditioning_is_split_by_vocabulary_under_tensor_parallelism(tp):
    """The embedding table is vocabulary-split like the head (Megatron's vocab-parallel embedding):
    each GPU multiplies its V/tp probabilities by its V/tp x d rows, and the n x d partial sums are
    all-reduced (tp_collectives). DiffusionGemma 26B-A4B: V 262,144, d 2,816 (its config.json);
    B 3 x 256 logit positions; the head bf16 under fp8 weights."""
    m = load_bundled(DG)
    V, d, n = 262144, 2816, 3 * 256
    sc = self_condition(m, inp(B=3, q=256, c=500, logits=256, wbytes=1.0, tp=tp, self_condition=np.array([True])))
    assert sc.flops[0] == 2 * n * V * d / tp
    assert sc.weight_bytes[0] == V * d * 2 / tp
    assert sc.activation_bytes[0] == n * V / tp * (4 + 2 + 2) + n * d * 2
    assert sc.kernels[0] == 2


def test_softcap_is_one_kernel_in_a_pass_with_logits_and_none_without():
    """One kernel per pass that computes logits (docs: one per pass for the head's ops), even for a
    single logit position (AR decode); a pass with no logits (the causal encoder) launches none."""
    m = load_bundled(DG)
    assert logit_softcap(m, inp(B=2, q=300, logits=0, causal=True)).kernels[0] == 0
    for logits in (1, 256):
        assert logit_softcap(m, inp(B=2, q=256, logits=logits)).kernels[0] == 1


def test_head_and_embedding_stay_bf16_unless_quantised():
    m = load_bundled("GSAI-ML/LLaDA-8B-Instruct")  # untied: 126464 x 4096 head and embedding
    V, d = 126464, 4096
    for wbytes in (1.0, 0.5):
        assert lm_head(m, inp(q=4, wbytes=wbytes)).weight_bytes[0] == V * d * 2
        assert lm_head(m, inp(q=4, wbytes=wbytes, quantize_head=np.array([True]))).weight_bytes[0] == V * d * wbytes
    bf16_head = weight_bytes_per_gpu(m, 1.0, 1.0, 1.0)
    quantised = weight_bytes_per_gpu(m, 1.0, 1.0, 1.0, quantize_head=True)
    assert bf16_head - quantised == pytest.approx(2 * V * d * (2 - 1))  # head and embedding
    norms = 32 * 2 * 4096 + 4096  # RMSNorm weights stay 16-bit whatever the precision
    assert quantised == pytest.approx(m.params_total * 1.0 + norms * (2 - 1))


# --- expert parallelism at the busiest GPU --------------------------------------------------------------


def brute_busiest(n_experts, ep, touched):
    """E[max over ranks of experts touched] over every `touched`-subset of the experts."""
    per = n_experts // ep
    maxima = [max(sum(1 for e in subset if e // per == r) for r in range(ep))
              for subset in itertools.combinations(range(n_experts), touched)]
    return sum(maxima) / len(maxima)


@pytest.mark.parametrize("n_experts, ep", [(8, 4), (8, 2), (12, 3), (8, 8)])
def test_busiest_rank_given_touched_experts_matches_enumeration(n_experts, ep):
    from dlmcost.engine.cost import _busiest_given_touched
    table = _busiest_given_touched(n_experts, ep)
    for touched in range(n_experts + 1):
        want = brute_busiest(n_experts, ep, touched) if touched else 0.0
        assert table[touched] == pytest.approx(want, abs=1e-12), touched


def test_mixtral_ep8_decode_reads_a_whole_expert_on_the_busiest_gpu():
    m = load_bundled("mistralai/Mixtral-8x7B-Instruct-v0.1")  # 8 experts, top 2, 32 layers
    expert = 3 * 4096 * 14336
    p = inp(B=1, q=1, c=300, causal=True, tp=8, ep=8)
    # one token touches 2 of the 8 experts, one per GPU at most: the busiest GPU holds one, whole
    assert busiest_rank_experts(8, 2, np.array([1.0]), 8)[0] == pytest.approx(1.0)
    op = experts(m, p)
    assert op.weight_bytes[0] == pytest.approx(32 * expert * 2)
    assert op.flops[0] == pytest.approx(32 * 2 * 1 * expert)  # one token copy, the whole expert
    a2a = ep_all_to_all(m, p)
    assert a2a.link_bytes[0] == pytest.approx(32 * 2 * 1 * 7 / 8 * 4096 * 2)
    no_ep = experts(m, inp(B=1, q=1, c=300, causal=True, tp=8, ep=1))
    assert no_ep.weight_bytes[0] == pytest.approx(32 * 2 * expert / 8 * 2)  # 2 experts, an eighth each
    whole = api.analyze("mistralai/Mixtral-8x7B-Instruct-v0.1", "h100", scheme="ar", tp=8, ep=8)["results"][0]
    step = next(f for f in whole["passes"] if f["count"] > 1)
    assert 11.5e9 < step["bytes"] < 11.8e9  # per decode step on the busiest GPU (3.2 GB when costed at the average)


def test_busiest_rank_with_several_ep_sizes_in_one_call():
    """A sweep over ep costs rows of different ep together. One token touches exactly k = 2 of
    E = 8 experts: ep 1 -> both on the one rank; ep 2 (4 per rank) -> the pair shares a rank with
    probability 2 C(4,2) / C(8,2) = 12/28; ep 4 (2 per rank) -> 4 C(2,2) / 28 = 4/28; ep 8 -> 1."""
    got = busiest_rank_experts(8, 2, np.ones(4), np.array([1.0, 2.0, 4.0, 8.0]))
    assert got == pytest.approx([2.0, 1 + 12 / 28, 1 + 4 / 28, 1.0], abs=1e-12)


def test_top1_moe_one_token_under_expert_parallelism():
    """Top-1 routing (Switch, Llama 4): one token touches exactly one expert (d = 1), which sits
    whole on the busiest of ep = tp = 2 GPUs: that GPU reads it and computes the token's one copy,
    and the all-to-all sends half of the copies (the other GPU's share) there and back."""
    m = ModelSpec(id="top1", family="custom", n_layers=2, d_model=64, n_heads=4, n_kv_heads=2, head_dim=16,
                  ffn_dim=96, vocab_size=1000,
                  moe=dict(n_experts=4, experts_per_token=1, expert_ffn_dim=32, n_moe_layers=2),
                  layers=[[2, dict(head_dim=16, n_kv_heads=2, moe=True)]])
    expert = 3 * 64 * 32
    p = inp(B=1, q=1, c=50, causal=True, tp=2, ep=2)
    op = experts(m, p)
    assert op.flops[0] == pytest.approx(2 * 2 * 1 * expert)
    assert op.weight_bytes[0] == pytest.approx(2 * expert * 2)
    assert ep_all_to_all(m, p).link_bytes[0] == pytest.approx(2 * 2 * 1 * 1 / 2 * 64 * 2)


def test_big_batches_spread_evenly():
    assert busiest_rank_experts(256, 8, np.array([1e6]), 8)[0] == pytest.approx(32.0)
    assert busiest_rank_experts(256, 8, np.array([4.0]), 1)[0] == pytest.approx(256 * (1 - (1 - 8 / 256) ** 4))


def test_window_affine_marks_families_whose_sums_bend():
    from dlmcost.engine.cost import window_affine
    m = toy([(1, SLIDING)])  # W = 8
    for q, c0, dc, n in itertools.product([1, 3], [0, 2, 5, 6, 9], [0, 1, 3], [1, 2, 5]):  # 6 = W - 2
        keys = [attention(m, inp(q=q, c=c0 + dc * j, causal=True)).flops[0] for j in range(n)]
        reads = [attention(m, inp(q=q, c=c0 + dc * j, causal=True)).kv_read_bytes[0] for j in range(n)]
        affine = all(np.allclose(np.diff(v, 2), 0) for v in (keys, reads))
        if window_affine(m, q, 0, c0, dc, n):  # claimed affine -> truly affine
            assert affine, (q, c0, dc, n)
    assert not window_affine(m, 1, 0, 0, 1, 20)  # AR decode across the window
    assert window_affine(m, 1, 0, 7, 1, 20)  # decode entirely beyond it
    assert window_affine(toy([(1, FULL)]), 1, 0, 0, 1, 20)  # no sliding layer
    # two sliding kinds: decode from c = 3 bends at the W = 8 layers, not at the W = 64 ones
    wide = dict(SLIDING, window=64)
    assert window_affine(toy([(1, wide)]), 1, 0, 3, 1, 20)
    assert not window_affine(toy([(1, SLIDING), (1, wide)]), 1, 0, 3, 1, 20)
    assert not window_affine(toy([(1, wide), (1, SLIDING)]), 1, 0, 3, 1, 20)


def test_a_hybrid_is_a_config(tmp_path, capsys):
    """dlmcost's own schema: sliding + global K = V layers, dense + MoE, written as layer groups."""
    from dlmcost.cli import main
    path = tmp_path / "hybrid.yaml"
    path.write_text("""schema: dlmcost.model/v1
n_layers: 4
d_model: 256
n_heads: 4
n_kv_heads: 2
head_dim: 64
ffn_dim: 512
vocab_size: 1000
tie_embeddings: true
logit_softcap: 30
moe: {n_experts: 8, experts_per_token: 2, expert_ffn_dim: 128, n_moe_layers: 4}
layers:
  - [3, {attention: sliding, window: 128, head_dim: 64, n_kv_heads: 2, dense_mlp: true, moe: true}]
  - [1, {attention: full, head_dim: 128, n_kv_heads: 1, k_eq_v: true, dense_mlp: true, moe: true}]
""")
    assert main(["analyze", str(path), "--gpu", "h100", "--scheme", "ar", "--prompt", "300", "--gen", "20",
                 "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    attn = 3 * (256 * 64 * (4 + 4) + 4 * 64 * 256) + (256 * 128 * (4 + 1) + 4 * 128 * 256)
    ffn = 4 * (3 * 256 * 512 + 8 * 3 * 256 * 128 + 256 * 8 + 2 * 256)
    assert out["model"]["params_total"] == attn + ffn + 256 + 1000 * 256
    assert out["model"]["kv_bytes_per_token"] == (3 * 2 * 2 * 64 + 1 * 2 * 1 * 128) * 2


def test_model_command_shows_layer_kinds_and_the_vision_tower_apart():
    info = api.model_info(load_bundled(DG))
    assert info["layers"] == {"0": "25 x sliding 1024, head_dim 256, 8 K/V heads; dense + MoE",
                              "1": "5 x full, head_dim 512, K = V, 2 K/V heads; dense + MoE"}
    assert info["vision_params"] == 545_889_024 and info["params_total"] == 25_232_800_000
    assert "layers" not in api.model_info(load_bundled("GSAI-ML/LLaDA-8B-Instruct"))


def test_storage_options_from_the_command_line():
    """--kv-single-tensor halves a K = V layer's cache, --no-ring-buffer keeps a sliding layer's
    whole context, --quantize-head stores the head and embedding at the weights' precision."""
    from dlmcost import api

    model, kw = "google/diffusiongemma-26B-A4B-it", dict(prompt=2048, gen=256)
    base = api.analyze(model, "h100", **kw)["results"][0]["memory"]
    one = api.analyze(model, "h100", kv_single_tensor=True, **kw)["results"][0]["memory"]
    full = api.analyze(model, "h100", ring_buffer=False, **kw)["results"][0]["memory"]
    assert one["kv_cache_bytes"] < base["kv_cache_bytes"] < full["kv_cache_bytes"]
    spec = resolve_model(model)
    table = spec.vocab_size * spec.d_model  # tied: one table for the embedding and the head
    bf16 = api.analyze(model, "h100", precision="fp8", **kw)["results"][0]["memory"]["weights_bytes"]
    quantised = api.analyze(model, "h100", precision="fp8", quantize_head=True, **kw)["results"][0]["memory"]["weights_bytes"]
    assert bf16 - quantised == pytest.approx(table * (2 - 1))


def test_one_tensor_for_k_eq_v_layers_in_the_passes_traffic():
    """--kv-single-tensor also changes what the passes move, not only the cache's size.
    DiffusionGemma's 5 full layers (K = V, 2 K/V heads of 512, its config) then write and read one
    bf16 tensor instead of two: AR, prompt 64, 3 tokens (the prefill samples the first; 2 steps feed
    the first two): writes 64 + 1 + 1 tokens, the steps read 64 and 65 cached ones; the 25 sliding layers (K != V) are unchanged."""
    from dlmcost import api

    kw = dict(stack="none", scheme="ar", prompt=64, gen=3)
    model = "google/diffusiongemma-26B-A4B-it"
    attention_bytes = [next(o["bytes"] for o in api.analyze(model, "h100", kv_single_tensor=single, **kw)
                            ["results"][0]["ops"] if o["name"] == "attention") for single in (False, True)]
    one_tensor_per_token = 5 * 2 * 512 * 2
    assert attention_bytes[0] - attention_bytes[1] == (66 + 64 + 65) * one_tensor_per_token


def test_storage_options_change_the_passes_traffic_and_rates():
    """The same options in the time model. One 256-token canvas over a 300-token prompt at batch
    8, 16 steps (one plain, 15 self-conditioning; no stack): --kv-single-tensor reads one tensor
    instead of two in the 5 full layers (K = V; 2 K/V heads x 512 each), so each step reads
    5 x 8 x 300 x 1,024 x 2 bytes fewer; --quantize-head under fp8 reads the V x d table at 1 byte
    and runs the head's and the self-conditioning's GEMMs at the fp8 rate (H100: 1,979 TFLOP/s x
    0.72 x 0.68 sustained; 3.35 TB/s x 0.80; 3 us a kernel)."""
    V, d, n = 262144, 2816, 8 * 256
    kw = dict(prompt=300, gen=256, steps=16, batch=8, stack="none")
    steps = lambda r: [p for p in r["passes"] if p["name"].startswith("step")]  # noqa: E731
    two, one = (api.analyze(DG, "h100", kv_single_tensor=s, **kw)["results"][0] for s in (False, True))
    for a, b in zip(steps(two), steps(one)):
        assert (a["c"], a["q"]) == (300, 256)
        assert a["kv_read_bytes"] - b["kv_read_bytes"] == 5 * 8 * 300 * 1024 * 2
    r = api.analyze(DG, "h100", precision="fp8", quantize_head=True, **kw)["results"][0]
    ops = {o["name"]: o for o in r["ops"]}
    flops, fp8, bw = 2 * n * V * d, 1979e12 * 0.72 * 0.68, 3.35e12 * 0.80
    head = max(flops / fp8, (V * d * 1 + n * (d + V) * 2) / bw) + 3e-6
    sc = max(flops / fp8, (V * d * 1 + n * V * (4 + 2 + 2) + n * d * 2) / bw) + 2 * 3e-6
    assert ops["lm_head"]["time_s"] == pytest.approx(16 * head, rel=1e-9)
    assert ops["self_condition"]["time_s"] == pytest.approx(15 * sc, rel=1e-9)
    bf16_head = {o["name"]: o for o in api.analyze(DG, "h100", precision="fp8", **kw)["results"][0]["ops"]}
    for name in ("attention", "experts", "qkv_proj"):  # the other ops keep their rates
        assert ops[name]["time_s"] == pytest.approx(bf16_head[name]["time_s"], rel=1e-12)


@pytest.mark.parametrize("quantize_head", [False, True])
def test_time_bound_puts_a_quantised_head_at_the_weights_peak(quantize_head):
    """time_bound_s: per pass max(sum of FLOPs / their kind's peak, bytes / bandwidth) at peak rates
    (H100: fp8 GEMMs 1,979 TFLOP/s, bf16 attention 989.5, fp32 vector 67; 3.35 TB/s). The head and
    the self-conditioning GEMM run at bf16 unless --quantize-head puts them at the precision's
    peak. One canvas at batch 64: its steps are compute-bound."""
    kw = dict(prompt=300, gen=256, steps=16, batch=64, stack="none")
    r = api.analyze(DG, "h100", precision="fp8", quantize_head=quantize_head, **kw)["results"][0]
    peak = dict(linear=1979e12, attention=989.5e12, lm_head=1979e12 if quantize_head else 989.5e12, other=67e12)
    want = sum(p["count"] * max(sum(p["flops_" + k] / peak[k] for k in peak), p["bytes"] / 3.35e12)
               for p in r["passes"])
    assert r["time_bound_s"] == pytest.approx(want, rel=1e-12)
    step = next(p for p in r["passes"] if p["name"] == "step-sc")
    assert sum(step["flops_" + k] / peak[k] for k in peak) > step["bytes"] / 3.35e12


# --- a model with two attention kinds: each op runs at its own kind's rate ------------------------


@pytest.mark.parametrize("stack_factors", [None, (0.25, 0.5, 300.0)])
def test_mixed_attention_ops_run_at_their_kinds_rates(stack_factors):
    """Gemma 3 1B has 22 sliding (window 512) and 4 full layers, so its Q/K/V projection,
    attention and output projection are each summed over two layer groups. Each stays a GEMM
    (linear, at the GEMM rate and under a stack the GEMM curve) or attention (the attention rate
    and efficiency). Two full canvases of 2048 tokens at batch 2 are compute-bound, so an op's time
    is FLOPs / (peak x efficiency x stack factor) + a kernel per layer. Dimensions from the
    bundled config.json, FLOPs by hand (attention: every query's keys counted over the mask).
    With a stack's attention_keys_overhead k0 the attention op (summed over both layer kinds) runs
    at k / (k + k0) of its rate, k its keys per query over all layers: its FLOPs over its FLOPs at
    one key per query, 4 B q H hd x L (each of the 26 layers' queries against one key)."""
    import oracle
    from dlmcost.inputs.stacks import validate_stack

    cfg = json.loads((CONFIG_DIR / "google__gemma-3-1b-it.json").read_text())
    L, d, H, kvh, hd, W = (cfg[k] for k in ("num_hidden_layers", "hidden_size", "num_attention_heads",
                                            "num_key_value_heads", "head_dim", "sliding_window"))
    full_layers = L // cfg["sliding_window_pattern"]  # every 6th layer is global: 4 of 26
    B, q, S = 2, 2048, 2
    T = B * q
    keys_sliding = sum(min(t, W - 1) + 1 + min(q - 1 - t, W - 1) for t in range(q))  # bidirectional window
    # Q/K/V weights per layer: d x (H + 2 K/V heads) x head_dim, plus Gemma 3's q- and k-norm
    # scales (head_dim each), which dlmcost counts with the projection
    flops = {"qkv_proj": 2 * T * L * (d * (H + 2 * kvh) * hd + 2 * hd), "o_proj": 2 * T * L * H * hd * d,
             "attention": 4 * B * H * hd * (full_layers * q * q + (L - full_layers) * keys_sliding)}
    g = oracle.gpu_rates("nvidia-h100-sxm.yaml", "bf16")
    factor = {"linear": 1.0, "attention": 1.0}
    keys_term = 1.0
    stack = "none"
    if stack_factors:
        factor = {"linear": stack_factors[0], "attention": stack_factors[1]}
        k0 = stack_factors[2]
        keys_term = 1 + k0 * 4 * B * q * H * hd * L / flops["attention"]  # 1 + k0 / k
        assert keys_term == 1.0 or keys_term > 1.1  # the term shows
        keys = ("host", "fixed", "gemm_efficiency", "attention_efficiency", "elementwise_bytes_factor",
                "sampler_logits_bytes")
        stack = validate_stack(dict(
            name="t", host=dict(us_per_layer=0, overlaps_gpu=True, fixed_us_per_forward=0),
            gemm_efficiency=dict(rows=[1], efficiency=[stack_factors[0]]), attention_efficiency=stack_factors[1],
            elementwise_bytes_factor=1.0, sampler_logits_bytes=0.0, attention_keys_overhead=k0,
            sources={**dict.fromkeys(keys, "test"), "attention_keys_overhead": "test"}))
    r = api.analyze("google/gemma-3-1b-it", "h100", stack=stack, scheme="mdm", prompt=1024, gen=1024, steps=S,
                    batch=B)["results"][0]
    ops = {o["name"]: o for o in r["ops"]}
    for name, kind in (("qkv_proj", "linear"), ("attention", "attention"), ("o_proj", "linear")):
        assert ops[name]["flops"] == pytest.approx(S * flops[name], rel=1e-12)
        compute = flops[name] / (g["peak"][kind] * g["eff"][kind] * factor[kind])
        compute *= keys_term if kind == "attention" else 1.0
        # a projection (linear) streams and launches at the GEMMs' measured rate (weight_streaming)
        eff_mem, launch = (g["eff_mem_linear"], g["overhead_linear_s"]) if kind == "linear" else (g["eff_mem"], g["overhead_s"])
        assert ops[name]["bytes"] / S / (g["bandwidth"] * eff_mem) < compute  # compute-bound
        assert ops[name]["time_s"] == pytest.approx(S * (compute + L * launch), rel=1e-9), name
