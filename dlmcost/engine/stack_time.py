"""The software stack's part of the time of a forward pass: pure, vectorised functions (numpy arrays
in, arrays out). The engine (engine.pass_cost) applies them op by op; docs/stacks.md, "The time of
a pass", states the whole rule:

    GPU time of op i = max(FLOPs_i / (peak_kind * eff_hw_kind * compute_factor(kind_i, M_i)),
                           bytes_i * traffic_factor(kind_i) / (bandwidth * eff_mem))
                       + kernels_i * overhead + link time (collectives)
        M_i = batch x q rows of the pass
    + sampler_time on the LM head (the sampler streams its logits)
    pass time = GPU time + host_wait(GPU, host) + fixed_us_per_forward
        host_wait = max(host - GPU, 0) if launches overlap the GPU, else all the host time
        (so a pass takes max(GPU, host) + fixed, or GPU + host + fixed)

Hardware efficiencies (the hardware file) and stack factors multiply: the hardware file says what
the best kernels reach on large shapes, the stack what fraction of that its kernels reach here.
"""

from __future__ import annotations

import numpy as np

from ..inputs.stacks import Stack


def gemm_factor(rows, stack: Stack) -> np.ndarray:
    """The stack's GEMM efficiency at M rows: linear in log M between the table's points, flat
    beyond its ends."""
    curve = stack.gemm_efficiency
    m = np.log(np.maximum(np.asarray(rows, float), 1.0))
    return np.interp(m, np.log(np.asarray(curve.rows, float)), np.asarray(curve.efficiency, float))


def compute_factor(kind: str, rows, stack: Stack) -> np.ndarray:
    """Multiplier on the hardware's compute efficiency for an op of this kind at M rows."""
    if kind in ("linear", "lm_head"):
        return gemm_factor(rows, stack)
    if kind == "attention":
        return np.full(np.shape(rows), stack.attention_efficiency)
    return np.ones(np.shape(rows))


def traffic_factor(kind: str, stack: Stack) -> float:
    """Multiplier on an op's memory traffic: elementwise work at the stack's precision and fusion."""
    return stack.elementwise_bytes_factor if kind == "other" else 1.0


def sampler_time(logit_count, bandwidth, eff_mem, stack: Stack) -> np.ndarray:
    """Seconds the sampler spends on one pass's logits (B x positions x vocabulary elements): it
    streams `sampler_logits_bytes` per logit (its casts, softmax and copies)."""
    return np.asarray(logit_count, float) * stack.sampler_logits_bytes / (np.asarray(bandwidth, float) * eff_mem)


def host_time(n_layers, stack: Stack) -> np.ndarray:
    """CPU seconds to dispatch one forward of n_layers decoder layers."""
    return np.asarray(n_layers, float) * stack.host.us_per_layer * 1e-6


def host_wait(gpu_s, host_s, stack: Stack) -> np.ndarray:
    """Seconds a pass adds to its GPU time for the host: the GPU idles while dispatch runs ahead of
    it (overlapped launches) or the whole host time (serial)."""
    gpu_s, host_s = np.broadcast_arrays(np.asarray(gpu_s, float), np.asarray(host_s, float))
    return np.maximum(host_s - gpu_s, 0.0) if stack.host.overlaps_gpu else host_s.copy()


def fixed_time(stack: Stack) -> float:
    return stack.host.fixed_us_per_forward * 1e-6
