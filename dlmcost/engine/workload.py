"""What is being generated: scheme, sizes, steps, block, batch, precision and the scheme's knobs.

`Workload` is one validated configuration. `analyze` takes one; `sweep` validates every value of
its lists with the same fields (so the limits cannot drift) and applies the cross-field rules —
each scheme's own checks from the registry, and the parallel layout's — to whole arrays, skipping
(and counting) the impossible rows instead of failing.
"""

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .columns import column
from .schemes import REGISTRY, SCHEMES, Knobs, scheme_name

SchemeName = Literal[SCHEMES]  # type: ignore[valid-type]  # the registry's names (schemes.Scheme is a scheme)
MAX_TOKENS = 10_000_000  # beyond any context a model is trained for; keeps the arithmetic finite
MAX_BATCH = 1_000_000
MAX_GPUS = 1024


class Workload(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    scheme: SchemeName = "mdm"
    prompt: int = Field(default=256, ge=0, le=MAX_TOKENS)  # Lp
    gen: int = Field(default=128, gt=0, le=MAX_TOKENS)  # Lg
    steps: float | None = Field(default=None, gt=0, le=MAX_TOKENS)  # S; None: S = Lg / tpf
    tpf: float | None = Field(default=None, gt=0, le=MAX_TOKENS)  # tokens per forward (draft-verify: accepted)
    block: int | None = Field(default=None, gt=0, le=MAX_TOKENS)  # b; None: one block of Lg
    batch: int = Field(default=1, gt=0, le=MAX_BATCH)  # B
    precision: str = "bf16"
    kv_dtype: str = "bf16"
    cfg: bool = False  # LLaDA classifier-free guidance: an unconditional copy of every pass
    store_pass: bool = False  # block scheme: +1 forward per block to write its K/V (SDAR, BD3-LM)
    logits: Literal["all", "committed"] = "all"
    expert_load: Literal["expected", "all"] = "expected"
    tp: int = Field(default=1, gt=0, le=MAX_GPUS)  # tensor-parallel GPUs in the group
    ep: int = Field(default=1, gt=0, le=MAX_GPUS)  # expert-parallel ways (divides tp)
    mla_form: Literal["auto", "absorbed", "expanded"] = "auto"
    # scheme knobs (see each scheme's module in dlmcost/schemes/)
    active_blocks: float = Field(default=2, ge=1, le=MAX_TOKENS)  # multi-block: blocks in flight A
    cache_delay: float = Field(default=1, ge=0, le=MAX_TOKENS)  # multi-block: passes before a block is cached
    refresh_every: int = Field(default=0, ge=0, le=MAX_TOKENS)  # full refresh every R passes (0: never)
    window: int = Field(default=16, ge=0, le=MAX_TOKENS)  # windowed-refresh: tokens either side
    drafter: str | None = None  # draft-verify: the drafter model (None: self-speculative)
    # how an engine stores things (see docs/methodology.md, "Per-layer kinds")
    kv_single_tensor: bool = False  # layers whose values are their keys cache one tensor, not two
    ring_buffer: bool = True  # sliding-window layers keep at most their window (transformers, vLLM, SGLang)
    quantize_head: bool = False  # the LM head and embedding at the weights' precision (checkpoints keep bf16)
    # expected tokens until end-of-sequence (None: the whole generation); throughput counts these
    answer_tokens: int | None = Field(default=None, gt=0, le=MAX_TOKENS)

    @field_validator("scheme", mode="before")
    @classmethod
    def _scheme_in_any_case(cls, v):
        return scheme_name(v) if isinstance(v, str) else v

    @model_validator(mode="after")
    def _steps_xor_tpf(self) -> "Workload":
        if self.steps is not None and self.tpf is not None:
            raise ValueError("give --steps or --tpf, not both")
        if self.answer_tokens is not None and self.answer_tokens > self.gen:
            raise ValueError(f"--answer-tokens {self.answer_tokens} is longer than the generation ({self.gen})")
        return self

    @property
    def answer(self) -> int:
        """Useful tokens per sequence: up to end-of-sequence."""
        return self.answer_tokens or self.gen

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
        if REGISTRY[self.scheme].autoregressive:
            return float(self.gen)
        if self.steps is not None:
            return float(self.steps)
        return self.gen / (self.tpf or 1.0)

    @property
    def effective_batch(self) -> int:
        """CFG runs a second, unconditional copy of every pass: it doubles the batch."""
        return self.batch * (2 if self.cfg else 1)

    def knobs(self) -> dict:
        """The scheme knobs as engine columns: the generation the scheme actually runs (up to
        the block holding end-of-sequence, for a scheme that stops there) and its steps."""
        run = float(REGISTRY[self.scheme].tokens_run(self.answer, self.gen, self.block_len))
        return dict(prompt=self.prompt, gen=run, steps=self.total_steps * run / self.gen, block=self.block_len,
                    store_pass=self.store_pass, logits_committed=self.logits == "committed",
                    active_blocks=self.active_blocks, cache_delay=self.cache_delay,
                    refresh_every=self.refresh_every, window=self.window, drafter=self.drafter is not None)


def make_knobs(n: int | None = None, **columns) -> Knobs:
    """Knobs from columns broadcast to n configurations (default: the longest column), floats
    and flags as booleans; a scalar stays one value (columns.column)."""
    n = max(np.size(v) for v in columns.values()) if n is None else n
    flags = ("store_pass", "logits_committed", "drafter")
    return Knobs(**{k: column(v, n, bool if k in flags else float) for k, v in columns.items()})


def scheme_ok(scheme: np.ndarray, knobs: Knobs) -> np.ndarray:
    """The registry's checks over arrays of configurations: an 'ok' mask."""
    scheme = np.asarray(scheme)
    ok = np.ones(len(scheme), bool)
    for name in dict.fromkeys(scheme.tolist()):
        rows = np.flatnonzero(scheme == name)
        for passed, _ in REGISTRY[str(name)].checks(knobs.take(rows)):
            ok[rows[~np.asarray(passed, bool)]] = False
    return ok


def scheme_problem(w: Workload) -> str | None:
    """Why one workload cannot run under its scheme: the first failed check's message."""
    knobs = make_knobs(**w.knobs())
    values = {f: float(getattr(knobs, f)[0]) for f in knobs.__dataclass_fields__}
    values.update(n_blocks=w.n_blocks, tpf=w.gen / w.total_steps)
    for passed, message in REGISTRY[w.scheme].checks(knobs):
        if not np.all(passed):
            return message.format(**values)
    return None


def check_parallel(m, tp, ep) -> np.ndarray | str | None:
    """Why a TP/EP layout cannot split this model: a message (scalars) or an 'ok' mask (arrays).

    Query heads and FFN columns must split evenly over tp; K/V heads must split evenly or be
    replicated a whole number of times; ep must divide tp and the number of experts."""
    tp, ep = np.asarray(tp, float), np.asarray(ep, float)
    n_experts = m.moe.n_experts if m.moe else 1
    # every attention kind's K/V heads (a hybrid's sliding and global layers may differ)
    kv_heads = sorted({k.n_kv_heads for _, k in m.attention_groups}) if not m.mla else []
    checks = [
        (np.mod(m.n_heads, tp) == 0, f"{m.n_heads} attention heads do not split over tp={{tp:g}} GPUs"),
        *[((np.mod(h, tp) == 0) | (np.mod(tp, h) == 0),
           f"{h} K/V heads neither split over nor replicate evenly on tp={{tp:g}} GPUs") for h in kv_heads],
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
