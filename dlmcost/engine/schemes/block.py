"""Block diffusion with an exact K/V cache (BD3-LM, SDAR, Fast-dLLM v2, LLaDA2, Set Block
Decoding): causal over finished blocks, bidirectional inside the current block."""

import numpy as np

from .ar import prompt_prefill
from .base import Knobs, block_checks, family, scheme, whole_sequence


@scheme("block", summary="block diffusion: a prefill, then s passes of b tokens per block over the exact cache",
        knobs=("steps", "block", "store_pass"), cached_tokens=whole_sequence, checks=block_checks,
        needs_block=True)
def block(k: Knobs):
    b, s = k.block, k.steps_per_block
    # Without a store pass the block's K/V is written by its last step: b/s tokens per step on
    # average. SDAR and BD3-LM instead run the finished block once more, clean, to write it.
    kv_write = np.where(k.store_pass, 0.0, b / np.maximum(s, 1e-12))
    steps = family("step", k, n=k.n_blocks, r=s, q=b, c=k.prompt, dc=b, kv_write=kv_write)
    store = family("store", k, n=k.n_blocks, r=np.where(k.store_pass, 1.0, 0.0), q=b, c=k.prompt, dc=b,
                   kv_write=b, logits=0.0)
    return [prompt_prefill(k), steps, store]
