"""Fast-dLLM's approximate caches (Wu et al. 2025, arXiv 2505.22618; NVlabs/Fast-dLLM): one full
pass refreshes the cache at the start of each block, then the block's remaining steps reuse it.
The reference `generate` runs every block of the canvas, whatever the answer's length."""

import numpy as np

from .base import Knobs, block_checks, family, scheme, whole_sequence


def block_refresh(k: Knobs, kv_write, dkv_write=0.0, n=None, r=1.0):
    """The full pass at the start of each block (it re-writes the cache)."""
    logits = np.where(k.logits_committed, np.minimum(k.block, k.canvas), k.canvas)
    return family("refresh", k, n=k.n_blocks if n is None else n, r=r, q=k.canvas, kv_write=kv_write,
                  dkv_write=dkv_write, logits=logits)


@scheme("prefix-cache", summary="Fast-dLLM prefix cache: a refresh per block, then the block and all after it",
        knobs=("steps", "block"), cached_tokens=whole_sequence, checks=block_checks, stops="never")
def prefix_cache(k: Knobs):
    # block i: the cache holds the prompt and the i finished blocks; the pass covers the rest
    b = k.block
    steps = family("step", k, n=k.n_blocks, r=k.steps_per_block - 1, q=k.gen, dq=-b, c=k.prompt, dc=b,
                   logits=np.where(k.logits_committed, b, k.gen), dlogits=np.where(k.logits_committed, 0.0, -b))
    return [block_refresh(k, kv_write=k.prompt, dkv_write=b), steps]


@scheme("dual-cache", summary="Fast-dLLM dual cache: a refresh per block, then only the block's tokens",
        knobs=("steps", "block"), cached_tokens=whole_sequence, checks=block_checks, stops="never")
def dual_cache(k: Knobs):
    # everything but the current block is cached, before and after it
    b = k.block
    steps = family("step", k, r=k.n_blocks * (k.steps_per_block - 1), q=b, c=k.canvas - b)
    return [block_refresh(k, kv_write=k.canvas - b), steps]
