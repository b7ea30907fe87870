"""Exact sums over a pass family's shapes j = 0..n-1 of affine quantities and of their max().

A family's FLOPs and bytes are affine in j (the cache grows by b per block while q stays fixed,
or q shrinks by b while q + c stays fixed), and so are the compute and memory times of each op;
the time of an op is max(compute, memory), whose sum over j has a closed form because the
difference of two affine terms changes sign at most once. All functions broadcast over arrays.

The engine gives each quantity at the family's first (j = 0) and last (j = n - 1) pass: the sum
of an affine term is then n (first + last) / 2, and a max() of two affine terms is the larger one
throughout unless their order differs between the ends (`sum_max_ends`).
"""

from __future__ import annotations

import numpy as np


def _positive_run_sum(d0, d1, n):
    """sum_{j<n} max(d0 + d1 j, 0) for terms that change sign between j = 0 and j = n - 1 (so
    d1 != 0): the arithmetic series over the run [lo, hi) where the term is positive."""
    root = -d0 / d1  # where the term crosses zero, within [0, n - 1]
    rising = d1 > 0
    # (clipped to [0, n] against rounding when the crossing is at an end)
    lo = np.where(rising, np.minimum(np.ceil(root), n), 0.0)  # rising: from ceil(root) on
    hi = np.where(rising, n, np.maximum(np.floor(root) + 1, 0.0))  # falling: up to floor(root)
    count = hi - lo
    return count * d0 + d1 * (lo + hi - 1) * count / 2


def sum_max_ends(a0, a_last, b0, b_last, n):
    """sum_{j<n} max(a(j), b(j)) for a, b affine in j, given at j = 0 and j = n - 1. Where the same
    term is the larger at both ends it is the larger throughout, and the sum is n (first + last)
    / 2 of the max; only where the order flips (a compute-bound op turning memory-bound within
    the family, or back) is the positive run of a - b summed on its own. Written for the engine's
    op x configuration arrays: a handful of passes over them, and gathers of the few that flip."""
    n = np.asarray(n, float)
    shape = np.broadcast_shapes(*(np.shape(x) for x in (a0, a_last, b0, b_last, n)))
    out = np.maximum(a0, b0, out=np.empty(shape or (1,)))
    out += np.maximum(a_last, b_last)
    out *= n / 2
    # the order flips only where n > 1 (one pass: the ends are the same pass)
    flips = np.nonzero(np.broadcast_to(np.greater(a0, b0) != np.greater(a_last, b_last), out.shape))
    if flips[0].size:
        a0, a_last, b0, b_last, n = (np.broadcast_to(x, out.shape)[flips] for x in (a0, a_last, b0, b_last, n))
        d0, d_last = a0 - b0, a_last - b_last
        out[flips] = n * (b0 + b_last) / 2 + _positive_run_sum(d0, (d_last - d0) / (n - 1), n)
    return out if shape else out[0]
