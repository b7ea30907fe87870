"""Per-configuration columns of a grid. A column with one value for every configuration (most of
a sweep's settings) is kept as a read-only stride-0 view of that value: it indexes and broadcasts
like any array, but storing it and taking rows of it cost nothing."""

from __future__ import annotations

import numpy as np


def column(value, n: int, dtype=None) -> np.ndarray:
    """`value` (a scalar or n values) as a column of n configurations."""
    a = np.asarray(value, dtype=dtype)
    if a.ndim == 0:
        return np.broadcast_to(a, (n,))
    return np.broadcast_to(a, (n,)).copy()


def take(a: np.ndarray, rows) -> np.ndarray:
    """a[rows] (rows: indices or a slice); a constant column stays a stride-0 view."""
    if a.ndim == 1 and a.size and a.strides[0] == 0 and not isinstance(rows, slice):
        rows = np.asarray(rows)
        return np.broadcast_to(a[0], (np.count_nonzero(rows) if rows.dtype == bool else rows.size,))
    return a[rows]
