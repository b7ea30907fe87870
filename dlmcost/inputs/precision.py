"""Number formats: bytes per weight, which tensor-core peak a GEMM runs at, K/V cache bytes."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError
from ..safe_text import shown

# Activations between kernels stay 16-bit under every scheme here: quantised GEMMs quantise
# their inputs on the fly inside the kernel, so the traffic between ops is bf16.
ACTIVATION_BYTES = 2.0


@dataclass(frozen=True)
class Precision:
    name: str
    weight_bytes: float  # bytes per weight element streamed from memory
    compute: str  # which dense peak the GEMMs run at (key of GPU.peak_flops)
    description: str


PRECISIONS: dict[str, Precision] = {
    p.name: p
    for p in (
        Precision("bf16", 2.0, "bf16", "weights and GEMMs in bf16"),
        Precision("fp8", 1.0, "fp8", "weights and GEMMs in fp8 (needs fp8 tensor cores)"),
        Precision("fp4", 0.5, "fp4", "weights and GEMMs in fp4 (needs fp4 tensor cores)"),
        Precision("w8a16", 1.0, "bf16", "8-bit weights, bf16 compute (weight-only quantisation)"),
        Precision("w4a16", 0.5, "bf16", "4-bit weights, bf16 compute (weight-only quantisation)"),
    )
}

KV_DTYPE_BYTES: dict[str, float] = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "fp4": 0.5, "int4": 0.5}

# Attention (QK^T, AV) runs in bf16 on every scheme: quantised attention kernels (FP8
# FlashAttention-3 and the like) are not yet the common serving path. Elementwise work runs on
# the vector FP32 units.
ATTENTION_COMPUTE = "bf16"
ELEMENTWISE_COMPUTE = "fp32"


def get_precision(name: str) -> Precision:
    try:
        return PRECISIONS[name.lower()]
    except KeyError:
        raise UsageError(f"unknown precision '{name}'; choose one of: {', '.join(PRECISIONS)}") from None


def kv_bytes(name: str) -> float:
    try:
        return KV_DTYPE_BYTES[name.lower()]
    except KeyError:
        if "," in name:  # a list, where one K/V format is costed (serve and plan compare a list)
            raise UsageError(f"one K/V dtype here, got '{shown(name, 40)}'; choose one of: "
                             f"{', '.join(KV_DTYPE_BYTES)} (serve and plan compare a list)") from None
        raise UsageError(f"unknown K/V dtype '{shown(name, 40)}'; choose one of: {', '.join(KV_DTYPE_BYTES)}") from None
