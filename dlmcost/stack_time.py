"""The time of a forward pass under a software stack: pure, vectorised arithmetic (numpy arrays in,
arrays out; no model, no files). docs/stacks.md, "The time of a pass", states the rule:

    GPU time of op i = max(FLOPs_i / (peak_kind * eff_hw_kind * f_stack(kind, M_i)),
                           bytes'_i / (bandwidth * eff_mem)) + kernels_i * overhead + link_i
        f_stack = stack GEMM curve at M_i = batch x q rows (linear, lm_head);
                  stack attention efficiency (attention); 1 (elementwise)
        bytes'_i = bytes_i x elementwise_bytes_factor for elementwise ops, else bytes_i
    GPU time of a pass = sum_i GPU time of op i + sampler bytes / (bandwidth * eff_mem)
    host time of a pass = n_layers x us_per_layer
    pass time = max(GPU, host) (launches overlap the GPU) or GPU + host (they do not)
                + fixed_us_per_forward

Hardware efficiencies (the hardware file) and stack factors multiply: the hardware file says what
the best kernels reach on large shapes, the stack says what fraction of that its kernels reach at
this shape. Ops are on the last axis; any leading axes broadcast.
"""

from __future__ import annotations

import numpy as np

from .stacks import Stack

KIND_CODES = {"linear": 0, "attention": 1, "lm_head": 2, "other": 3, "comm": 4}


def kind_codes(kinds) -> np.ndarray:
    """['linear', 'attention', ...] -> integer codes (KIND_CODES)."""
    return np.array([KIND_CODES[k] for k in np.ravel(kinds)], dtype=int).reshape(np.shape(kinds))


def gemm_factor(rows, stack: Stack) -> np.ndarray:
    """The stack's GEMM efficiency at M rows: linear in log M between the table's points, flat
    beyond its ends."""
    curve = stack.gemm_efficiency
    m = np.log(np.maximum(np.asarray(rows, float), 1.0))
    return np.interp(m, np.log(np.asarray(curve.rows, float)), np.asarray(curve.efficiency, float))


def stack_factor(kind, rows, stack: Stack) -> np.ndarray:
    """Multiplier on the hardware's compute efficiency for each op (kind codes, rows)."""
    kind = np.asarray(kind)
    gemm = gemm_factor(rows, stack)
    return np.select([(kind == 0) | (kind == 2), kind == 1], [gemm, stack.attention_efficiency], 1.0)


def op_gpu_time(flops, nbytes, rows, kind, kernels, peak, eff_hw, bandwidth, eff_mem, overhead_s, stack: Stack,
                link_s=0.0) -> np.ndarray:
    """GPU seconds of each op: the roofline with the stack's compute factor and elementwise traffic,
    plus per-kernel overhead and (collectives) link time. Collectives (kind 'comm') have no FLOPs."""
    kind = np.asarray(kind)
    flops = np.asarray(flops, float)
    rate = np.asarray(peak, float) * np.asarray(eff_hw, float) * stack_factor(kind, rows, stack)
    with np.errstate(divide="ignore", invalid="ignore"):
        compute = np.where(flops > 0, flops / rate, 0.0)
    traffic = np.asarray(nbytes, float) * np.where(kind == 3, stack.elementwise_bytes_factor, 1.0)
    memory = traffic / (np.asarray(bandwidth, float) * np.asarray(eff_mem, float))
    return np.maximum(compute, memory) + np.asarray(kernels, float) * overhead_s + link_s


def sampler_time(logit_count, bandwidth, eff_mem, stack: Stack) -> np.ndarray:
    """Seconds the sampler spends on one pass's logits (B x positions x vocabulary elements): it
    streams `sampler_logits_bytes` per logit (its casts, softmax and copies)."""
    return np.asarray(logit_count, float) * stack.sampler_logits_bytes / (np.asarray(bandwidth, float) * eff_mem)


def host_time(n_layers, stack: Stack) -> np.ndarray:
    return np.asarray(n_layers, float) * stack.host.us_per_layer * 1e-6


def pass_time(gpu_s, host_s, stack: Stack) -> np.ndarray:
    """Wall time of one forward from its GPU and host seconds, plus the fixed cost per forward."""
    gpu_s, host_s = np.asarray(gpu_s, float), np.asarray(host_s, float)
    busy = np.maximum(gpu_s, host_s) if stack.host.overlaps_gpu else gpu_s + host_s
    return busy + stack.host.fixed_us_per_forward * 1e-6
