"""What is being generated: scheme, sizes, steps, block, batch, precision.

`Workload` is one validated configuration (what `analyze` takes). The checks that make a
workload impossible live in `check_workload` so that `sweep` can apply the same rules to arrays
and skip (and count) the impossible rows instead of failing.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

SCHEMES = ("ar", "mdm", "prefix-cache", "dual-cache", "block")
Scheme = Literal["ar", "mdm", "prefix-cache", "dual-cache", "block"]
MAX_TOKENS = 10_000_000  # beyond any context a model is trained for; keeps the arithmetic finite


class Workload(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    scheme: Scheme = "mdm"
    prompt: int = Field(default=256, ge=0, le=MAX_TOKENS)  # Lp
    gen: int = Field(default=128, gt=0, le=MAX_TOKENS)  # Lg
    steps: float | None = Field(default=None, gt=0, le=MAX_TOKENS)  # S; None: S = Lg / tpf
    tpf: float | None = Field(default=None, gt=0, le=MAX_TOKENS)  # tokens per forward
    block: int | None = Field(default=None, gt=0, le=MAX_TOKENS)  # b; None: one block of Lg
    batch: int = Field(default=1, gt=0, le=1_000_000)  # B
    precision: str = "bf16"
    kv_dtype: str = "bf16"
    cfg: bool = False  # LLaDA classifier-free guidance: an unconditional copy of every pass
    store_pass: bool = False  # block scheme: +1 forward per block to write its K/V (SDAR, BD3-LM)
    logits: Literal["all", "committed"] = "all"
    expert_load: Literal["expected", "all"] = "expected"
    tp: int = Field(default=1, gt=0, le=1024)  # tensor-parallel GPUs in the group
    ep: int = Field(default=1, gt=0, le=1024)  # expert-parallel ways (divides tp)
    mla_form: Literal["auto", "absorbed", "expanded"] = "auto"

    @model_validator(mode="after")
    def _steps_xor_tpf(self) -> "Workload":
        if self.steps is not None and self.tpf is not None:
            raise ValueError("give --steps or --tpf, not both")
        return self

    # --- derived sizes ---------------------------------------------------------------------
    @property
    def block_len(self) -> int:
        return self.block if self.block is not None else self.gen

    @property
    def n_blocks(self) -> float:
        return self.gen / self.block_len

    @property
    def total_steps(self) -> float:
        """S: given, or Lg / tpf; AR always takes one step per token."""
        if self.scheme == "ar":
            return float(self.gen)
        if self.steps is not None:
            return float(self.steps)
        return self.gen / (self.tpf or 1.0)

    @property
    def effective_batch(self) -> int:
        """CFG runs a second, unconditional copy of every pass: it doubles the batch."""
        return self.batch * (2 if self.cfg else 1)


def check_workload(scheme, gen, block, steps) -> np.ndarray | str | None:
    """Why a workload is impossible: a message (scalars) or a boolean 'ok' mask (arrays).

    Blocks matter to every diffusion scheme (even `mdm`, where they limit which positions
    commit): the block must divide the generation and there must be at least one step per block.
    """
    gen, block, steps = np.asarray(gen, float), np.asarray(block, float), np.asarray(steps, float)
    uses_blocks = np.asarray(scheme) != "ar"
    divides = np.mod(gen, block) == 0
    enough_steps = steps >= gen / block - 1e-9
    not_longer = block <= gen
    ok = ~uses_blocks | (divides & enough_steps & not_longer)
    if ok.ndim:
        return ok
    if ok:
        return None
    if not not_longer:
        return f"block length {block:g} is longer than the generation ({gen:g} tokens)"
    if not divides:
        return f"block length {block:g} does not divide the generation length {gen:g}"
    return f"{steps:g} steps is fewer than the {gen / block:g} blocks (at least one step per block)"


def check_parallel(m, tp, ep) -> np.ndarray | str | None:
    """Why a TP/EP layout cannot split this model: a message (scalars) or an 'ok' mask (arrays).

    Query heads and FFN columns must split evenly over tp; K/V heads must split evenly or be
    replicated a whole number of times; ep must divide tp and the number of experts."""
    tp, ep = np.asarray(tp, float), np.asarray(ep, float)
    n_experts = m.moe.n_experts if m.moe else 1
    checks = [
        (np.mod(m.n_heads, tp) == 0, f"{m.n_heads} attention heads do not split over tp={{tp:g}} GPUs"),
        ((m.mla is not None) | (np.mod(m.n_kv_heads, tp) == 0) | (np.mod(tp, m.n_kv_heads) == 0),
         f"{m.n_kv_heads} K/V heads neither split over nor replicate evenly on tp={{tp:g}} GPUs"),
        ((m.n_dense_layers == 0) | (np.mod(m.ffn_dim, tp) == 0), f"FFN width {m.ffn_dim} does not split over tp={{tp:g}} GPUs"),
        ((ep == 1) | ((m.moe is not None) & (np.mod(tp, ep) == 0)),
         "expert parallelism needs an MoE model and ep dividing tp (ep={ep:g}, tp={tp:g})"),
        (np.mod(n_experts, ep) == 0, f"{n_experts} experts do not spread evenly over ep={{ep:g}} GPUs"),
    ]
    ok = np.logical_and.reduce([np.asarray(c) for c, _ in checks])
    if ok.ndim:
        return ok
    for c, msg in checks:
        if not c:
            return msg.format(tp=float(tp), ep=float(ep))
    return None
