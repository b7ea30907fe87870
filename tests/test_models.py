"""Parameter counts and K/V sizes against the published totals (the bundled MANIFEST.yaml and the model cards)."""

import pytest

from dlmcost.errors import ConfigError
from dlmcost.inputs.models import bundled_ids, load_bundled, spec_from_mapping

PUBLISHED = {
    # id: (total, non-embedding or None, active or None, relative tolerance)
    "GSAI-ML/LLaDA-8B-Instruct": (8.02e9, 6.98e9, None, 0.005),
    "GSAI-ML/LLaDA-8B-Base": (8.02e9, 6.98e9, None, 0.005),
    "Dream-org/Dream-v0-Instruct-7B": (7.62e9, None, None, 0.005),
    "Qwen/Qwen2.5-7B": (7.62e9, None, None, 0.005),
    "meta-llama/Meta-Llama-3-8B": (8.03e9, None, None, 0.005),
    "meta-llama/Llama-3.1-70B-Instruct": (70.6e9, None, None, 0.005),
    "inclusionAI/LLaDA2.0-mini": (16.3e9, None, 1.4e9, 0.03),
    "inclusionAI/LLaDA2.0-flash": (100e9, None, 6.1e9, 0.04),
    "inclusionAI/LLaDA2.1-mini": (16e9, None, None, 0.03),  # the SGLang cookbook: 16B
    "inclusionAI/LLaDA2.1-flash": (100e9, None, None, 0.04),  # 100B
    "mistralai/Mixtral-8x7B-Instruct-v0.1": (46.7e9, None, 12.9e9, 0.005),
    "deepseek-ai/DeepSeek-V3": (671e9, None, 37e9, 0.02),
    "MiniMaxAI/MiniMax-M2.5": (230e9, None, None, 0.01),  # "10B active": without the embedding and head
}


@pytest.mark.parametrize("model_id", sorted(PUBLISHED))
def test_parameter_counts_match_published(model_id):
    total, nonemb, active, tol = PUBLISHED[model_id]
    m = load_bundled(model_id)
    assert m.params_total == pytest.approx(total, rel=tol)
    if nonemb:
        assert m.params_nonembedding == pytest.approx(nonemb, rel=tol)
    if active:
        assert m.params_active == pytest.approx(active, rel=tol)


def _llada2_hand_count(d, L, heads, kv_heads, head_dim, dense_ffn, expert_ffn, experts, top_k, vocab):
    """(non-embedding, active) parameters of a LLaDA2 MoE config, counted by hand: the first layer
    dense, the others 256 routed SwiGLU experts + 1 shared one, a d x experts router with a bias per
    expert, two norms per layer and a final one; embedding and head untied."""
    attention = d * heads * head_dim + 2 * d * kv_heads * head_dim + heads * head_dim * d
    expert = 3 * d * expert_ffn
    dense_layer = attention + 3 * d * dense_ffn + 2 * d
    moe_layer = attention + (experts + 1) * expert + d * experts + experts + 2 * d
    active_moe_layer = attention + (top_k + 1) * expert + d * experts + experts + 2 * d
    nonembedding = dense_layer + (L - 1) * moe_layer + d
    active = dense_layer + (L - 1) * active_moe_layer + d + 2 * vocab * d
    return nonembedding, active


@pytest.mark.parametrize("model_id, dims", [
    # LLaDA2.1 keeps LLaDA2.0's config (MANIFEST.yaml): mini d 2048, 20 layers, 16 / 4 heads of 128,
    # dense FFN 5120, experts 512 wide; flash d 4096, 32 layers, 32 / 4 heads, 9216, 1024
    ("inclusionAI/LLaDA2.1-mini", (2048, 20, 16, 4, 128, 5120, 512, 256, 8, 157184)),
    ("inclusionAI/LLaDA2.1-flash", (4096, 32, 32, 4, 128, 9216, 1024, 256, 8, 157184)),
])
def test_llada21_hand_count(model_id, dims):
    nonembedding, active = _llada2_hand_count(*dims)
    m = load_bundled(model_id)
    assert m.params_nonembedding == nonembedding
    assert m.params_total == nonembedding + 2 * dims[-1] * dims[0]
    assert m.params_active == active
    if model_id.endswith("mini"):  # written out: 16,255,638,272 total, 1,432,967,936 active
        assert (m.params_total, m.params_active) == (16_255_638_272, 1_432_967_936)


def test_minimax_m25_hand_count():
    """MiniMax-M2.5: d 3072, 62 layers, 48 query and 8 K/V heads of 128, every layer 256 SwiGLU experts
    1536 wide (top 8, no shared one) behind a 3072 x 256 router with a bias per expert; Q and K RMSNorms
    over the whole projection (6144 and 1024 weights), two layer norms and a final one; 200,064-token
    vocabulary, embedding and head untied."""
    d, L, q, kv, f, E, k, V = 3072, 62, 48 * 128, 8 * 128, 1536, 256, 8, 200064
    attention = d * q + q + 2 * d * kv + kv + q * d
    router, expert, norms = d * E + E, 3 * d * f, 2 * d
    m = load_bundled("MiniMaxAI/MiniMax-M2.5")
    assert m.params_nonembedding == L * (attention + E * expert + router + norms) + d
    assert m.params_total == m.params_nonembedding + 2 * V * d == 228_689_764_864
    assert m.params_active == m.params_total - L * (E - k) * expert
    assert m.params_active - 2 * V * d == pytest.approx(10e9, rel=0.02)  # the published "10B active"
    assert (m.family, m.n_moe_layers, m.n_dense_layers, m.provenance) == ("minimax_m2", 62, 0, "reconstructed")


GLM46 = {  # zai-org/GLM-4.6's config.json keys (validation/models/glm-4.6.yaml cites where each comes from)
    "architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", "attention_bias": True,
    "first_k_dense_replace": 3, "head_dim": 128, "hidden_size": 5120, "intermediate_size": 12288,
    "max_position_embeddings": 202752, "moe_intermediate_size": 1536, "n_routed_experts": 160,
    "n_shared_experts": 1, "num_attention_heads": 96, "num_experts_per_tok": 8, "num_hidden_layers": 92,
    "num_key_value_heads": 8, "num_nextn_predict_layers": 1, "partial_rotary_factor": 0.5,
    "tie_word_embeddings": False, "use_qk_norm": True, "vocab_size": 151552,
}


def test_glm46_hand_count():
    """GLM-4.6: d 5120, 92 layers, 96 query and 8 K/V heads of 128 with Q/K/V biases and per-head Q/K
    RMSNorms (128 weights each); layers 0-2 dense SwiGLU 12,288 wide, the other 89 160 routed SwiGLU
    experts 1,536 wide (top 8) and one shared expert of the same width, behind a 5120 x 160 router with
    a correction bias per expert; two layer norms and a final one; 151,552-token vocabulary, embedding
    and head untied; the next-token-prediction layer left out. 352.8B in all against the model card's
    355B (its MTP layer, ~3.9B, is in the published total), 33.6B active, 32.1B without the embedding
    and head against the card's 32B."""
    d, L, dense, moe, q, kv, f, fe, E, k, V = 5120, 92, 3, 89, 96 * 128, 8 * 128, 12288, 1536, 160, 8, 151552
    attention = d * q + q + 2 * (d * kv + kv) + q * d + 2 * 128
    expert, router, norms = 3 * d * fe, d * E + E, 2 * d
    total = L * (attention + norms) + dense * 3 * d * f + moe * ((E + 1) * expert + router) + d + 2 * V * d
    active = total - moe * (E - k) * expert
    m = spec_from_mapping(GLM46, model_id="zai-org/GLM-4.6", source="local")
    assert (m.family, m.n_dense_layers, m.n_moe_layers, m.qkv_bias, m.qk_norm) == ("glm4_moe", 3, 89, True, True)
    assert (m.params_total, m.params_active) == (total, active) == (352_797_829_024, 33_632_266_144)
    assert m.params_total == pytest.approx(355e9, rel=0.01)
    assert m.params_active - 2 * V * d == pytest.approx(32e9, rel=0.01)
    assert m.kv_bytes_per_token(2) == L * kv * 2 * 2  # 92 layers x 8 K/V heads x 128 x K and V x 2 bytes


def test_glm4_moe_missing_experts_are_named():
    cfg = {k: v for k, v in GLM46.items() if k != "n_routed_experts"}
    with pytest.raises(ConfigError, match="GLM-4-MoE config is missing required field.*n_routed_experts"):
        spec_from_mapping(cfg, model_id="a", source="local")


def test_glm46_validation_file_is_the_same_config():
    import yaml

    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "validation" / "models" / "glm-4.6.yaml"
    cfg = yaml.safe_load(path.read_text())
    assert {key: cfg[key] for key in GLM46} == GLM46
    assert spec_from_mapping(cfg, model_id="a", source="local").params_total == 352_797_829_024


GLM47_FLASH = {  # zai-org/GLM-4.7-Flash's config.json keys (validation/models/glm-4.7-flash.yaml cites where each comes from)
    "architectures": ["Glm4MoeLiteForCausalLM"], "model_type": "glm4_moe_lite", "first_k_dense_replace": 1,
    "hidden_size": 2048, "intermediate_size": 10240, "kv_lora_rank": 512, "max_position_embeddings": 202752,
    "moe_intermediate_size": 1536, "n_routed_experts": 64, "n_shared_experts": 1, "num_attention_heads": 20,
    "num_experts_per_tok": 4, "num_hidden_layers": 47, "num_key_value_heads": 20, "q_lora_rank": 768,
    "qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "tie_word_embeddings": False, "topk_method": "noaux_tc",
    "v_head_dim": 256, "vocab_size": 154880,
}


def test_glm47_flash_hand_count():
    """GLM-4.7-Flash (glm4_moe_lite), DeepSeek-V3's layout at another size: d 2048, 47 layers, 20 heads of
    MLA: q_a (d x 768) and its norm, q_b (768 x 20 x (192 + 64)), kv_a with the shared rope key (d x (512 +
    64)) and its norm, kv_b (512 x 20 x (192 + 256)), o (20 x 256 x d); layer 0 dense SwiGLU 10,240 wide,
    the other 46 64 routed SwiGLU experts 1,536 wide (top 4) and one shared of the same width, behind a
    d x 64 router with a correction bias per expert; two layer norms a layer and a final one; 154,880-token
    vocabulary, embedding and head untied. 29.94B in all, 3.26B active without the embedding and head (the
    card's "30B-A3B"); the cache holds the 512 latent and 64 rope values a layer, not K and V per head."""
    d, L, H, ql, kl, nope, rope, v, f, fe, E, k, V = 2048, 47, 20, 768, 512, 192, 64, 256, 10240, 1536, 64, 4, 154880
    attention = d * ql + ql + ql * H * (nope + rope) + d * (kl + rope) + kl + kl * H * (nope + v) + H * v * d
    expert, router, norms = 3 * d * fe, d * E + E, 2 * d
    total = L * (attention + norms) + 3 * d * f + (L - 1) * ((E + 1) * expert + router) + d + 2 * V * d
    active = total - (L - 1) * (E - k) * expert
    m = spec_from_mapping(GLM47_FLASH, model_id="zai-org/GLM-4.7-Flash", source="local")
    assert (m.family, m.n_dense_layers, m.n_moe_layers) == ("deepseek", 1, 46)
    assert (m.params_total, m.params_active) == (total, active) == (29_943_393_920, 3_896_766_080)
    assert m.params_total == pytest.approx(30e9, rel=0.01)
    assert m.params_active - 2 * V * d == pytest.approx(3.26e9, rel=0.01)
    assert m.kv_bytes_per_token(2) == L * (kl + rope) * 2  # 47 layers x (512 latent + 64 rope) x 2 bytes


def test_glm47_flash_validation_file_is_the_same_config():
    import yaml

    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "validation" / "models" / "glm-4.7-flash.yaml"
    cfg = yaml.safe_load(path.read_text())
    assert {key: cfg[key] for key in GLM47_FLASH} == GLM47_FLASH
    assert spec_from_mapping(cfg, model_id="a", source="local").params_total == 29_943_393_920


def _gemma4_text(**keys):
    """A Gemma 4 text_config (google/gemma-4-*-it's keys: validation/models/gemma-4-*.yaml cite where each comes from):
    every sixth layer full attention, the rest sliding over 1,024 tokens."""
    n = keys["num_hidden_layers"]
    return {"model_type": "gemma4_text", "attention_bias": False, "attention_k_eq_v": True, "final_logit_softcapping": 30.0,
            "global_head_dim": 512, "head_dim": 256, "hidden_size_per_layer_input": 0, "num_kv_shared_layers": 0,
            "layer_types": ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(n)],
            "max_position_embeddings": 262144, "sliding_window": 1024, "tie_word_embeddings": True,
            "vocab_size": 262144, **keys}


GEMMA4_31B = {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4", "text_config": _gemma4_text(
    enable_moe_block=False, hidden_size=5376, intermediate_size=21504, num_attention_heads=32,
    num_global_key_value_heads=4, num_hidden_layers=60, num_key_value_heads=16)}
GEMMA4_26B = {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4", "text_config": _gemma4_text(
    enable_moe_block=True, hidden_size=2816, intermediate_size=2112, moe_intermediate_size=704, num_attention_heads=16,
    num_experts=128, top_k_experts=8, num_global_key_value_heads=2, num_hidden_layers=30, num_key_value_heads=8)}


def _gemma4_attention(d, H, kv_sliding, kv_full):
    """One sliding layer's and one full layer's attention weights: Q (H heads of 256 or 512) and its per-head
    norm, K and V (256-wide heads) or K alone (512-wide: values are the keys) and the K norm, O back to d."""
    sliding = d * H * 256 + 256 + 2 * d * kv_sliding * 256 + 256 + H * 256 * d
    full = d * H * 512 + 512 + d * kv_full * 512 + 512 + H * 512 * d
    return sliding, full


def test_gemma4_31b_hand_count():
    """Gemma 4 31B: d 5,376, 60 layers (50 sliding, 10 full), 32 query heads; sliding layers 16 K/V heads of 256,
    full layers 4 K/V heads of 512 whose values are the keys (no v_proj); a GeGLU MLP 21,504 wide on every layer,
    four norms a layer and a final one; 262,144-token vocabulary, the head tied to the embedding. 30.70B (29.29B
    without the embedding), the published "31B"; the cache holds K and V per K/V head (SGLang stores both)."""
    d, L, H, f, V = 5376, 60, 32, 21504, 262144
    sliding, full = _gemma4_attention(d, H, 16, 4)
    total = 50 * sliding + 10 * full + L * (3 * d * f + 4 * d) + d + V * d
    m = spec_from_mapping(GEMMA4_31B, model_id="google/gemma-4-31B-it", source="local")
    assert (m.family, m.n_dense_layers, m.n_moe_layers, m.logit_softcap) == ("gemma4", 60, 0, 30.0)
    assert m.params_total == m.params_active == total == 30_697_345_280
    assert m.params_total == pytest.approx(31e9, rel=0.02)
    assert m.kv_bytes_per_token(2) == (50 * 2 * 16 * 256 + 10 * 2 * 4 * 512) * 2
    assert m.sampler.scheme == "ar"


def test_gemma4_26b_a4b_hand_count():
    """Gemma 4 26B-A4B: d 2,816, 30 layers (25 sliding, 5 full), 16 query heads; sliding layers 8 K/V heads of 256,
    full layers 2 of 512 with values from the keys; on every layer a GeGLU MLP 2,112 wide and beside it 128 GeGLU
    experts 704 wide (top 8) behind a d x 128 router; four norms a layer and a final one; 262,144-token vocabulary,
    tied. 25.23B, 3.82B active: the published "25.2B total" and "4B active" (3.08B without the embedding). The
    text model is the bundled DiffusionGemma 26B-A4B's."""
    d, L, H, f, fe, E, k, V = 2816, 30, 16, 2112, 704, 128, 8, 262144
    sliding, full = _gemma4_attention(d, H, 8, 2)
    expert = 3 * d * fe
    total = 25 * sliding + 5 * full + L * (3 * d * f + E * expert + d * E + 4 * d) + d + V * d
    active = total - L * (E - k) * expert
    m = spec_from_mapping(GEMMA4_26B, model_id="google/gemma-4-26B-A4B-it", source="local")
    assert (m.family, m.n_dense_layers, m.n_moe_layers) == ("gemma4", 30, 30)
    assert (m.params_total, m.params_active) == (total, active) == (25_232_800_000, 3_822_188_800)
    assert m.params_total == pytest.approx(25.2e9, rel=0.01)
    assert m.params_total == load_bundled("google/diffusiongemma-26B-A4B-it").params_total
    assert m.kv_bytes_per_token(2) == (25 * 2 * 8 * 256 + 5 * 2 * 2 * 512) * 2


@pytest.mark.parametrize("key, value", [("hidden_size_per_layer_input", 256), ("num_kv_shared_layers", 20)])
def test_gemma4_small_models_per_layer_embeddings_are_refused(key, value):
    """E2B / E4B: per-layer embeddings and K/V shared across layers, which the spec does not describe."""
    cfg = {**GEMMA4_31B, "text_config": {**GEMMA4_31B["text_config"], key: value}}
    with pytest.raises(ConfigError, match=f"'{key}'.*not described"):
        spec_from_mapping(cfg, model_id="a", source="local")


@pytest.mark.parametrize("name, cfg, total", [("gemma-4-31b", GEMMA4_31B, 30_697_345_280),
                                              ("gemma-4-26b-a4b", GEMMA4_26B, 25_232_800_000)])
def test_gemma4_validation_files_are_the_same_configs(name, cfg, total):
    import yaml

    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "validation" / "models" / f"{name}.yaml"
    got = yaml.safe_load(path.read_text())
    assert {key: got["text_config"][key] for key in cfg["text_config"]} == cfg["text_config"]
    assert (got["architectures"], got["model_type"]) == (cfg["architectures"], cfg["model_type"])
    assert spec_from_mapping(got, model_id="a", source="local").params_total == total


def test_qk_norm_per_head_unless_the_config_says_per_layer():
    """A per-head Q/K norm is one head's width (Qwen3's); MiniMax's "per_head" reads so too."""
    import json

    from dlmcost.inputs.models.load import CONFIG_DIR

    cfg = json.loads((CONFIG_DIR / "MiniMaxAI__MiniMax-M2.5.json").read_text())
    layer_wide = spec_from_mapping(cfg, model_id="a", source="local")
    per_head = spec_from_mapping({**cfg, "qk_norm_type": "per_head"}, model_id="b", source="local")
    assert layer_wide.params_total - per_head.params_total == 62 * ((48 - 1) + (8 - 1)) * 128
    # null reads as absent (the default, layer-wide), as every other field's null does
    unset = spec_from_mapping({**cfg, "qk_norm_type": None}, model_id="d", source="local")
    assert unset.params_total == layer_wide.params_total
    with pytest.raises(ConfigError, match="qk_norm_type"):
        spec_from_mapping({**cfg, "qk_norm_type": "per_token"}, model_id="c", source="local")


def test_llada21_is_llada20_with_the_published_context():
    """The 2.1 configs are the 2.0 ones (the report keeps the size) but for the context length the
    SGLang cookbook's LLaDA 2.1 page publishes, 32,768 tokens."""
    import json

    from dlmcost.inputs.models.load import CONFIG_DIR, bundled_manifest

    for size in ("mini", "flash"):
        old, new = (json.loads((CONFIG_DIR / f"inclusionAI__LLaDA2.{v}-{size}.json").read_text()) for v in "01")
        assert {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)} == {"max_position_embeddings"}
        assert new["max_position_embeddings"] == 32768
        m = load_bundled(f"inclusionAI/LLaDA2.1-{size}")
        assert (m.max_context, m.provenance, m.family) == (32768, "reconstructed", "llada2")
        assert bundled_manifest()[f"inclusionAI/LLaDA2.1-{size}"]["status"] == "reconstructed"


def test_llada_8b_hand_count():
    # 32 layers x (4 d^2 attention + 3 d f SwiGLU + 2 d norms) + final norm; embedding and head untied.
    d, f, L, V = 4096, 12288, 32, 126464
    m = load_bundled("GSAI-ML/LLaDA-8B-Instruct")
    assert m.params_nonembedding == L * (4 * d * d + 3 * d * f + 2 * d) + d
    assert m.params_total == m.params_nonembedding + 2 * V * d


def test_llama31_70b_hand_count():
    # 80 layers x (q and o: 2 d^2; k and v: 2 d x 8 heads x 128; SwiGLU 3 d f; 2 norms) + final norm;
    # embedding and head untied, vocabulary 128,256: 70,553,706,496 (the Hub page's 70.6B)
    d, f, L, V, kv = 8192, 28672, 80, 128256, 8 * 128
    m = load_bundled("meta-llama/Llama-3.1-70B-Instruct")
    assert m.params_nonembedding == L * (2 * d * d + 2 * d * kv + 3 * d * f + 2 * d) + d
    assert m.params_total == m.params_nonembedding + 2 * V * d == 70_553_706_496
    assert (m.max_context, m.provenance, m.family) == (131072, "reconstructed", "llama")


@pytest.mark.parametrize("model_id,kib", [
    ("GSAI-ML/LLaDA-8B-Instruct", 512), ("Dream-org/Dream-v0-Instruct-7B", 56),
    ("meta-llama/Meta-Llama-3-8B", 128), ("inclusionAI/LLaDA2.0-mini", 40),
    ("meta-llama/Llama-3.1-70B-Instruct", 320),  # 80 layers x 8 K/V heads x 128 x 2 tensors x 2 bytes
    ("MiniMaxAI/MiniMax-M2.5", 248),  # 62 layers x 8 K/V heads x 128 x 2 tensors x 2 bytes
])
def test_kv_bytes_per_token_bf16(model_id, kib):
    assert load_bundled(model_id).kv_bytes_per_token(2.0) == kib * 1024


def test_deepseek_latent_cache_is_576_elements_per_layer():
    m = load_bundled("deepseek-ai/DeepSeek-V3")
    assert m.mla.cache_elements_per_layer == 576
    assert m.kv_elements_per_token == 576 * 61
    assert m.kv_bytes_per_token(2.0) / 1024 == pytest.approx(68.6, abs=0.1)


def test_every_bundled_config_parses_and_llada_moe_is_unverified():
    ids = bundled_ids()
    assert len(ids) >= 13
    for model_id in ids:
        m = load_bundled(model_id)
        assert m.params_total > 0
    assert load_bundled("inclusionAI/LLaDA-MoE-7B-A1B-Instruct").verified is False


def test_sampler_defaults():
    assert load_bundled("GSAI-ML/LLaDA-8B-Instruct").sampler.scheme == "mdm"
    assert load_bundled("Dream-org/Dream-v0-Base-7B").sampler.scheme == "mdm"
    sdar = load_bundled("JetLM/SDAR-4B-Chat").sampler
    assert (sdar.scheme, sdar.block, sdar.store_pass) == ("block", 4, True)
    assert load_bundled("Qwen/Qwen2.5-7B").sampler.scheme == "ar"


def test_llada_mlp_ratio_fallback():
    cfg = {"model_type": "llada", "d_model": 256, "n_layers": 2, "n_heads": 4, "mlp_ratio": 4, "vocab_size": 1000}
    m = spec_from_mapping(cfg, model_id="t", source="local")
    assert m.ffn_dim == 1024 and m.n_kv_heads == 4


def test_unknown_architecture_names_supported_families():
    with pytest.raises(ConfigError, match="supported families: LLaDA"):
        spec_from_mapping({"model_type": "mamba"}, model_id="t", source="local")


def test_missing_fields_are_named():
    with pytest.raises(ConfigError, match="num_hidden_layers"):
        spec_from_mapping({"model_type": "qwen2", "hidden_size": 64, "num_attention_heads": 4,
                           "intermediate_size": 128, "vocab_size": 10}, model_id="t", source="local")
