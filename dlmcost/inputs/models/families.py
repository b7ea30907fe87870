"""config.json parsers, one per model family, without `transformers` and without remote code.

A new family goes here: a detector (which `model_type`/`architectures` it claims), a parser from
the raw mapping to `ModelSpec` fields, and its upstream sampler defaults.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from ...errors import ConfigError
from .spec import SamplerDefaults

Config = dict[str, Any]

# Sampler defaults from the bundled manifest (configs/MANIFEST.yaml: upstream generate() defaults and demos).
DIFFUSION_SCHEMES = ("mdm", "prefix-cache", "dual-cache", "ar")
BLOCK_SCHEMES = ("block", "ar")
AR_SCHEMES = ("ar",)

LLADA_SAMPLER = SamplerDefaults(
    scheme="mdm", gen=128, steps=128, block=32, schemes=DIFFUSION_SCHEMES,
    note="LLaDA generate(): steps 128, gen_length 128, demo block_length 32",
)
DREAM_SAMPLER = SamplerDefaults(
    scheme="mdm", gen=512, steps=512, schemes=DIFFUSION_SCHEMES,
    note="Dream diffusion_generate(): steps 512, max_new_tokens 512",
)
SDAR_SAMPLER = SamplerDefaults(
    scheme="block", gen=256, block=4, store_pass=True, schemes=BLOCK_SCHEMES,
    note="SDAR: block 4, 4 steps per block, one extra forward per block to store its K/V",
)
LLADA2_SAMPLER = SamplerDefaults(
    scheme="block", gen=256, block=32, schemes=BLOCK_SCHEMES,
    note="LLaDA2.0: block 32 (threshold 0.95 gives ~2.5-3.2 tokens per forward: try --tpf)",
)
DIFFUSION_GEMMA_SAMPLER = SamplerDefaults(
    scheme="diffgemma", gen=256, steps=48, block=256, schemes=("diffgemma", "block", "ar"),
    note="DiffusionGemma generation_config: 256-token canvas, at most 48 denoising steps per canvas "
         "(vLLM benchmarks 16)",
)
AR_SAMPLER = SamplerDefaults(scheme="ar", gen=256, schemes=AR_SCHEMES, note="autoregressive decode with a KV cache")


# --- typed field access: every message names the field --------------------------------------


def _missing(cfg: Config, keys: list[str], family: str) -> None:
    absent = [k for k in keys if cfg.get(k) is None]
    if absent:
        raise ConfigError(f"{family} config is missing required field(s): {', '.join(absent)}")


def get_int(cfg: Config, key: str, default: int | None = None, *, minimum: int = 1) -> int:
    value = cfg.get(key)
    if value is None:
        value = default
    if value is None:
        raise ConfigError(f"config is missing required field '{key}'")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"config field '{key}' must be an integer, got {type(value).__name__} {value!r}")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise ConfigError(f"config field '{key}' must be an integer, got {value!r}")
    if value < minimum:
        raise ConfigError(f"config field '{key}' must be >= {minimum}, got {value!r}")
    if value > 10**9:
        raise ConfigError(f"config field '{key}' is implausibly large: {value!r}")
    return int(value)


def get_bool(cfg: Config, key: str, default: bool) -> bool:
    value = cfg.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ConfigError(f"config field '{key}' must be true or false, got {value!r}")
    return value


def _head_dim(cfg: Config, d_model: int, n_heads: int) -> int:
    if cfg.get("head_dim") is not None:
        return get_int(cfg, "head_dim")
    if d_model % n_heads:
        raise ConfigError(f"hidden size {d_model} is not divisible by {n_heads} heads and no 'head_dim' is given")
    return d_model // n_heads


def _context(cfg: Config, *keys: str) -> int | None:
    for key in keys:
        if cfg.get(key) is not None:
            return get_int(cfg, key)
    return None


# --- parsers ----------------------------------------------------------------------------------


def parse_llada(cfg: Config) -> dict:
    """LLaDA-8B: OLMo-style keys. `mlp_hidden_size` is the SwiGLU width (mlp_ratio fallback)."""
    _missing(cfg, ["d_model", "n_layers", "n_heads"], "LLaDA")
    d = get_int(cfg, "d_model")
    heads = get_int(cfg, "n_heads")
    if cfg.get("mlp_hidden_size") is not None:
        ffn = get_int(cfg, "mlp_hidden_size")
    else:
        ratio = cfg.get("mlp_ratio")
        if ratio is None:
            raise ConfigError("LLaDA config is missing required field(s): mlp_hidden_size (or mlp_ratio)")
        ffn = get_int({"mlp_ratio": ratio}, "mlp_ratio") * d
    vocab = get_int(cfg, "embedding_size") if cfg.get("embedding_size") else get_int(cfg, "vocab_size")
    kv_heads = cfg.get("n_kv_heads")
    if kv_heads is None and cfg.get("multi_query_attention"):
        kv_heads = 1
    return dict(
        family="llada",
        n_layers=get_int(cfg, "n_layers"),
        d_model=d,
        n_heads=heads,
        n_kv_heads=get_int({"n_kv_heads": kv_heads}, "n_kv_heads") if kv_heads is not None else heads,
        head_dim=_head_dim({}, d, heads),
        ffn_dim=ffn,
        gated_mlp=str(cfg.get("activation_type", "swiglu")).lower() in ("silu", "swiglu", "gelu_glu", "geglu"),
        vocab_size=vocab,
        tie_embeddings=get_bool(cfg, "weight_tying", False),
        qkv_bias=get_bool(cfg, "include_qkv_bias", False) or get_bool(cfg, "include_bias", False),
        max_context=_context(cfg, "max_sequence_length"),
    )


def _parse_hf_dense(cfg: Config, family: str, *, qkv_bias: bool, qk_norm: bool = False) -> dict:
    """HF-style keys shared by Qwen2/Dream/Llama/SDAR/Mistral."""
    _missing(cfg, ["hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size"], family)
    d = get_int(cfg, "hidden_size")
    heads = get_int(cfg, "num_attention_heads")
    return dict(
        family=family,
        n_layers=get_int(cfg, "num_hidden_layers"),
        d_model=d,
        n_heads=heads,
        n_kv_heads=get_int(cfg, "num_key_value_heads", heads),
        head_dim=_head_dim(cfg, d, heads),
        ffn_dim=get_int(cfg, "intermediate_size"),
        gated_mlp=True,
        vocab_size=get_int(cfg, "vocab_size"),
        tie_embeddings=get_bool(cfg, "tie_word_embeddings", False),
        qkv_bias=get_bool(cfg, "attention_bias", qkv_bias),
        qk_norm=qk_norm,
        max_context=_context(cfg, "max_position_embeddings"),
    )


def parse_qwen2(cfg: Config) -> dict:
    return _parse_hf_dense(cfg, "qwen2", qkv_bias=True)  # Qwen2 has Q/K/V biases


def parse_dream(cfg: Config) -> dict:
    return _parse_hf_dense(cfg, "dream", qkv_bias=True)  # DreamModel is Qwen2-based


def parse_llama(cfg: Config) -> dict:
    return _parse_hf_dense(cfg, "llama", qkv_bias=False)


def parse_qwen3(cfg: Config) -> dict:
    return _parse_hf_dense(cfg, "qwen3", qkv_bias=False, qk_norm=True)


def parse_sdar(cfg: Config) -> dict:
    return _parse_hf_dense(cfg, "sdar", qkv_bias=False, qk_norm=True)  # Qwen3-based: q/k norms


MAX_LAYERS = 100_000  # the ModelSpec bound, checked here before any per-layer loop runs


def parse_qwen3_moe(cfg: Config) -> dict:
    """Qwen3-MoE: every `decoder_sparse_step`-th layer not in `mlp_only_layers` is MoE (no shared
    expert); the others use the dense `intermediate_size`."""
    spec = _parse_hf_dense(cfg, "qwen3_moe", qkv_bias=False, qk_norm=True)
    _missing(cfg, ["num_experts", "num_experts_per_tok", "moe_intermediate_size"], "Qwen3-MoE")
    n = spec["n_layers"]
    step = get_int(cfg, "decoder_sparse_step", 1)
    dense_only = cfg.get("mlp_only_layers")
    dense_only = [] if dense_only is None else dense_only  # null reads as absent; 0 or "" is no list
    if not isinstance(dense_only, list) or any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n
                                               for i in dense_only):
        raise ConfigError(f"config field 'mlp_only_layers' must list layer indices below {n}")
    spec["moe"] = dict(
        n_experts=get_int(cfg, "num_experts"),
        experts_per_token=get_int(cfg, "num_experts_per_tok"),
        expert_ffn_dim=get_int(cfg, "moe_intermediate_size"),
        n_moe_layers=sum(1 for i in range(n) if i not in dense_only and (i + 1) % step == 0),
    )
    return spec


# --- Gemma: per-layer attention kinds -----------------------------------------------------------

LAYER_TYPES = ("sliding_attention", "full_attention")


def _layer_types(cfg: Config, n_layers: int, pattern: int | None) -> list[str]:
    """`layer_types` as given (checked), else every `pattern`-th layer full and the rest sliding
    (Gemma 2: pattern 2, sliding first; Gemma 3: `sliding_window_pattern`, default 6)."""
    types = cfg.get("layer_types")
    if types is None:
        if pattern is None:
            raise ConfigError("config is missing required field 'layer_types'")
        return ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(n_layers)]
    if not isinstance(types, list) or len(types) != n_layers:
        got = f"{len(types)} entries" if isinstance(types, list) else type(types).__name__
        raise ConfigError(f"config field 'layer_types' must list one of {', '.join(LAYER_TYPES)} for each of the "
                          f"{n_layers} layers, got {got}")
    bad = sorted({str(t) for t in types if t not in LAYER_TYPES})
    if bad:
        raise ConfigError(f"config field 'layer_types' has unknown kind(s) {', '.join(bad)}; expected {', '.join(LAYER_TYPES)}")
    return types


def _groups(types: list[str], kinds: dict[str, dict]) -> list[list]:
    """Layer kinds in order of first appearance with their counts: [(count, kind), ...]."""
    counts: dict[str, int] = {}
    for t in types:
        counts[t] = counts.get(t, 0) + 1
    return [[n, kinds[t]] for t, n in counts.items()]


def _softcap(cfg: Config, key: str) -> float | None:
    value = cfg.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(f"config field '{key}' must be a positive number, got {value!r}")
    try:
        return float(value)
    except OverflowError:  # a JSON integer past float's range (1000...0): no cap a model could have
        raise ConfigError(f"config field '{key}' must be a positive number, got an integer of "
                          f"{len(str(value))} digits") from None


def _parse_gemma(cfg: Config, family: str, *, pattern: int | None, qk_norm: bool) -> dict:
    """Gemma 2/3 text: GeGLU MLP, 4 RMSNorms per layer, tied embeddings, sliding-window and
    global layers sharing head_dim and K/V heads; soft-capped logits where configured."""
    spec = _parse_hf_dense(cfg, family, qkv_bias=False, qk_norm=qk_norm)
    spec["tie_embeddings"] = get_bool(cfg, "tie_word_embeddings", True)
    window = get_int(cfg, "sliding_window")
    kind = dict(head_dim=spec["head_dim"], n_kv_heads=spec["n_kv_heads"])
    types = _layer_types(cfg, spec["n_layers"], pattern)
    spec.update(norms_per_layer=4, logit_softcap=_softcap(cfg, "final_logit_softcapping"),
                layers=_groups(types, {"sliding_attention": dict(kind, attention="sliding", window=window),
                                       "full_attention": kind}))
    return spec


def parse_gemma2(cfg: Config) -> dict:
    return _parse_gemma(cfg, "gemma2", pattern=2, qk_norm=False)  # Gemma 2: soft-capping, no q/k norms


def parse_gemma3_text(cfg: Config) -> dict:
    cfg = cfg.get("text_config") or cfg  # Gemma3ForConditionalGeneration nests the text model
    pattern = get_int(cfg, "sliding_window_pattern", 6)
    return _parse_gemma(cfg, "gemma3", pattern=pattern, qk_norm=True)  # Gemma 3: q/k norms


def _vision_params(vision: Any) -> int:
    """A ViT tower's parameters, estimated from its config (reported apart from the text model):
    per layer 4*d^2 for Q, K, V, O (heads * head_dim = d) and 3*d*f for a gated MLP, 2 norms;
    plus the 16x16x3 patch embedding and the d_vision x d_text projection is left out."""
    if not isinstance(vision, dict):
        return 0
    d, f = get_int(vision, "hidden_size"), get_int(vision, "intermediate_size")
    layers, patch = get_int(vision, "num_hidden_layers"), get_int(vision, "patch_size", 16)
    return layers * (4 * d * d + 3 * d * f + 2 * d) + 3 * patch * patch * d


def parse_diffusion_gemma(cfg: Config) -> dict:
    """DiffusionGemma (Gemma 4 backbone, `diffusion_gemma`): the text model in `text_config`, as
    `_gemma4_text` reads it with the routed MoE branch on every layer and the full layers' values
    from the key projection (neither a config key here: the checkpoints' weights require both), and
    self-conditioning."""
    text = cfg.get("text_config")
    if not isinstance(text, dict):
        raise ConfigError("DiffusionGemma config is missing required field(s): text_config")
    _missing(text, ["global_head_dim", "num_global_key_value_heads", "num_experts", "top_k_experts",
                    "moe_intermediate_size", "sliding_window", "layer_types", "head_dim"], "DiffusionGemma")
    spec = _gemma4_text(text, "diffgemma", "DiffusionGemma", moe=True, k_eq_v=True)
    spec.update(self_conditioning=True, vision_params=_vision_params(cfg.get("vision_config")))
    return spec


def parse_gemma4(cfg: Config) -> dict:
    """Gemma 4 (`gemma4`, `gemma4_text`), autoregressive: the text model (in `text_config` where the
    checkpoint is multimodal) as `_gemma4_text` reads it, the MoE branch where `enable_moe_block` is
    set, the full layers' values from the key projection where `attention_k_eq_v` is. The small
    models' per-layer embeddings (`hidden_size_per_layer_input`) and K/V shared across layers
    (`num_kv_shared_layers`) are not described: refused."""
    text = cfg.get("text_config") or cfg
    if not isinstance(text, dict):
        raise ConfigError("Gemma 4 config field 'text_config' must be a mapping")
    for key, what in (("hidden_size_per_layer_input", "per-layer embeddings"),
                      ("num_kv_shared_layers", "K/V shared across layers")):
        if get_int(text, key, 0, minimum=0):
            raise ConfigError(f"Gemma 4 config sets '{key}' ({what}, the E2B / E4B models): not described")
    spec = _gemma4_text(text, "gemma4", "Gemma 4", moe=get_bool(text, "enable_moe_block", False),
                        k_eq_v=get_bool(text, "attention_k_eq_v", False))
    spec["vision_params"] = _vision_params(cfg.get("vision_config")) if text is not cfg else 0
    return spec


def _gemma4_text(text: Config, family: str, label: str, moe: bool, k_eq_v: bool) -> dict:
    """Gemma 4's text backbone. Sliding layers: `head_dim`, `num_key_value_heads`, window
    `sliding_window`. Full layers: `global_head_dim`; with `k_eq_v`, `num_global_key_value_heads` K/V
    heads and no v_proj (values from the key projection), else `num_key_value_heads` with both. The
    dense GeGLU MLP (`intermediate_size`) on every layer and, with `moe`, the routed MoE branch beside
    it (`num_experts`, `top_k_experts`, `moe_intermediate_size`); four norms a layer, a final logit
    soft-cap."""
    _missing(text, ["global_head_dim", "sliding_window", "layer_types", "head_dim"]
             + (["num_experts", "top_k_experts", "moe_intermediate_size"] if moe else [])
             + (["num_global_key_value_heads"] if k_eq_v else []), label)
    spec = _parse_hf_dense(text, family, qkv_bias=False, qk_norm=True)
    spec["tie_embeddings"] = get_bool(text, "tie_word_embeddings", True)
    n = spec["n_layers"]
    ffn = dict(dense_mlp=True, moe=moe)
    sliding = dict(ffn, attention="sliding", window=get_int(text, "sliding_window"),
                   head_dim=spec["head_dim"], n_kv_heads=spec["n_kv_heads"])
    full = dict(ffn, attention="full", head_dim=get_int(text, "global_head_dim"), k_eq_v=k_eq_v,
                n_kv_heads=get_int(text, "num_global_key_value_heads") if k_eq_v else spec["n_kv_heads"])
    spec.update(
        norms_per_layer=4,
        logit_softcap=_softcap(text, "final_logit_softcapping"),
        layers=_groups(_layer_types(text, n, None), {"sliding_attention": sliding, "full_attention": full}),
    )
    if moe:
        spec["moe"] = dict(n_experts=get_int(text, "num_experts"), experts_per_token=get_int(text, "top_k_experts"),
                           expert_ffn_dim=get_int(text, "moe_intermediate_size"), n_moe_layers=n)
    return spec


def _moe_layer_count(cfg: Config, n_layers: int) -> int:
    """MoE layers from `first_k_dense_replace` and `moe_layer_freq` (an int stride or a 0/1 list)."""
    if n_layers > MAX_LAYERS:
        raise ConfigError(f"config has {n_layers:,} layers; at most {MAX_LAYERS:,} are supported")
    first_dense = get_int(cfg, "first_k_dense_replace", 0, minimum=0)
    freq = cfg.get("moe_layer_freq", 1)
    if isinstance(freq, list):
        if len(freq) != n_layers or any(f not in (0, 1) for f in freq):
            raise ConfigError(f"config field 'moe_layer_freq' must list 0/1 for each of the {n_layers} layers")
        return sum(1 for i, f in enumerate(freq) if f and i >= first_dense)
    stride = get_int({"moe_layer_freq": freq}, "moe_layer_freq")
    return sum(1 for i in range(first_dense, n_layers) if i % stride == 0)


def parse_mixtral(cfg: Config, family: str = "mixtral", label: str = "Mixtral") -> dict:
    """Mixtral's keys; `family` and `label` name the family that reads them (MiniMax-M2 too) in the
    spec and in what a missing field's message calls the file."""
    spec = _parse_hf_dense(cfg, family, qkv_bias=False)
    _missing(cfg, ["num_local_experts", "num_experts_per_tok"], label)
    spec["moe"] = dict(
        n_experts=get_int(cfg, "num_local_experts"),
        experts_per_token=get_int(cfg, "num_experts_per_tok"),
        expert_ffn_dim=spec["ffn_dim"],  # Mixtral's intermediate_size is each expert's width
        n_moe_layers=spec["n_layers"],
    )
    spec["ffn_dim"] = 0
    return spec


def parse_minimax_m2(cfg: Config) -> dict:
    """MiniMax-M2 / M2.5: Mixtral's keys (every layer MoE, `intermediate_size` each expert's width, no
    shared expert) with an explicit head_dim, a sigmoid router with a bias per expert
    (`use_routing_bias`), and Q/K RMSNorms over the whole projection (`qk_norm_type` "per_layer").
    The checkpoint's multi-token-prediction modules (`use_mtp`) are a drafter, left out as DeepSeek's."""
    spec = parse_mixtral(cfg, "minimax_m2", "MiniMax-M2")
    spec["moe"]["router_bias"] = get_bool(cfg, "use_routing_bias", False)
    spec["qk_norm"] = get_bool(cfg, "use_qk_norm", False)
    scope = cfg.get("qk_norm_type")
    scope = "per_layer" if scope is None else scope  # null as absent, as the other fields read it
    if scope not in ("per_layer", "per_head"):
        raise ConfigError("config field 'qk_norm_type' must be 'per_layer' or 'per_head'")
    spec["qk_norm_scope"] = "layer" if scope == "per_layer" else "head"
    return spec


def parse_llada2(cfg: Config) -> dict:
    """LLaDA2.0 (`llada2_moe`, Ling-2.0 architecture): dense first layers, shared expert, expert bias."""
    spec = _parse_hf_dense(cfg, "llada2", qkv_bias=get_bool(cfg, "use_qkv_bias", False))
    spec["moe"] = _experts_with_shared(cfg, spec["n_layers"], "LLaDA2", experts="num_experts",
                                       shared="num_shared_experts",
                                       router_bias=get_bool(cfg, "moe_router_enable_expert_bias", False))
    return spec


def _experts_with_shared(cfg: Config, n_layers: int, family: str, *, experts: str, shared: str,
                         router_bias: bool) -> dict:
    """The `moe` block of a family whose routed and shared experts have one width
    (`moe_intermediate_size`), its routed experts' count under the key `experts` and its shared
    experts' under `shared` (none where absent), behind `num_experts_per_tok` of them a token."""
    _missing(cfg, [experts, "num_experts_per_tok", "moe_intermediate_size"], family)
    expert_ffn = get_int(cfg, "moe_intermediate_size")
    n_shared = get_int(cfg, shared, 0, minimum=0)
    return dict(
        n_experts=get_int(cfg, experts),
        experts_per_token=get_int(cfg, "num_experts_per_tok"),
        expert_ffn_dim=expert_ffn,
        n_shared_experts=n_shared,
        shared_ffn_dim=n_shared * expert_ffn,
        n_moe_layers=_moe_layer_count(cfg, n_layers),
        router_bias=router_bias,
    )


def parse_llada_moe(cfg: Config) -> dict:
    """LLaDA-MoE-7B-A1B: HF keys under model_type `llada`, per-layer `moe_layer_freq` list."""
    _missing(cfg, ["hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
                   "num_experts", "num_experts_per_tok", "expert_intermediate_size"], "LLaDA-MoE")
    cfg = {**cfg, "intermediate_size": cfg.get("dense_intermediate_size") or cfg["expert_intermediate_size"]}
    spec = _parse_hf_dense(cfg, "llada_moe", qkv_bias=False, qk_norm=get_bool(cfg, "qk_layernorm", False))
    expert_ffn = get_int(cfg, "expert_intermediate_size")
    shared_ffn = get_int(cfg, "shared_expert_intermediate_size", 0, minimum=0)
    spec["moe"] = dict(
        n_experts=get_int(cfg, "num_experts"),
        experts_per_token=get_int(cfg, "num_experts_per_tok"),
        expert_ffn_dim=expert_ffn,
        n_shared_experts=1 if shared_ffn else 0,
        shared_ffn_dim=shared_ffn,
        n_moe_layers=_moe_layer_count(cfg, spec["n_layers"]),
    )
    return spec


def parse_glm4_moe(cfg: Config) -> dict:
    """GLM-4.5 / GLM-4.6 (`glm4_moe`): GQA attention with Q/K/V biases (`attention_bias`) and per-head
    Q/K RMSNorms (`use_qk_norm`), the first `first_k_dense_replace` layers dense (`intermediate_size`),
    the others `n_routed_experts` routed experts of `moe_intermediate_size` plus `n_shared_experts`
    shared ones of the same width, behind a sigmoid router with a correction bias per expert
    (e_score_correction_bias, always present in the checkpoint). `partial_rotary_factor` (RoPE on half
    of each head) changes no matmul dlmcost costs; the multi-token-prediction layer
    (`num_nextn_predict_layers`) is a drafter, left out as DeepSeek's."""
    spec = _parse_hf_dense(cfg, "glm4_moe", qkv_bias=False, qk_norm=get_bool(cfg, "use_qk_norm", False))
    spec["moe"] = _experts_with_shared(cfg, spec["n_layers"], "GLM-4-MoE", experts="n_routed_experts",
                                       shared="n_shared_experts", router_bias=True)
    return spec


def parse_deepseek(cfg: Config) -> dict:
    """DeepSeek-V2/V3: MLA attention, routed + shared experts after `first_k_dense_replace` layers."""
    _missing(cfg, ["hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size",
                   "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                   "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size"], "DeepSeek")
    d = get_int(cfg, "hidden_size")
    heads = get_int(cfg, "num_attention_heads")
    n_layers = get_int(cfg, "num_hidden_layers")
    nope, rope = get_int(cfg, "qk_nope_head_dim"), get_int(cfg, "qk_rope_head_dim", minimum=0)
    expert_ffn = get_int(cfg, "moe_intermediate_size")
    shared = get_int(cfg, "n_shared_experts", 0, minimum=0)
    return dict(
        family="deepseek",
        n_layers=n_layers,
        d_model=d,
        n_heads=heads,
        n_kv_heads=heads,  # the expanded form has a K and V per head
        head_dim=nope + rope,  # QK^T width; V uses v_head_dim
        ffn_dim=get_int(cfg, "intermediate_size"),
        vocab_size=get_int(cfg, "vocab_size"),
        tie_embeddings=get_bool(cfg, "tie_word_embeddings", False),
        max_context=_context(cfg, "max_position_embeddings"),
        mla=dict(
            q_lora_rank=get_int(cfg, "q_lora_rank") if cfg.get("q_lora_rank") else None,
            kv_lora_rank=get_int(cfg, "kv_lora_rank"),
            qk_nope_head_dim=nope,
            qk_rope_head_dim=rope,
            v_head_dim=get_int(cfg, "v_head_dim"),
        ),
        moe=dict(
            n_experts=get_int(cfg, "n_routed_experts"),
            experts_per_token=get_int(cfg, "num_experts_per_tok"),
            expert_ffn_dim=expert_ffn,
            n_shared_experts=shared,
            shared_ffn_dim=shared * expert_ffn,
            n_moe_layers=_moe_layer_count(cfg, n_layers),
            router_bias=cfg.get("topk_method") == "noaux_tc",  # e_score_correction_bias
        ),
    )


# --- registry -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Family:
    name: str
    model_types: tuple[str, ...]
    architectures: tuple[str, ...]
    parse: Callable[[Config], dict]
    sampler: SamplerDefaults
    description: str


FAMILIES: list[Family] = [
    Family("llada", ("llada",), ("LLaDAModelLM",), parse_llada, LLADA_SAMPLER, "LLaDA (OLMo-style keys)"),
    Family("dream", ("dream",), ("DreamModel",), parse_dream, DREAM_SAMPLER, "Dream / DiffuCoder (Qwen2 keys)"),
    Family("sdar", ("sdar",), ("SDARForCausalLM",), parse_sdar, SDAR_SAMPLER, "SDAR block diffusion (Qwen3 keys)"),
    Family("qwen2", ("qwen2",), ("Qwen2ForCausalLM",), parse_qwen2, AR_SAMPLER, "Qwen2 / Qwen2.5"),
    Family("qwen3", ("qwen3",), ("Qwen3ForCausalLM",), parse_qwen3, AR_SAMPLER, "Qwen3 (dense)"),
    Family("qwen3_moe", ("qwen3_moe",), ("Qwen3MoeForCausalLM",), parse_qwen3_moe, AR_SAMPLER, "Qwen3-MoE"),
    Family("gemma2", ("gemma2",), ("Gemma2ForCausalLM",), parse_gemma2, AR_SAMPLER, "Gemma 2 (sliding + global)"),
    Family("gemma3", ("gemma3_text", "gemma3"), ("Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"),
           parse_gemma3_text, AR_SAMPLER, "Gemma 3 text (sliding + global)"),
    Family("diffgemma", ("diffusion_gemma",), ("DiffusionGemmaForBlockDiffusion",), parse_diffusion_gemma,
           DIFFUSION_GEMMA_SAMPLER, "DiffusionGemma (Gemma 4: sliding + global, dense + MoE)"),
    Family("gemma4", ("gemma4", "gemma4_text"), ("Gemma4ForConditionalGeneration", "Gemma4ForCausalLM"), parse_gemma4,
           AR_SAMPLER, "Gemma 4 (sliding + global, dense + MoE; not the per-layer-embedding E2B / E4B)"),
    Family("llama", ("llama", "mistral"), ("LlamaForCausalLM", "MistralForCausalLM"), parse_llama, AR_SAMPLER, "Llama / Mistral"),
    Family("mixtral", ("mixtral",), ("MixtralForCausalLM",), parse_mixtral, AR_SAMPLER, "Mixtral (MoE)"),
    Family("minimax_m2", ("minimax_m2",), ("MiniMaxM2ForCausalLM",), parse_minimax_m2, AR_SAMPLER,
           "MiniMax-M2 (MoE, layer-wide Q/K norms)"),
    Family("llada2", ("llada2_moe",), ("LLaDA2MoeModelLM",), parse_llada2, LLADA2_SAMPLER, "LLaDA2.0 (llada2_moe)"),
    Family("llada_moe", ("llada_moe",), ("LLaDAMoEModelLM",), parse_llada_moe, LLADA_SAMPLER, "LLaDA-MoE"),
    Family("glm4_moe", ("glm4_moe",), ("Glm4MoeForCausalLM",), parse_glm4_moe, AR_SAMPLER,
           "GLM-4.5/4.6 (glm4_moe: GQA + MoE)"),
    Family("deepseek", ("deepseek_v3", "deepseek_v2", "glm4_moe_lite"),
           ("DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM", "Glm4MoeLiteForCausalLM"), parse_deepseek, AR_SAMPLER,
           "DeepSeek-V2/V3, GLM-4.7-Flash (MLA + MoE)"),
]


def detect(cfg: Config) -> Family:
    """Pick the parser: specific detectors (MoE keys) first, then model_type, then architectures."""
    model_type = str(cfg.get("model_type", "")).lower()
    archs = cfg.get("architectures")
    archs = [] if archs is None else archs  # null reads as absent; 0, "" or false are no list of names
    if not isinstance(archs, list):
        raise ConfigError("config field 'architectures' must be a list of class names")
    for fam in FAMILIES:
        if any(a in fam.architectures for a in archs):
            return fam
    for fam in FAMILIES:
        if model_type in fam.model_types:
            return fam
    names = ", ".join(f.description for f in FAMILIES)
    what = model_type or (archs[0] if archs else "no model_type/architectures")
    raise ConfigError(f"unsupported architecture '{what}'; supported families: {names}")
