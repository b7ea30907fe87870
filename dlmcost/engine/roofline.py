"""The time model: roofline time of an op on one GPU, and the memory/compute verdict.

Time of one op in one pass (a kernel per layer):

    t = max(FLOPs / (peak_kind * eff_kind), bytes / (bandwidth * eff_mem)) + kernels * overhead

plus, for the collectives of a parallel group, link_bytes / (link * eff_link * share(sent)) + n * latency,
share(sent) the collective-bandwidth curve read at the bytes each GPU sends in one collective
(link_bytes / n; NVIDIA links under the realistic profile, 1 elsewhere).
A pass is the sum over its ops (pessimistic: no overlap between ops, nor of communication). The optimistic bound of a
pass is max(sum FLOPs/peak, sum bytes/bandwidth) at the ideal profile. Arithmetic intensity
AI = FLOPs / bytes; a pass is memory-bound when AI < ridge = peak / bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from .columns import take
from ..inputs.collectives import link_share_curve
from ..inputs.hardware import GPU
from ..inputs.precision import ATTENTION_COMPUTE, ELEMENTWISE_COMPUTE, Precision

if TYPE_CHECKING:  # reading profiles belongs to profiles.py; only its type is named here
    from ..inputs.profiles import Profile


# eq=False on classes of arrays: == on arrays is elementwise, so a generated __eq__ (and
# __hash__) could only raise; identity is the only equality they have.
@dataclass(frozen=True, eq=False)
class Rates:
    """Per-configuration hardware rates (arrays): peak FLOP/s and achievable fraction per op
    kind, bandwidth and its achievable fraction, per-kernel overhead in seconds."""

    peak: dict[str, np.ndarray]
    eff: dict[str, np.ndarray]
    bandwidth: np.ndarray
    eff_mem: np.ndarray
    overhead_s: np.ndarray
    ridge: np.ndarray  # ridge of the precision's GEMM peak, FLOP/byte
    link_bandwidth: np.ndarray  # scale-up bytes/s per direction per GPU
    eff_link: np.ndarray
    collective_latency_s: np.ndarray
    gemm_rows_scale: np.ndarray | float = 1.0  # rows this GPU needs on a stack's GEMM curve (hardware file)
    link_by_size: np.ndarray | float = 0.0  # 1: the link's efficiency falls with the message size (NVIDIA, realistic)
    fp8_gemms: np.ndarray | float = 0.0  # 1: the GEMMs (linear ops) run at the fp8 peak (a stack's fused MoE fp8 rate)
    # the GEMMs' (linear ops') bandwidth fraction and time per kernel at the weights' precision
    # (the hardware file's weight_streaming; None: eff_mem and overhead_s, as every other op)
    eff_mem_linear: np.ndarray | None = None
    overhead_linear_s: np.ndarray | None = None
    # decode's attention (one query a sequence): its bandwidth fraction and time per kernel as
    # measured (the hardware file's decode_attention; None: eff_mem and overhead_s)
    eff_mem_decode_attention: np.ndarray | None = None
    overhead_decode_attention_s: np.ndarray | None = None
    # a fused MoE block's expert GEMMs (the `experts` op), where measured apart from the dense GEMMs
    # (the hardware file's experts_streaming; None: the GEMMs' own, eff_mem_linear and overhead_linear_s)
    eff_mem_experts: np.ndarray | None = None
    overhead_experts_s: np.ndarray | None = None
    # GPU seconds per decoder layer that the stack's slow kernels add to every pass on this GPU at
    # this precision (the stack's `slow_kernels`; set where a grid is built with its stack)
    slow_layer_s: np.ndarray | float = 0.0
    # and GPU seconds per decoder layer for each token a pass runs (batch x query tokens)
    slow_token_layer_s: np.ndarray | float = 0.0

    @cached_property
    def achievable_flops(self) -> dict[str, np.ndarray]:
        """FLOP/s an op of each kind reaches: peak x efficiency (computed once per set of rates)."""
        return {kind: self.peak[kind] * self.eff[kind] for kind in self.peak}

    @cached_property
    def achievable_bandwidth(self) -> np.ndarray:
        return self.bandwidth * self.eff_mem

    @cached_property
    def linear_bandwidth(self) -> np.ndarray:
        """Bytes/s a GEMM streams its weights (and activations) at: `eff_mem_linear` of the peak."""
        return self.achievable_bandwidth if self.eff_mem_linear is None else self.bandwidth * self.eff_mem_linear

    @property
    def linear_overhead_s(self) -> np.ndarray:
        return self.overhead_s if self.overhead_linear_s is None else self.overhead_linear_s

    @cached_property
    def experts_bandwidth(self) -> np.ndarray:
        """Bytes/s a fused MoE block's expert GEMMs stream at: `eff_mem_experts` of the peak."""
        return self.linear_bandwidth if self.eff_mem_experts is None else self.bandwidth * self.eff_mem_experts

    @property
    def experts_overhead_s(self) -> np.ndarray:
        return self.linear_overhead_s if self.overhead_experts_s is None else self.overhead_experts_s

    @cached_property
    def decode_attention_bandwidth(self) -> np.ndarray:
        """Bytes/s decode's attention reads the K/V cache at: `eff_mem_decode_attention` of the peak."""
        eff = self.eff_mem_decode_attention
        return self.achievable_bandwidth if eff is None else self.bandwidth * eff

    @property
    def decode_attention_overhead_s(self) -> np.ndarray:
        return self.overhead_s if self.overhead_decode_attention_s is None else self.overhead_decode_attention_s

    def take(self, idx: np.ndarray) -> "Rates":
        return Rates({k: take(v, idx) for k, v in self.peak.items()}, {k: take(v, idx) for k, v in self.eff.items()},
                     *(take(getattr(self, name), idx) for name in ("bandwidth", "eff_mem", "overhead_s", "ridge",
                                                                  "link_bandwidth", "eff_link", "collective_latency_s")),
                     *(take(v, idx) if np.ndim(v) else v for v in (self.gemm_rows_scale, self.link_by_size,
                                                                   self.fp8_gemms)),
                     *(None if v is None else take(v, idx) for v in (self.eff_mem_linear, self.overhead_linear_s,
                                                                      self.eff_mem_decode_attention,
                                                                      self.overhead_decode_attention_s,
                                                                      self.eff_mem_experts, self.overhead_experts_s)),
                     *(take(v, idx) if np.ndim(v) else v for v in (self.slow_layer_s, self.slow_token_layer_s)))


def gpu_rates(gpu: GPU, precision: Precision, profile: Profile) -> dict[str, float] | None:
    """Scalar rates of one GPU at one precision; None if it lacks the precision's tensor cores."""
    if not gpu.supports(precision.compute):
        return None
    eff = profile.efficiency(gpu)
    ideal = profile.name == "ideal"

    def gemm_eff(key: str) -> float:  # tensor-core work: at the clocks the board sustains
        return 1.0 if ideal else eff.gemm.get(key, eff.gemm.get("bf16", 1.0)) * eff.sustained_compute

    elementwise_peak = gpu.peak_flops.get(ELEMENTWISE_COMPUTE, gpu.peak_flops["bf16"])
    return dict(
        peak_linear=gpu.peak_flops[precision.compute], eff_linear=gemm_eff(precision.compute),
        peak_attention=gpu.peak_flops[ATTENTION_COMPUTE], eff_attention=gemm_eff(ATTENTION_COMPUTE),
        peak_other=elementwise_peak, eff_other=1.0,
        bandwidth=gpu.bandwidth_bytes_per_s, eff_mem=eff.memory_bandwidth,
        overhead_s=eff.overhead_us_per_op * 1e-6,
        eff_mem_linear=eff.streaming(precision.name)[0], overhead_linear_s=eff.streaming(precision.name)[1] * 1e-6,
        eff_mem_decode_attention=eff.decode_attention_rate()[0],
        overhead_decode_attention_s=eff.decode_attention_rate()[1] * 1e-6,
        eff_mem_experts=eff.experts_rate(precision.name)[0], overhead_experts_s=eff.experts_rate(precision.name)[1] * 1e-6,
        ridge=gpu.ridge_flops_per_byte[precision.compute],
        link_bandwidth=gpu.link_bytes_per_s, eff_link=eff.link, collective_latency_s=eff.collective_latency_us * 1e-6,
        gemm_rows_scale=1.0 if ideal else eff.gemm_rows_scale,
        # the measured fall of NCCL's bandwidth with the message size is NVLink's (collectives.py)
        link_by_size=0.0 if ideal or gpu.vendor != "NVIDIA" else 1.0,
        fp8_gemms=1.0 if precision.compute == "fp8" else 0.0,
        # which part and precision these are (not rates): a stack's slow kernels name them, the part
        # by any name `--gpu` takes (the hardware file's name, its key, its aliases)
        gpu=gpu.names, precision=precision.name,
    )


IDENTITY_KEYS = ("gpu", "precision")  # a rates row's names of its part and precision (gpu_rates)


def stack_rates(rows: list[dict[str, float]]) -> Rates:
    col = {k: np.array([r[k] for r in rows], dtype=float) for k in rows[0] if k not in IDENTITY_KEYS}
    # The LM head (and self-conditioning, the same vocabulary-sized GEMM) stays in bf16 as
    # checkpoints keep it (see cost.HEAD_BYTES), so it runs at the bf16 GEMM rates, like attention.
    kinds = {"linear": "linear", "lm_head": "attention", "attention": "attention", "other": "other"}
    return Rates(
        peak={kind: col[f"peak_{src}"] for kind, src in kinds.items()},
        eff={kind: col[f"eff_{src}"] for kind, src in kinds.items()},
        bandwidth=col["bandwidth"], eff_mem=col["eff_mem"], overhead_s=col["overhead_s"], ridge=col["ridge"],
        link_bandwidth=col["link_bandwidth"], eff_link=col["eff_link"],
        collective_latency_s=col["collective_latency_s"],
        gemm_rows_scale=col["gemm_rows_scale"] if "gemm_rows_scale" in col else 1.0,
        link_by_size=col["link_by_size"] if "link_by_size" in col else 0.0,
        fp8_gemms=col["fp8_gemms"] if "fp8_gemms" in col else 0.0,
        eff_mem_linear=col.get("eff_mem_linear"), overhead_linear_s=col.get("overhead_linear_s"),
        eff_mem_decode_attention=col.get("eff_mem_decode_attention"),
        overhead_decode_attention_s=col.get("overhead_decode_attention_s"),
        eff_mem_experts=col.get("eff_mem_experts"), overhead_experts_s=col.get("overhead_experts_s"),
    )


def compute_time(flops, kind: str, rates: Rates):
    if kind == "comm":  # collectives do no arithmetic; their cost is link_time
        return np.zeros_like(rates.bandwidth)
    return flops / rates.achievable_flops[kind]


def link_share(sent_bytes, link_by_size) -> np.ndarray:
    """Share of the link's large-message efficiency a collective reaches when each GPU sends
    `sent_bytes` in it: the measured curve (inputs/collective_bandwidth.json), linear in log bytes
    between its points and flat beyond them; 1 where the rates do not scale the link by size."""
    sizes, shares = link_share_curve()
    sent = np.log(np.maximum(np.asarray(sent_bytes, float), 1.0))
    share = np.interp(sent, np.log(np.asarray(sizes)), np.asarray(shares))
    return np.where(np.asarray(link_by_size) > 0, share, 1.0)


def link_time(link_bytes, collectives, rates: Rates):
    """Collectives over the scale-up link: bytes each GPU sends over the achievable per-direction
    bandwidth at their message size (link_share of each collective's bytes), plus a fixed latency
    per collective."""
    link_bytes, collectives = np.asarray(link_bytes, float), np.asarray(collectives, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_collective = np.where(collectives > 0, link_bytes / np.maximum(collectives, 1e-30), link_bytes)
        share = link_share(per_collective, rates.link_by_size)
        t = np.where(link_bytes > 0, link_bytes / (rates.link_bandwidth * rates.eff_link * share), 0.0)
    return t + collectives * rates.collective_latency_s


def memory_time(nbytes, rates: Rates, kind: str = "other", decode=False, experts: bool = False):
    """Bytes over the achievable bandwidth: a GEMM's (`kind` "linear") at its weights' streaming rate
    (a fused MoE block's expert GEMMs, `experts`, at theirs), decode's attention (`decode`: one query a
    sequence, per configuration) at its measured rate."""
    if kind == "linear" and experts:
        return nbytes / rates.experts_bandwidth
    if kind == "linear":
        return nbytes / rates.linear_bandwidth
    if kind == "attention" and np.any(decode):
        return nbytes / np.where(decode, rates.decode_attention_bandwidth, rates.achievable_bandwidth)
    return nbytes / rates.achievable_bandwidth


def kernel_overhead_s(kernels, rates: Rates, kind: str, decode=False, experts: bool = False) -> np.ndarray:
    """Launch-to-finish time of an op's kernels beyond their bytes: a GEMM's at its weights'
    precision (a fused MoE block's expert GEMMs, `experts`, at theirs), decode's attention's as
    measured, every other op's the generic per-kernel time."""
    if kind == "linear" and experts:
        return kernels * rates.experts_overhead_s
    if kind == "linear":
        return kernels * rates.linear_overhead_s
    if kind == "attention" and np.any(decode):
        return kernels * np.where(decode, rates.decode_attention_overhead_s, rates.overhead_s)
    return kernels * rates.overhead_s


def verdict(ai, ridge) -> np.ndarray:
    return np.where(np.asarray(ai) < ridge, "memory-bound", "compute-bound")
