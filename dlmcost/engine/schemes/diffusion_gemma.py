"""DiffusionGemma's decoding loop (Google, 2026: transformers' `diffusion_gemma` reference;
SGLang, vLLM and MAX follow it): block diffusion over 256-token canvases with an exact cache.

- prefill: the causal encoder writes the prompt's K/V; no logits;
- per canvas i (b tokens, nb = Lg/b canvases, s = S/nb denoising steps each): s bidirectional
  passes of the canvas over the cache (c = Lp + i*b) with logits for all b positions (fp32,
  soft-capped); every step but the first also self-conditions: softmax over the vocabulary times
  the embedding table, fed back (cost.self_condition);
- store: a finished canvas runs once more through the causal encoder (q = b) to write its K/V:
  every canvas but the last (transformers, SGLang, MAX; the default), every canvas with
  --store-pass (vLLM).

The step count is an input: generation_config allows up to 48 per canvas, stopping when the
argmax is stable and confident; vLLM benchmarks a fixed 16. Generation stops after the canvas
that holds the end-of-sequence token.
"""

import numpy as np

from .ar import prompt_prefill
from .base import Knobs, block_checks, family, scheme


def _cached(k: Knobs) -> np.ndarray:
    """The prompt and the stored canvases (all but the last unless every canvas is stored)."""
    return k.prompt + np.where(k.store_pass, k.gen, k.gen - k.block)


@scheme("diffgemma", summary="DiffusionGemma: an encoder prefill, then per canvas of b tokens s bidirectional "
        "steps over the cache (self-conditioned after the first) and a causal store pass",
        knobs=("steps", "block", "store_pass"), cached_tokens=_cached, checks=block_checks)
def diffusion_gemma(k: Knobs):
    b, s, nb = k.block, k.steps_per_block, k.n_blocks
    canvas = dict(n=nb, q=b, c=k.prompt, dc=b)
    first = family("step", k, r=1.0, **canvas)
    later = family("step-sc", k, r=s - 1, self_condition=True, **canvas)
    stores = np.where(k.store_pass, nb, nb - 1)
    store = family("store", k, n=stores, r=np.where(stores > 0, 1.0, 0.0), q=b, c=k.prompt, dc=b, kv_write=b,
                   logits=0.0, causal=True)
    return [prompt_prefill(k, logits=0.0), first, later, store]
