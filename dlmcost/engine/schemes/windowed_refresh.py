"""Recompute the block and its neighbourhood, reuse the cache for the rest (dInfer's vicinity
refresh, inclusionAI/dInfer; dKV-Cache, arXiv 2505.15781; dLLM-Cache, arXiv 2506.06295).

Each block starts with a full pass that refreshes the cache (as Fast-dLLM's dual cache); its
other s - 1 steps recompute only the block plus w tokens either side, q = min(b + 2w, Lp + Lg),
over a cache of everything else, with logits for the block; every R-th of those steps (R > 0) is
a full refresh instead. The window is clipped by the canvas only: at the first and last block an
engine reads up to w fewer tokens.
"""

import numpy as np

from .base import Knobs, block_checks, family, scheme, whole_sequence
from .fast_dllm import block_refresh


def _checks(k: Knobs):
    return block_checks(k) + [
        (k.window >= 0, "--window must be >= 0 tokens, got {window:g}"),
        (k.refresh_every >= 0, "--refresh-every must be >= 0 (0: only at each new block), got {refresh_every:g}"),
    ]


@scheme("windowed-refresh", summary="dInfer vicinity refresh / dKV-Cache: a full pass per block (and every R "
        "steps), else the block plus w tokens either side",
        knobs=("steps", "block", "window", "refresh_every"), cached_tokens=whole_sequence, checks=_checks,
        default_block=64, stops="never")
def windowed_refresh(k: Knobs):
    b = k.block
    later = k.steps_per_block - 1  # steps per block after its opening refresh
    extra = np.where(k.refresh_every > 0, np.floor(later / np.maximum(k.refresh_every, 1.0)), 0.0)
    q = np.minimum(b + 2 * k.window, k.canvas)
    refresh = block_refresh(k, kv_write=k.canvas - b, n=1.0, r=k.n_blocks * (1 + extra))
    step = family("step", k, r=k.n_blocks * (later - extra), q=q, c=k.canvas - q, logits=np.minimum(b, q))
    return [refresh, step]
