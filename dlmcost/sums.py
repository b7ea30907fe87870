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
    """sum_{j<n} max(d0 + d1 j, 0), exactly: the affine term changes sign at most once."""
    d0, d1, n = np.broadcast_arrays(np.asarray(d0, float), np.asarray(d1, float), np.asarray(n, float))
    with np.errstate(divide="ignore", invalid="ignore"):
        root = np.where(d1 != 0, -d0 / np.where(d1 != 0, d1, 1.0), 0.0)
    # rising: positive from m = ceil(root) to n-1; falling: positive for j = 0..M-1, M = floor(root)+1
    m = np.clip(np.ceil(root), 0, n)
    rising = (n - m) * d0 + d1 * (m + n - 1) * (n - m) / 2
    M = np.clip(np.floor(root) + 1, 0, n)
    falling = M * d0 + d1 * M * (M - 1) / 2
    flat = n * np.maximum(d0, 0.0)
    return np.where(d1 > 0, rising, np.where(d1 < 0, falling, flat))


def sum_max_affine(a0, a1, b0, b1, n):
    """sum_{j<n} max(a(j), b(j)) for affine a, b given at j=0 and j=1."""
    return sum_affine(b0, b1, n) + sum_positive_part(a0 - b0, (a1 - a0) - (b1 - b0), n)
