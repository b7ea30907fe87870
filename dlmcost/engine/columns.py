"""Per-configuration columns of a grid. A column with one value for every configuration (most of
a sweep's settings) is kept, in a large grid, as a read-only stride-0 view of that value: it
indexes and broadcasts like any array, but storing it and taking rows of it cost nothing. Small
grids (analyze's) copy: a view costs a few microseconds to set up, more than a short copy."""

from __future__ import annotations

import numpy as np

SHARE_FROM = 1024  # configurations from which a constant column is a view rather than a copy


def column(value, n: int, dtype=None) -> np.ndarray:
    """`value` (a scalar or n values) as a column of n configurations."""
    a = np.asarray(value, dtype=dtype)
    if a.ndim == 0:
        return np.broadcast_to(a, (n,)) if n >= SHARE_FROM else np.full(n, a)
    return np.broadcast_to(a, (n,)).copy()


def take(a: np.ndarray, rows) -> np.ndarray:
    """a[rows] along the last axis (rows: indices, a mask or a slice); a constant column stays a
    stride-0 view. Indices go through np.take, several times faster than fancy indexing."""
    if isinstance(rows, slice):
        return a[..., rows]
    rows = np.asarray(rows)
    if rows.dtype == bool:
        if rows.shape != a.shape[-1:]:  # a[mask] refuses a mask of another length; flatnonzero would not
            raise IndexError(f"a mask of {rows.size} rows for {a.shape[-1]} configurations")
        rows = np.flatnonzero(rows)
    elif rows.size == 0:  # an empty list is float to numpy, which np.take refuses (a[[]] takes nothing)
        rows = rows.astype(np.intp)
    if a.ndim == 1 and a.size and a.strides[0] == 0 and rows.size >= SHARE_FROM:
        return np.broadcast_to(a[0], (rows.size,))
    return np.take(a, rows, axis=-1)
