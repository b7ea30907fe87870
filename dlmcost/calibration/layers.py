"""The parts of a decoder that `dlmcost measure` builds with random weights and the ModelSpec's
real shapes: one layer of a given LayerKind, and the head (embedding, self-conditioning, final
norm, LM head, soft-cap and the sampler). Nothing is downloaded; values do not change the time.

A layer: RMSNorm, the QKV projection (+ bias), q/k norms, rotary embedding, the new tokens' K/V
written into the cache, grouped-query attention over the cached keys in view and the new ones
under the pass's mask (causal or bidirectional; a sliding layer also bands it to its window and
keeps only the W-1 cached keys any query can see, as a ring-buffer cache does), the output
projection, then the FFN: a gated (or plain) MLP, the routed MoE branch, or both added. Gemma's
extra post-norms are run when the model has four norms per layer. MLA is not built.
"""

from __future__ import annotations

from ..errors import UsageError
from ..inputs.models.spec import LayerKind, ModelSpec


def linear(x, w):
    """x (..., d_in) @ w (d_in, d_out) as one GEMM over every token (a batched product of a 3-D
    x would run one GEMM per sequence, reading the weights B times)."""
    return (x.reshape(-1, x.shape[-1]) @ w).reshape(*x.shape[:-1], w.shape[-1])


def kept_keys(kind: LayerKind, c: int) -> int:
    """Cached tokens a layer attends over: all c, or the W-1 before the first query in a sliding
    layer (no query of the pass sees an older one)."""
    return min(c, kind.window - 1) if kind.attention == "sliding" else c


def experts_to_build(spec: ModelSpec, tokens: int) -> int:
    """Routed experts one MoE layer needs for passes of up to `tokens` tokens: a pass can touch at
    most tokens x k distinct experts, so no more than that are built (each one distinct weights)."""
    return min(spec.moe.n_experts, tokens * spec.moe.experts_per_token) if spec.moe else 0


class Layer:
    """One decoder layer of kind `kind` with random weights."""

    def __init__(self, spec: ModelSpec, kind: LayerKind, be, experts: int = 0):
        if kind.attention == "mla":
            raise UsageError(f"measure builds GQA/MHA attention; {spec.id} uses MLA, which is not built")
        self.spec, self.kind, self.be = spec, kind, be
        d, hd, nq, nkv = spec.d_model, kind.head_dim, spec.n_heads, kind.n_kv_heads
        width = (nq + kind.kv_tensors * nkv) * hd
        s = d ** -0.5
        self.norms = [be.ones(d) for _ in range(max(spec.norms_per_layer, 2))]
        self.wqkv = be.randn(d, width, scale=s)
        self.bqkv = be.randn(width, scale=0.02) if spec.qkv_bias else None
        self.qk_norm = (be.ones(hd), be.ones(hd)) if spec.qk_norm else None
        self.wo = be.randn(nq * hd, d, scale=(nq * hd) ** -0.5)
        self.mlp = self._mlp(spec.ffn_dim) if kind.dense_mlp else None
        if kind.moe:
            m = spec.moe
            self.router = be.randn(d, m.n_experts, scale=s)
            self.experts = [self._mlp(m.expert_ffn_dim) for _ in range(experts)]
            self.shared = self._mlp(m.shared_ffn_dim) if m.shared_ffn_dim else None
        rot = be.randn(1, 1, 1, hd, scale=0.0)  # rotary tables: cos and sin per position (values irrelevant)
        self.cos, self.sin = rot + 1, rot

    def _mlp(self, f: int):
        d, be, gated = self.spec.d_model, self.be, self.spec.gated_mlp
        return be.randn(d, (2 if gated else 1) * f, scale=d ** -0.5), be.randn(f, d, scale=f ** -0.5)

    def cache(self, B: int, kept: int, q: int):
        """K and V of `kept` cached tokens plus room for the pass's q (V is K when V = K)."""
        K = self.be.randn(B, self.kind.n_kv_heads, kept + q, self.kind.head_dim)
        return K, (K if self.kind.k_eq_v else self.be.randn(*K.shape))

    def forward(self, x, cache, c: int, causal: bool):
        """x (B, q, d) at absolute positions c..c+q-1; the q tokens' K/V are written into the cache."""
        be, sp, kd = self.be, self.spec, self.kind
        B, q, d = x.shape
        nq, nkv, hd = sp.n_heads, kd.n_kv_heads, kd.head_dim
        G = nq // nkv
        K, V = cache
        kept = K.shape[2] - q
        qkv = linear(be.rmsnorm(x, self.norms[0]), self.wqkv)
        if self.bqkv is not None:
            qkv = qkv + self.bqkv
        Q = be.permute(qkv[..., : nq * hd].reshape(B, q, nq, hd), 0, 2, 1, 3)
        Kn = be.permute(qkv[..., nq * hd:(nq + nkv) * hd].reshape(B, q, nkv, hd), 0, 2, 1, 3)
        if self.qk_norm is not None:
            Q, Kn = be.rmsnorm(Q, self.qk_norm[0]), be.rmsnorm(Kn, self.qk_norm[1])
        Q, Kn = Q * self.cos + Q * self.sin, Kn * self.cos + Kn * self.sin  # rotary: two products per element
        K[:, :, kept:] = Kn
        if V is not K:
            V[:, :, kept:] = be.permute(qkv[..., (nq + nkv) * hd:].reshape(B, q, nkv, hd), 0, 2, 1, 3)
        # grouped-query attention without copying K/V: the G query heads of a K/V head share its keys
        scores = (Q.reshape(B, nkv, G * q, hd) @ be.transpose_last(K)) * hd ** -0.5
        mask = be.mask(q, kept, c, causal, kd.window)
        if mask is not None:
            scores = (scores.reshape(B, nkv, G, q, kept + q) + mask).reshape(B, nkv, G * q, kept + q)
        att = be.softmax(scores) @ V  # (B, nkv, G*q, hd)
        att = linear(be.permute(att.reshape(B, nq, q, hd), 0, 2, 1, 3).reshape(B, q, nq * hd), self.wo)
        if sp.norms_per_layer >= 4:
            att = be.rmsnorm(att, self.norms[2])
        x = x + att
        h = be.rmsnorm(x, self.norms[1])
        y = self._dense(h, *self.mlp) if self.mlp is not None else 0.0
        if kd.moe:
            y = y + self._moe(h.reshape(B * q, d)).reshape(B, q, d)
        if sp.norms_per_layer >= 4:
            y = be.rmsnorm(y, self.norms[3])
        return x + y

    def _dense(self, h, up, down):
        f = down.shape[0]
        u = linear(h, up)
        u = self.be.silu(u[..., :f]) * u[..., f:] if self.spec.gated_mlp else self.be.silu(u)
        return linear(u, down)

    def _moe(self, h):
        """Router, top-k, each touched expert on its tokens, outputs weighted and added. The
        experts the router picks are given built ones in order of first use (token by token, a
        token's experts by id): at most tokens x k are ever touched, and that many are built."""
        be, k = self.be, self.spec.moe.experts_per_token
        weights, chosen = be.topk(linear(h, self.router), k)
        weights, chosen = _host(be.softmax(weights)), _host(chosen)
        out = self._dense(h, *self.shared) if self.shared is not None else h * 0.0
        slots: dict[int, int] = {}
        tokens: dict[int, list[tuple[int, float]]] = {}  # built expert -> (token, gate)
        for t, (row, gates) in enumerate(zip(chosen.tolist(), weights.tolist())):
            for e, g in sorted(zip(row, gates)):
                tokens.setdefault(slots.setdefault(int(e), len(slots)), []).append((t, g))
        if len(slots) > len(self.experts):
            raise RuntimeError(f"{len(slots)} experts touched, {len(self.experts)} built")  # a bug, not input
        for slot, pairs in tokens.items():
            rows = [t for t, _ in pairs]
            gate = be.array([g for _, g in pairs]).reshape(-1, 1)
            out[rows] += self._dense(h[rows], *self.experts[slot]) * gate
        return out


def _host(x):
    """An array on the host (the router's choices steer Python control flow)."""
    return x.float().cpu().numpy() if hasattr(x, "cpu") else x


class Head:
    """What a pass runs once, outside the layers: the embedding lookup, the self-conditioning
    input (softmax of the previous pass's logits times the embedding table, DiffusionGemma), and
    for the pass's logit positions the final norm, the LM head, the soft-cap and the sampler (a
    softmax over the vocabulary, then each position's confidence and token)."""

    def __init__(self, spec: ModelSpec, be, lookup_rows: int | None = None):
        """`lookup_rows`: an untied embedding that only the lookup reads (no self-conditioning) is
        built with this many rows (the most tokens a pass looks up), not the whole vocabulary."""
        self.spec, self.be = spec, be
        d, V = spec.d_model, spec.vocab_size
        self.head = be.randn(V, d, scale=d ** -0.5)
        partial = not spec.tie_embeddings and not spec.self_conditioning and lookup_rows is not None
        self.embedding = self.head if spec.tie_embeddings else be.randn(min(V, lookup_rows) if partial else V, d,
                                                                        scale=d ** -0.5)
        self.norm = be.ones(d)

    def embed(self, tokens, previous_logits=None):
        x = self.embedding[tokens]
        if previous_logits is not None:
            x = x + linear(self.be.softmax(previous_logits * 1), self.embedding)  # (a copy: softmax works in place)
        return x

    def logits(self, x, positions: int):
        out = linear(self.be.rmsnorm(x[:, x.shape[1] - positions:], self.norm), self.be.transpose_last(self.head))
        cap = self.spec.logit_softcap
        if cap:
            out = self.be.tanh(out * (1.0 / cap)) * cap
        return out

    def sample(self, logits):
        return self.be.confidence(self.be.softmax(logits))
