"""FLOPs and bytes of one forward pass, op by op (vectorised over configurations).

Conventions (README, "How the numbers are computed"):
  * 2 FLOPs per multiply-accumulate. T = B*q tokens in the pass.
  * Linear layer: 2*T*(weights touched per token). Weights are read once per pass.
  * Attention: 4*B*q*kbar*n_heads*head_dim, kbar = c+q (bidirectional) or c+(q+1)/2 (causal);
    fused (flash) kernel: the score matrix never goes to memory. K/V read B*c tokens from the
    cache and write B*kv_write tokens into it.
  * LM head: 2*B*logits*d_model*vocab.
  * Elementwise (norms, SiLU*mul, rope, residual adds, softmax): counted as `other`.
  * Activations in and out of every op at ACTIVATION_BYTES per element.

Each function returns totals over all layers of that op for one pass, *per GPU* of a tensor-
(and expert-) parallel group. Inputs are numpy arrays (broadcastable): B (sequences, CFG already
folded in), q, c, kv_write, logits, causal, the precision arrays wbytes (bytes per weight) and
kvbytes (bytes per cached element), and the parallel layout tp, ep.

Tensor parallelism over N = tp GPUs (Megatron layout): Q/O heads, FFN columns, experts and the
vocabulary are split N ways; K/V heads too, but never below one per GPU (replicated when N
exceeds n_kv_heads); norms, the router, MLA's down-projections and its latent cache are
replicated. Expert parallelism places E/ep whole experts on each GPU (each sliced tp/ep ways).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .models.spec import ModelSpec
from .precision import ACTIVATION_BYTES as AB

# Which roofline each op's FLOPs run on (see roofline.py): the precision's GEMM peak for linear
# layers and the LM head, bf16 for attention, the vector units for elementwise work.
KINDS = ("linear", "attention", "lm_head", "other")

# Every op a pass can have, in execution order, with its kind ("comm": collectives, no FLOPs).
# The engine keeps per-op sums in one array whose op axis is this tuple.
OP_KINDS = {
    "qkv_proj": "linear", "mla_kv_up": "linear", "attention": "attention", "o_proj": "linear", "mlp": "linear",
    "router": "linear", "experts": "linear", "shared_experts": "linear", "ep_all_to_all": "comm",
    "elementwise": "other", "lm_head": "lm_head", "tp_collectives": "comm",
}
OP_NAMES = tuple(OP_KINDS)


@dataclass
class OpCost:
    name: str
    kind: str  # one of KINDS: FLOP category and which peak it runs at
    flops: np.ndarray
    weight_bytes: np.ndarray
    kv_read_bytes: np.ndarray
    kv_write_bytes: np.ndarray
    activation_bytes: np.ndarray
    kernels: np.ndarray  # kernel launches per pass (for the per-op overhead)
    link_bytes: np.ndarray  # bytes each GPU sends over the scale-up link (collectives)
    collectives: np.ndarray  # collective operations per pass (for their latency)

    @property
    def bytes(self) -> np.ndarray:
        """Memory (HBM) traffic; link traffic is separate and has its own roofline."""
        return self.weight_bytes + self.kv_read_bytes + self.kv_write_bytes + self.activation_bytes


@dataclass(frozen=True)
class PassInput:
    """One pass shape per configuration (arrays), plus the per-configuration settings."""

    B: np.ndarray
    q: np.ndarray
    c: np.ndarray
    kv_write: np.ndarray
    logits: np.ndarray
    causal: np.ndarray
    wbytes: np.ndarray
    kvbytes: np.ndarray
    all_experts: np.ndarray  # bool: read every expert (the conservative assumption)
    tp: np.ndarray | float = 1.0
    ep: np.ndarray | float = 1.0
    mla_absorbed: np.ndarray | bool = True  # MLA: weight-absorbed (MQA over the latent) or expanded

    @property
    def tokens(self) -> np.ndarray:
        return self.B * self.q

    @property
    def kbar(self) -> np.ndarray:
        """Keys each query attends to, on average."""
        return np.where(self.causal, self.c + (self.q + 1) / 2, self.c + self.q)


def heads_per_gpu(m: ModelSpec, tp):
    return m.n_heads / tp


def kv_heads_per_gpu(m: ModelSpec, tp):
    """K/V heads are split across the TP group but never below one: beyond n_kv_heads GPUs they
    are replicated, so each GPU still reads a whole head's cache."""
    return np.maximum(m.n_kv_heads / np.asarray(tp, float), 1.0)


def kv_elements_per_token_per_gpu(m: ModelSpec, tp) -> np.ndarray:
    """Cached elements per token on each GPU: MLA's latent is replicated, GQA heads are split."""
    if m.mla:
        return np.full_like(np.asarray(tp, float), float(m.kv_elements_per_token))
    return m.n_layers * 2 * kv_heads_per_gpu(m, tp) * m.head_dim


def _op(name, kind, flops, weight_bytes, activation_bytes, kernels, kv_read=0.0, kv_write=0.0,
        link_bytes=0.0, collectives=0.0) -> OpCost:
    values = [np.asarray(x, dtype=float) for x in (
        flops, weight_bytes, kv_read, kv_write, activation_bytes, kernels, link_bytes, collectives)]
    shape = np.broadcast_shapes(*(v.shape for v in values))
    # read-only broadcast views where a term is a scalar: nothing downstream writes into an OpCost
    return OpCost(name, kind, *(v if v.shape == shape else np.broadcast_to(v, shape) for v in values))


def _gemm(name: str, p: PassInput, weights, d_in, d_out, layers: int, tokens=None) -> OpCost:
    """A projection of `weights` elements (per GPU) applied to `tokens` (default T) per layer."""
    T = p.tokens if tokens is None else tokens
    return _op(name, "linear", layers * 2 * T * weights, layers * weights * p.wbytes,
               layers * T * (d_in + d_out) * AB, layers)


def qkv_proj(m: ModelSpec, p: PassInput) -> OpCost:
    """GQA: Q (split by heads) and K/V (split, replicated beyond n_kv_heads GPUs).
    MLA: the replicated down-projections and the head-split Q up-projection."""
    if m.mla:
        w = m.mla_q_down_weights + m.mla_kv_down_weights + m.mla_q_up_weights / p.tp
        out = m.mla_q_up_weights / (m.mla.q_lora_rank or m.d_model) / p.tp + m.mla.cache_elements_per_layer
        return _gemm("qkv_proj", p, w, m.d_model, out, m.n_layers)
    kvh = kv_heads_per_gpu(m, p.tp)
    w = m.q_weights / p.tp + m.kv_weights * kvh / m.n_kv_heads
    out = (heads_per_gpu(m, p.tp) + 2 * kvh) * m.head_dim
    return _gemm("qkv_proj", p, w, m.d_model, out, m.n_layers)


def attention(m: ModelSpec, p: PassInput) -> OpCost:
    """QK^T and AV over kbar keys; the c cached tokens' K/V (or latent) come from the cache."""
    if m.mla:
        return mla_attention(m, p)
    L, hd = m.n_layers, m.head_dim
    H, kvh = heads_per_gpu(m, p.tp), kv_heads_per_gpu(m, p.tp)
    kv_elems = 2 * kvh * hd  # per layer, per GPU
    flops = L * 4 * p.B * p.q * p.kbar * H * hd
    kv_read = L * p.B * p.c * kv_elems * p.kvbytes
    kv_write = L * p.B * p.kv_write * kv_elems * p.kvbytes
    # Q and O of the new tokens, plus their own K/V straight from the projection.
    act = L * p.tokens * (2 * H * hd + kv_elems) * AB
    return _op("attention", "attention", flops, 0.0, act, L, kv_read, kv_write)


def mla_kv_up(m: ModelSpec, p: PassInput) -> OpCost:
    """MLA's W_kvb (latent -> K_nope, V per head), split by heads.

    Expanded: applied to every key, the c cached latents and the q new ones (B*(c+q) tokens),
    and the expanded K/V go through memory. Absorbed: folded into the queries (W_UK) and the
    output (W_UV), so applied to the T new tokens only: the same weights, far fewer FLOPs."""
    mla, L = m.mla, m.n_layers
    w = m.mla_kv_up_weights / p.tp
    H = heads_per_gpu(m, p.tp)
    keys = p.B * (p.c + p.q)
    tokens = np.where(p.mla_absorbed, p.tokens, keys)
    act_absorbed = p.tokens * H * (mla.qk_nope_head_dim + 2 * mla.kv_lora_rank + mla.v_head_dim)
    act_expanded = keys * (mla.kv_lora_rank + H * (mla.qk_nope_head_dim + mla.v_head_dim))
    act = L * np.where(p.mla_absorbed, act_absorbed, act_expanded) * AB
    return _op("mla_kv_up", "linear", L * 2 * tokens * w, L * w * p.wbytes, act, L)


def mla_attention(m: ModelSpec, p: PassInput) -> OpCost:
    """Absorbed: MQA over the shared latent, QK width kv_lora + rope and AV width kv_lora (high
    intensity, extra FLOPs). Expanded: per-head QK width nope + rope and AV width v. Either way
    the cache holds the latent plus the rope key (kv_lora + rope elements per token per layer)."""
    mla, L = m.mla, m.n_layers
    H = heads_per_gpu(m, p.tp)
    latent = mla.cache_elements_per_layer
    qk = np.where(p.mla_absorbed, mla.kv_lora_rank + mla.qk_rope_head_dim, mla.qk_nope_head_dim + mla.qk_rope_head_dim)
    av = np.where(p.mla_absorbed, mla.kv_lora_rank, mla.v_head_dim)
    flops = L * 2 * p.B * p.q * p.kbar * H * (qk + av)
    kv_read = L * p.B * p.c * latent * p.kvbytes
    kv_write = L * p.B * p.kv_write * latent * p.kvbytes
    keys_act = np.where(p.mla_absorbed, p.tokens * latent,  # the new tokens' latents
                        p.B * (p.c + p.q) * H * (mla.qk_nope_head_dim + mla.v_head_dim))  # expanded K/V
    act = L * (p.tokens * H * (qk + av) + keys_act) * AB
    return _op("attention", "attention", flops, 0.0, act, L, kv_read, kv_write)


def o_proj(m: ModelSpec, p: PassInput) -> OpCost:
    v = m.mla.v_head_dim if m.mla else m.head_dim
    return _gemm("o_proj", p, m.attn_out_weights / p.tp, heads_per_gpu(m, p.tp) * v, m.d_model, m.n_layers)


def mlp(m: ModelSpec, p: PassInput) -> OpCost:
    """Dense FFN layers, columns split across TP. Activation traffic: input and output (d),
    plus the m*f intermediate written and read back (gate/up outputs, the activated product)."""
    L, T = m.n_dense_layers, p.tokens
    w = m.dense_mlp_weights / p.tp
    act = L * 2 * T * (m.d_model + m.mlp_matrices * m.ffn_dim / p.tp) * AB
    return _op("mlp", "linear", L * 2 * T * w, L * w * p.wbytes, act, L)


def expected_experts(n_experts: int, k: int, tokens: np.ndarray) -> np.ndarray:
    """Distinct experts a batch of `tokens` touches under uniform routing: E*(1-(1-k/E)^tokens)."""
    return n_experts * -np.expm1(tokens * np.log1p(-k / n_experts)) if k < n_experts else np.full_like(tokens, float(n_experts))


def router(m: ModelSpec, p: PassInput) -> OpCost:
    """Replicated on every GPU: each needs every token's routing."""
    L, E = m.n_moe_layers, m.moe.n_experts
    return _op("router", "linear", L * 2 * p.tokens * m.d_model * E, L * m.router_weights * p.wbytes,
               L * p.tokens * (m.d_model + E) * AB, L)


def experts(m: ModelSpec, p: PassInput) -> OpCost:
    """Routed experts: every token runs k of them; a GPU reads the weights of its experts that
    the pass touches (E/ep of them, each a tp/ep slice) and does 1/tp of the FLOPs."""
    L, moe, T = m.n_moe_layers, m.moe, p.tokens
    k, E = moe.experts_per_token, moe.n_experts
    fraction_touched = np.where(p.all_experts, 1.0, expected_experts(E, k, T) / E)
    slice_ = p.ep / p.tp  # the fraction of each local expert a GPU holds
    weights = (E / p.ep) * fraction_touched * m.expert_weights * slice_
    flops = L * 2 * T * k * m.expert_weights / p.tp
    act = L * 2 * (T * k / p.ep) * (m.d_model + m.mlp_matrices * moe.expert_ffn_dim * slice_) * AB
    return _op("experts", "linear", flops, L * weights * p.wbytes, act, L)


def shared_experts(m: ModelSpec, p: PassInput) -> OpCost:
    L, T, f = m.n_moe_layers, p.tokens, m.moe.shared_ffn_dim
    w = m.shared_expert_weights / p.tp
    act = L * 2 * T * (m.d_model + m.mlp_matrices * f / p.tp) * AB
    return _op("shared_experts", "linear", L * 2 * T * w, L * w * p.wbytes, act, L)


def lm_head(m: ModelSpec, p: PassInput) -> OpCost:
    """Logits for `logits` positions per sequence, vocabulary split across TP; a pass with none
    skips the head entirely."""
    V, d = m.vocab_size / p.tp, m.d_model
    n = p.B * p.logits
    runs = (p.logits > 0).astype(float)
    return _op("lm_head", "lm_head", 2 * n * d * V, runs * V * d * p.wbytes, n * (d + V) * AB, runs)


def elementwise(m: ModelSpec, p: PassInput) -> OpCost:
    """Norms, residual adds, SiLU*mul, rope and softmax: small FLOPs, some activation traffic.

    Per layer and token: 2 RMSNorms (4 FLOPs/element), 2 residual adds, the gated activation
    (4 FLOPs per FFN element), rope on q and k (3 FLOPs/element); softmax 5 FLOPs per score.
    Bytes per layer: each norm reads and writes d, each residual add reads 2d and writes d
    (10*T*d elements), plus the norm weights. Once per pass: embedding gather and final norm.
    Norms and residuals are replicated across TP; the rest is split with its op.
    """
    L, T, d = m.n_layers, p.tokens, m.d_model
    if m.moe:
        act_width = m.n_dense_layers * m.ffn_dim + m.n_moe_layers * (
            m.moe.experts_per_token * m.moe.expert_ffn_dim + m.moe.shared_ffn_dim)
    else:
        act_width = L * m.ffn_dim
    H = heads_per_gpu(m, p.tp)
    rope_width = (H + (1 if m.mla else kv_heads_per_gpu(m, p.tp))) * (m.mla.qk_rope_head_dim if m.mla else m.head_dim)
    flops = (L * T * (8 * d + 2 * d + 3 * rope_width) + 4 * T * act_width / p.tp
             + L * 5 * p.B * p.q * p.kbar * H + 4 * T * d)
    weights = (L * m.norm_weights_per_layer + d) * AB + T * d * p.wbytes  # norms + gathered embedding rows
    act = (L * 10 * T * d + T * d + 2 * T * d) * AB
    return _op("elementwise", "other", flops, weights, act, L)


def tp_collectives(m: ModelSpec, p: PassInput) -> OpCost:
    """Tensor parallel: an all-reduce of the T x d activations after attention and after each
    FFN (MoE layers under expert parallelism combine by all-to-all instead), and an all-gather of
    the vocabulary-split logits. Ring all-reduce: each GPU sends 2(N-1)/N of the message."""
    N, T, d = p.tp, p.tokens, m.d_model
    ffn_reduces = m.n_dense_layers + m.n_moe_layers * (np.asarray(p.ep) == 1)
    reduces = (m.n_layers + ffn_reduces) * (N > 1)
    gather = (p.logits > 0) * (N > 1)
    link = reduces * 2 * (N - 1) / N * T * d * AB + gather * (N - 1) / N * p.B * p.logits * m.vocab_size * AB
    return _op("tp_collectives", "comm", 0.0, 0.0, 0.0, 0.0, link_bytes=link, collectives=reduces + gather)


def ep_all_to_all(m: ModelSpec, p: PassInput) -> OpCost:
    """Expert parallel: per MoE layer, dispatch the routed token copies to the GPUs holding their
    experts and combine them back. Each GPU owns T/ep tokens, sends their T*k/ep copies of d
    activations, of which (ep-1)/ep leave the GPU; dispatch + combine doubles it."""
    ep, T = np.asarray(p.ep, float), p.tokens
    k = m.moe.experts_per_token
    link = m.n_moe_layers * 2 * (T * k / ep) * (ep - 1) / ep * m.d_model * AB
    return _op("ep_all_to_all", "comm", 0.0, 0.0, 0.0, 0.0, link_bytes=link, collectives=m.n_moe_layers * 2 * (ep > 1))


def pass_ops(m: ModelSpec, p: PassInput) -> list[OpCost]:
    """All ops of one forward pass, in execution order."""
    ops = [qkv_proj(m, p)]
    if m.mla:
        ops.append(mla_kv_up(m, p))
    ops += [attention(m, p), o_proj(m, p)]
    if m.n_dense_layers:
        ops.append(mlp(m, p))
    if m.moe:
        ops += [router(m, p), experts(m, p)]
        if m.moe.shared_ffn_dim:
            ops.append(shared_experts(m, p))
        ops.append(ep_all_to_all(m, p))
    ops += [elementwise(m, p), lm_head(m, p), tp_collectives(m, p)]
    return ops


def weight_bytes_per_gpu(m: ModelSpec, wbytes, tp, ep) -> np.ndarray:
    """Resident weights on each GPU: every op's weights with all experts, plus the embedding
    table (vocabulary-split like the head). Same formulas as the traffic of a pass."""
    one = np.ones_like(np.asarray(tp, float))
    p = PassInput(B=one, q=one, c=0 * one, kv_write=0 * one, logits=one, causal=one.astype(bool),
                  wbytes=np.asarray(wbytes, float) * one, kvbytes=one, all_experts=one.astype(bool),
                  tp=np.asarray(tp, float) * one, ep=np.asarray(ep, float) * one)
    gathered = m.d_model * p.wbytes  # the one embedding row elementwise() counts for this 1-token pass
    embedding = 0 if m.tie_embeddings else m.embedding_weights / p.tp * p.wbytes  # tied: the head's matrix
    return sum(op.weight_bytes for op in pass_ops(m, p)) - gathered + embedding
