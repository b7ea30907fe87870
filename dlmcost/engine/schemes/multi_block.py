"""Several blocks in flight (D2F, Wang et al. 2025, arXiv 2508.09192, zhijie-group/Discrete-Diffusion-
Forcing; d3LLM, hao-ai-lab/d3LLM; SGLang's multi-block dLLM algorithm).

A block starts before its predecessor has finished, so each pass covers the A blocks in flight
over the exact cache of the finished blocks before them. A finished block's K/V enters the cache
d passes after it completes, so it is recomputed in the meantime; the whole canvas can be
refreshed every R passes (R = 0: never; R = 1: every pass is the full canvas, no cache at all,
SGLang's FullAttnMultiBlock).

With S passes, nb = Lg/b blocks, F = floor(S/R) full refreshes and s' = (S - F)/nb cached passes
per block, the window holds W = A + d/s' blocks (blocks complete one per s' passes, so d/s' of
them are waiting for the cache). Window position i (the first block not yet cached) runs s'
passes of q = b*min(W, nb - i) tokens over c = Lp + i*b cached ones: a `step` family while the
window is full and a `tail` family while it drains (q + c fixed, so both sum in closed form).
"""

import numpy as np

from .base import Knobs, block_checks, family, scheme


def _checks(k: Knobs):
    return block_checks(k) + [
        (k.active_blocks >= 1, "--active-blocks must be at least 1, got {active_blocks:g}"),
        (k.cache_delay >= 0, "--cache-delay must be >= 0, got {cache_delay:g}"),
        (k.refresh_every >= 0, "--refresh-every must be >= 0 (0: never), got {refresh_every:g}"),
    ]


def _refreshes(k: Knobs) -> np.ndarray:
    """Full-canvas passes among the S: every R-th (all of them when R = 1, none when R = 0)."""
    R = k.refresh_every
    return np.where(R > 0, np.floor(k.steps / np.maximum(R, 1.0)), 0.0)


@scheme("multi-block", summary="blocks in flight (D2F, d3LLM, SGLang multi-block): a window of A blocks over "
        "the exact cache, K/V cached d passes late, full refresh every R passes",
        knobs=("steps", "block", "active_blocks", "cache_delay", "refresh_every"),
        cached_tokens=lambda k: np.where(k.refresh_every == 1, 0.0, k.canvas), checks=_checks, default_block=32)
def multi_block(k: Knobs):
    b, nb = k.block, k.n_blocks
    full = _refreshes(k)
    cached = k.refresh_every != 1
    s = (k.steps - full) / nb  # cached passes per window position
    window = np.minimum(k.active_blocks + k.cache_delay / np.maximum(s, 1e-12), nb)
    m = np.clip(np.floor(nb - window) + 1, 0, nb)  # positions i = 0..m-1 where the window is full
    kv_write = b / np.maximum(s, 1e-12)  # one block's K/V enters the cache per position
    # A full refresh recomputes the whole canvas; on average half the generation is cached by then.
    refresh = family("refresh", k, r=full, q=k.canvas, kv_write=np.where(cached, k.prompt + (nb - 1) * b / 2, 0.0))
    prefill = family("prefill", k, n=np.where(cached & (k.prompt > 0), 1.0, 0.0), q=k.prompt, kv_write=k.prompt,
                     logits=0.0)
    step = family("step", k, n=m, r=np.where(cached, s, 0.0), q=window * b, c=k.prompt, dc=b, kv_write=kv_write)
    tail = family("tail", k, n=nb - m, r=np.where(cached, s, 0.0), q=b * (nb - m), dq=-b, c=k.prompt + m * b, dc=b,
                  kv_write=kv_write)
    return [prefill, step, tail, refresh]  # in the order their first passes run (pass R is the first refresh)
