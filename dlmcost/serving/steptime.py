"""Pass times from the cost engine, through the public API (one vectorised sweep).

This is the only place `plan` talks to the cost engine: everything it needs per (GPU, precision,
TP, prompt, answer, batch; one K/V cache dtype, one memory fraction) is the time of a request's first pass at that batch (a prompt prefill,
or the pass that opens the first block), the mean time of its other passes ((the generation's
time - the first pass) / (NFE - 1)), the NFE, how many passes see only the prompt, the
largest batch that fits in memory, and what a prefill token budget's memory share reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..analysis.sweep import sweep_first_pass, sweep_passes
from ..analysis import limits
from ..errors import WorkloadError
from ..engine.memory import DEFAULT_MEM_FRACTION, budgeted_max_batch
from ..engine.schemes import get_scheme


@dataclass(frozen=True)
class Decoding:
    """What a request runs: scheme, block (None: one block of the whole answer), tokens per forward,
    and the spread of a request's passes per block (their coefficient of variation: a published mix
    of tasks decodes each at its own rate). `published`: the model's published decoding it comes
    from (analysis.published.Published), if any."""

    scheme: str
    block: int | None
    tpf: float
    spread: float = 0.0
    published: object | None = field(default=None, compare=False)

    @property
    def autoregressive(self) -> bool:
        return get_scheme(self.scheme).autoregressive

    @property
    def label(self) -> str:
        """Compact: scheme/block/tokens-per-forward ('block/32/2'; '-' for a block of the whole
        answer), naming only the knobs the scheme reads ('mdm/1': masked diffusion reads no block)."""
        if self.autoregressive:
            return self.scheme
        tpf = f"{self.tpf:.3g}"  # a published mix's pooled rate has many digits; the JSON keeps them all
        if not get_scheme(self.scheme).uses("block"):
            return f"{self.scheme}/{tpf}"
        return f"{self.scheme}/{self.block or '-'}/{tpf}"


@dataclass(frozen=True)
class PassTable:
    """Indexed [gpu, precision, tp, prompt class, answer class] (+ [batch] for first_s and
    pass_s); NaN where the engine skipped the combination (unsupported precision, layout that does
    not split). first_s: the first pass; pass_s: the mean of the others (the first pass again
    when it is the only one); first_dispatch_s: the part of first_s that is a prefill forward's own
    dispatch, once however many prompts it holds (0 but where the stack's graphs cover decode only)."""

    gpus: list[str]
    precisions: list[str]
    tps: list[int]
    batches: np.ndarray
    first_s: np.ndarray
    pass_s: np.ndarray
    nfe: np.ndarray
    prompt_passes: np.ndarray
    max_batch: np.ndarray
    first_dispatch_s: np.ndarray
    # a prefill token budget's memory share (engine.memory.budget_terms; NaN where skipped)
    resident_bytes: np.ndarray | None = None
    free_bytes: np.ndarray | None = None
    prefill_bytes_per_token: np.ndarray | None = None

    def memory_fits(self, gi: int, pi: int, ti: int, budget: int | None = None) -> np.ndarray:
        """The most requests of each [prompt, answer] class of entry [gi, pi, ti] that fit in
        memory: the engine's one-pass max_batch (every sequence's whole prompt in one pass), or
        with a prefill token budget the more of that and `budgeted_max_batch` (no step holds
        more than the budget's prompt tokens, nor more than every sequence's whole prompt)."""
        fits = self.max_batch[gi, pi, ti]
        if not budget or self.resident_bytes is None:
            return fits
        at = (gi, pi, ti)
        return np.maximum(fits, budgeted_max_batch(self.free_bytes[at], self.resident_bytes[at],
                                                   self.prefill_bytes_per_token[at], budget))


# the sweep's columns a pass table keeps per [gpu, precision, tp, prompt, answer] (none vary with batch)
CLASS_COLUMNS = ("nfe", "prompt_passes", "max_batch", "resident_bytes", "free_bytes", "prefill_bytes_per_token")


def _sweep_options(decoding: Decoding, gpus: list[str], precisions: list[str], tps: list[int], prompts: list[int],
                   answers: list[int], batches: list[int], efficiency: str, stack: str | None,
                   hardware: list[str] | None, ep: int = 1, kv_dtype: str = "bf16",
                   mem_fraction: float = DEFAULT_MEM_FRACTION) -> dict:
    """The sweep a pass table is read from: every combination (one expert-parallel size, one K/V
    cache dtype: the bytes each cached K/V element reads and holds; one memory fraction: the share
    of each GPU's memory the batch that fits may fill)."""
    return dict(gpus=gpus, schemes=[decoding.scheme], prompts=prompts, gens=answers, kv_dtype=kv_dtype,
                mem_fraction=mem_fraction,
                tpf=None if decoding.autoregressive else decoding.tpf,
                blocks=[decoding.block] if decoding.block else None, batches=batches, precisions=precisions, tps=tps,
                efficiency=efficiency, stack=stack, hardware=hardware, **({"eps": [ep]} if ep != 1 else {}))


def table_passes(model, decoding: Decoding, gpus: list[str], precisions: list[str], tps: list[int],
                 prompts: list[int], answers: list[int], batches: list[int], *, efficiency: str = "realistic",
                 stack: str | None = None, hardware: list[str] | None = None, ep: int = 1,
                 kv_dtype: str = "bf16", mem_fraction: float = DEFAULT_MEM_FRACTION) -> int:
    """The passes `pass_table` of the same arguments costs one by one (`sweep_passes`),
    counted without costing any."""
    return sweep_passes(model, **_sweep_options(decoding, gpus, precisions, tps, prompts, answers, batches,
                                                    efficiency, stack, hardware, ep, kv_dtype, mem_fraction))


def pass_table(model, decoding: Decoding, gpus: list[str], precisions: list[str], tps: list[int],
               prompts: list[int], answers: list[int], batches: list[int], *, efficiency: str = "realistic",
               stack: str | None = None, hardware: list[str] | None = None,
               max_passes: int | None = limits.MAX_PASSES_ONE_BY_ONE, ep: int = 1,
               kv_dtype: str = "bf16", mem_fraction: float = DEFAULT_MEM_FRACTION) -> PassTable:
    """One `sweep_first_pass` over every combination (`max_passes`: its limit on passes
    costed one by one; None for a caller that checked its sweeps' total, `table_passes`)."""
    cols = sweep_first_pass(model, max_passes=max_passes,
                            **_sweep_options(decoding, gpus, precisions, tps, prompts, answers, batches,
                                             efficiency, stack, hardware, ep, kv_dtype, mem_fraction))
    shape = (len(gpus), len(precisions), len(tps), len(prompts), len(answers))
    first_s, pass_s = np.full(shape + (len(batches),), np.nan), np.full(shape + (len(batches),), np.nan)
    first_dispatch_s = np.zeros(shape + (len(batches),))
    per_class = {k: np.full(shape, np.nan) for k in CLASS_COLUMNS}
    if not cols:
        return PassTable(gpus, precisions, tps, np.asarray(batches), first_s, pass_s,
                         first_dispatch_s=first_dispatch_s, **per_class)

    def index(values, keys):
        lookup = {k: i for i, k in enumerate(keys)}
        return np.array([lookup[v] for v in values.tolist()])

    g = index(cols["gpu"], gpus)
    p = index(cols["precision"], precisions)
    t = index(cols["tp"].astype(int), tps)
    lp = index(cols["prompt"].astype(int), prompts)
    lg = index(cols["gen"].astype(int), answers)
    b = index(cols["batch"].astype(int), batches)
    n, first = cols["nfe"], cols["first_pass_s"]
    overflow = ~(np.isfinite(first) & np.isfinite(cols["time_s"]))
    if overflow.any():  # (a stack's efficiency of ~5e-324): a simulation of infinite passes never ends
        raise WorkloadError(f"a pass time on {cols['gpu'][np.argmax(overflow)]} came out as inf (an overflow): "
                            "inputs at the edge of their ranges?")
    first_s[g, p, t, lp, lg, b] = first
    first_dispatch_s[g, p, t, lp, lg, b] = cols["first_pass_dispatch_s"]
    pass_s[g, p, t, lp, lg, b] = np.where(n > 1, (cols["time_s"] - first) / np.maximum(n - 1, 1), first)
    for key, values in per_class.items():
        values[g, p, t, lp, lg] = cols[key]
    return PassTable(gpus, precisions, tps, np.asarray(batches), first_s, pass_s,
                     first_dispatch_s=first_dispatch_s, **per_class)


def passes_to_first_output(decoding: Decoding, nfe: float, prompt_passes: float, canvas: int) -> int:
    """Passes (from the first, 1..NFE) until the first streamed output is final.

    A scheme that streams tokens (it stops right after the end-of-sequence token: AR,
    draft-verify) emits its first token with the logits of its prompt prefill; without a prompt,
    after the passes that yield one token. A scheme that streams blocks (SGLang's dLLM serving
    streams one block at a time) finishes its first block after the passes over the prompt alone
    and one block's share of the others: P + (NFE - P) / (canvas / block)."""
    if get_scheme(decoding.scheme).stops == "token":
        first = 1.0 if prompt_passes > 0 else nfe / canvas
    else:
        first = prompt_passes + (nfe - prompt_passes) / (canvas / (decoding.block or canvas))
    return max(1, min(int(math.ceil(first - 1e-9)), int(round(nfe))))
