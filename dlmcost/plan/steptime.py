"""Pass times from the cost engine, through the public API (one vectorised sweep).

This is the only place `plan` talks to the cost engine: everything it needs per (GPU, precision,
TP, prompt, answer, batch) is the mean time of one forward pass of a request's schedule at that
batch (the generation's time / its NFE), the NFE, and the largest batch that fits in memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import api


@dataclass(frozen=True)
class Decoding:
    """What a request runs: scheme, block (None: one block of the whole answer), tokens per forward."""

    scheme: str
    block: int | None
    tpf: float

    @property
    def label(self) -> str:
        """Compact: scheme/block/tokens-per-forward ('block/32/2'); '-' for a block of the whole answer."""
        if self.scheme == "ar":
            return "ar"
        return f"{self.scheme}/{self.block or '-'}/{self.tpf:g}"


@dataclass(frozen=True)
class PassTable:
    """Indexed [gpu, precision, tp, prompt class, answer class] (+ [batch] for pass_s); NaN
    where the engine skipped the combination (unsupported precision, layout that does not split)."""

    gpus: list[str]
    precisions: list[str]
    tps: list[int]
    batches: np.ndarray
    pass_s: np.ndarray
    nfe: np.ndarray
    max_batch: np.ndarray


def pass_table(model, decoding: Decoding, gpus: list[str], precisions: list[str], tps: list[int],
               prompts: list[int], answers: list[int], batches: list[int], *, efficiency: str = "realistic",
               stack: str | None = None, hardware: list[str] | None = None) -> PassTable:
    """One `api.sweep` over every combination; time_s / nfe of each row is the mean pass time."""
    result = api.sweep(model, gpus=gpus, schemes=[decoding.scheme], prompts=prompts, gens=answers,
                       tpf=decoding.tpf if decoding.scheme != "ar" else None,
                       blocks=[decoding.block] if decoding.block else None, batches=batches,
                       precisions=precisions, tps=tps, efficiency=efficiency, stack=stack, hardware=hardware)
    cols = api.sweep_columns(result)
    shape = (len(gpus), len(precisions), len(tps), len(prompts), len(answers))
    pass_s = np.full(shape + (len(batches),), np.nan)
    nfe = np.full(shape, np.nan)
    max_batch = np.full(shape, np.nan)
    if not cols:
        return PassTable(gpus, precisions, tps, np.asarray(batches), pass_s, nfe, max_batch)

    def index(values, keys):
        lookup = {k: i for i, k in enumerate(keys)}
        return np.array([lookup[v] for v in values.tolist()])

    g = index(cols["gpu"], gpus)
    p = index(cols["precision"], precisions)
    t = index(cols["tp"].astype(int), tps)
    lp = index(cols["prompt"].astype(int), prompts)
    lg = index(cols["gen"].astype(int), answers)
    b = index(cols["batch"].astype(int), batches)
    pass_s[g, p, t, lp, lg, b] = cols["time_s"] / cols["nfe"]
    nfe[g, p, t, lp, lg] = cols["nfe"]
    max_batch[g, p, t, lp, lg] = cols["max_batch"]
    return PassTable(gpus, precisions, tps, np.asarray(batches), pass_s, nfe, max_batch)
