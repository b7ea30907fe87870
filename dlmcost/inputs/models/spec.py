"""ModelSpec: the normalised description of a transformer that the cost engine needs.

Every model source (bundled config, local JSON/YAML, Hub config.json, dlmcost's own schema)
ends up here. Weight counts per matrix live here too, so the parameter totals that
`dlmcost model` prints and the weight bytes the cost engine streams come from the same numbers.

Layers are described by kind: `layers` is a list of groups `(count, LayerKind)` (attention full,
sliding-window or MLA, its head_dim and K/V heads, K = V; a dense MLP, the routed MoE branch, or
both in parallel). A model whose layers are all alike leaves `layers` empty and its kinds follow
from the uniform fields, so a hybrid is a config, not a code change.
"""

from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

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
    """Upstream sampler settings for a model (see configs/MANIFEST.yaml): the workload defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    # a decoding scheme's name; which names exist is the scheme registry's business (the engine's),
    # checked where a model meets the engine (analysis.prepare.resolve_spec)
    scheme: str = Field(min_length=1, max_length=40, pattern=r"^[a-z][a-z0-9-]*$")
    gen: int = Field(default=256, **_COUNT)
    steps: int | None = Field(default=None, **_COUNT)  # None: one token per forward (S = gen)
    block: int | None = Field(default=None, **_COUNT)  # None: one block = the whole generation
    store_pass: bool = False  # SDAR/BD3-LM: one extra forward per block to write its K/V
    schemes: tuple[str, ...] = ()  # schemes this model can run (sweep's default set)
    note: str = ""

    @field_validator("scheme", "schemes", mode="before")
    @classmethod
    def _names_in_any_case(cls, v):
        """Scheme names in any case, blanks around them ignored, as `--scheme` takes them."""
        if isinstance(v, str):
            return v.strip().lower()
        if isinstance(v, (list, tuple)):
            return [x.strip().lower() if isinstance(x, str) else x for x in v]
        return v


class LayerKind(BaseModel):
    """What one layer runs. Attention: `full`, `sliding` (each query sees `window` keys, itself
    included) or `mla` (the model's MLASpec). `k_eq_v`: values come from the key projection (no
    v_proj weights). FFN: a dense MLP of the model's `ffn_dim`, the model's routed MoE branch, or
    both in parallel (their outputs are added)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    attention: Literal["full", "sliding", "mla"] = "full"
    window: int | None = Field(default=None, gt=0, le=100_000_000)
    head_dim: int = Field(**_DIM)
    n_kv_heads: int = Field(**_COUNT)
    k_eq_v: bool = False
    dense_mlp: bool = True
    moe: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> "LayerKind":
        if (self.attention == "sliding") != (self.window is not None):
            raise ValueError("a sliding-window layer needs a window, and only a sliding layer has one")
        if self.attention == "mla" and self.k_eq_v:
            raise ValueError("k_eq_v does not apply to MLA layers")
        if not (self.dense_mlp or self.moe):
            raise ValueError("a layer needs a dense MLP, an MoE branch or both")
        return self

    @property
    def kv_tensors(self) -> int:
        """Tensors the projection produces per K/V head: K and V, or K alone when V = K."""
        return 1 if self.k_eq_v else 2

    def describe(self) -> str:
        """One line, e.g. 'sliding 1024, head_dim 256, 8 K/V heads; dense + MoE'."""
        attn = f"sliding {self.window}" if self.attention == "sliding" else self.attention
        kv = "K = V, " if self.k_eq_v else ""
        ffn = " + ".join(name for name, on in (("dense", self.dense_mlp), ("MoE", self.moe)) if on)
        return f"{attn}, head_dim {self.head_dim}, {kv}{self.n_kv_heads} K/V heads; {ffn}"

    @property
    def attention_key(self) -> tuple:
        """Layers with equal keys cost the same in every attention op."""
        return (self.attention, self.window, self.head_dim, self.n_kv_heads, self.k_eq_v)


LayerGroup = tuple[int, LayerKind]


@lru_cache(maxsize=256)
def _uniform_groups(n_layers: int, n_moe: int, mla: bool, head_dim: int, n_kv_heads: int) -> tuple[LayerGroup, ...]:
    """A uniform model's layer groups: the dense layers, then the MoE layers (built once per
    shape: the cost functions ask for them many times a pass, and a LayerKind costs ~10 us)."""
    dense = LayerKind(attention="mla" if mla else "full", head_dim=head_dim, n_kv_heads=n_kv_heads)
    groups = ((n_layers - n_moe, dense), (n_moe, dense.model_copy(update=dict(dense_mlp=False, moe=True))))
    return tuple((n, k) for n, k in groups if n)


class ModelSpec(BaseModel):
    """The architecture numbers of one model. Counts are of parameters (elements), not bytes.

    `n_kv_heads` and `head_dim` are those of the uniform layers (or, in a hybrid, of the first
    group); `layers` overrides them per group."""

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
    # RMSNorm of Q and K per head (Qwen3, a head_dim vector each) or over the whole projection
    # (MiniMax-M2's "per_layer": one weight per Q or K channel, every head together)
    qk_norm_scope: Literal["head", "layer"] = "head"
    norms_per_layer: int = Field(default=2, ge=0, le=16)  # RMSNorms of width d per layer (Gemma: 4)
    logit_softcap: float | None = Field(default=None, gt=0)  # final logits: cap * tanh(logits / cap)
    self_conditioning: bool = False  # DiffusionGemma: later denoising steps feed softmax(logits) @ embedding back
    max_context: int | None = Field(default=None, gt=0, le=100_000_000)
    moe: MoESpec | None = None
    mla: MLASpec | None = None
    layers: tuple[LayerGroup, ...] = ()  # (count, kind) groups; () = n_layers layers alike
    vision_params: int = Field(default=0, ge=0)  # a vision tower, reported apart (text-only planning)
    sampler: SamplerDefaults | None = None
    source: str = "local"  # local | bundled | cache | hub | schema
    revision: str | None = None
    verified: bool = True  # False for configs whose dimensions come from a third-party port
    # where the config comes from: a bundled one's MANIFEST status (verbatim, reconstructed,
    # unverified), the Hub's own file (verbatim), or a local file (local)
    provenance: Literal["verbatim", "reconstructed", "unverified", "local"] = "local"

    @model_validator(mode="after")
    def _consistent(self) -> "ModelSpec":
        for count, kind in self.layer_groups:
            if count <= 0:
                raise ValueError(f"layer group counts must be positive, got {count}")
            if kind.attention != "mla" and self.n_heads % kind.n_kv_heads:
                raise ValueError(f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({kind.n_kv_heads})")
            if kind.attention == "mla" and self.mla is None:
                raise ValueError("an MLA layer needs the model's mla block")
            if kind.moe and self.moe is None:
                raise ValueError("an MoE layer needs the model's moe block")
        if self.layers and sum(n for n, _ in self.layers) != self.n_layers:
            raise ValueError(f"layer groups hold {sum(n for n, _ in self.layers)} layers, n_layers is {self.n_layers}")
        if self.moe and self.moe.n_moe_layers > self.n_layers:
            raise ValueError("moe.n_moe_layers cannot exceed n_layers")
        if self.layers and self.moe and self.moe.n_moe_layers != self.n_moe_layers:
            raise ValueError(f"moe.n_moe_layers ({self.moe.n_moe_layers}) differs from the {self.n_moe_layers} MoE layers listed")
        if self.n_dense_layers and self.ffn_dim == 0:
            raise ValueError("ffn_dim is required for dense layers")
        return self

    # --- layer structure ----------------------------------------------------------------
    @property
    def layer_groups(self) -> tuple[LayerGroup, ...]:
        """`layers`, or for a uniform model: the dense layers, then the MoE layers."""
        if self.layers:
            return self.layers
        return _uniform_groups(self.n_layers, self.moe.n_moe_layers if self.moe else 0, self.mla is not None,
                               self.head_dim, self.n_kv_heads)

    @property
    def attention_groups(self) -> list[LayerGroup]:
        """Layers merged by attention kind (counts added first, so sums stay exact)."""
        merged: dict[tuple, list] = {}
        for n, kind in self.layer_groups:
            merged.setdefault(kind.attention_key, [0, kind])[0] += n
        return [(n, kind) for n, kind in merged.values()]

    @property
    def n_moe_layers(self) -> int:
        return sum(n for n, k in self.layer_groups if k.moe)

    @property
    def n_mla_layers(self) -> int:
        """Layers whose attention is multi-head latent attention."""
        return sum(n for n, k in self.layer_groups if k.attention == "mla")

    @property
    def n_dense_layers(self) -> int:
        """Layers with a dense MLP (in a dense + MoE hybrid, every layer)."""
        return sum(n for n, k in self.layer_groups if k.dense_mlp)

    @property
    def group_size(self) -> float:
        """G = query heads per K/V head (attention's arithmetic intensity for one query token)."""
        return self.n_heads / self.n_kv_heads

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.gated_mlp else 2

    # --- attention weights of one layer of a kind (elements) -----------------------------
    def attn_in_weights(self, kind: LayerKind) -> int:
        """Q, K, V projections (GQA/MHA) or all of MLA's projections, with biases and norms."""
        if kind.attention == "mla":
            return self.mla_q_down_weights + self.mla_q_up_weights + self.mla_kv_down_weights + self.mla_kv_up_weights
        return self.q_weights(kind) + self.kv_weights(kind)

    def q_weights(self, kind: LayerKind) -> int:
        """GQA: the Q projection (+ bias, + q-norm)."""
        return self.n_heads * kind.head_dim * (self.d_model + self.qkv_bias) + self._qk_norm_weights(kind, self.n_heads)

    def kv_weights(self, kind: LayerKind) -> int:
        """GQA: the K and V projections (K alone when V = K; + biases, + k-norm); replicated under
        TP beyond n_kv_heads."""
        width = kind.kv_tensors * kind.n_kv_heads * kind.head_dim
        return width * (self.d_model + self.qkv_bias) + self._qk_norm_weights(kind, kind.n_kv_heads)

    def _qk_norm_weights(self, kind: LayerKind, heads: int) -> int:
        """The Q or K norm's weights: one head's width, or every head's under a layer-wide norm."""
        if not self.qk_norm:
            return 0
        return kind.head_dim * (heads if self.qk_norm_scope == "layer" else 1)

    def attn_out_weights(self, kind: LayerKind) -> int:
        v = self.mla.v_head_dim if kind.attention == "mla" else kind.head_dim
        return self.n_heads * v * self.d_model

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

    # --- FFN weights of one layer (elements) ---------------------------------------------
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
        return self.norms_per_layer * self.d_model

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
        attention = sum(n * (self.attn_in_weights(k) + self.attn_out_weights(k)) for n, k in self.attention_groups)
        moe_layer = self.moe.n_experts * self.expert_weights + self.shared_expert_weights + self.router_weights if self.moe else 0
        return (
            attention
            + self.n_layers * self.norm_weights_per_layer
            + self.n_dense_layers * self.dense_mlp_weights
            + self.n_moe_layers * moe_layer
            + self.d_model
        )

    @property
    def params_total(self) -> int:
        """Text model only; `vision_params` is reported apart."""
        return self.params_nonembedding + self.embedding_weights + self.lm_head_weights

    @property
    def params_active(self) -> int:
        """Parameters a token touches: the total less the routed experts it is not sent to."""
        if not self.moe:
            return self.params_total
        idle = self.moe.n_experts - self.moe.experts_per_token
        return self.params_total - self.n_moe_layers * idle * self.expert_weights

    # --- K/V cache ---------------------------------------------------------------------
    def kv_elements_per_layer(self, kind: LayerKind) -> int:
        """Cached elements per token in one layer: K and V per K/V head (engines store both even
        for K = V layers; cost.py has the one-tensor option), or MLA's latent."""
        if kind.attention == "mla":
            return self.mla.cache_elements_per_layer
        return 2 * kind.n_kv_heads * kind.head_dim

    @property
    def kv_elements_per_token(self) -> int:
        """Cached elements per token over all layers (every token kept: no sliding ring buffer)."""
        return sum(n * self.kv_elements_per_layer(k) for n, k in self.attention_groups)

    def kv_bytes_per_token(self, kv_bytes_per_element: float) -> float:
        return self.kv_elements_per_token * kv_bytes_per_element
