"""FLOPs and bytes of one forward pass, op by op (vectorised over configurations).

Conventions (docs/methodology.md, "One forward pass, op by op"):
  * 2 FLOPs per multiply-accumulate. T = B*q tokens in the pass.
  * Linear layer: 2*T*(weights touched per token). Weights are read once per pass.
  * Attention: 4*B*q*kbar*n_heads*head_dim, kbar = c+q (bidirectional) or c+(q+1)/2 (causal),
    bounded by the window in sliding layers (keys_per_query); fused (flash) kernel: the score
    matrix never goes to memory. K/V read B*c tokens from the cache (a sliding layer: the W-1
    before the first query) and write B*kv_write tokens into it.
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
replicated. Expert parallelism places E/ep whole experts on each GPU (each sliced tp/ep ways);
a pass waits for the busiest GPU, so expert traffic, FLOPs and the all-to-all are those of the
expected busiest rank (`busiest_rank_experts`).

Layers are costed by kind (ModelSpec.layer_groups): attention ops are summed over groups of equal
attention kind (full, sliding window, MLA; head_dim, K/V heads, K = V), FFN ops over the layers
that have a dense MLP and those that have an MoE branch (both, in a dense + MoE hybrid).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .columns import column
from ..inputs.models.spec import LayerKind, ModelSpec
from ..inputs.precision import ACTIVATION_BYTES as AB

# The LM head and embedding stay bf16 under fp8 and weight-only precisions unless asked
# (AWQ, GPTQ and most fp8 checkpoints keep them unquantised).
HEAD_BYTES = 2.0
LOGIT_FP32_BYTES = 4.0  # soft-capping and the self-conditioning softmax run in fp32

# Which roofline each op's FLOPs run on (see roofline.py): the precision's GEMM peak for linear
# layers and the LM head, bf16 for attention, the vector units for elementwise work.
KINDS = ("linear", "attention", "lm_head", "other")

# Every op a pass can have, in execution order, with its kind ("comm": collectives, no FLOPs).
# The engine keeps per-op sums in one array whose op axis is this tuple.
OP_KINDS = {
    "qkv_proj": "linear", "mla_kv_up": "linear", "attention": "attention", "o_proj": "linear", "mlp": "linear",
    "router": "linear", "experts": "linear", "shared_experts": "linear", "ep_all_to_all": "comm",
    "elementwise": "other", "lm_head": "lm_head", "logit_softcap": "other", "self_condition": "lm_head",
    "tp_collectives": "comm",
    # time-only entries a software stack adds (engine.STACK_OPS): no FLOPs, no bytes
    "host_wait": "host", "per_forward": "host",
}
OP_NAMES = tuple(OP_KINDS)

# The ops that read the cached tokens c, the K/V written or the mask; every other op depends on
# the pass's q, its logits and the settings alone. Along a family whose q and logits are fixed,
# only these change from pass to pass (the engine costs the rest once).
CACHE_OPS = ("attention", "mla_kv_up", "elementwise")

# eq=False on classes of arrays: == on arrays is elementwise, so a generated __eq__ (and
# __hash__) could only raise; identity is the only equality they have.
@dataclass(eq=False)
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
    # attention: the FLOPs the op does per key each query reads (its FLOPs at one key per query),
    # for a stack whose attention kernels pay a fixed cost per query row (stack_time.keys_term)
    flops_per_key: np.ndarray | float = 0.0

    @property
    def bytes(self) -> np.ndarray:
        """Memory (HBM) traffic; link traffic is separate and has its own roofline."""
        return self.weight_bytes + self.kv_read_bytes + self.kv_write_bytes + self.activation_bytes


@dataclass(frozen=True, eq=False)
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
    all_experts: np.ndarray  # bool: read every expert (the worst case: no routing sparsity in the weight stream)
    tp: np.ndarray | float = 1.0
    ep: np.ndarray | float = 1.0
    mla_absorbed: np.ndarray | bool = True  # MLA: weight-absorbed (MQA over the latent) or expanded
    kv_single_tensor: np.ndarray | bool = False  # K = V layers: cache one tensor instead of two
    quantize_head: np.ndarray | bool = False  # quantise the LM head and embedding too (else bf16)
    self_condition: np.ndarray | bool = False  # this pass self-conditions (models with self_conditioning)

    @property
    def tokens(self) -> np.ndarray:
        return self.B * self.q

    @property
    def kbar(self) -> np.ndarray:
        """Keys each query attends to, on average."""
        return np.where(self.causal, self.c + (self.q + 1) / 2, self.c + self.q)

    @property
    def head_bytes(self) -> np.ndarray:
        """Bytes per weight of the LM head and the embedding table."""
        return np.where(self.quantize_head, self.wbytes, HEAD_BYTES)


def _sum_min(lo, hi, cap):
    """sum_{n=lo}^{hi} min(n, cap) for integers 0 <= lo (0 when hi < lo), in closed form."""
    def upto(x):  # sum_{n=0}^{x} min(n, cap), x >= -1
        x = np.maximum(x, -1.0)
        below = np.minimum(x, cap)
        return below * (below + 1) / 2 + np.maximum(x - cap, 0.0) * cap
    return upto(np.asarray(hi, float)) - upto(np.asarray(lo, float) - 1)


def keys_per_query(kind: LayerKind, p: PassInput) -> np.ndarray:
    """Keys each query of the pass attends to, on average (k-bar).

    Full attention: c + (q+1)/2 causal, c + q bidirectional. Sliding window W (query at absolute
    position i sees key j when |i - j| < W, and j <= i if causal; transformers' masks): the q
    queries sit at positions c..c+q-1 of c+q keys, so query c+t sees min(c+t, W-1) earlier keys,
    itself, and (bidirectional) min(q-1-t, W-1) later ones. Summed over t in closed form:
        causal:        (S(c, c+q-1) + q) / q
        bidirectional: (S(c, c+q-1) + q + S(0, q-1)) / q,   S(a, b) = sum_{n=a}^{b} min(n, W-1)
    which is the full-attention value whenever c + q <= W."""
    if kind.attention != "sliding":
        return p.kbar
    cap = kind.window - 1
    earlier = _sum_min(p.c, p.c + p.q - 1, cap)
    later = np.where(p.causal, 0.0, _sum_min(0, p.q - 1, cap))
    q = np.asarray(p.q, float)
    return np.divide(earlier + q + later, q, out=np.zeros(np.broadcast(earlier, later, q).shape), where=q > 0)


def cached_keys_read(kind: LayerKind, c) -> np.ndarray:
    """Cached tokens whose K/V a pass reads: all c, or for a sliding layer the W-1 before the
    first query (the only cached keys any query of the pass can see)."""
    c = np.asarray(c, float)
    return np.minimum(c, kind.window - 1) if kind.attention == "sliding" else c


def window_affine(m: ModelSpec, q0, dq, c0, dc, n) -> np.ndarray:
    """Whether a family of passes q = q0 + dq*j, c = c0 + dc*j (j < n) has sliding-window
    attention costs affine in j, so that closed-form sums apply. With q fixed, k-bar*q and the
    cached keys read are linear in c while c <= W - q (no query reaches past the window) and
    constant once c >= W - 1; between the two they bend. Models without sliding layers: always."""
    q0, dq, c0, dc, n = (np.asarray(x, float) for x in (q0, dq, c0, dc, n))
    ok = np.ones(np.broadcast(q0, dq, c0, dc, n).shape, bool)
    c_lo = np.minimum(c0, c0 + dc * np.maximum(n - 1, 0))
    c_hi = np.maximum(c0, c0 + dc * np.maximum(n - 1, 0))
    for _, kind in m.attention_groups:
        if kind.attention == "sliding":
            W = kind.window
            ok &= (n <= 1) | ((dq == 0) & ((dc == 0) | (c_hi <= W - q0) | (c_lo >= W - 1)))
    return ok


def heads_per_gpu(m: ModelSpec, tp):
    return m.n_heads / tp


def kv_heads_per_gpu(n_kv_heads: int, tp):
    """K/V heads are split across the TP group but never below one: beyond n_kv_heads GPUs they
    are replicated, so each GPU still reads a whole head's cache."""
    return np.maximum(n_kv_heads / np.asarray(tp, float), 1.0)


def kv_elements_per_layer_per_gpu(m: ModelSpec, kind: LayerKind, tp, kv_single_tensor=False) -> np.ndarray:
    """Cached elements per token in one layer of a kind on each GPU: MLA's latent is replicated,
    GQA heads are split; a K = V layer caches one tensor when the engine is asked to."""
    if kind.attention == "mla":
        return np.full_like(np.asarray(tp, float), float(m.mla.cache_elements_per_layer))
    tensors = np.where(np.asarray(kv_single_tensor) & kind.k_eq_v, 1.0, 2.0)
    return tensors * kv_heads_per_gpu(kind.n_kv_heads, tp) * kind.head_dim


def kv_cache_elements_per_gpu(m: ModelSpec, tokens, tp, kv_single_tensor=False, ring_buffer=True) -> np.ndarray:
    """Cached elements of one sequence of `tokens` tokens on each GPU. With a ring buffer (what
    transformers' sliding-window cache layers do) a sliding layer keeps at most W tokens."""
    tokens = np.asarray(tokens, float)
    total = 0.0
    for n, k in m.attention_groups:
        kept = np.where(ring_buffer, np.minimum(tokens, k.window), tokens) if k.attention == "sliding" else tokens
        total = total + kept * n * kv_elements_per_layer_per_gpu(m, k, tp, kv_single_tensor)
    return total


def _op(name, kind, flops, weight_bytes, activation_bytes, kernels, kv_read=0.0, kv_write=0.0,
        link_bytes=0.0, collectives=0.0, flops_per_key=0.0) -> OpCost:
    values = [np.asarray(x, dtype=float) for x in (
        flops, weight_bytes, kv_read, kv_write, activation_bytes, kernels, link_bytes, collectives, flops_per_key)]
    shape = np.broadcast_shapes(*(v.shape for v in values))
    # a scalar term as a column (columns.column: a read-only view in large grids, a copy in small
    # ones, where a view costs more to set up); nothing downstream writes into an OpCost
    return OpCost(name, kind, *(v if v.shape == shape else column(v, shape[0]) if v.ndim == 0 and len(shape) == 1
                                else np.broadcast_to(v, shape) for v in values))


def _gemm(name: str, p: PassInput, weights, d_in, d_out, layers: int) -> OpCost:
    """A projection of `weights` elements (per GPU) applied to the pass's T tokens per layer."""
    T = p.tokens
    return _op(name, "linear", layers * 2 * T * weights, layers * weights * p.wbytes,
               layers * T * (d_in + d_out) * AB, layers)


def _combine(name: str, kind: str, ops: list[OpCost]) -> OpCost:
    """One op summed over layer groups (the first group's arrays plus the others')."""
    if len(ops) == 1:  # a uniform model: nothing to add
        return ops[0]
    fields = ("flops", "weight_bytes", "activation_bytes", "kernels", "kv_read_bytes", "kv_write_bytes",
              "link_bytes", "collectives", "flops_per_key")
    return _op(name, kind, *(sum(getattr(o, f) for o in ops) for f in fields))


def qkv_proj(m: ModelSpec, p: PassInput) -> OpCost:
    """GQA: Q (split by heads) and K/V (split, replicated beyond n_kv_heads GPUs; K alone when
    V = K). MLA: the replicated down-projections and the head-split Q up-projection."""
    ops = []
    for n, kind in m.attention_groups:
        if kind.attention == "mla":
            w = m.mla_q_down_weights + m.mla_kv_down_weights + m.mla_q_up_weights / p.tp
            out = m.mla_q_up_weights / (m.mla.q_lora_rank or m.d_model) / p.tp + m.mla.cache_elements_per_layer
        else:
            kvh = kv_heads_per_gpu(kind.n_kv_heads, p.tp)
            w = m.q_weights(kind) / p.tp + m.kv_weights(kind) * kvh / kind.n_kv_heads
            out = (heads_per_gpu(m, p.tp) + kind.kv_tensors * kvh) * kind.head_dim
        ops.append(_gemm("qkv_proj", p, w, m.d_model, out, n))
    return _combine("qkv_proj", "linear", ops)


def attention(m: ModelSpec, p: PassInput) -> OpCost:
    """QK^T and AV over k-bar keys (keys_per_query: the window bounds them in sliding layers); the
    cached tokens in view have their K/V (or latent) read from the cache."""
    ops = []
    for n, kind in m.attention_groups:
        ops.append(mla_attention(m, p, n) if kind.attention == "mla" else _gqa_attention(m, p, n, kind))
    return _combine("attention", "attention", ops)


def _gqa_attention(m: ModelSpec, p: PassInput, L: int, kind: LayerKind) -> OpCost:
    hd = kind.head_dim
    H, kvh = heads_per_gpu(m, p.tp), kv_heads_per_gpu(kind.n_kv_heads, p.tp)
    cached = kv_elements_per_layer_per_gpu(m, kind, p.tp, p.kv_single_tensor)  # per token in the cache
    per_key = L * 4 * p.B * p.q * H * hd  # QK^T and AV of every query against one key
    flops = per_key * keys_per_query(kind, p)
    kv_read = L * p.B * cached_keys_read(kind, p.c) * cached * p.kvbytes
    kv_write = L * p.B * p.kv_write * cached * p.kvbytes
    # Q and O of the new tokens, plus their own K and V straight from the projection.
    act = L * p.tokens * (2 * H * hd + 2 * kvh * hd) * AB
    return _op("attention", "attention", flops, 0.0, act, L, kv_read, kv_write, flops_per_key=per_key)


def mla_kv_up(m: ModelSpec, p: PassInput) -> OpCost:
    """MLA's W_kvb (latent -> K_nope, V per head), split by heads.

    Expanded: applied to every key, the c cached latents and the q new ones (B*(c+q) tokens),
    and the expanded K/V go through memory. Absorbed: folded into the queries (W_UK) and the
    output (W_UV), so applied to the T new tokens only: the same weights, far fewer FLOPs."""
    mla, L = m.mla, sum(n for n, k in m.attention_groups if k.attention == "mla")
    w = m.mla_kv_up_weights / p.tp
    H = heads_per_gpu(m, p.tp)
    keys = p.B * (p.c + p.q)
    tokens = np.where(p.mla_absorbed, p.tokens, keys)
    act_absorbed = p.tokens * H * (mla.qk_nope_head_dim + 2 * mla.kv_lora_rank + mla.v_head_dim)
    act_expanded = keys * (mla.kv_lora_rank + H * (mla.qk_nope_head_dim + mla.v_head_dim))
    act = L * np.where(p.mla_absorbed, act_absorbed, act_expanded) * AB
    return _op("mla_kv_up", "linear", L * 2 * tokens * w, L * w * p.wbytes, act, L)


def mla_attention(m: ModelSpec, p: PassInput, L: int) -> OpCost:
    """Absorbed: MQA over the shared latent, QK width kv_lora + rope and AV width kv_lora (high
    intensity, extra FLOPs). Expanded: per-head QK width nope + rope and AV width v. Either way
    the cache holds the latent plus the rope key (kv_lora + rope elements per token per layer)."""
    mla = m.mla
    H = heads_per_gpu(m, p.tp)
    latent = mla.cache_elements_per_layer
    qk = np.where(p.mla_absorbed, mla.kv_lora_rank + mla.qk_rope_head_dim, mla.qk_nope_head_dim + mla.qk_rope_head_dim)
    av = np.where(p.mla_absorbed, mla.kv_lora_rank, mla.v_head_dim)
    per_key = L * 2 * p.B * p.q * H * (qk + av)  # QK^T and AV of every query against one key
    flops = per_key * p.kbar
    kv_read = L * p.B * p.c * latent * p.kvbytes
    kv_write = L * p.B * p.kv_write * latent * p.kvbytes
    keys_act = np.where(p.mla_absorbed, p.tokens * latent,  # the new tokens' latents
                        p.B * (p.c + p.q) * H * (mla.qk_nope_head_dim + mla.v_head_dim))  # expanded K/V
    act = L * (p.tokens * H * (qk + av) + keys_act) * AB
    return _op("attention", "attention", flops, 0.0, act, L, kv_read, kv_write, flops_per_key=per_key)


def o_proj(m: ModelSpec, p: PassInput) -> OpCost:
    ops = []
    for n, kind in m.attention_groups:
        v = m.mla.v_head_dim if kind.attention == "mla" else kind.head_dim
        ops.append(_gemm("o_proj", p, m.attn_out_weights(kind) / p.tp, heads_per_gpu(m, p.tp) * v, m.d_model, n))
    return _combine("o_proj", "linear", ops)


def mlp(m: ModelSpec, p: PassInput) -> OpCost:
    """Dense FFN layers, columns split across TP. Activation traffic: input and output (d),
    plus the m*f intermediate written and read back (gate/up outputs, the activated product)."""
    L, T = m.n_dense_layers, p.tokens
    w = m.dense_mlp_weights / p.tp
    act = L * 2 * T * (m.d_model + m.mlp_matrices * m.ffn_dim / p.tp) * AB
    return _op("mlp", "linear", L * 2 * T * w, L * w * p.wbytes, act, L)


def expected_experts(n_experts: int, k: int, tokens: np.ndarray) -> np.ndarray:
    """Distinct experts a batch of `tokens` touches under uniform routing: E*(1-(1-k/E)^tokens).

    Without expert parallelism this is the only quantity of a pass not linear in its tokens T at
    fixed keys per query: the experts' weight bytes are proportional to it, and every FLOP and
    every other byte is linear in T. The engine relies on that (engine._touched_experts_pass_by_pass)."""
    return n_experts * -np.expm1(tokens * np.log1p(-k / n_experts)) if k < n_experts else np.full_like(tokens, float(n_experts))


def expected_experts_sum(n_experts: int, k: int, tokens0: np.ndarray, dtokens: np.ndarray, n: np.ndarray) -> np.ndarray:
    """sum over j < n of expected_experts(tokens0 + dtokens j): E (n - sum y^T_j), y = 1 - k/E, a
    geometric series, summed from its end with the fewest tokens so that no power exceeds 1:
    y^T_min (1 - y^(|dT| n)) / (1 - y^|dT|) (n y^T0 when dT = 0)."""
    if k >= n_experts:
        return n_experts * np.asarray(n, float)
    log_y = np.log1p(-k / n_experts)
    fewest = np.minimum(tokens0, tokens0 + dtokens * (n - 1))
    step = np.abs(dtokens) * log_y
    ratio = np.divide(np.expm1(n * step), np.expm1(step), out=np.array(n, float), where=step != 0)
    return n_experts * (n - np.exp(fewest * log_y) * ratio)


def _busiest_given_touched(n_experts: int, ep: int) -> np.ndarray:
    """E[experts on the busiest of ep ranks | d distinct experts touched], for d = 0..E.

    Given d, the touched set is a uniformly random d-subset of the E experts (routing is
    exchangeable across experts), so the per-rank counts are multivariate hypergeometric over
    ep ranks of s = E/ep experts:
        P(max < x | d) = [z^d] (sum_{j<x} C(s, j) z^j)^ep / C(E, d)
        E[max | d]    = sum_{x=1}^{s} (1 - P(max < x | d))."""
    return _busiest_table(n_experts, ep)


@lru_cache(maxsize=64)
def _busiest_table(n_experts: int, ep: int) -> np.ndarray:
    s = n_experts // ep
    ways = np.array([math.comb(n_experts, d) for d in range(n_experts + 1)], float)
    expected = np.zeros(n_experts + 1)
    for x in range(1, s + 1):
        per_rank = np.array([math.comb(s, j) for j in range(x)], float)
        below = np.ones(1)
        for _ in range(ep):
            below = np.convolve(below, per_rank)[: n_experts + 1]
        below = np.pad(below, (0, n_experts + 1 - len(below)))
        expected += 1.0 - below / ways
    return expected


def busiest_rank_experts(n_experts: int, k: int, tokens: np.ndarray, ep, touched=None) -> np.ndarray:
    """Expected experts touched on the busiest EP rank: E[max | d] (above) at the expected number
    of distinct experts d = expected_experts(), interpolated between integers. Exact when d is
    certain: one token (d = k) and large batches (d -> E, every rank E/ep); ep = 1 gives d."""
    d = expected_experts(n_experts, k, tokens) if touched is None else touched
    ep = np.broadcast_to(np.asarray(ep, float), d.shape)
    out = np.array(d, dtype=float, copy=True)
    for ways in np.unique(ep[ep > 1]):
        rows = ep == ways
        out[rows] = np.interp(d[rows], np.arange(n_experts + 1), _busiest_given_touched(n_experts, int(ways)))
    return out


def expert_load(m: ModelSpec, p: PassInput) -> tuple[np.ndarray, np.ndarray]:
    """(experts whose weights the busiest GPU reads, token copies it computes), per MoE layer.

    ep = 1: every GPU holds a slice of all E experts: the d touched, T*k copies. ep > 1: the
    busiest rank's expected experts; each touched expert gets T*k/d copies on average, so that
    rank computes busiest * T*k/d of them (T*k/ep on average, one token's k when T = 1)."""
    moe, T = m.moe, p.tokens
    k, E = moe.experts_per_token, moe.n_experts
    ep = np.asarray(p.ep, float)
    d = expected_experts(E, k, T)
    average = (E / ep) * (d / E)
    if not np.any(ep > 1):
        return np.where(p.all_experts, E / ep, average), T * k / ep
    busiest = busiest_rank_experts(E, k, T, ep, touched=np.broadcast_to(d, np.broadcast(d, ep).shape))
    touched = np.where(p.all_experts, E / ep, np.where(ep > 1, busiest, average))
    copies = np.where(ep > 1, np.divide(T * k * busiest, d, out=np.zeros(busiest.shape), where=d > 0), T * k / ep)
    return touched, copies


def router(m: ModelSpec, p: PassInput) -> OpCost:
    """Replicated on every GPU: each needs every token's routing."""
    L, E = m.n_moe_layers, m.moe.n_experts
    return _op("router", "linear", L * 2 * p.tokens * m.d_model * E, L * m.router_weights * p.wbytes,
               L * p.tokens * (m.d_model + E) * AB, L)


def experts(m: ModelSpec, p: PassInput) -> OpCost:
    """Routed experts: every token runs k of them. Each GPU holds E/ep experts, each a tp/ep
    slice; the pass waits for the busiest GPU (expert_load): it reads the weights of its touched
    experts and computes its token copies."""
    L, moe, T = m.n_moe_layers, m.moe, p.tokens
    k = moe.experts_per_token
    touched, copies = expert_load(m, p)
    slice_ = p.ep / p.tp  # the fraction of each local expert a GPU holds
    weights = touched * m.expert_weights * slice_
    flops = np.where(np.asarray(p.ep) > 1, L * 2 * copies * m.expert_weights * slice_, L * 2 * T * k * m.expert_weights / p.tp)
    act = L * 2 * copies * (m.d_model + m.mlp_matrices * moe.expert_ffn_dim * slice_) * AB
    # a fused MoE block runs two grouped GEMMs (w13, w2) at the weights' streaming rate; its four small
    # kernels (top-k, align, activation, reduce) are elementwise's
    return _op("experts", "linear", flops, L * weights * p.wbytes, act, 2 * L)


def shared_experts(m: ModelSpec, p: PassInput) -> OpCost:
    L, T, f = m.n_moe_layers, p.tokens, m.moe.shared_ffn_dim
    w = m.shared_expert_weights / p.tp
    act = L * 2 * T * (m.d_model + m.mlp_matrices * f / p.tp) * AB
    return _op("shared_experts", "linear", L * 2 * T * w, L * w * p.wbytes, act, L)


def lm_head(m: ModelSpec, p: PassInput) -> OpCost:
    """Logits for `logits` positions per sequence, vocabulary split across TP; a pass with none
    skips the head entirely. The head's weights are bf16 unless `quantize_head`."""
    V, d = m.vocab_size / p.tp, m.d_model
    n = p.B * p.logits
    runs = (p.logits > 0).astype(float)
    return _op("lm_head", "lm_head", 2 * n * d * V, runs * V * d * p.head_bytes, n * (d + V) * AB, runs)


def logit_softcap(m: ModelSpec, p: PassInput) -> OpCost:
    """Gemma's soft-capped logits, cap * tanh(logits / cap), in fp32: one elementwise pass over
    every logit (divide, tanh, multiply: 3 FLOPs), reading the bf16 logits and writing fp32."""
    n = p.B * p.logits * m.vocab_size / p.tp
    return _op("logit_softcap", "other", 3 * n, 0.0, n * (AB + LOGIT_FP32_BYTES), (p.logits > 0).astype(float))


def self_condition(m: ModelSpec, p: PassInput) -> OpCost:
    """DiffusionGemma's self-conditioning on a canvas's later steps: softmax over the vocabulary
    of the previous step's fp32 logits, times the embedding table (a GEMM as large as the head:
    2*n*V*d FLOPs, the V x d table read again), fed back through a small gated MLP (not counted:
    its width is not in the config). Bytes: read the fp32 logits, write and read the bf16
    probabilities, write n x d. The softmax's few FLOPs per logit are left out (2d per logit in
    the GEMM dominate)."""
    V, d = m.vocab_size / p.tp, m.d_model
    on = np.asarray(p.self_condition, bool) & (p.logits > 0)
    n = np.where(on, p.B * p.logits, 0.0)
    act = n * V * (LOGIT_FP32_BYTES + 2 * AB) + n * d * AB
    return _op("self_condition", "lm_head", 2 * n * V * d, on * V * d * p.head_bytes, act, 2 * on)


# A fused MoE block (SGLang's and vLLM's fused_moe) runs top-k, align, its two grouped GEMMs, the activation
# and the reduce: NVIDIA aiconfigurator's CUDA-graph timing of DeepSeek-V3's block at TP8 on an H200 (fp8, one
# token: 36.4 us under SGLang) is two GEMM kernels at the weights' streaming rate (2 x 5.6 us) plus four small
# kernels (4 x 3 us) plus 44 MB at 0.71 of 4.8 TB/s (12.9 us).
MOE_SMALL_KERNELS = 4


def elementwise(m: ModelSpec, p: PassInput) -> OpCost:
    """Norms, residual adds, SiLU*mul, rope and softmax: small FLOPs, some activation traffic.

    Per layer and token: `norms_per_layer` RMSNorms (4 FLOPs/element; 2 in Llama-style layers,
    4 in Gemma's), 2 residual adds, the gated activation (4 FLOPs per FFN element), rope on q and
    k (3 FLOPs/element); softmax 5 FLOPs per score (k-bar of the layer's kind). Bytes per layer:
    each norm reads and writes d, each residual add reads 2d and writes d ((2*norms + 6)*T*d
    elements), plus the norm weights. Once per pass: embedding gather and final norm.
    Norms and residuals are replicated across TP; the rest is split with its op.
    """
    L, T, d, norms = m.n_layers, p.tokens, m.d_model, m.norms_per_layer
    if m.moe:
        act_width = m.n_dense_layers * m.ffn_dim + m.n_moe_layers * (
            m.moe.experts_per_token * m.moe.expert_ffn_dim + m.moe.shared_ffn_dim)
    else:
        act_width = L * m.ffn_dim
    H = heads_per_gpu(m, p.tp)

    def rope_width(kind: LayerKind):
        if kind.attention == "mla":
            return (H + 1) * m.mla.qk_rope_head_dim
        return (H + kv_heads_per_gpu(kind.n_kv_heads, p.tp)) * kind.head_dim

    groups = m.attention_groups
    flops = (sum(n * T * (4 * norms * d + 2 * d + 3 * rope_width(k)) for n, k in groups) + 4 * T * act_width / p.tp
             + sum(n * 5 * p.B * p.q * keys_per_query(k, p) * H for n, k in groups) + 4 * T * d)
    weights = (L * m.norm_weights_per_layer + d) * AB + T * d * p.head_bytes  # norms + gathered embedding rows
    act = (L * (2 * norms + 6) * T * d + T * d + 2 * T * d) * AB
    return _op("elementwise", "other", flops, weights, act, L + (MOE_SMALL_KERNELS * m.n_moe_layers if m.moe else 0))


def tp_collectives(m: ModelSpec, p: PassInput) -> OpCost:
    """Tensor parallel: an all-reduce of the T x d activations after attention and after each
    layer's FFN (a dense + MoE layer adds both branches first; MoE-only layers under expert
    parallelism combine by all-to-all instead), an all-gather of the vocabulary-split logits, and
    with self-conditioning an all-reduce of its vocabulary-split GEMM's n x d output.
    Ring all-reduce: each GPU sends 2(N-1)/N of the message."""
    N, T, d = p.tp, p.tokens, m.d_model
    moe_only = sum(n for n, k in m.layer_groups if k.moe and not k.dense_mlp)
    ffn_reduces = m.n_dense_layers + moe_only * (np.asarray(p.ep) == 1)
    reduces = (m.n_layers + ffn_reduces) * (N > 1)
    gather = (p.logits > 0) * (N > 1)
    link = reduces * 2 * (N - 1) / N * T * d * AB + gather * (N - 1) / N * p.B * p.logits * m.vocab_size * AB
    collectives = reduces + gather
    if m.self_conditioning:
        sc = (np.asarray(p.self_condition, bool) & (p.logits > 0)) * (N > 1)
        link = link + sc * 2 * (N - 1) / N * p.B * p.logits * d * AB
        collectives = collectives + sc
    return _op("tp_collectives", "comm", 0.0, 0.0, 0.0, 0.0, link_bytes=link, collectives=collectives)


def ep_all_to_all(m: ModelSpec, p: PassInput) -> OpCost:
    """Expert parallel: per MoE layer, dispatch the routed token copies to the GPUs holding their
    experts and combine them back. The step waits for the busiest GPU: it receives its token
    copies (expert_load), of which (ep-1)/ep come from other GPUs, and sends them back; d
    activations each, dispatch + combine doubles it. (On average a GPU's copies are T*k/ep.)"""
    ep = np.asarray(p.ep, float)
    _, copies = expert_load(m, p)
    link = m.n_moe_layers * 2 * copies * (ep - 1) / ep * m.d_model * AB
    return _op("ep_all_to_all", "comm", 0.0, 0.0, 0.0, 0.0, link_bytes=link, collectives=m.n_moe_layers * 2 * (ep > 1))


# --- GEMM depths -------------------------------------------------------------------------------
#
# A GEMM's efficiency depends on its depth K (the inner dimension, summed over per output) as well
# as its rows: each output tile's write-back is not hidden by a loop over K that is short
# (stack_time.depth_factor). The GEMMs of an op, per GPU, as (weights, K) pairs: an op's time at
# the depth of each of its matrices is its FLOPs split in proportion to their weights.


def _ffn_depths(m: ModelSpec, width) -> list[tuple]:
    """A (gated) FFN of `width` columns on this GPU: gate and up read d_model, down reads width."""
    return [((m.mlp_matrices - 1) * m.d_model * width, m.d_model), (m.d_model * width, width)]


def gemm_depths(m: ModelSpec, tp, ep, mla_absorbed=True) -> dict[str, list[tuple]]:
    """Each GEMM op's matrices on one GPU as (weights, depth K), arrays over configurations.

    qkv_proj reads d_model (MLA: its down-projections d_model, the Q up-projection q_lora_rank);
    o_proj reads the GPU's heads x head width; an FFN's gate and up read d_model and its down
    projection the GPU's share of the width (experts: each expert's tp/ep slice); the router and
    the LM head read d_model; MLA's W_kvb reads the latent (absorbed: W_UK multiplies the queries'
    qk_nope part instead); self-conditioning's probabilities x embedding reads the vocabulary share."""
    tp, ep = np.asarray(tp, float), np.asarray(ep, float)
    d, H = m.d_model, heads_per_gpu(m, tp)
    out = {"qkv_proj": [], "o_proj": []}
    for n, kind in m.attention_groups:
        if kind.attention == "mla":
            out["qkv_proj"] += [(n * (m.mla_q_down_weights + m.mla_kv_down_weights), d),
                                (n * m.mla_q_up_weights / tp, m.mla.q_lora_rank or d)]
        else:
            kvh = kv_heads_per_gpu(kind.n_kv_heads, tp)
            out["qkv_proj"].append((n * (m.q_weights(kind) / tp + m.kv_weights(kind) * kvh / kind.n_kv_heads), d))
        v = m.mla.v_head_dim if kind.attention == "mla" else kind.head_dim
        out["o_proj"].append((n * m.attn_out_weights(kind) / tp, H * v))
    if m.mla:
        mla = m.mla
        uk, uv = (mla.kv_lora_rank * H * dim for dim in (mla.qk_nope_head_dim, mla.v_head_dim))
        out["mla_kv_up"] = [(uk, np.where(mla_absorbed, mla.qk_nope_head_dim, mla.kv_lora_rank)), (uv, mla.kv_lora_rank)]
    if m.n_dense_layers:
        out["mlp"] = _ffn_depths(m, m.ffn_dim / tp)
    if m.moe:
        out["router"] = [(m.router_weights, d)]
        out["experts"] = _ffn_depths(m, m.moe.expert_ffn_dim * ep / tp)
        if m.moe.shared_ffn_dim:
            out["shared_experts"] = _ffn_depths(m, m.moe.shared_ffn_dim / tp)
    V = m.vocab_size / tp
    out["lm_head"] = [(V * d, d)]
    if m.self_conditioning:
        out["self_condition"] = [(V * d, V)]
    return out


def pass_ops(m: ModelSpec, p: PassInput, only=None) -> list[OpCost]:
    """All ops of one forward pass, in execution order (`only`: just the ops of these names)."""
    return [f(m, p) for f in op_functions(m) if only is None or f.__name__ in only]


def op_functions(m: ModelSpec) -> list:
    """The cost function of each op a forward pass of `m` has, in execution order; each is
    named after the op it returns."""
    ops = [qkv_proj]
    if m.mla:
        ops.append(mla_kv_up)
    ops += [attention, o_proj]
    if m.n_dense_layers:
        ops.append(mlp)
    if m.moe:
        ops += [router, experts]
        if m.moe.shared_ffn_dim:
            ops.append(shared_experts)
        ops.append(ep_all_to_all)
    ops += [elementwise, lm_head]
    if m.logit_softcap:
        ops.append(logit_softcap)
    if m.self_conditioning:  # zero in the passes that do not use it (a canvas's first step)
        ops.append(self_condition)
    ops.append(tp_collectives)
    return ops


def weight_bytes_per_gpu(m: ModelSpec, wbytes, tp, ep, quantize_head=False) -> np.ndarray:
    """Resident weights on each GPU: every op's weights with all experts, plus the embedding
    table (vocabulary-split like the head, bf16 unless quantize_head). Same formulas as the
    traffic of a pass."""
    one = np.ones_like(np.asarray(tp, float))
    p = PassInput(B=one, q=one, c=0 * one, kv_write=0 * one, logits=one, causal=one.astype(bool),
                  wbytes=np.asarray(wbytes, float) * one, kvbytes=one, all_experts=one.astype(bool),
                  tp=np.asarray(tp, float) * one, ep=np.asarray(ep, float) * one,
                  quantize_head=np.asarray(quantize_head, bool) & one.astype(bool))
    gathered = m.d_model * p.head_bytes  # the one embedding row elementwise() counts for this 1-token pass
    embedding = 0 if m.tie_embeddings else m.embedding_weights / p.tp * p.head_bytes  # tied: the head's matrix
    return sum(op.weight_bytes for op in pass_ops(m, p)) - gathered + embedding
