"""ModelSpec: the normalised description of a transformer that the cost engine needs.

Every model source (bundled config, local JSON/YAML, Hub config.json, dlmcost's own schema)
ends up here. Weight counts per matrix live here too, so the parameter totals that
`dlmcost model` prints and the weight bytes the cost engine streams come from the same numbers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# Sizes are bounded so that a typo (or a hostile file) cannot make the engine overflow.
_DIM = dict(gt=0, le=10_000_000)
_COUNT = dict(gt=0, le=100_000)


class MoESpec(BaseModel):
    """Mixture-of-experts FFN. `n_moe_layers` of the model's layers use it; the rest are dense."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    n_experts: int = Field(**_COUNT)  # routed experts E
    experts_per_token: int = Field(**_COUNT)  # k
    expert_ffn_dim: int = Field(**_DIM)
    n_shared_experts: int = Field(default=0, ge=0, le=1000)
    shared_ffn_dim: int = Field(default=0, ge=0, le=10_000_000)  # total width of shared experts
    n_moe_layers: int = Field(ge=0, le=100_000)
    router_bias: bool = False

    @model_validator(mode="after")
    def _k_le_e(self) -> "MoESpec":
        if self.experts_per_token > self.n_experts:
            raise ValueError("experts_per_token cannot exceed n_experts")
        return self


class MLASpec(BaseModel):
    """Multi-head latent attention (DeepSeek-V2/V3)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    q_lora_rank: int | None = Field(default=None, gt=0, le=1_000_000)  # None: plain q projection
    kv_lora_rank: int = Field(**_DIM)
    qk_nope_head_dim: int = Field(**_DIM)
    qk_rope_head_dim: int = Field(ge=0, le=1_000_000)
    v_head_dim: int = Field(**_DIM)

    @property
    def cache_elements_per_layer(self) -> int:
        """The latent plus the decoupled rope key: what the cache stores per token per layer."""
        return self.kv_lora_rank + self.qk_rope_head_dim


class SamplerDefaults(BaseModel):
    """Upstream sampler settings for a model (see reference MANIFEST): the workload defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    scheme: Literal["ar", "mdm", "prefix-cache", "dual-cache", "block"]
    gen: int = Field(default=256, **_COUNT)
    steps: int | None = Field(default=None, **_COUNT)  # None: one token per forward (S = gen)
    block: int | None = Field(default=None, **_COUNT)  # None: one block = the whole generation
    store_pass: bool = False  # SDAR/BD3-LM: one extra forward per block to write its K/V
    schemes: tuple[str, ...] = ()  # schemes this model can run (sweep's default set)
    note: str = ""


class ModelSpec(BaseModel):
    """The architecture numbers of one model. Counts are of parameters (elements), not bytes."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    id: str = Field(min_length=1)
    family: str
    n_layers: int = Field(**_COUNT)
    d_model: int = Field(**_DIM)
    n_heads: int = Field(**_COUNT)
    n_kv_heads: int = Field(**_COUNT)
    head_dim: int = Field(**_DIM)
    ffn_dim: int = Field(ge=0, le=10_000_000)  # width of the dense FFN (0 if every layer is MoE)
    gated_mlp: bool = True  # SwiGLU: gate, up and down matrices; else up and down
    vocab_size: int = Field(**_DIM)
    tie_embeddings: bool = False
    qkv_bias: bool = False
    qk_norm: bool = False
    max_context: int | None = Field(default=None, gt=0, le=100_000_000)
    moe: MoESpec | None = None
    mla: MLASpec | None = None
    sampler: SamplerDefaults | None = None
    source: str = "local"  # local | bundled | cache | hub | schema
    revision: str | None = None
    verified: bool = True  # False for configs reconstructed from third-party dimensions

    @model_validator(mode="after")
    def _consistent(self) -> "ModelSpec":
        if self.mla is None and self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads})")
        if self.moe and self.moe.n_moe_layers > self.n_layers:
            raise ValueError("moe.n_moe_layers cannot exceed n_layers")
        if self.n_dense_layers and self.ffn_dim == 0:
            raise ValueError("ffn_dim is required for dense layers")
        return self

    # --- layer structure ----------------------------------------------------------------
    @property
    def n_moe_layers(self) -> int:
        return self.moe.n_moe_layers if self.moe else 0

    @property
    def n_dense_layers(self) -> int:
        return self.n_layers - self.n_moe_layers

    @property
    def group_size(self) -> float:
        """G = query heads per K/V head (attention intensity for one query token)."""
        return self.n_heads / self.n_kv_heads

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.gated_mlp else 2

    # --- weights per matrix group, per layer (elements) ----------------------------------
    @property
    def attn_in_weights(self) -> int:
        """Q, K, V projections (GQA/MHA) or all of MLA's projections, with biases and norms."""
        if self.mla:
            return self.mla_q_down_weights + self.mla_q_up_weights + self.mla_kv_down_weights + self.mla_kv_up_weights
        return self.q_weights + self.kv_weights

    @property
    def q_weights(self) -> int:
        """GQA: the Q projection (+ bias, + q-norm)."""
        return self.n_heads * self.head_dim * (self.d_model + self.qkv_bias) + (self.head_dim if self.qk_norm else 0)

    @property
    def kv_weights(self) -> int:
        """GQA: the K and V projections (+ biases, + k-norm); replicated under TP beyond n_kv_heads."""
        return 2 * self.n_kv_heads * self.head_dim * (self.d_model + self.qkv_bias) + (self.head_dim if self.qk_norm else 0)

    # MLA (DeepSeek): q = W_qb(norm(W_qa x)); latent = W_kva x (+ rope key); K_nope, V = W_kvb(latent).
    @property
    def mla_q_down_weights(self) -> int:
        m = self.mla
        return self.d_model * m.q_lora_rank + m.q_lora_rank if m and m.q_lora_rank else 0

    @property
    def mla_q_up_weights(self) -> int:
        m = self.mla
        width = self.n_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        return (m.q_lora_rank or self.d_model) * width

    @property
    def mla_kv_down_weights(self) -> int:
        m = self.mla
        return self.d_model * m.cache_elements_per_layer + m.kv_lora_rank  # + the latent's norm

    @property
    def mla_kv_up_weights(self) -> int:
        """W_kvb: latent -> per-head K_nope and V (W_UK and W_UV, absorbed or not)."""
        m = self.mla
        return m.kv_lora_rank * self.n_heads * (m.qk_nope_head_dim + m.v_head_dim) if m else 0

    @property
    def attn_out_weights(self) -> int:
        v = self.mla.v_head_dim if self.mla else self.head_dim
        return self.n_heads * v * self.d_model

    @property
    def dense_mlp_weights(self) -> int:
        return self.mlp_matrices * self.d_model * self.ffn_dim

    @property
    def expert_weights(self) -> int:
        """One routed expert (gated: three d x f matrices)."""
        return self.mlp_matrices * self.d_model * self.moe.expert_ffn_dim if self.moe else 0

    @property
    def shared_expert_weights(self) -> int:
        return self.mlp_matrices * self.d_model * self.moe.shared_ffn_dim if self.moe else 0

    @property
    def router_weights(self) -> int:
        if not self.moe:
            return 0
        return self.d_model * self.moe.n_experts + (self.moe.n_experts if self.moe.router_bias else 0)

    @property
    def norm_weights_per_layer(self) -> int:
        return 2 * self.d_model

    @property
    def embedding_weights(self) -> int:
        return self.vocab_size * self.d_model

    @property
    def lm_head_weights(self) -> int:
        """The output projection; a tied head reuses the embedding (no extra parameters)."""
        return 0 if self.tie_embeddings else self.vocab_size * self.d_model

    # --- parameter totals ----------------------------------------------------------------
    @property
    def params_nonembedding(self) -> int:
        """Transformer blocks and the final norm: excludes the embedding and the LM head."""
        per_layer = self.attn_in_weights + self.attn_out_weights + self.norm_weights_per_layer
        moe_layer = self.moe.n_experts * self.expert_weights + self.shared_expert_weights + self.router_weights if self.moe else 0
        return (
            self.n_layers * per_layer
            + self.n_dense_layers * self.dense_mlp_weights
            + self.n_moe_layers * moe_layer
            + self.d_model
        )

    @property
    def params_total(self) -> int:
        return self.params_nonembedding + self.embedding_weights + self.lm_head_weights

    @property
    def params_active(self) -> int:
        """Parameters a token touches: the total less the routed experts it is not sent to."""
        if not self.moe:
            return self.params_total
        idle = self.moe.n_experts - self.moe.experts_per_token
        return self.params_total - self.n_moe_layers * idle * self.expert_weights

    # --- K/V cache ---------------------------------------------------------------------
    @property
    def kv_elements_per_token(self) -> int:
        """Cached elements per token over all layers: K and V per KV head, or MLA's latent."""
        per_layer = self.mla.cache_elements_per_layer if self.mla else 2 * self.n_kv_heads * self.head_dim
        return self.n_layers * per_layer

    def kv_bytes_per_token(self, kv_bytes_per_element: float) -> float:
        return self.kv_elements_per_token * kv_bytes_per_element
