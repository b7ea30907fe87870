"""`dlmcost measure`: time the forward passes a schedule runs, on this machine, with a random-weight
model built from the ModelSpec (nothing is downloaded).

Each pass family of the workload (from `analyze`: q, c, logit positions, K/V writes) is run as
one forward of the same shape: B sequences of q query tokens attending to c cached keys plus
themselves, with the causal (AR) or bidirectional (diffusion) mask, K/V appended to a
preallocated cache, logits for the family's positions, and a softmax over them (the sampler).
Timing: warm-up runs, then `repeats` timed runs with the device synchronised before and after
each; the median is reported. A family whose shape changes across its passes is timed at its
first and last shape and averaged; the prediction is the family's average pass from `analyze`
under the same stack.

Backends: `numpy` (CPU, float32; always available, so CI runs the whole path) and `torch`
(optional extra `measure`; CUDA in bf16 when available, else CPU in float32). Dense GQA/MHA models
only: MoE routing and MLA are not built (a clear error says so).
"""

from __future__ import annotations

import copy
import statistics
import time

import numpy as np

from ..errors import UsageError
from ..inputs.models import ModelSpec

MAX_ELEMENTS = 2e9  # refuse a model or pass that would not fit in memory on a laptop-class machine


class NumpyBackend:
    name = "numpy"
    device = "cpu"

    POOL = 1 << 20  # weights are tiled from a pool of random numbers: their values do not change the time

    def __init__(self, seed: int = 0):
        self.dtype = np.float32
        self.pool = np.random.default_rng(seed).standard_normal(self.POOL, dtype=np.float32)

    def randn(self, *shape, scale=1.0):
        w = np.resize(self.pool, shape)  # a new array, so scaled in place: one LM head, not two
        w *= np.float32(scale)
        return w

    def zeros(self, *shape):
        return np.zeros(shape, dtype=self.dtype)

    def softmax(self, x, axis=-1):
        x = x - x.max(axis=axis, keepdims=True)
        e = np.exp(x)
        return e / e.sum(axis=axis, keepdims=True)

    def rmsnorm(self, x, w):
        return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w

    def silu(self, x):
        return x / (1.0 + np.exp(-x))

    def transpose_last(self, x):
        return np.swapaxes(x, -1, -2)

    def heads_first(self, x):
        """(B, q, heads, hd) <-> (B, heads, q, hd)."""
        return x.transpose(0, 2, 1, 3)

    def repeat_heads(self, x, n):
        return np.repeat(x, n, axis=1) if n > 1 else x

    def mask(self, q, k, causal):
        if not causal:
            return None
        qi = np.arange(q)[:, None] + (k - q)
        return np.where(np.arange(k)[None, :] <= qi, 0.0, -np.inf).astype(self.dtype)

    def sync(self):
        pass


class TorchBackend(NumpyBackend):
    name = "torch"

    def __init__(self, device: str | None = None, seed: int = 0):
        try:
            import torch
        except ImportError:
            raise UsageError("the torch backend needs PyTorch: pip install 'dlmcost[measure]'") from None
        self.torch = torch
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise UsageError("--device cuda: no CUDA device is visible to PyTorch")
        self.dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        self.gen = torch.Generator(device=self.device).manual_seed(seed)

    def randn(self, *shape, scale=1.0):
        t = self.torch
        return t.randn(shape, generator=self.gen, device=self.device, dtype=t.float32).mul_(scale).to(self.dtype)

    def zeros(self, *shape):
        return self.torch.zeros(shape, device=self.device, dtype=self.dtype)

    def softmax(self, x, axis=-1):
        return self.torch.softmax(x.float(), dim=axis).to(x.dtype)

    def rmsnorm(self, x, w):
        return x * self.torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + 1e-6) * w

    def silu(self, x):
        return self.torch.nn.functional.silu(x)

    def transpose_last(self, x):
        return x.transpose(-1, -2)

    def heads_first(self, x):
        return x.permute(0, 2, 1, 3)

    def repeat_heads(self, x, n):
        return x.repeat_interleave(n, dim=1) if n > 1 else x

    def mask(self, q, k, causal):
        if not causal:
            return None
        t = self.torch
        qi = t.arange(q, device=self.device)[:, None] + (k - q)
        m = t.where(t.arange(k, device=self.device)[None, :] <= qi, 0.0, float("-inf"))
        return m.to(self.dtype)

    def sync(self):
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize()


def get_backend(name: str, device: str | None = None):
    if name == "numpy":
        if device not in (None, "cpu"):
            raise UsageError("the numpy backend runs on the CPU only (--device cpu)")
        return NumpyBackend()
    if name == "torch":
        return TorchBackend(device)
    raise UsageError(f"unknown backend '{name}': use numpy or torch")


class RandomModel:
    """A decoder with random weights and the ModelSpec's shapes (dense layers)."""

    def __init__(self, spec: ModelSpec, be, layers: int | None = None):
        if spec.moe or spec.mla:
            raise UsageError(f"measure builds dense GQA/MHA decoders; {spec.id} uses "
                             f"{'MoE' if spec.moe else 'MLA'}, which is not built")
        self.spec, self.be = spec, be
        self.n_layers = spec.n_layers if layers is None else layers
        d, hd = spec.d_model, spec.head_dim
        nq, nkv, f = spec.n_heads, spec.n_kv_heads, spec.ffn_dim
        per_layer = d * (nq + 2 * nkv) * hd + nq * hd * d + (3 if spec.gated_mlp else 2) * d * f
        if per_layer * self.n_layers + spec.vocab_size * d > MAX_ELEMENTS:
            raise UsageError(f"{spec.id} has too many weights to build here; time fewer layers with --layers")
        s = d ** -0.5
        self.layers = [dict(
            n1=be.randn(d, scale=0.0) + 1, n2=be.randn(d, scale=0.0) + 1,
            wqkv=be.randn(d, (nq + 2 * nkv) * hd, scale=s), wo=be.randn(nq * hd, d, scale=(nq * hd) ** -0.5),
            wup=be.randn(d, (2 if spec.gated_mlp else 1) * f, scale=s), wdown=be.randn(f, d, scale=f ** -0.5),
        ) for _ in range(self.n_layers)]
        self.norm = be.randn(d, scale=0.0) + 1
        self.head = be.randn(d, spec.vocab_size, scale=s)

    def without_layers(self) -> "RandomModel":
        """The same model with no layers, sharing its final norm and LM head (no second copy)."""
        bare = copy.copy(self)
        bare.layers, bare.n_layers = [], 0
        return bare

    def caches(self, B: int, c: int, q: int):
        sp, be = self.spec, self.be
        if B * (c + q) * sp.n_kv_heads * sp.head_dim * 2 * self.n_layers > MAX_ELEMENTS:
            raise UsageError("the K/V cache of this pass is too large to build here")
        return [(be.randn(B, sp.n_kv_heads, c + q, sp.head_dim), be.randn(B, sp.n_kv_heads, c + q, sp.head_dim))
                for _ in range(self.n_layers)]

    def forward(self, x, caches, c: int, causal: bool, logits: int, kv_write: int):
        """One pass: x (B, q, d); K/V of the q tokens written at [c, c+q) (kept if kv_write > 0)."""
        sp, be = self.spec, self.be
        B, q, d = x.shape
        nq, nkv, hd = sp.n_heads, sp.n_kv_heads, sp.head_dim
        mask = be.mask(q, c + q, causal)
        for layer, (K, V) in zip(self.layers, caches):
            h = be.rmsnorm(x, layer["n1"])
            qkv = h @ layer["wqkv"]
            Q = be.heads_first(qkv[..., : nq * hd].reshape(B, q, nq, hd))
            K[:, :, c:c + q] = be.heads_first(qkv[..., nq * hd:(nq + nkv) * hd].reshape(B, q, nkv, hd))
            V[:, :, c:c + q] = be.heads_first(qkv[..., (nq + nkv) * hd:].reshape(B, q, nkv, hd))
            Kh, Vh = be.repeat_heads(K, nq // nkv), be.repeat_heads(V, nq // nkv)
            scores = (Q @ be.transpose_last(Kh)) * hd ** -0.5
            if mask is not None:
                scores = scores + mask
            att = be.softmax(scores) @ Vh
            att = be.heads_first(att).reshape(B, q, nq * hd)
            x = x + att @ layer["wo"]
            h = be.rmsnorm(x, layer["n2"]) @ layer["wup"]
            if sp.gated_mlp:
                f = sp.ffn_dim
                h = be.silu(h[..., :f]) * h[..., f:]
            else:
                h = be.silu(h)
            x = x + h @ layer["wdown"]
        if logits <= 0:
            return None
        out = be.rmsnorm(x[:, q - logits:], self.norm) @ self.head
        return be.softmax(out)  # the sampler's confidence


def time_pass(model: RandomModel, B: int, q: int, c: int, causal: bool, logits: int, kv_write: int,
              warmup: int, repeats: int) -> float:
    """Median seconds of one pass shape (synchronised timers)."""
    be = model.be
    caches = model.caches(B, c, q)
    x = be.randn(B, q, model.spec.d_model)
    for _ in range(warmup):
        model.forward(x, caches, c, causal, logits, kv_write)
    be.sync()
    times = []
    for _ in range(repeats):
        be.sync()
        t0 = time.perf_counter()
        model.forward(x, caches, c, causal, logits, kv_write)
        be.sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def pass_shape(spec: ModelSpec, w, entry, q: float, c: float) -> dict:
    """The shape of one pass of a reported family: K/V tokens written and logit positions are
    recovered from the family's per-pass bytes and LM-head FLOPs."""
    from ..engine.cost import kv_elements_per_token_per_gpu
    from ..inputs.precision import kv_bytes

    B, tp = float(w["effective_batch"]), float(w["tp"])
    per_token = float(np.asarray(kv_elements_per_token_per_gpu(spec, tp))) * kv_bytes(w["kv_dtype"])
    kv_write = entry["kv_write_bytes"] / (B * per_token) if per_token else 0.0
    logits = entry["flops_lm_head"] / (2 * B * spec.d_model * spec.vocab_size / tp)
    causal = w["scheme"] == "ar" or entry["name"] in ("prefill", "verify")  # the causal families
    return dict(B=int(B), q=max(int(round(q)), 1), c=int(round(c)), logits=int(round(logits)),
                kv_write=int(round(kv_write)), causal=causal)


def measure_workload(spec: ModelSpec, gpu: str, workload: dict, stack, backend, *, warmup: int = 1,
                     repeats: int = 3, layers: int | None = None, hardware: list[str] | None = None) -> dict:
    """Measured seconds per pass family of one workload, and the predicted (the family's average
    pass under `stack`)."""
    from ..analysis.analyze import analyze

    if warmup < 0 or repeats < 1:
        raise UsageError("--warmup must be >= 0 and --repeats >= 1")
    if layers is not None and not 1 <= layers <= spec.n_layers:
        raise UsageError(f"--layers must be between 1 and {spec.n_layers}")
    a = analyze(spec, gpus=gpu, hardware=hardware, stack=stack, **workload)
    r = next((x for x in a["results"] if x.get("supported")), None)
    if r is None:
        raise UsageError(f"{gpu} cannot run this workload")
    w = a["workload"]
    full = RandomModel(spec, backend, layers)
    head_only = full.without_layers() if full.n_layers < spec.n_layers else None
    families, total_meas, total_pred, count = [], 0.0, 0.0, 0.0
    for entry in r["passes"]:
        meas = []
        for q, c in ((entry["q"], entry["c"]), (entry["q_last"], entry["c_last"])):
            s = pass_shape(spec, w, entry, q, c)
            args = (s["B"], s["q"], s["c"], s["causal"], s["logits"], s["kv_write"], warmup, repeats)
            t = time_pass(full, *args)
            if head_only is not None:  # scale the layers actually built up to the model's depth
                t0 = time_pass(head_only, *args)
                t = t0 + (t - t0) * spec.n_layers / full.n_layers
            meas.append(t)
        m, p = sum(meas) / 2, entry["time_s"]
        families.append(dict(name=entry["name"], q=entry["q"], c=entry["c"], count=entry["count"],
                             measured_ms=1e3 * m, predicted_ms=1e3 * p))
        total_meas += entry["count"] * m
        total_pred += entry["count"] * p
        count += entry["count"]
    return dict(model=spec.id, gpu=r["gpu"], device=backend.device, backend=backend.name, stack=a["stack"],
                workload={k: v for k, v in workload.items() if v is not None}, warmup=warmup, repeats=repeats,
                layers_built=full.n_layers, families=families, nfe=count,
                measured_ms_per_forward=1e3 * total_meas / count, predicted_ms_per_forward=1e3 * total_pred / count)


def as_points(results: list[dict], model_ref: str, gpu: str) -> dict:
    """Measurement results -> a measurements file (for `dlmcost calibrate`)."""
    pts = []
    for i, res in enumerate(results):
        wl = dict(res["workload"])
        pts.append(dict(id=f"measured-{i}-b{wl.get('batch', 1)}", model=model_ref, gpu=gpu, stack=res["stack"],
                        workload=wl, measured=dict(ms_per_forward=res["measured_ms_per_forward"]),
                        source=f"dlmcost measure, {res['backend']} backend on {res['device']}, median of "
                               f"{res['repeats']} runs after {res['warmup']} warm-up",
                        assumes=f"random weights; {res['layers_built']} layer(s) built, time scaled to the model's depth"))
    return dict(points=pts)
