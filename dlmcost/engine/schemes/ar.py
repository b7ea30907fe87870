"""Autoregressive decode with a K/V cache: the baseline every diffusion number is compared with."""

import numpy as np

from .base import Knobs, family, scheme, whole_sequence

PREFILL = "prefill"  # the family of a prompt's prefill pass (a stack may dispatch it on its own)


def prompt_prefill(k: Knobs, *, logits=1.0, causal=True):
    """One causal pass over the prompt that writes its K/V (logits of the last position only);
    absent when there is no prompt."""
    return family(PREFILL, k, n=np.where(k.prompt > 0, 1.0, 0.0), q=k.prompt, kv_write=k.prompt,
                  logits=logits, causal=causal)


@scheme("ar", summary="autoregressive decode: a causal prefill (the first token), then one cached pass per "
        "further token",
        knobs=(), cached_tokens=whole_sequence, stops="token", autoregressive=True)
def ar(k: Knobs):
    # The prefill's logits sample the first answer token; decode step t then feeds token t over
    # the Lp + t tokens before it (appending its own K/V) and samples token t + 1. The last token
    # is sampled, never fed back: A - 1 steps after a prompt. Without one, the first token needs
    # a pass of its own (over nothing cached): A steps.
    steps = k.gen - np.where(k.prompt > 0, 1.0, 0.0)
    return [prompt_prefill(k),
            family("step", k, n=steps, q=1.0, c=k.prompt, dc=1.0, kv_write=1.0, logits=1.0, causal=True)]
