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

Each function returns totals over all layers of that op for one pass. Inputs are numpy arrays
(broadcastable): B (sequences, CFG already folded in), q, c, kv_write, logits, causal, and the
precision arrays wbytes (bytes per weight) and kvbytes (bytes per cached element).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .models.spec import ModelSpec
from .precision import ACTIVATION_BYTES as AB

# Which roofline each op's FLOPs run on (see roofline.py): the precision's GEMM peak for linear
# layers and the LM head, bf16 for attention, the vector units for elementwise work.
KINDS = ("linear", "attention", "lm_head", "other")


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

    @property
    def bytes(self) -> np.ndarray:
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
    all_experts: np.ndarray  # bool: read every expert (the second seed's assumption)

    @property
    def tokens(self) -> np.ndarray:
        return self.B * self.q

    @property
    def kbar(self) -> np.ndarray:
        """Keys each query attends to, on average."""
        return np.where(self.causal, self.c + (self.q + 1) / 2, self.c + self.q)


def _op(name, kind, flops, weight_bytes, activation_bytes, kernels, kv_read=0.0, kv_write=0.0) -> OpCost:
    z = np.zeros_like(np.asarray(flops, dtype=float))
    return OpCost(name, kind, flops + z, weight_bytes + z, kv_read + z, kv_write + z, activation_bytes + z, kernels + z)


def _gemm(name: str, p: PassInput, weights: float, d_in: float, d_out: float, layers: int, tokens=None) -> OpCost:
    """A dense projection applied to `tokens` (default all T) in each of `layers` layers."""
    T = p.tokens if tokens is None else tokens
    return _op(name, "linear", layers * 2 * T * weights, layers * weights * p.wbytes,
               layers * T * (d_in + d_out) * AB, layers)


def qkv_proj(m: ModelSpec, p: PassInput) -> OpCost:
    q_kv_out = (m.n_heads + 2 * m.n_kv_heads) * m.head_dim
    return _gemm("qkv_proj", p, m.attn_in_weights, m.d_model, q_kv_out, m.n_layers)


def attention(m: ModelSpec, p: PassInput) -> OpCost:
    """QK^T and AV over kbar keys; K/V of the c cached tokens come from the cache."""
    L, H, hd = m.n_layers, m.n_heads, m.head_dim
    kv_elems = m.kv_elements_per_token / L  # per layer
    flops = L * 4 * p.B * p.q * p.kbar * H * hd
    kv_read = L * p.B * p.c * kv_elems * p.kvbytes
    kv_write = L * p.B * p.kv_write * kv_elems * p.kvbytes
    # Q and O of the new tokens, plus their own K/V straight from the projection.
    act = L * p.tokens * (2 * H * hd + 2 * m.n_kv_heads * hd) * AB
    return _op("attention", "attention", flops, 0.0, act, L, kv_read, kv_write)


def o_proj(m: ModelSpec, p: PassInput) -> OpCost:
    return _gemm("o_proj", p, m.attn_out_weights, m.n_heads * m.head_dim, m.d_model, m.n_layers)


def mlp(m: ModelSpec, p: PassInput) -> OpCost:
    """Dense FFN layers. Activation traffic: input and output (d), plus the m*f intermediate
    written and read back (gate/up outputs, then the activated product)."""
    L, T = m.n_dense_layers, p.tokens
    w = m.dense_mlp_weights
    return _op("mlp", "linear", L * 2 * T * w, L * w * p.wbytes, L * 2 * T * (m.d_model + m.mlp_matrices * m.ffn_dim) * AB, L)


def expected_experts(n_experts: int, k: int, tokens: np.ndarray) -> np.ndarray:
    """Distinct experts a batch of `tokens` touches under uniform routing: E*(1-(1-k/E)^tokens)."""
    return n_experts * -np.expm1(tokens * np.log1p(-k / n_experts)) if k < n_experts else np.full_like(tokens, float(n_experts))


def router(m: ModelSpec, p: PassInput) -> OpCost:
    L, E = m.n_moe_layers, m.moe.n_experts
    return _op("router", "linear", L * 2 * p.tokens * m.d_model * E, L * m.router_weights * p.wbytes,
               L * p.tokens * (m.d_model + E) * AB, L)


def experts(m: ModelSpec, p: PassInput) -> OpCost:
    """Routed experts: every token runs k of them; the pass reads the weights of those touched."""
    L, moe, T = m.n_moe_layers, m.moe, p.tokens
    touched = np.where(p.all_experts, float(moe.n_experts), expected_experts(moe.n_experts, moe.experts_per_token, T))
    flops = L * 2 * T * moe.experts_per_token * m.expert_weights
    act = L * 2 * T * moe.experts_per_token * (m.d_model + m.mlp_matrices * moe.expert_ffn_dim) * AB
    return _op("experts", "linear", flops, L * touched * m.expert_weights * p.wbytes, act, L)


def shared_experts(m: ModelSpec, p: PassInput) -> OpCost:
    L, T, f = m.n_moe_layers, p.tokens, m.moe.shared_ffn_dim
    w = m.shared_expert_weights
    return _op("shared_experts", "linear", L * 2 * T * w, L * w * p.wbytes, L * 2 * T * (m.d_model + m.mlp_matrices * f) * AB, L)


def lm_head(m: ModelSpec, p: PassInput) -> OpCost:
    """Logits for `logits` positions per sequence; a pass with none skips the head entirely."""
    V, d = m.vocab_size, m.d_model
    n = p.B * p.logits
    runs = (p.logits > 0).astype(float)
    return _op("lm_head", "lm_head", 2 * n * d * V, runs * V * d * p.wbytes, n * (d + V) * AB, runs)


def elementwise(m: ModelSpec, p: PassInput) -> OpCost:
    """Norms, residual adds, SiLU*mul, rope and softmax: small FLOPs, some activation traffic.

    Per layer and token: 2 RMSNorms (4 FLOPs/element), 2 residual adds, the gated activation
    (4 FLOPs per FFN element), rope on q and k (3 FLOPs/element); softmax 5 FLOPs per score.
    Bytes per layer: each norm reads and writes d, each residual add reads 2d and writes d
    (10*T*d elements), plus the norm weights. Once per pass: embedding gather and final norm.
    """
    L, T, d = m.n_layers, p.tokens, m.d_model
    if m.moe:
        act_width = m.n_dense_layers * m.ffn_dim + m.n_moe_layers * (
            m.moe.experts_per_token * m.moe.expert_ffn_dim + m.moe.shared_ffn_dim)
    else:
        act_width = L * m.ffn_dim
    rope_width = (m.n_heads + m.n_kv_heads) * m.head_dim
    flops = (L * T * (8 * d + 2 * d + 3 * rope_width) + 4 * T * act_width
             + L * 5 * p.B * p.q * p.kbar * m.n_heads + 4 * T * d)
    weights = (L * m.norm_weights_per_layer + d) * AB + T * d * p.wbytes  # norms + gathered embedding rows
    act = (L * 10 * T * d + T * d + 2 * T * d) * AB
    return _op("elementwise", "other", flops, weights, act, L)


def pass_ops(m: ModelSpec, p: PassInput) -> list[OpCost]:
    """All ops of one forward pass, in execution order."""
    ops = [qkv_proj(m, p), attention(m, p), o_proj(m, p)]
    if m.n_dense_layers:
        ops.append(mlp(m, p))
    if m.moe:
        ops += [router(m, p), experts(m, p)]
        if m.moe.shared_ffn_dim:
            ops.append(shared_experts(m, p))
    ops += [elementwise(m, p), lm_head(m, p)]
    return ops
