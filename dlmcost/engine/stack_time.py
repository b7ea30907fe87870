"""The software stack's part of the time of a forward pass: pure, vectorised functions (numpy arrays
in, arrays out). The engine (engine.pass_cost) applies them op by op; docs/stacks.md, "The time of
a pass", states the whole rule:

    GPU time of op i = max(FLOPs_i / (peak_kind * eff_hw_kind * compute_factor(kind_i, M_i / g) * d_i),
                           bytes_i * traffic_factor(kind_i) / (bandwidth * eff_mem))
                       + kernels_i * overhead + link time (collectives)
        M_i = batch x q rows of the pass; for an MoE model's routed experts (expert_rows
              "routed") the rows each expert receives, B q k / d (d: experts touched)
        g   = the GPU's rows scale on the stack's GEMM curve (hardware file, gemm_rows_scale):
              the curve is read at M_i / g
        d_i = depth_factor of a GEMM op: its matrices' depths K against the depth the curve
              was measured at; of the attention op, 1 / keys_term: k / (k + k0) for k keys
              per query (the op's FLOPs over its FLOPs per key), k0 the stack's
              attention_keys_overhead; the routed experts' with the stack's fused MoE kernel's
              depth overhead, and times its fp8_rate where the GEMMs run at fp8 (1 for other ops)
    + sampler_time on the LM head (the sampler streams its logits)
    pass time = GPU time + host_wait(GPU, host) + step_overhead(batch)
        host = host_time: n_layers x us_per_layer + MoE layers x us_per_moe_layer
               + MLA layers x us_per_mla_layer + the MoE layers' experts x us_per_expert
        (the tensor-parallel collectives' op adds collectives x us_per_collective: collective_dispatch)
        host_wait = max(host - GPU, 0) if launches overlap the GPU, else all the host time
        step_overhead = fixed_us_per_forward + us_per_sequence x batch
                        + us_per_sequence_squared x batch^2 (never overlapped)
        (the GPU time includes n_layers x (slow_kernels' us_per_layer + the pass's B x q tokens x
         its us_per_token_layer) on the parts and precisions they name, slow_kernel_time: the
         release's kernels beyond the hardware file's tuned ones; the engine shows it on the
         per_forward row)
        (so a pass takes max(GPU, host) + step, or GPU + host + step)

Hardware efficiencies (the hardware file) and stack factors multiply: the hardware file says what
the best kernels reach on large shapes, the stack what fraction of that its kernels reach here.
"""

from __future__ import annotations

import numpy as np

from .cost import expected_experts
from ..inputs.stacks import Stack


def gemm_factor(rows, stack: Stack, rows_scale=1.0) -> np.ndarray:
    """The stack's GEMM efficiency at M rows on a GPU that needs `rows_scale` times the rows of the
    curve's reference GPUs to reach the same efficiency (the hardware file's gemm_rows_scale): the
    curve read at M / rows_scale, linear in log M between the table's points, flat beyond its ends."""
    curve = stack.gemm_efficiency
    m = np.log(np.maximum(np.asarray(rows, float) / np.asarray(rows_scale, float), 1.0))
    return np.interp(m, np.log(np.asarray(curve.rows, float)), np.asarray(curve.efficiency, float))


def compute_factor(kind: str, rows, stack: Stack, rows_scale=1.0) -> np.ndarray:
    """Multiplier on the hardware's compute efficiency for an op of this kind at M rows."""
    if kind in ("linear", "lm_head"):
        return gemm_factor(rows, stack, rows_scale)
    shape = np.broadcast_shapes(np.shape(rows), np.shape(rows_scale))
    if kind == "attention":
        return np.full(shape, stack.attention_efficiency)
    return np.ones(shape)


def expert_factor(rows, stack: Stack, rows_scale=1.0, fp8_gemms=0.0) -> np.ndarray:
    """Multiplier on the hardware's compute efficiency for the routed experts: the GEMM curve at
    the rows each expert receives, times the fused MoE kernel's fp8_rate where the GEMMs run at the
    fp8 peak (`fp8_gemms` 1)."""
    factor = gemm_factor(rows, stack, rows_scale)
    if stack.fused_moe is None:
        return factor
    return factor * np.where(np.asarray(fp8_gemms) > 0, stack.fused_moe.fp8_rate, 1.0)


def op_factor(name: str, kind: str, tokens, m, stack: Stack, rows_scale=1.0, fp8_gemms=0.0) -> np.ndarray:
    """The compute factor of op `name` in a pass of `tokens` tokens: the routed experts' own
    (expert_factor, at op_rows), every other op's by its kind (compute_factor)."""
    rows = op_rows(name, tokens, m, stack)
    if name == "experts" and m.moe is not None:
        return expert_factor(rows, stack, rows_scale, fp8_gemms)
    return compute_factor(kind, rows, stack, rows_scale)


def depth_efficiency(depth, k0) -> np.ndarray:
    """q(K) = K / (K + K0): the share of a GEMM's time its loop over the depth K takes when each
    output tile's write-back, K0 FLOPs' worth per output element, is not hidden behind it."""
    depth = np.asarray(depth, float)
    return depth / (depth + k0)


def depth_k0(stack: Stack, achievable_flops, achievable_bandwidth, overhead: float | None = None) -> np.ndarray:
    """K0 = depth_overhead x the GPU's achievable GEMM rate / its achievable bandwidth (FLOP per
    byte): writing an output element back costs its bytes at the bandwidth, a step of the loop
    over K its FLOPs at the GEMM rate, so the exposed share scales with the GPU's ridge.
    `overhead`: another kernel's depth_overhead than the curve's (the fused MoE kernel's)."""
    overhead = stack.gemm_efficiency.depth_overhead if overhead is None else overhead
    return overhead * np.asarray(achievable_flops, float) / achievable_bandwidth


def op_depth_overhead(name: str, stack: Stack) -> float:
    """The depth overhead an op's GEMMs run with: the fused MoE kernel's for the routed experts
    where the stack states one, else the GEMM curve's."""
    if name == "experts" and stack.fused_moe is not None:
        return stack.fused_moe.depth_overhead
    return stack.gemm_efficiency.depth_overhead


def depth_factor(matrices, stack: Stack, k0) -> np.ndarray | float:
    """Multiplier on the stack's GEMM curve for an op whose matrices (weights w, depth K) are not
    as deep as the GEMMs the curve was measured on (reference_depth): each runs at
    q(K) / q(K_ref) of the curve, and the op's FLOPs split between them as their weights, so
        factor = sum w / sum(w q(K_ref) / q(K))
    1 where the stack states no depth term (no reference depth; K0 = 0 gives 1 as well)."""
    curve = stack.gemm_efficiency
    if curve.reference_depth is None:
        return 1.0
    reference = depth_efficiency(curve.reference_depth, k0)
    weights = sum(np.asarray(w, float) for w, _ in matrices)
    time = sum(np.asarray(w, float) * reference / depth_efficiency(depth, k0) for w, depth in matrices)
    return weights / time


def keys_term(flops, flops_per_key, stack: Stack) -> np.ndarray:
    """Multiplier on the attention op's compute time: 1 + k0 / k = (k + k0) / k, k the keys each
    query reads on average (FLOPs / FLOPs per key), k0 the stack's attention_keys_overhead. A
    flash-attention kernel pays a fixed cost per query row (loading its queries, rescaling and
    writing its output, the masked tiles on a causal diagonal), k0 keys' worth of its loop, so its
    efficiency is k / (k + k0) of its long-context rate. The extra time is k0 x FLOPs per key,
    affine in a pass family's index wherever the FLOPs are."""
    flops = np.asarray(flops, float)
    extra = stack.attention_keys_overhead * np.asarray(flops_per_key, float)
    return 1.0 + np.divide(extra, flops, out=np.zeros(np.broadcast(extra, flops).shape), where=flops > 0)


def expert_rows(tokens, n_experts: int, k: int) -> np.ndarray:
    """Rows one routed expert's GEMM receives in a pass of `tokens` tokens: the T k token copies
    spread over the d(T) experts they touch (cost.expected_experts), T k / d. About T k / E once
    every expert is touched; one row each for a handful of tokens (d = T k then)."""
    tokens = np.asarray(tokens, float)
    d = expected_experts(n_experts, k, tokens)
    return np.divide(tokens * k, d, out=np.ones_like(tokens * 1.0), where=d > 0)


def op_rows(name: str, tokens, m, stack: Stack) -> np.ndarray:
    """The GEMM rows an op of a pass of `tokens` (B x q) tokens reads its curve at: the pass's
    tokens, or for the routed experts of an MoE model (expert_rows "routed") each expert's share."""
    if name == "experts" and m.moe is not None and stack.expert_rows == "routed":
        return expert_rows(tokens, m.moe.n_experts, m.moe.experts_per_token)
    return np.asarray(tokens, float)


def traffic_factor(kind: str, stack: Stack) -> float:
    """Multiplier on an op's memory traffic: elementwise work at the stack's precision and fusion."""
    return stack.elementwise_bytes_factor if kind == "other" else 1.0


def sampler_time(logit_count, bandwidth, eff_mem, stack: Stack) -> np.ndarray:
    """Seconds the sampler spends on one pass's logits (B x positions x vocabulary elements): its
    kernels stream `sampler_traffic_bytes` per logit (its casts, softmax, confidence and copies;
    without one, `sampler_logits_bytes`: one pass over what it holds)."""
    traffic = stack.sampler_traffic_bytes if stack.sampler_traffic_bytes is not None else stack.sampler_logits_bytes
    return np.asarray(logit_count, float) * traffic / (np.asarray(bandwidth, float) * eff_mem)


def host_time(n_layers, stack: Stack, expert_loops=0.0, moe_layers=0.0, mla_layers=0.0) -> np.ndarray:
    """CPU seconds to dispatch one forward of n_layers decoder layers, plus us_per_moe_layer for
    each of the `moe_layers` among them (an MoE block launches more kernels than a dense MLP where
    no graph replays them) and us_per_mla_layer for each of the `mla_layers` (latent attention
    launches more than grouped-query attention), plus us_per_expert for each of `expert_loops`
    passes of a Python loop over an MoE layer's experts (MoE layers x experts: reference MoE blocks
    visit every expert, launching its GEMMs one by one)."""
    host = stack.host
    return (np.asarray(n_layers, float) * host.us_per_layer + moe_layers * host.us_per_moe_layer
            + mla_layers * host.us_per_mla_layer + expert_loops * host.us_per_expert) * 1e-6


def collective_dispatch(collectives, stack: Stack) -> np.ndarray:
    """Seconds a pass's tensor-parallel collectives wait for their launch from Python: each
    collective's us_per_collective (0 where a graph replays them), added to their link time."""
    return np.asarray(collectives, float) * stack.host.us_per_collective * 1e-6


def dispatch_time(m, stack: Stack) -> np.ndarray:
    """host_time of one forward of model `m`: its layers, its MoE layers, its MLA layers and its
    expert loops."""
    return host_time(m.n_layers, stack, expert_loops(m), m.n_moe_layers if m.moe else 0, m.n_mla_layers)


def expert_loops(m) -> float:
    """Experts a reference MoE block's loop visits in one forward: every expert of every MoE layer."""
    return float(m.n_moe_layers * m.moe.n_experts) if m.moe else 0.0


def host_wait(gpu_s, host_s, stack: Stack) -> np.ndarray:
    """Seconds a pass adds to its GPU time for the host: the GPU idles while dispatch runs ahead of
    it (overlapped launches) or the whole host time (serial)."""
    gpu_s, host_s = np.broadcast_arrays(np.asarray(gpu_s, float), np.asarray(host_s, float))
    return np.maximum(host_s - gpu_s, 0.0) if stack.host.overlaps_gpu else host_s.copy()


def slow_kernel_time(n_layers, slow_layer_s, tokens=0.0, slow_token_layer_s=0.0) -> np.ndarray:
    """Seconds the stack's slow kernels add to a pass of n_layers decoder layers that runs `tokens`
    tokens (batch x query tokens) on a part where its release ran them (`Rates.slow_layer_s` and
    `slow_token_layer_s`, from the stack's `slow_kernels`: 0 elsewhere): the GPU's time beyond the
    hardware file's tuned kernel times, L x (t_slow + tokens x t_slow_token)."""
    per_layer = np.asarray(slow_layer_s, float) + np.asarray(tokens, float) * np.asarray(slow_token_layer_s, float)
    return np.asarray(n_layers, float) * per_layer


def step_overhead(batch, stack: Stack) -> np.ndarray:
    """Seconds of host work per forward that nothing hides (the step loop's synchronisation, the
    scheduler, the sampler's host side): fixed_us_per_forward plus us_per_sequence for each of
    the `batch` sequences the step runs, plus us_per_sequence_squared x batch^2 where a runtime's
    per-request work grows with the batch too. A serving simulation that times steps itself takes
    a step's exposed host time from here; the engine's `per_forward` entry is this."""
    b = np.asarray(batch, float)
    host = stack.host
    return (host.fixed_us_per_forward + host.us_per_sequence * b + host.us_per_sequence_squared * b * b) * 1e-6


def fixed_time(stack: Stack) -> float:
    """The part of step_overhead that does not grow with the batch."""
    return stack.host.fixed_us_per_forward * 1e-6
