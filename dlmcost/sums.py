"""Exact sums over a pass family's shapes j = 0..n-1 of affine quantities and of their max().

A family's FLOPs and bytes are affine in j (the cache grows by b per block while q stays fixed,
or q shrinks by b while q + c stays fixed), and so are the compute and memory times of each op;
the time of an op is max(compute, memory), whose sum over j has a closed form because the
difference of two affine terms changes sign at most once. All functions broadcast over arrays.
"""

from __future__ import annotations

import numpy as np


def sum_affine(v0, v1, n):
    """sum_{j<n} (v0 + (v1-v0) j). `n` must broadcast into the shape of v1 - v0 (a count per
    configuration against op x configuration values), not widen it: the result is built in place."""
    out = np.subtract(v1, v0, dtype=float)  # written in place from here: the engine's arrays are op x configuration
    out *= n * (n - 1) / 2
    out += np.multiply(v0, n)
    return out


def sum_positive_part(d0, d1, n):
    """sum_{j<n} max(d0 + d1 j, 0), exactly: the affine term changes sign at most once, so it is
    positive on one run of indices [lo, hi), and the sum is that run's arithmetic series. Most
    terms keep one sign over the whole family (an op memory-bound in every pass, or compute-bound
    in every pass): those are the whole series or nothing, and only the terms that cross zero
    between the first and the last pass need the run's ends."""
    d0, d1, n = np.broadcast_arrays(np.asarray(d0, float), np.asarray(d1, float), np.asarray(n, float))
    last = d0 + d1 * (n - 1)
    first_positive, last_positive = d0 >= 0, last >= 0
    out = np.where(first_positive & last_positive, sum_affine(d0, d0 + d1, n), 0.0)
    crossing = np.flatnonzero((first_positive != last_positive) & (n > 1))
    if crossing.size:
        out.flat[crossing] = _positive_run_sum(d0.flat[crossing], d1.flat[crossing], n.flat[crossing])
    return out


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


def sum_max_affine(a0, a1, b0, b1, n):
    """sum_{j<n} max(a(j), b(j)) for affine a, b given at j=0 and j=1."""
    return sum_affine(b0, b1, n) + sum_positive_part(a0 - b0, (a1 - a0) - (b1 - b0), n)
