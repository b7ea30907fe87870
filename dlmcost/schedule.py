"""Decoding schemes -> the forward passes they run.

Every scheme is written as the same four pass *families*. A family is `n` distinct pass shapes,
shape j = 0..n-1 having

    q(j) = q0 + dq*j     query tokens per sequence
    c(j) = c0 + dc*j     cached tokens whose K/V are read
    kv_write(j), logits(j)  likewise affine in j

and each shape runs `r` times (r may be fractional: an average, e.g. S/nb steps per block).
A family a scheme does not use has n = 0. All fields are numpy arrays over the configurations
being evaluated, so one call builds the schedule of a whole sweep.

With Lp prompt, Lg generation, S steps, b block, nb = Lg/b blocks, s = S/nb steps per block:

  scheme        prefill        refresh (per block)         step                                   store
  ar            q=Lp causal    -                           Lg x  q=1, c=Lp+t (causal)              -
  mdm           -              -                           S  x  q=Lp+Lg, c=0                       -
  prefix-cache  -              nb x q=Lp+Lg, c=0           (s-1) x q=Lg-i*b, c=Lp+i*b  (block i)    -
  dual-cache    -              nb x q=Lp+Lg, c=0           nb(s-1) x q=b, c=Lp+Lg-b                 -
  block         q=Lp causal    -                           s x q=b, c=Lp+i*b  (block i)            nb x q=b (optional)
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

FAMILY_NAMES = ("prefill", "refresh", "step", "store")


@dataclass(frozen=True)
class PassFamily:
    name: str
    n: np.ndarray  # distinct shapes (0: family unused)
    r: np.ndarray  # repeats of each shape
    q0: np.ndarray
    dq: np.ndarray
    c0: np.ndarray
    dc: np.ndarray
    kvw0: np.ndarray
    dkvw: np.ndarray
    logits0: np.ndarray
    dlogits: np.ndarray
    causal: np.ndarray  # bool: causal mask (query i sees c + i keys) instead of bidirectional

    def at(self, j: np.ndarray | float) -> dict[str, np.ndarray]:
        """The shape of pass j of this family."""
        return dict(
            q=self.q0 + self.dq * j,
            c=self.c0 + self.dc * j,
            kv_write=self.kvw0 + self.dkvw * j,
            logits=self.logits0 + self.dlogits * j,
            causal=self.causal,
        )

    def take(self, rows: np.ndarray) -> "PassFamily":
        return replace(self, **{f.name: getattr(self, f.name)[rows] for f in fields(self) if f.name != "name"})

    @property
    def count(self) -> np.ndarray:
        """Forward passes this family contributes to NFE."""
        return self.n * self.r


def build_schedule(scheme: np.ndarray, prompt, gen, steps, block, store_pass, logits_committed) -> list[PassFamily]:
    """The four pass families for arrays of configurations (see the module docstring)."""
    scheme = np.asarray(scheme)
    lp, lg, S, b = (np.asarray(x, dtype=float) for x in (prompt, gen, steps, block))
    store = np.asarray(store_pass, dtype=bool) & (scheme == "block")
    committed = np.asarray(logits_committed, dtype=bool)
    zero, one = np.zeros_like(lg), np.ones_like(lg)
    nb = lg / b
    s = S / nb  # steps per block (may be fractional: an average)
    is_ar, is_mdm = scheme == "ar", scheme == "mdm"
    is_prefix, is_dual, is_block = scheme == "prefix-cache", scheme == "dual-cache", scheme == "block"
    refreshing = is_prefix | is_dual

    def family(name, n, r, q0, dq, c0, dc, kvw0, dkvw, logits0, dlogits, causal):
        n = np.where(r > 0, n, 0.0)
        return PassFamily(name, n, r, q0, dq, c0, dc, kvw0, dkvw, logits0, dlogits, causal)

    # prefill: AR and block diffusion build the prompt's K/V cache once (logits of the last position).
    has_prefill = (is_ar | is_block) & (lp > 0)
    prefill = family("prefill", np.where(has_prefill, 1.0, 0.0), one, lp, zero, zero, zero, lp, zero,
                     one, zero, np.ones_like(lg, dtype=bool))

    # refresh: Fast-dLLM's full forward at the start of each block; it re-writes the cache
    # (prefix cache: the prompt and finished blocks; dual cache: everything but the current block).
    full = lp + lg
    refresh_kvw0 = np.where(is_prefix, lp, lp + lg - b)
    refresh_dkvw = np.where(is_prefix, b, 0.0)
    block_logits = np.minimum(b, full)
    refresh = family("refresh", np.where(refreshing, nb, 0.0), np.where(refreshing, 1.0, 0.0),
                     full, zero, zero, zero, refresh_kvw0, refresh_dkvw,
                     np.where(committed, block_logits, full), zero, np.zeros_like(lg, dtype=bool))

    # step: the denoising (or decode) passes.
    step_n = np.select([is_ar, is_mdm, is_prefix, is_dual, is_block], [lg, one, nb, one, nb], 0.0)
    step_r = np.select([is_ar, is_mdm, is_prefix, is_dual, is_block], [one, S, s - 1, nb * (s - 1), s], 0.0)
    step_q0 = np.select([is_ar, is_mdm, is_prefix], [one, full, lg], b)
    step_dq = np.where(is_prefix, -b, 0.0)
    step_c0 = np.select([is_ar, is_mdm, is_dual], [lp, zero, lp + lg - b], lp)
    step_dc = np.select([is_ar, is_prefix | is_block], [one, b], 0.0)
    # K/V written by a step: AR appends its token; block diffusion without a store pass writes
    # the block's K/V on its last step (b/s per step on average); the other schemes write none.
    step_kvw = np.select([is_ar, is_block & ~store], [one, b / np.maximum(s, 1e-12)], 0.0)
    all_logits = np.where(is_ar, one, step_q0)
    commit_logits = np.where(is_ar, one, np.minimum(b, step_q0))
    step_logits0 = np.where(committed, commit_logits, all_logits)
    step_dlogits = np.where(committed | is_ar, 0.0, step_dq)
    step = family("step", step_n, step_r, step_q0, step_dq, step_c0, step_dc, step_kvw, zero,
                  step_logits0, step_dlogits, is_ar)

    # store: SDAR / BD3-LM run the finished block once more, clean, to write its K/V.
    store_fam = family("store", np.where(store, nb, 0.0), np.where(store, 1.0, 0.0), b, zero, lp, b, b, zero,
                       zero, zero, np.zeros_like(lg, dtype=bool))
    return [prefill, refresh, step, store_fam]


def cached_tokens(scheme: np.ndarray, prompt, gen) -> np.ndarray:
    """Tokens per sequence whose K/V the scheme keeps resident (for the memory estimate)."""
    scheme = np.asarray(scheme)
    full = np.asarray(prompt, float) + np.asarray(gen, float)
    return np.where(scheme == "mdm", 0.0, full)
