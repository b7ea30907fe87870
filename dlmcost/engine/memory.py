"""Does it fit: weights, K/V cache, peak activations and the logits buffer, per GPU.

All per GPU of a tp-way group (cost.py's split: heads, FFN columns, experts, vocabulary):

    weights      = resident weights per GPU (cost.weight_bytes_per_gpu; every expert resident)
    kv_cache     = B * sum over layers of kept tokens * K/V bytes per token per GPU
                   (kept = the scheme's resident tokens; a sliding layer with a ring buffer keeps
                   at most its window; cost.kv_cache_elements_per_gpu)
    activations  = B * q_max * 2 * (2*d_model + widest intermediate / tp)
    logits       = B * logits_max * vocab * logit bytes   (the stack's sampler_logits_bytes; without
                   a stack 2 + 4: bf16 logits + fp32 probabilities; the whole vocabulary on each
                   GPU: tensor parallelism all-gathers the split logits for the sampler)
    usable       = capacity * F    (F: the memory fraction, a serving engine's share of the GPU)
    max_batch    = floor((usable - weights) / per-sequence bytes)

With a prefill token budget (a serving engine's chunked prefill: at most `budget` prompt tokens
in a step across the whole batch) the peak activations are one workspace of budget tokens, not
every sequence's whole prompt at once (`budgeted_max_batch`):

    resident     = per-sequence bytes with the activations of its later passes' q (AR: 1 token)
    budgeted     = floor((usable - weights - budget * activation bytes per token) / resident)

B counts the CFG copy. F defaults to 0.9, vLLM's default --gpu-memory-utilization: the rest covers
the CUDA/ROCm context, allocator fragmentation and workspace. A deployment that sets its engine's
share (vLLM's --gpu-memory-utilization, SGLang's --mem-fraction-static) passes it as `mem_fraction`.
"""

from __future__ import annotations

import numpy as np

from .cost import kv_cache_elements_per_gpu, weight_bytes_per_gpu
from ..errors import UsageError
from ..inputs.models.spec import ModelSpec
from ..inputs.precision import ACTIVATION_BYTES

DEFAULT_MEM_FRACTION = 0.9  # vLLM's default --gpu-memory-utilization
# Bytes per logit the head and the sampler hold at once without a software stack to say
# otherwise: bf16 logits and an fp32 softmax. A stack sets its sampler's own figure (the
# reference LLaDA sampler: 18, bf16 logits plus an fp64 copy and an fp64 softmax).
LOGIT_BYTES = ACTIVATION_BYTES + 4.0


def check_mem_fraction(given, name: str = "--mem-fraction") -> None:
    """A memory fraction as given (an option or scenario field `name`): a number in (0, 1]."""
    if not (isinstance(given, (int, float)) and not isinstance(given, bool) and 0 < given <= 1):
        raise UsageError(f"{name}: a share in (0, 1] of each GPU's memory, got {given!r}")


def widest_intermediate(m: ModelSpec) -> int:
    """The widest tensor a layer writes per token: Q/K/V of the widest attention kind, or an FFN's
    intermediate (a dense + MoE layer runs its branches one after the other)."""
    widths = [(m.n_heads + 2 * k.n_kv_heads) * k.head_dim for _, k in m.attention_groups]
    if m.n_dense_layers:
        widths.append(m.mlp_matrices * m.ffn_dim)
    if m.moe:
        widths.append(m.mlp_matrices * (m.moe.experts_per_token * m.moe.expert_ffn_dim + m.moe.shared_ffn_dim))
    return max(widths)


def activation_bytes_per_token(m: ModelSpec, tp=1.0):
    """Peak activation bytes one token of a pass holds per GPU: its residual stream in and out
    (2 * d_model) and the layer's widest intermediate, split tp ways, in the activation dtype."""
    return (2 * m.d_model + widest_intermediate(m) / np.asarray(tp, float)) * ACTIVATION_BYTES


def budget_terms(m: ModelSpec, memory: dict, q_max, later_q, tp=1.0, copies: int = 1) -> dict:
    """What `budgeted_max_batch` reads, per configuration of a `memory_breakdown` (or
    `grid_memory`) evaluated at peak q `q_max`: `resident_bytes`, a request's bytes with its
    activations at its later passes' q (`later_q`) in place of the peak's (`copies`: sequences a
    request runs, 2 with CFG); `free_bytes`, usable less weights; `prefill_bytes_per_token`."""
    per_token = activation_bytes_per_token(m, tp)
    peak_only = (np.asarray(q_max, float) - np.asarray(later_q, float)) * per_token
    return dict(resident_bytes=(memory["per_sequence_bytes"] - peak_only) * copies,
                free_bytes=memory["usable_bytes"] - memory["weights_bytes"],
                prefill_bytes_per_token=per_token + 0 * memory["usable_bytes"])


def budgeted_max_batch(free_bytes, resident_bytes, prefill_bytes_per_token, budget: int):
    """The most requests that fit beside one prefill workspace of `budget` tokens:
    floor((free - budget * bytes per token) / resident), 0 where the workspace alone does not fit."""
    room = np.asarray(free_bytes, float) - budget * np.asarray(prefill_bytes_per_token, float)
    return np.maximum(np.floor(room / np.asarray(resident_bytes, float)), 0.0)


def memory_breakdown(m: ModelSpec, capacity_bytes, batch, cached_tokens, q_max, logits_max, wbytes, kvbytes,
                     tp=1.0, ep=1.0, kv_single_tensor=False, ring_buffer=True, logit_bytes=LOGIT_BYTES,
                     quantize_head=False, mem_fraction=DEFAULT_MEM_FRACTION) -> dict:
    """Bytes per GPU, `fits`, and the largest effective batch (CFG copy included) that fits in
    `mem_fraction` of each GPU's capacity."""
    batch = np.asarray(batch, float)
    tp = np.asarray(tp, float)
    weights = weight_bytes_per_gpu(m, wbytes, tp, ep, quantize_head)
    kv_per_seq = kv_cache_elements_per_gpu(m, cached_tokens, tp, kv_single_tensor, ring_buffer) * np.asarray(kvbytes, float)
    act_per_seq = np.asarray(q_max, float) * activation_bytes_per_token(m, tp)
    logits_per_seq = np.asarray(logits_max, float) * m.vocab_size * logit_bytes  # gathered: all of V
    per_seq = kv_per_seq + act_per_seq + logits_per_seq
    total = weights + batch * per_seq
    usable = np.asarray(capacity_bytes, float) * mem_fraction
    fits, most = _fit(total, usable, weights, per_seq)
    return dict(
        weights_bytes=weights + 0 * batch,
        kv_cache_bytes=batch * kv_per_seq,
        activation_bytes=batch * act_per_seq,
        logits_bytes=batch * logits_per_seq,
        total_bytes=total,
        capacity_bytes=np.asarray(capacity_bytes, float) + 0 * batch,
        usable_bytes=usable + 0 * batch,
        fits=fits,
        per_sequence_bytes=per_seq + 0 * batch,
        max_effective_batch=most,
    )


def _fit(total, usable, weights, per_seq) -> tuple:
    """Whether the total is within the usable memory (to the byte), and the largest effective
    batch beside the weights (0 where they alone overflow): one rule with or without a drafter."""
    return total <= usable, np.maximum(np.floor((usable - weights) / per_seq), 0.0)


def grid_memory(m: ModelSpec, grid, ev, capacity_bytes, drafter: ModelSpec | None = None,
                mem_fraction: float = DEFAULT_MEM_FRACTION) -> dict:
    """memory_breakdown for every configuration of an engine Grid, with the peak pass shapes and
    resident tokens the Evaluation took from each configuration's scheme. A drafter model's
    weights and K/V cache are resident beside the main model's; `mem_fraction`: the share of each
    GPU's capacity they may use."""
    logit_bytes = grid.stack.sampler_logits_bytes if grid.stack is not None else LOGIT_BYTES
    out = memory_breakdown(m, capacity_bytes, grid.batch, ev.cached_tokens, ev.q_max, ev.logits_max, grid.wbytes,
                           grid.kvbytes, grid.tp, grid.ep, kv_single_tensor=grid.kv_single_tensor,
                           ring_buffer=grid.ring_buffer, logit_bytes=logit_bytes, quantize_head=grid.quantize_head,
                           mem_fraction=mem_fraction)
    if drafter is not None:
        # the same engine holds the drafter: its cache and head follow the verifier's settings
        extra = memory_breakdown(drafter, capacity_bytes, grid.batch, ev.cached_tokens, 0.0, 0.0, grid.wbytes,
                                 grid.kvbytes, grid.tp, 1.0, kv_single_tensor=grid.kv_single_tensor,
                                 ring_buffer=grid.ring_buffer, quantize_head=grid.quantize_head,
                                 mem_fraction=mem_fraction)
        for key in ("weights_bytes", "kv_cache_bytes", "total_bytes", "per_sequence_bytes"):
            out[key] = out[key] + extra[key]
        out["fits"], out["max_effective_batch"] = _fit(out["total_bytes"], out["usable_bytes"], out["weights_bytes"],
                                                       out["per_sequence_bytes"])
    return out
