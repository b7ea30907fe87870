"""Draft and verify (TiDAR, arXiv 2511.08923; DFlash, arXiv 2602.06036; APD, NeurIPS 2025).

Each iteration drafts k = `block` tokens in parallel and verifies them causally against the
exact cache; `tpf` is the mean accepted length per verify pass, the bonus token included (vLLM's
and SGLang's mean acceptance length, EAGLE's and DFlash's tau), carried as S = Lg / tpf. As in
`ar`, the prefill's logits sample the first answer token, so the verify passes produce the other
Lg - 1: (Lg - 1) / tpf iterations after a prompt (without one, Lg / tpf).

- self-speculative (one model, TiDAR): one pass per iteration over the k drafts being verified
  plus k mask slots drafting the next iteration, q = 2k, causal over c = Lp + accepted tokens;
- with a drafter (`--drafter MODEL`, DFlash, APD): the drafter's bidirectional pass over the k
  slots, then the verifier's causal pass over the k drafts plus one bonus position, q = k + 1.

The accepted tokens' K/V stay in the cache (tpf per iteration). The I iterations are spread over
n = ceil(I) shapes whose context grows by tpf I / n, each run I/n times, so that the iterations
counted are exactly I even for a fractional I.
"""

import numpy as np

from .ar import prompt_prefill
from .base import Knobs, family, scheme, whole_sequence


def _checks(k: Knobs):
    accepted = k.gen / k.steps
    return [(accepted <= k.block + 1 + 1e-9,
             "{tpf:g} accepted tokens per iteration is more than the {block:g} drafts plus one can give"),
            (accepted >= 1 - 1e-9, "{tpf:g} accepted tokens per iteration is fewer than the one every iteration "
             "accepts (the verifier's own token): more steps than tokens")]


@scheme("draft-verify", summary="draft k tokens, verify them causally (TiDAR self-speculative, or a drafter "
        "model with --drafter); --tpf = mean accepted tokens per iteration",
        knobs=("steps", "block"), cached_tokens=whole_sequence, checks=_checks, default_block=16, stops="token",
        takes_drafter=True, block_divides_gen=False)
def draft_verify(k: Knobs):
    kd, sep = k.block, k.drafter
    tpf = k.gen / k.steps
    # the prefill samples the first token; the verify passes produce the rest (all, without a prompt)
    produced = k.gen - np.where(k.prompt > 0, 1.0, 0.0)
    iterations = produced / tpf
    shapes = np.ceil(iterations - 1e-9)
    each = iterations / np.maximum(shapes, 1.0)
    context = dict(n=shapes, c=k.prompt, dc=produced / np.maximum(shapes, 1.0), kv_write=tpf)
    drafter_prefill = family("draft-prefill", k, n=np.where(sep & (k.prompt > 0), 1.0, 0.0), q=k.prompt,
                             kv_write=k.prompt, logits=0.0, model="drafter")
    draft = family("draft", k, r=np.where(sep, each, 0.0), q=kd, model="drafter", **context)
    verify = family("verify", k, r=each, q=np.where(sep, kd + 1, 2 * kd), causal=True, **context)
    return [prompt_prefill(k), drafter_prefill, draft, verify]
