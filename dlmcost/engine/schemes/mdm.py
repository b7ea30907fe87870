"""Vanilla masked diffusion: every step is a full bidirectional pass over prompt + generation."""

import numpy as np

from .base import Knobs, block_checks, family, scheme


@scheme("mdm", summary="vanilla masked diffusion (LLaDA generate, Dream diffusion_generate): S full passes",
        knobs=("steps",), logit_knobs=("block",), cached_tokens=lambda k: np.zeros_like(k.gen),
        checks=block_checks, stops="never")
def mdm(k: Knobs):
    # Semi-AR blocks only limit which positions may commit; every pass still runs the whole canvas.
    logits = np.where(k.logits_committed, k.block, k.canvas)
    return [family("step", k, r=k.steps, q=k.canvas, logits=logits)]
