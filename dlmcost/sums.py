"""Exact sums over a pass family's shapes j = 0..n-1 of affine quantities and of their max().

A family's FLOPs and bytes are affine in j (the cache grows by b per block while q stays fixed,
or q shrinks by b while q + c stays fixed), and so are the compute and memory times of each op;
the time of an op is max(compute, memory), whose sum over j has a closed form because the
difference of two affine terms changes sign at most once. All functions broadcast over arrays.
"""

from __future__ import annotations

import numpy as np


def sum_affine(v0, v1, n):
    """sum_{j<n} (v0 + (v1-v0) j)."""
    return n * v0 + (v1 - v0) * (n * (n - 1) / 2)


def sum_positive_part(d0, d1, n):
    """sum_{j<n} max(d0 + d1 j, 0), exactly: the affine term changes sign at most once, so it is
    positive on one run of indices [lo, hi), and the sum is that run's arithmetic series."""
    with np.errstate(divide="ignore", invalid="ignore"):
        root = -d0 / d1  # where the term crosses zero (inf or nan when d1 = 0: not used then)
        # (np.minimum/np.maximum: np.clip is several times slower on large arrays)
        lo = np.where(d1 > 0, np.minimum(np.maximum(np.ceil(root), 0), n), 0.0)  # rising: from ceil(root)
        hi = np.where(d1 < 0, np.minimum(np.maximum(np.floor(root) + 1, 0), n),  # falling: up to floor(root)
                      np.where((d1 == 0) & (d0 <= 0), 0.0, n))
    count = np.maximum(hi - lo, 0.0)
    return count * d0 + d1 * (lo + hi - 1) * count / 2


def sum_max_affine(a0, a1, b0, b1, n):
    """sum_{j<n} max(a(j), b(j)) for affine a, b given at j=0 and j=1."""
    return sum_affine(b0, b1, n) + sum_positive_part(a0 - b0, (a1 - a0) - (b1 - b0), n)
